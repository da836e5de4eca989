"""Listen: generate from one or two runs side by side, character by character, and see what is copied.

The text comes from the package's own generation code (`anatomy.generation.generate.stream`), so the same
run, checkpoint, prefix, temperature and seed give the same text here as
`python -m anatomy generate`. Copied spans are found against the run's training text
(`anatomy.generation.memorisation`). On a fresh clone the default corpus's folder (results/corpus) is not
there yet: it is built on first use, as the workflow would build it (`anatomy.data.default_corpus`).

Each generation is kept in the session with the settings that made it (the last HISTORY of
them), so that changing a control and generating again puts the new text beside the old. What it
keeps is put in words when shown, in the reader's language then: a note on copies is kept as its
sentence and values (`Note`), not as the words of the language it was made in.
"""

from __future__ import annotations

import time
from pathlib import Path

import streamlit as st

from anatomy.data.default_corpus import build_default_corpus, is_default_corpus, workflow_source
from anatomy.errors import AnatomyError
from anatomy.generation.generate import load_model, stream, window_start
from anatomy.generation.memorisation import Memorisation, data_dir_of
from anatomy.language import N_, _
from anatomy.results.reference import corpus_differences
from anatomy.files.run_folder import RunFolder, read_run_config
from anatomy.files.run_folder import run_precision
from anatomy.data.tokenizer import SPLIT_FILE, read_json
from dashboard import loaders
from dashboard.tables import checkpoint_name
from dashboard.sample_text import highlighted
from dashboard.tables import markdown_literal, markdown_name

REFRESH_EVERY = 5  # characters between screen updates: each update is a message to the browser
HISTORY = 4  # generations kept on the page, newest first
# a note on copies, kept with its generation: (sentence marked with N_, its values), in words when
# shown; the values are kept as Markdown, any name in them as text (markdown_literal)
Note = tuple[str, dict[str, str]]


def note_text(note: Note | None) -> str:
    """A note in the reader's language now (none: nothing to say)."""
    if note is None:
        return ""
    sentence, values = note
    return _(sentence).format(**values)


@st.cache_resource(show_spinner=_("Loading the weights…"), max_entries=8)
def cached_model(run_dir: str, checkpoint: str, version: float):
    del version  # only part of the cache key: a retrained run has new weights
    return load_model(run_dir, checkpoint)


@st.cache_resource(show_spinner=_("Indexing the training text…"), max_entries=4)
def cached_memorisation(data_dir: str, version: float) -> Memorisation:
    del version  # only part of the cache key: a rebuilt corpus has a new split.json
    return Memorisation(Path(data_dir))


# ---------------------------------------------------------------------------------------------
# The training text that copies are measured against


def corpus_folder(data_dir: Path) -> tuple[bool, Note | None]:
    """Make sure the run's tokenized corpus is on disk: (whether it is, what the learner is told).
    The default corpus is built here if missing (about a second); a named corpus is not."""
    if (data_dir / SPLIT_FILE).is_file():
        return True, None
    if not is_default_corpus(data_dir):
        return False, (
            N_("copies not measured: the run's corpus folder {folder} is not here (make it with {command})"),
            {
                "folder": markdown_literal(data_dir),  # from the run's config.json: as text
                "command": markdown_literal(f"snakemake --cores 1 {data_dir}/{SPLIT_FILE}"),
            },
        )
    source, folder = markdown_literal(workflow_source()), markdown_literal(data_dir)
    building = _("Building the training text: {source} into {folder}, as the workflow does…")
    with st.spinner(building.format(source=source, folder=folder)):
        try:
            build_default_corpus(data_dir)
        except AnatomyError as err:
            return False, (
                # the error names the workflow's own files (the default corpus's, not a run's)
                N_("copies not measured: {folder} is not here, and building it failed: {error}"),
                {"folder": folder, "error": str(err)},
            )
    return True, (
        N_("{folder} was not here: built it from {source} (once), as the workflow would"),
        {"folder": folder, "source": source},
    )


def measurer(run_dir: Path) -> tuple[Memorisation | None, Note | None]:
    """What measures this run's copies (None: nothing can), and a note on it for the page."""
    try:
        data_dir = data_dir_of(run_dir)
        there, note = corpus_folder(data_dir)
        if not there:
            return None, note
        split = read_json(data_dir / SPLIT_FILE)
        # measured against another text, the marks would be wrong: the corpus must be the run's own
        differ = corpus_differences(read_run_config(run_dir / "config.json")["data"], split)
        if differ:
            return None, (
                N_("copies not measured: {folder} is not the corpus this run trained on ({fields} differ)"),
                {"folder": markdown_literal(data_dir), "fields": ", ".join(differ)},
            )
        return cached_memorisation(str(data_dir), (data_dir / SPLIT_FILE).stat().st_mtime), note
    except AnatomyError as err:  # it names a file of the run's, whose name is anyone's: as text
        return None, (N_("copies not measured: {error}"), {"error": markdown_literal(err)})


