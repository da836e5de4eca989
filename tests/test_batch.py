"""A workflow's trainings on a machine without Snakemake: batch-plan (a dry run's jobs and their
exact commands) and batch-run (the runs side by side, then one archive without checkpoints)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import signal
import tarfile
import time
from pathlib import Path

import pytest

from anatomy.batch import PLAN_VERSION
from anatomy.batch.planner import dry_run_jobs, plan_of
from anatomy.cli import main
from anatomy.errors import AnatomyError
from test_workflow import REPO, WORKFLOW, job_counts, snakemake

# the shape of `snakemake -n -p`'s printout (Snakemake 9), cut to two jobs of one run
PRINTOUT = """Building DAG of jobs...
[Sun Dec  6 08:15:58 2026]
rule train_model:
    input: results/corpora/poems_8m/vocab.json, results/corpora/poems_8m/train.npy
    output: results/runs/parts_8m_qknorm_1e3/seed42/summary.json
    log: results/logs/train_model/parts_8m_qknorm_1e3/seed42.log
    jobid: 5
    reason: Missing output files: results/runs/parts_8m_qknorm_1e3/seed42/summary.json
    wildcards: experiment=parts_8m_qknorm_1e3, seed=42
    threads: 1
    resources: tmpdir=/tmp, gpu=0
Shell command: python -m anatomy train --data results/corpora/poems_8m --out results/runs/parts_8m_qknorm_1e3/seed42 --restart-on-change train.seed=42 > results/logs/train_model/parts_8m_qknorm_1e3/seed42.log 2>&1
[Sun Dec  6 08:15:58 2026]
rule generate_samples:
    input: results/runs/parts_8m_qknorm_1e3/seed42/summary.json
    output: results/runs/parts_8m_qknorm_1e3/seed42/samples.json
    log: results/logs/generate_samples/parts_8m_qknorm_1e3/seed42.log
    jobid: 4
    wildcards: experiment=parts_8m_qknorm_1e3, seed=42
Shell command: python -m anatomy generate results/runs/parts_8m_qknorm_1e3/seed42 --checkpoint last best --out results/runs/parts_8m_qknorm_1e3/seed42/samples.json > results/logs/generate_samples/parts_8m_qknorm_1e3/seed42.log 2>&1
Job stats:
"""
CORPUS_JOB = """rule extract_corpus:
    input: data/poems/train.txt.xz
    output: results/corpora/poems_8m/text.txt
Shell command: python -m anatomy corpus data/poems --out results/corpora/poems_8m > y.log 2>&1
rule tokenize_named_corpus:
    input: results/corpora/poems_8m/text.txt
    output: results/corpora/poems_8m/vocab.json, results/corpora/poems_8m/train.npy
    log: results/logs/tokenize_named_corpus/poems_8m.log
    wildcards: corpus=poems_8m
Shell command: python -m anatomy tokenize data/poems/train.txt.xz --out results/corpora/poems_8m > x.log 2>&1
"""


def test_the_plan_holds_each_runs_training_then_its_sampling_and_the_corpus_it_reads():
    plan = plan_of(dry_run_jobs(PRINTOUT))
    (run,) = plan["runs"]
    assert run["run"] == "results/runs/parts_8m_qknorm_1e3/seed42"
    assert [command.split()[3] for command in run["commands"]] == ["train", "generate"]
    assert run["commands"][0].endswith("train.seed=42 > results/logs/train_model/parts_8m_qknorm_1e3/seed42.log 2>&1")
    assert run["logs"] == [
        "results/logs/train_model/parts_8m_qknorm_1e3/seed42.log",
        "results/logs/generate_samples/parts_8m_qknorm_1e3/seed42.log",
    ]
    assert plan["data"] == ["results/corpora/poems_8m"] and plan["version"] == PLAN_VERSION


COLLECT_JOB = """rule collect_results:
    input: results/runs/parts_8m_qknorm_1e3/seed42/samples.json
    output: results/anatomy.duckdb
