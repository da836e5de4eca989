"""The depth exam: cell names, the definition of `trained`, the map read back from real tiny
cells (one made to diverge), the finding against the SQL view, and the command line training
only the cells it is asked for."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import duckdb
import numpy as np
import pytest

from anatomy.cli import main
from anatomy.errors import AnatomyError
from anatomy.exams.depth import (
    COLUMNS,
    LEARNED_MARGIN,
    UNIGRAM_TAG,
    cell_name,
    largest_trained_lr,
    read_cells,
    trained,
    unigram_loss,
)
from anatomy.results.collect import SCHEMA_PATH

# A tiny llama cell: 2 layers of width 32 on the tiny corpus, 20 steps
TINY = ["--n-layer", "2", "--steps", "20", "--threads", "1"]
TINY_OVERRIDES = ["d_model=32", "ctx_len=16", "batch_size=4", "eval_every=5", "compile=false"]


def exam(out: Path, data: Path, norm_pos: list[str], lrs: list[str], *extra: str) -> int:
    return main(
        [
            "exam",
            "depth",
            "--out",
            str(out),
            "--data",
            str(data),
            *TINY,
            *TINY_OVERRIDES,
            *extra,
            "--norm-pos",
            *norm_pos,
            "--lr",
            *lrs,
        ]
    )


@pytest.fixture(scope="module")
def tiny_map(tiny_data, tmp_path_factory) -> Path:
    """Two cells of post-norm: lr 0.01 trains; lr 1e30 overflows within a few steps (lr 100 stays finite on some CPUs)."""
    out = tmp_path_factory.mktemp("depth")
    assert exam(out, tiny_data, ["post"], ["0.01", "1e30"]) == 0
    return out


# --- names and the definition of trained --------------------------------------------------------


def test_one_spelling_of_the_lr_names_one_cell():
    assert cell_name("post", 1e-3) == cell_name("post", "1.0e-3") == cell_name("post", 0.001) == "post_lr0.001"
    assert [cell_name("pre", lr) for lr in (3e-4, 1e-2, 100)] == ["pre_lr0.0003", "pre_lr0.01", "pre_lr100.0"]
    with pytest.raises(AnatomyError, match="norm_pos 'mid' is not valid"):
        cell_name("mid", 1e-3)
    with pytest.raises(AnatomyError, match="lr 'nan' is not valid: expected a positive number"):
        cell_name("post", "nan")


def test_unigram_loss_is_the_loss_of_character_frequencies():
    # train counts 2, 1, 0 plus one each: p = 3/6, 2/6, 1/6; val holds characters 0 and 2
    assert unigram_loss(np.array([0, 0, 1]), np.array([0, 2]), 3) == pytest.approx(
        -(math.log(0.5) + math.log(1 / 6)) / 2
    )


@pytest.mark.parametrize(
    "status, best, final, expected",
    [
        ("done", 3.0, 3.2, True),  # well below the unigram loss 4.0 - 0.5
        ("done", 3.6, 3.2, False),  # best val too close to the unigram loss: only frequencies learned
        ("done", 3.0, 3.6, False),  # learned, then blew up to near the frequencies at the end
        ("diverged", 3.0, None, False),
        ("running", 3.0, 3.2, False),  # not finished yet
        ("done", None, None, False),
    ],
)
def test_trained_means_finished_learned_and_not_blown_up(status, best, final, expected):
    assert trained(status, best, final, unigram=4.0) is expected


# --- the map read from real cells ---------------------------------------------------------------


def test_read_cells_gives_the_exam_depth_rows_of_real_cells(tiny_map):
    cells = read_cells(tiny_map)
    assert [cell["cell"] for cell in cells] == ["post_lr0.01", cell_name("post", 1e30)]
    assert all(list(cell) == COLUMNS for cell in cells)
    good, blown = cells
    summary = json.loads((tiny_map / "post_lr0.01" / "summary.json").read_text())
    assert good == {
        "cell": "post_lr0.01",
        "norm_pos": "post",
        "lr": 0.01,
        "n_layer": 2,
        "steps": 20,
        "seed": 42,
        "status": "done",
        "diverged": False,
        "diverged_step": None,
        "trained": True,
        "best_val_loss": summary["best_val_loss"],
        "best_step": summary["best_step"],
        "final_train_loss": summary["final_train_loss"],
        "final_val_loss": summary["final_val_loss"],
        "unigram_loss": json.loads((tiny_map / "post_lr0.01" / "config.json").read_text())["tags"][UNIGRAM_TAG],
    }
    assert blown["status"] == "diverged" and blown["diverged"] is True and 1 <= blown["diverged_step"] < 20
    assert blown["trained"] is False
    assert blown["final_train_loss"] is None and blown["final_val_loss"] is None  # its last step was NaN
    assert largest_trained_lr(cells) == {"post": 0.01}


def test_each_cell_records_the_unigram_loss_it_is_judged_against(tiny_map, tiny_data):
    from anatomy.data.tokenizer import load_tokenized

    tokenizer, train_ids, val_ids = load_tokenized(tiny_data)
    config = json.loads((tiny_map / "post_lr0.01" / "config.json").read_text())
    assert config["tags"][UNIGRAM_TAG] == pytest.approx(unigram_loss(train_ids, val_ids, tokenizer.vocab_size))
    assert config["preset"] == "llama" and config["model"]["norm_pos"] == "post"
    assert config["train"]["warmup_steps"] == 0
    # the tiny cell that trained did so clearly, not by a hair
    assert read_cells(tiny_map)[0]["best_val_loss"] < config["tags"][UNIGRAM_TAG] - LEARNED_MARGIN


def test_a_cell_without_summary_is_running_with_what_it_has(tiny_map, tmp_path):
    shutil.copytree(tiny_map / "post_lr0.01", tmp_path / "post_lr0.01")
    (tmp_path / "post_lr0.01" / "summary.json").unlink()
    with open(tmp_path / "post_lr0.01" / "metrics.jsonl", "a") as f:
        f.write('{"step": 25, "train_lo')  # being written right now
    [cell] = read_cells(tmp_path)
    metrics = [json.loads(line) for line in (tiny_map / "post_lr0.01" / "metrics.jsonl").read_text().splitlines()]
    best = min(metrics, key=lambda row: row["val_loss"])
    assert cell["status"] == "running" and cell["trained"] is False and cell["diverged"] is False
    assert (cell["best_val_loss"], cell["best_step"]) == (best["val_loss"], best["step"])
    assert cell["final_train_loss"] == metrics[-1]["train_loss"]


def test_no_folder_is_an_empty_map_and_a_starting_cell_is_not_a_cell_yet(tmp_path):
    assert read_cells(tmp_path / "missing") == []
    (tmp_path / "pre_lr0.001").mkdir()  # a trainer has just made it
    assert read_cells(tmp_path) == []


@pytest.mark.parametrize(
    "file_name, change, message",
    [
        ("summary.json", "{not json", r"post_lr0\.01/summary\.json: not valid JSON"),
        ("summary.json", '{"diverged": "false"}', r"summary\.json: field 'diverged' must be true or false"),
        ("config.json", None, r"post_lr0\.01/config\.json: missing, so this cell's settings are unknown"),
        ("metrics.jsonl", '{"step": 5, "val_loss": "low"}\n', r"metrics\.jsonl: field 'val_loss \(line 1\)'"),
        ("metrics.jsonl", "", r"metrics\.jsonl: missing or empty, but summary\.json says the run finished"),
    ],
)
def test_a_malformed_cell_is_an_error_naming_the_file(tiny_map, tmp_path, file_name, change, message):
    cell = tmp_path / "post_lr0.01"
    shutil.copytree(tiny_map / "post_lr0.01", cell)
    if change is None:
        (cell / file_name).unlink()
    else:
        (cell / file_name).write_text(change)
    with pytest.raises(AnatomyError, match=message):
        read_cells(tmp_path)


def test_a_cell_in_the_wrong_folder_or_without_its_unigram_loss_is_an_error(tiny_map, tmp_path):
    shutil.copytree(tiny_map / "post_lr0.01", tmp_path / "post_lr0.003")
    with pytest.raises(AnatomyError, match=r"belongs in a folder named post_lr0\.01, not post_lr0\.003"):
        read_cells(tmp_path)
    shutil.rmtree(tmp_path / "post_lr0.003")
    shutil.copytree(tiny_map / "post_lr0.01", tmp_path / "post_lr0.01")
    config = json.loads((tmp_path / "post_lr0.01" / "config.json").read_text())
    (tmp_path / "post_lr0.01" / "config.json").write_text(json.dumps({**config, "tags": {}}))
    with pytest.raises(AnatomyError, match=rf"config\.json: tags\.{UNIGRAM_TAG} must be a number"):
        read_cells(tmp_path)


# --- the finding, and the SQL view that states it too ------------------------------------------


def depth_stability(cells: list[dict]) -> dict:
    """norm_pos -> max_trained_lr, as the SQL view of anatomy/results/schema.sql computes it."""
    con = duckdb.connect()
    con.execute(SCHEMA_PATH.read_text(encoding="utf-8"))
    con.executemany(
        f"INSERT INTO exam_depth VALUES ({', '.join('?' * len(COLUMNS))})",
        [[cell[name] for name in COLUMNS] for cell in cells],
    )
    return dict(con.execute("SELECT norm_pos, max_trained_lr FROM depth_stability").fetchall())


def test_largest_trained_lr_agrees_with_the_depth_stability_view():
    def row(norm_pos, lr, is_trained):
        return {
            "cell": cell_name(norm_pos, lr),
            "norm_pos": norm_pos,
            "lr": lr,
            "n_layer": 12,
            "steps": 300,
            "seed": 42,
            "status": "done",
            "diverged": False,
            "diverged_step": None,
            "trained": is_trained,
            "best_val_loss": 4.0,
            "best_step": 300,
            "final_train_loss": 4.0,
            "final_val_loss": 4.0,
            "unigram_loss": 5.0,
        }

    # post trains up to 1e-3; pre trains at 1e-2 although 3e-3 failed: the largest counts
    cells = [
        row("post", 3e-4, True),
        row("post", 1e-3, True),
        row("post", 3e-3, False),
        row("pre", 1e-3, True),
        row("pre", 3e-3, False),
        row("pre", 1e-2, True),
    ]
    assert largest_trained_lr(cells) == depth_stability(cells) == {"post": 1e-3, "pre": 1e-2}
    # a wiring of which nothing trained: None, as the view's NULL
    cells = [{**cell, "trained": cell["trained"] and cell["norm_pos"] == "pre"} for cell in cells]
    assert largest_trained_lr(cells) == depth_stability(cells) == {"post": None, "pre": 1e-2}


# --- the command line ----------------------------------------------------------------------------


def test_one_norm_pos_and_one_lr_train_that_cell_only(tiny_map, tiny_data, tmp_path, capsys):
    out = tmp_path / "depth"
    shutil.copytree(tiny_map / "post_lr0.01", out / "post_lr0.01")
    before = {p.name: p.stat().st_mtime_ns for p in (out / "post_lr0.01").iterdir()}
    assert exam(out, tiny_data, ["pre"], ["0.01"], "n_layer=1", "warmup_steps=5") == 0
    printed = capsys.readouterr().out
    assert sorted(p.name for p in out.iterdir()) == ["post_lr0.01", "pre_lr0.01"]
    assert {p.name: p.stat().st_mtime_ns for p in (out / "post_lr0.01").iterdir()} == before  # untouched
    # the exam's own settings win over key=value ones, and it says so
    assert "note: n_layer=1 set aside" in printed and "note: warmup_steps=5 set aside" in printed
    config = json.loads((out / "pre_lr0.01" / "config.json").read_text())
    assert (config["model"]["n_layer"], config["model"]["d_model"], config["train"]["warmup_steps"]) == (2, 32, 0)
    assert (config["train"]["lr"], config["train"]["steps"], config["model"]["norm_pos"]) == (0.01, 20, "pre")
    # the map printed is this call's cell only, with the finding
    assert "pre_lr0.01" in printed and "post_lr0.01 " not in printed
    assert "largest lr that still trains: pre 0.01" in printed
    assert [line["step"] for line in map(json.loads, (out / "pre_lr0.01" / "grad_norms.jsonl").open())] == list(
        range(1, 21)
    )


def test_a_finished_cell_is_not_trained_again(tiny_map, tiny_data, tmp_path, capsys):
    out = tmp_path / "depth"
    shutil.copytree(tiny_map, out)
    before = {p: p.stat().st_mtime_ns for p in out.rglob("*")}
    assert exam(out, tiny_data, ["post"], ["1e-2", "1.0e30"]) == 0
    assert capsys.readouterr().out.count("already finished") == 2
    assert {p: p.stat().st_mtime_ns for p in out.rglob("*")} == before


def test_bad_input_is_one_line(tiny_data, tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert exam(tmp_path / "file", tiny_data, ["post"], ["0.01"]) == 2
    assert "--out" in capsys.readouterr().err
    assert exam(tmp_path / "out", tiny_data, ["post"], ["0.01"], "d_model=wide") == 2
    assert "d_model = 'wide' is not valid" in capsys.readouterr().err
