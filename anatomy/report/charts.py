"""The charts `anatomy report` draws, as Altair charts; the dashboard shows the same ones.

Each takes tidy DataFrames (anatomy/report/chart_data.py shapes them from the database's views) and
returns an Altair chart, to save as PNG (the report, through vl-convert) or to show on a page
(dashboard/charts.py lends them to the views, beside the charts only the pages draw).
Encodings are typed (`step:Q`, `label:N`) throughout. Altair is imported here at the top: the
report imports this module only when it draws figures, so its text needs no Altair.
"""

from __future__ import annotations

from collections.abc import Mapping

import altair as alt
import pandas as pd

from anatomy.language import N_, _, pgettext
from anatomy.report.uncertainty import compact
from anatomy.report import colours as palette
from anatomy.report.chart_data import direction_words
from anatomy.report.wording import wiring

# what is not a run, in colours no run has (anatomy/report/colours.py owns every colour)
DIVERGED_RED = palette.DIVERGED_RED
TURN_RED = palette.TURN_RED
Colours = Mapping[str, str] | None  # experiment -> colour (colours.experiment_colours); None: by name


def color_scale(names, colours: Colours = None) -> alt.Scale:
    """Each experiment in its own colour (anatomy/report/colours.py): the same on every page and in
    every selection. `colours` is colours.experiment_colours of the database's runs."""
    chosen = palette.named_colours(names, colours)
    return alt.Scale(domain=list(chosen), range=list(chosen.values()))


SPLIT_WORDS = {"val": N_("val"), "train": N_("train")}  # shown with _()


def vega_text(text: str) -> str:
    """`text` as a string in a Vega expression."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def split_words(value: str) -> str:
    """A Vega expression: the split `value` (an expression, e.g. "datum.split") in the reader's words."""
    words = " : ".join(
        f"{value} == {vega_text(split)} ? {vega_text(_(SPLIT_WORDS[split]))}" for split in palette.SPLITS
    )
    return f"{words} : {value}"


def split_dash(splits, title: str | None = "", colour: str = "#555555", **legend) -> alt.StrokeDash:
    """Val solid, train dashed: a split is told apart by its dash, never by a colour. The legend
    draws each dash as a line piece in `colour`; `title` "" is "split", in the reader's words."""
    shown = [split for split in palette.SPLITS if split in set(splits)]
    return alt.StrokeDash(
        "split:N",
        title=_("split") if title == "" else title,
        scale=alt.Scale(domain=shown, range=[palette.SPLIT_DASH[split] for split in shown]),
        legend=alt.Legend(
            symbolType="stroke",
            symbolStrokeWidth=2,
            symbolSize=400,
            symbolStrokeColor=colour,
            labelExpr=split_words("datum.label"),  # the split's name in the reader's words
            **legend,
        ),
    )


def two_lines(title: str, at: int = 40) -> str | list[str]:
    """A long axis title as two lines, broken before its parenthesis (a phone's plot is 350 px
    wide, and Vega cuts a title that runs past it); a short one as it is."""
    wide = sum(2 if ord(c) > 0x2E80 else 1 for c in title)  # a Chinese character is two columns wide
    for opening in ("（", " ("):
        if wide > at and opening in title:
            first, rest = title.split(opening, 1)
            return [first, opening.strip() + rest]
    return title


def y_loss(field: str = "loss", log: bool = False, title: str | None = None, padding: int = 0) -> alt.Y:
    """A loss axis; its title "loss (nats / char)" unless given (translated where drawn)."""
    scale = alt.Scale(type="log" if log else "linear", zero=False, padding=padding)
    return alt.Y(f"{field}:Q", title=_("loss (nats / char)") if title is None else title, scale=scale)


def text_inside(x: float, x_max: float) -> dict:
    """Text alignment that keeps a label inside the plot: Vega shrinks a plot to fit a label
    that sticks out of it, so one near the right edge is right-aligned."""
    return {"align": "right", "dx": -6} if x > 0.6 * x_max else {"align": "left", "dx": 6}


X_TITLES = {"step": N_("training step"), "elapsed_s": N_("wall-clock (s)")}  # shown with _()


