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


@contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it onto `target` on success."""
    target = Path(target)
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
