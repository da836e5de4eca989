"""The Exams page under Streamlit's AppTest, on databases written by hand.

Each database is anatomy/results/schema.sql executed in DuckDB plus rows inserted here (runs first, for the
foreign keys), so every figure the page states can be worked out from the rows of the test: the
sentences must carry them. Also: the empty tables of a fresh collect, a grid examined in part, a
database from before the exams, and the chart builders' encodings.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from exam_rows import (
    KV_SCALE,
    MLA,
    MOE,
    QK_NORM,
    cache_rows,
    depth_row,
    grad_norm_rows,
    insert,
    length_rows,
    max_logit_rows,
    new_database,
    timing_rows,
    wall_clock_row,
)
from dashboard_pages import chart_specs, chart_tables, english_left, no_reference, open_page, texts  # noqa: F401 (no_reference: a fixture)

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # the dashboard is an app folder, not an installed package
    sys.path.insert(0, str(REPO_ROOT))
from anatomy.results.collect import SCHEMA_PATH, model_columns  # noqa: E402
from anatomy.report import colours as palette  # noqa: E402
from anatomy.report import exam_findings as findings  # noqa: E402
from anatomy.report.wording import wiring  # noqa: E402
from anatomy.results.reader import load  # noqa: E402
from dashboard import charts, loaders  # noqa: E402
from run_folders import LLAMA_PARTS  # noqa: E402

LLAMA = LLAMA_PARTS


# ---------------------------------------------------------------------------------------------
# Databases written by hand


def run_row(
    experiment: str, seed: int = 42, group: str = "break", part: str | None = None, model: dict | None = None
) -> dict:
    config = {
        "model": {"d_model": 128, "n_layer": 4, "ctx_len": 128, **(model or {})},
        "train": {"seed": seed},
        "tags": {"experiment": experiment, "group": group},
    }
    # the model settings as collect makes them columns (defaults filled in)
    return {
        "run_id": f"{experiment}/seed{seed}",
        "experiment": experiment,
        "seed": seed,
        "group": group,
        "part": part,
        "config": json.dumps(config),
        "status": "done",
        "diverged": False,
        "best_val_loss": 2.0,
        "best_step": 100,
        **model_columns(config, Path("config.json")),
    }


GRID = [
    run_row("vanilla", group="headline"),
    run_row("llama", 42, group="headline", model=LLAMA),
    run_row("llama", 7, group="headline", model=LLAMA),
    run_row("rope_k_unrotated", part="rope", model={**LLAMA, "rope_break": "k_unrotated"}),
    run_row("llama_minus_gqa", group="ablation", part="gqa", model={**LLAMA, "n_kv_head": 4}),
    run_row("mqa", part="gqa", model={**LLAMA, "n_kv_head": 1}),
    run_row("deep_post_nowarmup", part="prenorm", model={**LLAMA, "n_layer": 12, "norm_pos": "post"}),
]


PARTS_HEADERS = [
    "QK-norm: a high learning rate without warmup",
    "MLA: a smaller KV cache",
    "Experts: more parameters for the same work",
]

TOO_SHORT = "the val split holds 700 tokens, too few for one window of 1024 + the character after it"


def grad_norm(layer: int, step: int) -> float:
    """Block norms that drift apart with the steps: the last block's grows against the first's."""
    return 0.1 * step * (1 + layer * step / 10)


def drifting_norms(run_id: str, n_layer: int = 12, steps: int = 5, nan_from: int | None = None) -> list[dict]:
    """grad_norm's rows for steps 1..steps; NaN from step nan_from on."""
    nan = float("nan")
    return grad_norm_rows(
        run_id,
        {
            step: [
                nan if nan_from is not None and step >= nan_from else grad_norm(layer, step) for layer in range(n_layer)
            ]
            for step in range(1, steps + 1)
        },
    )


def speeds(cached: float, recomputed_at_2048: float) -> dict[int, tuple[float, float]]:
    """Cached generation as fast at every context; recomputing slower in proportion to the context."""
    return {context: (cached, recomputed_at_2048 * 2048 / context) for context in (128, 512, 2048)}


