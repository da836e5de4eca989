"""Studies as declarations (workflow/studies.yaml, read by anatomy/results/studies.py): the file is
checked field by field, each study gets its targets, and a study a user declares is rendered by
the one analysis (anatomy/report/study_section.py) with no code of its own."""

from __future__ import annotations

import dataclasses
import io
import math
from pathlib import Path

import pytest

from anatomy.errors import AnatomyError
from anatomy.report import study_section
from anatomy.results import collect
from anatomy.results.groups import STUDY_GROUPS, TARGETS, Target, study_targets
from anatomy.results.reader import load
from anatomy.results.studies import STUDIES_FILE, Study, extract_messages, parse_study, read_studies
from run_folders import LLAMA_PARTS, write_parts_runs, write_run_folder

REPO = Path(__file__).resolve().parents[1]


def test_the_shipped_studies_are_the_workflows_groups_and_targets():
    studies = read_studies()
    assert list(studies) == ["scale", "lr", "size", "precision", "parts"]  # the report's order
    assert STUDY_GROUPS == {name: study.question for name, study in studies.items()}
    assert studies["size"].axis == ("n_layer", "d_model") and studies["size"].rule == "own_lr"
    assert studies["scale"].rule == "shared_lr" and studies["scale"].shared_lr == 3e-4
    assert studies["precision"].compare == "twins" and studies["precision"].rule is None
    # the precision study's stages keep the names the READMEs give; the others are NAME_stageN
    assert TARGETS["precision_check"] == ("precision", 1) and TARGETS["precision"] == ("precision", None)
    assert TARGETS["size_stage3"] == ("size", 3) and TARGETS["lr_stage7"] == ("lr", 7)
    assert STUDIES_FILE == REPO / "workflow" / "studies.yaml"


def test_a_study_a_user_declares_gets_its_targets():
    depth = parse_study(
        "depth", {"question": "Q?", "compare": "models", "axis": ["n_layer"], "rule": "own_lr", "stages": 2}, "f"
    )
    assert study_targets({"depth": depth}) == {
        "depth": Target("depth", None),
        "depth_stage1": Target("depth", 1),
        "depth_stage2": Target("depth", 2),
    }


GOOD = {"question": "Does depth pay?", "compare": "models", "axis": ["n_layer"], "rule": "own_lr"}


@pytest.mark.parametrize(
    ("name", "change", "said"),
    [
        ("Depth", {}, "studies.Depth: a study's name is lower_snake_case"),
        ("depth", {"rules": "own_lr"}, "studies.depth.rules: not a study field; known fields: question, compare,"),
        ("depth", {"question": None}, "studies.depth: 'question' is missing"),
        ("depth", {"compare": "llama"}, "studies.depth.compare: expected one of models, parts, twins, got 'llama'"),
        (
            "depth",
            {"axis": ["layers"]},
            "studies.depth.axis: expected a list of run settings (such as n_layer, lr), got 'layers'",
        ),
        (
            "depth",
            {"axis": "n_layer"},
            "studies.depth.axis: expected a list of run settings (such as n_layer, lr), got 'n_layer'",
        ),
        ("depth", {"rule": "best"}, "studies.depth.rule: expected one of own_lr, shared_lr, got 'best'"),
        ("depth", {"rule": "shared_lr"}, "studies.depth.shared_lr: rule shared_lr needs the lr both models train at"),
        ("depth", {"shared_lr": "1e-3"}, "studies.depth.shared_lr: expected a positive number, got '1e-3'"),
        ("depth", {"stages": 0}, "studies.depth.stages: expected a whole number from 1, got 0"),
        (
            "depth",
            {"stage_targets": {3: "deep"}},
            "studies.depth.stage_targets: expected stage (1 to 1) -> target name",
        ),
        (
            "depth",
            {"compare": "twins"},
            "studies.depth.rule: a study of twins compares each run with its twin: no lr rule",
        ),
        (
            "depth",
            {"measures": ["times_read", "epochs"]},
            "studies.depth.measures: expected a list of times_read, minutes_per_run, best_step, times_read_at_best, "
            "train_val_gap, got 'epochs'",
        ),
        (
            "depth",
            {"compare": "parts", "measures": ["best_step"]},
            "studies.depth.measures: only a study of the two models (compare: models) shows measures",
        ),
        (
            "depth",
            {"hypothesis": "read_twice"},
            "studies.depth.hypothesis: expected one of read_once, got 'read_twice'",
        ),
        (
            "depth",
            {"hypothesis": "read_once"},
            "studies.depth.hypothesis: a hypothesis is tested at the shared lr: it needs rule shared_lr",
        ),
        ("depth", {"swap_points": "first"}, "studies.depth.swap_points: expected one of all, last, got 'first'"),
        (
            "depth",
            {"compare": "parts", "swap_points": "last"},
            "studies.depth.swap_points: only a study of the two models (compare: models) has it",
        ),
    ],
)
def test_a_wrong_declaration_is_one_line_naming_its_field(name, change, said):
    entry = {key: value for key, value in {**GOOD, **change}.items() if value is not None}
    with pytest.raises(AnatomyError) as raised:
        parse_study(name, entry, "workflow/studies.yaml")
    message = str(raised.value)
    assert message.startswith("workflow/studies.yaml: ") and said in message and "\n" not in message