def loss_curves(
    long: pd.DataFrame, x: str = "step", log: bool = False, height: int = 420, colours: Colours = None
) -> alt.Chart:
    """Train and val curves of each run, in its experiment's colour (the seeds of one experiment
    alike, named on hover), val solid and train dashed; click the legend to highlight."""
    pick = alt.selection_point(fields=["experiment"], bind="legend")
    base = (
        alt.Chart(long)
        .transform_calculate(split_name=split_words("datum.split"))
        .encode(
            x=alt.X(f"{x}:Q", title=_(X_TITLES[x]) if x in X_TITLES else x),
            y=y_loss("smoothed", log),
            color=alt.Color(
                "experiment:N",
                title=_("experiment (click to highlight)"),
                legend=alt.Legend(labelLimit=320, symbolType="stroke", symbolStrokeWidth=3, symbolOpacity=1),
                scale=color_scale(long["experiment"], colours),
            ),
            strokeDash=split_dash(long["split"]),
            detail=alt.Detail(["label:N", "split:N"]),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.12)),
            tooltip=[
                alt.Tooltip("label:N", title=_("run")),
                alt.Tooltip("split_name:N", title=_("split")),
                alt.Tooltip("step:Q", title=_("step"), format=","),
                alt.Tooltip("elapsed_s:Q", title=_("wall-clock (s)"), format=".1f"),
                alt.Tooltip("loss:Q", title=_("loss"), format=".4f"),
                alt.Tooltip("smoothed:Q", title=_("smoothed"), format=".4f"),
                alt.Tooltip("lr:Q", title=_("lr"), format=".2e"),
                alt.Tooltip("tokens_seen:Q", title=_("tokens seen"), format=","),
            ],
        )
    )
    # small points on the lines give the hover tooltips something to catch
    lines = base.mark_line(strokeWidth=2, point=alt.OverlayMarkDef(size=14, filled=True)).add_params(pick)
    return lines.properties(height=height)


def seed_band_chart(
    band: pd.DataFrame,
    runs_long: pd.DataFrame,
    best: pd.DataFrame,
    log: bool = False,
    height: int = 440,
    reference: pd.DataFrame | None = None,
    colours: Colours = None,
) -> alt.LayerChart:
    """Val loss per experiment: min-max band over seeds, each seed's line, each run's best point.

    `reference`, a seed band of the shipped reference results, is drawn in grey behind, with
    its experiments' names prefixed by "reference: ".
    """
    scale = color_scale(band["experiment"], colours)
    pick = alt.selection_point(fields=["experiment"], bind="legend")
    faded = alt.condition(pick, alt.value(1.0), alt.value(0.15))
    color = alt.Color(
        "experiment:N",
        title=_("model (click to highlight)"),
        scale=scale,
        legend=alt.Legend(labelLimit=320, symbolType="stroke", symbolOpacity=1, symbolStrokeWidth=3),
    )
    x = alt.X("step:Q", title=_("training step"))
    # padding below the curves leaves room for the labels of the best points
    area = (
        alt.Chart(band)
        .mark_area(opacity=0.22)
        .encode(
            x=x,
            y=y_loss("min", log, _("val loss (nats / char)"), padding=40),
            y2="max:Q",
            color=color,
            tooltip=[
                alt.Tooltip("experiment:N", title=_("experiment")),
                alt.Tooltip("step:Q", title=_("step"), format=","),
                alt.Tooltip("min:Q", title=_("min over seeds"), format=".4f"),
                alt.Tooltip("max:Q", title=_("max over seeds"), format=".4f"),
                alt.Tooltip("n_seeds:Q", title=_("seeds")),
            ],
        )
    )
    lines = (
        alt.Chart(runs_long)
        .mark_line(strokeWidth=1.6)
        .encode(
            x=x,
            y=y_loss("loss", log, _("val loss (nats / char)")),
            color=color,
            detail="label:N",
            opacity=faded,
            tooltip=[
                alt.Tooltip("label:N", title=_("run")),
                alt.Tooltip("step:Q", title=_("step"), format=","),
                alt.Tooltip("loss:Q", title=_("val loss"), format=".4f"),
            ],
        )
        .add_params(pick)
    )
    points = (
        alt.Chart(best)
        .mark_point(size=140, filled=True, shape="diamond", stroke="white", strokeWidth=1.2)
        .encode(
            x=x,
            y="val_loss:Q",
            color=color,
            tooltip=[
                alt.Tooltip("label:N", title=_("best of run")),
                alt.Tooltip("step:Q", title=_("step"), format=","),
                alt.Tooltip("val_loss:Q", title=_("best val"), format=".4f"),
            ],
        )
    )
    best_of_experiment = best.sort_values("val_loss").drop_duplicates("experiment").copy()
    best_of_experiment["text"] = [
        _("{experiment}: best {loss} @ {step}").format(experiment=e, loss=f"{v:.3f}", step=int(s))
        for e, v, s in zip(best_of_experiment["experiment"], best_of_experiment["val_loss"], best_of_experiment["step"])
    ]
    # one label per model, stacked under the lowest point so that they never overlap
    lowest = best_of_experiment["val_loss"].min()
    best_of_experiment["label_y"] = lowest
    best_of_experiment["label_step"] = best_of_experiment["step"]
    last_step = band["step"].max()  # the x axis's end: the reference's, where it is drawn behind
    if reference is not None and not reference.empty:
        last_step = max(last_step, reference["step"].max())
    labels = alt.layer(
        *[
            alt.Chart(best_of_experiment.iloc[[i]])
            .mark_text(dy=16 + 15 * i, fontWeight="bold", fontSize=12, **text_inside(step, last_step))
            .encode(x="label_step:Q", y="label_y:Q", text="text:N", color=color)
            for i, step in enumerate(best_of_experiment["step"])
        ]
    )
    layers = [area, lines, points, labels]
    if reference is not None and not reference.empty:
        reference = reference.assign(
            experiment=[_("reference: {experiment}").format(experiment=e) for e in reference["experiment"]]
        )
        behind = (
            alt.Chart(reference)
            .mark_area(opacity=0.25, color=palette.NEUTRAL)
            .encode(
                x=x,
                y=y_loss("min", log, _("val loss (nats / char)")),
                y2="max:Q",
                detail="experiment:N",
                tooltip=[
                    alt.Tooltip("experiment:N", title=_("experiment")),
                    alt.Tooltip("step:Q", title=_("step"), format=","),
                    alt.Tooltip("min:Q", title=_("min over seeds"), format=".4f"),
                    alt.Tooltip("max:Q", title=_("max over seeds"), format=".4f"),
                ],
            )
        )
        layers.insert(0, behind)
    return alt.layer(*layers).properties(height=height)