@pytest.fixture
def exam_db(tmp_path) -> Path:
    """Every exam filled, a few runs left out of the length exam."""
    db = new_database(tmp_path / "anatomy.duckdb")
    insert(db, "runs", GRID)
    insert(
        db,
        "exam_length",
        length_rows("llama/seed42", [3.0, 2.0, 2.4, 2.6])
        + length_rows("llama/seed7", [3.2, 2.2, 2.6, 2.8])
        + length_rows("vanilla/seed42", [3.1, 2.3, None, None])
        + length_rows("rope_k_unrotated/seed42", [3.3, 2.9, 3.5], window_len=512)
        # the longest window is too long for the val split: the curve comes from the one before
        + length_rows("rope_k_unrotated/seed42", [None] * 4, reason=TOO_SHORT)
        + length_rows("mqa/seed42", [None] * 4, reason=TOO_SHORT),
    )
    insert(
        db,
        "exam_kv_cache",
        cache_rows("llama_minus_gqa/seed42", 4) + cache_rows("llama/seed42", 2) + cache_rows("mqa/seed42", 1),
    )
    insert(
        db,
        "exam_kv_timing",
        timing_rows("llama_minus_gqa/seed42", 4, speeds(450.0, 40.0), chars=100)
        + timing_rows("llama/seed42", 2, speeds(500.0, 50.0), chars=100)
        + timing_rows("mqa/seed42", 1, speeds(520.0, 55.0), chars=100),
    )
    insert(db, "exam_kv_scale", KV_SCALE)
    insert(
        db,
        "exam_depth",
        [
            depth_row("post", 3e-4, trained=True, best=2.5),
            depth_row("post", 1e-3, trained=True, best=2.4),
            depth_row("post", 3e-3, trained=False, diverged_step=57),
            depth_row("post", 1e-2, trained=False, diverged_step=12),
            depth_row("pre", 3e-4, trained=True, best=2.45),
            depth_row("pre", 1e-3, trained=True, best=2.3),
            depth_row("pre", 3e-3, trained=True, best=2.2),
            depth_row("pre", 1e-2, trained=False, best=3.9),
        ],
    )
    insert(
        db,
        "grad_norms",
        drifting_norms("deep_post_nowarmup/seed42")
        + drifting_norms("depth/pre_lr0.001")
        + drifting_norms("depth/post_lr0.003", nan_from=4)
        + drifting_norms("llama/seed42", n_layer=4),
    )
    insert(
        db,
        "exam_wall_clock",
        [
            wall_clock_row("norm", "layernorm", "manual", 2.0),
            wall_clock_row("norm", "layernorm", "fused", 0.5),
            wall_clock_row("norm", "rmsnorm", "manual", 1.5),
            wall_clock_row("norm", "rmsnorm", "fused", 0.6),
            wall_clock_row("attention", "mha", "manual", 9.0),
            wall_clock_row("attention", "mha", "fused", 1.5),
            wall_clock_row("rope", "rope (no fused kernel)", "manual", 1.03),
            wall_clock_row("rope", "rope (no fused kernel)", "fused", 1.0),
            wall_clock_row("ffn", "swiglu", "manual", 3.0),
        ],
    )
    return db


# ---------------------------------------------------------------------------------------------
# The page, as test_dashboard.py opens the others


