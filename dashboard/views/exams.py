"""Exams: each part of the mini-LLaMA tested where it is made to pay.

The training loss of a small model is not what RoPE, GQA and pre-norm were made for, so each has
the exam it was made for (anatomy/exams/): reading past the training length, the KV cache, depth without
warmup; and the wall clock of every part alone. Then the parts of 2024-26 (QK-norm, MLA, experts),
each by its own exam, with the lab's finding record (anatomy/report/findings.py): what the part buys
here and at what cost, the sentence the report's "Which part wins where" shows. One section per exam:
what it tests, what the data show (the finding and its detail, in the report's own words:
anatomy/report/exam_findings.py), the charts, and what is still missing.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import streamlit as st

import re

from anatomy.language import _, join_list
from anatomy.report import exam_findings as findings
from anatomy.report.findings import exam_part_findings, parts_at_full_size
from anatomy.report.protocol import not_a_finding, protocol_of
from anatomy.report.roles import only_runs_of
from anatomy.report.wording import wiring
from anatomy.results.reader import Results, run_label
from dashboard import charts, loaders
from dashboard.analysis import depth_cells, length_curves
from dashboard.findings import show_part_glossary


def say_finding(finding: str | None, detail: str) -> None:
    """The exam's finding as a sentence, its full detail (the report's table cell) below it. On
    runs that are not the chapter's (the banner above says why), the finding is what these runs
    showed, never a finding about the part."""
    if finding and findings_testable:
        st.markdown(f"**{findings.sentence(finding)}**")
    elif finding:
        st.markdown(not_a_finding(findings.sentence(finding)))
    st.caption(findings.sentence(detail))


def say_empty(exam: str, what: str, path: str) -> None:
    """One line for an exam with no rows (`what`: translated): which command fills it."""
    said = (
        _(
            "No {what} in this database yet. {how} The shipped reference results hold none of this exam yet: "
            "run it on a grid of your own."
        )
        if loaders.is_reference(path)
        else _("No {what} in this database yet. {how}")
    )
    st.info(said.format(what=what, how=loaders.run_exams_help(exam)), icon=":material/quiz:")


def say_not_examined(runs: pd.DataFrame, examined: pd.Series, exam: str) -> None:
    """How many of the grid's runs (`runs`: the studies have their own page) this exam has read:
    all of them, or which are not read yet."""
    if examined.empty or runs.empty:
        return
    missing = runs[~runs["run_id"].isin(set(examined))]
    reached = int(runs["run_id"].isin(set(examined)).sum())
    if missing.empty:
        st.caption(_("{examined} of the grid's {runs} runs examined.").format(examined=reached, runs=len(runs)))
        return
    names = list(missing["label"].head(8))
    if len(missing) > 8:
        names.append(_("{count} more").format(count=len(missing) - 8))
    st.caption(
        _("{examined} of the grid's {runs} runs examined; not yet: {names}. {how}").format(
            examined=reached,
            runs=len(runs),
            names=join_list(names),
            how=loaders.run_exams_help(exam),
        )
    )


# ---------------------------------------------------------------------------------------------
# RoPE: loss by position


def length_section(results: Results) -> None:
    exams = results.exams
    st.header(_("RoPE: reading past the training length"))
    st.caption(
        _(
            "The exam reads validation windows longer than the models were trained on and averages the loss by "
            "position: a learned position table has no row past the training length, while RoPE encodes only "
            "the distance between two characters, so it can at least read on."
        )
    )
    length = exams.length
    if length.empty:
        say_empty("length", _("loss-by-position results (table exam_length)"), results.path)
        return
    unread = length[~length["run_id"].isin(length.loc[length["possible"], "run_id"])].drop_duplicates("run_id")
    for row in unread.itertuples():
        st.warning(
            _("{run}: no window could be read ({reason}).").format(
                run=row.label, reason=findings.reason_in_words(row.reason)
            ),
            icon=":material/warning:",
        )
    curves = length_curves(length)
    if curves.empty:
        return
    say_finding(findings.length_finding(results), findings.length_text(results))
    ctx_lens = curves["ctx_len"].unique()
    charts.draw(charts.length_chart(curves, ctx_lens[0] if len(ctx_lens) == 1 else None, colours=colours))
    st.caption(
        _(
            "Each line is one experiment (mean over its seeds) on the longest window it was read on; bold: the "
            "headline models and the RoPE experiments. A learned table's line stops at the training length."
        )
    )
    reach = exams.length_reach
    stops = reach[(reach["positions"] == "learned positions") & (reach["far_start"] < reach["ctx_len"])]
    for _index, row in stops.drop_duplicates("experiment").iterrows():
        st.info(
            _(
                "{experiment} (learned positions) has no rows past its training length ({ctx_len}): its windows "
                "were at most {window} characters. Run the exam again with longer windows."
            ).format(experiment=row["experiment"], ctx_len=row["ctx_len"], window=row["window_len"]),
            icon=":material/straighten:",
        )
    # the length_reach view, one row per run; past a learned table's last row there is no loss
    cannot_read = _("cannot read")
    shown = reach.assign(
        run=[run_label(e, seed, translated=True) for e, seed in zip(reach["experiment"], reach["seed"])],
        far_positions=[f"{int(a)}-{int(b)}" for a, b in zip(reach["far_start"], reach["far_end"])],
        far_loss=[cannot_read if not ok else f"{v:.4f}" for v, ok in zip(reach["far_loss"], reach["far_possible"])],
        far_over_within=[f"{v:.2f}" if pd.notna(v) else "–" for v in reach["far_over_within"]],
        positions=[_(kind) for kind in reach["positions"]],  # the kinds are marked in anatomy/report/charts.py
    )
    st.dataframe(
        shown[
            ["run", "positions", "ctx_len", "window_len", "within_loss", "far_positions", "far_loss", "far_over_within"]
        ],
        hide_index=True,
        width="stretch",
        column_config={
            "run": st.column_config.TextColumn(_("run")),
            "positions": st.column_config.TextColumn(_("positions")),
            "ctx_len": st.column_config.NumberColumn(_("trained on (characters)"), format="%d"),
            "window_len": st.column_config.NumberColumn(_("window (characters)"), format="%d"),
            "within_loss": st.column_config.NumberColumn(_("loss within training length (nats/char)"), format="%.4f"),
            "far_positions": st.column_config.TextColumn(_("farthest positions")),
            "far_loss": st.column_config.TextColumn(_("loss there (nats/char)")),
            "far_over_within": st.column_config.TextColumn(_("far / within")),
        },
    )
    say_not_examined(grid_runs, length["run_id"], "length")


# ---------------------------------------------------------------------------------------------
# GQA: the KV cache


def kv_cache_section(results: Results) -> None:
    exams = results.exams
    st.header(_("GQA: the KV cache"))
    st.caption(
        _(
            "GQA lets groups of query heads share one key/value head, which shrinks the cache that generation "
            "keeps of every past position; the exam measures the cache's bytes (from its tensors, checked "
            "against the formula) and how much faster generation runs with it than without."
        )
    )
    cache, timing, scale = exams.kv_cache, exams.kv_timing, exams.kv_scale
    if cache.empty and timing.empty and scale.empty:
        say_empty("kv_cache", _("KV-cache results (tables exam_kv_cache, exam_kv_timing, exam_kv_scale)"), results.path)
        return
    say_finding(findings.kv_cache_finding(results), findings.kv_cache_text(results))
    if not cache.empty:
        kinds = exams.kv_per_token
        differ = cache[cache["measured_bytes"] != cache["formula_bytes"]]
        if differ.empty:
            st.caption(
                _("Measured from the cache tensors, the bytes equal the formula in all {rows} rows.").format(
                    rows=len(cache)
                )
            )
        else:
            said = [
                _("{run} at {tokens} tokens: {measured} vs {formula}").format(
                    run=r["label"],
                    tokens=r["tokens"],
                    measured=f"{r['measured_bytes']:,}",
                    formula=f"{r['formula_bytes']:,}",
                )
                for _index, r in differ.head(4).iterrows()
            ]
            st.warning(
                _("Measured bytes differ from the formula in {differ} of {rows} rows: {said}").format(
                    differ=len(differ), rows=len(cache), said=findings.clauses(said)
                ),
                icon=":material/warning:",
            )
        absent = [kind for kind in charts.ATTENTION_ORDER if kind not in set(kinds["attention"])]
        if absent:
            st.caption(
                _(
                    "Not measured yet: {kinds} (the workflow measures the experiments of config "
                    "`exams.kv_cache.experiments`). {how}"
                ).format(kinds=join_list(absent), how=loaders.run_exams_help("kv_cache"))
            )
        bars = cache.groupby(["attention", "n_kv_head", "tokens"], as_index=False)[
            ["measured_bytes", "formula_bytes"]
        ].median()
        charts.draw(charts.kv_cache_chart(bars))
        st.caption(
            _(
                "Bars: the bytes measured from the cache's tensors, on a log scale (the cache grows with every "
                "position it holds); the black tick on each bar: the formula."
            )
        )
    else:
        say_empty("kv_cache", _("cache sizes (table exam_kv_cache)"), results.path)
    if not timing.empty:
        drawn = timing.assign(cache=np.where(timing["cached"], "with cache", "recomputed"))
        charts.draw(charts.kv_timing_chart(drawn))
        st.caption(
            _(
                "Solid: with the KV cache; dashed: the whole context recomputed for every new character. "
                "Median over rounds."
            )
        )
    else:
        say_empty("kv_cache", _("generation timings (table exam_kv_timing)"), results.path)
    if not scale.empty:
        st.dataframe(
            scale.assign(name=scale["name"].map(model_in_words)),
            hide_index=True,
            width="stretch",
            column_config={
                "name": st.column_config.TextColumn(_("model")),
                "n_layer": st.column_config.NumberColumn(_("layers")),
                "n_kv_head": st.column_config.NumberColumn(_("KV heads")),
                "head_dim": st.column_config.NumberColumn(_("head size")),
                "tokens": st.column_config.NumberColumn(_("cached positions"), format="localized"),
                "element_bytes": st.column_config.NumberColumn(_("bytes per number")),
                "bytes": st.column_config.NumberColumn(_("bytes"), format="localized"),
                "gib": st.column_config.NumberColumn("GiB", format="%.1f"),
            },
        )
    examined = pd.concat([cache["run_id"], timing["run_id"]])
    # the experiments chosen for this exam are those with a run examined: name their seeds not yet reached
    chosen = grid_runs.loc[grid_runs["run_id"].isin(set(examined)), "experiment"]
    say_not_examined(grid_runs[grid_runs["experiment"].isin(set(chosen))], examined, "kv_cache")


# the exam_kv_scale view names a model in English ("7B-class, 32 KV heads (MHA)"): said again here
SCALE_MODEL = re.compile(r"(\d+)B-class, (\d+) KV heads \((\w+)\)")


def model_in_words(name: str) -> str:
    """A row of the cache-at-scale table, named in the reader's language."""
    if found := SCALE_MODEL.fullmatch(str(name)):
        billions, heads, kind = found.groups()
        return _("a {billions}B-parameter model, {heads} KV heads ({kind})").format(
            billions=billions, heads=heads, kind=kind
        )
    return str(name)


