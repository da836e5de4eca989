"""Overview: vanilla vs mini-LLaMA at a glance, the headline table, and how far the grid got."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from anatomy.results.reference import corpus_differences, fact_value
from anatomy.report.roles import baseline_deltas, headline_noise, only_runs_of, side_beyond_noise
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
                said = ", ".join(f"{key} {fact_value(mine[key])} against {fact_value(shipped[key])}" for key in differ)
                return None, (
                    f"No reference band: these runs were trained on another corpus than the shipped "
                    f"reference results ({said}), so their losses do not compare."
                )
    return band[band["experiment"].isin(experiments)], ""


results = loaders.require_results()
runs = results.runs

st.title("Vanilla Transformer vs mini-LLaMA")
st.caption(
    "Same text, same batches, same budget; only the parts differ. Val loss in nats per character, lower is better."
)

# ---- how far the grid got
counts = runs["status"].value_counts()
n_running, n_diverged = int(counts.get("running", 0)), int(runs["diverged"].sum())
cols = st.columns(4)
cols[0].metric("runs collected", len(runs))
cols[1].metric("experiments", runs["experiment"].nunique())
cols[2].metric("still running", n_running)
cols[3].metric("diverged", n_diverged)
if n_running:
    st.info(
        f"The grid is still running: {n_running} run(s) have no summary yet. Their curves show the "
        "evaluations so far; collect again to update.",
        icon=":material/hourglass_top:",
    )
if n_diverged:
    names = ", ".join(runs.loc[runs["diverged"], "label"])
    st.warning(f"Diverged (loss became NaN/inf): {names}. See **Break tests**.", icon=":material/error:")

headline = results.headline
if headline.empty:
    st.info(
        "No headline runs (tag `group: headline`) in this database yet. "
        "`snakemake --cores 1 headline` trains vanilla and llama over both seeds. All runs so far:"
    )
    shown = runs
else:
    shown = headline
    show_findings(results, "lower_valley", "learns_faster")
    # a difference is coloured as a win or a loss only when every seed lies beyond the seed noise
    grid = only_runs_of(results, None)
    noise = headline_noise(grid)
    # the models the others are measured against first (the 2017 model: it has no baseline)
    compared = results.comparisons.set_index("experiment")
    experiments = sorted(dict.fromkeys(headline["experiment"]), key=lambda name: name in compared.index)
    # ---- the headline numbers: mean best val over seeds, each against its baseline
    means = results.experiments.set_index("experiment")
    cols = st.columns(len(experiments))
    for col, experiment in zip(cols, experiments):
        row = means.loc[experiment]
        delta, beyond = None, False
        if experiment in compared.index:
            versus = compared.loc[experiment]
            beyond = bool(side_beyond_noise(baseline_deltas(grid, experiment), noise))
            delta = f"{versus['delta_best_val_mean']:+.3f} vs {versus['baseline']}" + (
                "" if beyond else " (inside seed noise)"
            )
        col.metric(
            f"{experiment}: best val (mean of {int(row['n_runs'])} seeds)",
            f"{row['best_val_mean']:.3f}",
            delta=delta,
            delta_color="inverse" if beyond else "off",  # lower is better; grey inside the noise
            help=f"seed range {row['best_val_min']:.3f} to {row['best_val_max']:.3f}; seed noise {noise:.3f} nats",
        )

    # ---- the curves: min-max band over seeds, each seed, each run's best point
    metrics = results.metrics[results.metrics["experiment"].isin(experiments)]
    cols = st.columns(2)
    log = cols[0].toggle("log scale", value=False, key="overview_log")
    reference, no_band = (
        reference_band(results.path, experiments)
        if cols[1].toggle(
            "reference results behind",
            value=True,
            key="overview_reference",
            help="The shipped full-size reference grid's min-max band over seeds, in grey",
        )
        else (None, "")
    )
    band = results.band[results.band["experiment"].isin(experiments)]
    seeds = analysis.long_curves(metrics, splits=("val_loss",))
    best = analysis.best_points(headline)
    st.altair_chart(charts.seed_band_chart(band, seeds, best, log=log, reference=reference), width="stretch")
    st.caption(
        "Shaded: min to max over seeds at each evaluation. Lines: each seed. ◆: each run's best val. "
        + (
            "Grey: the same experiments in the shipped reference results (min to max over seeds). "
            if reference is not None and not reference.empty
            else ""
        )
        + "Click a model in the legend to highlight it."
        + (f" {no_band}" if no_band else "")
    )

# ---- the table, as in the chapter
st.subheader("Runs")
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
