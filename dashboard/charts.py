"""The charts only the dashboard's pages draw, beside those it shares with the report.

The charts `anatomy report` draws too (curves, seed bands, the overfitting turn, the parts'
worth, the comparisons, RoPE's loss by position, the stability map, the scale study) live in the
package, anatomy/report/charts.py, so that the report draws them without the dashboard; they are
imported here under their own names, so the views find every chart in one place. Every chart
takes tidy DataFrames (dashboard/analysis.py) and returns an Altair chart; the views only choose
what to show.
"""

from __future__ import annotations

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from anatomy.language import N_, _
from anatomy.report.exam_findings import ATTENTION_ORDER
from anatomy.report.charts import DIVERGED_RED, fixed_scale, run_colors, text_inside, y_loss

# the report's charts, for the views (`name as name`: a name the views take from here)
from anatomy.report.charts import (
    DEPTH_STATES as DEPTH_STATES,
    PINNED as PINNED,
    POSITION_COLORS as POSITION_COLORS,
    ablation_chart as ablation_chart,
    best_val_by_size_chart as best_val_by_size_chart,
    delta_chart as delta_chart,
    length_chart as length_chart,
    loss_curves as loss_curves,
    lr_chart as lr_chart,
    overfitting_chart as overfitting_chart,
    seed_band_chart as seed_band_chart,
    stability_map as stability_map,
)


def draw(chart: alt.TopLevelMixin) -> None:
    """A chart across the page, its legends under the plot in two columns: beside it, at a phone's
    width (390 px), a legend squeezes the plot itself to a sliver."""
    st.altair_chart(chart.configure_legend(orient="bottom", columns=2), width="stretch")


# words a chart's data carries and shows (its legends, its tooltips): each translated where drawn
WORDS = {
    "training text": N_("training text"),
    "validation (control)": N_("validation (control)"),
    "measured": N_("measured"),
    "formula": N_("formula"),
    "with cache": N_("with cache"),
    "recomputed": N_("recomputed"),
    "NaN / inf": N_("NaN / inf"),
    "no gradient (0)": N_("no gradient (0)"),
}


def in_words(values: pd.Series) -> pd.Series:
    """These values in the reader's language (a value it has no word for, as it is)."""
    return values.map(lambda value: _(WORDS[value]) if value in WORDS else value)


def quoted(text: str) -> str:
    """`text` as a string in a Vega expression."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def divergence_marks(points: pd.DataFrame, x_max: float, log: bool = False) -> alt.LayerChart:
    """Where each diverged run broke: a red dashed rule at that step, a cross at its last finite val."""
    points = points.copy()
    points["text"] = [
        _("✕ {run} diverged (NaN/inf) at step {step}").format(run=label, step=s)
        for label, s in zip(points["label"], points["diverged_step"])
    ]
    tooltip = [
        alt.Tooltip("label:N", title=_("run")),
        alt.Tooltip("diverged_step:Q", title=_("diverged at step")),
        alt.Tooltip("val_loss:Q", title=_("last finite val"), format=".4f"),
    ]
    rule = (
        alt.Chart(points)
        .mark_rule(color=DIVERGED_RED, strokeDash=[6, 3], strokeWidth=2)
        .encode(x="diverged_step:Q", tooltip=tooltip)
    )
    text = alt.layer(
        *[
            alt.Chart(points.iloc[[i]])
            .mark_text(baseline="top", dy=6 + 16 * i, color=DIVERGED_RED, fontWeight="bold", **text_inside(step, x_max))
            .encode(x="diverged_step:Q", y=alt.value(0), text="text:N")
            for i, step in enumerate(points["diverged_step"])
        ]
    )
    reached = points.dropna(subset=["val_loss"])
    cross = (
        alt.Chart(reached)
        .mark_point(shape="cross", size=260, filled=True, color=DIVERGED_RED, angle=45)
        .encode(x="step:Q", y=y_loss("val_loss", log), tooltip=tooltip)
    )
    return rule + text + cross


def memorisation_chart(measured: pd.DataFrame, height: int = 320) -> alt.Chart:
    """Copied share of each run's samples against the step of the weights that wrote them."""
    long = measured.melt(
        id_vars=["label", "experiment", "step", "checkpoint"],
        value_vars=["copied_fraction", "val_copied_fraction"],
        var_name="against",
        value_name="share",
    )
    long["against"] = in_words(
        long["against"].map({"copied_fraction": "training text", "val_copied_fraction": "validation (control)"})
    )
    return (
        alt.Chart(long)
        .mark_line(point=True, strokeWidth=2)
        .encode(
            x=alt.X("step:Q", title=_("training step of the weights")),
            y=alt.Y("share:Q", title=_("generated characters copied"), axis=alt.Axis(format="%")),
            color=alt.Color("label:N", title=_("run"), scale=run_colors(long["label"], long["experiment"])),
            strokeDash=alt.StrokeDash(
                "against:N",
                title=_("found in"),
                scale=alt.Scale(domain=[_("training text"), _("validation (control)")], range=[[1, 0], [5, 3]]),
                # drawn as line pieces: with point=True the legend would show two identical dots
                legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=2, symbolSize=400),
            ),
            detail="against:N",
            tooltip=[
                alt.Tooltip("label:N", title=_("run")),
                alt.Tooltip("checkpoint:N", title=_("checkpoint")),
                alt.Tooltip("step:Q", title=_("step"), format=","),
                alt.Tooltip("against:N", title=_("found in")),
                alt.Tooltip("share:Q", title=_("share"), format=".1%"),
            ],
        )
        .properties(height=height)
    )


