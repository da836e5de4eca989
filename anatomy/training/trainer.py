"""The trainer: one model (one config, one seed, one corpus) trained into a run folder.

`train()` reads top to bottom in three parts: open or resume the run (`open_or_resume`), the
loop of optimizer steps with an evaluation every eval_every steps (`training_loop`), and the
summary that marks the run finished (`finish`). The command line is anatomy/training/train.py; the
depth exam trains its cells through here too.

What makes runs comparable: the batches depend only on (seed, step) (anatomy/data/batches.py), and
the evaluation reads fixed windows over the whole validation split.

What makes a run safe: every eval writes `last.pt` atomically with model, optimizer, RNG and
the metrics so far; a run started again resumes from there and ends with the same numbers
(the folder and its rules: anatomy/files/run_folder.py). Every run also logs each block's gradient norm
(anatomy/training/grad_norms.py) into grad_norms.jsonl, kept the same way as metrics.jsonl, and at
the same steps each expert's share of the tokens (runs with experts) and, if asked for, the largest
attention logit of each layer (anatomy/training/layer_logs.py).
A loss that turns NaN/inf ends the run as a result (`diverged: true`), not as a crash.
A step too big for the machine's memory is refused before anything is written (`check_resources`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

from anatomy.files.atomic import check_folder_target
from anatomy.data.batches import batch_starts, eval_starts, windows_at
from anatomy.training.compiling import compiled_or_eager, forward_backward, run_with_fallback
from anatomy.config import ADAM_BETA1, ModelConfig, TrainConfig, preset
from anatomy.config_fields import parse_value
from anatomy.training.devices import machine_description, pick_device
from anatomy.errors import AnatomyError
from anatomy.training.grad_norms import block_grad_norms, norms_row, should_log
from anatomy.training.layer_logs import max_attention_logits, max_logits_row, shares_row
from anatomy.files.locks import lifeline_lost
from anatomy.model import MiniLM
from anatomy.precision import allow_tf32, autocast, resolve_precision
from anatomy.files.run_folder import (
    RESUME_KEYS,
    RunFolder,
    append_line,
    check_checkpoint_belongs,
    load_checkpoint,
    naming_a_full_disk,
    readable_bytes,
    run_settings,
    save_checkpoint,
    settle_folder,
    write_lines,
)
from anatomy.data.tokenizer import check_windows, corpus_digest, corpus_name, load_tokenized, read_split

# ---------------------------------------------------------------------------------------------
# Resolving a run's settings from a preset and `key=value` overrides
# ---------------------------------------------------------------------------------------------

MODEL_FIELDS = {f.name for f in dataclasses.fields(ModelConfig)}
TRAIN_FIELDS = {f.name for f in dataclasses.fields(TrainConfig)}


def split_overrides(pairs: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`key=value` texts into (model overrides, train overrides); `model.`/`train.` prefixes allowed."""
    model, train = {}, {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or not key:
            raise AnatomyError(f"override {pair!r} is not of the form key=value")
        section, _, name = key.rpartition(".")
        if section not in ("", "model", "train"):
            raise AnatomyError(f"override {pair!r}: prefix must be 'model.' or 'train.', not {section + '.'!r}")
        if name in MODEL_FIELDS and section != "train":
            model[name] = parse_value(ModelConfig, name, raw)
        elif name in TRAIN_FIELDS and section != "model":
            train[name] = parse_value(TrainConfig, name, raw)
        else:
            raise AnatomyError(
                f"override {pair!r}: unknown key {name!r}; model keys: {', '.join(sorted(MODEL_FIELDS))}; "
                f"train keys: {', '.join(sorted(TRAIN_FIELDS))}"
            )
    return model, train


def resolve_model_config(preset_name: str, overrides: dict[str, Any], vocab_size: int) -> ModelConfig:
    """The preset (fused kernels, ModelConfig's default, unless `impl=manual` is asked), the data's
    vocabulary, and the overrides."""
    if "vocab_size" in overrides and overrides["vocab_size"] != vocab_size:
        raise AnatomyError(f"vocab_size={overrides['vocab_size']} does not match the data's vocabulary of {vocab_size}")
    return preset(preset_name, **{**overrides, "vocab_size": vocab_size})


# ---------------------------------------------------------------------------------------------
# What a run asks of the machine: checked before anything is written
# ---------------------------------------------------------------------------------------------

# What a run holds at its peak, per token of a batch, in float32 numbers (4 bytes) unless said.
# Measured, not only counted: the peak resident memory of two training steps, and of an evaluation
# pass, each in a process of its own on a CPU (tests/memory_peak.py), over d_model 64-256,
# n_layer 2-8, ctx_len 64-256, vocabularies of 100-40,000, both presets, both attention kernels
# and both precisions. The estimate came out at 0.97 to 1.15 times the measured peak: for a tiny
# config (d_model 64, 100 characters) 1.1 (train) and 1.15 (eval), for a mid one (d_model 128,
# 4 layers, 20,000 characters) 1.04 (train), 0.98 (eval) and 1.00 (eval in bf16). The test holds
# it to 0.85-1.3 (tests/test_train.py::test_the_memory_estimate_is_near_the_measured_peak).
#
# A training step: the logits, their log-softmax, its gradient and the logits' gradient (4 V);
# the embeddings, the last norm and the head's input with their gradients (12 d); and per block,
# what autograd saves for backward with the gradients that flow through it (GELU 18 d, SwiGLU's
# three projections 28 d), and the manual attention's T x T scores (4 per key: the fused kernel
# keeps none).
TRAIN_PER_LOGIT = 4
TRAIN_OUTSIDE_BLOCKS = 12  # x d_model
# x d_model; moe: SwiGLU's 28 for each expert a token passes through (counted from SwiGLU, not measured)
TRAIN_PER_BLOCK = {"gelu": 18, "swiglu": 28, "moe": 28}
MANUAL_SCORES_TRAIN = 4  # x n_head x ctx_len, per block
# An evaluation batch (no gradients: one block's tensors at a time): the logits and their
# log-softmax, in bytes per logit (bf16: the logits in bf16, their float32 copy that the loss
# takes, and its log-softmax); 20 d of activations; the manual attention's scores (3 per key)
EVAL_BYTES_PER_LOGIT = {"fp32": 8, "bf16": 10}
EVAL_ACTIVATIONS = 20  # x d_model
MANUAL_SCORES_EVAL = 3  # x n_head x ctx_len
UNKNOWN_MEMORY_WARNING = 4 * 2**30  # bytes: where the available memory is unknown, warn above this


def parameter_count(model_cfg: ModelConfig) -> int:
    """The model's parameters, without allocating them (the meta device), and without building
    n_layer blocks: the model with one block, plus one block for each of the others (they are
    all the same), so that an absurd n_layer is counted, and refused, at once."""
    with torch.device("meta"):
        one_block = MiniLM(model_cfg.replace(n_layer=1))
    block = sum(p.numel() for p in one_block.blocks[0].parameters())
    return one_block.num_params() + (model_cfg.n_layer - 1) * block


@dataclasses.dataclass(frozen=True)
class MemoryNeed:
    """The bytes a run needs, by what needs them; at the peak, the model and the data are held
    with either a training step or an evaluation batch (they never overlap)."""

    model: int  # weights, their gradients and AdamW's two moments: 4 x 4 bytes a parameter
    data: int  # the corpus's token ids on the device: 8 bytes each
    train: int  # one training step
    eval: int  # one evaluation batch

    @property
    def total(self) -> int:
        return self.model + self.data + max(self.train, self.eval)

    def setting_to_lower(self, free: int) -> str:
        """What to change to fit in `free` bytes: the model or the data where they alone do not
        fit, else the batch (training's or evaluation's) that weighs most."""
        held = ("model", "data") if self.model + self.data > free else ("train", "eval")
        biggest = max(held, key=lambda name: getattr(self, name))
        return {
            "model": "d_model or n_layer (the model's weights and AdamW's state alone are too big)",
            "data": "the corpus's size (its tokens alone are too big)",
            "train": "batch_size (or ctx_len)",
            "eval": "eval_batch_size (or ctx_len)",
        }[biggest]


def eval_batch(model_cfg: ModelConfig, train_cfg: TrainConfig, train_tokens: int, val_tokens: int) -> int:
    """The windows of the largest evaluation batch: eval_batch_size, or fewer where the splits
    hold fewer windows (`eval_starts`: the val split whole, the train split up to its cap);
    eval_batch_size where the splits are not known (0)."""
    T = model_cfg.ctx_len
    windows = max(
        min(len(range(0, train_tokens - T, T)), train_cfg.max_train_eval_windows), len(range(0, val_tokens - T, T))
    )
    return min(train_cfg.eval_batch_size, windows) if windows else train_cfg.eval_batch_size


def memory_need(
    model_cfg: ModelConfig, train_cfg: TrainConfig, train_tokens: int = 0, val_tokens: int = 0
) -> MemoryNeed:
    """An estimate, in bytes, of the memory a run needs (measured against: see TRAIN_PER_LOGIT):

        model  16 P                                                weights, gradients, AdamW
        data   8 N                                                 the token ids
        train  4 B T (4 V + 12 d + L (k d + 4 H T))                logits, activations, scores
        eval   B_e T (e V + 4 (20 d + 3 H T))                      the same, without gradients

    P parameters, N the corpus's tokens, B batch_size, B_e eval_batch_size (`eval_batch`), T ctx_len,
    V vocab_size, d d_model, L n_layer, H n_head, k per block (TRAIN_PER_BLOCK), e bytes per
    logit (EVAL_BYTES_PER_LOGIT; a precision not resolved yet, auto, counts as bf16's, the larger).
    The H T terms only for the manual attention. The logits dominate with a big vocabulary: 144,727
    characters, 64 windows of 128 in evaluation make 9.5 GB. The allocator's slack comes on top."""
    cfg, d, T = model_cfg, model_cfg.d_model, model_cfg.ctx_len
    manual = cfg.impl == "manual"
    experts = (cfg.n_experts if manual else cfg.top_k) if cfg.ffn_type == "moe" else 1  # manual runs every expert
    per_block = TRAIN_PER_BLOCK[cfg.ffn_type] * experts * d + (MANUAL_SCORES_TRAIN * cfg.n_head * T if manual else 0)
    train_per_token = TRAIN_PER_LOGIT * cfg.vocab_size + TRAIN_OUTSIDE_BLOCKS * d + cfg.n_layer * per_block
    eval_logit_bytes = EVAL_BYTES_PER_LOGIT.get(train_cfg.precision, EVAL_BYTES_PER_LOGIT["bf16"])
    eval_per_token = eval_logit_bytes * cfg.vocab_size + 4 * (
        EVAL_ACTIVATIONS * d + (MANUAL_SCORES_EVAL * cfg.n_head * T if manual else 0)
    )
    return MemoryNeed(
        model=16 * parameter_count(cfg),
        data=8 * (train_tokens + val_tokens),
        train=4 * train_cfg.batch_size * T * train_per_token,
        eval=eval_batch(cfg, train_cfg, train_tokens, val_tokens) * T * eval_per_token,
    )


def available_memory(device: torch.device) -> int | None:
    """Bytes free for a run on `device`: the GPU's free memory, MemAvailable of /proc/meminfo on a
    CPU (Linux), or None where this cannot be told (mps, other systems)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    if device.type == "cpu":
        try:
            for line in Path("/proc/meminfo").read_text().splitlines():
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # the file counts in kB
        except (OSError, ValueError, IndexError):
            pass
    return None


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr, flush=True)


def check_resources(
    model_cfg: ModelConfig, train_cfg: TrainConfig, device: torch.device, train_tokens: int = 0, val_tokens: int = 0
) -> None:
    """Refuse a run whose step cannot fit in memory; warn about one that will be slow or tight.
    Before anything is written: a refused run leaves no folder (no ghost "running" run)."""
    cores = os.cpu_count()
    if cores and train_cfg.threads > cores:
        warn(
            f"threads={train_cfg.threads} is more than this machine's {cores} CPU cores: threads then wait for "
            "each other and the run is slower, not faster (threads=0 lets torch choose)"
        )
    need, free = memory_need(model_cfg, train_cfg, train_tokens, val_tokens), available_memory(device)
    about = (
        f"this run needs about {readable_bytes(need.total)} (an estimate: the model {readable_bytes(need.model)}, "
        f"a training step {readable_bytes(need.train)} at batch_size={train_cfg.batch_size}, an evaluation "
        f"{readable_bytes(need.eval)} at eval_batch_size={train_cfg.eval_batch_size}; ctx_len={model_cfg.ctx_len}, "
        f"vocabulary {model_cfg.vocab_size:,})"
    )
    if free is None:
        if need.total > UNKNOWN_MEMORY_WARNING:
            warn(f"{about}; how much memory is free on {device} is unknown")
    elif need.total > free:
        raise AnatomyError(
            f"{about}, more than the {readable_bytes(free)} free on {device}: lower {need.setting_to_lower(free)}"
        )
    elif need.total > free / 2:
        warn(f"{about}, more than half the {readable_bytes(free)} free on {device}")


# ---------------------------------------------------------------------------------------------
# The optimizer
# ---------------------------------------------------------------------------------------------


def parameter_groups(model: torch.nn.Module, cfg: TrainConfig) -> list[dict]:
    """AdamW's parameter groups: every parameter decayed alike (one group, torch's default), or,
    with decay_matrices_only, the matrices decayed and the vectors (norms' gains, biases) not."""
    params = list(model.parameters())
    if not cfg.decay_matrices_only:
        return [{"params": params, "weight_decay": cfg.weight_decay}]
    return [
        {"params": [p for p in params if p.dim() >= 2], "weight_decay": cfg.weight_decay},
        {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
    ]


def build_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """AdamW as the settings ask: torch's defaults (beta2 0.999, weight decay on every parameter)
    unless a run asks for LLaMA's recipe (beta2 0.95, decay on the matrices only). The lr is set
    before every step (`train_step`); this one only starts it."""
    return torch.optim.AdamW(
        parameter_groups(model, cfg), lr=cfg.lr, betas=(ADAM_BETA1, cfg.beta2), weight_decay=cfg.weight_decay
    )


# ---------------------------------------------------------------------------------------------
# Evaluation and the learning rate
# ---------------------------------------------------------------------------------------------


@torch.no_grad()
def evaluate(model: MiniLM, data: torch.Tensor, starts: np.ndarray, batch_size: int, precision: str = "fp32") -> float:
    """Mean next-character loss over the given windows (every target counted once), in the
    run's own precision."""
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(starts), batch_size):
        x, y = windows_at(data, starts[i : i + batch_size], model.cfg.ctx_len)
        with autocast(precision, x.device):
            loss = model(x, y)[1]  # the logits go at once: kept, they would sit beside the next batch's
        total += loss.item() * y.numel()
        count += y.numel()
    model.train(was_training)
    return total / count


def learning_rate(cfg: TrainConfig, step: int) -> float:
    """Linear warmup over warmup_steps, then constant (or cosine down to min_lr)."""
    if step < cfg.warmup_steps:
        return cfg.lr * (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return cfg.lr
    progress = (step - cfg.warmup_steps) / max(1, cfg.steps - cfg.warmup_steps)
    return cfg.min_lr + 0.5 * (cfg.lr - cfg.min_lr) * (1 + math.cos(math.pi * progress))


def finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


class Progress:
    """A tqdm bar with loss and ETA on a terminal; plain lines at every eval in a log file."""

    def __init__(self, total: int, initial: int, label: str):
        self.interactive = sys.stderr.isatty()
        self.total, self.label, self.start, self.first = total, label, time.perf_counter(), initial
        self.bar = None
        if self.interactive:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=initial, desc=label, unit="step", dynamic_ncols=True)

    def step(self, loss: float) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.3f}", refresh=False)

    def eval(self, row: dict) -> None:
        text = f"val {row['val_loss']:.4f}" if row["val_loss"] is not None else "val -"
        if self.bar is not None:
            self.bar.set_postfix_str(f"train {row['train_loss']:.3f} {text}")
            return
        done = row["step"] - self.first
        elapsed = time.perf_counter() - self.start
        eta = elapsed / done * (self.total - row["step"]) if done > 0 else float("nan")
        print(
            f"{self.label} step {row['step']}/{self.total} train {row['train_loss']:.4f} {text} "
            f"lr {row['lr']:.2e} | {elapsed:.0f}s elapsed, ETA {eta:.0f}s",
            flush=True,
        )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ---------------------------------------------------------------------------------------------
