"""The size study, as workflow/studies.yaml declares it, rendered by the one analysis of a declared
study (anatomy/report/study_section.py): the lr study's analysis at each model size, the sizes'
differences judged together, on hand-made runs with known answers."""

from __future__ import annotations

import dataclasses

import pytest

from anatomy.report import markdown
from anatomy.report import study_section
from anatomy.results.studies import declared
from anatomy.results import collect
from anatomy.results.reader import load
from run_folders import LLAMA_PARTS, write_run_folder

DATA = {"vocab_size": 50, "train_tokens": 8_192_000, "val_tokens": 500, "corpus": "poems_8m"}
SIZES = {"s": (2, 32), "m": (4, 64), "l": (6, 96)}
# best val floor per size, model and lr: vanilla's best lr falls with size, the mini-LLaMA's stays
FLOORS = {
    ("s", "vanilla"): {1e-3: 2.60, 2e-3: 2.50, 4e-3: 2.55},
    ("s", "llama"): {1e-3: 2.58, 2e-3: 2.45, 4e-3: 2.52},
    ("m", "vanilla"): {5e-4: 2.42, 1e-3: 2.30, 2e-3: 2.35},
    ("m", "llama"): {5e-4: 2.40, 1e-3: 2.30, 2e-3: 2.36},
    ("l", "vanilla"): {2.5e-4: 2.30, 5e-4: 2.20, 1e-3: 2.25},
    ("l", "llama"): {5e-4: 2.16, 1e-3: 2.10, 2e-3: 2.20},
}


def write_size_runs(runs_root, floors=FLOORS, seeds=(42, 7)):
    for (size, preset), by_lr in floors.items():
        n_layer, d_model = SIZES[size]
        model = {"d_model": d_model, **(LLAMA_PARTS if preset == "llama" else {})}
        for lr, floor in by_lr.items():
            for seed in seeds:
                write_run_folder(
                    runs_root,
                    f"size_{size}_{preset}_{lr:g}".replace(".", "_").replace("-", "m"),
                    seed,
                    group="size",
                    preset=preset,
                    n_layer=n_layer,
                    model=model,
                    data=DATA,
                    train={"precision": "fp32", "lr": lr},
                    floor=floor,
                )


@pytest.fixture(scope="module")
def everything(tmp_path_factory):
    """One database for the module: collecting 36 runs takes seconds, and each test reads it."""
    tmp_path = tmp_path_factory.mktemp("size")
    write_size_runs(tmp_path / "runs")
    collect.collect(tmp_path / "runs", tmp_path / "anatomy.duckdb")
    return load(tmp_path / "anatomy.duckdb")


SIZE = declared()["size"]


def points(everything):
    return study_section.points(everything, SIZE)


def size_section(everything):
    return study_section.study_section(everything, SIZE)


def size_points(everything):
    return study_section.study_points(everything, SIZE)


def without(everything, drop):
    """The same results with some runs left out (the noise table stays: it is the database's)."""
    return dataclasses.replace(everything, runs=everything.runs[~drop(everything.runs)])


def test_each_size_is_a_point_with_each_models_own_best_lr(everything):
    found = points(everything)
    assert [(int(p.key["n_layer"]), int(p.key["d_model"])) for p in found] == [(2, 32), (4, 64), (6, 96)]
    best = [(p.curves[0].best_lr, p.curves[5].best_lr) for p in found]
    assert best == [(2e-3, 2e-3), (1e-3, 1e-3), (5e-4, 1e-3)]
    assert all(curve.bracketed for p in found for curve in p.curves.values())


def test_the_section_judges_the_sizes_together_and_says_which_way_each_goes(everything):
    text = size_section(everything)
    # own lrs: S llama 2.45 vs vanilla 2.50 (lower), M 2.30 vs 2.30 (level), L 2.10 vs 2.20 (lower);
    # seeds add 0.02 and 0.03 alike, so the pooled sd is tiny and -0.05 is far beyond it
    assert "2×32: -0.050 [" in text and "4×64: +0.000 [" in text and "6×96: -0.100 [" in text
    assert "the mini-LLaMA is lower beyond noise at 2×32, 6×96; the two are level within noise at 4×64" in text
    assert "judged together (Holm)" in text
    assert "tokens per parameter" in text


def test_a_size_whose_best_lr_is_at_the_edge_is_not_an_answer_yet(everything):
    # vanilla's best at 6×96 is 5e-4: without its lower neighbour it lies at the edge
    text = size_section(without(everything, lambda runs: (runs["d_model"] == 96) & (runs["lr"] == 2.5e-4)))
    assert "**Not answered yet.**" in text
    assert "still missing: 6×96: the best lr of vanilla is the edge of the lrs tried." in text


def test_fewer_than_three_sizes_is_not_an_answer_yet(everything):
    text = size_section(without(everything, lambda runs: runs["d_model"] == 96))
    assert "still missing: points still to train: 1." in text


def test_one_seed_gives_no_interval_and_says_what_is_missing(everything):
    one_seed = dataclasses.replace(
        without(everything, lambda runs: runs["seed"] == 7), noise=everything.noise.iloc[0:0]
    )
    text = size_section(one_seed)
    assert "no noise estimate (no second seed yet)" in text


def test_the_figures_data_have_own_and_shared_lr_per_size_and_model(everything):
    drawn = size_points(everything)
    own = drawn[drawn["rule"] == "own"].set_index(["point", "model"])
    assert own.loc[("6×96", "vanilla"), "lr"] == 5e-4
    assert own.loc[("6×96", "mini-LLaMA"), "mean"] == pytest.approx(2.125)
    shared = drawn[drawn["rule"] == "shared"]
    assert set(shared["lr"]) == {1e-3} and len(shared) == 6
    assert own.loc[("2×32", "vanilla"), "params"] < own.loc[("6×96", "vanilla"), "params"]


def test_the_report_has_the_size_section_and_its_figures(everything):
    report = markdown.render(everything, figure_names=["size", "size_lr"])
    assert "### Does the answer change with model size?" in report
    assert "(size.png)" in report and "(size_lr.png)" in report


def test_the_answered_size_study_is_a_numbered_finding_linked_to_its_section(everything):
    from anatomy.report.findings import findings, numbered

    record = next(f for f in findings(everything) if f.key == "size_gap")
    assert record.sentence.startswith(
        "At each model's own best lr on 8,192,000 characters of poems_8m (fp32), llama minus vanilla: 2×32: -0.050 ["
    )
    assert record.verdict == -1 and record.difference.mean == pytest.approx(-0.100)  # the largest size's
    assert "(#does-the-answer-change-with-model-size)" in numbered([record])
    # not answered (a size missing): no record, the section says what is missing instead
    fewer = without(everything, lambda runs: runs["d_model"] == 96)
    assert not any(f.key == "size_gap" for f in findings(fewer))
