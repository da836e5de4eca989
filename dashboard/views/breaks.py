"""Break tests: pre-norm vs post-norm at depth, broken RoPE, MQA, QK-norm, each against its baseline.

Every run whose group is neither `headline` nor `ablation` shows here. Runs deeper than the
headline models go in the depth section; the rest are compared with the baseline their
experiment names (the mini-LLaMA, in workflow/experiments.yaml).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from anatomy.language import _
from anatomy.report.roles import only_runs_of
from dashboard import analysis, charts, loaders, tables
from dashboard.findings import show_findings

results = loaders.require_results()
runs = results.runs

st.title(_("Break tests"))
grid = only_runs_of(results, None).runs  # a study's runs never join the grid's pages
breaks = grid[~grid["group"].isin(["headline", "ablation"])]
if breaks.empty:
    st.info(_("No break-test runs in this database yet. `snakemake --cores 1 break_tests` trains them."))
    st.stop()
# the verdicts first: where the premise failed (post-norm trained), the deep claim says so and
# points to the depth map on the Exams page, where the break does show
show_findings(results, "deep_postnorm", "broken_rope", "mqa")

diverged = analysis.divergence_points(runs, results.metrics)
diverged = diverged[diverged["run_id"].isin(breaks["run_id"])]
for _index, point in diverged.iterrows():  # not `_`: that name translates
    said = (
        _(
            "**{run} diverged**: the loss became NaN/inf at step {step} (last finite val {loss} at step "
            "{last_step}); training stopped there."
        ).format(
            run=point["label"],
            step=point["diverged_step"],
            loss=f"{point['val_loss']:.3f}",
            last_step=int(point["step"]),
        )
        if pd.notna(point["val_loss"])
        else _(
            "**{run} diverged**: the loss became NaN/inf at step {step} (before its first evaluation); training "
            "stopped there."
        ).format(run=point["label"], step=point["diverged_step"])
    )
    st.error(said, icon=":material/error:")

# deeper than the headline models (with no headline runs yet, the median is NaN: none is deep)
is_deep = breaks["n_layer"] > results.headline["n_layer"].median()
deep, others = breaks[is_deep], breaks[~is_deep]
log = st.toggle(_("log y"), key="breaks_log")

if not deep.empty:
    st.subheader(_("At depth: {layers} layers").format(layers=int(deep["n_layer"].max())))
    st.page_link(
        "views/exams.py", label=_("The depth map: the same wirings over the learning rate"), icon=":material/quiz:"
    )
    st.caption(
        _(
            "Post-norm puts the norm after the residual sum, so at depth the gradient must pass through every "
            "norm; pre-norm keeps a clean residual path. ✕ marks where a run broke."
        )
    )
    metrics = results.metrics[results.metrics["run_id"].isin(deep["run_id"])]
    chart = charts.loss_curves(analysis.long_curves(metrics), log=log)
    marks = diverged[diverged["run_id"].isin(deep["run_id"])]
    if not marks.empty:
        chart = chart + charts.divergence_marks(marks, x_max=metrics["step"].max(), log=log)
    charts.draw(chart)

if not others.empty:
    names = list(dict.fromkeys(others["experiment"]))
    baselines = list(dict.fromkeys(others["baseline"].dropna()))
    st.subheader(
        _("Broken or changed parts against {baselines}").format(baselines=", ".join(baselines))
        if baselines
        else _("Broken or changed parts against their baselines")
    )
    st.caption(
        _(
            "RoPE with k left unrotated or paired differently from q loses relative position; "
            "MQA shares one key/value head among all query heads."
        )
    )
    shown = baselines + names
    metrics = results.metrics[results.metrics["experiment"].isin(shown)]
    val = analysis.long_curves(metrics, splits=("val_loss",))
    chart = charts.loss_curves(val, log=log, by="experiment")
    marks = diverged[diverged["run_id"].isin(others["run_id"])]
    if not marks.empty:
        chart = chart + charts.divergence_marks(marks, x_max=metrics["step"].max(), log=log)
    charts.draw(chart)
    deltas = analysis.versus_baseline(results.comparisons, names)
    if not deltas.empty:
        charts.draw(charts.delta_chart(deltas))
    missing = [name for name in baselines if not (runs["experiment"] == name).any()]
    if missing or not baselines:
        st.info(
            _("No runs of {baselines} to compare with yet.").format(
                baselines=", ".join(f"`{name}`" for name in missing)
            )
            if missing
            else _("No runs of a baseline to compare with yet.")
        )

st.subheader(_("Break-test runs"))
tables.run_table(
    breaks,
    # the numbers first: the long description last, so that at 1400 px best val is never cut off
    [
        "label",
        "status",
        "best_val_loss",
        "best_step",
        "final_val_loss",
        "diverged_step",
        "n_layer",
        "part",
        "baseline",
        "last_step",
        "description",
    ],
)