def test_each_exam_says_what_its_rows_show(exam_db, monkeypatch):
    app = open_page(exam_db, "exams", monkeypatch)
    prose = texts(app)
    headers = [h.value for h in app.header]
    assert headers == [
        "RoPE: reading past the training length",
        "GQA: the KV cache",
        "Pre-norm: depth without warmup",
        "The wall clock of each part",
        *PARTS_HEADERS,
    ]

    # every finding is the report's own clause as a sentence (anatomy/report/exam_findings.py, whose
    # wording tests/test_report_exams.py asserts), made from the same views of this database
    data = load(exam_db)
    for clause in (findings.length_finding(data), findings.kv_cache_finding(data), findings.depth_finding(data)):
        assert clause is not None and f"**{findings.sentence(clause)}**" in prose
    for detail in (findings.length_text(data), findings.kv_cache_text(data), findings.depth_text(data, bold=True)):
        assert findings.sentence(detail) in prose

    # RoPE (the length_reach view): within the training length the two inside buckets weighted by
    # their predictions, (3.0 x 32 + 2.0 x 96) / 128 = 2.25 (unweighted: 2.5); far: the last bucket
    reach = data.exams.length_reach.set_index("run_id")
    assert reach.loc["llama/seed42", "within_loss"] == pytest.approx(2.25)
    assert reach.loc["llama/seed42", "far_loss"] == pytest.approx(2.6)
    assert reach.loc["llama/seed42", "far_over_within"] == pytest.approx(2.6 / 2.25)
    assert not reach.loc["vanilla/seed42", "far_possible"] and pd.isna(reach.loc["vanilla/seed42", "far_loss"])
    assert "learned positions (1 experiment): not possible past position 127" in prose
    table = app.dataframe[0].value.set_index("run")
    assert table.loc["vanilla · seed 42", "far_loss"] == "cannot read"
    assert table.loc["vanilla · seed 42", "far_over_within"] == "–"
    assert table.loc["llama · seed 42", "far_loss"] == "2.6000"
    # counted among the grid's runs (a study's have their own page)
    assert (
        "5 of the grid's 7 runs examined; not yet: deep_post_nowarmup · seed 42 and llama_minus_gqa · seed 42." in prose
    )
    assert f"mqa · seed 42: no window could be read ({TOO_SHORT})." in prose

    # GQA: bytes per token = 2 x 4 layers x KV heads x 32 x 4 bytes; the cache at 2,048 characters
    # 500 against 50 characters per second; 7B-class at LLaMA scale
    per_token = data.exams.kv_per_token.set_index("attention")["measured"]
    assert per_token.to_dict() == {"MHA": 4096, "GQA": 2048, "MQA": 1024}
    speedup = data.exams.kv_speedup.set_index(["attention", "context"])["speedup"]
    assert speedup[("GQA", 2048)] == pytest.approx(10.0)
    assert list(data.exams.kv_scale["gib"]) == [64, 16]
    assert "the bytes equal the formula in all 9 rows" in prose

    # pre-norm: the largest lr each wiring trains at, and where it starts failing
    assert (
        "12 layers, no warmup: post-norm trains up to lr **0.001** (fails from 0.003), "
        "pre-norm trains up to lr **0.003** (fails from 0.01)"
    ) in prose
    # the default run is the post-norm 12-layer grid run
    assert app.selectbox(key="exams_grad_run").value == "deep_post_nowarmup/seed42"
    first, last = grad_norm(0, 1) / grad_norm(11, 1), grad_norm(0, 5) / grad_norm(11, 5)
    assert (
        f"In deep_post_nowarmup · seed 42 the first block's gradient norm is {first:.3g}x the last block's "
        f"at step 1 and {last:.3g}x at step 5."
    ) in prose

    # wall clock (the wall_clock_ratios view): the largest manual / fused ratio, the control's
    ratios = data.exams.wall_clock_ratios.set_index("variant")["manual_over_fused"]
    assert ratios["mha"] == pytest.approx(6.0) and ratios["rope (no fused kernel)"] == pytest.approx(1.03)
    assert (
        "**The hand-written mha (attention) is 6.0x slower than its fused version: 9.000 ms against 1.500 ms, "
        "forward and backward on 32x128x128; the control (rope (no fused kernel), one code timed as both) comes "
        "out at 1.03x: the noise of these timings.**"
    ) in prose
    assert "Timed one way only: ffn · swiglu (manual only)" in prose

    tables = chart_tables(app)
    assert len(tables) == 7  # length, cache, timing, map, heatmap, spread, wall clock
    length = tables[0].dropna(subset=["loss"])
    assert set(length["experiment"]) == {"llama", "vanilla", "rope_k_unrotated"}
    assert length[(length["experiment"] == "llama") & (length["bucket_start"] == 512)]["loss"].item() == pytest.approx(
        2.7
    )
    assert length[length["experiment"] == "vanilla"]["bucket_start"].max() == 32  # its line stops at ctx_len
    assert length[length["experiment"] == "rope_k_unrotated"]["bucket_start"].max() == 128  # the 512 window
    stability = tables[3]
    cell = stability[(stability["norm_pos"] == wiring("post")) & (stability["lr"] == 3e-3)].iloc[0]  # in words
    assert (cell["state"], cell["text"]) == ("diverged", "diverged @ 57")
    assert set(stability[stability["state"] == "did not learn"]["text"]) == {"best val 3.900"}
    heat = tables[4]
    assert len(heat) == 12 * 5 and heat["layer"].max() == 11
    # the ratio is compared among the grid's 12-layer runs (and the chosen run): neither the 4-layer
    # grid run nor a cell of the map is drawn unless chosen
    assert set(tables[5]["label"].dropna()) == {"deep_post_nowarmup · seed 42"}


