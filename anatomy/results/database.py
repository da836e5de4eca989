"""A results database file: what one is, and how every reader opens it. Nothing here writes.

collect (anatomy/results/collect.py) is the only writer; the reader, the report and the dashboard
open what it wrote through `open_read_only`, and say what is wrong with a path through
`database_path_problem` before anything opens it. The schema (schema.sql) is this version's
contract: a database that lacks a column of it was made by an older version (`missing_columns`),
and collecting again rebuilds it; one without the tables every version wrote was not made by this
project, and collect leaves it as it is (`not_made_here`). While a collect writes a database it holds a lock beside it
(`collect_lock_path`), so a reader tells a rebuild in progress from a leftover (`being_collected`).

A database the dashboard is pointed at may be one this project did not build: its views are SQL
anyone can write. So reading one is bounded: the queries of one connection stop after QUERY_SECONDS
in all, DuckDB works within MEMORY_LIMIT on READ_THREADS (never spilling to disk), and a table or
view with more rows than the pages can draw is refused before it is read (`check_row_counts`),
each in one line naming the file.
"""

from __future__ import annotations

import functools
import os
import stat
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator

import duckdb

from anatomy.errors import AnatomyError
from anatomy.files.atomic import NOT_REPLACED, file_behind, file_kind, opened_regular_file
from anatomy.files.locks import is_locked

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_PATH = Path(__file__).with_name("schema.sql")

# A results database is data: reading one must not run what its views say outside it. With
# external access off (once the file is attached: attaching is a file access too), a view that
# reads a file (read_text('/etc/passwd')) or an address fails, and no extension is fetched or
# loaded on the database's say.
#
# Memory: reading the shipped reference database takes DuckDB more than 64 MB and less than 256 MB
# (it fails at the one, passes at the other); 512 MB leaves room for a grid many times its size,
# and with no temporary folder a query that needs more fails rather than filling the disk.
MEMORY_LIMIT = "512MB"
# Threads: a crafted view is a served page's worst case: it may take these cores, never the server's all.
READ_THREADS = 2
READ_ONLY_SETTINGS = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
    "temp_directory": "",
}
# Time: reading the whole reference database (the report's read, a page's render) takes well under
# a second; a connection whose queries run this long in all reads no database collect built, and
# is interrupted. In all, not per query: a render read one slow crafted view three times, 62 s.
QUERY_SECONDS = 20
# Rows: what the pages and the report read whole into memory (pandas) and draw. The shipped
# reference database held 3,560 rows of metrics and 99,432 of gradient norms (5,160 of metrics by
# 2026-12-05, 129 runs); a metrics table of 5,000,000 rows took the dashboard to 12.8 GB. These
# limits are some 50 to 150 times the shipped ones (a grid of 500 runs of 1,000 evaluations each),
# kept there for a laptop's memory; the views of a run's evaluations as many as metrics; any other
# table or view: 100,000 rows.
ROW_LIMITS = {
    "metrics": 500_000,
    "seed_band": 500_000,
    "val_above_best": 500_000,
    "grad_norm_spread": 500_000,
    "grad_norms": 5_000_000,
}
OTHER_TABLE_ROW_LIMIT = 100_000
REBUILD_ADVICE = "rebuild it from run folders with `python -m anatomy collect`, or choose the database collect wrote"

DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file
# What makes a DuckDB database one of this project's: the tables every version of collect wrote,
# with columns each had from the first schema.sql on. Collect replaces a database that holds them
# (one of an older version too) and no other.
OWN_COLUMNS = {
    "runs": ("run_id", "experiment", "seed", "config"),
    "metrics": ("run_id", "step", "train_loss", "val_loss"),
    "samples": ("run_id", "sample_idx"),
    "benchmarks": ("rule", "job"),
}


class ReadLimitExceeded(AnatomyError):
    """A query on a results database went past a bound (QUERY_SECONDS, MEMORY_LIMIT, ROW_LIMITS)."""