# A run being trained
# ---------------------------------------------------------------------------------------------


def fresh_state() -> dict:
    """Everything besides weights and optimizer that a resumed run needs to continue exactly."""
    return {
        "step": 0,
        "metrics": [],
        "grad_norms": [],
        "expert_shares": [],
        "max_logits": [],
        "best_val_loss": None,
        "best_step": None,
        "elapsed_s": 0.0,
        "step_times": [],
        "batch_digest": "",
    }


@dataclasses.dataclass
class Training:
    """What the loop works on, and what a checkpoint saves of it."""

    run: RunFolder
    resolved: dict  # the settings as config.json holds them
    model_cfg: ModelConfig
    train_cfg: TrainConfig
    device: torch.device
    vocab: list[str]
    model: MiniLM
    optimizer: torch.optim.Optimizer
    train_data: torch.Tensor
    val_data: torch.Tensor
    train_windows: np.ndarray  # the fixed evaluation windows of each split
    val_windows: np.ndarray
    state: dict = dataclasses.field(default_factory=fresh_state)
    # The module the training steps call: the model itself, or torch.compile's wrapper around it
    # (same parameters; evaluation and checkpoints use the model directly).
    forward: torch.nn.Module | None = None
    clock: float = 0.0  # time.perf_counter() when state["elapsed_s"] was last brought up to date
    checkpoint_step: int | None = None  # the step last.pt holds (None: none saved yet)

    def checkpoint_state(self) -> dict:
        return {
            "model": self.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "rng": torch.get_rng_state(),
            "state": self.state,
            "config": {"model": self.model_cfg.to_dict(), "train": self.train_cfg.to_dict()},
            "settings": run_settings(self.resolved),
            "vocab": self.vocab,
        }

    def metric_row(self, step: int, lr: float, train_loss: float | None, val_loss: float | None) -> dict:
        return {
            "step": step,
            "train_loss": train_loss,
            "val_loss": val_loss,
            "lr": lr,
            "tokens_seen": step * self.train_cfg.batch_size * self.model_cfg.ctx_len,
            "elapsed_s": round(self.state["elapsed_s"] + time.perf_counter() - self.clock, 3),
        }

    def add_metric(self, row: dict) -> None:
        self.state["metrics"].append(row)
        self.run.append_metric(row)

    def log_grad_norms(self, step: int) -> None:
        # the model's own blocks: a compiled step fills the same parameters' .grad
        row = norms_row(step, block_grad_norms(self.model.blocks))
        self.state["grad_norms"].append(row)
        self.run.append_grad_norms(row)
        self.log_expert_shares(step)

    def log_expert_shares(self, step: int) -> None:
        """The shares of the step's own forward: the model keeps them until the next one."""
        shares = self.model.expert_token_shares()  # empty without experts
        if shares:
            row = shares_row(step, shares)
            self.state["expert_shares"].append(row)
            append_line(self.run.expert_shares, row)

    def log_max_logits(self, step: int, x: torch.Tensor) -> None:
        row = max_logits_row(step, max_attention_logits(self.model, x, self.train_cfg.precision))
        self.state["max_logits"].append(row)
        append_line(self.run.max_logits, row)