def test_choosing_a_depth_map_cell_shows_its_gradients(exam_db, monkeypatch):
    app = open_page(exam_db, "exams", monkeypatch)
    labels = app.selectbox(key="exams_grad_run").options
    assert labels == [
        "deep_post_nowarmup · seed 42",
        "depth map: post-norm, lr 0.003",
        "depth map: pre-norm, lr 0.001",
        "llama · seed 42",
    ]
    app.selectbox(key="exams_grad_run").set_value("depth/post_lr0.003").run()
    assert not app.exception
    prose = texts(app)
    assert "In depth map: post-norm, lr 0.003 the first block's gradient norm" in prose
    assert "at step 3." in prose and "Its gradients are NaN/inf from step 4." in prose
    heat, spread = chart_tables(app)[4:6]
    assert "depth map: post-norm, lr 0.003" in set(spread["label"])  # the chosen cell joins the ratios
    assert set(heat.loc[heat["step"] >= 4, "note"]) == {"NaN / inf"}
    assert set(heat.loc[heat["step"] < 4, "note"].dropna()) <= {""}
    # a shallow grid run, once chosen, joins the deep ones in the ratio chart
    app.selectbox(key="exams_grad_run").set_value("llama/seed42").run()
    heat, spread = chart_tables(app)[4:6]
    assert heat["layer"].max() == 3 and "llama · seed 42" in set(spread["label"])


def test_a_freshly_collected_database_says_which_command_fills_each_exam(tmp_path, monkeypatch):
    db = new_database(tmp_path / "anatomy.duckdb")
    insert(db, "runs", GRID[:2])
    app = open_page(db, "exams", monkeypatch)
    infos = [info.value for info in app.info]
    assert len(infos) == 8  # length; the KV cache; the map, the gradient norms; the wall clock; qk_norm, mla, moe
    assert all("snakemake --cores 1 exams" in info for info in infos)
    for exam in ("length", "kv_cache", "depth", "wall_clock", "qk_norm", "mla", "moe"):
        assert any(f"python -m anatomy exam {exam}" in info for info in infos), exam
    assert not app.get("vega_lite_chart")


def test_the_reference_results_say_that_they_ship_no_exams(tmp_path, monkeypatch):
    db = new_database(tmp_path / "reference.duckdb")
    insert(db, "runs", GRID[:2])
    monkeypatch.setattr(loaders, "REFERENCE_DB", db)
    app = open_page(db, "exams", monkeypatch)
    exam_lines = [info.value for info in app.info if "snakemake --cores 1 exams" in info.value]
    assert len(exam_lines) == 8
    assert all("The shipped reference results hold none of this exam yet" in line for line in exam_lines)


def test_a_database_with_no_runs_still_shows_the_exams_that_need_none(tmp_path, monkeypatch):
    db = new_database(tmp_path / "anatomy.duckdb")
    insert(
        db,
        "exam_wall_clock",
        [wall_clock_row("ffn", "swiglu", "manual", 3.0), wall_clock_row("ffn", "swiglu", "fused", 1.0)],
    )
    app = open_page(db, "exams", monkeypatch)
    assert "The hand-written swiglu (ffn) is 3.0x slower than its fused version" in texts(app)


