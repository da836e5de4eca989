"""The results report: tables from the views, verdicts from the data, figures, the README's section."""

from __future__ import annotations

import json
import re
import sys
import subprocess
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from anatomy.report import claims

from anatomy.report import markdown
from anatomy.cli import main
from anatomy.report.roles import read_provenance
from anatomy.results.reader import load, load_runs
from anatomy.results.collect import collect
from run_folders import LLAMA_PARTS, write_run_folder

REPO = Path(__file__).resolve().parent.parent
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def table_rows(markdown: str, heading: str) -> list[list[str]]:
    """The body rows of the first table after `### heading`, as lists of cells."""
    lines = markdown.split(f"### {heading}", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[start + 2 : end]]


def verdicts(data) -> dict[str, str]:
    return {claim.claim: claim.verdict for claim in claims.claims(data)}


def test_headline_table_holds_run_summary_numbers(fixture_grid_db):
    text = markdown.render(load(fixture_grid_db), [])
    rows = {row[0]: row for row in table_rows(text, "Headline")}
    with duckdb.connect(str(fixture_grid_db), read_only=True) as con:
        expected = {
            experiment: con.execute(
                "SELECT best_val_loss, best_step, final_val_loss, final_train_loss FROM run_summary "
                "WHERE experiment = ? ORDER BY seed DESC",
                [experiment],
            ).fetchall()
            for experiment in ("vanilla", "llama")
        }
    for name, experiment in (("vanilla (2017)", "vanilla"), ("mini-LLaMA", "llama")):
        best, step, final_val, final_train = zip(*expected[experiment])
        assert rows[name][1] == "42 / 7"
        assert rows[name][3] == " / ".join(f"{v:.3f}" for v in best)
        assert rows[name][4] == " / ".join(str(s) for s in step)
        assert rows[name][5] == " / ".join(f"{v:.3f}" for v in final_val)
        assert rows[name][6] == " / ".join(f"{v:.3f}" for v in final_train)


def test_verdicts_on_a_grid_where_the_chapter_holds(fixture_grid_db):
    # the fixture: llama bottoms out earlier (40 vs 70) and lower (2.10 vs 2.30) than vanilla, then
    # rises by 0.7; the deep post-norm run diverges and the pre-norm one does not
    found = verdicts(load(fixture_grid_db))
    assert found["The mini-LLaMA learns faster: its best val comes earlier"] == "**reproduced**"
    assert found["The mini-LLaMA reaches a lower best val"] == "**reproduced**"
    assert found["The mini-LLaMA memorises after its best val: val climbs while train falls"] == "**reproduced**"
    deep = [v for c, v in found.items() if c.startswith("A 12-layer post-norm")][0]
    assert deep == "**reproduced**: post-norm diverged, pre-norm did not"
    assert [v for c, v in found.items() if c.startswith("Breaking RoPE")] == ["not yet run"]
    # swiglu is measured both ways with both seeds, beyond the noise; the other parts are not complete
    part = [c for c in claims.claims(load(fixture_grid_db)) if c.claim == "Which part earned the gain"][0]
    assert part.verdict == "partly answered"
    assert part.measured == (
        "seed noise 0.010, two seeds each way; earned the gain both ways: swiglu; "
        "not yet both ways with two seeds: rmsnorm, prenorm, rope, gqa"
    )


def grid_db(tmp_path: Path, **experiments) -> Path:
    """A database of the headline pair (both seeds) plus the given runs: name -> write_run_folder kwargs."""
    runs = tmp_path / "runs"
    for name, kwargs in experiments.items():
        for seed in (42, 7):
            write_run_folder(runs, name, seed, **kwargs)
    db = tmp_path / "grid.duckdb"
    collect(runs, db)
    return db


def deep_pair(post: dict | None = None, pre: dict | None = None) -> dict[str, dict]:
    """The 12-layer break pair as grid_db arguments: post-norm and pre-norm mini-LLaMAs, with overrides."""
    deep = {"group": "break", "n_layer": 12}
    return {
        "deep_post_nowarmup": {**deep, "model": {**LLAMA_PARTS, "norm_pos": "post"}, **(post or {})},
        "deep_pre_nowarmup": {**deep, "model": LLAMA_PARTS, **(pre or {})},
    }


def test_verdicts_turn_when_the_data_turn(tmp_path):
    # vanilla now bottoms out earlier and lower; the llama never climbs; the deep pair both train
    db = grid_db(
        tmp_path,
        vanilla={"floor": 2.0, "turn_step": 40},
        llama={"floor": 2.3, "turn_step": 100, "model": LLAMA_PARTS},
        **deep_pair({"floor": 2.05}, {"floor": 2.05}),
    )
    found = verdicts(load(db))
    # vanilla turned: its best is a real one, and the llama's, still to come, is later still
    assert found["The mini-LLaMA learns faster: its best val comes earlier"] == "**not reproduced**"
    assert found["The mini-LLaMA reaches a lower best val"] == "**not reproduced**"
    # the llama never turned: there is no "after its best val" to memorise in
    assert found["The mini-LLaMA memorises after its best val: val climbs while train falls"] == (
        "not testable here: val was still falling at the last evaluation"
    )
    deep = [v for c, v in found.items() if c.startswith("A 12-layer post-norm")][0]
    assert deep.startswith("**not reproduced**")


