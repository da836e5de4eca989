"""Exams: each part of the mini-LLaMA tested where it is made to pay.

The training loss of a small model is not what RoPE, GQA and pre-norm were made for, so each has
the exam it was made for (anatomy/exams/): reading past the training length, the KV cache, depth without
warmup; and the wall clock of every part alone. One section per exam: what it tests, what the data
show (a sentence computed from the rows), the charts, and what is still missing.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import streamlit as st

from anatomy.exams import fraction_words, speedup_words, weighted_loss
from anatomy.report_data import stability_text
from dashboard import charts, loaders
from dashboard.analysis import depth_cells, finite, length_curves

# anatomy/exams/wall_clock.py names so the variant whose manual and fused run the same code: a
# control whose ratio is the timings' own noise, not a part that fusing speeds up
CONTROL_MARK = "no fused kernel"


def say_empty(exam: str, what: str, path: str) -> None:
    """One line for an exam with no rows: which command fills it."""
    shipped = (
        " The shipped reference results hold none of this exam yet: run it on a grid of your own."
        if loaders.is_reference(path)
        else ""
    )
    st.info(f"No {what} in this database yet. {loaders.run_exams_help(exam)}{shipped}", icon=":material/quiz:")


def say_not_examined(runs: pd.DataFrame, examined: pd.Series, exam: str) -> None:
    """A caption naming the runs of the database that this exam has not reached yet."""
    missing = runs[~runs["run_id"].isin(set(examined))]
    if examined.empty or missing.empty:
        return
    names = ", ".join(missing["label"].head(8)) + (", ..." if len(missing) > 8 else "")
    st.caption(
        f"{runs['run_id'].isin(set(examined)).sum()} of {len(runs)} runs examined; not yet: {names}. "
        + loaders.run_exams_help(exam)
    )


# ---------------------------------------------------------------------------------------------
# RoPE: loss by position


def length_summary(curves: pd.DataFrame) -> pd.DataFrame:
    """Per experiment: the loss within the training length, and at the farthest bucket it was read."""
    rows = []
    for experiment, buckets in curves.groupby("experiment", sort=False):
        ctx_len = int(buckets["ctx_len"].max())
        far = buckets[buckets["bucket_start"] == buckets["bucket_start"].max()].iloc[0]
        past = buckets[buckets["bucket_start"] >= ctx_len]
        rows.append(
            {
                "experiment": experiment,
                "positions": buckets["positions"].iloc[0],
                "runs": int(buckets["runs"].max()),
                "ctx_len": ctx_len,
                "window_len": int(buckets["window_len"].max()),
                "within": weighted_loss(buckets[(buckets["bucket_end"] < ctx_len) & buckets["possible"]]),
                "far_bucket": f"{int(far['bucket_start'])}-{int(far['bucket_end'])}",
                "far_start": int(far["bucket_start"]),
                "far_loss": far["loss"] if far["possible"] else math.nan,
                "far_possible": bool(far["possible"]),
                "rows_past": not past.empty,
                "readable_past": bool(past["possible"].any()),
            }
        )
    summary = pd.DataFrame(rows)
    summary["far_over_within"] = summary["far_loss"] / summary["within"]
    return summary


def length_finding(summary: pd.DataFrame, headline: set[str]) -> str:
    """One sentence: RoPE's loss far past the training length against within it (a headline
    model's, when one was examined), and what a learned table does there."""
    rope = summary[summary["positions"] == "RoPE"]
    chosen = rope[rope["experiment"].isin(headline)] if rope["experiment"].isin(headline).any() else rope
    row = (chosen if not chosen.empty else summary).iloc[0]
    who = f"RoPE ({row['experiment']})" if row["positions"] == "RoPE" else f"{row['experiment']} ({row['positions']})"
    if row["far_start"] < row["ctx_len"] or pd.isna(row["far_loss"]):
        sentence = (
            f"{who} was read only within its training length ({row['ctx_len']} characters): "
            f"loss {row['within']:.3f}, nothing past it yet"
        )
    else:
        sentence = (
            f"At {row['window_len']:,} characters {who} has a loss of **{row['far_loss']:.3f}** at positions "
            f"{row['far_bucket']} against **{row['within']:.3f}** within the training length "
            f"(positions 0-{row['ctx_len'] - 1})"
        )
    learned = summary[(summary["positions"] == "learned positions") & summary["rows_past"] & ~summary["readable_past"]]
    if not learned.empty:
        first = learned.iloc[0]
        sentence += (
            f"; a learned position table ({', '.join(learned['experiment'])}) cannot read past position "
            f"{first['ctx_len'] - 1} at all"
        )
    return sentence + "."


