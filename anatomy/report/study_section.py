"""A study's section of the report, from its declaration (workflow/studies.yaml): the one analysis
of a declared study. `compare: models` compares the two models at several points of an axis (here);
`compare: parts` each part added to the mini-LLaMA (here, below); `compare: twins` each run against
its twin of another axis value (anatomy/report/twins_section.py, the precision study's).

A point is one value of the study's axis (the size study's depth and width). Each point is
analysed exactly as the lr study analyses its setups (anatomy/report/lr_section.py: each model's
curve over lr, its best lr, whether a worse lr was tried on each side). At each point the
difference is the mini-LLaMA minus vanilla, each at its own best lr (rule own_lr), and at the
declared shared lr where both trained at it. Every point's differences are one table, so they are
judged together (Holm). A study whose points are setups and whose models each sweep lr (the lr study's texts, sizes of
text and precisions) has no trend to answer: each setup is answered on its own, by lr_section.py's
text. A study at one shared lr (the scale study) compares the models at that lr at each point, says
what the other lrs its runs tried show, and yields to a study that answers the same text at each
model's own lr. Its declared measures and hypothesis come from anatomy/report/study_measures.py.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from anatomy.language import N_, _, ngettext, pgettext
from anatomy.report import colours, lr_section
from anatomy.report import study_measures
from anatomy.report.exam_findings import PART_NAMES, in_part_order, part_name, share, shares
from anatomy.report.twins_section import twins_section
from anatomy.report.uncertainty import (
    SETUP,
    Difference,
    change,
    compare,
    interval_text,
    judge,
    judge_one,
    noise_of,
    noise_text,
)
from anatomy.report.wording import fmt, listed, md_table, per_seed, seed_list, sentences
from anatomy.results.reader import MODEL_FIELDS, Results
from anatomy.results.studies import Study, declared

TREND_POINTS = 3  # the fewest points that show a trend (grows, shrinks or stays level)


def point_columns(study: Study) -> tuple[str, ...]:
    """The axis columns the lr study's setups do not already tell apart."""
    return tuple(column for column in study.axis if column not in SETUP)


def per_setup(study: Study) -> bool:
    """Whether the study's points are setups (the text, its size, the precision) and each model
    sweeps lr at each, as the lr study's do: their losses share no scale, so each point is answered
    on its own, with its figure of best val against lr, rather than as a trend along the axis."""
    return study.compare == "models" and study.rule == "own_lr" and not point_columns(study)


def point_label(study: Study, point: lr_section.Setup) -> str:
    """'4×128' (the axis values, in the declared order), or the setup's label if the axis is the
    setup itself (text, size of text, precision)."""
    columns = point_columns(study)
    if not columns:
        return point.label
    return "×".join(f"{point.key[c]:g}" if isinstance(point.key[c], float) else str(point.key[c]) for c in columns)


def points(everything: Results, study: Study) -> list[lr_section.Setup]:
    """Each point the study trained (compare: models), in the order of its axis values, with both
    models' curves over lr there."""
    columns = point_columns(study)
    found = lr_section.setups(everything, group=study.name, points=columns)
    return sorted(found, key=lambda point: tuple(point.key[column] for column in study.axis))


def params_of(point: lr_section.Setup, n_parts: int) -> int | None:
    curve = point.curves.get(n_parts)
    if curve is None or curve.runs["params"].isna().all():
        return None
    return int(curve.runs["params"].max())


def shared_lr_runs(study: Study, point: lr_section.Setup, n_parts: int) -> pd.DataFrame | None:
    curve = point.curves.get(n_parts)
    if study.shared_lr is None or curve is None:
        return None
    # the study's own runs: another study's run of the same seed at that lr would count twice
    runs = curve.at(study.shared_lr)
    runs = runs[runs["group"] == study.name]
    return None if runs.empty else runs


def differences(everything: Results, study: Study, found: list[lr_section.Setup]) -> dict[tuple[str, int], Difference]:
    """Llama minus vanilla at each point: at each model's own best lr ("own", as lr_section.setups
    measured it) and at the shared lr ("shared"), every point's in one table, judged together. A
    point whose best lr is the edge of the lrs tried has no answer yet: its own-lr difference is
    judged alone, so a size still being swept does not widen the others' intervals."""
    raw, alone = {}, {}
    for index, point in enumerate(found):
        if study.rule == "own_lr" and point.difference is not None:
            bracketed = all(curve.bracketed for curve in point.curves.values())
            (raw if bracketed else alone)[("own", index)] = point.difference
        if (llama := shared_lr_runs(study, point, 5)) is not None and (
            vanilla := shared_lr_runs(study, point, 0)
        ) is not None:
            raw[("shared", index)] = compare(everything.noise, llama, vanilla)
    return {**judge(raw), **{key: judge_one(said) for key, said in alone.items()}}


def shared_gaps(everything: Results, study: Study) -> list[tuple[lr_section.Setup, Difference]]:
    """Each point's llama minus vanilla at the shared lr, judged with the study's table (the
    findings' records of a shared-lr study); [] for a study with no shared lr."""
    if study.compare != "models" or study.shared_lr is None or per_setup(study):
        return []
    found = points(everything, study)
    judged = differences(everything, study, found)
    return [(point, judged[("shared", index)]) for index, point in enumerate(found) if ("shared", index) in judged]


def best_cell(curve: lr_section.Curve | None) -> str:
    """'4.312 at lr 0.004' ('edge' where no worse lr was tried on one side), or '-'."""
    if curve is None or curve.best_lr is None:
        return "-"
    cell = _("{best} at lr {lr}").format(best=fmt(curve.best_val), lr=f"{curve.best_lr:g}")
    return cell if curve.bracketed else _("{cell} (edge)").format(cell=cell)