# ---------------------------------------------------------------------------------------------
# Pre-norm: depth without warmup


def grad_norm_default(runs: pd.DataFrame) -> int:
    """A post-norm run of the most layers (grid runs first): where the gradients drift apart."""
    post = runs[runs["norm_pos"] == "post"]
    if post.empty:
        return 0
    return int(runs.index.get_loc(post.sort_values("layers", ascending=False, kind="stable").index[0]))


def depth_section(results: Results) -> None:
    exams = results.exams
    st.header(_("Pre-norm: depth without warmup"))
    st.caption(
        _(
            "Pre-norm keeps a clean residual path from the loss to every block; the exam trains 12-layer models "
            "without warmup at rising learning rates, post-norm against pre-norm, and logs every block's "
            "gradient norm."
        )
    )
    depth = exams.depth
    if depth.empty:
        say_empty("depth", _("stability map (table exam_depth)"), results.path)
    else:
        say_finding(findings.depth_finding(results), findings.depth_text(results, bold=True))
        cells = depth_cells(depth)
        charts.draw(charts.stability_map(cells))
        running = cells[cells["state"] == "running"]
        if not running.empty:
            st.info(
                _("{n} cell(s) still running ({cells}): they count as not trained until they finish.").format(
                    n=len(running), cells=join_list(running["cell"])
                ),
                icon=":material/hourglass_top:",
            )
        wanted = pd.MultiIndex.from_product([["post", "pre"], sorted(depth["lr"].unique())])
        absent = [
            _("{wiring} at lr {lr}").format(wiring=wiring(pos), lr=f"{lr:g}")
            for pos, lr in wanted.difference(pd.MultiIndex.from_frame(depth[["norm_pos", "lr"]]))
        ]
        if absent:
            st.caption(
                _("Not in the map yet: {cells}. {how}").format(
                    cells=join_list(absent), how=loaders.run_exams_help("depth")
                )
            )

    st.subheader(_("Gradient norm of every block"))
    runs = exams.grad_norm_runs
    if runs.empty:
        say_empty(
            "depth",
            _(
                "gradient norms (table grad_norms: every run trained by this version logs them, and so "
                "does each cell of the depth map)"
            ),
            results.path,
        )
        return
    # the grid's runs and the map's cells (a study's runs are on the Studies page); the deepest first
    # (the exam's own), grid runs before the map's cells
    runs = runs[runs["depth_map"] | runs["run_id"].isin(grid_runs["run_id"])]
    runs = runs.sort_values(["layers", "depth_map", "label"], ascending=[False, True, True], kind="stable")
    runs = runs.reset_index(drop=True)
    labels = dict(zip(runs["run_id"], runs["label"]))
    run_id = st.selectbox(
        _("Run"), list(runs["run_id"]), index=grad_norm_default(runs), format_func=labels.get, key="exams_grad_run"
    )
    norms = loaders.grad_norms_of(results.path, run_id)
    spread = exams.grad_norm_spread
    st.markdown(findings.spread_finding(results, run_id, norms))
    charts.draw(charts.grad_norm_heatmap(norms))
    st.caption(
        _(
            "Every step for the first 200, then at every evaluation. Colour: the block's gradient norm, log "
            "scale; red: NaN/inf."
        )
    )
    # every run logs its gradient norms: compare the grid's deepest runs (and the chosen run), not
    # the whole grid, nor every cell of the map
    deepest = runs[(runs["layers"] == runs["layers"].max()) & ~runs["depth_map"]]
    compared = spread[spread["run_id"].isin(set(deepest["run_id"]) | {run_id})]
    experiment_of = dict(zip(results.runs["run_id"], results.runs["experiment"]))
    compared = compared.assign(experiment=compared["run_id"].map(experiment_of))
    charts.draw(charts.grad_norm_spread_chart(compared, labels[run_id], colours=colours))
    st.caption(
        _(
            "The first block's gradient norm over the last block's (log scale; the dotted line, 1: equal), for "
            "the grid's {layers}-layer runs and the chosen run, which is bold; each run in its experiment's "
            "colour, a cell of the depth map in grey. Scroll to zoom; click a run in the legend to highlight it."
        ).format(layers=int(runs["layers"].max()))
    )