class ReadOnlyConnection:
    """A DuckDB connection to a results database with a time budget: its queries, and the fetching
    of their rows (where DuckDB may do the work), run under a timer that interrupts them (DuckDB's
    `interrupt`) once QUERY_SECONDS are spent in all. Everything else is the DuckDB connection's own
    (`description`, `close`)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str | Path):
        self._con, self.path = con, path
        self._seconds_left = float(QUERY_SECONDS)

    @contextmanager
    def _bounded(self) -> Iterator[None]:
        if self._seconds_left <= 0:  # spent by earlier queries: refused before it starts
            raise self._too_long()
        timer = threading.Timer(self._seconds_left, self._con.interrupt)
        timer.daemon = True  # a timer left waiting never keeps the program alive
        started = time.monotonic()
        timer.start()
        try:
            yield
        except duckdb.InterruptException:
            raise self._too_long() from None
        except duckdb.OutOfMemoryException:
            raise ReadLimitExceeded(
                f"{self.path}: a query needed more than {MEMORY_LIMIT} of memory and was stopped; reading a "
                f"database collect built takes far less: {REBUILD_ADVICE}"
            ) from None
        finally:
            timer.cancel()
            self._seconds_left -= time.monotonic() - started

    def _too_long(self) -> ReadLimitExceeded:
        return ReadLimitExceeded(
            f"{self.path}: its queries ran for more than {QUERY_SECONDS} s and were stopped; reading a database "
            f"collect built takes well under a second: {REBUILD_ADVICE}"
        )

    def execute(self, query: str, parameters: Any = None) -> "ReadOnlyConnection":
        with self._bounded():
            self._con.execute(query, parameters)
        return self

    def df(self) -> "pd.DataFrame":
        with self._bounded():
            return self._con.df()

    def fetchall(self) -> list[tuple]:
        with self._bounded():
            return self._con.fetchall()

    def fetchone(self) -> tuple | None:
        with self._bounded():
            return self._con.fetchone()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._con, name)

    def __enter__(self) -> "ReadOnlyConnection":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self._con.close()


def open_read_only(db_path: str | Path) -> ReadOnlyConnection:
    """The one way this project opens a results database to read it (report, dashboard, collect),
    within the bounds above.

    The file is attached to an in-memory database of the connection's own, rather than connected
    to by path: DuckDB hands a second connection to a path the database that a first connection
    still holds open, which may be a file that collect has since replaced. Attached, a connection
    reads the file that was at the path when it opened, whoever else has one open."""
    con = duckdb.connect(
        ":memory:", config={**READ_ONLY_SETTINGS, "memory_limit": MEMORY_LIMIT, "threads": READ_THREADS}
    )
    try:
        con.execute("ATTACH ? AS results (READ_ONLY)", [str(db_path)])
        con.execute("USE results")
        con.execute("SET enable_external_access = false")
    except BaseException:
        con.close()
        raise
    return ReadOnlyConnection(con, db_path)


def row_limit(relation: str) -> int:
    return ROW_LIMITS.get(relation, OTHER_TABLE_ROW_LIMIT)


def check_row_counts(con: ReadOnlyConnection, path: str | Path, relations: Iterable[str]) -> None:
    """Refuse a database where one of `relations` (tables or views: a view is anyone's SQL, and one
    cross join makes millions of rows of a few) has more rows than the readers take whole
    (ROW_LIMITS), before any is read. Each is counted no further than its limit, so a view that
    explodes is stopped at once, not computed."""
    for relation in relations:
        limit = row_limit(relation)
        (rows,) = con.execute(f"SELECT count(*) FROM (SELECT 1 FROM {relation} LIMIT {limit + 1})").fetchone()
        if rows > limit:
            raise ReadLimitExceeded(
                f"{path}: {relation} has more than {limit:,} rows, more than a results database of this project "
                f"holds, so it is not read: {REBUILD_ADVICE}"
            )


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
    database this project made, since it is replaced: `--db notes.md` must not cost the notes,
    nor `--db` another program's database its tables."""
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
    if replacing:
        return not_made_here(db_path)
    return None


def missing_own_tables(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The tables of OWN_COLUMNS that the database open on `con` lacks, or holds without one of
    their first columns: none for a database this project made (of any version). The one test of
    who made a database: collect (before replacing it) and the dashboard (before advising that)."""
    found = set(con.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall())
    return [table for table, columns in OWN_COLUMNS.items() if any((table, c) not in found for c in columns)]


def not_made_here(db_path: str | Path) -> str | None:
    """Why the DuckDB database at `db_path` is not one this project made (OWN_COLUMNS), so that
    collect must not replace it; None when it is (of this version or an older one)."""
    try:
        with open_read_only(db_path) as con:
            missing = missing_own_tables(con)
    except duckdb.Error as err:
        first_line = str(err).splitlines()[0] if str(err) else type(err).__name__
        return f"holds a DuckDB database that cannot be opened to tell who made it ({first_line}); {NOT_REPLACED}"
    if not missing:
        return None
    tables = ", ".join(OWN_COLUMNS)
    return f"holds a DuckDB database this project did not make (collect writes the tables {tables}); {NOT_REPLACED}"


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
