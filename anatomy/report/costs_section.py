"""What the runs cost: the report's (and README.md's) table of time per target and for the whole
grid, from the shipped runs' records (grid.json, read by anatomy/results/reference.py), and what
a night buys: measured by `python -m anatomy costs` where its costs.json lies beside grid.json
(anatomy/results/costs.py, which owns that sentence), else the grid in bf16 estimated from the
precision study's runs.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from statistics import median
from pathlib import Path
from typing import Any

import pandas as pd

from anatomy.language import ngettext
from anatomy.report.exam_findings import in_part_order, part_name
from anatomy.report.wording import md_table
from anatomy.results import reference
from anatomy.results.costs import COSTS_FILE, NIGHT_HOURS, job_seconds, night_sentence, read_costs
from anatomy.results.groups import STUDY_GROUPS, TARGETS, is_study, target_of
from anatomy.results.reader import Results
from anatomy.results.studies import declared


# the grid's groups, in the order of their targets (headline, ablation, break): the workflow's table
GRID_GROUPS = [target.group for target in TARGETS.values() if target.stage is None and not is_study(target.group)]


MEASURED = "measured_costs"  # the provenance's key for the costs.json beside grid.json


def read_provenance(path: Path | None) -> dict[str, Any] | None:
    """grid.json of shipped runs, read by its owner (anatomy/results/reference.py), with the
    costs.json measured beside it, if any, under MEASURED; None if there is no grid.json."""
    if path is None or not path.is_file():
        return None
    record = reference.read_provenance(path)
    if (measured := path.with_name(COSTS_FILE)).is_file():
        record = {**record, MEASURED: read_costs(measured)}
    return record


def wall_clock_hours(entries: list[dict[str, Any]]) -> float:
    """The hours in which at least one of the jobs ran (each start is its end minus its length).
    Not first start to last end: a study trained over several sessions would count the days
    between them."""
    ends = [dt.datetime.fromisoformat(entry["finished_utc"].replace("Z", "+00:00")) for entry in entries]
    spans = sorted((end - dt.timedelta(seconds=job_seconds(entry)), end) for end, entry in zip(ends, entries))
    busy, (start, end) = dt.timedelta(0), spans[0]
    for next_start, next_end in spans[1:]:
        if next_start > end:  # a gap: nothing of these jobs ran
            busy += end - start
            start, end = next_start, next_end
        else:
            end = max(end, next_end)
    return (busy + (end - start)).total_seconds() / 3600


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
        return "finish dates not recorded."
    first, last = first[:10], last[:10]
    return f"runs finished on {first}." if first == last else f"runs finished {first} to {last}."


# where the README's shorter costs section sends a reader for each study's points
STUDY_POINTS_LINK = (
    "Each study's minutes per run at each of its points: [the report](docs/results/report.md#what-the-runs-cost)."
)


def costs_section(data: Results, study_points: bool = True) -> str:
    """Time per target and for the whole grid, from the shipped runs' records (grid.json); the
    studies' runs have rows of their own, never counted in the grid's. `study_points`: each
    study's table at its points too (the report's); the README, a front door, links to them."""
    if not data.provenance:
        return ""
    groups = data.runs.set_index("run_id")["group"].to_dict()
    precisions = data.runs.set_index("run_id")["precision"].to_dict()
    shipped = data.provenance.get("runs", {})
    records = {run_id: entry for run_id, entry in shipped.items() if not is_study(groups.get(run_id))}

    chips = machine_letters(shipped)

    def row(name: str, run_ids: list[str]) -> list[str]:
        used = sorted({precisions.get(run_id) or "fp32" for run_id in run_ids})
        return cost_row(name, [shipped[run_id] for run_id in run_ids]) + [
            ", ".join(used) or "–",
            trained_on([shipped[run_id] for run_id in run_ids], chips),
        ]

    rows = [row(f"`{target_of(group)}`", [r for r in records if groups.get(r) == group]) for group in GRID_GROUPS]
    rows.append(row("the whole grid (`all`)", list(records)))
    for group in STUDY_GROUPS:
        if study_runs := [run_id for run_id in shipped if groups.get(run_id) == group]:
            rows.append(row(f"`{target_of(group)}` (a study, not in `all`)", study_runs))
    grid = data.provenance.get("grid", {})
    two_lanes = sum(job_seconds(entry) for entry in records.values()) / 2 / 3600
    notes = [
        f"Torch {', '.join(grid.get('torch_versions', []))}; " + finished_words(grid),
        "Trained on: " + "; ".join(f"{letter}: {machine}" for machine, letter in chips.items()) + ".",
        "Minutes per run: Snakemake's benchmark of each training job (compile, training, evaluations, "
        "checkpoints; a run resumed after an interruption counts its training time over every part).",
        "Run-hours: their sum, the time one run at a time would take. Wall-clock: the hours in which at least one "
        "of the target's jobs ran (two ran side by side; the time between sessions not counted).",
        f"Two lanes that never idle would need half the run-hours: {two_lanes:.1f} h for the whole grid's "
        "training. A target's row counts its own experiments' runs (`ablations` and `break_tests` also train the "
        "baselines they are compared with, if those are not there yet); the exams are not in these times.",
    ]
    night = (
        measured_night(data.provenance[MEASURED])
        if (data.provenance.get(MEASURED) or {}).get("night")
        else night_in_bf16(
            data, records, {run_id: shipped[run_id] for run_id in shipped if groups.get(run_id) == "precision"}
        ).strip()
    )
    header = ["target", "runs shipped", "minutes per run", "run-hours in all", "wall-clock hours", "precision"]
    return "\n\n".join(
        [md_table(header + ["trained on"], rows), "\n".join(f"- {note}" for note in notes if note)]
        + ([night] if night else [])
        + (
            [table for table in (point_costs(data, study.name) for study in declared().values()) if table]
            if study_points
            else [STUDY_POINTS_LINK]
        )
    )


def point_label(run: dict[str, Any], columns: list[str]) -> str:
    """'4×128': the run's values of the study's point columns."""
    return "×".join(f"{run[column]:g}" if isinstance(run[column], float) else str(run[column]) for column in columns)


def point_costs(data: Results, name: str) -> str:
    """A study whose points are model settings (the size study's sizes) or parts (the parts study's
    QK-norm, MLA and experts): minutes per run at each point, on each machine that trained there,
    and what one night buys there. Job times are the runs' own, as they trained (two side by side,
    sometimes with tests beside them), so a plan made by them errs long, not short."""
    study = declared()[name]
    shipped = (data.provenance or {}).get("runs", {})
    runs = data.runs[(data.runs["group"] == name) & data.runs["run_id"].isin(list(shipped))]
    if runs.empty:
        return ""
    if study.compare == "parts":
        # the plain mini-LLaMA's own runs first, then each part, text by text: on a CPU the experts
        # run one after another (docs/exams.md), and this is where that shows at full size
        order = [None, *in_part_order(runs["part"].dropna())]
        runs = runs.assign(order=runs["part"].map(lambda part: order.index(None if pd.isna(part) else part)))
        runs = runs.sort_values(["train_tokens", "corpus", "order"])
        header, where = ["text", "part"], "part by part on each text"

        def label_of(run: dict[str, Any]) -> tuple[str, ...]:
            part = None if pd.isna(run["part"]) else run["part"]
            text = f"{run['train_tokens']:,} characters of {run['corpus']}"
            return text, part_name(part)

    else:
        columns = [column for column in study.axis if column not in ("corpus", "train_tokens", "precision")]
        if study.compare != "models" or not columns:
            return ""
        runs = runs.sort_values(columns)  # smallest point first
        header, where = [" × ".join(columns)], "at each of its points"

        def label_of(run: dict[str, Any]) -> tuple[str, ...]:
            return (point_label(run, columns),)

    chips = machine_letters(shipped)
    minutes: dict[tuple[tuple[str, ...], str], list[float]] = {}
    for run in runs.to_dict("records"):
        entry = shipped[run["run_id"]]
        minutes.setdefault((label_of(run), chips[entry.get("machine") or "unrecorded"]), []).append(
            job_seconds(entry) / 60
        )
    points = list(dict.fromkeys(label for label, _machine in minutes))
    rows = [
        [*label, machine, str(len(times)), f"{median(times):.1f}", str(2 * int(NIGHT_HOURS * 60 // median(times)))]
        for (label, machine), times in sorted(minutes.items(), key=lambda item: (points.index(item[0][0]), item[0][1]))
    ]
    header += ["trained on", "runs", "minutes per run (median)", "runs a night, two lanes"]
    return (
        f"The `{name}` study {where}: each run's training job as it ran (two side by side, "
        "sometimes with tests beside them, so these err long), and how many such runs two lanes that never "
        f"idle finish in one {NIGHT_HOURS}-hour night; the chips by the letters above.\n\n" + md_table(header, rows)
    )


def machine_letters(shipped: dict[str, dict[str, Any]]) -> dict[str, str]:
    """Each chip the runs trained on -> a letter (A first, in the order they first finished a run),
    so that a cell names several chips in a few characters and the notes name each once."""
    entries = sorted(shipped.values(), key=lambda entry: entry.get("finished_utc") or "")
    machines = dict.fromkeys(entry.get("machine") or "unrecorded" for entry in entries)
    return {machine: chr(ord("A") + index) for index, machine in enumerate(machines)}


def trained_on(entries: list[dict[str, Any]], letters: dict[str, str]) -> str:
    """The chips these runs trained on, by letter, each with its count where there are several: a
    bf16 rerun is exact only on the same CPU (docs/reference.md)."""
    counts = Counter(letters[entry.get("machine") or "unrecorded"] for entry in entries)
    if len(counts) <= 1:
        return next(iter(counts), "–")
    return ", ".join(f"{letter} ({n})" for letter, n in sorted(counts.items()))


def measured_night(measured: dict[str, Any]) -> str:
    """What a night buys, from a costs.json: where, when and under what load it was measured first."""
    load = measured.get("load_average_before")
    # TRANSLATORS: the report's costs section; {load} is the 1-minute load average (a number such as
    # 0.05: near 0, nothing else ran), the other work the machine did while the runs were timed
    said = ngettext(
        "Measured on {date} by `python -m anatomy costs` on {machine} (torch {torch}): each run shape "
        "timed for {steps} steps on {lanes} lane of one thread; the 1-minute load average was {load} "
        "before the timing.",
        "Measured on {date} by `python -m anatomy costs` on {machine} (torch {torch}): each run shape "
        "timed for {steps} steps on {lanes} lanes side by side, one thread each; the 1-minute load "
        "average was {load} before the timing.",
        measured["lanes"],
    ).format(
        date=measured["measured_utc"][:10],
        machine=measured["machine"],
        torch=measured["torch_version"],
        steps=measured["steps_timed"],
        lanes=measured["lanes"],
        load="–" if load is None else f"{load[0]:.2f}",
    )
    return f"{said}\n\n{night_sentence(measured['night'])}"


def night_in_bf16(data: Results, grid_records: dict[str, Any], bf16_records: dict[str, Any]) -> str:
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
