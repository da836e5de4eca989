"""A study's section of the report, from its declaration (workflow/studies.yaml): the one analysis
of a declared study. `compare: models` compares the two models at several points of an axis (here);
`compare: parts` each part added to the mini-LLaMA (here, below); `compare: twins` each run against
its twin of another axis value (anatomy/report/twins_section.py, the precision study's).

A point is one value of the study's axis (the size study's depth and width). Each point is
analysed exactly as the lr study analyses its setups (anatomy/report/lr_section.py: each model's
curve over lr, its best lr, whether a worse lr was tried on each side). At each point the
difference is the mini-LLaMA minus vanilla, each at its own best lr (rule own_lr), and at the
declared shared lr where both trained at it. Every point's differences are one table, so they are
judged together (Holm). A study whose points are setups (the lr study's texts, sizes of text and
precisions) has no trend to answer: each setup is answered on its own, by lr_section.py's text.
The scale study keeps a section of its own, which says more than this one can (the chapter's
hypothesis, the part ablations at the largest size).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from anatomy.language import N_, _, pgettext
from anatomy.report import lr_section
from anatomy.report.exam_findings import PART_NAMES
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
from anatomy.report.wording import fmt, listed, md_table, sentences
from anatomy.results.reader import Results
from anatomy.results.studies import Study

TREND_POINTS = 3  # the fewest points that show a trend (grows, shrinks or stays level)
OWN_SECTIONS = ("scale",)  # studies whose sections are modules of their own


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
    if study.shared_lr is None or curve is None or curve.at(study.shared_lr).empty:
        return None
    return curve.at(study.shared_lr)


def differences(everything: Results, study: Study, found: list[lr_section.Setup]) -> dict[tuple[str, int], Difference]:
    """Llama minus vanilla at each point: at each model's own best lr ("own", as lr_section.setups
    measured it) and at the shared lr ("shared"), every point's in one table, judged together."""
    raw = {}
    for index, point in enumerate(found):
        if study.rule == "own_lr" and point.difference is not None:
            raw[("own", index)] = point.difference
        if (llama := shared_lr_runs(study, point, 5)) is not None and (
            vanilla := shared_lr_runs(study, point, 0)
        ) is not None:
            raw[("shared", index)] = compare(everything.noise, llama, vanilla)
    return judge(raw)


def best_cell(curve: lr_section.Curve | None) -> str:
    """'4.312 at lr 0.004' ('edge' where no worse lr was tried on one side), or '-'."""
    if curve is None or curve.best_lr is None:
        return "-"
    cell = _("{best} at lr {lr}").format(best=fmt(curve.best_val), lr=f"{curve.best_lr:g}")
    return cell if curve.bracketed else _("{cell} (edge)").format(cell=cell)


def study_table(study: Study, found: list[lr_section.Setup], judged: dict[tuple[str, int], Difference]) -> str:
    rows = []
    for index, point in enumerate(found):
        params = [params_of(point, n_parts) for n_parts in lr_section.MODELS]
        row = [point_label(study, point), " / ".join(f"{p:,}" if p is not None else "-" for p in params)]
        if study.rule == "own_lr":
            row += [best_cell(point.curves.get(0)), best_cell(point.curves.get(5))]
            row.append(interval_text(judged[("own", index)]) if ("own", index) in judged else "-")
        if study.shared_lr is not None:
            row.append(interval_text(judged[("shared", index)]) if ("shared", index) in judged else "-")
        rows.append(row)
    header = [" × ".join(point_columns(study) or study.axis), _("parameters (vanilla / mini-LLaMA)")]
    if study.rule == "own_lr":
        header += [
            _("vanilla: best val"),
            _("mini-LLaMA: best val"),
            _("llama minus vanilla, each at its best lr"),
        ]
    if study.shared_lr is not None:
        header.append(_("llama minus vanilla at lr {lr}").format(lr=f"{study.shared_lr:g}"))
    return md_table(header, rows)