def test_a_claim_whose_premise_did_not_happen_is_not_testable(tmp_path):
    """Runs too short to turn (the quick grid): both best vals are at the last evaluation, so
    "step 100 vs 100" and "val rises by 0.000" say nothing about the chapter's claims."""
    db = grid_db(
        tmp_path,
        vanilla={"floor": 2.3, "turn_step": 100},
        llama={"floor": 2.1, "turn_step": 100, "model": LLAMA_PARTS},
    )
    data = load(db)
    assert (data.runs["best_step"] == data.runs["final_val_step"]).all()
    assert not claims.turned(data.runs).any()
    found = verdicts(data)
    assert found["The mini-LLaMA learns faster: its best val comes earlier"] == (
        "not testable here: no run turned (val was still falling at the last evaluation)"
    )
    assert found["The mini-LLaMA memorises after its best val: val climbs while train falls"] == (
        "not testable here: val was still falling at the last evaluation"
    )


def test_a_seed_that_never_turned_is_left_out_of_the_verdict_and_named(tmp_path):
    runs = tmp_path / "runs"
    for seed in (42, 7):
        write_run_folder(runs, "vanilla", seed, floor=2.3, turn_step=100 if seed == 7 else 70)
        write_run_folder(runs, "llama", seed, floor=2.1, turn_step=100 if seed == 7 else 40, model=LLAMA_PARTS)
    collect(runs, tmp_path / "grid.duckdb")
    found = verdicts(load(tmp_path / "grid.duckdb"))
    assert found["The mini-LLaMA learns faster: its best val comes earlier"] == (
        "**reproduced** (seed 7 not testable: no run turned)"
    )
    assert found["The mini-LLaMA memorises after its best val: val climbs while train falls"] == (
        "**reproduced** (seed 7 not testable: val was still falling at the last evaluation)"
    )


def test_a_deep_post_norm_model_lower_than_pre_norm_is_said_so(tmp_path):
    # both train; post-norm bottoms out 0.15 lower with both seeds (noise 0.01)
    db = grid_db(
        tmp_path,
        vanilla={},
        llama={"model": LLAMA_PARTS},
        **deep_pair({"floor": 1.9}, {"floor": 2.05}),
    )
    deep = [c for c in claims.claims(load(db)) if c.claim.startswith("A 12-layer post-norm")][0]
    assert deep.verdict == (
        "**not reproduced** at this lr: post-norm trains, and lower than pre-norm beyond seed noise"
    )
    assert deep.measured == (
        "post-norm: diverged no, best val 1.920 / 1.930; pre-norm: diverged no, best val 2.070 / 2.080; "
        "post minus pre -0.150 (-0.150 to -0.150), at peak lr 0.0003"
    )


@pytest.mark.parametrize(
    ("post", "pre", "verdict"),
    [
        ({"floor": 2.3}, {"floor": 2.05}, "**partly reproduced**: post-norm trains, but worse beyond seed noise"),
        ({}, {"status": "diverged", "diverged_step": 30}, "**not reproduced**: pre-norm diverged"),
    ],
)
def test_the_deep_pair_verdict_follows_divergence_then_the_val_gap(tmp_path, post, pre, verdict):
    db = grid_db(tmp_path, vanilla={}, llama={"model": LLAMA_PARTS}, **deep_pair(post, pre))
    found = verdicts(load(db))
    assert [v for c, v in found.items() if c.startswith("A 12-layer post-norm")] == [verdict]


def test_a_gain_inside_seed_noise_is_not_a_finding(tmp_path):
    # llama lower with both seeds, but by 0.005 against a seed spread of 0.01
    db = grid_db(tmp_path, vanilla={"floor": 2.105}, llama={"floor": 2.1, "model": LLAMA_PARTS})
    found = verdicts(load(db))
    assert found["The mini-LLaMA reaches a lower best val"] == (
        "**not reproduced**: lower with every seed, but by less than the seed noise"
    )
    lower = [c for c in claims.claims(load(db)) if c.claim == "The mini-LLaMA reaches a lower best val"][0]
    assert lower.measured == (
        "best val 2.120 / 2.130 vs 2.125 / 2.135: llama minus vanilla -0.005 / -0.005 "
        "(negative: llama lower; seed noise 0.010)"
    )


