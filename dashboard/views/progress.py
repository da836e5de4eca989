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

from anatomy.language import _
from anatomy.results import progress
from dashboard import analysis, charts, language_choice, loaders
from dashboard.tables import blank_where_missing, markdown_literal, markdown_name

STATUS_ORDER = ["running", "waiting", "stopped", "done", "diverged", "unreadable"]
# the number columns of the run table and their formats (a run not started has none of them)
NUMBER_FORMATS = {"step": "%d", "steps": "%d", "s_per_step": "%.3f"}


def table_columns() -> dict:
    """The run table's column headers, in the reader's language (the columns' names are keys)."""
    return {
        "run": st.column_config.TextColumn(_("run")),
        "status": st.column_config.TextColumn(_("status")),
        "step": st.column_config.NumberColumn(_("step"), format="%d"),
        "steps": st.column_config.NumberColumn(_("of steps"), format="%d"),
        "done": st.column_config.ProgressColumn(_("progress"), min_value=0.0, max_value=1.0, format="percent"),
        "s_per_step": st.column_config.NumberColumn(_("s / step (recent)"), format="%.3f"),
        "eta": st.column_config.TextColumn(
            _("ETA"), help=_("training left after its last logged step, at its recent pace")
        ),
        "planned": st.column_config.CheckboxColumn(_("planned"), help=_("in the plan of the Snakemake running now")),
        "problem": st.column_config.TextColumn(_("problem")),
    }


def status_counts(grid: progress.GridProgress) -> None:
    columns = st.columns(5)
    for column, status in zip(columns, ["done", "running", "waiting", "diverged", "stopped"]):
        column.metric(progress.status_name(status), len(grid.with_status(status)))


def grid_eta(grid: progress.GridProgress, eta: progress.GridEta | None) -> None:
    """While a Snakemake runs: when its plan will be done, what it still has to do, and what the
    estimate rests on; or why there is none."""
    if not grid.workflow_running:
        return
    if eta is None:
        st.caption(_("No ETA for the grid: without the plan, the jobs still to come are unknown."))
        return
    work = progress.work_left_words(eta)
    if not work:
        return
    if eta.seconds is None:
        st.metric(_("grid done in about"), "—")
        st.caption(_("No ETA: the jobs run on a cluster, as many at a time as it gives them."))
    else:
        st.metric(_("grid done in about"), progress.duration_words(eta.seconds))
    st.markdown(work)
    assumes = _(
        "Counts every job of the plan the running Snakemake wrote ({plan}), {lanes} at a time (--cores over "
        "the threads of a training). A training running now takes its steps left at its recent pace; one not "
        "started, as long as its experiment's trainings took here; sampling, each exam, collecting and the "
        "report, as long as jobs of their kind took here (Snakemake's benchmark files)."
    ).format(plan=progress.PLAN_FILE, lanes=eta.lanes)
    st.caption(" ".join(filter(None, [assumes if eta.lanes else "", progress.untimed_words(eta)])))


def run_table(grid: progress.GridProgress) -> None:
    table = pd.DataFrame(progress.progress_rows(grid))
    table["order"] = table["status"].map(STATUS_ORDER.index)
    table = table.sort_values(["order", "run"]).drop(columns="order")
    table["status"] = table["status"].map(progress.status_name)  # sorted by the state, shown in words
    if not table["problem"].any():
        table = table.drop(columns="problem")
    if not grid.plan.run_ids:
        table = table.drop(columns="planned")
    table, columns = blank_where_missing(table, table_columns(), NUMBER_FORMATS)
    st.dataframe(table, hide_index=True, width="stretch", column_config=columns)
    for run in grid.with_status("diverged"):
        st.error(
            _("{run} diverged (its loss became NaN/inf) at step {step}.").format(
                run=markdown_name(run.label), step=run.step
            ),
            icon=":material/bolt:",
        )


