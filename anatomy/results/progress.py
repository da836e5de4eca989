"""How far a grid has got while it runs, read straight from its files (the Progress page).

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

What the running Snakemake plans is the plan the workflow wrote when it started
(results/plan.json, anatomy/files/plan.py): every job its targets need, with its rule and run.
A job is done when the file it makes is there (collecting and the report, made again at the end
of every run: when newer than the plan). The grid's ETA counts every job left, training,
sampling, the exams, collecting and the report, each as long as the jobs of its kind took here
(Snakemake's benchmark files, results/benchmarks/RULE/...), on as many lanes as the plan says.
When the plan cannot be read, `Plan.known` is False and the page says so instead of guessing.
Only regular files are read (a named pipe in a run folder would make the page wait for good):
anything else there is unreadable, in words.

No Streamlit here: the page only draws what these functions return, and tests call them directly.
"""

from __future__ import annotations

import csv
import heapq
import io
import math
import os
import re
import time
from base64 import urlsafe_b64decode
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from anatomy.errors import AnatomyError
from anatomy.language import N_, _, join_list, ngettext, pgettext
from anatomy.files.locks import is_locked
from anatomy.files.plan import PLAN_FILE, PlannedJob, read_plan_file
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
# Snakemake marks a job's output incomplete when it starts the job (a file here named by the
# output's path, URL-safe base64) and removes the mark when the job ends: the only sign that a
# job other than a training is running, and since when.
SNAKEMAKE_INCOMPLETE = Path(".snakemake") / "incomplete"
SEED_FOLDER = re.compile(r"seed(\d+)")

# The kind of work each rule of the workflow does, as the page counts the jobs left.
JOB_KINDS = {
    "train_model": "training",
    "generate_samples": "sampling",
    "exam_length": "exams",
    "exam_kv_cache": "exams",
    "exam_depth_cell": "exams",  # a 12-layer training run, in results/exams/depth/{cell}/
    "exam_wall_clock": "exams",
    "exam_qk_norm_cell": "exams",  # training runs too, in results/exams/qk_norm/{cell}/
    "exam_mla_cell": "exams",
    "exam_moe": "exams",
    "collect_results": "collect",
    "write_report": "report",
}
KIND_ORDER = ("training", "sampling", "exams", "collect", "report")
# the rules that train a model (their benchmarks time a training, not a job after one)
TRAINING_RULES = ("train_model", "exam_depth_cell")
# jobs that follow their run's training (sampling and the exams of one run read its weights)
AFTER_TRAINING = ("generate_samples", "exam_length", "exam_kv_cache")
# made again at the end of every run of the workflow: done only once newer than its plan
FINAL_RULES = ("collect_results", "write_report")


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
        """The run's name as the page shows it, in the reader's language."""
        return run_label(self.experiment, self.seed, translated=True)

    @property
    def eta_s(self) -> float | None:
        """Seconds of training left after its last logged step, at its recent pace (None: unknown)."""
        if self.status not in UNFINISHED:
            return None
        return time_left(self.step, self.steps, self.seconds_per_step)


@dataclass(frozen=True)
class Plan:
    """What the running Snakemake will do (its jobs, done or not), if that can be known."""

    known: bool
    jobs: tuple[PlannedJob, ...]
    sentence: str  # what is known and why, marked with N_: `note` puts it in words
    folder: Path  # the folder it names
    lanes: int | None = None  # jobs side by side (None: a cluster's, or unknown)
    written_s: float | None = None  # when the plan was written
    problem: str = ""  # why it cannot be read, for the sentence

    @property
    def run_ids(self) -> frozenset[str]:
        """The runs the plan trains (run ids)."""
        return frozenset(job.run for job in self.jobs if job.rule == "train_model" and job.run)

    def note(self, show: Callable[[Any], str] = str) -> str:
        """What is known and why, in the reader's language; `show` writes the folder and the
        problem (the page: as text, never as Markdown, since a folder's name is anyone's, and so
        are the targets a problem names)."""
        problem = show(self.problem) if self.problem else ""
        return _(self.sentence).format(
            folder=show(self.folder), count=len(self.run_ids), plan=show(PLAN_FILE), problem=problem
        )


@dataclass(frozen=True)
class GridEta:
    """The grid's ETA: every job left of the plan, how long each takes, on the plan's lanes."""

    seconds: float | None  # None: cannot be estimated (no lanes to count on)
    left: dict[str, int]  # kind (JOB_KINDS) -> jobs left, running ones included
    training_now: int  # trainings running now
    untimed: tuple[str, ...]  # kinds left of which no job has been timed yet: counted as 0 s
    lanes: int | None


