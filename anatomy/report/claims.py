"""The chapter's claims, each next to our measurement with a verdict.

A verdict is computed from the data, never typed: reproduced, not reproduced, partly, or not yet
run. Every difference a claim states is a difference of means with its 95% interval, and it is
"beyond noise" when that interval excludes zero: the one rule of anatomy/report/uncertainty.py
(the per-run sd pooled over the setup's trainings with two seeds; a claim or table that makes
several comparisons judges them together, with Holm's correction). The ten ablations are one such
table (`ablation_family`): the ablation table, its chart, `part_effects` and
`largest_ablation_change` all read one verdict per ablation from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import pandas as pd

from anatomy.chapter import CHAPTER
from anatomy.config import ModelConfig
from anatomy.exams.depth import LEARNED_MARGIN
from anatomy.language import N_, _, ngettext, pgettext
from anatomy.results.reader import MODEL_FIELDS, Results
from anatomy.report.chart_data import part_deltas
from anatomy.report.protocol import protocol_of, unigram_loss
from anatomy.report.roles import deep_runs, headline_of, paired_deltas
from anatomy.report.wording import and_list, clauses, listed, part_name, per_seed, seed_list, stability_text
from anatomy.report.uncertainty import (
    Difference,
    compare,
    interval_text,
    judge,
    judge_one,
    judged_against_baselines,
    noise_of,
    noise_text,
    same_seeds,
    usable,
)

PARTS = ("rmsnorm", "prenorm", "rope", "gqa", "swiglu")  # the five swaps, as experiments.yaml names them
# val loss further than this above its minimum at the end of a run counts as memorising
MEMORISING_RISE = 0.1


# Why a claim about the turn cannot be judged on a run that never turned
STILL_FALLING = N_("val was still falling at the last evaluation")


def turned(runs: pd.DataFrame) -> pd.Series:
    """Whether each run's val loss turned: its best val came before its last evaluation. The
    premise of every claim about the best val as a turning point (it comes earlier, the model
    memorises after it, the last weights copy more than the best): a run still falling when it
    stopped has no "after its best", its best step is only where training ended, and its best and
    last weights are the same."""
    return runs["best_step"] < runs["final_val_step"]


def with_untested(verdict: str, seeds: set, reason: str) -> str:
    """A verdict with the seeds it leaves out, "**reproduced** (seed 7 not testable: REASON)"; the
    verdict alone where it leaves none out."""
    if not seeds:
        return verdict
    return ngettext(
        "{verdict} (seed {seeds} not testable: {reason})",
        "{verdict} (seeds {seeds} not testable: {reason})",
        len(seeds),
    ).format(verdict=verdict, seeds=seed_list(seeds), reason=reason)


# Why a difference has no interval (uncertainty.py: no noise estimate for a side's setup)
ONE_SEED = N_("one seed, and no training of this setup has a second to measure the noise by")
NO_NOISE_ESTIMATE = N_("no noise estimate for these runs' setup")
NO_COMMON_SEED = N_("no seed has a best val on both sides")


def untestable_reason(*sides: pd.DataFrame) -> str:
    """Why a difference of these runs has no interval: a side without a best val, one seed of each
    experiment and none in the setup with a second, or another reason the setup has no noise
    estimate (say, runs of several setups on one side)."""
    if any(usable(side).empty for side in sides):
        return _(NO_COMMON_SEED)
    seeds = usable(pd.concat(sides)).groupby("experiment")["seed"].nunique()
    return _(ONE_SEED) if seeds.empty or seeds.max() < 2 else _(NO_NOISE_ESTIMATE)


def not_testable(reason: str) -> str:
    return _("not testable here: {reason}").format(reason=reason)


def flipped(d: Difference) -> Difference:
    """b minus a from a minus b: the same interval, mirrored."""
    return replace(d, mean=-d.mean)


def noise_words(noise) -> str:
    """The setup's noise as a claim or a table quotes it."""
    return _("noise: {noise}").format(noise=noise_text(noise)) if noise.known else noise_text(noise)


@dataclass
class Claim:
    claim: str
    chapter: str
    measured: str
    verdict: str


def claims_by_key(data: Results) -> dict[str, Claim]:
    """Every claim, by the name the dashboard's pages ask for it by, in the report's order: the
    headline's three first, then the parts, the break tests and the cache."""
    others = {
        "copied": _memorised_sample(data),
        "which_part": _which_part(data),
        "deep_postnorm": _deep_claim(data),
        "broken_rope": _rope_claim(data),
        "mqa": _mqa_claim(data),
    }
    return {**headline_claims(data), **at_this_size(data, others)}