def rule_lr(study: Study, curve: lr_section.Curve | None) -> float | None:
    """The lr a model is judged at under the study's rule: its own best, or the shared one."""
    if study.rule == "shared_lr":
        return study.shared_lr
    return None if curve is None else curve.best_lr


def at_rule_lr(study: Study, point: lr_section.Setup, n_parts: int) -> pd.DataFrame:
    """A model's finished runs at its lr under the study's rule (empty where it has none): at the
    shared lr, the study's own (shared_lr_runs)."""
    curve = point.curves.get(n_parts)
    if study.rule == "shared_lr":
        runs = shared_lr_runs(study, point, n_parts)
        return pd.DataFrame() if runs is None else runs
    return curve.at(curve.best_lr) if curve is not None and curve.best_lr is not None else pd.DataFrame()


def rule_key(study: Study) -> str:
    """The key of the study's rule in `differences`: "own" or "shared"."""
    return "own" if study.rule == "own_lr" else "shared"


def point_noise(everything: Results, point: lr_section.Setup):
    """The pooled seed noise of the point's setup."""
    return noise_of(everything.noise, pd.DataFrame([point.key]))


def setup_points(study: Study) -> bool:
    """Whether the points are setups (text, size of text, precision): each has a noise of its own."""
    return not point_columns(study)


def study_table(
    everything: Results, study: Study, found: list[lr_section.Setup], judged: dict[tuple[str, int], Difference]
) -> str:
    rows = []
    for index, point in enumerate(found):
        params = [params_of(point, n_parts) for n_parts in lr_section.MODELS]
        row = [point_label(study, point), " / ".join(f"{p:,}" if p is not None else "-" for p in params)]
        if study.rule == "own_lr":
            row += [best_cell(point.curves.get(0)), best_cell(point.curves.get(5))]
            row.append(interval_text(judged[("own", index)]) if ("own", index) in judged else "-")
        vanilla, llama = (at_rule_lr(study, point, n_parts) for n_parts in lr_section.MODELS)
        if study.rule == "shared_lr":  # each seed's best val at the shared lr
            row += [per_seed(runs, "best_val_loss") if not runs.empty else "-" for runs in (vanilla, llama)]
        for measure in study.measures:
            both = not vanilla.empty and not llama.empty
            row.append(study_measures.measure_cell(everything, measure, vanilla, llama) if both else "-")
        if study.shared_lr is not None:
            row.append(interval_text(judged[("shared", index)]) if ("shared", index) in judged else "-")
        if each_setup_alone(study):
            row.append(noise_text(point_noise(everything, point)))
        rows.append(row)
    header = [" × ".join(point_columns(study)) or _("setup"), _("parameters (vanilla / mini-LLaMA)")]
    if study.rule == "own_lr":
        header += [
            _("vanilla: best val"),
            _("mini-LLaMA: best val"),
            _("llama minus vanilla, each at its best lr"),
        ]
    else:
        lr = f"{study.shared_lr:g}"
        header += [
            _("vanilla: best val at lr {lr}").format(lr=lr),
            _("mini-LLaMA: best val at lr {lr}").format(lr=lr),
        ]
    header += [_(study_measures.HEADINGS[measure]) for measure in study.measures]
    if study.shared_lr is not None:
        header.append(_("llama minus vanilla at lr {lr}").format(lr=f"{study.shared_lr:g}"))
    if each_setup_alone(study):
        header.append(_("noise of the setup"))
    return md_table(header, rows)


