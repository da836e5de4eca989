"""The benchmark command runs every variant and writes its table as JSON (timings are not asserted)."""

import json
import math
import statistics
import sys

import pytest

from anatomy.exams import bench

from anatomy.training import compiling
from anatomy.exams.bench import step_ratio
from anatomy.cli import main
from anatomy.config import preset
from anatomy.model import MiniLM


@pytest.mark.slow  # seconds: CI runs it, the inner loop leaves it out
def test_bench_writes_every_variant(tmp_path, capsys):
    out = tmp_path / "bench.json"
    args = [*bench_args(out), "--gen-ctx-lens", "16", "32", "--no-compile"]
    assert main(args) == 0
    result = json.loads(out.read_text())
    variants = {(r["model"], r["impl"], r["precision"]) for r in result["training"]}
    assert variants == {(m, i, "fp32") for m in ("vanilla", "llama") for i in ("manual", "fused")}
    assert all(r["step_ms"] > 0 and r["tokens_per_s"] > 0 for r in result["training"])
    assert set(result["ratios"]["llama_fused_fp32 / vanilla_fused_fp32"]) == {"of_medians", "paired"}
    assert {(r["model"], r["ctx_len"]) for r in result["generation"]} == {
        (m, c) for m in ("vanilla", "llama") for c in (16, 32)
    }
    assert all(r["cached_s"] > 0 and r["recomputed_s"] > 0 for r in result["generation"])
    assert "speedup" in capsys.readouterr().out


def test_step_ratio_of_medians_and_per_round():
    """A slow patch (4x) covers llama's slot in round 2 and all of round 3. The medians then pair a
    slow llama round with a fast vanilla one (3.6); the per-round ratio still finds llama at 0.9x."""
    rows = [
        {"model": "vanilla", "impl": "fused", "precision": "fp32", "step_ms": 100.0, "round_ms": [100.0, 100.0, 400.0]},
        {"model": "llama", "impl": "fused", "precision": "fp32", "step_ms": 360.0, "round_ms": [90.0, 360.0, 360.0]},
    ]
    ratio = step_ratio(rows, ("llama", "fused", "fp32"), ("vanilla", "fused", "fp32"))
    assert ratio == pytest.approx({"of_medians": 3.6, "paired": 0.9})


def bench_args(out, precision=("fp32",), litgpt=False):
    """Tiny settings; one precision (whatever the machine has) and no litgpt unless asked."""
    return [
        "bench",
        "--rounds",
        "1",
        "--steps-per-round",
        "1",
        "--batch-size",
        "2",
        "--gen-chars",
        "8",
        "--gen-rounds",
        "1",
        "--gen-ctx-lens",
        "16",
        "--vocab-size",
        "64",
        "--threads",
        "1",
        *(["--precision", *precision] if precision else []),
        *([] if litgpt else ["--no-litgpt"]),
        "--out",
        str(out),
    ]


def run_bench(out, *extra, **options) -> dict:
    """The bench with bench_args(out, **options) and `extra` arguments; its JSON."""
    assert main([*bench_args(out, **options), *extra]) == 0
    return json.loads(out.read_text())


def identity_compile(monkeypatch):
    """torch.compile stood in for by the identity: compiling the chapter-size models would cost CI a
    minute (tests/test_train.py compiles for real). Both the bench and `auto` see a backend."""
    monkeypatch.setattr(bench.torch, "compile", lambda model: lambda *args: model(*args))
    monkeypatch.setattr(bench, "backend_available", lambda device: True)
    monkeypatch.setattr(compiling, "backend_available", lambda device: True)


def test_bench_times_the_compiled_variants_where_compile_works(tmp_path, monkeypatch):
    """The fused+compile rows and their ratios."""
    identity_compile(monkeypatch)
    result = run_bench(tmp_path / "bench.json")
    assert {(r["model"], r["impl"]) for r in result["training"]} == {
        (m, i) for m in ("vanilla", "llama") for i in ("manual", "fused", "fused+compile")
    }
    assert all(r["first_step_s"] > 0 for r in result["training"])
    assert "llama_fused+compile_fp32 / vanilla_fused+compile_fp32" in result["ratios"]
    assert "llama_fused+compile_fp32 / vanilla_fused_fp32" in result["ratios"]


