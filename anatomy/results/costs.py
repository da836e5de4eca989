"""What each run, and the whole grid, costs on this machine: `python -m anatomy costs`.

The report's costs table says what the shipped runs took where they were trained (grid.json); a
user planning a night needs what they take on their own machine. This command reads every run's
config.json under --runs and keeps what sets a run's cost. Its shape: the model, the batch, the
precision, compile (runs that share one are timed once). Its counts: steps, evaluations, and
the windows each evaluation reads. It times each shape for a few steps on lanes side by side, as
the workflow trains (anatomy/training/step_timing.py), and estimates each run:

    steps x the median step  +  evaluations x windows x one window's time  +  the first steps' extra

(the extra: torch.compile's, where the step is compiled; a real run pays it once). It prints a
table per group: the grid as its runs are set, each study, and the grid again in bf16. Where
grid.json lies beside the runs, each group's estimate is set against the measured jobs, so the
user sees how far to trust it. Then what a night buys. All of it goes to costs.json, with the
machine, the date and the load average before and after the timing: a measurement taken under
load is told from a quiet one. The report reads the shipped one (results/reference/costs.json,
anatomy/report/costs_section.py) and says what a night buys from it.

No torch at import: the report reads costs.json through here. The timing loads it when it runs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from anatomy.config import ModelConfig, TrainConfig
from anatomy.errors import AnatomyError
from anatomy.files.atomic import check_file_target, write_json
from anatomy.files.run_folder import CONFIG_FILE, find_run_folders, read_json_object, read_run_config
from anatomy.language import N_, _, ngettext
from anatomy.results.groups import STUDY_GROUPS, is_study
from anatomy.machine import cpu_description
from anatomy.results.reference import PROVENANCE_FILE, read_provenance

COSTS_FILE = "costs.json"  # beside grid.json when shipped (results/reference/costs.json)
NIGHT_HOURS = 8  # the goal: the whole grid in one night
GRID = "grid"  # --group's name for every group that is not a study
# What a run's step and evaluation cost depends on, besides the model: the timed shape's settings
TIMED_TRAIN = ("batch_size", "precision", "compile", "eval_batch_size", "device")
# What times the shapes: (shapes, timed steps, lanes) -> each shape's pooled timing (`lanes_timer`;
# a test gives one of its own, so that nothing passes or fails on a clock)
Timer = Callable[[list[dict[str, Any]], int, int], list[dict[str, Any]]]


# ---------------------------------------------------------------------------------------------
# The runs: each one's shape and counts, from its config.json
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Run:
    run_id: str  # its folder under --runs, as grid.json names it
    group: str | None  # its experiment's group (tags.group), None where it has none
    experiment: str
    shape: str  # the timed shape as JSON text: runs that cost alike have the same
    steps: int
    evaluations: int
    windows: int  # windows one evaluation reads


def shape_text(model: dict[str, Any], train: dict[str, Any]) -> str:
    return json.dumps({"model": model, "train": train}, sort_keys=True)


def in_precision(shape: str, precision: str) -> str:
    """The same shape, trained in another precision."""
    settings = json.loads(shape)
    return shape_text(settings["model"], {**settings["train"], "precision": precision})


def evaluations(steps: int, eval_every: int) -> int:
    """How many evaluations a run makes: every eval_every steps, and at its last step."""
    return -(-steps // eval_every)


def whole_number(config: dict[str, Any], section: str, name: str, path: Path) -> int:
    value = config[section].get(name)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise AnatomyError(f"{path}: field '{section}.{name}' must be a whole number, got {value!r}")
    return value


def read_run(folder: Path, runs_root: Path) -> Run:
    """One run's shape and counts, its settings checked as `anatomy train` checks them."""
    from anatomy.training.step_timing import evaluation_windows  # torch: counts with the trainer's own rule

    path = folder / CONFIG_FILE
    config = read_run_config(path)
    model = {**config["model"]}
    model["vocab_size"] = model.get("vocab_size") or config["data"].get("vocab_size")
    try:
        model_cfg = ModelConfig.from_dict(model, source="model")
        train_cfg = TrainConfig.from_dict(config["train"], source="train")
    except AnatomyError as err:
        raise AnatomyError(f"{path}: {err}") from None
    if model_cfg.vocab_size is None:
        raise AnatomyError(f"{path}: no vocab_size in 'model' or 'data': the random tokens need the vocabulary's size")
    tags = config.get("tags") if isinstance(config.get("tags"), dict) else {}
    windows = evaluation_windows(
        model_cfg,
        train_cfg,
        whole_number(config, "data", "train_tokens", path),
        whole_number(config, "data", "val_tokens", path),
    )
    return Run(
        run_id=folder.relative_to(runs_root).as_posix(),
        group=tags.get("group"),
        experiment=str(tags.get("experiment") or folder.relative_to(runs_root).as_posix()),
        shape=shape_text(model_cfg.to_dict(), {name: getattr(train_cfg, name) for name in TIMED_TRAIN}),
        steps=train_cfg.steps,
        evaluations=evaluations(train_cfg.steps, train_cfg.eval_every),
        windows=windows,
    )