def at_this_size(data: Results, found: dict[str, Claim]) -> dict[str, Claim]:
    """The claims, each "not testable at this size" with the reason where the runs are not the
    chapter's (anatomy.report.protocol: a toy model, or one that learned nothing); as they are
    otherwise. What was measured stays beside it."""
    reason = protocol_of(data).untestable_reason
    if reason is None:
        return found
    verdict = _("**not testable at this size**: {reason}").format(reason=reason)
    not_run = _("not yet run")
    return {key: claim if claim.verdict == not_run else replace(claim, verdict=verdict) for key, claim in found.items()}


def claims(data: Results) -> list[Claim]:
    """Every claim, in the report's order (claims_by_key)."""
    return list(claims_by_key(data).values())


def finding_text(claim: Claim) -> str:
    """One claim as the sentence a dashboard page opens with: the verdict, the claim, what was
    measured and the chapter's figure; the report's table holds the same four cells."""
    verdict = claim.verdict.replace("**", "")
    verdict = verdict[:1].upper() + verdict[1:]
    # the claim is named as the chapter's, so that "Not reproduced" beside it reads as a verdict on it
    return _(
        "**{verdict}.** The chapter's claim, tested here: *{claim}*. Measured: {measured}. In the chapter: {chapter}."
    ).format(verdict=verdict, claim=claim.claim, measured=claim.measured, chapter=claim.chapter)


def headline_claims(data: Results) -> dict[str, Claim]:
    """The claims the headline pair answers, by key: it learns faster, reaches a lower best val,
    and memorises after it (the README's headline and the precision study judge these three)."""
    vanilla, llama = headline_of(data, "vanilla"), headline_of(data, "llama")
    both = sorted(set(vanilla["seed"]) & set(llama["seed"]))
    out, chapter = {}, chapter_figures()
    not_run = _("not yet run")

    # 1. llama learns faster: its best val comes earlier
    if both:
        earlier = paired_deltas(llama, vanilla, "best_step")
        # a seed tells where either model turned: the other's best, if it did not, comes later still
        turning = set(llama.loc[turned(llama), "seed"]) | set(vanilla.loc[turned(vanilla), "seed"])
        told = earlier[earlier.index.isin(turning)]
        measured = _("best val at step {llama} (mini-LLaMA) vs {vanilla} (vanilla)").format(
            llama=per_seed(llama, "best_step"), vanilla=per_seed(vanilla, "best_step")
        )
        if earlier.empty:
            verdict = _("not testable: no seed has a best val for both models")
        elif told.empty:
            verdict = _("not testable here: no run turned ({reason})").format(reason=_(STILL_FALLING))
        else:
            verdict = _("**reproduced**") if (told < 0).all() else _("**not reproduced**")
            verdict = with_untested(verdict, set(earlier.index) - turning, _("no run turned"))
    else:
        measured, verdict = _("headline not run"), not_run
    out["learns_faster"] = Claim(
        _("The mini-LLaMA learns faster: its best val comes earlier"), chapter["learns_faster"], measured, verdict
    )

    # 2. llama reaches a lower best val: the lowest val each reached in the same steps, a fair
    # comparison whether or not the runs turned (a run still falling would only go lower)
    if both:
        gap = headline_gap(data)
        measured = _("at lr {lr}: best val {llama} vs {vanilla}; llama minus vanilla {gap}").format(
            lr=shared_lr(llama),
            llama=per_seed(llama, "best_val_loss"),
            vanilla=per_seed(vanilla, "best_val_loss"),
            gap=interval_text(gap),
        )
        if math.isnan(gap.mean):
            verdict = _("not testable: no seed has a best val for both models")
        elif gap.mean >= 0 or gap.sign == 1:
            verdict = _("**not reproduced**")
        elif gap.sign == -1:
            verdict = _("**reproduced**")
        elif gap.sign is None:
            verdict = not_testable(untestable_reason(*same_seeds(llama, vanilla)))
        else:
            verdict = _("**not reproduced**: lower, but within noise")
        if math.isfinite(gap.mean):  # the verdict holds at the lr the pair shared, not at each model's own
            head, _colon, reason = verdict.partition(": ")
            verdict = _("{verdict} at lr {lr}").format(verdict=head, lr=shared_lr(llama)) + (
                f": {reason}" if reason else ""
            )
    else:
        measured, verdict = _("headline not run"), not_run
    out["lower_valley"] = Claim(
        _("The mini-LLaMA reaches a lower best val"), chapter["lower_valley"], measured, verdict
    )

    # 3. llama memorises after its best val: val up, train down
    if not llama.empty:
        judged = llama[turned(llama)]  # a run that never turned has no "after its best val"
        rising = (judged["val_rise"] > MEMORISING_RISE) & (judged["final_train_loss"] < judged["train_at_best"])
        measured = _(
            "after step {step} val rises by {rise} to {final_val}; train falls from {train_at_best} to {final_train}"
        ).format(
            step=per_seed(llama, "best_step"),
            rise=per_seed(llama, "val_rise"),
            final_val=per_seed(llama, "final_val_loss"),
            train_at_best=per_seed(llama, "train_at_best"),
            final_train=per_seed(llama, "final_train_loss"),
        )
        if judged.empty:
            verdict = _("not testable here: {reason}").format(reason=_(STILL_FALLING))
        else:
            verdict = _("**reproduced**") if rising.all() else _("**not reproduced**")
            verdict = with_untested(verdict, set(llama["seed"]) - set(judged["seed"]), _(STILL_FALLING))
    else:
        measured, verdict = _("mini-LLaMA not run"), not_run
    out["memorises"] = Claim(
        _("The mini-LLaMA memorises after its best val: val climbs while train falls"),
        chapter["memorises"],
        measured,
        verdict,
    )
    return at_this_size(data, out)


