"""The exams: each part of the mini-LLaMA tested where it is made to pay.

The training loss of a small model is not what three of the five parts were made for (pre-norm:
depth, RoPE: relative position, GQA: the KV cache). Each gets the exam it was made for:

    length      RoPE: loss by position on windows up to 8x the training length
    kv_cache    GQA: the KV cache's bytes per token, and generation time with and without it
    depth       pre-norm: a stability map of 12-layer models without warmup, lr by wiring
    wall_clock  pitfall 4: the wall clock of each part alone, hand-written against fused
    qk_norm     QK-norm: an lr stability map with and without it, the largest logit logged
    mla         MLA: KV-cache bytes per character against best val, MHA, GQA, MQA and MLA
    moe         experts: best val at equal active and equal total parameters, load, step time

`python -m anatomy exam NAME ...` runs one by hand; workflow/rules/exams.smk runs them all
(`snakemake exams`). A run's exam results are small files in its folder (exams/NAME.json), so
they ship with it; `anatomy collect` reads them into the exam_* tables of anatomy/results/schema.sql.
"""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from typing import Any, Callable

from anatomy.files.atomic import check_file_target, write_json
from anatomy.files.run_folder import exam_result_path

# exam -> one-line help; each is a module here with add_arguments(parser) and run(args)
EXAMS = {
    "length": "RoPE: loss by position on validation windows past the training length",
    "kv_cache": "GQA: KV-cache bytes (measured and by formula) and generation time with and without it",
    "depth": "pre-norm: stability map of 12-layer models without warmup, post- vs pre-norm over lr",
    "wall_clock": "the wall clock of each part alone, forward + backward, manual against fused",
    "qk_norm": "QK-norm: lr stability map with and without it, with the largest attention logit",
    "mla": "MLA: KV-cache bytes per character against best val for MHA, GQA, MQA and MLA, and generation speed",
    "moe": "experts: best val at equal active and equal total parameters, the experts' load, time per step",
}


def exam_module(name: str):
    return importlib.import_module(f"anatomy.exams.{name}")


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
