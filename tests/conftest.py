"""Shared pytest fixtures."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from run_folders import LLAMA_PARTS, write_fixture_grid

# Fixture modules: their fixtures are available to every test without importing them.
pytest_plugins = ["tiny_runs"]


@pytest.fixture(autouse=True)
def small_runs_stand_for_the_chapters(monkeypatch):
    """The hand-made and tiny runs of the tests are far smaller and shorter than the chapter's, so
    every claim on them would read "not testable at this size" (anatomy/report/protocol.py). The
    tests of the claims judge them as if they were the chapter's size; tests/test_protocol.py
    puts the real protocol back."""
    from anatomy.report import protocol

    monkeypatch.setattr(protocol, "CHAPTER_PROTOCOL", {key: 1 for key in protocol.CHAPTER_PROTOCOL})


@pytest.fixture
def fixture_runs(tmp_path: Path) -> tuple[Path, Path]:
    """(runs root, benchmarks root) holding the small fixture grid of write_fixture_grid."""
    runs_root, benchmarks_root = tmp_path / "runs", tmp_path / "benchmarks"
    write_fixture_grid(runs_root, benchmarks_root)
    return runs_root, benchmarks_root


@pytest.fixture(scope="session")
def fixture_grid_db(tmp_path_factory) -> Path:
    """A database collected from the written fixture grid (NaN/inf losses, a run still going)."""
    from anatomy.results.collect import collect

    root = tmp_path_factory.mktemp("fixture_grid_db")
    write_fixture_grid(root / "runs", root / "benchmarks")
    db = root / "anatomy.duckdb"
    collect(root / "runs", db, root / "results.json", root / "benchmarks")
    return db


# A tiny grid of real runs: the debug model size, tens of steps, on a short corpus.
# name -> (seeds, tags, model overrides on top of the debug size, train overrides)
TINY_GRID = {
    "vanilla": ((42, 7), {"group": "headline"}, {}, {}),
    "llama": ((42, 7), {"group": "headline"}, LLAMA_PARTS, {}),
    "vanilla_plus_swiglu": (
        (42, 7),
        {"group": "ablation", "part": "swiglu", "direction": "add"},
        {"ffn_type": "swiglu"},
        {},
    ),
    "llama_minus_swiglu": (
        (42, 7),
        {"group": "ablation", "part": "swiglu", "direction": "remove"},
        {**LLAMA_PARTS, "ffn_type": "gelu"},
        {},
    ),
    # an absurd learning rate makes the post-norm run really diverge, within two steps
    "deep_post_nowarmup": (
        (42,),
        {"group": "break", "part": "prenorm"},
        {**LLAMA_PARTS, "n_layer": 4, "norm_pos": "post"},
        {"warmup_steps": 0, "lr": 1e30},
    ),
    "deep_pre_nowarmup": (
        (42,),
        {"group": "break", "part": "prenorm"},
        {**LLAMA_PARTS, "n_layer": 4},
        {"warmup_steps": 0},
    ),
    "mqa": ((42,), {"group": "break", "part": "gqa"}, {**LLAMA_PARTS, "n_kv_head": 1}, {}),
    # trained, then its summary.json removed: how a run still in progress (or killed) looks
    "rope_k_unrotated": ((42,), {"group": "break", "part": "rope"}, {**LLAMA_PARTS, "rope_break": "k_unrotated"}, {}),
    # in no experiments.yaml: an ablation of a break test, compared with that break test; the pages
    # must place it by its baseline alone
    "mqa_minus_swiglu": (
        (42,),
        {"group": "ablation", "part": "swiglu", "direction": "remove"},
        {**LLAMA_PARTS, "n_kv_head": 1, "ffn_type": "gelu"},
        {},
    ),
}
# experiment -> its baseline, handed to collect in an experiments file, as the workflow does
TINY_BASELINES = {
    "vanilla": None,
    "llama": "vanilla",
    "vanilla_plus_swiglu": "vanilla",
    "llama_minus_swiglu": "llama",
    "deep_post_nowarmup": "llama",
    "deep_pre_nowarmup": "llama",
    "mqa": "llama",
    "rope_k_unrotated": "llama",
    "mqa_minus_swiglu": "mqa",
}
TINY_TRAIN = {"steps": 80, "eval_every": 5, "batch_size": 8, "lr": 1e-2, "threads": 1, "compile": False}
# Validation is the last 10% of the text: the second passage, which training never sees, so the
# tiny model memorises the first and its val loss turns upward within the 80 steps.
TINY_TEXT = (
    "## 学而\n子曰：学而时习之，不亦说乎？有朋自远方来，不亦乐乎？\nThe quick brown fox jumps over the lazy dog.\n" * 22
    + "## 为政\n子曰：为政以德，譬如北辰。\nA lazy dog sleeps; the brown fox runs far away.\n" * 3
)


@pytest.fixture(scope="session")
def dashboard_db(tmp_path_factory) -> Path:
    """A database that the real collecting code built from real tiny runs (train, generate).

    Built once per test session, not once per xdist worker (13-22 s each on a 2-core machine):
    the first worker to ask builds it in the session's shared folder while the others wait on
    the lock, then all read it (no test writes into it)."""
    from filelock import FileLock

    if not os.environ.get("PYTEST_XDIST_WORKER"):  # no xdist: this process alone
        return build_tiny_grid(tmp_path_factory.mktemp("tiny_grid"))
    root = tmp_path_factory.getbasetemp().parent / "tiny_grid"  # the folder every worker shares
    with FileLock(f"{root}.lock"):
        db = root / "anatomy.duckdb"
        if db.is_file():
            return db
        shutil.rmtree(root, ignore_errors=True)  # what a worker that failed building it left
        return build_tiny_grid(root)


def build_tiny_grid(root: Path) -> Path:
    """TINY_GRID trained, sampled, examined and collected into `root`; the database's path."""
    from anatomy.files.atomic import write_json
    from anatomy.generation.generate import generate_samples
    from anatomy.results.collect import collect
    from anatomy.data.tokenizer import tokenize_corpus
    from anatomy.training.trainer import train
    from tiny_runs import examine  # a plugin of this conftest: imported once pytest has loaded it

    root.mkdir(parents=True, exist_ok=True)
    (root / "corpus.txt").write_text(TINY_TEXT, encoding="utf-8")
    tokenize_corpus(root / "corpus.txt", root / "data", ctx_len=16)
    for name, (seeds, tags, model, train_overrides) in TINY_GRID.items():
        for seed in seeds:
            run = root / "runs" / name / f"seed{seed}"
            train(
                root / "data",
                run,
                "debug",
                model,
                {**TINY_TRAIN, **train_overrides, "seed": seed},
                {"experiment": name, "description": f"{name} (tiny test run)", **tags},
            )
            write_json(run / "samples.json", [generate_samples(run, chars=80)])
    for file_name in ("summary.json", "samples.json"):
        (root / "runs" / "rope_k_unrotated" / "seed42" / file_name).unlink()
    examine(root / "runs", root / "data", root / "exams", ["llama/seed42", "mqa/seed42"], depth_lr="1e-2")
    db = root / "anatomy.duckdb"
    write_json(
        root / "experiments.json",
        {"experiments": {name: {"baseline": baseline} for name, baseline in TINY_BASELINES.items()}},
    )
    collect(
        root / "runs", db, root / "results.json", exams_root=root / "exams", experiments_path=root / "experiments.json"
    )
    return db
