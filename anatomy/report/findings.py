"""What this lab found: each finding a record, and the numbered list every page opens with.

The studies answer overlapping questions: the scale study compared the two models at one shared
learning rate, the lr study gave each model its own. A learner needs one answer, so each finding
is a record here (the question, the setup it holds, the comparison, the difference with its
interval, the verdict and where its evidence is), and a finding that a later study answers better
on the same text names that study's record as `superseded_by`. The numbered list leaves the
superseded ones out; the sections that still show them state their scope ("at one shared lr").

The README (both languages), the report and the dashboard's Overview and Studies pages all render
this list, in the reader's language, from the same records: one owner for each sentence. The
parts of 2024-26 (QK-norm, MLA, experts) are records too, one per exam that has run
(`exam_part_findings`): what the part buys here and at what cost, measured on the exam's own
cells (one seed each, so no interval: the figures themselves). The report's "Which part wins
where" and the Exams page show the same record's sentence. The list tells each part's story in
one place: its exam's record, then its loss at full size (`parts_findings`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import pandas as pd

from anatomy.config import DEFAULT_RECIPE, TrainConfig
from anatomy.language import N_, _
from anatomy.report import exam_findings, lr_section, study_section
from anatomy.report.claims import headline_claims, headline_gap
from anatomy.report.protocol import protocol_of
from anatomy.report.roles import headline_of, only_runs_of
from anatomy.report.study_measures import times_read
from anatomy.report.uncertainty import Difference, interval_text
from anatomy.report.wording import fmt, per_seed, recipe_words
from anatomy.results.groups import STUDY_GROUPS
from anatomy.results.reader import Results
from anatomy.results.studies import Study, declared

# the report's sections, by the key a finding's evidence names, and the heading each has there
SECTIONS = {  # the report is English, so its headings and their anchors are too
    "headline": "Headline: the 2017 Transformer vs the mini-LLaMA",
    "claims": "The chapter's claims, measured",
    "scale": STUDY_GROUPS["scale"],
    "lr": STUDY_GROUPS["lr"],
    "exams": "Which part wins where",
    # every other declared study's section, under its question (anatomy/report/study_section.py)
    **STUDY_GROUPS,
}


@dataclass(frozen=True)
class Finding:
    """One answer of the lab, with everything needed to say it and to check it."""

    key: str  # stable: what another record's superseded_by names
    question: str  # the question it answers, in the reader's words
    setup: str  # the text, its size, the precision, and the lr rule the runs were held to
    comparison: str  # what minus what ("llama minus vanilla")
    difference: Difference | None  # None: a finding with no difference to test (the pace)
    verdict: int | None  # the difference's sign when judged: -1 lower, 0 level, +1 higher
    sentence: str  # the learner's sentence, in the reader's language
    evidence: str  # a key of SECTIONS
    superseded_by: str | None = None


def anchor(section: str) -> str:
    """A heading's anchor as GitHub makes it (lower case, spaces to '-', punctuation dropped); the
    report's headings are English in every language, so the anchor is the English heading's."""
    heading = SECTIONS[section]
    return "#" + re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def grid_text(grid: Results) -> str:
    """The grid's text in words: 'data/posts (105,839 characters, read 77 times)'."""
    llama = headline_of(grid, "llama")
    corpus = str(llama["corpus"].dropna().iloc[0]) if llama["corpus"].notna().any() else _("the grid's text")
    if llama["train_tokens"].isna().all():  # runs collected before corpora recorded their size
        return corpus
    tokens = int(llama["train_tokens"].max())
    return _("{corpus} ({tokens} characters, read {read} times)").format(
        corpus=corpus, tokens=f"{tokens:,}", read=f"{times_read(grid, tokens):.0f}"
    )


def step_range(runs: pd.DataFrame) -> str:
    """The best val's step over the seeds: '500', or '850-900' where the seeds differ."""
    low, high = int(runs["best_step"].min()), int(runs["best_step"].max())
    return str(low) if low == high else f"{low}-{high}"