@dataclass
class GridProgress:
    runs_root: Path
    workflow_running: bool
    plan: Plan
    runs: list[RunProgress]
    # rule -> job -> the wall seconds it took (Snakemake's benchmark files beside the runs folder)
    timed: dict[str, dict[str, float]] = field(default_factory=dict)
    # output -> seconds its job has run, for the planned jobs Snakemake is running now (jobs_running)
    running_for: dict[str, float] = field(default_factory=dict)

    def with_status(self, *statuses: str) -> list[RunProgress]:
        return [run for run in self.runs if run.status in statuses]

    @property
    def lanes(self) -> int:
        """Runs training side by side right now."""
        return len(self.with_status("running"))

    @property
    def start_up_s(self) -> float:
        """What a training job costs here beside its steps (training_start_up_s)."""
        return training_start_up_s(self.runs, self.timed.get("train_model"))

    @property
    def eta(self) -> GridEta | None:
        """Every job left of the plan and when they will be done (None: no Snakemake runs, or its
        plan cannot be read: the jobs still to come are unknown)."""
        if not (self.workflow_running and self.plan.known):
            return None
        return grid_eta(self)

    @property
    def eta_s(self) -> float | None:
        """Seconds until every job of the plan is done (None: cannot be estimated)."""
        eta = self.eta
        return None if eta is None else eta.seconds


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


def mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


def estimated_duration(
    run: RunProgress, runs: list[RunProgress], timed: dict[str, float] | None = None, start_up_s: float = 0.0
) -> float | None:
    """Seconds a waiting run's training job will still take. One that started earlier: its own
    steps left at its own pace. One not started: as long as the finished training jobs of its
    experiment took (`timed`: run id -> the wall seconds of its job, Snakemake's benchmark, start-up
    included), else its experiment's measured runs at their pace; else the same over every run (a
    guess, which the page says). A measured pace counts the steps alone: `start_up_s`, what a
    training job costs beside its steps here (training_start_up_s), is added to it."""
    own = time_left(run.step or 0, run.steps, run.seconds_per_step)
    if own is not None:
        return own + start_up_s
    timed = timed or {}
    paced = [(other.experiment, whole_run_s(other)) for other in runs if other is not run]
    paced = [(experiment, seconds + start_up_s) for experiment, seconds in paced if seconds is not None]
    pools = (
        [seconds for run_id, seconds in timed.items() if names_of(run_id)[0] == run.experiment],
        [seconds for experiment, seconds in paced if experiment == run.experiment],
        list(timed.values()),
        [seconds for _experiment, seconds in paced],
    )
    return next((mean(pool) for pool in pools if pool), None)


def training_start_up_s(runs: list[RunProgress], timed: dict[str, float] | None) -> float:
    """What a training job costs here beside its steps (starting Python and torch, reading the
    tokens, measuring its memory, saving its weights): its benchmark's wall seconds less the
    training time its run logged, over the finished runs timed both ways; 0 before one is. On the
    quick grid this is most of a job (some 10-25 s of 17-35 s, against 7 s of steps)."""
    timed = timed or {}
    costs = [
        timed[run.run_id] - run.elapsed_s
        for run in runs
        if run.status == "done" and run.run_id in timed and run.elapsed_s is not None
    ]
    return max(mean(costs) or 0.0, 0.0)


def whole_run_s(run: RunProgress) -> float | None:
    """How long a whole run of its kind trains: all its steps at its measured pace."""
    if run.status == "diverged":
        return None  # stopped early: no measure of a whole run
    return time_left(0, run.steps, run.seconds_per_step)


@dataclass(frozen=True)
class Job:
    """A job left, for the schedule: its seconds, and the jobs it waits for (their keys)."""

    key: str
    seconds: float
    after: tuple[str, ...] = ()


