"""What each exam found, in words: the one owner of every sentence about the exams.

Each part of the mini-LLaMA has the exam it was made for (anatomy/exams/). The numbers come from
the exam views of anatomy/results/schema.sql (length_reach, kv_cache_per_token, kv_cache_speedup,
kv_cache_at_scale, wall_clock_ratios, depth_stability, grad_norm_spread) and, for the parts of
2024-26, the exams' own tables (exam_qk_norm, exam_mla, exam_moe: one row per cell, every number
measured by the exam); this module only picks and words them. The report's "which part wins
where" table and the dashboard's Exams page both call it, so a finding reads the same wherever
it is shown.

Per part there are two texts (`exam_rows`): what the exam shows, in full (a table cell), and its
finding, one clause (None while the exam has not been run). `sentence` makes a clause a sentence.
For the parts of 2024-26 (QK-norm, MLA, experts) the finding says what the part buys here and at
what cost; anatomy/report/findings.py makes it a record of the lab's findings (`exam_part_findings`),
whose sentence the report and the Exams page both show.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from anatomy.language import N_, _, ngettext
from anatomy.report.roles import headline_of, paired_deltas
from anatomy.report.uncertainty import difference, interval_text, judge, noise_of
from anatomy.report.wording import (
    by_seed,
    clauses,
    fmt,
    joined,
    listed,
    per_seed,
    seed_list,
    seeds_of,
    sentences,
    stability_text,
    wiring,
)
from anatomy.results.reader import DEPTH_CELL_PREFIX, Results

# part -> its name in a sentence (shown with _(): RMSNorm, RoPE... are names in every language)
PART_NAMES = {
    "rmsnorm": N_("RMSNorm"),
    "prenorm": N_("pre-norm"),
    "rope": N_("RoPE"),
    "gqa": N_("GQA"),
    "swiglu": N_("SwiGLU"),
}
# part -> (the exam made for it, what it measures: shown with _())
PART_EXAMS = {
    "rmsnorm": ("wall_clock", N_("wall clock: the norm alone, forward + backward, hand-written vs fused")),
    "prenorm": ("depth", N_("depth map: deep models without warmup, post- vs pre-norm over the learning rate")),
    "rope": ("length", N_("length: loss by position, on windows longer than the training length")),
    "gqa": ("kv_cache", N_("KV cache: bytes per token, generation with and without the cache")),
    "swiglu": ("wall_clock", N_("wall clock: the FFN alone, forward + backward, hand-written vs fused")),
    "qk_norm": ("qk_norm", N_("QK-norm map: the mini-LLaMA without warmup, with and without QK-norm over the lr")),
    "mla": ("mla", N_("MLA: cache bytes per character against best val, MHA, GQA, MQA and MLA latents")),
    "moe": (
        "moe",
        N_(
            "experts: best val at equal active and at equal total parameters, load (the share of the tokens each "
            "expert takes), step time"
        ),
    ),
}
# the parts of 2024-26, each added to the mini-LLaMA: an exam of its own, no ablation of the grid
NEW_PARTS = ("qk_norm", "mla", "moe")
PART_NAMES |= {"qk_norm": N_("QK-norm"), "mla": N_("MLA"), "moe": N_("experts (MoE)")}


def in_part_order(parts) -> list[str]:
    """The parts of 2024-26 in the order the chapter names them (NEW_PARTS), then any part of a
    user's own by name: the one order of every table, legend and list of them."""
    parts = set(parts)
    return [part for part in NEW_PARTS if part in parts] + sorted(parts - set(NEW_PARTS))


def part_name(part: str | None) -> str:
    """A part added to the mini-LLaMA, as a parts study's table and legend name it (None: the
    plain model it is added to)."""
    return _("the plain mini-LLaMA") if part is None else _(PART_NAMES.get(part, part))


# wall_clock variants by the names the text gives them
VARIANT_NAMES = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm", "gelu": "GELU FFN", "swiglu": "SwiGLU FFN"}
ATTENTION_ORDER = ("MHA", "GQA", "MQA")  # most KV heads first


def sentence(clause: str) -> str:
    """A finding's clause as a sentence of its own: capital first letter, full stop."""
    # TRANSLATORS: a finding's clause made a sentence: the full stop of the reader's language
    return _("{clause}.").format(clause=clause[:1].upper() + clause[1:])


def not_measured(exam: str) -> str:
    return _("not measured yet: run `snakemake --cores 1 exams` (or `python -m anatomy exam {exam}`)").format(exam=exam)


def deltas_by_seed(deltas: pd.Series) -> str:
    """Per-seed differences, seeds as the report lists them (42 / 7)."""
    return ngettext("{deltas} (seed {seeds})", "{deltas} (seeds {seeds})", len(deltas)).format(
        deltas=by_seed(deltas), seeds=seed_list(deltas.index)
    )


# How a cache compares with MHA's, in words where the ratio is a plain fraction
FRACTIONS = {
    1 / 2: N_("GQA's cache is half of MHA's per token"),
    1 / 4: N_("GQA's cache is a quarter of MHA's per token"),
    1 / 8: N_("GQA's cache is an eighth of MHA's per token"),
}


def cache_fraction_text(ratio: float) -> str:
    """GQA's cache against MHA's: "half of", "a quarter of", "an eighth of", else "0.37x"."""
    for fraction, words in FRACTIONS.items():
        if math.isclose(ratio, fraction, rel_tol=1e-6):
            return _(words)
    return _("GQA's cache is {ratio}x MHA's per token").format(ratio=f"{ratio:.2f}")


def gib_text(gib: float) -> str:
    return f"{gib:,.0f} GiB" if gib >= 10 else f"{gib:.3g} GiB"


