"""The KV-cache exam: the cache's bytes measured against the formula, at tiny and LLaMA scale,
and generation timed with and without it."""

from __future__ import annotations

import json
import re

import pandas as pd
import pytest
import torch

from anatomy.cli import main
from anatomy.errors import AnatomyError
from anatomy.exams.kv_cache import (
    CACHE_COLUMNS,
    TIMING_COLUMNS,
    cache_bytes,
    cache_rows,
    generate_ids,
    read_rows,
    scale_rows,
)
from anatomy.generation.generate import load_model
from anatomy.results.collect import column_names
from anatomy.data.tokenizer import tokenize_corpus
from anatomy.training.trainer import train
from tiny_runs import TINY_TEXT
from run_folders import LLAMA_PARTS

CTX_LEN = 16
ROPE_PARTS = {k: v for k, v in LLAMA_PARTS.items() if k != "n_kv_head"}  # heads vary here
FEW_STEPS = {"steps": 2, "eval_every": 2, "batch_size": 4, "threads": 1, "compile": False}
KV_HEADS = {"mha": 4, "gqa": 2, "mqa": 1}  # of 4 query heads
GIB = 2**30


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Briefly trained tiny runs (ctx_len 16, 4 query heads): RoPE with 4, 2 and 1 kv heads, and
    learned positions with 4."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("kv_cache_exam")
    (root / "corpus.txt").write_text(TINY_TEXT, encoding="utf-8")
    tokenize_corpus(root / "corpus.txt", root / "data", ctx_len=CTX_LEN)
    folders = {}
    for name, n_kv_head in KV_HEADS.items():
        folders[name] = root / name
        train(root / "data", folders[name], "debug", {**ROPE_PARTS, "n_kv_head": n_kv_head}, FEW_STEPS)
    folders["learned"] = root / "learned"
    train(root / "data", folders["learned"], "debug", {}, FEW_STEPS)
    return folders


def test_the_formula_at_llama_scale_is_64_gib_for_mha_and_16_for_gqa():
    rows = {row["n_kv_head"]: row for row in scale_rows()}
    assert rows[32]["bytes"] == 64 * GIB and rows[8]["bytes"] == 16 * GIB
    for row in rows.values():
        assert (row["n_layer"], row["head_dim"], row["tokens"], row["element_bytes"]) == (32, 128, 131072, 2)
        assert (
            cache_bytes(row["n_layer"], row["n_kv_head"], row["head_dim"], row["tokens"], row["element_bytes"])
            == row["bytes"]
        )
    assert [list(row) for row in scale_rows()] == [column_names("exam_kv_scale")] * 2
    assert len({row["name"] for row in scale_rows()}) == 2  # the primary key


def test_measured_bytes_equal_the_formula_and_shrink_by_the_kv_head_ratio(runs):
    tokens = [1, 8, 40]  # 40: RoPE reads past ctx_len 16
    measured = {}
    for name, n_kv_head in KV_HEADS.items():
        model, _ = load_model(runs[name], "best")
        rows, notes = cache_rows(model, tokens)
        assert notes == [] and [row["tokens"] for row in rows] == tokens
        for row in rows:
            # 2 (k, v) x 2 layers x kv heads x head_dim 8 x tokens x 4 bytes (float32)
            assert row["formula_bytes"] == 2 * 2 * n_kv_head * 8 * row["tokens"] * 4
            assert row["measured_bytes"] == row["formula_bytes"]
        measured[name] = [row["measured_bytes"] for row in rows]
    for i in range(len(tokens)):
        assert measured["mha"][i] == 2 * measured["gqa"][i] == 4 * measured["mqa"][i]


def test_a_cache_that_disagrees_with_the_formula_is_an_error(runs, monkeypatch):
    model, _ = load_model(runs["gqa"], "best")
    # a cache that (wrongly) keeps every query head's keys and values
    monkeypatch.setattr("anatomy.exams.kv_cache.measured_bytes", lambda model, tokens: 2 * 2 * 4 * 8 * tokens * 4)
    with pytest.raises(RuntimeError, match="holds 2048 bytes, but the formula says 1024"):
        cache_rows(model, [4])


def test_learned_positions_skip_what_they_cannot_read(runs):
    model, _ = load_model(runs["learned"], "best")
    rows, notes = cache_rows(model, [1, 16, 512])
    assert [row["tokens"] for row in rows] == [1, 16]
    assert notes == ["cache after 512 positions: skipped, learned positions end at ctx_len 16"]


@pytest.mark.parametrize("name", ["gqa", "learned"])
def test_cached_and_recomputed_generation_write_the_same_characters(runs, name):
    """Past ctx_len for RoPE; with the window's jumps for learned positions."""
    model, _ = load_model(runs[name], "best")
    context = list(range(12))
    cached = generate_ids(model, context, 30, use_cache=True, seed=5)
    assert generate_ids(model, context, 30, use_cache=False, seed=5) == cached
    assert len(cached) == 30


