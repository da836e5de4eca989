"""`anatomy collect` reads every exam's results into the exam tables: the files the exams wrote on
real tiny runs, row for row, and a malformed one stops the collect with its name."""

from __future__ import annotations

import json
import math
import shutil

import duckdb
import pytest

from anatomy.results import collect
from anatomy.cli import main
from anatomy.errors import AnatomyError
from anatomy.exams import depth, kv_cache, length, wall_clock
from anatomy.files.run_folder import GRAD_NORMS_FILE
from anatomy.training.grad_norms import read_grad_norms
from tiny_runs import examine

TINY_SIZES = ["d_model=32", "ctx_len=16", "n_layer=1", "vocab_size=40"]


def query(db, sql):
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.fixture(scope="module")
def examined(tiny_data, tiny_runs, tmp_path_factory):
    """The two tiny runs under one runs root, every exam run on them by its command, collected."""
    root = tmp_path_factory.mktemp("examined")
    runs = root / "runs"
    for name, folder in tiny_runs.items():
        shutil.copytree(folder, runs / name / "seed42")
    exams = root / "exams"
    examine(runs, tiny_data, exams, ["llama/seed42"])
    db = root / "anatomy.duckdb"
    assert main(["collect", "--runs", str(runs), "--db", str(db), "--exams", str(exams)]) == 0
    return runs, exams, db


def test_every_exam_file_becomes_its_rows(examined):
    runs, exams, db = examined
    for name in ("llama", "vanilla"):
        expected = length.read_rows(runs / name / "seed42" / "exams" / "length.json", f"{name}/seed42")
        found = query(
            db,
            f"SELECT {', '.join(length.COLUMNS)} FROM exam_length WHERE run_id = '{name}/seed42' "
            "ORDER BY window_len, bucket_start",
        )
        assert [tuple(row.values()) for row in expected] == found
    sizes, timings = kv_cache.read_rows(runs / "llama" / "seed42" / "exams" / "kv_cache.json", "llama/seed42")
    assert query(db, "SELECT count(*) FROM exam_kv_cache")[0][0] == len(sizes) > 0
    assert query(db, "SELECT count(*) FROM exam_kv_timing")[0][0] == len(timings) > 0
    assert query(db, "SELECT bool_and(measured_bytes = formula_bytes) FROM exam_kv_cache")[0][0]
    # the chapter's LLaMA-scale estimate comes with the measured caches
    assert sorted(query(db, "SELECT bytes / 2^30 FROM exam_kv_scale")) == [(16.0,), (64.0,)]
    assert query(db, "SELECT count(*) FROM exam_wall_clock")[0][0] == len(
        wall_clock.read_rows(exams / "wall_clock.json")
    )


def test_the_depth_map_and_every_runs_gradient_norms_are_collected(examined):
    runs, exams, db = examined
    cells = depth.read_cells(exams / "depth")
    assert sorted(query(db, "SELECT cell, norm_pos FROM exam_depth")) == sorted(
        (cell["cell"], cell["norm_pos"]) for cell in cells
    )
    assert {row[0] for row in query(db, "SELECT norm_pos FROM depth_stability")} == {"post", "pre"}
    grad_run_ids = {row[0] for row in query(db, "SELECT DISTINCT run_id FROM grad_norms")}
    # the grid's runs (trained with logging) and the map's cells, under their own ids
    assert {"llama/seed42", "vanilla/seed42"} | {f"depth/{cell['cell']}" for cell in cells} == grad_run_ids
    logged = read_grad_norms(runs / "llama" / "seed42" / GRAD_NORMS_FILE, "llama/seed42")
    found = query(db, "SELECT step, layer, norm FROM grad_norms WHERE run_id = 'llama/seed42' ORDER BY step, layer")
    assert [(row["step"], row["layer"], row["norm"]) for row in logged] == found
    spread = query(
        db,
        "SELECT first_layer_norm, last_layer_norm, first_to_last FROM grad_norm_spread "
        "WHERE run_id = 'llama/seed42' ORDER BY step LIMIT 1",
    )[0]
    assert math.isclose(spread[0] / spread[1], spread[2])


def test_a_malformed_exam_file_stops_the_collect_and_names_it(examined, tmp_path):
    runs, exams, _ = examined
    broken = tmp_path / "runs"
    shutil.copytree(runs, broken)
    path = broken / "llama" / "seed42" / "exams" / "length.json"
    data = json.loads(path.read_text(encoding="utf-8"))
    data["rows"][0]["loss"] = "low"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(AnatomyError, match="length.json"):
        collect.collect(broken, tmp_path / "a.duckdb", exams_root=exams)
    assert not (tmp_path / "a.duckdb").exists()