# ---------------------------------------------------------------------------------------------
# The wall clock (RMSNorm, SwiGLU; pitfall 4)


def wall_clock_times(data: Results, part: str) -> pd.DataFrame:
    """Per variant of one part (the wall_clock_ratios view): manual and fused median ms (NaN where
    not timed), their ratio and the shape timed."""
    rows = data.exams.wall_clock_ratios
    rows = rows[rows["part"] == part].rename(columns={"manual_ms": "manual", "fused_ms": "fused"})
    return rows.set_index("variant")[["manual", "fused", "manual_over_fused", "shape"]]


def impl_text(times: pd.DataFrame, variant: str) -> str:
    name = VARIANT_NAMES.get(variant, variant)
    if variant not in times.index:
        return _("{name} not timed yet").format(name=name)
    manual, fused = times.loc[variant, "manual"], times.loc[variant, "fused"]
    if math.isnan(fused):
        return _("{name} {ms} ms (manual only)").format(name=name, ms=f"{manual:.3f}")
    if math.isnan(manual):
        return _("{name} {ms} ms (fused only)").format(name=name, ms=f"{fused:.3f}")
    return _("{name} hand-written {manual} ms vs fused {fused} ms ({ratio}x)").format(
        name=name, manual=f"{manual:.3f}", fused=f"{fused:.3f}", ratio=f"{times.loc[variant, 'manual_over_fused']:.1f}"
    )


def wall_clock_text(data: Results, part: str, mine: str, other: str) -> str:
    times = wall_clock_times(data, part)
    if times.empty:
        return not_measured("wall_clock")
    shape = times["shape"].dropna().iloc[0]
    return _("{mine}; {other} (forward + backward on {shape})").format(
        mine=impl_text(times, mine), other=impl_text(times, other), shape=shape
    )


def wall_clock_finding(data: Results, part: str, mine: str, other: str) -> str | None:
    """Mine against the other variant (fused, and hand-written), and what writing mine by hand costs."""
    times = wall_clock_times(data, part)
    if mine not in times.index or other not in times.index:
        return None
    fused, manual = (times.loc[mine, impl] / times.loc[other, impl] for impl in ("fused", "manual"))
    name, other_name = VARIANT_NAMES[mine], VARIANT_NAMES[other]
    if math.isnan(fused) and math.isnan(manual):
        return None
    if math.isnan(fused):
        return _("on the wall clock, hand-written {name} takes {ratio}x the {other}'s time").format(
            name=name, ratio=f"{manual:.2f}", other=other_name
        )
    by_hand = times.loc[mine, "manual_over_fused"]
    if math.isnan(manual):
        said = (
            _("on the wall clock, fused {name} takes {ratio}x the {other}'s time")
            if math.isnan(by_hand)
            else _(
                "on the wall clock, fused {name} takes {ratio}x the {other}'s time, and written by hand "
                "{by_hand}x its own fused time"
            )
        )
    else:
        said = (
            _("on the wall clock, fused {name} takes {ratio}x the {other}'s time (hand-written {manual}x)")
            if math.isnan(by_hand)
            else _(
                "on the wall clock, fused {name} takes {ratio}x the {other}'s time (hand-written {manual}x), and "
                "written by hand {by_hand}x its own fused time"
            )
        )
    return said.format(
        name=name, ratio=f"{fused:.2f}", other=other_name, manual=f"{manual:.2f}", by_hand=f"{by_hand:.1f}"
    )


# anatomy/exams/wall_clock.py names so the variant whose manual and fused run the same code: a
# control whose ratio is the timings' own noise, not a part that fusing speeds up
CONTROL_MARK = "no fused kernel"


def slowest_by_hand(data: Results) -> str | None:
    """Over every part: the hand-written one furthest behind its fused version, and the control's
    ratio, the noise of these timings (the Exams page's wall-clock finding)."""
    ratios = data.exams.wall_clock_ratios.dropna(subset=["manual_over_fused"])
    if ratios.empty:
        return None
    ratios = ratios.sort_values("manual_over_fused", ascending=False)
    is_control = ratios["variant"].str.contains(CONTROL_MARK, regex=False)
    control = ratios[is_control]
    noise = (
        _("the control ({variant}, one code timed as both) comes out at {ratio}x: the noise of these timings").format(
            variant=control["variant"].iloc[0], ratio=f"{control['manual_over_fused'].iloc[0]:.2f}"
        )
        if not control.empty
        else None
    )
    if is_control.all():
        return noise
    top = ratios[~is_control].iloc[0]
    numbers = {
        "variant": top["variant"],
        "part": top["part"],
        "manual": f"{top['manual_ms']:.3f}",
        "fused": f"{top['fused_ms']:.3f}",
        "shape": top["shape"],
    }
    if top["manual_over_fused"] >= 1:
        said = _(
            "the hand-written {variant} ({part}) is {ratio}x slower than its fused version: {manual} ms against "
            "{fused} ms, forward and backward on {shape}"
        ).format(ratio=f"{top['manual_over_fused']:.1f}", **numbers)
    else:  # no hand-written part is slower: say so instead of inventing a gap
        said = _(
            "the hand-written {variant} ({part}) is the slowest relative to fused, and still {ratio}x faster than "
            "it: {manual} ms against {fused} ms, forward and backward on {shape}"
        ).format(ratio=f"{1 / top['manual_over_fused']:.1f}", **numbers)
    return clauses([said, noise]) if noise else said


# ---------------------------------------------------------------------------------------------
# The depth map (pre-norm)


