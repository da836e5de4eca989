"""The wall-clock exam: a row for every part, variant and impl; manual and fused compute the same
thing, so their timings compare like with like; its result file is checked when read back.
(Timings are only required to be positive and finite: their values depend on the machine.)"""

import contextlib
import io
import json
import math

import pytest
import torch

from anatomy.cli import main
from anatomy.errors import AnatomyError
from anatomy.exams import wall_clock
from anatomy.model import CausalSelfAttention, GeluMLP, LayerNorm, MiniLM, RMSNorm, RotaryEmbedding, SwiGLU

TINY = {"d_model": 32, "n_layer": 1, "ctx_len": 16, "vocab_size": 64}
TINY_ARGS = [f"{key}={value}" for key, value in TINY.items()]
ROPE = wall_clock.ROPE_VARIANT
# (part, variant) -> (the model's class that does the work, the input shape timed at batch 2)
EXPECTED_PARTS = {
    ("norm", "layernorm"): (LayerNorm, "2x16x32"),
    ("norm", "rmsnorm"): (RMSNorm, "2x16x32"),
    ("rope", ROPE): (RotaryEmbedding, "2x16x6x8"),  # 4 query + 2 key heads of 8 dimensions
    ("attention", "mha"): (CausalSelfAttention, "2x16x32"),
    ("attention", "gqa"): (CausalSelfAttention, "2x16x32"),
    ("ffn", "gelu"): (GeluMLP, "2x16x32"),
    ("ffn", "swiglu"): (SwiGLU, "2x16x32"),
    ("step", "vanilla"): (MiniLM, "2x16"),
    ("step", "llama"): (MiniLM, "2x16"),
}
SCHEMA_COLUMNS = ["part", "variant", "impl", "shape", "median_ms", "min_ms", "max_ms", "rounds"]


@pytest.fixture(scope="module")
def exam_result(tmp_path_factory):
    """One tiny run of the exam through the command line: (its result file, what it printed)."""
    out = tmp_path_factory.mktemp("wall_clock") / "wall_clock.json"
    printed = io.StringIO()
    with pytest.MonkeyPatch.context() as patch, contextlib.redirect_stdout(printed):
        patch.setattr(wall_clock, "MIN_SAMPLE_S", 0.001)  # tiny parts: no need for long samples
        assert (
            main(
                [
                    "exam",
                    "wall_clock",
                    "--out",
                    str(out),
                    "--rounds",
                    "2",
                    "--batch-size",
                    "2",
                    "--threads",
                    "1",
                    "--device",
                    "cpu",
                    *TINY_ARGS,
                ]
            )
            == 0
        )
    return out, printed.getvalue()


def test_every_part_variant_and_impl_has_a_row_with_the_schema_columns(exam_result):
    out, _ = exam_result
    rows = wall_clock.read_rows(out)
    assert {(r["part"], r["variant"], r["impl"]) for r in rows} == {
        (part, variant, impl) for part, variant in EXPECTED_PARTS for impl in ("manual", "fused")
    }
    assert len(rows) == 2 * len(EXPECTED_PARTS)
    for row in rows:
        assert list(row) == SCHEMA_COLUMNS
        assert row["shape"] == EXPECTED_PARTS[(row["part"], row["variant"])][1]
        assert row["rounds"] == 2
        assert all(math.isfinite(row[name]) and row[name] > 0 for name in ("median_ms", "min_ms", "max_ms"))
        assert row["min_ms"] <= row["median_ms"] <= row["max_ms"]


def test_the_file_records_the_sizes_and_the_table_shows_each_ratio(exam_result):
    out, printed = exam_result
    data = json.loads(out.read_text())
    assert data["sizes"] == TINY and data["batch_size"] == 2 and data["threads"] == 1
    assert set(data["ratios"]) == {f"{part}/{variant}" for part, variant in EXPECTED_PARTS}
    assert all(math.isfinite(ratio) and ratio > 0 for ratio in data["ratios"].values())
    assert "manual/fused" in printed
    for part, variant in EXPECTED_PARTS:
        assert any(line.split()[:1] == [part] and variant in line for line in printed.splitlines())


@pytest.mark.parametrize("variant", list(wall_clock.VARIANTS))
def test_each_part_is_the_models_own_class_with_its_impl(variant):
    part = wall_clock.VARIANTS[variant][0]
    for impl in ("manual", "fused"):
        workload = wall_clock.build_workload(variant, impl, TINY, 2, torch.device("cpu"))
        assert isinstance(workload.module, EXPECTED_PARTS[(part, variant)][0])
        if part in ("attention", "step"):
            assert workload.module.cfg.impl == impl
        elif part != "rope":  # RoPE has no impl switch: the same code either way
            assert workload.module.impl == impl
    attention_heads = {"mha": 4, "gqa": 2}
    if variant in attention_heads:
        assert workload.module.n_kv_head == attention_heads[variant]


@pytest.mark.parametrize("variant", list(wall_clock.VARIANTS))
def test_manual_and_fused_compute_the_same_outputs_and_gradients(variant):
    """On the same weights and input: same output, same gradient of the input and of every weight."""
    manual, fused = (
        wall_clock.build_workload(variant, impl, TINY, 2, torch.device("cpu")) for impl in ("manual", "fused")
    )
    out_manual, out_fused = manual.run(), fused.run()
    tolerance = {"rtol": 1e-4, "atol": 1e-5}
    torch.testing.assert_close(out_manual, out_fused, **tolerance)
    if manual.inputs is not None:
        torch.testing.assert_close(manual.inputs.grad, fused.inputs.grad, **tolerance)
    manual_grads = {name: p.grad for name, p in manual.module.named_parameters()}
    fused_grads = {name: p.grad for name, p in fused.module.named_parameters()}
    assert manual_grads.keys() == fused_grads.keys()
    for name, grad in manual_grads.items():
        assert grad is not None, name
        torch.testing.assert_close(grad, fused_grads[name], **tolerance)