# ---------------------------------------------------------------------------------------------
# The chapter's fourth pitfall: the wall clock of each part alone


def wall_clock_section(results: Results) -> None:
    exams = results.exams
    st.header(_("The wall clock of each part"))
    st.caption(
        _(
            "The chapter warns of four pitfalls in building these parts by hand; the fourth is speed: a "
            "hand-written part can be slow for reasons that have nothing to do with the architecture. The exam "
            "times each part alone, forward and backward, as written here and as PyTorch's fused kernels."
        )
    )
    rows = exams.wall_clock
    if rows.empty:
        say_empty("wall_clock", _("wall-clock results (table exam_wall_clock)"), results.path)
        return
    finding = findings.slowest_by_hand(results)
    if finding is None:
        st.caption(_("No part is timed both ways (manual and fused) yet, so there is no ratio to give."))
    else:
        st.markdown(f"**{findings.sentence(finding)}**")
        for part, mine, other in (("norm", "rmsnorm", "layernorm"), ("ffn", "swiglu", "gelu")):
            if clause := findings.wall_clock_finding(results, part, mine, other):
                st.caption(
                    findings.sentence(
                        _("{variant}: {finding}").format(variant=findings.VARIANT_NAMES[mine], finding=clause)
                    )
                )
    charts.draw(charts.wall_clock_chart(rows))
    st.caption(
        _(
            "Each dot: the median over rounds, hand-written (dark) and fused (light), on a log scale, so that a "
            "part 12x slower by hand lies as far right of its fused twin as any other 12x; the thin line runs from "
            "the fastest round to the slowest; at the end of each row, how many times slower by hand."
        )
    )
    impls = rows.groupby(["part", "variant"])["impl"].agg(set)
    one_way = [
        _("{part} · {variant} ({impls} only)").format(
            part=part,
            variant=variant,
            impls=join_list(
                _(charts.IMPL_NAMES[impl]) if impl in charts.IMPL_NAMES else impl for impl in sorted(found)
            ),
        )
        for (part, variant), found in impls.items()
        if len(found) < 2
    ]
    if one_way:
        st.caption(
            _("Timed one way only: {parts}. {how}").format(
                parts=findings.clauses(one_way), how=loaders.run_exams_help("wall_clock")
            )
        )


