"""Generated text as the Samples and Listen pages show it: copied spans marked, with their source."""

from __future__ import annotations

import html

import pandas as pd

from anatomy.language import _
from dashboard.tables import markdown_name

COPY_COLOR = "#fdd9a0"


def merged_spans(spans: list) -> list[tuple[int, int, str]]:
    """Copied spans as non-overlapping (start, end, where from) intervals, in text order."""
    merged: list[list] = []
    for start, length, post, line in sorted(spans):
        where = _("copied from {post}, line {line}").format(post=post, line=line)
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], start + length)
        else:
            merged.append([start, start + length, where])
    return [tuple(interval) for interval in merged]


def highlighted(text: str, spans: list) -> str:
    """The sample as HTML with each copied span marked; hovering one names its source."""
    pieces, at = [], 0
    for start, end, where in merged_spans(spans):
        pieces.append(html.escape(text[at:start]))
        pieces.append(
            f'<mark style="background:{COPY_COLOR}" title="{html.escape(where)}">{html.escape(text[start:end])}</mark>'
        )
        at = end
    pieces.append(html.escape(text[at:]))
    return f'<pre style="white-space:pre-wrap;font-family:inherit;margin:0">{"".join(pieces)}</pre>'


def memorisation_caption(sample: pd.Series) -> str:
    caption = _(
        "copied from the training text: **{copied}** of the generated characters (spans of {min_chars}+ "
        "characters, highlighted; the validation split, never seen: {val_copied})"
    ).format(
        copied=f"{sample['copied_fraction']:.1%}",
        min_chars=int(sample["copy_min_chars"]),
        val_copied=f"{sample['val_copied_fraction']:.1%}",
    )
    if sample["longest_copy"]:
        caption = _("{caption}; the longest copy is {chars} characters, from {post} line {line}").format(
            caption=caption,
            chars=int(sample["longest_copy"]),
            post=markdown_name(sample["longest_copy_post"]),  # a file name: as text
            line=int(sample["longest_copy_line"]),
        )
    return caption