def missing(study: Study, found: list[lr_section.Setup], judged: dict[tuple[str, int], Difference]) -> list[str]:
    """What the answer still waits for, point by point: a model with no finished run, a best lr at
    the edge of the lrs tried (own_lr), a difference with no noise estimate (no second seed)."""
    rule = "own" if study.rule == "own_lr" else "shared"
    waiting = []
    for index, point in enumerate(found):
        label = point_label(study, point)
        edge = [curve.name for curve in point.curves.values() if curve.best_lr is not None and not curve.bracketed]
        said = judged.get((rule, index))
        if len(point.curves) < 2 or said is None:
            waiting.append(_("{point}: a model has no finished run").format(point=label))
        elif rule == "own" and edge:
            waiting.append(
                _("{point}: the best lr of {models} is the edge of the lrs tried").format(
                    point=label, models=listed(edge)
                )
            )
        elif not said.testable:
            waiting.append(_("{point}: no noise estimate (no second seed yet)").format(point=label))
    if len(found) < TREND_POINTS:
        waiting.append(_("points still to train: {n}").format(n=TREND_POINTS - len(found)))
    return waiting


def answer(study: Study, found: list[lr_section.Setup], judged: dict[tuple[str, int], Difference]) -> str:
    """The answer across the points, or what it still waits for."""
    if waiting := missing(study, found, judged):
        return _(
            "**Not answered yet.** The answer needs {n} points, each with both models finished, an interior best lr "
            "for each where each is at its own, and a second seed; still missing: {missing}."
        ).format(n=TREND_POINTS, missing="; ".join(waiting))
    rule = "own" if study.rule == "own_lr" else "shared"
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
    said = (
        _("At each model's own best lr, llama minus vanilla: {gaps}. So {verdicts}.")
        if rule == "own"
        else _("At lr {lr}, llama minus vanilla: {gaps}. So {verdicts}.")
    )
    return said.format(gaps=gaps, verdicts="; ".join(verdicts), lr=f"{study.shared_lr:g}")


# ---------------------------------------------------------------------------------------------
# compare: models, with a part swapped at each point (the size study's stage 3): a run tagged
# `part` at its model's best lr there, minus that model; every point's in one table (Holm). Then
# the part's cost from the first point to the last: does its share hold as the axis grows?


def swapped_at_best(everything: Results, study: Study, found: list[lr_section.Setup]) -> dict:
    """(point index, part, direction) -> the swapped model minus the plain one, both at the plain
    model's best lr at that point, every point's judged together."""
    raw = {}
    for index, point in enumerate(found):
        for (part, direction, lr), said in lr_section.swap_differences(everything, point).items():
            if lr == point.curves[0 if direction == "add" else 5].best_lr:
                raw[(index, part, direction)] = said
    return judge(raw)


def swaps_studied(study: Study, found: list[lr_section.Setup]) -> list[tuple[str, str]]:
    """Every (part, direction) the study swaps at any point, in a fixed order."""
    return sorted({pair for point in found for pair in lr_section.swapped_parts(point)})


def swaps_missing(study: Study, found: list[lr_section.Setup], judged: dict) -> list[str]:
    """Each point where a part the study swaps has no finished run at the model's best lr there."""
    waiting = []
    for part, direction in swaps_studied(study, found):
        for index, point in enumerate(found):
            curve = point.curves.get(0 if direction == "add" else 5)
            if (index, part, direction) not in judged and curve is not None and curve.best_lr is not None:
                waiting.append(
                    _("{point}: no finished run of {swap} at the model's best lr {lr}").format(
                        point=point_label(study, point), swap=swap_name(part, direction), lr=f"{curve.best_lr:g}"
                    )
                )
            elif (index, part, direction) in judged and not judged[(index, part, direction)].testable:
                waiting.append(
                    _("{point}: no noise estimate (no second seed yet)").format(point=point_label(study, point))
                )
    return waiting


def swap_name(part: str, direction: str) -> str:
    """'the mini-LLaMA without RoPE', 'vanilla with RoPE'."""
    template = N_("vanilla with {part}") if direction == "add" else N_("the mini-LLaMA without {part}")
    return _(template).format(part=_(PART_NAMES.get(part, part)))


SHARE_VERDICTS = {
    -1: N_("it shrinks beyond noise"),
    0: N_("it holds within noise"),
    1: N_("it grows beyond noise"),
}