@pytest.mark.parametrize(
    ("llama", "lower", "neither_testable"),
    [
        # vanilla has two seeds (spread 0.010), llama one: its gap is judged against vanilla's spread
        ({"floor": 2.295}, "**not reproduced**: lower with every seed, but by less than the seed noise", False),
        ({"floor": 2.1}, "**reproduced** with one seed, by more than the other model's seed noise", False),
        # diverged before its first evaluation: no best val, so nothing to compare
        ({"status": "diverged", "diverged_step": 0}, "not testable: no seed has a best val for both models", True),
    ],
)
def test_llama_with_one_seed_is_judged_against_the_noise_vanilla_measured(tmp_path, llama, lower, neither_testable):
    runs = tmp_path / "runs"
    for seed in (42, 7):
        write_run_folder(runs, "vanilla", seed, floor=2.3)
    write_run_folder(runs, "llama", 42, model=LLAMA_PARTS, **llama)
    collect(runs, tmp_path / "one.duckdb")
    found = verdicts(load(tmp_path / "one.duckdb"))
    assert found["The mini-LLaMA reaches a lower best val"] == lower
    if neither_testable:  # the best step is missing too
        assert found["The mini-LLaMA learns faster: its best val comes earlier"] == lower


def test_a_lower_best_val_from_one_seed_says_the_noise_is_unmeasured(tmp_path):
    runs = tmp_path / "runs"
    write_run_folder(runs, "vanilla", 42, floor=2.3)
    write_run_folder(runs, "llama", 42, floor=2.1, model=LLAMA_PARTS)
    collect(runs, tmp_path / "one.duckdb")
    found = verdicts(load(tmp_path / "one.duckdb"))
    assert found["The mini-LLaMA reaches a lower best val"] == (
        "**reproduced** with one seed; a second seed would measure the seed noise"
    )


def test_each_part_is_judged_both_ways_and_a_part_can_help_one_model_and_not_the_other(tmp_path):
    # vanilla 2.3 and llama 2.1, seed noise 0.01. SwiGLU: added, 0.1 lower; removed, 0.1 lower too (llama
    # does better without it). GQA: added, within noise; removed, 0.2 higher. RoPE: added, 0.1 higher;
    # removed, within noise. RMSNorm: only added, one direction. Pre-norm: not trained.
    def ablation(part, direction, floor):
        return {"group": "ablation", "part": part, "direction": direction, "floor": floor}

    db = grid_db(
        tmp_path,
        vanilla={"floor": 2.3},
        llama={"floor": 2.1, "model": LLAMA_PARTS},
        vanilla_plus_swiglu=ablation("swiglu", "add", 2.2),
        llama_minus_swiglu=ablation("swiglu", "remove", 2.0),
        vanilla_plus_gqa=ablation("gqa", "add", 2.303),
        llama_minus_gqa=ablation("gqa", "remove", 2.3),
        vanilla_plus_rope=ablation("rope", "add", 2.4),
        llama_minus_rope=ablation("rope", "remove", 2.102),
        vanilla_plus_rmsnorm=ablation("rmsnorm", "add", 2.0),
    )
    data = load(db)
    assert claims.part_effects(data, "swiglu") == (claims.HELPS, claims.HURTS)
    assert claims.part_effects(data, "gqa") == (claims.NOT_BEYOND_NOISE, claims.HELPS)
    assert claims.part_effects(data, "rope") == (claims.HURTS, claims.NOT_BEYOND_NOISE)
    assert claims.part_effects(data, "rmsnorm") is None
    part = [c for c in claims.claims(data) if c.claim == "Which part earned the gain"][0]
    assert part.measured == (
        "seed noise 0.010, two seeds each way; earned the gain both ways: none; "
        "rope: hurts vanilla, llama does not clearly miss it; "
        "gqa: llama misses it, vanilla does not clearly gain from it; "
        "swiglu: helps vanilla, llama does better without it; not yet both ways with two seeds: rmsnorm, prenorm"
    )
    assert markdown.training_loss_verdict(data, "swiglu") == (
        "in the training loss, adding it to vanilla lowers best val beyond seed noise and removing it from llama "
        "lowers best val beyond seed noise (helps vanilla, llama does better without it)"
    )


NO_GAIN = "; and here the mini-LLaMA has no gain to earn: its best val is not lower beyond seed noise"