def shared_lr(runs: pd.DataFrame) -> str:
    """The lr the headline pair shared, as a claim scopes its verdict by it: the lr study found
    another answer with each model at its own lr (anatomy.report.findings)."""
    lrs = sorted(set(runs["lr"].dropna()))
    return listed(f"{lr:g}" for lr in lrs) if lrs else "–"


def chapter_figures() -> dict[str, str]:
    """The chapter's figure for each headline claim, by key: its published numbers
    (anatomy/chapter.py) in the claims table's words."""
    vanilla, llama = CHAPTER.vanilla, CHAPTER.llama
    return {
        # TRANSLATORS: the chapter's published figures: the step of each model's best val
        "learns_faster": _("step {llama} vs {vanilla}").format(llama=llama.best_step, vanilla=vanilla.best_step),
        # TRANSLATORS: the chapter's published figures: each model's best val loss (seed 42), their
        # gap, and the gap of the other seed
        "lower_valley": _("{llama} vs {vanilla} (gap {gap}); seed {seed}: gap {seed_gap}").format(
            llama=llama.best_val[0],
            vanilla=vanilla.best_val[0],
            gap=CHAPTER.gap[0],
            seed=CHAPTER.seeds[1],
            seed_gap=CHAPTER.gap[1],
        ),
        # TRANSLATORS: the chapter's published figures: the mini-LLaMA's val loss from its best to
        # its last step, and its train loss there
        "memorises": _("val {best} → {final_val} at step {step}, train → {final_train}").format(
            best=llama.best_val[0], final_val=llama.final_val, step=CHAPTER.steps, final_train=llama.final_train
        ),
    }


def headline_gap(data: Results) -> Difference:
    """The mini-LLaMA's mean best val minus vanilla's over the seeds both have (negative: llama
    lower), with its interval, judged on its own: the overall gain the five parts are asked to
    account for. Its mean is nan when no seed has a best val for both."""
    vanilla, llama = headline_of(data, "vanilla"), headline_of(data, "llama")
    return judge_one(compare(data.noise, llama, vanilla))


def _memorised_sample(data: Results) -> Claim:
    claim = _("The mini-LLaMA's sample from its final weights sounds right partly because it is memorised")
    chapter = _("confessed, not measured")
    llama = headline_of(data, "llama")
    samples = data.memorisation[data.memorisation["run_id"].isin(llama["run_id"])]
    by_run = {run_id: rows.set_index("checkpoint") for run_id, rows in samples.groupby("run_id")}
    pairs = {run_id: rows for run_id, rows in by_run.items() if {"best", "last"} <= set(rows.index)}
    if not pairs:
        return Claim(claim, chapter, _("no measured best and last samples"), _("not yet run"))
    seeds = llama.set_index("run_id")["seed"]
    ordered = sorted(pairs, key=lambda run_id: -seeds[run_id])
    # a run that never turned was sampled twice from the same weights: its best is its last
    turning = set(llama.loc[turned(llama), "run_id"])
    parts, beyond = [], []
    for run_id in ordered:
        best, last = pairs[run_id].loc["best"], pairs[run_id].loc["last"]
        parts.append(
            _("seed {seed}: {best} at the best checkpoint, {last} at the last (val control {control})").format(
                seed=int(seeds[run_id]),
                best=f"{best['copied_fraction']:.1%}",
                last=f"{last['copied_fraction']:.1%}",
                control=f"{last['val_copied_fraction']:.1%}",
            )
        )
        if run_id in turning:
            beyond.append(last["copied_fraction"] > max(best["copied_fraction"], last["val_copied_fraction"]))
    if not beyond:
        verdict = _("not testable here: {reason}, so the best weights are the last").format(reason=_(STILL_FALLING))
    elif all(beyond):
        verdict = _("**reproduced**: the last weights copy more than the best ones and than the control")
    elif any(beyond):
        verdict = _("**partly reproduced**: only some seeds copy more than the best weights and the control")
    else:
        verdict = _("**not reproduced**: no more copying than the control")
    if beyond:
        untested = {seeds[run_id] for run_id in ordered if run_id not in turning}
        verdict = with_untested(verdict, untested, _(STILL_FALLING))
    min_chars = int(samples["copy_min_chars"].iloc[0])
    measured = _("copied spans of {min_chars}+ characters: {samples}").format(
        min_chars=min_chars, samples=clauses(parts)
    )
    return Claim(claim, chapter, measured, verdict)


