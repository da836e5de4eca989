"""Reading the results database: the only place the dashboard touches DuckDB.

`python -m anatomy collect` replaces the file while the dashboard runs. Each render of a page
opens the database once, makes all its queries on that read-only connection and closes it
when the render ends: one render reads one database, even if a collect lands in the middle of
it (`one_database_per_render`), and the next render reads the new one. Results are cached by
Streamlit and keyed on the file's identity, so a rebuilt database is picked up on the next rerun.

What can go wrong is turned into a `DatabaseProblem` with words for the learner: no
database yet, a database being rebuilt, a file that is not a results database. The path and
DuckDB's own words are named as text (`tables.markdown_literal`), never read as Markdown.

Before the learner has run anything, the dashboard shows the reference results shipped in
`results/reference/` (a full-size grid): `reference_db()` has them collected into
`results/reference.duckdb` on first use, and again whenever the shipped files change, or into a
cache folder when the checkout is read-only (anatomy/results/reference_db.py owns all of it).
The dashboard opens databases as anatomy/results/database.py says, reads them with the report's
reader, and never imports collect, the writer.
"""

from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb
import pandas as pd
import streamlit as st

from anatomy.language import N_, _
from anatomy.errors import AnatomyError
from anatomy.results.groups import HEADLINE_COMMAND, QUICK_GRID_COMMAND
from anatomy.results.reference import CORPUS_FACTS, PROVENANCE_FILE, read_provenance
from anatomy.results.reference_db import cached_path, reference_database
from anatomy.results import reader
from anatomy.results.reader import ForeignDatabase, OutdatedDatabase, Results, bounded_table, read
from anatomy.report.wording import sentences
from anatomy.results.database import (
    ReadLimitExceeded,
    ReadOnlyConnection,
    being_collected,
    collect_lock_path,
    database_path_problem,
    open_read_only,
    starts_like_duckdb,
)
from dashboard.tables import markdown_literal

DEFAULT_DB = "results/anatomy.duckdb"
DB_ENV_VAR = "ANATOMY_DB"
# More places a served dashboard may open (files, or folders and all under them), os.pathsep between
ALLOWED_ENV_VAR = "ANATOMY_DASHBOARD_DBS"
REPO_ROOT = Path(__file__).resolve().parent.parent
# the full-size grid's small files, committed, and the database built from them (not committed)
REFERENCE_DIR = REPO_ROOT / "results" / "reference"
REFERENCE_DB = REPO_ROOT / "results" / "reference.duckdb"

# shown with _(MAKE_DATABASE_HELP), in the reader's language
MAKE_DATABASE_HELP = N_(
    "Make one from the repository root with `{quick}` (the whole grid, tiny: minutes) or `{headline}` "
    "(vanilla vs mini-LLaMA over both seeds, full size). "
    "Runs trained by hand are collected with "
    "`python -m anatomy collect --runs results/runs --db results/anatomy.duckdb --json results/results.json`."
)


