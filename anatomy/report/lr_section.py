"""The lr study's section of the report: does the mini-LLaMA still win at each model's own best lr?

The scale study compared the two models at one shared learning rate, which neither was tuned
for. The lr study (group `lr`, workflow/experiments.yaml) sweeps the lr of each model on one
setup (a corpus at one size, one precision), so that each can be judged at its own best.

A point of a model's curve is every run of that model at one lr on the setup, whichever study
trained it: the scale study's runs at lr 3e-4 and 1e-3 are points of the 8M curve too. A model is
vanilla (none of the five parts) or the mini-LLaMA (all five), with the lr study's depth and
width and a constant lr after warmup, as everywhere in the report: roles come from settings.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd

from anatomy.config import DEFAULT_RECIPE
from anatomy.language import N_, _
from anatomy.results.reader import Results
from anatomy.report.exam_findings import PART_NAMES
from anatomy.report.wording import fmt, listed, recipe_words, sentences
from anatomy.report.uncertainty import (
    SETUP,
    Difference,
    compare,
    interval_text,
    judge,
    judge_one,
    noise_of,
    noise_text,
)

STUDY = "lr"
MODELS = {0: "vanilla", 5: "mini-LLaMA"}  # n_parts -> name (names: the same in every language)
SHAPE = ("n_layer", "d_model", "n_head", "ctx_len", "schedule", "warmup_steps")  # what a curve's runs share


@dataclass
class Curve:
    """One model's best val against lr on one setup."""

    n_parts: int
    runs: pd.DataFrame  # every run of the curve, diverged ones included
    points: pd.DataFrame  # per lr: mean, min, max of best val over finished seeds, seeds, diverged

    @property
    def name(self) -> str:
        return MODELS[self.n_parts]

    @property
    def best_lr(self) -> float | None:
        """The lr of the lowest mean best val over the seeds every finished lr has. Over all seeds,
        a second seed trained at the best lr alone would judge it against the others' first seed
        only: the first seed's luck, which made it the best, counts half there and whole at the
        others (at size 4x128 it moved the mini-LLaMA's best from 1e-3 to 2e-3 on 0.001)."""
        finished = self.runs[~self.runs["diverged"].astype(bool)].dropna(subset=["best_val_loss"])
        if finished.empty:
            return None
        seeds = [set(at_lr["seed"]) for _lr, at_lr in finished.groupby("lr")]
        common = set.intersection(*seeds)
        if common:
            finished = finished[finished["seed"].isin(common)]
        means = finished.groupby("lr")["best_val_loss"].mean()
        return float(means.idxmin())

    @property
    def best_val(self) -> float | None:
        """The mean best val at the best lr, over every seed finished there."""
        best = self.best_lr
        return None if best is None else float(self.points.loc[self.points["lr"] == best, "mean"].iloc[0])

    @property
    def bracketed(self) -> bool:
        """Whether a worse lr was tried on each side of the best: an optimum inside the range."""
        best = self.best_lr
        return best is not None and self.points["lr"].min() < best < self.points["lr"].max()

    def at(self, lr: float) -> pd.DataFrame:
        return self.runs[(self.runs["lr"] == lr) & ~self.runs["diverged"].astype(bool)]

    def sensitivity(self, lrs: set[float] | None = None) -> float:
        """Wortsman et al. 2023's lr sensitivity: over the lrs tried (or those of `lrs`), the mean of
        min(best val, loss at initialisation) minus the best best val. A diverged lr counts at the
        initial loss. The loss at initialisation is ln(vocabulary): a fresh model predicts about
        uniformly. Two models compare only over the same lrs: a model tried further out would
        otherwise look more sensitive for it."""
        initial = math.log(float(self.runs["vocab_size"].iloc[0]))
        points = self.points if lrs is None else self.points[self.points["lr"].isin(lrs)]
        capped = points["mean"].fillna(initial).clip(upper=initial)
        return float(capped.mean() - self.points["mean"].min())