# ---------------------------------------------------------------------------------------------
# The parts of 2024-26: QK-norm, MLA, a mixture of experts


def say_part(part: str, detail: str) -> None:
    """The part's finding record (the report's sentence for it, word for word), its exam's full
    detail below it; on runs that are not the chapter's, said as what these runs showed."""
    record = part_findings.get(part)
    if record is not None:
        st.markdown(f"**{record.sentence}**" if findings_testable else not_a_finding(record.sentence))
    st.caption(findings.sentence(detail))


def say_full_size(part: str) -> None:
    """What the parts study found of the part at the chapter's size, in its section's words (the
    Studies page has the table and what it waits for); nothing where the study has no run of it."""
    if part not in full_size:
        return
    said = " ".join(full_size[part]) or _("not answered yet; the Studies page says what it waits for.")
    st.markdown(_("**At the chapter's size** (the parts study's full-size runs): {said}").format(said=said))


def qk_norm_section(results: Results) -> None:
    st.header(_("QK-norm: a high learning rate without warmup"))
    st.caption(
        _(
            "QK-norm normalises every query and key before their dot product, so the attention logits cannot "
            "grow without bound; the exam trains the mini-LLaMA without warmup at rising learning rates, with "
            "and without it, and logs every layer's largest attention logit."
        )
    )
    say_full_size("qk_norm")
    cells = results.exams.qk_norm
    if cells.empty:
        say_empty("qk_norm", _("QK-norm map (table exam_qk_norm)"), results.path)
        return
    say_part("qk_norm", findings.qk_norm_text(results, bold=True))
    variants = {variant: _(words) for variant, words in findings.QK_VARIANTS.items()}
    mapped = depth_cells(cells.assign(diverged=cells["status"] == "diverged", norm_pos=cells["variant"]))
    charts.draw(charts.stability_map(mapped, rows=variants, row_title=_("variant")))
    logits = results.exams.qk_norm_logits.merge(cells[["cell", "variant", "lr"]], on="cell")
    if logits.empty:
        st.caption(_("No attention logits logged for these cells yet."))
        return
    charts.draw(charts.max_logit_chart(logits.assign(variant=logits["variant"].map(variants))))
    st.caption(
        _(
            "The largest attention logit of any layer at each logged step, one line per cell (log scale); "
            "a cell stops where it diverged."
        )
    )


