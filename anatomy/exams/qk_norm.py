"""QK-norm's exam: an lr stability map with and without it. `python -m anatomy exam qk_norm`

Without a norm on q and k, nothing bounds q.k: at a high learning rate the attention logits grow
until the softmax saturates and training breaks (Dehghani et al. 2023; Wortsman et al. 2023,
"Small-scale proxies for large-scale Transformer training instabilities", who find QK-norm
lets a model train at learning rates ten times higher). So, as the depth map does for pre-norm:

    the mini-LLaMA without warmup, plain against qk_norm, at lr 1e-3, 3e-3, 1e-2 and 3e-2;
    300 steps, seed 42, the largest attention logit of every layer logged (max_logits.jsonl)

Each cell is an ordinary run folder, OUT/{variant}_lr{lr}, e.g. results/exams/qk_norm/plain_lr0.01
(anatomy/exams/cells.py). The finding is one number per variant: the largest learning rate at
which it still trains (`trained` as the depth map defines it), and beside it the largest logit
each cell reached. `anatomy collect` reads the cells with `read_cells` into exam_qk_norm.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from anatomy.errors import AnatomyError
from anatomy.exams.cells import add_cell_arguments, number, positive_float, read_cell, train_cells
from anatomy.training.layer_logs import read_max_logits

FOLDER = "qk_norm"  # under results/exams/
DEFAULT_OUT = Path("results") / "exams" / FOLDER
VARIANTS = {"plain": False, "qk_norm": True}  # variant -> ModelConfig.qk_norm
DEFAULT_LRS = (1e-3, 3e-3, 1e-2, 3e-2)
DEFAULT_STEPS = 300
DEFAULT_SEED = 42
OWN_SETTINGS = {"qk_norm", "lr", "warmup_steps", "log_max_logits"}  # what defines a cell

COLUMNS = [
    "cell",
    "variant",
    "lr",
    "steps",
    "status",
    "diverged_step",
    "trained",
    "best_val_loss",
    "final_train_loss",
    "peak_max_logit",
    "last_max_logit",
]


def cell_name(variant: str, lr: float | str) -> str:
    """ "qk_norm_lr0.01": the lr as Python spells the float, so 1e-2 and 0.01 name one cell."""
    if variant not in VARIANTS:
        raise AnatomyError(f"variant {variant!r} is not valid: expected one of {', '.join(VARIANTS)}")
    try:
        value = float(lr)
    except (TypeError, ValueError):
        raise AnatomyError(f"lr {lr!r} is not valid: expected a number") from None
    if not (math.isfinite(value) and value > 0):
        raise AnatomyError(f"lr {lr!r} is not valid: expected a positive number")
    return f"{variant}_lr{value!r}"


def logit_summary(folder: Path) -> tuple[float | None, float | None]:
    """(the largest logit of any layer at any logged step, the largest at the last logged step);
    a diverged step's NaN is left out of both."""
    rows = [row for row in read_max_logits(folder / "max_logits.jsonl", folder.name) if math.isfinite(row["max_logit"])]
    if not rows:
        return None, None
    last = max(row["step"] for row in rows)
    return max(row["max_logit"] for row in rows), max(row["max_logit"] for row in rows if row["step"] == last)


def read_qk_cell(folder: Path) -> dict[str, Any]:
    """One exam_qk_norm row."""
    cell = read_cell(folder)
    variant = "qk_norm" if cell["model"].get("qk_norm") else "plain"
    lr = float(cell["train"]["lr"])
    if folder.name != cell_name(variant, lr):
        raise AnatomyError(
            f"{folder / 'config.json'}: a {variant} cell at lr {lr!r} belongs in a folder named "
            f"{cell_name(variant, lr)}, not {folder.name}"
        )
    peak, last = logit_summary(folder)
    return {
        "cell": folder.name,
        "variant": variant,
        "lr": lr,
        "steps": cell["train"]["steps"],
        "status": cell["status"],
        "diverged_step": cell["diverged_step"],
        "trained": cell["trained"],
        "best_val_loss": cell["best_val_loss"],
        "final_train_loss": cell["final_train_loss"],
        "peak_max_logit": peak,
        "last_max_logit": last,
    }


def read_cells(root: Path) -> list[dict[str, Any]]:
    """The rows of every cell under `root` (none if there is no such folder)."""
    root = Path(root)
    if not root.is_dir():
        return []
    return [read_qk_cell(path) for path in sorted(root.iterdir()) if (path / "config.json").is_file()]


def largest_trained_lr(cells: list[dict[str, Any]]) -> dict[str, float | None]:
    """Variant -> the largest lr at which a cell of it trained (None: none did)."""
    largest: dict[str, float | None] = {}
    for cell in cells:
        current = largest.setdefault(cell["variant"], None)
        if cell["trained"] and (current is None or cell["lr"] > current):
            largest[cell["variant"]] = cell["lr"]
    return largest


def format_map(cells: list[dict[str, Any]]) -> str:
    lines = [f"{'cell':<20} {'diverged at':>11} {'best val':>9} {'last loss':>9} {'peak logit':>10}  trained"]
    for cell in cells:
        diverged_at = "-" if cell["diverged_step"] is None else str(cell["diverged_step"])
        lines.append(
            f"{cell['cell']:<20} {diverged_at:>11} {number(cell['best_val_loss']):>9} "
            f"{number(cell['final_train_loss']):>9} {number(cell['peak_max_logit'], 1):>10}  "
            f"{'yes' if cell['trained'] else 'no'}"
        )
    finding = ", ".join(f"{v} {'none' if lr is None else repr(lr)}" for v, lr in largest_trained_lr(cells).items())
    lines.append(f"largest lr that still trains: {finding}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_cell_arguments(parser, DEFAULT_OUT, DEFAULT_STEPS, DEFAULT_SEED)
    parser.add_argument(
        "--variant", nargs="+", choices=list(VARIANTS), default=list(VARIANTS), help="default: plain qk_norm"
    )
    parser.add_argument(
        "--lr", nargs="+", type=positive_float, default=list(DEFAULT_LRS), help="default: 1e-3 3e-3 1e-2 3e-2"
    )


def run(args: argparse.Namespace) -> int:
    cells = {
        cell_name(variant, lr): (
            {"qk_norm": VARIANTS[variant]},
            {"lr": lr, "warmup_steps": 0, "log_max_logits": True},  # no warmup: the test is the lr itself
        )
        for variant in args.variant
        for lr in args.lr
    }
    train_cells(args, "qk_norm", cells, OWN_SETTINGS)
    rows = [read_qk_cell(Path(args.out) / name) for name in cells]  # this call's cells only
    print(format_map(rows))
    return 0
