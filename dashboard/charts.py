"""The charts only the dashboard's pages draw, beside those it shares with the report.

The charts `anatomy report` draws too (curves, seed bands, the overfitting turn, the parts'
worth, the comparisons, RoPE's loss by position, the stability map, the scale study) live in the
package, anatomy/report/charts.py, so that the report draws them without the dashboard; they are
imported here under their own names, so the views find every chart in one place. Every chart
takes tidy DataFrames (dashboard/analysis.py) and returns an Altair chart; the views only choose
what to show.
"""

from __future__ import annotations

import re

import altair as alt
import numpy as np
import pandas as pd
import streamlit as st

from anatomy.language import N_, _, pgettext
from anatomy.report import colours as palette
from anatomy.report.exam_findings import ATTENTION_ORDER
from anatomy.report.charts import (
    DIVERGED_RED,
    X_TITLES,
    Colours,
    color_scale,
    fixed_scale,
    split_dash,
    split_words,
    text_inside,
    two_lines,
    y_loss,
    with_verdict_words,
)
from anatomy.results.reader import Results, run_label

# the report's charts, for the views (`name as name`: a name the views take from here)
from anatomy.report.charts import (
    DEPTH_STATES as DEPTH_STATES,
    POSITION_COLORS as POSITION_COLORS,
    ablation_chart as ablation_chart,
    best_lr_by_params_chart as best_lr_by_params_chart,
    best_val_by_params_chart as best_val_by_params_chart,
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
    """A chart across the page, its legends under the plot, one entry a line: beside it, at a
    phone's width (390 px), a legend squeezes the plot itself to a sliver, and two columns of long
    names run past the screen's edge. Its width fits the page; its height is the plot's own (set by
    its data), with the legend and axes added below, never taken out of it (Streamlit's default
    fits the whole chart, legend and all, into the plot's height)."""
    fitted = chart.properties(autosize=alt.AutoSizeParams(type="fit-x", contains="padding"))
    # a legend's entry is cut at 240 px with an ellipsis: beside its symbol, it fits a phone
    st.altair_chart(fitted.configure_legend(orient="bottom", columns=1, labelLimit=240), width="stretch")


def colours_of(results: Results) -> dict[str, str]:
    """Every experiment of the database in its colour (anatomy/report/colours.py): computed from
    all its runs, so a run has the same colour whatever a page shows."""
    return palette.experiment_colours(results.runs)


def zoomable(chart: alt.Chart | alt.LayerChart) -> alt.Chart | alt.LayerChart:
    """Zoom (scroll) and pan (drag) on both axes; a double click resets."""
    return chart.add_params(alt.selection_interval(bind="scales"))


RUN_LABEL_PATTERN = re.compile(r"^(?P<experiment>.*) · seed (?P<seed>\d+)$")  # reader.RUN_LABEL, as data holds it


def run_names(labels: pd.Series) -> pd.Series:
    """Runs' labels ("llama · seed 42", as the data keys them) in the reader's words, for a legend or
    a tooltip. A run's colour comes from its experiment, so the words may change with the language."""

    def named(label):
        match = RUN_LABEL_PATTERN.match(str(label)) if pd.notna(label) else None
        return run_label(match["experiment"], int(match["seed"]), translated=True) if match else label

    return labels.map(named)


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


def divergence_marks(points: pd.DataFrame, x_max: float, log: bool = False) -> alt.LayerChart:
    """Where each diverged run broke: a red dashed rule at that step, a cross at its last finite val."""
    points = points.assign(label=run_names(points["label"]))
    # two lines, so the label fits a phone's narrow chart
    points["text"] = [
        _("✕ {run}\ndiverged (NaN/inf) at step {step}").format(run=label, step=s)
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
            .mark_text(
                baseline="top",
                dy=6 + 32 * i,
                lineBreak="\n",
                color=DIVERGED_RED,
                fontWeight="bold",
                **text_inside(step, x_max),
            )
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


def memorisation_chart(measured: pd.DataFrame, height: int = 320, colours: Colours = None) -> alt.LayerChart:
    """Copied share of each run's samples against the step of the weights that wrote them: each
    run in its experiment's colour, solid for the training text, dashed for the validation text
    (the control). The points are a layer of their own: a line's point overlay blanks the dash
    legend's symbols."""
    long = measured.assign(label=run_names(measured["label"])).melt(
        id_vars=["label", "experiment", "step", "checkpoint"],
        value_vars=["copied_fraction", "val_copied_fraction"],
        var_name="against",
        value_name="share",
    )
    long["against"] = in_words(
        long["against"].map({"copied_fraction": "training text", "val_copied_fraction": "validation (control)"})
    )
    found_in = [_("training text"), _("validation (control)")]
    x = alt.X("step:Q", title=_("training step of the weights"))
    y = alt.Y("share:Q", title=_("characters copied"), axis=alt.Axis(format="%"))
    color = alt.Color(
        "experiment:N",
        title=_("experiment"),
        scale=color_scale(long["experiment"], colours),
        legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=3),
    )
    tooltip = [
        alt.Tooltip("label:N", title=_("run")),
        alt.Tooltip("checkpoint:N", title=_("checkpoint")),
        alt.Tooltip("step:Q", title=_("step"), format=","),
        alt.Tooltip("against:N", title=_("found in")),
        alt.Tooltip("share:Q", title=_("share"), format=".1%"),
    ]
    lines = (
        alt.Chart(long)
        .mark_line(strokeWidth=2)
        .encode(
            x=x,
            y=y,
            color=color,
            strokeDash=alt.StrokeDash(
                "against:N",
                title=_("found in"),
                scale=alt.Scale(domain=found_in, range=[[1, 0], [5, 3]]),
                legend=alt.Legend(
                    symbolType="stroke", symbolStrokeWidth=2, symbolSize=400, symbolStrokeColor="#555555"
                ),
            ),
            detail=alt.Detail(["label:N", "against:N"]),
            tooltip=tooltip,
        )
    )
    points = alt.Chart(long).mark_point(filled=True, size=40).encode(x=x, y=y, color=color, tooltip=tooltip)
    return (lines + points).properties(height=height)


# ---------------------------------------------------------------------------------------------
# Curves: many runs, grouped as an experiment tracker groups them


def grouped_curves(
    groups: pd.DataFrame,
    runs_long: pd.DataFrame | None,
    x: str = "step",
    log: bool = False,
    colours: Colours = None,
    height: int = 420,
) -> alt.LayerChart:
    """One line per experiment and split (the mean over its seeds), the band from the lowest seed
    to the highest behind it, and, on demand, each run as a thin line. Val solid, train dashed;
    click an experiment in the legend to highlight it; scroll to zoom, drag to pan.

    `groups`: experiment, split, x, mean, low, high, runs (analysis.grouped_curves);
    `runs_long`: the runs' own curves (analysis.long_curves), or None.
    """
    pick = alt.selection_point(fields=["experiment"], bind="legend")
    faded = alt.condition(pick, alt.value(1.0), alt.value(0.12))
    color = alt.Color(
        "experiment:N",
        title=_("experiment (click to highlight)"),
        scale=color_scale(groups["experiment"], colours),
        legend=alt.Legend(symbolType="stroke", symbolStrokeWidth=3, symbolOpacity=1),
    )
    x_axis = alt.X("x:Q", title=_(X_TITLES[x]) if x in X_TITLES else x)
    y = y_loss("mean", log)
    band = (
        alt.Chart(groups[groups["runs"] > 1])
        .mark_area(opacity=0.16)
        .encode(x=x_axis, y=y_loss("low", log), y2="high:Q", color=color, detail="split:N")
    )
    tooltip = [
        alt.Tooltip("experiment:N", title=_("experiment")),
        alt.Tooltip("split_name:N", title=_("split")),
        alt.Tooltip("step:Q", title=_("step"), format=","),
        alt.Tooltip("mean:Q", title=_("mean over seeds"), format=".4f"),
        alt.Tooltip("low:Q", title=_("lowest seed"), format=".4f"),
        alt.Tooltip("high:Q", title=_("highest seed"), format=".4f"),
        # TRANSLATORS: a tooltip's lines: how many runs a point is the mean of, and which
        alt.Tooltip("runs:Q", title=_("runs")),
        alt.Tooltip("run_labels:N", title=_("the mean of")),
    ]
    means = (
        alt.Chart(groups)
        .transform_calculate(split_name=split_words("datum.split"))
        .mark_line(strokeWidth=2.5, point=alt.OverlayMarkDef(size=12, filled=True))
        .encode(x=x_axis, y=y, color=color, strokeDash=split_dash(groups["split"]), opacity=faded, tooltip=tooltip)
        .add_params(pick)
    )
    layers = [band, means]
    if runs_long is not None and not runs_long.empty:
        layers.insert(
            1,
            alt.Chart(runs_long)
            .transform_calculate(split_name=split_words("datum.split"))
            .mark_line(strokeWidth=1, opacity=0.45)
            .encode(
                x=alt.X(f"{x}:Q"),
                y=y_loss("smoothed", log),
                color=color,
                strokeDash=split_dash(runs_long["split"]),
                detail=alt.Detail(["label:N", "split:N"]),
                tooltip=[
                    alt.Tooltip("label:N", title=_("run")),
                    alt.Tooltip("split_name:N", title=_("split")),
                    alt.Tooltip("step:Q", title=_("step"), format=","),
                    alt.Tooltip("smoothed:Q", title=_("loss"), format=".4f"),
                ],
            ),
        )
    return zoomable(alt.layer(*layers).properties(height=height))


def metric_curves(
    frame: pd.DataFrame, field: str, title: str, log: bool = False, colours: Colours = None, height: int = 220
) -> alt.Chart:
    """One value per step of each experiment (the mean over its seeds), beside the loss: the
    learning rate, the gradient norm. `frame`: experiment, step, and `field`."""
    return zoomable(
        alt.Chart(frame)
        .mark_line(strokeWidth=2)
        .encode(
            x=alt.X("step:Q", title=_("training step")),
            y=alt.Y(f"{field}:Q", title=title, scale=alt.Scale(type="log" if log else "linear", zero=False)),
            color=alt.Color("experiment:N", title=_("experiment"), scale=color_scale(frame["experiment"], colours)),
            tooltip=[
                alt.Tooltip("experiment:N", title=_("experiment")),
                alt.Tooltip("step:Q", title=_("step"), format=","),
                alt.Tooltip(f"{field}:Q", title=title, format=".3g"),
            ],
        )
        .properties(height=height)
    )


# ---------------------------------------------------------------------------------------------
# The exams (the Exams page): each part tested where it is made to pay

IMPL_COLORS = {"manual": "#525252", "fused": palette.NEUTRAL_LIGHT}  # how a part is written: no run's colour


def kv_cache_chart(cache: pd.DataFrame, height: int = 260) -> alt.LayerChart:
    """The KV cache's bytes per attention kind and cached length, measured from the cache's tensors
    (bars, log scale: a cache grows a thousandfold from one position to 2,048), the formula as a
    black tick on each bar. Narrow enough for a phone: the lengths side by side on one axis.

    `cache`: attention, n_kv_head, tokens, measured_bytes, formula_bytes.
    """
    kinds = [kind for kind in ATTENTION_ORDER if kind in set(cache["attention"])] + sorted(
        set(cache["attention"]) - set(ATTENTION_ORDER)
    )
    x = alt.X("tokens:O", title=_("cached positions"), axis=alt.Axis(labelAngle=0, format=","))
    offset = alt.XOffset("attention:N", sort=kinds)
    tooltip = [
        alt.Tooltip("attention:N", title=_("attention")),
        alt.Tooltip("n_kv_head:Q", title=_("KV heads")),
        alt.Tooltip("tokens:Q", title=_("cached positions"), format=","),
        alt.Tooltip("measured_bytes:Q", title=_("measured (bytes)"), format=","),
        alt.Tooltip("formula_bytes:Q", title=_("formula (bytes)"), format=","),
    ]
    # from half the smallest cache, so that the smallest bar still shows
    log_bytes = alt.Scale(type="log", domainMin=float(cache["measured_bytes"].min()) / 2)
    y = alt.Y(
        "measured_bytes:Q",
        title=_("KV cache (bytes, log scale)"),
        scale=log_bytes,
        axis=alt.Axis(format="~s"),
        stack=None,  # a stacked bar has no log scale
    )
    bars = (
        alt.Chart(cache)
        .mark_bar()
        .encode(
            x=x,
            xOffset=offset,
            y=y,
            color=alt.Color(
                "attention:N", title=_("attention"), sort=kinds, scale=fixed_scale(kinds, palette.ATTENTION)
            ),
            tooltip=tooltip,
        )
    )
    formula = (
        alt.Chart(cache)
        .mark_tick(color="black", thickness=2)
        .encode(x=x, xOffset=offset, y=alt.Y("formula_bytes:Q", scale=log_bytes), tooltip=tooltip)
    )
    return (bars + formula).properties(height=height)


def kv_timing_chart(timing: pd.DataFrame, height: int = 300) -> alt.LayerChart:
    """Generation speed against context length, with and without the cache, per attention kind.

    `timing`: label, attention, context, chars_per_s, seconds, chars, cache ("with cache" | "recomputed").
    The points are a layer of their own: a line's point overlay blanks the dash legend's symbols.
    """
    timing = timing.assign(cache=in_words(timing["cache"]), label=run_names(timing["label"]))
    kinds = [kind for kind in ATTENTION_ORDER if kind in set(timing["attention"])] + sorted(
        set(timing["attention"]) - set(ATTENTION_ORDER)
    )
    x = alt.X("context:Q", title=_("characters already in the context"), scale=alt.Scale(type="log", base=2))
    y = alt.Y("chars_per_s:Q", title=_("characters generated per second"), scale=alt.Scale(type="log"))
    color = alt.Color("attention:N", title=_("attention"), sort=kinds, scale=fixed_scale(kinds, palette.ATTENTION))
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
                legend=alt.Legend(symbolType="stroke", symbolStrokeColor="#555555"),
                scale=alt.Scale(domain=[_("with cache"), _("recomputed")], range=[[1, 0], [5, 3]]),
            ),
        )
    )
    points = alt.Chart(timing).mark_point(filled=True, size=40).encode(x=x, y=y, color=color, tooltip=tooltip)
    return zoomable(lines + points).properties(height=height)