def overfitting_chart(
    run: pd.DataFrame,
    row: pd.Series,
    margin: float,
    height: int = 300,
    y_domain: tuple[float, float] | None = None,
    colours: Colours = None,
) -> alt.LayerChart:
    """One run: train and val, the gap between them, val's minimum and the region after it.
    `y_domain`: the loss axis's range, shared by charts drawn side by side to be compared. The run
    in its experiment's colour, val solid and train dashed."""
    x = alt.X("step:Q", title=_("training step"))
    last_step = float(run["step"].max())
    after = pd.DataFrame({"start": [row["min_step"]], "end": [last_step]})
    shade = alt.Chart(after).mark_rect(color=TURN_RED, opacity=0.08).encode(x="start:Q", x2="end:Q")
    # right-aligned at the end, so the label stays inside the plot wherever the minimum is
    shade_text = (
        alt.Chart(after)
        .mark_text(align="right", baseline="top", dx=-4, dy=6, color=TURN_RED)
        .encode(x="end:Q", y=alt.value(0), text=alt.value(_("after the minimum: overfitting")))
    )
    gap = (
        alt.Chart(run)
        .mark_area(color=palette.NEUTRAL, opacity=0.18)
        .encode(
            x=x,
            y=alt.Y(
                "train_loss:Q",
                title=_("loss (nats / char)"),
                scale=alt.Scale(zero=False, domain=list(y_domain)) if y_domain else alt.Scale(zero=False),
            ),
            y2="val_loss:Q",
            tooltip=[
                alt.Tooltip("step:Q", title=_("step"), format=","),
                alt.Tooltip("train_loss:Q", title=_("train"), format=".4f"),
                alt.Tooltip("val_loss:Q", title=_("val"), format=".4f"),
                alt.Tooltip("gap:Q", title=_("val - train"), format=".4f"),
            ],
        )
        .transform_calculate(gap="datum.val_loss - datum.train_loss")
    )
    long = run.melt(id_vars=["step"], value_vars=["train_loss", "val_loss"], var_name="split", value_name="loss")
    long["split"] = long["split"].str.replace("_loss", "")
    colour = palette.named_colours([row["experiment"]], colours)[row["experiment"]]
    dash = split_dash(long["split"], title=None, colour=colour, orient="top", direction="horizontal")
    lines = (
        alt.Chart(long)
        .mark_line(strokeWidth=2, color=colour)
        .encode(
            x=x,
            y="loss:Q",
            strokeDash=dash,
            tooltip=[
                alt.Tooltip("split:N", title=_("split")),
                alt.Tooltip("step:Q", title=_("step"), format=","),
                alt.Tooltip("loss:Q", title=_("loss"), format=".4f"),
            ],
        )
    )
    minimum = pd.DataFrame(
        {
            "step": [row["min_step"]],
            "loss": [row["min_val"]],
            "text": [_("min val {loss} @ {step}").format(loss=f"{row['min_val']:.3f}", step=int(row["min_step"]))],
        }
    )
    min_point = (
        alt.Chart(minimum)
        .mark_point(shape="diamond", size=160, filled=True, color=TURN_RED)
        .encode(x="step:Q", y="loss:Q", tooltip=["text:N"])
    )
    min_text = (
        alt.Chart(minimum)
        .mark_text(dy=10, baseline="top", fontWeight="bold", color=TURN_RED, **text_inside(row["min_step"], last_step))
        .encode(x="step:Q", y="loss:Q", text="text:N")
    )
    # no region to shade while val is still at its minimum on the last evaluation
    layers = (
        [shade, gap, lines, min_point, min_text, shade_text]
        if row["min_step"] < last_step
        else [gap, lines, min_point, min_text]
    )
    if pd.notna(row["turn_step"]):
        # the threshold min + margin, and the first step val crosses it (placed in data
        # coordinates: a mark outside the plot would make Vega shrink the plot to fit it)
        threshold = row["min_val"] + margin
        turn = pd.DataFrame(
            {
                "step": [row["turn_step"]],
                "start": [row["min_step"]],
                "end": [last_step],
                "loss": [threshold],
                "text": [
                    _("val > min + {margin} from step {step}").format(margin=f"{margin:g}", step=int(row["turn_step"]))
                ],
            }
        )
        layers.append(
            alt.Chart(turn)
            .mark_rule(strokeDash=[2, 2], color=TURN_RED)
            .encode(x="start:Q", x2="end:Q", y="loss:Q", tooltip=["text:N"])
        )
        layers.append(
            alt.Chart(turn)
            .mark_rule(strokeDash=[6, 4], color=TURN_RED, strokeWidth=1.5)
            .encode(x="step:Q", tooltip=["text:N"])
        )
        layers.append(
            alt.Chart(turn)
            .mark_text(dy=-8, baseline="bottom", color=TURN_RED, **text_inside(row["turn_step"], last_step))
            .encode(x="step:Q", y="loss:Q", text="text:N")
        )
    return alt.layer(*layers).properties(height=height)