def test_cli_writes_both_tables_and_read_rows_gives_them_back(runs, tmp_path, capsys):
    out = tmp_path / "kv_cache.json"
    assert (
        main(
            [
                "exam",
                "kv_cache",
                str(runs["gqa"]),
                "--tokens",
                "1",
                "32",
                "--contexts",
                "8",
                "32",
                "--chars",
                "4",
                "--rounds",
                "2",
                "--threads",
                "1",
                "--device",
                "cpu",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    printed = capsys.readouterr().out
    assert "7B-class, 32 KV heads (MHA): 64 GiB" in printed and "7B-class, 8 KV heads (GQA): 16 GiB" in printed

    sizes, timings = read_rows(out, "llama/seed42")
    assert CACHE_COLUMNS == column_names("exam_kv_cache") and TIMING_COLUMNS == column_names("exam_kv_timing")
    assert all(list(row) == CACHE_COLUMNS for row in sizes)
    assert all(list(row) == TIMING_COLUMNS for row in timings)
    assert [(row["tokens"], row["n_kv_head"], row["run_id"]) for row in sizes] == [
        (1, 2, "llama/seed42"),
        (32, 2, "llama/seed42"),
    ]
    assert sorted((row["context"], row["cached"]) for row in timings) == [
        (8, False),
        (8, True),
        (32, False),
        (32, True),
    ]
    for row in timings:
        assert row["chars"] == 4 and row["seconds"] > 0
        assert row["chars_per_s"] == pytest.approx(4 / row["seconds"])
    written = json.loads(out.read_text(encoding="utf-8"))
    assert [{k: row[k] for k in record} for row, record in zip(timings, written["timing"])] == written["timing"]


def test_cli_skips_contexts_past_learned_positions_with_a_note(runs, capsys):
    assert (
        main(
            [
                "exam",
                "kv_cache",
                str(runs["learned"]),
                "--tokens",
                "1",
                "--contexts",
                "8",
                "64",
                "--chars",
                "4",
                "--rounds",
                "1",
                "--threads",
                "1",
                "--device",
                "cpu",
            ]
        )
        == 0
    )
    assert "note: timing after a context of 64: skipped, learned positions end at ctx_len 16" in capsys.readouterr().out
    _, timings = read_rows(runs["learned"] / "exams" / "kv_cache.json", "vanilla/seed42")  # the default place
    assert sorted((row["context"], row["cached"]) for row in timings) == [(8, False), (8, True)]


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda data: data["cache"][0].update(measured_bytes=1.5), "field 'cache[0].measured_bytes' must be a whole"),
        (lambda data: data["timing"][1].update(cached="yes"), "field 'timing[1].cached' must be true or false"),
        (lambda data: data["timing"][0].pop("seconds"), "field 'timing[0].seconds' is missing"),
        (lambda data: data.pop("n_kv_head"), "field 'n_kv_head' is missing"),
        (lambda data: data.update(timing={}), "field 'timing' must be a list"),
        (lambda data: data["cache"].append(dict(data["cache"][0])), "appears twice"),
    ],
)
def test_read_rows_names_the_file_and_the_bad_field(tmp_path, change, named):
    data = {
        "n_kv_head": 2,
        "cache": [{"tokens": 1, "measured_bytes": 256, "formula_bytes": 256}],
        "timing": [
            {"context": 8, "chars": 4, "cached": True, "seconds": 0.01, "chars_per_s": 400.0},
            {"context": 8, "chars": 4, "cached": False, "seconds": 0.02, "chars_per_s": 200.0},
        ],
    }
    path = tmp_path / "kv_cache.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    sizes, timings = read_rows(path, "r")
    assert len(sizes) == 1 and len(timings) == 2  # the file as written is valid
    change(data)
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(AnatomyError, match=re.escape(named)) as err:
        read_rows(path, "r")
    assert str(path) in str(err.value)


def test_cli_says_in_one_line_that_a_folder_has_no_checkpoint(tmp_path, capsys):
    (tmp_path / "empty_run").mkdir()
    assert main(["exam", "kv_cache", str(tmp_path / "empty_run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no such checkpoint" in err
    assert len(err.strip().splitlines()) == 1


def test_the_cache_speedup_is_said_as_faster_or_slower():
    from anatomy.report.exam_findings import speedup_text

    def timed(cached: float, recomputed: float) -> str:
        speeds = {"cached": cached, "recomputed": recomputed, "speedup": cached / recomputed}
        return speedup_text(pd.Series({"context": 2048, "attention": "GQA", **speeds}))

    assert timed(325.0, 16.0) == (
        "at 2,048 characters of context the cache makes GQA generation 20.3x faster (325.0 vs 16.0 characters/s)"
    )
    assert "GQA generation 2.0x slower" in timed(400.0, 800.0)  # a cache that costs more than it saves
