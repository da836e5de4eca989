"""The chapter's claims, each next to our measurement with a verdict.

A verdict is computed from the data, never typed: reproduced, not reproduced, partly, or not yet
run. "Beyond seed noise" means every seed's difference is larger than the baselines' own spread
over seeds (`seed_noise`): smaller differences could be the seed alone.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd

from anatomy.config import ModelConfig
from anatomy.exams.depth import LEARNED_MARGIN
from anatomy.language import N_, _, ngettext
from anatomy.results.reader import MODEL_FIELDS, Results
from anatomy.report.roles import (
    ablation_deltas,
    and_list,
    baseline_deltas,
    clauses,
    deep_runs,
    delta_text,
    fmt,
    headline_noise,
    headline_of,
    listed,
    paired_deltas,
    per_seed,
    seed_noise,
    side_beyond_noise,
    stability_text,
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


def not_judged(seeds: set, reason: str) -> str:
    """What a verdict adds for the seeds it leaves out, e.g. " (seed 7 not testable: REASON)"."""
    if not seeds:
        return ""
    numbers = " / ".join(str(int(seed)) for seed in sorted(seeds, reverse=True))
    return ngettext(
        " (seed {seeds} not testable: {reason})", " (seeds {seeds} not testable: {reason})", len(seeds)
    ).format(seeds=numbers, reason=reason)


@dataclass
class Claim:
    claim: str
    chapter: str
    measured: str
    verdict: str


# The claims in the order `claims` makes them, by the names the dashboard's pages ask for them by
CLAIM_KEYS = (
    "learns_faster",
    "lower_valley",
    "memorises",
    "copied",
    "which_part",
    "deep_postnorm",
    "broken_rope",
    "mqa",
)


def claims_by_key(data: Results) -> dict[str, Claim]:
    made = claims(data)
    assert len(made) == len(CLAIM_KEYS), "a claim was added: name it in CLAIM_KEYS"
    return dict(zip(CLAIM_KEYS, made))


def finding_text(claim: Claim) -> str:
    """One claim as the sentence a dashboard page opens with: the verdict, the claim, what was
    measured and the chapter's figure; the report's table holds the same four cells."""
    verdict = claim.verdict.replace("**", "")
    verdict = verdict[:1].upper() + verdict[1:]
    return _("**{verdict}.** *{claim}.* Measured: {measured}. The chapter: {chapter}.").format(
        verdict=verdict, claim=claim.claim, measured=claim.measured, chapter=claim.chapter
    )


def claims(data: Results) -> list[Claim]:
    vanilla, llama = headline_of(data, "vanilla"), headline_of(data, "llama")
    both = sorted(set(vanilla["seed"]) & set(llama["seed"]))
    out = []
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
            verdict += not_judged(set(earlier.index) - turning, _("no run turned"))
    else:
        measured, verdict = _("headline not run"), not_run
    out.append(
        Claim(_("The mini-LLaMA learns faster: its best val comes earlier"), _("step 500 vs 1100"), measured, verdict)
    )

    # 2. llama reaches a lower best val: the lowest val each reached in the same steps, a fair
    # comparison whether or not the runs turned (a run still falling would only go lower)
    if both:
        gap, noise = headline_gap(data)
        measured = _(
            "best val {llama} vs {vanilla}: llama minus vanilla {gap} (negative: llama lower; seed noise {noise})"
        ).format(
            llama=per_seed(llama, "best_val_loss"),
            vanilla=per_seed(vanilla, "best_val_loss"),
            gap=" / ".join(fmt(v, sign=True) for v in gap.sort_index(ascending=False)),
            noise=fmt(noise),
        )
        side = side_beyond_noise(gap, noise)
        if gap.empty:
            verdict = _("not testable: no seed has a best val for both models")
        elif not (gap < 0).all():
            verdict = _("**not reproduced**")
        elif side == -1:
            verdict = _("**reproduced**")
        elif side is None and math.isnan(noise):
            verdict = _("**reproduced** with one seed; a second seed would measure the seed noise")
        elif side is None and (gap < -noise).all():
            verdict = _("**reproduced** with one seed, by more than the other model's seed noise")
        else:
            verdict = _("**not reproduced**: lower with every seed, but by less than the seed noise")
    else:
        measured, verdict = _("headline not run"), not_run
    out.append(
        Claim(
            _("The mini-LLaMA reaches a lower best val"),
            _("3.599 vs 3.706 (gap 0.107); seed 7: gap 0.094"),
            measured,
            verdict,
        )
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
            verdict += not_judged(set(llama["seed"]) - set(judged["seed"]), _(STILL_FALLING))
    else:
        measured, verdict = _("mini-LLaMA not run"), not_run
    out.append(
        Claim(
            _("The mini-LLaMA memorises after its best val: val climbs while train falls"),
            _("val 3.599 → 5.083 at step 2000, train → 0.33"),
            measured,
            verdict,
        )
    )

    out.append(_memorised_sample(data))
    out.append(_which_part(data))
    out.append(_deep_claim(data))
    out.append(_rope_claim(data))
    out.append(_mqa_claim(data))
    return out


def headline_gap(data: Results) -> tuple[pd.Series, float]:
    """The mini-LLaMA's best val minus vanilla's, seed by seed (negative: llama lower), and the
    two models' seed noise: the overall gain the five parts are asked to account for."""
    vanilla, llama = headline_of(data, "vanilla"), headline_of(data, "llama")
    return paired_deltas(llama, vanilla), headline_noise(data)


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
        verdict += not_judged({seeds[run_id] for run_id in ordered if run_id not in turning}, _(STILL_FALLING))
    min_chars = int(samples["copy_min_chars"].iloc[0])
    measured = _("copied spans of {min_chars}+ characters: {samples}").format(
        min_chars=min_chars, samples=clauses(parts)
    )
    return Claim(claim, chapter, measured, verdict)


