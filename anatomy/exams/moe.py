"""The experts' exam: what a mixture of experts buys at equal work and at equal size.
`python -m anatomy exam moe`

A mixture of n_experts SwiGLUs, top_k per token, has n_experts times the feed-forward
parameters and top_k times its work. Whether that pays depends on what it is set against:

    dense      the mini-LLaMA (one SwiGLU)
    moe_top1   4 experts, top-1: the dense model's active parameters (plus a router of
               n_layer x d_model x n_experts weights); equal work per token, 4x the FFN parameters
    moe_top2   4 experts, top-2, the declared full-size runs' choice (workflow/experiments.yaml)
    moe_all    4 experts, every one on every token (top_k = n_experts): exactly moe_top1's total
               parameters, all of them active; the dense model at equal total parameters

All at equal steps (1000, seed 42; each cell an ordinary run folder, OUT/CELL, with the experts'
shares of the tokens in expert_shares.jsonl). Beside each best validation loss: the parameters,
total and active, the load (the smallest and largest share any expert took at the last logged
step; an even load is 1 / n_experts), and the wall clock of a training step.

On a CPU the experts run one after another in a Python loop (anatomy/model.py, MixtureOfExperts),
so a top-1 MoE is slower than the dense model of the same active parameters, not as fast. The
training runs' own step times come from different moments of a busy machine; so the exam also
times one training step of each cell's model in this one process, interleaved round by round
(anatomy/exams/wall_clock.py's timing), and gives the medians and each one's ratio to dense.
OUT/moe.json holds it all; `anatomy collect` reads it with `read_result` into exam_moe.
"""

from __future__ import annotations

import argparse
import os
import statistics
from pathlib import Path
from typing import Any

from anatomy.config import ModelConfig
from anatomy.errors import AnatomyError
from anatomy.exams.cells import add_cell_arguments, at_least_one, number, read_cell, train_cells
from anatomy.files.atomic import write_json
from anatomy.files.run_folder import read_json_object
from anatomy.machine import cpu_description
from anatomy.training.layer_logs import expert_load, read_expert_shares

FOLDER = "moe"  # under results/exams/
DEFAULT_OUT = Path("results") / "exams" / FOLDER
RESULT_FILE = "moe.json"  # in OUT, beside the cells
DEFAULT_EXPERTS = 4
DEFAULT_STEPS = 1000
DEFAULT_SEED = 42
DEFAULT_ROUNDS = 5
DEFAULT_BATCH = 32
CELLS = ("dense", "moe_top1", "moe_top2", "moe_all")
OWN_SETTINGS = {"ffn_type", "n_experts", "top_k"}

COLUMNS = [
    "cell",
    "n_experts",
    "top_k",
    "params",
    "active_params",
    "best_val_loss",
    "min_share",
    "max_share",
    "run_step_s",
    "step_ms",
    "step_ratio",
]


def cell_settings(cell: str, n_experts: int) -> dict[str, Any]:
    """The model settings of each cell (see the module's docstring)."""
    top_k = {"moe_top1": 1, "moe_top2": min(2, n_experts), "moe_all": n_experts}
    if cell == "dense":
        return {"ffn_type": "swiglu"}
    return {"ffn_type": "moe", "n_experts": n_experts, "top_k": top_k[cell]}


def parameter_counts(model_cfg: dict[str, Any]) -> tuple[int, int]:
    """(total, active) parameters of a model config, counted from the model itself."""
    from anatomy.model import MiniLM

    model = MiniLM(ModelConfig.from_dict(model_cfg))
    return model.num_params(), model.active_params()


def step_timings(model_cfgs: dict[str, dict], batch_size: int, rounds: int) -> dict[str, dict[str, float]]:
    """Cell -> {step_ms: median ms of a training step, step_ratio: the median per-round ratio to
    dense}, all cells timed in this process, interleaved (wall_clock.interleaved_ms)."""
    import torch

    from anatomy.exams.wall_clock import interleaved_ms, paired_ratio, step_workload

    device = torch.device("cpu")
    generator = torch.Generator().manual_seed(0)
    calls = {
        name: step_workload(ModelConfig.from_dict(cfg), batch_size, device, generator).run
        for name, cfg in model_cfgs.items()
    }
    samples = interleaved_ms(calls, rounds, device, repeats=1)
    base = samples.get("dense")
    return {
        name: {
            "step_ms": statistics.median(times),
            "step_ratio": paired_ratio(times, base) if base is not None else None,
        }
        for name, times in samples.items()
    }