def pace(grid: Results) -> Finding | None:
    """The chapter's first claim: the mini-LLaMA's best val comes earlier."""
    claim = headline_claims(grid).get("learns_faster")
    vanilla, llama = headline_of(grid, "vanilla"), headline_of(grid, "llama")
    if claim is None or vanilla.empty or llama.empty or not claim.verdict.startswith(_("**reproduced**")):
        return None
    earlier = llama["best_step"].max() < vanilla["best_step"].min()
    template = (
        N_(
            "At the chapter's settings the mini-LLaMA learns faster: its best val comes at step {llama}, the 2017 "
            "model's at step {vanilla}."
        )
        if earlier
        else N_(
            "At the chapter's settings the mini-LLaMA does not learn faster: best val at step {llama} vs {vanilla}."
        )
    )
    return Finding(
        key="pace",
        question=_("Does the mini-LLaMA learn faster?"),
        setup=grid_text(grid),
        comparison=_("step of the best val"),
        difference=None,
        verdict=-1 if earlier else 0,
        sentence=_(template).format(llama=step_range(llama), vanilla=step_range(vanilla)),
        evidence="headline",
    )


def gap_words(sign: int | None) -> str:
    """Who reaches the lower best val, for a judged llama-minus-vanilla difference."""
    return {
        -1: _("the mini-LLaMA reaches a lower best val"),
        0: _("the two reach the same best val within noise"),
        1: _("the 2017 model reaches a lower best val"),
        None: _("whether either is lower is not testable (no noise estimate)"),
    }[sign]


def shared_lr_gap(grid: Results) -> Finding | None:
    """The chapter's comparison as it stands: both models at the chapter's one lr."""
    d = headline_gap(grid)
    if not math.isfinite(d.mean):
        return None
    return Finding(
        key="gap_shared_lr_grid",
        question=_("Does the mini-LLaMA reach a lower best val?"),
        setup=_("{text}, both at lr {lr}").format(text=grid_text(grid), lr=f"{TrainConfig.lr:g}"),
        comparison=_("llama minus vanilla"),
        difference=d,
        verdict=d.sign,
        sentence=_("At the chapter's one lr ({lr}) on {text}, {who}: {difference}.").format(
            lr=f"{TrainConfig.lr:g}", text=grid_text(grid), who=gap_words(d.sign), difference=interval_text(d)
        ),
        evidence="claims",
    )


def memorises(grid: Results) -> Finding | None:
    claim = headline_claims(grid).get("memorises")
    llama = headline_of(grid, "llama")
    if claim is None or llama.empty or not claim.verdict.startswith(_("**reproduced**")):
        return None
    return Finding(
        key="memorises",
        question=_("Does the mini-LLaMA memorise after its best val?"),
        setup=grid_text(grid),
        comparison=_("val and train loss after the best val"),
        difference=None,
        verdict=1,
        sentence=_(
            "After its best val the mini-LLaMA memorises the text: val climbs by {rise} while train falls to {train}."
        ).format(rise=per_seed(llama, "val_rise"), train=per_seed(llama, "final_train_loss")),
        evidence="headline",
    )


def own_lr_gap(
    setup: lr_section.Setup, shared: Difference | None, shared_key: str | None, scoped: bool = False
) -> Finding | None:
    """Each model at its own best lr on one setup: the lr study's answer there. `scoped`: another
    optimizer recipe has its own answer on this setup, so this one names its recipe, the default."""
    if setup.verdict is None or not all(curve.bracketed for curve in setup.curves.values()):
        return None
    d = setup.verdict
    label = (
        _("{setup} with the optimizer recipe {recipe}").format(setup=setup.label, recipe=recipe_words(DEFAULT_RECIPE))
        if scoped
        else setup.label
    )
    values = dict(
        setup=label,
        vanilla_lr=f"{setup.curves[0].best_lr:g}",
        llama_lr=f"{setup.curves[5].best_lr:g}",
        difference=interval_text(d),
        who=gap_words(d.sign),
    )
    if shared is not None and shared.sign == -1 and d.sign != -1:
        template = N_(
            "Give each model its own learning rate (vanilla {vanilla_lr}, mini-LLaMA {llama_lr}) and the "
            "mini-LLaMA's lead disappears on {setup}: {difference}, against {shared} at one shared lr {lr}."
        )
    elif shared is not None and shared.sign != -1 and d.sign == -1:
        template = N_(
            "Give each model its own learning rate (vanilla {vanilla_lr}, mini-LLaMA {llama_lr}) and the "
            "mini-LLaMA is lower on {setup}: {difference}, against {shared}, level, at one shared lr {lr}."
        )
    else:
        template = N_(
            "With each model at its own learning rate (vanilla {vanilla_lr}, mini-LLaMA {llama_lr}) on {setup}, "
            "{who}: {difference}."
        )
    return Finding(
        key=f"gap_own_lr_{setup.key['corpus']}_{int(setup.key['train_tokens'])}",
        question=_("Is the mini-LLaMA still lower when each model has its own best learning rate?"),
        setup=_("{setup}, each model at its own best lr").format(setup=label),
        comparison=_("llama minus vanilla"),
        difference=d,
        verdict=d.sign,
        sentence=_(template).format(
            shared=fmt(shared.mean, sign=True) if shared is not None else "", lr=f"{TrainConfig.lr:g}", **values
        ),
        evidence="lr",
    )