def grad_norm_heatmap(norms: pd.DataFrame, height_per_layer: int = 22, min_height: int = 160) -> alt.LayerChart:
    """One run's gradient norm per block (rows, block 0 at the bottom) and step (columns, each as
    wide as the gap to the next logged step), on a log colour scale; NaN or zero cells in red/grey.
    Each block gets its own `height_per_layer` of the plot: its height comes from the run's depth.

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
    y = alt.Y("layer:O", title=_("block (0: next to the embedding)"), sort="descending")
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
            color=alt.Color(
                "norm:Q",
                title=_("gradient norm"),
                scale=alt.Scale(type="log", scheme="viridis"),
                legend=alt.Legend(direction="horizontal", gradientLength=200),
            ),
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
                scale=alt.Scale(domain=[not_finite, no_gradient], range=[DIVERGED_RED, palette.NEUTRAL_LIGHT]),
                # above the plot: beside the colour scale's legend, it would run past a phone's edge
                legend=alt.Legend(orient="top", direction="horizontal"),
            ),
            tooltip=tooltip + [alt.Tooltip("note:N", title=_("note"))],
        )
    )
    height = max(min_height, height_per_layer * cells["layer"].nunique())  # a 2-layer run still gets room
    return alt.layer(heat, bad).resolve_scale(color="independent").properties(height=height)


def ratio_domain(ratios: pd.Series, spread: float = 4.0) -> list[float] | None:
    """A log axis's range for ratios that holds the bulk of them: from a quarter of the 2nd
    percentile to four times the 98th (and always 1, the line of equal). A cell that blew up (a
    ratio of 1e-19) is drawn at the edge, not allowed to flatten every other line."""
    finite_ratios = ratios[np.isfinite(ratios) & (ratios > 0)]
    if finite_ratios.empty:
        return None
    low = min(float(finite_ratios.quantile(0.02)) / spread, 1.0)
    high = max(float(finite_ratios.quantile(0.98)) * spread, 1.0)
    return [max(low, float(finite_ratios.min())), min(high, float(finite_ratios.max()))] if low < high else None


def grad_norm_spread_chart(
    spread: pd.DataFrame, chosen: str | None = None, height: int = 280, colours: Colours = None
) -> alt.LayerChart:
    """First block's gradient norm over the last block's, per run and step (log scale; 1 = equal),
    each run in its experiment's colour (a depth-map cell, which has none, in grey).

    `spread`: label, experiment (None for a depth-map cell), step, first_to_last, first_layer_norm,
    last_layer_norm; `chosen` is drawn bold.
    """
    ratio = spread["first_to_last"].astype(float)
    drawn = spread[np.isfinite(ratio) & (ratio > 0)].assign(chosen=lambda d: d["label"] == chosen)
    drawn = drawn.assign(label=run_names(drawn["label"]))  # named in the reader's words, after the choice
    # a run's colour is its experiment's (seeds alike); the legend names each run
    firsts = drawn.drop_duplicates("label")
    of_experiment = palette.named_colours(firsts["experiment"].dropna(), colours)
    scale = alt.Scale(
        domain=list(firsts["label"]),
        range=[of_experiment.get(e, palette.NEUTRAL) if pd.notna(e) else palette.NEUTRAL for e in firsts["experiment"]],
    )
    domain = ratio_domain(drawn["first_to_last"].astype(float))
    pick = alt.selection_point(fields=["label"], bind="legend")
    y = alt.Y(
        "first_to_last:Q",
        title=_("first block's gradient norm / last block's"),
        scale=alt.Scale(type="log", domain=domain, clamp=True) if domain else alt.Scale(type="log"),
        axis=alt.Axis(format="~g", labelOverlap="greedy"),
    )
    equal = alt.Chart(pd.DataFrame({"first_to_last": [1.0]})).mark_rule(color="#555555", strokeDash=[2, 2]).encode(y=y)
    lines = (
        alt.Chart(drawn)
        .mark_line()
        .encode(
            x=alt.X("step:Q", title=_("training step")),
            y=y,
            color=alt.Color("label:N", title=_("run (click to highlight)"), scale=scale),
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
    )
    return zoomable(alt.layer(equal, lines)).properties(height=height)


def block_part_name(part: str) -> str:
    """A part of a block as the wall-clock exam times it alone (its `part`), in the reader's language."""
    names = {
        # TRANSLATORS: a part of a Transformer block, timed alone by the wall-clock exam
        "attention": pgettext("part of a block", "attention"),
        "norm": pgettext("part of a block", "norm"),
        "ffn": pgettext("part of a block", "ffn"),
        "rope": pgettext("part of a block", "rope"),
    }
    return names.get(part, str(part))