def schedule(lanes: int, running: dict[str, float], queued: list[Job]) -> float:
    """Seconds until every job is done, on `lanes` lanes: the running jobs (key -> seconds left)
    keep their lanes; each queued job, in order, goes to the lane free first once the jobs it
    waits for are done, as Snakemake starts a job when a core frees up and its input is there."""
    free = [0.0] * max(lanes - len(running), 0) + list(running.values())
    heapq.heapify(free)
    done_at = dict(running)
    pending = list(queued)
    while pending:
        ready = [job for job in pending if all(key in done_at for key in job.after)]
        if not ready:
            raise ValueError(f"jobs that wait for jobs never scheduled: {[job.key for job in pending]}")
        # the one that can start first, in plan order among equals
        job = min(ready, key=lambda job: max((done_at[key] for key in job.after), default=0.0))
        start = max(heapq.heappop(free), max((done_at[key] for key in job.after), default=0.0))
        done_at[job.key] = start + job.seconds
        heapq.heappush(free, done_at[job.key])
        pending.remove(job)
    return max(done_at.values(), default=0.0)


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
    """What the Snakemake running on this runs folder plans: the plan it wrote when it started."""
    workdir = workflow_folder(runs_root)
    if workdir is None:
        return Plan(False, (), N_("{folder} is not a workflow's results/runs folder: no plan to read."), runs_root)
    if not workflow_running(workdir):
        return Plan(True, (), N_("No Snakemake is running in {folder}: nothing is planned."), workdir)
    path = workdir / PLAN_FILE
    if not path.exists():
        not_yet = N_(
            "A Snakemake is running in {folder}, but has not written its plan ({plan}) yet: it does once it has "
            "planned its jobs. Runs it has not started are not shown."
        )
        return Plan(False, (), not_yet, workdir)
    try:
        plan = read_plan_file(path)
    except (AnatomyError, OSError) as err:  # OSError: replaced between two reads
        damaged = N_("A Snakemake is running in {folder}, but its plan cannot be read: {problem}")
        return Plan(False, (), damaged, workdir, problem=str(err))
    if plan.jobs is None:
        unlisted = N_(
            "A Snakemake is running in {folder} for targets its plan cannot list ({problem}): runs it has not "
            "started are not shown."
        )
        return Plan(False, (), unlisted, workdir, problem=", ".join(plan.targets))
    sentence = N_("The Snakemake running in {folder} plans {count} runs.")
    return Plan(True, plan.jobs, sentence, workdir, lanes=plan.lanes, written_s=plan.written_s)


def job_left(job: PlannedJob, workdir: Path, written_s: float | None) -> bool:
    """Whether a planned job still has to run: the file it makes is not there yet (collecting and
    the report: not since the plan was written, as every run of the workflow ends with them)."""
    try:
        made = (workdir / job.output).stat().st_mtime
    except OSError:
        return True
    return job.rule in FINAL_RULES and written_s is not None and made < written_s


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
    timed = timed_jobs(runs_root.parent / "benchmarks")
    running_for = jobs_running(plan, time.time()) if running and plan.known else {}
    return GridProgress(runs_root, running, plan, sorted(runs, key=lambda run: run.run_id), timed, running_for)


def jobs_running(plan: Plan, now: float) -> dict[str, float]:
    """Output -> seconds its job has run, for each planned job that Snakemake has started since it
    wrote the plan and not finished: its output, or a folder holding it (the report's), is marked
    in SNAKEMAKE_INCOMPLETE. A mark older than the plan is a job of an interrupted run, not started
    again yet. Should a later Snakemake mark its jobs another way, no mark is found and each job
    left counts whole, as it did before."""
    marked = started_marks(plan.folder / SNAKEMAKE_INCOMPLETE)
    running: dict[str, float] = {}
    for job in plan.jobs:
        output = PurePosixPath(job.output)
        started = next((marked[str(path)] for path in (output, *output.parents) if str(path) in marked), None)
        if started is not None and (plan.written_s is None or started >= plan.written_s):
            running[job.output] = max(now - started, 0.0)
    return running


def started_marks(folder: Path) -> dict[str, float]:
    """Marked path -> when its job started (the mark's mtime: written once, when the job starts)."""
    marks: dict[str, float] = {}
    try:
        entries = list(os.scandir(folder))
    except OSError:  # no folder: no job started yet
        return marks
    for entry in entries:
        try:
            marks[urlsafe_b64decode(entry.name).decode()] = entry.stat().st_mtime
        except (OSError, ValueError):  # gone since listed, or not a mark (a long name's folder)
            continue
    return marks


# ---------------------------------------------------------------------------------------------
# The grid's ETA: every job left of the plan


def benchmark_seconds(path: Path) -> float | None:
    """The wall seconds of one job, from its Snakemake benchmark file (the `s` column of its
    first row); None for a file that is not one, or not yet whole."""
    try:
        rows = list(csv.DictReader(io.StringIO(read_small_file(path, "a Snakemake benchmark file")), delimiter="\t"))
        seconds = float(rows[0]["s"])
    except (AnatomyError, OSError, IndexError, KeyError, TypeError, ValueError):
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def timed_jobs(benchmarks_root: Path) -> dict[str, dict[str, float]]:
    """Rule -> job -> wall seconds, from results/benchmarks/RULE/JOB.tsv (job: vanilla/seed42)."""
    timed: dict[str, dict[str, float]] = {}
    if not benchmarks_root.is_dir():
        return timed
    for path in sorted(benchmarks_root.rglob("*.tsv")):
        parts = path.relative_to(benchmarks_root).with_suffix("").parts
        seconds = benchmark_seconds(path) if len(parts) > 1 else None
        if seconds is not None:
            timed.setdefault(parts[0], {})["/".join(parts[1:])] = seconds
    return timed


