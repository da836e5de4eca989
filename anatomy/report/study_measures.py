"""What a study's declaration may add to its table and its answer (workflow/studies.yaml):
`measures`, more columns at each point, and a `hypothesis` of the chapter tested on its points.

The measures say how the runs at the study's lr read their text: how many times by their last
evaluation and by their best one, how many minutes a run took, and how far final val lies above
final train. The scale study declares them all: they show where the mini-LLaMA's faster learning
turns into memorising. The hypothesis read_once is the chapter's: learning fast is pure gain when
the data is read less than once, judged at the largest point whose runs read their text at most
once. Each takes plain run tables, so any study, and the findings, can use it.
"""

from __future__ import annotations

import math

import pandas as pd

from anatomy.language import N_, _, pgettext
from anatomy.report.costs_section import job_seconds
from anatomy.report.roles import headline_of, only_runs_of
from anatomy.report.uncertainty import Difference, Noise, compare, interval_text, judge_one, noise_text
from anatomy.report.wording import fmt, per_seed
from anatomy.results.reader import Results

# measure -> its column's heading (vanilla · llama in one cell where both models have a value)
HEADINGS = {
    "times_read": N_("times read by the run"),
    "minutes_per_run": N_("minutes per run"),
    "best_step": N_("best step (vanilla · llama)"),
    "times_read_at_best": N_("times read by the best step (vanilla · llama)"),
    "train_val_gap": N_("final val minus final train (vanilla · llama)"),
}
HOW_TO_READ = N_(
    "Times read: tokens seen (steps x batch x context) over the training characters. Minutes per run: the shipped "
    "runs' training jobs (the costs table has the study's total)."
)


def tokens_read(runs: pd.DataFrame, metrics: pd.DataFrame, step_column: str) -> pd.Series:
    """How many tokens each run had read by the step in `step_column` (its metrics' tokens_seen)."""
    seen = metrics.set_index(["run_id", "step"])["tokens_seen"]
    keys = list(zip(runs["run_id"], runs[step_column]))
    return pd.Series([seen.get(key, math.nan) for key in keys], index=runs.index, dtype=float)


