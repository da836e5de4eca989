"""Which number format the matrix multiplies run in: fp32, or bfloat16 where the hardware has it.

`bf16` is autocast, the way nanoGPT and litgpt (`bf16-mixed`) train: the weights, their gradients
and AdamW's state stay float32; inside `autocast()` the matrix multiplies and attention run in
bfloat16, and the loss (cross-entropy) in float32. Half the bytes per number and, on hardware
with bf16 instructions, 1.15-1.26x faster steps on the 2-core bench machine (docs/speed.md).

`auto` picks bf16 where the hardware multiplies it natively (a CUDA GPU that supports it, a CPU
with `avx512_bf16` or AMX) and fp32 elsewhere. On Apple `mps` it picks fp32: bf16 there has not
been measured by this project yet, and a guess is not a measurement.

fp32 is the default: it is what the shipped reference runs trained in, and a rerun of one
reproduces its numbers bit for bit on the same machine. bf16 changes the numbers a little (it
rounds), so it is part of a run's settings: a run never resumes in another precision.

No torch at import: the workflow checks configs without it.
"""

from __future__ import annotations

import contextlib
from typing import Literal

Precision = Literal["fp32", "bf16", "auto"]
USED = ("fp32", "bf16")  # what `auto` resolves to; what config.json and summary.json record


def native_bf16(device) -> bool:
    """Whether this device multiplies bfloat16 in hardware."""
    import torch

    if device.type == "cuda":
        return torch.cuda.is_bf16_supported(including_emulation=False)
    if device.type == "cpu":
        return torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    return False  # mps: not measured here (see the module docstring)


def resolve_precision(setting: str, device) -> str:
    """fp32 or bf16, from the setting and the device the run is on."""
    if setting == "auto":
        return "bf16" if native_bf16(device) else "fp32"
    return setting


def autocast(precision: str, device):
    """The context the forward pass runs in: bf16 autocast, or nothing at all for fp32 (so an
    fp32 run computes exactly what it computed before this setting existed)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    import torch

    return torch.autocast(device_type=device.type, dtype=torch.bfloat16)


def allow_tf32(device) -> None:
    """On CUDA, let fp32 matrix multiplies use TF32 tensor cores (what PyTorch calls "high"
    precision); plain fp32 leaves most of the chip idle. Nothing changes on a CPU or mps."""
    if device.type == "cuda":
        import torch

        torch.set_float32_matmul_precision("high")