def telling_lr(depth: pd.DataFrame) -> float | None:
    """The learning rate whose gradient norms say the most: the largest at which post-norm failed
    and pre-norm has a cell, preferring one where pre-norm trained; None if post-norm never failed."""
    post, pre = depth["norm_pos"] == "post", depth["norm_pos"] == "pre"
    both = sorted(set(depth.loc[post & ~depth["trained"], "lr"]) & set(depth.loc[pre, "lr"]), reverse=True)
    pre_trained = [lr for lr in both if lr in set(depth.loc[pre & depth["trained"], "lr"])]
    return (pre_trained or both or [None])[0]


def finite_ratios(spread: pd.DataFrame) -> pd.DataFrame:
    """The grad_norm_spread rows with a finite, positive first-to-last ratio, by step."""
    ratios = spread["first_to_last"].astype(float)
    return spread[np.isfinite(ratios) & (ratios > 0)].sort_values("step")


def last_ratio(spread: pd.DataFrame, run_id: str) -> pd.Series | None:
    """The run's last logged step with a finite first-to-last gradient-norm ratio."""
    rows = finite_ratios(spread[spread["run_id"] == run_id])
    return rows.iloc[-1] if not rows.empty else None


# A first-to-last gradient ratio below this means the first block learns next to nothing.
VANISHED_RATIO = 1e-3


def vanished(ratio: float) -> bool:
    """Whether a first / last block gradient ratio says the first block's gradient has all but vanished."""
    return ratio < VANISHED_RATIO


def gradient_text(data: Results) -> str | None:
    """At the telling lr, the first block's gradient norm over the last block's, post against pre."""
    depth = data.exams.depth
    lr = telling_lr(depth)
    if lr is None:
        return None
    said = []
    for norm_pos in ("post", "pre"):
        cell = depth[(depth["norm_pos"] == norm_pos) & (depth["lr"] == lr)]["cell"].iloc[0]
        ratio = last_ratio(data.exams.grad_norm_spread, DEPTH_CELL_PREFIX + cell)
        if ratio is None:
            said.append(_("{wiring} no norms logged").format(wiring=wiring(norm_pos)))
            continue
        said.append(
            (
                _("{wiring} {ratio}x (step {step}; the first block's gradient has all but vanished)")
                if vanished(ratio["first_to_last"])
                else _("{wiring} {ratio}x (step {step})")
            ).format(wiring=wiring(norm_pos), ratio=f"{ratio['first_to_last']:.3g}", step=int(ratio["step"]))
        )
    return _("at lr {lr}, first / last block's gradient norm at the last logged step: {said}").format(
        lr=f"{lr:g}", said=listed(said)
    )


def depth_text(data: Results, bold: bool = False) -> str:
    """The stability map in words (the largest lr in bold, for the dashboard), and the gradients."""
    depth = data.exams.depth
    if depth.empty:
        return not_measured("depth")
    layers = "/".join(str(n) for n in sorted(depth["n_layer"].unique()))
    said = _("{layers} layers, no warmup: {stability}").format(
        layers=layers, stability=stability_text(data.exams.depth_stability, bold=bold)
    )
    gradients = gradient_text(data)
    return clauses([said, gradients]) if gradients else said


def depth_finding(data: Results) -> str | None:
    stability = data.exams.depth_stability.set_index("norm_pos")
    if not {"post", "pre"} <= set(stability.index):
        return None
    post, pre = stability.loc["post", "max_trained_lr"], stability.loc["pre", "max_trained_lr"]
    if pd.isna(pre) and pd.isna(post):
        return _("without warmup neither wiring trains at any learning rate tried")
    if pd.isna(post):
        return _("without warmup pre-norm trains up to lr {pre}, where post-norm trains at none tried").format(
            pre=f"{pre:g}"
        )
    if pd.isna(pre) or post > pre:
        return _("without warmup post-norm trains at a larger learning rate than pre-norm")
    if post == pre:
        return _("without warmup both wirings train up to the same lr, {lr}").format(lr=f"{pre:g}")
    return _(
        "without warmup pre-norm still trains at {ratio}x the largest lr post-norm survives ({pre} vs {post})"
    ).format(ratio=f"{pre / post:.3g}", pre=f"{pre:g}", post=f"{post:g}")


def spread_finding(data: Results, run_id: str, norms: pd.DataFrame) -> str:
    """One run's first-to-last gradient ratio at its first and last logged step, and where it broke
    (`norms`: its gradient norms, anatomy.results.reader.grad_norms_of)."""
    spread = data.exams.grad_norm_spread
    label = data.exams.grad_norm_runs.set_index("run_id")["label"].get(run_id, run_id)
    ratios = finite_ratios(spread[spread["run_id"] == run_id])
    broke = norms[~np.isfinite(norms["norm"].astype(float))]
    breaks = (
        [_("Its gradients are NaN/inf from step {step}.").format(step=int(broke["step"].min()))]
        if not broke.empty
        else []
    )
    if ratios.empty:
        return sentences([_("{run}: no finite first-to-last ratio to show.").format(run=label), *breaks])
    first, last = ratios.iloc[0], ratios.iloc[-1]
    said = (
        _(
            "In {run} the first block's gradient norm is {first}x the last block's at step {first_step} and {last}x "
            "at step {last_step}; the first block's gradient has all but vanished."
        )
        if vanished(last["first_to_last"])
        else _(
            "In {run} the first block's gradient norm is {first}x the last block's at step {first_step} and {last}x "
            "at step {last_step}."
        )
    ).format(
        run=label,
        first=f"{first['first_to_last']:.3g}",
        first_step=int(first["step"]),
        last=f"{last['first_to_last']:.3g}",
        last_step=int(last["step"]),
    )
    return sentences([said, *breaks])


