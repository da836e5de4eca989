"""The results report: `python -m anatomy report`.

Reads a results database (or collects a folder of runs into a temporary one) and writes
`report.md` with the experiment's tables, the chapter's claims each next to our measurement
with a verdict (`anatomy/claims.py`), each part's training loss beside the exam made for it
(`anatomy/exams/`: which part wins where), and PNG figures drawn by the same Altair charts as the
dashboard (anatomy/charts.py). `--readme README.md` also rewrites the README's generated sections (README_BLOCKS,
between their marker lines) from the same data, so the README's numbers are never typed by
hand; tests/test_report.py holds the two together.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from anatomy import chart_data
from anatomy.atomic import atomic_path, remove_stale_temporaries, write_text, writing_into
from anatomy.claims import (
    EFFECT_SUMMARY,
    HELPS,
    HURTS,
    MEMORISING_RISE,
    NOT_BEYOND_NOISE,
    PARTS,
    claims,
    part_effects,
)
from anatomy.errors import AnatomyError
from anatomy.groups import STUDY_GROUPS, is_study
from anatomy.exams import fraction_words, speedup_words, weighted_loss
from anatomy.exams.depth import DEPTH_FOLDER
from anatomy.precision_report import HEADLINE_CLAIMS, precision_section
from anatomy.scale_report import (
    best_val_by_size,
    largest_as_headline,
    scale_data,
    scale_answer,
    scale_section,
)
from anatomy.report_data import (
    ReportData,
    ablation_deltas,
    attention_kind,
    deep_runs,
    delta_text,
    fmt,
    baseline_deltas,
    headline_noise,
    headline_of,
    job_seconds,
    load,
    load_runs,
    md_table,
    only_runs_of,
    paired_deltas,
    per_seed,
    read_provenance,
    seeds_of,
    side_beyond_noise,
    stability_text,
)

# The README sections this report writes, each between `<!-- report:NAME:start -->` and
# `<!-- report:NAME:end -->` lines: the results, and the wall time of each target.
README_BLOCKS = ("headline", "costs")
# the chapter's own figures, quoted beside ours (its blog corpus: vocabulary 1,719)
CHAPTER = {
    "vanilla_best": (3.706, 3.705),
    "vanilla_step": 1100,
    "llama_best": (3.599, 3.612),
    "llama_step": 500,
    "llama_final_val": 5.083,
    "llama_final_train": 0.33,
}
TARGETS = {"headline": "headline", "ablation": "ablations", "break": "break_tests"}
STUDY_TARGETS = {"precision": "precision_check", "scale": "scale"}  # the studies' targets (anatomy/groups.py)


# ---------------------------------------------------------------------------------------------
# The sections


def beyond_noise(deltas: pd.Series, noise: float) -> str:
    """Whether every seed's difference lies outside the baselines' seed spread, on one side."""
    side = side_beyond_noise(deltas, noise)
    if side is None:
        return "needs 2 seeds"
    return "**yes**" if side else "no"


def headline_section(data: ReportData) -> str:
    rows = []
    for model, name in (("vanilla", "vanilla (2017)"), ("llama", "mini-LLaMA")):
        runs = headline_of(data, model)
        if runs.empty:
            rows.append([name, "not run yet", "", "", "", "", ""])
            continue
        rows.append(
            [
                name,
                seeds_of(runs),
                f"{int(runs['params'].max()):,}" if runs["params"].notna().any() else "–",
                per_seed(runs, "best_val_loss"),
                per_seed(runs, "best_step"),
                per_seed(runs, "final_val_loss"),
                per_seed(runs, "final_train_loss"),
            ]
        )
    rows.append(
        [
            "chapter: vanilla",
            "42 / 7",
            "1,244,928",
            " / ".join(map(str, CHAPTER["vanilla_best"])),
            str(CHAPTER["vanilla_step"]),
            "",
            "",
        ]
    )
    rows.append(
        [
            "chapter: mini-LLaMA",
            "42 / 7",
            "1,178,496",
            " / ".join(map(str, CHAPTER["llama_best"])),
            str(CHAPTER["llama_step"]),
            str(CHAPTER["llama_final_val"]),
            str(CHAPTER["llama_final_train"]),
        ]
    )
    return md_table(["model", "seeds", "params", "best val", "at step", "final val", "final train"], rows)


def ablation_section(data: ReportData) -> str:
    if data.ablations.empty:
        return "No ablation runs yet: `snakemake --cores 1 ablations` trains them."
    noise = headline_noise(data)
    rows = []
    for part in sorted(data.ablations["part"].unique()):
        cells = [part]
        for direction in ("add", "remove"):
            deltas = ablation_deltas(data, part, direction)
            if deltas is None:
                cells += ["not run yet", ""]
                continue
            cells += [delta_text(deltas), beyond_noise(deltas, noise)]
        rows.append(cells)
    table = md_table(
        [
            "part",
            "Δ best val, added to vanilla",
            "beyond seed noise?",
            "Δ best val, removed from llama",
            "beyond seed noise?",
        ],
        rows,
    )
    return (
        f"{table}\n\nΔ is the experiment's best val minus its baseline's, seed by seed (mean, then the range "
        f"over seeds): negative means lower loss. Seed noise is the largest spread of the headline models' best val over "
        f"seeds, {fmt(noise)} nats; a part beyond it moves every seed further than the seed alone does."
    )


def break_section(data: ReportData) -> str:
    breaks = data.runs[data.runs["group"] == "break"]
    if breaks.empty:
        return "No break-test runs yet: `snakemake --cores 1 break_tests` trains them."
    noise = headline_noise(data)
    rows = []
    for experiment, runs in breaks.groupby("experiment", sort=False):
        deltas = baseline_deltas(data, experiment)
        diverged = runs[runs["diverged"]].sort_values("seed", ascending=False)
        broke = (
            "no"
            if diverged.empty
            else ", ".join(
                f"seed {int(r.seed)} at step {int(r.diverged_step)}"
                if pd.notna(r.diverged_step)
                else f"seed {int(r.seed)}"
                for r in diverged.itertuples()
            )
        )
        rows.append(
            [
                f"`{experiment}`",
                str(runs["description"].iloc[0] or ""),
                seeds_of(runs),
                broke,
                per_seed(runs, "best_val_loss"),
                per_seed(runs, "best_step"),
                f"`{runs['baseline'].iloc[0]}`" if pd.notna(runs["baseline"].iloc[0]) else "–",
                delta_text(deltas),
                beyond_noise(deltas, noise),
            ]
        )
    table = md_table(
        [
            "experiment",
            "what it does",
            "seeds",
            "diverged",
            "best val",
            "at step",
            "baseline",
            "Δ best val vs baseline",
            "beyond seed noise?",
        ],
        rows,
    )
    return (
        f"{table}\n\nΔ is the experiment's best val minus its baseline's, seed by seed (mean, then the range over "
        f"seeds); seed noise is {fmt(noise)} nats, as for the ablations."
    )


def memorisation_section(data: ReportData) -> str:
    """Copied share of the headline models' samples, at the best checkpoint and the last."""
    headline = data.runs[data.runs["group"] == "headline"]
    rows = []
    for run in headline.sort_values(["n_parts", "seed"], ascending=[True, False]).itertuples():
        samples = data.memorisation[data.memorisation["run_id"] == run.run_id].set_index("checkpoint")
        if samples.empty:
            continue
        cells = [run.label]
        for checkpoint in ("best", "last"):
            if checkpoint not in samples.index:
                cells += ["–", "–"]
                continue
            sample = samples.loc[checkpoint]
            cells += [
                f"{int(sample['step'])}",
                f"{sample['copied_fraction']:.1%} ({sample['val_copied_fraction']:.1%}), "
                f"longest {int(sample['longest_copy'])}",
            ]
        rows.append(cells)
    if not rows:
        return "No measured samples yet: `python -m anatomy memorised RUN_DIR` measures a run's samples."
    min_chars = int(data.memorisation["copy_min_chars"].iloc[0])
    return (
        md_table(
            [
                "run",
                "best: step",
                "best: copied (val control), longest span",
                "last: step",
                "last: copied (val control), longest span",
            ],
            rows,
        )
        + f"\n\nCopied: the share of generated characters (the prefix excluded) inside a span of {min_chars} or "
        "more characters found verbatim in the training split; in brackets, the same against the validation "
        "split, which the model never saw (phrases the language itself repeats)."
    )


