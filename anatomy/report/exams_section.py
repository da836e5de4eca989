"""The report's "Which part wins where": each part's training loss (its ablations) beside the exam
made for it (anatomy/report/exam_findings.py), in a table and a sentence per part.

The parts of 2024-26 (QK-norm, MLA, experts) follow the five: none is an ablation of the grid, so
their sentence is what their exam found (the lab's finding record, anatomy/report/findings.py:
what the part buys here, at what cost), with the grid's break test beside it where there is one
(QK-norm added to llama) and, for the loss at full size, the parts study.
"""

from __future__ import annotations

import pandas as pd

from anatomy.report.claims import (
    EFFECT_SUMMARY,
    HELPS,
    HURTS,
    NOT_BEYOND_NOISE,
    PARTS,
    ablation_family,
    ablation_of,
    part_effects,
)
from anatomy.report.exam_findings import NEW_PARTS, PART_EXAMS, PART_NAMES, exam_rows, not_run
from anatomy.report.findings import exam_part_findings
from anatomy.report.protocol import not_a_finding, protocol_of
from anatomy.report.uncertainty import Difference, interval_text, judged_against_baselines
from anatomy.report.wording import md_table
from anatomy.results.groups import STUDY_GROUPS
from anatomy.results.reader import Results


def training_loss_text(data: Results, part: str, family: dict[str, Difference] | None, direction: str) -> str:
    """What one ablation says: the change in best val with its interval (judged with the ablation
    table's family), the part added to vanilla or removed from llama."""
    family = ablation_family(data) if family is None else family
    experiment = ablation_of(data, part, direction)
    if experiment is None:
        return "not trained yet"
    if pd.isna(family[experiment].mean):  # still training, or no seed that its baseline has
        return "no best val to pair with the baseline's yet"
    return interval_text(family[experiment])


def training_loss_verdict(data: Results, part: str, family: dict[str, Difference] | None = None) -> str:
    """What the ablations say about the part, added to vanilla and removed from llama
    (claims.part_effects: the ablation table's verdicts)."""
    effects = part_effects(data, part, family)
    if effects is None:
        return "the training loss does not tell yet (not testable both ways)"
    added, removed = effects
    if added == removed == NOT_BEYOND_NOISE:
        return (
            "in the training loss, neither adding it to vanilla nor removing it from llama moves best val beyond noise"
        )
    unclear = "does not move best val beyond noise"
    adding = {HELPS: "lowers best val beyond noise", HURTS: "raises best val beyond noise"}.get(added, unclear)
    removing = {HELPS: "raises best val beyond noise", HURTS: "lowers best val beyond noise"}.get(removed, unclear)
    return (
        f"in the training loss, adding it to vanilla {adding} and removing it from llama {removing} "
        f"({EFFECT_SUMMARY[effects]})"
    )


def break_test_text(data: Results, part: str) -> str:
    """A part of 2024-26 in the grid's training loss: its break test against its baseline (judged
    with the break table's other comparisons), else where its loss at full size is measured."""
    breaks = data.runs[data.runs["group"] == "break"]
    mine = breaks[breaks["part"] == part]
    study = f'the parts study (`snakemake --cores 2 parts`: "{STUDY_GROUPS["parts"]}")'
    if mine.empty:
        return f"not a run of the grid; its training loss at full size: {study}"
    family = judged_against_baselines(data, list(dict.fromkeys(breaks["experiment"])))
    said = []
    for experiment in dict.fromkeys(mine["experiment"]):
        d = family[experiment]
        baseline = mine.loc[mine["experiment"] == experiment, "baseline"].iloc[0] if "baseline" in mine else None
        versus = f" against `{baseline}`" if isinstance(baseline, str) else ""
        shown = "no best val to pair with the baseline's yet" if pd.isna(d.mean) else interval_text(d)
        said.append(f"`{experiment}`{versus}, Δ best val {shown}")
    return f"the grid's break test {'; '.join(said)}; at full size: {study}"


def new_part_entry(data: Results, part: str, shown: tuple[str, str | None], testable: bool) -> str:
    """A part of 2024-26: the finding record's sentence (or the command its exam needs), what the
    exam shows, and its training loss."""
    record = exam_part_findings(data).get(part)
    said = record.sentence if record is not None else f"{not_run(PART_EXAMS[part][0])}."
    return (
        f"- **{PART_NAMES[part]}**: {said if testable or record is None else not_a_finding(said)}\n"
        f"  - its exam, {PART_EXAMS[part][1]}, shows: {shown[0]}\n"
        f"  - in the training loss: {break_test_text(data, part)}"
    )


def exams_section(data: Results) -> str:
    """One row per part: the training loss's verdict beside the exam made for it. On runs that are
    not the chapter's (anatomy.report.protocol), each part's sentence says what the runs showed,
    never a finding about the part."""
    shown = exam_rows(data)
    family = ablation_family(data)
    rows = [
        [
            PART_NAMES[part],
            training_loss_text(data, part, family, "add"),
            training_loss_text(data, part, family, "remove"),
            f"`exam {PART_EXAMS[part][0]}`",
        ]
        for part in PARTS
    ]
    rows += [[PART_NAMES[part], "–", "–", f"`exam {PART_EXAMS[part][0]}`"] for part in NEW_PARTS]
    table = md_table(["part", "Δ best val, added to vanilla", "Δ best val, removed from llama", "its exam"], rows)
    testable = protocol_of(data).untestable_reason is None
    entries = []
    for part in PARTS:
        finding = shown[part][1] or f"its exam ({PART_EXAMS[part][0]}) is not measured yet"
        said = f"{training_loss_verdict(data, part, family)}; {finding}."
        entries.append(
            f"- **{PART_NAMES[part]}**: {said if testable else not_a_finding(said)}\n"
            f"  - its exam, {PART_EXAMS[part][1]}, shows: {shown[part][0]}"
        )
    entries += [new_part_entry(data, part, shown[part], testable) for part in NEW_PARTS]
    return (
        f"{table}\n\nΔ best val: the ablation's mean minus its baseline's (negative: lower loss) [its 95% interval], "
        "judged with the ablation table's other comparisons. QK-norm, MLA and experts, the parts of 2024-26, are "
        "no ablation of the grid (–): each is judged below by its own exam, on one run per cell.\n\n"
        + "\n".join(entries)
    )
