"""Listen: generate from one or two runs side by side, character by character, and see what is copied.

The text comes from the package's own generation code (`anatomy.generate.stream`), so the same
run, checkpoint, prefix, temperature and seed give the same text here as
`python -m anatomy generate`. Copied spans are found against the run's training text
(`anatomy.memorisation`), when its corpus folder is on disk.
"""

from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

from anatomy.errors import AnatomyError
from anatomy.generate import load_model, stream
from anatomy.memorisation import Memorisation, data_dir_of
from dashboard import loaders
from dashboard.sample_text import highlighted

REFRESH_EVERY = 5  # characters between screen updates: each update is a message to the browser


@st.cache_resource(show_spinner="Loading the weights…", max_entries=8)
def cached_model(run_dir: str, checkpoint: str, version: float):
    del version  # only part of the cache key: a retrained run has new weights
    return load_model(run_dir, checkpoint)


@st.cache_resource(show_spinner="Indexing the training text…", max_entries=4)
def cached_memorisation(data_dir: str) -> Memorisation:
    return Memorisation(Path(data_dir))


def weights_file(run_dir: Path, checkpoint: str) -> Path | None:
    """The checkpoint, or the shipped float16 weights, that generation would read."""
    for path in (run_dir / f"{checkpoint}.pt", run_dir / f"{checkpoint}.safetensors"):
        if path.is_file():
            return path
    return None


def measurer(run_dir: Path) -> Memorisation | None:
    """Copies are measured against the run's own training text, when its corpus is on disk."""
    try:
        return cached_memorisation(str(data_dir_of(run_dir)))
    except AnatomyError:
        return None


results = loaders.require_results()
runs = results.runs[results.runs["status"] != "running"]

st.title("Listen to it")
st.caption(
    "Before any number, the text. Pick a run (or two, to hear them side by side), a checkpoint and how to "
    "sample; the text is written as it is generated. Highlighted: spans of 12+ characters copied verbatim "
    "from the training text (hover one for its post)."
)

root = Path(
    st.text_input(
        "Run folders",
        value=str(loaders.runs_root(results.path)),
        key="listen_root",
        help="The folder that holds the runs of this database, e.g. results/runs",
    )
)
labels = list(runs["label"])
headline = runs[(runs["group"] == "headline") & (runs["seed"] == runs["seed"].max())]["label"].tolist()
chosen = st.multiselect(
    "Runs (one or two)", labels, default=(headline or labels)[:2], max_selections=2, key="listen_runs"
)
cols = st.columns(5)
checkpoint = cols[0].segmented_control("Checkpoint", ["best", "last"], default="last", key="listen_checkpoint")
prefix = cols[1].text_input("Prefix", value="## ", key="listen_prefix")
temperature = cols[2].number_input(
    "Temperature", 0.0, 2.0, 0.8, 0.1, key="listen_temperature", help="0: always the most likely character"
)
chars = cols[3].number_input("Characters", 1, 2000, 300, 50, key="listen_chars")
seed = cols[4].number_input("Seed", 0, 2**31 - 1, 0, 1, key="listen_seed")
if not chosen or not checkpoint:
    st.info("Choose a run and a checkpoint.")
    st.stop()

chosen_runs = runs.set_index("label").loc[chosen]
panes = st.columns(len(chosen))
ready = {}
for pane, (label, run) in zip(panes, chosen_runs.iterrows()):
    run_dir = root / run["run_id"]
    with pane:
        st.markdown(f"**{label}** · `{checkpoint}`")
        weights = weights_file(run_dir, checkpoint)
        if weights is None:
            st.info(
                f"No `{checkpoint}` weights on disk for this run (looked in `{run_dir}`): checkpoints are not "
                "committed, and the reference results ship weights only for the seed-42 headline runs. "
                "Train it to listen to it; its stored sample is below.",
                icon=":material/volume_off:",
            )
            stored = results.samples[(results.samples["run_id"] == run["run_id"]) & results.samples["text"].notna()]
            stored = (
                stored[stored["checkpoint"] == checkpoint] if (stored["checkpoint"] == checkpoint).any() else stored
            )
            if not stored.empty:
                st.text(stored["text"].iloc[0])
            continue
        ready[label] = (run_dir, weights, st.empty(), st.empty())

if ready and st.button("Generate", type="primary", key="listen_go"):
    streams, texts, measure = {}, {}, {}
    try:
        for label, (run_dir, weights, _, _) in ready.items():
            model, tokenizer = cached_model(str(run_dir), checkpoint, weights.stat().st_mtime)
            streams[label] = stream(model, tokenizer, int(chars), float(temperature), prefix, int(seed))
            texts[label] = prefix
            measure[label] = measurer(run_dir)
        started, cache_bytes = time.perf_counter(), dict.fromkeys(ready, 0)
        for step in range(1, int(chars) + 1):
            for label, characters in streams.items():  # one character from each, in turn
                char, cache_bytes[label] = next(characters)
                texts[label] += char
            if step % REFRESH_EVERY and step != int(chars):
                continue
            speed = step * len(streams) / max(time.perf_counter() - started, 1e-9)
            for label, (_, _, text_slot, stats_slot) in ready.items():
                figures = measure[label](texts[label], prefix) if measure[label] else None
                text_slot.html(highlighted(texts[label], figures["copied_spans"] if figures else []))
                copied = (
                    f" · copied {figures['copied_fraction']:.1%}"
                    if figures
                    else " · copies not measured: the run's corpus folder is not here (make it with "
                    "`snakemake --cores 1 results/corpus/split.json`)"
                )
                stats_slot.caption(
                    f"{step} characters · {speed:,.0f} characters/s · "
                    f"KV cache {cache_bytes[label] / 1024:,.1f} KiB{copied}"
                )
    except AnatomyError as err:
        st.error(str(err), icon=":material/error:")
    st.session_state["listen_texts"] = texts
elif ready:
    st.caption("Press Generate to start.")
