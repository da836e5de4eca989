"""`python -m anatomy train`: train one model into a run folder, from the command line.

`python -m anatomy train --data results/corpus --out results/runs/llama/seed42 --preset llama n_layer=6`

This module is the command only: its arguments, and one line of result. The training itself
(settings, the loop, resuming) is anatomy/training/trainer.py; what the run folder holds and when a run
resumes is anatomy/files/run_folder.py.
"""

from __future__ import annotations

import argparse

from anatomy.errors import AnatomyError
from anatomy.training.trainer import split_overrides, train


def parse_tags(pairs: list[str]) -> dict[str, str]:
    tags = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise AnatomyError(f"--tag {pair!r} is not of the form key=value")
        tags[key] = value
    return tags


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", required=True, help="folder written by `anatomy tokenize`")
    parser.add_argument("--out", required=True, help="the run folder (created; resumed if it holds a run)")
    parser.add_argument("--preset", default="vanilla", help="vanilla, llama or debug (default vanilla)")
    parser.add_argument(
        "--tag",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="metadata stored with the run (experiment, group, part, direction, ...)",
    )
    parser.add_argument(
        "--restart-on-change",
        action="store_true",
        help="if --out holds a run with other settings, discard it and start over "
        "(default: refuse); a run with the same settings is always resumed",
    )
    parser.add_argument(
        "overrides",
        nargs="*",
        metavar="key=value",
        help="any ModelConfig or TrainConfig field, e.g. n_layer=12 warmup_steps=0 seed=7",
    )


def run(args: argparse.Namespace) -> int:
    model_overrides, train_overrides = split_overrides(args.overrides)
    summary = train(
        args.data,
        args.out,
        args.preset,
        model_overrides,
        train_overrides,
        parse_tags(args.tag),
        restart_on_change=args.restart_on_change,
    )
    print(result_line(args.out, summary))
    return 0


def number_text(value: float | None, fmt: str) -> str:
    return "-" if value is None else format(value, fmt)


def result_line(out: str, summary: dict) -> str:
    """The run's result in one line. A value the summary lacks (no finite val loss was ever
    evaluated; no step timed) is a dash, not a crash."""
    if summary.get("diverged"):
        return f"{out}: diverged at step {summary.get('diverged_step')} (recorded; not an error)"
    step_time = summary.get("step_time_s")
    return (
        f"{out}: best val {number_text(summary.get('best_val_loss'), '.4f')} at step {summary.get('best_step')}, "
        f"final val {number_text(summary.get('final_val_loss'), '.4f')}, "
        f"{number_text(None if step_time is None else step_time * 1000, '.1f')} ms/step"
    )