@pytest.mark.parametrize(("llama_floor", "ending"), [(2.1, ""), (2.3, NO_GAIN)])
def test_with_every_part_measured_the_verdict_names_who_earned_the_gain(tmp_path, llama_floor, ending):
    # vanilla 2.3, llama 2.1 (or as good as vanilla), noise 0.01: RoPE helps both ways, SwiGLU only
    # added to vanilla, the rest not at all
    def ablation(part, direction, floor):
        return {"group": "ablation", "part": part, "direction": direction, "floor": floor}

    gains = {"rope": (0.1, 0.1), "swiglu": (0.1, 0.0)}  # (added: lower by, removed: higher by)
    experiments = {}
    for part in ("rmsnorm", "prenorm", "rope", "gqa", "swiglu"):
        added, removed = gains.get(part, (0.0, 0.0))
        experiments[f"vanilla_plus_{part}"] = ablation(part, "add", 2.3 - added)
        experiments[f"llama_minus_{part}"] = ablation(part, "remove", llama_floor + removed)
    db = grid_db(tmp_path, vanilla={"floor": 2.3}, llama={"floor": llama_floor, "model": LLAMA_PARTS}, **experiments)
    part = [c for c in claims.claims(load(db)) if c.claim == "Which part earned the gain"][0]
    assert part.verdict == (
        "**answered here**: rope earned it both ways; added to the 2017 model alone, swiglu lowers its best val"
        + ending
    )


def test_a_part_is_judged_seed_by_seed(tmp_path):
    # seed noise 0.01 (each seed sits 0.02 / 0.03 above its floor). SwiGLU added: 0.05 lower with seed 42,
    # 0.005 lower with seed 7, so not every seed is beyond the noise. Removed: 0.2 higher with seed 42, 0.1
    # lower with seed 7: the seeds disagree. GQA added: seed 7 diverged before its first evaluation, so one
    # seed is all there is, however the other one lies.
    runs = tmp_path / "runs"
    floors = {
        "vanilla": (2.3, 2.3, {}),
        "llama": (2.1, 2.1, {}),
        "vanilla_plus_swiglu": (2.25, 2.295, {"part": "swiglu", "direction": "add"}),
        "llama_minus_swiglu": (2.3, 2.0, {"part": "swiglu", "direction": "remove"}),
        "vanilla_plus_gqa": (2.0, 2.0, {"part": "gqa", "direction": "add"}),
        "llama_minus_gqa": (2.3, 2.3, {"part": "gqa", "direction": "remove"}),
    }
    for name, (floor_42, floor_7, labels) in floors.items():
        group = {"group": "ablation", **labels} if labels else {}
        model = {"model": LLAMA_PARTS} if name.startswith("llama") else {}
        write_run_folder(runs, name, 42, floor=floor_42, **group, **model)
        diverged = {"status": "diverged", "diverged_step": 0} if name == "vanilla_plus_gqa" else {}
        write_run_folder(runs, name, 7, floor=floor_7, **group, **model, **diverged)
    collect(runs, tmp_path / "grid.duckdb")
    data = load(tmp_path / "grid.duckdb")
    assert claims.part_effects(data, "swiglu") == (claims.NOT_BEYOND_NOISE, claims.NOT_BEYOND_NOISE)
    assert markdown.training_loss_verdict(data, "swiglu") == (
        "in the training loss, neither adding it to vanilla nor removing it from llama moves best val beyond "
        "seed noise with every seed"
    )
    assert claims.part_effects(data, "gqa") is None
    assert markdown.training_loss_verdict(data, "gqa") == (
        "the training loss does not tell yet (not measured both ways with two seeds)"
    )
    rows = {row[0]: row for row in table_rows(markdown.render(data, []), "Which part earned the gain")}
    assert rows["gqa"][1:3] == ["-0.300 (1 seed)", "needs 2 seeds"]


def memorised_grid(tmp_path: Path, llama_turn_step: int = 50) -> Path:
    """The headline pair with measured best and last samples of the llama: seed 42 copies more at
    its last weights than at its best and than the control, seed 7 less than the control."""
    runs = tmp_path / "runs"
    for seed, last_copied in ((42, 0.30), (7, 0.02)):
        write_run_folder(runs, "vanilla", seed)
        run = write_run_folder(runs, "llama", seed, model=LLAMA_PARTS, turn_step=llama_turn_step)

        def sample(checkpoint, copied, val):
            figures = {
                "min_chars": 12,
                "copied_fraction": copied,
                "val_copied_fraction": val,
                "copied_spans": [],
                "longest_copy": 0,
                "longest_copy_text": None,
                "longest_copy_source": None,
            }
            return {
                "checkpoint": checkpoint,
                "prefix": "## ",
                "temperature": 0.8,
                "seed": 0,
                "chars": 40,
                "text": "## text",
                "memorisation": figures,
            }

        (run / "samples.json").write_text(json.dumps([sample("last", last_copied, 0.05), sample("best", 0.0, 0.0)]))
    db = tmp_path / "grid.duckdb"
    collect(runs, db)
    return db