def rows_of(out: Path, names: list[str], timings: dict[str, dict[str, float]]) -> list[dict[str, Any]]:
    rows = []
    for name in names:
        cell = read_cell(out / name)
        total, active = parameter_counts(cell["model"])
        load = expert_load(read_expert_shares(out / name / "expert_shares.jsonl", name))
        moe = cell["model"].get("ffn_type") == "moe"
        rows.append(
            {
                "cell": name,
                "n_experts": cell["model"]["n_experts"] if moe else None,
                "top_k": cell["model"]["top_k"] if moe else None,
                "params": total,
                "active_params": active,
                "best_val_loss": cell["best_val_loss"],
                **(load or {"min_share": None, "max_share": None}),  # dense has no experts
                "run_step_s": cell["step_time_s"],
                **timings.get(name, {"step_ms": None, "step_ratio": None}),
            }
        )
    return rows


def read_result(path: Path) -> list[dict[str, Any]]:
    """The exam_moe rows of OUT/moe.json (none if there is no such file)."""
    path = Path(path)
    if not path.is_file():
        return []
    rows = read_json_object(path, "the MoE exam's results, written by `anatomy exam moe`").get("cells")
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise AnatomyError(f"{path}: field 'cells' must be a list of rows")
    return [{name: row.get(name) for name in COLUMNS} for row in rows]


def format_table(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'cell':<10} {'params':>10} {'active':>10} {'best val':>9} {'load min-max':>13} {'step ms':>9} {'x dense':>8}"
    ]
    for row in rows:
        load_text = "-" if row["min_share"] is None else f"{row['min_share']:.2f}-{row['max_share']:.2f}"
        ratio = "-" if row["step_ratio"] is None else f"{row['step_ratio']:.2f}"
        lines.append(
            f"{row['cell']:<10} {row['params']:>10,} {row['active_params']:>10,} {number(row['best_val_loss']):>9} "
            f"{load_text:>13} {number(row['step_ms'], 1):>9} {ratio:>8}"
        )
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_cell_arguments(parser, DEFAULT_OUT, DEFAULT_STEPS, DEFAULT_SEED)
    parser.add_argument("--cells", nargs="+", choices=CELLS, default=list(CELLS), help="default: all four")
    parser.add_argument("--experts", type=int, default=DEFAULT_EXPERTS, help="experts of the MoE cells (default 4)")
    parser.add_argument(
        "--rounds", type=int, default=DEFAULT_ROUNDS, help="interleaved step timings, median kept (0: none)"
    )
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH, help="batch of the timed steps (default 32)")
    parser.add_argument(
        "--train-only",
        action="store_true",
        help="train the named cells and write nothing else (the workflow trains each cell as a job "
        "of its own, then a last job times them all side by side and writes moe.json)",
    )


def run(args: argparse.Namespace) -> int:
    at_least_one("--experts", [args.experts])
    at_least_one("--batch-size", [args.batch_size])
    if args.rounds < 0:
        raise AnatomyError(f"--rounds {args.rounds} is not valid: expected 0 or more")
    names = list(dict.fromkeys(args.cells))
    cells = {name: (cell_settings(name, args.experts), {}) for name in names}
    train_cells(args, "moe", cells, OWN_SETTINGS)  # a finished cell is read, not trained again
    if args.train_only:
        return 0
    out = Path(args.out)
    model_cfgs = {name: read_cell(out / name)["model"] for name in names}
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    timings = step_timings(model_cfgs, args.batch_size, args.rounds) if args.rounds else {}
    rows = rows_of(out, names, timings)
    result = {
        "machine": cpu_description(),
        "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,  # what ran beside
        "threads": torch.get_num_threads(),
        "batch_size": args.batch_size,
        "rounds": args.rounds,
        "cells": rows,
    }
    write_json(out / RESULT_FILE, result)
    print(format_table(rows))
    if timings:
        print(
            f"step: one training step in this process, median of {args.rounds} interleaved rounds, {result['threads']} thread(s)"
        )
    return 0