def length_section(exams: loaders.ExamResults) -> None:
    st.header("RoPE: reading past the training length")
    st.caption(
        "The exam reads validation windows longer than the models were trained on and averages the loss by "
        "position: a learned position table has no row past the training length, while RoPE encodes only "
        "the distance between two characters, so it can at least read on."
    )
    length = exams.length
    if length.empty:
        say_empty("length", "loss-by-position results (table exam_length)", exams.path)
        return
    unread = length[~length["run_id"].isin(length.loc[length["possible"], "run_id"])].drop_duplicates("run_id")
    for _, row in unread.iterrows():
        st.warning(f"{row['label']}: no window could be read ({row['reason']}).", icon=":material/warning:")
    curves = length_curves(length)
    if curves.empty:
        return
    summary = length_summary(curves)
    st.markdown(length_finding(summary, set(exams.runs.loc[exams.runs["group"] == "headline", "experiment"])))
    ctx_lens = summary["ctx_len"].unique()
    st.altair_chart(charts.length_chart(curves, ctx_lens[0] if len(ctx_lens) == 1 else None), width="stretch")
    st.caption(
        "Each line is one experiment (mean over its seeds) on the longest window it was read on; bold: the "
        "headline models and the RoPE experiments. A learned table's line stops at the training length."
    )
    stops = summary[(summary["positions"] == "learned positions") & ~summary["rows_past"]]
    for _, row in stops.iterrows():
        st.info(
            f"{row['experiment']} (learned positions) has no rows past its training length ({row['ctx_len']}): "
            f"its windows were at most {row['window_len']} characters. Run the exam again with longer windows.",
            icon=":material/straighten:",
        )
    # past a learned table's last row there is no loss: say so in the cell instead of "None"
    shown = summary.assign(
        far_loss=[
            "cannot read" if not possible else f"{v:.4f}" if pd.notna(v) else "–"
            for v, possible in zip(summary["far_loss"], summary["far_possible"])
        ],
        far_over_within=[f"{v:.2f}" if pd.notna(v) else "–" for v in summary["far_over_within"]],
    )
    st.dataframe(
        shown[
            [
                "experiment",
                "positions",
                "runs",
                "ctx_len",
                "window_len",
                "within",
                "far_bucket",
                "far_loss",
                "far_over_within",
            ]
        ],
        hide_index=True,
        width="stretch",
        column_config={
            "ctx_len": st.column_config.NumberColumn("trained on", format="%d"),
            "window_len": st.column_config.NumberColumn("window", format="%d"),
            "within": st.column_config.NumberColumn("loss within training length", format="%.4f"),
            "far_bucket": st.column_config.TextColumn("farthest positions"),
            "far_loss": st.column_config.TextColumn("loss there"),
            "far_over_within": st.column_config.TextColumn("far / within"),
        },
    )
    say_not_examined(exams.runs, length["run_id"], "length")


# ---------------------------------------------------------------------------------------------
# GQA: the KV cache


def bytes_per_token(cache: pd.DataFrame) -> pd.DataFrame:
    """Per attention kind: the cache's bytes per cached position (median over runs), measured
    and by the formula."""
    per_token = cache.assign(
        measured=cache["measured_bytes"] / cache["tokens"], formula=cache["formula_bytes"] / cache["tokens"]
    )
    kinds = per_token.groupby(["attention", "n_kv_head"], as_index=False).agg(
        measured=("measured", "median"),
        formula=("formula", "median"),
        experiments=("experiment", lambda names: ", ".join(sorted(set(names.dropna())))),
    )
    return kinds.sort_values("n_kv_head", ascending=False).reset_index(drop=True)


def cache_finding(kinds: pd.DataFrame) -> str:
    most, fewest = kinds.iloc[0], kinds.iloc[-1]
    if len(kinds) == 1:
        return (
            f"Only {most['attention']} ({most['n_kv_head']} KV heads) is measured so far: "
            f"**{most['measured']:,.0f}** bytes of cache per token."
        )
    sentence = (
        f"{fewest['attention']}'s cache is {fraction_words(fewest['measured'] / most['measured'])} "
        f"{most['attention']}'s: **{fewest['measured']:,.0f}** vs **{most['measured']:,.0f}** bytes per token"
    )
    between = [
        f"{row['attention']} ({row['n_kv_head']} KV heads) {row['measured']:,.0f}"
        for _, row in kinds.iloc[1:-1].iterrows()
    ]
    return sentence + (f"; {', '.join(between)}" if between else "") + "."