def test_a_studies_file_without_its_mapping_or_with_a_duplicate_is_named(tmp_path):
    path = tmp_path / "studies.yaml"
    path.write_text("size:\n  question: Q\n", encoding="utf-8")
    with pytest.raises(AnatomyError, match="expected a 'studies' mapping of name -> study"):
        read_studies(path)
    path.write_text("studies:\n  size: {}\n  size: {}\n", encoding="utf-8")
    with pytest.raises(AnatomyError, match="size"):
        read_studies(path)
    with pytest.raises(AnatomyError, match="no such file"):
        read_studies(tmp_path / "none.yaml")


def test_the_catalogue_gets_each_question_and_what_a_study_cannot_answer():
    """babel.cfg's extractor reads them from the declarations, with the line each is on."""
    text = STUDIES_FILE.read_bytes()
    found = list(extract_messages(io.BytesIO(text), {}, [], {}))
    lines = text.decode("utf-8").splitlines()
    questions = [message for _line, _f, message, _c in found if "?" in message]
    assert questions == list(STUDY_GROUPS.values())
    assert any(message.startswith("What this design cannot answer") for _l, _f, message, _c in found)
    for line, _f, _message, comments in found:  # the line of the field, for a translator to find
        assert lines[line - 1].strip().startswith(comments[0].split(": ")[1] + ":")


# a study of the user's own: depth at one width, both models at three lrs, two seeds; vanilla's
# best lr falls with depth, and the mini-LLaMA pulls ahead only at 6 layers
DEPTH = Study("depth", "Does depth change the answer?", "models", ("n_layer",), "own_lr", shared_lr=1e-3)
FLOORS = {
    (2, "vanilla"): {5e-4: 2.60, 1e-3: 2.50, 2e-3: 2.55},
    (2, "llama"): {5e-4: 2.62, 1e-3: 2.50, 2e-3: 2.58},
    (6, "vanilla"): {2.5e-4: 2.40, 5e-4: 2.30, 1e-3: 2.36},
    (6, "llama"): {5e-4: 2.28, 1e-3: 2.20, 2e-3: 2.27},
}


DEPTH_DATA = {"vocab_size": 50, "train_tokens": 64_000, "val_tokens": 500, "corpus": "mine"}


def write_depth_runs(root: Path, group: str = "depth", layers: tuple[int, ...] = (2, 6), floors=FLOORS) -> None:
    """The runs of `floors` ((depth, preset) -> lr -> floor) at these depths, two seeds each, as runs
    of the study `group`."""
    for (n_layer, preset), by_lr in floors.items():
        if n_layer not in layers:
            continue
        for lr, floor in by_lr.items():
            for seed in (42, 7):
                write_run_folder(
                    root / "runs",
                    f"{group}_{n_layer}_{preset}_{lr:g}".replace(".", "_").replace("-", "m"),
                    seed,
                    group=group,
                    preset=preset,
                    n_layer=n_layer,
                    model=dict(LLAMA_PARTS) if preset == "llama" else {},
                    data=DEPTH_DATA,
                    train={"precision": "fp32", "lr": lr},
                    floor=floor,
                )


