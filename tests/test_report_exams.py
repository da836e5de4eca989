"""The report's "Which part wins where": each part's training loss beside the exam made for it.

Hand-built databases: run folders collected by the real collect, then exam rows inserted by hand,
so every number the table states can be worked out from the rows here. Also: a database with no
exams (every cell says which command fills it), exams in part, a database from before the exams,
and real exam files on real tiny runs, collected by `report --runs` from the exams folder beside.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from anatomy.report import claims

from anatomy.report import exam_findings

from anatomy.report import figures, markdown
from anatomy.cli import main
from anatomy.errors import AnatomyError
from anatomy.exams import wall_clock
from anatomy.results.collect import load_runs
from anatomy.results.reader import load
from anatomy.results.collect import SCHEMA_PATH, collect
from run_folders import LLAMA_PARTS, declare_grid_baselines, write_run_folder
from exam_rows import (
    KV_SCALE,
    cache_rows,
    depth_row,
    grad_norm_rows,
    insert,
    length_rows,
    MLA,
    MOE,
    QK_NORM,
    max_logit_rows,
    timing_rows,
    wall_clock_row,
)
from tiny_runs import examine

HEADING = "Which part wins where"
FIVE = ["RMSNorm", "pre-norm", "RoPE", "GQA", "SwiGLU"]
NEW_PARTS = ["QK-norm", "MLA", "experts (MoE)"]  # the parts of 2024-26, after the five


def section(text: str) -> str:
    return text.split(f"### {HEADING}", 1)[1].split("\n### ", 1)[0]


def exam_table(text: str) -> dict[str, list[str]]:
    """The section's table by part: [Δ added to vanilla, Δ removed from llama, its exam]."""
    rows = [line for line in section(text).splitlines() if line.startswith("|")][2:]
    cells = [[cell.strip() for cell in line.strip("|").split("|")] for line in rows]
    return {row[0]: row[1:] for row in cells}


def exam_shown(text: str) -> dict[str, str]:
    """What each part's exam shows, by part: the entry under the part's verdict."""
    shown, part = {}, None
    for line in section(text).splitlines():
        if match := re.match(r"- \*\*(.+?)\*\*: ", line):
            part = match.group(1)
        elif line.startswith("  - its exam, ") and part is not None:
            shown[part] = line.split(", shows: ", 1)[1]
    return shown


def paragraph(text: str) -> str:
    """The note under the table and each part's verdict, as one text."""
    lines = section(text).splitlines()
    return " ".join(line for line in lines if line.startswith("Δ best val:") or line.startswith("- **"))


def assert_no_nan(text: str) -> None:
    assert not re.search(r"\bnan\b", text, re.IGNORECASE), text


def write_grid(runs: Path) -> None:
    """Headline pair and the GQA ablations (both seeds), MQA and a broken RoPE (seed 42), with the
    baselines workflow/experiments.yaml declares for them."""
    declare_grid_baselines(runs)
    for seed in (42, 7):
        write_run_folder(runs, "vanilla", seed, floor=2.3)
        write_run_folder(runs, "llama", seed, floor=2.1, model=LLAMA_PARTS)
        write_run_folder(
            runs,
            "vanilla_plus_gqa",
            seed,
            group="ablation",
            part="gqa",
            direction="add",
            floor=2.25,
            model={"n_kv_head": 2},
        )
        write_run_folder(
            runs,
            "llama_minus_gqa",
            seed,
            group="ablation",
            part="gqa",
            direction="remove",
            floor=2.2,
            model={**LLAMA_PARTS, "n_kv_head": 4},
        )
    write_run_folder(runs, "mqa", 42, group="break", part="gqa", floor=2.14, model={**LLAMA_PARTS, "n_kv_head": 1})
    write_run_folder(
        runs,
        "rope_k_unrotated",
        42,
        group="break",
        part="rope",
        floor=2.4,
        model={**LLAMA_PARTS, "rope_break": "k_unrotated"},
    )


def depth_cell(norm_pos: str, lr: float, trained: bool, diverged_step: int | None = None) -> dict:
    """A cell of the map as these tests write them: best val 2.5 where it trained."""
    return depth_row(
        norm_pos,
        lr,
        trained=trained,
        best=2.5 if trained else None,
        diverged_step=diverged_step,
        final_train=2.4,
        final_val=2.5,
    )


