"""What each exam found, in words: the one owner of every sentence about the exams.

Each part of the mini-LLaMA has the exam it was made for (anatomy/exams/). The numbers come from
the exam views of anatomy/results/schema.sql (length_reach, kv_cache_per_token, kv_cache_speedup,
kv_cache_at_scale, wall_clock_ratios, depth_stability, grad_norm_spread); this module only picks
and words them. The report's "which part wins where" table and the dashboard's Exams page both
call it, so a finding reads the same wherever it is shown.

Per part there are two texts (`exam_rows`): what the exam shows, in full (a table cell), and its
finding, one clause (None while the exam has not been run). `sentence` makes a clause a sentence.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from anatomy.report.roles import fmt, headline_of, paired_deltas, per_seed, seeds_of, stability_text
from anatomy.results.reader import DEPTH_CELL_PREFIX, Results

PART_NAMES = {"rmsnorm": "RMSNorm", "prenorm": "pre-norm", "rope": "RoPE", "gqa": "GQA", "swiglu": "SwiGLU"}
# part -> (the exam made for it, what it measures)
PART_EXAMS = {
    "rmsnorm": ("wall_clock", "wall clock: the norm alone, forward + backward, hand-written vs fused"),
    "prenorm": ("depth", "depth map: deep models without warmup, post- vs pre-norm over the learning rate"),
    "rope": ("length", "length: loss by position, on windows longer than the training length"),
    "gqa": ("kv_cache", "KV cache: bytes per token, generation with and without the cache"),
    "swiglu": ("wall_clock", "wall clock: the FFN alone, forward + backward, hand-written vs fused"),
}
# wall_clock variants by the names the text gives them
VARIANT_NAMES = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm", "gelu": "GELU FFN", "swiglu": "SwiGLU FFN"}
ATTENTION_ORDER = ("MHA", "GQA", "MQA")  # most KV heads first


def sentence(clause: str) -> str:
    """A finding's clause as a sentence of its own: capital first letter, full stop."""
    return clause[:1].upper() + clause[1:] + "."


def not_measured(exam: str) -> str:
    return f"not measured yet: run `snakemake --cores 1 exams` (or `python -m anatomy exam {exam}`)"


def seed_list(deltas: pd.Series) -> str:
    """Per-seed differences, seeds as the report lists them (42 / 7)."""
    ordered = deltas.sort_index(ascending=False)
    seeds = " / ".join(str(int(seed)) for seed in ordered.index)
    return f"{' / '.join(fmt(v, sign=True) for v in ordered)} (seed{'s' if len(ordered) > 1 else ''} {seeds})"


def speedup_words(ratio: float) -> str:
    """The KV cache's effect on generation speed (cached over recomputed characters per second):
    "20.3x faster", or "2.0x slower" where it costs more than it saves (a tiny model, a short context)."""
    return f"{ratio:.1f}x faster" if ratio >= 1 else f"{1 / ratio:.1f}x slower"


# How a cache compares with another's, in words where the ratio is a plain fraction
FRACTIONS = {1 / 2: "half of", 1 / 4: "a quarter of", 1 / 8: "an eighth of"}


def fraction_words(ratio: float) -> str:
    """One size against another: "half of", "a quarter of", else "0.37x"."""
    for fraction, words in FRACTIONS.items():
        if math.isclose(ratio, fraction, rel_tol=1e-6):
            return words
    return f"{ratio:.2f}x"


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
        return f"{name} not timed yet"
    manual, fused = times.loc[variant, "manual"], times.loc[variant, "fused"]
    if math.isnan(manual) or math.isnan(fused):
        impl, ms = ("manual", manual) if math.isnan(fused) else ("fused", fused)
        return f"{name} {ms:.3f} ms ({impl} only)"
    return (
        f"{name} hand-written {manual:.3f} ms vs fused {fused:.3f} ms ({times.loc[variant, 'manual_over_fused']:.1f}x)"
    )


def wall_clock_text(data: Results, part: str, mine: str, other: str) -> str:
    times = wall_clock_times(data, part)
    if times.empty:
        return not_measured("wall_clock")
    shape = times["shape"].dropna().iloc[0]
    return f"{impl_text(times, mine)}; {impl_text(times, other)} (forward + backward on {shape})"


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
        return f"on the wall clock, hand-written {name} takes {manual:.2f}x the {other_name}'s time"
    said = f"on the wall clock, fused {name} takes {fused:.2f}x the {other_name}'s time"
    if not math.isnan(manual):
        said += f" (hand-written {manual:.2f}x)"
    by_hand = times.loc[mine, "manual_over_fused"]
    if not math.isnan(by_hand):
        said += f", and written by hand {by_hand:.1f}x its own fused time"
    return said


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
        f"the control ({control['variant'].iloc[0]}, one code timed as both) comes out at "
        f"{control['manual_over_fused'].iloc[0]:.2f}x: the noise of these timings"
        if not control.empty
        else None
    )
    if is_control.all():
        return noise
    top = ratios[~is_control].iloc[0]
    if top["manual_over_fused"] >= 1:
        how = f"{top['manual_over_fused']:.1f}x slower than its fused version"
    else:  # no hand-written part is slower: say so instead of inventing a gap
        how = f"the slowest relative to fused, and still {1 / top['manual_over_fused']:.1f}x faster than it"
    said = (
        f"the hand-written {top['variant']} ({top['part']}) is {how}: {top['manual_ms']:.3f} ms against "
        f"{top['fused_ms']:.3f} ms, forward and backward on {top['shape']}"
    )
    return f"{said}; {noise}" if noise else said


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


