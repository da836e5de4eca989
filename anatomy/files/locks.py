"""Locks held by a running process, released by the kernel when it ends, however it ends.

A lock file is never deleted: it is only the handle of the lock (a folder can be its own).
`flock` ties the lock to the open file, so a process killed with SIGKILL cannot leave a stale
lock behind; that is what lets a writer tell a leftover (a temporary file nobody holds the lock
for) from work in progress. POSIX only (Linux, macOS), like the rest of the workflow.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

from anatomy.errors import AnatomyError


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


# Why there is no lock at a path: nothing there, a file where a folder should be, a loop of links,
# or a name too long to be a file's (a crafted plan naming a run of 5,000 characters)
NO_LOCK_THERE = (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.ENAMETOOLONG)


def is_lockable(mode: int) -> bool:
    """Whether a file of this mode (st_mode) can be a lock: a regular file, or a folder (its own).
    Not a named pipe (opening one for reading waits for a writer, for good), nor a device."""
    return stat.S_ISREG(mode) or stat.S_ISDIR(mode)


def is_locked(path: str | os.PathLike) -> bool:
    """Whether some process holds the lock on `path` right now. No one holds one where there is no
    lock file or folder (NO_LOCK_THERE), nor on a named pipe or a device, which are never opened:
    the Progress page asks every few seconds, and would wait on a pipe for good. The path is looked
    at before it is opened, and the opened file again, since another may have taken its place in
    between (O_NONBLOCK lets even a pipe open at once, so that this second look is reached)."""
    try:
        if not is_lockable(os.stat(path).st_mode):
            return False
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError as err:
        if err.errno not in NO_LOCK_THERE:
            raise
        return False
    try:
        if not is_lockable(os.fstat(fd).st_mode):
            return False
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


# Locks taken by hold_for_life: kept open (and so held) until this process ends.
_HELD_FOR_LIFE: list[int] = []


def hold_for_life(path: str | os.PathLike) -> bool:
    """Take the lock on `path` for the rest of this process, if no one holds it; True if taken."""
    fd = _open_for_locking(Path(path))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return False
    _HELD_FOR_LIFE.append(fd)
    return True


# A lifeline: the workflow holds a lock for as long as it runs and names it in this variable;
# the trainers it starts check it, and stop when it is released. Killing Snakemake with SIGKILL
# does not stop the jobs it started (they are not its threads), but it does release its locks.
LIFELINE_ENV = "ANATOMY_LIFELINE"


def lifeline_value(path: str | os.PathLike) -> str:
    """What the workflow puts in $ANATOMY_LIFELINE: this machine's name and the lock's path."""
    return f"{socket.gethostname()}:{Path(path).resolve()}"


def lifeline_lost(value: str | None = None) -> bool:
    """Whether the process that started this one (and holds the lifeline lock) is gone. False
    without a lifeline, and on another machine (a cluster job: locks are per machine there)."""
    value = os.environ.get(LIFELINE_ENV) if value is None else value
    if not value:
        return False
    host, _, path = value.partition(":")
    return host == socket.gethostname() and not is_locked(path)


def _open_for_locking(path: Path) -> int:
    """`path` open to lock: a folder (its own lock: nothing added to it) or a lock file, made if
    missing. Anything else there is refused in one line, unread: opened without O_NONBLOCK, a
    named pipe would make the writer wait for good."""
    if path.is_dir():
        return os.open(path, os.O_RDONLY)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDONLY | os.O_CREAT | os.O_NONBLOCK | os.O_NOCTTY, 0o644)
    if not is_lockable(os.fstat(fd).st_mode):
        os.close(fd)
        raise AnatomyError(f"{path}: is not a regular file; expected a lock file there (or nothing): move it away")
    return fd  # O_NONBLOCK does not touch flock: a lock without LOCK_NB still waits for its holder
