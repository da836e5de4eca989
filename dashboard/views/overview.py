"""Overview: vanilla vs mini-LLaMA at a glance, the headline table, and how far the grid got."""

from __future__ import annotations

import streamlit as st

from dashboard import analysis, charts, loaders, tables


def reference_band(path: str, experiments: list[str]):
    """The reference results' seed band of these experiments, unless this is the reference."""
    if loaders.is_reference(path):
        return None
    reference = loaders.reference_db()
    if reference is None:
        return None
    try:
        metrics = loaders.load_results(reference).metrics
    except loaders.DatabaseProblem:
        return None
    return analysis.seed_band(metrics[metrics["experiment"].isin(experiments)])


results = loaders.require_results()
runs = results.runs

st.title("Vanilla Transformer vs mini-LLaMA")
st.caption("Same text, same batches, same budget; only the parts differ. Val loss in nats per character, lower is better.")

# ---- how far the grid got
counts = runs["status"].value_counts()
n_running, n_diverged = int(counts.get("running", 0)), int(runs["diverged"].sum())
cols = st.columns(4)
cols[0].metric("runs collected", len(runs))
cols[1].metric("experiments", runs["experiment"].nunique())
cols[2].metric("still running", n_running)
cols[3].metric("diverged", n_diverged)
if n_running:
    st.info(f"The grid is still running: {n_running} run(s) have no summary yet. Their curves show the "
            "evaluations so far; collect again to update.", icon=":material/hourglass_top:")
if n_diverged:
    names = ", ".join(runs.loc[runs["diverged"], "label"])
    st.warning(f"Diverged (loss became NaN/inf): {names}. See **Break tests**.", icon=":material/error:")

headline = results.headline
if headline.empty:
    st.info("No headline runs (tag `group: headline`) in this database yet. "
            "`snakemake --cores 1 headline` trains vanilla and llama over both seeds. All runs so far:")
    shown = runs
else:
    shown = headline
    # the 2017 model first: it is the baseline the others are measured against
    experiments = sorted(dict.fromkeys(headline["experiment"]), key=lambda name: name != "vanilla")
    # ---- the headline numbers: mean best val over seeds, against the first model (vanilla)
    means = headline.groupby("experiment")["best_val_loss"].agg(["mean", "min", "max", "count"])
    cols = st.columns(len(experiments))
    baseline = experiments[0]
    for col, experiment in zip(cols, experiments):
        row = means.loc[experiment]
        delta = None if experiment == baseline else f"{row['mean'] - means.loc[baseline, 'mean']:+.3f} vs {baseline}"
        col.metric(f"{experiment}: best val (mean of {int(row['count'])} seeds)", f"{row['mean']:.3f}",
                   delta=delta, delta_color="inverse",
                   help=f"seed range {row['min']:.3f} to {row['max']:.3f}")

    # ---- the curves: min-max band over seeds, each seed, each run's best point
    metrics = results.metrics[results.metrics["experiment"].isin(experiments)]
    cols = st.columns(2)
    log = cols[0].toggle("log scale", value=False, key="overview_log")
    reference = reference_band(results.path, experiments) if cols[1].toggle(
        "reference results behind", value=True, key="overview_reference",
        help="The shipped full-size reference grid's min-max band over seeds, in grey") else None
    band = analysis.seed_band(metrics)
    seeds = analysis.long_curves(metrics, splits=("val_loss",))
    st.altair_chart(charts.seed_band_chart(band, seeds, analysis.best_points(metrics), log=log, reference=reference),
                    width="stretch")
    st.caption("Shaded: min to max over seeds at each evaluation. Lines: each seed. ◆: each run's best val. "
               + ("Grey: the same experiments in the shipped reference results (min to max over seeds). "
                  if reference is not None and not reference.empty else "")
               + "Click a model in the legend to highlight it.")

# ---- the table, as in the chapter
st.subheader("Runs")
tables.run_table(shown, ["label", "status", "params", "best_val_loss", "best_step", "final_val_loss",
                        "final_train_loss", "step_time_ms", "tokens_per_s", "compiled", "last_step", "device"])