# What having a part does to best val in one direction, as its ablation's judged difference says:
# lower with it beyond noise, higher with it beyond noise, or within noise
HELPS, HURTS, NOT_BEYOND_NOISE = "helps", "hurts", "not beyond noise"

# (added to vanilla, removed from llama) -> what the two together say about the part (shown with _())
EFFECT_SUMMARY = {
    (HELPS, HELPS): N_("helps vanilla, llama misses it: it earned its gain"),
    (HELPS, NOT_BEYOND_NOISE): N_("helps vanilla, llama does not clearly miss it"),
    (HELPS, HURTS): N_("helps vanilla, llama does better without it"),
    (NOT_BEYOND_NOISE, HELPS): N_("llama misses it, vanilla does not clearly gain from it"),
    (NOT_BEYOND_NOISE, NOT_BEYOND_NOISE): N_("within noise either way"),
    (NOT_BEYOND_NOISE, HURTS): N_("vanilla does not clearly gain from it, llama does better without it"),
    (HURTS, HELPS): N_("hurts vanilla, llama misses it"),
    (HURTS, NOT_BEYOND_NOISE): N_("hurts vanilla, llama does not clearly miss it"),
    (HURTS, HURTS): N_("hurts vanilla, llama does better without it"),
}


def ablation_family(data: Results) -> dict[str, Difference]:
    """Every ablation (a row of data.ablations) against its baseline, by experiment: the ablation
    table's comparisons, judged together as one family (Holm over all of them). The table, its
    chart, part_effects and largest_ablation_change read their verdicts from here, so each
    ablation has one."""
    return judged_against_baselines(data, list(dict.fromkeys(data.ablations["experiment"])))


def ablation_of(data: Results, part: str, direction: str) -> str | None:
    """The experiment that adds the part to vanilla ("add") or removes it from llama ("remove")."""
    match = data.ablations[(data.ablations["part"] == part) & (data.ablations["direction"] == direction)]
    return None if match.empty else match.iloc[0]["experiment"]


def ablation_untestable_reason(data: Results, experiment: str) -> str:
    """Why an ablation's difference has no interval (ONE_SEED or NO_NOISE_ESTIMATE)."""
    runs = data.runs
    mine = runs[runs["experiment"] == experiment]
    baselines = set(mine["baseline"].dropna())
    return untestable_reason(mine, runs[runs["experiment"].isin(baselines)])


# the columns of ablation_intervals, the ablation chart's data (charts.ablation_chart)
INTERVAL_COLUMNS = [
    "part",
    "direction",
    "baseline",
    "experiment",
    "delta",
    "low",
    "high",
    "beyond",
    "n_seeds",
    "comparisons",
]


def ablation_intervals(data: Results, family: dict[str, Difference] | None = None) -> pd.DataFrame:
    """One row per ablation, for the ablation chart (charts.ablation_chart) of the report and the
    dashboard: part, direction (in the reader's words, chart_data.direction_words), baseline,
    experiment; delta, its mean best val minus its baseline's; low and high, its 95% interval as
    judged with the family (Holm's level; nan where not testable); beyond, True / False, or None
    where not testable; n_seeds, the seeds paired with the baseline; comparisons, how many
    comparisons the family judged together."""
    rows = part_deltas(data.ablations)
    if rows.empty:
        return pd.DataFrame(columns=INTERVAL_COLUMNS)
    family = ablation_family(data) if family is None else family
    judged = [family[name] for name in rows["experiment"]]
    intervals = [d.interval() for d in judged]
    return rows.assign(
        delta=[d.mean for d in judged],
        low=[low for low, _high in intervals],
        high=[high for _low, high in intervals],
        beyond=pd.Series([d.beyond for d in judged], index=rows.index, dtype=object),
        comparisons=[d.n for d in judged],
    )[INTERVAL_COLUMNS]