def test_a_grid_examined_in_part(tmp_path, monkeypatch):
    db = new_database(tmp_path / "anatomy.duckdb")
    insert(db, "runs", GRID)
    # the learned-position run read only on windows as long as its training length
    insert(
        db,
        "exam_length",
        length_rows("vanilla/seed42", [3.1, 2.3], window_len=128) + length_rows("llama/seed42", [3.0, 2.0, 2.4, 2.6]),
    )
    insert(db, "exam_kv_cache", cache_rows("llama/seed42", 2))
    insert(
        db,
        "exam_depth",
        [depth_row("post", 3e-4, trained=True, best=2.5), depth_row("post", 1e-3, trained=False, diverged_step=30)],
    )
    insert(db, "exam_wall_clock", [wall_clock_row("norm", "rmsnorm", "manual", 1.5)])
    app = open_page(db, "exams", monkeypatch)
    prose = texts(app)
    data = load(db)
    assert findings.sentence(findings.length_text(data)) in prose
    assert "RoPE, mini-LLaMA: 2.600 at positions 512-1023 of 1,024-character windows vs 2.250" in prose
    assert "cannot read past" not in prose  # no row says the learned table stops: none was asked for
    assert "vanilla (learned positions) has no rows past its training length (128)" in prose
    assert "5 of the grid's 7 runs examined" not in prose and "2 of the grid's 7 runs examined" in prose
    assert "Cache bytes per token, measured: MHA not measured yet, GQA (2 KV heads) 2,048" in prose
    assert "Not measured yet: MHA and MQA" in prose
    assert "No generation timings" in prose
    assert "post-norm trains up to lr **0.0003** (fails from 0.001), pre-norm: no cell yet." in prose
    assert "Not in the map yet: pre-norm at lr 0.0003 and pre-norm at lr 0.001" in prose
    assert "No gradient norms" in prose
    assert "No part is timed both ways" in prose and "Timed one way only: norm · rmsnorm (manual only)" in prose


def test_a_database_from_before_the_exams_says_to_collect_again(tmp_path, monkeypatch):
    schema = SCHEMA_PATH.read_text(encoding="utf-8")
    before_exams = schema[: schema.index("\n-- ------")]
    assert "exam_" not in before_exams and "CREATE VIEW ablation_summary" in before_exams
    db = new_database(tmp_path / "old.duckdb", before_exams)
    insert(db, "runs", GRID[:2])
    app = open_page(db, "exams", monkeypatch)
    (warning,) = app.warning
    assert "was made by an older version of this project" in warning.value
    assert f"python -m anatomy collect --runs results/runs --db {db}" in warning.value
    assert not app.header and not app.get("vega_lite_chart")


def test_no_database_says_how_to_make_one(tmp_path, monkeypatch):
    app = open_page(tmp_path / "results" / "anatomy.duckdb", "exams", monkeypatch)
    (info,) = app.info
    assert "no results database" in info.value and "snakemake --cores 2 --configfile workflow/quick.yaml" in info.value


# ---------------------------------------------------------------------------------------------
# Loaders and chart builders


def test_position_and_attention_kinds_are_named_once_in_sql(tmp_path):
    db = new_database(tmp_path / "anatomy.duckdb")
    insert(db, "runs", GRID)
    runs = load(db).runs.set_index("run_id")
    assert runs.loc["rope_k_unrotated/seed42", "positions"] == "RoPE broken: k unrotated"
    assert runs.loc["vanilla/seed42", "positions"] == "learned positions"
    assert runs.loc["llama/seed42", "positions"] == "RoPE"
    kinds = runs.loc[["llama_minus_gqa/seed42", "llama/seed42", "mqa/seed42"], "attention"]
    assert list(kinds) == ["MHA", "GQA", "MQA"]


