"""The exams of the parts of 2024-26 (qk_norm, mla, moe): each by its command on tiny cells, what
it writes, the cache's bytes three ways, the parameter counts each MoE cell claims, and bad input
as one line."""

from __future__ import annotations

import json
import math
from pathlib import Path

import duckdb
import pandas as pd
import pytest
import torch

from anatomy.cli import main
from anatomy.config import ModelConfig, preset
from anatomy.exams import mla, moe, qk_norm
from anatomy.model import MiniLM
from run_folders import LLAMA_PARTS
from tiny_runs import tiny_data  # noqa: F401 (a fixture)

# 1 layer of width 32 (4 heads of 8), 10 steps: about a second a cell
TINY = ["--steps", "10", "--threads", "1", "d_model=32", "n_layer=1", "ctx_len=16"]
TINY += ["batch_size=4", "eval_every=5", "compile=false", "lr=3e-3", "warmup_steps=0"]


def exam(name: str, out: Path, data: Path, *extra: str) -> int:
    return main(["exam", name, "--out", str(out), "--data", str(data), *TINY, *extra])


# --- qk_norm ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def exams_root(tmp_path_factory):
    """results/exams of these tests: each exam in its own folder, as the workflow has them."""
    return tmp_path_factory.mktemp("exams")


@pytest.fixture(scope="module")
def qk_map(tiny_data, exams_root):  # noqa: F811
    out = exams_root / qk_norm.FOLDER
    assert exam("qk_norm", out, tiny_data, "--lr", "0.01", "1e30") == 0
    return out


def test_qk_norm_trains_each_variant_at_each_lr_with_its_logits_logged(qk_map):
    assert sorted(path.name for path in qk_map.iterdir()) == [
        "plain_lr0.01",
        "plain_lr1e+30",
        "qk_norm_lr0.01",
        "qk_norm_lr1e+30",
    ]
    rows = {row["cell"]: row for row in qk_norm.read_cells(qk_map)}
    assert rows["qk_norm_lr0.01"]["variant"] == "qk_norm" and rows["plain_lr0.01"]["variant"] == "plain"
    for name, row in rows.items():
        config = json.loads((qk_map / name / "config.json").read_text())
        assert config["model"]["qk_norm"] == (row["variant"] == "qk_norm")
        assert config["train"]["log_max_logits"] is True and config["train"]["warmup_steps"] == 0
        logged = [json.loads(line) for line in (qk_map / name / "max_logits.jsonl").read_text().splitlines()]
        finite = [v for line in logged for v in line["max_logits"] if v is not None and math.isfinite(v)]
        assert row["peak_max_logit"] == pytest.approx(max(finite))


def test_qk_norm_names_the_largest_lr_that_still_trains(qk_map):
    rows = qk_norm.read_cells(qk_map)
    by_cell = {row["cell"]: row for row in rows}
    assert by_cell["plain_lr1e+30"]["status"] == "diverged" and not by_cell["plain_lr1e+30"]["trained"]
    expected = {
        variant: max((r["lr"] for r in rows if r["variant"] == variant and r["trained"]), default=None)
        for variant in ("plain", "qk_norm")
    }
    assert qk_norm.largest_trained_lr(rows) == expected
    finding = qk_norm.format_map(rows).splitlines()[-1]
    assert finding.startswith("largest lr that still trains: ")
    for variant, lr in expected.items():
        assert f"{variant} {'none' if lr is None else repr(lr)}" in finding


# --- mla ---------------------------------------------------------------------------------------


def test_mla_cache_bytes_are_the_formula_and_the_tensors_bytes():
    cfg = preset("debug", vocab_size=20, **{**LLAMA_PARTS, "n_kv_head": 4}, attn_type="mla", kv_latent=8, rope_dim=4)
    model = MiniLM(cfg)
    tokens = 13
    _, cache = model.forward_cached(torch.randint(0, 20, (1, tokens)))
    tensors = sum(t.nelement() * t.element_size() for layer in cache.layers for t in layer)
    by_hand = cfg.n_layer * (8 + 4) * tokens * 4  # latent + shared rotated key, fp32
    assert cache.nbytes() == tensors == model.kv_cache_bytes(tokens) == by_hand


@pytest.fixture(scope="module")
def mla_cells(tiny_data, exams_root):  # noqa: F811
    out = exams_root / mla.FOLDER
    extra = ["rope_dim=4", "--tokens", "16", "--context", "8", "--chars", "4", "--rounds", "1", "--latents", "8", "16"]
    assert exam("mla", out, tiny_data, *extra) == 0
    return out