def test_the_memorised_sample_claim_reads_best_against_last(tmp_path):
    data = load(memorised_grid(tmp_path))
    claim = [c for c in claims.claims(data) if "memorised" in c.claim][0]
    # seed 42 copies more at the end than at its best and than the control; seed 7 less than the control
    assert claim.verdict.startswith("**partly reproduced**")
    assert "seed 42: 0.0% at the best checkpoint, 30.0% at the last (val control 5.0%)" in claim.measured
    rows = table_rows(markdown.render(data, []), "How much of the samples is memorised")
    assert rows[-2][0] == "llama · seed 42" and rows[-2][4] == "30.0% (5.0%), longest 0"


def test_the_memorised_sample_claim_needs_a_run_whose_best_weights_are_not_its_last(tmp_path):
    data = load(memorised_grid(tmp_path, llama_turn_step=100))  # best val at the last evaluation
    claim = [c for c in claims.claims(data) if "memorised" in c.claim][0]
    assert claim.verdict == (
        "not testable here: val was still falling at the last evaluation, so the best weights are the last"
    )


def test_ablation_table_pairs_seeds_and_judges_against_seed_noise(fixture_grid_db):
    text = markdown.render(load(fixture_grid_db), [])
    rows = {row[0]: row for row in table_rows(text, "Which part earned the gain")}
    # swiglu: vanilla 2.32/2.33 -> 2.22/2.23 added; llama 2.12/2.13 -> 2.27/2.28 removed; noise 0.01
    assert rows["swiglu"][1:] == ["-0.100 (-0.100 to -0.100)", "**yes**", "+0.150 (+0.150 to +0.150)", "**yes**"]
    # the llama_minus_rope run is still going: one seed, so no verdict
    assert rows["rope"][1:] == ["not run yet", "", "-0.100 (1 seed)", "needs 2 seeds"]


def test_break_table_says_when_each_diverged_and_how_far_from_its_baseline(tmp_path):
    db = grid_db(
        tmp_path,
        vanilla={"floor": 2.3},
        llama={"floor": 2.1, "model": LLAMA_PARTS},
        mqa={"group": "break", "floor": 2.3, "model": {**LLAMA_PARTS, "n_kv_head": 1}},
        llama_qk_norm={"group": "break", "floor": 2.105, "model": LLAMA_PARTS},
        deep_post_nowarmup=deep_pair({"status": "diverged", "diverged_step": 30})["deep_post_nowarmup"],
    )
    rows = {row[0]: row for row in table_rows(markdown.render(load(db), []), "Break tests")}
    # seeds 42 / 7 sit 0.02 / 0.03 above each floor; seed noise 0.01; every baseline is llama (their preset)
    assert rows["`mqa`"][2:] == [
        "42 / 7",
        "no",
        "2.320 / 2.330",
        "50 / 50",
        "`llama`",
        "+0.200 (+0.200 to +0.200)",
        "**yes**",
    ]
    assert rows["`llama_qk_norm`"][3:] == [
        "no",
        "2.125 / 2.135",
        "50 / 50",
        "`llama`",
        "+0.005 (+0.005 to +0.005)",
        "no",
    ]
    assert rows["`deep_post_nowarmup`"][3] == "seed 42 at step 30, seed 7 at step 30"


def test_mqa_cache_sizes_are_the_models_own(tmp_path):
    db = grid_db(
        tmp_path,
        vanilla={},
        llama={"model": LLAMA_PARTS},
        mqa={"group": "break", "model": {**LLAMA_PARTS, "n_kv_head": 1}, "n_layer": 3},
    )
    claim = [c for c in claims.claims(load(db)) if c.claim.startswith("MQA")][0]
    # d_model 16, 4 heads -> head_dim 4; llama has 1 layer: 2 (k, v) x layers x KV heads x 4 x 4 bytes
    assert "MHA (4 KV heads) 128 bytes, GQA (2 KV heads) 64 bytes, MQA (1 KV head) 32 bytes" in claim.measured
    assert claim.verdict.startswith("partly answered: cache 0.25 of MHA's")


@pytest.mark.parametrize(
    ("mqa_floor", "verdict"),
    [
        (2.105, "**reproduced**: cache 0.25 of MHA's, at no cost in best val beyond seed noise"),
        (2.3, "**partly reproduced**: cache 0.25 of MHA's, but its best val is higher beyond seed noise"),
    ],
)
def test_mqa_val_cost_is_judged_against_mha_with_the_seed_noise(tmp_path, mqa_floor, verdict):
    # MHA: the mini-LLaMA without GQA, at 2.1 like the mini-LLaMA; seed noise 0.01
    mha = {"group": "ablation", "part": "gqa", "direction": "remove", "floor": 2.1}
    db = grid_db(
        tmp_path,
        vanilla={"floor": 2.3},
        llama={"floor": 2.1, "model": LLAMA_PARTS},
        llama_minus_gqa={**mha, "model": {**LLAMA_PARTS, "n_kv_head": 4}},
        mqa={"group": "break", "floor": mqa_floor, "model": {**LLAMA_PARTS, "n_kv_head": 1}},
    )
    claim = [c for c in claims.claims(load(db)) if c.claim.startswith("MQA")][0]
    assert claim.verdict == verdict