def small_cache_rows(run_id: str, n_kv_head: int) -> list[dict]:
    return cache_rows(run_id, n_kv_head, n_layer=1, head_dim=4, tokens=(1, 512))  # 1 layer, head_dim 4


WALL_CLOCK = [
    wall_clock_row("norm", "layernorm", "manual", 0.30, rounds=10),
    wall_clock_row("norm", "layernorm", "fused", 0.10, rounds=10),
    wall_clock_row("norm", "rmsnorm", "manual", 0.40, rounds=10),
    wall_clock_row("norm", "rmsnorm", "fused", 0.08, rounds=10),
    wall_clock_row("ffn", "gelu", "manual", 1.00, rounds=10),
    wall_clock_row("ffn", "gelu", "fused", 0.80, rounds=10),
    wall_clock_row("ffn", "swiglu", "manual", 1.50, rounds=10),
    wall_clock_row("ffn", "swiglu", "fused", 1.20, rounds=10),
]


# post-norm trains at 1e-3 only, pre-norm up to 3e-3: the telling lr is 3e-3 (post fails, pre trains)
DEPTH = [
    depth_cell("post", 1e-3, True),
    depth_cell("post", 3e-3, False, 40),
    depth_cell("post", 1e-2, False, 5),
    depth_cell("pre", 1e-3, True),
    depth_cell("pre", 3e-3, True),
    depth_cell("pre", 1e-2, False),
]


def norms(run_id: str, by_step: dict[int, tuple[float, float]]) -> list[dict]:
    """Three blocks per step: (first block's norm, last block's norm), the middle one in between."""
    return grad_norm_rows(run_id, {step: [first, (first + last) / 2, last] for step, (first, last) in by_step.items()})


GRAD_NORMS = norms("depth/post_lr0.003", {0: (1.0, 1.0), 20: (8.0, 2.0), 40: (math.nan, math.nan)}) + norms(
    "depth/pre_lr0.003", {0: (1.0, 1.0), 300: (1.0, 2.0)}
)


LENGTH = (
    length_rows("llama/seed42", [2.0, 2.4, 2.6, 2.8])
    + length_rows("llama/seed7", [2.2, 2.2, 2.5, 3.0])
    + length_rows("vanilla/seed42", [2.1, 2.3, None, None])
    + length_rows("rope_k_unrotated/seed42", [3.0, 3.0, 3.5, 4.0])
)


@pytest.fixture(scope="module")
def examined_db(tmp_path_factory) -> Path:
    """The grid collected, then every exam table filled by hand."""
    root = tmp_path_factory.mktemp("examined_db")
    write_grid(root / "runs")
    db = root / "anatomy.duckdb"
    collect(root / "runs", db)
    insert(db, "exam_wall_clock", WALL_CLOCK)
    insert(db, "exam_depth", DEPTH)
    insert(db, "grad_norms", GRAD_NORMS)
    insert(db, "exam_length", LENGTH)
    insert(
        db,
        "exam_kv_cache",
        small_cache_rows("llama/seed42", 2)
        + small_cache_rows("llama/seed7", 2)
        + small_cache_rows("llama_minus_gqa/seed42", 4),
    )
    # GQA timed at two contexts (the longer one is quoted), MHA at one
    insert(
        db,
        "exam_kv_timing",
        timing_rows("llama/seed42", 2, {128: (300.0, 60.0), 2048: (40.0, 2.0)})
        + timing_rows("llama/seed7", 2, {128: (300.0, 60.0), 2048: (60.0, 2.0)})
        + timing_rows("llama_minus_gqa/seed42", 4, {2048: (30.0, 3.0)}),
    )
    insert(db, "exam_kv_scale", KV_SCALE)
    return db