# ---------------------------------------------------------------------------------------------
# Training: open or resume, the loop, the summary
# ---------------------------------------------------------------------------------------------


def train(
    data_dir: str | Path,
    out_dir: str | Path,
    preset_name: str = "vanilla",
    model_overrides: dict[str, Any] | None = None,
    train_overrides: dict[str, Any] | None = None,
    tags: dict[str, str] | None = None,
    restart_on_change: bool = False,
) -> dict:
    """Train (or resume, or skip a finished) run; returns its summary."""
    check_folder_target(out_dir, "--out")
    # The settings against the corpus's sizes and the machine first: a value no run can take
    # (ctx_len=10000000) is refused before the tokens are read or anything is allocated
    split = read_split(data_dir)
    model_cfg = resolve_model_config(preset_name, model_overrides or {}, split["vocab_size"])
    train_cfg = TrainConfig.from_dict(train_overrides or {}, source="train overrides")
    check_windows(split["train_tokens"], split["val_tokens"], model_cfg.ctx_len, Path(data_dir))
    device = pick_device(train_cfg.device)  # may refuse (no CUDA here): before anything is written
    # config.json records the precision used, not `auto`: the same folder on a machine where auto
    # means the other one is a different run, and is refused rather than resumed
    train_cfg = dataclasses.replace(train_cfg, precision=resolve_precision(train_cfg.precision, device))
    check_resources(model_cfg, train_cfg, device, split["train_tokens"], split["val_tokens"])
    tokenizer, train_ids, val_ids = load_tokenized(data_dir)  # which holds what split.json says

    run = RunFolder(out_dir)
    resolved = {
        "preset": preset_name,
        "model": model_cfg.to_dict(),
        "train": train_cfg.to_dict(),
        "tags": dict(tags or {}),
        "data": {
            "dir": Path(data_dir).as_posix(),
            "corpus": corpus_name(data_dir),  # which text: a name to read, and a digest to compare
            "digest": corpus_digest(tokenizer, train_ids, val_ids),
            "vocab_size": tokenizer.vocab_size,
            "train_tokens": len(train_ids),
            "val_tokens": len(val_ids),
        },
    }
    # each file's writer names a full disk; this names what the rest writes (the folder, its lock)
    with naming_a_full_disk(run.root):
        run.root.mkdir(parents=True, exist_ok=True)
        with run.locked():
            run.remove_leftovers()
            finished = settle_folder(run, resolved, restart_on_change)
            if finished is not None:
                return finished
            run.write_config(resolved)
            training = open_or_resume(run, resolved, (tokenizer, train_ids, val_ids), model_cfg, train_cfg, device)
            diverged_step = training_loop(training)
            return finish(training, diverged_step)


