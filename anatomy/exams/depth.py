"""Pre-norm's exam: a stability map of deep models without warmup. `python -m anatomy exam depth`

Post-norm (the 2017 wiring) normalises after adding each block's output to the residual stream;
pre-norm (LLaMA's) normalises the block's input and leaves the stream alone. Xiong et al. 2020
("On Layer Normalization in the Transformer Architecture") found that post-norm needs a warmup
of the learning rate to train at all, while pre-norm tolerates larger learning rates without one.
The grid's break test (12 layers, post-norm, no warmup, lr 3e-4) may not break at this width: at
that one learning rate post-norm can train as well as pre-norm. So this exam maps where it breaks:

    12 layers (the llama preset), no warmup, post- against pre-norm,
    at lr 3e-4, 1e-3, 3e-3 and 1e-2; 300 steps, seed 42

Each cell trains in the precision it is given (`precision=bf16` among its settings; the grid's
map is fp32, as the grid is). Each cell of the map is an ordinary training run
(anatomy.training.trainer.train) in OUT/{norm_pos}_lr{lr},
e.g. results/exams/depth/post_lr0.001, with its metrics, checkpoints and the gradient norm of
every block (grad_norms.jsonl, anatomy/training/grad_norms.py), which shows how a cell goes wrong. The
finding is one number per wiring: the largest learning rate at which it still trains
(`largest_trained_lr`; the depth_stability view of anatomy/results/schema.sql computes the same).

A cell that is finished is skipped, a killed one resumes, so the exam can be run again at any
time; Snakemake runs it once per cell (one --norm-pos, one --lr), touching no other cell.
`anatomy collect` reads the cells with `read_cells` into the exam_depth table. Reading needs
no torch: only training does.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np

from anatomy.files.atomic import check_folder_target
from anatomy.errors import AnatomyError
from anatomy.files.run_folder import check_value, read_metrics, read_run_config, read_summary
from anatomy.data.tokenizer import load_tokenized

DEPTH_FOLDER = "depth"  # under results/exams/
DEFAULT_OUT = Path("results") / "exams" / DEPTH_FOLDER
NORM_POSITIONS = ("post", "pre")
DEFAULT_LRS = (3e-4, 1e-3, 3e-3, 1e-2)
DEFAULT_STEPS = 300
DEFAULT_SEED = 42
N_LAYER = 12
PRESET = "llama"
# A cell has learned when its losses are at least this far below the unigram loss (see `trained`).
LEARNED_MARGIN = 0.5
UNIGRAM_TAG = "unigram_loss"  # config.json tags: the corpus's unigram loss, stored with each cell

COLUMNS = [
    "cell",
    "norm_pos",
    "lr",
    "n_layer",
    "steps",
    "seed",
    "status",
    "diverged",
    "diverged_step",
    "trained",
    "best_val_loss",
    "best_step",
    "final_train_loss",
    "final_val_loss",
    "unigram_loss",
]


def cell_name(norm_pos: str, lr: float | str) -> str:
    """The folder of one cell: "post_lr0.001". The lr is spelled as Python spells the float
    (shortest text that reads back as the same number), so 1e-3, 0.001 and "1.0e-3" name one cell."""
    if norm_pos not in NORM_POSITIONS:
        raise AnatomyError(f"norm_pos {norm_pos!r} is not valid: expected one of {', '.join(NORM_POSITIONS)}")
    try:
        value = float(lr)
    except (TypeError, ValueError):
        raise AnatomyError(f"lr {lr!r} is not valid: expected a number") from None
    if not (math.isfinite(value) and value > 0):
        raise AnatomyError(f"lr {lr!r} is not valid: expected a positive number")
    return f"{norm_pos}_lr{value!r}"


def unigram_loss(train_ids: np.ndarray, val_ids: np.ndarray, vocab_size: int) -> float:
    """The validation loss of predicting every character by its frequency in the training split
    (add-one smoothed: a character the training split lacks would cost infinitely much). It is
    what a model that ignores the context can reach, so it is the line below which learning from
    the context begins."""
    counts = np.bincount(train_ids.astype(np.int64), minlength=vocab_size) + 1.0
    log_p = np.log(counts / counts.sum())
    return float(-log_p[val_ids.astype(np.int64)].mean())


def trained(status: str, best_val_loss: float | None, final_train_loss: float | None, unigram: float) -> bool:
    """Whether a cell trained. The one definition; every reader of the map uses it. A cell trained if

    - it finished without diverging (status "done": no NaN/inf loss; a cell still running has not), and
    - its best validation loss is at least LEARNED_MARGIN (0.5 nats) below the unigram loss: it
      learned from the context, not just the character frequencies. A deep model that fails
      without diverging sits near the unigram loss; 0.5 nats below it means predicting the next
      character e^0.5 = 1.6 times as well as by frequency alone, far outside seed noise, and
      sound runs at this size get there within 300 steps. And
    - its train loss at the last step is below the same line: it did not blow up after learning
      (a loss spike that stays finite). The train loss, not the validation loss: this small
      corpus is memorised within a few hundred steps, and a healthy run's validation loss then
      climbs back up without anything having broken.
    """
    line = unigram - LEARNED_MARGIN
    return (
        status == "done"
        and best_val_loss is not None
        and final_train_loss is not None
        and best_val_loss < line
        and final_train_loss < line
    )


# ---------------------------------------------------------------------------------------------
# Reading the map from the cell folders
# ---------------------------------------------------------------------------------------------


def _setting(section: dict, name: str, kind: type, path: Path) -> Any:
    value = section.get(name)
    check_value(value, kind, path, name)
    if value is None:
        raise AnatomyError(f"{path}: field '{name}' is missing; expected a {kind.__name__}")
    return value


def _best(metrics: list[dict]) -> tuple[float | None, int | None]:
    """(best val loss, its step) among the evaluations so far, for a cell still running."""
    evaluated = [row for row in metrics if row["val_loss"] is not None]
    if not evaluated:
        return None, None
    best = min(evaluated, key=lambda row: row["val_loss"])
    return best["val_loss"], best["step"]


def read_cell(folder: Path) -> dict[str, Any]:
    """One cell's exam_depth row, from its config.json, summary.json and metrics.jsonl. A cell
    without summary.json is still training (status "running"), with what it has so far."""
    config_path, summary_path = folder / "config.json", folder / "summary.json"
    config = read_run_config(config_path)
    model, train = config["model"], config["train"]
    norm_pos, lr = model.get("norm_pos"), _setting(train, "lr", float, config_path)
    if norm_pos not in NORM_POSITIONS:
        raise AnatomyError(
            f"{config_path}: field 'norm_pos' must be one of {', '.join(NORM_POSITIONS)}, got {norm_pos!r}"
        )
    tags = config.get("tags") or {}
    if not isinstance(tags, dict) or not isinstance(tags.get(UNIGRAM_TAG), (int, float)):
        raise AnatomyError(
            f"{config_path}: tags.{UNIGRAM_TAG} must be a number (the corpus's unigram loss); "
            f"train the cell with `anatomy exam depth`"
        )
    if folder.name != cell_name(norm_pos, lr):
        raise AnatomyError(
            f"{config_path}: a cell with norm_pos {norm_pos} and lr {lr!r} belongs in a folder "
            f"named {cell_name(norm_pos, lr)}, not {folder.name}"
        )

    summary = read_summary(summary_path) if summary_path.is_file() else None
    metrics = read_metrics(folder / "metrics.jsonl", folder.name, finished=summary is not None)
    if summary is not None and not metrics:
        raise AnatomyError(f"{folder / 'metrics.jsonl'}: missing or empty, but summary.json says the run finished")
    if summary is None:
        status, diverged, diverged_step = "running", False, None
        best_val_loss, best_step = _best(metrics)
    else:  # summaries of older versions may lack status: diverged says it then
        diverged = bool(summary.get("diverged", False))
        status = summary.get("status") or ("diverged" if diverged else "done")
        diverged_step = summary.get("diverged_step")
        best_val_loss, best_step = summary.get("best_val_loss"), summary.get("best_step")
    # the losses at the last step recorded: none for a diverged cell, whose last step was NaN
    last = metrics[-1] if metrics else {"train_loss": None, "val_loss": None}
    return {
        "cell": folder.name,
        "norm_pos": norm_pos,
        "lr": float(lr),
        "n_layer": _setting(model, "n_layer", int, config_path),
        "steps": _setting(train, "steps", int, config_path),
        "seed": _setting(train, "seed", int, config_path),
        "status": status,
        "diverged": diverged,
        "diverged_step": diverged_step,
        "trained": trained(status, best_val_loss, last["train_loss"], float(tags[UNIGRAM_TAG])),
        "best_val_loss": best_val_loss,
        "best_step": best_step,
        "final_train_loss": last["train_loss"],
        "final_val_loss": last["val_loss"],
        "unigram_loss": float(tags[UNIGRAM_TAG]),
    }


def read_cells(depth_root: Path) -> list[dict[str, Any]]:
    """The exam_depth rows of every cell under `depth_root`, by name; none if there is no such
    folder. A folder that holds nothing yet (a cell that is just starting) is not a cell yet."""
    depth_root = Path(depth_root)
    if not depth_root.is_dir():
        return []
    rows = []
    for folder in sorted(path for path in depth_root.iterdir() if path.is_dir()):
        if (folder / "config.json").is_file():
            rows.append(read_cell(folder))
        elif (folder / "summary.json").is_file() or (folder / "metrics.jsonl").is_file():
            raise AnatomyError(
                f"{folder / 'config.json'}: missing, so this cell's settings are unknown; "
                f"run the exam again (it is written back) or delete the folder"
            )
    return rows


def largest_trained_lr(cells: list[dict[str, Any]]) -> dict[str, float | None]:
    """Wiring -> the largest lr at which a cell of it trained (None: none did). As the SQL view
    depth_stability's max_trained_lr: the largest, whether or not a smaller lr failed."""
    largest: dict[str, float | None] = {}
    for cell in cells:
        current = largest.setdefault(cell["norm_pos"], None)
        if cell["trained"] and (current is None or cell["lr"] > current):
            largest[cell["norm_pos"]] = cell["lr"]
    return largest


