"""What the report reads from a results database, and the roles the runs play.

`anatomy report` and `anatomy.claims` both work on a `ReportData`: the database's summary views
as DataFrames, each run with its model settings, and the exam tables (`ExamTables`). The roles
(the 2017 model, the mini-LLaMA, the deep pair, how a model knows positions, how many KV heads
it shares) are recognised from those settings, so they hold for any experiment names.
"""

from __future__ import annotations

import dataclasses
import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd

from anatomy import reference
from anatomy.config import ModelConfig, TrainConfig
from anatomy.errors import AnatomyError
from anatomy.groups import is_study
from anatomy.results import check_database_path, collect, missing_columns, open_read_only

MODEL_FIELDS = {field.name for field in dataclasses.fields(ModelConfig)}


# ---------------------------------------------------------------------------------------------
# Reading the database


@dataclass
class ExamTables:
    """The exam tables of anatomy/schema.sql (section "The exams"), each as it is in the database."""

    length: pd.DataFrame  # exam_length: loss by position, per run (RoPE's exam)
    kv_cache: pd.DataFrame  # exam_kv_cache: the cache's bytes, per run (GQA's exam)
    kv_timing: pd.DataFrame  # exam_kv_timing: generation speed with and without the cache
    kv_scale: pd.DataFrame  # exam_kv_scale: the cache at LLaMA scale, by the formula
    depth: pd.DataFrame  # exam_depth: the stability map's cells (pre-norm's exam)
    depth_stability: pd.DataFrame  # the depth_stability view: largest lr that trains, per wiring
    grad_norm_spread: pd.DataFrame  # the grad_norm_spread view: first / last block's gradient norm
    wall_clock: pd.DataFrame  # exam_wall_clock: each part alone, manual against fused


# ExamTables field -> the query that fills it
EXAM_QUERIES = {
    "length": "SELECT * FROM exam_length ORDER BY run_id, window_len, bucket_start",
    "kv_cache": "SELECT * FROM exam_kv_cache ORDER BY n_kv_head DESC, run_id, tokens",
    "kv_timing": "SELECT * FROM exam_kv_timing ORDER BY n_kv_head DESC, run_id, context, cached",
    "kv_scale": "SELECT * FROM exam_kv_scale ORDER BY bytes DESC",
    "depth": "SELECT * FROM exam_depth ORDER BY norm_pos, lr",
    "depth_stability": "SELECT * FROM depth_stability ORDER BY norm_pos",
    "grad_norm_spread": "SELECT * FROM grad_norm_spread ORDER BY run_id, step",
    "wall_clock": "SELECT * FROM exam_wall_clock ORDER BY part, variant, impl",
}
EXAM_SOURCES = (
    "exam_length",
    "exam_kv_cache",
    "exam_kv_timing",
    "exam_kv_scale",
    "exam_depth",
    "depth_stability",
    "grad_norm_spread",
    "exam_wall_clock",
)


@dataclass
class ReportData:
    runs: pd.DataFrame  # run_summary, one row per run, plus the model settings the roles need
    experiments: pd.DataFrame  # experiment_summary
    ablations: pd.DataFrame  # ablation_summary
    pairs: pd.DataFrame  # baseline_pairs: each run against its baseline's run of the same seed
    comparisons: pd.DataFrame  # baseline_summary: each experiment against its baseline
    band: pd.DataFrame  # seed_band: val loss over seeds, per experiment and step
    above_best: pd.DataFrame  # val_above_best: each val after a run's best, above that best
    metrics: pd.DataFrame  # every evaluation, with the run's label
    memorisation: pd.DataFrame  # sample_memorisation: copied share of each measured sample
    provenance: dict[str, Any] | None  # grid.json of shipped reference results, if any
    exams: ExamTables


def llama_parts(cfg: ModelConfig) -> list[str]:
    """Which of the five parts that make the mini-LLaMA this model has."""
    has = {
        "rmsnorm": cfg.norm_type == "rmsnorm",
        "prenorm": cfg.norm_pos == "pre",
        "rope": cfg.pos_type == "rope",
        "gqa": cfg.n_kv_head < cfg.n_head,
        "swiglu": cfg.ffn_type == "swiglu",
    }
    return [part for part, present in has.items() if present]