@pytest.fixture(scope="module")
def depth_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("depth")
    write_depth_runs(root)
    collect.collect(root / "runs", root / "anatomy.duckdb")
    return load(root / "anatomy.duckdb")


def depth_without_rope(root: Path, floors: dict[int, float]) -> None:
    """The mini-LLaMA without RoPE at its best lr (1e-3) at each depth of `floors`, two seeds."""
    for n_layer, floor in floors.items():
        for seed in (42, 7):
            write_run_folder(
                root / "runs",
                f"depth_{n_layer}_llama_minus_rope",
                seed,
                group="depth",
                preset="llama",
                part="rope",
                direction="remove",
                baseline=f"depth_{n_layer}_llama_0_001",
                n_layer=n_layer,
                model={**LLAMA_PARTS, "pos_type": "learned"},
                data=DEPTH_DATA,
                train={"precision": "fp32", "lr": 1e-3},
                floor=floor,
            )


def test_a_part_removed_at_each_point_says_whether_its_cost_holds(tmp_path):
    """RoPE out of the mini-LLaMA at its best lr costs 0.10 at 2 layers and 0.30 at 6: it grows."""
    write_depth_runs(tmp_path)
    depth_without_rope(tmp_path, {2: 2.60, 6: 2.50})
    collect.collect(tmp_path / "runs", tmp_path / "anatomy.duckdb")
    everything = load(tmp_path / "anatomy.duckdb")
    found = study_section.points(everything, DEPTH)
    judged = study_section.swapped_at_rule_lr(everything, DEPTH, found)
    assert {key: round(d.mean, 6) for key, d in judged.items()} == {
        (0, "rope", "remove"): 0.1,
        (1, "rope", "remove"): 0.3,
    }
    assert all(d.sign == 1 and d.n == 2 for d in judged.values())  # both beyond noise, judged together
    trend = study_section.swap_trend(found, judged, "rope", "remove")
    assert trend.mean == pytest.approx(0.2) and trend.se == pytest.approx(
        math.hypot(judged[(0, "rope", "remove")].se, judged[(1, "rope", "remove")].se)
    )
    text = study_section.study_section(everything, DEPTH)
    assert "| 6 | the mini-LLaMA without RoPE | 0.001 | +0.300 [" in text
    assert "From 2 to 6 that changes by +0.200 [" in text and "it grows beyond noise." in text
    from anatomy.report import findings as findings_module

    (record,) = findings_module.swap_findings(everything, DEPTH, found)
    assert record.key == "depth_rope_remove" and record.verdict == 1 and record.sentence in text


def test_a_point_without_its_part_removed_leaves_the_swap_unanswered(tmp_path):
    write_depth_runs(tmp_path)
    depth_without_rope(tmp_path, {2: 2.60})
    collect.collect(tmp_path / "runs", tmp_path / "anatomy.duckdb")
    text = study_section.study_section(load(tmp_path / "anatomy.duckdb"), DEPTH)
    assert "Still missing: 6: no finished run of the mini-LLaMA without RoPE at the model's lr 0.001." in text
    assert "changes by" not in text


