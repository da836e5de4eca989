"""Run folders written by hand in the run-folder contract of docs/ARCHITECTURE.md, for the states
real training rarely produces on demand (a diverged run, a run still training). Plain functions:
tests import them; the fixtures built on them live in conftest.py."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

from anatomy.config import PRESETS

# The five parts that make the 2017 model a mini-LLaMA, as model settings: the llama preset
LLAMA_PARTS = dict(PRESETS["llama"])


def write_run_folder(
    runs_root: Path,
    experiment: str,
    seed: int,
    *,
    group: str = "headline",
    preset: str | None = None,
    part: str | None = None,
    direction: str | None = None,
    baseline: str | None = None,
    steps: int = 100,
    eval_every: int = 10,
    floor: float = 2.0,
    turn_step: int = 50,
    status: str = "done",
    diverged_step: int | None = None,
    samples: bool = True,
    n_layer: int = 1,
    model: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
    train: dict[str, Any] | None = None,
) -> Path:
    """Write one run folder whose val curve falls to `floor` at `turn_step`, then rises.

    status "running" leaves out summary.json; "diverged" puts NaN/inf losses from
    `diverged_step` on and stops there, as a trainer that hits a non-finite loss does.
    `preset` defaults to the one the grid's experiment of that name is built on (vanilla for
    vanilla*, llama for the rest). `baseline` is written as a tag (`anatomy train --tag baseline=...`); without it, collect
    finds the baseline in its experiments file, or the run has none.
    """
    folder = runs_root / experiment / f"seed{seed}"
    folder.mkdir(parents=True)
    tags: dict[str, Any] = {"experiment": experiment, "group": group, "description": f"{experiment} (fixture)"}
    if part:
        tags["part"] = part
    if direction:
        tags["direction"] = direction
    if baseline:
        tags["baseline"] = baseline
    config = {
        "preset": preset or ("vanilla" if experiment.startswith("vanilla") else "llama"),
        # the parts of the 2017 model unless `model` swaps some (LLAMA_PARTS: the mini-LLaMA's)
        "model": {"d_model": 16, "n_layer": n_layer, **(model or {})},
        "train": {"seed": seed, "max_steps": steps, "batch_size": 2, **(train or {})},
        "tags": tags,
        "data": {"dir": "corpus", "vocab_size": 50, **(data or {})},
    }
    (folder / "config.json").write_text(json.dumps(config))

    rows = []
    seed_offset = (seed % 4) * 0.01  # seeds differ a little, as real seeds do (42 -> .02, 7 -> .03)
    last_step = diverged_step if status == "diverged" else steps
    for step in range(0, last_step + 1, eval_every):
        train = floor + 2.0 * math.exp(-step / 20) - 0.004 * step + seed_offset
        val = floor + seed_offset + 0.0004 * (step - turn_step) ** 2 / (1 + step / 100)
        if status == "diverged" and step >= diverged_step:
            train, val = float("nan"), float("inf")
        rows.append(
            {
                "step": step,
                "train_loss": train,
                "val_loss": val,
                "lr": 3e-4,
                "tokens_seen": step * 256,
                "elapsed_s": step * 0.05,
            }
        )
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))

    if status != "running":
        finite = [row for row in rows if math.isfinite(row["val_loss"])]
        # a run that diverged before its first finite evaluation has no best point
        best = min(finite, key=lambda row: row["val_loss"]) if finite else {"val_loss": None, "step": None}
        summary = {
            # grows with the model's size, as a real count does (the size study's axis)
            "params": 12_345 * config["model"]["n_layer"] * (config["model"]["d_model"] // 16) ** 2
            + (1_000 if experiment.startswith("vanilla") else 0),
            "best_val_loss": best["val_loss"],
            "best_step": best["step"],
            "final_train_loss": rows[-1]["train_loss"],
            "final_val_loss": rows[-1]["val_loss"],
            "step_time_s": 0.05,
            "tokens_per_s": 5120.0,
            "device": "cpu",
            "torch_version": "2.13.0",
            "diverged": status == "diverged",
            "diverged_step": diverged_step,
            "status": status,
            "steps_done": last_step,
        }
        if experiment == "llama":  # the others stand for summaries written before the compile option
            summary["compiled"] = True
        (folder / "summary.json").write_text(json.dumps(summary))  # NaN written as NaN, like json.dump
    if samples and status == "done":
        (folder / "samples.json").write_text(
            json.dumps(
                [
                    {
                        "checkpoint": "last",
                        "prefix": "## ",
                        "temperature": 0.8,
                        "seed": 0,
                        "chars": 40,
                        "text": f"## {experiment} seed {seed} says hello\nsecond line of text",
                        "note": None,
                    },
                ]
            )
        )
    elif samples and status == "diverged":  # as `anatomy generate` records a run with nothing to sample
        (folder / "samples.json").write_text(
            json.dumps(
                [
                    {
                        "checkpoint": None,
                        "prefix": "## ",
                        "temperature": 0.8,
                        "seed": 0,
                        "chars": 40,
                        "text": None,
                        "note": f"run diverged at step {diverged_step}; no checkpoint to sample from",
                    },
                ]
            )
        )
    return folder


# Each experiment of workflow/experiments.yaml -> the baseline it declares (None: none), as the
# workflow writes them into results/experiments.json for collect
WORKFLOW_EXPERIMENTS = Path(__file__).resolve().parent.parent / "workflow" / "experiments.yaml"
GRID_BASELINES = {
    name: entry.get("baseline")
    for name, entry in yaml.safe_load(WORKFLOW_EXPERIMENTS.read_text(encoding="utf-8"))["experiments"].items()
}


def declare_grid_baselines(runs_root: Path) -> Path:
    """The workflow's experiments.json beside `runs_root` (where it writes results/experiments.json
    beside results/runs, and where collect finds it): run folders named as the grid's experiments
    are compared with what workflow/experiments.yaml declares."""
    runs_root.parent.mkdir(parents=True, exist_ok=True)
    path = runs_root.parent / "experiments.json"
    experiments = {name: {"baseline": baseline} for name, baseline in sorted(GRID_BASELINES.items())}
    path.write_text(json.dumps({"experiments": experiments}, indent=2), encoding="utf-8")
    return path


def write_fixture_grid(runs_root: Path, benchmarks_root: Path | None = None) -> None:
    """A small grid in every state: headline pair, ablations both ways, breaks, one running run;
    beside it, the experiments.json that declares their baselines (`declare_grid_baselines`)."""
    declare_grid_baselines(runs_root)
    for seed in (42, 7):
        write_run_folder(runs_root, "vanilla", seed, floor=2.3, turn_step=70)
        write_run_folder(runs_root, "llama", seed, floor=2.1, turn_step=40, model=LLAMA_PARTS)
        write_run_folder(
            runs_root,
            "vanilla_plus_swiglu",
            seed,
            group="ablation",
            part="swiglu",
            direction="add",
            floor=2.2,
            turn_step=60,
            model={"ffn_type": "swiglu"},
        )
        write_run_folder(
            runs_root,
            "llama_minus_swiglu",
            seed,
            group="ablation",
            part="swiglu",
            direction="remove",
            floor=2.25,
            turn_step=50,
            model={**LLAMA_PARTS, "ffn_type": "gelu"},
        )
        write_run_folder(
            runs_root,
            "deep_pre_nowarmup",
            seed,
            group="break",
            part="norm_pos",
            n_layer=12,
            floor=2.05,
            model=LLAMA_PARTS,
        )
        write_run_folder(
            runs_root,
            "deep_post_nowarmup",
            seed,
            group="break",
            part="norm_pos",
            n_layer=12,
            status="diverged",
            diverged_step=30,
            model={**LLAMA_PARTS, "norm_pos": "post"},
        )
        write_run_folder(
            runs_root, "mqa", seed, group="break", part="gqa", floor=2.15, model={**LLAMA_PARTS, "n_kv_head": 1}
        )
    write_run_folder(
        runs_root,
        "llama_minus_rope",
        42,
        group="ablation",
        part="rope",
        direction="remove",
        status="running",
        steps=100,
        model={**LLAMA_PARTS, "pos_type": "learned"},
    )
    if benchmarks_root is not None:
        folder = benchmarks_root / "train_model" / "vanilla"
        folder.mkdir(parents=True)
        (folder / "seed42.tsv").write_text(
            "s\th:m:s\tmax_rss\tmax_vms\tmax_uss\tmax_pss\tio_in\tio_out\tmean_load\tcpu_time\n"
            "12.5\t0:00:12\t310.2\t900.1\t300.0\t305.5\t0.01\t1.2\t95.0\t11.9\n"
        )


# The scale study's training-set sizes for fixture runs: 100 steps x 256 tokens read them 64 times,
# 8 times and once
SCALE_SIZES = {"s": 400, "m": 3_200, "l": 25_600}


def write_scale_runs(runs_root: Path, floors: dict[str, tuple[float, float]], seeds=(42, 7), turn_step: int = 50):
    """The scale study's stage 1 as run folders: vanilla and llama at each size (a SCALE_SIZES key),
    in bf16, with (vanilla, llama) best-val floors."""
    for size, (vanilla_floor, llama_floor) in floors.items():
        data = {"vocab_size": 50, "train_tokens": SCALE_SIZES[size], "val_tokens": 500, "corpus": f"poems_{size}"}
        for seed in seeds:
            common = dict(group="scale", data=data, train={"precision": "bf16"}, turn_step=turn_step)
            write_run_folder(runs_root, f"scale_vanilla_{size}", seed, preset="vanilla", floor=vanilla_floor, **common)
            write_run_folder(
                runs_root,
                f"scale_llama_{size}",
                seed,
                preset="llama",
                model=LLAMA_PARTS,
                floor=llama_floor,
                baseline=f"scale_vanilla_{size}",
                **common,
            )


def write_scale_at_lr(
    runs_root: Path, model: str, seed: int, floor: float = 2.0, lr: float = 1.0e-3, size: str = "l"
) -> None:
    """Stage 3 as a run folder: `model` (vanilla or llama) at another lr on one size, in bf16."""
    data = {"vocab_size": 50, "train_tokens": SCALE_SIZES[size], "val_tokens": 500, "corpus": f"poems_{size}"}
    write_run_folder(
        runs_root,
        f"scale_{size}_{model}_lr{lr:.0e}".replace("-0", "-").replace("e-", "e"),
        seed,
        group="scale",
        preset=model,
        model=LLAMA_PARTS if model == "llama" else None,
        floor=floor,
        data=data,
        train={"precision": "bf16", "lr": lr},
    )


def write_scale_ablation(
    runs_root: Path, part: str, direction: str, model: dict[str, Any], floor: float, seeds=(42, 7)
) -> None:
    """Stage 2 at the largest size as run folders: `part` added to vanilla ("add", `model` its
    settings) or removed from llama ("remove", `model` llama's settings without it), in bf16."""
    data = {"vocab_size": 50, "train_tokens": SCALE_SIZES["l"], "val_tokens": 500, "corpus": "poems_l"}
    preset, name = ("vanilla", f"vanilla_plus_{part}") if direction == "add" else ("llama", f"llama_minus_{part}")
    for seed in seeds:
        write_run_folder(
            runs_root,
            f"scale_l_{name}",
            seed,
            group="scale",
            preset=preset,
            model=model,
            part=part,
            direction=direction,
            baseline=f"scale_{preset}_l",
            floor=floor,
            data=data,
            train={"precision": "bf16"},
        )


# the parts study at one point: QK-norm is level with the plain model, the experts lower the loss
PART_FLOORS = {
    None: {5e-4: 2.40, 1e-3: 2.30, 2e-3: 2.35},
    "qk_norm": {5e-4: 2.41, 1e-3: 2.36, 2e-3: 2.30, 4e-3: 2.33},
    "moe": {5e-4: 2.30, 1e-3: 2.20, 2e-3: 2.26},
}


# two layers of 4 experts: uneven early, 16%-34% at the last logged step
EXPERT_SHARES = {10: [[0.05, 0.6, 0.2, 0.15], [0.25] * 4], 90: [[0.16, 0.34, 0.25, 0.25], [0.2, 0.3, 0.25, 0.25]]}
PART_MODELS = {None: {}, "qk_norm": {"qk_norm": True}, "moe": {"ffn_type": "moe", "n_experts": 4, "top_k": 2}}


def experiment_name(part: str | None, lr: float) -> str:
    return f"parts_{part or 'llama'}_{lr:g}".replace(".", "_").replace("-", "m")


def write_parts_runs(runs_root: Path) -> None:
    """One training, one run: the plain model at 5e-4 and 1e-3 is another study's (named as the
    part runs' baseline), at 2e-3 the study's own; QK-norm at 4e-3 is a break test's, named by no
    one, found by its settings. Beside them, runs no curve may take: a model of other settings
    with no part tag, and the plain model with another warmup and in another precision. The
    experts' runs log their shares (EXPERT_SHARES), but for seed 7 at their best lr."""
    data = {"vocab_size": 50, "train_tokens": 64_000, "val_tokens": 500, "corpus": "mine"}
    for part, by_lr in PART_FLOORS.items():
        for lr, floor in by_lr.items():
            for seed in (42, 7):
                elsewhere = part is None and lr < 2e-3
                group = "lr" if elsewhere else "break" if (part, lr) == ("qk_norm", 4e-3) else "parts"
                folder = write_run_folder(
                    runs_root,
                    ("lr_llama_" + experiment_name(None, lr)) if elsewhere else experiment_name(part, lr),
                    seed,
                    group=group,
                    preset="llama",
                    part=part,
                    direction=None if part is None else "add",
                    baseline=None
                    if part is None or lr not in PART_FLOORS[None]
                    else ("lr_llama_" if lr < 2e-3 else "") + experiment_name(None, lr),
                    model=dict(LLAMA_PARTS, **PART_MODELS[part]),
                    data=data,
                    train={"precision": "fp32", "lr": lr},
                    floor=floor,
                )
                if part == "moe" and (lr, seed) != (1e-3, 7):
                    lines = [json.dumps({"step": step, "shares": shares}) for step, shares in EXPERT_SHARES.items()]
                    (folder / "expert_shares.jsonl").write_text("\n".join(lines) + "\n")
    for seed in (42, 7):  # multi-query attention, tagged as nothing: not the plain mini-LLaMA
        write_run_folder(
            runs_root,
            "mqa_1e_3",
            seed,
            group="extra",
            preset="llama",
            model=dict(LLAMA_PARTS, n_kv_head=1),
            data=data,
            train={"precision": "fp32", "lr": 1e-3},
            floor=1.5,
        )
        for name, group, train in (
            ("no_warmup_5e_4", "extra", {"precision": "fp32", "lr": 5e-4, "warmup_steps": 0}),
            ("llama_bf16_5e_4", "precision", {"precision": "bf16", "lr": 5e-4}),
        ):
            write_run_folder(
                runs_root,
                name,
                seed,
                group=group,
                preset="llama",
                model=LLAMA_PARTS,
                data=data,
                train=train,
                floor=1.0,
            )