def overfitting_section(data: ReportData) -> str:
    rows = []
    for experiment, runs in data.runs.groupby("experiment", sort=True):
        finite = runs[runs["best_val_loss"].notna()]
        if finite.empty:
            continue
        rows.append(
            [
                f"`{experiment}`",
                seeds_of(finite),
                per_seed(finite, "best_step"),
                per_seed(finite, "best_val_loss"),
                per_seed(finite, "val_rise"),
                per_seed(finite, "final_train_loss"),
                per_seed(finite, "train_val_gap"),
            ]
        )
    return md_table(
        [
            "experiment",
            "seeds",
            "val bottoms out at step",
            "best val",
            "val rise after it",
            "final train",
            "final val - train",
        ],
        rows,
    )


def claims_section(data: ReportData) -> str:
    return md_table(
        ["the chapter says", "chapter's figure", "measured here", "verdict"],
        [[c.claim, c.chapter, c.measured, c.verdict] for c in claims(data)],
    )


def wall_clock_hours(entries: list[dict[str, Any]]) -> float:
    """From the first job's start to the last job's end (each start is its end minus its length)."""
    ends = [dt.datetime.fromisoformat(entry["finished_utc"].replace("Z", "+00:00")) for entry in entries]
    starts = [end - dt.timedelta(seconds=job_seconds(entry)) for end, entry in zip(ends, entries)]
    return (max(ends) - min(starts)).total_seconds() / 3600


def cost_row(name: str, entries: list[dict[str, Any]]) -> list[str]:
    """Runs, minutes per run, run-hours and wall-clock hours of these runs' training jobs."""
    jobs = [job_seconds(entry) for entry in entries]
    if not jobs:
        return [name, "0", "–", "–", "–"]
    return [
        name,
        str(len(jobs)),
        f"{sum(jobs) / len(jobs) / 60:.1f}",
        f"{sum(jobs) / 3600:.2f}",
        f"{wall_clock_hours(entries):.2f}",
    ]


def finished_words(grid: dict[str, Any]) -> str:
    """When the shipped runs finished: one date, a range, or that it was not recorded."""
    first, last = grid.get("first_finished_utc"), grid.get("last_finished_utc")
    if not (first and last):
        return "finish dates not recorded. "
    first, last = first[:10], last[:10]
    return f"runs finished on {first}. " if first == last else f"runs finished {first} to {last}. "


