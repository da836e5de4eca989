"""Folders nested past the system's path limit (PATH_MAX: 4,096 bytes on Linux), for the tests of
the corpus walks: some 2,050 levels of one-letter names, or 41 of the 99-letter names made here,
which fail in the same way, fast. Of one-letter names (`folder_name="a"`), 1,100 levels stay under
the limit: deeper than a walk that recurses once per level can go.

Such a chain cannot be made or removed by its paths: past the limit every call that names the
path whole fails (ENAMETOOLONG), and mkdir(parents=True) and shutil.rmtree recurse once per level.
So it is made and removed one level at a time, through descriptors (openat, mkdirat, unlinkat),
with two open at most.
"""

from __future__ import annotations

import os
from pathlib import Path

LEVEL = "a" * 99  # each level adds 100 bytes of path


def levels_past_the_limit(top: Path) -> int:
    """Enough levels below `top` for a path longer than the system allows."""
    return os.pathconf(top, "PC_PATH_MAX") // len(LEVEL + "/") + 1


def make_deep_chain(top: Path, depth: int, files: dict[int, dict[str, str]], folder_name: str = LEVEL) -> None:
    """`top`/a/a/.../a, `depth` folders named `folder_name` below `top` (which exists); `files`:
    level -> {name: text}, each written at that level."""
    fd = os.open(top, os.O_RDONLY)
    try:
        for level in range(1, depth + 1):
            os.mkdir(folder_name, dir_fd=fd)
            below = os.open(folder_name, os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = below
            for name, text in files.get(level, {}).items():
                out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644, dir_fd=fd)
                os.write(out, text.encode("utf-8"))
                os.close(out)
    finally:
        os.close(fd)


def remove_deep_chain(top: Path, depth: int, folder_name: str = LEVEL) -> None:
    """Remove what `make_deep_chain` made below `top`, deepest first (as far as it got)."""
    fd = os.open(top, os.O_RDONLY)
    levels = 0
    try:
        while levels < depth:
            try:
                below = os.open(folder_name, os.O_RDONLY, dir_fd=fd)
            except FileNotFoundError:
                break
            os.close(fd)
            fd, levels = below, levels + 1
        for _ in range(levels):
            for name in os.listdir(fd):
                if name != folder_name:
                    os.unlink(name, dir_fd=fd)
            above = os.open("..", os.O_RDONLY, dir_fd=fd)
            os.close(fd)
            fd = above
            os.rmdir(folder_name, dir_fd=fd)
    finally:
        os.close(fd)
