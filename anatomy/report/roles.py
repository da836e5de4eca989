"""The roles runs play: which runs are the chapter's models, its deep pair and its break tests.

`anatomy report`, `anatomy.report.claims` and the dashboard work on one `Results` (anatomy/results/reader.py).
The roles (the 2017 model, the mini-LLaMA, the deep pair) are recognised from the model settings,
so they hold for any experiment names. What counts as a difference is anatomy/report/uncertainty.py's;
how a number or a list is written, anatomy/report/wording.py's.
"""

from __future__ import annotations

import dataclasses

import pandas as pd

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


def paired_deltas(mine: pd.DataFrame, base: pd.DataFrame, column: str = "best_val_loss") -> pd.Series:
    """These runs minus those, seed by seed (same seed = same batches): for pairs found by their
    roles (the deep post-norm and pre-norm runs, MQA and MHA). A run against the baseline its
    experiment names is in the baseline_pairs view: `baseline_deltas`."""
    return (mine.set_index("seed")[column] - base.set_index("seed")[column]).dropna()
