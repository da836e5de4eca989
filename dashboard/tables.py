"""The run tables: one set of column names and number formats for every view; and any value from
outside the code written into a sentence that Streamlit draws as Markdown (`markdown_literal`)."""

from __future__ import annotations

import re

import pandas as pd
import streamlit as st

from anatomy.language import N_, _, pgettext
from anatomy.results.progress import status_name
from anatomy.results.reader import run_label

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


def shown_after_edits(shown: list[str], listed: list[str], edited_rows: dict) -> list[str]:
    """The runs drawn once a runs table's checkboxes were clicked: `listed` are the table's rows in
    order, `edited_rows` Streamlit's record of the clicks ({row: {"show": bool}}). A run shown
    keeps its place; one newly shown goes last."""
    shown = list(shown)
    for row, change in edited_rows.items():
        label = listed[int(row)]
        if change.get("show") and label not in shown:
            shown.append(label)
        elif change.get("show") is False and label in shown:
            shown.remove(label)
    return shown


def run_table(runs: pd.DataFrame, columns: list[str]) -> None:
    """These columns of the runs, one row per run, formatted alike on every page; the run's name,
    its state and its device in the reader's language (the data keeps them in English)."""
    table = runs.assign(step_time_ms=runs["step_time_s"] * 1000)
    table = table.assign(
        label=[
            run_label(experiment, seed, translated=True) for experiment, seed in zip(runs["experiment"], runs["seed"])
        ],
        status=runs["status"].map(lambda status: status_name(status) if isinstance(status, str) else status),
        device=runs["device"].map(device_name) if "device" in runs else None,
    )[columns]
    formats = {name: number_format for name, (kind, _header, number_format) in RUN_COLUMNS.items() if kind == "number"}
    table, config = blank_where_missing(table, run_columns(), formats)
    st.dataframe(table, hide_index=True, width="stretch", column_config=config)


def device_name(device) -> str:
    """A device as a page names it: CPU, CUDA, MPS (the words both languages write)."""
    return str(device).upper() if isinstance(device, str) else ""


def checkpoint_name(checkpoint: str) -> str:
    """A checkpoint (its file: best.pt, last.pt) as a page names it, in the reader's language."""
    names = {
        # TRANSLATORS: the checkpoint of a run's lowest val loss (its file best.pt)
        "best": pgettext("checkpoint", "best"),
        # TRANSLATORS: the checkpoint of a run's last step (its file last.pt)
        "last": pgettext("checkpoint", "last"),
    }
    return names.get(checkpoint, str(checkpoint))


def blank_where_missing(table: pd.DataFrame, config: dict, formats: dict[str, str]) -> tuple[pd.DataFrame, dict]:
    """The table and its column configuration with every number column that misses a value (a
    run that did not diverge has no "diverged at", a run not started no step) written as text,
    in its format, the missing cells blank: Streamlit draws a missing number as the word "None".
    `formats`: column -> its printf format ("localized": thousands separated)."""
    table, config = table.copy(), dict(config)
    for name, number_format in formats.items():
        if name not in table or not table[name].isna().any():
            continue
        table[name] = [number_text(value, number_format) for value in table[name]]
        config[name] = st.column_config.TextColumn(
            config[name]["label"], help=config[name].get("help"), alignment="right"
        )
    return table, config


def number_text(value, number_format: str | None) -> str:
    """One cell of a number column as text: blank when missing."""
    if value is None or pd.isna(value):
        return ""
    if number_format == "localized":
        return f"{value:,.0f}"
    return number_format % value if number_format else str(value)


# ---------------------------------------------------------------------------------------------
# Values from outside the code, shown as text in a sentence drawn as Markdown
#
# st.markdown, st.caption, st.info and the like read their text as Markdown. A value that comes
# from outside the code (a link's parameter, a file name, a tag, the database) must not be read as
# Markdown: a shared link whose `?run=` holds a backtick closes the code span written around it,
# and what follows, `![x](http://evil/x.png)` or `[sign in](http://evil)`, becomes an image the
# browser fetches or a link. So every such value goes into a sentence through one of these two.

LINE_BREAK = re.compile(r"\r\n|\r|\n")
BACKTICKS = re.compile(r"`+")
# Letters, digits, spaces, "·", and "_", "-" or "." inside a word: nothing Markdown reads as
# markup (an intraword "_" opens no emphasis). Without ":" or "@", the only text a Markdown
# renderer (GFM) turns into a link by itself is an address starting "www.": not inert either.
INERT = re.compile(r"(?:[^\W_]|[ ·]|(?<=[^\W_])[_.-](?=[^\W_]))*")
WWW = re.compile(r"www\.", re.IGNORECASE)


def markdown_literal(value) -> str:
    """`value` as a Markdown code span, which shows exactly its characters: inside one, nothing is
    markup, no address becomes a link. The fence is one backtick longer than the longest run of
    backticks in the value, so none of them can close it. A line break is shown as ⏎, since no
    code span can hold one: a blank line would end the paragraph, and Markdown would read on."""
    text = LINE_BREAK.sub("⏎", str(value))
    fence = "`" * (1 + max((len(run) for run in BACKTICKS.findall(text)), default=0))
    # A space on each side keeps a backtick at either end off the fence; Markdown takes them away
    # again (one on each side, when both are there and the text is not all spaces).
    padded = text.startswith(("`", " ")) or text.endswith(("`", " ")) or not text
    return f"{fence} {text} {fence}" if padded else f"{fence}{text}{fence}"


def markdown_name(value) -> str:
    """A name (a run's label, a post's file name) for a sentence drawn as Markdown: as it is when
    it is plain words and numbers ("llama_minus_rope · seed 42", "lunyu.md"), which read the same
    either way; anything else as `markdown_literal`."""
    text = str(value)
    return text if INERT.fullmatch(text) and not WWW.search(text) else markdown_literal(text)
