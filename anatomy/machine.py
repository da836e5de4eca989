"""The CPU this process runs on, in words (no torch needed: shipping results reads it too)."""

from __future__ import annotations

import os
import platform
from pathlib import Path


def cpu_description() -> str:
    """The CPU model and core count of this machine, e.g. 'AMD EPYC 7B13, 2 cores'."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:  # not Linux: platform's answer stands
        pass
    return f"{model}, {os.cpu_count()} cores"
