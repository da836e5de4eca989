"""Curves: any runs, train and val, by step or wall-clock, smoothed, on a log scale if wanted."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import analysis, charts, loaders, tables

results = loaders.require_results()
runs = results.runs

st.title("Loss curves")

experiments = list(dict.fromkeys(runs["experiment"]))
default = list(dict.fromkeys(results.headline["experiment"])) or experiments[:2]


def select_all_runs() -> None:
    """A new choice of experiments starts with every seed of them selected."""
    chosen = st.session_state["curves_experiments"]
    st.session_state["curves_runs"] = list(runs.loc[runs["experiment"].isin(chosen), "label"])


chosen = st.multiselect(
    "Experiments", experiments, default=default, key="curves_experiments", on_change=select_all_runs
)
candidates = runs[runs["experiment"].isin(chosen)]
labels = st.multiselect(
    "Runs",
    list(candidates["label"]),
    default=list(candidates["label"]),
    key="curves_runs",
    help="Every seed of the chosen experiments; remove any you do not want.",
)

cols = st.columns([2, 2, 3, 1])
splits = cols[0].segmented_control(
    "Split", ["val", "train"], selection_mode="multi", default=["val", "train"], key="curves_splits"
)
x_axis = cols[1].segmented_control("x axis", ["step", "wall-clock"], default="step", key="curves_x")
smoothing = cols[2].slider("Smoothing (EMA weight of the past)", 0.0, 0.95, 0.0, 0.05, key="curves_smoothing")
log = cols[3].toggle("log y", key="curves_log")

if not labels or not splits:
    st.info("Choose at least one run and one split.")
    st.stop()

metrics = results.metrics[results.metrics["label"].isin(labels)]
columns = tuple(f"{split}_loss" for split in splits)
long = analysis.long_curves(metrics, splits=columns, smoothing=smoothing)
if long.empty:
    st.info("These runs have no finite loss values to draw yet.")
    st.stop()
x = "elapsed_s" if x_axis == "wall-clock" else "step"
st.altair_chart(charts.loss_curves(long, x=x, log=log), width="stretch")
st.caption(
    "Solid: val; dashed: train. Hover a point for the run's details; click a run in the legend to highlight it "
    "(shift-click for several)."
)

chosen_runs = runs[runs["label"].isin(labels)]
not_done = chosen_runs[chosen_runs["status"] != "done"]
for _, run in not_done.iterrows():
    if run["status"] == "running":
        progress = (
            "no evaluation yet" if pd.isna(run["last_step"]) else f"last evaluation at step {int(run['last_step'])}"
        )
        st.info(f"{run['label']} is still running ({progress}).", icon=":material/hourglass_top:")
    else:
        st.warning(
            f"{run['label']} diverged at step {run['diverged_step']}; its line stops there.", icon=":material/error:"
        )

with st.expander("Run details"):
    tables.run_table(
        chosen_runs,
        [
            "label",
            "description",
            "group",
            "part",
            "direction",
            "params",
            "status",
            "best_val_loss",
            "best_step",
            "elapsed_s",
        ],
    )