def vanished_note(ratio: float) -> str:
    """What a first / last block gradient ratio means when the first block's has vanished; else nothing."""
    return "; the first block's gradient has all but vanished" if ratio < VANISHED_RATIO else ""


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
        said.append(
            f"{norm_pos}-norm no norms logged"
            if ratio is None
            else f"{norm_pos}-norm {ratio['first_to_last']:.3g}x (step {int(ratio['step'])}"
            f"{vanished_note(ratio['first_to_last'])})"
        )
    return f"at lr {lr:g}, first / last block's gradient norm at the last logged step: {', '.join(said)}"


def depth_text(data: Results, bold: bool = False) -> str:
    """The stability map in words (the largest lr in bold, for the dashboard), and the gradients."""
    depth = data.exams.depth
    if depth.empty:
        return not_measured("depth")
    layers = "/".join(str(n) for n in sorted(depth["n_layer"].unique()))
    said = f"{layers} layers, no warmup: {stability_text(data.exams.depth_stability, bold=bold)}"
    gradients = gradient_text(data)
    return f"{said}; {gradients}" if gradients else said


def depth_finding(data: Results) -> str | None:
    stability = data.exams.depth_stability.set_index("norm_pos")
    if not {"post", "pre"} <= set(stability.index):
        return None
    post, pre = stability.loc["post", "max_trained_lr"], stability.loc["pre", "max_trained_lr"]
    if pd.isna(pre) and pd.isna(post):
        return "without warmup neither wiring trains at any learning rate tried"
    if pd.isna(post):
        return f"without warmup pre-norm trains up to lr {pre:g}, where post-norm trains at none tried"
    if pd.isna(pre) or post > pre:
        return "without warmup post-norm trains at a larger learning rate than pre-norm"
    if post == pre:
        return f"without warmup both wirings train up to the same lr, {pre:g}"
    return f"without warmup pre-norm still trains at {pre / post:.3g}x the largest lr post-norm survives ({pre:g} vs {post:g})"


