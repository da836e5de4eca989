"""The SLURM profile against a real SLURM cluster: one node on this machine (tests/slurm_cluster.py).

The profile is adapted as a user adapts it to their cluster (partition, no GPU on a GPU-less
node, the node's CPUs and memory) and runs the quick headline: training jobs go through sbatch,
and the database holds the same numbers as the same target run locally. Also: a job failing on
the cluster is reported with its SLURM log, and a job killed at its time limit resumes from its
checkpoint when the grid is started again.

Needs root and Debian's slurm-wlm and munge (.ci/run installs them); skipped otherwise.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
import yaml

from hang import HANG_S
from slurm_cluster import (
    PARTITION,
    job_states,
    kill_processes_under,
    missing_reason,
    slurm_cluster,
    submitted_jobs,
)
from test_workflow import REPO, WORKFLOW, snakemake, snakemake_command, snakemake_env

WHY_NOT = missing_reason()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(WHY_NOT is not None, reason=str(WHY_NOT))]

QUICK = ("--configfile", str(WORKFLOW / "quick.yaml"))
HEADLINE_RUNS = {(name, seed) for name in ("vanilla", "llama") for seed in (42, 7)}
# Columns that measure time rather than compute a result: they differ between any two runs.
WALL_CLOCK = {"runs": {"step_time_s", "tokens_per_s"}, "metrics": {"elapsed_s"}}
# Of a Snakemake benchmark record only which job it belongs to is a result; the rest is measured.
BENCHMARK_KEYS = ("rule", "job", "run_id", "repeat")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with slurm_cluster(tmp_path_factory.mktemp("slurm")) as conf:
        yield conf


@pytest.fixture
def no_leftover_processes(tmp_path):
    """After the test, kill what still runs in its folder (a frozen job's process can escape SLURM)."""
    yield
    kill_processes_under(tmp_path)


def test_leftover_processes_in_a_folder_are_killed_and_others_kept(tmp_path):
    inside, outside = tmp_path / "project", tmp_path.parent
    inside.mkdir()
    frozen = subprocess.Popen(["sleep", "600"], cwd=inside)
    elsewhere = subprocess.Popen(["sleep", "600"], cwd=outside)
    try:
        frozen.send_signal(signal.SIGSTOP)  # as the time-limit test leaves its job
        assert kill_processes_under(inside) == [frozen.pid]
        assert frozen.wait(timeout=10) == -signal.SIGKILL
        assert elsewhere.poll() is None
    finally:
        for process in (frozen, elsewhere):
            process.kill()
            process.wait()


def adapted_profile(folder: Path, retries: int | None = None, train_minutes: int | None = None) -> Path:
    """workflow/profiles/slurm as a user adapts it to this cluster (docs/cluster.md)."""
    settings = yaml.safe_load((WORKFLOW / "profiles" / "slurm" / "config.yaml").read_text(encoding="utf-8"))
    training = settings["set-resources"]["train_model"]
    # The partition names of this cluster.
    settings["default-resources"]["slurm_partition"] = PARTITION
    training["slurm_partition"] = PARTITION
    # A cluster without GPUs: sbatch refuses a job that asks for one.
    del training["gpu"]
    # A small node on a machine the tests share: one thread and a little memory per run.
    training["cpus_per_task"] = settings["set-threads"]["train_model"] = 1
    training["mem_mb"] = settings["default-resources"]["mem_mb"] = 1000
    if train_minutes is not None:
        training["runtime"] = train_minutes
    if retries is not None:
        settings["retries"] = retries
    # A cluster without accounting (no slurmdbd): job states from squeue, not sacct.
    settings["slurm-status-command"] = "squeue"
    # The plugin's first status check comes after 40 s; these jobs take seconds.
    settings["slurm-init-seconds-before-status-checks"] = 5
    profile = folder / "profile"
    profile.mkdir()
    (profile / "config.yaml").write_text(yaml.safe_dump(settings), encoding="utf-8")
    return profile


def project(folder: Path) -> Path:
    """A working directory holding the default posts."""
    shutil.copytree(REPO / "data" / "posts", folder / "data" / "posts")
    return folder


def table_rows(db, table: str, columns: list[str]) -> list[tuple]:
    quoted = ", ".join(f'"{column}"' for column in columns)
    return sorted(db.sql(f"SELECT {quoted} FROM {table}").fetchall(), key=repr)


def results_without_wall_clock(path: Path) -> dict[str, list[tuple]]:
    """Every table of a database, minus what measures time."""
    import duckdb

    with duckdb.connect(str(path), read_only=True) as db:
        found = {}
        for table in ("runs", "metrics", "samples"):
            columns = [
                name for name, *_ in db.sql(f"DESCRIBE {table}").fetchall() if name not in WALL_CLOCK.get(table, set())
            ]
            found[table] = table_rows(db, table, columns)
        found["benchmarks"] = table_rows(db, "benchmarks", list(BENCHMARK_KEYS))
    return found


def training_jobs_on_the_cluster(output: str) -> dict[tuple[str, int], str]:
    """(experiment, seed) -> SLURM job id of each training job the cluster ran to completion."""
    jobs = submitted_jobs(output)
    assert jobs, output[-3000:]
    done = {}
    for job_id, (state, comment) in job_states(jobs).items():
        match = re.fullmatch(r"rule_train_model_wildcards_(\w+)_(\d+)", comment)
        assert match and state == "COMPLETED", (job_id, state, comment)
        done[(match.group(1), int(match.group(2)))] = job_id
    return done


def test_quick_headline_through_the_slurm_profile_matches_a_local_run(cluster, tmp_path):
    local = project(tmp_path / "local")
    result = snakemake(local, "headline", "--cores", "2", *QUICK)
    assert result.returncode == 0, result.stderr[-5000:]

    on_slurm = project(tmp_path / "slurm")
    result = snakemake(on_slurm, "headline", "--profile", str(adapted_profile(tmp_path)), *QUICK)
    output = result.stdout + result.stderr
    assert result.returncode == 0, output[-5000:]
    # Every training run was a SLURM job that completed, and nothing else was: the seconds-long
    # steps (corpus, samples, collect) ran where Snakemake runs.
    assert set(training_jobs_on_the_cluster(output)) == HEADLINE_RUNS
    assert len(submitted_jobs(output)) == len(HEADLINE_RUNS)

    expected = results_without_wall_clock(local / "results" / "anatomy.duckdb")
    found = results_without_wall_clock(on_slurm / "results" / "anatomy.duckdb")
    assert {run_id for run_id, *_ in found["runs"]} == {f"{name}/seed{seed}" for name, seed in HEADLINE_RUNS}
    assert found == expected


def test_a_job_failing_on_the_cluster_is_reported_with_its_slurm_log(cluster, tmp_path):
    # A run that asks for a GPU the node does not have: the workflow accepts the setting (a
    # cluster may well have GPUs), and the job fails on the node, where `anatomy train` finds none.
    workdir = project(tmp_path / "project")
    target = "results/runs/vanilla/seed42/summary.json"
    result = snakemake(
        workdir, target, "--profile", str(adapted_profile(tmp_path, retries=0)), *QUICK, "--config", "device=cuda"
    )
    output = result.stdout + result.stderr
    assert result.returncode != 0

    [(job_id, slurm_log)] = submitted_jobs(output).items()
    assert job_states([job_id])[job_id][0] == "FAILED"
    error = output.split("Error in rule train_model:", 1)[1]
    assert f"SLURM-job '{job_id}' failed, SLURM status is: 'FAILED'" in error
    # The error names both logs: the rule's own, and the SLURM job's, which exists and tells
    # what ran on the node.
    assert f"log: results/logs/train_model/vanilla/seed42.log, {slurm_log} " in error
    assert slurm_log.startswith(str(workdir / ".snakemake" / "slurm_logs" / "rule_train_model"))
    assert "rule train_model:" in Path(slurm_log).read_text(encoding="utf-8")
    assert "CUDA is not available here" in (workdir / "results/logs/train_model/vanilla/seed42.log").read_text(
        encoding="utf-8"
    )


LONGER_RUN = """train_overrides:
  steps: 300
  batch_size: 8
  eval_every: 10
  warmup_steps: 5
"""


def freeze_when_checkpointed(run: Path, process: subprocess.Popen, timeout: float = HANG_S) -> str:
    """Stop the run's SLURM job (SIGSTOP) once it has written a checkpoint; its SLURM job id.

    Frozen, the job cannot finish before its time limit, however fast the machine.
    """
    deadline = time.monotonic() + timeout
    while not (run / "last.pt").exists():
        assert process.poll() is None and time.monotonic() < deadline, "no checkpoint written"
        time.sleep(0.1)
    [job_id] = subprocess.run(
        ["squeue", "--noheader", "--states=running", "--format=%i"], capture_output=True, text=True, check=True
    ).stdout.split()
    subprocess.run(["scancel", "--signal=STOP", "--full", job_id], check=True)
    return job_id


def test_a_run_killed_at_its_time_limit_resumes_when_the_grid_starts_again(cluster, tmp_path, no_leftover_processes):
    workdir = project(tmp_path / "project")
    longer = tmp_path / "longer.yaml"
    longer.write_text(LONGER_RUN, encoding="utf-8")
    # One minute, SLURM's smallest time limit, and no retry: the grid stops at the kill.
    profile = adapted_profile(tmp_path, retries=0, train_minutes=1)
    command = ("results/runs/vanilla/seed42/summary.json", "--profile", str(profile), *QUICK, str(longer))
    run = workdir / "results" / "runs" / "vanilla" / "seed42"

    with (tmp_path / "first.log").open("w") as log:
        first = subprocess.Popen(
            snakemake_command(workdir, *command), env=snakemake_env(), stdout=log, stderr=subprocess.STDOUT
        )
        try:
            job_id = freeze_when_checkpointed(run, first)
            assert first.wait(timeout=HANG_S) != 0
        finally:
            if first.poll() is None:
                first.kill()
    output = (tmp_path / "first.log").read_text(encoding="utf-8")
    assert job_states([job_id])[job_id][0] == "TIMEOUT"
    assert f"SLURM-job '{job_id}' failed, SLURM status is: 'TIMEOUT'" in output
    assert (run / "last.pt").exists() and not (run / "summary.json").exists()

    again = snakemake(workdir, *command)
    assert again.returncode == 0, (again.stdout + again.stderr)[-5000:]
    train_log = (workdir / "results/logs/train_model/vanilla/seed42.log").read_text(encoding="utf-8")
    resumed_at = int(re.search(r"resuming at step (\d+)", train_log).group(1))
    assert resumed_at >= 10  # the checkpoint, not a fresh start
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    assert summary["steps_done"] == 300
    steps = [json.loads(line)["step"] for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(10, 301, 10))  # every evaluation once: nothing lost, nothing repeated