def training_left(folder: Path) -> float | None:
    """Seconds of training left of a job training in `folder` now (a depth-map cell), at its pace."""
    try:
        files = RunFolder(folder)
        config = read_json_object(files.config, "a run's settings")
        rows = read_metrics(files.metrics, folder.name, finished=False)
    except (AnatomyError, OSError):
        return None
    train = config.get("train") if isinstance(config.get("train"), dict) else {}
    steps = train.get("steps") if isinstance(train.get("steps"), int) else None
    return time_left(rows[-1]["step"] if rows else 0, steps, seconds_per_step(rows))


def grid_eta(grid: GridProgress) -> GridEta:
    """Every job of the plan not done yet, timed, then scheduled on the plan's lanes.

    A training running now takes its steps left at its pace; one waiting, as long as its
    experiment's trainings took (estimated_duration). Every other job takes as long as the jobs
    of its rule took here (their benchmarks); one of a rule not timed yet, as long as the quickest
    other job after training took (a_job_after_training_s). Counting those as 0 s made the
    quick grid's ETA half its real time. Only when nothing is timed yet does a kind count as
    0 s, and `untimed` says so. Sampling and a run's exams wait for its training; collecting
    waits for everything, the report for collecting."""
    workdir = grid.plan.folder
    left = [job for job in grid.plan.jobs if job_left(job, workdir, grid.plan.written_s)]
    runs = {run.run_id: run for run in grid.runs}
    trainings = {job.run: job.output for job in left if job.rule == "train_model"}
    stand_in = a_job_after_training_s(grid.timed, grid.start_up_s)
    running: dict[str, float] = {}
    queued: list[Job] = []
    untimed: set[str] = set()
    for job in left:
        seconds, is_running = job_seconds(job, workdir, runs, grid, stand_in)
        if seconds is None:
            seconds = stand_in
        if seconds is None:
            untimed.add(JOB_KINDS.get(job.rule, job.rule))
            seconds = 0.0
        if is_running:
            running[job.output] = seconds
        elif job.rule in FINAL_RULES:
            # collecting waits for every other job; the report for collecting
            before = [other.output for other in left if other.rule not in FINAL_RULES]
            if job.rule == "write_report":
                before = [other.output for other in left if other.rule == "collect_results"]
            queued.append(Job(job.output, seconds, tuple(before)))
        else:
            waits_for = trainings.get(job.run) if job.rule in AFTER_TRAINING else None
            queued.append(Job(job.output, seconds, (waits_for,) if waits_for else ()))
    counts: dict[str, int] = {}
    for job in left:
        kind = JOB_KINDS.get(job.rule, job.rule)
        counts[kind] = counts.get(kind, 0) + 1
    lanes = grid.plan.lanes
    seconds = None if lanes is None else schedule(max(lanes, len(running)), running, queued)
    training_now = sum(1 for job in left if job.rule == "train_model" and job.output in running)
    return GridEta(seconds, counts, training_now, tuple(sorted(untimed, key=kind_rank)), lanes)


def a_job_after_training_s(timed: dict[str, dict[str, float]], start_up_s: float) -> float | None:
    """How long a job of a kind not timed yet is taken to last: as long as the quickest job here
    that was not a training (sampling, an exam, collecting: each starts Python and loads what
    training made, most of such a job on a small grid), else half a training job's start-up; None
    before either is known. The quickest, not the mean: collecting takes a fraction of a sampling.
    Half, because a training's start-up also reads the tokens, measures its memory and saves its
    weights: on the quick grid a sampling took 3.0 s, collecting 0.8 and the report 2.7, against a
    start-up of 5.2 s (2026-12-05, a 2-core Xeon, medians of one grid)."""
    others = [seconds for rule, jobs in timed.items() if rule not in TRAINING_RULES for seconds in jobs.values()]
    return min(others, default=None) or (start_up_s / 2 or None)


def kind_rank(kind: str) -> int:
    return KIND_ORDER.index(kind) if kind in KIND_ORDER else len(KIND_ORDER)


