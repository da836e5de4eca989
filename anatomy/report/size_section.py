"""The size study's section of the report: does the answer change with model size?

The lr study judged the two models at each one's own best lr, at one size (4 layers, width 128).
The size study (group `size`, workflow/experiments.yaml) asks the same question at several sizes,
width and depth growing together. Each size is a point, and each point is analysed exactly as the
lr study analyses its setups (anatomy/report/lr_section.py: each model's curve over lr, its best
lr, whether a worse lr was tried on each side, the difference at each model's own best). Here the
points' differences are one table, so they are judged together (Holm).

Every size trains on the same text for the same steps, so a larger model reads fewer characters
per parameter: size is confounded with tokens per parameter, and the section says so.
"""

from __future__ import annotations

import pandas as pd

from anatomy.language import N_, _
from anatomy.report import lr_section
from anatomy.report.uncertainty import Difference, compare, interval_text, judge, noise_of, noise_text
from anatomy.report.wording import fmt, listed, md_table
from anatomy.results.reader import Results

STUDY = "size"
POINT = ("n_layer", "d_model")  # what tells one size from another
SHARED_LR = 1e-3  # an lr every size trains both models at: the line "at one shared lr" beside the own-lr one


def size_label(key: dict) -> str:
    """'4×128': layers × width."""
    return f"{int(key['n_layer'])}×{int(key['d_model'])}"


def points(everything: Results) -> list[lr_section.Setup]:
    """Each size the study trained, smallest first, with both models' curves over lr there."""
    found = lr_section.setups(everything, group=STUDY, points=POINT)
    return sorted(found, key=lambda point: (int(point.key["n_layer"]), int(point.key["d_model"])))


def params_of(point: lr_section.Setup, n_parts: int) -> int | None:
    curve = point.curves.get(n_parts)
    if curve is None or curve.runs["params"].isna().all():
        return None
    return int(curve.runs["params"].max())


def shared_lr_runs(point: lr_section.Setup, n_parts: int) -> pd.DataFrame | None:
    curve = point.curves.get(n_parts)
    return None if curve is None or curve.at(SHARED_LR).empty else curve.at(SHARED_LR)


def differences(everything: Results, found: list[lr_section.Setup]) -> dict[tuple[str, int], Difference]:
    """Llama minus vanilla at each size: at each model's own best lr ("own") and at the shared lr
    ("shared"), every size's in one table, judged together."""
    raw = {}
    for index, point in enumerate(found):
        if set(point.curves) == set(lr_section.MODELS) and all(c.best_lr is not None for c in point.curves.values()):
            vanilla, llama = point.curves[0], point.curves[5]
            raw[("own", index)] = compare(everything.noise, llama.at(llama.best_lr), vanilla.at(vanilla.best_lr))
        if (shared_llama := shared_lr_runs(point, 5)) is not None and (
            shared_vanilla := shared_lr_runs(point, 0)
        ) is not None:
            raw[("shared", index)] = compare(everything.noise, shared_llama, shared_vanilla)
    return judge(raw)


def best_cell(curve: lr_section.Curve | None) -> str:
    """'4.312 at lr 0.004' ('edge' where no worse lr was tried on one side), or '-'."""
    if curve is None or curve.best_lr is None:
        return "-"
    cell = _("{best} at lr {lr}").format(best=fmt(curve.points["mean"].min()), lr=f"{curve.best_lr:g}")
    return cell if curve.bracketed else _("{cell} (edge)").format(cell=cell)


def size_table(found: list[lr_section.Setup], judged: dict[tuple[str, int], Difference]) -> str:
    rows = []
    for index, point in enumerate(found):
        own, shared = judged.get(("own", index)), judged.get(("shared", index))
        params = [params_of(point, n_parts) for n_parts in lr_section.MODELS]
        rows.append(
            [
                size_label(point.key),
                " / ".join(f"{p:,}" if p is not None else "-" for p in params),
                best_cell(point.curves.get(0)),
                best_cell(point.curves.get(5)),
                interval_text(own) if own is not None else "-",
                interval_text(shared) if shared is not None else "-",
            ]
        )
    header = [
        _("size (layers × width)"),
        _("parameters (vanilla / mini-LLaMA)"),
        _("vanilla: best val"),
        _("mini-LLaMA: best val"),
        _("llama minus vanilla, each at its best lr"),
        _("llama minus vanilla at lr {lr}").format(lr=f"{SHARED_LR:g}"),
    ]
    return md_table(header, rows)