def shared_lr_studies() -> list[Study]:
    """The declared studies that compare the two models at one shared lr on setups of their own
    (the scale study): their records are the shared-lr gaps the lr study's supersede."""
    return [
        study
        for study in declared().values()
        if study.compare == "models" and study.rule == "shared_lr" and study_section.setup_points(study)
    ]


def shared_lr_gap_at(everything: Results, setup: lr_section.Setup) -> tuple[Difference | None, str | None]:
    """The shared-lr difference on the lr study's setup, from the study that measured it: the grid
    (its own text) or a shared-lr study (the scale study's poems); with that finding's key."""
    grid = only_runs_of(everything, None)
    llama = headline_of(grid, "llama")
    same = ("corpus", "train_tokens", "precision")
    if not llama.empty and all(llama[column].eq(setup.key[column]).all() for column in same):
        return headline_gap(grid), "gap_shared_lr_grid"
    for study in shared_lr_studies():
        for point, difference in study_section.shared_gaps(everything, study):
            if all(point.key[column] == setup.key[column] for column in same):
                return difference, f"gap_shared_lr_{setup.key['corpus']}"
    return None, None


def shared_lr_records(everything: Results) -> list[Finding]:
    """Each shared-lr study's gap at its largest text: a record of its own, which the lr study's
    finding on the same text supersedes."""
    records = []
    for study in shared_lr_studies():
        if not (gaps := study_section.shared_gaps(everything, study)):
            continue
        point, difference = max(gaps, key=lambda gap: int(gap[0].key["train_tokens"]))
        corpus, tokens, lr = str(point.key["corpus"]), f"{int(point.key['train_tokens']):,}", f"{study.shared_lr:g}"
        records.append(
            Finding(
                key=f"gap_shared_lr_{corpus}",
                question=_("Does the mini-LLaMA reach a lower best val?"),
                setup=_("{tokens} characters of {corpus}, both at lr {lr}").format(tokens=tokens, corpus=corpus, lr=lr),
                comparison=_("llama minus vanilla"),
                difference=difference,
                verdict=difference.sign,
                sentence=_("At one shared lr ({lr}) on {tokens} characters of {corpus}, {who}: {difference}.").format(
                    lr=lr,
                    tokens=tokens,
                    corpus=corpus,
                    who=gap_words(difference.sign),
                    difference=interval_text(difference),
                ),
                evidence=study.name,
            )
        )
    return records


