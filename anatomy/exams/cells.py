"""What the exams that train models of their own share (qk_norm, mla, moe; depth came first).

Each cell of such an exam is an ordinary training run (anatomy.training.trainer.train) in
OUT/CELL: metrics, checkpoints, gradient norms and the other per-layer logs. A finished cell is
skipped and a killed one resumes, so an exam can be run again at any time, and Snakemake can run
one cell per job. Reading a cell needs no torch: only training does.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from anatomy.config import TrainConfig
from anatomy.data.tokenizer import load_tokenized
from anatomy.errors import AnatomyError
from anatomy.exams.depth import UNIGRAM_TAG, positive_float, trained, unigram_loss
from anatomy.files.atomic import check_folder_target
from anatomy.files.run_folder import read_metrics, read_run_config, read_summary

__all__ = ["positive_float"]  # the exams' --lr lists read numbers as the depth map does


def add_cell_arguments(parser: argparse.ArgumentParser, default_out: Path, steps: int, seed: int) -> None:
    """--out, --data, --steps, --seed, --threads and the key=value overrides of every cell."""
    parser.add_argument(
        "--out", default=str(default_out), help=f"one subfolder per cell (default {default_out.as_posix()})"
    )
    parser.add_argument(
        "--data", default="results/corpus", help="folder written by `anatomy tokenize` (default results/corpus)"
    )
    parser.add_argument("--steps", type=int, default=steps, help=f"steps of every cell (default {steps})")
    parser.add_argument("--seed", type=int, default=seed, help=f"seed of every cell (default {seed})")
    parser.add_argument("--threads", type=int, default=0, help="torch threads of each training (default: torch's)")
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="ModelConfig/TrainConfig fields for every cell, e.g. d_model=32 train.device=cpu "
        "(put them before the options that take lists, which would take them in)",
    )


def at_least_one(option: str, values: list[int]) -> None:
    """One line naming the option, the value and what was expected; not a traceback later."""
    for value in values:
        if value < 1:
            raise AnatomyError(f"{option} {value} is not valid: expected a whole number of at least 1")


def train_cells(
    args: argparse.Namespace, exam: str, cells: dict[str, tuple[dict, dict]], own: set[str]
) -> dict[str, Any]:
    """Train each cell (name -> (model, train) settings the exam sets) with the key=value overrides
    beneath them; an override of a setting the exam sets (`own`) is set aside, in a note. Returns
    the tags every cell carries (the corpus's unigram loss among them)."""
    from anatomy.training.trainer import resolve_model_config, split_overrides, train  # torch: reading needs none

    check_folder_target(args.out, "--out")
    at_least_one("--steps", [args.steps])
    model_overrides, train_overrides = split_overrides(args.overrides)
    for name, value in {**model_overrides, **train_overrides}.items():
        if name in own:
            print(f"note: {name}={value} set aside: the exam sets it", flush=True)
    tokenizer, train_ids, val_ids = load_tokenized(args.data)
    tags = {"exam": exam, UNIGRAM_TAG: round(unigram_loss(train_ids, val_ids, tokenizer.vocab_size), 6)}
    resolved = {}
    for name, (model, train_settings) in cells.items():
        settings = {**train_overrides, "steps": args.steps, "seed": args.seed, **train_settings}
        if args.threads:
            settings["threads"] = args.threads
        resolved[name] = ({**model_overrides, **model}, settings)
        # every cell's settings checked before the first trains: a bad one is refused in a second
        resolve_model_config("llama", resolved[name][0], tokenizer.vocab_size)
        TrainConfig.from_dict(settings, source=f"cell {name}")
    for name, (model, settings) in resolved.items():
        train(args.data, Path(args.out) / name, "llama", model, settings, {**tags, "cell": name})
    return tags


def read_cell(folder: Path) -> dict[str, Any]:
    """What every exam reads of a cell: its settings and how it went. A cell without summary.json
    is still training (status "running")."""
    folder = Path(folder)
    config = read_run_config(folder / "config.json")
    summary = read_summary(folder / "summary.json") if (folder / "summary.json").is_file() else None
    metrics = read_metrics(folder / "metrics.jsonl", folder.name, finished=summary is not None)
    evaluated = [row for row in metrics if row["val_loss"] is not None]
    best = min(evaluated, key=lambda row: row["val_loss"]) if evaluated else None
    tags = config.get("tags") or {}
    unigram = tags.get(UNIGRAM_TAG)
    if not isinstance(unigram, (int, float)):
        raise AnatomyError(
            f"{folder / 'config.json'}: tags.{UNIGRAM_TAG} must be a number; train the cell with its exam"
        )
    if summary is None:
        status, diverged, diverged_step = "running", False, None
    else:
        diverged = bool(summary.get("diverged", False))
        status = summary.get("status") or ("diverged" if diverged else "done")
        diverged_step = summary.get("diverged_step")
    last_train = metrics[-1]["train_loss"] if metrics else None
    best_val = best["val_loss"] if best else None
    return {
        "cell": folder.name,
        "model": config["model"],
        "train": config["train"],
        "status": status,
        "diverged": diverged,
        "diverged_step": diverged_step,
        "trained": trained(status, best_val, last_train, float(unigram)),
        "best_val_loss": best_val,
        "best_step": best["step"] if best else None,
        "final_train_loss": last_train,
        "unigram_loss": float(unigram),
        "params": summary.get("params") if summary else None,
        "step_time_s": summary.get("step_time_s") if summary else None,
    }


def number(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"
