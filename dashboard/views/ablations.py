"""Ablations: which part earned the gain? Each part added to one model and removed from another,
each ablation against the baseline its experiment names."""

from __future__ import annotations

import streamlit as st

from anatomy.language import _
from anatomy.report.claims import ablation_intervals, largest_ablation_change
from anatomy.report.roles import only_runs_of
from dashboard import charts, loaders
from dashboard.findings import show_findings, show_part_glossary

results = loaders.require_results()

st.title(_("Which part earned the gain?"))
st.caption(
    _(
        "Each bar is one ablation's Δ best val: the experiment's mean minus its baseline's over the same seeds "
        "(same batches; negative: lower loss), the part added alone to the 2017 model or removed alone from the "
        "mini-LLaMA. The black line is its 95% interval, corrected for the ten ablations judged together; a pale "
        "bar's interval holds zero: within noise."
    )
)

if results.ablations.empty:
    st.info(
        _(
            "No ablation runs in this database yet (runs tagged with a `part`, a `direction: add|remove` and the "
            "`baseline` they are compared with, and that baseline's runs). `snakemake --cores 1 ablations` trains "
            "them."
        )
    )
    st.stop()

show_part_glossary()
show_findings(results, "which_part")
st.markdown(largest_ablation_change(only_runs_of(results, None)) or "")
# the report's own family: every ablation against its baseline, judged together
charts.draw(charts.ablation_chart(ablation_intervals(only_runs_of(results, None)), colours=charts.colours_of(results)))

statuses = results.runs.groupby("experiment")["status"].agg(lambda s: ", ".join(sorted(set(s))))
table = results.ablations.assign(status=results.ablations["experiment"].map(statuses))
st.dataframe(
    table[
        [
            "part",
            "direction",
            "experiment",
            "baseline",
            "n_seeds",
            "delta_best_val_mean",
            "delta_best_val_min",
            "delta_best_val_max",
            "delta_final_val_mean",
            "status",
        ]
    ],
    hide_index=True,
    width="stretch",
    column_config={
        "n_seeds": st.column_config.NumberColumn(_("seeds")),
        "delta_best_val_mean": st.column_config.NumberColumn(
            _("Δ best val (mean)"), format="%+.4f", help=_("this experiment minus its baseline; negative = lower loss")
        ),
        "delta_best_val_min": st.column_config.NumberColumn(_("Δ min"), format="%+.4f"),
        "delta_best_val_max": st.column_config.NumberColumn(_("Δ max"), format="%+.4f"),
        "delta_final_val_mean": st.column_config.NumberColumn(_("Δ final val"), format="%+.4f"),
    },
)
if (table["status"] != "done").any():
    st.info(
        _("Some ablation runs have not finished (see status); their numbers are from the evaluations so far."),
        icon=":material/hourglass_top:",
    )