def costs_section(data: ReportData) -> str:
    """Time per target and for the whole grid, from the shipped runs' records (grid.json); the
    studies' runs have rows of their own, never counted in the grid's."""
    if not data.provenance:
        return ""
    groups = data.runs.set_index("run_id")["group"].to_dict()
    precisions = data.runs.set_index("run_id")["precision"].to_dict()
    shipped = data.provenance.get("runs", {})
    records = {run_id: entry for run_id, entry in shipped.items() if not is_study(groups.get(run_id))}

    def row(name: str, run_ids: list[str]) -> list[str]:
        used = sorted({precisions.get(run_id) or "fp32" for run_id in run_ids})
        return cost_row(name, [shipped[run_id] for run_id in run_ids]) + [", ".join(used) or "–"]

    rows = [row(f"`{target}`", [r for r in records if groups.get(r) == group]) for group, target in TARGETS.items()]
    rows.append(row("the whole grid (`all`)", list(records)))
    for group, target in STUDY_TARGETS.items():
        if study_runs := [run_id for run_id in shipped if groups.get(run_id) == group]:
            rows.append(row(f"`{target}` (a study, not in `all`)", study_runs))
    grid = data.provenance.get("grid", {})
    two_lanes = sum(job_seconds(entry) for entry in records.values()) / 2 / 3600
    return (
        md_table(
            ["target", "runs shipped", "minutes per run", "run-hours in all", "wall-clock hours", "precision"], rows
        )
        + f"\n\nOn {', '.join(grid.get('machines', [])) or 'an unrecorded machine'} "
        f"({', '.join(grid.get('devices', []))}, torch {', '.join(grid.get('torch_versions', []))}), "
        + finished_words(grid)
        + "Minutes per run: Snakemake's benchmark of each training job (compile, training, evaluations, "
        "checkpoints; a run resumed after an interruption counts its training time over every part). "
        "Run-hours: their sum, the time one run at a time would take. Wall-clock: from the first "
        "of the target's jobs to start to the last to end (two ran side by side; any pause between "
        f"jobs included). Two lanes that never idle would need half the run-hours: {two_lanes:.1f} h "
        "for the whole grid's training. A target's row counts its own experiments' runs (`ablations` "
        "and `break_tests` also train the baselines they are compared with, if those are not there "
        "yet); the exams are not in these times."
        + night_in_bf16(
            data, records, {run_id: shipped[run_id] for run_id in shipped if groups.get(run_id) == "precision"}
        )
    )


NIGHT_HOURS = 8  # the goal: the whole grid in one night


def night_in_bf16(data: ReportData, grid_records: dict[str, Any], bf16_records: dict[str, Any]) -> str:
    """The grid's training in bf16, estimated from measured runs: each grid run costs what the
    precision study's run of its depth cost (4 layers, 12 layers), both on this machine."""
    if not bf16_records:
        return ""
    layers = data.runs.set_index("run_id")["n_layer"].to_dict()
    measured: dict[int, list[float]] = {}
    for run_id, entry in bf16_records.items():
        measured.setdefault(int(layers[run_id]), []).append(job_seconds(entry) / 60)
    minutes = {n_layer: sum(times) / len(times) for n_layer, times in measured.items()}
    said = ", ".join(f"{n}-layer {m:.1f} minutes a run" for n, m in sorted(minutes.items()))
    needed = sorted({int(layers[run_id]) for run_id in grid_records if run_id in layers})
    if missing := [n for n in needed if n not in minutes]:
        return (
            f" In bf16, measured so far (the precision study): {said}; the {', '.join(map(str, missing))}-layer "
            "runs are not measured in bf16 yet, so the grid's night in bf16 is not estimated."
        )
    hours = sum(minutes[int(layers[run_id])] for run_id in grid_records if run_id in layers) / 60
    fits = "within" if hours / 2 <= NIGHT_HOURS else "beyond"
    return (
        f" In bf16 (the precision study's runs: {said}), the grid's training would take {hours:.1f} run-hours, "
        f"{hours / 2:.1f} h on two lanes that never idle: {fits} one {NIGHT_HOURS}-hour night before the exams."
    )


# ---------------------------------------------------------------------------------------------
# Which part wins where: each part's training loss beside the exam made for it (anatomy/exams/).
# The findings are computed as the dashboard's Exams page computes them (dashboard/views/exams.py).

PART_NAMES = {"rmsnorm": "RMSNorm", "prenorm": "pre-norm", "rope": "RoPE", "gqa": "GQA", "swiglu": "SwiGLU"}
# part -> (the exam made for it, what it measures)
PART_EXAMS = {
    "rmsnorm": ("wall_clock", "wall clock: the norm alone, forward + backward, hand-written vs fused"),
    "prenorm": ("depth", "depth map: deep models without warmup, post- vs pre-norm over the learning rate"),
    "rope": ("length", "length: loss by position, on windows longer than the training length"),
    "gqa": ("kv_cache", "KV cache: bytes per token, generation with and without the cache"),
    "swiglu": ("wall_clock", "wall clock: the FFN alone, forward + backward, hand-written vs fused"),
}
# wall_clock variants by the names the text gives them
VARIANT_NAMES = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm", "gelu": "GELU FFN", "swiglu": "SwiGLU FFN"}
ATTENTION_ORDER = ("MHA", "GQA", "MQA")  # most KV heads first


def not_measured(exam: str) -> str:
    return f"not measured yet: run `snakemake --cores 1 exams` (or `python -m anatomy exam {exam}`)"


def seed_list(deltas: pd.Series) -> str:
    """Per-seed differences, seeds as the report lists them (42 / 7)."""
    ordered = deltas.sort_index(ascending=False)
    seeds = " / ".join(str(int(seed)) for seed in ordered.index)
    return f"{' / '.join(fmt(v, sign=True) for v in ordered)} (seed{'s' if len(ordered) > 1 else ''} {seeds})"


def training_loss_text(data: ReportData, part: str) -> str:
    """What the ablations say: the change in best val, the part added to vanilla and removed from llama."""
    said = []
    for direction, words in (("add", "added to vanilla"), ("remove", "removed from llama")):
        deltas = ablation_deltas(data, part, direction)
        if deltas is None:
            said.append(f"{words}: not trained yet")
        elif deltas.empty:  # still training, or no seed that its baseline has
            said.append(f"{words}: no best val to pair with the baseline's yet")
        else:
            said.append(f"{words} {seed_list(deltas)}")
    return "; ".join(said)


def training_loss_verdict(data: ReportData, part: str) -> str:
    """What the ablations say about the part, added to vanilla and removed from llama (claims.part_effects)."""
    effects = part_effects(data, part)
    if effects is None:
        return "the training loss does not tell yet (not measured both ways with two seeds)"
    added, removed = effects
    if added == removed == NOT_BEYOND_NOISE:
        return (
            "in the training loss, neither adding it to vanilla nor removing it from llama moves best val beyond "
            "seed noise with every seed"
        )
    unclear = "does not move best val beyond seed noise with every seed"
    adding = {HELPS: "lowers best val beyond seed noise", HURTS: "raises best val beyond seed noise"}.get(
        added, unclear
    )
    removing = {HELPS: "raises best val beyond seed noise", HURTS: "lowers best val beyond seed noise"}.get(
        removed, unclear
    )
    return (
        f"in the training loss, adding it to vanilla {adding} and removing it from llama {removing} "
        f"({EFFECT_SUMMARY[effects]})"
    )