def rope_at_best(everything: Results, setup: lr_section.Setup) -> Finding | None:
    """RoPE, the part that earned most at the shared lr, swapped at each model's own best lr."""
    at_best = {s.direction: s for s in lr_section.swaps(everything, setup) if s.part == "rope" and s.at_best}
    if set(at_best) != {"add", "remove"}:
        return None
    remove, add = at_best["remove"].difference, at_best["add"].difference
    needs = {
        1: _("the mini-LLaMA is worse without RoPE"),
        0: _("the mini-LLaMA loses nothing beyond noise without RoPE"),
        -1: _("the mini-LLaMA is better without RoPE"),
        None: _("RoPE's place in the mini-LLaMA is not testable (no noise estimate)"),
    }[remove.sign]
    gains = {
        -1: _("vanilla gains from it"),
        0: _("vanilla gains nothing beyond noise from it"),
        1: _("vanilla is worse with it"),
        None: _("vanilla's gain is not testable (no noise estimate)"),
    }[add.sign]
    return Finding(
        key="rope_at_best_lr",
        question=_("Which part earns the gap at each model's own lr?"),
        setup=_("{setup}, each model at its own best lr").format(setup=setup.label),
        comparison=_("with RoPE swapped minus without"),
        difference=remove,
        verdict=remove.sign,
        sentence=_("At each model's own lr on {setup}, {needs} ({remove}), and {gains} ({add}).").format(
            setup=setup.label, needs=needs, remove=interval_text(remove), gains=gains, add=interval_text(add)
        ),
        evidence="lr",
    )


def cosine(everything: Results, setup: lr_section.Setup) -> Finding | None:
    found = lr_section.schedules(everything, setup)
    if not found:
        return None
    schedule = found[0]
    return Finding(
        key=f"gap_{schedule.name}",
        question=_("Does the answer survive another schedule?"),
        setup=_("{setup}, {schedule} schedule").format(setup=setup.label, schedule=schedule.name),
        comparison=_("llama minus vanilla"),
        difference=schedule.gap,
        verdict=schedule.gap.sign,
        sentence=_(
            "With a {schedule} schedule on {setup}, each model at its best constant lr, {who}: {difference}."
        ).format(
            schedule=schedule.name,
            setup=setup.label,
            who=gap_words(schedule.gap.sign),
            difference=interval_text(schedule.gap),
        ),
        evidence="lr",
    )


def recipe(everything: Results, setup: lr_section.Setup) -> Finding | None:
    """The gap with another optimizer recipe, once each model's best lr with it has a worse lr on
    each side (before, the report says it is not testable yet, and it is no finding)."""
    found = [r for r in lr_section.recipes(everything, setup) if r.bracketed]
    if not found:
        return None
    other = found[0]
    return Finding(
        key="gap_recipe",
        question=_("Is the answer the architecture's, or the optimizer recipe's?"),
        setup=_("{setup}, optimizer {recipe}").format(setup=setup.label, recipe=recipe_words(other.name)),
        comparison=_("llama minus vanilla"),
        difference=other.gap,
        verdict=other.gap.sign,
        sentence=_(
            "With the optimizer recipe {recipe} on {setup}, each model at its own best lr with it, {who}: {difference}."
        ).format(
            recipe=recipe_words(other.name),
            setup=setup.label,
            who=gap_words(other.gap.sign),
            difference=interval_text(other.gap),
        ),
        evidence="lr",
    )


def parts_study_records(everything: Results, study: Study) -> list[tuple[str, Finding]]:
    """A parts study's answers, (part, record) per part and point that can be answered (a point
    still training leaves the others theirs): the same sentences as its section."""
    found = study_section.parts_points(everything, study)
    judged = study_section.parts_differences(everything, study, found)
    answered = study_section.parts_answered(study, found, judged)
    return [
        (
            part,
            Finding(
                key=f"{study.name}_{part}_{index}",
                question=_(study.question),
                setup=found[index].label,
                comparison=_("with the part minus without"),
                difference=said,
                verdict=said.sign,
                sentence=study_section.part_verdict(study, part, found[index], said),
                evidence=study.name,
            ),
        )
        for (index, part), said in answered.items()
    ]


def parts_at_full_size(everything: Results) -> dict[str, list[str]]:
    """Each part the parts studies have runs of -> their sentences on it (none yet: an empty list),
    which the Exams page says under the part's own exam."""
    said: dict[str, list[str]] = {}
    for study in declared().values():
        if study.compare != "parts":
            continue
        mine = everything.runs[everything.runs["group"] == study.name]
        for part in mine["part"].dropna().unique():
            said.setdefault(part, [])
        for part, record in parts_study_records(everything, study):
            said[part].append(record.sentence)
    return said


