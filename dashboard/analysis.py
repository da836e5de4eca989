"""What only the dashboard's pages show, reshaped for their charts: where diverged runs broke.

The shaping the report shares (curves, best points, the overfitting turn, each part's worth, the
comparisons with a baseline, the exams') lives in the package, anatomy/report/chart_data.py, and is
imported here under its own names, so the views find it in one place. Kept apart from Streamlit
and Altair so each can be checked on its own.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# shared with the report, for the views (`name as name`: a name the views take from here)
from anatomy.report.chart_data import (
    best_points as best_points,
    depth_cells as depth_cells,
    finite as finite,
    length_curves as length_curves,
    long_curves as long_curves,
    overfitting_table as overfitting_table,
    turn_steps as turn_steps,
    versus_baseline as versus_baseline,
)


def divergence_points(runs: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """For each run that went non-finite: the last finite val point and the step it broke."""
    rows = []
    for run_id, run in metrics.sort_values("step").groupby("run_id", sort=False):
        bad = ~(finite(run["val_loss"]) & finite(run["train_loss"])) & run[["val_loss", "train_loss"]].notna().any(
            axis=1
        )
        info = runs[runs["run_id"] == run_id].iloc[0]
        if not bad.any() and not bool(info["diverged"]):
            continue
        good = run[finite(run["val_loss"])]
        broke_at = (
            info["diverged_step"]
            if pd.notna(info["diverged_step"])
            else (run.loc[bad, "step"].iloc[0] if bad.any() else run["step"].iloc[-1])
        )
        rows.append(
            {
                "run_id": run_id,
                "label": info["label"],
                "experiment": info["experiment"],
                "seed": info["seed"],
                "diverged_step": int(broke_at),
                "step": good["step"].iloc[-1] if not good.empty else 0,
                "val_loss": good["val_loss"].iloc[-1] if not good.empty else np.nan,
            }
        )
    return pd.DataFrame(rows, columns=["run_id", "label", "experiment", "seed", "diverged_step", "step", "val_loss"])


RUNS_JOIN = "; "  # the runs a grouped point is the mean of, as its tooltip lists them


def grouped_curves(long: pd.DataFrame, x: str = "step") -> pd.DataFrame:
    """The runs of each experiment as one curve per split, as an experiment tracker groups seeds:
    at each step the mean of their (smoothed) losses, the lowest and the highest, and how many runs
    reached it (`run_labels`: which). `x` "elapsed_s" draws each step at the mean wall-clock its runs took to reach it
    (two seeds are never evaluated at the same second, but always at the same step)."""
    grouped = long.groupby(["experiment", "split", "step"], as_index=False).agg(
        mean=("smoothed", "mean"),
        low=("smoothed", "min"),
        high=("smoothed", "max"),
        runs=("label", "nunique"),
        run_labels=("label", lambda labels: RUNS_JOIN.join(sorted(set(labels)))),
        elapsed_s=("elapsed_s", "mean"),
    )
    return grouped.assign(x=grouped["elapsed_s"] if x == "elapsed_s" else grouped["step"])


def per_experiment(frame: pd.DataFrame, runs: pd.DataFrame, field: str) -> pd.DataFrame:
    """`field` of each run and step (frame: run_id, step, field), as the mean over each
    experiment's runs (runs: run_id, experiment): the lr and gradient-norm curves beside the loss."""
    joined = frame.merge(runs[["run_id", "experiment"]], on="run_id")
    joined = joined[finite(joined[field])]
    return joined.groupby(["experiment", "step"], as_index=False)[field].mean()


def interval_rows(deltas: pd.DataFrame, judged: dict) -> pd.DataFrame:
    """Comparisons with a baseline (versus_baseline's rows) with each one's 95% interval as judged
    in `judged` (uncertainty.judged_against_baselines: experiment -> Difference): low, high, and
    beyond (True, False, or None where not testable), as the ablation chart draws them."""
    intervals = [judged[name].interval() if name in judged else (np.nan, np.nan) for name in deltas["experiment"]]
    return deltas.assign(
        mean=[judged[name].mean if name in judged else np.nan for name in deltas["experiment"]],
        low=[low for low, _high in intervals],
        high=[high for _low, high in intervals],
        beyond=pd.Series(
            [judged[name].beyond if name in judged else None for name in deltas["experiment"]],
            index=deltas.index,
            dtype=object,
        ),
    )
