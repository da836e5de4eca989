"""The report's figures: anatomy/report/charts.py's, which the dashboard shows too, saved as PNG
(Altair saves through vl-convert), each with its caption, and linked where a section shows it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from anatomy.files.atomic import atomic_path
from anatomy.language import N_, _
from anatomy.report import chart_data
from anatomy.report.claims import MEMORISING_RISE, ablation_intervals
from anatomy.report.lr_section import figure_names, lr_points, setups
from anatomy.report.roles import deep_runs, headline_of, only_runs_of
from anatomy.report.study_section import best_val_by_text_size, per_setup, study_points
from anatomy.results.studies import declared
from anatomy.results.reader import Results


def figure_charts(everything: Results) -> dict[str, Any]:
    """The figures the data allow, as Altair charts by name (the grid's, then the studies')."""
    from anatomy.report import charts  # Altair: imported only when figures are drawn, so the text needs none

    data = only_runs_of(everything, None)

    drawn: dict[str, Any] = {}
    for study in declared().values():  # a study whose points are setups (the lr study's): one figure each
        if per_setup(study):
            lr_drawn = lr_points(everything, group=study.name)
            found = setups(everything, group=study.name)
            for setup, name in zip(found, figure_names(found, study.name)):  # two texts share no axis
                drawn[name] = charts.lr_chart(lr_drawn, setup=setup.label).properties(width=680)
    for study in declared().values():  # a study rendered from its declaration: NAME and NAME_lr
        if not (by_point := study_points(everything, study)).empty:
            drawn[study.name] = charts.best_val_by_params_chart(by_point).properties(width=680)
            drawn[f"{study.name}_lr"] = charts.best_lr_by_params_chart(by_point).properties(width=680)
        if not (by_size := best_val_by_text_size(everything, study)).empty:  # one shared lr, sizes of text
            drawn[study.name] = charts.best_val_by_size_chart(by_size).properties(width=680)
    headline_runs = data.runs[data.runs["group"] == "headline"]
    headline = data.metrics[data.metrics["run_id"].isin(headline_runs["run_id"])]
    if not headline.empty:
        band = data.band[data.band["experiment"].isin(headline_runs["experiment"])]
        drawn["headline"] = charts.seed_band_chart(
            band, chart_data.long_curves(headline, splits=("val_loss",)), chart_data.best_points(headline_runs)
        ).properties(width=760)
    llama = headline_of(data, "llama").sort_values("seed", ascending=False)
    if not llama.empty:
        run = data.metrics[data.metrics["run_id"] == llama["run_id"].iloc[0]].sort_values("step")
        table = chart_data.overfitting_table(llama.iloc[:1], data.above_best, margin=MEMORISING_RISE)
        if not table.empty:
            drawn["overfitting"] = charts.overfitting_chart(run, table.iloc[0], MEMORISING_RISE).properties(
                width=760, title=f"{run['label'].iloc[0]}: the overfitting turn"
            )
    if not data.ablations.empty:
        drawn["ablations"] = charts.ablation_chart(ablation_intervals(data)).properties(width=680)
    deep = pd.concat([deep_runs(data, "post"), deep_runs(data, "pre")])
    if not deep.empty:
        metrics = data.metrics[data.metrics["run_id"].isin(deep["run_id"])]
        drawn["depth"] = charts.loss_curves(chart_data.long_curves(metrics)).properties(width=760)
    breaks = data.runs[data.runs["group"] == "break"]
    deltas = chart_data.versus_baseline(data.comparisons, list(dict.fromkeys(breaks["experiment"])))
    if not deltas.empty:
        drawn["breaks"] = charts.delta_chart(deltas).properties(width=680)
    return {**drawn, **exam_charts(data)}


def exam_charts(data: Results) -> dict[str, Any]:
    """The exams' figures whose data exist: RoPE's loss by position and pre-norm's stability map."""
    from anatomy.report import charts  # Altair, as in figure_charts

    drawn: dict[str, Any] = {}
    length = data.exams.length[data.exams.length["run_id"].isin(data.runs["run_id"])]
    curves = chart_data.length_curves(length)
    if not curves.empty:
        ctx_lens = curves["ctx_len"].unique()
        drawn["length"] = charts.length_chart(curves, ctx_lens[0] if len(ctx_lens) == 1 else None).properties(width=760)
    if not data.exams.depth.empty:
        drawn["stability"] = charts.stability_map(chart_data.depth_cells(data.exams.depth)).properties(width=680)
    return drawn


def save_figures(charts: dict[str, Any], out_dir: Path) -> list[str]:
    """Each chart as out_dir/NAME.png, written atomically; returns the names."""
    for name, chart in charts.items():
        with atomic_path(out_dir / f"{name}.png") as tmp:
            # a gap between axis labels, so that touching ones (1,900 and a flush 2,000) thin out
            chart.configure_axis(labelSeparation=4).save(str(tmp), format="png", scale_factor=1.5)
    return list(charts)


# each figure's caption (its alt text), translated where a README in another language shows it
FIGURE_TITLES = {
    "headline": N_("Val loss, vanilla vs mini-LLaMA (band: min to max over seeds; ◆ best val)"),
    "overfitting": N_("The overfitting turn of the mini-LLaMA"),
    "ablations": N_(
        "Each part's Δ best val, added to vanilla and removed from the mini-LLaMA (experiment minus "
        "baseline: left of zero, lower loss; black line: its 95% interval, corrected for the table's "
        "comparisons; pale: within noise)"
    ),
    "depth": N_("12 layers without warmup: post-norm vs pre-norm"),
    "breaks": N_("Break tests: best val minus the mini-LLaMA's (right: worse than the mini-LLaMA)"),
    "length": N_("RoPE's exam: loss by position, past the training length (dashed line)"),
    "stability": N_("Pre-norm's exam: which deep models train without warmup, by learning rate"),
}  # the lr study's figures are captioned by anatomy.report.lr_section.figure_caption, and a
# declared study's by anatomy.report.study_section.figure_caption


def figure_link(name: str, figure_names: list[str], image_prefix: str, caption: str | None = None) -> str:
    """A drawn figure as Markdown after a blank line; nothing where it was not drawn. The caption
    is FIGURE_TITLES' unless one is given."""
    if name not in figure_names:
        return ""
    return f"\n\n![{caption or _(FIGURE_TITLES[name])}]({image_prefix}{name}.png)"