def answer(found: list[lr_section.Setup], judged: dict[tuple[str, int], Difference]) -> str:
    """The answer across sizes, or what it still waits for."""
    waiting = []
    for index, point in enumerate(found):
        edge = [curve.name for curve in point.curves.values() if curve.best_lr is not None and not curve.bracketed]
        own = judged.get(("own", index))
        if len(point.curves) < 2 or own is None:
            waiting.append(_("{size}: a model has no finished run").format(size=size_label(point.key)))
        elif edge:
            waiting.append(
                _("{size}: the best lr of {models} is the edge of the lrs tried").format(
                    size=size_label(point.key), models=listed(edge)
                )
            )
        elif not own.testable:
            waiting.append(_("{size}: no noise estimate (no second seed yet)").format(size=size_label(point.key)))
    if len(found) < 3:
        waiting.append(_("sizes still to train: {n}").format(n=3 - len(found)))
    if waiting:
        return _(
            "**Not answered yet.** The answer needs three sizes, each with an interior best lr for both models and a second seed; still missing: {missing}."
        ).format(missing="; ".join(waiting))
    gaps = listed(interval_text(judged[("own", index)]) for index in range(len(found)))
    by_sign = {
        sign: [size_label(point.key) for index, point in enumerate(found) if judged[("own", index)].sign == sign]
        for sign in (-1, 0, 1)
    }
    verdicts = [
        _(words).format(sizes=listed(by_sign[sign]))
        for sign, words in (
            (-1, N_("the mini-LLaMA is lower beyond noise at {sizes}")),
            (0, N_("the two are level within noise at {sizes}")),
            (1, N_("vanilla is lower beyond noise at {sizes}")),
        )
        if by_sign[sign]
    ]
    return _("At each model's own best lr, llama minus vanilla, smallest size first: {gaps}. So {verdicts}.").format(
        gaps=gaps, verdicts="; ".join(verdicts)
    )


CANNOT_ANSWER = N_(
    "What this design cannot answer: every size reads the same 8,192,000 characters for the same 2,000 steps, "
    "so a larger model sees fewer characters per parameter (size is confounded with tokens per parameter); "
    "one schedule (constant after warmup) and one optimizer setting (AdamW, beta2 0.999, weight decay 0.01 on "
    "every parameter, no clipping) throughout."
)
HOW_TO_READ = N_(
    "Each best val is a model's mean over the seeds finished at that lr. Each interval is 95%, from the per-run sd "
    "pooled over every size, and the table's differences are judged together (Holm)."
)


def size_section(everything: Results) -> str | None:
    """The section's text, or None before the study has any run."""
    found = points(everything)
    if not found:
        return None
    judged = differences(everything, found)
    first = found[0]
    noise = noise_of(everything.noise, pd.DataFrame([first.key]))
    curves = [
        f"{size_label(point.key)}: " + " ".join(lr_section.curve_text(curve) for curve in point.curves.values())
        for point in found
    ]
    parts = [
        _("On {setup} ({noise}):").format(setup=first.label, noise=noise_text(noise)),
        size_table(found, judged),
        "\n".join(f"- {line}" for line in curves),
        answer(found, judged),
        _(CANNOT_ANSWER),
        _(HOW_TO_READ),
    ]
    return "\n\n".join(parts)


def size_points(everything: Results) -> pd.DataFrame:
    """The figures' data: per size and model, the parameters, the best lr, and best val at it and at
    the shared lr (mean, min and max over seeds)."""
    rows = []
    for point in points(everything):
        for n_parts, curve in point.curves.items():
            for rule, lr in (("own", curve.best_lr), ("shared", SHARED_LR)):
                values = curve.points[curve.points["lr"] == lr] if lr is not None else curve.points.iloc[0:0]
                if values.empty or values["mean"].isna().all():
                    continue
                row = values.iloc[0]
                rows.append(
                    {
                        "size": size_label(point.key),
                        "model": lr_section.MODELS[n_parts],
                        "params": params_of(point, n_parts),
                        "rule": rule,
                        "lr": float(lr),
                        "bracketed": curve.bracketed,
                        **{column: float(row[column]) for column in ("mean", "min", "max")},
                        "seeds": int(row["seeds"]),
                    }
                )
    columns = ["size", "model", "params", "rule", "lr", "bracketed", "mean", "min", "max", "seeds"]
    return pd.DataFrame(rows, columns=columns)