def with_verdict_words(deltas: pd.DataFrame) -> pd.DataFrame:
    """Judged differences (a `beyond` column: True, False, or None when not testable) with their
    verdict in words for a tooltip, the difference in its one written form (`difference`), and
    `beyond` as a plain bool for the pale/full encoding."""
    verdicts = {True: _("beyond noise"), False: _("within noise")}
    known = [beyond is not None and pd.notna(beyond) for beyond in deltas["beyond"]]
    return deltas.assign(
        difference=[compact(*values) for values in zip(deltas["delta"], deltas["low"], deltas["high"])],
        verdict=[verdicts[bool(b)] if k else _("not testable") for b, k in zip(deltas["beyond"], known)],
        beyond=[bool(b) if k else False for b, k in zip(deltas["beyond"], known)],
    )


def ablation_chart(deltas: pd.DataFrame, *, height_per_row: int = 36, colours: Colours = None) -> alt.LayerChart:
    """Per ablation (a row of claims.ablation_intervals: part, direction, baseline, experiment,
    delta, low, high, beyond, n_seeds, comparisons), its Δ best val against its baseline, with its
    95% interval (judged with the other ablations, Holm) as the error bar; a bar whose interval
    holds zero is paler. An ablation with no interval (not testable) has a bar and no error bar."""
    deltas = with_verdict_words(deltas).assign(row=deltas["part"] + " · " + deltas["direction"])
    # the direction is in the reader's words (chart_data.direction_words): added before removed in any language
    removed = [way != direction_words("add", base) for way, base in zip(deltas["direction"], deltas["baseline"])]
    ordered = deltas.assign(removed=removed)
    rows = list(ordered.sort_values(["part", "removed", "direction"])["row"])
    # each way in its baseline's colour (added to vanilla: vanilla's blue), added before removed
    ways = ordered.drop_duplicates("direction").sort_values(["removed", "direction"])
    baseline_colors = color_scale(ways["baseline"], colours)
    colour_of = dict(zip(baseline_colors.domain, baseline_colors.range))
    direction_scale = alt.Scale(domain=list(ways["direction"]), range=[colour_of[b] for b in ways["baseline"]])
    y = alt.Y("row:N", title=None, sort=rows, axis=alt.Axis(labelLimit=320))
    tooltip = [
        alt.Tooltip("experiment:N", title=_("experiment")),
        alt.Tooltip("direction:N", title=_("direction")),
        alt.Tooltip("difference:N", title=_("Δ best val [95% interval]")),
        alt.Tooltip("verdict:N", title=_("beyond noise?")),
        alt.Tooltip("comparisons:Q", title=_("comparisons judged together")),
        alt.Tooltip("n_seeds:Q", title=_("seeds")),
    ]
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="#555555").encode(x="x:Q")
    bars = (
        alt.Chart(deltas)
        .mark_bar(height=18)
        .encode(
            x=alt.X(
                "delta:Q", title=two_lines(_("Δ best val, experiment − baseline (nats/char; negative = lower loss)"))
            ),
            y=y,
            color=alt.Color(
                "direction:N",
                scale=direction_scale,
                title=None,
                legend=alt.Legend(orient="top", direction="horizontal"),
            ),
            opacity=alt.condition("datum.beyond", alt.value(0.9), alt.value(0.4)),
            tooltip=tooltip,
        )
    )
    errors = (
        alt.Chart(deltas.dropna(subset=["low", "high"]))
        .mark_errorbar(ticks=True, color="#222222", thickness=1.5)
        .encode(x=alt.X("low:Q", title=""), x2="high:Q", y=y, tooltip=tooltip)
    )
    return alt.layer(bars, errors, zero).properties(height=alt.Step(height_per_row))  # a fixed height per row


