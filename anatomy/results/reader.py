"""Reading a results database: the one reader of the report, the claims and the dashboard.

`read` turns an open read-only connection into one `Results`: the database's summary views and
exam tables as DataFrames, each run with its model settings and its roles. Every number in it
is computed by a view of anatomy/results/schema.sql; the roles (how a model knows positions, how many KV
heads it shares) are computed there too, once, from the model settings, so they hold for any
experiment name. The report and the dashboard only reshape and word them.

`load` reads a database by path (the report's `--db`); the dashboard opens its connection itself,
to read one file per render and cache the result. Either way the file is opened as
anatomy/results/database.py says; the reader never imports the writer (collect), and reads the
model settings from the columns collect stored, never from config.json again.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from anatomy.config import ModelConfig
from anatomy.errors import AnatomyError
from anatomy.language import N_, _
from anatomy.results.database import (
    REBUILD_ADVICE,
    ReadLimitExceeded,
    ReadOnlyConnection,
    check_database_path,
    check_row_counts,
    missing_columns,
    missing_own_tables,
    open_read_only,
    row_limit,
)

MODEL_FIELDS = {field.name for field in dataclasses.fields(ModelConfig)}
# What `Results.runs` holds of each run's settings, after run_summary's columns: every model
# setting (its vocabulary is the corpus's), how many of the five parts it has (the llama_parts
# macro), and the training settings a study compares. Whole numbers as 64-bit integers (NaN where
# one was not recorded: a run from before vocab_size was).
SETTINGS = (
    *(field.name for field in dataclasses.fields(ModelConfig)),
    "n_parts",
    "lr",
    "schedule",
    "warmup_steps",
    "optimizer",
)
WHOLE_NUMBERS = {"vocab_size", "d_model", "n_layer", "n_head", "n_kv_head", "ctx_len", "n_parts", "warmup_steps"}
WHOLE_NUMBERS |= {"kv_latent", "rope_dim", "n_experts", "top_k"}  # the parts of 2024-26
DEPTH_CELL_PREFIX = "depth/"  # grad_norms.run_id of a depth-map cell: "depth/" + exam_depth.cell


class OutdatedDatabase(AnatomyError):
    """A database made by an older version of collect: it lacks tables or columns the views need."""


class ForeignDatabase(AnatomyError):
    """A DuckDB database this project did not make: collecting again must not be suggested (collect
    refuses to replace it)."""


@dataclass
class ExamTables:
    """The exams (anatomy/results/schema.sql, "The exams"): their tables, and the views of their findings."""

    length: pd.DataFrame  # exam_length, loss by position (RoPE's exam), with the run's label, group and positions
    length_reach: pd.DataFrame  # the length_reach view: per run, loss within the training length and far past it
    kv_cache: pd.DataFrame  # exam_kv_cache (GQA's exam), with the run's label and attention kind
    kv_per_token: pd.DataFrame  # the kv_cache_per_token view: bytes per cached position, per attention kind
    kv_timing: pd.DataFrame  # exam_kv_timing, generation with and without the cache, with label and attention
    kv_speedup: pd.DataFrame  # the kv_cache_speedup view: cached over recomputed, per attention kind and context
    kv_scale: pd.DataFrame  # the kv_cache_at_scale view: the cache at LLaMA scale, by the formula, in GiB too
    depth: pd.DataFrame  # exam_depth: the stability map's cells (pre-norm's exam)
    depth_stability: pd.DataFrame  # the depth_stability view: largest lr that trains, per wiring
    grad_norm_runs: pd.DataFrame  # per run or depth-map cell with gradient norms: label, layers, steps, norm_pos
    grad_norm_spread: pd.DataFrame  # the grad_norm_spread view: first / last block's gradient norm, with label
    wall_clock: pd.DataFrame  # exam_wall_clock: each part alone, manual against fused
    wall_clock_ratios: pd.DataFrame  # the wall_clock_ratios view: manual and fused per part and variant
    # the parts of 2024-26 (anatomy/exams/qk_norm.py, mla.py, moe.py): each exam's cells, one row each
    qk_norm: pd.DataFrame  # exam_qk_norm: the QK-norm map's cells, plain and qk_norm over the lr
    qk_norm_logits: pd.DataFrame  # per QK-norm cell and logged step: the largest attention logit of any layer
    mla: pd.DataFrame  # exam_mla: cache bytes per character, best val and generation speed per cell
    moe: pd.DataFrame  # exam_moe: dense and the MoE cells, parameters, best val, load and step time
    moe_shares: pd.DataFrame  # per MoE cell, logged step, layer and expert: its share of the tokens
    expert_load: pd.DataFrame  # per run with experts (not the exam's cells): run_id, min_share, max_share


@dataclass
class Results:
    path: str  # the database read
    runs: pd.DataFrame  # run_summary, one row per run, with every model setting, its label and roles
    experiments: pd.DataFrame  # experiment_summary
    ablations: pd.DataFrame  # ablation_summary
    pairs: pd.DataFrame  # baseline_pairs: each run against its baseline's run of the same seed
    comparisons: pd.DataFrame  # baseline_summary: each experiment against its baseline
    band: pd.DataFrame  # seed_band: val loss over seeds, per experiment and step
    noise: pd.DataFrame  # setup_noise: the pooled seed noise of each setup (corpus, size, precision)
    above_best: pd.DataFrame  # val_above_best: each val after a run's best, above that best
    metrics: pd.DataFrame  # every evaluation, with the run's label, experiment, seed and status
    samples: pd.DataFrame  # every generated text, with the run's label and experiment
    memorisation: pd.DataFrame  # sample_memorisation: copied share of each measured sample, with label
    declared: pd.DataFrame  # declared_runs: the experiments file's runs (experiment, seed, group, stage)
    provenance: dict[str, Any] | None  # grid.json of shipped reference results, if any
    exams: ExamTables

    @property
    def headline(self) -> pd.DataFrame:
        return self.runs[self.runs["group"] == "headline"]


# How every table, legend and sentence names a run. In the data (`Results.runs["label"]`, a
# legend, a link's ?run=) it stays in English, the same in every language, so that a link works
# in either; where a page shows it as words, `run_label(..., translated=True)`.
# TRANSLATORS: a run's name as a page shows it: its experiment (a name, kept as it is) and its seed
RUN_LABEL = N_("{experiment} · seed {seed}")


def run_label(experiment: str, seed, translated: bool = False) -> str:
    """A run's name: its experiment and seed (the experiment alone where the seed is unknown)."""
    if pd.isna(seed):
        return str(experiment)
    return (_(RUN_LABEL) if translated else RUN_LABEL).format(experiment=experiment, seed=seed)


