"""The length exam: loss by position, RoPE past the training length, learned positions refused."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from anatomy.cli import main
from anatomy.errors import AnatomyError
from anatomy.exams.length import COLUMNS, length_exam, position_buckets, read_rows
from anatomy.generation.generate import load_model
from anatomy.results.collect import column_names
from anatomy.data.tokenizer import load_tokenized, tokenize_corpus
from anatomy.training.trainer import train
from tiny_runs import TINY_TEXT
from run_folders import LLAMA_PARTS

CTX_LEN = 16
WINDOWS = [16, 32, 64]  # 1x, 2x and 4x the training length
ROPE_PARTS = LLAMA_PARTS
FEW_STEPS = {"steps": 4, "eval_every": 2, "batch_size": 4, "threads": 1, "compile": False, "lr": 3e-3}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A tokenized corpus whose val split holds a few 64-character windows, and two briefly trained
    runs on it (ctx_len 16): RoPE and learned positions."""
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("length_exam")
    (root / "corpus.txt").write_text(TINY_TEXT * 3, encoding="utf-8")  # val: 350 tokens
    tokenize_corpus(root / "corpus.txt", root / "data", ctx_len=CTX_LEN)
    train(root / "data", root / "rope", "debug", ROPE_PARTS, FEW_STEPS)
    train(root / "data", root / "learned", "debug", {}, FEW_STEPS)
    return {"data": root / "data", "rope": root / "rope", "learned": root / "learned"}


def direct_position_losses(model, val: np.ndarray, window_len: int, length: int) -> torch.Tensor:
    """Every non-overlapping window of the split, one by one: the loss at positions 0..length-1,
    averaged over the windows by hand."""
    per_window = []
    with torch.no_grad():
        for start in range(0, len(val) - window_len, window_len):
            chunk = torch.as_tensor(val[start : start + length + 1].astype(np.int64))
            logits, _ = model(chunk[None, :-1])
            per_window.append(F.cross_entropy(logits[0], chunk[1:], reduction="none"))
    return torch.stack(per_window).mean(dim=0)


def rows_by_bucket(rows: list[dict]) -> dict[tuple[int, int], dict]:
    return {(row["window_len"], row["bucket_start"]): row for row in rows}


def test_buckets_double_from_the_training_length():
    assert position_buckets(128, 1024) == [(0, 127), (128, 255), (256, 511), (512, 1023)]
    assert position_buckets(128, 128) == [(0, 127)]
    assert position_buckets(128, 300) == [(0, 127), (128, 255), (256, 299)]  # the last ends with the window


def test_rope_bucket_losses_match_a_direct_evaluation(runs):
    model, _ = load_model(runs["rope"], "best")
    _, _, val = load_tokenized(runs["data"])
    rows = rows_by_bucket(length_exam(model, val, WINDOWS, max_windows=1000))
    assert sorted(rows) == [(16, 0), (32, 0), (32, 16), (64, 0), (64, 16), (64, 32)]
    for window_len in WINDOWS:
        expected = direct_position_losses(model, val, window_len, window_len)
        n_windows = len(range(0, len(val) - window_len, window_len))
        for first, last in position_buckets(CTX_LEN, window_len):
            row = rows[(window_len, first)]
            assert row["possible"] and row["reason"] is None
            assert row["bucket_end"] == last
            assert row["loss"] == pytest.approx(float(expected[first : last + 1].mean()), rel=1e-5)
            assert row["predictions"] == n_windows * (last - first + 1)


def test_learned_positions_are_measured_within_ctx_len_and_refused_past_it(runs):
    model, _ = load_model(runs["learned"], "best")
    _, _, val = load_tokenized(runs["data"])
    rows = rows_by_bucket(length_exam(model, val, WINDOWS, max_windows=1000))
    for window_len in WINDOWS:
        inside = rows[(window_len, 0)]
        expected = direct_position_losses(model, val, window_len, CTX_LEN)
        assert inside["possible"]
        assert inside["loss"] == pytest.approx(float(expected.mean()), rel=1e-5)
    past = [row for row in rows.values() if row["bucket_start"] >= CTX_LEN]
    assert len(past) == 3
    for row in past:
        assert row["possible"] is False and row["loss"] is None
        assert row["reason"] == f"learned positions end at ctx_len {CTX_LEN}"