Shell command: python -m anatomy collect --runs results/runs > z.log 2>&1
"""


def test_a_plan_that_needs_a_corpus_built_says_which_target_builds_it():
    """The corpus the runs read, and the extraction that step reads, through the jobs' files."""
    with pytest.raises(AnatomyError) as error:
        plan_of(dry_run_jobs(CORPUS_JOB + PRINTOUT))
    assert "the runs first need extract_corpus, tokenize_named_corpus" in str(error.value)
    # the target is the corpus the runs read: Snakemake makes what that needs on its way
    assert "(`snakemake results/corpora/poems_8m/vocab.json --cores 1`)" in str(error.value)


def test_what_comes_after_the_runs_is_left_for_snakemake_here():
    plan = plan_of(dry_run_jobs(PRINTOUT + COLLECT_JOB))
    assert plan["left"] == ["collect_results"] and len(plan["runs"]) == 1


def test_a_training_without_its_sampling_is_refused():
    training_only = PRINTOUT.split("[Sun Dec  6 08:15:58 2026]\nrule generate_samples")[0]
    with pytest.raises(AnatomyError, match="trained but not sampled"):
        plan_of(dry_run_jobs(training_only))


def write_plan(folder: Path, runs: list[dict], data: list[str] = ()) -> Path:
    plan = folder / "plan.json"
    plan.write_text(json.dumps({"version": PLAN_VERSION, "runs": runs, "data": list(data)}), encoding="utf-8")
    return plan


def fake_run(folder: str, *, fail: bool = False) -> dict:
    """A run whose "training" writes a checkpoint and a summary, and whose "sampling" fails or not."""
    sample = "echo sampling failed; exit 3" if fail else f"echo '{{}}' > {folder}/samples.json"
    return {
        "run": folder,
        "commands": [
            f"mkdir -p {folder} && echo weights > {folder}/best.pt && "
            f"for name in config.json summary.json metrics.jsonl; do echo '{{}}' > {folder}/$name; done",
            f"({sample}) > logs/{Path(folder).name}.log 2>&1",
        ],
        "logs": ["", f"logs/{Path(folder).name}.log"],
    }