# The wall clock (RMSNorm, SwiGLU)


def wall_clock_times(data: ReportData, part: str) -> pd.DataFrame:
    """Per variant of one part: manual and fused median ms (NaN where not timed) and the shape."""
    rows = data.exams.wall_clock[data.exams.wall_clock["part"] == part]
    if rows.empty:
        return pd.DataFrame(columns=["manual", "fused", "shape"])
    times = rows.pivot_table(index="variant", columns="impl", values="median_ms").reindex(columns=["manual", "fused"])
    return times.join(rows.groupby("variant")["shape"].first())


def impl_text(times: pd.DataFrame, variant: str) -> str:
    name = VARIANT_NAMES.get(variant, variant)
    if variant not in times.index:
        return f"{name} not timed yet"
    manual, fused = times.loc[variant, "manual"], times.loc[variant, "fused"]
    if math.isnan(manual) or math.isnan(fused):
        impl, ms = ("manual", manual) if math.isnan(fused) else ("fused", fused)
        return f"{name} {ms:.3f} ms ({impl} only)"
    return f"{name} hand-written {manual:.3f} ms vs fused {fused:.3f} ms ({manual / fused:.1f}x)"


def wall_clock_text(data: ReportData, part: str, mine: str, other: str) -> str:
    times = wall_clock_times(data, part)
    if times.empty:
        return not_measured("wall_clock")
    shape = times["shape"].dropna().iloc[0]
    return f"{impl_text(times, mine)}; {impl_text(times, other)} (forward + backward on {shape})"


def wall_clock_finding(data: ReportData, part: str, mine: str, other: str) -> str | None:
    """Mine against the other variant (fused, and hand-written), and what writing mine by hand costs."""
    times = wall_clock_times(data, part)
    if mine not in times.index or other not in times.index:
        return None
    fused, manual = (times.loc[mine, impl] / times.loc[other, impl] for impl in ("fused", "manual"))
    name, other_name = VARIANT_NAMES[mine], VARIANT_NAMES[other]
    if math.isnan(fused) and math.isnan(manual):
        return None
    if math.isnan(fused):
        return f"on the wall clock, hand-written {name} takes {manual:.2f}x the {other_name}'s time"
    sentence = f"on the wall clock, fused {name} takes {fused:.2f}x the {other_name}'s time"
    if not math.isnan(manual):
        sentence += f" (hand-written {manual:.2f}x)"
    by_hand = times.loc[mine, "manual"] / times.loc[mine, "fused"]
    if not math.isnan(by_hand):
        sentence += f", and written by hand {by_hand:.1f}x its own fused time"
    return sentence


# The depth map (pre-norm)


def telling_lr(depth: pd.DataFrame) -> float | None:
    """The learning rate whose gradient norms say the most: the largest at which post-norm failed
    and pre-norm has a cell, preferring one where pre-norm trained; None if post-norm never failed."""
    post, pre = depth["norm_pos"] == "post", depth["norm_pos"] == "pre"
    both = sorted(set(depth.loc[post & ~depth["trained"], "lr"]) & set(depth.loc[pre, "lr"]), reverse=True)
    pre_trained = [lr for lr in both if lr in set(depth.loc[pre & depth["trained"], "lr"])]
    return (pre_trained or both or [None])[0]


def last_ratio(spread: pd.DataFrame, run_id: str) -> pd.Series | None:
    """The run's last logged step with a finite first-to-last gradient-norm ratio."""
    rows = spread[(spread["run_id"] == run_id) & spread["first_to_last"].notna()]
    rows = rows[np.isfinite(rows["first_to_last"].astype(float)) & (rows["first_to_last"] > 0)]
    return rows.sort_values("step").iloc[-1] if not rows.empty else None


# A first-to-last gradient ratio below this means the first block learns next to nothing.
VANISHED_RATIO = 1e-3


def vanished_note(ratio: float) -> str:
    """What a first / last block gradient ratio means when the first block's has vanished; else nothing."""
    return "; the first block's gradient has all but vanished" if ratio < VANISHED_RATIO else ""


def gradient_text(data: ReportData) -> str | None:
    """At the telling lr, the first block's gradient norm over the last block's, post against pre."""
    depth = data.exams.depth
    lr = telling_lr(depth)
    if lr is None:
        return None
    said = []
    for norm_pos in ("post", "pre"):
        cell = depth[(depth["norm_pos"] == norm_pos) & (depth["lr"] == lr)]["cell"].iloc[0]
        ratio = last_ratio(data.exams.grad_norm_spread, f"{DEPTH_FOLDER}/{cell}")
        said.append(
            f"{norm_pos}-norm no norms logged"
            if ratio is None
            else f"{norm_pos}-norm {ratio['first_to_last']:.3g}x (step {int(ratio['step'])}"
            f"{vanished_note(ratio['first_to_last'])})"
        )
    return f"at lr {lr:g}, first / last block's gradient norm at the last logged step: {', '.join(said)}"


def depth_text(data: ReportData) -> str:
    depth = data.exams.depth
    if depth.empty:
        return not_measured("depth")
    layers = "/".join(str(n) for n in sorted(depth["n_layer"].unique()))
    said = f"{layers} layers, no warmup: {stability_text(data.exams.depth_stability)}"
    gradients = gradient_text(data)
    return f"{said}; {gradients}" if gradients else said


def depth_finding(data: ReportData) -> str | None:
    stability = data.exams.depth_stability.set_index("norm_pos")
    if not {"post", "pre"} <= set(stability.index):
        return None
    post, pre = stability.loc["post", "max_trained_lr"], stability.loc["pre", "max_trained_lr"]
    if pd.isna(pre) and pd.isna(post):
        return "without warmup neither wiring trains at any learning rate tried"
    if pd.isna(post):
        return f"without warmup pre-norm trains up to lr {pre:g}, where post-norm trains at none tried"
    if pd.isna(pre) or post > pre:
        return "without warmup post-norm trains at a larger learning rate than pre-norm"
    if post == pre:
        return f"without warmup both wirings train up to the same lr, {pre:g}"
    return f"without warmup pre-norm still trains at {pre / post:.3g}x the largest lr post-norm survives ({pre:g} vs {post:g})"