def read_runs(runs_root: Path) -> list[Run]:
    if not runs_root.is_dir():
        raise AnatomyError(
            f"--runs {runs_root}: no such folder; expected a folder of run folders (results/reference/runs)"
        )
    folders = [folder for folder in find_run_folders(runs_root) if (folder / CONFIG_FILE).is_file()]
    if not folders:
        raise AnatomyError(f"--runs {runs_root}: no {CONFIG_FILE} in any folder under it; expected run folders")
    return [read_run(folder, runs_root) for folder in folders]


def chosen(runs: list[Run], groups: list[str] | None, runs_root: Path) -> list[Run]:
    """The runs of the groups asked for (`grid`: every group that is not a study); all without --group."""
    if not groups:
        return runs
    known = {run.group for run in runs}
    for name in groups:
        if name != GRID and name not in known:
            there = ", ".join([GRID, *sorted(group for group in known if group)])
            raise AnatomyError(f"--group {name}: no run under {runs_root} is of that group; the groups there: {there}")
    return [run for run in runs if run.group in groups or (GRID in groups and not is_study(run.group))]


def grid_runs(runs: list[Run]) -> list[Run]:
    return [run for run in runs if not is_study(run.group)]


def shapes_to_time(runs: list[Run]) -> list[str]:
    """Each distinct shape once, in the order the runs name them, then the grid's shapes in bf16."""
    shapes = [run.shape for run in runs] + [in_precision(run.shape, "bf16") for run in grid_runs(runs)]
    return list(dict.fromkeys(shapes))


# ---------------------------------------------------------------------------------------------
# Timing: each shape's lanes pooled; each run's estimate
# ---------------------------------------------------------------------------------------------


def pooled(lanes: list[dict[str, Any]]) -> dict[str, Any]:
    """One shape's timing from its lanes' (anatomy/training/step_timing.py): the median step over
    every lane's timed steps, and medians over the lanes of the untimed steps' extra time and of
    an evaluation window's time. Medians: a pause of the machine moves one step, not the answer."""
    step_s = statistics.median(s for lane in lanes for s in lane["step_s"])
    extra = statistics.median(sum(lane["untimed_s"]) - len(lane["untimed_s"]) * step_s for lane in lanes)
    return {
        "step_s": step_s,
        "eval_window_s": statistics.median(lane["eval_window_s"] for lane in lanes),
        "compile_s": max(0.0, extra),
        "compiled": any(lane["compiled"] for lane in lanes),
        "device": lanes[0]["device"],
        "torch_version": lanes[0]["torch_version"],
    }