# ---------------------------------------------------------------------------------------------
# One generation: its settings and, per run, its text and figures


def settings_line(number: int, settings: dict) -> str:
    return _(
        "**Generation {number}** · {checkpoint} · temperature {temperature} · "
        "seed {seed} · prefix {prefix} · {chars} characters"
    ).format(
        number=number,
        checkpoint=markdown_literal(settings["checkpoint"]),
        temperature=f"{settings['temperature']:g}",
        seed=settings["seed"],
        prefix=markdown_literal(repr(settings["prefix"])),
        chars=settings["chars"],
    )


def cache_text(pane: dict) -> str:
    """The cache's size, and why it drops: it holds at most ctx_len positions (anatomy/generation/generate.py)."""
    ctx_len = pane["ctx_len"]
    return _(
        "KV cache {size} KiB for {positions} positions (at most ctx_len = "
        "{ctx_len}, the window the model sees: once the text outgrows it, the window jumps ahead by "
        "{jump} and the cache is rebuilt from the text still inside, so it shrinks)"
    ).format(
        size=f"{pane['cache_bytes'] / 1024:,.1f}",
        positions=pane["positions"],
        ctx_len=ctx_len,
        jump=max(1, ctx_len // 2),
    )


def stats_caption(pane: dict) -> str:
    if pane["copied_fraction"] is not None:
        copied = _("copied {fraction}").format(fraction=f"{pane['copied_fraction']:.1%}")
    else:
        copied = note_text(pane["copy_note"])
    return _("{characters} characters · {rate} characters/s · {cache} · {copies}").format(
        characters=pane["characters"], rate=f"{pane['rate']:,.0f}", cache=cache_text(pane), copies=copied
    )


def show_pane(slots: tuple, pane: dict) -> None:
    text_slot, stats_slot = slots
    text_slot.html(highlighted(pane["text"], pane["spans"]))
    stats_slot.caption(stats_caption(pane))


def generation_slots(number: int, settings: dict, labels: list[str], notes: list[Note]) -> dict[str, tuple]:
    """The heading of one generation and an empty text and caption per run, side by side."""
    st.markdown(settings_line(number, settings))
    for note in notes:
        st.caption(note_text(note))
    slots = {}
    for column, label in zip(st.columns(len(labels)), labels):
        with column:
            st.markdown(f"**{markdown_name(label)}**")
            slots[label] = (st.empty(), st.empty())
    return slots


def show_generation(record: dict) -> None:
    with st.container(border=True):
        slots = generation_slots(record["number"], record["settings"], list(record["panes"]), record["notes"])
        for label, pane in record["panes"].items():
            show_pane(slots[label], pane)


def generate(ready: dict, settings: dict, number: int) -> dict:
    """Stream every ready run, one character from each in turn, onto the page; the generation.
    Each run's speed is its own: only the time spent in its own stream counts."""
    streams, panes, measures, notes = {}, {}, {}, []
    for label, (run_dir, weights) in ready.items():
        model, tokenizer = cached_model(str(run_dir), settings["checkpoint"], weights.stat().st_mtime)
        # in the run's own precision, so the text is what `python -m anatomy generate` writes
        streams[label] = stream(
            model,
            tokenizer,
            settings["chars"],
            settings["temperature"],
            settings["prefix"],
            settings["seed"],
            precision=run_precision(run_dir),
        )
        measures[label] = measurer(run_dir)
        measure, note = measures[label]
        if measure is not None and note and note not in notes:  # the corpus was built just now
            notes.append(note)
        panes[label] = {"text": settings["prefix"], "ctx_len": model.cfg.ctx_len, "seconds": 0.0}
    with st.container(border=True):
        slots = generation_slots(number, settings, list(ready), notes)
        for step in range(1, settings["chars"] + 1):
            for label, characters in streams.items():
                started = time.perf_counter()
                char, cache_bytes = next(characters)
                pane = panes[label]
                pane["seconds"] += time.perf_counter() - started
                pane["text"] += char
                pane["cache_bytes"] = cache_bytes
            if step % REFRESH_EVERY and step != settings["chars"]:
                continue
            for label, pane in panes.items():
                update_figures(pane, step, settings["prefix"], measures[label])
                show_pane(slots[label], pane)
    return {"number": number, "settings": settings, "panes": panes, "notes": notes}


def update_figures(pane: dict, step: int, prefix: str, measure: tuple) -> None:
    """What the caption shows after `step` characters: speed, cache, copies. `measure`: what
    measurer() gave, (the measurer or None, its note)."""
    pane["characters"] = step
    pane["rate"] = step / max(pane["seconds"], 1e-9)
    # the cache holds the tokens the last step read: those before the newest, from the window's start
    read = len(prefix) + step - 1
    pane["positions"] = read - window_start(read, pane["ctx_len"])
    figures = measure[0](pane["text"], prefix) if measure[0] else None
    pane["spans"] = figures["copied_spans"] if figures else []
    pane["copied_fraction"] = figures["copied_fraction"] if figures else None
    pane["copy_note"] = measure[1]


# ---------------------------------------------------------------------------------------------
# The page

results = loaders.require_results()
runs = results.runs[results.runs["status"] != "running"]

st.title(_("Listen to it"))
st.caption(
    _(
        "Before any number, the text. Pick a run (or two, to hear them side by side), a checkpoint and how to "
        "sample; the text is written as it is generated. Highlighted: spans of 12+ characters copied verbatim "
        "from the training text (hover one for its post). On a fresh clone the tokenized training text "
        "(`results/corpus`, from `{source}`) is not there yet: the first generation builds it, as the "
        "workflow would. Each generation stays on the page with its settings (the last "
        "{history}): change a control and generate again to compare."
    ).format(source=workflow_source(), history=HISTORY)
)

root = Path(
    st.text_input(
        _("Run folders"),
        value=str(loaders.runs_root(results.path)),
        key="listen_root",
        help=_("The folder that holds the runs of this database, e.g. results/runs"),
    )
)
labels = list(runs["label"])
headline = runs[(runs["group"] == "headline") & (runs["seed"] == runs["seed"].max())]["label"].tolist()
chosen = st.multiselect(
    _("Runs (one or two)"), labels, default=(headline or labels)[:2], max_selections=2, key="listen_runs"
)
cols = st.columns(5)
# the checkpoints are the files best.pt and last.pt: shown in the reader's language
checkpoint = cols[0].segmented_control(
    _("Checkpoint"), ["best", "last"], default="last", key="listen_checkpoint", format_func=checkpoint_name
)
prefix = cols[1].text_input(_("Prefix"), value="## ", key="listen_prefix")
temperature = cols[2].number_input(
    _("Temperature"), 0.0, 2.0, 0.8, 0.1, key="listen_temperature", help=_("0: always the most likely character")
)
chars = cols[3].number_input(_("Characters"), 1, 2000, 300, 50, key="listen_chars")
seed = cols[4].number_input(_("Seed"), 0, 2**31 - 1, 0, 1, key="listen_seed")
history = st.session_state.setdefault("listen_history", [])
if not chosen or not checkpoint:
    st.info(_("Choose a run and a checkpoint."))
    st.stop()

chosen_runs = runs.set_index("label").loc[chosen]
panes = st.columns(len(chosen))
ready = {}
for pane, (label, run) in zip(panes, chosen_runs.iterrows()):
    run_dir = root / run["run_id"]
    weights = RunFolder(run_dir).model_file(checkpoint)  # the checkpoint, or the shipped float16 weights
    if weights is None:
        with pane:
            st.markdown(f"**{markdown_name(label)}** · {markdown_literal(checkpoint)}")
            st.info(
                _(
                    "No {checkpoint} weights on disk for this run (looked in {folder}): checkpoints are not "
                    "committed, and the reference results ship weights only for the seed-42 headline runs. "
                    "Train it to listen to it; its stored sample is below."
                ).format(checkpoint=markdown_literal(checkpoint), folder=markdown_literal(run_dir)),
                icon=":material/volume_off:",
            )
            stored = results.samples[(results.samples["run_id"] == run["run_id"]) & results.samples["text"].notna()]
            stored = (
                stored[stored["checkpoint"] == checkpoint] if (stored["checkpoint"] == checkpoint).any() else stored
            )
            if not stored.empty:
                st.text(stored["text"].iloc[0])
        continue
    ready[label] = (run_dir, weights)

buttons = st.columns([1, 1, 6])
go = bool(ready) and buttons[0].button(_("Generate"), type="primary", key="listen_go")
if history and buttons[1].button(_("Clear"), key="listen_clear"):
    history.clear()
newest = st.container()  # above the older generations, filled while they are already on screen
for record in history[: HISTORY - 1] if go else history:
    show_generation(record)
if go:
    settings = {
        "checkpoint": checkpoint,
        "prefix": prefix,
        "temperature": float(temperature),
        "chars": int(chars),
        "seed": int(seed),
    }
    number = st.session_state.get("listen_count", 0) + 1
    with newest:
        try:
            record = generate(ready, settings, number)
        except AnatomyError as err:
            st.error(markdown_literal(err), icon=":material/error:")  # it names files: as text
        else:
            st.session_state["listen_count"] = number
            history.insert(0, record)
            del history[HISTORY:]
            st.session_state["listen_texts"] = {label: pane["text"] for label, pane in record["panes"].items()}
elif ready and not history:
    st.caption(_("Press Generate to start."))
