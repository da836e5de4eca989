"""Samples: the text each run generates, side by side."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import loaders

results = loaders.require_results()
samples = results.samples

st.title("Generated text")
if samples.empty:
    st.info("No samples in this database yet. The workflow's `generate_samples` step writes them; by hand: "
            "`python -m anatomy generate results/runs/llama/seed42`, then collect again.")
    st.stop()

labels = list(dict.fromkeys(samples["label"]))
headline = [label for label in results.headline["label"] if label in labels]
chosen = st.multiselect("Runs", labels, default=(headline or labels)[:4], key="samples_runs")
cols = st.columns(2)
checkpoints = sorted(samples["checkpoint"].dropna().unique())
checkpoint = cols[0].selectbox("Checkpoint", ["any"] + checkpoints, key="samples_checkpoint")
temperatures = sorted(samples["temperature"].dropna().unique())
temperature = cols[1].selectbox("Temperature", ["any"] + temperatures, key="samples_temperature")

shown = samples[samples["label"].isin(chosen)]
if checkpoint != "any":
    shown = shown[shown["checkpoint"] == checkpoint]
if temperature != "any":
    shown = shown[shown["temperature"] == temperature]
if shown.empty:
    st.info("No samples match these choices.")
    st.stop()

n_runs = shown["label"].nunique()
per_row = 2 if n_runs in (2, 4) else min(3, n_runs)
columns = st.columns(per_row)
for i, (label, group) in enumerate(shown.groupby("label", sort=False)):
    with columns[i % per_row].container(border=True):
        st.markdown(f"**{label}**")
        for _, sample in group.iterrows():
            st.caption(f"checkpoint `{sample['checkpoint']}` · temperature {sample['temperature']} · "
                       f"seed {sample['seed']} · prefix {sample['prefix']!r}")
            if pd.notna(sample["note"]):
                st.warning(sample["note"], icon=":material/warning:")
            if pd.notna(sample["text"]):
                st.text(sample["text"])