def test_batch_run_trains_side_by_side_and_packs_the_finished_runs_without_checkpoints(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    plan = write_plan(tmp_path, [fake_run("results/runs/a/seed42"), fake_run("results/runs/b/seed7", fail=True)])
    assert main(["batch-run", str(plan), "--lanes", "2", "--pack", "out/runs.tar.gz"]) == 1
    said = capsys.readouterr().out
    assert "done results/runs/a/seed42" in said
    # the failure names the run, the exit code and its log's last line
    assert "FAILED results/runs/b/seed7" in said and "exit 3; logs/seed7.log: sampling failed" in said
    assert "1 of 2 runs finished; failed: results/runs/b/seed7" in said
    with tarfile.open(tmp_path / "out" / "runs.tar.gz") as archive:
        names = sorted(archive.getnames())
    # the finished run's files and its logs, not its checkpoint; nothing of the failed run
    assert names == [
        "logs/seed42.log",
        *(f"results/runs/a/seed42/{name}" for name in ("config.json", "metrics.jsonl", "samples.json", "summary.json")),
    ]
    assert not list((tmp_path / "out").glob("*.tmp*"))  # written atomically: nothing half-written beside it


def test_a_time_limit_stops_a_training_with_ctrl_c_and_starts_no_other(tmp_path, monkeypatch, capsys):
    """--minutes: the running "training" gets Ctrl-C (a real one saves its checkpoint on it), the
    one queued behind it never starts, and neither is packed as finished."""
    monkeypatch.chdir(tmp_path)
    slow = {
        "run": "results/runs/slow/seed42",
        # the trap first, so that a Ctrl-C at any moment of the command is the trap's
        "commands": [
            "trap 'mkdir -p results/runs/slow/seed42 && touch results/runs/slow/seed42/saved; exit 130' INT; "
            "mkdir -p results/runs/slow/seed42; sleep 60 & wait"
        ],
        "logs": [""],
    }
    queued = {"run": "results/runs/queued/seed42", "commands": ["mkdir -p results/runs/queued/seed42"], "logs": [""]}
    plan = write_plan(tmp_path, [slow, queued])
    # started in the background (`nohup python -m anatomy batch-run ... &`): Ctrl-C ignored, which
    # the commands would inherit (CI's run met it: the trap never fired, the sleep ran 60 s)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        started = time.monotonic()
        assert main(["batch-run", str(plan), "--lanes", "1", "--minutes", "0.03", "--pack", "runs.tar.gz"]) == 1
        assert time.monotonic() - started < 30  # not the 60 s of the sleep
    finally:
        signal.signal(signal.SIGINT, previous)
    assert (tmp_path / "results/runs/slow/seed42/saved").exists()
    assert not (tmp_path / "results/runs/queued").exists()
    said = capsys.readouterr().out
    assert "0 of 2 runs finished; stopped at 0.03 minutes (run the plan again to go on): " in said
    assert "0 finished runs packed into runs.tar.gz" in said


@pytest.mark.parametrize(
    "content, expected",
    [
        (None, "does not exist: write it with `python -m anatomy batch-plan`"),
        ("{not json", "batch-run: plan.json: not valid JSON"),
        (b"\xff\xfe", "batch-run: plan.json: not UTF-8 text"),
        ("FIFO", "batch-run: plan.json: "),  # a named pipe is refused, not waited on for good
        (json.dumps({"version": 99, "runs": []}), f"is not a plan of version {PLAN_VERSION}"),
        (
            json.dumps({"version": PLAN_VERSION, "runs": [], "data": ["results/corpus"]}),
            "the corpus results/corpus is not here (no results/corpus/split.json)",
        ),
    ],
)
def test_a_bad_plan_is_one_line(tmp_path, monkeypatch, capsys, content, expected):
    monkeypatch.chdir(tmp_path)
    if content == "FIFO":
        os.mkfifo(tmp_path / "plan.json")
    elif isinstance(content, bytes):
        (tmp_path / "plan.json").write_bytes(content)
    elif content is not None:
        (tmp_path / "plan.json").write_text(content, encoding="utf-8")
    assert main(["batch-run", "plan.json"]) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow  # two tiny trainings: CI runs it, the inner loop leaves it out
def test_a_batch_trains_the_runs_snakemake_would_and_leaves_it_nothing_to_do(tmp_path):
    """The round trip: plan here, run (in a copy, as on another machine), bring the archive back;
    Snakemake then finds both runs made."""
    here, there = tmp_path / "here", tmp_path / "there"
    shutil.copytree(REPO / "data" / "posts", here / "data" / "posts")
    shutil.copytree(WORKFLOW, here / "workflow")
    quick = ("--configfile", str(WORKFLOW / "quick.yaml"))
    targets = ["results/runs/vanilla/seed42/samples.json", "results/runs/llama/seed7/samples.json"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}

    def anatomy(cwd: Path, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "anatomy", *args], cwd=cwd, capture_output=True, text=True, env=env
        )

    built = snakemake(here, "results/corpus/split.json", "--cores", "1", *quick)
    assert built.returncode == 0, built.stderr[-2000:]
    planned = anatomy(here, "batch-plan", *targets, "--configfile", str(WORKFLOW / "quick.yaml"), "--out", "plan.json")
    assert planned.returncode == 0, planned.stderr
    assert "2 runs to train in plan.json; the corpora they read: results/corpus" in planned.stdout

    shutil.copytree(here, there)  # the other machine: the plan, the workflow's files and the corpus
    ran = anatomy(there, "batch-run", "plan.json", "--lanes", "2", "--pack", "runs.tar.gz")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert list((there / "results" / "runs").rglob("*.pt"))  # the checkpoints were made there...
    with tarfile.open(there / "runs.tar.gz") as archive:
        assert not [name for name in archive.getnames() if name.endswith(".pt")]  # ...and stay there
        archive.extractall(here, filter="data")
    after = snakemake(here, *targets, "--cores", "1", "-n", *quick)
    assert after.returncode == 0 and "Nothing to be done" in after.stdout + after.stderr, job_counts(after.stdout)