# What having a part does to best val in one direction: every seed's loss lower with it by more
# than the seed noise, every seed's higher, or neither (seeds that disagree, or too close to call)
HELPS, HURTS, NOT_BEYOND_NOISE = "helps", "hurts", "not beyond noise"

# (added to vanilla, removed from llama) -> what the two together say about the part (shown with _())
EFFECT_SUMMARY = {
    (HELPS, HELPS): N_("earned its gain both ways"),
    (HELPS, NOT_BEYOND_NOISE): N_("helps vanilla, llama does not clearly miss it"),
    (HELPS, HURTS): N_("helps vanilla, llama does better without it"),
    (NOT_BEYOND_NOISE, HELPS): N_("llama misses it, vanilla does not clearly gain from it"),
    (NOT_BEYOND_NOISE, NOT_BEYOND_NOISE): N_("not beyond seed noise either way"),
    (NOT_BEYOND_NOISE, HURTS): N_("vanilla does not clearly gain from it, llama does better without it"),
    (HURTS, HELPS): N_("hurts vanilla, llama misses it"),
    (HURTS, NOT_BEYOND_NOISE): N_("hurts vanilla, llama does not clearly miss it"),
    (HURTS, HURTS): N_("hurts both ways"),
}


def largest_ablation_change(data: Results) -> str | None:
    """The ablation that moves best val most, either way (the longest bar of the ablation chart),
    in words, against the seed noise; None before any ablation ran."""
    ablations = data.ablations.dropna(subset=["delta_best_val_mean"])
    if ablations.empty:
        return None
    row = ablations.loc[ablations["delta_best_val_mean"].abs().idxmax()]
    deltas = baseline_deltas(data, row["experiment"])
    noise = headline_noise(data)
    against = {
        None: _("measured with fewer than two seeds"),
        0: _("not beyond the seed noise ({noise}) with every seed").format(noise=fmt(noise)),
    }.get(
        side_beyond_noise(deltas, noise), _("beyond the seed noise ({noise}) with every seed").format(noise=fmt(noise))
    )
    lowers = row["delta_best_val_mean"] < 0
    if row["direction"] == "add":
        sentence = (
            _(
                "The largest change of any ablation: adding {part} to {baseline} lowers its best val by {change} (Δ {deltas}), {against}."
            )
            if lowers
            else _(
                "The largest change of any ablation: adding {part} to {baseline} raises its best val by {change} (Δ {deltas}), {against}."
            )
        )
    else:
        sentence = (
            _(
                "The largest change of any ablation: removing {part} from {baseline} lowers its best val by {change} (Δ {deltas}), {against}."
            )
            if lowers
            else _(
                "The largest change of any ablation: removing {part} from {baseline} raises its best val by {change} (Δ {deltas}), {against}."
            )
        )
    return sentence.format(
        part=row["part"],
        baseline=row["baseline"],
        change=f"{abs(row['delta_best_val_mean']):.3f}",
        deltas=delta_text(deltas),
        against=against,
    )