# ---------------------------------------------------------------------------------------------
# The exams (the Exams page): each part tested where it is made to pay

IMPL_COLORS = {"manual": "#9d755d", "fused": "#54a24b"}


def kv_cache_chart(cache: pd.DataFrame, height: int = 260) -> alt.Chart:
    """The KV cache's bytes per attention kind, measured beside the formula, per cached length.

    `cache`: attention, n_kv_head, tokens, source (measured | formula), bytes.
    """
    kinds = [kind for kind in ATTENTION_ORDER if kind in set(cache["attention"])] + sorted(
        set(cache["attention"]) - set(ATTENTION_ORDER)
    )
    cache = cache.assign(source=in_words(cache["source"]))
    sources = [_("measured"), _("formula")]
    # the column header: "per cached position" for 1, else "N cached positions", in the reader's words
    before, _count, after = _("{count} cached positions").partition("{count}")
    one = quoted(_("per cached position"))
    many = " + ".join([quoted(before)] * bool(before) + ["datum.value"] + [quoted(after)] * bool(after))
    return (
        alt.Chart(cache)
        .mark_bar()
        .encode(
            x=alt.X("attention:N", title=None, sort=kinds, axis=alt.Axis(labelAngle=0)),
            xOffset=alt.XOffset("source:N", sort=sources),
            y=alt.Y("bytes:Q", title=_("KV cache (bytes)"), axis=alt.Axis(format="~s")),
            color=alt.Color("source:N", title=None, scale=alt.Scale(domain=sources, range=["#4c78a8", "#bab0ac"])),
            column=alt.Column(
                "tokens:O",
                title=None,
                header=alt.Header(labelExpr=f"datum.value == 1 ? {one} : {many}"),
            ),
            tooltip=[
                alt.Tooltip("attention:N", title=_("attention")),
                alt.Tooltip("n_kv_head:Q", title=_("KV heads")),
                alt.Tooltip("tokens:Q", title=_("cached positions"), format=","),
                alt.Tooltip("source:N", title=_("source")),
                alt.Tooltip("bytes:Q", title=_("bytes"), format=","),
            ],
        )
        .resolve_scale(y="independent")
        .properties(height=height)
    )