def test_every_exam_cell_holds_the_numbers_of_its_rows(examined_db):
    text = markdown.render(load(examined_db), [])
    table, shown = exam_table(text), exam_shown(text)
    assert list(table) == [*FIVE, *NEW_PARTS] and list(shown) == list(table)
    assert shown["RMSNorm"] == (
        "RMSNorm hand-written 0.400 ms vs fused 0.080 ms (5.0x); LayerNorm hand-written "
        "0.300 ms vs fused 0.100 ms (3.0x) (forward + backward on 32x128x128)"
    )
    assert shown["SwiGLU"] == (
        "SwiGLU FFN hand-written 1.500 ms vs fused 1.200 ms (1.2x); GELU FFN hand-written "
        "1.000 ms vs fused 0.800 ms (1.2x) (forward + backward on 32x128x128)"
    )
    # depth_stability of the cells; at lr 3e-3 post-norm's last finite ratio is step 20 (8 / 2), pre-norm's 1 / 2
    assert shown["pre-norm"] == (
        "12 layers, no warmup: post-norm trains up to lr 0.001 (fails from 0.003), pre-norm trains up to lr 0.003 "
        "(fails from 0.01); at lr 0.003, first / last block's gradient norm at the last logged step: "
        "post-norm 4x (step 20), pre-norm 0.5x (step 300)"
    )
    # 512-1023 against the two buckets inside 128, weighted by their predictions (32 and 96)
    within_42, within_7 = (2.0 * 32 + 2.4 * 96) / 128, 2.2
    assert shown["RoPE"] == (
        f"RoPE, mini-LLaMA: 2.800 / 3.000 at positions 512-1023 of 1,024-character windows vs {within_42:.3f} / "
        f"{within_7:.3f} at 0-127 (seeds 42 / 7); learned positions (1 experiment): not possible past position 127: "
        "a learned position table has no row past its training length (128 characters); RoPE broken: k unrotated: 4.000 at positions 512-1023 of "
        "1,024-character windows vs 3.000 at 0-127 (seed 42)"
    )
    # per token: 2 x 1 layer x KV heads x head_dim 4 x 4 bytes; the cache's speedup: GQA at 2048, median over
    # its two runs (50 against 2 characters per second); MQA 2.14 + 0.02 against llama 2.12 with seed 42
    assert shown["GQA"] == (
        "cache bytes per token, measured: MHA (4 KV heads) 128, GQA (2 KV heads) 64, MQA not measured yet; "
        "at 2,048 characters of context the cache makes GQA generation 25.0x faster (50.0 vs 2.0 characters/s); "
        "at LLaMA scale (131,072 tokens) 64 GiB for 7B-class, 32 KV heads (MHA) vs 16 GiB for 7B-class, 8 KV heads "
        "(GQA); MQA's best val vs the mini-LLaMA's +0.040 (seed 42)"
    )
    assert_no_nan(section(text))


def test_where_learned_positions_stop_is_said_in_the_readers_language(examined_db):
    """The length exam stores its reason in English; a Chinese page said "learned positions end at ctx_len 128"."""
    from anatomy.language import speaking
    from anatomy.report import exam_findings

    with speaking("zh_CN"):
        said = exam_findings.learned_text(load(examined_db))
    assert "可学习的位置表在训练长度（128 个字符）之后没有对应的行" in said
    assert "ctx_len" not in said and "learned" not in said


def test_the_deep_claim_points_to_the_depth_map(examined_db):
    deep = [c for c in claims.claims(load(examined_db)) if c.claim.startswith("A 12-layer post-norm")][0]
    assert deep.measured.endswith(
        "; the depth map, 12 layers over lr: post-norm trains up to lr 0.001 (fails from 0.003), "
        "pre-norm trains up to lr 0.003 (fails from 0.01)"
    )


@pytest.mark.parametrize(
    ("unigram", "said"),
    [
        # the broken RoPE's best val (2.40) is 1.6 nats below the floor: it reads the context
        (4.0, "neither collapses to chance, nor to ignoring the context"),
        # within LEARNED_MARGIN (0.5) of it: little more than character frequencies
        (2.8, "neither collapses to chance, but k_unrotated learns little beyond character frequencies"),
    ],
)
def test_the_rope_claim_sets_the_breaks_against_ignoring_the_context(tmp_path, unigram, said):
    write_grid(tmp_path / "runs")
    db = tmp_path / "anatomy.duckdb"
    collect(tmp_path / "runs", db)
    rope = [c for c in claims.claims(load(db)) if c.claim.startswith("Breaking RoPE")][0]
    assert "unigram" not in rope.measured  # without the depth exam there is no floor to quote
    insert(db, "exam_depth", [{**row, "unigram_loss": unigram} for row in DEPTH])
    rope = [c for c in claims.claims(load(db)) if c.claim.startswith("Breaking RoPE")][0]
    assert rope.measured.endswith(
        f"; ignoring the context (the corpus's unigram loss, from the depth exam) = {unigram:.3f}"
    )
    assert rope.verdict.endswith(said)


