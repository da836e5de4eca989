"""Overview: vanilla vs mini-LLaMA at a glance, the headline table, and how far the grid got."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from anatomy.language import _, join_list, ngettext
from anatomy.results.reference import corpus_differences, fact_value
from anatomy.report.findings import FOUND, findings_block
from anatomy.report.protocol import protocol_of
from anatomy.report.roles import only_runs_of
from anatomy.report.wording import sentences
from anatomy.report.uncertainty import interval_text, judged_against_baselines
from dashboard import analysis, charts, loaders, tables
from dashboard.findings import show_findings


def reference_band(path: str, experiments: list[str]) -> tuple[pd.DataFrame | None, str]:
    """The reference results' seed band of these experiments, unless this is the reference, or
    these runs were trained on another corpus (a band of other losses would mislead); else why not."""
    if loaders.is_reference(path):
        return None, ""
    reference = loaders.reference_db()
    if reference is None:
        return None, ""
    try:
        shipped = loaders.load_results(reference)
        band = shipped.band
        theirs, ours = loaders.corpora(shipped, experiments), loaders.corpora(loaders.load_results(path), experiments)
    except loaders.DatabaseProblem:
        return None, ""
    for mine in ours:
        for shipped in theirs:
            if differ := corpus_differences(mine, shipped):
                said = ", ".join(
                    _("{fact} {ours} against {theirs}").format(
                        fact=key, ours=fact_value(mine[key]), theirs=fact_value(shipped[key])
                    )
                    for key in differ
                )
                return None, _(
                    "No reference band: these runs were trained on another corpus than the shipped "
                    "reference results ({differences}), so their losses do not compare."
                ).format(differences=said)
    return band[band["experiment"].isin(experiments)], ""


def fits_the_step_axis(band: pd.DataFrame | None, metrics: pd.DataFrame) -> bool:
    """Whether the reference band is drawn by default behind these runs: only when they reach at
    least half its steps. A toy grid of a few dozen steps drawn on the reference's 0-2,000 step
    axis is a flat line at its left edge."""
    if band is None or band.empty or metrics.empty:
        return False
    return metrics["step"].max() >= band["step"].max() / 2


results = loaders.require_results()
runs = only_runs_of(results, None).runs  # the grid's: each study has its own page
n_study_runs = len(results.runs) - len(runs)

st.title(_("Vanilla Transformer vs mini-LLaMA"))
st.caption(
    _("Same text, same batches, same budget; only the parts differ. Val loss in nats per character, lower is better.")
)
if found := findings_block(results, link_prefix=None):  # the same numbered list the README and report open with
    st.subheader(_(FOUND))
    st.markdown(found)

# ---- how far the grid got
counts = runs["status"].value_counts()
n_running, n_diverged = int(counts.get("running", 0)), int(runs["diverged"].sum())
cols = st.columns(4)
cols[0].metric(_("runs of the grid"), len(runs))
cols[1].metric(_("experiments"), runs["experiment"].nunique())
cols[2].metric(_("still running"), n_running)
cols[3].metric(_("diverged"), n_diverged)
if n_study_runs:
    st.caption(
        ngettext(
            "Besides the grid, {count} run of the studies: they have their own page, Studies.",
            "Besides the grid, {count} runs of the studies: they have their own page, Studies.",
            n_study_runs,
        ).format(count=n_study_runs)
    )
if n_running:
    st.info(
        _(
            "The grid is still running: {n_running} run(s) have no summary yet. Their curves show the "
            "evaluations so far; collect again to update."
        ).format(n_running=n_running),
        icon=":material/hourglass_top:",
    )
if n_diverged:
    names = join_list(runs.loc[runs["diverged"], "label"])
    st.warning(
        _("Diverged (loss became NaN/inf): {runs}. See **Break tests**.").format(runs=names), icon=":material/error:"
    )

headline = results.headline
if headline.empty:
    st.info(
        _(
            "No headline runs (tag `group: headline`) in this database yet. "
            "`snakemake --cores 1 headline` trains vanilla and llama over both seeds. All runs so far:"
        )
    )
    shown = runs
else:
    shown = headline
    show_findings(results, "lower_valley", "learns_faster", "memorises")
    # a difference is coloured as a win or a loss only when its interval excludes zero (the noise rule)
    grid = only_runs_of(results, None)
    # the models the others are measured against first (the 2017 model: it has no baseline)
    compared = results.comparisons.set_index("experiment")
    experiments = sorted(dict.fromkeys(headline["experiment"]), key=lambda name: name in compared.index)
    judged = judged_against_baselines(grid, [name for name in experiments if name in compared.index])
    # toy runs, or runs that learned nothing: a difference is shown, never coloured as a finding
    findings_testable = protocol_of(grid).untestable_reason is None
    # ---- the headline numbers: mean best val over seeds, each against its baseline
    means = results.experiments.set_index("experiment")
    cols = st.columns(len(experiments))
    for col, experiment in zip(cols, experiments):
        row = means.loc[experiment]
        delta, beyond, interval = None, False, ""
        if experiment in judged:
            versus, difference = compared.loc[experiment], judged[experiment]
            beyond = bool(difference.beyond) and findings_testable
            interval = interval_text(difference)
            # the number first in every language: Streamlit reads its sign for the arrow
            if not findings_testable:
                said = _("{delta} vs {baseline} (not testable at this size)")
            else:
                said = _("{delta} vs {baseline}") if beyond else _("{delta} vs {baseline} (within noise)")
            delta = said.format(delta=f"{difference.mean:+.3f}", baseline=versus["baseline"])
        col.metric(
            _("{experiment}: best val (mean of {n_runs} seeds)").format(
                experiment=experiment, n_runs=int(row["n_runs"])
            ),
            f"{row['best_val_mean']:.3f}",
            delta=delta,
            delta_color="inverse" if beyond else "off",  # lower is better; grey within the noise
            help=(
                _("seed range {low} to {high}; against its baseline {interval}")
                if interval
                else _("seed range {low} to {high}")
            ).format(low=f"{row['best_val_min']:.3f}", high=f"{row['best_val_max']:.3f}", interval=interval),
        )

    # ---- the curves: min-max band over seeds, each seed, each run's best point
    metrics = results.metrics[results.metrics["experiment"].isin(experiments)]
    cols = st.columns(2)
    log = cols[0].toggle(_("log scale"), value=False, key="overview_log")
    reference, no_band = None, ""
    if not loaders.is_reference(results.path):  # the reference shown is not drawn behind itself
        band_found, why_not = reference_band(results.path, experiments)
        if cols[1].toggle(
            _("reference results behind"),
            value=fits_the_step_axis(band_found, metrics) or bool(why_not),  # on: to say why there is none
            key="overview_reference",
            help=_("The shipped full-size reference grid's min-max band over seeds, in grey"),
        ):
            reference, no_band = band_found, why_not
    band = results.band[results.band["experiment"].isin(experiments)]
    seeds = analysis.long_curves(metrics, splits=("val_loss",))
    best = analysis.best_points(headline)
    charts.draw(
        charts.seed_band_chart(band, seeds, best, log=log, reference=reference, colours=charts.colours_of(results))
    )
    said = [_("Shaded: min to max over seeds at each evaluation. Lines: each seed. ◆: each run's best val.")]
    if reference is not None and not reference.empty:
        said.append(_("Grey: the same experiments in the shipped reference results (min to max over seeds)."))
    said.append(_("Click a model in the legend to highlight it."))
    if no_band:
        said.append(no_band)
    st.caption(sentences(said))

# ---- the table, as in the chapter
st.subheader(_("Runs"))
tables.run_table(
    shown,
    [
        "label",
        "status",
        "params",
        "best_val_loss",
        "best_step",
        "final_val_loss",
        "final_train_loss",
        "step_time_ms",
        "tokens_per_s",
        "compiled",
        "last_step",
        "device",
    ],
)