def delta_chart(deltas: pd.DataFrame, height_per_row: int = 44, colours: Colours = None) -> alt.LayerChart:
    """Best val minus its baseline's, per experiment (a row of chart_data.versus_baseline), with the
    seed range as error bars."""
    baselines = list(dict.fromkeys(deltas["baseline"]))
    reference = baselines[0] if len(baselines) == 1 else None
    order = list(deltas.sort_values("delta")["experiment"])
    y = alt.Y("experiment:N", title=None, sort=order, axis=alt.Axis(labelLimit=320))
    tooltip = [
        alt.Tooltip("experiment:N", title=_("experiment")),
        alt.Tooltip("baseline:N", title=_("baseline")),
        alt.Tooltip(
            "delta:Q",
            title=_("vs its baseline (nats)")
            if reference is None
            else _("vs {baseline} (nats)").format(baseline=reference),
            format="+.4f",
        ),
        alt.Tooltip("delta_low:Q", title=_("seed min"), format="+.4f"),
        alt.Tooltip("delta_high:Q", title=_("seed max"), format="+.4f"),
        alt.Tooltip("n_seeds:Q", title=_("seeds")),
    ]
    points = (
        alt.Chart(deltas)
        .mark_point(filled=True, size=120)
        .encode(
            x=alt.X(
                "delta:Q",
                title=two_lines(
                    _("best val loss minus its baseline's (nats; right = worse)")
                    if reference is None
                    else _("best val loss minus {baseline}'s (nats; right = worse)").format(baseline=reference)
                ),
            ),
            y=y,
            color=alt.Color("experiment:N", scale=color_scale(deltas["experiment"], colours), legend=None),
            tooltip=tooltip,
        )
    )
    errors = (
        alt.Chart(deltas)
        .mark_errorbar(ticks=True, thickness=2)
        .encode(
            x=alt.X("delta_low:Q", title=""),
            x2="delta_high:Q",
            y=y,
            color=alt.Color("experiment:N", scale=color_scale(deltas["experiment"], colours), legend=None),
            tooltip=tooltip,
        )
    )
    zero = alt.Chart(pd.DataFrame({"x": [0.0]})).mark_rule(color="#555555").encode(x="x:Q")
    # a fixed height per row (Vega squeezes discrete rows to nothing in a short fixed-height chart)
    return (errors + points + zero).properties(height=alt.Step(height_per_row))


# ---------------------------------------------------------------------------------------------
# The exams: each part tested where it is made to pay

# how a model knows positions (the data's words; each shown with _()), in the colour of the role
# that has it: RoPE the mini-LLaMA's orange, the learned table the 2017 model's blue
POSITION_COLORS = {
    N_("RoPE"): palette.POSITIONS["RoPE"],
    N_("learned positions"): palette.POSITIONS["learned positions"],
    N_("RoPE broken: k unrotated"): palette.POSITIONS["RoPE broken: k unrotated"],
    N_("RoPE broken: k adjacent"): palette.POSITIONS["RoPE broken: k adjacent"],
}
# what became of a cell of the depth map: light fills under black text, none of them a run's colour
DEPTH_STATES = {
    N_("trained"): "#a1d99b",
    N_("did not learn"): "#fdd49e",
    N_("diverged"): DIVERGED_RED,
    N_("running"): palette.NEUTRAL_LIGHT,
}


def shown(values: pd.Series, fixed: dict[str, str]) -> tuple[pd.Series, dict[str, str]]:
    """Values named in `fixed` in the reader's words (any other as it is), and `fixed` keyed by those words."""
    return values.map(lambda value: _(value) if value in fixed else value), {_(name): c for name, c in fixed.items()}