def wall_clock_chart(rows: pd.DataFrame, height_per_row: int = 30) -> alt.LayerChart:
    """Forward + backward milliseconds of each part alone, hand-written beside fused, on a log axis
    (a part 12x slower by hand is 12x further right, whatever its size), each with its spread
    over rounds (fastest to slowest) as a thin line, and the ratio written at the end of the row.

    `rows`: part, variant, impl, shape, median_ms, min_ms, max_ms, rounds.
    """
    rows = rows.assign(
        row=[f"{block_part_name(part)} · {variant}" for part, variant in zip(rows["part"], rows["variant"])]
    )
    order = list(dict.fromkeys(rows.sort_values(["part", "variant"])["row"]))
    y = alt.Y("row:N", title=None, sort=order, axis=alt.Axis(labelLimit=200))
    # the row labels take up to 200 px of a phone's width: the title breaks sooner than elsewhere
    title = two_lines(_("forward + backward, median (ms, log scale)"), at=30)
    x = alt.X("median_ms:Q", title=title, scale=alt.Scale(type="log"))
    tooltip = [
        alt.Tooltip("part:N", title=_("part")),
        alt.Tooltip("variant:N", title=_("variant")),
        alt.Tooltip("impl_name:N", title=_("impl")),
        alt.Tooltip("shape:N", title=_("shape")),
        alt.Tooltip("median_ms:Q", title=_("median (ms)"), format=".3f"),
        alt.Tooltip("min_ms:Q", title=_("fastest (ms)"), format=".3f"),
        alt.Tooltip("max_ms:Q", title=_("slowest (ms)"), format=".3f"),
        alt.Tooltip("rounds:Q", title=_("rounds")),
    ]
    names = {impl: _(IMPL_NAMES[impl]) if impl in IMPL_NAMES else impl for impl in rows["impl"].unique()}
    rows = rows.assign(impl_name=rows["impl"].map(names))
    color = alt.Color(
        "impl_name:N",
        title=None,
        scale=fixed_scale(rows["impl_name"], {names.get(k, k): c for k, c in IMPL_COLORS.items()}),
        legend=alt.Legend(orient="top", direction="horizontal"),
    )
    spread = (
        alt.Chart(rows)
        .mark_rule(strokeWidth=1.5)
        .encode(x=alt.X("min_ms:Q"), x2="max_ms:Q", y=y, color=color, tooltip=tooltip)
    )
    points = (
        alt.Chart(rows)
        .mark_point(filled=True, size=110, stroke="#222222", strokeWidth=0.8)
        .encode(x=x, y=y, color=color, shape=alt.Shape("impl_name:N", legend=None), tooltip=tooltip)
    )
    # manual over fused, at the right end of each row timed both ways
    wide = rows.pivot_table(index="row", columns="impl", values=["median_ms", "max_ms"], aggfunc="first")
    layers = [spread, points]
    if {"manual", "fused"} <= set(rows["impl"]):
        ratios = pd.DataFrame(
            {
                "row": wide.index,
                "ratio": wide[("median_ms", "manual")] / wide[("median_ms", "fused")],
                "at": wide["max_ms"].max(axis=1),
            }
        ).dropna()
        ratios["text"] = [_("{ratio}x by hand").format(ratio=f"{r:.1f}") for r in ratios["ratio"]]
        layers.append(
            alt.Chart(ratios)
            .mark_text(align="left", dx=8, fontWeight="bold", color="#333333")
            .encode(x=alt.X("at:Q"), y=y, text="text:N")
        )
    return alt.layer(*layers).properties(height=alt.Step(height_per_row))


