"""The benchmark command runs every variant and writes its table as JSON (timings are not asserted)."""

import json

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
    assert "llama_fused / vanilla_fused" in result["ratios"]
    assert {(r["model"], r["ctx_len"]) for r in result["generation"]} == {
        (m, c) for m in ("vanilla", "llama") for c in (16, 32)}
    assert all(r["cached_s"] > 0 and r["recomputed_s"] > 0 for r in result["generation"])
    assert "speedup" in capsys.readouterr().out
