"""The benchmark command runs every variant and writes its table as JSON (timings are not asserted)."""

import json

import pytest

from anatomy.bench import step_ratio
from anatomy.cli import main


def test_bench_writes_every_variant(tmp_path, capsys):
    out = tmp_path / "bench.json"
    args = ["bench", "--rounds", "1", "--steps-per-round", "1", "--batch-size", "2", "--gen-chars", "8",
            "--gen-rounds", "1", "--gen-ctx-lens", "16", "32", "--vocab-size", "64", "--threads", "1", "--out", str(out)]
    assert main(args) == 0
    result = json.loads(out.read_text())
    variants = {(r["model"], r["impl"]) for r in result["training"]}
    assert variants == {(m, i) for m in ("vanilla", "llama") for i in ("manual", "fused")}
    assert all(r["step_ms"] > 0 and r["tokens_per_s"] > 0 for r in result["training"])
    assert set(result["ratios"]["llama_fused / vanilla_fused"]) == {"of_medians", "paired"}
    assert {(r["model"], r["ctx_len"]) for r in result["generation"]} == {
        (m, c) for m in ("vanilla", "llama") for c in (16, 32)}
    assert all(r["cached_s"] > 0 and r["recomputed_s"] > 0 for r in result["generation"])
    assert "speedup" in capsys.readouterr().out


def test_step_ratio_of_medians_and_per_round():
    """A slow patch (4x) covers llama's slot in round 2 and all of round 3. The medians then pair a
    slow llama round with a fast vanilla one (3.6); the per-round ratio still finds llama at 0.9x."""
    rows = [{"model": "vanilla", "impl": "fused", "step_ms": 100.0, "round_ms": [100.0, 100.0, 400.0]},
            {"model": "llama", "impl": "fused", "step_ms": 360.0, "round_ms": [90.0, 360.0, 360.0]}]
    ratio = step_ratio(rows, ("llama", "fused"), ("vanilla", "fused"))
    assert ratio == pytest.approx({"of_medians": 3.6, "paired": 0.9})
