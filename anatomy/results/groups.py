"""Experiment groups: which runs are the chapter's grid, and which are studies beside it.

Every experiment in workflow/experiments.yaml has a group. The grid's groups (headline,
ablation, break, extra) are what `snakemake` runs by default and what the report's tables are
made of. A study asks a question of its own with runs of its own: only its own target runs it,
and its runs never enter the grid's tables, even where its settings look like a grid role (the
bf16 pair has the headline models' parts). The workflow and the report both ask here, and both
name a group's runs by the `snakemake` target that trains them (TARGETS).
"""

from __future__ import annotations

from typing import NamedTuple

from anatomy.language import N_

# study group -> the question it asks (the report's section on it; the dashboard shows it with `_`)
STUDY_GROUPS = {
    "precision": N_("Does training in bf16 change any finding?"),
    "scale": N_("When does the mini-LLaMA win?"),
    "lr": N_("Does the mini-LLaMA still win when each model has its own best learning rate?"),
    "size": N_("Does the answer change with model size?"),
    "parts": N_("What do QK-norm, MLA and a mixture of experts do to the mini-LLaMA's loss?"),
}


def is_study(group: str | None) -> bool:
    return group in STUDY_GROUPS


class Target(NamedTuple):
    group: str
    stage: int | None  # None: every stage of the group


# The commands the READMEs give a learner for a grid of their own, as they give them: the
# dashboard's notes quote these, never a command of their own (tests/test_doc_references.py
# holds both READMEs to them). Two runs side by side, one thread each, on a small CPU.
QUICK_GRID_COMMAND = "snakemake --cores 2 --configfile workflow/quick.yaml"
HEADLINE_COMMAND = "snakemake headline --cores 2 --config train_threads=1"


# The workflow's named targets (workflow/Snakefile makes a rule of each): the group each trains,
# and at which stage; each trains its experiments' baselines too. The grid's group `extra` has
# none: only `all` runs it. `all` and `exams` (the whole grid and every exam) are the workflow's.
TARGETS = {
    "headline": Target("headline", None),
    "ablations": Target("ablation", None),
    "break_tests": Target("break", None),
    "precision_check": Target("precision", 1),
    "precision_stage2": Target("precision", 2),
    "precision": Target("precision", None),
    "scale": Target("scale", None),
    "scale_stage1": Target("scale", 1),
    "scale_stage2": Target("scale", 2),
    "scale_stage3": Target("scale", 3),
    "lr": Target("lr", None),
    "lr_stage1": Target("lr", 1),
    "lr_stage2": Target("lr", 2),
    "lr_stage3": Target("lr", 3),
    "lr_stage4": Target("lr", 4),
    "lr_stage5": Target("lr", 5),
    "lr_stage6": Target("lr", 6),
    "lr_stage7": Target("lr", 7),
    "size": Target("size", None),
    "size_stage1": Target("size", 1),
    "size_stage2": Target("size", 2),
    "size_stage3": Target("size", 3),
    "parts": Target("parts", None),
    "parts_stage1": Target("parts", 1),  # the default corpus
    "parts_stage2": Target("parts", 2),  # poems_8m
}


def target_of(group: str) -> str:
    """The target that trains every stage of a group (`ablation` -> `ablations`)."""
    for name, target in TARGETS.items():
        if target == (group, None):
            return name
    raise KeyError(f"no snakemake target trains the group {group!r} (anatomy/results/groups.py TARGETS)")