@dataclass
class Setup:
    """The lr study on one setup: the two models' curves and the verdict at their best lrs."""

    key: dict  # the SETUP columns
    curves: dict[int, Curve]  # n_parts -> curve
    verdict: Difference | None  # llama at its best lr minus vanilla at its best; None: not both
    runs: pd.DataFrame | None = None  # every run on the setup, of any study (the swaps and schedules)
    # the same difference before it is judged: a study of several points judges them together
    # (anatomy/report/study_section.py)
    difference: Difference | None = None
    group: str = STUDY  # the study whose runs made the curves: its swaps are the setup's

    @property
    def label(self) -> str:
        return _("{tokens} characters of {corpus} ({precision})").format(
            tokens=f"{int(self.key['train_tokens']):,}", corpus=self.key["corpus"], precision=self.key["precision"]
        )


def points_of(runs: pd.DataFrame, first_steps: pd.Series) -> pd.DataFrame:
    """Per lr: the band of best val over the finished seeds, how many diverged, and how many never
    got better than their first evaluation (they did not train, though nothing overflowed)."""
    rows = []
    for lr, at_lr in runs.groupby("lr"):
        diverged = at_lr["diverged"].astype(bool)
        finished = at_lr.loc[~diverged, "best_val_loss"].dropna()
        stalled = (at_lr["best_step"] <= at_lr["run_id"].map(first_steps)) & ~diverged
        rows.append(
            {
                "lr": float(lr),
                "mean": finished.mean() if len(finished) else math.nan,
                "min": finished.min() if len(finished) else math.nan,
                "max": finished.max() if len(finished) else math.nan,
                "seeds": len(finished),
                "diverged": int(diverged.sum()),
                "stalled": int(stalled.sum()),
            }
        )
    return pd.DataFrame(rows, columns=["lr", "mean", "min", "max", "seeds", "diverged", "stalled"])


def setups(everything: Results, group: str = STUDY, points: tuple[str, ...] = ()) -> list[Setup]:
    """Every setup the lr study trained on, with both models' curves over all its runs there.
    Another study asks the same question at several points of its own axis: `points` names the
    columns that tell its points apart (the size study's depth and width), and each point is a
    setup of its own here (anatomy/report/study_section.py)."""
    runs = everything.runs
    study = runs[runs["group"] == group]
    first_steps = everything.metrics.groupby("run_id")["step"].min()
    found = []
    # a curve is the plain models at a constant lr with the default recipe: the part ablations
    # (stage 3), another schedule (stage 4) and LLaMA's optimizer recipe (stage 7) are questions of
    # their own
    study = study[study["part"].isna() & (study["schedule"] == "constant") & (study["optimizer"] == DEFAULT_RECIPE)]
    for key, mine in study.groupby([*SETUP, *points], dropna=False):
        key = dict(zip([*SETUP, *points], key))
        same = runs
        for column, value in key.items():
            same = same[same[column].isna()] if pd.isna(value) else same[same[column] == value]
        curves = {}
        for n_parts in MODELS:
            shape = mine[mine["n_parts"] == n_parts][list(SHAPE)].drop_duplicates()
            if len(shape) != 1:
                continue
            plain = same[(same["n_parts"] == n_parts) & same["part"].isna() & (same["optimizer"] == DEFAULT_RECIPE)]
            model = plain.merge(shape, on=list(SHAPE))  # no training twice: the workflow refuses a repeat
            curves[n_parts] = Curve(n_parts, model, points_of(model, first_steps))
        verdict = difference = None
        if set(curves) == set(MODELS) and all(curve.best_lr is not None for curve in curves.values()):
            vanilla, llama = curves[0], curves[5]
            difference = compare(everything.noise, llama.at(llama.best_lr), vanilla.at(vanilla.best_lr))
            verdict = judge_one(difference)
        found.append(Setup(key, curves, verdict, same, difference, group))
    return sorted(found, key=lambda setup: -int(setup.key["train_tokens"]))


