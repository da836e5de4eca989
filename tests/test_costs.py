"""`python -m anatomy costs`: the runs' shapes read from their configs and timed once each, the
estimate of every run from a shape's timing, costs.json, and the report's sentence from a shipped
costs.json. The timing itself is injected (a fake timer): no test passes or fails on a clock,
and the one that times for real (tiny shapes, one step) checks only what it wrote."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest

from anatomy.cli import main
from anatomy.errors import AnatomyError
from anatomy.report import costs_section
from anatomy.results import costs

TINY = {"d_model": 16, "n_layer": 1, "n_head": 2, "n_kv_head": 2, "ctx_len": 16, "vocab_size": 20}
LLAMA = {"norm_type": "rmsnorm", "norm_pos": "pre", "pos_type": "rope", "ffn_type": "swiglu", "n_kv_head": 1}
# a tiny run: 100 steps, an evaluation every 10 (10 in all); 62 validation windows of 16 tokens
# (1000 tokens) and max_train_eval_windows 8 of the training split: 70 windows an evaluation
TRAIN = {"steps": 100, "eval_every": 10, "batch_size": 2, "eval_batch_size": 4, "max_train_eval_windows": 8}
DATA = {"dir": "corpus", "vocab_size": 20, "train_tokens": 10_000, "val_tokens": 1000}


def write_config(root: Path, experiment: str, seed: int, group: str, model=None, train=None, preset="vanilla") -> Path:
    """A run folder's config.json as `anatomy train` writes it (nothing else: costs reads only that)."""
    folder = root / experiment / f"seed{seed}"
    folder.mkdir(parents=True)
    config = {
        "preset": preset,
        "model": {**TINY, **(model or {})},
        "train": {**TRAIN, "seed": seed, "compile": False, **(train or {})},
        "tags": {"experiment": experiment, "group": group},
        "data": DATA,
    }
    (folder / "config.json").write_text(json.dumps(config))
    return folder


@pytest.fixture
def runs_root(tmp_path: Path) -> Path:
    """Two seeds of one shape, a second grid shape, and a study in bf16."""
    root = tmp_path / "reference" / "runs"
    write_config(root, "vanilla", 42, "headline")
    write_config(root, "vanilla", 7, "headline")  # the same shape: timed once
    write_config(root, "llama", 42, "headline", model=LLAMA, preset="llama")
    write_config(root, "vanilla_bf16", 42, "precision", train={"precision": "bf16"})
    return root


class FakeTimer:
    """Every shape: 1 s a step, 10 ms an evaluation window, 10 s more for the first steps; the
    shapes it was given kept."""

    def __init__(self):
        self.shapes: list[dict] = []

    def __call__(self, shapes, steps, lanes):
        self.shapes += shapes
        timing = {"step_s": 1.0, "eval_window_s": 0.01, "compile_s": 10.0, "compiled": False}
        return [{**timing, "device": "cpu", "torch_version": "2.x"} for _ in shapes]


def test_runs_that_share_a_shape_are_timed_once_and_the_grid_again_in_bf16(runs_root):
    runs = costs.read_runs(runs_root)
    assert len(runs) == 4
    assert runs[0].windows == 70 and runs[0].evaluations == 10
    timer = FakeTimer()
    costs.measure(runs_root, None, 2, 2, timer)
    shapes = [(shape["model"]["norm_type"], shape["train"]["precision"]) for shape in timer.shapes]
    # vanilla's two seeds are one shape; vanilla in bf16 is the study's own shape, timed once for both
    assert sorted(shapes) == [("layernorm", "bf16"), ("layernorm", "fp32"), ("rmsnorm", "bf16"), ("rmsnorm", "fp32")]
    # --group grid: the study's runs are left out, the grid's shapes in bf16 are not
    timer = FakeTimer()
    costs.measure(runs_root, ["grid"], 2, 2, timer)
    assert len(timer.shapes) == 4
    timer = FakeTimer()
    costs.measure(runs_root, ["precision"], 2, 2, timer)
    assert [shape["train"]["precision"] for shape in timer.shapes] == ["bf16"]


