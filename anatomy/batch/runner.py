"""`python -m anatomy batch-run plan.json --lanes N --pack runs.tar.gz`: a plan's runs, N side by
side, on this machine; then the finished runs' small files in one archive (see
anatomy/batch/__init__.py)."""

from __future__ import annotations

import argparse
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from anatomy.batch import PLAN_VERSION
from anatomy.errors import AnatomyError
from anatomy.files.atomic import atomic_path
from anatomy.files.run_folder import CHECKPOINT_SUFFIX, has_results, read_json_file

NOT_IN_TIME = "stopped"  # a run cut short (the time limit, Ctrl-C): it resumes where it trained
STOP_GRACE_S = 60  # after Ctrl-C, the time a training has to save its checkpoint


def read_plan(path: str) -> dict:
    if not os.path.lexists(path):
        raise AnatomyError(f"batch-run: {path} does not exist: write it with `python -m anatomy batch-plan`")
    try:
        plan = read_json_file(Path(path), "a plan")
    except AnatomyError as err:  # a named pipe, a huge file, not UTF-8, not JSON: said in one line
        raise AnatomyError(f"batch-run: {err}") from None
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


def stopping(deadline: float | None, stop: threading.Event) -> bool:
    """Ctrl-C was pressed, or the time limit is past."""
    return stop.is_set() or (deadline is not None and time.monotonic() >= deadline)


def run_command(command: str, deadline: float | None, stop: threading.Event) -> int | None:
    """One command, in a process group of its own; None if it was stopped, at the deadline or on
    Ctrl-C (Ctrl-C first, so that a training saves where it got to, then a kill if it lingers)."""
    process = subprocess.Popen(["bash", "-c", with_this_python(command)], start_new_session=True)
    while True:
        try:
            return process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            if stopping(deadline, stop):
                break
    os.killpg(process.pid, signal.SIGINT)
    try:
        process.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    return None


def train_and_sample(run: dict, deadline: float | None, stop: threading.Event) -> tuple[dict, str | None, float]:
    """One run's commands in order; (run, what went wrong or None, minutes)."""
    start = time.monotonic()
    for command, log in zip(run["commands"], run["logs"]):
        if stopping(deadline, stop):
            return run, NOT_IN_TIME, (time.monotonic() - start) / 60
        if log:
            Path(log).parent.mkdir(parents=True, exist_ok=True)
        code = run_command(command, deadline, stop)
        if code is None:
            return run, NOT_IN_TIME, (time.monotonic() - start) / 60
        if code != 0:
            return run, f"exit {code}; {log}: {last_line(log)}", (time.monotonic() - start) / 60
    return run, None, (time.monotonic() - start) / 60


def pack(runs: list[dict], target: str) -> int:
    """The finished runs' files and their logs, as one .tar.gz, written atomically: the checkpoints
    stay where they were trained, the archive is what comes back."""
    packed = 0
    with atomic_path(target) as partial, tarfile.open(partial, "w:gz") as archive:
        for run in runs:
            if not has_results(run["run"]):
                continue
            for path in sorted(Path(run["run"]).rglob("*")):
                if path.is_file() and path.suffix != CHECKPOINT_SUFFIX:
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
    parser.add_argument(
        "--minutes",
        type=float,
        help="a time limit: no run starts after it, one still running is stopped (it resumes from its "
        "checkpoint where it trained), and the finished ones are packed",
    )


def ctrl_c_restored() -> None:
    """A batch started in the background (`nohup ... &`) starts with Ctrl-C ignored, and an ignored
    signal outlives exec: every training would inherit it, and bash cannot trap it. The stop at
    the time limit (a Ctrl-C, so that a training saves where it got to) would then wait out the
    grace period and kill. Python's own handler instead: the commands start with the default."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def run(args) -> int:
    ctrl_c_restored()
    if args.lanes < 1:
        raise AnatomyError(f"batch-run: --lanes {args.lanes} is not valid: expected 1 or more")
    if args.minutes is not None and args.minutes <= 0:
        raise AnatomyError(f"batch-run: --minutes {args.minutes} is not valid: expected a positive number")
    plan = read_plan(args.plan)
    runs = plan["runs"]
    print(f"batch-run: {len(runs)} runs of {args.plan} on {args.lanes} lanes", flush=True)
    deadline = None if args.minutes is None else time.monotonic() + args.minutes * 60
    stop = threading.Event()
    failed, cut = [], []
    with ThreadPoolExecutor(max_workers=args.lanes) as pool:
        futures = [pool.submit(train_and_sample, one, deadline, stop) for one in runs]
        try:
            for future in as_completed(futures):
                one, problem, minutes = future.result()
                if problem == NOT_IN_TIME:
                    cut.append(one["run"])
                elif problem:
                    failed.append(one["run"])
                    print(f"batch-run: FAILED {one['run']} after {minutes:.1f} min ({problem})", flush=True)
                else:
                    print(f"batch-run: done {one['run']} in {minutes:.1f} min", flush=True)
        except KeyboardInterrupt:
            # the trainings run in sessions of their own, out of the terminal's reach: stop them here
            stop.set()
            pool.shutdown(wait=True)
            raise KeyboardInterrupt(
                "batch-run: stopped (Ctrl-C); the runs cut short resume from their checkpoints when the plan runs again"
            ) from None
    if args.pack:
        print(f"batch-run: {pack(runs, args.pack)} finished runs packed into {args.pack}")
    summary = f"batch-run: {len(runs) - len(failed) - len(cut)} of {len(runs)} runs finished"
    if failed:
        summary += f"; failed: {' '.join(failed)}"
    if cut:
        summary += f"; stopped at {args.minutes:g} minutes (run the plan again to go on): {' '.join(cut)}"
    print(summary)
    return 1 if failed or cut else 0