def swap_trend(found: list[lr_section.Setup], judged: dict, part: str, direction: str) -> Difference | None:
    """The part's effect at the last point minus at the first, judged alone; None until both are in."""
    first, last = (0, part, direction), (len(found) - 1, part, direction)
    if len(found) < 2 or first not in judged or last not in judged:
        return None
    return judge_one(change(judged[last], judged[first]))


def swap_answer(study: Study, found: list[lr_section.Setup], judged: dict, part: str, direction: str) -> str:
    """A swapped part across the points: its effect at each, and whether its size holds from the
    first point to the last (the cost is the sign a learner reads: + is worse without the part)."""
    effects = listed(
        f"{point_label(study, point)}: {interval_text(judged[(index, part, direction)])}"
        for index, point in enumerate(found)
        if (index, part, direction) in judged
    )
    template = (
        N_("Vanilla with {part} minus vanilla, each at vanilla's best lr at each point: {effects}.")
        if direction == "add"
        else N_("The mini-LLaMA without {part} minus the mini-LLaMA, each at its best lr at each point: {effects}.")
    )
    said = [_(template).format(part=_(PART_NAMES.get(part, part)), effects=effects)]
    trend = swap_trend(found, judged, part, direction)
    if trend is not None and trend.sign is not None:
        # removing a part: its effect is its cost; adding one: its gain is minus its effect
        share = trend.sign if direction == "remove" else -trend.sign
        said.append(
            _("From {first} to {last} that changes by {change}: {verdict}.").format(
                first=point_label(study, found[0]),
                last=point_label(study, found[-1]),
                change=interval_text(trend),
                verdict=_(SHARE_VERDICTS[share]),
            )
        )
    return sentences(said)


def swaps_text(everything: Results, study: Study, found: list[lr_section.Setup]) -> str | None:
    """The swaps' table and answer, or None where the study swaps no part."""
    studied = swaps_studied(study, found)
    if not studied:
        return None
    judged = swapped_at_best(everything, study, found)
    rows = [
        [
            point_label(study, point),
            swap_name(part, direction),
            f"{point.curves[0 if direction == 'add' else 5].best_lr:g}",
            interval_text(judged[(index, part, direction)]),
        ]
        for part, direction in studied
        for index, point in enumerate(found)
        if (index, part, direction) in judged
    ]
    header = [
        " × ".join(point_columns(study) or study.axis),
        _("run"),
        _("at lr (the model's best)"),
        _("with the part swapped minus without (95% interval)"),
    ]
    parts = [md_table(header, rows)] if rows else []
    if waiting := swaps_missing(study, found, judged):
        parts.append(_("**Not answered yet.** Still missing: {missing}.").format(missing="; ".join(waiting)))
    else:
        parts += [swap_answer(study, found, judged, part, direction) for part, direction in studied]
    return "\n\n".join(parts)


