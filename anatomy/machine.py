"""The CPU this process runs on, in words (no torch needed: shipping results reads it too)."""

from __future__ import annotations

import os
import platform
from pathlib import Path

# The instructions that make bf16 fast on a CPU, most capable first. Without one of them torch
# emulates bf16, and a bf16 step can take several times an fp32 one (size L here: 15.2 s against
# 1.6 s on an AMD EPYC without AVX-512). Two CPUs of one model name can differ here (a virtual
# machine hides what its host lacks), so the description names it.
BF16_INSTRUCTIONS = {"amx_bf16": "AMX", "avx512_bf16": "AVX-512 BF16"}


def cpu_flags(cpuinfo: str) -> set[str]:
    for line in cpuinfo.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def bf16_words(flags: set[str]) -> str:
    for flag, name in BF16_INSTRUCTIONS.items():
        if flag in flags:
            return f"bf16 in hardware ({name})"
    return "no bf16 in hardware"


def cpu_description(cpuinfo: str | None = None) -> str:
    """The CPU model, core count and bf16 support of this machine, e.g. 'AMD EPYC 7B13, 2 cores,
    bf16 in hardware (AVX-512 BF16)'. Off Linux, platform's model name and the core count."""
    model = platform.processor() or platform.machine()
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(encoding="utf-8")
        except OSError:  # not Linux: platform's answer stands
            return f"{model}, {os.cpu_count()} cores"
    for line in cpuinfo.splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    return f"{model}, {os.cpu_count()} cores, {bf16_words(cpu_flags(cpuinfo))}"