# The length exam (RoPE)


def run_length(rows: pd.DataFrame) -> dict[str, Any] | None:
    """One run on its longest readable window: loss within the training length and at the farthest bucket."""
    readable = rows[rows["possible"]]
    if readable.empty:
        return None
    window = rows[rows["window_len"] == readable["window_len"].max()]
    ctx_len = int(window["ctx_len"].max())
    within = window[(window["bucket_end"] < ctx_len) & window["possible"]]
    far = window[window["bucket_start"] == window["bucket_start"].max()].iloc[0]
    return {
        "window": int(far["window_len"]),
        "ctx_len": ctx_len,
        "within_span": f"0-{int(within['bucket_end'].max())}" if not within.empty else "–",
        "within": weighted_loss(within),
        "far_span": f"{int(far['bucket_start'])}-{int(far['bucket_end'])}",
        "far_start": int(far["bucket_start"]),
        "far": float(far["loss"]) if far["possible"] else math.nan,
    }


def length_by_run(data: ReportData, runs: pd.DataFrame) -> pd.DataFrame:
    """run_length of each of these runs that was examined, with its seed, most recent seed first."""
    found = []
    for run in runs.sort_values("seed", ascending=False).itertuples():
        measured = run_length(data.exams.length[data.exams.length["run_id"] == run.run_id])
        if measured is not None:
            found.append({"seed": int(run.seed), "experiment": run.experiment, **measured})
    return pd.DataFrame(found)


def length_pair_text(name: str, measured: pd.DataFrame) -> str:
    """The far bucket's loss against the loss within the training length, seed by seed."""
    first = measured.iloc[0]
    if first["far_start"] < first["ctx_len"]:
        return f"{name} read only within its training length (0-{first['ctx_len'] - 1}): {per_seed(measured, 'within')}"
    if len(measured[["window", "far_span", "within_span"]].drop_duplicates()) > 1:  # seeds read on different windows
        return f"{name}: " + "; ".join(
            f"seed {r.seed}: {fmt(r.far)} at {r.far_span} of {r.window:,} vs {fmt(r.within)} at {r.within_span}"
            for r in measured.itertuples()
        )
    return (
        f"{name}: {per_seed(measured, 'far')} at positions {first['far_span']} of {first['window']:,}-character "
        f"windows vs {per_seed(measured, 'within')} at {first['within_span']} "
        f"(seed{'s' if len(measured) > 1 else ''} {seeds_of(measured)})"
    )


def rope_runs(data: ReportData) -> pd.DataFrame:
    """The RoPE (unbroken) runs whose length the exam read: the mini-LLaMA's if it was examined,
    else the RoPE experiment with the most of the five parts (an ablation before a break test)."""
    runs = data.runs[(data.runs["positions"] == "RoPE") & data.runs["run_id"].isin(data.exams.length["run_id"])]
    if runs.empty:
        return runs
    rank = runs.assign(group_rank=runs["group"].map({"headline": 0, "ablation": 1}).fillna(2))
    chosen = rank.sort_values(["n_parts", "group_rank"], ascending=[False, True], kind="stable")["experiment"].iloc[0]
    return runs[runs["experiment"] == chosen]


def run_name(runs: pd.DataFrame) -> str:
    first = runs.iloc[0]
    if first["group"] == "headline" and first["n_parts"] in (0, 5):
        return "mini-LLaMA" if first["n_parts"] == 5 else "vanilla"
    return f"`{first['experiment']}`"


def learned_text(data: ReportData) -> str:
    """What the length exam says of learned position tables: where they stop, and why."""
    length = data.exams.length.merge(data.runs[["run_id", "experiment", "positions"]], on="run_id")
    learned = length[length["positions"] == "learned positions"]
    if learned.empty:
        return "learned positions: not examined yet"
    # a window with readable positions inside the table and none past it
    readable = set(learned.loc[learned["possible"], "run_id"])
    stopped = learned[
        ~learned["possible"] & (learned["bucket_start"] >= learned["ctx_len"]) & learned["run_id"].isin(readable)
    ]
    if stopped.empty:
        return "learned positions: examined only within the training length"
    first = stopped.iloc[0]
    n_experiments = stopped["experiment"].nunique()
    return (
        f"learned positions ({n_experiments} experiment{'s' if n_experiments > 1 else ''}): not possible past "
        f"position "
        f"{int(first['ctx_len']) - 1} ({first['reason']})"
    )


def length_text(data: ReportData) -> str:
    if data.exams.length.empty:
        return not_measured("length RUN_DIR")
    rope = rope_runs(data)
    said = [
        length_pair_text(f"RoPE, {run_name(rope)}", length_by_run(data, rope))
        if not rope.empty
        else "RoPE: not examined yet",
        learned_text(data),
    ]
    broken = data.runs[data.runs["positions"].str.startswith("RoPE broken")]
    for kind, runs in broken.groupby("positions"):
        measured = length_by_run(data, runs)
        said.append(f"{kind}: not examined yet" if measured.empty else length_pair_text(kind, measured))
    return "; ".join(said)


def length_finding(data: ReportData) -> str | None:
    rope = rope_runs(data)
    measured = length_by_run(data, rope) if not rope.empty else pd.DataFrame()
    if measured.empty or measured["far_start"].min() < measured["ctx_len"].max() or measured["far"].isna().any():
        return None
    ratio = measured["far"].mean() / measured["within"].mean()
    sentence = (
        f"past its training length RoPE ({run_name(rope)}) reads on, at {ratio:.2f}x its loss within it "
        f"(positions {measured['far_span'].iloc[0]} against {measured['within_span'].iloc[0]}, mean over seeds)"
    )
    if learned_text(data).startswith("learned positions ("):
        sentence += ", where a learned position table cannot read at all"
    return sentence