def beyond_cell(d: Difference, reason: str) -> str:
    """A table's "beyond noise?" cell for a judged difference: yes, no, or not testable and why."""
    if d.beyond is None:
        return not_testable(reason)
    return pgettext("beyond noise?", "**yes**") if d.beyond else pgettext("beyond noise?", "no")


def beyond_noise_words(d: Difference, reason: str) -> str:
    """A judged difference's verdict in a few words: beyond noise, within noise, or not testable."""
    if d.beyond is None:
        return not_testable(reason)
    return _("beyond noise") if d.beyond else _("within noise")


def largest_ablation_change(data: Results, family: dict[str, Difference] | None = None) -> str | None:
    """The ablation that moves best val most, either way (the longest bar of the ablation chart),
    in words, with its interval and its verdict in the ablation family; None before any ablation
    has a best val to set against its baseline's."""
    family = ablation_family(data) if family is None else family
    measured = {name: d for name, d in family.items() if math.isfinite(d.mean)}
    if not measured:
        return None
    experiment = max(measured, key=lambda name: abs(measured[name].mean))
    d = measured[experiment]
    row = data.ablations[data.ablations["experiment"] == experiment].iloc[0]
    against = beyond_noise_words(d, ablation_untestable_reason(data, experiment))
    lowers = d.mean < 0
    if row["direction"] == "add":
        sentence = (
            _(
                "The largest change of any ablation: adding {part} to {baseline} lowers its best val by {change}: Δ {deltas}, {against}."
            )
            if lowers
            else _(
                "The largest change of any ablation: adding {part} to {baseline} raises its best val by {change}: Δ {deltas}, {against}."
            )
        )
    else:
        sentence = (
            _(
                "The largest change of any ablation: removing {part} from {baseline} lowers its best val by {change}: Δ {deltas}, {against}."
            )
            if lowers
            else _(
                "The largest change of any ablation: removing {part} from {baseline} raises its best val by {change}: Δ {deltas}, {against}."
            )
        )
    return sentence.format(
        part=part_name(row["part"]),
        baseline=row["baseline"],
        change=f"{abs(d.mean):.3f}",
        deltas=interval_text(d),
        against=against,
    )


def part_effects(data: Results, part: str, family: dict[str, Difference] | None = None) -> tuple[str, str] | None:
    """What having the part does to best val, (added to vanilla, removed from llama), each HELPS,
    HURTS or NOT_BEYOND_NOISE, from the verdicts of the ablation family (ablation_family: every
    ablation judged together). None until both directions are testable: trained, with a best val
    on both sides and a noise estimate for their setup."""
    family = ablation_family(data) if family is None else family
    effects = []
    for direction in ("add", "remove"):
        experiment = ablation_of(data, part, direction)
        sign = None if experiment is None else family[experiment].sign
        if sign is None:
            return None
        # lower loss with the part: lower when it is added, higher when it is removed
        with_part = -sign if direction == "add" else sign
        effects.append({1: HELPS, -1: HURTS, 0: NOT_BEYOND_NOISE}[with_part])
    return effects[0], effects[1]


def _which_part(data: Results) -> Claim:
    claim, chapter = (
        _("Which part earned the gain"),
        _("could not tell (no ablation); guessed SwiGLU and RMSNorm, RoPE helping"),
    )
    if data.ablations.empty:
        return Claim(claim, chapter, _("ablations not run"), _("not yet run"))
    family = ablation_family(data)
    effects = {part: part_effects(data, part, family) for part in PARTS}
    earned = [part for part in PARTS if effects[part] == (HELPS, HELPS)]
    judged = max((d.n for d in family.values() if d.beyond is not None), default=0)
    noise = noise_of(data.noise, pd.concat([headline_of(data, "vanilla"), headline_of(data, "llama")]))
    said = [
        ngettext(
            "{noise}; {n} ablation judged; earned the gain (helps vanilla when added, llama misses it when "
            "removed): {parts}",
            "{noise}; {n} ablations judged together; earned the gain (helps vanilla when added, llama misses it "
            "when removed): {parts}",
            judged,
        ).format(noise=noise_words(noise), n=judged, parts=listed(map(part_name, earned)) or pgettext("parts", "none"))
    ]
    said += [
        _("{part}: {effect}").format(part=part_name(part), effect=_(EFFECT_SUMMARY[effects[part]]))
        for part in PARTS
        if effects[part] not in (None, (HELPS, HELPS))
    ]
    pending = [part for part in PARTS if effects[part] is None]
    if pending:
        said.append(
            _("not yet testable both added to vanilla and removed from llama: {parts}").format(
                parts=listed(map(part_name, pending))
            )
        )
        return Claim(claim, chapter, clauses(said), _("partly answered"))
    verdict = (
        ngettext(
            "**answered here**: {parts} earned the gain: best val falls when it is added to the 2017 model "
            "and rises when it is removed from the mini-LLaMA",
            "**answered here**: {parts} earned the gain: best val falls when each is added to the 2017 model "
            "and rises when it is removed from the mini-LLaMA",
            len(earned),
        ).format(parts=and_list(map(part_name, earned)))
        if earned
        else _(
            "**answered here**: no part earned the gain: none both lowers the 2017 model's best val when added "
            "and raises the mini-LLaMA's when removed"
        )
    )
    verdicts = [verdict]
    help_vanilla = [part for part in PARTS if effects[part][0] == HELPS and part not in earned]
    if help_vanilla:
        verdicts.append(
            ngettext(
                "added to the 2017 model alone, {parts} lowers its best val",
                "added to the 2017 model alone, {parts} lower its best val",
                len(help_vanilla),
            ).format(parts=and_list(map(part_name, help_vanilla)))
        )
    if headline_gap(data).sign not in (-1, None):
        verdicts.append(
            _("and at lr {lr} the mini-LLaMA has no gain to earn here: its best val is not lower beyond noise").format(
                lr=shared_lr(headline_of(data, "llama"))
            )
        )
    return Claim(claim, chapter, clauses(said), clauses(verdicts))