def open_or_resume(
    run: RunFolder, resolved: dict, data: tuple, model_cfg: ModelConfig, train_cfg: TrainConfig, device: torch.device
) -> Training:
    """A fresh model and optimizer, or the ones last.pt saved, with the metrics logs to match.
    Only while holding the folder's lock, once settle_folder has vouched for what it holds."""
    tokenizer, train_ids, val_ids = data
    if train_cfg.threads:
        torch.set_num_threads(train_cfg.threads)
    if train_cfg.precision == "fp32":
        allow_tf32(device)
    torch.manual_seed(train_cfg.seed)  # model initialisation only; batches have their own RNG
    model = MiniLM(model_cfg).to(device)
    training = Training(
        run,
        resolved,
        model_cfg,
        train_cfg,
        device,
        tokenizer.chars,
        model,
        optimizer=build_optimizer(model, train_cfg),
        train_data=torch.as_tensor(train_ids.astype(np.int64)).to(device),
        val_data=torch.as_tensor(val_ids.astype(np.int64)).to(device),
        train_windows=eval_starts(len(train_ids), model_cfg.ctx_len, train_cfg.max_train_eval_windows),
        val_windows=eval_starts(len(val_ids), model_cfg.ctx_len),
    )
    if run.last.is_file():  # resume: model, optimizer, RNG, metrics and data position (= step)
        saved = load_checkpoint(run.last, needs=RESUME_KEYS)
        check_checkpoint_belongs(run.last, saved["config"], resolved, run.config)  # before torch's size mismatch
        model.load_state_dict(saved["model"])
        training.optimizer.load_state_dict(saved["optimizer"])
        torch.set_rng_state(saved["rng"])
        training.state = saved["state"]
        training.checkpoint_step = training.state["step"]
        print(f"{run.root}: resuming at step {training.state['step']}", flush=True)
    run.write_metrics(training.state["metrics"])  # drops rows written after the checkpoint
    # (a checkpoint from before gradient norms were logged has none: the log starts at the resume)
    run.write_grad_norms(training.state.setdefault("grad_norms", []))
    for log, path in (("expert_shares", run.expert_shares), ("max_logits", run.max_logits)):
        rows = training.state.setdefault(log, [])
        if rows or path.exists():  # a run that logs none has no such file
            write_lines(path, rows)
    return training


