"""The overfitting turn: where val loss bottoms out, and how fast it climbs while train keeps falling."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from anatomy.language import _
from anatomy.report.claims import MEMORISING_RISE
from anatomy.report.roles import only_runs_of
from dashboard import analysis, charts, loaders, url_state
from dashboard.findings import show_findings

results = loaders.require_results()
grid = only_runs_of(results, None)  # the studies have their own page
colours = charts.colours_of(results)

st.title(_("The overfitting turn"))
st.caption(
    _(
        "Train loss keeps falling, but past some step the model memorises the training text and val loss "
        "turns upward. The shaded region is everything after val's minimum; the grey band is the train/val gap."
    )
)
show_findings(results, "memorises")
st.caption(
    _("The grid's runs (the studies have their own page), each in its experiment's colour: val solid, train dashed.")
)

margin = st.number_input(
    _("Margin (nats): the turn is the first step where val is this far above its minimum"),
    min_value=0.0,
    max_value=5.0,
    value=MEMORISING_RISE,  # the report's margin, so the page and the memorising verdict agree
    step=0.01,
    format="%.2f",
    key="turn_margin",
)
table = analysis.overfitting_table(grid.runs, grid.above_best, margin)
if table.empty:
    st.info(_("No run has a finite val loss yet."))
    st.stop()

st.dataframe(
    table.drop(columns=["run_id", "experiment"]).sort_values("val_rise", ascending=False),
    hide_index=True,
    width="stretch",
    column_config={
        "label": st.column_config.TextColumn(_("run")),
        "min_val": st.column_config.NumberColumn(_("min val"), format="%.4f"),
        "min_step": st.column_config.NumberColumn(_("at step"), format="%d"),
        "turn_step": st.column_config.NumberColumn(_("val > min + margin from step"), format="%d"),
        "final_step": st.column_config.NumberColumn(_("last eval"), format="%d"),
        "final_val": st.column_config.NumberColumn(_("final val"), format="%.4f"),
        "val_rise": st.column_config.NumberColumn(_("rise after min"), format="%+.4f"),
        "final_train": st.column_config.NumberColumn(_("final train"), format="%.4f"),
        "gap": st.column_config.NumberColumn(_("val - train at end"), format="%.4f"),
    },
)

# headline runs without a finite val loss (diverged before their first evaluation, or just
# started) have no row in the table, so they cannot be a default
headline = [label for label in grid.headline["label"] if label in set(table["label"])]
default = headline or list(table.sort_values("val_rise", ascending=False)["label"][:2])
# kept in the URL (?run=...), so a reload or a shared link draws the same runs
chosen = url_state.widget(
    st.multiselect, _("Runs to draw"), list(table["label"]), key="turn_runs", param="run", default=default
)
# one loss axis for every chart here, so that their heights compare run to run
shown = grid.metrics[grid.metrics["label"].isin(chosen)]
losses = pd.concat([shown["train_loss"], shown["val_loss"]])
losses = losses[analysis.finite(losses)]
y_domain = (float(losses.min()), float(losses.max())) if not losses.empty else None
columns = st.columns(2)
for i, label in enumerate(chosen):
    row = table[table["label"] == label].iloc[0]
    run = grid.metrics[(grid.metrics["label"] == label)]
    run = run[analysis.finite(run["val_loss"]) & analysis.finite(run["train_loss"])]
    with columns[i % 2]:
        if row["min_step"] < row["final_step"]:
            st.markdown(
                _("**{run}**: min val {loss} at step {step}, then +{rise} by step {last_step}").format(
                    run=label,
                    loss=f"{row['min_val']:.3f}",
                    step=int(row["min_step"]),
                    rise=f"{row['val_rise']:.3f}",
                    last_step=int(row["final_step"]),
                )
            )
        else:
            st.markdown(
                _("**{run}**: val is still falling at its last evaluation ({loss} at step {step}): no turn yet").format(
                    run=label, loss=f"{row['min_val']:.3f}", step=int(row["min_step"])
                )
            )
        charts.draw(charts.overfitting_chart(run, row, margin, y_domain=y_domain, colours=colours))
