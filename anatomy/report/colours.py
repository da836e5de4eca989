"""One colour per run, the same on every page of the dashboard and in every figure of the report;
one dash per split.

A run takes the colour of its experiment, and an experiment the colour of its role: the 2017
model blue, the mini-LLaMA orange, each part a hue of its own (dark where it is added to the 2017
model, light where it is taken out of the mini-LLaMA), each break test a colour of its own. The
role is read from the run's tags and settings (workflow/experiments.yaml), never from its name, so
it holds for any experiment a learner adds. Two experiments of one role in one scope (the grid, or
one study on one corpus: no chart mixes two) keep apart: the first keeps the role's colour, the next takes
a spare one, and an experiment with no role takes a spare one too, picked from its name, so that it
is the same whatever else is shown. The seeds of an experiment share its colour: a chart draws
their mean and band, or names the seed on hover.

Train and val are told apart by dash (val solid, train dashed), never by a colour, so that no
colour means a split on one page and a run on another. Only plain Python and pandas here: the
report's text needs no Altair.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping

import pandas as pd

from anatomy.results.groups import is_study

VANILLA = "#4c78a8"  # the 2017 Transformer
LLAMA = "#f58518"  # the mini-LLaMA
# each part: (added to the 2017 model, removed from the mini-LLaMA)
PARTS = {
    "rope": ("#54a24b", "#88d27a"),
    "gqa": ("#439894", "#83bcb6"),
    "swiglu": ("#9e765f", "#d8b5a5"),
    "rmsnorm": ("#d67195", "#fcbfd2"),
    "prenorm": ("#b279a2", "#d6a5c9"),
}
# the break tests, each against the mini-LLaMA
BREAKS = {
    "deep_post": "#843c39",  # post-norm at depth, no warmup
    "deep_pre": "#393b79",  # pre-norm at depth, no warmup
    "rope_k_unrotated": "#e45756",
    "rope_k_adjacent": "#ff9d98",
    "mqa": "#1b5e5b",  # one key/value head: GQA's teal, darkest
    "qk_norm": "#bcbd22",
}
# the parts of 2024-26, only ever added to the mini-LLaMA: QK-norm keeps its break test's colour
# (two of the spares: a scope where one is taken gives the next run another spare)
NEW_PARTS = {"qk_norm": BREAKS["qk_norm"], "mla": "#7b4173", "moe": "#8c6d31"}
# a second experiment of a model's role in one scope (a study's other lr): the model's light shade
LIGHT = {VANILLA: "#9ecae9", LLAMA: "#ffbf79"}
# for an experiment no role names, or a third of one role: none of them a role's colour
SPARE = ["#17becf", "#7b4173", "#8c6d31", "#5254a3", "#637939", "#ad494a", "#a55194", "#e7969c"]
# what is not a run: a diverged run's marks, the overfitting region, the seed spread and noise
DIVERGED_RED = "#d62728"
TURN_RED = "#e45756"
NEUTRAL = "#9e9e9e"  # the reference results behind, a gap, a band of noise: never a run's colour
NEUTRAL_LIGHT = "#bab0ac"

# train and val, by dash
SPLITS = ("val", "train")
SPLIT_DASH = {"val": [1, 0], "train": [5, 3]}

# the model names the studies' figures use, in the models' colours
MODELS = {"vanilla": VANILLA, "mini-LLaMA": LLAMA}
# how a model knows positions (the database's position_kind) and attends (attention_kind): the
# colour of the role that has it, so RoPE is the mini-LLaMA's and the learned table the 2017 model's
POSITIONS = {
    "RoPE": LLAMA,
    "learned positions": VANILLA,
    "RoPE broken: k unrotated": BREAKS["rope_k_unrotated"],
    "RoPE broken: k adjacent": BREAKS["rope_k_adjacent"],
}
ATTENTION = {"MHA": PARTS["gqa"][1], "GQA": LLAMA, "MQA": BREAKS["mqa"]}


def role(run: Mapping, deep_from: float = 4) -> str | None:
    """The role of a run (a row of the runs table): "vanilla", "llama", "add:PART", "remove:PART",
    a key of BREAKS, or None. `deep_from`: more layers than this is a deep run (the headline's)."""

    def tag(name: str):
        value = run.get(name)
        return None if value is None or (not isinstance(value, str) and pd.isna(value)) else value

    part, direction = tag("part"), tag("direction")
    if direction in ("add", "remove") and part:
        return f"{direction}:{part}"
    rope_break = tag("rope_break")
    if rope_break and rope_break != "none":
        return f"rope_{rope_break}" if f"rope_{rope_break}" in BREAKS else None
    n_layer = tag("n_layer")
    if n_layer is not None and n_layer > deep_from and tag("norm_pos") in ("post", "pre"):
        return f"deep_{tag('norm_pos')}"
    if tag("n_kv_head") == 1 and (tag("n_head") or 0) > 1:
        return "mqa"
    if tag("qk_norm") is True or tag("qk_norm") == 1:
        return "qk_norm"
    if part:  # a break of a part this module has no colour for
        return None
    preset = tag("preset")
    if preset in ("vanilla", "llama"):
        return preset
    n_parts = tag("n_parts")
    return {0: "vanilla", 5: "llama"}.get(n_parts)


def role_colour(key: str | None) -> str | None:
    if key in ("vanilla", "llama"):
        return VANILLA if key == "vanilla" else LLAMA
    if key in BREAKS:
        return BREAKS[key]
    if key and ":" in key:
        direction, part = key.split(":", 1)
        if part in PARTS:
            return PARTS[part][0 if direction == "add" else 1]
        if part in NEW_PARTS and direction == "add":
            return NEW_PARTS[part]
    return None


def spare(name: str, taken: set[str]) -> str:
    """A spare colour picked by the name (crc32: the same in every process), the next free one
    where it is taken; more names than spares repeat, as any palette must."""
    start = zlib.crc32(name.encode("utf-8")) % len(SPARE)
    for step in range(len(SPARE)):
        colour = SPARE[(start + step) % len(SPARE)]
        if colour not in taken:
            return colour
    return SPARE[start]


def _scope_colours(runs: pd.DataFrame, deep_from: float) -> dict[str, str]:
    """The experiments of one scope: each its role's colour, told apart where two share a role."""
    firsts = runs.drop_duplicates("experiment").to_dict("records")
    roles = {row["experiment"]: role(row, deep_from) for row in firsts}
    baselines = {row.get("baseline") for row in firsts}

    def keeps_first(row: dict) -> tuple:
        """Who keeps a shared role's colour: a baseline of others, then one measured against a
        model (llama_minus_swiglu before mqa_minus_swiglu), then the shorter name."""
        against_model = roles.get(row.get("baseline")) in ("vanilla", "llama")
        return (row["experiment"] not in baselines, not against_model, len(row["experiment"]), row["experiment"])

    colours: dict[str, str] = {}
    for row in sorted(firsts, key=keeps_first):
        wanted = role_colour(roles[row["experiment"]])
        if wanted is not None and wanted not in colours.values():
            colours[row["experiment"]] = wanted
        elif wanted in LIGHT and LIGHT[wanted] not in colours.values():
            colours[row["experiment"]] = LIGHT[wanted]
    taken = set(colours.values())
    for name in sorted(set(roles) - set(colours)):
        colours[name] = spare(name, taken)
        taken.add(colours[name])
    return colours


def experiment_colours(runs: pd.DataFrame) -> dict[str, str]:
    """Every experiment of these runs (the runs table, or any frame with its tag columns) and its
    colour. Pass every run of the database: the colours do not change with what a chart shows."""
    if runs.empty:
        return {}
    groups = runs["group"] if "group" in runs else pd.Series(None, index=runs.index, dtype=object)
    corpora = runs["corpus"] if "corpus" in runs else pd.Series(None, index=runs.index, dtype=object)
    # a scope: the grid, or one study on one corpus (the scale study's sizes are shown one at a time)
    scopes = [f"{group}/{corpus}" if is_study(group) else "grid" for group, corpus in zip(groups, corpora.fillna(""))]
    headline = runs.loc[groups == "headline", "n_layer"] if "n_layer" in runs else pd.Series(dtype=float)
    deep_from = float(headline.median()) if not headline.empty else 4.0
    colours: dict[str, str] = {}
    for _scope, members in runs.groupby(pd.Series(scopes, index=runs.index), sort=False):
        colours.update(_scope_colours(members, deep_from))
    return colours


def named_colours(names: Iterable[str], known: Mapping[str, str] | None = None) -> dict[str, str]:
    """A colour for each of these experiment names: from `known` (experiment_colours) where it has
    one, else vanilla and llama by name and a spare colour by name, for a chart drawn without the
    runs table at hand."""
    names = list(dict.fromkeys(names))
    known = known or {}
    colours = {name: known[name] for name in names if name in known}
    for name in names:
        if name not in colours and name in ("vanilla", "llama"):
            colours[name] = role_colour(name)
    taken = set(colours.values())
    for name in sorted(set(names) - set(colours)):
        colours[name] = spare(name, taken)
        taken.add(colours[name])
    return {name: colours[name] for name in names}
