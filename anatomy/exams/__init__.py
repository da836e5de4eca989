"""The exams: each part of the mini-LLaMA tested where it is made to pay.

The training loss of a small model is not what three of the five parts were made for (pre-norm:
depth, RoPE: relative position, GQA: the KV cache). Each gets the exam it was made for:

    length      RoPE: loss by position on windows up to 8x the training length
    kv_cache    GQA: the KV cache's bytes per token, and generation time with and without it
    depth       pre-norm: a stability map of 12-layer models without warmup, lr by wiring
    wall_clock  pitfall 4: the wall clock of each part alone, hand-written against fused

`python -m anatomy exam NAME ...` runs one by hand; workflow/rules/exams.smk runs them all
(`snakemake exams`). A run's exam results are small files in its folder (exams/NAME.json), so
they ship with it; `anatomy collect` reads them into the exam_* tables of anatomy/schema.sql.
"""

from __future__ import annotations

import argparse
import importlib
import math
from pathlib import Path
from typing import Any, Callable

import numpy as np

from anatomy.atomic import check_file_target, write_json

# exam -> one-line help; each is a module here with add_arguments(parser) and run(args)
EXAMS = {
    "length": "RoPE: loss by position on validation windows past the training length",
    "kv_cache": "GQA: KV-cache bytes (measured and by formula) and generation time with and without it",
    "depth": "pre-norm: stability map of 12-layer models without warmup, post- vs pre-norm over lr",
    "wall_clock": "the wall clock of each part alone, forward + backward, manual against fused",
}


def exam_module(name: str):
    return importlib.import_module(f"anatomy.exams.{name}")


def exam_result_path(run_dir: str | Path, name: str) -> Path:
    """Where a run's result of exam `name` lives: RUN/exams/NAME.json, beside its metrics."""
    return Path(run_dir) / "exams" / f"{name}.json"


def run_exam_output(args: argparse.Namespace, name: str) -> Path:
    """Where a run's exam writes (--out, else exam_result_path), checked before the minutes of
    work, so an --out that cannot be written stops the exam first."""
    out = Path(args.out) if args.out else exam_result_path(args.run_dir, name)
    check_file_target(out, "--out")
    return out


def write_result(out: Path, result: dict[str, Any], show: Callable[[dict[str, Any]], None]) -> None:
    """Write an exam's result atomically, then show its table."""
    write_json(out, result)
    show(result)
    print(f"\nwritten to {out}")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "exam",
        choices=sorted(EXAMS),
        help="which exam: " + "; ".join(f"{name}: {text}" for name, text in EXAMS.items()),
    )


def speedup_words(cached_per_s: float, recomputed_per_s: float) -> str:
    """The KV cache's effect on generation speed, in words: "20.3x faster", or "2.0x slower" where
    it costs more than it saves (a tiny model at a short context). Shared by the report and the
    dashboard, so both say it the same way."""
    ratio = cached_per_s / recomputed_per_s
    return f"{ratio:.1f}x faster" if ratio >= 1 else f"{1 / ratio:.1f}x slower"


# How a cache compares with another's, in words where the ratio is a plain fraction
FRACTIONS = {1 / 2: "half of", 1 / 4: "a quarter of", 1 / 8: "an eighth of"}


def fraction_words(ratio: float) -> str:
    """One size against another: "half of", "a quarter of", else "0.37x". Shared by the report and
    the dashboard, so both say it the same way."""
    for fraction, words in FRACTIONS.items():
        if math.isclose(ratio, fraction, rel_tol=1e-6):
            return words
    return f"{ratio:.2f}x"


def weighted_loss(buckets) -> float:
    """The mean loss over these loss-by-position buckets' predictions (each bucket weighted by how
    many it has; non-finite losses left out). Shared by the report and the dashboard."""
    buckets = buckets[np.isfinite(buckets["loss"].astype(float))]
    if buckets.empty:
        return math.nan
    weights = buckets["predictions"].astype(float)
    if not (weights > 0).all():
        return float(buckets["loss"].mean())
    return float((buckets["loss"] * weights).sum() / weights.sum())
