"""How far a grid has got while it runs, read straight from its run folders (the Progress page).

The database changes only when a Snakemake target ends with `collect`, so a grid of many hours
shows nothing new until then. This reads the run folders themselves, read-only, as often as the
page asks: each run's config.json (its total steps), metrics.jsonl (the steps logged so far,
with their `elapsed_s`) and summary.json (finished). Collecting stays the only writer of the
database; nothing here writes anything.

Each run is in one of these states:

    done, diverged   summary.json says so
    running          a trainer holds the folder's lock right now (RunFolder.locked)
    waiting          the running Snakemake plans it, but no trainer works on it yet
    stopped          started, not finished, and nothing plans it (a grid that was interrupted)
    unreadable       a file of it is damaged; the page says which

What Snakemake plans is read from its own lock files (.snakemake/locks/N.input.lock and
N.output.lock), which list every file the running target reads or makes: each
`results/runs/EXPERIMENT/seedSEED/summary.json` there is a run of the plan. results/experiments.json
cannot tell: it names every experiment with its baseline, but not the seeds nor which target runs.
When the plan cannot be read, `Plan.known` is False and the page says so instead of guessing.
Only regular files are read (a named pipe among the lock files or in a run folder would make the
page wait for good): anything else there is unreadable, in words.

No Streamlit here: the page only draws what these functions return, and tests call them directly.
"""

from __future__ import annotations

import heapq
import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from anatomy.errors import AnatomyError
from anatomy.language import N_, _
from anatomy.files.locks import is_locked
from anatomy.files.run_folder import find_run_folders
from anatomy.results.reader import run_label
from anatomy.files.run_folder import read_json_object, read_metrics, read_small_file, read_summary
from anatomy.files.run_folder import RunFolder

UNFINISHED = ("running", "waiting", "stopped")
# each state as the page names it: the states themselves are data (keys), never translated
STATUS_NAMES = {
    "done": N_("done"),
    "diverged": N_("diverged"),
    "running": N_("running"),
    "waiting": N_("waiting"),
    "stopped": N_("stopped"),
    "unreadable": N_("unreadable"),
}
# The seconds per step of a run are measured over its last few logged intervals: recent enough to
# follow a machine that got busier, long enough not to jump with one slow evaluation.
RECENT_INTERVALS = 5
# the workflow's lock (workflow/rules/common.smk, claim_working_directory): held while it runs
WORKFLOW_LOCK = Path(".snakemake") / "anatomy.lock"
SNAKEMAKE_LOCKS = Path(".snakemake") / "locks"
SEED_FOLDER = re.compile(r"seed(\d+)")


@dataclass
class RunProgress:
    """One run of the grid, as its folder (or the plan, for a run not started) says now."""

    run_id: str  # EXPERIMENT/seedSEED, its folder under the runs root (as collect names it)
    experiment: str
    seed: int | None
    status: str
    step: int | None = None  # the last logged step (a finished run: the steps it did)
    steps: int | None = None  # the steps it trains in all (config.json)
    seconds_per_step: float | None = None  # measured from elapsed_s, recent steps
    elapsed_s: float | None = None  # training time so far, by its last logged step
    problem: str | None = None  # why the folder could not be read (status unreadable)
    metrics: list[dict[str, Any]] = field(default_factory=list, repr=False)

    @property
    def label(self) -> str:
        return run_label(self.experiment, self.seed)

    @property
    def eta_s(self) -> float | None:
        """Seconds of training left after its last logged step, at its recent pace (None: unknown)."""
        if self.status not in UNFINISHED:
            return None
        return time_left(self.step, self.steps, self.seconds_per_step)


@dataclass(frozen=True)
class Plan:
    """The runs the running Snakemake will train (run ids), if that can be known."""

    known: bool
    run_ids: frozenset[str]
    sentence: str  # what is known and why, marked with N_: `note` puts it in words
    folder: Path  # the folder it names

    def note(self, show_folder: Callable[[Path], str] = str) -> str:
        """What is known and why, in the reader's language; `show_folder` writes the folder (the
        page: as text, never as Markdown, since a folder's name is anyone's)."""
        return _(self.sentence).format(folder=show_folder(self.folder), count=len(self.run_ids), locks=SNAKEMAKE_LOCKS)