def position_kind(pos_type: str, rope_break: str | None) -> str:
    """How a model knows positions: RoPE, a broken RoPE, or a learned table (the names the
    dashboard's length chart colours)."""
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


def _model_settings(config_json: str) -> dict[str, Any]:
    """The run's model settings (defaults for any it does not record), its vocabulary size and its
    learning rate (a study may compare two: the scale study's stage 3)."""
    config = json.loads(config_json)
    model = config.get("model") if isinstance(config.get("model"), dict) else {}
    data = config.get("data") if isinstance(config.get("data"), dict) else {}
    train = config.get("train") if isinstance(config.get("train"), dict) else {}
    cfg = ModelConfig.from_dict({name: value for name, value in model.items() if name in MODEL_FIELDS})
    return {
        **cfg.to_dict(),
        "n_parts": len(llama_parts(cfg)),
        "vocab_size": data.get("vocab_size"),
        "lr": train.get("lr", TrainConfig.lr),
    }


def only_runs_of(data: ReportData, study: str | None) -> ReportData:
    """Every run-level table cut to the grid's runs (study None), or to one study's
    (anatomy/groups.py): a table never mixes the two."""
    groups = data.runs["group"]
    keep = groups.map(is_study).eq(False) if study is None else groups.eq(study)
    run_ids, names = set(data.runs.loc[keep, "run_id"]), set(data.runs.loc[keep, "experiment"])

    def cut(frame: pd.DataFrame) -> pd.DataFrame:
        column = "run_id" if "run_id" in frame else "experiment"
        return frame[frame[column].isin(run_ids if column == "run_id" else names)].reset_index(drop=True)

    tables = (
        "runs",
        "experiments",
        "ablations",
        "pairs",
        "comparisons",
        "band",
        "above_best",
        "metrics",
        "memorisation",
    )
    return dataclasses.replace(data, **{name: cut(getattr(data, name)) for name in tables})


