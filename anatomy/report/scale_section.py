"""The scale study's section of the report: when does the mini-LLaMA win?

On the default corpus a 2000-step run reads its training text about 77 times, and the
mini-LLaMA's faster learning turns into memorising. The scale study (group `scale`,
workflow/experiments.yaml) trains the headline pair on nested training sets of one corpus of
poems, read 64 times, 8 times and once, and asks where the mini-LLaMA's best val is lower.

Roles come from settings, as everywhere in the report: a size is a training-set size (its token
count), a model is vanilla (none of the five parts) or the mini-LLaMA (all five), and stage 3 is
the pair at another learning rate. The part ablations at the largest size (stage 2) are listed
by the report's own ablation table (anatomy/report/grid_sections.py).

Every "beyond noise" here is the one rule of anatomy/report/uncertainty.py: a difference of mean
best val gets an interval from the pooled seed noise of its setup (the setup_noise view), and the
differences one table makes are judged together (Holm): llama minus vanilla over the sizes, the
ten ablations of stage 2; stage 3's difference and the grid's headline gap are judged alone.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable

import pandas as pd

from anatomy.config import TrainConfig
from anatomy.language import N_, _, ngettext, pgettext
from anatomy.results.reader import Results
from anatomy.report import lr_section
from anatomy.report.claims import PARTS
from anatomy.report.costs_section import job_seconds
from anatomy.report.roles import headline_of, only_runs_of, paired_deltas
from anatomy.report.wording import (
    and_list,
    by_seed,
    clauses,
    fmt,
    listed,
    md_table,
    part_name,
    per_seed,
    seed_list,
    sentences as joined_sentences,
)
from anatomy.report.uncertainty import (
    Difference,
    Noise,
    compare,
    interval_text,
    judge,
    judge_one,
    judged_against_baselines,
    noise_of,
    noise_text,
)

STUDY = "scale"
MODELS = {0: "vanilla", 5: "mini-LLaMA"}  # n_parts -> name


@dataclasses.dataclass
class Size:
    """The headline pair trained on one training-set size."""

    train_tokens: int
    vanilla: pd.DataFrame
    llama: pd.DataFrame
    gap: pd.Series  # llama minus vanilla best val, seed by seed (negative: llama lower)
    setup: Noise  # the pooled seed noise of this size's setup (corpus, size, precision)
    difference: Difference  # llama minus vanilla mean best val, judged with the other sizes (Holm)


def once_per(compute: Callable) -> Callable:
    """`compute(results)` done once per Results object: a report or a page asks for the study and its
    sizes several times in one render. The answer is kept on that object, so it goes when the object
    goes, and a new Results (the next render's) computes its own."""

    @functools.wraps(compute)
    def cached(results: Results):
        kept = vars(results).setdefault("_once_per", {})  # by name: plain data, should it be copied
        if compute.__qualname__ not in kept:
            kept[compute.__qualname__] = compute(results)
        return kept[compute.__qualname__]

    return cached


@once_per
def scale_data(everything: Results) -> Results:
    return only_runs_of(everything, STUDY)


def model_runs(study: Results) -> pd.DataFrame:
    """The study's vanilla and mini-LLaMA runs (no ablation), at every learning rate."""
    runs = study.runs
    return runs[runs["n_parts"].isin(list(MODELS)) & runs["part"].isna()]


def pair_runs(study: Results, lr: float = TrainConfig.lr) -> pd.DataFrame:
    """The study's vanilla and mini-LLaMA runs at one learning rate (the default: stages 1 and 2's)."""
    runs = model_runs(study)
    return runs[runs["lr"] == lr]


def tokens_read(runs: pd.DataFrame, metrics: pd.DataFrame, step_column: str) -> pd.Series:
    """How many tokens each run had read by the step in `step_column` (its metrics' tokens_seen)."""
    seen = metrics.set_index(["run_id", "step"])["tokens_seen"]
    keys = list(zip(runs["run_id"], runs[step_column]))
    return pd.Series([seen.get(key, math.nan) for key in keys], index=runs.index, dtype=float)


@once_per
def sizes(study: Results) -> list[Size]:
    """Each training-set size with both models, smallest first. Llama minus vanilla at every size is
    one table of comparisons, judged together (Holm over the sizes); a size whose setup has no
    noise estimate is not testable and is not counted."""
    pairs = pair_runs(study)
    found = []
    for train_tokens, runs in sorted(pairs.groupby("train_tokens"), key=lambda item: item[0]):
        vanilla, llama = runs[runs["n_parts"] == 0], runs[runs["n_parts"] == 5]
        if vanilla.empty or llama.empty:
            continue
        found.append(
            Size(
                int(train_tokens),
                vanilla,
                llama,
                paired_deltas(llama, vanilla),
                noise_of(study.noise, runs),
                compare(study.noise, llama, vanilla),
            )
        )
    judged = judge({size.train_tokens: size.difference for size in found})
    return [dataclasses.replace(size, difference=judged[size.train_tokens]) for size in found]


def passes(runs: pd.DataFrame, metrics: pd.DataFrame, step_column: str) -> str:
    """Times each run had read its training text by that step, seed by seed (42 / 7)."""
    read = tokens_read(runs, metrics, step_column) / runs["train_tokens"]
    return per_seed(runs.assign(passes=read), "passes", digits=2)


def final_steps(runs: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    last = metrics.groupby("run_id")["step"].max()
    return runs.assign(last_step=runs["run_id"].map(last))


def beyond_words(sign: int | None) -> str:
    """The size table's "beyond noise?" cell for the judged difference's sign."""
    if sign is None:
        return _("not testable here")
    if sign == 0:
        return pgettext("beyond noise?", "no")
    return _("**yes**, llama lower") if sign == -1 else _("**yes**, vanilla lower")


def times_read(study: Results, train_tokens: int) -> float:
    """How many times the runs of one training-set size read their text by their last evaluation
    (the median over them: every run of a size takes the same steps)."""
    runs = final_steps(study.runs[study.runs["train_tokens"] == train_tokens], study.metrics)
    return float((tokens_read(runs, study.metrics, "last_step") / train_tokens).median())


def minutes_per_run(study: Results, train_tokens: int) -> str:
    """The mean training job of this size's shipped runs, in minutes (grid.json); "–" unrecorded."""
    records = (study.provenance or {}).get("runs", {})
    run_ids = study.runs.loc[study.runs["train_tokens"] == train_tokens, "run_id"]
    jobs = [job_seconds(records[run_id]) for run_id in run_ids if run_id in records]
    return f"{sum(jobs) / len(jobs) / 60:.1f}" if jobs else "–"


def size_table(study: Results, found: list[Size]) -> str:
    rows = []
    for size in found:
        rows.append(
            [
                f"{size.train_tokens:,}",
                f"{times_read(study, size.train_tokens):.2f}",
                minutes_per_run(study, size.train_tokens),
                per_seed(size.vanilla, "best_val_loss"),
                per_seed(size.llama, "best_val_loss"),
                by_seed(size.gap),
                interval_text(size.difference),
                noise_text(size.setup),
                beyond_words(size.difference.sign),
                f"{per_seed(size.vanilla, 'best_step')} · {per_seed(size.llama, 'best_step')}",
                f"{passes(size.vanilla, study.metrics, 'best_step')} · {passes(size.llama, study.metrics, 'best_step')}",
                f"{per_seed(size.vanilla, 'train_val_gap')} · {per_seed(size.llama, 'train_val_gap')}",
            ]
        )
    return md_table(
        [
            _("training characters"),
            _("times read by the run"),
            _("minutes per run"),
            _("vanilla best val"),
            _("mini-LLaMA best val"),
            _("llama minus vanilla"),
            _("mean difference and its interval"),
            _("noise of the setup"),
            _("beyond noise?"),
            _("best step (vanilla · llama)"),
            _("times read by the best step (vanilla · llama)"),
            _("final val minus final train (vanilla · llama)"),
        ],
        rows,
    )


def verdict(study: Results, found: list[Size]) -> str:
    """The chapter's hypothesis: learning fast is pure gain when the data is read less than once,
    judged at the largest size whose run reads its training text at most once."""
    once = []
    for size in found:
        runs = final_steps(pd.concat([size.vanilla, size.llama]), study.metrics)
        if (tokens_read(runs, study.metrics, "last_step") <= size.train_tokens).all():
            once.append(size)
    if not once:
        return _(
            "**not testable here yet**: no size whose runs read the training text at most once has "
            "both models trained (`snakemake scale_stage1`)"
        )
    size = once[-1]
    where = _("on {tokens} characters, read at most once on average (random windows, drawn with replacement)").format(
        tokens=f"{size.train_tokens:,}"
    )
    sign = size.difference.sign
    if sign is None:
        said = _(
            "**not testable here yet**: {where}, llama minus vanilla is {gap}, but its setup has no noise "
            "estimate: no experiment in it has two seeds"
        )
    elif sign == -1:
        said = _(
            "**reproduced**: {where}, the mini-LLaMA's best val is lower: llama minus vanilla is {difference}, "
            "beyond noise ({noise})"
        )
    elif sign == 1:
        said = _(
            "**not reproduced**: {where}, vanilla's best val is lower: llama minus vanilla is {difference}, "
            "beyond noise ({noise})"
        )
    else:
        said = _(
            "**not reproduced**: {where}, llama minus vanilla is {difference}, within noise ({noise}): "
            "the mini-LLaMA's best val is not lower even where it reads the text at most once and so cannot "
            "memorise it"
        )
    return said.format(
        where=where,
        gap=fmt(size.difference.mean, sign=True),
        difference=interval_text(size.difference),
        noise=noise_text(size.setup),
    )


def where_it_wins(found: list[Size]) -> str:
    """Where either model's best val is lower beyond noise, the sizes judged together."""
    signs = {f"{size.train_tokens:,}": size.difference.sign for size in found}
    wins = [tokens for tokens, sign in signs.items() if sign == -1]
    losses = [tokens for tokens, sign in signs.items() if sign == 1]
    untested = [tokens for tokens, sign in signs.items() if sign is None]
    if len(untested) == len(signs):
        return _("No size's setup has a noise estimate yet (no experiment in it has two seeds), so none is judged.")
    if wins and losses:
        said = _(
            "At one shared lr, {lr}, the mini-LLaMA's best val is lower beyond noise on {wins} characters; "
            "vanilla's on {losses}."
        )
    elif wins:
        said = _("At one shared lr, {lr}, the mini-LLaMA's best val is lower beyond noise on {wins} characters.")
    elif losses:
        said = _("At one shared lr, {lr}, vanilla's best val is lower beyond noise on {losses} characters.")
    else:
        said = _("At one shared lr, {lr}, neither model is lower beyond noise at any size.")
    said = said.format(wins=listed(wins), losses=listed(losses), lr=f"{TrainConfig.lr:g}")
    if untested:
        untested_said = _(
            "On {untested} characters it is not testable here: no experiment in that setup has two seeds."
        ).format(untested=listed(untested))
        said = joined_sentences([said, untested_said])
    return said


def largest_as_headline(study: Results) -> Results | None:
    """The largest size's pair in the headline's roles and the ablations against them (stage 2), so
    that the report's ablation table lists them as it lists the grid's; None without any."""
    found = sizes(study)
    ablations = study.comparisons[study.comparisons["part"].notna() & study.comparisons["direction"].notna()]
    if not found or ablations.empty:
        return None
    largest = found[-1]
    pair_ids = set(largest.vanilla["run_id"]) | set(largest.llama["run_id"])
    runs = study.runs.assign(
        group=study.runs["run_id"].map(lambda run_id: "headline" if run_id in pair_ids else "scale")
    )
    return dataclasses.replace(study, runs=runs, ablations=ablations.reset_index(drop=True))


# an ablation's direction and the sign of its judged difference -> what it does (shown with _())
MOVES = {
    ("add", -1): N_("adding {part} to vanilla lowers best val, Δ {change}"),
    ("add", 1): N_("adding {part} to vanilla raises best val, Δ {change}"),
    ("remove", 1): N_("removing {part} from the mini-LLaMA raises best val, Δ {change}"),
    ("remove", -1): N_("removing {part} from the mini-LLaMA lowers best val, Δ {change}"),
}


def stage2_differences(study: Results) -> dict[tuple[str, str], Difference]:
    """The ablations at the largest size against their baselines, (part, direction) -> the
    difference, judged together as one table (Holm over them); {} before any stage-2 run."""
    largest = largest_as_headline(study)
    if largest is None:
        return {}
    tokens = sizes(study)[-1].train_tokens
    at_largest = set(study.runs.loc[study.runs["train_tokens"] == tokens, "experiment"])
    names = {
        (row.part, row.direction): row.experiment
        for row in largest.ablations.itertuples()
        if row.experiment in at_largest
    }
    judged = judged_against_baselines(study, names.values())
    return {key: judged[name] for key, name in names.items()}


def which_part_earns(study: Results) -> str | None:
    """Stage 2 in words, for the README's headline and the dashboard: the ablations at the largest
    size that move best val beyond noise, judged together, each with its interval, and how many
    are within noise, not trained yet or without a noise estimate. None before any stage-2 run."""
    if largest_as_headline(study) is None:
        return None
    found = sizes(study)
    judged = stage2_differences(study)
    total = 2 * len(PARTS)
    moves, inside, untrained, untestable = [], 0, 0, 0
    for part in PARTS:
        for direction in ("add", "remove"):
            d = judged.get((part, direction))
            if d is None or not math.isfinite(d.mean):
                untrained += 1
            elif d.sign is None:
                untestable += 1
            elif d.sign:
                moves.append(_(MOVES[(direction, d.sign)]).format(part=part_name(part), change=interval_text(d)))
            else:
                inside += 1
    n = total - untrained - untestable  # the comparisons judged together
    values = dict(
        tokens=f"{found[-1].train_tokens:,}",
        lr=f"{TrainConfig.lr:g}",
        noise=noise_text(found[-1].setup),
        moves=clauses(moves),
        n=n,
    )
    if not n:
        said = [
            _("At {tokens} characters and lr {lr} (stage 2), no ablation can be judged yet ({noise}).").format(**values)
        ]
    elif moves:
        said = [
            ngettext(
                "At {tokens} characters and lr {lr} (stage 2), {n} ablation is judged against the noise of its setup "
                "({noise}); beyond it: {moves}.",
                "At {tokens} characters and lr {lr} (stage 2), {n} ablations are judged together against the noise of "
                "their setup ({noise}); beyond it: {moves}.",
                n,
            ).format(**values)
        ]
    else:
        said = [
            ngettext(
                "At {tokens} characters and lr {lr} (stage 2), {n} ablation is judged against the noise of its setup "
                "({noise}): it does not move best val beyond noise.",
                "At {tokens} characters and lr {lr} (stage 2), {n} ablations are judged together against the noise of "
                "their setup ({noise}): none moves best val beyond noise.",
                n,
            ).format(**values)
        ]
    if inside and moves:
        said.append(
            ngettext(
                "{n} of the {total} ablations stays within noise.",
                "{n} of the {total} ablations stay within noise.",
                inside,
            ).format(n=inside, total=total)
        )
    if untestable and n:
        said.append(
            ngettext(
                "{n} of the {total} ablations has no noise estimate to be judged by.",
                "{n} of the {total} ablations have no noise estimate to be judged by.",
                untestable,
            ).format(n=untestable, total=total)
        )
    if untrained:
        said.append(
            ngettext(
                "{n} of the {total} ablations is not trained yet.",
                "{n} of the {total} ablations are not trained yet.",
                untrained,
            ).format(n=untrained, total=total)
        )
    return joined_sentences(said)


def own_lr_scope(everything: Results) -> str | None:
    """Where the lr study has an answer on this study's largest text (each model at its own best
    lr, both optima bracketed, two seeds), it answers this study's lr question better: one sentence
    that says so and where, so that no shared-lr sentence here reads as the last word. None where
    the lr study has no answer there yet."""
    found = sizes(scale_data(everything))
    tokens = found[-1].train_tokens if found else None
    for setup in lr_section.setups(everything):
        answered = setup.verdict is not None and all(curve.bracketed for curve in setup.curves.values())
        if answered and int(setup.key["train_tokens"]) == tokens:
            return _(
                "These sentences hold at the shared lr only: the lr study, each model at its own best lr on the "
                "same text, answers this question better (the next section)."
            )
    return None


def other_lr_text(everything: Results) -> str | None:
    """Stage 3: the pair at another learning rate, against the same pair at the default one, and
    whether the gap survives when each model trains at the better of the learning rates tried
    (where the lr study has not answered that better)."""
    study = scale_data(everything)
    runs = model_runs(study)
    other = sorted(set(runs["lr"]) - {TrainConfig.lr})
    if not other:
        return None
    sentences = []
    for lr in other:
        at_lr = runs[runs["lr"] == lr]
        for train_tokens, group in at_lr.groupby("train_tokens"):
            vanilla, llama = group[group["n_parts"] == 0], group[group["n_parts"] == 5]
            base = runs[(runs["lr"] == TrainConfig.lr) & (runs["train_tokens"] == train_tokens)]
            if vanilla.empty or llama.empty:
                continue
            gap = paired_deltas(llama, vanilla)
            default_gap = paired_deltas(base[base["n_parts"] == 5], base[base["n_parts"] == 0])
            sentences.append(
                _(
                    "At lr {lr} on {tokens} characters: best val vanilla {vanilla}, mini-LLaMA {llama}, "
                    "llama minus vanilla {gap} (seed {seeds}), against {default_gap} at lr {default_lr}."
                ).format(
                    lr=f"{lr:g}",
                    tokens=f"{int(train_tokens):,}",
                    vanilla=per_seed(vanilla, "best_val_loss"),
                    llama=per_seed(llama, "best_val_loss"),
                    gap=by_seed(gap),
                    seeds=seed_list(gap.index),
                    default_gap=by_seed(default_gap),
                    default_lr=f"{TrainConfig.lr:g}",
                )
            )
    if superseded := own_lr_scope(everything):
        sentences.append(superseded)
    elif verdicts := better_lr_answer(study):
        sentences.append(verdicts)
    return joined_sentences(sentences) or None


def better_lr_answer(study: Results) -> str | None:
    """Stage 3's verdict at each size trained at more than one lr (the README's headline says it
    too), or None before both models ran at another lr."""
    runs = model_runs(study)
    said = [
        verdict
        for _tokens, at_size in runs.groupby("train_tokens")
        if at_size["lr"].nunique() > 1 and (verdict := better_lr_verdict(at_size, study.noise))
    ]
    return joined_sentences(said) or None


def better_lr_verdict(at_size: pd.DataFrame, noise_table: pd.DataFrame) -> str | None:
    """Each model at the better of the learning rates it was trained at, over the seeds every one of
    them has: is the mini-LLaMA still lower? Stage 3's question: does the gap exist only because
    both models share one learning rate? The difference is judged alone, with the pooled noise of
    the size's setup (`noise_table`: Results.noise), so one seed each can be judged. None without
    both models at every one of those rates."""
    lrs = sorted(at_size["lr"].unique())
    seeds = set.intersection(*(set(runs["seed"]) for _, runs in at_size.groupby(["n_parts", "lr"])))
    common = at_size[at_size["seed"].isin(seeds)]
    best = common.groupby(["n_parts", "lr"])["best_val_loss"].mean().unstack()  # model x lr
    if set(best.index) != set(MODELS) or best.isna().any(axis=None) or best.shape[1] != len(lrs):
        return None
    best_lr = best.idxmin(axis=1)
    vanilla, llama = best.loc[0].min(), best.loc[5].min()

    def at_best(model: int) -> pd.DataFrame:
        return common[(common["n_parts"] == model) & (common["lr"] == best_lr[model])]

    difference = judge_one(compare(noise_table, at_best(5), at_best(0)))
    noise = noise_of(noise_table, common)
    if difference.sign is None:
        judged = _("with no noise estimate for this setup to judge it by")
    elif difference.sign == -1:
        judged = _("the mini-LLaMA is still lower, beyond noise ({noise}): the gap is not only the shared lr")
    elif difference.sign == 1:
        judged = _("vanilla is lower, beyond noise ({noise}): the gap came from the shared lr")
    else:
        judged = _("within noise ({noise}), so the two models are level: the gap came from the shared lr")
    listed_seeds = seed_list(seeds)
    said = _(
        "Each model at the better of lr {lrs} (stage 3, {seeds}): vanilla {vanilla} at lr {vanilla_lr}, mini-LLaMA "
        "{llama} at lr {llama_lr}; llama minus vanilla {difference}: {judged}."
    ).format(
        lrs=and_list(f"{lr:g}" for lr in lrs),
        seeds=(_("one seed each, seed {seeds}") if len(seeds) == 1 else _("seeds {seeds}")).format(seeds=listed_seeds),
        vanilla=fmt(vanilla),
        vanilla_lr=f"{best_lr[0]:g}",
        llama=fmt(llama),
        llama_lr=f"{best_lr[5]:g}",
        difference=interval_text(difference),
        judged=judged.format(noise=noise_text(noise)),
    )
    at_edge = [MODELS[model] for model, lr in best_lr.items() if lr == lrs[-1]]
    if at_edge:
        said = joined_sentences(
            [
                said,
                _("For {models}, the best lr is the highest tried: a higher one might lower best val further.").format(
                    models=and_list(at_edge)
                ),
            ]
        )
    return said


def grid_contrast(everything: Results, found: list[Size]) -> str | None:
    """The study's size read about as often as the grid reads its own text, set against the grid's
    headline answer: whether reading the data many times explains that answer. None without both."""
    grid = only_runs_of(everything, None)
    vanilla, llama = headline_of(grid, "vanilla"), headline_of(grid, "llama")
    grid_difference = judge_one(compare(grid.noise, llama, vanilla))  # the grid's headline gap, alone
    grid_side = grid_difference.sign
    if grid_side is None or not found or llama["train_tokens"].isna().all():
        return None
    grid_tokens = int(llama["train_tokens"].max())
    grid_read = times_read(grid, grid_tokens)
    study = scale_data(everything)
    read = {size.train_tokens: times_read(study, size.train_tokens) for size in found}
    size = min(found, key=lambda size: abs(math.log(read[size.train_tokens] / grid_read)))
    size_side = size.difference.sign
    if size_side is None:
        return None
    # TRANSLATORS: the mini-LLaMA's best val against vanilla's, in "its best val is ... beyond noise"
    lower = {-1: pgettext("best val", "lower"), 1: pgettext("best val", "higher"), 0: pgettext("best val", "not lower")}
    values = dict(
        grid_tokens=f"{grid_tokens:,}",
        grid_read=f"{grid_read:.0f}",
        grid_side=lower[grid_side],
        grid_difference=interval_text(grid_difference),
        size_tokens=f"{size.train_tokens:,}",
        size_read=f"{read[size.train_tokens]:.0f}",
        size_side=lower[size_side],
        lr=f"{TrainConfig.lr:g}",
    )
    said = _(
        "At lr {lr}, on the grid's own text ({grid_tokens} characters, read {grid_read} times) the mini-LLaMA's "
        "best val is {grid_side} beyond noise, llama minus vanilla {grid_difference}; on {size_tokens} characters "
        "of this study's text, read {size_read} times, it is {size_side}."
    )
    return said.format(**values)


def scale_answer(everything: Results) -> str | None:
    """The study's answer in two sentences (the report's section and the README's headline), or
    None before any size has both models."""
    study = scale_data(everything)
    found = sizes(study)
    if not found:
        return None
    answer = _(
        "{where_it_wins} At that lr, learning fast is pure gain when the data is read less than once "
        "(the chapter's hypothesis): {verdict}."
    ).format(where_it_wins=where_it_wins(found), verdict=verdict(study, found))
    paragraphs = [answer, own_lr_scope(everything), grid_contrast(everything, found)]
    return "\n\n".join(filter(None, paragraphs))


def scale_section(everything: Results) -> str | None:
    """The section's text without its ablation table (the report adds that), or None before
    any size has both models."""
    study = scale_data(everything)
    found = sizes(study)
    if not found:
        return None
    parts = [
        size_table(study, found),
        _(
            "Best val in nats per character, seeds 42 / 7. Times read: tokens seen (steps x batch x "
            "context) over the training characters. Minutes per run: the shipped runs' training jobs "
            "(the costs table has the study's total)."
        ),
        _(
            "Noise of the setup: the seed-to-seed spread of every "
            "experiment with two seeds on that size's text, pooled into one standard deviation per run. "
            "Beyond noise: the difference's 95% interval excludes zero, corrected because the sizes are "
            "judged together (Holm). All runs share one validation set of poems and one "
            "vocabulary, so every number in a column compares."
        ),
        scale_answer(everything),
    ]
    if lr_text := other_lr_text(everything):
        parts.append(lr_text)
    return "\n\n".join(parts)


def best_val_by_size(study: Results) -> pd.DataFrame:
    """One row per run of the pair at the default lr: size, model, seed, best val (the figure's data,
    anatomy.report.charts.best_val_by_size_chart)."""
    runs = pair_runs(study)
    return pd.DataFrame(
        {
            "train_tokens": runs["train_tokens"].astype(int),
            "model": runs["n_parts"].map(MODELS),
            "seed": runs["seed"].astype(int),
            "best_val_loss": runs["best_val_loss"],
        }
    ).dropna()