def curve_text(curve: Curve) -> str:
    best = curve.best_lr
    tried = listed(f"{lr:g}" for lr in curve.points["lr"])
    if best is None:
        return _("{model}: no finished run yet (lr tried: {tried}).").format(model=curve.name, tried=tried)
    values = dict(model=curve.name, tried=tried, lr=f"{best:g}", best=fmt(curve.best_val))
    diverged = curve.points.loc[curve.points["diverged"] > 0, "lr"]
    said = (
        _("{model}: lr tried {tried}; best val {best} at lr {lr}, with a worse lr tried on each side.")
        if curve.bracketed
        else _("{model}: lr tried {tried}; best val {best} at lr {lr}, the edge of the range tried.")
    ).format(**values)
    if len(diverged):
        said = sentences([said, _("Diverged at lr {lrs}.").format(lrs=listed(f"{lr:g}" for lr in diverged))])
    stalled = curve.points[curve.points["stalled"] > 0]
    if len(stalled):
        said = sentences(
            [
                said,
                _(
                    "At lr {lrs} it never got better than its first evaluation (best val {best}): too high an lr "
                    "to train, though no loss overflowed."
                ).format(lrs=listed(f"{lr:g}" for lr in stalled["lr"]), best=listed(fmt(v) for v in stalled["mean"])),
            ]
        )
    return said


def verdict_text(setup: Setup) -> str | None:
    """The answer at each model's own best lr, with its interval; None before both curves have a run."""
    if setup.verdict is None:
        return None
    vanilla, llama = setup.curves[0], setup.curves[5]
    d = setup.verdict
    values = dict(vanilla_lr=f"{vanilla.best_lr:g}", llama_lr=f"{llama.best_lr:g}", difference=interval_text(d))
    if not (vanilla.bracketed and llama.bracketed):
        edge = [curve.name for curve in (vanilla, llama) if not curve.bracketed]
        return _(
            "**Not testable here yet**: at the best lr found (vanilla {vanilla_lr}, mini-LLaMA {llama_lr}), llama "
            "minus vanilla is {difference}, but the best lr of {models} lies at the edge of the lrs tried, so a "
            "better one may lie beyond it."
        ).format(models=listed(edge), **values)
    if d.sign is None:
        return _(
            "**Not testable here**: at each model's best lr (vanilla {vanilla_lr}, mini-LLaMA {llama_lr}), llama "
            "minus vanilla is {difference}, with no noise estimate to judge it by."
        ).format(**values)
    said = {
        -1: N_(
            "**Lower.** At each model's own best lr (vanilla {vanilla_lr}, mini-LLaMA {llama_lr}), the "
            "mini-LLaMA's best val is lower: llama minus vanilla {difference}."
        ),
        1: N_(
            "**Vanilla is lower.** At each model's own best lr (vanilla {vanilla_lr}, mini-LLaMA {llama_lr}), the "
            "2017 model's best val is lower: llama minus vanilla {difference}."
        ),
        0: N_(
            "**Not lower.** At each model's own best lr (vanilla {vanilla_lr}, mini-LLaMA {llama_lr}), the two "
            "models are level within noise: llama minus vanilla {difference}. The gap at one shared lr came "
            "from the lr."
        ),
    }[d.sign]
    return _(said).format(**values)


def sensitivity_text(setup: Setup) -> str | None:
    curves = [curve for curve in setup.curves.values() if curve.best_lr is not None]
    if len(curves) < 2:
        return None
    both = set(setup.curves[0].points["lr"]) & set(setup.curves[5].points["lr"])
    return _(
        "lr sensitivity (the mean, over the lrs both models ran, {lrs}, of how far best val lies above the model's "
        "best, a diverged lr counting at the loss of a fresh model): vanilla {vanilla}, mini-LLaMA {llama}. The "
        "lower it is, the less a model's result depends on finding its lr."
    ).format(
        lrs=listed(f"{lr:g}" for lr in sorted(both)),
        vanilla=fmt(setup.curves[0].sensitivity(both)),
        llama=fmt(setup.curves[5].sensitivity(both)),
    )


# ---------------------------------------------------------------------------------------------
# Stages 3 and 4: a part and a schedule at each model's best lr


@dataclass
class Swap:
    """One part added to vanilla or taken out of the mini-LLaMA, against that model at one lr."""

    part: str
    direction: str  # "add" (to vanilla) or "remove" (from the mini-LLaMA)
    lr: float
    at_best: bool  # the lr is the model's own best
    difference: Difference  # with the part swapped minus without, judged with the setup's others


def same_shape(runs: pd.DataFrame, curve: Curve, *, but: tuple[str, ...] = ()) -> pd.DataFrame:
    """The runs with the curve's depth, width, context and schedule (bar the columns in `but`)."""
    columns = [column for column in SHAPE if column not in but]
    return runs.merge(curve.runs[columns].drop_duplicates(), on=columns)


