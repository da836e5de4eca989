"""A results database file: what one is, and how every reader opens it. Nothing here writes.

collect (anatomy/results/collect.py) is the only writer; the reader, the report and the dashboard
open what it wrote through `open_read_only`, and say what is wrong with a path through
`database_path_problem` before anything opens it. The schema (schema.sql) is this version's
contract: a database that lacks a column of it was made by an older version (`missing_columns`),
and collecting again rebuilds it. While a collect writes a database it holds a lock beside it
(`collect_lock_path`), so a reader tells a rebuild in progress from a leftover (`being_collected`).
"""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path

import duckdb

from anatomy.errors import AnatomyError
from anatomy.files.atomic import NOT_REPLACED, file_behind, file_kind, opened_regular_file
from anatomy.files.locks import is_locked

SCHEMA_PATH = Path(__file__).with_name("schema.sql")

# A results database is data: reading one must not run what its views say outside it. With
# external access off (once the file is attached: attaching is a file access too), a view that
# reads a file (read_text('/etc/passwd')) or an address fails, and no extension is fetched or
# loaded on the database's say.
READ_ONLY_SETTINGS = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}

DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file


def open_read_only(db_path: str | Path) -> duckdb.DuckDBPyConnection:
    """The one way this project opens a results database to read it (report, dashboard, collect).

    The file is attached to an in-memory database of the connection's own, rather than connected
    to by path: DuckDB hands a second connection to a path the database that a first connection
    still holds open, which may be a file that collect has since replaced. Attached, a connection
    reads the file that was at the path when it opened, whoever else has one open."""
    con = duckdb.connect(":memory:", config=READ_ONLY_SETTINGS)
    try:
        con.execute("ATTACH ? AS results (READ_ONLY)", [str(db_path)])
        con.execute("USE results")
        con.execute("SET enable_external_access = false")
    except BaseException:
        con.close()
        raise
    return con


# ---------------------------------------------------------------------------------------------
# Is this path a database at all? Said before anything opens it


def starts_like_duckdb(path: str | Path) -> bool:
    """Whether `path` is a regular file that starts as every DuckDB database does."""
    try:
        with opened_regular_file(path, "a DuckDB database") as handle:
            return handle.read(12)[8:12] == DUCKDB_MAGIC
    except AnatomyError:
        return False


def database_path_problem(db_path: str | Path, replacing: bool = False) -> str | None:
    """Why `db_path` cannot be a results database, said before anything opens it; None when it may
    be one (or is not there yet: each reader says that in its own words). A named pipe must be
    caught here: opening one waits for a writer, and so would the command or the page, for good.
    `replacing` (collect, about to put a new database there): a file there must be a DuckDB
    database, since it is replaced: `--db notes.md` must not cost the notes."""
    try:
        mode = os.stat(db_path).st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        return "is a folder, expected a DuckDB file"
    if not stat.S_ISREG(mode):
        return f"is not a regular file ({file_kind(mode)}): expected a DuckDB file"
    if replacing and not starts_like_duckdb(db_path):
        return f"holds a file that is not a DuckDB database (it does not start like one); {NOT_REPLACED}"
    return None


def check_database_path(db_path: str | Path, replacing: bool = False) -> None:
    """Every command given --db says a folder there as such (not "no such database"), and a named
    pipe or a device (which would hang it) too; collect (`replacing`) any file but a database."""
    problem = database_path_problem(db_path, replacing)
    if problem is not None:
        raise AnatomyError(f"--db {db_path}: {problem}")


# ---------------------------------------------------------------------------------------------
# Made by this version? Being rebuilt right now?


@functools.lru_cache(maxsize=1)
def expected_columns() -> frozenset[tuple[str, str]]:
    """(table or view, column) of every column that schema.sql creates."""
    with duckdb.connect(":memory:") as con:
        con.execute(SCHEMA_PATH.read_text(encoding="utf-8"))
        return frozenset(con.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall())


def missing_columns(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The columns this version's schema has that the database open on `con` lacks: a database
    made by an older version of collect (empty: a current one). Collecting again rebuilds it whole."""
    found = con.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall()
    return sorted(f"{table}.{column}" for table, column in expected_columns() - set(found))


def collect_lock_path(db_path: Path) -> Path:
    """The lock a collect holds while it writes `db_path`: results/.anatomy.duckdb.lock. Readers
    (the dashboard) check it to tell a rebuild in progress from a leftover temporary file. Beside
    the file a link there leads to (where the new database is written): one lock per database,
    by whichever path it is reached."""
    db_path = file_behind(Path(db_path))
    return db_path.with_name(f".{db_path.name}.lock")


def being_collected(db_path: Path) -> bool:
    """Whether a collect is writing `db_path` right now: it holds the lock for as long as it does."""
    lock = collect_lock_path(db_path)
    return lock.parent.is_dir() and is_locked(lock)
