"""Break tests: pre-norm vs post-norm at depth, broken RoPE, MQA, QK-norm, each against its baseline.

Every run whose group is neither `headline` nor `ablation` shows here. Runs deeper than the
headline models go in the depth section; the rest are compared with the baseline their
experiment names (the mini-LLaMA, in workflow/experiments.yaml).
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from anatomy.language import _, join_list
from anatomy.report.roles import only_runs_of
from anatomy.report.uncertainty import judged_against_baselines
from anatomy.report.wording import sentences
from dashboard import analysis, charts, loaders, tables
from dashboard.findings import show_findings, show_part_glossary


def ends_lower_yet_worse(runs: pd.DataFrame, names: list[str]) -> str | None:
    """Why a curve that ends lowest can still be the worse model: the sentence, for the experiment
    whose last val is the lowest of these (mean over seeds) while its best val is above its
    baseline's; None where no curve reads that way."""
    done = runs[runs["experiment"].isin(names) | runs["experiment"].isin(runs["baseline"].dropna())]
    means = done.groupby("experiment")[["final_val_loss", "best_val_loss"]].mean()
    shown = means.reindex([name for name in names if name in means.index]).dropna()
    if shown.empty:
        return None
    lowest = shown["final_val_loss"].idxmin()
    baseline = runs.loc[runs["experiment"] == lowest, "baseline"].dropna()
    if baseline.empty or baseline.iloc[0] not in means.index:
        return None
    base = means.loc[baseline.iloc[0]]
    if not (
        shown.loc[lowest, "final_val_loss"] < base["final_val_loss"]
        and shown.loc[lowest, "best_val_loss"] > base["best_val_loss"]
    ):
        return None
    return _(
        "Every val curve here climbs after its best step: the models start to memorise the training text "
        "(see Overfitting turn). {experiment} ends lowest ({final} against {baseline_final} for {baseline}), yet "
        "its best val is higher ({best} against {baseline_best}): a model that learns less from the text also "
        "memorises less of it, so its val climbs less. A part is judged at each run's best val, before the "
        "climb, as below."
    ).format(
        experiment=lowest,
        final=f"{shown.loc[lowest, 'final_val_loss']:.2f}",
        baseline=baseline.iloc[0],
        baseline_final=f"{base['final_val_loss']:.2f}",
        best=f"{shown.loc[lowest, 'best_val_loss']:.3f}",
        baseline_best=f"{base['best_val_loss']:.3f}",
    )


results = loaders.require_results()
runs = results.runs
colours = charts.colours_of(results)

st.title(_("Break tests"))
grid = only_runs_of(results, None).runs  # a study's runs never join the grid's pages
breaks = grid[~grid["group"].isin(["headline", "ablation"])]
if breaks.empty:
    st.info(_("No break-test runs in this database yet. `snakemake --cores 1 break_tests` trains them."))
    st.stop()
# the verdicts first: where the premise failed (post-norm trained), the deep claim says so and
# points to the depth map on the Exams page, where the break does show
show_part_glossary()
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
    metrics = results.metrics[results.metrics["run_id"].isin(deep["run_id"])]
    chart = charts.loss_curves(analysis.long_curves(metrics), log=log, colours=colours)
    marks = diverged[diverged["run_id"].isin(deep["run_id"])]
    said = [
        _(
            "Post-norm puts the norm after the residual sum, so at depth the gradient must pass through every "
            "norm; pre-norm keeps a clean residual path."
        ),
        _("Solid: val; dashed: train; one line per seed."),
    ]
    if not marks.empty:
        chart = chart + charts.divergence_marks(marks, x_max=metrics["step"].max(), log=log)
        said.append(_("✕ marks where a run broke."))
    st.caption(sentences(said))
    charts.draw(charts.zoomable(chart))

if not others.empty:
    names = list(dict.fromkeys(others["experiment"]))
    baselines = list(dict.fromkeys(others["baseline"].dropna()))
    st.subheader(
        _("Broken or changed parts against {baselines}").format(baselines=join_list(baselines))
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
    chart = charts.loss_curves(val, log=log, colours=colours)
    marks = diverged[diverged["run_id"].isin(others["run_id"])]
    if not marks.empty:
        chart = chart + charts.divergence_marks(marks, x_max=metrics["step"].max(), log=log)
    charts.draw(charts.zoomable(chart))
    if lower_at_the_end := ends_lower_yet_worse(grid, names):
        st.caption(lower_at_the_end)
    judged = judged_against_baselines(only_runs_of(results, None), names)
    deltas = analysis.interval_rows(analysis.versus_baseline(results.comparisons, names), judged)
    if not deltas.empty:
        st.markdown(_("**Each against {baselines}, with its noise**").format(baselines=join_list(baselines)))
        charts.draw(charts.break_delta_chart(deltas, colours=colours))
        st.caption(
            _(
                "Each dot is the experiment's mean best val minus its baseline's over the same seeds (negative: lower "
                "loss). The black line is its 95% interval, from the seeds' noise, corrected for the {count} "
                "comparisons judged together, as on Ablations; a pale dot's interval holds zero: within noise. The "
                "small ticks are the seeds' own differences."
            ).format(count=len(judged))
        )
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
