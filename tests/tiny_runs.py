"""Fixtures for tests that need real data or a real trained run: a tiny tokenized corpus and a
short training run on it (seconds, not minutes). Import the fixtures into a test module."""

from __future__ import annotations

import pytest

from anatomy.tokenizer import tokenize_corpus
from anatomy.trainer import train

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
    llama_parts = {"norm_type": "rmsnorm", "norm_pos": "pre", "pos_type": "rope", "ffn_type": "swiglu", "n_kv_head": 2}
    train(tiny_data, root / "vanilla", "debug", {}, {**FAST, "steps": 60, "lr": 3e-3})
    train(tiny_data, root / "llama", "debug", llama_parts, {**FAST, "steps": 60, "lr": 3e-3})
    return {"vanilla": root / "vanilla", "llama": root / "llama"}