def with_last_step(runs: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    last = metrics.groupby("run_id")["step"].max()
    return runs.assign(last_step=runs["run_id"].map(last))


def times_read_by_last(runs: pd.DataFrame, metrics: pd.DataFrame) -> float:
    """How many times the runs read their text by their last evaluation (the median over them:
    runs of one point take the same steps)."""
    runs = with_last_step(runs, metrics)
    return float((tokens_read(runs, metrics, "last_step") / runs["train_tokens"]).median())


def times_read(results: Results, train_tokens: int) -> float:
    """times_read_by_last over the runs of one size of text."""
    return times_read_by_last(results.runs[results.runs["train_tokens"] == train_tokens], results.metrics)


def passes(runs: pd.DataFrame, metrics: pd.DataFrame, step_column: str) -> str:
    """Times each run had read its training text by that step, seed by seed (42 / 7)."""
    read = tokens_read(runs, metrics, step_column) / runs["train_tokens"]
    return per_seed(runs.assign(passes=read), "passes", digits=2)


def minutes_per_run(everything: Results, runs: pd.DataFrame) -> str:
    """The mean training job of these shipped runs, in minutes (grid.json); "–" unrecorded."""
    records = (everything.provenance or {}).get("runs", {})
    jobs = [job_seconds(records[run_id]) for run_id in runs["run_id"] if run_id in records]
    return f"{sum(jobs) / len(jobs) / 60:.1f}" if jobs else "–"


def measure_cell(everything: Results, measure: str, vanilla: pd.DataFrame, llama: pd.DataFrame) -> str:
    """One measure at one point, from both models' runs at the study's lr there."""
    metrics = everything.metrics
    both = pd.concat([vanilla, llama])
    if measure == "times_read":
        return f"{times_read_by_last(both, metrics):.2f}"
    if measure == "minutes_per_run":
        return minutes_per_run(everything, both)
    if measure == "best_step":
        return f"{per_seed(vanilla, 'best_step')} · {per_seed(llama, 'best_step')}"
    if measure == "times_read_at_best":
        return f"{passes(vanilla, metrics, 'best_step')} · {passes(llama, metrics, 'best_step')}"
    return f"{per_seed(vanilla, 'train_val_gap')} · {per_seed(llama, 'train_val_gap')}"


# ---------------------------------------------------------------------------------------------
# hypothesis read_once


def read_at_most_once(runs: pd.DataFrame, metrics: pd.DataFrame) -> bool:
    """Whether every run read no more tokens than its text holds by its last evaluation."""
    runs = with_last_step(runs, metrics)
    return bool((tokens_read(runs, metrics, "last_step") <= runs["train_tokens"]).all())


def read_once_verdict(
    everything: Results, points: list[tuple[pd.DataFrame, pd.DataFrame, Difference, Noise]], target: str
) -> str:
    """The chapter's hypothesis (learning fast is pure gain when the data is read less than once),
    judged at the last of `points` (vanilla runs, llama runs, llama minus vanilla judged with the
    others, the setup's noise) whose runs read their text at most once; `target` trains the first
    stage, where there is none yet."""
    once = [point for point in points if read_at_most_once(pd.concat(point[:2]), everything.metrics)]
    if not once:
        return _(
            "**not testable here yet**: no size whose runs read the training text at most once has "
            "both models trained (`snakemake {target}`)"
        ).format(target=target)
    vanilla, llama, difference, noise = once[-1]
    where = _("on {tokens} characters, read at most once on average (random windows, drawn with replacement)").format(
        tokens=f"{int(llama['train_tokens'].max()):,}"
    )
    said = {
        None: N_(
            "**not testable here yet**: {where}, llama minus vanilla is {gap}, but its setup has no noise "
            "estimate: no experiment in it has two seeds"
        ),
        -1: N_(
            "**reproduced**: {where}, the mini-LLaMA's best val is lower: llama minus vanilla is {difference}, "
            "beyond noise ({noise})"
        ),
        1: N_(
            "**not reproduced**: {where}, vanilla's best val is lower: llama minus vanilla is {difference}, "
            "beyond noise ({noise})"
        ),
        0: N_(
            "**not reproduced**: {where}, llama minus vanilla is {difference}, within noise ({noise}): "
            "the mini-LLaMA's best val is not lower even where it reads the text at most once and so cannot "
            "memorise it"
        ),
    }[difference.sign]
    return _(said).format(
        where=where,
        gap=fmt(difference.mean, sign=True),
        difference=interval_text(difference),
        noise=noise_text(noise),
    )


def grid_contrast(
    everything: Results, lr: float, points: list[tuple[pd.DataFrame, pd.DataFrame, Difference]]
) -> str | None:
    """The point read about as often as the grid reads its own text, set against the grid's headline
    answer: whether reading the data many times explains that answer. None without both."""
    grid = only_runs_of(everything, None)
    vanilla, llama = headline_of(grid, "vanilla"), headline_of(grid, "llama")
    grid_difference = judge_one(compare(grid.noise, llama, vanilla))  # the grid's headline gap, alone
    if grid_difference.sign is None or not points or llama["train_tokens"].isna().all():
        return None
    grid_tokens = int(llama["train_tokens"].max())
    grid_read = times_read(grid, grid_tokens)
    read = [times_read_by_last(pd.concat(point[:2]), everything.metrics) for point in points]
    nearest = min(range(len(points)), key=lambda index: abs(math.log(read[index] / grid_read)))
    point_vanilla, _llama, difference = points[nearest]
    if difference.sign is None:
        return None
    # TRANSLATORS: the mini-LLaMA's best val against vanilla's, in "its best val is ... beyond noise"
    lower = {-1: pgettext("best val", "lower"), 1: pgettext("best val", "higher"), 0: pgettext("best val", "not lower")}
    return _(
        "At lr {lr}, on the grid's own text ({grid_tokens} characters, read {grid_read} times) the mini-LLaMA's "
        "best val is {grid_side} beyond noise, llama minus vanilla {grid_difference}; on {size_tokens} characters "
        "of this study's text, read {size_read} times, it is {size_side}."
    ).format(
        lr=f"{lr:g}",
        grid_tokens=f"{grid_tokens:,}",
        grid_read=f"{grid_read:.0f}",
        grid_side=lower[grid_difference.sign],
        grid_difference=interval_text(grid_difference),
        size_tokens=f"{int(point_vanilla['train_tokens'].max()):,}",
        size_read=f"{read[nearest]:.0f}",
        size_side=lower[difference.sign],
    )


def read_once_text(
    everything: Results, lr: float, points: list[tuple[pd.DataFrame, pd.DataFrame, Difference, Noise]], target: str
) -> str:
    """The hypothesis read_once in words: its verdict, then the grid's text set beside the points."""
    verdict = _(
        "At that lr, learning fast is pure gain when the data is read less than once (the chapter's hypothesis): "
        "{verdict}."
    ).format(verdict=read_once_verdict(everything, points, target))
    contrast = grid_contrast(everything, lr, [point[:3] for point in points])
    return "\n\n".join(filter(None, [verdict, contrast]))
