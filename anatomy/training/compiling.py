"""Optional `torch.compile` of the training step: fused loops for the parts torch has no kernel for.

On a CPU, torch 2.13 has fused kernels for LayerNorm and GELU, the 2017 parts, but builds
RMSNorm's backward, RoPE and SwiGLU's gate from several small ops, each one more pass over memory.
`torch.compile` writes one loop for each such chain. On the 2-core bench machine it makes a llama
step 6-9% faster; a vanilla step, whose parts all have fused kernels already, gets 3-8% slower
(three bench runs; docs/speed.md). It computes the same model: losses agree with the eager ones to
float rounding (tests/test_train.py).

It costs a one-off compilation, 17-20 s for a chapter-size model (seconds when torch's on-disk
cache has seen the model before), and it needs a backend: a C++ compiler on the CPU, Triton on
CUDA. So `auto` compiles only where it pays: a model with the fused impl and at least one part
that has no fused kernel, on a device whose backend is installed (never mps, where it is still
a prototype). A compile that fails falls back to plain eager PyTorch with one line of notice: no
machine loses a run to it.

The step itself, `forward_backward`, lives here too: the trainer, the bench and the wall-clock
exam call it, on the compiled module or the eager model alike.
"""

from __future__ import annotations

import importlib.util
import os
import shutil

import torch
from torch import nn

from anatomy.config import ModelConfig
from anatomy.precision import autocast

CompileSetting = bool | str  # True, False or "auto"


def cpp_compiler_found() -> bool:
    """Whether the C++ compiler torch's CPU backend calls is on this machine."""
    candidates = [os.environ.get("CXX"), "g++", "clang++", "c++"]
    return any(name and shutil.which(name) for name in candidates)


def backend_available(device: torch.device) -> bool:
    """Whether torch.compile has a backend for this device here."""
    if device.type == "cpu":
        return cpp_compiler_found()
    if device.type == "cuda":
        return importlib.util.find_spec("triton") is not None
    return False  # mps: still a prototype in torch.compile


def has_unfused_parts(cfg: ModelConfig) -> bool:
    """Parts that torch runs as a chain of small ops: the ones compiling speeds up. (The manual
    impl is left as written: its point is to show what the hand-written version costs.)"""
    return cfg.impl == "fused" and (
        cfg.norm_type == "rmsnorm" or cfg.pos_type == "rope" or cfg.ffn_type == "swiglu" or cfg.qk_norm
    )


def compile_wanted(setting: CompileSetting, device: torch.device, cfg: ModelConfig, precision: str = "fp32") -> bool:
    """True/False as given; auto: where a backend is installed and the model has parts to fuse.
    Under bf16 autocast every fused model has: the casts around each multiply are small ops too.
    Vanilla in bf16, 1 thread, 2026-12-01 on the 2-core EPYC under load, paired rounds: eager /
    compiled 1.22 at this project's vocabularies (3,563 and 3,689, where the logits dominate), 0.96
    at the chapter's 1,719 (docs/precision.md)."""
    if setting != "auto":
        return bool(setting)
    to_fuse = has_unfused_parts(cfg) or (precision == "bf16" and cfg.impl == "fused")
    return to_fuse and backend_available(device)


def compiled_or_eager(
    model: nn.Module, setting: CompileSetting, device: torch.device, precision: str = "fp32"
) -> nn.Module:
    """The module to call for training steps: `torch.compile(model)` (same parameters) or the model.
    Compilation is lazy: it happens, and can fail, at the first call (see `run_with_fallback`)."""
    return torch.compile(model) if compile_wanted(setting, device, model.cfg, precision) else model


def forward_backward(
    module, optimizer: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor, precision: str = "fp32"
) -> torch.Tensor:
    """Loss and fresh gradients for one batch; `module` is the model or its compiled version.
    Only the forward pass runs under autocast: backward follows the dtypes it recorded."""
    optimizer.zero_grad(set_to_none=True)
    with autocast(precision, x.device):
        _, loss = module(x, y)
    loss.backward()
    return loss


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
        print(f"{label}torch.compile failed ({type(err).__name__}: {first_line}); going on without it", flush=True)
        return step(model), model