def test_bench_leaves_out_a_variant_whose_compile_fails(tmp_path, monkeypatch, capsys):
    def broken_compile(model):
        def call(*args, **kwargs):
            raise RuntimeError("no working C++ compiler found")

        return call

    monkeypatch.setattr(bench.torch, "compile", broken_compile)
    monkeypatch.setattr(bench, "backend_available", lambda device: True)
    assert main(bench_args(tmp_path / "bench.json")) == 0
    result = json.loads((tmp_path / "bench.json").read_text())
    assert {r["impl"] for r in result["training"]} == {"manual", "fused"}
    assert not any("compile" in label for label in result["ratios"])
    assert "llama fused+compile fp32: torch.compile failed" in capsys.readouterr().out


def test_bench_parts_prints_and_writes_the_wall_clock_rows(tmp_path, monkeypatch, capsys):
    """--parts: the wall-clock exam's rows (its own reader accepts them) in the JSON and the output."""
    from anatomy.exams import wall_clock

    monkeypatch.setattr(wall_clock, "MIN_SAMPLE_S", 0.001)  # batch 2: no need for long samples
    out = tmp_path / "bench.json"
    assert main(bench_args(out) + ["--no-compile", "--parts"]) == 0
    result = json.loads(out.read_text())
    assert {(r["part"], r["variant"], r["impl"]) for r in result["parts"]} == {
        (part, variant, impl) for variant, (part, _) in wall_clock.VARIANTS.items() for impl in ("manual", "fused")
    }
    exam_file = tmp_path / "wall_clock.json"
    exam_file.write_text(json.dumps({"rows": result["parts"]}))
    assert wall_clock.read_rows(exam_file) == result["parts"]
    assert set(result["part_ratios"]) == {f"{part}/{variant}" for variant, (part, _) in wall_clock.VARIANTS.items()}
    printed = capsys.readouterr().out
    assert "manual/fused" in printed and "swiglu" in printed


def test_bench_leaves_the_parts_out_unless_asked(tmp_path):
    out = tmp_path / "bench.json"
    assert main(bench_args(out) + ["--no-compile"]) == 0
    assert "parts" not in json.loads(out.read_text())


def test_bench_times_steps_with_and_without_the_gradient_norm_logging(tmp_path, monkeypatch, capsys):
    """Only the logged steps call block_grad_norms, once per step; the ratio is logged / plain per
    round, and the 3% verdict follows from it (what the ratio is, is not asserted)."""
    calls = []
    real = bench.block_grad_norms
    monkeypatch.setattr(bench, "block_grad_norms", lambda blocks: calls.append(len(blocks)) or real(blocks))
    out = tmp_path / "bench.json"
    assert main(bench_args(out) + ["--no-compile", "--rounds", "2", "--steps-per-round", "2"]) == 0
    from anatomy.exams.wall_clock import WARMUP_CALLS

    logged_steps = WARMUP_CALLS + 2 * 2  # warm-up, then 2 rounds of 2 steps
    assert calls == [4] * (logged_steps + bench.NORM_CALLS) * 2  # then timed alone; both models, 4 blocks each
    rows = json.loads(out.read_text())["grad_norm_cost"]
    assert [r["model"] for r in rows] == ["vanilla", "llama"]
    for r in rows:
        assert math.isfinite(r["ratio"]) and r["ratio"] > 0 and r["plain_ms"] > 0 and r["logged_ms"] > 0
        assert r["norms_ms"] > 0 and r["norms_share"] == pytest.approx(r["norms_ms"] / r["plain_ms"])
        assert r["ratio"] == pytest.approx(statistics.median(r["round_ratios"]))
        assert r["under_target"] == (r["ratio"] < 1.03)
    assert "the 3% target" in capsys.readouterr().out