# The KV cache (GQA)


def bytes_per_token(data: ReportData) -> pd.DataFrame:
    """Per attention kind: KV heads and the measured cache bytes per cached position (median over runs)."""
    cache = data.exams.kv_cache.merge(data.runs[["run_id", "n_head"]], on="run_id")
    if cache.empty:
        return pd.DataFrame(columns=["attention", "n_kv_head", "measured"])
    cache = cache.assign(
        attention=[attention_kind(h, kv) for h, kv in zip(cache["n_head"], cache["n_kv_head"])],
        measured=cache["measured_bytes"] / cache["tokens"],
    )
    return cache.groupby(["attention", "n_kv_head"], as_index=False)["measured"].median()


def cache_speedup(data: ReportData) -> pd.Series | None:
    """At the longest context timed both ways (GQA's if it was timed): cached and recomputed characters per second."""
    timing = data.exams.kv_timing.merge(data.runs[["run_id", "n_head"]], on="run_id")
    if timing.empty:
        return None
    timing = timing.assign(attention=[attention_kind(h, kv) for h, kv in zip(timing["n_head"], timing["n_kv_head"])])
    speeds = timing.pivot_table(
        index=["attention", "context"], columns="cached", values="chars_per_s", aggfunc="median"
    ).reindex(columns=[True, False])
    speeds = speeds.set_axis(["cached", "recomputed"], axis=1).dropna().reset_index()
    if speeds.empty:
        return None
    kind = "GQA" if (speeds["attention"] == "GQA").any() else speeds["attention"].iloc[0]
    return speeds[speeds["attention"] == kind].sort_values("context").iloc[-1]


def gib(n_bytes: float) -> str:
    value = n_bytes / 2**30
    return f"{value:,.0f} GiB" if value >= 10 else f"{value:.3g} GiB"


def mqa_text(data: ReportData) -> str:
    """MQA's best val against the mini-LLaMA's (GQA), seed by seed."""
    mqa = data.runs[(data.runs["group"] == "break") & (data.runs["n_kv_head"] == 1)]
    llama = headline_of(data, "llama")
    deltas = paired_deltas(mqa, llama)
    if mqa.empty or llama.empty or deltas.empty:
        return "MQA's best val vs the mini-LLaMA's: not trained yet"
    return f"MQA's best val vs the mini-LLaMA's {seed_list(deltas)}"


def kv_heads(n: int) -> str:
    return f"{n} KV head{'s' if n != 1 else ''}"


def kv_cache_text(data: ReportData) -> str:
    exams = data.exams
    if exams.kv_cache.empty and exams.kv_timing.empty:
        return f"{not_measured('kv_cache RUN_DIR')}; {mqa_text(data)}"
    kinds = bytes_per_token(data).set_index("attention")
    sizes = [
        f"{kind} ({kv_heads(int(kinds.loc[kind, 'n_kv_head']))}) {kinds.loc[kind, 'measured']:,.0f}"
        if kind in kinds.index
        else f"{kind} not measured yet"
        for kind in ATTENTION_ORDER
    ]
    said = [
        "cache bytes per token, measured: " + ", ".join(sizes) if not kinds.empty else "cache bytes: not measured yet"
    ]
    speed = cache_speedup(data)
    said.append(
        "generation not timed both ways yet"
        if speed is None
        else f"at {int(speed['context']):,} characters of context the cache makes {speed['attention']} generation "
        f"{speedup_words(speed['cached'], speed['recomputed'])} ({speed['cached']:,.1f} vs {speed['recomputed']:,.1f} characters/s)"
    )
    if not exams.kv_scale.empty:
        scale = exams.kv_scale
        said.append(
            f"at LLaMA scale ({int(scale['tokens'].iloc[0]):,} tokens) "
            + " vs ".join(f"{gib(row.bytes)} for {row.name}" for row in scale.itertuples())
        )
    return "; ".join(said + [mqa_text(data)])


def kv_cache_finding(data: ReportData) -> str | None:
    kinds = bytes_per_token(data).set_index("attention")
    said = []
    if {"MHA", "GQA"} <= set(kinds.index):
        said.append(
            f"GQA's cache is {fraction_words(kinds.loc['GQA', 'measured'] / kinds.loc['MHA', 'measured'])} "
            "MHA's per token"
        )
    speed = cache_speedup(data)
    if speed is not None:
        said.append(
            f"that cache makes generation {speedup_words(speed['cached'], speed['recomputed'])} than "
            f"recomputing the context, at {int(speed['context']):,} characters"
        )
    return " and ".join(said) or None


def exam_rows(data: ReportData) -> dict[str, tuple[str, str | None]]:
    """Per part: what its exam shows (the table's cell) and its finding (a clause, None when unmeasured)."""
    return {
        "rmsnorm": (
            wall_clock_text(data, "norm", "rmsnorm", "layernorm"),
            wall_clock_finding(data, "norm", "rmsnorm", "layernorm"),
        ),
        "prenorm": (depth_text(data), depth_finding(data)),
        "rope": (length_text(data), length_finding(data)),
        "gqa": (kv_cache_text(data), kv_cache_finding(data)),
        "swiglu": (wall_clock_text(data, "ffn", "swiglu", "gelu"), wall_clock_finding(data, "ffn", "swiglu", "gelu")),
    }


def exams_section(data: ReportData) -> str:
    """One row per part: the training loss's verdict beside the exam made for it."""
    shown = exam_rows(data)
    rows = [
        [
            PART_NAMES[part],
            training_loss_text(data, part),
            f"{PART_EXAMS[part][1]} (`exam {PART_EXAMS[part][0]}`)",
            shown[part][0],
        ]
        for part in PARTS
    ]
    table = md_table(
        ["part", "what the training loss says (Δ best val)", "the exam made for it", "what the exam shows"], rows
    )
    sentences = []
    for part in PARTS:
        finding = shown[part][1] or f"its exam ({PART_EXAMS[part][0]}) is not measured yet"
        sentences.append(f"**{PART_NAMES[part]}**: {training_loss_verdict(data, part)}; {finding}.")
    return f"{table}\n\nΔ best val: the ablation minus its baseline, seed by seed (negative: lower loss). " + " ".join(
        sentences
    )