def kv_timing_chart(timing: pd.DataFrame, height: int = 300) -> alt.LayerChart:
    """Generation speed against context length, with and without the cache, per attention kind.

    `timing`: label, attention, context, chars_per_s, seconds, chars, cache ("with cache" | "recomputed").
    The points are a layer of their own: a line's point overlay blanks the dash legend's symbols.
    """
    timing = timing.assign(cache=in_words(timing["cache"]))
    x = alt.X("context:Q", title=_("characters already in the context"), scale=alt.Scale(type="log", base=2))
    y = alt.Y("chars_per_s:Q", title=_("characters generated per second"), scale=alt.Scale(type="log"))
    color = alt.Color("attention:N", title=_("attention"), sort=ATTENTION_ORDER)
    tooltip = [
        alt.Tooltip("label:N", title=_("run")),
        alt.Tooltip("attention:N", title=_("attention")),
        alt.Tooltip("cache:N", title=_("cache")),
        alt.Tooltip("context:Q", title=_("context"), format=","),
        alt.Tooltip("chars:Q", title=_("characters timed")),
        alt.Tooltip("seconds:Q", title=_("seconds"), format=".3f"),
        alt.Tooltip("chars_per_s:Q", title=_("characters / s"), format=",.0f"),
    ]
    lines = (
        alt.Chart(timing)
        .mark_line(strokeWidth=2)
        .encode(
            x=x,
            y=y,
            color=color,
            detail="label:N",
            tooltip=tooltip,
            strokeDash=alt.StrokeDash(
                "cache:N",
                title=None,
                legend=alt.Legend(symbolType="stroke"),
                scale=alt.Scale(domain=[_("with cache"), _("recomputed")], range=[[1, 0], [5, 3]]),
            ),
        )
    )
    points = alt.Chart(timing).mark_point(filled=True, size=40).encode(x=x, y=y, color=color, tooltip=tooltip)
    return (lines + points).properties(height=height)


def grad_norm_heatmap(norms: pd.DataFrame, height_per_layer: int = 22, min_height: int = 160) -> alt.LayerChart:
    """One run's gradient norm per block (rows, block 0 at the bottom) and step (columns, each as
    wide as the gap to the next logged step), on a log colour scale; NaN or zero cells in red/grey.

    `norms`: step, layer, norm.
    """
    cells = norms.sort_values(["layer", "step"]).copy()
    # each cell reaches the next logged step; the last one is as wide as the gap before it
    steps = np.sort(cells["step"].unique())
    last_gap = steps[-1] - steps[-2] if len(steps) > 1 else 1
    cells["step_end"] = cells.groupby("layer")["step"].shift(-1).fillna(cells["step"] + last_gap)
    finite_norm = cells["norm"].notna() & np.isfinite(cells["norm"].astype(float)) & (cells["norm"] > 0)
    no_gradient, not_finite = _("no gradient (0)"), _("NaN / inf")
    cells["note"] = np.where(finite_norm, "", np.where(cells["norm"] == 0, no_gradient, not_finite))
    x = alt.X("step:Q", title=_("training step"), scale=alt.Scale(zero=False, nice=False))
    y = alt.Y("layer:O", title=_("block (0 = nearest the embedding)"), sort="descending")
    tooltip = [
        alt.Tooltip("layer:O", title=_("block")),
        alt.Tooltip("step:Q", title=_("step"), format=","),
        alt.Tooltip("norm:Q", title=_("gradient norm"), format=".3g"),
    ]
    heat = (
        alt.Chart(cells[finite_norm])
        .mark_rect()
        .encode(
            x=x,
            x2="step_end:Q",
            y=y,
            color=alt.Color("norm:Q", title=_("gradient norm"), scale=alt.Scale(type="log", scheme="viridis")),
            tooltip=tooltip,
        )
    )
    bad = (
        alt.Chart(cells[~finite_norm])
        .mark_rect()
        .encode(
            x=x,
            x2="step_end:Q",
            y=y,
            color=alt.Color(
                "note:N",
                title=None,
                scale=alt.Scale(domain=[not_finite, no_gradient], range=[DIVERGED_RED, "#bab0ac"]),
            ),
            tooltip=tooltip + [alt.Tooltip("note:N", title=_("note"))],
        )
    )
    height = max(min_height, height_per_layer * cells["layer"].nunique())  # a 2-layer run still gets room
    return alt.layer(heat, bad).resolve_scale(color="independent").properties(height=height)


