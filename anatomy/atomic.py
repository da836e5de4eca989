"""Atomic file writes: write to a temporary file beside the target, then rename.

A reader (or a rerun after a crash) sees either the old file or the whole new one,
never half of it. Every file this project writes goes through here. Files that only make
sense together (a restored run) go in as one folder: `atomic_folder`. A writer killed with
SIGKILL leaves its temporaries behind: the next writer, holding the lock every writer of the
target holds, removes them (`remove_stale_temporaries`).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from anatomy.errors import AnatomyError
from anatomy.locks import held_lock


@contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it onto `target` on success."""
    target = Path(target)
    check_file_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    os.close(fd)
    tmp_path = Path(tmp)
    os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes 0600; give the file normal permissions
    try:
        yield tmp_path
        os.replace(tmp_path, target)
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


def _file_above(path: Path) -> Path | None:
    """The nearest existing ancestor of `path` that is not a folder, if any (nothing can go under it)."""
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def check_file_target(target: str | os.PathLike, option: str = "") -> None:
    """Say in words why a file cannot be written at `target`, before anything is written."""
    target = Path(target)
    name = f"{option} {target}" if option else str(target)
    if target.is_dir():
        raise AnatomyError(f"{name}: is a folder; expected the path of a file to write")
    blocker = _file_above(target)
    if blocker is not None:
        raise AnatomyError(f"{name}: {blocker} is a file, so nothing can be written under it")


def check_folder_target(folder: str | os.PathLike, option: str = "") -> None:
    """Say in words why `folder` cannot be used as (or made into) a folder."""
    folder = Path(folder)
    name = f"{option} {folder}" if option else str(folder)
    if folder.exists() and not folder.is_dir():
        raise AnatomyError(f"{name}: is a file; expected a folder (or a path where one can be made)")
    blocker = _file_above(folder)
    if blocker is not None:
        raise AnatomyError(f"{name}: {blocker} is a file, so no folder can be made under it")


def remove_stale_temporaries(target: str | os.PathLike) -> list[Path]:
    """Delete the temporaries a killed writer of `target` left beside it: files, DuckDB's .wal of
    one, and folders (atomic_folder's). Only call this while holding the lock that every writer of
    `target` holds, so that none of these can belong to a writer still at work."""
    target = Path(target)
    if not target.parent.is_dir():
        return []
    stale = [*target.parent.glob(f".{target.name}.*.tmp"), *target.parent.glob(f".{target.name}.*.tmp.wal")]
    for path in stale:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    return stale


@contextmanager
def atomic_folder(target: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder beside `target`; on success it takes the place of `target`
    whole (an old `target` is moved aside, then deleted). A reader sees the old folder or the new
    one, never some files of each; a kill between the two renames leaves no folder at all."""
    target = Path(target)
    check_folder_target(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; give the folder normal permissions
    old = None
    try:
        yield tmp
        if target.exists():
            # a folder can only be renamed onto an empty one: move the old one aside first
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
            os.replace(target, old)
        os.replace(tmp, target)
    except BaseException:
        if old is not None and old.exists() and not target.exists():
            os.replace(old, target)  # the new folder did not go in: the old one goes back
        raise
    finally:
        for leftover in (tmp, old):
            if leftover is not None and leftover.exists():
                shutil.rmtree(leftover)


@contextmanager
def writing_into(folder: str | os.PathLike) -> Iterator[Path]:
    """Hold the lock on `folder` (made if missing) for the `with` block: one writer into it at a
    time, so that a temporary file found there is a killed writer's leftover. The folder is its
    own lock, so nothing is added to it."""
    folder = Path(folder)
    check_folder_target(folder)
    folder.mkdir(parents=True, exist_ok=True)
    with held_lock(folder):
        yield folder


def write_text(target: str | os.PathLike, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes(target: str | os.PathLike, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_bytes_if_changed(target: str | os.PathLike, data: bytes) -> bool:
    """Write `data` unless `target` holds exactly it already (no new time stamp, no churn in git);
    returns whether it wrote."""
    target = Path(target)
    if target.is_file() and target.read_bytes() == data:
        return False
    write_bytes(target, data)
    return True


def write_json(target: str | os.PathLike, obj: Any) -> None:
    write_text(target, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