def spread_finding(data: Results, run_id: str, norms: pd.DataFrame) -> str:
    """One run's first-to-last gradient ratio at its first and last logged step, and where it broke
    (`norms`: its gradient norms, anatomy.results.reader.grad_norms_of)."""
    spread = data.exams.grad_norm_spread
    label = data.exams.grad_norm_runs.set_index("run_id")["label"].get(run_id, run_id)
    ratios = finite_ratios(spread[spread["run_id"] == run_id])
    broke = norms[~np.isfinite(norms["norm"].astype(float))]
    breaks = f" Its gradients are NaN/inf from step {int(broke['step'].min())}." if not broke.empty else ""
    if ratios.empty:
        return f"{label}: no finite first-to-last ratio to show.{breaks}"
    first, last = ratios.iloc[0], ratios.iloc[-1]
    return (
        f"In {label} the first block's gradient norm is {first['first_to_last']:.3g}x the last block's at step "
        f"{int(first['step'])} and {last['first_to_last']:.3g}x at step {int(last['step'])}"
        f"{vanished_note(last['first_to_last'])}.{breaks}"
    )


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
        return f"{name} read only within its training length (0-{first['ctx_len'] - 1}): {per_seed(within, 'within')}"
    spans = {(row.window_len, far_span(row), within_span(row)) for row in measured.itertuples()}
    if len(spans) > 1:  # seeds read on different windows
        return f"{name}: " + "; ".join(
            f"seed {r.seed}: {fmt(r.far_loss)} at {far_span(r)} of {r.window_len:,} vs {fmt(r.within_loss)} at "
            f"{within_span(r)}"
            for r in measured.itertuples()
        )
    return (
        f"{name}: {per_seed(within, 'far')} at positions {far_span(first)} of {first['window_len']:,}-character "
        f"windows vs {per_seed(within, 'within')} at {within_span(first)} "
        f"(seed{'s' if len(measured) > 1 else ''} {seeds_of(measured)})"
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


def learned_text(data: Results) -> str:
    """What the length exam says of learned position tables: where they stop, and why."""
    length = data.exams.length[data.exams.length["run_id"].isin(data.runs["run_id"])]
    learned = length[length["positions"] == "learned positions"]
    if learned.empty:
        return "learned positions: not examined yet"
    # a window with readable positions inside the table and none past it
    readable = set(learned.loc[learned["possible"], "run_id"])
    stopped = learned[
        ~learned["possible"] & (learned["bucket_start"] >= learned["ctx_len"]) & learned["run_id"].isin(readable)
    ]
    if stopped.empty:
        return "learned positions: examined only within the training length"
    first = stopped.iloc[0]
    n_experiments = stopped["experiment"].nunique()
    return (
        f"learned positions ({n_experiments} experiment{'s' if n_experiments > 1 else ''}): not possible past "
        f"position {int(first['ctx_len']) - 1} ({first['reason']})"
    )


def length_text(data: Results) -> str:
    if data.exams.length.empty:
        return not_measured("length RUN_DIR")
    rope = rope_runs(data)
    said = [
        length_pair_text(f"RoPE, {run_name(rope)}", length_by_run(data, rope))
        if not rope.empty
        else "RoPE: not examined yet",
        learned_text(data),
    ]
    broken = data.runs[data.runs["positions"].str.startswith("RoPE broken")]
    for kind, runs in broken.groupby("positions"):
        measured = length_by_run(data, runs)
        said.append(f"{kind}: not examined yet" if measured.empty else length_pair_text(kind, measured))
    return "; ".join(said)


def length_finding(data: Results) -> str | None:
    rope = rope_runs(data)
    measured = length_by_run(data, rope) if not rope.empty else pd.DataFrame()
    if measured.empty or measured["far_start"].min() < measured["ctx_len"].max() or measured["far_loss"].isna().any():
        return None
    first = measured.iloc[0]
    said = (
        f"past its training length RoPE ({run_name(rope)}) reads on, at {measured['far_over_within'].mean():.2f}x "
        f"its loss within it (positions {far_span(first)} against {within_span(first)}, mean over seeds)"
    )
    if learned_text(data).startswith("learned positions ("):
        said += ", where a learned position table cannot read at all"
    return said


# ---------------------------------------------------------------------------------------------
# The KV cache (GQA)


def cache_speedup(data: Results) -> pd.Series | None:
    """At the longest context timed both ways (GQA's if it was timed): the kv_cache_speedup row."""
    speeds = data.exams.kv_speedup
    if speeds.empty:
        return None
    kind = "GQA" if (speeds["attention"] == "GQA").any() else speeds["attention"].iloc[0]
    return speeds[speeds["attention"] == kind].sort_values("context").iloc[-1]


def speedup_text(speed: pd.Series) -> str:
    return (
        f"at {int(speed['context']):,} characters of context the cache makes {speed['attention']} generation "
        f"{speedup_words(speed['speedup'])} ({speed['cached']:,.1f} vs {speed['recomputed']:,.1f} characters/s)"
    )


def mqa_text(data: Results) -> str:
    """MQA's best val against the mini-LLaMA's (GQA), seed by seed."""
    mqa = data.runs[(data.runs["group"] == "break") & (data.runs["n_kv_head"] == 1)]
    llama = headline_of(data, "llama")
    deltas = paired_deltas(mqa, llama)
    if mqa.empty or llama.empty or deltas.empty:
        return "MQA's best val vs the mini-LLaMA's: not trained yet"
    return f"MQA's best val vs the mini-LLaMA's {seed_list(deltas)}"


def kv_heads(n: int) -> str:
    return f"{n} KV head{'s' if n != 1 else ''}"


def kv_scale_text(data: Results) -> str | None:
    """The cache of a LLaMA-scale model by the same formula (the kv_cache_at_scale view)."""
    scale = data.exams.kv_scale
    if scale.empty:
        return None
    return f"at LLaMA scale ({int(scale['tokens'].iloc[0]):,} tokens) " + " vs ".join(
        f"{gib_text(row.gib)} for {row.name}" for row in scale.itertuples()
    )


def kv_cache_text(data: Results) -> str:
    exams = data.exams
    if exams.kv_cache.empty and exams.kv_timing.empty:
        return f"{not_measured('kv_cache RUN_DIR')}; {mqa_text(data)}"
    kinds = exams.kv_per_token.set_index("attention")
    sizes = [
        f"{kind} ({kv_heads(int(kinds.loc[kind, 'n_kv_head']))}) {kinds.loc[kind, 'measured']:,.0f}"
        if kind in kinds.index
        else f"{kind} not measured yet"
        for kind in ATTENTION_ORDER
    ]
    said = [
        "cache bytes per token, measured: " + ", ".join(sizes) if not kinds.empty else "cache bytes: not measured yet"
    ]
    speed = cache_speedup(data)
    said.append("generation not timed both ways yet" if speed is None else speedup_text(speed))
    if (scale := kv_scale_text(data)) is not None:
        said.append(scale)
    return "; ".join(said + [mqa_text(data)])


def kv_cache_finding(data: Results) -> str | None:
    kinds = data.exams.kv_per_token.set_index("attention")
    said = []
    if {"MHA", "GQA"} <= set(kinds.index):
        said.append(
            f"GQA's cache is {fraction_words(kinds.loc['GQA', 'measured'] / kinds.loc['MHA', 'measured'])} "
            "MHA's per token"
        )
    speed = cache_speedup(data)
    if speed is not None:
        said.append(
            f"that cache makes generation {speedup_words(speed['speedup'])} than "
            f"recomputing the context, at {int(speed['context']):,} characters"
        )
    return " and ".join(said) or None


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
    }