def shared_pair(study: Study, point: lr_section.Setup) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Vanilla's and the mini-LLaMA's finished runs at the shared lr (empty where none)."""
    return tuple(at_rule_lr(study, point, n_parts) for n_parts in lr_section.MODELS)


def missing(study: Study, found: list[lr_section.Setup], judged: dict[tuple[str, int], Difference]) -> list[str]:
    """What the answer still waits for, point by point: a model with no finished run (at the shared
    lr, under that rule), a best lr at the edge of the lrs tried (own_lr), a difference with no noise
    estimate (no second seed)."""
    rule = rule_key(study)
    waiting = []
    for index, point in enumerate(found):
        label = point_label(study, point)
        edge = [curve.name for curve in point.curves.values() if curve.best_lr is not None and not curve.bracketed]
        said = judged.get((rule, index))
        if said is None and rule == "shared" and len(point.curves) == 2:
            waiting.append(
                _("{point}: a model has no finished run at lr {lr}").format(point=label, lr=f"{study.shared_lr:g}")
            )
        elif len(point.curves) < 2 or said is None:
            waiting.append(_("{point}: a model has no finished run").format(point=label))
        elif rule == "own" and edge:
            waiting.append(
                _("{point}: the best lr of {models} is the edge of the lrs tried").format(
                    point=label, models=listed(edge)
                )
            )
        elif not said.testable:
            waiting.append(_("{point}: no noise estimate (no second seed yet)").format(point=label))
    if len(found) < TREND_POINTS and not setup_points(study):  # setups are each a question of their own
        waiting.append(_("points still to train: {n}").format(n=TREND_POINTS - len(found)))
    return waiting


def each_setup_alone(study: Study) -> bool:
    """Whether each point is a question of its own (one shared lr over texts): the answer then says
    what the points that can be judged show, and lists the rest."""
    return setup_points(study) and study.rule == "shared_lr"


def answered_points(
    study: Study, found: list[lr_section.Setup], judged: dict[tuple[str, int], Difference]
) -> list[int]:
    """The points whose difference answers: testable, and (own_lr) with both best lrs inside the
    lrs tried."""
    rule = rule_key(study)
    return [
        index
        for index, point in enumerate(found)
        if (rule, index) in judged
        and judged[(rule, index)].testable
        and (rule == "shared" or all(curve.bracketed for curve in point.curves.values()))
    ]


def answer(study: Study, found: list[lr_section.Setup], judged: dict[tuple[str, int], Difference]) -> str:
    """The answer over the points that can give it, and what the others still wait for; or, with
    too few such points (three for a trend, one where each text is a question of its own), what the
    answer waits for."""
    waiting = missing(study, found, judged)
    answered = answered_points(study, found, judged)
    if len(answered) < (1 if each_setup_alone(study) else TREND_POINTS):
        if each_setup_alone(study):
            return _("**Not answered yet.** Still missing: {missing}.").format(missing="; ".join(waiting))
        return _(
            "**Not answered yet.** The answer needs {n} points, each with both models finished, an interior best lr "
            "for each where each is at its own, and a second seed; still missing: {missing}."
        ).format(n=TREND_POINTS, missing="; ".join(waiting))
    rule = rule_key(study)
    said = answer_over(
        study, [found[i] for i in answered], {(rule, n): judged[(rule, i)] for n, i in enumerate(answered)}
    )
    if waiting:
        said = sentences([said, _("Not judged yet: {missing}.").format(missing="; ".join(waiting))])
    return said


def answer_over(study: Study, found: list[lr_section.Setup], judged: dict[tuple[str, int], Difference]) -> str:
    """The answer over points that each have a testable difference."""
    rule = rule_key(study)
    labels = [point_label(study, point) for point in found]
    by_sign = {
        sign: [label for index, label in enumerate(labels) if judged[(rule, index)].sign == sign] for sign in (-1, 0, 1)
    }
    verdicts = [
        _(words).format(points=listed(by_sign[sign]))
        for sign, words in (
            (-1, N_("the mini-LLaMA is lower beyond noise at {points}")),
            (0, N_("the two are level within noise at {points}")),
            (1, N_("vanilla is lower beyond noise at {points}")),
        )
        if by_sign[sign]
    ]
    gaps = listed(f"{label}: {interval_text(judged[(rule, index)])}" for index, label in enumerate(labels))
    setup = shared_setup(study, found)
    if rule == "own":
        said = (
            _("At each model's own best lr on {setup}, llama minus vanilla: {gaps}. So {verdicts}.")
            if setup
            else _("At each model's own best lr, llama minus vanilla: {gaps}. So {verdicts}.")
        )
    else:
        said = (
            _("At lr {lr} on {setup}, llama minus vanilla: {gaps}. So {verdicts}.")
            if setup
            else _("At lr {lr}, llama minus vanilla: {gaps}. So {verdicts}.")
        )
    return said.format(gaps=gaps, verdicts="; ".join(verdicts), lr=f"{study.shared_lr:g}", setup=setup)


def shared_setup(study: Study, found: list[lr_section.Setup]) -> str | None:
    """The text, its size and precision every point shares, where the axis is the model's own
    (size): an answer read on its own, as in the numbered findings, must say where it holds. None
    where the points are setups: each point's label names its own."""
    return found[0].label if found and point_columns(study) else None


# ---------------------------------------------------------------------------------------------
# compare: models, with a part swapped at a point (the size study's stage 3, the scale study's
# stage 2): a run tagged `part` at its model's lr under the study's rule there, minus that model;
# every swap at every point in one table (Holm). Declared swap_points all: each part is expected at
# every point, and its cost from the first point to the last answers whether its share holds as
# the axis grows. swap_points last: the parts are swapped at the last point only, answered there
# together.


def swapped_at_rule_lr(everything: Results, study: Study, found: list[lr_section.Setup]) -> dict:
    """(point index, part, direction) -> the swapped model minus the plain one, both at the plain
    model's lr under the study's rule at that point, every point's judged together."""
    raw = {}
    for index in swapped_where(study, found):  # one family: the swaps the answer speaks of
        point = found[index]
        for (part, direction, lr), said in lr_section.swap_differences(everything, point).items():
            if lr == rule_lr(study, point.curves.get(0 if direction == "add" else 5)):
                raw[(index, part, direction)] = said
    return judge(raw)


def swaps_studied(study: Study, found: list[lr_section.Setup]) -> list[tuple[str, str]]:
    """Every (part, direction) the study swaps at any point, in a fixed order."""
    return sorted({pair for point in found for pair in lr_section.swapped_parts(point)})


def swapped_where(study: Study, found: list[lr_section.Setup]) -> list[int]:
    """The points the study's swaps belong at (its declared swap_points)."""
    return list(range(len(found))) if study.swap_points == "all" else list(range(len(found)))[-1:]


def swaps_missing(study: Study, found: list[lr_section.Setup], judged: dict) -> list[str]:
    """Each point where a swap that belongs there cannot be judged: its plain model or the swapped
    run has no finished run at the plain model's lr there, or no second seed measures the noise."""
    waiting = []
    for part, direction in swaps_studied(study, found):
        for index in swapped_where(study, found):
            point, n_parts = found[index], 0 if direction == "add" else 5
            plain = point.curves.get(n_parts)
            lr = rule_lr(study, plain)
            said = judged.get((index, part, direction))
            if said is not None:
                if not said.testable:
                    waiting.append(
                        _("{point}: no noise estimate (no second seed yet)").format(point=point_label(study, point))
                    )
            elif plain is None or lr is None or plain.at(lr).empty:
                waiting.append(
                    _("{point}: {model} has no finished run to set {swap} against").format(
                        point=point_label(study, point),
                        model=lr_section.MODELS[n_parts],
                        swap=swap_name(part, direction),
                    )
                )
            else:
                waiting.append(
                    _("{point}: no finished run of {swap} at the model's lr {lr}").format(
                        point=point_label(study, point), swap=swap_name(part, direction), lr=f"{lr:g}"
                    )
                )
    return list(dict.fromkeys(waiting))


def swap_name(part: str, direction: str) -> str:
    """'the mini-LLaMA without RoPE', 'vanilla with RoPE'."""
    template = N_("vanilla with {part}") if direction == "add" else N_("the mini-LLaMA without {part}")
    return _(template).format(part=_(PART_NAMES.get(part, part)))