# the two ways a part is timed (the impl column), as the page names them
IMPL_NAMES = {"manual": N_("manual"), "fused": N_("fused")}


def break_delta_chart(deltas: pd.DataFrame, height_per_row: int = 40, colours: Colours = None) -> alt.LayerChart:
    """Each experiment's best val minus its baseline's (a dot in its colour), with its 95% interval
    as the black line (analysis.interval_rows: judged with the others shown), pale where the
    interval holds zero, as the Ablations page draws its bars; the seeds' own differences as ticks.

    `deltas`: experiment, baseline, delta, delta_low, delta_high, n_seeds, low, high, beyond.
    """
    deltas = with_verdict_words(deltas)
    order = list(deltas.sort_values("delta")["experiment"])
    y = alt.Y("experiment:N", title=None, sort=order, axis=alt.Axis(labelLimit=200))
    tooltip = [
        alt.Tooltip("experiment:N", title=_("experiment")),
        alt.Tooltip("baseline:N", title=_("baseline")),
        alt.Tooltip("difference:N", title=_("Δ best val [95% interval]")),
        alt.Tooltip("verdict:N", title=_("beyond noise?")),
        alt.Tooltip("delta_low:Q", title=_("seed min"), format="+.4f"),
        alt.Tooltip("delta_high:Q", title=_("seed max"), format="+.4f"),
        alt.Tooltip("n_seeds:Q", title=_("seeds")),
    ]
    color = alt.Color("experiment:N", scale=color_scale(deltas["experiment"], colours), legend=None)
    x = alt.X("delta:Q", title=two_lines(_("Δ best val, experiment − baseline (nats/char; negative = lower loss)")))
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="#555555").encode(x="x:Q")
    intervals = (
        alt.Chart(deltas.dropna(subset=["low", "high"]))
        .mark_errorbar(ticks=True, color="#222222", thickness=1.5)
        .encode(x=alt.X("low:Q", title=""), x2="high:Q", y=y, tooltip=tooltip)
    )
    seeds = (
        alt.Chart(deltas)
        .transform_fold(["delta_low", "delta_high"], as_=["end", "seed_delta"])
        .mark_tick(thickness=2, size=12)
        .encode(x=alt.X("seed_delta:Q", title=""), y=y, color=color, tooltip=tooltip)
    )
    dots = (
        alt.Chart(deltas)
        .mark_point(filled=True, size=150)
        .encode(
            x=x,
            y=y,
            color=color,
            opacity=alt.condition("datum.beyond", alt.value(1.0), alt.value(0.4)),
            tooltip=tooltip,
        )
    )
    return alt.layer(zero, intervals, seeds, dots).properties(height=alt.Step(height_per_row))