def rate(chars_per_s: float) -> str:
    """Characters per second, with a decimal where there are few (1.6, not 2)."""
    return f"{chars_per_s:,.0f}" if chars_per_s >= 100 else f"{chars_per_s:.1f}"


def timing_finding(timing: pd.DataFrame) -> str | None:
    """At the longest context timed both ways: how much faster the cache makes generation."""
    speeds = timing.pivot_table(
        index=["attention", "context"], columns="cached", values="chars_per_s", aggfunc="median"
    )
    if True not in speeds or False not in speeds:
        return None
    speeds = speeds.dropna(subset=[True, False]).reset_index()
    if speeds.empty:
        return None
    kinds = list(speeds["attention"])
    kind = "GQA" if "GQA" in kinds else kinds[0]
    row = speeds[speeds["attention"] == kind].sort_values("context").iloc[-1]
    return (
        f"At {row['context']:,} characters of context the cache makes {kind} generation "
        f"**{speedup_words(row[True], row[False])}**: {rate(row[True])} against {rate(row[False])} characters per second."
    )


def gib(n_bytes: float) -> str:
    value = n_bytes / 2**30
    return f"{value:,.0f} GiB" if value >= 10 else f"{value:.3g} GiB"


def scale_finding(scale: pd.DataFrame) -> str:
    first = scale.iloc[0]
    sizes = " against ".join(f"**{gib(row['bytes'])}** for {row['name']}" for _, row in scale.iterrows())
    return (
        f"By the same formula at LLaMA scale ({first['tokens']:,} cached tokens, {first['n_layer']} layers, "
        f"{first['element_bytes']}-byte values): {sizes}."
    )


def kv_cache_section(exams: loaders.ExamResults) -> None:
    st.header("GQA: the KV cache")
    st.caption(
        "GQA lets groups of query heads share one key/value head, which shrinks the cache that generation "
        "keeps of every past position; the exam measures the cache's bytes (from its tensors, checked "
        "against the formula) and how much faster generation runs with it than without."
    )
    cache, timing, scale = exams.kv_cache, exams.kv_timing, exams.kv_scale
    if cache.empty and timing.empty and scale.empty:
        say_empty("kv_cache", "KV-cache results (tables exam_kv_cache, exam_kv_timing, exam_kv_scale)", exams.path)
        return
    if not cache.empty:
        kinds = bytes_per_token(cache)
        st.markdown(cache_finding(kinds))
        differ = cache[cache["measured_bytes"] != cache["formula_bytes"]]
        if differ.empty:
            st.caption(f"Measured from the cache tensors, the bytes equal the formula in all {len(cache)} rows.")
        else:
            st.warning(
                f"Measured bytes differ from the formula in {len(differ)} of {len(cache)} rows: "
                + "; ".join(
                    f"{r['label']} at {r['tokens']} tokens: {r['measured_bytes']:,} vs {r['formula_bytes']:,}"
                    for _, r in differ.head(4).iterrows()
                ),
                icon=":material/warning:",
            )
        absent = [kind for kind in charts.ATTENTION_ORDER if kind not in set(kinds["attention"])]
        if absent:
            st.caption(
                f"Not measured yet: {', '.join(absent)} (the workflow measures the experiments of config "
                "`exams.kv_cache.experiments`). " + loaders.run_exams_help("kv_cache")
            )
        bars = cache.melt(
            id_vars=["attention", "n_kv_head", "tokens"],
            value_vars=["measured_bytes", "formula_bytes"],
            var_name="source",
            value_name="bytes",
        )
        bars["source"] = bars["source"].str.replace("_bytes", "")
        bars = bars.groupby(["attention", "n_kv_head", "tokens", "source"], as_index=False)["bytes"].median()
        st.altair_chart(charts.kv_cache_chart(bars), width="stretch")
    else:
        say_empty("kv_cache", "cache sizes (table exam_kv_cache)", exams.path)
    if not timing.empty:
        finding = timing_finding(timing)
        if finding:
            st.markdown(finding)
        else:
            st.caption("Generation was timed only one way (with or without the cache) so far.")
        drawn = timing.assign(cache=np.where(timing["cached"], "with cache", "recomputed"))
        st.altair_chart(charts.kv_timing_chart(drawn), width="stretch")
        st.caption(
            "Solid: with the KV cache; dashed: the whole context recomputed for every new character. "
            "Median over rounds."
        )
    else:
        say_empty("kv_cache", "generation timings (table exam_kv_timing)", exams.path)
    if not scale.empty:
        st.markdown(scale_finding(scale))
        st.dataframe(
            scale.assign(GiB=scale["bytes"] / 2**30),
            hide_index=True,
            width="stretch",
            column_config={
                "bytes": st.column_config.NumberColumn("bytes", format="localized"),
                "GiB": st.column_config.NumberColumn("GiB", format="%.1f"),
            },
        )
    examined = pd.concat([cache["run_id"], timing["run_id"]])
    # the experiments chosen for this exam are those with a run examined: name their seeds not yet reached
    chosen = exams.runs.loc[exams.runs["run_id"].isin(set(examined)), "experiment"]
    say_not_examined(exams.runs[exams.runs["experiment"].isin(set(chosen))], examined, "kv_cache")