SHARE_VERDICTS = {
    -1: N_("it shrinks beyond noise"),
    0: N_("it holds within noise"),
    1: N_("it grows beyond noise"),
}


def swap_points_judged(judged: dict, part: str, direction: str) -> list[int]:
    """The points where a swap's difference is judged and testable, in order."""
    return sorted(i for (i, p, d), said in judged.items() if (p, d) == (part, direction) and said.testable)


def swap_trend(found: list[lr_section.Setup], judged: dict, part: str, direction: str) -> Difference | None:
    """The part's effect at the last point judged minus at the first, judged alone; None until two are."""
    at = swap_points_judged(judged, part, direction)
    if len(at) < 2:
        return None
    return judge_one(change(judged[(at[-1], part, direction)], judged[(at[0], part, direction)]))


# (rule, direction, whether the points share a setup) -> a swap's effect at each point
SWAP_TEMPLATES = {
    ("own_lr", "add", False): N_(
        "Vanilla with {part} minus vanilla, each at vanilla's best lr at each point: {effects}."
    ),
    ("own_lr", "add", True): N_(
        "Vanilla with {part} minus vanilla, each at vanilla's best lr at each point on {setup}: {effects}."
    ),
    ("own_lr", "remove", False): N_(
        "The mini-LLaMA without {part} minus the mini-LLaMA, each at its best lr at each point: {effects}."
    ),
    ("own_lr", "remove", True): N_(
        "The mini-LLaMA without {part} minus the mini-LLaMA, each at its best lr at each point on {setup}: {effects}."
    ),
    ("shared_lr", "add", False): N_("Vanilla with {part} minus vanilla, at lr {lr} at each point: {effects}."),
    ("shared_lr", "add", True): N_(
        "Vanilla with {part} minus vanilla, at lr {lr} at each point on {setup}: {effects}."
    ),
    ("shared_lr", "remove", False): N_(
        "The mini-LLaMA without {part} minus the mini-LLaMA, at lr {lr} at each point: {effects}."
    ),
    ("shared_lr", "remove", True): N_(
        "The mini-LLaMA without {part} minus the mini-LLaMA, at lr {lr} at each point on {setup}: {effects}."
    ),
}


def swap_answer(study: Study, found: list[lr_section.Setup], judged: dict, part: str, direction: str) -> str:
    """A part swapped at several points: its effect at each, and whether its size holds from the
    first point to the last (the cost is the sign a learner reads: + is worse without the part)."""
    effects = listed(
        f"{point_label(study, point)}: {interval_text(judged[(index, part, direction)])}"
        for index, point in enumerate(found)
        if (index, part, direction) in judged
    )
    setup = shared_setup(study, found)
    template = SWAP_TEMPLATES[(study.rule, direction, setup is not None)]
    said = [
        _(template).format(part=_(PART_NAMES.get(part, part)), effects=effects, lr=f"{study.shared_lr:g}", setup=setup)
    ]
    trend = swap_trend(found, judged, part, direction)
    if trend is not None and trend.sign is not None:
        # removing a part: its effect is its cost; adding one: its gain is minus its effect
        share = trend.sign if direction == "remove" else -trend.sign
        at = swap_points_judged(judged, part, direction)
        said.append(
            _("From {first} to {last} that changes by {change}: {verdict}.").format(
                first=point_label(study, found[at[0]]),
                last=point_label(study, found[at[-1]]),
                change=interval_text(trend),
                verdict=_(SHARE_VERDICTS[share]),
            )
        )
    return sentences(said)


def one_point_answer(study: Study, point: lr_section.Setup, judged: dict[tuple[str, str], Difference]) -> str | None:
    """The swaps of one point, judged together: those beyond noise, each with its interval, and how
    many stay within it."""
    if not judged:
        return None
    beyond = [f"{swap_name(*pair)}: Δ {interval_text(said)}" for pair, said in judged.items() if said.sign]
    within = sum(said.sign == 0 for said in judged.values())
    values = dict(point=point_label(study, point), n=len(judged), beyond=listed(beyond), within=within)
    if beyond:
        said = ngettext(
            "At {point}, {n} swap is judged against the noise of its setup; beyond it: {beyond}.",
            "At {point}, {n} swaps are judged together against the noise of their setup; beyond it: {beyond}.",
            len(judged),
        )
    else:
        said = ngettext(
            "At {point}, {n} swap is judged against the noise of its setup: it stays within it.",
            "At {point}, {n} swaps are judged together against the noise of their setup: none moves beyond it.",
            len(judged),
        )
    parts = [said.format(**values)]
    if beyond and within:
        parts.append(
            ngettext(
                "{within} of the {n} stays within noise.", "{within} of the {n} stay within noise.", within
            ).format(**values)
        )
    return sentences(parts)


def swaps_text(everything: Results, study: Study, found: list[lr_section.Setup]) -> str | None:
    """The swaps' table and answer, or None where the study swaps no part."""
    studied = swaps_studied(study, found)
    if not studied:
        return None
    judged = swapped_at_rule_lr(everything, study, found)
    rows = [
        [
            point_label(study, point),
            swap_name(part, direction),
            f"{rule_lr(study, point.curves[0 if direction == 'add' else 5]):g}",
            interval_text(judged[(index, part, direction)]),
        ]
        for part, direction in studied
        for index, point in enumerate(found)
        if (index, part, direction) in judged
    ]
    header = [
        " × ".join(point_columns(study)) or _("setup"),
        _("run"),
        _("at lr (the model's best)") if study.rule == "own_lr" else _("at lr"),
        _("with the part swapped minus without (95% interval)"),
    ]
    parts = [md_table(header, rows)] if rows else []
    waiting = swaps_missing(study, found, judged)
    if study.swap_points == "all":  # each part's trend over the points judged, once two are
        trends = [pair for pair in studied if swap_trend(found, judged, *pair) is not None]
        if not trends:
            parts.append(_("**Not answered yet.** Still missing: {missing}.").format(missing="; ".join(waiting)))
            return "\n\n".join(parts)
        parts += [swap_answer(study, found, judged, part, direction) for part, direction in trends]
    else:  # the swaps of the last point that can be judged
        testable = {(part, direction): said for (_at, part, direction), said in judged.items() if said.testable}
        parts.append(one_point_answer(study, found[-1], testable))
    if waiting:
        parts.append(_("Not judged yet: {missing}.").format(missing="; ".join(waiting)))
    return "\n\n".join(part for part in parts if part)