@dataclass
class GridProgress:
    runs_root: Path
    workflow_running: bool
    plan: Plan
    runs: list[RunProgress]

    def with_status(self, *statuses: str) -> list[RunProgress]:
        return [run for run in self.runs if run.status in statuses]

    @property
    def lanes(self) -> int:
        """Runs training side by side right now: the grid's ETA assumes it keeps this many."""
        return len(self.with_status("running"))

    @property
    def eta_s(self) -> float | None:
        """Seconds until every running and waiting run is done (None: cannot be estimated)."""
        if not self.plan.known:
            return None  # runs not started yet may be missing from the list
        running = [run.eta_s for run in self.with_status("running")]
        waiting = [estimated_duration(run, self.runs) for run in self.with_status("waiting")]
        if any(seconds is None for seconds in running + waiting):
            return None
        return grid_eta(running, waiting)


# ---------------------------------------------------------------------------------------------
# The arithmetic: seconds per step, a run's ETA, the grid's


def seconds_per_step(rows: list[dict[str, Any]], intervals: int = RECENT_INTERVALS) -> float | None:
    """Recent seconds per step from the logged rows' `elapsed_s`: over the last `intervals`
    intervals between logged steps. A run with one row so far is measured from its start
    (step 0 at 0 s: a fresh run's clock starts there)."""
    points = [(row["step"], row["elapsed_s"]) for row in rows if row.get("elapsed_s") is not None]
    if len(points) == 1:
        points.insert(0, (0, 0.0))
    if len(points) < 2:
        return None
    (first_step, first_s), (last_step, last_s) = points[-1 - min(intervals, len(points) - 1)], points[-1]
    if last_step <= first_step or last_s < first_s:
        return None  # a clock that went backwards is no measurement
    return (last_s - first_s) / (last_step - first_step)


def time_left(step: int | None, steps: int | None, per_step: float | None) -> float | None:
    """Seconds for the steps from `step` to `steps` at `per_step` seconds each."""
    if step is None or steps is None or per_step is None:
        return None
    return max(steps - step, 0) * per_step


def estimated_duration(run: RunProgress, runs: list[RunProgress]) -> float | None:
    """Seconds a waiting run will still train. One that started earlier: its own steps left at
    its own pace. One not started: the mean time of the measured runs of its experiment, else of
    every measured run (a guess, which the page says)."""
    own = time_left(run.step or 0, run.steps, run.seconds_per_step)
    if own is not None:
        return own
    measured = [(other.experiment, whole_run_s(other)) for other in runs if other is not run]
    measured = [(experiment, seconds) for experiment, seconds in measured if seconds is not None]
    alike = [seconds for experiment, seconds in measured if experiment == run.experiment]
    for pool in (alike, [seconds for _experiment, seconds in measured]):
        if pool:
            return sum(pool) / len(pool)
    return None


def whole_run_s(run: RunProgress) -> float | None:
    """How long a whole run of its kind trains: all its steps at its measured pace."""
    if run.status == "diverged":
        return None  # stopped early: no measure of a whole run
    return time_left(0, run.steps, run.seconds_per_step)


def grid_eta(running_s: list[float], waiting_s: list[float]) -> float | None:
    """Seconds until the grid is done, on as many lanes as runs are running now: each lane
    finishes its run (running_s), then takes the next waiting run (waiting_s, in order) as soon
    as it is free, as Snakemake starts a job when a core frees up. None without a lane."""
    lanes = list(running_s)
    if not lanes:
        return None if waiting_s else 0.0
    heapq.heapify(lanes)
    for seconds in waiting_s:
        heapq.heappush(lanes, heapq.heappop(lanes) + seconds)  # the lane free first takes it
    return max(lanes)


