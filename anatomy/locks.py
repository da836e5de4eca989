"""Locks held by a running process, released by the kernel when it ends, however it ends.

A lock file is never deleted: it is only the handle of the lock (a folder can be its own). `flock` ties the lock to the
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
def held_lock(path: str | os.PathLike, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold an exclusive lock on `path` (a lock file, made if missing, or a folder) for the `with`
    block, waiting for the current holder if there is one (`on_wait` is called first)."""
    fd = _open_for_locking(Path(path))
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            if on_wait is not None:
                on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def is_locked(path: str | os.PathLike) -> bool:
    """Whether some process holds the lock on `path` right now (a missing file: no one does)."""
    if not Path(path).exists():
        return False
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def _open_for_locking(path: Path) -> int:
    if path.is_dir():
        return os.open(path, os.O_RDONLY)  # a folder can be its own lock: nothing added to it
    path.parent.mkdir(parents=True, exist_ok=True)
    return os.open(path, os.O_RDONLY | os.O_CREAT, 0o644)