def job_seconds(
    job: PlannedJob, workdir: Path, runs: dict[str, RunProgress], grid: GridProgress, stand_in: float | None
) -> tuple[float | None, bool]:
    """(seconds the job has left or will take, None if nothing to time it by; whether it runs now).
    A training running now takes its steps left at its pace; any other job running, what its rule's
    jobs took here less the time it has run (a sampling counted whole however long it had run kept
    the ETA still for seconds at a time, and twice the time left at the grid's end)."""
    timed = grid.timed
    if job.rule == "train_model" and job.run in runs:
        run = runs[job.run]
        trained = timed.get("train_model", {})
        if run.status == "running" and run.eta_s is not None:
            return run.eta_s, True
        whole = estimated_duration(run, grid.runs, trained, grid.start_up_s)
        if run.status == "running" or job.output in grid.running_for:
            # starting up (Python, torch, the tokens: no step logged, maybe no lock taken yet): a
            # whole job, less the time Snakemake says it has run
            ran = grid.running_for.get(job.output, 0.0)
            return (None if whole is None else max(whole - ran, 0.0)), True
        return whole, False
    if job.rule == "exam_depth_cell":
        folder = (workdir / job.output).parent
        if is_locked(folder):
            left = training_left(folder)
            return (left if left is not None else mean(list(timed.get(job.rule, {}).values()))), True
    typical = mean(list(timed.get(job.rule, {}).values()))
    if job.output in grid.running_for:
        whole = typical if typical is not None else stand_in
        return (None if whole is None else max(whole - grid.running_for[job.output], 0.0)), True
    return typical, False


# ---------------------------------------------------------------------------------------------
# In words, for the page


def work_left_words(eta: GridEta) -> str:
    """What the grid is waiting on, in one sentence: "Left: training 3 runs (2 now) and sampling
    3 runs, then collecting and the report." Empty when nothing is left."""
    counts = eta.left
    work = []
    if counts.get("training"):
        n = counts["training"]
        if eta.training_now:
            work.append(
                ngettext("training {count} run ({now} now)", "training {count} runs ({now} now)", n).format(
                    count=n, now=eta.training_now
                )
            )
        else:
            work.append(ngettext("training {count} run", "training {count} runs", n).format(count=n))
    if counts.get("sampling"):
        n = counts["sampling"]
        work.append(ngettext("sampling {count} run", "sampling {count} runs", n).format(count=n))
    if counts.get("exams"):
        n = counts["exams"]
        work.append(ngettext("{count} exam", "{count} exams", n).format(count=n))
    final = FINAL_WORDS.get((bool(counts.get("collect")), bool(counts.get("report"))))
    if work and final:
        return _("Left: {work}, then {final}.").format(work=join_list(work), final=_(final))
    if work:
        return _("Left: {work}.").format(work=join_list(work))
    if final:
        return _("Left: {final}.").format(final=_(final))
    return ""


# (collecting left, report left) -> the last steps, as the sentence ends
FINAL_WORDS = {
    (True, True): N_("collecting the results and writing the report"),
    (True, False): N_("collecting the results"),
    (False, True): N_("writing the report"),
}


def untimed_words(eta: GridEta) -> str:
    """Which kinds of work the ETA could not time yet (counted as 0 s), in one sentence."""
    if not eta.untimed:
        return ""
    names = [kind_words(kind) for kind in eta.untimed]
    return _("Not counted yet, as none has finished here to time it: {work}.").format(work=join_list(names))


def kind_words(kind: str) -> str:
    """A kind of work (JOB_KINDS), as a list in a sentence names it: short words, each with its context."""
    names = {
        # TRANSLATORS: kinds of work a running grid still has to do, listed in one sentence
        "training": pgettext("work a grid does", "training"),
        "sampling": pgettext("work a grid does", "sampling"),
        "exams": pgettext("work a grid does", "the exams"),
        "collect": pgettext("work a grid does", "collecting"),
        "report": pgettext("work a grid does", "the report"),
    }
    return names.get(kind, kind)


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
                # a run not started has done nothing yet, whatever its steps
                "done": (run.step or 0) / run.steps if run.steps else (0.0 if run.status == "waiting" else None),
                "s_per_step": run.seconds_per_step,
                "eta": eta_words(run, grid.runs, grid.timed.get("train_model"), grid.start_up_s),
                "planned": run.run_id in grid.plan.run_ids,
                "problem": run.problem or "",
            }
        )
    return rows


def eta_words(
    run: RunProgress, runs: list[RunProgress], trained: dict[str, float] | None = None, start_up_s: float = 0.0
) -> str:
    """A run's ETA in words; for a waiting run not started, the estimate, marked as one (≈)
    (trained: run id -> the seconds its training job took; start_up_s: training_start_up_s)."""
    if run.status not in UNFINISHED:
        return ""
    if run.status == "waiting" and run.eta_s is None:
        estimate = estimated_duration(run, runs, trained, start_up_s)
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