def test_mla_writes_bytes_per_character_best_val_and_speed_for_every_cell(mla_cells):
    rows = {row["cell"]: row for row in mla.read_cells(mla_cells)}
    assert sorted(rows) == ["gqa", "mha", "mla_latent16", "mla_latent8", "mqa"]
    head_dim, layers = 8, 1
    expected_per_char = {
        "mha": 2 * layers * 4 * head_dim * 4,
        "gqa": 2 * layers * 2 * head_dim * 4,
        "mqa": 2 * layers * 1 * head_dim * 4,
        "mla_latent8": layers * (8 + 4) * 4,
        "mla_latent16": layers * (16 + 4) * 4,
    }
    for name, row in rows.items():
        assert row["measured_bytes"] == row["formula_bytes"] == expected_per_char[name] * 16
        assert row["bytes_per_char"] == expected_per_char[name]
        assert row["best_val_loss"] is not None and row["chars_per_s"] > 0
        assert (mla_cells / name / "exams" / "mla.json").is_file()
    assert rows["mla_latent8"]["kv_latent"] == 8 and rows["mha"]["kv_latent"] is None


# --- moe ----------------------------------------------------------------------------------------


def test_the_moe_cells_have_the_parameters_they_claim():
    base = {**LLAMA_PARTS, "vocab_size": 20, "d_model": 32, "n_layer": 2, "n_head": 4, "ctx_len": 16}
    counts = {cell: moe.parameter_counts({**base, **moe.cell_settings(cell, 4)}) for cell in moe.CELLS}
    router = 2 * 32 * 4  # n_layer x d_model x n_experts
    expert = sum(p.numel() for p in MiniLM(ModelConfig.from_dict(base)).blocks[0].ffn.parameters())  # a SwiGLU
    dense_total, dense_active = counts["dense"]
    assert dense_total == dense_active
    # equal active parameters: the dense model's, plus the router
    assert counts["moe_top1"][1] == dense_active + router
    # equal total parameters: moe_all is moe_top1's total, all of it active
    assert (
        counts["moe_all"][0] == counts["moe_all"][1] == counts["moe_top1"][0] == dense_total + router + 2 * 3 * expert
    )
    assert counts["moe_top2"][1] == counts["moe_top1"][1] + 2 * expert


@pytest.fixture(scope="module")
def moe_cells(tiny_data, exams_root):  # noqa: F811
    """As the workflow runs it: two cells trained as jobs of their own (--train-only), then the
    whole exam, which trains the other two, reads the first two and times all four."""
    out = exams_root / moe.FOLDER
    for cell in ("dense", "moe_top1"):
        assert exam("moe", out, tiny_data, "--cells", cell, "--train-only") == 0
    assert not (out / moe.RESULT_FILE).exists()  # written by the last job only
    trained = {cell: (out / cell / "summary.json").stat().st_mtime_ns for cell in ("dense", "moe_top1")}
    assert exam("moe", out, tiny_data, "--rounds", "1", "--batch-size", "2") == 0
    assert trained == {cell: (out / cell / "summary.json").stat().st_mtime_ns for cell in trained}  # not again
    return out


def test_moe_writes_best_val_load_and_step_time_of_every_cell(moe_cells):
    result = json.loads((moe_cells / moe.RESULT_FILE).read_text())
    rows = {row["cell"]: row for row in moe.read_result(moe_cells / moe.RESULT_FILE)}
    assert sorted(rows) == sorted(moe.CELLS) and result["rounds"] == 1 and result["machine"]
    assert rows["dense"]["min_share"] is None and rows["dense"]["step_ratio"] == 1.0
    for name in ("moe_top1", "moe_top2", "moe_all"):
        row = rows[name]
        assert 0 <= row["min_share"] <= 0.25 <= row["max_share"] <= 1
        assert row["step_ms"] > 0 and row["step_ratio"] > 0 and row["best_val_loss"] is not None
    assert rows["moe_all"]["min_share"] == rows["moe_all"]["max_share"] == 0.25  # every expert, every token
    for name, row in rows.items():
        summary = json.loads((moe_cells / name / "summary.json").read_text())
        assert row["params"] == summary["params"] and row["run_step_s"] == summary["step_time_s"]


# --- collected ----------------------------------------------------------------------------------