# ---------------------------------------------------------------------------------------------
# Figures: anatomy/charts.py's, which the dashboard shows too, saved as PNG (Altair saves through
# vl-convert)


def figure_charts(everything: ReportData) -> dict[str, Any]:
    """The figures the data allow, as Altair charts by name (the grid's, then the studies')."""
    from anatomy import charts  # Altair: imported only when figures are drawn, so the text needs none

    data = only_runs_of(everything, None)

    drawn: dict[str, Any] = {}
    scale_points = best_val_by_size(scale_data(everything))
    if not scale_points.empty:
        drawn["scale"] = charts.best_val_by_size_chart(scale_points).properties(width=680)
    headline_runs = data.runs[data.runs["group"] == "headline"]
    headline = data.metrics[data.metrics["run_id"].isin(headline_runs["run_id"])]
    if not headline.empty:
        band = data.band[data.band["experiment"].isin(headline_runs["experiment"])]
        drawn["headline"] = charts.seed_band_chart(
            band, chart_data.long_curves(headline, splits=("val_loss",)), chart_data.best_points(headline_runs)
        ).properties(width=760)
    llama = headline_of(data, "llama").sort_values("seed", ascending=False)
    if not llama.empty:
        run = data.metrics[data.metrics["run_id"] == llama["run_id"].iloc[0]].sort_values("step")
        table = chart_data.overfitting_table(llama.iloc[:1], data.above_best, margin=MEMORISING_RISE)
        if not table.empty:
            drawn["overfitting"] = charts.overfitting_chart(run, table.iloc[0], MEMORISING_RISE).properties(
                width=760, title=f"{run['label'].iloc[0]}: the overfitting turn"
            )
    if not data.ablations.empty:
        drawn["ablations"] = charts.benefit_chart(
            chart_data.part_benefit(data.ablations), headline_noise(data)
        ).properties(width=680)
    deep = pd.concat([deep_runs(data, "post"), deep_runs(data, "pre")])
    if not deep.empty:
        metrics = data.metrics[data.metrics["run_id"].isin(deep["run_id"])]
        drawn["depth"] = charts.loss_curves(chart_data.long_curves(metrics)).properties(width=760)
    breaks = data.runs[data.runs["group"] == "break"]
    deltas = chart_data.versus_baseline(data.comparisons, list(dict.fromkeys(breaks["experiment"])))
    if not deltas.empty:
        drawn["breaks"] = charts.delta_chart(deltas).properties(width=680)
    return {**drawn, **exam_charts(data)}


def exam_charts(data: ReportData) -> dict[str, Any]:
    """The exams' figures whose data exist: RoPE's loss by position and pre-norm's stability map."""
    from anatomy import charts  # Altair, as in figure_charts

    drawn: dict[str, Any] = {}
    length = data.exams.length.merge(data.runs[["run_id", "experiment", "group", "part", "positions"]], on="run_id")
    curves = chart_data.length_curves(length)
    if not curves.empty:
        ctx_lens = curves["ctx_len"].unique()
        drawn["length"] = charts.length_chart(curves, ctx_lens[0] if len(ctx_lens) == 1 else None).properties(width=760)
    if not data.exams.depth.empty:
        drawn["stability"] = charts.stability_map(chart_data.depth_cells(data.exams.depth)).properties(width=680)
    return drawn


def save_figures(charts: dict[str, Any], out_dir: Path) -> list[str]:
    """Each chart as out_dir/NAME.png, written atomically; returns the names."""
    for name, chart in charts.items():
        with atomic_path(out_dir / f"{name}.png") as tmp:
            # a gap between axis labels, so that touching ones (1,900 and a flush 2,000) thin out
            chart.configure_axis(labelSeparation=4).save(str(tmp), format="png", scale_factor=1.5)
    return list(charts)


FIGURE_TITLES = {
    "headline": "Val loss, vanilla vs mini-LLaMA (band: min to max over seeds; ◆ best val)",
    "overfitting": "The overfitting turn of the mini-LLaMA",
    "ablations": (
        "Each part's gain in best val, added to vanilla and removed from the mini-LLaMA (right: having "
        "the part lowers best val, whichever way it was swapped; grey: seed noise)"
    ),
    "depth": "12 layers without warmup: post-norm vs pre-norm",
    "breaks": "Break tests: best val minus the mini-LLaMA's (right: worse than the mini-LLaMA)",
    "length": "RoPE's exam: loss by position, past the training length (dashed line)",
    "stability": "Pre-norm's exam: which deep models train without warmup, by learning rate",
    "scale": "Best val against training-set size, poems (band: min to max over seeds; each seed a point)",
}


# ---------------------------------------------------------------------------------------------
# The report


def figure_link(name: str, figure_names: list[str], image_prefix: str) -> str:
    """A drawn figure as Markdown after a blank line; nothing where it was not drawn."""
    return f"\n\n![{FIGURE_TITLES[name]}]({image_prefix}{name}.png)" if name in figure_names else ""