def fixed_scale(present, fixed: dict[str, str]) -> alt.Scale:
    """The fixed colours for known names, a spare colour (colours.SPARE) for any other, in a stable order."""
    names = [name for name in fixed if name in set(present)] + sorted(set(present) - set(fixed))
    taken = set(fixed.values())
    chosen = {}
    for name in names:
        chosen[name] = fixed.get(name) or palette.spare(name, taken)
        taken.add(chosen[name])
    return alt.Scale(domain=names, range=[chosen[name] for name in names])


def length_chart(
    curves: pd.DataFrame, ctx_len: float | None = None, height: int = 380, colours: Colours = None
) -> alt.LayerChart:
    """Loss against position, one line per experiment.

    `curves`: experiment, positions, featured, bucket_start, bucket_end, position (the bucket's
    middle), loss, runs. Featured lines (the headline models and the RoPE experiments) are drawn
    bold in their experiment's colour, named with how they know positions; the others thin and
    grey, for context. A rule marks the training length `ctx_len`, past which a learned table has
    no row.
    """
    drawn = curves.dropna(subset=["loss"])
    words, _colors = shown(drawn["positions"], POSITION_COLORS)
    others = _("other experiments")
    drawn = drawn.assign(
        positions=words,
        line=[
            _("{experiment} ({positions})").format(experiment=experiment, positions=kind) if featured else others
            for experiment, kind, featured in zip(drawn["experiment"], words, drawn["featured"])
        ],
    )
    featured = drawn[drawn["featured"]].drop_duplicates("experiment")
    lines_of = palette.named_colours(featured["experiment"], colours)
    domain = list(featured["line"]) + [others] * bool((~drawn["featured"]).any())
    scale = alt.Scale(domain=domain, range=[lines_of[e] for e in featured["experiment"]] + [palette.NEUTRAL_LIGHT])
    pick = alt.selection_point(fields=["line"], bind="legend")
    tooltip = [
        alt.Tooltip("experiment:N", title=_("experiment")),
        alt.Tooltip("positions:N", title=_("positions")),
        alt.Tooltip("bucket_start:Q", title=_("from position")),
        alt.Tooltip("bucket_end:Q", title=_("to position")),
        alt.Tooltip("loss:Q", title=_("loss (nats / char)"), format=".4f"),
        alt.Tooltip("runs:Q", title=_("runs (seeds)")),
    ]
    lines = (
        alt.Chart(drawn)
        .mark_line(point=alt.OverlayMarkDef(size=24, filled=True))
        .encode(
            x=alt.X("position:Q", title=_("position in the window (characters)")),
            y=y_loss("loss"),
            color=alt.Color(
                "line:N", title=_("experiment (positions)"), scale=scale, legend=alt.Legend(symbolType="stroke")
            ),
            detail="experiment:N",
            strokeWidth=alt.condition("datum.featured", alt.value(3), alt.value(1)),
            strokeOpacity=alt.condition("datum.featured", alt.value(1.0), alt.value(0.4)),
            opacity=alt.condition(pick, alt.value(1.0), alt.value(0.08)),
            tooltip=tooltip,
        )
        .add_params(pick)
    )
    layers = [lines]
    if ctx_len is not None and pd.notna(ctx_len):
        edge = pd.DataFrame(
            {"position": [float(ctx_len)], "text": [_("training length ({length})").format(length=int(ctx_len))]}
        )
        layers.append(alt.Chart(edge).mark_rule(strokeDash=[6, 4], color="#555555").encode(x="position:Q"))
        layers.append(
            alt.Chart(edge)
            .mark_text(align="left", dx=4, baseline="top", color="#555555")
            .encode(x="position:Q", y=alt.value(4), text="text:N")
        )
    return alt.layer(*layers).properties(height=height)


