"""Experiment groups: which runs are the chapter's grid, and which are studies beside it.

Every experiment in workflow/experiments.yaml has a group. The grid's groups (headline,
ablation, break, extra) are what `snakemake` runs by default and what the report's tables are
made of. A study asks a question of its own with runs of its own (workflow/studies.yaml declares
each: anatomy/results/studies.py): only its own target runs it, and its runs never enter the
grid's tables, even where its settings look like a grid role (the bf16 pair has the headline
models' parts). The workflow and the report both ask here, and both name a group's runs by the
`snakemake` target that trains them (TARGETS).
"""

from __future__ import annotations

from typing import NamedTuple

from anatomy.results.studies import Study, declared

# study group -> the question it asks, as declared (the report's section on it; shown with `_`:
# babel.cfg extracts it from workflow/studies.yaml for the catalogue)
STUDY_GROUPS = {name: study.question for name, study in declared().items()}
GRID_GROUPS = ("headline", "ablation", "break", "extra")


def is_study(group: str | None) -> bool:
    return group in STUDY_GROUPS


class Target(NamedTuple):
    group: str
    stage: int | None  # None: every stage of the group


# The commands the READMEs give a learner for a grid of their own, as they give them: the
# dashboard's notes quote these, never a command of their own (tests/test_doc_references.py
# holds both READMEs to them). Two runs side by side, one thread each, on a small CPU.
QUICK_GRID_COMMAND = "snakemake --cores 2 --configfile workflow/quick.yaml"


def target_command(target: str) -> str:
    """The command that trains one named target (a group, a study's stage)."""
    return f"snakemake {target} --cores 2 --config train_threads=1"


HEADLINE_COMMAND = target_command("headline")


# The workflow's named targets (workflow/Snakefile makes a rule of each): the group each trains,
# and at which stage; each trains its experiments' baselines too. The grid's group `extra` has
# none: only `all` runs it. `all` and `exams` (the whole grid and every exam) are the workflow's.
GRID_TARGETS = {
    "headline": Target("headline", None),
    "ablations": Target("ablation", None),
    "break_tests": Target("break", None),
}


def study_targets(studies: dict[str, Study] | None = None) -> dict[str, Target]:
    """Each declared study's targets: its name (every stage), then one per stage."""
    targets = {}
    for name, study in (declared() if studies is None else studies).items():
        targets[name] = Target(name, None)
        for stage in range(1, study.stages + 1):
            targets[study.stage_target(stage)] = Target(name, stage)
    return targets


TARGETS = {**GRID_TARGETS, **study_targets()}


def target_of(group: str) -> str:
    """The target that trains every stage of a group (`ablation` -> `ablations`)."""
    for name, target in TARGETS.items():
        if target == (group, None):
            return name
    raise KeyError(f"no snakemake target trains the group {group!r} (anatomy/results/groups.py TARGETS)")
