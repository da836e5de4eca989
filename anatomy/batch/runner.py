"""`python -m anatomy batch-run plan.json --lanes N --pack runs.tar.gz`: a plan's runs, N side by
side, on this machine; then the finished runs' small files in one archive (see
anatomy/batch/__init__.py)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import sys
import tarfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from anatomy.batch import PLAN_VERSION
from anatomy.errors import AnatomyError
from anatomy.files.atomic import atomic_path

LEFT_BEHIND = (".pt",)  # checkpoints stay where they were trained: the archive is what comes back


def read_plan(path: str) -> dict:
    try:
        plan = json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise AnatomyError(f"batch-run: {path} does not exist: write it with `python -m anatomy batch-plan`") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise AnatomyError(f"batch-run: {path} is not a plan (not JSON: {err})") from None
    if not isinstance(plan, dict) or plan.get("version") != PLAN_VERSION or not isinstance(plan.get("runs"), list):
        raise AnatomyError(f"batch-run: {path} is not a plan of version {PLAN_VERSION} (made by `anatomy batch-plan`)")
    for data in plan.get("data", []):
        if not (Path(data) / "split.json").is_file():
            raise AnatomyError(
                f"batch-run: the corpus {data} is not here (no {data}/split.json): bring it along with the plan"
            )
    return plan


def last_line(log: str) -> str:
    try:
        lines = [line for line in Path(log).read_text(encoding="utf-8", errors="replace").splitlines() if line.strip()]
    except OSError:
        return "(no log)"
    return lines[-1] if lines else "(empty log)"


def with_this_python(command: str) -> str:
    """The workflow's `python -m anatomy ...` with the Python running this batch: the machine's
    `python` may be another, or none (only python3)."""
    return shlex.quote(sys.executable) + command[len("python") :] if command.startswith("python ") else command


def train_and_sample(run: dict) -> tuple[dict, str | None, float]:
    """One run's commands in order; (run, what failed or None, minutes)."""
    start = time.monotonic()
    for command, log in zip(run["commands"], run["logs"]):
        if log:
            Path(log).parent.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["bash", "-c", with_this_python(command)])
        if done.returncode != 0:
            return run, f"exit {done.returncode}; {log}: {last_line(log)}", (time.monotonic() - start) / 60
    return run, None, (time.monotonic() - start) / 60


def finished(folder: str) -> bool:
    return (Path(folder) / "summary.json").is_file() and (Path(folder) / "samples.json").is_file()


def pack(runs: list[dict], target: str) -> int:
    """The finished runs' files (no checkpoints) and their logs, as one .tar.gz, written atomically."""
    packed = 0
    with atomic_path(target) as partial, tarfile.open(partial, "w:gz") as archive:
        for run in runs:
            if not finished(run["run"]):
                continue
            for path in sorted(Path(run["run"]).rglob("*")):
                if path.is_file() and path.suffix not in LEFT_BEHIND:
                    archive.add(path)
            for log in run["logs"]:
                if log and Path(log).is_file():
                    archive.add(log)
            packed += 1
    return packed


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("plan", help="the plan file (`python -m anatomy batch-plan`)")
    parser.add_argument("--lanes", type=int, default=os.cpu_count() or 1, help="runs side by side (default: one a CPU)")
    parser.add_argument("--pack", metavar="FILE.tar.gz", help="then write the finished runs' small files here")


def run(args) -> int:
    if args.lanes < 1:
        raise AnatomyError(f"batch-run: --lanes {args.lanes} is not valid: expected 1 or more")
    plan = read_plan(args.plan)
    runs = plan["runs"]
    print(f"batch-run: {len(runs)} runs of {args.plan} on {args.lanes} lanes", flush=True)
    failed = []
    with ThreadPoolExecutor(max_workers=args.lanes) as pool:
        for run_, problem, minutes in pool.map(train_and_sample, runs):
            if problem:
                failed.append(run_["run"])
                print(f"batch-run: FAILED {run_['run']} after {minutes:.1f} min ({problem})", flush=True)
            else:
                print(f"batch-run: done {run_['run']} in {minutes:.1f} min", flush=True)
    if args.pack:
        print(f"batch-run: {pack(runs, args.pack)} finished runs packed into {args.pack}")
    print(
        f"batch-run: {len(runs) - len(failed)} of {len(runs)} runs finished"
        + (f"; failed: {' '.join(failed)}" if failed else "")
    )
    return 1 if failed else 0
