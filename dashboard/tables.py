"""The run tables: one set of column names and number formats for every view."""

from __future__ import annotations

import pandas as pd
import streamlit as st

RUN_COLUMNS = {
    "label": st.column_config.TextColumn("run"),
    "params": st.column_config.NumberColumn("params", format="localized"),
    "n_layer": st.column_config.NumberColumn("layers", format="%d"),
    "diverged_step": st.column_config.NumberColumn("diverged at", format="%d"),
    "best_val_loss": st.column_config.NumberColumn("best val", format="%.4f"),
    "best_step": st.column_config.NumberColumn("at step", format="%d"),
    "final_val_loss": st.column_config.NumberColumn("final val", format="%.4f"),
    "final_train_loss": st.column_config.NumberColumn("final train", format="%.4f"),
    "step_time_ms": st.column_config.NumberColumn("ms / step", format="%.1f"),
    "tokens_per_s": st.column_config.NumberColumn("tokens / s", format="%.0f"),
    # step times of a compiled and an eager run are not like for like (docs/speed.md)
    "compiled": st.column_config.CheckboxColumn("compiled", help="training steps ran through torch.compile"),
    "last_step": st.column_config.NumberColumn("steps", format="%d"),
    "elapsed_s": st.column_config.NumberColumn("wall-clock (s)", format="%.1f"),
}


def run_table(runs: pd.DataFrame, columns: list[str]) -> None:
    """These columns of the runs, one row per run, formatted alike on every page."""
    table = runs.assign(step_time_ms=runs["step_time_s"] * 1000)[columns]
    st.dataframe(table, hide_index=True, width="stretch", column_config=RUN_COLUMNS)