def settings_sql(name: str) -> str:
    """One of SETTINGS as a column of the query in `read` (s: run_summary, r: runs)."""
    if name == "n_parts":
        sql = "llama_parts(r.norm_type, r.norm_pos, r.pos_type, r.n_head, r.n_kv_head, r.ffn_type)"
    else:
        sql = f"r.{name}"
    return f"CAST({sql} AS BIGINT) AS {name}" if name in WHOLE_NUMBERS else f"{sql} AS {name}"


# Every table and view `read` reads: each is counted before any is read (database.check_row_counts)
READ_RELATIONS = (
    *("runs", "run_summary", "metrics", "experiment_summary", "ablation_summary", "baseline_pairs"),
    *("baseline_summary", "seed_band", "setup_noise", "val_above_best", "samples", "sample_memorisation"),
    "declared_runs",
    *("exam_depth", "grad_norms", "exam_length", "length_reach", "exam_kv_cache", "kv_cache_per_token"),
    *("exam_kv_timing", "kv_cache_speedup", "kv_cache_at_scale", "depth_stability", "grad_norm_spread"),
    *("exam_wall_clock", "wall_clock_ratios", "exam_qk_norm", "exam_mla", "exam_moe"),
)
QK_NORM_CELL_PREFIX = "qk_norm/"  # max_logits.run_id of a QK-norm cell: "qk_norm/" + exam_qk_norm.cell
MOE_CELL_PREFIX = "moe/"  # expert_shares.run_id of a cell of the experts' exam: "moe/" + exam_moe.cell
FIRST_RELATION = re.compile(r"\bFROM\s+(\w+)", re.IGNORECASE)