def lanes_timer(shapes: list[dict[str, Any]], steps: int, lanes: int) -> list[dict[str, Any]]:
    """The real timer: every shape on `lanes` lanes side by side, pooled; a line as each is done."""
    from anatomy.training.step_timing import time_in_lanes  # torch: only when something is timed

    def said(number: int, timings: list[dict[str, Any]]) -> None:
        timing = pooled(timings)
        print(
            f"shape {number + 1}/{len(shapes)}: {timing['step_s']:.3f} s a step, "
            f"{timing['eval_window_s'] * 1000:.2f} ms an evaluation window, "
            f"{timing['compile_s']:.1f} s more for the first steps ({'compiled' if timing['compiled'] else 'eager'})",
            file=sys.stderr,
            flush=True,
        )

    return [pooled(timings) for timings in time_in_lanes(shapes, steps, lanes, said)]


def estimate_s(run: Run, timing: dict[str, Any]) -> float:
    """A run's training, in seconds: its steps, its evaluations, and the first steps' extra once."""
    return run.steps * timing["step_s"] + run.evaluations * run.windows * timing["eval_window_s"] + timing["compile_s"]


def job_seconds(entry: dict[str, Any]) -> float:
    """A shipped run's training job (a grid.json record): Snakemake's benchmark of it, or, for a run
    resumed after an interruption (whose last job timed only the rest), its training time over
    every part, whichever is longer."""
    return max(entry.get("job_s") or 0.0, entry.get("train_s") or 0.0)


def cost_row(
    name: str, precision: str, estimates: dict[str, float], measured: dict[str, float], lanes: int
) -> dict[str, Any]:
    """One line of the table: runs, minutes per run, run-hours, hours on lanes that never idle, and
    the estimate over the measured jobs (of the runs that have one; None where none has)."""
    total = sum(estimates.values())
    both = [run_id for run_id in estimates if run_id in measured]
    ratio = sum(estimates[r] for r in both) / sum(measured[r] for r in both) if both else None
    return {
        "group": name,
        "precision": precision,
        "runs": len(estimates),
        "minutes_per_run": total / len(estimates) / 60 if estimates else None,
        "run_hours": total / 3600,
        "lane_hours": total / lanes / 3600,
        "estimate_over_measured": ratio,
    }


def grid_groups(runs: list[Run]) -> list[str | None]:
    """The grid's groups, by name (a run without a group last)."""
    present = {run.group for run in runs if not is_study(run.group)}
    return sorted(present, key=lambda group: (group is None, group or ""))


def study_groups(runs: list[Run]) -> list[str]:
    """The studies among the runs, in groups.py's order."""
    present = {run.group for run in runs}
    return [group for group in STUDY_GROUPS if group in present]


def precision_of(runs: list[Run]) -> str:
    return ", ".join(sorted({json.loads(run.shape)["train"]["precision"] for run in runs}))


def cost_rows(
    runs: list[Run], timings: dict[str, dict[str, Any]], measured: dict[str, float], lanes: int
) -> list[dict[str, Any]]:
    """The grid's groups and the whole grid as their runs are set, each study, then the grid's
    groups and the whole grid again in bf16."""
    rows = []

    def add(name: str, members: list[Run], bf16: bool = False) -> None:
        shape_of = (lambda run: in_precision(run.shape, "bf16")) if bf16 else (lambda run: run.shape)
        estimates = {run.run_id: estimate_s(run, timings[shape_of(run)]) for run in members}
        # a run is measured in its own shape only: an fp32 job says nothing of the same run in bf16
        same = {
            run.run_id: measured[run.run_id] for run in members if run.run_id in measured and shape_of(run) == run.shape
        }
        rows.append(cost_row(name, "bf16" if bf16 else precision_of(members), estimates, same, lanes))

    grid = grid_runs(runs)
    for group in grid_groups(grid):
        add(group or "untagged", [run for run in grid if run.group == group])
    if grid:
        add(GRID, grid)
    for group in study_groups(runs):
        add(group, [run for run in runs if run.group == group])
    for group in grid_groups(grid):
        add(group or "untagged", [run for run in grid if run.group == group], bf16=True)
    if grid:
        add(GRID, grid, bf16=True)
    return rows