HOW_TO_READ = N_(
    "Each best val is a model's mean over the seeds finished at that lr. Each interval is 95%, from the per-run sd "
    "pooled over the setup's two-seed experiments, and the table's differences are judged together (Holm)."
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


def part_name(part: str | None) -> str:
    return _("the plain mini-LLaMA") if part is None else _(PART_NAMES.get(part, part))


def parts_points(everything: Results, study: Study) -> list[PartsPoint]:
    runs = everything.runs
    mine = runs[runs["group"] == study.name]
    first_steps = everything.metrics.groupby("run_id")["step"].min()
    found = []
    for values, at_point in mine.groupby(list(study.axis), dropna=False):
        key = dict(zip(study.axis, values))
        curves = {}
        for part in [None, *sorted(at_point["part"].dropna().unique())]:
            variant = at_point[at_point["part"].isna()] if part is None else at_point[at_point["part"] == part]
            curves[part] = lr_section.Curve(5, variant, lr_section.points_of(variant, first_steps))
        label = (
            lr_section.Setup(key, {}, None).label  # "64,000 characters of poems (fp32)"
            if {"corpus", "train_tokens", "precision"} <= set(key)
            else " ".join(f"{value:,}" if isinstance(value, int) else str(value) for value in key.values())
        )
        found.append(PartsPoint(key, label, curves))
    return found


def parts_lr(study: Study, curve: lr_section.Curve) -> float | None:
    return curve.best_lr if study.rule == "own_lr" else study.shared_lr


def parts_differences(everything: Results, study: Study, found: list[PartsPoint]) -> dict[tuple[int, str], Difference]:
    """Each part minus the plain model at each point, each at its lr under the study's rule."""
    raw = {}
    for index, point in enumerate(found):
        plain = point.curves[None]
        if (plain_lr := parts_lr(study, plain)) is None or plain.at(plain_lr).empty:
            continue
        for part, curve in point.curves.items():
            if part is not None and (lr := parts_lr(study, curve)) is not None and not curve.at(lr).empty:
                raw[(index, part)] = compare(everything.noise, curve.at(lr), plain.at(plain_lr))
    return judge(raw)


PART_VERDICTS = {
    -1: N_("Adding {part} lowers the loss beyond noise on {point} ({difference})."),
    0: N_("Adding {part} leaves the loss level within noise on {point} ({difference})."),
    1: N_("Adding {part} raises the loss beyond noise on {point} ({difference})."),
}


def part_verdict(part: str, point: PartsPoint, said: Difference) -> str:
    """One part's answer at one point: the report's sentence and its findings record's."""
    return _(PART_VERDICTS[said.sign]).format(part=part_name(part), point=point.label, difference=interval_text(said))


def parts_missing(study: Study, found: list[PartsPoint], judged: dict[tuple[int, str], Difference]) -> list[str]:
    """What the parts' answer still waits for, point by point and part by part."""
    waiting = []
    for index, point in enumerate(found):
        plain = point.curves[None]
        for part, curve in point.curves.items():
            if part is None:
                continue
            said = judged.get((index, part))
            edge = [
                part_name(p) for p, c in ((None, plain), (part, curve)) if c.best_lr is not None and not c.bracketed
            ]
            if said is None:
                waiting.append(
                    _("{point}, {part}: a run is not finished").format(point=point.label, part=part_name(part))
                )
            elif study.rule == "own_lr" and edge:
                waiting.append(
                    _("{point}: the best lr of {models} is the edge of the lrs tried").format(
                        point=point.label, models=listed(edge)
                    )
                )
            elif not said.testable:
                waiting.append(_("{point}: no noise estimate (no second seed yet)").format(point=point.label))
    return list(dict.fromkeys(waiting))


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
    parts = [md_table(header, rows)]
    if waiting := parts_missing(study, found, judged):
        parts.append(_("**Not answered yet.** Still missing: {missing}.").format(missing="; ".join(waiting)))
    else:
        parts.append(sentences(part_verdict(part, found[index], said) for (index, part), said in judged.items()))
    if study.cannot_answer:
        parts.append(_(study.cannot_answer))
    parts.append(_(HOW_TO_READ))
    return "\n\n".join(parts)


def study_section(
    everything: Results, study: Study, figure: Callable[[str, str], str] = lambda name, caption: ""
) -> str | None:
    """The section's text, or None before the study has any run. `figure(name, caption)` links a
    point's figure where each point has its own (per_setup)."""
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
    first = found[0]
    noise = noise_of(everything.noise, pd.DataFrame([first.key]))
    curves = [
        f"{point_label(study, point)}: " + " ".join(lr_section.curve_text(curve) for curve in point.curves.values())
        for point in found
    ]
    parts = [
        _("On {setup} ({noise}):").format(setup=first.label, noise=noise_text(noise)),
        study_table(study, found, judged),
        "\n".join(f"- {line}" for line in curves),
        answer(study, found, judged),
        swaps_text(everything, study, found),
        _(study.cannot_answer) if study.cannot_answer else None,
        _(HOW_TO_READ),
    ]
    return "\n\n".join(part for part in parts if part)


def figure_caption(everything: Results, study: Study) -> str:
    found = points(everything, study)
    return _(
        "Best val against parameters, {setup} (solid: each model at its own best lr, band: min to max over seeds; "
        "dashed: both at one shared lr)"
    ).format(setup=found[0].label if found else "-")


LR_BY_PARAMS = N_("Each model's best learning rate against its parameters")  # the figure NAME_lr


def study_points(everything: Results, study: Study) -> pd.DataFrame:
    """The figures' data (compare: models): per point and model, the parameters, the best lr, and
    best val at it and at the shared lr (mean, min and max over seeds)."""
    rows = []
    for point in points(everything, study) if study.compare == "models" and not per_setup(study) else []:
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