def swapped_parts(setup: Setup) -> list[tuple[str, str]]:
    """The (part, direction) pairs the setup's study swapped on it."""
    if setup.runs is None:
        return []
    runs = setup.runs[setup.runs["part"].notna() & (setup.runs["group"] == setup.group)]
    return list(runs[["part", "direction"]].drop_duplicates().itertuples(index=False, name=None))


def swap_differences(everything: Results, setup: Setup) -> dict[tuple[str, str, float], Difference]:
    """Each part the setup's study swaps on it, at every lr both the swapped and the plain model
    ran, whichever study trained them (the scale study's swaps at lr 3e-4 too); unjudged."""
    if setup.runs is None or set(setup.curves) != set(MODELS):
        return {}
    runs = setup.runs[setup.runs["part"].notna()]
    found = {}
    for part, direction in swapped_parts(setup):
        curve = setup.curves[0 if direction == "add" else 5]
        swapped = same_shape(runs[(runs["part"] == part) & (runs["direction"] == direction)], curve)
        for lr, at_lr in swapped.groupby("lr"):
            if curve.at(lr).empty:
                continue
            found[(part, direction, float(lr))] = compare(everything.noise, at_lr, curve.at(lr))
    return found


def swaps(everything: Results, setup: Setup) -> list[Swap]:
    """The swaps on this setup (the lr study's stage 3), judged together."""
    judged = judge(swap_differences(everything, setup))
    return [
        Swap(part, direction, lr, lr == setup.curves[0 if direction == "add" else 5].best_lr, d)
        for (part, direction, lr), d in judged.items()
    ]


def swap_verdict(swap: Swap) -> str:
    """What the swap at the model's best lr says, in one sentence."""
    said = {
        ("add", -1): N_("At its best lr, vanilla still gains from {part}, beyond noise."),
        ("add", 0): N_("At its best lr, vanilla gains nothing from {part} beyond noise."),
        ("add", 1): N_("At its best lr, {part} makes vanilla worse, beyond noise."),
        ("remove", 1): N_("At its best lr, the mini-LLaMA is worse without {part}, beyond noise: it still needs it."),
        ("remove", 0): N_("At its best lr, the mini-LLaMA loses nothing beyond noise without {part}."),
        ("remove", -1): N_("At its best lr, the mini-LLaMA is better without {part}, beyond noise."),
    }.get((swap.direction, swap.difference.sign))
    if said is None:
        return _("At its best lr, {part}'s effect is not testable here (no noise estimate).").format(
            part=_(PART_NAMES[swap.part])
        )
    return _(said).format(part=_(PART_NAMES[swap.part]))


def swaps_text(everything: Results, setup: Setup) -> str | None:
    """Stage 3 in words: each swap's difference at the best lr and at the other lrs it ran, and
    whether the part still earns anything there; None before a swap at the best lr has finished."""
    found = swaps(everything, setup)
    said = []
    for (part, direction), group in pd.DataFrame(
        [(s.part, s.direction, s) for s in found], columns=["part", "direction", "swap"]
    ).groupby(["part", "direction"], sort=False):
        group = list(group["swap"])
        best = [s for s in group if s.at_best]
        if not best:
            continue
        others = listed(
            _("{difference} at lr {lr}").format(difference=interval_text(s.difference), lr=f"{s.lr:g}")
            for s in sorted(group, key=lambda s: s.lr)
            if not s.at_best
        )
        values = dict(part=_(PART_NAMES[part]), lr=f"{best[0].lr:g}", difference=interval_text(best[0].difference))
        template = {
            "add": (
                N_("Vanilla with {part} minus vanilla, at vanilla's best lr {lr}: {difference}."),
                N_("Vanilla with {part} minus vanilla, at vanilla's best lr {lr}: {difference}; against {others}."),
            ),
            "remove": (
                N_("The mini-LLaMA without {part} minus the mini-LLaMA, at its best lr {lr}: {difference}."),
                N_(
                    "The mini-LLaMA without {part} minus the mini-LLaMA, at its best lr {lr}: {difference}; "
                    "against {others}."
                ),
            ),
        }[direction][bool(others)]
        said += [_(template).format(others=others, **values), swap_verdict(best[0])]
    return sentences(said) or None