# ---------------------------------------------------------------------------------------------
# What a night buys: the command's last sentence, and the report's (anatomy/report/costs_section.py)
# ---------------------------------------------------------------------------------------------


def night(rows: list[dict[str, Any]], lanes: int) -> dict[str, Any] | None:
    """The grid as its runs are set and in bf16, against one night on `lanes` lanes; None when
    the grid was not timed."""
    whole = [row for row in rows if row["group"] == GRID]
    if len(whole) != 2:
        return None
    as_set, bf16 = whole
    night_s = NIGHT_HOURS * 3600 * lanes
    return {
        "hours": NIGHT_HOURS,
        "lanes": lanes,
        "grid_runs": as_set["runs"],
        "precision": as_set["precision"],
        "grid_hours": as_set["lane_hours"],
        "grid_hours_bf16": bf16["lane_hours"],
        "runs_per_night": night_s / (as_set["minutes_per_run"] * 60),
        "runs_per_night_bf16": night_s / (bf16["minutes_per_run"] * 60),
    }


# (fits as its runs are set, fits in bf16) -> the verdict that follows the night's sentence
FITS = {
    # TRANSLATORS: the report's costs section, after what a night buys: whether the whole grid's
    # training fits in one night; {precision} is the grid's own (fp32)
    (True, True): N_("The whole grid fits in one night in either precision."),
    (False, True): N_("The whole grid fits in one night in bf16, not in {precision}."),
    (True, False): N_("The whole grid fits in one night in {precision}, not in bf16."),
    (False, False): N_("The whole grid fits in one night in neither precision."),
}


def night_sentence(measured: dict[str, Any]) -> str:
    """What a night buys (a costs.json's `night`), in the reader's language."""
    # TRANSLATORS: the report's costs section: what one night of training buys on the machine that
    # `python -m anatomy costs` measured. {precision} is the grid's own (fp32); lanes are trainings
    # running side by side, one thread each; {grid_hours} and {grid_hours_bf16} are hours
    said = ngettext(
        "An {hours}-hour night on {lanes} lane trains about {runs} of the grid's runs here in {precision}, "
        "or {runs_bf16} in bf16: the whole grid ({grid_runs} runs) takes {grid_hours} h on {lanes} lane "
        "that never idles in {precision}, and {grid_hours_bf16} h in bf16.",
        "An {hours}-hour night on {lanes} lanes trains about {runs} of the grid's runs here in {precision}, "
        "or {runs_bf16} in bf16: the whole grid ({grid_runs} runs) takes {grid_hours} h on {lanes} lanes "
        "that never idle in {precision}, and {grid_hours_bf16} h in bf16.",
        measured["lanes"],
    ).format(
        hours=measured["hours"],
        lanes=measured["lanes"],
        runs=round(measured["runs_per_night"]),
        runs_bf16=round(measured["runs_per_night_bf16"]),
        precision=measured["precision"],
        grid_runs=measured["grid_runs"],
        grid_hours=f"{measured['grid_hours']:.1f}",
        grid_hours_bf16=f"{measured['grid_hours_bf16']:.1f}",
    )
    fits = (measured["grid_hours"] <= measured["hours"], measured["grid_hours_bf16"] <= measured["hours"])
    return f"{said} {_(FITS[fits]).format(precision=measured['precision'])}"