def render(everything: ReportData, figure_names: list[str], image_prefix: str = "", costs: bool = True) -> str:
    """The report's Markdown body (### sections); figures are linked as image_prefix + name.png.
    The grid's sections read the grid's runs only; each study has a section of its own."""
    data = only_runs_of(everything, None)

    def figure(name: str) -> str:
        return figure_link(name, figure_names, image_prefix)

    n_done = int((data.runs["status"] != "running").sum())
    grid = (data.provenance or {}).get("grid", {})
    lines = [
        f"Made by `python -m anatomy report` from {n_done} finished runs "
        f"({', '.join(sorted(data.runs['experiment'].unique()))})"
        + (
            f", trained on {', '.join(grid['devices'])} with torch {', '.join(grid['torch_versions'])}."
            if grid.get("devices")
            else "."
        ),
        "Val loss is in nats per character; lower is better. Seeds are listed as 42 / 7.",
        "",
        "### Headline: the 2017 Transformer vs the mini-LLaMA",
        "",
        headline_section(data) + figure("headline") + figure("overfitting"),
        "",
        "### The chapter's claims, measured",
        "",
        claims_section(data),
        "",
        "### Which part earned the gain (ablations)",
        "",
        ablation_section(data) + figure("ablations"),
        "",
        "### Break tests",
        "",
        break_section(data) + figure("depth") + figure("breaks"),
        "",
        "### Which part wins where",
        "",
        exams_section(data) + figure("length") + figure("stability"),
        "",
        "### The overfitting turn of every experiment",
        "",
        overfitting_section(data),
        "",
        "### How much of the samples is memorised",
        "",
        memorisation_section(data),
    ]
    if scale := scale_section(everything):
        lines += ["", f"### {STUDY_GROUPS['scale']}", "", scale + figure("scale")]
        if (largest := largest_as_headline(scale_data(everything))) is not None:
            lines += ["", "Which part earned the gap at the largest size (stage 2):", "", ablation_section(largest)]
    if precision := precision_section(everything):
        lines += ["", f"### {STUDY_GROUPS['precision']}", "", precision]
    if costs and costs_section(everything):
        lines += ["", "### What the runs cost", "", costs_section(everything)]
    return "\n".join(lines) + "\n"


def headline_block(everything: ReportData, figure_names: list[str], image_prefix: str) -> str:
    """The README's headline: the two models, the headline claims' verdicts, and the scale
    study's answer once it has one (the full report holds the rest)."""
    data = only_runs_of(everything, None)
    verdicts = md_table(
        ["the chapter says", "chapter's figure", "measured here", "verdict"],
        [[c.claim, c.chapter, c.measured, c.verdict] for c in claims(data)[:HEADLINE_CLAIMS]],
    )
    parts = [
        "Val loss in nats per character on the default corpus, seeds 42 / 7.",
        headline_section(data) + figure_link("headline", figure_names, image_prefix),
        verdicts,
    ]
    if answer := scale_answer(everything):
        parts.append(f"**{STUDY_GROUPS['scale']}** {answer} ([docs/scale.md](docs/scale.md))")
    return "\n\n".join(parts) + "\n"


def readme_blocks(data: ReportData, figure_names: list[str], image_prefix: str) -> dict[str, str]:
    """The README's generated sections by name (README_BLOCKS)."""
    costs = costs_section(data) or "No shipped run records its wall time yet."
    return {"headline": headline_block(data, figure_names, image_prefix), "costs": costs + "\n"}


def markers(name: str) -> tuple[str, str]:
    return f"<!-- report:{name}:start -->", f"<!-- report:{name}:end -->"


def splice_readme(readme: str, blocks: dict[str, str], path: Path) -> str:
    """The README with the text between each block's markers replaced by that block."""
    for name, body in blocks.items():
        start, end = markers(name)
        if readme.count(start) != 1 or readme.count(end) != 1 or readme.index(start) > readme.index(end):
            raise AnatomyError(
                f"{path}: expected one '{start}' line, then one '{end}' line, "
                f"around the section `anatomy report` writes"
            )
        head, rest = readme.split(start)
        _, tail = rest.split(end)
        readme = f"{head}{start}\n{body}{end}{tail}"
    return readme


def readme_block(readme: str, name: str) -> str:
    """The text between a block's markers, as splice_readme wrote it."""
    start, end = markers(name)
    return readme.split(start, 1)[1].split(end, 1)[0].removeprefix("\n")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--db", type=Path, help="a results database (default: results/anatomy.duckdb)")
    source.add_argument(
        "--runs",
        type=Path,
        help="a folder of run folders to collect first, e.g. results/reference/runs "
        "(with the benchmarks/ and exams/ folders beside it, if any)",
    )
    parser.add_argument(
        "--provenance",
        type=Path,
        default=None,
        help="grid.json of shipped runs, for the costs section (default: the one beside --runs, if any)",
    )
    parser.add_argument("--out", type=Path, default=Path("results/report"), help="folder for report.md and the PNGs")
    parser.add_argument(
        "--readme",
        type=Path,
        default=None,
        help="also rewrite this README's results and costs sections (between their marker lines)",
    )
    parser.add_argument("--no-figures", action="store_true", help="skip the PNG figures")


def run(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.out.is_dir():
        raise AnatomyError(f"--out {args.out} is a file: expected a folder for report.md and the figures")
    if args.readme is not None and args.no_figures:
        raise AnatomyError("--readme with --no-figures would drop the README's figures: give one or the other")
    if args.runs is not None:
        provenance = read_provenance(args.provenance or args.runs.parent / "grid.json")
        data = load_runs(args.runs, provenance)
    else:
        data = load(args.db or Path("results/anatomy.duckdb"), read_provenance(args.provenance))
    with writing_into(args.out):  # one report writer at a time: what a killed one left can go
        for path in [args.out / "report.md", *(args.out / f"{name}.png" for name in FIGURE_TITLES)]:
            remove_stale_temporaries(path)
        names = [] if args.no_figures else save_figures(figure_charts(data), args.out)
        write_text(args.out / "report.md", "# Results\n\n" + render(data, names))
    print(f"report: {args.out / 'report.md'} ({len(data.runs)} runs, {len(names)} figures)")
    if args.readme is not None:
        if not args.readme.is_file():
            raise AnatomyError(f"--readme {args.readme}: no such file")
        prefix = Path(os.path.relpath(args.out.resolve(), args.readme.resolve().parent)).as_posix()
        readme = args.readme.read_text(encoding="utf-8")
        write_text(args.readme, splice_readme(readme, readme_blocks(data, names, prefix + "/"), args.readme))
        print(f"report: the {' and '.join(README_BLOCKS)} sections of {args.readme} rewritten")
    return 0
