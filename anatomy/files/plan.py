"""The workflow's plan: every job a running Snakemake has to do, for the Progress page's ETA.

When `snakemake` starts running jobs it writes results/plan.json (workflow/rules/common.smk,
`onstart`): the targets asked for, how many jobs run side by side, and every job those targets
need, done or not, in plan order, each with its rule, the file it makes and its run:

    {"targets": ["headline"], "lanes": 2,
     "jobs": [{"rule": "train_model", "output": "results/runs/vanilla/seed42/summary.json",
               "run": "vanilla/seed42"}, ...]}

Paths are relative to the working directory. `lanes` is null where the jobs go to a cluster, and
`jobs` null when a target asks for something the plan cannot list (a single run's file, say).
A Snakemake that takes the working directory removes the plan of the one before it
(claim_working_directory), so a plan there while a Snakemake runs is that one's. The workflow's
own functions list the jobs, not Snakemake's internals: a finished run that is trained again
(its experiment changed) counts as done until its job starts and removes its summary.json.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anatomy.errors import AnatomyError
from anatomy.files.atomic import write_json
from anatomy.files.run_folder import read_json_object

PLAN_FILE = Path("results") / "plan.json"


@dataclass(frozen=True)
class PlannedJob:
    rule: str  # the Snakemake rule that runs it (also its benchmark folder)
    output: str  # the file it makes, relative to the working directory
    run: str | None = None  # EXPERIMENT/seedSEED, for the jobs of one run


@dataclass(frozen=True)
class PlanFile:
    targets: tuple[str, ...]
    lanes: int | None
    jobs: tuple[PlannedJob, ...] | None
    written_s: float  # when it was written (its mtime): collect and the report are done once newer


def write_plan_file(path: str | Path, targets: list[str], lanes: int | None, jobs: list[dict] | None) -> None:
    """The plan as the workflow writes it (jobs: dicts with rule, output and run)."""
    write_json(path, {"targets": list(targets), "lanes": lanes, "jobs": jobs})


def read_plan_file(path: Path) -> PlanFile:
    """The plan a running workflow wrote; a damaged one is one AnatomyError naming the field."""
    data = read_json_object(path, "the workflow's plan")
    written_s = path.stat().st_mtime
    targets, lanes, jobs = data.get("targets"), data.get("lanes"), data.get("jobs")
    if not (isinstance(targets, list) and all(isinstance(target, str) for target in targets)):
        raise AnatomyError(f"{path}: field 'targets' must be a list of target names, got {targets!r}")
    if lanes is not None and not (isinstance(lanes, int) and not isinstance(lanes, bool) and lanes >= 1):
        raise AnatomyError(f"{path}: field 'lanes' must be a whole number from 1, or null, got {lanes!r}")
    if jobs is not None and not isinstance(jobs, list):
        raise AnatomyError(f"{path}: field 'jobs' must be a list of jobs, or null, got {jobs!r}")
    planned = None if jobs is None else tuple(planned_job(entry, path, index) for index, entry in enumerate(jobs))
    return PlanFile(tuple(targets), lanes, planned, written_s)


def planned_job(entry: Any, path: Path, index: int) -> PlannedJob:
    where = f"{path}: jobs[{index}]"
    if not isinstance(entry, dict):
        raise AnatomyError(f"{where} must be an object with rule, output and run, got {entry!r}")
    rule, output, run = entry.get("rule"), entry.get("output"), entry.get("run")
    for name, value in (("rule", rule), ("output", output)):
        if not (isinstance(value, str) and value):
            raise AnatomyError(f"{where}: field '{name}' must be a non-empty text, got {value!r}")
    if run is not None and not (isinstance(run, str) and run):
        raise AnatomyError(f"{where}: field 'run' must be EXPERIMENT/seedSEED or null, got {run!r}")
    return PlannedJob(rule, output, run)