# ---------------------------------------------------------------------------------------------
# rule shared_lr: the pair at the other lrs the study's own runs tried, and the study that answers
# the same text at each model's own lr, which this study's sentences then yield to


def other_lrs_text(
    everything: Results, study: Study, found: list[lr_section.Setup], judged: dict[tuple[str, int], Difference]
) -> str | None:
    """Llama minus vanilla at every other lr both models ran in this study, at each point, judged
    alone against the setup's noise, beside the table's difference at the shared lr."""
    said = []
    for index, point in enumerate(found):
        vanilla, llama = point.curves.get(0), point.curves.get(5)
        if vanilla is None or llama is None or study.shared_lr is None:
            continue
        mine = [curve.runs[curve.runs["group"] == study.name] for curve in (vanilla, llama)]
        for lr in sorted(set(mine[0]["lr"]) & set(mine[1]["lr"]) - {study.shared_lr}):
            at_lr = (llama.at(lr), vanilla.at(lr))
            seeds = set(at_lr[0]["seed"]) & set(at_lr[1]["seed"])
            if not seeds or ("shared", index) not in judged:  # a difference needs a seed both have
                continue
            difference = judge_one(compare(everything.noise, *at_lr))
            said.append(
                _(
                    "At lr {lr} on {point}: llama minus vanilla {difference} (seeds {seeds}), against {shared} at lr "
                    "{shared_lr}."
                ).format(
                    lr=f"{lr:g}",
                    point=point_label(study, point),
                    difference=interval_text(difference),
                    seeds=seed_list(seeds),
                    shared=interval_text(judged[("shared", index)]),
                    shared_lr=f"{study.shared_lr:g}",
                )
            )
    return sentences(said) or None


BETTER_LR_VERDICTS = {
    None: N_("with no noise estimate for this setup to judge it by"),
    -1: N_("the mini-LLaMA is still lower, beyond noise: the gap is not only the shared lr"),
    1: N_("vanilla is lower, beyond noise: the gap came from the shared lr"),
    0: N_("within noise, so the two models are level: the gap came from the shared lr"),
}


def better_lr_text(everything: Results, study: Study, found: list[lr_section.Setup]) -> str | None:
    """Where no other study answers it, each model at the better of the lrs its runs tried at a
    point, if both tried more than one: is the gap at the shared lr only the lr?"""
    said = []
    for point in found:
        curves = [point.curves.get(n_parts) for n_parts in lr_section.MODELS]
        if point.difference is None or any(curve is None or len(curve.points) < 2 for curve in curves):
            continue
        vanilla, llama = curves
        difference = judge_one(point.difference)
        said.append(
            _(
                "At {point}, each model at the better of the lrs it tried: vanilla {vanilla} at lr {vanilla_lr}, "
                "mini-LLaMA {llama} at lr {llama_lr}; llama minus vanilla {difference}: {judged}."
            ).format(
                point=point_label(study, point),
                vanilla=fmt(vanilla.best_val),
                vanilla_lr=f"{vanilla.best_lr:g}",
                llama=fmt(llama.best_val),
                llama_lr=f"{llama.best_lr:g}",
                difference=interval_text(difference),
                judged=_(BETTER_LR_VERDICTS[difference.sign]),
            )
        )
        if edge := [curve.name for curve in curves if not curve.bracketed]:
            said.append(
                _("For {models}, the best lr is the edge of the lrs tried: another might do better.").format(
                    models=listed(edge)
                )
            )
    return sentences(said) or None


def answered_better_by(everything: Results, study: Study, found: list[lr_section.Setup]) -> str | None:
    """Where a study of each model at its own lr (per_setup) has an answer on one of this study's
    points (both optima bracketed), the one sentence that says its answer is the better one, so
    that no shared-lr sentence here reads as the last word; None where none has."""
    keys = [{column: point.key[column] for column in SETUP} for point in found]
    for other in declared().values():
        if other.name == study.name or not per_setup(other):
            continue
        for setup in lr_section.setups(everything, group=other.name):
            answered = setup.verdict is not None and all(curve.bracketed for curve in setup.curves.values())
            if answered and {column: setup.key[column] for column in SETUP} in keys:
                return _(
                    'These sentences hold at the shared lr only: the section "{question}", each model at its own '
                    "best lr on {setup}, answers this question better."
                ).format(question=_(other.question), setup=setup.label)
    return None


HOW_TO_READ = N_(
    "Each model's best lr is the one with the lowest mean over the seeds that every lr it tried has finished (a "
    "second seed at one lr alone would favour or handicap that lr); each best val is its mean over the seeds "
    "finished at that lr. Each difference is over the seeds both sides have finished (while a seed is missing on "
    "one side it can differ from the two best vals' difference). Each interval is 95%, from the per-run sd pooled "
    "over the setup's two-seed trainings, and the table's differences are judged together (Holm), except any "
    "marked (edge): its best lr can still move, so it is judged alone and does not count toward the answer yet."
)


HOW_TO_READ_SHARED = N_(
    "Best val in nats per character, seed by seed (42 / 7). Each interval is 95%, from the per-run sd pooled over "
    "the setup's two-seed trainings, and the table's differences are judged together (Holm)."
)


