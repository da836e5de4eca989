"""The database's rows reshaped for the charts (anatomy/report/charts.py), as plain pandas: curves, best
points, the overfitting turn, each part's worth, the comparisons with a baseline, the exams'.

The numbers themselves (best points, the turn, the train/val gap, seed bands and spreads, the
differences from a baseline) are computed once, by the views of anatomy/results/schema.sql; what is here
only picks, renames and turns them, plus what depends on a choice made by the reader (smoothing,
the turn's margin). The report shapes its figures' data here, and so do the dashboard's pages
(dashboard/analysis.py adds what only they show). Kept apart from Altair, so each can be checked
on its own and the report's text needs no Altair.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from anatomy.language import _

SPLITS = {"val_loss": "val", "train_loss": "train"}


def finite(values: pd.Series) -> pd.Series:
    return values.notna() & np.isfinite(values.astype(float))


def long_curves(metrics: pd.DataFrame, splits=("val_loss", "train_loss"), smoothing: float = 0.0) -> pd.DataFrame:
    """One row per (run, step, split) with the raw loss and an EMA-smoothed one.

    Non-finite losses (a diverged run) are dropped from the lines; the break view marks them.
    smoothing is the EMA weight of the past, 0 (none) to <1, as in TensorBoard.
    """
    keep = ["run_id", "label", "experiment", "seed", "step", "elapsed_s", "lr", "tokens_seen"]
    long = metrics.melt(id_vars=keep, value_vars=list(splits), var_name="split", value_name="loss")
    long["split"] = long["split"].map(SPLITS)
    long = long[finite(long["loss"])].sort_values(["run_id", "split", "step"])
    if smoothing > 0:
        long["smoothed"] = long.groupby(["run_id", "split"])["loss"].transform(
            lambda loss: loss.ewm(alpha=1 - smoothing, adjust=True).mean()
        )
    else:
        long["smoothed"] = long["loss"]
    return long.reset_index(drop=True)


def best_points(runs: pd.DataFrame) -> pd.DataFrame:
    """Each run's lowest val loss and the first step it was reached (run_summary's best point)."""
    best = runs[finite(runs["best_val_loss"])]
    best = best[["run_id", "label", "experiment", "seed", "best_step", "best_val_loss"]]
    return best.rename(columns={"best_step": "step", "best_val_loss": "val_loss"}).reset_index(drop=True)


def turn_steps(above_best: pd.DataFrame, margin: float) -> pd.Series:
    """Per run: the first step after its best where val is more than `margin` above that best
    (rows of the val_above_best view); runs that never climb that far are left out."""
    climbed = above_best[above_best["above_best"] > margin]
    return climbed.groupby("run_id")["step"].min().astype(float)


def overfitting_table(runs: pd.DataFrame, above_best: pd.DataFrame, margin: float) -> pd.DataFrame:
    """Per run with a best point (run_summary): where val bottoms out, when it turns (by `margin`),
    how far it climbs, and the train/val gap at the end."""
    rows = runs[finite(runs["best_val_loss"])]
    table = pd.DataFrame(
        {
            "run_id": rows["run_id"],
            "label": rows["label"],
            "experiment": rows["experiment"],
            "min_val": rows["best_val_loss"],
            "min_step": rows["best_step"],
            "turn_step": rows["run_id"].map(turn_steps(above_best, margin)),
            "final_step": rows["final_val_step"],
            "final_val": rows["final_val_loss"],
            "val_rise": rows["val_rise"],
            "final_train": rows["final_train_loss"],
            "gap": rows["train_val_gap"],
        }
    )
    return table.reset_index(drop=True)


def direction_words(direction: str, baseline: str) -> str:
    """How an ablation changed its baseline: "added to vanilla", "removed from llama" (in the reader's words)."""
    said = _("added to {baseline}") if direction == "add" else _("removed from {baseline}")
    return said.format(baseline=baseline)


def part_deltas(ablations: pd.DataFrame) -> pd.DataFrame:
    """Each ablation's Δ best val (nats per character): the experiment minus its baseline, the sign
    every table, chart and sentence of the project uses (negative: lower loss). Removing a part
    that helps therefore shows positive, adding one negative. The low/high are over seeds, each
    seed compared with the baseline run of the same seed."""
    columns = ["part", "direction", "baseline", "experiment", "delta", "delta_low", "delta_high", "n_seeds"]
    if ablations.empty:
        return pd.DataFrame(columns=columns)
    return pd.DataFrame(
        {
            "part": ablations["part"],
            "direction": [direction_words(d, b) for d, b in zip(ablations["direction"], ablations["baseline"])],
            "baseline": ablations["baseline"],
            "experiment": ablations["experiment"],
            "delta": ablations["delta_best_val_mean"],
            "delta_low": ablations["delta_best_val_min"],
            "delta_high": ablations["delta_best_val_max"],
            "n_seeds": ablations["n_seeds"],
        },
        columns=columns,
    )


def versus_baseline(comparisons: pd.DataFrame, experiments) -> pd.DataFrame:
    """These experiments' best val minus their baseline's, paired by seed (baseline_summary):
    mean, min, max, in the order given."""
    rows = comparisons.set_index("experiment").reindex(list(experiments)).dropna(subset=["baseline"])
    rows = rows[rows["n_seeds"] > 0].reset_index()
    return pd.DataFrame(
        {
            "experiment": rows["experiment"],
            "baseline": rows["baseline"],
            "delta": rows["delta_best_val_mean"],
            "delta_low": rows["delta_best_val_min"],
            "delta_high": rows["delta_best_val_max"],
            "n_seeds": rows["n_seeds"],
        },
        columns=["experiment", "baseline", "delta", "delta_low", "delta_high", "n_seeds"],
    )


# The exams


def length_curves(length: pd.DataFrame) -> pd.DataFrame:
    """Per experiment and position bucket of each run's longest readable window: the loss, mean over seeds.

    Featured (drawn bold): the headline models and every experiment about RoPE (its ablations and
    the two broken RoPEs)."""
    # a window where nothing could be read (a val split too short for it) has no curve to give
    readable = length[length["possible"]].groupby("run_id")["window_len"].max()
    longest = length[length["window_len"] == length["run_id"].map(readable)]
    longest = longest.assign(featured=(longest["group"] == "headline") | (longest["part"] == "rope"))
    curves = longest.groupby(["experiment", "positions", "bucket_start", "bucket_end"], as_index=False).agg(
        loss=("loss", "mean"),
        predictions=("predictions", "sum"),
        runs=("run_id", "nunique"),
        ctx_len=("ctx_len", "max"),
        window_len=("window_len", "max"),
        possible=("possible", "all"),
        featured=("featured", "any"),
    )
    curves["position"] = (curves["bucket_start"] + curves["bucket_end"]) / 2
    return curves


def depth_cells(depth: pd.DataFrame) -> pd.DataFrame:
    """The stability map's cells (anatomy/report/charts.py, stability_map): what became of each run, and its label."""
    state = np.select(
        [depth["status"] == "running", depth["diverged"], depth["trained"]],
        ["running", "diverged", "trained"],
        "did not learn",
    )
    text = [
        _("running")
        if s == "running"
        else _("diverged @ {step}").format(step=int(step))
        if s == "diverged" and pd.notna(step)
        else _("diverged")
        if s == "diverged"
        else _("best val {loss}").format(loss=f"{best:.3f}")
        if pd.notna(best) and math.isfinite(best)
        else _("no val")
        for s, step, best in zip(state, depth["diverged_step"], depth["best_val_loss"])
    ]
    return depth.assign(state=state, text=text, lr_label=[f"{lr:g}" for lr in depth["lr"]])
