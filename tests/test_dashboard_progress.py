"""The Progress page and anatomy/results/progress.py: a grid followed from its run folders while it runs.

Run folders are written by hand for each state (done, running with a half-written last line,
diverged, stopped, planned but not started); "running" is real: the test holds the folder's lock
as a trainer does. The plan is Snakemake's lock files, written here as Snakemake writes them.
The ETAs are checked from given elapsed_s values, never from the clock. One slow test follows
the real quick grid while it trains, then stops it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from contextlib import ExitStack, suppress
from pathlib import Path

import pyarrow as pa
import pytest
from streamlit.testing.v1 import AppTest

from guarded_command import GUARD_S
from hang import HANG_S
from anatomy.results import progress
from anatomy.files.locks import held_lock
from anatomy.files.run_folder import RunFolder
from run_folders import write_run_folder

from dashboard_pages import no_reference, open_page, texts  # noqa: F401 (no_reference: a fixture)

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # the dashboard is an app folder, not an installed package
    sys.path.insert(0, str(REPO_ROOT))
from dashboard import loaders  # noqa: E402


def write_run(runs_root: Path, experiment: str, seed: int, elapsed: dict[int, float], steps: int = 100) -> Path:
    """An unfinished run folder: config.json (steps) and one metrics row per logged step, with the
    given elapsed_s."""
    folder = runs_root / experiment / f"seed{seed}"
    folder.mkdir(parents=True)
    config = {"preset": "vanilla", "model": {}, "train": {"steps": steps, "seed": seed}, "data": {}}
    (folder / "config.json").write_text(json.dumps({**config, "tags": {"experiment": experiment}}))
    rows = [
        {"step": step, "train_loss": 3.0, "val_loss": 3.1, "lr": 3e-4, "elapsed_s": s} for step, s in elapsed.items()
    ]
    (folder / "metrics.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    return folder


def pace(seconds_per_step: float, last: int, every: int = 10) -> dict[int, float]:
    """Logged steps up to `last`, at a steady pace."""
    return {step: step * seconds_per_step for step in range(every, last + 1, every)}


def write_plan(workdir: Path, *lines: str) -> None:
    """Snakemake's lock files of a running target: what its jobs read (input) and make (output)."""
    locks = workdir / ".snakemake" / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    (locks / "0.input.lock").write_text("\n".join(lines[1:]) + "\n")
    (locks / "0.output.lock").write_text(lines[0] + "\n")


def by_id(grid: progress.GridProgress) -> dict[str, progress.RunProgress]:
    return {run.run_id: run for run in grid.runs}


# ---------------------------------------------------------------------------------------------
# The arithmetic


def test_seconds_per_step_is_the_recent_pace_from_elapsed_s():
    # 1 s per step up to step 50, then 2 s per step: the last five intervals are all at 2 s
    elapsed = {**pace(1.0, 50), **{step: 50 + (step - 50) * 2.0 for step in range(60, 101, 10)}}
    rows = [{"step": step, "elapsed_s": s} for step, s in elapsed.items()]
    assert progress.seconds_per_step(rows) == pytest.approx(2.0)
    # over all nine intervals: (150 - 10) s over 90 steps
    assert progress.seconds_per_step(rows, intervals=9) == pytest.approx(140 / 90)
    # one row: measured from the run's start (step 0 at 0 s)
    assert progress.seconds_per_step([{"step": 20, "elapsed_s": 5.0}]) == pytest.approx(0.25)
    assert progress.seconds_per_step([]) is None
    assert progress.seconds_per_step([{"step": 20, "elapsed_s": None}]) is None


def test_a_run_eta_is_its_steps_left_at_its_pace():
    assert progress.time_left(40, 100, 0.5) == pytest.approx(30.0)
    assert progress.time_left(100, 100, 0.5) == 0
    assert progress.time_left(40, None, 0.5) is None  # total steps unknown: no ETA


