"""Which of a study's declared runs are not finished yet: the line after its section.

The workflow declares every run (workflow/experiments.yaml; results/experiments.json carries each
experiment's seeds and stages to collect, which keeps them in the declared_runs table). A study
answers from the runs it has, point by point, while the rest train; this line says what the rest
is, stage by stage, with the command that trains each stage, so that an answer from one seed is
not read as the study's last word.
"""

from __future__ import annotations

import pandas as pd

from anatomy.files.run_folder import SUMMARY_STATUSES
from anatomy.language import _, ngettext
from anatomy.report.wording import clauses, listed
from anatomy.results.groups import target_command
from anatomy.results.reader import Results
from anatomy.results.studies import Study


def missing_runs(everything: Results, declared: pd.DataFrame) -> pd.DataFrame:
    """The declared runs (experiment, seed, stage) with no finished run: a run still going is
    missing, one that diverged is finished (its lr was too high: an answer), and one collect left
    out as a repeat of another's training (repeat_of) is finished as that one."""
    runs = everything.runs[everything.runs["status"].isin(SUMMARY_STATUSES)]
    finished = set(zip(runs["experiment"], runs["seed"]))
    return declared[
        [
            (experiment, seed) not in finished and pd.isna(repeat)
            for experiment, seed, repeat in zip(declared["experiment"], declared["seed"], declared["repeat_of"])
        ]
    ]


def still_to_train(everything: Results, study: Study) -> str | None:
    """'**Still to train:** 3 of the study's 40 runs: stage 2 (`snakemake parts_stage2 --cores 2
    ...`): parts_8m_moe_1e3 (seeds 7, 42), ...'; None when every declared run is finished (or the
    experiments file declared none)."""
    declared = everything.declared[everything.declared["group"] == study.name]
    missing = missing_runs(everything, declared)
    if missing.empty:
        return None
    stages = []
    for stage, rows in missing.groupby("stage", dropna=False, sort=True):
        runs = listed(
            ngettext("{experiment} (seed {seeds})", "{experiment} (seeds {seeds})", len(seeds)).format(
                experiment=experiment, seeds=listed(str(seed) for seed in seeds)
            )
            for experiment, seeds in rows.groupby("experiment", sort=True)["seed"].agg(list).items()
        )
        if pd.isna(stage):  # an experiment not run in stages: the study's own target trains it
            stages.append(_("`{command}`: {runs}").format(command=target_command(study.name), runs=runs))
        else:
            command = target_command(study.stage_target(int(stage)))
            stages.append(_("stage {stage} (`{command}`): {runs}").format(stage=int(stage), command=command, runs=runs))
    return _("**Still to train:** {n} of the study's {total} runs: {stages}.").format(
        n=len(missing), total=len(declared), stages=clauses(stages)
    )