# ---------------------------------------------------------------------------------------------
# compare: parts. At each point, the plain mini-LLaMA and each part added to it (a run tagged
# `part`) are curves over lr of their own; each is judged at its own best lr (rule own_lr) or at
# the shared lr, every part at every point minus the plain model, all in one table (Holm).


@dataclass
class PartsPoint:
    key: dict  # the axis values
    label: str
    curves: dict[str | None, lr_section.Curve]  # part (None: the plain model) -> its curve over lr


# what one curve's runs share besides the model: the text, its size, the number format and the
# training's shape (each run's lr and seed are its own; the grid's runs predate corpus_digest)
SAME_TRAINING = (*SETUP, "schedule", "warmup_steps", "optimizer")
MODEL_SIZE = ("n_layer", "d_model", "n_head", "ctx_len")


def same_settings(runs: pd.DataFrame, models: pd.DataFrame, at_point: pd.DataFrame) -> pd.DataFrame:
    """Every run, whichever study trained it, with one of `models`' model settings and the
    training settings of the study's runs at the point (one training, one run: the plain
    mini-LLaMA at lr 1e-3 on the default corpus is the lr study's, QK-norm at 3e-4 the grid's)."""
    training = [column for column in SAME_TRAINING if column not in MODEL_FIELDS]  # vocab_size is both
    settings = models[sorted(MODEL_FIELDS)].drop_duplicates().merge(at_point[training].drop_duplicates(), how="cross")
    return runs.merge(settings, on=list(settings.columns))


def parts_points(everything: Results, study: Study) -> list[PartsPoint]:
    runs = everything.runs
    mine = runs[runs["group"] == study.name]
    first_steps = everything.metrics.groupby("run_id")["step"].min()
    found = []
    for values, at_point in mine.groupby(list(study.axis), dropna=False):
        key = dict(zip(study.axis, values))
        with_part = at_point[at_point["part"].notna()]
        # the plain model: the study's own plain runs, and the runs its part runs name as baseline,
        # of the part runs' size (the quick config narrows the study's runs, not a baseline that
        # sets its own size)
        plain = pd.concat([at_point[at_point["part"].isna()], runs[runs["experiment"].isin(with_part["baseline"])]])
        if not with_part.empty:
            plain = plain.merge(with_part[list(MODEL_SIZE)].drop_duplicates(), on=list(MODEL_SIZE))
        curves = {}
        for part in [None, *in_part_order(at_point["part"].dropna())]:
            models = plain if part is None else at_point[at_point["part"] == part]
            variant = same_settings(runs, models, at_point)
            curves[part] = lr_section.Curve(5, variant, lr_section.points_of(variant, first_steps))
        label = (
            lr_section.Setup(key, {}, None).label  # "64,000 characters of poems (fp32)"
            if {"corpus", "train_tokens", "precision"} <= set(key)
            else " ".join(f"{value:,}" if isinstance(value, int) else str(value) for value in key.values())
        )
        found.append(PartsPoint(key, label, curves))
    return found


def parts_lr_points(everything: Results, study: Study) -> pd.DataFrame:
    """The parts' curves as the lr figure draws them (lr_section.lr_points' columns, `model` the
    part's name): at each point, best val over lr for the plain model and each part."""
    rows = []
    for point in parts_points(everything, study):
        for part, curve in point.curves.items():
            for row in curve.points.to_dict("records"):
                rows.append({"setup": point.label, "model": part_name(part), **row, "best": row["lr"] == curve.best_lr})
    return pd.DataFrame(rows, columns=lr_section.LR_POINT_COLUMNS)


def parts_colours(everything: Results, study: Study) -> dict[str, str]:
    """Each curve's colour, by the name the figure shows: the plain model the mini-LLaMA's, each
    part its role's (colours.NEW_PARTS; a part of your own a spare)."""
    mine = everything.runs[everything.runs["group"] == study.name]
    found = {part_name(None): colours.LLAMA}
    for part in in_part_order(mine["part"].dropna()):
        found[part_name(part)] = colours.role_colour(f"add:{part}") or colours.spare(part, set(found.values()))
    return found


def parts_lr(study: Study, curve: lr_section.Curve) -> float | None:
    return curve.best_lr if study.rule == "own_lr" else study.shared_lr


def parts_differences(everything: Results, study: Study, found: list[PartsPoint]) -> dict[tuple[int, str], Difference]:
    """Each part minus the plain model at each point, each at its lr under the study's rule, judged
    together. Under own_lr a part whose best lr (or the plain model's) is the edge of the lrs tried
    has no answer yet: judged alone, as a models study's unswept point, so that it does not widen
    the answered parts' intervals."""
    raw, alone = {}, {}
    for index, point in enumerate(found):
        plain = point.curves[None]
        if (plain_lr := parts_lr(study, plain)) is None or plain.at(plain_lr).empty:
            continue
        for part, curve in point.curves.items():
            if part is not None and (lr := parts_lr(study, curve)) is not None and not curve.at(lr).empty:
                (alone if edge_curves(study, point, part) else raw)[(index, part)] = compare(
                    everything.noise, curve.at(lr), plain.at(plain_lr)
                )
    return {**judge(raw), **{key: judge_one(said) for key, said in alone.items()}}


PART_VERDICTS = {
    -1: N_(
        "Adding {part} lowers the loss beyond noise on {point} (lr {lr} with it, {plain_lr} without: {difference})."
    ),
    0: N_(
        "Adding {part} leaves the loss level within noise on {point} (lr {lr} with it, {plain_lr} without: "
        "{difference})."
    ),
    1: N_("Adding {part} raises the loss beyond noise on {point} (lr {lr} with it, {plain_lr} without: {difference})."),
}