def load_average() -> list[float] | None:
    """The 1-, 5- and 15-minute load averages (None where the system does not tell them)."""
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def load_words(before: list[float] | None, after: list[float] | None, lanes: int) -> str:
    """What else ran beside the timing, as the load average tells it."""
    if before is None or after is None:
        return "The load average is not known on this system: nothing tells what else ran beside the timing."
    return (
        f"The 1-minute load average was {before[0]:.2f} before the timing and {after[0]:.2f} after it, "
        f"on {os.cpu_count()} cores (the timing's own {lanes} lanes count in the second): near 0 before, the "
        "machine was quiet; well above it, other work ran beside the timing, and the times are upper bounds."
    )


# ---------------------------------------------------------------------------------------------
# costs.json: written here, read by the report
# ---------------------------------------------------------------------------------------------

# field -> its kind: what the report reads of a costs.json
RECORD_FIELDS = {"measured_utc": str, "machine": str, "torch_version": str, "lanes": int, "steps_timed": int}
KIND_WORDS = {str: "a string", int: "a whole number"}
NIGHT_FIELDS = ("hours", "lanes", "grid_runs", "grid_hours", "grid_hours_bf16", "runs_per_night", "runs_per_night_bf16")


def read_costs(path: Path) -> dict[str, Any]:
    """A costs.json, with the fields the report reads checked; one line naming the file if not."""
    record = read_json_object(path, "a measurement written by python -m anatomy costs")
    for name, kind in RECORD_FIELDS.items():
        if not isinstance(record.get(name), kind) or isinstance(record.get(name), bool):
            raise AnatomyError(f"{path}: field '{name}' must be {KIND_WORDS[kind]}, got {record.get(name)!r}")
    load = record.get("load_average_before")
    if load is not None and not (isinstance(load, list) and load and all(isinstance(v, (int, float)) for v in load)):
        raise AnatomyError(f"{path}: field 'load_average_before' must be a list of numbers or null, got {load!r}")
    measured = record.get("night")
    if measured is not None:
        if not isinstance(measured, dict):
            raise AnatomyError(f"{path}: field 'night' must be an object or null, got {measured!r}")
        for name in NIGHT_FIELDS:
            if isinstance(measured.get(name), bool) or not isinstance(measured.get(name), (int, float)):
                raise AnatomyError(f"{path}: field 'night.{name}' must be a number, got {measured.get(name)!r}")
        if not isinstance(measured.get("precision"), str):
            raise AnatomyError(f"{path}: field 'night.precision' must be a string, got {measured.get('precision')!r}")
    return record


def shape_label(shape: str, runs: list[Run]) -> str:
    """A shape by the experiments that train it (a grid shape in bf16: by those that train it in fp32)."""
    named = list(dict.fromkeys(run.experiment for run in runs if run.shape == shape))
    suffix = ""
    if not named:
        named = list(dict.fromkeys(run.experiment for run in runs if in_precision(run.shape, "bf16") == shape))
        suffix = " in bf16"
    return named[0] + (f" and {len(named) - 1} more" if len(named) > 1 else "") + suffix