@pytest.mark.parametrize(
    ("depth", "ending"),
    [
        # DEPTH: post-norm fails from 3e-3, pre-norm trains up to 3e-3
        (
            DEPTH,
            "; the depth map shows the break at a higher lr: post-norm fails from lr 0.003, pre-norm trains up to lr 0.003",
        ),
        # post-norm already fails at the grid's own lr in the map's short cells: not "a higher lr"
        (
            [depth_cell("post", 3e-4, False), depth_cell("pre", 3e-4, True)],
            "; the depth map shows the break in its short cells: post-norm fails from lr 0.0003, pre-norm trains up to lr 0.0003",
        ),
        # both fail from the same lr: no break between the wirings to point to
        (
            [
                depth_cell("post", 1e-3, True),
                depth_cell("post", 3e-3, False),
                depth_cell("pre", 1e-3, True),
                depth_cell("pre", 3e-3, False),
            ],
            "within noise",
        ),
    ],
)
def test_a_deep_pair_that_trains_points_to_the_break_the_depth_map_shows(tmp_path, depth, ending):
    runs = tmp_path / "runs"
    for seed in (42, 7):
        write_run_folder(runs, "vanilla", seed, floor=2.3)
        write_run_folder(runs, "llama", seed, floor=2.1, model=LLAMA_PARTS)
        for wiring in ("post", "pre"):
            model = {**LLAMA_PARTS, "norm_pos": wiring}
            write_run_folder(runs, f"deep_{wiring}_nowarmup", seed, group="break", n_layer=12, floor=2.2, model=model)
    collect(runs, tmp_path / "anatomy.duckdb")
    insert(tmp_path / "anatomy.duckdb", "exam_depth", depth)
    deep = [c for c in claims.claims(load(tmp_path / "anatomy.duckdb")) if c.claim.startswith("A 12-layer post-norm")][
        0
    ]
    assert deep.verdict.startswith("**not reproduced** at this lr: post-norm trains as well as pre-norm")
    assert deep.verdict.endswith(ending)


def test_a_vanished_first_block_gradient_is_named():
    assert exam_findings.vanished(2.92e-19) and not exam_findings.vanished(0.5)


def test_the_training_loss_column_and_the_sentences_come_from_the_data(examined_db):
    text = markdown.render(load(examined_db), [])
    table = exam_table(text)
    # vanilla_plus_gqa 2.25 against vanilla 2.30, llama_minus_gqa 2.20 against llama 2.10, both seeds; the
    # two ablations are the ablation table's family, judged together
    assert table["GQA"][:2] == ["-0.050 [-0.070, -0.030]", "+0.100 [+0.075, +0.125]"]
    assert table["RMSNorm"][:2] == ["not trained yet", "not trained yet"]
    said = paragraph(text)
    assert (
        "**GQA**: in the training loss, adding it to vanilla lowers best val beyond noise and removing it from "
        "llama raises best val beyond noise (helps vanilla, llama misses it: it earned its gain); GQA's cache is "
        "half of MHA's per token and that cache makes generation 25.0x faster than recomputing the context, "
        "at 2,048 characters"
    ) in said
    assert (
        "**RMSNorm**: the training loss does not tell yet (not testable both ways); on the wall "
        "clock, fused RMSNorm takes 0.80x the LayerNorm's time (hand-written 1.33x), and written by hand 5.0x "
        "its own fused time."
    ) in said
    assert "pre-norm still trains at 3x the largest lr post-norm survives (0.003 vs 0.001)" in said
    ratio = (2.8 + 3.0) / 2 / (((2.0 * 32 + 2.4 * 96) / 128 + 2.2) / 2)
    assert f"RoPE (mini-LLaMA) reads on, at {ratio:.2f}x its loss within it" in said
    assert "where a learned position table cannot read at all" in said


