"""How the report writes what it measured: a number, one value per seed, a Markdown table, a
list, and clauses and sentences joined in the reader's language. The report, its claims and the
dashboard's findings all write with these, so a number reads the same wherever it is shown.

A value that goes into a sentence (a part, post- or pre-norm) is put in the reader's words first,
here, so that a Chinese sentence never carries an English word the code happens to use.
"""

from __future__ import annotations

import math
import re
from typing import Any

import pandas as pd

from anatomy.language import _, join_list, pgettext


def wiring(norm_pos: str) -> str:
    """Where the norm sits ("post" or "pre", the setting) as a sentence names it: post-norm, pre-norm."""
    return {"post": _("post-norm"), "pre": _("pre-norm")}[norm_pos]


def part_name(part: str) -> str:
    """One of the five parts by its key (rmsnorm, prenorm, rope, gqa, swiglu), as a sentence or a
    table names it: English keeps the key the experiments are named by; another language writes the
    part as its readers know it."""
    names = {
        # TRANSLATORS: the five parts by the keys the experiments are named with: write each as your
        # readers know it (RMSNorm, pre-norm, RoPE, GQA, SwiGLU)
        "rmsnorm": pgettext("part of the model", "rmsnorm"),
        "prenorm": pgettext("part of the model", "prenorm"),
        "rope": pgettext("part of the model", "rope"),
        "gqa": pgettext("part of the model", "gqa"),
        "swiglu": pgettext("part of the model", "swiglu"),
    }
    return names.get(part, part)


# anatomy.config.optimizer_recipe's words, which the database keeps as a run's recipe
RECIPE = re.compile(
    r"AdamW beta2 (\S+), weight decay (\S+) on (the matrices|every parameter), (?:clipping at (\S+)|no clipping)"
)


def recipe_words(recipe: str) -> str:
    """An optimizer recipe, as the database records it, in the reader's words (a recipe in another
    form is shown as it is)."""
    match = RECIPE.fullmatch(recipe)
    if match is None:
        return recipe
    beta2, decay, on, clip = match.groups()
    on = _("the matrices") if on == "the matrices" else _("every parameter")
    clipping = _("clipping at {value}").format(value=clip) if clip else _("no clipping")
    # TRANSLATORS: an optimizer recipe: AdamW's beta2, the weight decay and what it decays, clipping
    return _("AdamW beta2 {beta2}, weight decay {decay} on {on}, {clipping}").format(
        beta2=beta2, decay=decay, on=on, clipping=clipping
    )


def stability_text(stability: pd.DataFrame, bold: bool = False) -> str:
    """Post-norm trains up to lr A (fails from B), pre-norm up to lr C: the depth_stability view in
    words, for the report and (with the largest lr in bold) the dashboard."""
    clauses = []
    for norm_pos in ("post", "pre"):
        row = stability[stability["norm_pos"] == norm_pos]
        if row.empty:
            clauses.append(_("{wiring}: no cell yet").format(wiring=wiring(norm_pos)))
            continue
        row = row.iloc[0]
        if pd.isna(row["max_trained_lr"]):
            clauses.append(
                _("{wiring} trains at none of the {cells} learning rates tried").format(
                    wiring=wiring(norm_pos), cells=int(row["cells"])
                )
            )
            continue
        largest = f"**{row['max_trained_lr']:g}**" if bold else f"{row['max_trained_lr']:g}"
        if pd.notna(row["min_failed_lr"]):
            clauses.append(
                _("{wiring} trains up to lr {largest} (fails from {failed})").format(
                    wiring=wiring(norm_pos), largest=largest, failed=f"{row['min_failed_lr']:g}"
                )
            )
        else:
            clauses.append(_("{wiring} trains up to lr {largest}").format(wiring=wiring(norm_pos), largest=largest))
    return _("{post}, {pre}").format(post=clauses[0], pre=clauses[1])


def fmt(value: Any, digits: int = 3, sign: bool = False) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, float) and math.isinf(value):
        return "inf"
    return f"{value:+.{digits}f}" if sign else f"{value:.{digits}f}"


SEED_JOIN = " / "  # one value per seed, seeds in descending order (42 / 7), as the chapter lists them


def per_seed(runs: pd.DataFrame, column: str, digits: int = 3) -> str:
    """One value of these runs per seed: "4.471 / 4.436"."""
    ordered = runs.sort_values("seed", ascending=False)
    if column in ("best_step",):
        return SEED_JOIN.join("–" if pd.isna(v) else str(int(v)) for v in ordered[column])
    return SEED_JOIN.join(fmt(v, digits) for v in ordered[column])


def by_seed(values: pd.Series, digits: int = 3) -> str:
    """A signed value per seed (a Series indexed by seed): "-0.296 / -0.242"."""
    return SEED_JOIN.join(fmt(v, digits, sign=True) for v in values.sort_index(ascending=False))


def seed_list(seeds) -> str:
    """The seeds themselves: "42 / 7"."""
    return SEED_JOIN.join(str(int(seed)) for seed in sorted(seeds, reverse=True))


def seeds_of(runs: pd.DataFrame) -> str:
    return seed_list(runs["seed"])


def md_table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def and_list(items) -> str:
    """Names joined as the reader's language lists them ("rmsnorm and swiglu", "a, b, and c";
    "a、b和c"): Babel's rules (language.join_list)."""
    return join_list(items)


def joined(items, template: str) -> str:
    """Items with the separator a translated template puts between two of them, "{first}, {second}":
    the translator sees where the separator goes, and may write none."""
    return template.format(first="", second="").join(items)


def listed(items) -> str:
    """Names or numbers one after the other, with no "and" (lr 1e-3, 8e-3), in the reader's words.
    Not Babel's lists: CLDR has no list without a conjunction for Chinese (its "unit" lists run
    the items together), so the separator is the translator's (Chinese: 、)."""
    # TRANSLATORS: the separator between the items of a list with no "and" (lr 1e-3, 8e-3); Chinese: 、
    return joined(items, _("{first}, {second}"))


def clauses(items) -> str:
    """Clauses of one statement, one after the other, in the reader's words (Chinese: ；)."""
    # TRANSLATORS: the separator between two clauses of one statement
    return joined(items, _("{first}; {second}"))


def sentences(items) -> str:
    """Sentences one after the other, in the reader's words (Chinese: no space)."""
    # TRANSLATORS: the separator between two sentences
    return joined(items, _("{first} {second}"))