def bounded_table(con: ReadOnlyConnection, path: str | Path, sql: str) -> pd.DataFrame:
    """`sql` read into a DataFrame, no more rows than its first relation may hold (ROW_LIMITS):
    read with a LIMIT one past it, and refused past it, so that no join of a crafted database's
    rows reaches pandas (whose copy DuckDB's memory limit does not cover)."""
    relation = FIRST_RELATION.search(sql).group(1)
    limit = row_limit(relation)
    rows = con.execute(f"{sql}\nLIMIT {limit + 1}").df()
    if len(rows) > limit:
        raise ReadLimitExceeded(
            f"{path}: a query on {relation} gives more than {limit:,} rows, more than a results database of this "
            f"project holds, so it is not read: {REBUILD_ADVICE}"
        )
    return rows


def foreign_message(con: ReadOnlyConnection, path: str | Path) -> str | None:
    """Where the database open on `con` was not made by this project (it lacks a table every
    version of collect made): what it is, and what to choose instead; None for one of ours."""
    missing = missing_own_tables(con)
    if not missing:
        return None
    return _(
        "`{path}` is a DuckDB database this project did not make (it has no {missing} table). "
        "Choose the database `python -m anatomy collect` wrote, such as `results/anatomy.duckdb`."
    ).format(path=path, missing=", ".join(missing))


def outdated_message(con: duckdb.DuckDBPyConnection, path: str | Path) -> str | None:
    """What a database made by an older version lacks, and the command that rebuilds it; None
    for a current one. The one check of the report and the dashboard."""
    missing = missing_columns(con)
    if not missing:
        return None
    # in the reader's language on the dashboard; the report sets none, so it stays English
    return _(
        "`{path}` was made by an older version of this project (it has no {missing}). Collect it again to "
        "rebuild it from the run folders: `python -m anatomy collect --runs results/runs --db {path}`."
    ).format(path=path, missing=", ".join(missing[:3]) + (", ..." if len(missing) > 3 else ""))