def test_a_point_still_being_swept_leaves_the_answer_at_the_others(tmp_path, monkeypatch):
    """A new depth whose models have trained at one lr so far (every best lr an edge): the points
    that can answer keep their answer, their intervals judged without it, their swaps' trend too;
    the new point is listed as not judged yet, and the study's findings stay."""
    monkeypatch.setattr(study_section, "TREND_POINTS", 2)  # two points answer this question
    write_depth_runs(tmp_path)
    depth_without_rope(tmp_path, {2: 2.60, 6: 2.50})
    # 8 layers, lr 1e-3 only
    write_depth_runs(tmp_path, layers=(8,), floors={(8, "vanilla"): {1e-3: 2.30}, (8, "llama"): {1e-3: 2.10}})
    collect.collect(tmp_path / "runs", tmp_path / "anatomy.duckdb")
    everything = load(tmp_path / "anatomy.duckdb")
    found = study_section.points(everything, DEPTH)
    judged = study_section.differences(everything, DEPTH, found)
    # the edge point judged alone; the others with the three shared-lr differences (Holm over 5)
    assert [judged[("own", index)].n for index in range(3)] == [5, 5, 1]
    assert study_section.answered_points(DEPTH, found, judged) == [0, 1]
    text = study_section.study_section(everything, DEPTH)
    assert "So the mini-LLaMA is lower beyond noise at 6; the two are level within noise at 2." in text
    assert "Not judged yet: 8: the best lr of vanilla, mini-LLaMA is the edge of the lrs tried." in text
    assert "From 2 to 6 that changes by +0.200 [" in text  # RoPE's cost where it is measured
    assert "8: no finished run of the mini-LLaMA without RoPE at the model's lr 0.001" in text
    from anatomy.report import findings as findings_module

    (record,) = findings_module.swap_findings(everything, DEPTH, found)  # two of three points judged
    assert record.key == "depth_rope_remove" and record.sentence in text


def test_a_users_study_is_rendered_from_its_declaration(depth_results):
    found = study_section.points(depth_results, DEPTH)
    assert [study_section.point_label(DEPTH, point) for point in found] == ["2", "6"]
    assert [(p.curves[0].best_lr, p.curves[5].best_lr) for p in found] == [(1e-3, 1e-3), (5e-4, 1e-3)]
    text = study_section.study_section(depth_results, DEPTH)
    assert "| n_layer | parameters (vanilla / mini-LLaMA) |" in text
    assert "2.325 at lr 0.0005" in text and "2.225 at lr 0.001" in text  # seeds add 0.02 and 0.03 alike
    # two points: each answered, but a trend needs three
    assert "still missing: points still to train: 1." in text
    assert "What this design cannot answer" not in text  # the user declared none
    drawn = study_section.study_points(depth_results, DEPTH)
    assert set(drawn["point"]) == {"2", "6"} and set(drawn.loc[drawn["rule"] == "shared", "lr"]) == {1e-3}


def test_a_shared_lr_study_is_judged_at_that_lr_alone(depth_results, monkeypatch):
    shared = Study("depth", "Q?", "models", ("n_layer",), "shared_lr", shared_lr=1e-3)
    monkeypatch.setattr(study_section, "TREND_POINTS", 2)  # two points answer this question
    text = study_section.study_section(depth_results, shared)
    # at lr 1e-3: 2 layers 2.50 vs 2.50 (level), 6 layers 2.20 vs 2.36 (lower)
    assert (
        "At lr 0.001 on 64,000 characters of mine (fp32), llama minus vanilla: 2: +0.000 [" in text
        and "6: -0.160 [" in text
    )
    assert "the mini-LLaMA is lower beyond noise at 6; the two are level within noise at 2" in text
    assert "each at its best lr" not in text  # no own-lr column under a shared-lr rule


# the parts study's comparison: each part added to the mini-LLaMA against the plain one, each at its
# own best lr; QK-norm is level, the experts lower the loss
PARTS = Study("parts", "Q?", "parts", ("corpus", "train_tokens", "precision"), "own_lr")


@pytest.fixture(scope="module")
def parts_results(tmp_path_factory):
    root = tmp_path_factory.mktemp("parts")
    write_parts_runs(root / "runs")
    collect.collect(root / "runs", root / "anatomy.duckdb")
    return load(root / "anatomy.duckdb")