def part_verdict(study: Study, part: str, point: PartsPoint, said: Difference) -> str:
    """One part's answer at one point, with the lr each side was judged at (under own_lr, each its
    own best): the report's sentence and its findings record's."""
    lrs = {name: f"{parts_lr(study, point.curves[key]):g}" for name, key in (("lr", part), ("plain_lr", None))}
    return _(PART_VERDICTS[said.sign]).format(
        part=part_name(part), point=point.label, difference=interval_text(said), **lrs
    )


def edge_curves(study: Study, point: PartsPoint, part: str) -> list[str | None]:
    """Under own_lr, which of the plain model (None) and the part has its best lr at the edge of
    the lrs tried: another lr might do better, so the difference is not an answer yet."""
    if study.rule != "own_lr":
        return []
    return [key for key in (None, part) if point.curves[key].best_lr is not None and not point.curves[key].bracketed]


def edge_text(point: PartsPoint, keys: list[str | None]) -> str:
    return _("{point}: the best lr of {models} is the edge of the lrs tried").format(
        point=point.label, models=listed(part_name(key) for key in keys)
    )


def part_waits_for(study: Study, point: PartsPoint, part: str, said: Difference | None) -> str | None:
    """What one part's answer at one point still waits for, or None once it can be said."""
    if said is None:
        return _("{point}, {part}: a run is not finished").format(point=point.label, part=part_name(part))
    if edge := edge_curves(study, point, part):
        return edge_text(point, edge)
    if not said.testable:
        return _("{point}: no noise estimate (no second seed yet)").format(point=point.label)
    return None


def parts_answered(
    study: Study, found: list[PartsPoint], judged: dict[tuple[int, str], Difference]
) -> dict[tuple[int, str], Difference]:
    """The parts' answers that can be said, point by point and part by part: a point whose runs
    are all in keeps its answer while another point still trains (its interval judged with the
    other answerable differences, Holm, so it widens a little as more join)."""
    return {key: said for key, said in judged.items() if part_waits_for(study, found[key[0]], key[1], said) is None}


def parts_missing(study: Study, found: list[PartsPoint], judged: dict[tuple[int, str], Difference]) -> list[str]:
    """What the parts' answer still waits for, point by point and part by part."""
    waiting = []
    for index, point in enumerate(found):
        plain = point.curves[None]
        if len(point.curves) == 1:  # the plain model alone so far
            waiting.append(_("{point}: no run with a part is finished").format(point=point.label))
        elif plain.best_lr is None:  # not trained yet, or trained with other settings (another precision)
            waiting.append(
                _("{point}: the plain mini-LLaMA has no finished run with these settings").format(point=point.label)
            )
        at_edge = {}  # the curves whose best lr is the edge, said once for the point
        for part, curve in point.curves.items():
            if part is None:
                continue
            said = judged.get((index, part))
            if said is None and curve.best_lr is not None and plain.best_lr is None:
                continue  # the plain model's line says it
            if said is not None and (edge := edge_curves(study, point, part)):
                at_edge.update(dict.fromkeys(edge))
            elif (reason := part_waits_for(study, point, part, said)) is not None:
                waiting.append(reason)
        if at_edge:
            waiting.append(edge_text(point, sorted(at_edge, key=lambda key: key is not None)))
    return list(dict.fromkeys(waiting))


def parts_load_text(everything: Results, study: Study, found: list[PartsPoint]) -> str | None:
    """The experts' load in the runs the table judges, as the experts' exam states its cells':
    the smallest and largest share any expert took at a run's last logged step."""
    loads = everything.exams.expert_load
    said = []
    for point in found:
        for part, curve in point.curves.items():
            if part is None or (lr := parts_lr(study, curve)) is None:
                continue
            runs = curve.at(lr)
            logged = loads[loads["run_id"].isin(runs.loc[runs["ffn_type"] == "moe", "run_id"])]
            if logged.empty:
                continue
            if len(logged) == len(runs):
                sentence = ngettext(
                    "{part} at lr {lr} on {point}: {shares} (even: {even}; its {runs} run)",
                    "{part} at lr {lr} on {point}: {shares} (even: {even}; its {runs} runs)",
                    len(runs),
                )
            else:  # a run from before the shares were logged
                sentence = _(
                    "{part} at lr {lr} on {point}: {shares} (even: {even}; {logged} of its {runs} runs logged it)"
                )
            said.append(
                sentence.format(
                    part=part_name(part),
                    lr=f"{lr:g}",
                    point=point.label,
                    shares=shares(logged["min_share"].min(), logged["max_share"].max()),
                    even=share(1 / runs["n_experts"].iloc[0]),
                    logged=len(logged),
                    runs=len(runs),
                )
            )
    if not said:
        return None
    heading = _(
        "**The experts' load** (the smallest and largest share of the tokens any expert took at a run's last "
        "logged step):"
    )
    return f"{heading} {'; '.join(said)}."


def parts_section(everything: Results, study: Study) -> str | None:
    found = parts_points(everything, study)
    if not found:
        return None
    judged = parts_differences(everything, study, found)
    rows = []
    for index, point in enumerate(found):
        for part, curve in point.curves.items():
            if part is not None:
                said = judged.get((index, part))
                rows.append(
                    [
                        point.label,
                        part_name(part),
                        best_cell(point.curves[None]),
                        best_cell(curve),
                        interval_text(said) if said else "-",
                    ]
                )
    header = [
        " × ".join(study.axis),
        pgettext("a column of the parts table", "part"),
        _("plain mini-LLaMA: best val"),
        _("with the part: best val"),
        _("with the part minus without (95% interval)"),
    ]
    parts = [md_table(header, rows)] if rows else []
    answered = parts_answered(study, found, judged)
    if answered:
        parts.append(
            sentences(part_verdict(study, part, found[index], said) for (index, part), said in answered.items())
        )
    if waiting := parts_missing(study, found, judged):
        missing = "; ".join(waiting)
        parts.append(
            _("**The rest is not answered yet.** Still missing: {missing}.").format(missing=missing)
            if answered
            else _("**Not answered yet.** Still missing: {missing}.").format(missing=missing)
        )
    if load := parts_load_text(everything, study, found):
        parts.append(load)
    if study.cannot_answer:
        parts.append(_(study.cannot_answer))
    parts.append(_(HOW_TO_READ))
    return "\n\n".join(parts)