def declared_study_findings(everything: Results) -> list[Finding]:
    """The answers of the models studies rendered from their declarations (the size study's, a
    user's), once answered: the same sentences as their sections. A models study is one record,
    its difference the last point's (the largest size), and one per part it swaps. A parts study's
    records are the parts' own story (parts_findings)."""
    records = []
    for study in declared().values():
        # a twins study (the precision study) checks the other findings rather than adding one:
        # its section says whether any headline verdict moves with the axis
        # a study whose points are setups answers each on its own: the lr study's records are above,
        # and a shared-lr study's (the scale study's) is shared_lr_records', which the lr study's supersede
        if study.compare in ("twins", "parts") or study_section.per_setup(study) or study in shared_lr_studies():
            continue
        found = study_section.points(everything, study)
        swapped = swap_findings(everything, study, found)  # after the study's own answer, as its section
        judged = study_section.differences(everything, study, found)
        answered = study_section.answered_points(study, found, judged)
        if len(answered) < study_section.TREND_POINTS:
            records += swapped
            continue
        last = judged[("own" if study.rule == "own_lr" else "shared", answered[-1])]
        records.append(
            Finding(
                key=f"{study.name}_gap",
                question=_(study.question),
                setup=found[0].label,
                comparison=_("llama minus vanilla"),
                difference=last,
                verdict=last.sign,
                sentence=study_section.answer(study, found, judged),
                evidence=study.name,
            )
        )
        records += swapped
    return records


def swap_findings(everything: Results, study: Study, found: list[lr_section.Setup]) -> list[Finding]:
    """A models study's swapped parts (the size study's RoPE removed at each size), once every
    point has its run, or three have while a new point is still training: one record per part, its
    difference the part's change from the first point judged to the last."""
    swapped = study_section.swapped_at_rule_lr(everything, study, found)
    if not found or study.swap_points != "all":
        return []  # a trend is asked only of parts swapped at every point
    complete = not study_section.swaps_missing(study, found, swapped)
    records = []
    for part, direction in study_section.swaps_studied(study, found):
        trend = study_section.swap_trend(found, swapped, part, direction)
        judged = study_section.swap_points_judged(swapped, part, direction)
        if trend is None or not (complete or len(judged) >= study_section.TREND_POINTS):
            continue
        records.append(
            Finding(
                key=f"{study.name}_{part}_{direction}",
                question=_(study.question),
                setup=found[0].label,
                comparison=_("the part's effect at the last point minus at the first"),
                difference=trend,
                verdict=trend.sign,
                sentence=study_section.swap_answer(study, found, swapped, part, direction),
                evidence=study.name,
            )
        )
    return records


# The parts of 2024-26: the question each exam answers, what it holds fixed and what it compares
# (shown with _()); the sentence is exam_findings' finding, its figures the exam's own cells
EXAM_PARTS = {
    "qk_norm": (
        N_("What does QK-norm buy here, and at what cost?"),
        N_("the QK-norm exam: the mini-LLaMA without warmup, one run per lr, with QK-norm and without"),
        N_("the largest lr that trains, with QK-norm against without"),
        exam_findings.qk_norm_finding,
    ),
    "mla": (
        N_("What does MLA buy here, and at what cost?"),
        N_("the MLA exam: one run each of MHA, GQA, MQA and MLA at several latent widths"),
        N_("cache bytes per character and best val, MLA against GQA"),
        exam_findings.mla_finding,
    ),
    "moe": (
        N_("What does a mixture of experts buy here, and at what cost?"),
        N_("the experts' exam: the dense mini-LLaMA and its experts, top-1 and all on every token, equal steps"),
        N_("best val at equal work and at equal total parameters, experts against dense"),
        exam_findings.moe_finding,
    ),
}


def exam_part_findings(data: Results) -> dict[str, Finding]:
    """Per part of 2024-26 whose exam has run: what it buys here, at what cost (one record each,
    keyed by part; a part whose exam has not run has none)."""
    records = {}
    for part, (question, setup, comparison, finding) in EXAM_PARTS.items():
        clause = finding(data)
        if clause is None:
            continue
        records[part] = Finding(
            key=f"exam_{part}",
            question=_(question),
            setup=_(setup),
            comparison=_(comparison),
            difference=None,  # one run per cell: the exam's figures, no seed noise to judge them by
            verdict=None,
            sentence=exam_findings.sentence(clause),
            evidence="exams",
        )
    return records