def format_map(cells: list[dict[str, Any]]) -> str:
    """The map as a table, then the finding."""

    def number(value: float | None) -> str:
        return "-" if value is None else f"{value:.3f}"

    lines = [f"{'cell':<16} {'diverged at':>11} {'best val':>10} {'last loss':>10}  trained"]
    for cell in cells:
        diverged_at = str(cell["diverged_step"]) if cell["diverged"] else "-"
        trained_text = "yes" if cell["trained"] else ("running" if cell["status"] == "running" else "no")
        lines.append(
            f"{cell['cell']:<16} {diverged_at:>11} {number(cell['best_val_loss']):>10} "
            f"{number(cell['final_train_loss']):>10}  {trained_text}"
        )
    largest = largest_trained_lr(cells)
    finding = ", ".join(f"{norm_pos} {'none' if lr is None else repr(lr)}" for norm_pos, lr in sorted(largest.items()))
    lines.append(f"largest lr that still trains: {finding}")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# Training the cells
# ---------------------------------------------------------------------------------------------

# what defines a cell -> the option that sets it; a key=value override of these is set aside
EXAM_SETTINGS = {
    "n_layer": "--n-layer",
    "norm_pos": "--norm-pos",
    "lr": "--lr",
    "warmup_steps": "none: no warmup is what is tested",
}