def test_missing_exams_say_which_command_fills_them(fixture_grid_db):
    text = markdown.render(load(fixture_grid_db), [])
    table, shown = exam_table(text), exam_shown(text)
    for part, exam in (
        ("RMSNorm", "wall_clock"),
        ("pre-norm", "depth"),
        ("RoPE", "length RUN_DIR"),
        ("GQA", "kv_cache RUN_DIR"),
        ("SwiGLU", "wall_clock"),
    ):
        assert shown[part].startswith(
            f"not measured yet: run `snakemake --cores 1 exams` (or `python -m anatomy exam {exam}`)"
        ), part
    assert "its exam (depth) is not measured yet" in paragraph(text)
    # the fixture's swiglu ablations are in: the training-loss column still has its numbers
    assert table["SwiGLU"][:2] == ["-0.100 [-0.117, -0.083]", "+0.150 [+0.129, +0.171]"]
    assert_no_nan(text)
    assert not set(figures.figure_charts(load(fixture_grid_db))) & {"length", "stability"}


def test_exams_in_part_say_what_is_missing(tmp_path):
    write_grid(tmp_path / "runs")
    db = tmp_path / "anatomy.duckdb"
    collect(tmp_path / "runs", db)
    insert(
        db,
        "exam_wall_clock",
        [
            wall_clock_row("norm", "rmsnorm", "manual", 0.4, rounds=10),
            wall_clock_row("ffn", "gelu", "fused", 0.8, rounds=10),
        ],
    )
    insert(db, "exam_depth", [depth_cell("post", 1e-3, False, 3), depth_cell("post", 1e-2, False, 1)])
    insert(db, "exam_length", length_rows("vanilla/seed42", [2.1, 2.3, None, None]))
    insert(db, "exam_kv_cache", small_cache_rows("llama/seed42", 2))
    data = load(db)
    text = markdown.render(data, [])
    shown = exam_shown(text)
    assert shown["RMSNorm"] == (
        "RMSNorm 0.400 ms (manual only); LayerNorm not timed yet (forward + backward on 32x128x128)"
    )
    assert shown["SwiGLU"].startswith("SwiGLU FFN not timed yet; GELU FFN 0.800 ms (fused only)")
    assert shown["pre-norm"] == (
        "12 layers, no warmup: post-norm trains at none of the 2 learning rates tried, pre-norm: no cell yet"
    )
    assert shown["RoPE"].startswith("RoPE: not examined yet; learned positions (1 experiment): not possible past")
    assert "RoPE broken: k unrotated: not examined yet" in shown["RoPE"]
    assert shown["GQA"].startswith(
        "cache bytes per token, measured: MHA not measured yet, GQA (2 KV heads) 64, "
        "MQA not measured yet; generation not timed both ways yet;"
    )
    said = paragraph(text)
    for part in ("pre-norm", "RoPE", "SwiGLU"):
        assert f"**{part}**: " in said
    assert "its exam (length) is not measured yet" in said and "its exam (depth) is not measured yet" in said
    assert_no_nan(text)
    assert set(figures.exam_charts(data)) == {"length", "stability"}


def test_the_exams_of_no_run_report_without_any_runs(tmp_path):
    # the depth map and the wall clock need no grid run: `collect --allow-empty --exams results/exams`
    (tmp_path / "runs").mkdir()
    db = tmp_path / "anatomy.duckdb"
    collect(tmp_path / "runs", db, allow_empty=True)
    insert(db, "exam_wall_clock", WALL_CLOCK)
    insert(db, "exam_depth", DEPTH)
    text = markdown.render(load(db), [])
    shown = exam_shown(text)
    assert shown["SwiGLU"].startswith("SwiGLU FFN hand-written 1.500 ms vs fused 1.200 ms (1.2x)")
    # no gradient norms logged for the cells
    assert shown["pre-norm"].endswith("post-norm no norms logged, pre-norm no norms logged")
    assert shown["RoPE"].startswith("not measured yet")
    assert_no_nan(text)


