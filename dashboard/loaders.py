"""Reading the results database: the only place the dashboard touches DuckDB.

`python -m anatomy collect` replaces the file while the dashboard runs. Each render of a page
opens the database once, makes all its queries on that read-only connection and closes it
when the render ends: one render reads one database, even if a collect lands in the middle of
it (`one_database_per_render`), and the next render reads the new one. Results are cached by
Streamlit and keyed on the file's identity, so a rebuilt database is picked up on the next rerun.

What can go wrong is turned into a `DatabaseProblem` with words for the learner: no
database yet, a database being rebuilt, a file that is not a results database.

Before the learner has run anything, the dashboard shows the reference results shipped in
`results/reference/` (a full-size grid): `reference_db()` collects them into
`results/reference.duckdb` on first use, and again whenever the shipped files change.
"""

from __future__ import annotations

import json
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import duckdb
import pandas as pd
import streamlit as st

from anatomy.errors import AnatomyError
from anatomy.reference import CORPUS_FACTS
from anatomy.report_data import load
from anatomy.results import being_collected, collect, database_path_problem, missing_columns, open_read_only

DEFAULT_DB = "results/anatomy.duckdb"
DB_ENV_VAR = "ANATOMY_DB"
REPO_ROOT = Path(__file__).resolve().parent.parent
# the full-size grid's small files, committed, and the database built from them (not committed)
REFERENCE_DIR = REPO_ROOT / "results" / "reference"
REFERENCE_DB = REPO_ROOT / "results" / "reference.duckdb"

MAKE_DATABASE_HELP = (
    "Make one from the repository root with `snakemake --cores 1 headline` "
    "(vanilla vs mini-LLaMA over both seeds) or `snakemake --cores 1` (the whole grid). "
    "Runs trained by hand are collected with "
    "`python -m anatomy collect --runs results/runs --db results/anatomy.duckdb --json results/results.json`."
)


class DatabaseProblem(Exception):
    """The database cannot be read right now; `kind` is missing, rebuilding, outdated or invalid."""

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
    return reference_db() or DEFAULT_DB


def reference_db() -> str | None:
    """The shipped reference results as a database, (re)built when missing or older than them."""
    runs = REFERENCE_DIR / "runs"
    if not runs.is_dir():
        return None
    newest = max(path.stat().st_mtime_ns for path in REFERENCE_DIR.rglob("*") if path.is_file())
    if not REFERENCE_DB.exists() or REFERENCE_DB.stat().st_mtime_ns < newest or _made_by_older_version(REFERENCE_DB):
        collect(
            runs, REFERENCE_DB, None, REFERENCE_DIR / "benchmarks", allow_empty=True, exams_root=REFERENCE_DIR / "exams"
        )
    return str(REFERENCE_DB)


def _made_by_older_version(path: Path) -> bool:
    """Whether a database lacks columns of this version's schema (built before an upgrade)."""

    try:
        with open_read_only(path) as con:
            found = con.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall()
    except duckdb.Error:
        return True  # unreadable: rebuilding it is the fix
    return bool(missing_columns(set(found)))


def is_reference(path: str) -> bool:
    return Path(path).resolve() == REFERENCE_DB.resolve()


def runs_root(db_path: str) -> Path:
    """Where the run folders of a database are: results/reference/runs for the reference, else
    the runs/ folder beside the database (the layout `collect` and the workflow use)."""
    root = REFERENCE_DIR / "runs" if is_reference(db_path) else Path(db_path).parent / "runs"
    try:  # as the learner would type it, from the folder the dashboard was started in
        return root.resolve().relative_to(Path.cwd())
    except ValueError:
        return root


def reference_provenance() -> dict:
    """Where and when the reference runs were made (results/reference/grid.json), or {}."""
    try:
        return json.loads((REFERENCE_DIR / "grid.json").read_text(encoding="utf-8")).get("grid", {})
    except (OSError, ValueError, AttributeError):
        return {}


def reference_note() -> str:
    """One paragraph that labels the shipped results as reference, with their device and dates."""
    grid = reference_provenance()
    made = ""
    if grid:
        made = (
            f" {grid.get('n_runs', '?')} full-size runs, trained on {', '.join(grid.get('devices', []))} "
            f"({'; '.join(grid.get('machines', []))}) with torch {', '.join(grid.get('torch_versions', []))}, "
            f"finished {str(grid.get('first_finished_utc'))[:10]} to {str(grid.get('last_finished_utc'))[:10]}."
        )
    return (
        "**Reference results**, shipped with the repository (`results/reference/`):"
        + made
        + " Once you run the grid yourself (`snakemake --cores 1`), the dashboard opens your "
        "`results/anatomy.duckdb` instead and draws these as a grey band behind your curves."
    )


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
        raise DatabaseProblem("invalid", f"`{path}` {problem}. Choose the file that `python -m anatomy collect` wrote.")
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def _missing(path: Path) -> DatabaseProblem:
    # collect says whether it is writing the file (a temporary file it left when killed is no rebuild)

    if being_collected(path):
        return DatabaseProblem("rebuilding", f"The database `{path}` is being rebuilt right now.")
    return DatabaseProblem("missing", f"There is no results database at `{path}` yet.")


