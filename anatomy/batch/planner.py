"""`python -m anatomy batch-plan TARGET... --out plan.json`: the trainings a target still needs,
with their exact commands, from a Snakemake dry run (see anatomy/batch/__init__.py)."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import datetime, timezone

from anatomy.batch import PLAN_VERSION
from anatomy.errors import AnatomyError
from anatomy.files.atomic import write_json

RUN_RULES = ("train_model", "generate_samples")  # what a plan may hold: a run's training and sampling


@dataclass
class Job:
    """One job of Snakemake's dry run, as its printout names it."""

    rule: str
    command: str = ""
    log: str = ""
    inputs: list[str] = field(default_factory=list)
    outputs: list[str] = field(default_factory=list)
    wildcards: dict[str, str] = field(default_factory=dict)


def dry_run_jobs(printout: str) -> list[Job]:
    """The jobs of `snakemake --dry-run --printshellcmds`, in its order (each job's inputs first)."""
    jobs: list[Job] = []
    for line in printout.splitlines():
        if match := re.match(r"^(?:local)?rule (\w+):$", line.strip()):
            jobs.append(Job(match[1]))
        elif jobs and (match := re.match(r"^\s+(input|output): (.+)$", line)):
            setattr(jobs[-1], f"{match[1]}s", [path.strip() for path in match[2].split(", ")])
        elif jobs and (match := re.match(r"^\s+log: (.+)$", line)):
            jobs[-1].log = match[1].strip()
        elif jobs and (match := re.match(r"^\s+wildcards: (.+)$", line)):
            jobs[-1].wildcards = dict(pair.split("=", 1) for pair in match[1].split(", "))
        elif jobs and line.startswith("Shell command: "):
            jobs[-1].command = line.removeprefix("Shell command: ").strip()
    return jobs


def data_folder(command: str) -> str:
    """The tokenized corpus a training reads (its --data)."""
    match = re.search(r"--data (\S+)", command)
    if not match:
        raise AnatomyError(f"batch-plan: a training command without --data: {command}")
    return match[1]


def read_by_runs(jobs: list[Job]) -> set[str]:
    return {path for job in jobs if job.rule in RUN_RULES for path in job.inputs}


def upstream_of_runs(jobs: list[Job]) -> list[Job]:
    """The jobs whose outputs the runs read, directly or through another such job (the corpus)."""
    needed = read_by_runs(jobs)
    upstream: list[Job] = []
    while True:
        found = [job for job in jobs if job.rule not in RUN_RULES and job not in upstream and needed & set(job.outputs)]
        if not found:
            return upstream
        upstream += found
        needed |= {path for job in found for path in job.inputs}


def plan_of(jobs: list[Job]) -> dict:
    """The plan: each run's commands (training, then sampling), the corpora they read, and the jobs
    left for Snakemake here once the runs are back (collecting, the report). A job the runs need
    first (a corpus to build) is refused: make it here, so that what travels is only trainings and
    the corpora they read."""
    upstream = upstream_of_runs(jobs)
    if upstream:
        names = ", ".join(sorted({job.rule for job in upstream}))
        read = read_by_runs(jobs)
        outputs = " ".join(dict.fromkeys(job.outputs[0] for job in upstream if read & set(job.outputs)))
        raise AnatomyError(
            f"batch-plan: the runs first need {names}, which a batch does not run: make them here "
            f"(`snakemake {outputs} --cores 1`), then plan again"
        )
    left = sorted({job.rule for job in jobs if job.rule not in RUN_RULES})
    jobs = [job for job in jobs if job.rule in RUN_RULES]
    runs: dict[str, dict] = {}
    for job in jobs:
        if not job.command:
            raise AnatomyError(f"batch-plan: Snakemake printed no command for a {job.rule} job")
        folder = f"results/runs/{job.wildcards['experiment']}/seed{job.wildcards['seed']}"
        run = runs.setdefault(folder, {"run": folder, "commands": [], "logs": []})
        run["commands"].append(job.command)
        run["logs"].append(job.log)
        if job.rule == "train_model":
            run["data"] = data_folder(job.command)
    unsampled = [folder for folder, run in runs.items() if "data" in run and len(run["commands"]) < 2]
    if unsampled:
        raise AnatomyError(f"batch-plan: {unsampled[0]} is trained but not sampled: plan its samples.json target")
    return {
        "version": PLAN_VERSION,
        "planned": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "runs": list(runs.values()),
        "data": sorted({run["data"] for run in runs.values() if "data" in run}),
        "left": left,
    }


def snakemake_printout(targets: list[str], config: list[str], configfile: str | None = None) -> str:
    command = [sys.executable, "-m", "snakemake", *targets, "--dry-run", "--printshellcmds", "--cores", "1"]
    if configfile:
        command += ["--configfile", configfile]
    if config:
        command += ["--config", *config]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["(no output)"]
        raise AnatomyError(f"batch-plan: Snakemake's dry run failed: {last[0]}")
    return done.stdout + done.stderr


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("targets", nargs="+", help="Snakemake targets: a run's samples.json, or a rule such as parts")
    parser.add_argument("--out", required=True, help="the plan file to write (JSON)")
    parser.add_argument("--configfile", help="a Snakemake config file on top of the workflow's (workflow/quick.yaml)")
    parser.add_argument(
        "--config",
        nargs="*",
        default=[],
        metavar="KEY=VALUE",
        help="Snakemake config for the commands (train_threads=1: one CPU thread a run)",
    )


def run(args) -> int:
    plan = plan_of(dry_run_jobs(snakemake_printout(args.targets, args.config, args.configfile)))
    write_json(args.out, plan)
    corpora = " ".join(plan["data"]) or "none"
    print(f"batch-plan: {len(plan['runs'])} runs to train in {args.out}; the corpora they read: {corpora}")
    if plan["left"]:
        print(f"batch-plan: left for Snakemake here once the runs are back: {', '.join(plan['left'])}")
    return 0