@dataclass
class Schedule:
    """Both models with another schedule, each at the lr of its constant-lr best (stage 4)."""

    name: str  # the schedule, e.g. "cosine"
    lrs: dict[int, float]  # n_parts -> the lr both schedules ran at
    gap: Difference  # llama minus vanilla with this schedule
    change: dict[int, Difference]  # n_parts -> this schedule minus a constant lr, same lr


def schedules(everything: Results, setup: Setup) -> list[Schedule]:
    """Every other schedule both models ran on this setup, each judged as one table of three:
    the gap with it, and each model's change from a constant lr."""
    if setup.runs is None or setup.verdict is None:
        return []
    plain = setup.runs[setup.runs["part"].isna() & (setup.runs["schedule"] != "constant")]
    found = []
    for name, runs in plain.groupby("schedule"):
        mine = {n: same_shape(runs[runs["n_parts"] == n], setup.curves[n], but=("schedule",)) for n in MODELS}
        if any(m.empty or m["lr"].nunique() != 1 for m in mine.values()):
            continue
        lrs = {n: float(mine[n]["lr"].iloc[0]) for n in MODELS}
        table = judge(
            {
                "gap": compare(everything.noise, mine[5], mine[0]),
                **{n: compare(everything.noise, mine[n], setup.curves[n].at(lrs[n])) for n in MODELS},
            }
        )
        found.append(Schedule(str(name), lrs, table["gap"], {n: table[n] for n in MODELS}))
    return found


def schedule_text(setup: Setup, schedule: Schedule) -> str:
    """Stage 4 in words: the gap with the other schedule, each model's change, and whether the
    ranking at a constant lr survives it."""
    values = dict(
        schedule=schedule.name,
        vanilla_lr=f"{schedule.lrs[0]:g}",
        llama_lr=f"{schedule.lrs[5]:g}",
        gap=interval_text(schedule.gap),
        vanilla=interval_text(schedule.change[0]),
        llama=interval_text(schedule.change[5]),
        constant=interval_text(setup.verdict),
    )
    said = [
        _(
            "With a {schedule} schedule (vanilla at lr {vanilla_lr}, mini-LLaMA at lr {llama_lr}), llama minus "
            "vanilla is {gap}. Against a constant lr at the same lr, the {schedule} schedule changes vanilla's best "
            "val by {vanilla} and the mini-LLaMA's by {llama}."
        ).format(**values)
    ]
    before, after = setup.verdict.sign, schedule.gap.sign
    if before is None or after is None:
        said.append(_("Whether the ranking survives is not testable here (no noise estimate)."))
    elif before == after:
        said.append(
            {
                -1: _("**The ranking survives the schedule**: with either schedule the mini-LLaMA is lower."),
                0: _(
                    "**The ranking survives the schedule**: with either schedule the two models are level within noise."
                ),
                1: _("**The ranking survives the schedule**: with either schedule vanilla is lower."),
            }[after]
        )
    else:
        said.append(
            _(
                "**The ranking changes with the schedule**: llama minus vanilla is {constant} at a constant lr, "
                "and {gap} with the {schedule} schedule."
            ).format(**values)
        )
    caveat = None
    if all(schedule.lrs[n] == setup.curves[n].best_lr for n in MODELS):
        caveat = _(
            "Both lrs are the best for a constant lr; with the {schedule} schedule each model's best lr may lie "
            "elsewhere, so this compares the schedules at those lrs, not each model at its best with the "
            "{schedule} schedule."
        ).format(**values)
    return "\n\n".join(filter(None, [sentences(said), caveat]))


# ---------------------------------------------------------------------------------------------
# Stage 7: another optimizer recipe, each model at its own best lr with it


@dataclass
class Recipe:
    """Both models trained with another optimizer recipe, each over lrs of its own (stage 7)."""

    name: str  # the recipe, as anatomy.config.optimizer_recipe words it
    curves: dict[int, Curve]  # n_parts -> best val against lr with this recipe
    gap: Difference  # llama at its best lr minus vanilla at its, with this recipe
    change: dict[int, Difference]  # n_parts -> its best with this recipe minus its best with the default

    @property
    def bracketed(self) -> bool:
        return all(curve.bracketed for curve in self.curves.values())


