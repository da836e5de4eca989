"""The run tables: one set of column names and number formats for every view."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from anatomy.language import N_, _

# column -> (its kind, its header, its number format); "any" only names the column, its values
# shown as they are. A header is marked N_ here, at import, and translated with _ when a table is
# drawn, in the reader's language.
RUN_COLUMNS = {
    "label": ("text", N_("run"), None),
    "description": ("any", N_("description"), None),
    "group": ("any", N_("group"), None),
    "part": ("any", N_("part"), None),
    "direction": ("any", N_("direction"), None),
    "baseline": ("any", N_("baseline"), None),
    "status": ("any", N_("status"), None),
    "device": ("any", N_("device"), None),
    "params": ("number", N_("params"), "localized"),
    "n_layer": ("number", N_("layers"), "%d"),
    "diverged_step": ("number", N_("diverged at"), "%d"),
    "best_val_loss": ("number", N_("best val"), "%.4f"),
    "best_step": ("number", N_("at step"), "%d"),
    "final_val_loss": ("number", N_("final val"), "%.4f"),
    "final_train_loss": ("number", N_("final train"), "%.4f"),
    "step_time_ms": ("number", N_("ms / step"), "%.1f"),
    "tokens_per_s": ("number", N_("tokens / s"), "%.0f"),
    # step times of a compiled and an eager run are not like for like (docs/speed.md)
    "compiled": ("checkbox", N_("compiled"), None),
    "last_step": ("number", N_("steps"), "%d"),
    "elapsed_s": ("number", N_("wall-clock (s)"), "%.1f"),
}
COMPILED_HELP = N_("training steps ran through torch.compile")


def run_columns() -> dict:
    """The column configuration of a run table, its headers in the reader's language."""
    columns = {}
    for name, (kind, header, number_format) in RUN_COLUMNS.items():
        if kind == "number":
            columns[name] = st.column_config.NumberColumn(_(header), format=number_format)
        elif kind == "checkbox":
            columns[name] = st.column_config.CheckboxColumn(_(header), help=_(COMPILED_HELP))
        elif kind == "text":
            columns[name] = st.column_config.TextColumn(_(header))
        else:
            columns[name] = st.column_config.Column(_(header))
    return columns


def run_table(runs: pd.DataFrame, columns: list[str]) -> None:
    """These columns of the runs, one row per run, formatted alike on every page."""
    table = runs.assign(step_time_ms=runs["step_time_s"] * 1000)[columns]
    st.dataframe(table, hide_index=True, width="stretch", column_config=run_columns())