def test_grid_eta_fills_the_lanes_busy_now_with_the_waiting_runs():
    # two lanes free at 10 s and 30 s: the first takes 20 s (-> 30), then 20 s more (-> 50); the
    # lane free at 30 takes the 5 s run (-> 35): done when the last lane is, at 50 s
    assert progress.grid_eta([10.0, 30.0], [20.0, 20.0, 5.0]) == pytest.approx(50.0)
    assert progress.grid_eta([10.0], [20.0, 20.0, 5.0]) == pytest.approx(55.0)  # one lane: all in a row
    assert progress.grid_eta([], [20.0]) is None  # waiting runs, but no lane to count on
    assert progress.grid_eta([], []) == 0.0


def test_durations_in_words():
    assert progress.duration_words(3725) == "1 h 02 min"
    assert progress.duration_words(200) == "3 min 20 s"
    assert progress.duration_words(45.4) == "45 s"
    assert progress.duration_words(None) == "—"


def write_grid_in_progress(runs_root: Path) -> Path:
    """One run done, one diverged, and one running (returned) whose trainer is writing a line."""
    write_run_folder(runs_root, "vanilla", 42, steps=100, train={"steps": 100})
    write_run_folder(
        runs_root, "deep_post_nowarmup", 42, status="diverged", diverged_step=30, steps=100, train={"steps": 100}
    )
    running = write_run(runs_root, "llama", 42, pace(0.5, 40))
    with open(running / "metrics.jsonl", "a") as metrics:
        metrics.write('{"step": 50, "train_loss": 2.9, "val_l')  # the trainer is writing this line
    return running


# ---------------------------------------------------------------------------------------------
# Reading run folders


def test_each_run_state_from_its_folder(tmp_path):
    runs_root = tmp_path / "results" / "runs"
    running = write_grid_in_progress(runs_root)
    write_run(runs_root, "llama", 7, pace(0.5, 20))  # started, not finished, nothing trains it

    with held_lock(running):  # as a trainer holds its folder while it trains
        grid = progress.read_grid(runs_root)
    runs = by_id(grid)
    assert {run_id: run.status for run_id, run in runs.items()} == {
        "vanilla/seed42": "done",
        "deep_post_nowarmup/seed42": "diverged",
        "llama/seed42": "running",
        "llama/seed7": "stopped",
    }
    assert runs["deep_post_nowarmup/seed42"].step == 30  # where it diverged
    live = runs["llama/seed42"]
    assert (live.step, live.steps) == (40, 100)  # the half-written line is not a step
    assert live.seconds_per_step == pytest.approx(0.5)
    assert live.eta_s == pytest.approx(30.0)  # 60 steps left at 0.5 s
    assert [row["step"] for row in progress.live_metrics([live])] == [10, 20, 30, 40]
    assert {row["label"] for row in progress.live_metrics([live])} == {"llama · seed 42"}
    # no Snakemake runs here: nothing waits, and the grid is done when the running run is
    assert not grid.workflow_running and grid.plan.known and not grid.plan.run_ids
    assert grid.eta_s == pytest.approx(30.0)

    grid = progress.read_grid(runs_root)  # the trainer has stopped: its run is stopped too
    assert by_id(grid)["llama/seed42"].status == "stopped" and grid.lanes == 0