# ---------------------------------------------------------------------------------------------
# Pre-norm: depth without warmup


def stability_finding(stability: pd.DataFrame, depth: pd.DataFrame) -> str:
    layers = ", ".join(str(n) for n in sorted(depth["n_layer"].unique()))
    return f"With {layers} layers and no warmup, {stability_text(stability, bold=True)}."


def grad_norm_default(runs: pd.DataFrame) -> int:
    """A post-norm run of the most layers (grid runs first): where the gradients drift apart."""
    post = runs[runs["norm_pos"] == "post"]
    if post.empty:
        return 0
    return int(runs.index.get_loc(post.sort_values("layers", ascending=False, kind="stable").index[0]))


def spread_finding(label: str, spread: pd.DataFrame, norms: pd.DataFrame) -> str:
    """The chosen run's first-to-last ratio at its first and last logged step, and where it broke."""
    ratios = spread[finite(spread["first_to_last"]) & (spread["first_to_last"] > 0)].sort_values("step")
    broke = norms[~finite(norms["norm"])]
    breaks = f" Its gradients are NaN/inf from step {int(broke['step'].min())}." if not broke.empty else ""
    if ratios.empty:
        return f"{label}: no finite first-to-last ratio to show.{breaks}"
    first, last = ratios.iloc[0], ratios.iloc[-1]
    return (
        f"In {label} the first block's gradient norm is **{first['first_to_last']:.3g}x** the last block's at step "
        f"{int(first['step'])} and **{last['first_to_last']:.3g}x** at step {int(last['step'])}.{breaks}"
    )


def depth_section(exams: loaders.ExamResults) -> None:
    st.header("Pre-norm: depth without warmup")
    st.caption(
        "Pre-norm keeps a clean residual path from the loss to every block; the exam trains 12-layer models "
        "without warmup at rising learning rates, post-norm against pre-norm, and logs every block's "
        "gradient norm."
    )
    depth = exams.depth
    if depth.empty:
        say_empty("depth", "stability map (table exam_depth)", exams.path)
    else:
        st.markdown(stability_finding(exams.depth_stability, depth))
        cells = depth_cells(depth)
        st.altair_chart(charts.stability_map(cells), width="stretch")
        running = cells[cells["state"] == "running"]
        if not running.empty:
            st.info(
                f"{len(running)} cell(s) still running ({', '.join(running['cell'])}): they count as not "
                "trained until they finish.",
                icon=":material/hourglass_top:",
            )
        wanted = pd.MultiIndex.from_product([["post", "pre"], sorted(depth["lr"].unique())])
        absent = [
            f"{pos}-norm at lr {lr:g}"
            for pos, lr in wanted.difference(pd.MultiIndex.from_frame(depth[["norm_pos", "lr"]]))
        ]
        if absent:
            st.caption(f"Not in the map yet: {', '.join(absent)}. " + loaders.run_exams_help("depth"))

    st.subheader("Gradient norm of every block")
    runs = exams.grad_norm_runs
    if runs.empty:
        say_empty(
            "depth",
            "gradient norms (table grad_norms: every run trained by this version logs them, and so "
            "does each cell of the depth map)",
            exams.path,
        )
        return
    # the deepest runs first (the exam's own), grid runs before the map's cells
    runs = runs.sort_values(["layers", "depth_map", "label"], ascending=[False, True, True], kind="stable")
    runs = runs.reset_index(drop=True)
    labels = dict(zip(runs["run_id"], runs["label"]))
    run_id = st.selectbox(
        "Run", list(runs["run_id"]), index=grad_norm_default(runs), format_func=labels.get, key="exams_grad_run"
    )
    norms = loaders.grad_norms_of(exams.path, run_id)
    spread = exams.grad_norm_spread
    st.markdown(spread_finding(labels[run_id], spread[spread["run_id"] == run_id], norms))
    st.altair_chart(charts.grad_norm_heatmap(norms), width="stretch")
    st.caption(
        "Every step for the first 200, then at every evaluation. Colour: the block's gradient norm, log scale; "
        "red: NaN/inf."
    )
    # every run logs its gradient norms: compare the deepest ones (and the chosen run), not the whole grid
    deepest = runs[runs["layers"] == runs["layers"].max()]
    compared = spread[spread["run_id"].isin(set(deepest["run_id"]) | {run_id})]
    st.altair_chart(charts.grad_norm_spread_chart(compared, labels[run_id]), width="stretch")
    st.caption(
        f"The first block's gradient norm over the last block's (1: equal), for the {int(deepest['layers'].max())}"
        "-layer runs and the chosen one, which is bold. Click a run in the legend to highlight it."
    )