def mla_section(results: Results) -> None:
    st.header(_("MLA: a smaller KV cache"))
    st.caption(
        _(
            "MLA caches one small latent per position (plus a shared rotated key) instead of a key and a value "
            "per head; the exam trains one model of each way of caching and sets the cache's bytes per "
            "character, measured from its tensors, beside its best val and its generation speed."
        )
    )
    say_full_size("mla")
    cells = results.exams.mla
    if cells.empty:
        say_empty("mla", _("MLA results (table exam_mla)"), results.path)
        return
    say_part("mla", findings.mla_text(results))
    shown = cells.assign(
        name=[findings.mla_cell_name(row) for _index, row in cells.iterrows()],
        kind=[
            "MLA" if attn == "mla" else findings.HEAD_CELLS.get(cell, cell)
            for attn, cell in zip(cells["attn_type"], cells["cell"])
        ],
    )
    charts.draw(charts.mla_chart(shown))
    st.caption(_("Each point: one model of the exam; lower left is a smaller cache and a lower loss."))
    st.dataframe(
        shown[["name", "bytes_per_char", "best_val_loss", "chars_per_s"]],
        hide_index=True,
        width="stretch",
        column_config={
            "name": st.column_config.TextColumn(_("cache")),
            "bytes_per_char": st.column_config.NumberColumn(_("bytes per character"), format="localized"),
            "best_val_loss": st.column_config.NumberColumn(_("best val (nats/char)"), format="%.3f"),
            "chars_per_s": st.column_config.NumberColumn(_("characters / s, with the cache"), format="%.0f"),
        },
    )