def test_an_older_database_is_named_with_what_it_lacks_and_the_command_that_rebuilds_it(tmp_path):
    """The one check of every reader (the report, the dashboard): a view an older version did not
    have, or a column it did not write, is named, with the collect command that rebuilds it."""
    write_grid(tmp_path / "runs")
    db = tmp_path / "anatomy.duckdb"
    collect(tmp_path / "runs", db)
    with duckdb.connect(str(db)) as con:
        con.execute("DROP VIEW depth_stability")
    with pytest.raises(AnatomyError) as err:
        load(db)
    assert str(err.value).startswith(
        f"`{db}` was made by an older version of this project (it has no "
        "depth_stability.cells, depth_stability.max_trained_lr, depth_stability.min_failed_lr, ...). "
    )
    assert str(err.value).endswith(
        f"Collect it again to rebuild it from the run folders: "
        f"`python -m anatomy collect --runs results/runs --db {db}`."
    )
    # as an older version made it: the view that reads exam_depth comes back, without the column
    view = re.search(r"CREATE VIEW depth_stability AS.*?;", SCHEMA_PATH.read_text(encoding="utf-8"), re.S).group(0)
    with duckdb.connect(str(db)) as con:
        con.execute("ALTER TABLE exam_depth DROP COLUMN unigram_loss")
        con.execute(view)
    with pytest.raises(AnatomyError, match=r"older version of this project \(it has no exam_depth.unigram_loss\)"):
        load(db)


def test_load_runs_reads_the_exams_folder_beside_the_runs(tmp_path):
    write_grid(tmp_path / "runs")
    (tmp_path / "exams").mkdir()
    (tmp_path / "exams" / wall_clock.RESULT_FILE).write_text(json.dumps({"rows": WALL_CLOCK}))
    data = load_runs(tmp_path / "runs", None)
    assert len(data.exams.wall_clock) == len(WALL_CLOCK)
    assert "RMSNorm hand-written 0.400 ms vs fused 0.080 ms (5.0x)" in exam_shown(markdown.render(data, []))["RMSNorm"]


# ---------------------------------------------------------------------------------------------
# Real exam files on real tiny runs


@pytest.fixture(scope="module")
def examined_runs(tiny_data, tiny_runs, tmp_path_factory):
    """The two tiny runs (learned positions, and the llama parts) as the headline pair, every exam run on them
    by its command, the depth map and the wall clock in the exams folder beside the runs."""
    root = tmp_path_factory.mktemp("examined_runs")
    runs, exams = root / "runs", root / "exams"
    for name, folder in tiny_runs.items():
        run = runs / name / "seed42"
        shutil.copytree(folder, run)
        config = json.loads((run / "config.json").read_text(encoding="utf-8"))
        config["tags"] = {"experiment": name, "group": "headline"}
        (run / "config.json").write_text(json.dumps(config), encoding="utf-8")
    examine(runs, tiny_data, exams, ["llama/seed42"])
    return runs


def test_report_on_real_exam_files(examined_runs, tmp_path):
    data = load_runs(examined_runs, None)
    text = markdown.render(data, [])
    shown = exam_shown(text)
    wall = data.exams.wall_clock.set_index(["variant", "impl"])["median_ms"]
    assert shown["RMSNorm"].startswith(
        f"RMSNorm hand-written {wall['rmsnorm', 'manual']:.3f} ms vs fused {wall['rmsnorm', 'fused']:.3f} ms "
        f"({wall['rmsnorm', 'manual'] / wall['rmsnorm', 'fused']:.1f}x)"
    )
    assert shown["pre-norm"].startswith("2 layers, no warmup: post-norm ")
    for cell in data.exams.depth_stability.itertuples():  # one cell per wiring, at one lr
        said = (
            f"trains up to lr {cell.max_trained_lr:g}" if pd.notna(cell.max_trained_lr) else "trains at none of the 1"
        )
        assert f"{cell.norm_pos}-norm {said}" in shown["pre-norm"]
    # the RoPE model read 32 characters, twice its training length; the learned table stops at 15
    llama = data.exams.length[(data.exams.length["run_id"] == "llama/seed42") & (data.exams.length["window_len"] == 32)]
    far = llama[llama["bucket_start"] == 16]["loss"].iloc[0]
    within = llama[llama["bucket_end"] < 16]["loss"].iloc[0]
    assert shown["RoPE"].startswith(
        f"RoPE, mini-LLaMA: {far:.3f} at positions 16-31 of 32-character windows vs "
        f"{within:.3f} at 0-15 (seed 42); learned positions (1 experiment): not "
        "possible past position 15"
    )
    assert shown["GQA"].startswith("cache bytes per token, measured: MHA not measured yet, GQA (2 KV heads) ")
    assert_no_nan(text)
    out = tmp_path / "report"
    assert main(["report", "--runs", str(examined_runs), "--out", str(out)]) == 0
    assert "(length.png)" in (out / "report.md").read_text() and "(stability.png)" in (out / "report.md").read_text()
    assert (out / "length.png").read_bytes().startswith(b"\x89PNG") and (out / "stability.png").is_file()