def test_a_damaged_folder_is_unreadable_not_a_crash(tmp_path):
    runs_root = tmp_path / "runs"
    folder = write_run(runs_root, "vanilla", 42, pace(0.5, 30))
    lines = (folder / "metrics.jsonl").read_text().splitlines()
    lines[1] = "{not json"  # damage in the middle: no trainer is writing there
    (folder / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    (run,) = progress.read_grid(runs_root).runs
    assert run.status == "unreadable"
    assert "line 2 is not valid JSON" in run.problem


def test_the_plan_of_the_running_snakemake_gives_the_waiting_runs_and_the_grid_eta(tmp_path):
    workdir = tmp_path / "grid"
    runs_root = workdir / "results" / "runs"
    write_run_folder(runs_root, "vanilla", 42, steps=100, train={"steps": 100})  # 0.05 s/step: 5 s a run
    running = write_run(runs_root, "llama", 42, pace(1.0, 40))  # 60 s left
    write_run(runs_root, "llama", 7, pace(0.5, 50))  # interrupted earlier, planned again: 25 s left
    write_run(runs_root, "mqa", 42, pace(0.5, 50))  # unfinished, but this target does not plan it
    write_plan(
        workdir,
        "results/runs/llama/seed7/summary.json",
        "results/runs/vanilla/seed42/summary.json",
        "results/runs/llama/seed42/summary.json",
        "results/runs/llama/seed7/summary.json",
        "results/runs/vanilla/seed7/summary.json",  # not started: no folder yet
        "results/runs/vanilla/seed7/samples.json",  # other files of the plan are no runs
        "results/anatomy.duckdb",
        "results/corpus/train.npy",
    )
    with ExitStack() as held:
        held.enter_context(held_lock(workdir / ".snakemake" / "anatomy.lock"))  # the workflow runs
        held.enter_context(held_lock(running))
        grid = progress.read_grid(runs_root)

    assert grid.workflow_running and grid.plan.known
    assert grid.plan.run_ids == {"vanilla/seed42", "llama/seed42", "llama/seed7", "vanilla/seed7"}
    statuses = {run.run_id: run.status for run in grid.runs}
    assert statuses == {
        "vanilla/seed42": "done",
        "llama/seed42": "running",
        "llama/seed7": "waiting",
        "vanilla/seed7": "waiting",
        "mqa/seed42": "stopped",
    }
    # vanilla/seed7 has not started: it will take as long as its experiment's measured run (5 s)
    waiting = by_id(grid)["vanilla/seed7"]
    assert (waiting.step, waiting.steps) == (None, None)
    assert progress.estimated_duration(waiting, grid.runs) == pytest.approx(5.0)
    # one lane busy: 60 s for llama/seed42, then 25 s and 5 s for the waiting runs, one after the other
    assert grid.lanes == 1
    assert grid.eta_s == pytest.approx(90.0)
    rows = {row["run"]: row for row in progress.progress_rows(grid)}
    assert rows["vanilla · seed 7"]["eta"] == "≈ 5 s" and rows["vanilla · seed 7"]["planned"]
    assert rows["llama · seed 42"]["eta"] == "1 min 00 s"
    assert not rows["mqa · seed 42"]["planned"]


def test_without_a_readable_plan_the_grid_says_so_rather_than_guessing(tmp_path):
    workdir = tmp_path / "grid"
    runs_root = workdir / "results" / "runs"
    running = write_run(runs_root, "llama", 42, pace(1.0, 40))
    with held_lock(workdir / ".snakemake" / "anatomy.lock"), held_lock(running):
        grid = progress.read_grid(runs_root)  # Snakemake runs, but has written no lock files
    assert grid.workflow_running and not grid.plan.known
    assert "cannot be read" in grid.plan.note()
    assert grid.eta_s is None  # the runs still to come are unknown
    assert by_id(grid)["llama/seed42"].eta_s == pytest.approx(60.0)  # each running run still has its own

    # a runs folder that is not a workflow's results/runs: no workflow plans it
    elsewhere = tmp_path / "my_runs"
    write_run(elsewhere, "llama", 42, pace(1.0, 40))
    grid = progress.read_grid(elsewhere)
    assert not grid.plan.known and "not a workflow's results/runs folder" in grid.plan.note()


def read_grid_or_fail(runs_root: Path, pipes: list[Path]) -> progress.GridProgress:
    """progress.read_grid, in a thread of its own: were it to wait on one of the named pipes, the
    test writes to them (so the reader gets on) and fails, rather than hang for good."""
    found = []
    reader = threading.Thread(target=lambda: found.append(progress.read_grid(runs_root)), daemon=True)
    reader.start()
    reader.join(GUARD_S)
    if reader.is_alive():
        for pipe in pipes:
            with suppress(OSError):
                os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        pytest.fail(f"read_grid still ran after {GUARD_S} s: it waits on a named pipe")
    return found[0]


def test_a_named_pipe_in_a_run_folder_or_among_the_lock_files_is_no_hang(tmp_path):
    """The page reads the folders every few seconds: a named pipe there (`metrics.jsonl`, a lock
    file of Snakemake's) would make it wait for good. The run is unreadable, said in one line."""
    workdir = tmp_path / "grid"
    runs_root = workdir / "results" / "runs"
    write_run(runs_root, "llama", 42, pace(1.0, 40))
    metrics = write_run(runs_root, "vanilla", 42, pace(1.0, 40)) / "metrics.jsonl"
    metrics.unlink()
    os.mkfifo(metrics)
    write_plan(workdir, "results/runs/llama/seed42/summary.json")
    lock_pipe = workdir / ".snakemake" / "locks" / "1.input.lock"
    os.mkfifo(lock_pipe)
    with held_lock(workdir / ".snakemake" / "anatomy.lock"):
        grid = read_grid_or_fail(runs_root, [metrics, lock_pipe])
    unreadable = by_id(grid)["vanilla/seed42"]
    assert unreadable.status == "unreadable"
    assert unreadable.problem == (
        f"{metrics}: is not a regular file (a named pipe): expected the metrics anatomy train logs"
    )
    assert grid.plan.known and grid.plan.run_ids == {"llama/seed42"}  # the lock files that are files


# ---------------------------------------------------------------------------------------------
# The page


def chart_steps(app: AppTest) -> set[tuple[str, int]]:
    """(run, step) of every point of the page's charts."""
    points = set()
    for chart in app.get("vega_lite_chart"):
        for dataset in chart.proto.datasets:
            table = pa.ipc.open_stream(dataset.data.data).read_all().to_pandas()
            points |= set(zip(table["label"], table["step"]))
    return points


def test_the_page_shows_the_runs_and_the_running_curves_without_a_database(tmp_path, monkeypatch):
    """Before the first collect there is no database: the page reads the folders beside it."""
    running = write_grid_in_progress(tmp_path / "results" / "runs")
    with held_lock(running):
        app = open_page(tmp_path / "results" / "anatomy.duckdb", "progress", monkeypatch)

    metrics = {m.label: m.value for m in app.metric}
    assert (metrics["done"], metrics["running"], metrics["diverged"], metrics["waiting"]) == ("1", "1", "1", "0")
    table = app.dataframe[0].value.set_index("run")
    assert table.loc["llama · seed 42", ["status", "step", "steps"]].tolist() == ["running", 40, 100]
    assert table.loc["llama · seed 42", "eta"] == "30 s"
    assert table.loc["deep_post_nowarmup · seed 42", "status"] == "diverged"
    assert any("deep_post_nowarmup · seed 42 diverged" in str(e.value) for e in app.error)
    # the curve is the running run's, as far as it has logged: not the finished runs'
    assert chart_steps(app) == {("llama · seed 42", step) for step in (10, 20, 30, 40)}
    assert "No Snakemake is running" in texts(app)
    assert app.toggle(key="progress_auto").value  # refreshing by itself, unless turned off

    app.toggle(key="progress_auto").set_value(False).run()  # the run has stopped meanwhile
    assert not app.exception
    assert app.dataframe[0].value.set_index("run").loc["llama · seed 42", "status"] == "stopped"
    assert "No run is training right now" in texts(app)


def test_the_page_with_no_run_started_says_so(tmp_path, monkeypatch):
    app = open_page(tmp_path / "results" / "anatomy.duckdb", "progress", monkeypatch)
    assert "No run has started" in texts(app)


def test_the_reference_results_have_nothing_running(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a folder where no grid of one's own has run
    app = open_page(loaders.REFERENCE_DB, "progress", monkeypatch)
    assert "nothing of them is running" in texts(app)
    assert not app.dataframe

    # once a grid of one's own runs here, the page follows it even while the reference is chosen
    write_run(tmp_path / "results" / "runs", "vanilla", 42, pace(0.5, 20))
    app = open_page(loaders.REFERENCE_DB, "progress", monkeypatch)
    assert "nothing of them is running" in texts(app)
    assert app.dataframe[0].value["run"].tolist() == ["vanilla · seed 42"]


# ---------------------------------------------------------------------------------------------
# The real quick grid, followed while it trains


def process_group_gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


def poll(condition, process: subprocess.Popen, timeout: float = HANG_S):
    """Poll until `condition()` gives something; fails if the grid ends or the time runs out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if found := condition():
            return found
        assert process.poll() is None, "the grid ended before the moment came"
        time.sleep(0.05)
    raise AssertionError("the moment did not come in time")


@pytest.mark.slow
def test_the_real_quick_grid_is_followed_while_it_trains(tmp_path):
    """The quick headline grid (2 lanes, 4 runs), long enough to be watched: a running run's step
    grows between two reads, the plan is the target's runs, and SIGTERM stops it all cleanly."""
    shutil.copytree(REPO_ROOT / "data" / "posts", tmp_path / "data" / "posts")
    longer = tmp_path / "longer.yaml"  # quick's tiny model, but steps enough to be seen training
    longer.write_text("train_overrides: {steps: 20000, eval_every: 10, batch_size: 8, warmup_steps: 5}\n")
    command = [
        *(sys.executable, "-m", "snakemake", "--snakefile", str(REPO_ROOT / "workflow" / "Snakefile")),
        *("--directory", str(tmp_path), "headline", "--cores", "2"),
        *("--configfile", str(REPO_ROOT / "workflow" / "quick.yaml"), str(longer)),
    ]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("ANATOMY_LIFELINE", None)  # the workflow under test sets its own
    runs_root = tmp_path / "results" / "runs"
    process = subprocess.Popen(
        command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:

        def a_run_with_a_logged_step():
            grid = progress.read_grid(runs_root)
            return next((run for run in grid.with_status("running") if run.step), None)

        first = poll(a_run_with_a_logged_step, process)

        def the_same_run_further():
            run = by_id(progress.read_grid(runs_root)).get(first.run_id)
            return run if run is not None and run.step > first.step else None

        later = poll(the_same_run_further, process)
        assert later.status == "running" and later.steps == 20000
        assert later.metrics[-1]["step"] == later.step  # its curve grows with it

        grid = progress.read_grid(runs_root)
        headline = {f"{name}/seed{seed}" for name in ("vanilla", "llama") for seed in (42, 7)}
        assert grid.workflow_running and grid.plan.known and grid.plan.run_ids == headline
        assert {run.run_id for run in grid.runs} == headline
        assert 1 <= grid.lanes <= 2  # --cores 2, one thread per run
        assert {run.status for run in grid.runs} <= {"running", "waiting"}

        os.killpg(process.pid, signal.SIGTERM)  # Snakemake and its trainers
        process.wait(timeout=120)
        deadline = time.monotonic() + 120
        while not process_group_gone(process.pid):
            assert time.monotonic() < deadline, "a job of the stopped grid is still running"
            time.sleep(0.05)
    finally:  # whatever failed, leave nothing of the grid running
        if not process_group_gone(process.pid):
            os.killpg(process.pid, signal.SIGKILL)

    grid = progress.read_grid(runs_root)  # stopped: nothing runs, nothing waits
    assert not grid.workflow_running and grid.lanes == 0
    assert by_id(grid)[first.run_id].status == "stopped"
    assert {run.status for run in grid.runs} <= {"stopped"}
    assert RunFolder(runs_root / first.run_id).last.is_file()  # it resumes from here when started again