# ---------------------------------------------------------------------------------------------
# The parts of 2024-26: QK-norm's logits, MLA's cache against its loss


def max_logit_chart(logits: pd.DataFrame, height: int = 300) -> alt.LayerChart:
    """The largest attention logit of any layer over the steps, one line per cell of the QK-norm
    map, coloured by variant (without QK-norm: the 2017 model's blue; with it: the mini-LLaMA's
    orange), on a log scale; a diverged step's NaN is not drawn.

    `logits`: cell, variant (words), lr, step, max_logit.
    """
    drawn = logits[np.isfinite(logits["max_logit"].astype(float)) & (logits["max_logit"] > 0)]
    variants = list(dict.fromkeys(drawn["variant"]))
    tooltip = [
        alt.Tooltip("variant:N", title=_("variant")),
        alt.Tooltip("lr:Q", title=_("lr"), format="g"),
        alt.Tooltip("step:Q", title=_("training step")),
        alt.Tooltip("max_logit:Q", title=_("largest attention logit"), format=".1f"),
    ]
    colours = list(palette.MODELS.values())
    lines = (
        alt.Chart(drawn)
        .mark_line(point=alt.OverlayMarkDef(size=20, filled=True))
        .encode(
            x=alt.X("step:Q", title=_("training step")),
            y=alt.Y("max_logit:Q", title=_("largest attention logit, any layer"), scale=alt.Scale(type="log")),
            color=alt.Color(
                "variant:N", title=None, sort=variants, scale=alt.Scale(domain=variants, range=colours[: len(variants)])
            ),
            detail="cell:N",
            tooltip=tooltip,
        )
    )
    return zoomable(lines).properties(height=height)