# ---------------------------------------------------------------------------------------------
# The parts of 2024-26: QK-norm, MLA, experts, each by its own exam


def new_part_entries(text: str) -> dict[str, list[str]]:
    """Each part of 2024-26's entry: its sentence, then the lines under it."""
    entries, part = {}, None
    for line in section(text).splitlines():
        if match := re.match(r"- \*\*(.+?)\*\*: (.*)", line):
            part = match.group(1)
            entries[part] = [match.group(2)]
        elif line.startswith("  - ") and part is not None:
            entries[part].append(line[4:])
    return {part: lines for part, lines in entries.items() if part in NEW_PARTS}


@pytest.fixture(scope="module")
def parts_db(tmp_path_factory) -> Path:
    """The grid with QK-norm's break test (both seeds), and the three exams' cells by hand."""
    root = tmp_path_factory.mktemp("parts_db")
    write_grid(root / "runs")
    for seed in (42, 7):
        model = {**LLAMA_PARTS, "qk_norm": True}
        write_run_folder(root / "runs", "llama_qk_norm", seed, group="break", part="qk_norm", floor=2.08, model=model)
    db = root / "anatomy.duckdb"
    collect(root / "runs", db)
    insert(db, "exam_qk_norm", QK_NORM)
    insert(db, "exam_mla", MLA)
    insert(db, "exam_moe", MOE)
    insert(db, "max_logits", max_logit_rows("qk_norm/plain_lr0.01", {1: [5.0], 50: [250.0]}))
    return db