# ---------------------------------------------------------------------------------------------
# The length exam (RoPE)


def length_by_run(data: Results, runs: pd.DataFrame) -> pd.DataFrame:
    """The length_reach rows of these runs (each on its longest readable window), most recent seed first."""
    reach = data.exams.length_reach
    return reach[reach["run_id"].isin(runs["run_id"])].sort_values("seed", ascending=False, kind="stable")


def within_span(row) -> str:
    return f"0-{int(row.within_end)}" if pd.notna(row.within_end) else "–"


def far_span(row) -> str:
    return f"{int(row.far_start)}-{int(row.far_end)}"


def length_pair_text(name: str, measured: pd.DataFrame) -> str:
    """The far bucket's loss against the loss within the training length, seed by seed."""
    first = measured.iloc[0]
    within = measured.rename(columns={"within_loss": "within", "far_loss": "far"})
    if first["far_start"] < first["ctx_len"]:
        return _("{name} read only within its training length (0-{end}): {losses}").format(
            name=name, end=first["ctx_len"] - 1, losses=per_seed(within, "within")
        )
    spans = {(row.window_len, far_span(row), within_span(row)) for row in measured.itertuples()}
    if len(spans) > 1:  # seeds read on different windows
        readings = clauses(
            [
                _("seed {seed}: {far} at {far_span} of {window} vs {within} at {within_span}").format(
                    seed=r.seed,
                    far=fmt(r.far_loss),
                    far_span=far_span(r),
                    window=f"{r.window_len:,}",
                    within=fmt(r.within_loss),
                    within_span=within_span(r),
                )
                for r in measured.itertuples()
            ]
        )
        return _("{name}: {readings}").format(name=name, readings=readings)
    return ngettext(
        "{name}: {far} at positions {far_span} of {window}-character windows vs {within} at {within_span} "
        "(seed {seeds})",
        "{name}: {far} at positions {far_span} of {window}-character windows vs {within} at {within_span} "
        "(seeds {seeds})",
        len(measured),
    ).format(
        name=name,
        far=per_seed(within, "far"),
        far_span=far_span(first),
        window=f"{first['window_len']:,}",
        within=per_seed(within, "within"),
        within_span=within_span(first),
        seeds=seeds_of(measured),
    )


def rope_runs(data: Results) -> pd.DataFrame:
    """The RoPE (unbroken) runs whose length the exam read: the mini-LLaMA's if it was examined,
    else the RoPE experiment with the most of the five parts (an ablation before a break test)."""
    runs = data.runs[(data.runs["positions"] == "RoPE") & data.runs["run_id"].isin(data.exams.length["run_id"])]
    if runs.empty:
        return runs
    rank = runs.assign(group_rank=runs["group"].map({"headline": 0, "ablation": 1}).fillna(2))
    chosen = rank.sort_values(["n_parts", "group_rank"], ascending=[False, True], kind="stable")["experiment"].iloc[0]
    return runs[runs["experiment"] == chosen]


def run_name(runs: pd.DataFrame) -> str:
    first = runs.iloc[0]
    if first["group"] == "headline" and first["n_parts"] in (0, 5):
        return "mini-LLaMA" if first["n_parts"] == 5 else "vanilla"
    return f"`{first['experiment']}`"