class DatabaseProblem(Exception):
    """The database cannot be read right now; `kind` is missing, rebuilding, outdated, invalid or
    refused (a path this dashboard does not open)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


def default_db_path() -> str:
    """$ANATOMY_DB, else results/anatomy.duckdb in the working folder or in the repository,
    else the shipped reference results."""
    if os.environ.get(DB_ENV_VAR):
        return os.environ[DB_ENV_VAR]
    if Path(DEFAULT_DB).exists():
        return DEFAULT_DB
    if (REPO_ROOT / DEFAULT_DB).exists():
        return str(REPO_ROOT / DEFAULT_DB)
    if (REFERENCE_DIR / "runs").is_dir():  # shipped: the page says why, if they cannot be collected
        return reference_db() or str(REFERENCE_DB)
    return DEFAULT_DB


# ---------------------------------------------------------------------------------------------
# Which databases a visitor may open
#
# The sidebar's path is in the link (`?db=`), and a link is anyone's to write. A served dashboard
# opens only the project's results folder and what its owner set (ANATOMY_DB, ANATOMY_DASHBOARD_DBS),
# each path resolved first (links, `..`), and refuses anything else in one line that is the same
# whether the path exists or not: the page tells a visitor nothing about the server's files.

REFUSED = N_(
    "This dashboard opens only the databases in its results folder and those its owner lists in "
    "${variable}; the path asked for is not one of them."
)


def allowed_places() -> list[Path]:
    """Where a database the dashboard opens may be: each a file, or a folder and all under it."""
    places = [REPO_ROOT / "results", Path("results"), REFERENCE_DB, cached_path(REFERENCE_DIR)]
    owner_set = [os.environ.get(DB_ENV_VAR, ""), *os.environ.get(ALLOWED_ENV_VAR, "").split(os.pathsep)]
    return places + [Path(text) for text in owner_set if text]


def may_open(path: str) -> bool:
    """Whether `path`, its links and `..` resolved, is one of the allowed places or under one."""
    real = Path(os.path.realpath(path))
    for place in allowed_places():
        place = Path(os.path.realpath(place))
        if real == place or place in real.parents:
            return True
    return False


def check_may_open(path: str) -> None:
    """Raises DatabaseProblem (refused) for a path this dashboard does not open."""
    if not may_open(path):
        raise DatabaseProblem("refused", _(REFUSED).format(variable=ALLOWED_ENV_VAR))


def chosen_db_path() -> str:
    """The database chosen in the sidebar (or by the link), where this dashboard may open it;
    else the refusal is said and the page stops."""
    path = st.session_state.get("db_path") or default_db_path()
    try:
        check_may_open(path)
    except DatabaseProblem as problem:
        show_problem(problem)
        st.stop()
    return path


def database_path_text(text: str) -> str:
    """A database path as a link gives it (`?db=`): any path a person could type; a value no file
    system takes (a NUL, thousands of characters) raises ValueError, so the link's is dropped."""
    if "\x00" in text or len(text) > 4096:
        raise ValueError(text)
    return text


def reference_db() -> str | None:
    """The shipped reference results as a database (anatomy.results.reference_db): None where none
    are shipped, or where they cannot be collected (`_missing` says why)."""
    try:
        built = reference_database(REFERENCE_DIR, REFERENCE_DB)
    except AnatomyError:
        return None
    return None if built is None else str(built)


def is_reference(path: str) -> bool:
    """Whether `path` is the shipped results' database: beside them, or in the cache folder."""
    return Path(path).resolve() in (REFERENCE_DB.resolve(), cached_path(REFERENCE_DIR).resolve())


def runs_root(db_path: str) -> Path:
    """Where the run folders of a database are: results/reference/runs for the reference, else
    the runs/ folder beside the database (the layout `collect` and the workflow use)."""
    root = REFERENCE_DIR / "runs" if is_reference(db_path) else Path(db_path).parent / "runs"
    try:  # as the learner would type it, from the folder the dashboard was started in
        return root.resolve().relative_to(Path.cwd())
    except ValueError:
        return root


COLLECT_OWN = "python -m anatomy collect --runs results/runs --db results/anatomy.duckdb --json results/results.json"


def own_database_missing() -> bool:
    """Whether the learner's results folder shows a grid was run (run folders, or what a collect
    leaves beside its database: results.json, its lock) but holds no anatomy.duckdb: opening the
    reference then needs a word, or the learner takes it for their own results."""
    folders = {Path("results").resolve(), (REPO_ROOT / "results").resolve()}
    databases = [folder / Path(DEFAULT_DB).name for folder in folders]
    if any(db.exists() for db in databases):
        return False
    ran = [folder / "runs" for folder in folders if (folder / "runs").is_dir() and any((folder / "runs").iterdir())]
    collected = [path for db in databases for path in (db.with_name("results.json"), collect_lock_path(db))]
    return bool(ran) or any(path.exists() for path in collected)