def test_which_rope_break_hurts_more_needs_every_seed_beyond_the_noise(tmp_path):
    # llama 2.1; k unrotated 0.3 above it, k adjacent 0.1 above it, with both seeds; vocabulary 50
    broken = {"group": "break", "model": {**LLAMA_PARTS, "rope_break": "k_unrotated"}, "floor": 2.4}
    db = grid_db(
        tmp_path,
        vanilla={"floor": 2.3},
        llama={"floor": 2.1, "model": LLAMA_PARTS},
        rope_k_unrotated=broken,
        rope_k_adjacent={**broken, "model": {**LLAMA_PARTS, "rope_break": "k_adjacent"}, "floor": 2.2},
    )
    claim = [c for c in claims.claims(load(db)) if c.claim.startswith("Breaking RoPE")][0]
    assert claim.verdict == (
        "**answered**: k_unrotated hurts more, by 0.200 (every seed beyond the seed noise, 0.010); "
        "neither collapses to chance"
    )
    assert claim.measured.endswith("; chance is ln(vocabulary) = 3.912")
    # one seed, or seeds that disagree, say so rather than name a winner
    one_seed = {"k_adjacent": pd.Series({42: 0.1}), "k_unrotated": pd.Series({42: 0.3})}
    assert claims.which_break_hurts_more(one_seed, 0.01) == (
        "k_unrotated hurts more with seed 42 (one seed cannot tell it from noise)",
        False,
    )
    disagree = {"k_adjacent": pd.Series({42: 0.1, 7: 0.3}), "k_unrotated": pd.Series({42: 0.3, 7: 0.1})}
    assert claims.which_break_hurts_more(disagree, 0.01) == ("neither hurts more beyond seed noise", True)


def test_report_on_real_tiny_runs(dashboard_db):
    data = load(dashboard_db)
    text = markdown.render(data, list(markdown.figure_charts(data)))
    # roles come from the model settings: the tiny runs all use the `debug` preset
    rows = {row[0]: row for row in table_rows(text, "Headline")}
    assert rows["vanilla (2017)"][1] == "42 / 7" and rows["mini-LLaMA"][1] == "42 / 7"
    assert "(headline.png)" in text and "(depth.png)" in text
    assert "rope_k_unrotated" in text  # still running: its evaluations so far are reported


def test_cli_writes_report_figures_and_readme_section(fixture_runs, tmp_path, capsys):
    runs_root, _ = fixture_runs
    readme = tmp_path / "README.md"
    (results_start, results_end), (costs_start, costs_end) = markdown.markers("headline"), markdown.markers("costs")
    readme.write_text(
        f"# Title\n\n## Costs\n{costs_start}\nold costs\n{costs_end}\n\n"
        f"## Results\n\n{results_start}\nold numbers\n{results_end}\n\n## After\n"
    )
    out = tmp_path / "docs" / "results"
    assert main(["report", "--runs", str(runs_root), "--out", str(out), "--readme", str(readme)]) == 0
    assert "5 figures" in capsys.readouterr().out
    for name in ("headline", "overfitting", "ablations", "depth", "breaks"):
        assert (out / f"{name}.png").read_bytes().startswith(PNG_MAGIC)
    text = readme.read_text()
    assert text.startswith(f"# Title\n\n## Costs\n{costs_start}\n") and text.endswith(f"{results_end}\n\n## After\n")
    assert "old numbers" not in text and "old costs" not in text
    # the fixture runs record no wall time (no grid.json beside them)
    assert markdown.readme_block(text, "costs") == "No shipped run records its wall time yet.\n"
    block = markdown.readme_block(text, "headline")
    # the README's headline links the figure from its own folder, and holds the report's own
    # headline table and verdicts, word for word
    assert "](docs/results/headline.png)" in block
    full = (out / "report.md").read_text()
    headline_table = full.split("### Headline: the 2017 Transformer vs the mini-LLaMA\n\n")[1].split("\n\n")[0]
    assert headline_table in block
    for row in table_rows(full, "The chapter's claims")[:3]:
        assert "| " + " | ".join(row) + " |" in block


def test_a_translated_readme_gets_the_headline_in_its_language(fixture_runs, tmp_path, capsys):
    runs_root, _ = fixture_runs
    start, end = markdown.markers("headline")
    english, chinese = tmp_path / "README.md", tmp_path / "README.zh-CN.md"
    english.write_text(f"{start}\n{end}\n{markdown.markers('costs')[0]}\n{markdown.markers('costs')[1]}\n")
    chinese.write_text(f"# 标题\n{start}\nold\n{end}\n")
    out = tmp_path / "docs" / "results"
    argv = ["report", "--runs", str(runs_root), "--out", str(out), "--readme", str(english), str(chinese)]
    assert main(argv) == 0
    assert f"the headline section(s) of {chinese} rewritten" in capsys.readouterr().out
    block = markdown.readme_block(chinese.read_text(), "headline")
    # the same numbers and figure as the English headline, in Chinese words
    assert "](docs/results/headline.png)" in block and "验证损失" in block and "Val loss" not in block
    numbers = re.compile(r"\d+\.\d{3}")
    assert numbers.findall(block) == numbers.findall(markdown.readme_block(english.read_text(), "headline"))