def _deep_claim(data: Results) -> Claim:
    claim = _("A 12-layer post-norm model without warmup struggles or diverges; pre-norm keeps it stable")
    chapter = _("left to the reader")
    post, pre = deep_runs(data, "post"), deep_runs(data, "pre")
    # the depth exam asks the same question over the learning rate
    depth_map = []
    if not data.exams.depth_stability.empty:
        layers = "/".join(str(n) for n in sorted(data.exams.depth["n_layer"].unique()))
        depth_map.append(
            _("the depth map, {layers} layers over lr: {stability}").format(
                layers=layers, stability=stability_text(data.exams.depth_stability)
            )
        )
    if post.empty or pre.empty:
        return Claim(claim, chapter, clauses([_("deep pair not run"), *depth_map]), _("not yet run"))
    post_broke, pre_broke = post["diverged"].any(), pre["diverged"].any()
    gap = judge_one(compare(data.noise, post, pre))
    peak_lr = data.metrics.loc[data.metrics["run_id"].isin(post["run_id"]), "lr"].max()
    measured = (
        _(
            "post-norm: diverged {post_diverged}, best val {post_best}; "
            "pre-norm: diverged {pre_diverged}, best val {pre_best}; post minus pre {deltas}, at peak lr {lr}"
        )
        if pd.notna(peak_lr)
        else _(
            "post-norm: diverged {post_diverged}, best val {post_best}; "
            "pre-norm: diverged {pre_diverged}, best val {pre_best}; post minus pre {deltas}"
        )
    ).format(
        post_diverged=pgettext("diverged?", "yes") if post_broke else pgettext("diverged?", "no"),
        post_best=per_seed(post, "best_val_loss"),
        pre_diverged=pgettext("diverged?", "yes") if pre_broke else pgettext("diverged?", "no"),
        pre_best=per_seed(pre, "best_val_loss"),
        deltas=interval_text(gap) if math.isfinite(gap.mean) else "–",
        lr=f"{peak_lr:g}",
    )
    measured = clauses([measured, *depth_map])
    if post_broke and not pre_broke:
        verdict = _("**reproduced**: post-norm diverged, pre-norm did not")
    elif pre_broke:
        verdict = (
            _("**not reproduced**: pre-norm diverged, and so did post-norm")
            if post_broke
            else _("**not reproduced**: pre-norm diverged")
        )
    elif gap.sign is None:
        verdict = _(
            "partly answered: neither diverged; how far apart they train is not testable here: {reason}"
        ).format(reason=untestable_reason(*same_seeds(post, pre)))
    elif gap.sign > 0:
        verdict = _("**partly reproduced**: post-norm trains, but worse beyond noise")
    elif gap.sign < 0:
        verdict = _("**not reproduced** at this lr: post-norm trains, and lower than pre-norm beyond noise")
    else:
        verdict = _("**not reproduced** at this lr: post-norm trains as well as pre-norm, within noise")
    if not post_broke and (shown := depth_map_break(data, peak_lr)):
        verdict = clauses([verdict, shown])
    return Claim(claim, chapter, measured, verdict)