def load(db_path: Path, provenance: dict[str, Any] | None = None) -> ReportData:
    """Every run of the database, the grid's and the studies' (`only_runs_of` tells them apart)."""
    check_database_path(db_path)
    if not Path(db_path).is_file():
        raise AnatomyError(f"--db {db_path}: no such database (make one with `python -m anatomy collect`)")
    try:
        with open_read_only(db_path) as con:
            found = {row[0] for row in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
            if missing := [name for name in EXAM_SOURCES if name not in found]:
                raise AnatomyError(
                    f"--db {db_path}: collected before the exams existed (no {', '.join(missing[:3])}"
                    f"{', ...' if len(missing) > 3 else ''}): collect it again with "
                    "`python -m anatomy collect`"
                )
            columns = con.execute("SELECT table_name, column_name FROM information_schema.columns").fetchall()
            if missing := missing_columns(set(columns)):
                raise AnatomyError(
                    f"--db {db_path}: collected by an older version (no {', '.join(missing[:3])}"
                    f"{', ...' if len(missing) > 3 else ''}): collect it again with `python -m anatomy collect`"
                )
            runs = con.execute("""
                SELECT s.*, r.config, m.train_loss AS train_at_best
                FROM run_summary s JOIN runs r USING (run_id)
                LEFT JOIN metrics m ON m.run_id = s.run_id AND m.step = s.best_step
                ORDER BY s.experiment, s.seed""").df()
            experiments = con.execute("SELECT * FROM experiment_summary ORDER BY experiment").df()
            ablations = con.execute("SELECT * FROM ablation_summary ORDER BY part, direction").df()
            pairs = con.execute("SELECT * FROM baseline_pairs ORDER BY experiment, seed").df()
            comparisons = con.execute("SELECT * FROM baseline_summary ORDER BY baseline, experiment").df()
            band = con.execute("SELECT * FROM seed_band ORDER BY experiment, step").df()
            above_best = con.execute("SELECT * FROM val_above_best ORDER BY run_id, step").df()
            memorisation = con.execute("SELECT * FROM sample_memorisation ORDER BY run_id, sample_idx").df()
            metrics = con.execute("SELECT * FROM metrics ORDER BY run_id, step").df()
            exams = ExamTables(**{name: con.execute(sql).df() for name, sql in EXAM_QUERIES.items()})
    except duckdb.Error as err:
        raise AnatomyError(
            f"--db {db_path}: not a results database of this project ({type(err).__name__}: {str(err).splitlines()[0]})"
        ) from None
    # the columns named even with no runs, so a database of none still reads as one
    settings = pd.DataFrame(
        [_model_settings(c) for c in runs.pop("config")], index=runs.index, columns=list(_model_settings("{}"))
    )
    # every ModelConfig field (run_summary has the ones the pages group by: the same values)
    runs = pd.concat([runs.drop(columns=[name for name in settings if name in runs]), settings], axis=1)
    runs["label"] = [f"{e} · seed {s}" for e, s in zip(runs["experiment"], runs["seed"])]
    runs["positions"] = [position_kind(p, b) for p, b in zip(runs["pos_type"], runs["rope_break"])]
    runs["attention"] = [attention_kind(h, kv) for h, kv in zip(runs["n_head"], runs["n_kv_head"])]
    metrics = metrics.merge(runs[["run_id", "label", "experiment", "seed", "status"]], on="run_id")
    return ReportData(
        runs, experiments, ablations, pairs, comparisons, band, above_best, metrics, memorisation, provenance, exams
    )


# ---------------------------------------------------------------------------------------------
# Roles: which runs are the chapter's models and its break tests


def headline_of(data: ReportData, model: str) -> pd.DataFrame:
    """The headline runs of the 2017 model ("vanilla": none of the five parts) or the
    mini-LLaMA ("llama": all five)."""
    runs = data.runs
    return runs[(runs["group"] == "headline") & (runs["n_parts"] == (5 if model == "llama" else 0))]


def headline_layers(data: ReportData) -> float:
    return data.runs.loc[data.runs["group"] == "headline", "n_layer"].median()


def deep_runs(data: ReportData, norm_pos: str) -> pd.DataFrame:
    runs = data.runs
    return runs[(runs["group"] == "break") & (runs["n_layer"] > headline_layers(data)) & (runs["norm_pos"] == norm_pos)]


# ---------------------------------------------------------------------------------------------
# Formatting


def stability_text(stability: pd.DataFrame, bold: bool = False) -> str:
    """Post-norm trains up to lr A (fails from B), pre-norm up to lr C: the depth_stability view in
    words, for the report and (with the largest lr in bold) the dashboard."""
    clauses = []
    for norm_pos in ("post", "pre"):
        row = stability[stability["norm_pos"] == norm_pos]
        if row.empty:
            clauses.append(f"{norm_pos}-norm: no cell yet")
            continue
        row = row.iloc[0]
        if pd.isna(row["max_trained_lr"]):
            clauses.append(f"{norm_pos}-norm trains at none of the {int(row['cells'])} learning rates tried")
            continue
        largest = f"**{row['max_trained_lr']:g}**" if bold else f"{row['max_trained_lr']:g}"
        failed = f" (fails from {row['min_failed_lr']:g})" if pd.notna(row["min_failed_lr"]) else ""
        clauses.append(f"{norm_pos}-norm trains up to lr {largest}{failed}")
    return ", ".join(clauses)


def fmt(value: Any, digits: int = 3, sign: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


def per_seed(runs: pd.DataFrame, column: str, digits: int = 3) -> str:
    """One value per seed, seeds in descending order (42 / 7), as the chapter lists them."""
    ordered = runs.sort_values("seed", ascending=False)
    if column in ("best_step",):
        return " / ".join("–" if pd.isna(v) else str(int(v)) for v in ordered[column])
    return " / ".join(fmt(v, digits) for v in ordered[column])


def seeds_of(runs: pd.DataFrame) -> str:
    return " / ".join(str(int(s)) for s in runs.sort_values("seed", ascending=False)["seed"])


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def paired_deltas(mine: pd.DataFrame, base: pd.DataFrame, column: str = "best_val_loss") -> pd.Series:
    """These runs minus those, seed by seed (same seed = same batches): for pairs found by their
    roles (the deep post-norm and pre-norm runs, MQA and MHA). A run against the baseline its
    experiment names is in the baseline_pairs view: `baseline_deltas`."""
    return (mine.set_index("seed")[column] - base.set_index("seed")[column]).dropna()


def baseline_deltas(data: ReportData, experiment: str, column: str = "delta_best_val") -> pd.Series:
    """The experiment minus its baseline, seed by seed (the baseline_pairs view), indexed by seed."""
    rows = data.pairs[data.pairs["experiment"] == experiment]
    return rows.set_index("seed")[column].dropna()


def ablation_deltas(data: ReportData, part: str, direction: str) -> pd.Series | None:
    """The ablation's best val minus its baseline's, seed by seed; None if it was not trained."""
    match = data.ablations[(data.ablations["part"] == part) & (data.ablations["direction"] == direction)]
    if match.empty:
        return None
    return baseline_deltas(data, match.iloc[0]["experiment"])


def delta_text(deltas: pd.Series) -> str:
    if deltas.empty:
        return "–"
    if len(deltas) == 1:
        return f"{fmt(deltas.iloc[0], sign=True)} (1 seed)"
    return f"{fmt(deltas.mean(), sign=True)} ({fmt(deltas.min(), sign=True)} to {fmt(deltas.max(), sign=True)})"


def side_beyond_noise(deltas: pd.Series, noise: float) -> int | None:
    """Which side of the seed noise every seed's difference lies on: +1 all above `noise`, -1 all
    below `-noise`, 0 neither (seeds that disagree, or too close to call); None with fewer than two
    seeds or no noise to compare with. Every "beyond seed noise" of the report and the claims."""
    if len(deltas) < 2 or math.isnan(noise):
        return None
    if (deltas > noise).all():
        return 1
    if (deltas < -noise).all():
        return -1
    return 0


def seed_noise(data: ReportData, experiments) -> float:
    """The baselines' own seed spread: the largest max - min of best val over seeds."""
    rows = data.experiments[data.experiments["experiment"].isin(list(experiments)) & (data.experiments["n_runs"] > 1)]
    return float(rows["best_val_spread"].max()) if len(rows) else math.nan


def headline_noise(data: ReportData) -> float:
    """The noise floor of every comparison with a baseline: the largest seed spread of the two
    headline models (both baselines), so one baseline's lucky agreement between two seeds does
    not make every difference look real."""
    return seed_noise(data, data.runs.loc[data.runs["group"] == "headline", "experiment"].unique())


def job_seconds(entry: dict[str, Any]) -> float:
    """A shipped run's training job (a grid.json record): Snakemake's benchmark of it, or, for a run
    resumed after an interruption (whose last job timed only the rest), its training time over
    every part, whichever is longer."""
    return max(entry["job_s"] or 0.0, entry["train_s"] or 0.0)


def read_provenance(path: Path | None) -> dict[str, Any] | None:
    """grid.json of shipped runs, read by its owner (anatomy/reference.py); None if there is none."""
    if path is None or not path.is_file():
        return None
    return reference.read_provenance(path)


def load_runs(runs_root: Path, provenance: dict[str, Any] | None) -> ReportData:
    """Collect a folder of run folders into a temporary database, with the benchmarks and the
    exams of no one run (the depth map, the wall clock) from the folders beside it, if any:
    results/reference/exams for the shipped runs, as results/exams for the grid's own."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "report.duckdb"
        benchmarks, exams = runs_root.parent / "benchmarks", runs_root.parent / "exams"
        collect(
            runs_root,
            db,
            None,
            benchmarks if benchmarks.is_dir() else None,
            allow_empty=True,
            exams_root=exams if exams.is_dir() else None,
        )
        return load(db, provenance)