def training_loop(t: Training) -> int | None:
    """Steps from where the run stands to train_cfg.steps, evaluating and saving every eval_every
    steps. Returns the step whose loss was not a finite number, if one was (the loop stops there).
    Ctrl-C stops it in one line that says where it stopped and where it goes on from."""
    cfg = t.train_cfg
    t.forward = compiled_or_eager(t.model, cfg.compile, t.device, cfg.precision)
    progress = Progress(cfg.steps, t.state["step"], t.run.root.name if t.run.root.name else "run")
    diverged_step = None
    t.clock = time.perf_counter()
    t.model.train()
    step = t.state["step"]
    try:
        while step < cfg.steps:
            lr = learning_rate(cfg, step)
            loss_value, logged = train_step(t, step, lr)
            step += 1
            progress.step(loss_value)
            if lifeline_lost():  # the Snakemake that started this run was killed: no orphans
                raise AnatomyError(
                    f"{t.run.root}: the workflow that started this run has stopped, so this run "
                    f"stops too, at step {step}; it resumes from its last checkpoint when started again"
                )

            if not math.isfinite(loss_value):
                diverged_step = step
                if not logged:  # the step that diverged is always in the log (AdamW leaves .grad as it is)
                    t.log_grad_norms(step)
                t.add_metric({**t.metric_row(step, lr, None, None), "diverged": True})
                break

            if step % cfg.eval_every == 0 or step == cfg.steps:
                row = t.metric_row(
                    step,
                    lr,
                    train_loss=evaluate(t.model, t.train_data, t.train_windows, cfg.eval_batch_size, cfg.precision),
                    val_loss=finite_or_none(
                        evaluate(t.model, t.val_data, t.val_windows, cfg.eval_batch_size, cfg.precision)
                    ),
                )
                t.add_metric(row)
                progress.eval(row)
                save_checkpoints(t, step, row)
    except KeyboardInterrupt:  # `step` steps are done; the one under way is not
        raise KeyboardInterrupt(stopped_message(t, step)) from None
    finally:
        progress.close()
    t.state["step"] = step
    return diverged_step


