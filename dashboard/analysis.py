"""The numbers behind the charts, as plain pandas: smoothing, seed bands, the overfitting turn.

Kept apart from Streamlit and Altair so each can be checked on its own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

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
            lambda loss: loss.ewm(alpha=1 - smoothing, adjust=True).mean())
    else:
        long["smoothed"] = long["loss"]
    return long.reset_index(drop=True)


def seed_band(metrics: pd.DataFrame, column: str = "val_loss") -> pd.DataFrame:
    """Per experiment and step: mean, min and max over seeds (finite values only)."""
    rows = metrics[finite(metrics[column])]
    band = rows.groupby(["experiment", "step"])[column].agg(["mean", "min", "max", "count"]).reset_index()
    return band.rename(columns={"count": "n_seeds"})


def best_points(metrics: pd.DataFrame) -> pd.DataFrame:
    """Each run's lowest val loss and the first step it was reached."""
    rows = metrics[finite(metrics["val_loss"])].sort_values(["run_id", "val_loss", "step"])
    best = rows.drop_duplicates("run_id")[["run_id", "label", "experiment", "seed", "step", "val_loss"]]
    return best.reset_index(drop=True)


def turn_step(steps: pd.Series, val: pd.Series, margin: float) -> float:
    """The first step after val's minimum where val is more than `margin` above that minimum."""
    ok = finite(val)
    steps, val = steps[ok].to_numpy(), val[ok].to_numpy(dtype=float)
    if len(val) == 0:
        return np.nan
    lowest = int(np.argmin(val))  # argmin returns the first (earliest) minimum
    above = np.nonzero(val[lowest:] > val[lowest] + margin)[0]
    return float(steps[lowest + above[0]]) if len(above) else np.nan


def overfitting_table(metrics: pd.DataFrame, margin: float) -> pd.DataFrame:
    """Per run: where val bottoms out, when it turns (by `margin`), how far it climbs, the gap."""
    rows = []
    for run_id, run in metrics.sort_values("step").groupby("run_id", sort=False):
        val_ok = run[finite(run["val_loss"])]
        train_ok = run[finite(run["train_loss"])]
        if val_ok.empty:
            continue
        lowest = val_ok.loc[val_ok["val_loss"].idxmin()]
        final_val = val_ok["val_loss"].iloc[-1]
        final_train = train_ok["train_loss"].iloc[-1] if not train_ok.empty else np.nan
        rows.append({
            "run_id": run_id,
            "label": run["label"].iloc[0],
            "experiment": run["experiment"].iloc[0],
            "min_val": lowest["val_loss"],
            "min_step": lowest["step"],
            "turn_step": turn_step(run["step"], run["val_loss"], margin),
            "final_step": val_ok["step"].iloc[-1],
            "final_val": final_val,
            "val_rise": final_val - lowest["val_loss"],
            "final_train": final_train,
            "gap": final_val - final_train,
        })
    return pd.DataFrame(rows)


def divergence_points(runs: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """For each run that went non-finite: the last finite val point and the step it broke."""
    rows = []
    for run_id, run in metrics.sort_values("step").groupby("run_id", sort=False):
        bad = ~(finite(run["val_loss"]) & finite(run["train_loss"])) & run[["val_loss", "train_loss"]].notna().any(axis=1)
        info = runs[runs["run_id"] == run_id].iloc[0]
        if not bad.any() and not bool(info["diverged"]):
            continue
        good = run[finite(run["val_loss"])]
        broke_at = info["diverged_step"] if pd.notna(info["diverged_step"]) else (
            run.loc[bad, "step"].iloc[0] if bad.any() else run["step"].iloc[-1])
        rows.append({
            "run_id": run_id, "label": info["label"], "experiment": info["experiment"],
            "seed": info["seed"], "diverged_step": int(broke_at),
            "step": good["step"].iloc[-1] if not good.empty else 0,
            "val_loss": good["val_loss"].iloc[-1] if not good.empty else np.nan,
        })
    return pd.DataFrame(rows, columns=["run_id", "label", "experiment", "seed", "diverged_step", "step", "val_loss"])


def part_benefit(ablations: pd.DataFrame) -> pd.DataFrame:
    """What each part is worth in best val loss (nats; positive = the part helps), both ways.

    Added to vanilla: benefit = vanilla - (vanilla + part) = -delta.
    Removed from llama: benefit = (llama - part) - llama = delta.
    The min/max are over seeds, each seed compared with the baseline run of the same seed.
    """
    if ablations.empty:
        return pd.DataFrame(columns=["part", "direction", "experiment", "benefit", "benefit_low", "benefit_high", "n_seeds"])
    sign = np.where(ablations["direction"] == "add", -1.0, 1.0)
    low = sign * ablations["delta_best_val_min"]
    high = sign * ablations["delta_best_val_max"]
    return pd.DataFrame({
        "part": ablations["part"],
        "direction": ablations["direction"].map({"add": "added to vanilla", "remove": "removed from llama"}),
        "experiment": ablations["experiment"],
        "benefit": sign * ablations["delta_best_val_mean"],
        "benefit_low": np.minimum(low, high),
        "benefit_high": np.maximum(low, high),
        "n_seeds": ablations["n_seeds"],
    })


def seed_spread(runs: pd.DataFrame, experiments) -> float:
    """The largest max-min of best val over seeds among these experiments: the noise floor."""
    rows = runs[runs["experiment"].isin(list(experiments))]
    spread = rows.groupby("experiment")["best_val_loss"].agg(lambda v: v.max() - v.min())
    return float(spread.max()) if len(spread) else np.nan


def versus_reference(runs: pd.DataFrame, experiments, reference: str) -> pd.DataFrame:
    """Best val of each experiment minus the reference's, paired by seed: mean, min, max."""
    base = runs[runs["experiment"] == reference].set_index("seed")["best_val_loss"]
    rows = []
    for experiment in experiments:
        mine = runs[runs["experiment"] == experiment].set_index("seed")["best_val_loss"]
        delta = (mine - base).dropna()
        if len(delta):
            rows.append({"experiment": experiment, "delta": delta.mean(), "delta_low": delta.min(),
                         "delta_high": delta.max(), "n_seeds": len(delta)})
    return pd.DataFrame(rows, columns=["experiment", "delta", "delta_low", "delta_high", "n_seeds"])