def parts_findings(everything: Results, exams: dict[str, Finding]) -> list[Finding]:
    """The parts of 2024-26, one story per part, in the chapter's order: what its exam found it
    buys and at what cost (`exams`, exam_part_findings'), then its loss at full size, study by
    study and point by point (parts_study_records')."""
    full_size = [
        (part, record)
        for study in declared().values()
        if study.compare == "parts"
        for part, record in parts_study_records(everything, study)
    ]
    story = []
    for part in exam_findings.in_part_order([*exams, *(part for part, _record in full_size)]):
        if part in exams:
            story.append(exams[part])
        story += [record for mine, record in full_size if mine == part]
    return story


def findings(everything: Results) -> list[Finding]:
    """Every record, in the order a learner reads them: the chapter's comparison, then what each
    model at its own lr changes, then which part, which schedule and which optimizer recipe, then
    what model size changes, then the parts of 2024-26 part by part. A shared-lr finding that the lr study answers on the same text is
    marked superseded by that answer."""
    grid = only_runs_of(everything, None)
    records = []
    if protocol_of(grid).untestable_reason is None:  # toy runs' numbers are never findings
        records = [f for f in (pace(grid), shared_lr_gap(grid), memorises(grid)) if f is not None]
    records += shared_lr_records(everything)
    later = []
    for setup in sorted(lr_section.setups(everything), key=lambda s: int(s.key["train_tokens"])):
        shared, shared_key = shared_lr_gap_at(everything, setup)
        other_recipe = recipe(everything, setup)
        # where another recipe has its own answer, this one states its scope: the default recipe
        if (own := own_lr_gap(setup, shared, shared_key, scoped=other_recipe is not None)) is None:
            continue
        later.append(own)
        if shared_key is not None and shared is not None and own.verdict != shared.sign:
            records = [Finding(**{**vars(f), "superseded_by": own.key}) if f.key == shared_key else f for f in records]
        found = (rope_at_best(everything, setup), cosine(everything, setup), other_recipe)
        later += [f for f in found if f is not None]
    # the exams' cells have the grid's sizes (workflow: model_size_arguments): toy with a toy grid
    exams = exam_part_findings(grid) if protocol_of(grid).untestable_reason is None else {}
    return records + later + declared_study_findings(everything) + parts_findings(everything, exams)


def current(records: list[Finding]) -> list[Finding]:
    """The findings no later study contradicts: the numbered list."""
    return [f for f in records if f.superseded_by is None]


def numbered(records: list[Finding], link_prefix: str | None = "") -> str:
    """The numbered list, each finding with a link to its evidence (link_prefix + the anchor:
    'docs/results/report.md' from a README, '' inside the report; None: no link, as on a
    dashboard page, which shows the evidence on its own pages)."""
    lines = [
        _("{number}. {sentence} ([evidence]({link}))").format(
            number=number, sentence=f.sentence, link=link_prefix + anchor(f.evidence)
        )
        if link_prefix is not None
        else f"{number}. {f.sentence}"
        for number, f in enumerate(current(records), start=1)
    ]
    return "\n".join(lines)


def findings_block(everything: Results, link_prefix: str | None = "", evidence: set[str] | None = None) -> str | None:
    """The numbered list, with how to read an interval; None before any finding. `evidence`: only
    the findings whose evidence is one of these sections (the Studies page shows the studies')."""
    records = [f for f in findings(everything) if evidence is None or f.evidence in evidence]
    if not current(records):
        return None
    return "\n\n".join([numbered(records, link_prefix), _(INTERVALS)])


FOUND = N_("What this lab found")
INTERVALS = N_(
    "A difference is written as mean [low, high]: its 95% interval, from the seed-to-seed noise of its setup; "
    "where several are judged together, corrected for their number (Holm). Negative: the mini-LLaMA is lower."
)