def part_effects(data: Results, part: str) -> tuple[str, str] | None:
    """What having the part does to best val, (added to vanilla, removed from llama), each HELPS,
    HURTS or NOT_BEYOND_NOISE. None until both directions have two seeds with a best val on both
    sides: one seed cannot tell a change from the seed noise."""
    noise = headline_noise(data)
    effects = []
    for direction in ("add", "remove"):
        deltas = ablation_deltas(data, part, direction)
        # how much lower the loss is with the part than without it, seed by seed
        side = None if deltas is None else side_beyond_noise(-deltas if direction == "add" else deltas, noise)
        if side is None:
            return None
        effects.append({1: HELPS, -1: HURTS, 0: NOT_BEYOND_NOISE}[side])
    return effects[0], effects[1]


def _which_part(data: Results) -> Claim:
    claim, chapter = (
        _("Which part earned the gain"),
        _("could not tell (no ablation); guessed SwiGLU and RMSNorm, RoPE helping"),
    )
    if data.ablations.empty:
        return Claim(claim, chapter, _("ablations not run"), _("not yet run"))
    effects = {part: part_effects(data, part) for part in PARTS}
    earned = [part for part in PARTS if effects[part] == (HELPS, HELPS)]
    said = [
        _("seed noise {noise}, two seeds each way; earned the gain both ways: {parts}").format(
            noise=fmt(headline_noise(data)), parts=listed(earned) or _("none")
        )
    ]
    said += [
        _("{part}: {effect}").format(part=part, effect=_(EFFECT_SUMMARY[effects[part]]))
        for part in PARTS
        if effects[part] not in (None, (HELPS, HELPS))
    ]
    pending = [part for part in PARTS if effects[part] is None]
    if pending:
        said.append(_("not yet both ways with two seeds: {parts}").format(parts=listed(pending)))
        return Claim(claim, chapter, clauses(said), _("partly answered"))
    verdict = (
        _("**answered here**: {parts} earned it both ways").format(parts=listed(earned))
        if earned
        else _("**answered here**: no part earned it both ways")
    )
    help_vanilla = [part for part in PARTS if effects[part][0] == HELPS and part not in earned]
    if help_vanilla:
        verdict += ngettext(
            "; added to the 2017 model alone, {parts} lowers its best val",
            "; added to the 2017 model alone, {parts} lower its best val",
            len(help_vanilla),
        ).format(parts=and_list(help_vanilla))
    gap, noise = headline_gap(data)
    if side_beyond_noise(gap, noise) not in (-1, None):
        verdict += _("; and here the mini-LLaMA has no gain to earn: its best val is not lower beyond seed noise")
    return Claim(claim, chapter, clauses(said), verdict)


