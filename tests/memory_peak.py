"""The memory a run's training steps and evaluation really take, to hold the trainer's estimate to.

Run as a script in a fresh process (`python tests/memory_peak.py SETTINGS_JSON`), since the peak
resident memory (VmHWM of /proc/self/status) is a process's own high-water mark. Not ru_maxrss:
Linux carries that across exec from the process that started this one (a test's pytest, 200 MB).
It warms torch up on a tiny model
first (its thread pools and kernels are the runtime's, not the config's), then takes the resident
memory as the baseline and runs one phase: "train", two training steps (AdamW's moments exist from
the first), or "eval", two full evaluation batches beside the weights, their gradients and AdamW's
moments, as the trainer holds them. It prints the peak above the baseline and the estimate of the
same (the model, the data and that phase), as JSON.

One phase a process: the estimate's terms are each held to their own peak. In one process the
allocator keeps some memory of the small tensors freed between the phases (for the tiny config
about 15 MB more than either phase; for big tensors, which go back to the system, none).
"""

from __future__ import annotations

import json
import sys

import torch

from anatomy.config import TrainConfig, preset
from anatomy.data.batches import eval_starts, windows_at
from anatomy.model import MiniLM
from anatomy.training import trainer
from anatomy.training.compiling import forward_backward

TOKENS = 200_000  # each split's: the estimate counts them at 8 bytes, as on the device


def status_bytes(field: str) -> int:
    """A memory field of /proc/self/status (VmRSS: resident now, VmHWM: its peak), in bytes."""
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024  # counted in kB
    raise LookupError(field)


def run_phase(phase: str, model: MiniLM, data: torch.Tensor, train_cfg: TrainConfig) -> None:
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    ctx_len = model.cfg.ctx_len
    if phase == "eval":  # the gradients and AdamW's moments are held while a run evaluates
        for parameter in model.parameters():
            parameter.grad = torch.zeros_like(parameter)
        optimizer.step()
        starts = eval_starts(len(data), ctx_len)[: 2 * train_cfg.eval_batch_size]
        trainer.evaluate(model, data, starts, train_cfg.eval_batch_size, train_cfg.precision)
        return
    for _step in range(2):
        starts = torch.randint(0, len(data) - ctx_len - 1, (train_cfg.batch_size,)).numpy()
        x, y = windows_at(data, starts, ctx_len)
        forward_backward(model, optimizer, x, y, train_cfg.precision)
        optimizer.step()
        del x, y


def main(settings: dict) -> dict:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    phase, train_cfg = settings.pop("phase"), TrainConfig(**settings.pop("train"))
    model_cfg = preset(settings.pop("preset"), **settings)
    warm, warm_cfg = MiniLM(preset("debug", vocab_size=10)), TrainConfig(batch_size=2, eval_batch_size=2)
    for warm_phase in ("train", "eval"):
        run_phase(warm_phase, warm, torch.randint(0, 10, (200,)), warm_cfg)
    del warm
    baseline = status_bytes("VmRSS")
    run_phase(phase, MiniLM(model_cfg), torch.randint(0, model_cfg.vocab_size, (2 * TOKENS,)), train_cfg)
    need = trainer.memory_need(model_cfg, train_cfg, TOKENS, TOKENS)
    return {"measured": status_bytes("VmHWM") - baseline, "estimate": need.model + need.data + getattr(need, phase)}


if __name__ == "__main__":
    print(json.dumps(main(json.loads(sys.argv[1]))))