def read(con: ReadOnlyConnection, path: str | Path, provenance: dict[str, Any] | None = None) -> Results:
    """Everything a results database holds, read on `con`. Raises ForeignDatabase, OutdatedDatabase
    or ReadLimitExceeded, and lets DuckDB's errors through for the caller to word."""
    if (message := foreign_message(con, path)) is not None:
        raise ForeignDatabase(message)
    if (message := outdated_message(con, path)) is not None:
        raise OutdatedDatabase(message)
    check_row_counts(con, path, READ_RELATIONS)  # one too big to read whole is refused before any is read

    def table(sql: str) -> pd.DataFrame:
        return bounded_table(con, path, sql)

    # run_summary's columns, then every setting (run_summary has those the pages group by: moved
    # after the others, so that every setting stands together)
    summary_columns = [row[0] for row in con.execute("DESCRIBE run_summary").fetchall()]
    runs = table(f"""
        SELECT s.* EXCLUDE ({", ".join(name for name in SETTINGS if name in summary_columns)}),
            m.train_at_best, {", ".join(settings_sql(name) for name in SETTINGS)}
        FROM run_summary s JOIN runs r USING (run_id)
        LEFT JOIN (SELECT run_id, step, train_loss AS train_at_best FROM metrics) m
            ON m.run_id = s.run_id AND m.step = s.best_step
        ORDER BY s.experiment, s.seed""")
    for name in WHOLE_NUMBERS & set(runs):  # NULL: NaN, as pandas makes of a number missing from a list
        if runs[name].isna().any():
            runs[name] = runs[name].astype("float64")
    runs["label"] = [run_label(e, s) for e, s in zip(runs["experiment"], runs["seed"])]
    labels = runs[["run_id", "label", "experiment"]]

    return Results(
        path=str(path),
        runs=runs,
        experiments=table("SELECT * FROM experiment_summary ORDER BY experiment"),
        ablations=table("SELECT * FROM ablation_summary ORDER BY part, direction"),
        pairs=table("SELECT * FROM baseline_pairs ORDER BY experiment, seed"),
        comparisons=table("SELECT * FROM baseline_summary ORDER BY baseline, experiment"),
        band=table("SELECT * FROM seed_band ORDER BY experiment, step"),
        noise=table('SELECT * FROM setup_noise ORDER BY corpus, train_tokens, "precision"'),
        above_best=table("SELECT * FROM val_above_best ORDER BY run_id, step"),
        metrics=table("SELECT * FROM metrics ORDER BY run_id, step").merge(
            runs[["run_id", "label", "experiment", "seed", "status"]], on="run_id"
        ),
        samples=table("SELECT * FROM samples ORDER BY run_id, sample_idx").merge(labels, on="run_id"),
        memorisation=table("SELECT * FROM sample_memorisation ORDER BY run_id, step, sample_idx").merge(
            runs[["run_id", "label"]], on="run_id"
        ),
        declared=table('SELECT * FROM declared_runs ORDER BY "group", stage, experiment, seed'),
        provenance=provenance,
        exams=read_exams(table, runs),
    )