def test_a_window_longer_than_the_val_split_is_not_possible(runs):
    model, _ = load_model(runs["rope"], "best")
    _, _, val = load_tokenized(runs["data"])
    rows = length_exam(model, val, [512], max_windows=8)
    assert [row["bucket_start"] for row in rows] == [0, 16, 32, 64, 128, 256]
    assert all(not row["possible"] and row["loss"] is None for row in rows)
    assert "val split holds 350 tokens" in rows[0]["reason"]


def test_max_windows_caps_the_windows_per_length(runs):
    model, _ = load_model(runs["rope"], "best")
    _, _, val = load_tokenized(runs["data"])
    rows = rows_by_bucket(length_exam(model, val, [16, 64], max_windows=3))
    assert rows[(16, 0)]["predictions"] == 3 * 16
    assert rows[(64, 32)]["predictions"] == 3 * 32


def test_cli_writes_length_json_that_read_rows_gives_back_as_table_rows(runs, capsys):
    assert (
        main(
            [
                "exam",
                "length",
                str(runs["rope"]),
                "--data",
                str(runs["data"]),
                "--windows",
                "16",
                "32",
                "--threads",
                "1",
            ]
        )
        == 0
    )
    path = runs["rope"] / "exams" / "length.json"  # the default place
    assert "written to" in capsys.readouterr().out
    written = json.loads(path.read_text(encoding="utf-8"))
    assert written["checkpoint"] == "best" and written["ctx_len"] == CTX_LEN

    rows = read_rows(path, "llama/seed42")
    assert COLUMNS == column_names("exam_length")
    assert all(list(row) == COLUMNS for row in rows)
    assert [(row["window_len"], row["bucket_start"]) for row in rows] == [(16, 0), (32, 0), (32, 16)]
    for row, record in zip(rows, written["rows"]):
        assert row["run_id"] == "llama/seed42" and row["checkpoint"] == "best" and row["ctx_len"] == CTX_LEN
        assert {name: row[name] for name in record} == record


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda data: data["rows"][0].update(loss="low"), "'rows[0].loss'"),
        (lambda data: data["rows"][1].pop("possible"), "rows[1] has no field 'possible'"),
        (lambda data: data["rows"][0].update(possible=False), "rows[0] is not possible"),
        (lambda data: data.pop("ctx_len"), "no field 'ctx_len'"),
        (lambda data: data.update(checkpoint="middle"), "'checkpoint' must be 'best' or 'last'"),
        (lambda data: data["rows"].append(dict(data["rows"][0])), "appears twice"),
    ],
)
def test_read_rows_names_the_file_and_the_bad_field(runs, tmp_path, change, named):
    out = tmp_path / "length.json"
    assert (
        main(
            [
                "exam",
                "length",
                str(runs["learned"]),
                "--data",
                str(runs["data"]),
                "--windows",
                "16",
                "32",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    data = json.loads(out.read_text(encoding="utf-8"))
    change(data)
    out.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(AnatomyError, match=re.escape(named)) as err:
        read_rows(out, "vanilla/seed42")
    assert str(out) in str(err.value)


def test_cli_says_in_one_line_that_a_folder_has_no_checkpoint(runs, tmp_path, capsys):
    (tmp_path / "empty_run").mkdir()
    assert main(["exam", "length", str(tmp_path / "empty_run"), "--data", str(runs["data"])]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "no such checkpoint" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_path / "empty_run" / "exams").exists()


def test_a_run_that_diverged_before_any_best_weights_gets_impossible_rows_not_an_error(runs, tmp_path):
    import shutil

    run = tmp_path / "diverged"
    shutil.copytree(runs["rope"], run)
    for name in ("best.pt", "last.pt"):
        (run / name).unlink()
    summary = json.loads((run / "summary.json").read_text(encoding="utf-8"))
    summary.update(diverged=True, diverged_step=1, status="diverged", best_val_loss=None, best_step=None)
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")

    assert main(["exam", "length", str(run), "--data", str(runs["data"]), "--windows", "16", "32"]) == 0
    rows = read_rows(run / "exams" / "length.json", "mqa/seed42")
    assert [(row["window_len"], row["bucket_start"]) for row in rows] == [(16, 0), (32, 0), (32, 16)]
    assert all(not row["possible"] and "diverged at step 1" in row["reason"] for row in rows)
    # a run that did not diverge and has no weights is still an error
    summary.update(diverged=False)
    (run / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    assert main(["exam", "length", str(run), "--data", str(runs["data"])]) == 2
