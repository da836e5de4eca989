"""Progress: the grid while it runs, read from its run folders, refreshed by itself.

The database changes only when a target ends with `collect`; this page needs no database. It
reads the run folders beside the chosen one (anatomy/results/progress.py does the reading, read-only);
this file only draws. Only the live part reruns on the timer (`st.fragment(run_every=...)`), so
the rest of the page keeps its state.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import streamlit as st

from anatomy.results import progress
from dashboard import analysis, charts, loaders

STATUS_ORDER = ["running", "waiting", "stopped", "done", "diverged", "unreadable"]
TABLE_COLUMNS = {
    "run": st.column_config.TextColumn("run"),
    "status": st.column_config.TextColumn("status"),
    "step": st.column_config.NumberColumn("step", format="%d"),
    "steps": st.column_config.NumberColumn("of steps", format="%d"),
    "done": st.column_config.ProgressColumn("progress", min_value=0.0, max_value=1.0, format="percent"),
    "s_per_step": st.column_config.NumberColumn("s / step (recent)", format="%.3f"),
    "eta": st.column_config.TextColumn("ETA", help="training left after its last logged step, at its recent pace"),
    "planned": st.column_config.CheckboxColumn("planned", help="in the plan of the Snakemake running now"),
    "problem": st.column_config.TextColumn("problem"),
}


def status_counts(grid: progress.GridProgress) -> None:
    columns = st.columns(5)
    for column, status in zip(columns, ["done", "running", "waiting", "diverged", "stopped"]):
        column.metric(status, len(grid.with_status(status)))


def grid_eta(grid: progress.GridProgress) -> None:
    """The grid's ETA, with the assumption it rests on, or why there is none."""
    if not grid.with_status("running", "waiting"):
        return
    if not grid.plan.known:
        st.caption("No ETA for the grid: without the plan, the runs still to come are unknown.")
    elif grid.eta_s is None:
        st.caption("No ETA for the grid yet: no run is training now, or none has logged a step to time.")
    else:
        st.metric("grid done in about", progress.duration_words(grid.eta_s))
        st.caption(
            f"Assumes the runs left go on {grid.lanes} lane(s), as many as are training now, each lane taking "
            "the next waiting run as soon as it is free; a run not started yet takes as long as the measured "
            "runs of its experiment (else of the grid). Sampling, exams and collecting after training are not counted."
        )


def run_table(grid: progress.GridProgress) -> None:
    table = pd.DataFrame(progress.progress_rows(grid))
    table["order"] = table["status"].map(STATUS_ORDER.index)
    table = table.sort_values(["order", "run"]).drop(columns="order")
    if not table["problem"].any():
        table = table.drop(columns="problem")
    if not grid.plan.run_ids:
        table = table.drop(columns="planned")
    st.dataframe(table, hide_index=True, width="stretch", column_config=TABLE_COLUMNS)
    for run in grid.with_status("diverged"):
        st.error(f"{run.label} diverged (its loss became NaN/inf) at step {run.step}.", icon=":material/bolt:")


def live_curves(grid: progress.GridProgress) -> None:
    """The curves of the runs training now, as far as they have logged."""
    running = grid.with_status("running")
    if not running:
        st.info("No run is training right now.", icon=":material/pause_circle:")
        return
    st.subheader("Training now")
    metrics = pd.DataFrame(progress.live_metrics(running))
    if metrics.empty:
        st.caption("The runs training now have not logged an evaluation yet.")
        return
    st.altair_chart(charts.loss_curves(analysis.long_curves(metrics), height=360), width="stretch")
    st.caption("Val solid, train dashed; a line grows at every evaluation (train.eval_every steps).")


def show_grid(runs_root: Path) -> None:
    """Everything read from the folders now: what the workflow plans, each run, the curves."""
    grid = progress.read_grid(runs_root)
    if grid.plan.known:
        st.caption(grid.plan.note)
    else:
        st.warning(grid.plan.note, icon=":material/help:")
    if not grid.runs:
        st.info(f"No run has started under `{runs_root}` yet.", icon=":material/hourglass_empty:")
        return
    status_counts(grid)
    grid_eta(grid)
    run_table(grid)
    live_curves(grid)


def own_runs_root() -> Path | None:
    """Where a grid started from this folder writes its runs, if some are there (the reference is chosen)."""
    root = loaders.runs_root(loaders.DEFAULT_DB)
    return root if root.is_dir() else None


st.title("Progress")
st.caption(
    "Every run of the grid, read from its run folder as it trains: no collect needed. "
    "The other pages show the database, which changes when a target ends."
)

db_path = st.session_state.get("db_path") or loaders.default_db_path()
runs_root = loaders.runs_root(db_path)
if loaders.is_reference(db_path):
    st.info(
        "These are the shipped reference results: finished long ago, nothing of them is running. "
        f"A grid you start writes its runs to `{loaders.runs_root(loaders.DEFAULT_DB)}`.",
        icon=":material/verified:",
    )
    runs_root = own_runs_root()
    if runs_root is None:
        st.stop()
    st.caption(f"Showing your own runs folder, `{runs_root}`: it needs no database.")

left, right = st.columns(2)
auto = left.toggle("Refresh by itself", value=True, key="progress_auto")
every = right.select_slider(
    "every (seconds)", options=[2, 5, 10, 30, 60], value=10, key="progress_every", disabled=not auto
)
st.caption(f"Runs folder: `{runs_root}`")


@st.fragment(run_every=every if auto else None)
def live() -> None:
    show_grid(runs_root)


live()