def own_database_missing_note() -> str:
    return _(
        "Your database `results/anatomy.duckdb` is missing, though your results folder shows a grid was run: "
        "these pages show the shipped reference results instead. Make yours with `{command}`."
    ).format(command=COLLECT_OWN)


def reference_note() -> str:
    """One paragraph that labels the shipped results as reference, with their device and dates
    (grid.json, read by its owner, anatomy.results.reference; none said where it is unreadable)."""
    try:
        grid = read_provenance(REFERENCE_DIR / PROVENANCE_FILE).get("grid") or {}
    except AnatomyError:
        grid = {}
    said = [_("**Reference results**, shipped with the repository (`results/reference/`):")]
    if grid:
        said.append(
            _(
                "{n_runs} full-size runs, trained on {devices} ({machines}) with torch {torch_versions}, "
                "finished {first} to {last}."
            ).format(
                n_runs=grid.get("n_runs", "?"),
                devices=", ".join(grid.get("devices", [])),
                machines="; ".join(grid.get("machines", [])),
                torch_versions=", ".join(grid.get("torch_versions", [])),
                first=str(grid.get("first_finished_utc"))[:10],
                last=str(grid.get("last_finished_utc"))[:10],
            )
        )
    said.append(
        _(
            "Once you run the grid yourself (`{command}`), the dashboard opens your "
            "`results/anatomy.duckdb` instead and draws these as a grey band behind your curves."
        ).format(command=HEADLINE_COMMAND)
    )
    return sentences(said)


Version = tuple[int, int, int]