# ---------------------------------------------------------------------------------------------
# Pitfall 4: the wall clock of each part alone


def wall_clock_ratios(rows: pd.DataFrame) -> pd.DataFrame:
    """Per part and variant timed both ways: manual and fused median ms and their ratio."""
    both = rows.pivot_table(index=["part", "variant"], columns="impl", values="median_ms")
    if "manual" not in both or "fused" not in both:
        return pd.DataFrame(columns=["part", "variant", "manual", "fused", "ratio"])
    both = both[["manual", "fused"]].dropna().reset_index()
    both["ratio"] = both["manual"] / both["fused"]
    return both.sort_values("ratio", ascending=False).reset_index(drop=True)


def wall_clock_finding(ratios: pd.DataFrame, rows: pd.DataFrame) -> str:
    is_control = ratios["variant"].str.contains(CONTROL_MARK, regex=False)
    control = ratios[is_control]
    noise = (
        f" The control ({control['variant'].iloc[0]}, one code timed as both) comes out at "
        f"{control['ratio'].iloc[0]:.2f}x: the noise of these timings."
        if not control.empty
        else ""
    )
    if is_control.all():
        return noise.strip()
    top = ratios[~is_control].iloc[0]
    shape = rows[(rows["part"] == top["part"]) & (rows["variant"] == top["variant"])]["shape"].iloc[0]
    if top["ratio"] >= 1:
        how = f"**{top['ratio']:.1f}x** slower than its fused version"
    else:  # no hand-written part is slower: say so instead of inventing a gap
        how = f"the slowest relative to fused, and still **{1 / top['ratio']:.1f}x** faster than it"
    return (
        f"The hand-written {top['variant']} ({top['part']}) is {how}: {top['manual']:.3f} ms against "
        f"{top['fused']:.3f} ms, forward and backward on {shape}.{noise}"
    )


def wall_clock_section(exams: loaders.ExamResults) -> None:
    st.header("The wall clock of each part")
    st.caption(
        "Pitfall 4: a hand-written part can be slow for reasons that have nothing to do with the "
        "architecture; the exam times each part alone, forward and backward, as written here and as "
        "PyTorch's fused kernels."
    )
    rows = exams.wall_clock
    if rows.empty:
        say_empty("wall_clock", "wall-clock results (table exam_wall_clock)", exams.path)
        return
    ratios = wall_clock_ratios(rows)
    if ratios.empty:
        st.caption("No part is timed both ways (manual and fused) yet, so there is no ratio to give.")
    else:
        st.markdown(wall_clock_finding(ratios, rows))
    st.altair_chart(charts.wall_clock_chart(rows), width="stretch")
    st.caption("Bars: the median over rounds; the black line runs from the fastest round to the slowest.")
    impls = rows.groupby(["part", "variant"])["impl"].agg(set)
    one_way = [
        f"{part} · {variant} ({', '.join(sorted(found))} only)"
        for (part, variant), found in impls.items()
        if len(found) < 2
    ]
    if one_way:
        st.caption(f"Timed one way only: {'; '.join(one_way)}. " + loaders.run_exams_help("wall_clock"))


exams = loaders.require_exams()
st.title("Exams: each part where it pays")
st.caption(
    "The training loss of a small model is not what RoPE, GQA and pre-norm were made for (Ablations shows "
    "what it says of them). Each is examined where it is made to pay: reading past the training length, "
    "the memory of generation, depth without warmup; and every part's wall clock alone."
)
length_section(exams)
kv_cache_section(exams)
depth_section(exams)
wall_clock_section(exams)