def recipes(everything: Results, setup: Setup) -> list[Recipe]:
    """Every other optimizer recipe both models ran on this setup, at a constant lr. Each is
    judged as one table of three: the gap with it, and each model's change from the default
    recipe, every side at its model's own best lr with its recipe."""
    if setup.runs is None or setup.verdict is None:
        return []
    runs = setup.runs
    other = runs[runs["part"].isna() & (runs["schedule"] == "constant") & (runs["optimizer"] != DEFAULT_RECIPE)]
    first_steps = everything.metrics.groupby("run_id")["step"].min()
    found = []
    for name, with_recipe in other.groupby("optimizer"):
        curves = {}
        for n_parts in MODELS:
            mine = same_shape(with_recipe[with_recipe["n_parts"] == n_parts], setup.curves[n_parts])
            if not mine.empty:
                curves[n_parts] = Curve(n_parts, mine, points_of(mine, first_steps))
        if set(curves) != set(MODELS) or any(curve.best_lr is None for curve in curves.values()):
            continue
        best = {n: curves[n].at(curves[n].best_lr) for n in MODELS}
        default = {n: setup.curves[n].at(setup.curves[n].best_lr) for n in MODELS}
        table = judge(
            {
                "gap": compare(everything.noise, best[5], best[0]),
                **{n: compare(everything.noise, best[n], default[n]) for n in MODELS},
            }
        )
        found.append(Recipe(str(name), curves, table["gap"], {n: table[n] for n in MODELS}))
    return found


def recipe_text(setup: Setup, recipe: Recipe) -> str:
    """Stage 7 in words: each model's lrs with the recipe, the gap at each one's best, each
    model's change from the default recipe, and whether the verdict is the architecture's."""
    vanilla, llama = recipe.curves[0], recipe.curves[5]
    values = dict(
        recipe=recipe_words(recipe.name),
        default=recipe_words(DEFAULT_RECIPE),
        vanilla_lr=f"{vanilla.best_lr:g}",
        llama_lr=f"{llama.best_lr:g}",
        gap=interval_text(recipe.gap),
        vanilla=interval_text(recipe.change[0]),
        llama=interval_text(recipe.change[5]),
        constant=interval_text(setup.verdict),
    )
    # two paragraphs, so that each can be scanned: the curves with the recipe, then the verdict
    curves = sentences(
        [
            _("With the optimizer recipe {recipe} (every other run here: {default}):").format(**values),
            curve_text(vanilla),
            curve_text(llama),
        ]
    )
    said = []
    if not recipe.bracketed:
        edge = listed(curve.name for curve in recipe.curves.values() if not curve.bracketed)
        said.append(
            _(
                "**Not testable here yet**: at the best lr found with it (vanilla {vanilla_lr}, mini-LLaMA "
                "{llama_lr}), llama minus vanilla is {gap}, but the best lr of {models} lies at the edge of the lrs "
                "tried."
            ).format(models=edge, **values)
        )
        return f"{curves}\n\n{sentences(said)}"
    said.append(
        _(
            "At each model's own best lr with it (vanilla {vanilla_lr}, mini-LLaMA {llama_lr}), llama minus vanilla "
            "is {gap}. Against the default recipe, each model at its own best lr with each, it changes vanilla's "
            "best val by {vanilla} and the mini-LLaMA's by {llama}."
        ).format(**values)
    )
    before, after = setup.verdict.sign, recipe.gap.sign
    if before is None or after is None:
        said.append(_("Whether the verdict survives the recipe is not testable here (no noise estimate)."))
    elif before == after:
        said.append(_("**The verdict is the architecture's**: it is the same with either optimizer recipe."))
    else:
        said.append(
            _(
                "**The verdict is the recipe's**: llama minus vanilla is {constant} with the default recipe, and "
                "{gap} with this one."
            ).format(**values)
        )
    return f"{curves}\n\n{sentences(said)}"


def figure_names(found: list[Setup], study: str = STUDY) -> list[str]:
    """Each setup's figure file name: the study's (`lr`) for the first (the largest), then `lr_`
    and its corpus."""
    corpus = [re.sub("[^a-z0-9]+", "_", str(s.key["corpus"]).lower()).strip("_") for s in found[1:]]
    return [study] + [f"{study}_{name}" for name in corpus]