def grad_norm_spread_chart(spread: pd.DataFrame, chosen: str | None = None, height: int = 280) -> alt.Chart:
    """First block's gradient norm over the last block's, per run and step (log scale; 1 = equal).

    `spread`: label, step, first_to_last, first_layer_norm, last_layer_norm; `chosen` is drawn bold.
    """
    ratio = spread["first_to_last"].astype(float)
    drawn = spread[np.isfinite(ratio) & (ratio > 0)].assign(chosen=lambda d: d["label"] == chosen)
    pick = alt.selection_point(fields=["label"], bind="legend")
    return (
        alt.Chart(drawn)
        .mark_line(strokeWidth=1.5)
        .encode(
            x=alt.X("step:Q", title=_("training step")),
            y=alt.Y(
                "first_to_last:Q", title=_("first block's gradient norm / last block's"), scale=alt.Scale(type="log")
            ),
            color=alt.Color("label:N", title=_("run (click to highlight)"), legend=alt.Legend(labelLimit=320)),
            strokeWidth=alt.condition("datum.chosen", alt.value(3.5), alt.value(1.2)),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.12)),
            tooltip=[
                alt.Tooltip("label:N", title=_("run")),
                alt.Tooltip("step:Q", title=_("step"), format=","),
                alt.Tooltip("first_layer_norm:Q", title=_("first block"), format=".3g"),
                alt.Tooltip("last_layer_norm:Q", title=_("last block"), format=".3g"),
                alt.Tooltip("first_to_last:Q", title=_("first / last"), format=".3g"),
            ],
        )
        .add_params(pick)
        .properties(height=height)
    )


def wall_clock_chart(rows: pd.DataFrame, height_per_bar: int = 16) -> alt.LayerChart:
    """Forward + backward milliseconds of each part alone, hand-written beside fused, with the
    spread over rounds as a line from the fastest to the slowest.

    `rows`: part, variant, impl, shape, median_ms, min_ms, max_ms, rounds.
    """
    rows = rows.assign(row=rows["part"] + " · " + rows["variant"])
    order = list(dict.fromkeys(rows.sort_values(["part", "variant"])["row"]))
    y = alt.Y("row:N", title=None, sort=order, axis=alt.Axis(labelLimit=320))
    offset = alt.YOffset("impl:N", sort=["manual", "fused"])
    tooltip = [
        alt.Tooltip("part:N", title=_("part")),
        alt.Tooltip("variant:N", title=_("variant")),
        alt.Tooltip("impl:N", title=_("impl")),
        alt.Tooltip("shape:N", title=_("shape")),
        alt.Tooltip("median_ms:Q", title=_("median (ms)"), format=".3f"),
        alt.Tooltip("min_ms:Q", title=_("fastest (ms)"), format=".3f"),
        alt.Tooltip("max_ms:Q", title=_("slowest (ms)"), format=".3f"),
        alt.Tooltip("rounds:Q", title=_("rounds")),
    ]
    color = alt.Color(
        "impl:N",
        title=None,
        scale=fixed_scale(rows["impl"], IMPL_COLORS),
        legend=alt.Legend(orient="top", direction="horizontal"),
    )
    bars = (
        alt.Chart(rows)
        .mark_bar()
        .encode(
            x=alt.X("median_ms:Q", title=_("forward + backward, median (ms)")),
            y=y,
            yOffset=offset,
            color=color,
            tooltip=tooltip,
        )
    )
    spread = (
        alt.Chart(rows)
        .mark_rule(color="#222222")
        .encode(x="min_ms:Q", x2="max_ms:Q", y=y, yOffset=offset, tooltip=tooltip)
    )
    return (bars + spread).properties(height=alt.Step(height_per_bar))  # the step of the manual/fused offset