def live_curves(grid: progress.GridProgress, eta: progress.GridEta | None) -> None:
    """The curves of the runs training now, as far as they have logged."""
    running = grid.with_status("running")
    if not running:
        # while sampling, the exams or collecting run, the ETA above says what the grid waits on
        if not (eta and progress.work_left_words(eta)):
            st.info(_("No run is training right now."), icon=":material/pause_circle:")
        return
    st.subheader(_("Training now"))
    metrics = pd.DataFrame(progress.live_metrics(running))
    if metrics.empty:
        st.caption(_("The runs training now have not logged an evaluation yet."))
        return
    chart = charts.loss_curves(analysis.long_curves(metrics), height=360)
    # whole steps on the x axis, even while the runs have logged one or two evaluations
    charts.draw(chart.configure_axisX(format="d", tickMinStep=1))
    st.caption(_("Val solid, train dashed; a line grows at every evaluation (train.eval_every steps)."))


def show_grid(runs_root: Path) -> None:
    """Everything read from the folders now: what the workflow plans, each run, the curves."""
    grid = progress.read_grid(runs_root)
    # folders are named as text (markdown_literal): a folder's name is anyone's
    if grid.plan.known:
        st.caption(grid.plan.note(markdown_literal))
    else:
        st.warning(grid.plan.note(markdown_literal), icon=":material/help:")
    if not grid.runs:
        st.info(
            _("No run has started under {folder} yet.").format(folder=markdown_literal(runs_root)),
            icon=":material/hourglass_empty:",
        )
        return
    eta = grid.eta
    status_counts(grid)
    grid_eta(grid, eta)
    run_table(grid)
    live_curves(grid, eta)


def own_runs_root() -> Path | None:
    """Where a grid started from this folder writes its runs, if some are there (the reference is chosen)."""
    root = loaders.runs_root(loaders.DEFAULT_DB)
    return root if root.is_dir() else None


st.title(_("Progress"))
st.caption(
    _(
        "Every run of the grid, read from its run folder as it trains: no collect needed. "
        "The other pages show the database, which changes when a target ends."
    )
)


def reference_note() -> None:
    """Said while the reference is chosen and no grid of one's own has written a run: the page
    keeps looking, and follows one as soon as it starts."""
    st.info(
        _(
            "These are the shipped reference results: finished long ago, nothing of them is running. "
            "A grid you start writes its runs to {folder}."
        ).format(folder=markdown_literal(loaders.runs_root(loaders.DEFAULT_DB))),
        icon=":material/verified:",
    )


def runs_root_to_follow(db_path: str) -> Path | None:
    """The runs folder this page follows: the chosen database's; with the reference chosen, one's
    own grid's once it has started (None before: the reference note says so). Asked again at every
    refresh, so a page opened before the grid starts notices it starting."""
    if not loaders.is_reference(db_path):
        return loaders.runs_root(db_path)
    runs_root = own_runs_root()
    if runs_root is None:
        reference_note()
        return None
    st.caption(
        _("Showing your own runs folder, {folder}: it needs no database.").format(folder=markdown_literal(runs_root))
    )
    return runs_root


st.title(_("Progress"))
st.caption(
    _(
        "Every run of the grid, read from its run folder as it trains: no collect needed. "
        "The other pages show the database, which changes when a target ends."
    )
)

db_path = loaders.chosen_db_path()  # its folder is read: only a database this dashboard may open
left, right = st.columns(2)
auto = left.toggle(_("Refresh by itself"), value=True, key="progress_auto")
every = right.select_slider(
    _("every (seconds)"), options=[2, 5, 10, 30, 60], value=10, key="progress_every", disabled=not auto
)


@st.fragment(run_every=every if auto else None)
def live() -> None:
    # a rerun of this fragment alone skips the top of the script, and runs in a thread of its own
    language_choice.reapply()
    runs_root = runs_root_to_follow(db_path)
    if runs_root is None:
        return
    st.caption(_("Runs folder: {folder}").format(folder=markdown_literal(runs_root)))
    show_grid(runs_root)


live()