def measure(
    runs_root: Path, groups: list[str] | None, steps: int, lanes: int, timer: Timer | None = None
) -> dict[str, Any]:
    """Everything costs.json holds: the runs read, their shapes timed by `timer` (default: on lanes
    side by side, `lanes_timer`), the estimates."""
    runs = chosen(read_runs(runs_root), groups, runs_root)
    shapes = shapes_to_time(runs)
    provenance = read_provenance(runs_root.parent / PROVENANCE_FILE)["runs"]
    measured = {run.run_id: job_seconds(provenance[run.run_id]) for run in runs if run.run_id in provenance}
    print(
        f"costs: {len(runs)} runs under {runs_root}, {len(shapes)} shapes to time"
        + (" (with the grid's in bf16), " if grid_runs(runs) else ", ")
        + f"each for {steps} timed steps on {lanes} lanes of one thread",
        file=sys.stderr,
        flush=True,
    )
    started, before = time.perf_counter(), load_average()
    if before is not None:
        print(f"costs: the 1-minute load average was {before[0]:.2f} before the timing", file=sys.stderr, flush=True)
    timings = (timer or lanes_timer)([json.loads(shape) for shape in shapes], steps, lanes)
    after = load_average()
    by_shape = dict(zip(shapes, timings))
    rows = cost_rows(runs, by_shape, measured, lanes)
    return {
        "measured_utc": dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z"),
        "machine": cpu_description(),
        "device": ", ".join(sorted({timing["device"] for timing in timings})),
        "torch_version": ", ".join(sorted({timing["torch_version"] for timing in timings})),
        "runs_folder": runs_root.as_posix(),
        "groups": groups,
        "lanes": lanes,
        "threads_per_lane": 1,
        "steps_timed": steps,
        "load_average_before": before,
        "load_average_after": after,
        "took_s": round(time.perf_counter() - started, 1),
        "shapes": [{"label": shape_label(shape, runs), **json.loads(shape), **by_shape[shape]} for shape in shapes],
        "runs": [
            {
                "run": run.run_id,
                "group": run.group,
                "estimate_s": round(estimate_s(run, by_shape[run.shape]), 1),
                "measured_s": measured.get(run.run_id),
            }
            for run in runs
        ],
        "rows": rows,
        "night": night(rows, lanes),
    }


# ---------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------


def table(rows: list[dict[str, Any]], lanes: int) -> str:
    header = [
        "group",
        "precision",
        "runs",
        "minutes per run",
        "run-hours",
        f"hours on {lanes} lanes",
        "estimate / measured",
    ]

    def number(value: float | None, digits: int) -> str:
        return "–" if value is None else f"{value:.{digits}f}"

    lines = [
        [
            "the whole grid"
            if row["group"] == GRID
            else row["group"] + (" (a study)" if is_study(row["group"]) else ""),
            row["precision"],
            str(row["runs"]),
            number(row["minutes_per_run"], 1),
            number(row["run_hours"], 2),
            number(row["lane_hours"], 2),
            number(row["estimate_over_measured"], 2),
        ]
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [header, *lines]) for i in range(len(header))]
    return "\n".join(
        "  ".join(
            cell.ljust(width) if i < 2 else cell.rjust(width) for i, (cell, width) in enumerate(zip(line, widths))
        )
        for line in [header, *lines]
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--runs",
        type=Path,
        default=Path("results/reference/runs"),
        help="the run folders whose configs are timed (default: the shipped runs, grid and studies)",
    )
    parser.add_argument("--out", type=Path, default=Path("results") / COSTS_FILE, help="where the measurement goes")
    parser.add_argument(
        "--steps", type=int, default=8, help="timed training steps per shape (default 8, after 2 untimed)"
    )
    parser.add_argument(
        "--group",
        nargs="+",
        default=None,
        help=f"time only these groups' runs ({GRID}: every group that is not a study; default: every run)",
    )
    parser.add_argument("--lanes", type=int, default=2, help="runs side by side, one thread each (default 2)")


def run(args: argparse.Namespace) -> int:
    if args.steps < 1:
        raise AnatomyError(f"--steps {args.steps}: expected at least 1 timed step")
    if args.lanes < 1:
        raise AnatomyError(f"--lanes {args.lanes}: expected at least 1 lane")
    check_file_target(args.out, "--out")  # before the timing: a wrong path is said now, not in an hour
    record = measure(args.runs, args.group, args.steps, args.lanes)
    write_json(args.out, record)
    print(table(record["rows"], args.lanes))
    print(
        "\nEstimates of the training alone (steps, evaluations, compile), as the report's minutes per run; "
        "estimate / measured: against the jobs grid.json records beside the runs, where it does."
    )
    if record["night"] is not None:
        print(night_sentence(record["night"]))
    print(load_words(record["load_average_before"], record["load_average_after"], args.lanes))
    print(f"costs: {args.out} (the timing took {record['took_s'] / 60:.1f} minutes)")
    return 0
