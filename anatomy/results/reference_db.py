"""The shipped reference results as a database: what the dashboard shows before you train.

results/reference/ holds the small files of a full-size grid (anatomy/results/reference.py ships
them). `reference_database` collects them, the one way a folder is collected whole
(`collect.collect_folder`), into results/reference.duckdb beside them, and again whenever a shipped
file is newer than the database or the database was made by an older version.

A checkout may be read-only: a teacher serving the shipped results from a shared folder, a
container's image. Then the database is built in a cache folder of the user's instead
(`cache_folder`: $ANATOMY_CACHE, else $XDG_CACHE_HOME/llm-anatomy, else ~/.cache/llm-anatomy),
under a name of its own for each reference folder, so that two checkouts never share one.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import duckdb

from anatomy.errors import AnatomyError
from anatomy.results.collect import collect_folder
from anatomy.results.database import missing_columns, open_read_only

CACHE_ENV_VAR = "ANATOMY_CACHE"
CACHE_NAME = "llm-anatomy"


def cache_folder() -> Path:
    """Where a user's derived files go when the project folder is read-only: $ANATOMY_CACHE, else
    the XDG cache folder ($XDG_CACHE_HOME, else ~/.cache), in llm-anatomy/."""
    if os.environ.get(CACHE_ENV_VAR):
        return Path(os.environ[CACHE_ENV_VAR])
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / CACHE_NAME


def cached_path(reference_dir: Path) -> Path:
    """The database of `reference_dir` in the cache folder, named for that folder's real path."""
    key = hashlib.sha256(str(Path(reference_dir).resolve()).encode("utf-8")).hexdigest()[:16]
    return cache_folder() / f"reference-{key}.duckdb"


def newest_shipped(reference_dir: Path) -> int:
    """When a shipped file last changed (ns): a database older than that is stale."""
    return max((path.stat().st_mtime_ns for path in Path(reference_dir).rglob("*") if path.is_file()), default=0)


def is_current(db_path: Path, reference_dir: Path) -> bool:
    """Whether `db_path` holds the shipped results as this version reads them: newer than every
    shipped file, and made by this version's schema (an unreadable file is not)."""
    try:
        if db_path.stat().st_mtime_ns < newest_shipped(reference_dir):
            return False
        with open_read_only(db_path) as con:
            return not missing_columns(con)
    except (OSError, duckdb.Error):
        return False


def writable_folder(folder: Path) -> bool:
    """Whether a database can be built in `folder`: it exists, or can be made, and may be written."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return False
    return os.access(folder, os.W_OK)


def reference_database(reference_dir: Path, db_path: Path) -> Path | None:
    """The database of the shipped results in `reference_dir` (None: none are shipped there):
    `db_path` (results/reference.duckdb) where it is current, else the cache folder's where that
    one is, else built anew, at `db_path` where its folder may be written, else in the cache."""
    reference_dir, db_path = Path(reference_dir), Path(db_path)
    if not (reference_dir / "runs").is_dir():
        return None
    cached = cached_path(reference_dir)
    for candidate in (db_path, cached):
        if is_current(candidate, reference_dir):
            return candidate
    for target in (db_path, cached):
        if writable_folder(target.parent):
            collect_folder(reference_dir / "runs", target)
            return target
    raise AnatomyError(
        f"{reference_dir}: the shipped results cannot be collected into a database: neither "
        f"{db_path.parent} nor the cache folder {cached.parent} may be written; set {CACHE_ENV_VAR} "
        "to a folder you may write to"
    )