def stability_map(
    cells: pd.DataFrame, height_per_row: int = 70, rows: dict[str, str] | None = None, row_title: str | None = None
) -> alt.LayerChart:
    """The depth map: a cell per wiring and learning rate, coloured by what became of the run.

    `cells`: norm_pos, lr, lr_label, state (trained | did not learn | diverged | running), text.
    `rows`: each norm_pos value by its words, top row first (default: post- and pre-norm); the
    QK-norm map draws its variants (plain, qk_norm) so, under `row_title`.
    """
    rows = rows or {"post": wiring("post"), "pre": wiring("pre")}
    words, colors = shown(cells["state"], DEPTH_STATES)
    cells = cells.assign(state=words, norm_pos=cells["norm_pos"].map(rows))  # post-norm, in the reader's words
    order = list(dict.fromkeys(cells.sort_values("lr")["lr_label"]))
    x = alt.X("lr_label:O", title=_("peak learning rate (no warmup)"), sort=order, axis=alt.Axis(labelAngle=0))
    y = alt.Y(
        "norm_pos:N",
        title=None,
        sort=list(rows.values()),
        axis=alt.Axis(labelFontWeight="bold"),
    )
    tooltip = [
        alt.Tooltip("norm_pos:N", title=row_title or pgettext("post- or pre-norm", "wiring")),
        alt.Tooltip("lr:Q", title=_("lr"), format="g"),
        alt.Tooltip("state:N", title=pgettext("a depth map cell", "state")),
        alt.Tooltip("text:N", title=pgettext("a depth map cell", "result")),
    ]
    rects = (
        alt.Chart(cells)
        .mark_rect(stroke="white", strokeWidth=3)
        .encode(
            x=x,
            y=y,
            color=alt.Color("state:N", title=None, scale=fixed_scale(cells["state"], colors)),
            tooltip=tooltip,
        )
    )
    # the number on a line of its own ("best val" / "4.512"): at a phone's width a cell is narrower
    # than the whole line, which would run into its neighbour's
    labels = (
        alt.Chart(cells)
        .transform_calculate(two_lines=r"replace(datum.text, /\s+(?=\S+$)/, '\n')")
        .mark_text(fontWeight="bold", color="black", lineBreak="\n")
        .encode(x=x, y=y, text="two_lines:N", tooltip=tooltip)
    )
    return (rects + labels).properties(height=alt.Step(height_per_row))


# ---------------------------------------------------------------------------------------------
# The studies


def model_scale() -> alt.Scale:
    """The two models of a study in their roles' colours: the 2017 model blue, the mini-LLaMA orange."""
    return alt.Scale(domain=list(palette.MODELS), range=list(palette.MODELS.values()))


def model_legend() -> alt.Legend:
    """Each model as a line piece at full strength (its band is pale: a legend of it would be too)."""
    return alt.Legend(symbolType="stroke", symbolStrokeWidth=3, symbolOpacity=1)


def best_val_by_size_chart(points: pd.DataFrame, height: int = 320) -> alt.LayerChart:
    """Best val against training-set size (log axis), one line per model through the mean over
    seeds, the seed band (min to max) behind it, each seed a point."""
    color = alt.Color("model:N", title=_("model"), scale=model_scale(), legend=model_legend())
    sizes = sorted(points["train_tokens"].dropna().unique())  # the sizes studied, not round numbers
    x = alt.X(
        "train_tokens:Q",
        title=_("training characters (log scale)"),
        scale=alt.Scale(type="log"),
        axis=alt.Axis(values=sizes, format="~s"),
    )
    band = (
        alt.Chart(points)
        .mark_area(opacity=0.2)
        .encode(x=x, y=alt.Y("min(best_val_loss):Q"), y2="max(best_val_loss):Q", color=color)
    )
    line = (
        alt.Chart(points)
        .mark_line()
        .encode(
            x=x,
            y=alt.Y("mean(best_val_loss):Q", title=_("best val loss (nats / char)"), scale=alt.Scale(zero=False)),
            color=color,
        )
    )
    dots = (
        alt.Chart(points)
        .mark_point(filled=True, size=50)
        .encode(
            x=x,
            y="best_val_loss:Q",
            color=color,
            tooltip=[
                alt.Tooltip("model:N", title=_("model")),
                alt.Tooltip("train_tokens:Q", title=_("training characters"), format=","),
                alt.Tooltip("seed:Q", title=_("seed")),
                alt.Tooltip("best_val_loss:Q", format=".4f"),
            ],
        )
    )
    return (band + line + dots).properties(height=height)


def lr_chart(
    points: pd.DataFrame, setup: str | None = None, height: int = 320, colours: dict[str, str] | None = None
) -> alt.LayerChart:
    """Best val against learning rate (log axis), one line per model through the mean over seeds,
    the seed band (min to max) behind it, each model's best lr ringed, and a cross at the top for
    every lr where a run diverged (anatomy.report.lr_section.lr_points). One setup per chart (its
    label; the first, the largest, when None): two texts' losses do not share an axis. `colours`:
    each line's colour by its `model` name (the parts study's curves), else the two models'."""
    if len(points):
        points = points[points["setup"] == (setup if setup is not None else points["setup"].iloc[0])]
    scale = model_scale() if colours is None else alt.Scale(domain=list(colours), range=list(colours.values()))
    color = alt.Color("model:N", title=_("model"), scale=scale, legend=model_legend())
    ticks = sorted(points["lr"].unique())  # the lrs tried, not the axis's round numbers
    x = alt.X(
        "lr:Q",
        title=_("learning rate (log scale)"),
        scale=alt.Scale(type="log"),
        axis=alt.Axis(format="g", values=ticks),
    )
    y = alt.Y("mean:Q", title=_("best val loss (nats / char)"), scale=alt.Scale(zero=False))
    finished = points.dropna(subset=["mean"])
    band = alt.Chart(finished).mark_area(opacity=0.2).encode(x=x, y="min:Q", y2="max:Q", color=color)
    line = (
        alt.Chart(finished)
        .mark_line(point=True)
        .encode(
            x=x,
            y=y,
            color=color,
            tooltip=[
                alt.Tooltip("model:N", title=_("model")),
                alt.Tooltip("lr:Q", title=_("learning rate"), format="g"),
                alt.Tooltip("mean:Q", title=_("best val (mean over seeds)"), format=".4f"),
                alt.Tooltip("seeds:Q", title=_("seeds")),
            ],
        )
    )
    best = alt.Chart(finished[finished["best"]]).mark_point(size=260, strokeWidth=2).encode(x=x, y=y, color=color)
    layers = band + line + best
    diverged = points[points["diverged"] > 0].assign(top=finished["max"].max() if len(finished) else 0.0)
    if len(diverged):
        layers += (
            alt.Chart(diverged)
            .mark_point(shape="cross", size=160, strokeWidth=3)
            .encode(x=x, y="top:Q", color=color, tooltip=[alt.Tooltip("diverged:Q", title=_("runs diverged"))])
        )
    return layers.properties(height=height)


