"""The roles runs play, and the numbers and words the report makes of them.

`anatomy report`, `anatomy.report.claims` and the dashboard work on one `Results` (anatomy/results/reader.py).
The roles (the 2017 model, the mini-LLaMA, the deep pair) are recognised from the model settings,
so they hold for any experiment names. What counts as a difference is anatomy/report/uncertainty.py's.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import pandas as pd

from anatomy.language import _
from anatomy.results import reference
from anatomy.results.groups import is_study
from anatomy.results.reader import Results


def only_runs_of(data: Results, study: str | None) -> Results:
    """Every run-level table cut to the grid's runs (study None), or to one study's
    (anatomy/results/groups.py): a table never mixes the two."""
    groups = data.runs["group"]
    keep = groups.map(is_study).eq(False) if study is None else groups.eq(study)
    run_ids, names = set(data.runs.loc[keep, "run_id"]), set(data.runs.loc[keep, "experiment"])

    def cut(frame: pd.DataFrame) -> pd.DataFrame:
        column = "run_id" if "run_id" in frame else "experiment"
        return frame[frame[column].isin(run_ids if column == "run_id" else names)].reset_index(drop=True)

    tables = (
        "runs",
        "experiments",
        "ablations",
        "pairs",
        "comparisons",
        "band",
        "above_best",
        "metrics",
        "samples",
        "memorisation",
    )
    return dataclasses.replace(data, **{name: cut(getattr(data, name)) for name in tables})


# ---------------------------------------------------------------------------------------------
# Roles: which runs are the chapter's models and its break tests


def headline_of(data: Results, model: str) -> pd.DataFrame:
    """The headline runs of the 2017 model ("vanilla": none of the five parts) or the
    mini-LLaMA ("llama": all five)."""
    runs = data.runs
    return runs[(runs["group"] == "headline") & (runs["n_parts"] == (5 if model == "llama" else 0))]


def headline_layers(data: Results) -> float:
    return data.runs.loc[data.runs["group"] == "headline", "n_layer"].median()


def deep_runs(data: Results, norm_pos: str) -> pd.DataFrame:
    runs = data.runs
    return runs[(runs["group"] == "break") & (runs["n_layer"] > headline_layers(data)) & (runs["norm_pos"] == norm_pos)]


# ---------------------------------------------------------------------------------------------
# Formatting


def stability_text(stability: pd.DataFrame, bold: bool = False) -> str:
    """Post-norm trains up to lr A (fails from B), pre-norm up to lr C: the depth_stability view in
    words, for the report and (with the largest lr in bold) the dashboard."""
    clauses = []
    for norm_pos in ("post", "pre"):
        row = stability[stability["norm_pos"] == norm_pos]
        if row.empty:
            clauses.append(_("{norm_pos}-norm: no cell yet").format(norm_pos=norm_pos))
            continue
        row = row.iloc[0]
        if pd.isna(row["max_trained_lr"]):
            clauses.append(
                _("{norm_pos}-norm trains at none of the {cells} learning rates tried").format(
                    norm_pos=norm_pos, cells=int(row["cells"])
                )
            )
            continue
        largest = f"**{row['max_trained_lr']:g}**" if bold else f"{row['max_trained_lr']:g}"
        if pd.notna(row["min_failed_lr"]):
            clauses.append(
                _("{norm_pos}-norm trains up to lr {largest} (fails from {failed})").format(
                    norm_pos=norm_pos, largest=largest, failed=f"{row['min_failed_lr']:g}"
                )
            )
        else:
            clauses.append(_("{norm_pos}-norm trains up to lr {largest}").format(norm_pos=norm_pos, largest=largest))
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


def paired_deltas(mine: pd.DataFrame, base: pd.DataFrame, column: str = "best_val_loss") -> pd.Series:
    """These runs minus those, seed by seed (same seed = same batches): for pairs found by their
    roles (the deep post-norm and pre-norm runs, MQA and MHA). A run against the baseline its
    experiment names is in the baseline_pairs view: `baseline_deltas`."""
    return (mine.set_index("seed")[column] - base.set_index("seed")[column]).dropna()


def joined(items, template: str) -> str:
    """Items joined two at a time by a translated template, "{first} and {second}" and the like."""
    items = list(items)
    if not items:
        return ""
    text = items[0]
    for item in items[1:]:
        text = template.format(first=text, second=item)
    return text


def and_list(items) -> str:
    """Names joined by "and" ("rmsnorm and swiglu", "a and b and c"), in the reader's words."""
    return joined(items, _("{first} and {second}"))


def listed(items) -> str:
    """Names or numbers joined by ", ", in the reader's words (Chinese: 、)."""
    return joined(items, _("{first}, {second}"))


def clauses(items) -> str:
    """Clauses joined by "; ", in the reader's words (Chinese: ；)."""
    return joined(items, _("{first}; {second}"))


def sentences(items) -> str:
    """Sentences joined by a space, in the reader's words (Chinese: none)."""
    return joined(items, _("{first} {second}"))


def job_seconds(entry: dict[str, Any]) -> float:
    """A shipped run's training job (a grid.json record): Snakemake's benchmark of it, or, for a run
    resumed after an interruption (whose last job timed only the rest), its training time over
    every part, whichever is longer."""
    return max(entry["job_s"] or 0.0, entry["train_s"] or 0.0)


def read_provenance(path: Path | None) -> dict[str, Any] | None:
    """grid.json of shipped runs, read by its owner (anatomy/results/reference.py); None if there is none."""
    if path is None or not path.is_file():
        return None
    return reference.read_provenance(path)