def cell_settings(
    args: argparse.Namespace, norm_pos: str, lr: float, model_overrides: dict, train_overrides: dict
) -> tuple[dict, dict]:
    """(model, train) overrides of one cell: the key=value overrides on top of the exam's
    defaults (steps, seed), under what defines the cell (as the workflow's experiments keep
    their defining settings over the config-wide overrides: 12 layers stay 12, only narrower)."""
    model = {**model_overrides, "n_layer": args.n_layer, "norm_pos": norm_pos}
    train = {"steps": DEFAULT_STEPS, "seed": DEFAULT_SEED, **train_overrides, "lr": lr, "warmup_steps": 0}
    for name in ("steps", "seed"):
        if getattr(args, name) is not None:
            train[name] = getattr(args, name)
    if args.threads:
        train["threads"] = args.threads
    return model, train


def set_aside(args: argparse.Namespace, model_overrides: dict, train_overrides: dict) -> list[str]:
    """The key=value overrides the exam's own settings replace, each in words."""
    notes = [
        f"{name}={value} set aside: the exam sets it ({EXAM_SETTINGS[name]})"
        for name, value in {**model_overrides, **train_overrides}.items()
        if name in EXAM_SETTINGS
    ]
    notes += [
        f"{name}={train_overrides[name]} set aside: --{name} {getattr(args, name)} was given"
        for name in ("steps", "seed")
        if name in train_overrides and getattr(args, name) is not None
    ]
    return notes


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        default=str(DEFAULT_OUT),
        help=f"the map's folder, one subfolder per cell (default {DEFAULT_OUT.as_posix()})",
    )
    parser.add_argument(
        "--data", default="results/corpus", help="folder written by `anatomy tokenize` (default results/corpus)"
    )
    parser.add_argument(
        "--norm-pos",
        nargs="+",
        choices=NORM_POSITIONS,
        default=list(NORM_POSITIONS),
        help="the wirings to train (default: post pre)",
    )
    parser.add_argument(
        "--lr",
        nargs="+",
        type=positive_float,
        default=list(DEFAULT_LRS),
        help="the learning rates to train (default: 3e-4 1e-3 3e-3 1e-2)",
    )
    parser.add_argument("--steps", type=int, default=None, help=f"steps of every cell (default {DEFAULT_STEPS})")
    parser.add_argument("--seed", type=int, default=None, help=f"seed of every cell (default {DEFAULT_SEED})")
    parser.add_argument("--n-layer", type=int, default=N_LAYER, help=f"depth of every cell (default {N_LAYER})")
    parser.add_argument("--threads", type=int, default=0, help="torch threads of each training (default: torch's)")
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="ModelConfig/TrainConfig fields for every cell, e.g. d_model=32 train.device=cpu "
        "(put them before --norm-pos/--lr, whose lists would take them in)",
    )


