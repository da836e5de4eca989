"""Samples: the text each run generates, side by side, with what it copied from the training text."""

from __future__ import annotations

import json

import pandas as pd
import streamlit as st

from anatomy.language import _

from dashboard import charts, loaders, url_state
from dashboard.findings import show_findings
from dashboard.sample_text import highlighted, memorisation_caption
from dashboard.tables import checkpoint_name, markdown_literal, markdown_name

results = loaders.require_results()
samples = results.samples

st.title(_("Generated text"))
if samples.empty:
    st.info(
        _(
            "No samples in this database yet. The workflow's `generate_samples` step writes them; by hand: "
            "`python -m anatomy generate results/runs/llama/seed42`, then collect again."
        )
    )
    st.stop()
show_findings(results, "copied")

labels = list(dict.fromkeys(samples["label"]))
headline = [label for label in results.headline["label"] if label in labels]
# kept in the URL (?run=...), so a reload or a shared link shows the same runs
chosen = url_state.widget(
    st.multiselect, _("Runs"), labels, key="samples_runs", param="run", default=(headline or labels)[:4]
)


def option_text(option) -> str:
    """A choice as the selectbox shows it: "any" and a checkpoint in the reader's language, a
    value as it is."""
    return _("any") if option == "any" else checkpoint_name(option)


cols = st.columns(2)
checkpoints = sorted(samples["checkpoint"].dropna().unique())
checkpoint = cols[0].selectbox(
    _("Checkpoint"), ["any"] + checkpoints, key="samples_checkpoint", format_func=option_text
)
temperatures = sorted(samples["temperature"].dropna().unique())
temperature = cols[1].selectbox(
    _("Temperature"), ["any"] + temperatures, key="samples_temperature", format_func=option_text
)

shown = samples[samples["label"].isin(chosen)]
if checkpoint != "any":
    shown = shown[shown["checkpoint"] == checkpoint]
if temperature != "any":
    shown = shown[shown["temperature"] == temperature]
if shown.empty:
    st.info(_("No samples match these choices."))
    st.stop()

n_runs = shown["label"].nunique()
per_row = 2 if n_runs in (2, 4) else min(3, n_runs)
columns = st.columns(per_row)
for i, (label, group) in enumerate(shown.groupby("label", sort=False)):
    with columns[i % per_row].container(border=True):
        # the experiment's name, the prefix and the note are the database's: shown as text
        st.markdown(f"**{markdown_name(label)}**")
        for _index, sample in group.iterrows():
            st.caption(
                _("checkpoint {checkpoint} · temperature {temperature} · seed {seed} · prefix {prefix}").format(
                    checkpoint=markdown_name(checkpoint_name(sample["checkpoint"])),
                    temperature=sample["temperature"],
                    seed=sample["seed"],
                    prefix=markdown_literal(repr(sample["prefix"])),
                )
            )
            if pd.notna(sample["note"]):
                st.warning(markdown_literal(sample["note"]), icon=":material/warning:")
            if pd.notna(sample["text"]) and pd.notna(sample.get("copied_fraction")):
                st.markdown(memorisation_caption(sample))
                st.html(highlighted(sample["text"], json.loads(sample["copied_spans"])))
            elif pd.notna(sample["text"]):
                st.text(sample["text"])

# ---- memorisation against training step: the best checkpoint (before the turn) and the last
measured = results.memorisation[results.memorisation["label"].isin(chosen)]
several = measured.groupby("run_id")["step"].transform("nunique") > 1
if several.any():
    st.subheader(_("Memorised share against training step"))
    charts.draw(charts.memorisation_chart(measured[several], colours=charts.colours_of(results)))
    st.caption(
        _(
            "Each run's samples from its best-val weights and its last weights: the share of generated characters "
            "copied verbatim from the training text (solid) and, as a control, found in the validation text the "
            "model never saw (dashed)."
        )
    )