def figure_caption(setup: Setup) -> str:
    return _(
        "Best val against learning rate on {setup} (band: min to max over seeds; ringed: each model's best lr; "
        "cross: a run diverged)"
    ).format(setup=setup.label)


def setup_text(everything: Results, setup: Setup) -> str:
    """One setup's paragraphs: the curves, the verdict, the sensitivity, the swaps and schedules."""
    noise = noise_of(everything.noise, pd.DataFrame([setup.key]))
    paragraph = [
        _("On {setup} ({noise}):").format(setup=setup.label, noise=noise_text(noise)),
        *(curve_text(curve) for curve in setup.curves.values()),
    ]
    parts = [sentences(paragraph)]
    if verdict := verdict_text(setup):
        parts.append(verdict)
    if sensitivity := sensitivity_text(setup):
        parts.append(sensitivity)
    if bias := pick_bias_text(everything, setup):
        parts.append(bias)
    if swapped := swaps_text(everything, setup):
        parts.append(swapped)
    parts += [schedule_text(setup, schedule) for schedule in schedules(everything, setup)]
    parts += [recipe_text(setup, recipe) for recipe in recipes(everything, setup)]
    return "\n\n".join(parts)


HOW_TO_READ = N_(
    "Each point is a model's mean best val over the seeds finished at that lr. The interval is the 95% interval of "
    "the difference of the two means, from the per-run sd pooled over the setup's two-seed trainings."
)


def runner_up(curve: Curve) -> float | None:
    """The lr whose mean best val is second to the best's."""
    finished = curve.points.dropna(subset=["mean"]).sort_values("mean")
    return float(finished["lr"].iloc[1]) if len(finished) > 1 else None


def pick_bias_text(everything: Results, setup: Setup) -> str | None:
    """The best lr is picked on the same runs it is judged on. That flatters a model whose
    runner-up lr is within noise of its best (its best may be partly the seeds' luck), not both
    alike: say which models that is, on this setup."""
    close = []
    for curve in setup.curves.values():
        if curve.best_lr is None or (second := runner_up(curve)) is None:
            continue
        d = judge_one(compare(everything.noise, curve.at(second), curve.at(curve.best_lr)))
        if d.sign == 0:
            close.append(
                _("{model} (lr {second}: {difference})").format(
                    model=curve.name, second=f"{second:g}", difference=interval_text(d)
                )
            )
    if not close:
        return _(
            "Each best lr is picked on the same runs it is judged on; here each model's runner-up lr is worse beyond "
            "noise, so the pick flatters neither."
        )
    return _(
        "Each best lr is picked on the same runs it is judged on. That flatters a model whose runner-up lr is "
        "within noise of its best, here {models}: its best may be partly the seeds' luck."
    ).format(models=listed(close))


def lr_section(
    everything: Results, figure: Callable[[str, str], str] = lambda name, caption: "", group: str = STUDY
) -> str | None:
    """The section of the study `group` (the lr study's, or another whose points are setups), or
    None before it has any run. figure(name, caption) links a setup's figure
    (anatomy.report.figures), after that setup's paragraphs."""
    found = setups(everything, group=group)
    if not found:
        return None
    parts = [
        setup_text(everything, setup) + figure(name, figure_caption(setup))
        for setup, name in zip(found, figure_names(found, group))
    ]
    return "\n\n".join([*parts, _(HOW_TO_READ)])


def lr_points(everything: Results, group: str = STUDY) -> pd.DataFrame:
    """The figure's data: one row per setup, model and lr, with the band over seeds, the diverged
    count and whether it is the model's best lr (anatomy.report.charts.lr_chart)."""
    rows = []
    for setup in setups(everything, group=group):
        for curve in setup.curves.values():
            for point in curve.points.to_dict("records"):
                rows.append(
                    {
                        "setup": setup.label,
                        "model": MODELS[curve.n_parts],
                        **point,
                        "best": point["lr"] == curve.best_lr,
                    }
                )
    return pd.DataFrame(rows, columns=LR_POINT_COLUMNS)


LR_POINT_COLUMNS = ["setup", "model", "lr", "mean", "min", "max", "seeds", "diverged", "stalled", "best"]