def run(args: argparse.Namespace) -> int:
    from anatomy.training.trainer import split_overrides, train  # torch: reading the map (collect) needs none

    check_folder_target(args.out, "--out")
    model_overrides, train_overrides = split_overrides(args.overrides)
    for note in set_aside(args, model_overrides, train_overrides):
        print(f"note: {note}", flush=True)
    tokenizer, train_ids, val_ids = load_tokenized(args.data)
    tags = {"exam": "depth", UNIGRAM_TAG: round(unigram_loss(train_ids, val_ids, tokenizer.vocab_size), 6)}
    out = Path(args.out)
    # cell name -> (norm_pos, lr); 1e-3 and 0.001 are one cell
    cells_asked = {cell_name(norm_pos, lr): (norm_pos, lr) for norm_pos in args.norm_pos for lr in args.lr}
    for name, (norm_pos, lr) in cells_asked.items():
        model, train_settings = cell_settings(args, norm_pos, lr, model_overrides, train_overrides)
        train(args.data, out / name, PRESET, model, train_settings, {**tags, "cell": name})
    cells = [read_cell(out / name) for name in cells_asked]  # this call's cells only: others may be training
    print(format_map(cells))
    print(
        f"trained: finished without diverging, best val and last train loss below {LEARNED_MARGIN} nats "
        f"under the unigram loss ({tags[UNIGRAM_TAG]:.3f})"
    )
    return 0