RULE_DASH = {"own": [], "shared": [5, 4]}  # each model at its own best lr: solid; at the shared lr: dashed
RULE_WORDS = {"own": N_("each model at its own best lr"), "shared": N_("both at one shared lr")}  # shown with _()


def best_val_by_params_chart(points: pd.DataFrame, height: int = 320) -> alt.LayerChart:
    """Best val against parameter count (log axis), one line per model at its own best lr, with
    the seed band (min to max), and dashed beside it the same models at one shared lr
    (anatomy.report.study_section.study_points)."""
    color = alt.Color("model:N", title=_("model"), scale=model_scale(), legend=model_legend())
    drawn = points.assign(rule_words=points["rule"].map(lambda rule: _(RULE_WORDS[rule])))
    dash = alt.StrokeDash(
        "rule_words:N",
        title=_("learning rate"),
        scale=alt.Scale(domain=[_(RULE_WORDS[r]) for r in RULE_DASH], range=list(RULE_DASH.values())),
    )
    x = alt.X(
        "params:Q",
        title=_("parameters (log scale)"),
        scale=alt.Scale(type="log"),
        axis=alt.Axis(format="~s"),
    )
    y = alt.Y("mean:Q", title=_("best val loss (nats / char)"), scale=alt.Scale(zero=False))
    own = drawn[drawn["rule"] == "own"]
    band = alt.Chart(own).mark_area(opacity=0.2).encode(x=x, y="min:Q", y2="max:Q", color=color)
    line = (
        alt.Chart(drawn)
        .mark_line(point=True)
        .encode(
            x=x,
            y=y,
            color=color,
            strokeDash=dash,
            detail="rule:N",
            tooltip=[
                alt.Tooltip("point:N", title=_("point of the study")),
                alt.Tooltip("model:N", title=_("model")),
                alt.Tooltip("lr:Q", title=_("learning rate"), format="g"),
                alt.Tooltip("mean:Q", title=_("best val (mean over seeds)"), format=".4f"),
                alt.Tooltip("seeds:Q", title=_("seeds")),
            ],
        )
    )
    return (band + line).properties(height=height)


def best_lr_by_params_chart(points: pd.DataFrame, height: int = 260) -> alt.Chart:
    """Each model's best lr against parameter count (both axes log): a hollow point where the best
    lr is the edge of the lrs tried, so a better one may lie beyond it."""
    own = points[points["rule"] == "own"].assign(
        where=lambda frame: frame["bracketed"].map(
            {True: _("a worse lr on each side"), False: _("the edge of the lrs tried")}
        )
    )
    color = alt.Color("model:N", title=_("model"), scale=model_scale(), legend=model_legend())
    return (
        alt.Chart(own)
        .mark_line(point=alt.OverlayMarkDef(size=90, filled=True))
        .encode(
            x=alt.X(
                "params:Q", title=_("parameters (log scale)"), scale=alt.Scale(type="log"), axis=alt.Axis(format="~s")
            ),
            y=alt.Y(
                "lr:Q",
                title=_("best learning rate (log scale)"),
                scale=alt.Scale(type="log"),
                axis=alt.Axis(format="g"),
            ),
            color=color,
            tooltip=[
                alt.Tooltip("point:N", title=_("point of the study")),
                alt.Tooltip("model:N", title=_("model")),
                alt.Tooltip("lr:Q", title=_("best learning rate"), format="g"),
                alt.Tooltip("where:N", title=_("best lr")),
            ],
        )
        .properties(height=height)
    )