def test_each_part_is_judged_against_the_plain_model_each_at_its_own_best_lr(parts_results):
    text = study_section.study_section(parts_results, PARTS)
    # QK-norm's best lr is 2e-3 (2.325 with the seeds' 0.025), the plain model's 1e-3 (2.325): level;
    # the experts' best 1e-3 (2.225): 0.100 lower
    assert "| 64,000 characters of mine (fp32) | QK-norm | 2.325 at lr 0.001 | 2.325 at lr 0.002 | +0.000 [" in text
    assert (
        "| 64,000 characters of mine (fp32) | experts (MoE) | 2.325 at lr 0.001 | 2.225 at lr 0.001 | -0.100 [" in text
    )
    assert (
        "Adding experts (MoE) lowers the loss beyond noise on 64,000 characters of mine (fp32) (lr 0.001 with it, "
        "0.001 without: -0.100 [" in text
    )
    assert (
        "Adding QK-norm leaves the loss level within noise on 64,000 characters of mine (fp32) (lr 0.002 with it, "
        "0.001 without: +0.000 [" in text
    )
    assert study_section.study_points(parts_results, PARTS).empty  # no figure of two models here


def test_a_part_whose_best_lr_is_the_edge_waits_and_the_other_parts_keep_their_answer(parts_results, monkeypatch):
    """QK-norm without its run at 4e-3: its best lr is the edge, so its answer waits; the experts'
    runs are all in, and their answer stays said, in the section and among the findings."""
    from anatomy.report import findings as findings_module

    runs = parts_results.runs
    fewer = dataclasses.replace(parts_results, runs=runs[~((runs["part"] == "qk_norm") & (runs["lr"] == 4e-3))])
    text = study_section.study_section(fewer, PARTS)
    assert (
        "Adding experts (MoE) lowers the loss beyond noise on 64,000 characters of mine (fp32) (lr 0.001 with it, "
        "0.001 without: -0.100 [" in text
    )
    assert "Adding QK-norm" not in text
    assert (
        "**The rest is not answered yet.** Still missing: 64,000 characters of mine (fp32): the best lr of QK-norm "
        "is the edge of the lrs tried." in text
    )
    # the waiting difference is judged alone: the experts' interval is the one without QK-norm's runs
    without_qk_norm = dataclasses.replace(parts_results, runs=runs[runs["part"] != "qk_norm"])
    moe_alone = study_section.parts_section(without_qk_norm, PARTS).split("| experts (MoE) |")[1].split("\n")[0]
    assert moe_alone in text
    # and the how-to-read line says so, rather than "judged together" for the whole table
    assert "except any marked (edge): its best lr can still move, so it is judged alone" in text
    monkeypatch.setattr(findings_module, "declared", lambda: {"parts": PARTS})
    records = findings_module.parts_findings(fewer, {})
    assert [record.key for record in records] == ["parts_moe_0"]
    assert records[0].sentence in text
    assert findings_module.parts_at_full_size(fewer) == {"moe": [records[0].sentence], "qk_norm": []}


def test_the_parts_at_the_edge_of_one_point_are_said_in_one_line(parts_results):
    """QK-norm without 4e-3 and the experts without 5e-4: both best lrs are edges at the one point,
    and the section says so once, naming both, rather than once per part."""
    runs = parts_results.runs
    cut = ((runs["part"] == "qk_norm") & (runs["lr"] == 4e-3)) | ((runs["part"] == "moe") & (runs["lr"] == 5e-4))
    text = study_section.study_section(dataclasses.replace(parts_results, runs=runs[~cut]), PARTS)
    assert (
        "**Not answered yet.** Still missing: 64,000 characters of mine (fp32): the best lr of QK-norm, "
        "experts (MoE) is the edge of the lrs tried.\n" in text
    )


def test_a_parts_study_without_the_plain_model_says_so(parts_results):
    """The plain runs not trained yet (or trained in another precision, under a --config
    override): the part runs are finished, and the answer waits for the plain model."""
    runs = parts_results.runs
    without = dataclasses.replace(parts_results, runs=runs[runs["part"].notna() | (runs["n_kv_head"] == 1)])
    text = study_section.study_section(without, PARTS)
    assert (
        "**Not answered yet.** Still missing: 64,000 characters of mine (fp32): the plain mini-LLaMA has no finished "
        "run with these settings." in text
    )
    assert "a run is not finished" not in text