def test_the_estimate_is_steps_evaluations_and_the_first_steps_extra(runs_root):
    # grid.json beside the runs: vanilla seed 42's job took 234 s, twice the estimate
    record = {"job_s": 234.0, "train_s": 200.0, "finished_utc": "2026-12-01T00:00:00Z"}
    (runs_root.parent / "grid.json").write_text(json.dumps({"runs": {"vanilla/seed42": record}}))
    measured = costs.measure(runs_root, None, 2, 2, FakeTimer())
    # 100 steps x 1 s + 10 evaluations x 70 windows x 0.01 s + 10 s = 117 s a run
    assert {run["estimate_s"] for run in measured["runs"]} == {117.0}
    rows = {(row["group"], row["precision"]): row for row in measured["rows"]}
    headline = rows[("headline", "fp32")]
    assert headline["runs"] == 3 and headline["minutes_per_run"] == pytest.approx(117 / 60)
    assert headline["run_hours"] == pytest.approx(3 * 117 / 3600)
    assert headline["lane_hours"] == pytest.approx(3 * 117 / 3600 / 2)  # two lanes that never idle
    assert headline["estimate_over_measured"] == pytest.approx(0.5)  # only the run with a record counts
    assert rows[("precision", "bf16")]["estimate_over_measured"] is None
    # the grid in bf16: the same runs, and no fp32 job to set it against
    assert rows[("grid", "bf16")]["runs"] == 3 and rows[("grid", "bf16")]["estimate_over_measured"] is None
    assert [row["group"] for row in measured["rows"]] == ["headline", "grid", "precision", "headline", "grid"]
    # a night on 2 lanes: 57,600 lane-seconds, 117 s a run
    night = measured["night"]
    assert night["runs_per_night"] == pytest.approx(8 * 3600 * 2 / 117) and night["precision"] == "fp32"
    sentence = costs.night_sentence(night)
    assert sentence.startswith("An 8-hour night on 2 lanes trains about 492 of the grid's runs here in fp32")
    assert "The whole grid fits in one night in either precision." in sentence


def test_the_command_writes_costs_json_and_prints_the_table(runs_root, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(costs, "lanes_timer", FakeTimer())
    out = tmp_path / "costs.json"
    assert main(["costs", "--runs", str(runs_root), "--out", str(out), "--steps", "2"]) == 0
    written = json.loads(out.read_text())
    assert costs.read_costs(out) == written  # what the report reads, it can read
    assert written["lanes"] == 2 and written["steps_timed"] == 2 and written["torch_version"] == "2.x"
    assert len(written["shapes"]) == 4 and written["shapes"][0]["label"] == "llama"
    assert written["load_average_before"] is None or len(written["load_average_before"]) == 3
    printed = capsys.readouterr().out
    assert "the whole grid" in printed and "precision (a study)" in printed
    assert costs.night_sentence(written["night"]) in printed
    assert not list(tmp_path.glob(".costs.json*"))  # written atomically: no temporary left


@pytest.mark.slow  # two fresh interpreters load torch: seconds on a quiet machine, a minute under load
def test_the_lanes_time_real_steps_of_a_tiny_shape(runs_root, tmp_path):
    """Two lanes side by side, one step of each shape, through the trainer's code: what they
    wrote, not how fast it was."""
    out = tmp_path / "costs.json"
    assert main(["costs", "--runs", str(runs_root), "--out", str(out), "--steps", "1", "--group", "precision"]) == 0
    (shape,) = json.loads(out.read_text())["shapes"]
    assert shape["train"]["precision"] == "bf16" and shape["device"] == "cpu"
    assert shape["step_s"] > 0 and shape["eval_window_s"] > 0 and shape["compile_s"] >= 0


def test_the_report_says_what_a_night_buys_from_a_shipped_costs_json(tmp_path):
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps({"runs": {}}))
    assert costs_section.MEASURED not in costs_section.read_provenance(grid)  # none: the old estimate stays
    measured = {
        "measured_utc": "2026-12-03T01:02:03Z",
        "machine": "AMD EPYC 7B13, 2 cores",
        "torch_version": "2.13.0+cpu",
        "lanes": 2,
        "steps_timed": 8,
        "load_average_before": [0.04, 0.1, 0.2],
        "night": {
            "hours": 8,
            "lanes": 2,
            "grid_runs": 36,
            "precision": "fp32",
            "grid_hours": 9.6,
            "grid_hours_bf16": 4.5,
            "runs_per_night": 30.1,
            "runs_per_night_bf16": 64.2,
        },
    }
    (tmp_path / "costs.json").write_text(json.dumps(measured))
    shipped = costs_section.read_provenance(grid)[costs_section.MEASURED]
    assert costs_section.measured_night(shipped) == (
        "Measured on 2026-12-03 by `python -m anatomy costs` on AMD EPYC 7B13, 2 cores (torch 2.13.0+cpu): "
        "each run shape timed for 8 steps on 2 lanes side by side, one thread each; the 1-minute load average "
        "was 0.04 before the timing.\n\nAn 8-hour night on 2 lanes trains about 30 of the grid's runs here in fp32, "
        "or 64 in bf16: the whole grid (36 runs) takes 9.6 h on 2 lanes that never idle in fp32, and 4.5 h in "
        "bf16. The whole grid fits in one night in bf16, not in fp32."
    )
    # the section says it in place of the estimate from the precision study's runs
    record = {"job_s": 1200.0, "train_s": 1100.0, "finished_utc": "2026-12-01T00:00:00Z"}
    data = SimpleNamespace(
        runs=pd.DataFrame(
            {"run_id": ["vanilla/seed42", "vanilla_bf16/seed42"], "group": ["headline", "precision"]}
            | {"precision": ["fp32", "bf16"], "n_layer": [4, 4]}
        ),
        provenance={"runs": {"vanilla/seed42": record, "vanilla_bf16/seed42": record}, "grid": {}},
    )
    assert "In bf16 (the precision study's runs" in costs_section.costs_section(data)
    data.provenance[costs_section.MEASURED] = shipped
    section = costs_section.costs_section(data)
    assert costs_section.measured_night(shipped) in section and "In bf16 (the precision study's runs" not in section

    (tmp_path / "costs.json").write_text(json.dumps({**measured, "lanes": "two"}))
    with pytest.raises(AnatomyError, match=r"costs.json: field 'lanes' must be a whole number, got 'two'"):
        costs_section.read_provenance(grid)