def read_exams(table, runs: pd.DataFrame) -> ExamTables:
    def with_run(rows: pd.DataFrame, columns: list[str]) -> pd.DataFrame:
        rows = rows.merge(runs[["run_id", *columns]], on="run_id", how="left")
        rows["label"] = rows["label"].fillna(rows["run_id"])  # a run not in the database still has a name
        return rows

    depth = table("SELECT * FROM exam_depth ORDER BY norm_pos, lr")
    grad_norm_runs = table("""
        SELECT run_id, max(layer) + 1 AS layers, count(DISTINCT step) AS steps, max(step) AS last_step
        FROM grad_norms GROUP BY run_id ORDER BY run_id""")
    cells = DEPTH_CELL_PREFIX + depth["cell"]
    cell_labels = dict(zip(cells, [f"depth map: {p}-norm, lr {lr:g}" for p, lr in zip(depth["norm_pos"], depth["lr"])]))
    grad_norm_runs["label"] = grad_norm_runs["run_id"].map({**cell_labels, **dict(zip(runs["run_id"], runs["label"]))})
    # as objects: with no run labelled the column is all-NaN floats, which text cannot fill
    grad_norm_runs["label"] = grad_norm_runs["label"].astype(object).fillna(grad_norm_runs["run_id"])
    norm_pos = {**dict(zip(cells, depth["norm_pos"])), **dict(zip(runs["run_id"], runs["norm_pos"]))}
    grad_norm_runs["norm_pos"] = grad_norm_runs["run_id"].map(norm_pos)
    grad_norm_runs["depth_map"] = grad_norm_runs["run_id"].str.startswith(DEPTH_CELL_PREFIX)
    return ExamTables(
        length=with_run(
            table("SELECT * FROM exam_length ORDER BY run_id, window_len, bucket_start"),
            ["label", "experiment", "group", "part", "positions"],
        ),
        length_reach=table("SELECT * FROM length_reach ORDER BY experiment, seed DESC"),
        kv_cache=with_run(
            table("""SELECT c.*, attention_kind(r.n_head, c.n_kv_head) AS attention
                FROM exam_kv_cache c LEFT JOIN runs r USING (run_id) ORDER BY c.n_kv_head DESC, run_id, tokens"""),
            ["label", "experiment"],
        ),
        kv_per_token=table("SELECT * FROM kv_cache_per_token ORDER BY n_kv_head DESC"),
        kv_timing=with_run(
            table("""SELECT t.*, attention_kind(r.n_head, t.n_kv_head) AS attention
                FROM exam_kv_timing t LEFT JOIN runs r USING (run_id)
                ORDER BY t.n_kv_head DESC, run_id, context, cached"""),
            ["label", "experiment"],
        ),
        kv_speedup=table("SELECT * FROM kv_cache_speedup ORDER BY attention, context"),
        kv_scale=table("SELECT * FROM kv_cache_at_scale ORDER BY bytes DESC"),
        depth=depth,
        depth_stability=table("SELECT * FROM depth_stability ORDER BY norm_pos"),
        grad_norm_runs=grad_norm_runs,
        grad_norm_spread=table("SELECT * FROM grad_norm_spread ORDER BY run_id, step").merge(
            grad_norm_runs[["run_id", "label"]], on="run_id", how="left"
        ),
        wall_clock=table("SELECT * FROM exam_wall_clock ORDER BY part, variant, impl"),
        wall_clock_ratios=table("SELECT * FROM wall_clock_ratios ORDER BY part, variant"),
        qk_norm=table("SELECT * FROM exam_qk_norm ORDER BY variant, lr"),
        # max_logits holds every layer of every run that logged them (the parts study's too): only
        # the map's cells, one row per logged step, are read
        qk_norm_logits=table(f"""
            SELECT substr(run_id, {len(QK_NORM_CELL_PREFIX) + 1}) AS cell, step, max(max_logit) AS max_logit
            FROM max_logits WHERE starts_with(run_id, '{QK_NORM_CELL_PREFIX}')
            GROUP BY run_id, step ORDER BY cell, step"""),
        mla=table("SELECT * FROM exam_mla ORDER BY bytes_per_char DESC NULLS LAST, cell"),
        moe=table("SELECT * FROM exam_moe ORDER BY coalesce(top_k, 0), cell"),  # dense first, then by top_k
        # expert_shares holds every MoE run's (the parts study's too): only the exam's cells are read
        moe_shares=table(f"""
            SELECT substr(run_id, {len(MOE_CELL_PREFIX) + 1}) AS cell, step, layer, expert, share
            FROM expert_shares WHERE starts_with(run_id, '{MOE_CELL_PREFIX}')
            ORDER BY cell, step, layer, expert"""),
        # the trained runs' load (collect computes it as the exam does its cells'; their load is exam_moe's)
        expert_load=table(f"""
            SELECT run_id, min_share, max_share FROM expert_load
            WHERE NOT starts_with(run_id, '{MOE_CELL_PREFIX}') ORDER BY run_id"""),
    )


def sql_text(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


def grad_norms_of(con: ReadOnlyConnection, run_id: str) -> pd.DataFrame:
    """One run's gradient norms, every block and logged step (too many rows to read for all runs)."""
    return bounded_table(
        con,
        con.path,
        f"SELECT step, layer, norm FROM grad_norms WHERE run_id = {sql_text(run_id)} ORDER BY step, layer",
    )


def load(db_path: str | Path, provenance: dict[str, Any] | None = None) -> Results:
    """Every run of the database at `db_path`, the grid's and the studies' (`anatomy.report.roles.only_runs_of`
    tells them apart). Every problem is one AnatomyError naming the file."""
    check_database_path(db_path)
    if not Path(db_path).is_file():
        raise AnatomyError(f"--db {db_path}: no such database (make one with `python -m anatomy collect`)")
    try:
        with open_read_only(db_path) as con:
            return read(con, db_path, provenance)
    except duckdb.Error as err:
        raise AnatomyError(
            f"--db {db_path}: not a results database of this project ({type(err).__name__}: {str(err).splitlines()[0]})"
        ) from None