def file_version(path: str) -> Version:
    """Changes whenever collect renames a new database into place (a new inode). A path that is no
    file (a folder; a named pipe, which DuckDB would wait on for good) is said here, before any open."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        raise _missing(Path(path)) from None
    problem = database_path_problem(path)  # in the words `collect --db` and `report --db` use
    if problem is not None:
        raise DatabaseProblem(
            "invalid",
            _("{path} {problem}. Choose the file that `python -m anatomy collect` wrote.").format(
                path=markdown_literal(path), problem=problem
            ),
        )
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def _missing(path: Path) -> DatabaseProblem:
    # collect says whether it is writing the file (a temporary file it left when killed is no rebuild)

    shown = markdown_literal(path)
    if is_reference(str(path)):
        try:
            reference_database(REFERENCE_DIR, REFERENCE_DB)
        except AnatomyError as err:
            return DatabaseProblem(
                "invalid",
                # TRANSLATORS: {error} is the English reason: the folders it may not write, and what to set
                _("The shipped reference results cannot be shown: {error}").format(error=markdown_literal(err)),
            )
    if being_collected(path):
        return DatabaseProblem("rebuilding", _("The database {path} is being rebuilt right now.").format(path=shown))
    return DatabaseProblem("missing", _("There is no results database at {path} yet.").format(path=shown))


def _not_a_database(path: Path) -> DatabaseProblem | None:
    """A file that no rebuild will ever turn into a database: say what it is."""
    try:
        empty = path.stat().st_size == 0
    except OSError:
        return None
    if empty:
        return DatabaseProblem(
            "invalid",
            _(
                "{path} is an empty file, not a DuckDB database. Choose another file, or delete it and collect again."
            ).format(path=markdown_literal(path)),
        )
    if not starts_like_duckdb(path):
        return DatabaseProblem(
            "invalid",
            _(
                "{path} is not a DuckDB database (it does not start like one). "
                "Choose the file that `python -m anatomy collect` wrote."
            ).format(path=markdown_literal(path)),
        )
    return None


def first_line(err: Exception) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


def _in_words(path: str, err: duckdb.Error) -> DatabaseProblem | None:
    """What a DuckDB error met opening or querying `path` means for the learner (None: a bug)."""
    if isinstance(err, duckdb.CatalogException):
        return DatabaseProblem(
            "invalid",
            _("{path} is not a results database of this project ({error}). Rebuild it with collect.").format(
                path=markdown_literal(path), error=markdown_literal(err)
            ),
        )
    if isinstance(err, duckdb.PermissionException):  # a view that reads outside the database: refused
        return DatabaseProblem(
            "invalid",
            _(
                "{path} asks to read outside itself, which the dashboard refuses ({error}). Rebuild it with collect."
            ).format(path=markdown_literal(path), error=markdown_literal(err)),
        )
    if isinstance(err, duckdb.DataError):  # a crafted view's overflow or bad cast: said, not a raw error box
        return DatabaseProblem(
            "invalid",
            _("{path} cannot be read: a query on it failed on its data ({error}). Rebuild it with collect.").format(
                path=markdown_literal(path), error=markdown_literal(first_line(err))
            ),
        )
    if isinstance(err, (duckdb.IOException, duckdb.InvalidInputException, duckdb.SerializationException)):
        if not Path(path).exists():
            return _missing(Path(path))
        not_a_database = _not_a_database(Path(path))
        if not_a_database is not None:
            return not_a_database
        # a lock held by a writer, or a file caught half-way through a copy
        return DatabaseProblem(
            "rebuilding",
            _("The database {path} cannot be opened right now; it may be being rebuilt ({error}).").format(
                path=markdown_literal(path), error=markdown_literal(err)
            ),
        )
    return None


def open_database(path: str) -> tuple[Version, ReadOnlyConnection]:
    """A read-only connection to `path`, and the version of the file it reads. Raises DatabaseProblem."""
    check_may_open(path)  # before anything looks at the path: whether it exists is no visitor's business
    while True:
        version = file_version(path)
        try:
            con = open_read_only(path)
        except duckdb.Error as err:
            if (problem := _in_words(path, err)) is None:
                raise
            raise problem from None
        if file_version(path) == version:  # no new file renamed into place meanwhile: `con` reads `version`
            return version, con
        con.close()  # a collect landed just then: open the new file


@contextmanager
def read_in_words(path: str) -> Iterator[None]:
    """Reading `path`: what goes wrong becomes a DatabaseProblem in the learner's words, one line,
    never a raw error box (a DuckDB error no crafted database can cause is a bug, and raised)."""
    try:
        yield
    except ReadLimitExceeded as err:  # a crafted or huge database: the bound's one line, not a traceback
        raise DatabaseProblem("invalid", markdown_literal(str(err))) from None
    except ForeignDatabase as foreign:  # not "collect it again": collect does not replace it
        raise DatabaseProblem("invalid", str(foreign)) from None
    except OutdatedDatabase as outdated:
        raise DatabaseProblem("outdated", str(outdated)) from None
    except duckdb.Error as err:
        if (problem := _in_words(path, err)) is None:
            raise
        raise problem from None


def execute(con: ReadOnlyConnection, path: str, sql: str) -> pd.DataFrame:
    """One query on an open connection to `path`, no more rows than a results database holds
    (reader.bounded_table), its errors in words."""
    with read_in_words(path):
        return bounded_table(con, path, sql)


def run_query(path: str, sql: str) -> pd.DataFrame:
    """One query on its own short read-only connection."""
    _version, con = open_database(path)
    with con:
        return execute(con, path, sql)


# ---------------------------------------------------------------------------------------------
# One render reads one database
#
# A page makes several queries, and collect may put a new file in place between two of them (the
# README invites watching a grid fill in). Had each query opened the file anew, one render could
# draw the runs of the old database beside the experiments of the new one. So a render opens each
# database once, at its first query, and makes all its queries on that connection: it reads the
# file it opened even after collect renames a new one over it (the old file lives on while open).
# The app closes them when the render ends, so the next render reads the new file.

# {path: (version, connection)} of the render running in this thread (a session's script thread)
_render = threading.local()


@contextmanager
def one_database_per_render() -> Iterator[None]:
    """Wraps each run of the app (streamlit_app.py): the connections its queries open stay open
    until it ends, then close."""
    _render.databases = {}
    try:
        yield
    finally:
        databases, _render.databases = _render.databases, None
        for _version, con in databases.values():
            con.close()


@contextmanager
def database(path: str) -> Iterator[tuple[Version, ReadOnlyConnection]]:
    """The connection to read `path` on, and the version it reads: the render's, opened at its
    first query; outside a render (a test, a script), one for this read alone."""
    databases = getattr(_render, "databases", None)
    if databases is None:
        version, con = open_database(path)
        with con:
            yield version, con
        return
    if path not in databases:
        databases[path] = open_database(path)
    yield databases[path]


@st.cache_data(show_spinner=False, max_entries=64)
def _cached_query(path: str, version: Version, sql: str, _con: ReadOnlyConnection) -> pd.DataFrame:
    # keyed by path, version and sql: `_con` reads that version (Streamlit leaves _names out of the key)
    return execute(_con, path, sql)


def query(path: str, sql: str) -> pd.DataFrame:
    """`sql` on the database at `path`, as this render reads it."""
    with database(path) as (version, con):
        return _cached_query(path, version, sql, con)


@st.cache_data(show_spinner=False, max_entries=4)
def _cached_results(path: str, version: Version, _con: ReadOnlyConnection) -> Results:
    with read_in_words(path):
        return read(_con, path)


def load_results(path: str) -> Results:
    """Everything the database holds, as the report reads it (anatomy.results.reader.read), read
    once per version of the file and cached. Raises DatabaseProblem."""
    with database(path) as (version, con):
        return _cached_results(path, version, con)


def grad_norms_of(path: str, run_id: str) -> pd.DataFrame:
    """One run's gradient norms, every block and logged step."""
    with database(path) as (_version, con), read_in_words(path):
        return reader.grad_norms_of(con, run_id)