def moe_section(results: Results) -> None:
    st.header(_("Experts: more parameters for the same work"))
    st.caption(
        _(
            "A mixture of experts holds several feed-forward networks and sends each token through a few; the "
            "exam sets it against the dense mini-LLaMA at equal work per token (top-1) and at equal total "
            "parameters (every expert on every token), with the experts' load and the time of a training step."
        )
    )
    say_full_size("moe")
    cells = results.exams.moe
    if cells.empty:
        say_empty("moe", _("experts' results (table exam_moe)"), results.path)
        return
    say_part("moe", findings.moe_text(results))
    shown = cells.assign(
        name=[findings.moe_cell_name(row) for _index, row in cells.iterrows()],
        load=[
            findings.shares(low, high) if pd.notna(low) else "–"
            for low, high in zip(cells["min_share"], cells["max_share"])
        ],
    )
    st.dataframe(
        shown[["name", "params", "active_params", "best_val_loss", "load", "step_ms", "step_ratio"]],
        hide_index=True,
        width="stretch",
        column_config={
            "name": st.column_config.TextColumn(_("model")),
            "params": st.column_config.NumberColumn(_("parameters"), format="localized"),
            "active_params": st.column_config.NumberColumn(_("active per token"), format="localized"),
            "best_val_loss": st.column_config.NumberColumn(_("best val (nats/char)"), format="%.3f"),
            "load": st.column_config.TextColumn(_("tokens per expert (smallest-largest share)")),
            "step_ms": st.column_config.NumberColumn(_("training step (ms)"), format="%.1f"),
            "step_ratio": st.column_config.NumberColumn(_("step time / dense"), format="%.2f"),
        },
    )
    st.caption(
        _(
            "Load: the smallest and largest share of the tokens any expert took at the last logged step (even: "
            "one in the number of experts). Step: one training step of each model timed side by side in one "
            "process; on a CPU the experts run one after another."
        )
    )
    # the load over the steps: does the balancing loss even it out, and how soon?
    logged = sorted(results.exams.moe_shares["cell"].unique())
    if logged:
        names = {row["cell"]: findings.moe_cell_name(row) for _index, row in cells.iterrows()}
        cell = st.selectbox(_("Experts of"), logged, format_func=lambda c: names.get(c, c), key="exams_moe_cell")
        shares = results.exams.moe_shares
        # panels two a row, drawn at their own width (fit to the page, Vega drew nothing)
        st.altair_chart(charts.expert_load_chart(shares[shares["cell"] == cell]), width="content")
        st.caption(
            _(
                "Each expert's share of the tokens routed to it, at every logged step, one panel per layer; the "
                "dashed line is an even load. The balancing loss pulls each share toward it."
            )
        )


results = loaders.require_results(runs_needed=False)  # the depth map and the wall clock need no run
grid_runs = only_runs_of(results, None).runs  # the runs the grid's exams count (the studies have their own page)
# the exams of trained runs judge the chapter's parts only on the chapter's runs (anatomy.report.protocol)
findings_testable = protocol_of(only_runs_of(results, None)).untestable_reason is None
colours = charts.colours_of(results)
part_findings = exam_part_findings(only_runs_of(results, None))  # the report's sentence for each part of 2024-26
full_size = parts_at_full_size(results)  # the parts study's sentences on each, at the chapter's size
st.title(_("Exams: each part where it pays"))
st.caption(
    _(
        "The training loss of a small model is not what RoPE, GQA and pre-norm were made for (Ablations shows "
        "what it says of them). Each is examined where it is made to pay: reading past the training length, "
        "the memory of generation, depth without warmup; and every part's wall clock alone. Then the parts of "
        "2024-26, each by its own exam: QK-norm by high learning rates without warmup, MLA by the "
        "size of its cache, a mixture of experts against the dense model at equal work and equal parameters."
    )
)
show_part_glossary()
length_section(results)
kv_cache_section(results)
depth_section(results)
wall_clock_section(results)
qk_norm_section(results)
mla_section(results)
moe_section(results)