@pytest.mark.slow  # seconds: CI runs it, the inner loop leaves it out
def test_bench_times_the_fused_variants_in_each_precision(tmp_path, monkeypatch):
    """fp32 and bf16 rows of each fused variant (manual: fp32 only), and the precision ratios
    computed from the rows of this same run."""
    identity_compile(monkeypatch)
    result = run_bench(tmp_path / "bench.json", precision=("fp32", "bf16"))
    rows = result["training"]
    assert {(r["model"], r["impl"], r["precision"]) for r in rows} == {
        (m, "manual", "fp32") for m in ("vanilla", "llama")
    } | {(m, i, p) for m in ("vanilla", "llama") for i in ("fused", "fused+compile") for p in ("fp32", "bf16")}
    assert result["precisions"] == ["fp32", "bf16"] and result["bf16_missing"] is None
    assert all(r["step_ms"] > 0 and len(r["round_ms"]) == r["rounds"] for r in rows)
    assert set(result["precision_ratios"]) == {
        f"{m}_{i}_fp32 / {m}_{i}_bf16" for m in ("vanilla", "llama") for i in ("fused", "fused+compile")
    }
    vanilla = result["precision_ratios"]["vanilla_fused_fp32 / vanilla_fused_bf16"]
    assert vanilla == step_ratio(rows, ("vanilla", "fused", "fp32"), ("vanilla", "fused", "bf16"))
    # train's default: vanilla eager, llama compiled; with bf16 auto compiles both
    assert result["setting_ratios"] == {
        "vanilla_fused_fp32 / vanilla_fused+compile_bf16": step_ratio(
            rows, ("vanilla", "fused", "fp32"), ("vanilla", "fused+compile", "bf16")
        ),
        "llama_fused+compile_fp32 / llama_fused+compile_bf16": step_ratio(
            rows, ("llama", "fused+compile", "fp32"), ("llama", "fused+compile", "bf16")
        ),
    }
    assert "llama_fused_bf16 / vanilla_fused_bf16" in result["ratios"]


def test_bench_leaves_bf16_out_where_the_device_lacks_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench, "native_bf16", lambda device: False)
    result = run_bench(tmp_path / "bench.json", "--no-compile", precision=None)  # the default: bf16 where native
    assert {r["precision"] for r in result["training"]} == {"fp32"}
    assert result["precision_ratios"] == {} and result["setting_ratios"] == {}
    assert result["bf16_missing"].startswith("no bf16 rows: this cpu has no native bfloat16 multiply")
    assert result["bf16_missing"] in capsys.readouterr().out


def test_bench_says_how_to_install_litgpt_where_it_is_missing(tmp_path, monkeypatch, capsys):
    for name in ("litgpt", "litgpt.config", "litgpt.model"):
        monkeypatch.setitem(sys.modules, name, None)  # `import litgpt` now raises ImportError
    result = run_bench(tmp_path / "bench.json", "--no-compile", litgpt=True)
    hint = "pip install --no-deps litgpt lightning lightning-utilities torchmetrics"
    assert result["litgpt"] == {"installed": False, "install": hint}
    assert {r["impl"] for r in result["training"]} == {"manual", "fused"}
    assert f"litgpt is not installed, so no comparison with it ({hint} to add one)" in capsys.readouterr().out


def test_litgpt_twin_holds_as_many_parameters_as_ours():
    pytest.importorskip("litgpt.model")
    from anatomy.exams.litgpt_llama import LitgptLM

    cfg = preset("llama", vocab_size=64, d_model=32, n_layer=2)
    assert bench.parameter_count(LitgptLM(cfg)) == bench.parameter_count(MiniLM(cfg))


def test_bench_times_litgpt_next_to_ours(tmp_path, monkeypatch, capsys):
    """litgpt rows at each precision, eager and compiled, and litgpt / ours from the same run."""
    pytest.importorskip("litgpt.model")
    identity_compile(monkeypatch)
    result = run_bench(tmp_path / "bench.json", precision=("fp32", "bf16"), litgpt=True)
    rows = result["training"]
    assert {(r["impl"], r["precision"]) for r in rows if r["impl"].startswith("litgpt")} == {
        (i, p) for i in ("litgpt", "litgpt+compile") for p in ("fp32", "bf16")
    }
    assert result["litgpt"]["params"] == result["litgpt"]["ours_params"]
    assert result["litgpt_ratios"]["llama_litgpt_bf16 / llama_fused_bf16"] == step_ratio(
        rows, ("llama", "litgpt", "bf16"), ("llama", "fused", "bf16")
    )
    assert len(result["litgpt_ratios"]) == 4
    assert f"{result['litgpt']['params']:,} parameters, ours" in capsys.readouterr().out
