"""Optional `torch.compile` of the training step: fused loops for the parts torch has no kernel for.

On a CPU, torch 2.13 has fused kernels for LayerNorm and GELU, the 2017 parts, but builds
RMSNorm's backward, RoPE and SwiGLU's gate from several small ops, each one more pass over memory.
`torch.compile` writes one loop for each such chain. On the 2-core bench machine it makes a llama
step about 10% faster and leaves a vanilla step where it was (README, "Speed"). It computes the
same model: losses and gradients agree with the eager ones to float rounding (tests/test_train.py).

It costs a one-off compilation, 15-25 s for a chapter-size model (seconds when torch's on-disk
cache has seen the model before), and it needs a backend: a C++ compiler on the CPU, Triton on
CUDA. `auto` turns it on only where that backend is present (never on mps, where it is still a
prototype), and a compile that fails falls back to plain eager PyTorch with one line of notice:
no machine loses a run to it.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import torch
from torch import nn

CompileSetting = bool | str  # True, False or "auto"


def cpp_compiler_found() -> bool:
    """Whether the C++ compiler torch's CPU backend calls is on this machine."""
    candidates = [os.environ.get("CXX"), "g++", "clang++", "c++"]
    return any(name and shutil.which(name) for name in candidates)


def compile_wanted(setting: CompileSetting, device: torch.device) -> bool:
    """True/False as given; auto: on where torch.compile has a backend for the device."""
    if setting != "auto":
        return bool(setting)
    if device.type == "cpu":
        return cpp_compiler_found()
    if device.type == "cuda":
        return importlib.util.find_spec("triton") is not None
    return False


def compiled_or_eager(model: nn.Module, setting: CompileSetting, device: torch.device) -> nn.Module:
    """The module to call for training steps: `torch.compile(model)` (same parameters) or the model.
    Compilation is lazy: it happens, and can fail, at the first call (see `run_with_fallback`)."""
    return torch.compile(model) if compile_wanted(setting, device) else model


def run_with_fallback(step, forward: nn.Module, model: nn.Module, label: str = ""):
    """Run `step(forward)`; if the compiled module fails, say so once and redo it with the eager
    model. An error that eager PyTorch raises too is a real one, and is raised as it is.
    Returns (step's result, the module to use from now on)."""
    if forward is model:
        return step(model), model
    try:
        return step(forward), forward
    except Exception as err:  # noqa: BLE001 - any compiler failure; eager reruns the step
        first_line = (str(err).strip().splitlines() or [""])[0][:200]
        print(f"{label}torch.compile failed ({type(err).__name__}: {first_line}); "
              f"going on without it", flush=True)
        return step(model), model
