"""Locks held by a running process, released by the kernel when it ends, however it ends.

A lock file is never deleted: it is only the handle of the lock. `flock` ties the lock to the
open file, so a process killed with SIGKILL cannot leave a stale lock behind; that is what
lets a writer tell a leftover (a temporary file nobody holds the lock for) from work in
progress. POSIX only (Linux, macOS), like the rest of the workflow.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator


@contextmanager
def held_lock(path: str | os.PathLike, on_wait: Callable[[str], None] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on `path` for the `with` block, waiting for the current holder if
    there is one (`on_wait` is told who that is, once). The holder's pid is written in the file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a+", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                handle.seek(0)
                on_wait(handle.read().strip() or "unknown")
            fcntl.flock(handle, fcntl.LOCK_EX)
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def is_locked(path: str | os.PathLike) -> bool:
    """Whether some process holds the lock on `path` right now (a missing file: no one does)."""
    try:
        handle = open(path, encoding="utf-8")
    except FileNotFoundError:
        return False
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False