def stopped_message(t: Training, step: int) -> str:
    """What a run stopped by Ctrl-C says (cli.py prints it): the step it reached, and where it goes
    on from when the same command is run again."""
    if t.checkpoint_step is None:
        first = min(t.train_cfg.eval_every, t.train_cfg.steps)
        then = f"it has no checkpoint yet (the first is saved at step {first}), so it starts over when started again"
    else:
        then = f"it resumes from its last checkpoint, at step {t.checkpoint_step}, when started again"
    return f"{t.run.root}: stopped at step {step} (Ctrl-C); {then}"


def train_step(t: Training, step: int, lr: float) -> tuple[float, bool]:
    """One optimizer update on the batch of `step` (0-based). Returns its loss, and whether its
    gradient norms were logged."""
    cfg = t.train_cfg
    for group in t.optimizer.param_groups:
        group["lr"] = lr
    starts = batch_starts(cfg.seed, step, len(t.train_data), t.model_cfg.ctx_len, cfg.batch_size)
    # A running fingerprint of every batch seen: equal digests = identical batch sequences.
    t.state["batch_digest"] = hashlib.sha256(t.state["batch_digest"].encode() + starts.tobytes()).hexdigest()
    x, y = windows_at(t.train_data, starts, t.model_cfg.ctx_len)
    logged = should_log(step + 1, cfg.eval_every, cfg.steps)
    if logged and cfg.log_max_logits:  # the weights this step's forward reads, before its clock starts
        t.log_max_logits(step + 1, x)
    tick = time.perf_counter()
    loss, t.forward = run_with_fallback(
        lambda module: forward_backward(module, t.optimizer, x, y, cfg.precision),
        t.forward,
        t.model,
        label=f"{t.run.root}: ",
    )
    if logged:  # before clipping: the gradients as backward made them
        t.log_grad_norms(step + 1)
    if cfg.grad_clip:
        torch.nn.utils.clip_grad_norm_(t.model.parameters(), cfg.grad_clip)
    t.optimizer.step()
    loss_value = loss.item()  # also waits for the device, so the step time is real
    t.state["step_times"].append(time.perf_counter() - tick)
    return loss_value, logged