def test_a_readme_in_an_unknown_language_or_without_markers_changes_no_readme(fixture_runs, tmp_path, capsys):
    runs_root, _ = fixture_runs
    start, end = markdown.markers("headline")
    chinese, french = tmp_path / "README.zh-CN.md", tmp_path / "README.fr.md"
    chinese.write_text(f"{start}\nold\n{end}\n")
    french.write_text(f"{start}\nold\n{end}\n")
    argv = ["report", "--runs", str(runs_root), "--out", str(tmp_path / "o"), "--readme", str(chinese)]
    assert main([*argv, str(french)]) == 2
    assert capsys.readouterr().err == (
        f"error: --readme {french}: expected README.md, or README.LANGUAGE.md with LANGUAGE one of zh-CN\n"
    )
    no_markers = tmp_path / "README.md"
    no_markers.write_text("# no markers\n")
    assert main([*argv, str(no_markers)]) == 2
    assert chinese.read_text() == f"{start}\nold\n{end}\n"  # checked before any README was written


def test_cli_errors_are_one_line(fixture_runs, tmp_path, capsys):
    runs_root, _ = fixture_runs
    assert main(["report", "--db", str(tmp_path / "none.duckdb"), "--out", str(tmp_path / "o")]) == 2
    assert "--db" in capsys.readouterr().err
    assert main(["report", "--db", str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert capsys.readouterr().err == f"error: --db {tmp_path}: is a folder, expected a DuckDB file\n"
    not_db = tmp_path / "not.duckdb"
    not_db.write_text("hello")
    assert main(["report", "--db", str(not_db), "--out", str(tmp_path / "o")]) == 2
    assert "not a results database" in capsys.readouterr().err
    readme = tmp_path / "README.md"
    readme.write_text("# no markers\n")
    assert (
        main(
            ["report", "--runs", str(runs_root), "--out", str(tmp_path / "o"), "--no-figures", "--readme", str(readme)]
        )
        == 2
    )
    assert "--readme with --no-figures would drop the README's figures" in capsys.readouterr().err
    assert main(["report", "--runs", str(runs_root), "--out", str(tmp_path / "o"), "--readme", str(readme)]) == 2
    assert "<!-- report:headline:start -->" in capsys.readouterr().err
    assert readme.read_text() == "# no markers\n"


def test_readme_results_come_from_the_shipped_reference_runs():
    """The READMEs' headline (and costs) are what `anatomy report` makes of results/reference: no drift."""
    reference = REPO / "results" / "reference"
    assert (reference / "runs").is_dir(), "results/reference/runs is missing: the README's numbers have no source"
    data = load_runs(reference / "runs", read_provenance(reference / "grid.json"))
    figures = list(markdown.figure_charts(data))
    for path, language in (("README.md", "en"), ("README.zh-CN.md", "zh_CN")):
        readme = (REPO / path).read_text(encoding="utf-8")
        for name, block in markdown.readme_blocks(data, figures, "docs/results/", language).items():
            assert markdown.readme_block(readme, name) == block, (
                f"{path}'s {name} section is stale: run `python -m anatomy report --runs results/reference/runs "
                "--out docs/results --readme README.md README.zh-CN.md`"
            )
    for name in markdown.figure_charts(data):
        assert (REPO / "docs" / "results" / f"{name}.png").is_file()


def test_the_report_text_needs_neither_the_dashboard_nor_torch(tmp_path):
    """`anatomy report --no-figures` works wherever the package is installed: only the figures
    need Altair (anatomy/report/charts.py), only one claim loads the model (torch), and the package never
    imports the dashboard (tests/test_layers.py holds that for every module)."""
    code = "import sys, anatomy.report.markdown; print(sorted(m for m in ('dashboard', 'torch', 'altair') if m in sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"


def test_costs_sum_each_targets_training_jobs_and_the_whole_grid(tmp_path):
    db = grid_db(tmp_path, vanilla={}, mqa={"group": "break", "model": {**LLAMA_PARTS, "n_kv_head": 1}})

    def record(end: str, job_s: float) -> dict:
        return {"finished_utc": f"2026-11-30T{end}:00Z", "job_s": job_s, "train_s": job_s - 10}

    # vanilla's two jobs side by side from 10:00 to 10:30 and 10:40; mqa's from 11:00 (60 and 30 minutes)
    runs = {
        "vanilla/seed42": record("10:30", 1800),
        "vanilla/seed7": record("10:40", 2400),
        "mqa/seed42": record("12:00", 3600),
        # resumed: its last job ran 10 minutes of the 30 its training took in all
        "mqa/seed7": {**record("11:30", 600), "train_s": 1800},
    }
    grid = {"machines": ["a CPU"], "devices": ["cpu"], "torch_versions": ["2.13.0"]}
    grid |= {"first_finished_utc": "2026-11-30T10:30:00Z", "last_finished_utc": "2026-11-30T12:00:00Z"}
    provenance = {"runs": runs, "grid": grid}
    section = markdown.costs_section(load(db, provenance))
    rows = {row[0]: row[1:] for row in table_rows("### Costs\n" + section, "Costs")}
    assert rows["`headline`"] == ["2", "35.0", "1.17", "0.67", "fp32"]
    assert rows["`ablations`"] == ["0", "–", "–", "–", "–"]
    assert rows["`break_tests`"] == ["2", "45.0", "1.50", "1.00", "fp32"]
    assert rows["the whole grid (`all`)"] == ["4", "40.0", "2.67", "2.00", "fp32"]
    assert "Two lanes that never idle would need half the run-hours: 1.3 h for the whole grid's training." in section
    assert "On a CPU (cpu, torch 2.13.0), runs finished on 2026-11-30." in section
    undated = {"runs": runs, "grid": {key: grid[key] for key in ("machines", "devices", "torch_versions")}}
    assert "On a CPU (cpu, torch 2.13.0), finish dates not recorded." in markdown.costs_section(load(db, undated))


def test_the_costs_estimate_the_grids_night_in_bf16_from_measured_runs(tmp_path):
    """Each grid run costs what the precision study's run of its depth cost; a depth not measured
    in bf16 yet is said, not guessed."""
    bf16 = {"group": "precision", "train": {"precision": "bf16"}}
    db = grid_db(
        tmp_path,
        vanilla={},
        mqa={"group": "break", "model": {**LLAMA_PARTS, "n_kv_head": 1}},
        deep_pre_nowarmup={"group": "break", "n_layer": 12, "model": LLAMA_PARTS},
        vanilla_bf16={**bf16, "preset": "vanilla"},
        deep_pre_nowarmup_bf16={**bf16, "n_layer": 12, "model": LLAMA_PARTS},
    )
    record = {"finished_utc": "2026-11-30T10:30:00Z", "train_s": 0}
    fp32 = {f"{name}/seed{seed}": {**record, "job_s": 1800} for name in ("vanilla", "mqa") for seed in (42, 7)}
    fp32 |= {f"deep_pre_nowarmup/seed{seed}": {**record, "job_s": 3600} for seed in (42, 7)}
    shallow = {f"vanilla_bf16/seed{seed}": {**record, "job_s": 1200} for seed in (42, 7)}
    deep = {f"deep_pre_nowarmup_bf16/seed{seed}": {**record, "job_s": 2400} for seed in (42, 7)}
    grid = {"machines": ["a CPU"], "devices": ["cpu"], "torch_versions": ["2.13.0"]}

    section = markdown.costs_section(load(db, {"runs": fp32 | shallow, "grid": grid}))
    rows = {row[0]: row[1:] for row in table_rows("### Costs\n" + section, "Costs")}
    assert rows["the whole grid (`all`)"][0] == "6"  # the bf16 runs are not the grid's
    assert rows["`precision_check` (a study, not in `all`)"] == ["2", "20.0", "0.67", "0.33", "bf16"]
    assert "the 12-layer runs are not measured in bf16 yet, so the grid's night in bf16 is not estimated" in section

    # 4 one-layer grid runs at 20 minutes and 2 twelve-layer ones at 40: 2.7 run-hours
    section = markdown.costs_section(load(db, {"runs": fp32 | shallow | deep, "grid": grid}))
    assert "1-layer 20.0 minutes a run, 12-layer 40.0 minutes a run" in section  # the fixture is 1 layer deep
    assert "would take 2.7 run-hours, 1.3 h on two lanes that never idle: within one 8-hour night" in section


def test_a_report_removes_what_a_killed_report_left(fixture_runs, tmp_path):
    runs_root, _ = fixture_runs
    out = tmp_path / "docs" / "results"
    out.mkdir(parents=True)
    left = [out / ".headline.png.abc123.tmp", out / ".report.md.xyz.tmp"]
    for path in left:
        path.write_text("half a file")
    (out / "notes.txt").write_text("mine")  # not a report's: left alone
    assert main(["report", "--runs", str(runs_root), "--out", str(out), "--no-figures"]) == 0
    assert not any(path.exists() for path in left)
    assert (out / "notes.txt").read_text() == "mine" and (out / "report.md").is_file()
