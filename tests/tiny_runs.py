"""Fixtures for tests that need real data or a real trained run: a tiny tokenized corpus and a
short training run on it (seconds, not minutes). Import the fixtures into a test module."""

from __future__ import annotations

from pathlib import Path

import pytest

from anatomy.data.tokenizer import tokenize_corpus
from anatomy.training.trainer import train
from run_folders import LLAMA_PARTS

TINY_TEXT = (
    "## 学而\n\n子曰：学而时习之，不亦说乎？有朋自远方来，不亦乐乎？人不知而不愠，不亦君子乎？\n\n"
    "## 为政\n\n子曰：为政以德，譬如北辰，居其所而众星共之。子曰：诗三百，一言以蔽之，曰思无邪。\n\n"
) * 12
# compile False: torch.compile's one-off compilation would cost more than these runs take
FAST = {"steps": 30, "eval_every": 10, "batch_size": 4, "threads": 1, "compile": False}


@pytest.fixture(scope="module")
def tiny_data(tmp_path_factory):
    """A tokenized folder (vocab.json, train.npy, val.npy, split.json) of a short repeated text."""
    folder = tmp_path_factory.mktemp("tiny_corpus")
    (folder / "corpus.txt").write_text(TINY_TEXT, encoding="utf-8")
    tokenize_corpus(folder / "corpus.txt", folder, ctx_len=16)
    return folder


@pytest.fixture(scope="module")
def tiny_runs(tiny_data, tmp_path_factory):
    """Two trained runs on the tiny corpus: learned positions (vanilla parts) and RoPE (llama parts)."""
    root = tmp_path_factory.mktemp("tiny_runs")
    train(tiny_data, root / "vanilla", "debug", {}, {**FAST, "steps": 60, "lr": 3e-3})
    train(tiny_data, root / "llama", "debug", LLAMA_PARTS, {**FAST, "steps": 60, "lr": 3e-3})
    return {"vanilla": root / "vanilla", "llama": root / "llama"}


# The tiny sizes every exam is run at in the tests: seconds each
TINY_EXAM_MODEL = ["d_model=32", "ctx_len=16"]


def examine(runs: Path, data: Path, exams: Path, kv_cache_runs: list[str], depth_lr: str = "3e-3") -> None:
    """Every exam by its command, as the workflow runs them, at tiny sizes: the length exam of each
    finished run under `runs`, the KV cache of `kv_cache_runs` (e.g. "llama/seed42"), a two-cell
    depth map (post- and pre-norm at `depth_lr`) and the wall clock, both into `exams`."""
    from anatomy.cli import main
    from anatomy.exams import wall_clock

    for summary in sorted(runs.glob("*/seed*/summary.json")):
        length = ["exam", "length", str(summary.parent), "--data", str(data), "--windows", "16", "32"]
        assert main([*length, "--threads", "1"]) == 0
    for run in kv_cache_runs:
        kv_cache = ["exam", "kv_cache", str(runs / run), "--contexts", "16", "32", "--chars", "4", "--rounds", "1"]
        assert main([*kv_cache, "--threads", "1"]) == 0
    depth = ["exam", "depth", "--out", str(exams / "depth"), "--data", str(data), "--n-layer", "2", "--steps", "10"]
    settings = [*TINY_EXAM_MODEL, "batch_size=4", "eval_every=5", "compile=false"]
    assert main([*depth, "--threads", "1", *settings, "--norm-pos", "post", "pre", "--lr", depth_lr]) == 0
    # one quick sample per timing: the numbers are not what these tests check
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wall_clock, "MIN_SAMPLE_S", 0.001)
        timing = ["exam", "wall_clock", "--out", str(exams / wall_clock.RESULT_FILE), "--rounds", "1"]
        sizes = [*TINY_EXAM_MODEL, "n_layer=1", "vocab_size=40"]
        assert main([*timing, "--batch-size", "2", "--threads", "1", "--device", "cpu", *sizes]) == 0