DUCKDB_MAGIC = b"DUCK"  # bytes 8-11 of every DuckDB database file


def _not_a_database(path: Path) -> DatabaseProblem | None:
    """A file that no rebuild will ever turn into a database: say what it is."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(12)
    except OSError:
        return None
    if not head:
        return DatabaseProblem(
            "invalid",
            f"`{path}` is an empty file, not a DuckDB database. Choose another file, or delete it and collect again.",
        )
    if head[8:12] != DUCKDB_MAGIC:
        return DatabaseProblem(
            "invalid",
            f"`{path}` is not a DuckDB database (it does not start like one). "
            "Choose the file that `python -m anatomy collect` wrote.",
        )
    return None


def _in_words(path: str, err: duckdb.Error) -> DatabaseProblem | None:
    """What a DuckDB error met opening or querying `path` means for the learner (None: a bug)."""
    if isinstance(err, duckdb.CatalogException):
        return DatabaseProblem(
            "invalid", f"`{path}` is not a results database of this project ({err}). Rebuild it with collect."
        )
    if isinstance(err, duckdb.PermissionException):  # a view that reads outside the database: refused
        return DatabaseProblem(
            "invalid",
            f"`{path}` asks to read outside itself, which the dashboard refuses ({err}). Rebuild it with collect.",
        )
    if isinstance(err, (duckdb.IOException, duckdb.InvalidInputException, duckdb.SerializationException)):
        if not Path(path).exists():
            return _missing(Path(path))
        not_a_database = _not_a_database(Path(path))
        if not_a_database is not None:
            return not_a_database
        # a lock held by a writer, or a file caught half-way through a copy
        return DatabaseProblem(
            "rebuilding", f"The database `{path}` cannot be opened right now; it may be being rebuilt ({err})."
        )
    return None


def open_database(path: str) -> tuple[Version, duckdb.DuckDBPyConnection]:
    """A read-only connection to `path`, and the version of the file it reads. Raises DatabaseProblem."""
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


def execute(con: duckdb.DuckDBPyConnection, path: str, sql: str) -> pd.DataFrame:
    """One query on an open connection to `path`, its errors in words."""
    try:
        return con.execute(sql).df()
    except duckdb.Error as err:
        if (problem := _in_words(path, err)) is None:
            raise
        raise problem from None


def run_query(path: str, sql: str) -> pd.DataFrame:
    """One query on its own short read-only connection."""
    _, con = open_database(path)
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
        for _, con in databases.values():
            con.close()


@contextmanager
def database(path: str) -> Iterator[tuple[Version, duckdb.DuckDBPyConnection]]:
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
def _cached_query(path: str, version: Version, sql: str, _con: duckdb.DuckDBPyConnection) -> pd.DataFrame:
    # keyed by path, version and sql: `_con` reads that version (Streamlit leaves _names out of the key)
    return execute(_con, path, sql)


def query(path: str, sql: str) -> pd.DataFrame:
    """`sql` on the database at `path`, as this render reads it."""
    with database(path) as (version, con):
        return _cached_query(path, version, sql, con)


def corpora(path: str, experiments: list[str]) -> list[dict]:
    """What the runs of these experiments record of their corpus (config.json's data), one dict
    per distinct corpus, values as recorded; anatomy.reference.corpus_differences tells two apart."""

    names = ", ".join("'" + name.replace("'", "''") + "'" for name in experiments)
    found = query(
        path,
        "SELECT DISTINCT CAST(json_extract(config, '$.data') AS VARCHAR) AS data "
        f"FROM runs WHERE experiment IN ({names or 'NULL'})",
    )
    records = [json.loads(text) if isinstance(text, str) else None for text in found["data"]]
    facts = [
        {key: record[key] for key in CORPUS_FACTS if key in record} for record in records if isinstance(record, dict)
    ]
    return list({json.dumps(fact, sort_keys=True): fact for fact in facts}.values())  # distinct ones


@dataclass
class Results:
    """The database's tables and views as DataFrames, plus a label per run for the charts.
    Every number here is computed by a view of anatomy/schema.sql; the pages only reshape them."""

    path: str
    runs: pd.DataFrame  # the run_summary view, one row per run (its model settings too), with "label"
    metrics: pd.DataFrame  # one row per evaluation, with the run's label, experiment and seed
    experiments: pd.DataFrame  # the experiment_summary view
    band: pd.DataFrame  # the seed_band view: val loss over seeds, per experiment and step
    above_best: pd.DataFrame  # the val_above_best view: each val after a run's best, above that best
    comparisons: pd.DataFrame  # the baseline_summary view: each experiment against its baseline
    ablations: pd.DataFrame  # the ablation_summary view
    samples: pd.DataFrame
    memorisation: pd.DataFrame  # the sample_memorisation view: copied share per sample and step

    @property
    def headline(self) -> pd.DataFrame:
        return self.runs[self.runs["group"] == "headline"]


def run_label(experiment: str, seed) -> str:
    return f"{experiment} · seed {seed}" if pd.notna(seed) else str(experiment)


def check_schema(path: str) -> None:
    """A database made by an older version lacks columns the views read: say so, not crash."""

    found = query(path, "SELECT table_name, column_name FROM information_schema.columns")
    missing = missing_columns(set(zip(found["table_name"], found["column_name"])))
    if missing:
        raise DatabaseProblem(
            "outdated",
            f"`{path}` was made by an older version of this project (it has no {', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}). Collect it again to rebuild it from the run folders: "
            f"`python -m anatomy collect --runs results/runs --db {path}`.",
        )


def load_results(path: str) -> Results:
    """All the dashboard reads, in a few queries. Raises DatabaseProblem."""
    check_schema(path)
    runs = query(path, """SELECT * FROM run_summary ORDER BY "group" = 'headline' DESC, experiment, seed""")
    runs["label"] = [run_label(e, s) for e, s in zip(runs["experiment"], runs["seed"])]
    metrics = query(path, "SELECT * FROM metrics ORDER BY run_id, step")
    metrics = metrics.merge(runs[["run_id", "label", "experiment", "seed", "status"]], on="run_id")
    samples = query(path, "SELECT * FROM samples ORDER BY run_id, sample_idx").merge(
        runs[["run_id", "label", "experiment"]], on="run_id"
    )
    return Results(
        path=path,
        runs=runs,
        metrics=metrics,
        experiments=query(path, "SELECT * FROM experiment_summary ORDER BY experiment"),
        band=query(path, "SELECT * FROM seed_band ORDER BY experiment, step"),
        above_best=query(path, "SELECT * FROM val_above_best ORDER BY run_id, step"),
        comparisons=query(path, "SELECT * FROM baseline_summary ORDER BY baseline, experiment"),
        ablations=query(path, "SELECT * FROM ablation_summary ORDER BY part, direction"),
        samples=samples,
        memorisation=query(path, "SELECT * FROM sample_memorisation ORDER BY run_id, step").merge(
            runs[["run_id", "label"]], on="run_id"
        ),
    )


def require_results() -> Results:
    """The results for the database chosen in the sidebar, or a friendly message and stop."""
    path = st.session_state.get("db_path") or default_db_path()
    try:
        results = load_results(path)
    except DatabaseProblem as problem:
        if problem.kind == "missing":
            st.info(f"{problem} {MAKE_DATABASE_HELP}", icon=":material/database:")
        elif problem.kind in ("rebuilding", "outdated"):
            wait = " Wait a few seconds, then reload." if problem.kind == "rebuilding" else ""
            st.warning(f"{problem}{wait}", icon=":material/hourglass_top:")
            st.button("Reload", on_click=st.cache_data.clear)
        else:
            st.error(str(problem), icon=":material/warning:")
        st.stop()
    if results.runs.empty:
        st.info(
            f"The database `{path}` holds no runs yet: the grid has not finished its first run. "
            "Reload once a run folder has been collected.",
            icon=":material/hourglass_top:",
        )
        st.stop()
    return results


# ---------------------------------------------------------------------------------------------
# The exams (anatomy/exams/): each part tested where it is made to pay. Read apart from
# `load_results`: the depth map and the wall clock are not grid runs, so the Exams page has
# something to show even while the grid has no runs, and each exam says for itself when it is empty.

EXAM_TABLES = (
    "exam_length",
    "exam_kv_cache",
    "exam_kv_timing",
    "exam_kv_scale",
    "exam_depth",
    "grad_norms",
    "exam_wall_clock",
    "depth_stability",
    "grad_norm_spread",
)
DEPTH_CELL_PREFIX = "depth/"  # grad_norms.run_id of a depth-map cell: "depth/" + exam_depth.cell


def run_exams_help(exam: str) -> str:
    """The commands that fill one exam's tables."""
    return (
        f"`snakemake --cores 1 exams` runs every exam; this one by hand: `python -m anatomy exam {exam} ...` "
        "(`--help` says what it needs), then collect again."
    )


@dataclass
class ExamResults:
    """The exam tables as DataFrames; rows tied to a grid run carry its label and model settings."""

    path: str
    runs: pd.DataFrame  # one row per grid run: label, experiment, group, part and the model fields of MODEL_FIELDS
    length: pd.DataFrame  # exam_length + the run's label, experiment, group, part and `positions`
    kv_cache: pd.DataFrame  # exam_kv_cache + label, experiment, n_head and `attention` (MHA | GQA | MQA)
    kv_timing: pd.DataFrame  # exam_kv_timing + the same
    kv_scale: pd.DataFrame
    depth: pd.DataFrame  # exam_depth, one row per cell of the stability map
    depth_stability: pd.DataFrame  # the depth_stability view
    grad_norm_runs: (
        pd.DataFrame
    )  # per run with gradient norms: label, layers, steps, norm_pos (a run's norms: grad_norms_of)
    grad_norm_spread: pd.DataFrame  # the grad_norm_spread view + label
    wall_clock: pd.DataFrame


# the model settings the exams turn on: columns of the runs table
MODEL_FIELDS = ("pos_type", "rope_break", "n_head", "n_kv_head", "n_layer", "norm_pos", "ctx_len")


def position_kind(pos_type: str, rope_break: str) -> str:
    """How a model knows positions: RoPE, a broken RoPE, or a learned table."""
    if pos_type != "rope":
        return "learned positions"
    if rope_break and rope_break != "none":
        return "RoPE broken: " + str(rope_break).replace("_", " ")
    return "RoPE"


def attention_kind(n_head: int, n_kv_head: int) -> str:
    """MHA (a KV head per query head), MQA (one for all) or GQA (groups in between)."""
    if n_kv_head >= n_head:
        return "MHA"
    return "MQA" if n_kv_head == 1 else "GQA"


def missing_exam_tables(path: str) -> list[str]:
    found = set(query(path, "SELECT table_name FROM information_schema.tables")["table_name"])
    return [name for name in EXAM_TABLES if name not in found]


def exam_runs(path: str) -> pd.DataFrame:
    runs = query(
        path,
        f'SELECT run_id, experiment, seed, "group", part, status, {", ".join(MODEL_FIELDS)} FROM runs ORDER BY run_id',
    )
    runs["label"] = [run_label(e, s) for e, s in zip(runs["experiment"], runs["seed"])]
    runs["positions"] = [position_kind(p, b) for p, b in zip(runs["pos_type"], runs["rope_break"])]
    return runs


def _with_attention(rows: pd.DataFrame, runs: pd.DataFrame) -> pd.DataFrame:
    rows = rows.merge(runs[["run_id", "label", "experiment", "n_head"]], on="run_id", how="left")
    # a row whose run is not in the database (cannot happen with the foreign key) still gets a name
    rows["label"] = rows["label"].fillna(rows["run_id"])
    rows["attention"] = [
        attention_kind(h, kv) if pd.notna(h) else f"{kv} KV heads" for h, kv in zip(rows["n_head"], rows["n_kv_head"])
    ]
    return rows


def grad_norm_label(run_id: str, runs: pd.DataFrame, depth: pd.DataFrame) -> str:
    """A grid run by its label, a depth-map cell by its wiring and learning rate."""
    grid = runs[runs["run_id"] == run_id]
    if not grid.empty:
        return grid["label"].iloc[0]
    cell = depth[DEPTH_CELL_PREFIX + depth["cell"] == run_id]
    if not cell.empty:
        return f"depth map: {cell['norm_pos'].iloc[0]}-norm, lr {cell['lr'].iloc[0]:g}"
    return run_id


def _grad_norm_runs(path: str, runs: pd.DataFrame, depth: pd.DataFrame) -> pd.DataFrame:
    found = query(
        path,
        """
        SELECT run_id, max(layer) + 1 AS layers, count(DISTINCT step) AS steps, max(step) AS last_step
        FROM grad_norms GROUP BY run_id ORDER BY run_id""",
    )
    found["label"] = [grad_norm_label(run_id, runs, depth) for run_id in found["run_id"]]
    norm_pos = dict(zip(runs["run_id"], runs["norm_pos"]))
    norm_pos.update(zip(DEPTH_CELL_PREFIX + depth["cell"], depth["norm_pos"]))
    found["norm_pos"] = found["run_id"].map(norm_pos)
    found["depth_map"] = found["run_id"].str.startswith(DEPTH_CELL_PREFIX)
    return found


def _sql_text(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def grad_norms_of(path: str, run_id: str) -> pd.DataFrame:
    """One run's gradient norms, every block and logged step."""
    return query(
        path, f"SELECT step, layer, norm FROM grad_norms WHERE run_id = {_sql_text(run_id)} ORDER BY step, layer"
    )


def load_exams(path: str) -> ExamResults:
    """Every exam table, in a few queries. Raises DatabaseProblem (a database made before the
    exams existed is 'outdated': collecting again adds the tables)."""
    missing = missing_exam_tables(path)
    if missing:
        raise DatabaseProblem(
            "outdated",
            f"`{path}` was collected before the exams existed (it has no {', '.join(missing[:3])}"
            f"{', ...' if len(missing) > 3 else ''}). Collect it again to add them: "
            f"`python -m anatomy collect --runs results/runs --db {path}`.",
        )
    check_schema(path)
    runs = exam_runs(path)
    length = query(path, "SELECT * FROM exam_length ORDER BY run_id, window_len, bucket_start").merge(
        runs[["run_id", "label", "experiment", "group", "part", "positions"]], on="run_id", how="left"
    )
    depth = query(path, "SELECT * FROM exam_depth ORDER BY norm_pos, lr")
    grad_norm_runs = _grad_norm_runs(path, runs, depth)
    spread = query(path, "SELECT * FROM grad_norm_spread ORDER BY run_id, step").merge(
        grad_norm_runs[["run_id", "label"]], on="run_id", how="left"
    )
    return ExamResults(
        path=path,
        runs=runs,
        length=length,
        kv_cache=_with_attention(
            query(path, "SELECT * FROM exam_kv_cache ORDER BY n_kv_head DESC, run_id, tokens"), runs
        ),
        kv_timing=_with_attention(
            query(path, "SELECT * FROM exam_kv_timing ORDER BY n_kv_head DESC, run_id, context, cached"), runs
        ),
        kv_scale=query(path, "SELECT * FROM exam_kv_scale ORDER BY bytes DESC"),
        depth=depth,
        depth_stability=query(path, "SELECT * FROM depth_stability ORDER BY norm_pos"),
        grad_norm_runs=grad_norm_runs,
        grad_norm_spread=spread,
        wall_clock=query(path, "SELECT * FROM exam_wall_clock ORDER BY part, variant, impl"),
    )


def show_problem(problem: DatabaseProblem) -> None:
    """A database that cannot be read, in words for the learner (as `require_results` says it)."""
    if problem.kind == "missing":
        st.info(f"{problem} {MAKE_DATABASE_HELP}", icon=":material/database:")
    elif problem.kind in ("rebuilding", "outdated"):
        wait = " Wait a few seconds, then reload." if problem.kind == "rebuilding" else ""
        st.warning(f"{problem}{wait}", icon=":material/hourglass_top:")
        st.button("Reload", on_click=st.cache_data.clear)
    else:
        st.error(str(problem), icon=":material/warning:")


# ---------------------------------------------------------------------------------------------
# The studies (anatomy/groups.py): their pages show the report's own sentences, so they read the
# database as the report does (anatomy.report_data.load), not through the queries above.


class DatabaseChanged(Exception):
    """A collect renamed a new file into place while it was being read."""


@st.cache_data(show_spinner=False, max_entries=4)
def _cached_report_data(path: str, version: Version):

    data = load(Path(path))  # on one connection of its own: one file, but which one?
    if file_version(path) != version:  # `version` before the load and after it: the file it read
        raise DatabaseChanged  # (nothing is cached)
    return data


def load_report_data(path: str):
    """Every run of the database, the grid's and the studies', as `anatomy report` reads them
    (an anatomy.report_data.ReportData), in one read: the Studies page draws from it alone.
    Raises DatabaseProblem."""

    check_schema(path)  # a missing, busy, foreign or older database, in the words of every page
    while True:
        try:
            return _cached_report_data(path, file_version(path))
        except DatabaseChanged:
            continue  # a collect landed during the read: read the new file
        except AnatomyError as err:  # what the schema check cannot see; the report's own words
            raise DatabaseProblem("invalid", str(err)) from None


def require_exams() -> ExamResults:
    """The exam results of the database chosen in the sidebar, or a friendly message and stop.
    A database with no runs is not stopped here: the depth map and the wall clock need none."""
    path = st.session_state.get("db_path") or default_db_path()
    try:
        return load_exams(path)
    except DatabaseProblem as problem:
        show_problem(problem)
        st.stop()
