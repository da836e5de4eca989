"""Reading the results database: the only place the dashboard touches DuckDB.

Every query opens its own read-only connection and closes it at once (`python -m anatomy
collect` replaces the file while the dashboard runs, and a held connection would keep
reading the old one). Results are cached by Streamlit and keyed on the file's identity, so
a rebuilt database is picked up on the next rerun.

What can go wrong is turned into a `DatabaseProblem` with words for the learner: no
database yet, a database being rebuilt, a file that is not a results database.

Before the learner has run anything, the dashboard shows the reference results shipped in
`results/reference/` (a full-size grid): `reference_db()` collects them into
`results/reference.duckdb` on first use, and again whenever the shipped files change.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
import streamlit as st

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
        from anatomy.results import collect  # the one writer of databases, as for any collect

        collect(runs, REFERENCE_DB, None, REFERENCE_DIR / "benchmarks", allow_empty=True)
    return str(REFERENCE_DB)


def _made_by_older_version(path: Path) -> bool:
    """Whether a database lacks columns of this version's schema (built before an upgrade)."""
    from anatomy.results import missing_columns

    try:
        with duckdb.connect(str(path), read_only=True) as con:
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
        made = (f" {grid.get('n_runs', '?')} full-size runs, trained on {', '.join(grid.get('devices', []))} "
                f"({'; '.join(grid.get('machines', []))}) with torch {', '.join(grid.get('torch_versions', []))}, "
                f"finished {str(grid.get('first_finished_utc'))[:10]} to {str(grid.get('last_finished_utc'))[:10]}.")
    return ("**Reference results**, shipped with the repository (`results/reference/`):" + made
            + " Once you run the grid yourself (`snakemake --cores 1`), the dashboard opens your "
              "`results/anatomy.duckdb` instead and draws these as a grey band behind your curves.")


def file_version(path: str) -> tuple[int, int, int]:
    """Changes whenever collect renames a new database into place (a new inode)."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        raise _missing(Path(path)) from None
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)


def _missing(path: Path) -> DatabaseProblem:
    # collect builds the new file as .anatomy.duckdb.XXXX.tmp beside the target, holding its lock;
    # a temporary file without the lock held is a leftover of a killed collect, not a rebuild
    from anatomy.locks import is_locked
    from anatomy.results import collect_lock_path

    if path.parent.is_dir() and any(path.parent.glob(f".{path.name}.*.tmp")) and is_locked(collect_lock_path(path)):
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
        return DatabaseProblem("invalid", f"`{path}` is an empty file, not a DuckDB database. "
                                          "Choose another file, or delete it and collect again.")
    if head[8:12] != DUCKDB_MAGIC:
        return DatabaseProblem("invalid", f"`{path}` is not a DuckDB database (it does not start like one). "
                                          "Choose the file that `python -m anatomy collect` wrote.")
    return None


def run_query(path: str, sql: str) -> pd.DataFrame:
    """One query on its own short read-only connection."""
    try:
        with duckdb.connect(path, read_only=True) as con:
            return con.execute(sql).df()
    except duckdb.CatalogException as err:
        raise DatabaseProblem(
            "invalid", f"`{path}` is not a results database of this project ({err}). Rebuild it with collect."
        ) from None
    except (duckdb.IOException, duckdb.InvalidInputException, duckdb.SerializationException) as err:
        if not Path(path).exists():
            raise _missing(Path(path)) from None
        not_a_database = _not_a_database(Path(path))
        if not_a_database is not None:
            raise not_a_database from None
        # a lock held by a writer, or a file caught half-way through a copy
        raise DatabaseProblem(
            "rebuilding", f"The database `{path}` cannot be opened right now; it may be being rebuilt ({err})."
        ) from None


@st.cache_data(show_spinner=False, max_entries=64)
def _cached_query(path: str, version: tuple[int, int, int], sql: str) -> pd.DataFrame:
    del version  # only part of the cache key
    return run_query(path, sql)


def query(path: str, sql: str) -> pd.DataFrame:
    return _cached_query(path, file_version(path), sql)


@dataclass
class Results:
    """The database's tables and views as DataFrames, plus a label per run for the charts."""

    path: str
    runs: pd.DataFrame  # the run_summary view, one row per run, with "label" and "n_layer"
    metrics: pd.DataFrame  # one row per evaluation, with the run's label, experiment and seed
    experiments: pd.DataFrame  # the experiment_summary view
    ablations: pd.DataFrame  # the ablation_summary view
    samples: pd.DataFrame
    memorisation: pd.DataFrame  # the sample_memorisation view: copied share per sample and step

    @property
    def headline(self) -> pd.DataFrame:
        return self.runs[self.runs["group"] == "headline"]


def run_label(experiment: str, seed) -> str:
    return f"{experiment} · seed {seed}" if pd.notna(seed) else str(experiment)


def _n_layer(config_json: str) -> float:
    try:
        return float(json.loads(config_json)["model"]["n_layer"])
    except (TypeError, ValueError, KeyError):
        return float("nan")


def check_schema(path: str) -> None:
    """A database made by an older version lacks columns the views read: say so, not crash."""
    from anatomy.results import missing_columns

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
    runs = query(path, """
        SELECT s.*, r.config FROM run_summary s JOIN runs r USING (run_id)
        ORDER BY s."group" = 'headline' DESC, s.experiment, s.seed""")
    runs["label"] = [run_label(e, s) for e, s in zip(runs["experiment"], runs["seed"])]
    runs["n_layer"] = runs.pop("config").map(_n_layer)
    metrics = query(path, "SELECT * FROM metrics ORDER BY run_id, step")
    metrics = metrics.merge(runs[["run_id", "label", "experiment", "seed", "status"]], on="run_id")
    samples = query(path, "SELECT * FROM samples ORDER BY run_id, sample_idx").merge(
        runs[["run_id", "label", "experiment"]], on="run_id")
    return Results(
        path=path,
        runs=runs,
        metrics=metrics,
        experiments=query(path, "SELECT * FROM experiment_summary ORDER BY experiment"),
        ablations=query(path, "SELECT * FROM ablation_summary ORDER BY part, direction"),
        samples=samples,
        memorisation=query(path, "SELECT * FROM sample_memorisation ORDER BY run_id, step").merge(
            runs[["run_id", "label"]], on="run_id"),
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
        st.info(f"The database `{path}` holds no runs yet: the grid has not finished its first run. "
                "Reload once a run folder has been collected.", icon=":material/hourglass_top:")
        st.stop()
    return results