def test_length_chart_colours_each_featured_experiment_as_everywhere_and_marks_the_training_length():
    curves = pd.DataFrame(
        {
            "experiment": ["llama", "llama", "vanilla", "vanilla", "rope_k_adjacent"],
            "positions": ["RoPE", "RoPE", "learned positions", "learned positions", "RoPE broken: k adjacent"],
            "featured": [True, True, True, True, False],
            "bucket_start": [0, 128, 0, 128, 0],
            "bucket_end": [127, 255, 127, 255, 127],
            "position": [63.5, 191.5, 63.5, 191.5, 63.5],
            "loss": [2.0, 2.2, 2.1, None, 3.0],
            "runs": [2, 2, 1, 1, 1],
        }
    )
    colours = {"llama": "#f58518", "vanilla": "#4c78a8", "rope_k_adjacent": "#ff9d98"}
    spec = charts.length_chart(curves, ctx_len=128, colours=colours).to_dict()
    lines, rule, _ = spec["layer"]
    encoding = lines["encoding"]
    assert encoding["x"]["field"] == "position" and encoding["y"]["field"] == "loss"
    assert encoding["color"]["field"] == "line" and encoding["detail"]["field"] == "experiment"
    scale = dict(zip(encoding["color"]["scale"]["domain"], encoding["color"]["scale"]["range"]))
    # each featured experiment in its own colour, named with how it knows positions; the rest grey
    assert scale == {
        "llama (RoPE)": colours["llama"],
        "vanilla (learned positions)": colours["vanilla"],
        "other experiments": palette.NEUTRAL_LIGHT,
    }
    assert encoding["strokeWidth"]["condition"]["test"] == "datum.featured"
    assert len(spec["datasets"][lines["data"]["name"]]) == 4  # the impossible bucket is not drawn
    assert spec["datasets"][rule["data"]["name"]][0]["position"] == 128


def test_stability_map_and_wall_clock_encodings():
    cells = pd.DataFrame(
        {
            "norm_pos": ["post", "pre"],
            "lr": [1e-2, 1e-2],
            "lr_label": ["0.01", "0.01"],
            "state": ["diverged", "trained"],
            "text": ["diverged @ 12", "best val 2.200"],
        }
    )
    spec = charts.stability_map(cells).to_dict()
    rects, labels = spec["layer"]
    assert (rects["encoding"]["x"]["field"], rects["encoding"]["y"]["field"]) == ("lr_label", "norm_pos")
    colors = dict(zip(rects["encoding"]["color"]["scale"]["domain"], rects["encoding"]["color"]["scale"]["range"]))
    assert colors == {"trained": charts.DEPTH_STATES["trained"], "diverged": charts.DIVERGED_RED}
    assert labels["encoding"]["text"]["field"] == "two_lines"  # the text, its number on a line of its own

    rows = pd.DataFrame(
        [wall_clock_row("norm", "rmsnorm", "manual", 1.5), wall_clock_row("norm", "rmsnorm", "fused", 0.5)]
    )
    spread, points, ratios = charts.wall_clock_chart(rows).to_dict()["layer"]
    # a log axis: a part 3x slower by hand lies as far right of its fused twin as any other 3x
    assert points["encoding"]["x"]["field"] == "median_ms" and points["encoding"]["x"]["scale"]["type"] == "log"
    assert (spread["encoding"]["x"]["field"], spread["encoding"]["x2"]["field"]) == ("min_ms", "max_ms")
    spec = charts.wall_clock_chart(rows).to_dict()
    assert [row["text"] for row in spec["datasets"][spec["layer"][2]["data"]["name"]]] == ["3.0x by hand"]


def test_grad_norm_heatmap_cells_reach_the_next_logged_step():
    norms = pd.DataFrame(
        {"step": [1, 2, 10, 1, 2, 10], "layer": [0, 0, 0, 1, 1, 1], "norm": [1.0, 2.0, float("nan"), 0.5, 0.0, 4.0]}
    )
    spec = charts.grad_norm_heatmap(norms).to_dict()
    heat, bad = spec["layer"]
    assert heat["encoding"]["color"]["scale"]["type"] == "log"
    good = pd.DataFrame(spec["datasets"][heat["data"]["name"]]).set_index(["layer", "step"])["step_end"]
    assert good.to_dict() == {(0, 1): 2, (0, 2): 10, (1, 1): 2, (1, 10): 18}  # the last as wide as the gap before
    notes = pd.DataFrame(spec["datasets"][bad["data"]["name"]]).set_index(["layer", "step"])["note"]
    assert notes.to_dict() == {(0, 10): "NaN / inf", (1, 2): "no gradient (0)"}