def expert_load_chart(shares: pd.DataFrame, height: int = 150) -> alt.FacetChart:
    """Each expert's share of the tokens over the steps, one panel per layer, for one cell of the
    experts' exam; the dashed line is an even load (one in the number of experts).

    `shares`: step, layer, expert, share.
    """
    even = 1 / shares["expert"].nunique()
    drawn = shares.assign(
        expert=shares["expert"].map(lambda n: _("expert {n}").format(n=int(n) + 1)),
        layer=shares["layer"].map(lambda n: _("layer {n}").format(n=int(n) + 1)),
        even=even,
    )
    share = alt.Y("share:Q", title=_("share of the tokens"), axis=alt.Axis(format="%"))
    lines = (
        alt.Chart()
        .mark_line()
        .encode(
            x=alt.X("step:Q", title=_("training step")),
            y=share,
            color=alt.Color("expert:N", title=None, legend=alt.Legend(orient="bottom", columns=2)),
            tooltip=[
                alt.Tooltip("expert:N", title=_("expert")),
                alt.Tooltip("step:Q", title=_("training step")),
                alt.Tooltip("share:Q", title=_("share of the tokens"), format=".1%"),
            ],
        )
    )
    rule = alt.Chart().mark_rule(strokeDash=[4, 4], color="grey").encode(y="mean(even):Q")
    layers = list(dict.fromkeys(drawn.sort_values("layer")["layer"]))
    # two panels a row, legend below: a phone's 390 px holds the widest row (4 panels a row did not)
    return (
        alt.layer(lines, rule, data=drawn)
        .properties(height=height, width=125)
        .facet(facet=alt.Facet("layer:N", title=None, sort=layers), columns=2)
    )