def duration_words(seconds: float | None) -> str:
    """1 h 05 min, 3 min 20 s, 45 s; an em dash when unknown."""
    if seconds is None or not math.isfinite(seconds):
        return "—"
    seconds = round(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return _("{hours} h {minutes} min").format(hours=hours, minutes=f"{minutes:02d}")
    if minutes:
        return _("{minutes} min {seconds} s").format(minutes=minutes, seconds=f"{secs:02d}")
    return _("{seconds} s").format(seconds=secs)


def status_name(status: str) -> str:
    """A run's state in the reader's language (the state itself stays as it is, for sorting and keys)."""
    return _(STATUS_NAMES[status]) if status in STATUS_NAMES else status


# ---------------------------------------------------------------------------------------------
# Reading: the run folders, the workflow, its plan


def workflow_folder(runs_root: Path) -> Path | None:
    """The Snakemake working directory whose runs are here: the workflow writes them to
    results/runs. None for a runs folder of another layout (no workflow writes there)."""
    root = Path(os.path.abspath(runs_root))
    if root.name != "runs" or root.parent.name != "results":
        return None
    return root.parent.parent


def workflow_running(workdir: Path | None) -> bool:
    """Whether a Snakemake of this workflow runs in `workdir` now (it holds its lock for life)."""
    return workdir is not None and is_locked(workdir / WORKFLOW_LOCK)


def read_plan(runs_root: Path) -> Plan:
    """The runs the Snakemake running on this runs folder plans, from its lock files."""
    workdir = workflow_folder(runs_root)
    if workdir is None:
        return Plan(
            False, frozenset(), N_("{folder} is not a workflow's results/runs folder: no plan to read."), runs_root
        )
    if not workflow_running(workdir):
        return Plan(True, frozenset(), N_("No Snakemake is running in {folder}: nothing is planned."), workdir)
    lock_files = sorted(Path(workdir, SNAKEMAKE_LOCKS).glob("*.lock"))
    if not lock_files:
        cannot_read = N_(
            "A Snakemake is running in {folder}, but its plan cannot be read yet "
            "(no {locks}/*.lock): runs it has not started are not shown."
        )
        return Plan(False, frozenset(), cannot_read, workdir)
    planned = set()
    for path in lock_files:
        try:
            lines = read_small_file(path, "a Snakemake lock file").splitlines()
        except AnatomyError:
            continue  # gone (the workflow just ended), half-written or no file: the next read sees it
        planned.update(filter(None, (planned_run(line, workdir, runs_root) for line in lines)))
    return Plan(True, frozenset(planned), N_("The Snakemake running in {folder} plans {count} runs."), workdir)


def planned_run(line: str, workdir: Path, runs_root: Path) -> str | None:
    """The run id of a lock file's line naming a run's summary.json under the runs root, else None."""
    path = os.path.relpath(os.path.abspath(os.path.join(workdir, line.strip())), os.path.abspath(runs_root))
    parts = Path(path).parts
    if len(parts) == 3 and parts[2] == "summary.json" and SEED_FOLDER.fullmatch(parts[1]) and parts[0] != "..":
        return f"{parts[0]}/{parts[1]}"
    return None


def names_of(run_id: str) -> tuple[str, int | None]:
    """(experiment, seed) from the folder layout EXPERIMENT/seedSEED."""
    experiment, _slash, seed_folder = run_id.rpartition("/")
    match = SEED_FOLDER.fullmatch(seed_folder)
    return (experiment or seed_folder, int(match.group(1)) if match else None)


def read_run(folder: Path, runs_root: Path, planned: frozenset[str]) -> RunProgress:
    """One run folder as it is now; a damaged file makes it `unreadable`, never an exception."""
    run_id = folder.relative_to(runs_root).as_posix()
    experiment, seed = names_of(run_id)
    try:
        return read_run_files(RunFolder(folder), run_id, experiment, seed, planned)
    except (AnatomyError, OSError) as err:  # OSError: a file removed between two reads
        return RunProgress(run_id, experiment, seed, "unreadable", problem=str(err))


def read_run_files(
    files: RunFolder, run_id: str, experiment: str, seed: int | None, planned: frozenset[str]
) -> RunProgress:
    # summary first: a run that finishes between two reads is then read whole, as finished
    summary = read_summary(files.summary) if files.summary.is_file() else None
    config = read_json_object(files.config, "a run's settings") if files.config.is_file() else {}
    train = config.get("train") if isinstance(config.get("train"), dict) else {}
    tags = config.get("tags") if isinstance(config.get("tags"), dict) else {}
    # a half-written last line of a run still training is skipped by read_metrics
    rows = read_metrics(files.metrics, run_id, finished=summary is not None)
    steps = train.get("steps") if isinstance(train.get("steps"), int) else None
    last = rows[-1] if rows else None
    run = RunProgress(
        run_id,
        str(tags.get("experiment") or experiment),
        seed,
        status=unfinished_status(files.root, run_id, planned) if summary is None else finished_status(summary),
        step=last["step"] if last else 0,
        steps=steps,
        seconds_per_step=seconds_per_step(rows),
        elapsed_s=last["elapsed_s"] if last else None,
        metrics=rows,
    )
    if summary is not None:
        run.step = summary.get("diverged_step") or summary.get("steps_done") or run.step
    return run


def finished_status(summary: dict[str, Any]) -> str:
    return "diverged" if summary.get("diverged") or summary.get("status") == "diverged" else "done"


def unfinished_status(folder: Path, run_id: str, planned: frozenset[str]) -> str:
    """A trainer holds the folder's lock while it trains (RunFolder.locked); else the plan decides."""
    if is_locked(folder):
        return "running"
    return "waiting" if run_id in planned else "stopped"


def read_grid(runs_root: str | Path) -> GridProgress:
    """Every run folder under the runs root, and every planned run without one yet."""
    runs_root = Path(runs_root)
    plan = read_plan(runs_root)
    folders = find_run_folders(runs_root) if runs_root.is_dir() else []
    runs = [read_run(folder, runs_root, plan.run_ids) for folder in folders]
    found = {run.run_id for run in runs}
    for run_id in sorted(plan.run_ids - found):
        # not started yet; or its trainer has just made the folder and not yet written config.json
        status = "running" if is_locked(runs_root / run_id) else "waiting"
        runs.append(RunProgress(run_id, *names_of(run_id), status=status, step=0 if status == "running" else None))
    running = workflow_running(workflow_folder(runs_root))
    return GridProgress(runs_root, running, plan, sorted(runs, key=lambda run: run.run_id))


def progress_rows(grid: GridProgress) -> list[dict[str, Any]]:
    """One row per run, for the page's table: the fields a learner reads."""
    rows = []
    for run in grid.runs:
        rows.append(
            {
                "run": run.label,
                "status": run.status,
                "step": run.step,
                "steps": run.steps,
                "done": (run.step or 0) / run.steps if run.steps else None,
                "s_per_step": run.seconds_per_step,
                "eta": eta_words(run, grid.runs),
                "planned": run.run_id in grid.plan.run_ids,
                "problem": run.problem or "",
            }
        )
    return rows


def eta_words(run: RunProgress, runs: list[RunProgress]) -> str:
    """A run's ETA in words; for a waiting run not started, the estimate, marked as one (≈)."""
    if run.status not in UNFINISHED:
        return ""
    if run.status == "waiting" and run.eta_s is None:
        estimate = estimated_duration(run, runs)
        return "—" if estimate is None else f"≈ {duration_words(estimate)}"
    return duration_words(run.eta_s)


def live_metrics(runs: list[RunProgress]) -> list[dict[str, Any]]:
    """The logged rows of these runs, each with its run's label, experiment and seed (the columns
    anatomy.report.chart_data.long_curves reads)."""
    return [
        {**row, "label": run.label, "experiment": run.experiment, "seed": run.seed}
        for run in runs
        for row in run.metrics
    ]