def corpora(results: Results, experiments: list[str]) -> list[dict]:
    """What the runs of these experiments record of their corpus (config.json's data), one dict
    per distinct corpus, values as recorded; anatomy.results.reference.corpus_differences tells two apart."""
    runs = results.runs[results.runs["experiment"].isin(experiments)]
    facts = [
        {key: int(run[key]) for key in CORPUS_FACTS if key in run and pd.notna(run[key])}
        for _index, run in runs.iterrows()
    ]
    return list({json.dumps(fact, sort_keys=True, default=str): fact for fact in facts}.values())  # distinct ones


def run_exams_help(exam: str) -> str:
    """The commands that fill one exam's tables."""
    return _(
        "`snakemake --cores 1 exams` runs every exam; this one by hand: `python -m anatomy exam {exam} ...` "
        "(`--help` says what it needs), then collect again."
    ).format(exam=exam)


def show_problem(problem: DatabaseProblem) -> None:
    """A database that cannot be read, in words for the learner."""
    if problem.kind == "missing":
        make_one = _(MAKE_DATABASE_HELP).format(quick=QUICK_GRID_COMMAND, headline=HEADLINE_COMMAND)
        st.info(sentences([str(problem), make_one]), icon=":material/database:")
    elif problem.kind in ("rebuilding", "outdated"):
        wait = [_("Wait a few seconds, then reload.")] if problem.kind == "rebuilding" else []
        st.warning(sentences([str(problem), *wait]), icon=":material/hourglass_top:")
        st.button(_("Reload"), on_click=st.cache_data.clear)
    else:
        st.error(str(problem), icon=":material/warning:")


def require_results(runs_needed: bool = True) -> Results:
    """The results of the database chosen in the sidebar, or a friendly message and stop. The Exams
    page needs no runs (the depth map and the wall clock are none): it passes runs_needed=False."""
    path = st.session_state.get("db_path") or default_db_path()
    try:
        results = load_results(path)
    except DatabaseProblem as problem:
        show_problem(problem)
        st.stop()
    if runs_needed and results.runs.empty:
        st.info(
            _(
                "The database {path} holds no runs yet: the grid has not finished its first run. "
                "Reload once a run folder has been collected."
            ).format(path=markdown_literal(path)),
            icon=":material/hourglass_top:",
        )
        st.stop()
    return results
