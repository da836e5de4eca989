"""Experiment groups: which runs are the chapter's grid, and which are studies beside it.

Every experiment in workflow/experiments.yaml has a group. The grid's groups (headline,
ablation, break, extra) are what `snakemake` runs by default and what the report's tables are
made of. A study asks a question of its own with runs of its own: only its own target runs it,
and its runs never enter the grid's tables, even where its settings look like a grid role (the
bf16 pair has the headline models' parts). The workflow and the report both ask here.
"""

from __future__ import annotations

from anatomy.language import N_

# study group -> the question it asks (the report's section on it; the dashboard shows it with `_`)
STUDY_GROUPS = {
    "precision": N_("Does training in bf16 change any finding?"),
    "scale": N_("When does the mini-LLaMA win?"),
    "lr": N_("Does the mini-LLaMA still win when each model has its own best learning rate?"),
}


def is_study(group: str | None) -> bool:
    return group in STUDY_GROUPS