def _deep_claim(data: Results) -> Claim:
    claim = _("A 12-layer post-norm model without warmup struggles or diverges; pre-norm keeps it stable")
    chapter = _("left to the reader")
    post, pre = deep_runs(data, "post"), deep_runs(data, "pre")
    # the depth exam asks the same question over the learning rate
    depth_map = ""
    if not data.exams.depth_stability.empty:
        layers = "/".join(str(n) for n in sorted(data.exams.depth["n_layer"].unique()))
        depth_map = _("; the depth map, {layers} layers over lr: {stability}").format(
            layers=layers, stability=stability_text(data.exams.depth_stability)
        )
    if post.empty or pre.empty:
        return Claim(claim, chapter, _("deep pair not run") + depth_map, _("not yet run"))
    post_broke, pre_broke = post["diverged"].any(), pre["diverged"].any()
    deltas = paired_deltas(post, pre)
    measured = _(
        "post-norm: diverged {post_diverged}, best val {post_best}; "
        "pre-norm: diverged {pre_diverged}, best val {pre_best}; post minus pre {deltas}"
    ).format(
        post_diverged=_("yes") if post_broke else _("no"),
        post_best=per_seed(post, "best_val_loss"),
        pre_diverged=_("yes") if pre_broke else _("no"),
        pre_best=per_seed(pre, "best_val_loss"),
        deltas=delta_text(deltas),
    )
    peak_lr = data.metrics.loc[data.metrics["run_id"].isin(post["run_id"]), "lr"].max()
    if pd.notna(peak_lr):
        measured += _(", at peak lr {lr}").format(lr=f"{peak_lr:g}")
    measured += depth_map
    # the wider of the headline models' seed spread and the deep pair's own: deep models may vary more
    spreads = [headline_noise(data), seed_noise(data, set(post["experiment"]) | set(pre["experiment"]))]
    noise = max((spread for spread in spreads if not math.isnan(spread)), default=math.nan)
    if post_broke and not pre_broke:
        verdict = _("**reproduced**: post-norm diverged, pre-norm did not")
    elif pre_broke:
        verdict = (
            _("**not reproduced**: pre-norm diverged, and so did post-norm")
            if post_broke
            else _("**not reproduced**: pre-norm diverged")
        )
    elif (side := side_beyond_noise(deltas, noise)) is None:
        verdict = _("partly answered: neither diverged; how far apart they train needs 2 seeds")
    elif side > 0:
        verdict = _("**partly reproduced**: post-norm trains, but worse beyond seed noise")
    elif side < 0:
        verdict = _("**not reproduced** at this lr: post-norm trains, and lower than pre-norm beyond seed noise")
    else:
        verdict = _("**not reproduced** at this lr: post-norm trains as well as pre-norm, within seed noise")
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
    claim = _(
        "Breaking RoPE (k unrotated, or k paired differently from q) hurts; which hurts more, and does either "
        "collapse to chance?"
    )
    chapter = _("left to the reader")
    broken = data.runs[(data.runs["rope_break"].notna()) & (data.runs["rope_break"] != "none")]
    llama = headline_of(data, "llama")
    if broken.empty or llama.empty:
        return Claim(claim, chapter, _("RoPE breaks not run"), _("not yet run"))
    chance = math.log(float(broken["vocab_size"].iloc[0]))
    deltas = {name: paired_deltas(runs, llama) for name, runs in broken.groupby("rope_break")}
    parts = [
        _("{name}: best val {best}, {deltas} vs mini-LLaMA").format(
            name=name, best=per_seed(broken[broken["rope_break"] == name], "best_val_loss"), deltas=delta_text(delta)
        )
        for name, delta in deltas.items()
    ]
    collapsed = (broken["best_val_loss"] >= chance - 0.05).any()
    measured = clauses(parts) + _("; chance is ln(vocabulary) = {chance}").format(chance=f"{chance:.3f}")
    collapse = _("one collapses to chance") if collapsed else _("neither collapses to chance")
    # a higher floor than chance: predicting by character frequency alone, without any context
    unigram = data.exams.depth["unigram_loss"].dropna()
    if not collapsed and len(unigram):
        floor = float(unigram.iloc[0])
        measured += _("; ignoring the context (the corpus's unigram loss, from the depth exam) = {floor}").format(
            floor=f"{floor:.3f}"
        )
        blind = sorted(broken.loc[broken["best_val_loss"] >= floor - LEARNED_MARGIN, "rope_break"].unique())
        collapse += (
            ngettext(
                ", but {breaks} learns little beyond character frequencies",
                ", but {breaks} learn little beyond character frequencies",
                len(blind),
            ).format(breaks=and_list(blind))
            if blind
            else _(", nor to ignoring the context")
        )
    which, complete = which_break_hurts_more(deltas, headline_noise(data))
    verdict = (
        _("**answered**: {which}; {collapse}") if complete else _("partly answered: {which}; {collapse}")
    ).format(which=which, collapse=collapse)
    return Claim(claim, chapter, measured, verdict)


