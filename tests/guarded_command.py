"""Running `python -m anatomy ...` in a process of its own, for the tests of a command that must
not hang or fill the memory: one that opened a named pipe would wait for good, one that read
/dev/zero would read until the machine runs out of memory. Either must fail the test, never stop
the test run or the machine. So the command gets a time limit (generous: a guard against a hang,
never a speed test) and a cap on its memory, under which a runaway read ends in a MemoryError.
"""

from __future__ import annotations

import resource
import subprocess
import sys

import pytest

GUARD_S = 60
MEMORY_CAP = 2 * 1024**3  # bytes of address space: the commands need a few hundred MiB


def cap_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))


def run_anatomy(*argv: str) -> subprocess.CompletedProcess:
    """`python -m anatomy ARGV`, its output as text; the test fails if it runs past GUARD_S."""
    try:
        return subprocess.run(
            [sys.executable, "-m", "anatomy", *argv],
            capture_output=True,
            text=True,
            timeout=GUARD_S,
            preexec_fn=cap_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"`python -m anatomy {' '.join(argv)}` still ran after {GUARD_S} s: it hangs")