def test_rounds_alternate_which_impl_goes_first():
    """manual, fused in even rounds; fused, manual in odd ones (after the warm-up calls)."""
    calls = []
    ms = wall_clock.interleaved_ms(
        {"manual": lambda: calls.append("m"), "fused": lambda: calls.append("f")},
        rounds=3,
        device=torch.device("cpu"),
        repeats=1,
    )
    warmup = ["m"] * wall_clock.WARMUP_CALLS + ["f"] * wall_clock.WARMUP_CALLS
    assert calls == warmup + ["m", "f", "f", "m", "m", "f"]
    assert [len(ms["manual"]), len(ms["fused"])] == [3, 3]


def test_ratio_is_the_median_of_the_per_round_ratios():
    """A slow patch hits manual in round 2 and both in round 3: the per-round ratios are 2, 8, 2."""
    timing = wall_clock.PartTiming(
        "norm", "layernorm", "2x16x32", {"manual": [2.0, 8.0, 8.0], "fused": [1.0, 1.0, 4.0]}
    )
    assert timing.ratio == pytest.approx(2.0)
    assert timing.rows()[0] == {
        "part": "norm",
        "variant": "layernorm",
        "impl": "manual",
        "shape": "2x16x32",
        "median_ms": 8.0,
        "min_ms": 2.0,
        "max_ms": 8.0,
        "rounds": 3,
    }


def good_file(tmp_path, rows=None):
    row = {
        "part": "norm",
        "variant": "rmsnorm",
        "impl": "manual",
        "shape": "32x128x128",
        "median_ms": 2.0,
        "min_ms": 1.5,
        "max_ms": 3.0,
        "rounds": 5,
    }
    path = tmp_path / "wall_clock.json"
    path.write_text(json.dumps({"device": "cpu", "rows": rows if rows is not None else [row]}))
    return path, row


def test_read_rows_round_trips_a_written_file(tmp_path):
    path, row = good_file(tmp_path)
    assert wall_clock.read_rows(path) == [row]


@pytest.mark.parametrize(
    "change, field",
    [
        ({"median_ms": -1.0}, "median_ms"),
        ({"median_ms": "fast"}, "median_ms"),
        ({"rounds": True}, "rounds"),
        ({"rounds": 0}, "rounds"),
        ({"impl": "compiled"}, "impl"),
        ({"variant": "gelu"}, "part/variant"),  # gelu is an ffn, not a norm
        ({"min_ms": 2.5}, "min_ms <= median_ms"),
        ({"note": "extra"}, "note"),
        ({"shape": None}, "shape"),
    ],
)
def test_read_rows_names_the_file_and_the_bad_field(tmp_path, change, field):
    path, row = good_file(tmp_path)
    path, _ = good_file(tmp_path, [{**row, **change}])
    with pytest.raises(AnatomyError, match=field) as error:
        wall_clock.read_rows(path)
    assert str(path) in str(error.value)


def test_read_rows_refuses_a_repeated_row_a_missing_list_and_broken_json(tmp_path):
    path, row = good_file(tmp_path)
    path, _ = good_file(tmp_path, [row, dict(row)])
    with pytest.raises(AnatomyError, match="appears twice"):
        wall_clock.read_rows(path)
    path.write_text(json.dumps({"device": "cpu"}))
    with pytest.raises(AnatomyError, match="'rows'"):
        wall_clock.read_rows(path)
    path.write_text("{not json")
    with pytest.raises(AnatomyError, match="not valid JSON"):
        wall_clock.read_rows(path)
    with pytest.raises(AnatomyError, match="no such file"):
        wall_clock.read_rows(tmp_path / "missing.json")


@pytest.mark.parametrize(
    "argument, expected",
    [
        ("n_head=2", "n_head=2"),  # the heads are not a size here: mha and gqa must keep 4 and 2 KV heads
        ("d_model=30", "d_model"),  # not divisible by the 4 heads
        ("--rounds=0", "--rounds"),
    ],
)
def test_the_command_refuses_bad_arguments_in_one_line(tmp_path, capsys, argument, expected):
    out = tmp_path / "wall_clock.json"
    assert main(["exam", "wall_clock", "--out", str(out), argument]) == 2
    assert expected in capsys.readouterr().err
    assert not out.exists()


def test_the_workflow_passes_the_wall_clock_exam_only_the_sizes_it_takes():
    """The quick config shrinks rope_dim too (for MLA); the wall-clock exam refuses a size it does
    not take, so the workflow's copy of its keys must be its own."""
    import ast
    import re
    from pathlib import Path

    from anatomy.exams.wall_clock import SIZE_KEYS

    text = (Path(__file__).resolve().parents[1] / "workflow" / "rules" / "common.smk").read_text(encoding="utf-8")
    assert ast.literal_eval(re.search(r"^WALL_CLOCK_SIZES = (\(.*\))$", text, flags=re.MULTILINE)[1]) == SIZE_KEYS