def test_a_parts_study_with_only_its_plain_runs_says_what_it_waits_for(parts_results):
    runs = parts_results.runs
    plain = dataclasses.replace(parts_results, runs=runs[runs["part"].isna()])
    text = study_section.study_section(plain, PARTS)
    assert text.startswith(
        "**Not answered yet.** Still missing: 64,000 characters of mine (fp32): no run with a part is finished."
    )
    assert "| part |" not in text  # no table without a row


def test_each_answered_part_is_a_finding_with_the_sections_sentence(parts_results, monkeypatch):
    from anatomy.report import findings as findings_module

    monkeypatch.setattr(findings_module, "declared", lambda: {"parts": PARTS})
    records = {f.key: f for f in findings_module.parts_findings(parts_results, {})}
    assert set(records) == {"parts_moe_0", "parts_qk_norm_0"}
    assert records["parts_moe_0"].sentence.startswith("Adding experts (MoE) lowers the loss beyond noise on")
    assert records["parts_moe_0"].verdict == -1 and records["parts_qk_norm_0"].verdict == 0
    assert records["parts_moe_0"].sentence in study_section.study_section(parts_results, PARTS)
    # the models studies' records are the other studies' own: a parts study adds none there
    assert findings_module.declared_study_findings(parts_results) == []


def test_each_part_of_2024_26_is_one_story_in_the_chapters_order(parts_results, monkeypatch):
    """The numbered list tells a part in one place: its exam's record (what it buys), then its
    loss at full size; QK-norm before the experts, as the chapter names them, in the section's
    table too."""
    from anatomy.report import findings as findings_module

    monkeypatch.setattr(findings_module, "declared", lambda: {"parts": PARTS})
    exams = {
        part: findings_module.Finding(f"exam_{part}", "Q?", "exam", "with minus without", None, None, "S.", "exams")
        for part in ("moe", "mla", "qk_norm")
    }
    keys = [record.key for record in findings_module.parts_findings(parts_results, exams)]
    assert keys == ["exam_qk_norm", "parts_qk_norm_0", "exam_mla", "exam_moe", "parts_moe_0"]
    table = study_section.parts_section(parts_results, PARTS)
    assert table.index("| QK-norm |") < table.index("| experts (MoE) |")


def test_a_study_whose_points_are_setups_is_answered_setup_by_setup(tmp_path):
    """Axis: the text, its size and the precision, each model at its own best lr: no trend to find
    across texts, so the one analysis answers each setup as the lr study's section does, with its
    figure of best val against lr, and draws no figure against parameters."""
    tune = Study("tune", "Q?", "models", ("corpus", "train_tokens", "precision"), "own_lr")
    assert study_section.per_setup(tune) and not study_section.per_setup(DEPTH)
    write_depth_runs(tmp_path, group="tune", layers=(6,))  # one depth: one setup
    collect.collect(tmp_path / "runs", tmp_path / "anatomy.duckdb")
    everything = load(tmp_path / "anatomy.duckdb")
    linked = []
    text = study_section.study_section(everything, tune, lambda name, caption: linked.append(name) or f"[{name}]")
    assert text.startswith("On 64,000 characters of mine (fp32) (sd 0.007 per run")
    assert "best val 2.325 at lr 0.0005, with a worse lr tried on each side" in text  # vanilla's curve
    assert "llama minus vanilla -0.100 [" in text and linked == ["tune"] and "[tune]" in text
    assert study_section.study_points(everything, tune).empty