def test_the_exams_page_speaks_chinese_when_the_link_asks(exam_db, monkeypatch):
    """Every exam filled: the findings, tables and charts in Chinese; only what the exams stored
    as written (a reason, a model's name, a variant) stays as it is."""
    app = open_page(exam_db, "exams", monkeypatch, language="zh_CN")
    with duckdb.connect(str(exam_db), read_only=True) as con:
        stored = con.execute(
            "SELECT reason FROM exam_length WHERE reason IS NOT NULL UNION SELECT name FROM exam_kv_scale "
            "UNION SELECT variant FROM exam_wall_clock"
        ).fetchall()
    english = english_left(app, [text for (text,) in stored])
    assert not english, "the Exams page in Chinese still shows: " + " | ".join(english[:5])
    positions = next(frame for frame in app.dataframe if "positions" in frame.value)
    assert "learned positions" not in set(positions.value["positions"])  # shown in Chinese
    # the wall clock's rows name each part of a block in Chinese too ("attention · gqa" was left)
    rows = {row for table in chart_tables(app) if "row" in table for row in table["row"]}
    assert rows and not {row.split(" · ")[0] for row in rows} & {"attention", "norm", "ffn"}, rows


# ---------------------------------------------------------------------------------------------
# The parts of 2024-26


@pytest.fixture
def parts_db(tmp_path) -> Path:
    """The three exams of the parts of 2024-26 filled (the report's test rows), two grid runs."""
    db = new_database(tmp_path / "anatomy.duckdb")
    insert(db, "runs", GRID[:3])
    insert(db, "exam_qk_norm", QK_NORM)
    insert(db, "exam_mla", MLA)
    insert(db, "exam_moe", MOE)
    insert(
        db,
        "max_logits",
        max_logit_rows("qk_norm/plain_lr0.01", {1: [5.0, 6.0], 50: [90.0, 250.0], 80: [float("nan")] * 2})
        + max_logit_rows("qk_norm/qk_norm_lr0.01", {1: [3.0, 2.0], 50: [8.0, 7.0]})
        + max_logit_rows("llama/seed42", {1: [1.0, 1.0]}),  # a grid run's: not the map's
    )
    insert(db, "expert_shares", expert_share_rows("moe/moe_top1") + expert_share_rows("parts_moe_1e3/seed42"))
    return db


def expert_share_rows(run_id: str) -> list[dict]:
    """Two layers of 4 experts: at step 1 layer 0 sends most tokens to expert 0, by step 100 even."""
    first = {0: [0.55, 0.15, 0.15, 0.15], 1: [0.25, 0.25, 0.25, 0.25]}
    return [
        {"run_id": run_id, "step": step, "layer": layer, "expert": expert, "share": share}
        for step, by_layer in ((1, first), (100, {0: [0.25] * 4, 1: [0.25] * 4}))
        for layer, shares in by_layer.items()
        for expert, share in enumerate(shares)
    ]


def test_each_part_of_2024_26_shows_the_reports_sentence_and_its_exam(parts_db, monkeypatch):
    from anatomy.report.findings import exam_part_findings

    app = open_page(parts_db, "exams", monkeypatch)
    prose = texts(app)
    assert [h.value for h in app.header][-3:] == PARTS_HEADERS
    data = load(parts_db)
    records = exam_part_findings(data)
    assert list(records) == ["qk_norm", "mla", "moe"]
    for part, detail in (
        ("qk_norm", findings.qk_norm_text(data, bold=True)),
        ("mla", findings.mla_text(data)),
        ("moe", findings.moe_text(data)),
    ):
        assert f"**{records[part].sentence}**" in prose, part  # the report's sentence, word for word
        assert findings.sentence(detail) in prose, part
    assert "without QK-norm trains up to lr **0.003** (fails from 0.01), with QK-norm trains up to lr **0.01**" in prose
    assert "MLA (latent 32) buys a KV cache of 192 bytes per character, 0.38x GQA's 512" in prose
    assert "At the dense model's work per token, 4 experts (top-1) reach best val 2.080" in prose

    tables = chart_tables(app)
    qk_map, logits, mla_points, _experts = tables[-4:]
    cell = qk_map[(qk_map["norm_pos"] == "without QK-norm") & (qk_map["lr"] == 1e-2)].iloc[0]
    assert (cell["state"], cell["text"]) == ("diverged", "diverged @ 80")
    assert set(qk_map["norm_pos"]) == {"without QK-norm", "with QK-norm"}
    # the largest logit of any layer per step, the map's cells only; the diverged step's NaN not drawn
    peaks = logits.set_index(["cell", "step"])["max_logit"].to_dict()
    assert peaks == {
        ("plain_lr0.01", 1): 6.0,
        ("plain_lr0.01", 50): 250.0,
        ("qk_norm_lr0.01", 1): 3.0,
        ("qk_norm_lr0.01", 50): 8.0,
    }
    points = mla_points.dropna(subset=["name"]).drop_duplicates("name").set_index("name")
    assert points.loc["MLA (latent 32)", "bytes_per_char"] == 192 and points.loc["GQA (2 KV heads)", "kind"] == "GQA"
    moe = next(frame.value for frame in app.dataframe if "active_params" in frame.value).set_index("name")
    assert moe.loc["4 experts (top-1)", "load"] == "18%-34%" and moe.loc["dense (one SwiGLU)", "load"] == "–"
    assert moe.loc["4 experts (all on every token)", "step_ratio"] == 4.0