def depth_map_break(data: Results, peak_lr: float) -> str | None:
    """Where the depth map (12 layers, no warmup, over lr) shows post-norm failing at an lr at
    which pre-norm still trains: the chapter's break, said to be at a higher lr than the deep
    pair's peak only when it is."""
    stability = data.exams.depth_stability.set_index("norm_pos")
    if not {"post", "pre"} <= set(stability.index):
        return None
    post, pre = stability.loc["post"], stability.loc["pre"]
    if pd.isna(post["min_failed_lr"]) or pd.isna(pre["max_trained_lr"]):
        return None
    if pre["max_trained_lr"] < post["min_failed_lr"]:
        return None
    sentence = (
        _(
            "the depth map shows the break at a higher lr: post-norm fails from lr {failed}, pre-norm trains up to lr {trained}"
        )
        if pd.notna(peak_lr) and post["min_failed_lr"] > peak_lr
        else _(
            "the depth map shows the break in its short cells: post-norm fails from lr {failed}, "
            "pre-norm trains up to lr {trained}"
        )
    )
    return sentence.format(failed=f"{post['min_failed_lr']:g}", trained=f"{pre['max_trained_lr']:g}")


def _rope_claim(data: Results) -> Claim:
    claim = _("Breaking RoPE hurts; which break hurts more, and does either collapse to chance?")
    chapter = _("left to the reader")
    broken = data.runs[(data.runs["rope_break"].notna()) & (data.runs["rope_break"] != "none")]
    llama = headline_of(data, "llama")
    if broken.empty or llama.empty:
        return Claim(claim, chapter, _("RoPE breaks not run"), _("not yet run"))
    chance = math.log(float(broken["vocab_size"].iloc[0]))
    by_break = dict(tuple(broken.groupby("rope_break")))
    names = list(by_break)
    # one table: each break against the mini-LLaMA, and (with two) the first against the second
    differences = {name: compare(data.noise, runs, llama) for name, runs in by_break.items()}
    if len(names) == 2:
        differences[tuple(names)] = compare(data.noise, by_break[names[0]], by_break[names[1]])
    judged = judge(differences)
    parts = [
        _("{name}: best val {best}, {deltas} vs mini-LLaMA").format(
            name=rope_break_name(name),
            best=per_seed(runs, "best_val_loss"),
            deltas=interval_text(judged[name]) if math.isfinite(judged[name].mean) else "–",
        )
        for name, runs in by_break.items()
    ]
    collapsed = (broken["best_val_loss"] >= chance - 0.05).any()
    parts.append(_("chance is ln(vocabulary) = {chance}").format(chance=f"{chance:.3f}"))
    collapse = _("one collapses to chance") if collapsed else _("neither collapses to chance")
    # a higher floor than chance: predicting by character frequency alone, without any context
    floor = unigram_loss(data)
    if not collapsed and floor is not None:
        parts.append(
            _("ignoring the context (the corpus's unigram loss, from the depth exam) = {floor}").format(
                floor=f"{floor:.3f}"
            )
        )
        blind = sorted(broken.loc[broken["best_val_loss"] >= floor - LEARNED_MARGIN, "rope_break"].unique())
        collapse = (
            ngettext(
                "neither collapses to chance, but {breaks} learns little beyond character frequencies",
                "neither collapses to chance, but {breaks} learn little beyond character frequencies",
                len(blind),
            ).format(breaks=and_list(map(rope_break_name, blind)))
            if blind
            else _("neither collapses to chance, nor to ignoring the context")
        )
    measured = clauses(parts)
    gap = judged.get(tuple(names))
    reason = untestable_reason(*same_seeds(*by_break.values())) if gap is not None else ""
    which, complete = which_break_hurts_more(names, gap, reason)
    verdict = (
        _("**answered**: {which}; {collapse}") if complete else _("partly answered: {which}; {collapse}")
    ).format(which=which, collapse=collapse)
    return Claim(claim, chapter, measured, verdict)


def which_break_hurts_more(breaks: list[str], gap: Difference | None, reason: str = "") -> tuple[str, bool]:
    """Of two RoPE breaks: which one hurts more, from `gap`, the first's mean best val minus the
    second's (judged with the claim's other comparisons), said only when it is beyond noise; and
    whether the comparison was testable. `reason` says why it is not (untestable_reason)."""
    if len(breaks) != 2:
        return _("only {breaks} trained so far").format(breaks=listed(map(rope_break_name, breaks))), False
    first, second = map(rope_break_name, breaks)
    if gap is None or not math.isfinite(gap.mean):
        return _("no seed of both breaks yet"), False
    worse, better, worse_gap = (first, second, gap) if gap.mean > 0 else (second, first, flipped(gap))
    if gap.sign is None:
        said = _("{name} hurts more, by {gap} against {other}, but it is not testable here: {reason}")
        return said.format(name=worse, other=better, gap=interval_text(worse_gap), reason=reason), False
    if gap.sign:
        said = _("{name} hurts more: its best val minus {other}'s is {gap}, beyond noise")
        return said.format(name=worse, other=better, gap=interval_text(worse_gap)), True
    said = _("neither hurts more beyond noise: {name} minus {other} is {gap}")
    return said.format(name=first, other=second, gap=interval_text(gap)), True