@pytest.mark.parametrize(
    "case, said",
    [
        ("no folder", r"--runs .*missing: no such folder"),
        ("no config", r"--runs .*runs: no config.json in any folder under it"),
        ("refused", r"vanilla/seed42/config.json: ModelConfig: d_model 30 is not divisible by n_head 4"),
        ("no group", r"--group scale: no run under .* is of that group; the groups there: grid, headline"),
    ],
)
def test_bad_input_is_one_line(tmp_path, case, said, capsys):
    root = tmp_path / ("missing" if case == "no folder" else "runs")
    if case != "no folder":
        (root / "empty").mkdir(parents=True)
    if case in ("refused", "no group"):
        write_config(root, "vanilla", 42, "headline", model={"d_model": 30, "n_head": 4} if case == "refused" else {})
    args = ["costs", "--runs", str(root), "--out", str(tmp_path / "costs.json")]
    assert main(args + (["--group", "scale"] if case == "no group" else [])) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert re.search(said, err), err
    assert not (tmp_path / "costs.json").exists()


def test_a_study_of_model_sizes_says_minutes_per_run_and_a_night_at_each_size_and_machine():
    """The size study's points are model settings: each size's median job time, per machine, and
    how many such runs two lanes finish in a night (2 x floor(480 / minutes))."""
    from types import SimpleNamespace

    import pandas as pd

    from anatomy.report.costs_section import point_costs

    sizes = [("s1", 2, 64, 600, "cpu A"), ("s2", 2, 64, 900, "cpu A"), ("s3", 2, 64, 1500, "cpu A")]
    sizes += [("m1", 4, 128, 1800, "cpu A"), ("m2", 4, 128, 1200, "cpu B"), ("x", 4, 128, 60, "cpu B")]
    runs = pd.DataFrame(
        [{"run_id": r, "group": "size" if r != "x" else "lr", "n_layer": n, "d_model": d} for r, n, d, _s, _m in sizes]
    )
    provenance = {"runs": {r: {"job_s": seconds, "machine": machine} for r, _n, _d, seconds, machine in sizes}}
    text = point_costs(SimpleNamespace(runs=runs, provenance=provenance), "size")
    # chips by letter, in the order they first finished a run (none recorded here: cpu A, then B)
    assert "| 2×64 | A | 3 | 15.0 | 64 |" in text  # median of 10, 15 and 25 minutes; 2 x 32
    assert "| 4×128 | A | 1 | 30.0 | 32 |" in text
    assert "| 4×128 | B | 1 | 20.0 | 48 |" in text  # the lr study's run of that shape is not the size study's
    assert text.index("2×64") < text.index("4×128")
    assert point_costs(SimpleNamespace(runs=runs, provenance=provenance), "lr") == ""  # its points are setups


def test_a_parts_study_says_minutes_per_run_of_each_part_on_each_text():
    """The parts study's cost is the parts' own: the plain mini-LLaMA's runs first, then each part
    in the chapter's order (QK-norm before the experts), text by text, smallest text first."""
    from types import SimpleNamespace

    import pandas as pd

    from anatomy.report.costs_section import point_costs

    cells = [("q1", "qk_norm", 64_000, 1200), ("q2", "qk_norm", 64_000, 1800), ("e1", "moe", 64_000, 3000)]
    cells += [("p1", None, 64_000, 1500), ("b1", "moe", 8_192_000, 2400)]
    runs = pd.DataFrame(
        [{"run_id": r, "group": "parts", "part": part, "train_tokens": n, "corpus": "mine"} for r, part, n, _s in cells]
    )
    provenance = {"runs": {r: {"job_s": seconds, "machine": "cpu A"} for r, _part, _n, seconds in cells}}
    text = point_costs(SimpleNamespace(runs=runs, provenance=provenance), "parts")
    assert text.startswith("The `parts` study part by part on each text:")
    rows = [line for line in text.splitlines() if line.startswith("| 64,000") or line.startswith("| 8,192,000")]
    assert rows == [
        "| 64,000 characters of mine | the plain mini-LLaMA | A | 1 | 25.0 | 38 |",
        "| 64,000 characters of mine | QK-norm | A | 2 | 25.0 | 38 |",  # median of 20 and 30 minutes
        "| 64,000 characters of mine | experts (MoE) | A | 1 | 50.0 | 18 |",
        "| 8,192,000 characters of mine | experts (MoE) | A | 1 | 40.0 | 24 |",
    ]
