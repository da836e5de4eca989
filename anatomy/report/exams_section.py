"""The report's "Which part wins where": each part's training loss (its ablations) beside the exam
made for it (anatomy/report/exam_findings.py), in a table and a sentence per part.
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
from anatomy.report.exam_findings import PART_EXAMS, PART_NAMES, exam_rows
from anatomy.report.protocol import not_a_finding, protocol_of
from anatomy.report.uncertainty import Difference, interval_text
from anatomy.report.wording import md_table
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
    return (
        f"{table}\n\nΔ best val: the ablation's mean minus its baseline's (negative: lower loss) [its 95% interval], "
        "judged with the ablation table's other comparisons.\n\n" + "\n".join(entries)
    )