def study_section(
    everything: Results, study: Study, figure: Callable[[str, str], str] = lambda name, caption: ""
) -> str | None:
    """The section's text, or None before the study has any run. `figure(name, caption)` links a
    point's figure where each point has its own (per_setup). What it still waits to train is said
    after it and its figures (still_to_train)."""
    if study.compare == "parts":
        return parts_section(everything, study)
    if study.compare == "twins":
        return twins_section(everything, study)
    if per_setup(study):
        return lr_section.lr_section(everything, figure, group=study.name)
    found = points(everything, study)
    if not found:
        return None
    judged = differences(everything, study, found)
    parts = [] if each_setup_alone(study) else [intro(everything, study, found)]
    parts.append(study_table(everything, study, found, judged))
    if study.rule == "own_lr":
        curves = [
            f"{point_label(study, point)}: " + " ".join(lr_section.curve_text(curve) for curve in point.curves.values())
            for point in found
        ]
        parts.append("\n".join(f"- {line}" for line in curves))
    if study.measures:
        parts.append(_(study_measures.HOW_TO_READ))
    parts += [answer(study, found, judged), hypothesis_text(everything, study, found, judged)]
    if study.rule == "shared_lr":
        better = answered_better_by(everything, study, found) or better_lr_text(everything, study, found)
        parts += [other_lrs_text(everything, study, found, judged), better]
    parts += [swaps_text(everything, study, found), _(study.cannot_answer) if study.cannot_answer else None]
    how_to_read = HOW_TO_READ if study.rule == "own_lr" else HOW_TO_READ_SHARED
    parts.append(_(how_to_read))
    return "\n\n".join(part for part in parts if part)


def intro(everything: Results, study: Study, found: list[lr_section.Setup]) -> str:
    """'On 8,192,000 characters of poems (fp32) (sd 0.015 per run, ...):' where the points share a setup."""
    return _("On {setup} ({noise}):").format(setup=found[0].label, noise=noise_text(point_noise(everything, found[0])))


def hypothesis_text(everything: Results, study: Study, found: list[lr_section.Setup], judged: dict) -> str | None:
    """The declared hypothesis tested on the points with both models at the shared lr (read_once)."""
    if study.hypothesis != "read_once":
        return None
    tested = [
        (*shared_pair(study, point), judged[("shared", index)], point_noise(everything, point))
        for index, point in enumerate(found)
        if ("shared", index) in judged
    ]
    return study_measures.read_once_text(everything, study.shared_lr, tested, study.stage_target(1))


def figure_caption(everything: Results, study: Study) -> str:
    found = points(everything, study)
    if by_text_size(study):
        return _(
            "Best val against training-set size, both models at lr {lr} (band: min to max over seeds; each seed a point)"
        ).format(lr=f"{study.shared_lr:g}")
    return _(
        "Best val against parameters, {setup} (solid: each model at its own best lr, band: min to max over seeds; "
        "dashed: both at one shared lr)"
    ).format(setup=found[0].label if found else "-")


def by_text_size(study: Study) -> bool:
    """Whether the study's figure is best val against the size of the text, at its shared lr."""
    return study.compare == "models" and study.rule == "shared_lr" and tuple(study.axis) == ("train_tokens",)


def best_val_by_text_size(everything: Results, study: Study) -> pd.DataFrame:
    """One row per run of the two models at the shared lr: size of text, model, seed, best val (the
    figure's data, anatomy.report.charts.best_val_by_size_chart); empty for another kind of study."""
    rows = []
    for point in points(everything, study) if by_text_size(study) else []:
        for n_parts, runs in zip(lr_section.MODELS, shared_pair(study, point)):
            rows += [
                {
                    "train_tokens": int(run.train_tokens),
                    "model": lr_section.MODELS[n_parts],
                    "seed": int(run.seed),
                    "best_val_loss": float(run.best_val_loss),
                }
                for run in runs.itertuples()
            ]
    return pd.DataFrame(rows, columns=["train_tokens", "model", "seed", "best_val_loss"]).dropna()


LR_BY_PARAMS = N_("Each model's best learning rate against its parameters")  # the figure NAME_lr


def study_points(everything: Results, study: Study) -> pd.DataFrame:
    """The figures' data (compare: models): per point and model, the parameters, the best lr, and
    best val at it and at the shared lr (mean, min and max over seeds)."""
    rows = []
    for point in points(everything, study) if study.compare == "models" and not setup_points(study) else []:
        for n_parts, curve in point.curves.items():
            for rule, lr in (("own", curve.best_lr), ("shared", study.shared_lr)):
                values = curve.points[curve.points["lr"] == lr] if lr is not None else curve.points.iloc[0:0]
                if values.empty or values["mean"].isna().all():
                    continue
                row = values.iloc[0]
                rows.append(
                    {
                        "point": point_label(study, point),
                        "model": lr_section.MODELS[n_parts],
                        "params": params_of(point, n_parts),
                        "rule": rule,
                        "lr": float(lr),
                        "bracketed": curve.bracketed,
                        **{column: float(row[column]) for column in ("mean", "min", "max")},
                        "seeds": int(row["seeds"]),
                    }
                )
    columns = ["point", "model", "params", "rule", "lr", "bracketed", "mean", "min", "max", "seeds"]
    return pd.DataFrame(rows, columns=columns)