def save_checkpoints(t: Training, step: int, row: dict) -> None:
    """After an evaluation: best.pt if the val loss is the best so far, then last.pt always."""
    best = t.state["best_val_loss"]
    if row["val_loss"] is not None and (best is None or row["val_loss"] < best):
        t.state["best_val_loss"], t.state["best_step"] = row["val_loss"], step
        save_checkpoint(t.run.best, t.checkpoint_state())
    t.state["step"] = step
    t.state["elapsed_s"] = row["elapsed_s"]
    t.clock = time.perf_counter()
    save_checkpoint(t.run.last, t.checkpoint_state())
    t.checkpoint_step = step


def finish(t: Training, diverged_step: int | None) -> dict:
    """Write summary.json, last of all: its presence means the run is finished."""
    if diverged_step is not None:
        save_checkpoint(t.run.last, t.checkpoint_state())
    summary = run_summary(t, diverged_step)
    t.run.write_summary(summary)
    return summary


def run_summary(t: Training, diverged_step: int | None) -> dict:
    state, metrics = t.state, t.state["metrics"]
    evaluated = [m for m in metrics if m.get("val_loss") is not None]
    step_time = statistics.median(state["step_times"]) if state["step_times"] else None
    return {
        "params": t.model.num_params(),
        "best_val_loss": state["best_val_loss"],
        "best_step": state["best_step"],
        "final_train_loss": evaluated[-1]["train_loss"] if evaluated else None,
        "final_val_loss": evaluated[-1]["val_loss"] if evaluated else None,
        "step_time_s": step_time,
        "tokens_per_s": t.train_cfg.batch_size * t.model_cfg.ctx_len / step_time if step_time else None,
        "steps_done": state["step"],
        "device": str(t.device),
        "machine": machine_description(t.device),
        "compiled": t.forward is not t.model,  # whether the training steps ran through torch.compile
        "precision": t.train_cfg.precision,
        "torch_version": torch.__version__,
        "python_version": platform.python_version(),
        "diverged": diverged_step is not None,
        "diverged_step": diverged_step,
        "status": "diverged" if diverged_step is not None else "done",
        "batch_digest": state["batch_digest"],
        "elapsed_s": metrics[-1]["elapsed_s"] if metrics else 0.0,
    }
