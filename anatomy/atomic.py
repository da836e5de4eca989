"""Atomic file writes: write to a temporary file beside the target, then rename.

A reader (or a rerun after a crash) sees either the old file or the whole new one,
never half of it. Every file this project writes goes through here.
"""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from anatomy.errors import AnatomyError


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
    """Delete the temporary files a killed writer of `target` left beside it (and DuckDB's .wal of
    one). Only call this while holding the lock that every writer of `target` holds, so that none
    of these files can belong to a writer still at work."""
    target = Path(target)
    if not target.parent.is_dir():
        return []
    stale = [*target.parent.glob(f".{target.name}.*.tmp"), *target.parent.glob(f".{target.name}.*.tmp.wal")]
    for path in stale:
        path.unlink(missing_ok=True)
    return stale


def write_text(target: str | os.PathLike, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes(target: str | os.PathLike, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_json(target: str | os.PathLike, obj: Any) -> None:
    write_text(target, json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