def which_break_hurts_more(deltas: dict[str, pd.Series], noise: float) -> tuple[str, bool]:
    """Of two RoPE breaks (their best val minus llama's, by seed): which one hurts more, said only
    when every seed agrees beyond the seed noise; and whether two seeds of both were there to say it."""
    if len(deltas) != 2:
        return _("only {breaks} trained so far").format(breaks=listed(deltas)), False
    (first, first_deltas), (second, second_deltas) = deltas.items()
    gap = (first_deltas - second_deltas).dropna()  # seed by seed: positive, the first hurts more
    if gap.empty:
        return _("no seed of both breaks yet"), False
    side = side_beyond_noise(gap, noise)
    if side is None:
        worse = first if gap.iloc[0] > 0 else second
        said = _("{name} hurts more with seed {seed} (one seed cannot tell it from noise)")
        return said.format(name=worse, seed=int(gap.index[0])), False
    beyond = _("{name} hurts more, by {gap} (every seed beyond the seed noise, {noise})")
    if side > 0:
        return beyond.format(name=first, gap=fmt(gap.mean()), noise=fmt(noise)), True
    if side < 0:
        return beyond.format(name=second, gap=fmt(-gap.mean()), noise=fmt(noise)), True
    return _("neither hurts more beyond seed noise"), True


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
    mqa_vs_mha = paired_deltas(mqa, mha)
    measured = _("best val {deltas} vs the mini-LLaMA (GQA)").format(deltas=delta_text(paired_deltas(mqa, llama)))
    measured += (
        _(", {deltas} vs MHA").format(deltas=delta_text(mqa_vs_mha))
        if not mha.empty
        else _("; the MHA run is not in yet")
    )
    measured += _("; KV cache per character: {sizes}").format(
        sizes=listed(_("{name} {size} bytes").format(name=name, size=f"{size:,}") for name, size in cache.items())
    )
    ratio = _kv_bytes_per_token(llama.iloc[0], 1) / _kv_bytes_per_token(llama.iloc[0], n_head)
    if mha.empty:
        return Claim(
            claim,
            chapter,
            measured,
            _("partly answered: cache {ratio} of MHA's; the val cost needs the MHA run").format(ratio=f"{ratio:.2f}"),
        )
    # the same noise as every other comparison with a baseline, and two seeds to tell it apart
    noise = headline_noise(data)
    side = side_beyond_noise(mqa_vs_mha, noise)
    if side is None:
        needs = _("2 seeds") if len(mqa_vs_mha) < 2 else _("the headline models' seed noise (2 seeds each)")
        return Claim(
            claim,
            chapter,
            measured,
            _("partly answered: cache {ratio} of MHA's; the val cost needs {needs}").format(
                ratio=f"{ratio:.2f}", needs=needs
            ),
        )
    if side > 0:
        verdict = _("**partly reproduced**: cache {ratio} of MHA's, but its best val is higher beyond seed noise")
    else:
        verdict = _("**reproduced**: cache {ratio} of MHA's, at no cost in best val beyond seed noise")
    verdict = verdict.format(ratio=f"{ratio:.2f}")
    return Claim(claim, chapter, measured, verdict)


def _kv_bytes_per_token(run: pd.Series, n_kv_head: int) -> int:
    """float32 keys and values per generated character, from the model's own formula."""
    from anatomy.model import MiniLM  # torch, only for this claim

    settings = {name: getattr(run[name], "item", lambda value=run[name]: value)() for name in MODEL_FIELDS}
    # the cache does not depend on the vocabulary
    cfg = ModelConfig.from_dict({**settings, "vocab_size": 8, "n_kv_head": n_kv_head})
    return MiniLM(cfg).kv_cache_bytes(tokens=1)