def test_the_experts_load_over_the_steps_is_drawn_per_layer(parts_db, monkeypatch):
    app = open_page(parts_db, "exams", monkeypatch)
    chooser = app.selectbox(key="exams_moe_cell")
    assert chooser.options == ["4 experts (top-1)"]  # the exam's cells only, not a study's MoE run
    drawn = chart_tables(app)[-1]
    assert len(drawn) == 16 and set(drawn["layer"]) == {"layer 1", "layer 2"}
    start = drawn[(drawn["step"] == 1) & (drawn["layer"] == "layer 1")].set_index("expert")["share"]
    assert start["expert 1"] == 0.55 and set(drawn["even"]) == {0.25}  # the dashed line: one in four
    spec = chart_specs(app)[-1]
    # a panel per layer, two a row: four in a row (a 4-layer model) ran 526 px past a phone's 390 px
    assert spec["facet"]["field"] == "layer" and spec["columns"] == 2
    assert 2 * spec["spec"]["width"] <= 260  # beside the y axis (about 60 px) and the spacing, in 358 px


def test_a_part_of_2024_26_with_only_some_cells_does_not_fail(tmp_path, monkeypatch):
    """One QK-norm variant, MLA's cache not measured yet, MoE without its dense cell: the page
    shows what there is and no finding it cannot make."""
    db = new_database(tmp_path / "anatomy.duckdb")
    insert(db, "runs", GRID[:2])
    insert(db, "exam_qk_norm", QK_NORM[:2])
    insert(db, "exam_mla", [{**MLA[3], "bytes_per_char": None, "measured_bytes": None, "formula_bytes": None}])
    insert(db, "exam_moe", MOE[1:2])
    app = open_page(db, "exams", monkeypatch)
    prose = texts(app)
    assert "with QK-norm: no cell yet" in prose
    assert "MLA (latent 16): cache not measured yet, best val 2.200" in prose
    assert "No attention logits logged for these cells yet." in prose
    assert "4 experts (top-1): 1,400,000 parameters" in prose
    assert "buys" not in prose and "At the dense model's work" not in prose


def test_the_parts_of_2024_26_speak_chinese_when_the_link_asks(parts_db, monkeypatch):
    """The three sections in Chinese: the finding records' sentences, the details, the tables."""
    from anatomy.language import speaking
    from anatomy.report.findings import exam_part_findings

    app = open_page(parts_db, "exams", monkeypatch, language="zh_CN")
    english = english_left(app, [])
    assert not english, "the Exams page in Chinese still shows: " + " | ".join(english[:5])
    with speaking("zh_CN"):
        records = exam_part_findings(load(parts_db))
    prose = texts(app)
    for record in records.values():
        assert f"**{record.sentence}**" in prose
    assert "不预热时，QK-norm 让 mini-LLaMA 能在不加它时所能承受的最大学习率的 3.33 倍下训练（0.01 对 0.003）" in prose
