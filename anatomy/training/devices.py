"""Which device a command runs on: `auto` takes the best one here, a named one must exist; and
`sync`, which waits for it, so that a timing measures the device's work.

Training, the bench and the exams all accept `device=auto|cpu|cuda|mps`; they all choose here,
so that `auto` means the same everywhere (CUDA, then Apple's MPS, then the CPU), and a device
that was asked for but is missing is refused in words, before anything is written.
"""

from __future__ import annotations

import torch

from anatomy.errors import AnatomyError
from anatomy.machine import cpu_description


def pick_device(requested: str) -> torch.device:
    if requested == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda")
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            return torch.device("mps")
        return torch.device("cpu")
    if requested.startswith("cuda") and not torch.cuda.is_available():
        raise AnatomyError(f"device {requested!r} was asked for, but CUDA is not available here; use device=auto")
    if requested == "mps" and not torch.backends.mps.is_available():
        raise AnatomyError("device 'mps' was asked for, but MPS is not available here; use device=auto")
    return torch.device(requested)


def sync(device: torch.device) -> None:
    """Wait until the device has done the work queued on it: a timing stops at the work's end,
    not at its launch (CUDA and MPS run asynchronously; the CPU has nothing to wait for)."""
    if device.type == "cuda":
        torch.cuda.synchronize()
    elif device.type == "mps":
        torch.mps.synchronize()


def machine_description(device: torch.device | None = None) -> str:
    """The chip that does the work, e.g. 'AMD EPYC 7B13, 2 cores' or 'NVIDIA H200'. Each run
    records it: a bf16 rerun is exact only on the same CPU."""
    if device is not None and device.type == "cuda":
        return torch.cuda.get_device_name(device)
    if device is not None and device.type == "mps":
        return f"{cpu_description()} (Apple GPU)"
    return cpu_description()
