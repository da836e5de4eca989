"""The lr study's section (anatomy/report/lr_section.py): each model's curve over lr, its best lr,
the verdict at each model's own best, and lr sensitivity, on hand-made runs with known answers."""

from __future__ import annotations

import math

import pytest

from anatomy.report import markdown
from anatomy.report.lr_section import lr_answer, lr_points, lr_section, setups
from anatomy.results import collect
from anatomy.results.reader import load
from run_folders import LLAMA_PARTS, SCALE_SIZES, write_run_folder, write_scale_runs

DATA = {"vocab_size": 50, "train_tokens": SCALE_SIZES["l"], "val_tokens": 500, "corpus": "poems_l"}
# best val floor per lr; None: the run diverges. Seeds add 0.02 (42) and 0.03 (7) to a floor.
VANILLA = {1e-3: 2.30, 2e-3: 2.10, 4e-3: 2.20, 8e-3: None}
LLAMA = {1e-3: 2.05, 2e-3: 2.15, 4e-3: 2.25}


def write_lr_runs(runs_root, floors, model, preset, stalled=()):
    for lr, floor in floors.items():
        name = f"lr_l_{preset}_{lr:g}".replace(".", "_").replace("-", "m")
        for seed in (42, 7):
            write_run_folder(
                runs_root,
                name,
                seed,
                group="lr",
                preset=preset,
                model=model,
                data=DATA,
                train={"precision": "bf16", "lr": lr},
                floor=floor if floor is not None else 2.0,
                status="diverged" if floor is None else "done",
                diverged_step=40 if floor is None else None,
                turn_step=0 if lr in stalled else 50,
            )


@pytest.fixture
def lr_db(tmp_path):
    runs_root = tmp_path / "runs"
    write_scale_runs(runs_root, {"l": (2.60, 2.50)})  # lr 3e-4 on the same setup: points of the curves too
    write_lr_runs(runs_root, VANILLA, None, "vanilla")
    write_lr_runs(runs_root, LLAMA, LLAMA_PARTS, "llama")
    db = tmp_path / "anatomy.duckdb"
    collect.collect(runs_root, db)
    return runs_root, db


def test_each_model_has_its_curve_with_the_other_studys_runs_and_its_best_lr(lr_db):
    (setup,) = setups(load(lr_db[1]))
    vanilla, llama = setup.curves[0], setup.curves[5]
    assert list(vanilla.points["lr"]) == [3e-4, 1e-3, 2e-3, 4e-3, 8e-3]  # the scale study's 3e-4 included
    assert vanilla.points["mean"].round(3).tolist()[:4] == [2.625, 2.325, 2.125, 2.225]
    assert vanilla.points["diverged"].tolist() == [0, 0, 0, 0, 2]
    assert vanilla.best_lr == 2e-3 and vanilla.bracketed
    assert llama.best_lr == 1e-3 and llama.bracketed  # 3e-4 (2.525) is worse, below it
    # both seeds, 0.01 apart, in every experiment: sd 0.01 / sqrt(2), one degree of freedom each
    d = setup.verdict
    assert d.mean == pytest.approx(2.075 - 2.125) and d.sign == -1 and d.n == 1


def test_lr_sensitivity_counts_a_diverged_lr_at_the_loss_of_a_fresh_model(lr_db):
    (setup,) = setups(load(lr_db[1]))
    initial = math.log(50)  # ln(vocabulary)
    # vanilla: over 3e-4, 1e-3, 2e-3, 4e-3 and the diverged 8e-3, each above the best (2.125)
    expected = (0.5 + 0.2 + 0.0 + 0.1 + (initial - 2.125)) / 5
    assert setup.curves[0].sensitivity() == pytest.approx(expected)
    assert setup.curves[5].sensitivity() == pytest.approx((0.45 + 0.0 + 0.1 + 0.2) / 4)


def test_the_verdict_at_each_models_best_lr_in_words(lr_db):
    everything = load(lr_db[1])
    answer = lr_answer(everything)
    assert answer.startswith("**Still lower.** At each model's own best lr (vanilla 0.002, mini-LLaMA 0.001)")
    assert "llama minus vanilla -0.050 (95% interval" in answer
    section = lr_section(everything)
    assert "Diverged at lr 0.008." in section
    assert "vanilla: lr tried 0.0003, 0.001, 0.002, 0.004, 0.008; best val 2.125 at lr 0.002, with a worse" in section
    # the report has the section, under the study's question, and its figure's data
    report = markdown.render(everything, ["lr"])
    assert "### Does the mini-LLaMA still win when each model has its own best learning rate?" in report
    assert "(lr.png)" in report
    points = lr_points(everything)
    assert points.loc[points["best"], ["model", "lr"]].values.tolist() == [["vanilla", 2e-3], ["mini-LLaMA", 1e-3]]


def test_a_best_lr_at_the_edge_of_the_range_is_not_testable(tmp_path):
    runs_root = tmp_path / "runs"
    write_lr_runs(runs_root, VANILLA, None, "vanilla")
    write_lr_runs(runs_root, LLAMA, LLAMA_PARTS, "llama")  # no 3e-4 this time: llama's best is its lowest lr
    collect.collect(runs_root, tmp_path / "db.duckdb")
    everything = load(tmp_path / "db.duckdb")
    (setup,) = setups(everything)
    assert not setup.curves[5].bracketed and setup.curves[0].bracketed
    assert lr_answer(everything).startswith("**Not testable here yet**")
    assert "the best lr of mini-LLaMA lies at the edge of the lrs tried" in lr_answer(everything)


def test_a_run_that_never_trains_past_its_first_evaluation_is_said(tmp_path):
    runs_root = tmp_path / "runs"
    write_lr_runs(runs_root, {**LLAMA, 8e-3: 3.0}, LLAMA_PARTS, "llama", stalled=(8e-3,))
    write_lr_runs(runs_root, VANILLA, None, "vanilla")
    collect.collect(runs_root, tmp_path / "db.duckdb")
    (setup,) = setups(load(tmp_path / "db.duckdb"))
    assert setup.curves[5].points["stalled"].tolist() == [0, 0, 0, 2]
    assert "At lr 0.008 it never got better than its first evaluation" in lr_section(load(tmp_path / "db.duckdb"))