def test_collect_reads_the_three_exams_and_their_cells_logs(qk_map, mla_cells, moe_cells, exams_root, tmp_path):
    db = tmp_path / "anatomy.duckdb"
    (tmp_path / "runs").mkdir()
    assert (
        main(
            ["collect", "--runs", str(tmp_path / "runs"), "--db", str(db), "--exams", str(exams_root), "--allow-empty"]
        )
        == 0
    )
    with duckdb.connect(str(db), read_only=True) as con:

        def rows(sql):
            return con.execute(sql).fetchall()

        expected_qk = qk_norm.read_cells(qk_map)
        assert rows(f"SELECT {', '.join(qk_norm.COLUMNS)} FROM exam_qk_norm ORDER BY cell") == [
            tuple(row[c] for c in qk_norm.COLUMNS) for row in expected_qk
        ]
        assert rows("SELECT count(*) FROM exam_mla WHERE measured_bytes = formula_bytes")[0][0] == 5
        assert sorted(rows("SELECT cell FROM exam_moe")) == sorted((cell,) for cell in moe.CELLS)
        # every QK-norm cell's logits, one row per logged step (1 layer here)
        logged = sum(len((qk_map / r["cell"] / "max_logits.jsonl").read_text().splitlines()) for r in expected_qk)
        assert rows("SELECT count(*) FROM max_logits WHERE run_id LIKE 'qk_norm/%'")[0][0] == logged
        shares = rows("SELECT DISTINCT run_id FROM expert_shares ORDER BY run_id")
        assert shares == [("moe/moe_all",), ("moe/moe_top1",), ("moe/moe_top2",)]


def test_the_report_states_what_the_real_exams_measured(qk_map, mla_cells, moe_cells, exams_root, tmp_path):
    """The tiny exams above, collected: the report's rows for the parts of 2024-26 carry their figures."""
    from anatomy.report import exam_findings, exams_section
    from anatomy.results.reader import load

    db = tmp_path / "anatomy.duckdb"
    (tmp_path / "runs").mkdir()
    args = ["collect", "--runs", str(tmp_path / "runs"), "--db", str(db), "--exams", str(exams_root)]
    assert main([*args, "--allow-empty"]) == 0
    data = load(db)
    section = exams_section.exams_section(data)
    # QK-norm: lr 1e30 diverges either way; the largest lr each variant trained at, as the exam prints it
    largest = qk_norm.largest_trained_lr(qk_norm.read_cells(qk_map))
    shown = exam_findings.qk_norm_text(data)
    for variant, words in exam_findings.QK_VARIANTS.items():
        lr = largest[variant]
        said = f"{words} trains up to lr {lr:g} (fails from 1e+30)" if lr else f"{words} trains at none of the 2"
        assert said in shown, shown
    assert f"shows: {shown}" in section
    # MLA: every cell's bytes per character and best val, as mla.json and the run say
    for row in mla.read_cells(mla_cells):
        name = exam_findings.mla_cell_name(pd.Series(row))
        assert (
            f"{name}: {row['bytes_per_char']:,.0f} bytes per character, best val {row['best_val_loss']:.3f}" in section
        )
    # MoE: parameters, best val and the step ratio of each cell, and the finding record's sentence
    for row in moe.read_result(moe_cells / moe.RESULT_FILE):
        name = exam_findings.moe_cell_name(pd.Series(row, dtype=object).replace({None: float("nan")}))
        assert (
            f"{name}: {row['params']:,} parameters, {row['active_params']:,} active, best val {row['best_val_loss']:.3f}"
            in section
        )
    top1 = {row["cell"]: row for row in moe.read_result(moe_cells / moe.RESULT_FILE)}["moe_top1"]
    assert f"a training step {top1['step_ratio']:.2f}x the dense model's here" in section
    assert "nan" not in section.lower()
    # the MLA and MoE findings give intervals where a run's seed noise is known: no note denies them
    assert "without an interval" not in section


# --- bad input: one line, naming what is wrong --------------------------------------------------


@pytest.mark.parametrize(
    ("name", "extra", "said"),
    [
        ("mla", ["--latents", "0"], "--latents 0 is not valid: expected a whole number of at least 1"),
        ("moe", ["--experts", "0"], "--experts 0 is not valid: expected a whole number of at least 1"),
        ("mla", ["--latents", "8"], "rope_dim = 16 is not valid for attn_type 'mla': expected an even number below"),
        ("qk_norm", ["--steps", "0"], "--steps 0 is not valid: expected a whole number of at least 1"),
    ],
)
def test_bad_input_is_one_line_naming_the_value(name, extra, said, tiny_data, tmp_path, capsys):  # noqa: F811
    assert exam(name, tmp_path / "out", tiny_data, *extra) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and said in err[0] and err[0].startswith("error: ")