def test_each_part_of_2024_26_states_what_its_exam_measured(parts_db):
    data = load(parts_db)
    text = markdown.render(data, [])
    table, shown, entries = exam_table(text), exam_shown(text), new_part_entries(text)
    assert [table[part] for part in NEW_PARTS] == [
        ["–", "–", "`exam qk_norm`"],
        ["–", "–", "`exam mla`"],
        ["–", "–", "`exam moe`"],
    ]
    # the largest lr each variant trains at, where the plain one fails, the logits at the largest shared lr
    assert shown["QK-norm"] == (
        "no warmup, 300 steps: without QK-norm trains up to lr 0.003 (fails from 0.01), with QK-norm trains up "
        "to lr 0.01; at lr 0.01 the largest attention logit reached 250.0 without QK-norm and 8.0 with it"
    )
    # the sentence: what it buys (1e-2 / 3e-3) and both best vals where both trained (3e-3): here QK-norm's
    # is lower, so no "price" is claimed
    assert entries["QK-norm"][0] == (
        "Without warmup QK-norm lets the mini-LLaMA train at 3.33x the largest lr it survives without it (0.01 "
        "against 0.003); at lr 0.003, where both train, best val 2.220 with it against 2.250 without (one run each)."
    )
    # the grid's break test: 2.08 against llama's 2.10, both seeds, with the break table's interval
    assert entries["QK-norm"][2].startswith(
        "in the training loss: the grid's break test `llama_qk_norm` against `llama`, Δ best val -0.020 ["
    )
    assert shown["MLA"].startswith(
        "the cache against best val: MHA (4 KV heads): 1,024 bytes per character, best val 2.100, GQA (2 KV heads): "
        "512 bytes per character, best val 2.120, MQA (1 KV head): 256 bytes per character, best val 2.160, "
        "MLA (latent 32): 192 bytes per character, best val 2.140, MLA (latent 16): 128 bytes per character"
    )
    assert shown["MLA"].endswith(
        "generation with the cache, characters/s: MHA (4 KV heads) 500, GQA (2 KV heads) 520, MQA (1 KV head) 540, MLA (latent 32) 290, MLA (latent 16) 300"
    )
    # the latent with the lower best val, against the mini-LLaMA's own GQA: 192 / 512 = 0.375; one run
    # each, so each side carries the grid's seed-to-seed sd on the same text (0.00707, 5 degrees of
    # freedom): +0.020 +- t(0.975, 5) x sqrt(2) x 0.00707 = +- 0.0257
    assert entries["MLA"][0] == (
        "MLA (latent 32) buys a KV cache of 192 bytes per character, 0.38x GQA's 512; best val 2.140 against "
        "GQA's 2.120, +0.020 [-0.006, +0.046] (one run each; the intervals come from a run's seed-to-seed sd "
        "on this text, 0.007); generation at 290 characters/s against 520."
    )
    assert "not a run of the grid" in entries["MLA"][2] and "`snakemake --cores 2 parts`" in entries["MLA"][2]
    assert (
        "4 experts (top-1): 1,400,000 parameters, 801,024 active, best val 2.080, load 18%-34%, 230.0 ms a step (2.30x)"
        in shown["experts (MoE)"]
    )
    assert "load 25%," in shown["experts (MoE)"]  # all on every token: even
    # two differences, judged together (Holm): the one of smaller p (+0.050, t = 5) at 97.5%, its
    # half-width t(0.9875, 5) x 0.0100 = 0.0316; then -0.040 at 95%, +- 0.0257
    assert entries["experts (MoE)"][0] == (
        "At the dense model's work per token, 4 experts (top-1) reach best val 2.080 against the dense model's "
        "2.120, -0.040 [-0.066, -0.014]; at equal total parameters, best val 2.080 against 2.030 for a dense "
        "model of that size (all 4 experts on every token), +0.050 [+0.018, +0.082] (one run each; the intervals "
        "come from a run's seed-to-seed sd on this text, 0.007); the price: a training step 2.30x the dense "
        "model's here; the experts took 18%-34% of the tokens each (even: 25%)."
    )
    assert_no_nan(section(text))


def test_the_parts_sentences_are_the_labs_finding_records(parts_db):
    """One record per part, in the numbered list that opens the report; the section shows its sentence."""
    from anatomy.report import findings

    data = load(parts_db)
    records = findings.exam_part_findings(data)
    assert list(records) == ["qk_norm", "mla", "moe"]
    assert {f.key for f in findings.findings(data)} >= {"exam_qk_norm", "exam_mla", "exam_moe"}
    text = markdown.render(data, [])
    opening = text.split("### Which part wins where")[0]
    entries = new_part_entries(text)
    for part, name in zip(records, NEW_PARTS):
        assert entries[name][0] == records[part].sentence
        assert records[part].evidence == "exams" and records[part].difference is None
        assert f"{records[part].sentence} ([evidence](#which-part-wins-where))" in opening


def test_an_exam_of_2024_26_not_run_yet_says_the_command_that_runs_it(examined_db):
    from anatomy.report import findings

    data = load(examined_db)
    text = markdown.render(data, [])
    shown, entries = exam_shown(text), new_part_entries(text)
    for name, exam in zip(NEW_PARTS, ("qk_norm", "mla", "moe")):
        assert shown[name] == f"not measured yet: run `snakemake --cores 1 exams` (or `python -m anatomy exam {exam}`)"
        assert entries[name][0] == (
            f"its exam has not run yet: `snakemake --cores 1 exams` runs it (or `python -m anatomy exam {exam}`), "
            "then collect again."
        )
    assert findings.exam_part_findings(data) == {}
    assert not {f.key for f in findings.findings(data)} & {"exam_qk_norm", "exam_mla", "exam_moe"}