def mla_chart(cells: pd.DataFrame, height: int = 300) -> alt.LayerChart:
    """Best val against the cache's bytes per character, one point per cell of the MLA exam, named,
    each attention kind in its colour as on the KV-cache charts (MLA: a spare one); the cache on a
    log scale.

    `cells`: name, kind ("MLA" or the attention's), bytes_per_char, best_val_loss, chars_per_s.
    """
    drawn = cells.dropna(subset=["bytes_per_char", "best_val_loss"])
    x = alt.X("bytes_per_char:Q", title=_("KV cache, bytes per character"), scale=alt.Scale(type="log"))
    y = alt.Y("best_val_loss:Q", title=_("best val loss (nats / char)"), scale=alt.Scale(zero=False))
    kinds = list(dict.fromkeys(drawn["kind"]))
    colour = alt.Color("kind:N", title=_("attention"), sort=kinds, scale=fixed_scale(kinds, palette.ATTENTION))
    tooltip = [
        alt.Tooltip("name:N", title=_("cache")),
        alt.Tooltip("bytes_per_char:Q", title=_("bytes per character"), format=",.0f"),
        alt.Tooltip("best_val_loss:Q", title=_("best val"), format=".3f"),
        alt.Tooltip("chars_per_s:Q", title=_("characters / s"), format=",.0f"),
    ]
    points = alt.Chart(drawn).mark_point(filled=True, size=80).encode(x=x, y=y, color=colour, tooltip=tooltip)
    labels = alt.Chart(drawn).mark_text(align="left", dx=7, dy=-7).encode(x=x, y=y, text="name:N")
    return (points + labels).properties(height=height)