def learned_stops(data: Results) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The length exam's rows of learned position tables, and those where a table stops: a window
    with readable positions inside the table and none past it."""
    length = data.exams.length[data.exams.length["run_id"].isin(data.runs["run_id"])]
    learned = length[length["positions"] == "learned positions"]
    readable = set(learned.loc[learned["possible"], "run_id"])
    stopped = learned[
        ~learned["possible"] & (learned["bucket_start"] >= learned["ctx_len"]) & learned["run_id"].isin(readable)
    ]
    return learned, stopped


# a reason the database stores in English (anatomy/exams/length.py, kv_cache.py), in the reader's words
LEARNED_ENDS = re.compile(r"learned positions end at ctx_len (\d+)")


def reason_in_words(reason: str) -> str:
    """An exam's stored reason in the reader's language, where it is one this module knows."""
    if found := LEARNED_ENDS.fullmatch(str(reason)):
        return _("a learned position table has no row past its training length ({ctx_len} characters)").format(
            ctx_len=found.group(1)
        )
    return str(reason)


def learned_text(data: Results) -> str:
    """What the length exam says of learned position tables: where they stop, and why."""
    learned, stopped = learned_stops(data)
    if learned.empty:
        return _("learned positions: not examined yet")
    if stopped.empty:
        return _("learned positions: examined only within the training length")
    first = stopped.iloc[0]
    n_experiments = stopped["experiment"].nunique()
    return ngettext(
        "learned positions ({n} experiment): not possible past position {position}: {reason}",
        "learned positions ({n} experiments): not possible past position {position}: {reason}",
        n_experiments,
    ).format(n=n_experiments, position=int(first["ctx_len"]) - 1, reason=reason_in_words(first["reason"]))


def length_text(data: Results) -> str:
    if data.exams.length.empty:
        return not_measured("length RUN_DIR")
    rope = rope_runs(data)
    said = [
        length_pair_text(_("RoPE, {model}").format(model=run_name(rope)), length_by_run(data, rope))
        if not rope.empty
        else _("RoPE: not examined yet"),
        learned_text(data),
    ]
    broken = data.runs[data.runs["positions"].str.startswith("RoPE broken")]
    for kind, runs in broken.groupby("positions"):
        measured = length_by_run(data, runs)
        said.append(
            _("{kind}: not examined yet").format(kind=_(kind))
            if measured.empty
            else length_pair_text(_(kind), measured)  # the kinds are marked where charts.py colours them
        )
    return clauses(said)


def length_finding(data: Results) -> str | None:
    rope = rope_runs(data)
    measured = length_by_run(data, rope) if not rope.empty else pd.DataFrame()
    if measured.empty or measured["far_start"].min() < measured["ctx_len"].max() or measured["far_loss"].isna().any():
        return None
    first = measured.iloc[0]
    numbers = {
        "model": run_name(rope),
        "ratio": f"{measured['far_over_within'].mean():.2f}",
        "far_span": far_span(first),
        "within_span": within_span(first),
    }
    if not learned_stops(data)[1].empty:  # learned_text names the experiments whose table stops
        return _(
            "past its training length RoPE ({model}) reads on, at {ratio}x its loss within it (positions "
            "{far_span} against {within_span}, mean over seeds), where a learned position table cannot read at all"
        ).format(**numbers)
    return _(
        "past its training length RoPE ({model}) reads on, at {ratio}x its loss within it (positions "
        "{far_span} against {within_span}, mean over seeds)"
    ).format(**numbers)


# ---------------------------------------------------------------------------------------------
# The KV cache (GQA)


def cache_speedup(data: Results) -> pd.Series | None:
    """At the longest context timed both ways (GQA's if it was timed): the kv_cache_speedup row."""
    speeds = data.exams.kv_speedup
    if speeds.empty:
        return None
    kind = "GQA" if (speeds["attention"] == "GQA").any() else speeds["attention"].iloc[0]
    return speeds[speeds["attention"] == kind].sort_values("context").iloc[-1]


def speed_ratio(speedup: float) -> str:
    """The KV cache's effect on generation speed (cached over recomputed characters per second) as
    the factor the text gives: "20.3" for 20.3x faster, "2.0" for 2.0x slower (where it costs more
    than it saves: a tiny model, a short context)."""
    return f"{speedup:.1f}" if speedup >= 1 else f"{1 / speedup:.1f}"


def speedup_text(speed: pd.Series) -> str:
    numbers = {
        "context": f"{int(speed['context']):,}",
        "attention": speed["attention"],
        "ratio": speed_ratio(speed["speedup"]),
        "cached": f"{speed['cached']:,.1f}",
        "recomputed": f"{speed['recomputed']:,.1f}",
    }
    if speed["speedup"] >= 1:
        return _(
            "at {context} characters of context the cache makes {attention} generation {ratio}x faster "
            "({cached} vs {recomputed} characters/s)"
        ).format(**numbers)
    return _(
        "at {context} characters of context the cache makes {attention} generation {ratio}x slower "
        "({cached} vs {recomputed} characters/s)"
    ).format(**numbers)


def mqa_text(data: Results) -> str:
    """MQA's best val against the mini-LLaMA's (GQA), seed by seed."""
    mqa = data.runs[(data.runs["group"] == "break") & (data.runs["n_kv_head"] == 1)]
    llama = headline_of(data, "llama")
    deltas = paired_deltas(mqa, llama)
    if mqa.empty or llama.empty or deltas.empty:
        return _("MQA's best val vs the mini-LLaMA's: not trained yet")
    return _("MQA's best val vs the mini-LLaMA's {deltas}").format(deltas=deltas_by_seed(deltas))


def kv_heads(n: int) -> str:
    return ngettext("{n} KV head", "{n} KV heads", n).format(n=n)


def kv_scale_text(data: Results) -> str | None:
    """The cache of a LLaMA-scale model by the same formula (the kv_cache_at_scale view)."""
    scale = data.exams.kv_scale
    if scale.empty:
        return None
    sizes = joined(
        (_("{size} for {model}").format(size=gib_text(row.gib), model=row.name) for row in scale.itertuples()),
        # TRANSLATORS: two cache sizes compared
        _("{first} vs {second}"),
    )
    return _("at LLaMA scale ({tokens} tokens) {sizes}").format(tokens=f"{int(scale['tokens'].iloc[0]):,}", sizes=sizes)


def kv_cache_text(data: Results) -> str:
    exams = data.exams
    if exams.kv_cache.empty and exams.kv_timing.empty:
        return clauses([not_measured("kv_cache RUN_DIR"), mqa_text(data)])
    kinds = exams.kv_per_token.set_index("attention")
    sizes = [
        _("{kind} ({heads}) {bytes}").format(
            kind=kind, heads=kv_heads(int(kinds.loc[kind, "n_kv_head"])), bytes=f"{kinds.loc[kind, 'measured']:,.0f}"
        )
        if kind in kinds.index
        else _("{kind} not measured yet").format(kind=kind)
        for kind in ATTENTION_ORDER
    ]
    said = [
        _("cache bytes per token, measured: {sizes}").format(sizes=listed(sizes))
        if not kinds.empty
        else _("cache bytes: not measured yet")
    ]
    speed = cache_speedup(data)
    said.append(_("generation not timed both ways yet") if speed is None else speedup_text(speed))
    if (scale := kv_scale_text(data)) is not None:
        said.append(scale)
    return clauses(said + [mqa_text(data)])


def kv_cache_finding(data: Results) -> str | None:
    kinds = data.exams.kv_per_token.set_index("attention")
    size = None
    if {"MHA", "GQA"} <= set(kinds.index):
        size = cache_fraction_text(kinds.loc["GQA", "measured"] / kinds.loc["MHA", "measured"])
    speed = cache_speedup(data)
    faster = None
    if speed is not None:
        numbers = {"ratio": speed_ratio(speed["speedup"]), "context": f"{int(speed['context']):,}"}
        faster = (
            _("that cache makes generation {ratio}x faster than recomputing the context, at {context} characters")
            if speed["speedup"] >= 1
            else _("that cache makes generation {ratio}x slower than recomputing the context, at {context} characters")
        ).format(**numbers)
    if size and faster:
        return _("{size} and {speed}").format(size=size, speed=faster)
    return size or faster


# ---------------------------------------------------------------------------------------------
# The parts of 2024-26: QK-norm, MLA, a mixture of experts (anatomy/exams/qk_norm.py, mla.py, moe.py)


def not_run(exam: str) -> str:
    """An exam of a part of 2024-26 with no row yet, and the commands that fill it."""
    return _(
        "its exam has not run yet: `snakemake --cores 1 exams` runs it (or `python -m anatomy exam {exam}`), "
        "then collect again"
    ).format(exam=exam)


# the QK-norm map's two variants as a sentence names them (shown with _())
QK_VARIANTS = {"plain": N_("without QK-norm"), "qk_norm": N_("with QK-norm")}


def qk_norm_stability(data: Results) -> pd.DataFrame:
    """Per variant of the QK-norm map (index plain, qk_norm: those with a cell): its cells, the
    largest lr that trained and the smallest that did not (as depth_stability defines them for the
    depth map), and the largest attention logit any of its cells reached."""
    cells = data.exams.qk_norm
    trained = cells["trained"].astype(bool)
    table = pd.DataFrame(
        {
            "cells": cells.groupby("variant").size(),
            "max_trained_lr": cells[trained].groupby("variant")["lr"].max(),
            "min_failed_lr": cells[~trained].groupby("variant")["lr"].min(),
            "peak_max_logit": cells.groupby("variant")["peak_max_logit"].max(),
        }
    )
    return table.reindex([variant for variant in QK_VARIANTS if variant in table.index])


def qk_stability_text(stability: pd.DataFrame, bold: bool = False) -> str:
    """The largest lr each variant trains at, in the depth map's words (wording.stability_text)."""
    said = []
    for variant, words in QK_VARIANTS.items():
        name = _(words)
        if variant not in stability.index:
            said.append(_("{wiring}: no cell yet").format(wiring=name))
            continue
        row = stability.loc[variant]
        if pd.isna(row["max_trained_lr"]):
            said.append(
                _("{wiring} trains at none of the {cells} learning rates tried").format(
                    wiring=name, cells=int(row["cells"])
                )
            )
            continue
        largest = f"**{row['max_trained_lr']:g}**" if bold else f"{row['max_trained_lr']:g}"
        said.append(
            _("{wiring} trains up to lr {largest} (fails from {failed})").format(
                wiring=name, largest=largest, failed=f"{row['min_failed_lr']:g}"
            )
            if pd.notna(row["min_failed_lr"])
            else _("{wiring} trains up to lr {largest}").format(wiring=name, largest=largest)
        )
    return _("{post}, {pre}").format(post=said[0], pre=said[1])


def qk_logit_text(data: Results) -> str | None:
    """At the largest lr where both variants logged a finite logit: the largest each reached."""
    cells = data.exams.qk_norm.dropna(subset=["peak_max_logit"])
    peaks = cells.pivot_table(index="lr", columns="variant", values="peak_max_logit", aggfunc="max")
    if not set(QK_VARIANTS) <= set(peaks.columns):
        return None
    both = peaks.dropna(subset=list(QK_VARIANTS))
    if both.empty:
        return None
    lr = both.index.max()
    return _("at lr {lr} the largest attention logit reached {plain} without QK-norm and {qk} with it").format(
        lr=f"{lr:g}", plain=f"{both.loc[lr, 'plain']:.1f}", qk=f"{both.loc[lr, 'qk_norm']:.1f}"
    )


def qk_norm_text(data: Results, bold: bool = False) -> str:
    cells = data.exams.qk_norm
    if cells.empty:
        return not_measured("qk_norm")
    steps = "/".join(str(int(n)) for n in sorted(cells["steps"].unique()))
    said = _("no warmup, {steps} steps: {stability}").format(
        steps=steps, stability=qk_stability_text(qk_norm_stability(data), bold=bold)
    )
    logits = qk_logit_text(data)
    return clauses([said, logits]) if logits else said


def qk_norm_best_vals(data: Results) -> str | None:
    """At the largest lr where both variants trained: each one's best val (lower or higher: the
    sentence gives both numbers, not a verdict)."""
    cells = data.exams.qk_norm
    best = cells[cells["trained"].astype(bool)].pivot_table(
        index="lr", columns="variant", values="best_val_loss", aggfunc="min"
    )
    if not set(QK_VARIANTS) <= set(best.columns) or best.dropna(subset=list(QK_VARIANTS)).empty:
        return None
    both = best.dropna(subset=list(QK_VARIANTS))
    lr = both.index.max()
    return _("at lr {lr}, where both train, best val {qk} with it against {plain} without (one run each)").format(
        lr=f"{lr:g}", qk=fmt(both.loc[lr, "qk_norm"]), plain=fmt(both.loc[lr, "plain"])
    )


def qk_norm_finding(data: Results) -> str | None:
    """What QK-norm buys here (the largest lr that trains, with it and without) and at what cost."""
    stability = qk_norm_stability(data)
    if not set(QK_VARIANTS) <= set(stability.index):
        return None
    plain, qk = stability.loc["plain", "max_trained_lr"], stability.loc["qk_norm", "max_trained_lr"]
    if pd.isna(plain) and pd.isna(qk):
        buys = _("without warmup the mini-LLaMA trains at no learning rate tried, with QK-norm or without")
    elif pd.isna(plain):
        buys = _(
            "without warmup QK-norm lets the mini-LLaMA train up to lr {qk}, where without it the model trains at "
            "none tried"
        )
    elif pd.isna(qk) or plain > qk:
        buys = _(
            "QK-norm buys no higher learning rate here: without warmup the mini-LLaMA trains at a larger lr without it"
        )
    elif plain == qk:
        buys = _(
            "QK-norm buys no higher learning rate here: without warmup the mini-LLaMA trains up to lr {qk} with it "
            "and without"
        )
    else:
        buys = _(
            "without warmup QK-norm lets the mini-LLaMA train at {ratio}x the largest lr it survives without it "
            "({qk} against {plain})"
        )
    buys = buys.format(qk=f"{qk:g}", plain=f"{plain:g}", ratio=f"{qk / plain:.3g}" if plain and qk else "")
    best_vals = qk_norm_best_vals(data)
    return clauses([buys, best_vals]) if best_vals else buys


# exam_mla's head cells by the names a sentence gives them (MLA's: "MLA, latent 32")
HEAD_CELLS = {"mha": "MHA", "gqa": "GQA", "mqa": "MQA"}


def mla_cell_name(row) -> str:
    if row["attn_type"] == "mla":
        return _("MLA (latent {latent})").format(latent=int(row["kv_latent"]))
    name = HEAD_CELLS.get(row["cell"], row["cell"])
    return _("{kind} ({heads})").format(kind=name, heads=kv_heads(int(row["n_kv_head"])))


def mla_text(data: Results) -> str:
    cells = data.exams.mla
    if cells.empty:
        return not_measured("mla")
    sizes = [
        _("{name}: {bytes} bytes per character, best val {val}").format(
            name=mla_cell_name(row), bytes=f"{row['bytes_per_char']:,.0f}", val=fmt(row["best_val_loss"])
        )
        if pd.notna(row["bytes_per_char"])
        else _("{name}: cache not measured yet, best val {val}").format(
            name=mla_cell_name(row), val=fmt(row["best_val_loss"])
        )
        for _index, row in cells.iterrows()
    ]
    said = [_("the cache against best val: {cells}").format(cells=listed(sizes))]
    timed = cells.dropna(subset=["chars_per_s"])
    if timed.empty:
        said.append(_("generation not timed yet"))
    else:
        said.append(
            _("generation with the cache, characters/s: {speeds}").format(
                speeds=listed(f"{mla_cell_name(row)} {row['chars_per_s']:,.0f}" for _index, row in timed.iterrows())
            )
        )
    return clauses(said)


def mla_pair(data: Results) -> tuple[pd.Series, pd.Series] | None:
    """The MLA cell with the lowest best val (of those measured; the smaller cache on a tie), and
    the cache it is set against: GQA's, the mini-LLaMA's own, else MHA's."""
    cells = data.exams.mla.dropna(subset=["bytes_per_char", "best_val_loss"])
    latents = cells[cells["attn_type"] == "mla"].sort_values(["best_val_loss", "bytes_per_char"], kind="stable")
    heads = cells[cells["attn_type"] != "mla"].set_index("cell")
    reference = next((heads.loc[cell] for cell in ("gqa", "mha") if cell in heads.index), None)
    if latents.empty or reference is None:
        return None
    return latents.iloc[0], reference  # the reference named by its cell (mha, gqa)


def mla_finding(data: Results) -> str | None:
    """What MLA buys (the cache against the mini-LLaMA's GQA) and at what cost (best val, speed)."""
    pair = mla_pair(data)
    if pair is None:
        return None
    mla, ref = pair
    numbers = {
        "latent": int(mla["kv_latent"]),
        "bytes": f"{mla['bytes_per_char']:,.0f}",
        "ratio": f"{mla['bytes_per_char'] / ref['bytes_per_char']:.2f}",
        "reference": HEAD_CELLS.get(ref.name, ref.name),
        "ref_bytes": f"{ref['bytes_per_char']:,.0f}",
        "val": fmt(mla["best_val_loss"]),
        "ref_val": fmt(ref["best_val_loss"]),
    }
    buys = _(
        "MLA (latent {latent}) buys a KV cache of {bytes} bytes per character, {ratio}x {reference}'s {ref_bytes}"
    ).format(**numbers)
    # its best val may come out lower or higher: both numbers, and how far one run is from the next
    said = [
        buys,
        _("best val {val} against {reference}'s {ref_val}, {delta} ({runs})").format(
            delta=cell_differences(data, {"mla": (mla["best_val_loss"], ref["best_val_loss"])})["mla"],
            runs=one_run_each(data),
            **numbers,
        ),
    ]
    if pd.notna(mla["chars_per_s"]) and pd.notna(ref["chars_per_s"]):
        said.append(
            _("generation at {speed} characters/s against {ref_speed}").format(
                speed=f"{mla['chars_per_s']:,.0f}", ref_speed=f"{ref['chars_per_s']:,.0f}"
            )
        )
    return clauses(said)


def cell_differences(data: Results, pairs: dict[str, tuple[float, float]]) -> dict[str, str]:
    """Single cells' best vals, a minus b per key, each with its interval (judged together, Holm):
    one run a side, so each side carries the seed-to-seed sd of a run on the same text and precision
    (the headline's, where the cells train)."""
    noise = noise_of(data.noise, headline_of(data, "llama"))
    judged = judge({key: difference(pd.Series([a]), pd.Series([b]), noise) for key, (a, b) in pairs.items()})
    return {key: interval_text(d) for key, d in judged.items()}


def one_run_each(data: Results) -> str:
    """The caveat of an exam's cells: one run each, and where their intervals come from."""
    noise = noise_of(data.noise, headline_of(data, "llama"))
    if not noise.known:
        return _("one run each")
    return _("one run each; the intervals come from a run's seed-to-seed sd on this text, {sd}").format(
        sd=f"{noise.sd:.3f}"
    )


def moe_cell_name(row) -> str:
    if pd.isna(row["n_experts"]):
        return _("dense (one SwiGLU)")
    n, k = int(row["n_experts"]), int(row["top_k"])
    if k == n:
        return _("{n} experts (all on every token)").format(n=n)
    return _("{n} experts (top-{k})").format(n=n, k=k)


def share(value: float) -> str:
    return f"{value:.0%}"


def shares(low: float, high: float) -> str:
    """The smallest and largest share of the tokens an expert took: "18%-34%", "25%" where equal."""
    return share(low) if share(low) == share(high) else f"{share(low)}-{share(high)}"


def moe_text(data: Results) -> str:
    cells = data.exams.moe
    if cells.empty:
        return not_measured("moe")
    said = []
    for _index, row in cells.iterrows():
        details = [
            _("{params} parameters, {active} active").format(
                params=f"{int(row['params']):,}", active=f"{int(row['active_params']):,}"
            ),
            _("best val {val}").format(val=fmt(row["best_val_loss"])),
        ]
        if pd.notna(row["min_share"]):
            details.append(_("load {shares}").format(shares=shares(row["min_share"], row["max_share"])))
        if pd.notna(row["step_ms"]) and pd.isna(row["n_experts"]):
            details.append(_("{ms} ms a step").format(ms=f"{row['step_ms']:.1f}"))
        elif pd.notna(row["step_ms"]) and pd.notna(row["step_ratio"]):
            details.append(
                _("{ms} ms a step ({ratio}x)").format(ms=f"{row['step_ms']:.1f}", ratio=f"{row['step_ratio']:.2f}")
            )
        said.append(_("{name}: {details}").format(name=moe_cell_name(row), details=listed(details)))
    return clauses(said)


def moe_cells(data: Results) -> tuple[pd.Series | None, pd.Series | None, pd.Series | None]:
    """(dense, the sparse MoE cell of fewest experts per token, the MoE with every expert on every
    token: the dense model at the sparse one's total parameters), each None where not in the exam."""
    cells = data.exams.moe
    dense = cells[cells["n_experts"].isna()]
    moe = cells.dropna(subset=["n_experts"])
    sparse = moe[moe["top_k"] < moe["n_experts"]].sort_values("top_k", kind="stable")
    every = moe[moe["top_k"] == moe["n_experts"]]
    first = [frame.iloc[0] if not frame.empty else None for frame in (dense, sparse)]
    if first[1] is not None:  # the one of the sparse cell's own experts
        every = every[every["n_experts"] == first[1]["n_experts"]]
    return first[0], first[1], every.iloc[0] if not every.empty else None


def moe_finding(data: Results) -> str | None:
    """What experts buy here (best val at equal work and at equal size) and at what cost (the step
    time, the load)."""
    dense, sparse, every = moe_cells(data)
    if sparse is None or pd.isna(sparse["best_val_loss"]):
        return None
    name, moe = moe_cell_name(sparse), sparse["best_val_loss"]
    pairs = {}
    if dense is not None and pd.notna(dense["best_val_loss"]):
        pairs["work"] = (moe, dense["best_val_loss"])
    if every is not None and pd.notna(every["best_val_loss"]):
        pairs["size"] = (moe, every["best_val_loss"])
    if not pairs:
        return None
    deltas = cell_differences(data, pairs)
    said = []
    if "work" in pairs:
        said.append(
            _(
                "at the dense model's work per token, {name} reach best val {moe} against the dense model's "
                "{dense}, {delta}"
            ).format(name=name, moe=fmt(moe), dense=fmt(pairs["work"][1]), delta=deltas["work"])
        )
    if "size" in pairs:
        said.append(
            _(
                "at equal total parameters, best val {moe} against {every} for a dense model of that size "
                "(all {n} experts on every token), {delta}"
            ).format(moe=fmt(moe), every=fmt(pairs["size"][1]), n=int(every["n_experts"]), delta=deltas["size"])
        )
    said[-1] = _("{clause} ({caveat})").format(clause=said[-1], caveat=one_run_each(data))
    if pd.notna(sparse["step_ratio"]):
        said.append(
            _("the price: a training step {ratio}x the dense model's here").format(ratio=f"{sparse['step_ratio']:.2f}")
        )
    if pd.notna(sparse["min_share"]):
        said.append(
            _("the experts took {shares} of the tokens each (even: {even})").format(
                shares=shares(sparse["min_share"], sparse["max_share"]), even=share(1 / sparse["n_experts"])
            )
        )
    return clauses(said)


# ---------------------------------------------------------------------------------------------


def exam_rows(data: Results) -> dict[str, tuple[str, str | None]]:
    """Per part: what its exam shows (the table's cell) and its finding (a clause, None when unmeasured)."""
    return {
        "rmsnorm": (
            wall_clock_text(data, "norm", "rmsnorm", "layernorm"),
            wall_clock_finding(data, "norm", "rmsnorm", "layernorm"),
        ),
        "prenorm": (depth_text(data), depth_finding(data)),
        "rope": (length_text(data), length_finding(data)),
        "gqa": (kv_cache_text(data), kv_cache_finding(data)),
        "swiglu": (wall_clock_text(data, "ffn", "swiglu", "gelu"), wall_clock_finding(data, "ffn", "swiglu", "gelu")),
        "qk_norm": (qk_norm_text(data), qk_norm_finding(data)),
        "mla": (mla_text(data), mla_finding(data)),
        "moe": (moe_text(data), moe_finding(data)),
    }