def rope_break_name(rope_break: str) -> str:
    """A RoPE break by its setting (k_unrotated, k_adjacent), as a sentence names it: English keeps
    the setting the break tests are run with."""
    names = {
        # TRANSLATORS: a broken RoPE by its setting: k not rotated at all, or k's pairs of dimensions taken
        # as neighbours where q's are halves; keep the setting's name beside yours
        "k_unrotated": pgettext("RoPE break", "k_unrotated"),
        "k_adjacent": pgettext("RoPE break", "k_adjacent"),
    }
    return names.get(rope_break, rope_break)


def _mqa_claim(data: Results) -> Claim:
    claim = _("MQA (one KV head) costs little in val loss and keeps a KV cache a quarter of MHA's")
    chapter = _("left to the reader; cache 1/4 of MHA with 4 heads")
    runs = data.runs
    mqa = runs[(runs["group"] == "break") & (runs["n_kv_head"] == 1)]
    llama = headline_of(data, "llama")
    if mqa.empty or llama.empty:
        return Claim(claim, chapter, _("MQA not run"), _("not yet run"))
    # the mini-LLaMA with plain multi-head attention: every part but GQA
    mha = runs[(runs["group"] == "ablation") & (runs["n_parts"] == 4) & (runs["n_kv_head"] == runs["n_head"])]
    n_head = int(llama["n_head"].iloc[0])
    cache = {
        ngettext("{name} ({n} KV head)", "{name} ({n} KV heads)", kv).format(name=name, n=kv): _kv_bytes_per_token(
            llama.iloc[0], kv
        )
        for name, kv in (("MHA", n_head), ("GQA", int(llama["n_kv_head"].iloc[0])), ("MQA", 1))
    }
    # one table: MQA against the mini-LLaMA and, once it is in, against MHA
    differences = {"llama": compare(data.noise, mqa, llama)}
    if not mha.empty:
        differences["mha"] = compare(data.noise, mqa, mha)
    judged = judge(differences)

    def said(d: Difference) -> str:
        return interval_text(d) if math.isfinite(d.mean) else "–"

    measured = [
        _("best val {deltas} vs the mini-LLaMA (GQA), {mha} vs MHA").format(
            deltas=said(judged["llama"]), mha=said(judged["mha"])
        )
        if not mha.empty
        else _("best val {deltas} vs the mini-LLaMA (GQA)").format(deltas=said(judged["llama"])),
    ]
    if mha.empty:
        measured.append(_("the MHA run is not in yet"))
    measured.append(
        _("KV cache per character: {sizes}").format(
            sizes=listed(_("{name} {size} bytes").format(name=name, size=f"{size:,}") for name, size in cache.items())
        )
    )
    measured = clauses(measured)
    ratio = _kv_bytes_per_token(llama.iloc[0], 1) / _kv_bytes_per_token(llama.iloc[0], n_head)
    if mha.empty:
        return Claim(
            claim,
            chapter,
            measured,
            _("partly answered: cache {ratio} of MHA's; the val cost needs the MHA run").format(ratio=f"{ratio:.2f}"),
        )
    mqa_vs_mha = judged["mha"]
    if mqa_vs_mha.sign is None:
        return Claim(
            claim,
            chapter,
            measured,
            _("partly answered: cache {ratio} of MHA's; the val cost is not testable here: {reason}").format(
                ratio=f"{ratio:.2f}", reason=untestable_reason(*same_seeds(mqa, mha))
            ),
        )
    if mqa_vs_mha.sign > 0:
        verdict = _("**partly reproduced**: cache {ratio} of MHA's, but its best val is higher beyond noise")
    else:
        verdict = _("**reproduced**: cache {ratio} of MHA's, at no cost in best val beyond noise")
    verdict = verdict.format(ratio=f"{ratio:.2f}")
    return Claim(claim, chapter, measured, verdict)


def _kv_bytes_per_token(run: pd.Series, n_kv_head: int) -> int:
    """float32 keys and values per generated character, from the model's own formula."""
    settings = {name: getattr(run[name], "item", lambda value=run[name]: value)() for name in MODEL_FIELDS}
    # the cache does not depend on the vocabulary
    return ModelConfig.from_dict({**settings, "vocab_size": 8, "n_kv_head": n_kv_head}).kv_cache_bytes(tokens=1)