def test_the_parts_figure_draws_each_curve_over_lr_in_its_parts_colour(parts_results):
    """The dashboard's figure of a parts point: the plain model and each part over every lr any
    study trained with their settings (the break test's QK-norm at 4e-3 too), best lr ringed."""
    from anatomy.report import colours

    points = study_section.parts_lr_points(parts_results, PARTS)
    means = points.pivot_table(index="lr", columns="model", values="mean").round(3)
    assert means["QK-norm"].to_dict() == {5e-4: 2.435, 1e-3: 2.385, 2e-3: 2.325, 4e-3: 2.355}
    assert means["the plain mini-LLaMA"].dropna().to_dict() == {5e-4: 2.425, 1e-3: 2.325, 2e-3: 2.375}  # no bf16
    best = points[points["best"]].set_index("model")["lr"].to_dict()
    assert best == {"the plain mini-LLaMA": 1e-3, "QK-norm": 2e-3, "experts (MoE)": 1e-3}
    assert set(points["setup"]) == {"64,000 characters of mine (fp32)"}
    assert study_section.parts_colours(parts_results, PARTS) == {
        "the plain mini-LLaMA": colours.LLAMA,
        "experts (MoE)": colours.NEW_PARTS["moe"],
        "QK-norm": colours.BREAKS["qk_norm"],
    }


def test_the_experts_load_is_said_for_the_runs_the_table_judges(parts_results):
    """The experts' exam's measure, for the full-size runs: the smallest and largest share any
    expert took at the last logged step (not the uneven first steps), over the runs at the experts'
    best lr that logged it."""
    text = study_section.study_section(parts_results, PARTS)
    assert (
        "**The experts' load** (the smallest and largest share of the tokens any expert took at a run's last "
        "logged step): experts (MoE) at lr 0.001 on 64,000 characters of mine (fp32): 16%-34% (even: 25%; 1 of "
        "its 2 runs logged it)." in text
    )
    # where every run logged it, nothing is said missing
    runs = parts_results.runs
    seed_42 = dataclasses.replace(parts_results, runs=runs[(runs["seed"] == 42) | (runs["part"] != "moe")])
    assert "on 64,000 characters of mine (fp32): 16%-34% (even: 25%; its 1 run)." in study_section.study_section(
        seed_42, PARTS
    )


def test_the_runs_still_to_train_are_said_stage_by_stage_with_their_command(tmp_path, parts_results):
    """The experiments file declares each experiment's seeds by stage: the line lists those with no
    finished run, stage by stage, with the command that trains them. A run still going is not
    finished; one that diverged is (its lr was too high: an answer); another study's runs are not
    this one's; and without declarations nothing is said."""
    import json

    from anatomy.report.still_to_train import still_to_train

    write_parts_runs(tmp_path / "runs")
    (tmp_path / "runs" / "parts_moe_0_001" / "seed7" / "summary.json").unlink()  # still going
    write_run_folder(tmp_path / "runs", "parts_moe_0_1", 42, group="parts", status="diverged", diverged_step=20)

    def runs(*seeds, stage):
        return [{"seed": seed, "stage": stage} for seed in seeds]

    declared = {
        "parts_qk_norm_0_001": {"group": "parts", "runs": runs(42, 7, stage=1)},  # both finished
        "parts_moe_0_001": {"group": "parts", "runs": runs(42, 7, stage=1)},  # seed 7 still going
        "parts_moe_0_1": {"group": "parts", "runs": runs(42, stage=1)},  # diverged: finished
        "parts_moe_0_008": {"group": "parts", "runs": runs(42, 7, stage=2)},  # nothing trained yet
        "parts_mla_0_001": {"group": "parts", "runs": runs(42, stage=None)},  # not run in stages
        "lr_llama_0_008": {"group": "lr", "runs": runs(42, stage=None)},  # the lr study's
    }
    (tmp_path / "experiments.json").write_text(json.dumps({"experiments": declared}))
    collect.collect(tmp_path / "runs", tmp_path / "anatomy.duckdb")

    assert still_to_train(load(tmp_path / "anatomy.duckdb"), PARTS) == (
        "**Still to train:** 4 of the study's 8 runs: stage 1 (`snakemake parts_stage1 --cores 2 --config "
        "train_threads=1`): parts_moe_0_001 (seed 7); stage 2 (`snakemake parts_stage2 --cores 2 --config "
        "train_threads=1`): parts_moe_0_008 (seeds 7, 42); `snakemake parts --cores 2 --config train_threads=1`: "
        "parts_mla_0_001 (seed 42)."
    )
    assert still_to_train(parts_results, PARTS) is None
