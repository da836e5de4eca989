"""The results report: `python -m anatomy report`.

Reads a results database (or collects a folder of runs into a temporary one) and writes
`report.md` with the experiment's tables, the chapter's claims each next to our measurement
with a verdict (`anatomy/report/claims.py`), each part's training loss beside the exam made for it
(`anatomy/exams/`: which part wins where), and PNG figures drawn by the same Altair charts as the
dashboard (anatomy/report/charts.py). `--readme README.md README.zh-CN.md` also rewrites the READMEs'
generated sections (README_BLOCKS, between their marker lines) from the same data, each in its
file's language, so the README's numbers are never typed by hand; tests/test_report.py holds
them together.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
from pathlib import Path
from typing import Any

import pandas as pd

from anatomy.report import chart_data
from anatomy.files.atomic import atomic_path, remove_stale_temporaries, write_text, writing_into
from anatomy.report.claims import (
    EFFECT_SUMMARY,
    HELPS,
    HURTS,
    MEMORISING_RISE,
    NOT_BEYOND_NOISE,
    PARTS,
    ablation_family,
    ablation_intervals,
    ablation_of,
    ablation_untestable_reason,
    beyond_cell,
    claims,
    largest_ablation_change,
    part_effects,
    untestable_reason,
)
from anatomy.errors import AnatomyError
from anatomy.language import ENGLISH, LANGUAGES, N_, _, ngettext, speaking
from anatomy.results.groups import STUDY_GROUPS, is_study
from anatomy.report.lr_section import lr_answer, lr_points, lr_section
from anatomy.report.uncertainty import same_seeds
from anatomy.report.exam_findings import PART_EXAMS, PART_NAMES, exam_rows
from anatomy.report.precision_section import HEADLINE_CLAIMS, precision_section
from anatomy.report.scale_section import (
    best_val_by_size,
    better_lr_answer,
    largest_as_headline,
    scale_data,
    scale_answer,
    scale_section,
    which_part_earns,
)
from anatomy.results.reader import Results, load, load_runs
from anatomy.report.roles import (
    SEED_JOIN,
    deep_runs,
    headline_of,
    job_seconds,
    md_table,
    only_runs_of,
    per_seed,
    read_provenance,
    seeds_of,
    sentences as joined_sentences,
)
from anatomy.report.uncertainty import Difference, interval_text, judged_against_baselines, noise_of, noise_text

# The README sections this report writes, each between `<!-- report:NAME:start -->` and
# `<!-- report:NAME:end -->` lines: the results, and the wall time of each target.
README_BLOCKS = ("headline", "costs")
# the chapter's own figures, quoted beside ours (its blog corpus: vocabulary 1,719)
CHAPTER = {
    "vanilla_best": (3.706, 3.705),
    "vanilla_step": 1100,
    "llama_best": (3.599, 3.612),
    "llama_step": 500,
    "llama_final_val": 5.083,
    "llama_final_train": 0.33,
}
TARGETS = {"headline": "headline", "ablation": "ablations", "break": "break_tests"}
STUDY_TARGETS = {
    "precision": "precision_check",
    "scale": "scale",
    "lr": "lr",
}  # the studies' targets (anatomy/results/groups.py)


# ---------------------------------------------------------------------------------------------
# The sections


def difference_cell(d: Difference) -> str:
    """A difference with its interval (uncertainty.interval_text); "–" when there is none to take."""
    return interval_text(d) if pd.notna(d.mean) else "–"


def headline_section(data: Results) -> str:
    rows = []
    for model, name in (("vanilla", _("vanilla (2017)")), ("llama", "mini-LLaMA")):
        runs = headline_of(data, model)
        if runs.empty:
            rows.append([name, _("not run yet"), "", "", "", "", ""])
            continue
        rows.append(
            [
                name,
                seeds_of(runs),
                f"{int(runs['params'].max()):,}" if runs["params"].notna().any() else "–",
                per_seed(runs, "best_val_loss"),
                per_seed(runs, "best_step"),
                per_seed(runs, "final_val_loss"),
                per_seed(runs, "final_train_loss"),
            ]
        )
    rows.append(
        [
            _("chapter: vanilla"),
            "42 / 7",
            "1,244,928",
            SEED_JOIN.join(map(str, CHAPTER["vanilla_best"])),
            str(CHAPTER["vanilla_step"]),
            "",
            "",
        ]
    )
    rows.append(
        [
            _("chapter: mini-LLaMA"),
            "42 / 7",
            "1,178,496",
            SEED_JOIN.join(map(str, CHAPTER["llama_best"])),
            str(CHAPTER["llama_step"]),
            str(CHAPTER["llama_final_val"]),
            str(CHAPTER["llama_final_train"]),
        ]
    )
    return md_table(
        [_("model"), _("seeds"), _("params"), _("best val"), _("at step"), _("final val"), _("final train")], rows
    )


def ablation_section(data: Results) -> str:
    if data.ablations.empty:
        return _("No ablation runs yet: `snakemake --cores 1 ablations` trains them.")
    family = ablation_family(data)  # the table's comparisons, judged together
    rows = []
    for part in sorted(data.ablations["part"].unique()):
        cells = [part]
        for direction in ("add", "remove"):
            experiment = ablation_of(data, part, direction)
            if experiment is None:
                cells += [_("not run yet"), ""]
                continue
            d = family[experiment]
            cells += [difference_cell(d), beyond_cell(d, ablation_untestable_reason(data, experiment))]
        rows.append(cells)
    table = md_table(
        [
            _("part"),
            _("Δ best val, added to vanilla (95% interval)"),
            _("beyond noise?"),
            _("Δ best val, removed from llama (95% interval)"),
            _("beyond noise?"),
        ],
        rows,
    )
    judged = max((d.n for d in family.values() if d.beyond is not None), default=0)
    noise = noise_of(data.noise, data.runs[data.runs["group"] == "headline"])
    explained = ngettext(
        "Δ is the experiment's mean best val minus its baseline's, over the seeds both have: negative means "
        "lower loss. The noise is the per-run sd of best val between seeds, from every experiment of this "
        "setup with two seeds ({noise}); each Δ has a 95% interval from it, and the table's {n} comparison is "
        "judged on its own: a Δ is beyond noise when its interval excludes zero.",
        "Δ is the experiment's mean best val minus its baseline's, over the seeds both have: negative means "
        "lower loss. The noise is the per-run sd of best val between seeds, from every experiment of this "
        "setup with two seeds ({noise}); each Δ has a 95% interval from it, and the table's {n} comparisons are "
        "judged together (Holm's correction): a Δ is beyond noise when its corrected interval excludes zero.",
        judged,
    ).format(noise=noise_text(noise), n=judged)
    largest = largest_ablation_change(data, family)
    return f"{table}\n\n{joined_sentences([explained, largest]) if largest else explained}"


def break_section(data: Results) -> str:
    breaks = data.runs[data.runs["group"] == "break"]
    if breaks.empty:
        return "No break-test runs yet: `snakemake --cores 1 break_tests` trains them."
    family = judged_against_baselines(data, list(dict.fromkeys(breaks["experiment"])))
    rows = []
    for experiment, runs in breaks.groupby("experiment", sort=False):
        d = family[experiment]
        baseline = runs["baseline"].iloc[0]
        diverged = runs[runs["diverged"]].sort_values("seed", ascending=False)
        broke = (
            "no"
            if diverged.empty
            else ", ".join(
                f"seed {int(r.seed)} at step {int(r.diverged_step)}"
                if pd.notna(r.diverged_step)
                else f"seed {int(r.seed)}"
                for r in diverged.itertuples()
            )
        )
        base_runs = data.runs[data.runs["experiment"] == baseline]
        rows.append(
            [
                f"`{experiment}`",
                str(runs["description"].iloc[0] or ""),
                seeds_of(runs),
                broke,
                per_seed(runs, "best_val_loss"),
                per_seed(runs, "best_step"),
                f"`{baseline}`" if pd.notna(baseline) else "–",
                difference_cell(d),
                beyond_cell(d, untestable_reason(*same_seeds(runs, base_runs))),
            ]
        )
    table = md_table(
        [
            "experiment",
            "what it does",
            "seeds",
            "diverged",
            "best val",
            "at step",
            "baseline",
            "Δ best val vs baseline (95% interval)",
            "beyond noise?",
        ],
        rows,
    )
    judged = max((d.n for d in family.values() if d.beyond is not None), default=0)
    return (
        f"{table}\n\nΔ is the experiment's mean best val minus its baseline's, over the seeds both have (a diverged "
        "run left out: its best val is where it broke), with its 95% interval from the same pooled noise as the "
        f"ablations; the table's {judged} comparisons are judged together (Holm's correction)."
    )


def memorisation_section(data: Results) -> str:
    """Copied share of the headline models' samples, at the best checkpoint and the last."""
    headline = data.runs[data.runs["group"] == "headline"]
    rows = []
    for run in headline.sort_values(["n_parts", "seed"], ascending=[True, False]).itertuples():
        samples = data.memorisation[data.memorisation["run_id"] == run.run_id].set_index("checkpoint")
        if samples.empty:
            continue
        cells = [run.label]
        for checkpoint in ("best", "last"):
            if checkpoint not in samples.index:
                cells += ["–", "–"]
                continue
            sample = samples.loc[checkpoint]
            cells += [
                f"{int(sample['step'])}",
                f"{sample['copied_fraction']:.1%} ({sample['val_copied_fraction']:.1%}), "
                f"longest {int(sample['longest_copy'])}",
            ]
        rows.append(cells)
    if not rows:
        return "No measured samples yet: `python -m anatomy memorised RUN_DIR` measures a run's samples."
    min_chars = int(data.memorisation["copy_min_chars"].iloc[0])
    return (
        md_table(
            [
                "run",
                "best: step",
                "best: copied (val control), longest span",
                "last: step",
                "last: copied (val control), longest span",
            ],
            rows,
        )
        + f"\n\nCopied: the share of generated characters (the prefix excluded) inside a span of {min_chars} or "
        "more characters found verbatim in the training split; in brackets, the same against the validation "
        "split, which the model never saw (phrases the language itself repeats)."
    )


def overfitting_section(data: Results) -> str:
    rows = []
    for experiment, runs in data.runs.groupby("experiment", sort=True):
        finite = runs[runs["best_val_loss"].notna()]
        if finite.empty:
            continue
        rows.append(
            [
                f"`{experiment}`",
                seeds_of(finite),
                per_seed(finite, "best_step"),
                per_seed(finite, "best_val_loss"),
                per_seed(finite, "val_rise"),
                per_seed(finite, "final_train_loss"),
                per_seed(finite, "train_val_gap"),
            ]
        )
    return md_table(
        [
            "experiment",
            "seeds",
            "val bottoms out at step",
            "best val",
            "val rise after it",
            "final train",
            "final val - train",
        ],
        rows,
    )


def claims_section(data: Results) -> str:
    return md_table(
        ["the chapter says", "chapter's figure", "measured here", "verdict"],
        [[c.claim, c.chapter, c.measured, c.verdict] for c in claims(data)],
    )


def wall_clock_hours(entries: list[dict[str, Any]]) -> float:
    """From the first job's start to the last job's end (each start is its end minus its length)."""
    ends = [dt.datetime.fromisoformat(entry["finished_utc"].replace("Z", "+00:00")) for entry in entries]
    starts = [end - dt.timedelta(seconds=job_seconds(entry)) for end, entry in zip(ends, entries)]
    return (max(ends) - min(starts)).total_seconds() / 3600


def cost_row(name: str, entries: list[dict[str, Any]]) -> list[str]:
    """Runs, minutes per run, run-hours and wall-clock hours of these runs' training jobs."""
    jobs = [job_seconds(entry) for entry in entries]
    if not jobs:
        return [name, "0", "–", "–", "–"]
    return [
        name,
        str(len(jobs)),
        f"{sum(jobs) / len(jobs) / 60:.1f}",
        f"{sum(jobs) / 3600:.2f}",
        f"{wall_clock_hours(entries):.2f}",
    ]


def finished_words(grid: dict[str, Any]) -> str:
    """When the shipped runs finished: one date, a range, or that it was not recorded."""
    first, last = grid.get("first_finished_utc"), grid.get("last_finished_utc")
    if not (first and last):
        return "finish dates not recorded. "
    first, last = first[:10], last[:10]
    return f"runs finished on {first}. " if first == last else f"runs finished {first} to {last}. "


def costs_section(data: Results) -> str:
    """Time per target and for the whole grid, from the shipped runs' records (grid.json); the
    studies' runs have rows of their own, never counted in the grid's."""
    if not data.provenance:
        return ""
    groups = data.runs.set_index("run_id")["group"].to_dict()
    precisions = data.runs.set_index("run_id")["precision"].to_dict()
    shipped = data.provenance.get("runs", {})
    records = {run_id: entry for run_id, entry in shipped.items() if not is_study(groups.get(run_id))}

    def row(name: str, run_ids: list[str]) -> list[str]:
        used = sorted({precisions.get(run_id) or "fp32" for run_id in run_ids})
        return cost_row(name, [shipped[run_id] for run_id in run_ids]) + [", ".join(used) or "–"]

    rows = [row(f"`{target}`", [r for r in records if groups.get(r) == group]) for group, target in TARGETS.items()]
    rows.append(row("the whole grid (`all`)", list(records)))
    for group, target in STUDY_TARGETS.items():
        if study_runs := [run_id for run_id in shipped if groups.get(run_id) == group]:
            rows.append(row(f"`{target}` (a study, not in `all`)", study_runs))
    grid = data.provenance.get("grid", {})
    two_lanes = sum(job_seconds(entry) for entry in records.values()) / 2 / 3600
    return (
        md_table(
            ["target", "runs shipped", "minutes per run", "run-hours in all", "wall-clock hours", "precision"], rows
        )
        + f"\n\nOn {', '.join(grid.get('machines', [])) or 'an unrecorded machine'} "
        f"({', '.join(grid.get('devices', []))}, torch {', '.join(grid.get('torch_versions', []))}), "
        + finished_words(grid)
        + "Minutes per run: Snakemake's benchmark of each training job (compile, training, evaluations, "
        "checkpoints; a run resumed after an interruption counts its training time over every part). "
        "Run-hours: their sum, the time one run at a time would take. Wall-clock: from the first "
        "of the target's jobs to start to the last to end (two ran side by side; any pause between "
        f"jobs included). Two lanes that never idle would need half the run-hours: {two_lanes:.1f} h "
        "for the whole grid's training. A target's row counts its own experiments' runs (`ablations` "
        "and `break_tests` also train the baselines they are compared with, if those are not there "
        "yet); the exams are not in these times."
        + night_in_bf16(
            data, records, {run_id: shipped[run_id] for run_id in shipped if groups.get(run_id) == "precision"}
        )
    )


NIGHT_HOURS = 8  # the goal: the whole grid in one night


def night_in_bf16(data: Results, grid_records: dict[str, Any], bf16_records: dict[str, Any]) -> str:
    """The grid's training in bf16, estimated from measured runs: each grid run costs what the
    precision study's run of its depth cost (4 layers, 12 layers), both on this machine."""
    if not bf16_records:
        return ""
    layers = data.runs.set_index("run_id")["n_layer"].to_dict()
    measured: dict[int, list[float]] = {}
    for run_id, entry in bf16_records.items():
        measured.setdefault(int(layers[run_id]), []).append(job_seconds(entry) / 60)
    minutes = {n_layer: sum(times) / len(times) for n_layer, times in measured.items()}
    said = ", ".join(f"{n}-layer {m:.1f} minutes a run" for n, m in sorted(minutes.items()))
    needed = sorted({int(layers[run_id]) for run_id in grid_records if run_id in layers})
    if missing := [n for n in needed if n not in minutes]:
        return (
            f" In bf16, measured so far (the precision study): {said}; the {', '.join(map(str, missing))}-layer "
            "runs are not measured in bf16 yet, so the grid's night in bf16 is not estimated."
        )
    hours = sum(minutes[int(layers[run_id])] for run_id in grid_records if run_id in layers) / 60
    fits = "within" if hours / 2 <= NIGHT_HOURS else "beyond"
    return (
        f" In bf16 (the precision study's runs: {said}), the grid's training would take {hours:.1f} run-hours, "
        f"{hours / 2:.1f} h on two lanes that never idle: {fits} one {NIGHT_HOURS}-hour night before the exams."
    )


# ---------------------------------------------------------------------------------------------
# Which part wins where: each part's training loss beside the exam made for it (anatomy/report/exam_findings.py)


def training_loss_text(data: Results, part: str, family: dict[str, Difference] | None = None) -> str:
    """What the ablations say: the change in best val with its interval (judged with the ablation
    table's family), the part added to vanilla and removed from llama."""
    family = ablation_family(data) if family is None else family
    said = []
    for direction, words in (("add", "added to vanilla"), ("remove", "removed from llama")):
        experiment = ablation_of(data, part, direction)
        if experiment is None:
            said.append(f"{words}: not trained yet")
        elif pd.isna(family[experiment].mean):  # still training, or no seed that its baseline has
            said.append(f"{words}: no best val to pair with the baseline's yet")
        else:
            said.append(f"{words} {interval_text(family[experiment])}")
    return "; ".join(said)


def training_loss_verdict(data: Results, part: str, family: dict[str, Difference] | None = None) -> str:
    """What the ablations say about the part, added to vanilla and removed from llama
    (claims.part_effects: the ablation table's verdicts)."""
    effects = part_effects(data, part, family)
    if effects is None:
        return "the training loss does not tell yet (not testable both ways)"
    added, removed = effects
    if added == removed == NOT_BEYOND_NOISE:
        return (
            "in the training loss, neither adding it to vanilla nor removing it from llama moves best val beyond noise"
        )
    unclear = "does not move best val beyond noise"
    adding = {HELPS: "lowers best val beyond noise", HURTS: "raises best val beyond noise"}.get(added, unclear)
    removing = {HELPS: "raises best val beyond noise", HURTS: "lowers best val beyond noise"}.get(removed, unclear)
    return (
        f"in the training loss, adding it to vanilla {adding} and removing it from llama {removing} "
        f"({EFFECT_SUMMARY[effects]})"
    )


def exams_section(data: Results) -> str:
    """One row per part: the training loss's verdict beside the exam made for it."""
    shown = exam_rows(data)
    family = ablation_family(data)
    rows = [
        [
            PART_NAMES[part],
            training_loss_text(data, part, family),
            f"{PART_EXAMS[part][1]} (`exam {PART_EXAMS[part][0]}`)",
            shown[part][0],
        ]
        for part in PARTS
    ]
    table = md_table(
        ["part", "what the training loss says (Δ best val)", "the exam made for it", "what the exam shows"], rows
    )
    sentences = []
    for part in PARTS:
        finding = shown[part][1] or f"its exam ({PART_EXAMS[part][0]}) is not measured yet"
        sentences.append(f"**{PART_NAMES[part]}**: {training_loss_verdict(data, part, family)}; {finding}.")
    return (
        f"{table}\n\nΔ best val: the ablation's mean minus its baseline's (negative: lower loss), with its 95% "
        "interval, judged with the ablation table's other comparisons. " + " ".join(sentences)
    )


# ---------------------------------------------------------------------------------------------
# Figures: anatomy/report/charts.py's, which the dashboard shows too, saved as PNG (Altair saves through
# vl-convert)


def figure_charts(everything: Results) -> dict[str, Any]:
    """The figures the data allow, as Altair charts by name (the grid's, then the studies')."""
    from anatomy.report import charts  # Altair: imported only when figures are drawn, so the text needs none

    data = only_runs_of(everything, None)

    drawn: dict[str, Any] = {}
    lr_drawn = lr_points(everything)
    if not lr_drawn.empty:
        drawn["lr"] = charts.lr_chart(lr_drawn).properties(width=680)
    scale_points = best_val_by_size(scale_data(everything))
    if not scale_points.empty:
        drawn["scale"] = charts.best_val_by_size_chart(scale_points).properties(width=680)
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
    "scale": N_("Best val against training-set size, poems (band: min to max over seeds; each seed a point)"),
    "lr": N_(
        "Best val against learning rate (band: min to max over seeds; ringed: each model's best lr; cross: a run "
        "diverged)"
    ),
}


# ---------------------------------------------------------------------------------------------
# The report


def figure_link(name: str, figure_names: list[str], image_prefix: str) -> str:
    """A drawn figure as Markdown after a blank line; nothing where it was not drawn."""
    return f"\n\n![{_(FIGURE_TITLES[name])}]({image_prefix}{name}.png)" if name in figure_names else ""


def render(everything: Results, figure_names: list[str], image_prefix: str = "", costs: bool = True) -> str:
    """The report's Markdown body (### sections); figures are linked as image_prefix + name.png.
    The grid's sections read the grid's runs only; each study has a section of its own."""
    data = only_runs_of(everything, None)

    def figure(name: str) -> str:
        return figure_link(name, figure_names, image_prefix)

    n_grid = int((data.runs["status"] != "running").sum())
    n_studies = int((everything.runs["status"] != "running").sum()) - n_grid
    grid = (data.provenance or {}).get("grid", {})
    lines = [
        f"Made by `python -m anatomy report` from {n_grid + n_studies} finished runs: the grid's {n_grid} "
        f"({', '.join(sorted(data.runs['experiment'].unique()))}) and {n_studies} of the studies beside it"
        + (
            f", trained on {', '.join(grid['devices'])} with torch {', '.join(grid['torch_versions'])}."
            if grid.get("devices")
            else "."
        ),
        "Val loss is in nats per character; lower is better. Seeds are listed as 42 / 7.",
        "",
        "### Headline: the 2017 Transformer vs the mini-LLaMA",
        "",
        headline_section(data) + figure("headline") + figure("overfitting"),
        "",
        "### The chapter's claims, measured",
        "",
        claims_section(data),
        "",
        "### Which part earned the gain (ablations)",
        "",
        ablation_section(data) + figure("ablations"),
        "",
        "### Break tests",
        "",
        break_section(data) + figure("depth") + figure("breaks"),
        "",
        "### Which part wins where",
        "",
        exams_section(data) + figure("length") + figure("stability"),
        "",
        "### The overfitting turn of every experiment",
        "",
        overfitting_section(data),
        "",
        "### How much of the samples is memorised",
        "",
        memorisation_section(data),
    ]
    if scale := scale_section(everything):
        lines += ["", f"### {STUDY_GROUPS['scale']}", "", scale + figure("scale")]
        study = scale_data(everything)
        if (largest := largest_as_headline(study)) is not None:
            lines += ["", "Which part earned the gap at the largest size (stage 2):", ""]
            lines += [which_part_earns(study), "", ablation_section(largest)]
    if lr := lr_section(everything):
        lines += ["", f"### {STUDY_GROUPS['lr']}", "", lr + figure("lr")]
    if precision := precision_section(everything):
        lines += ["", f"### {STUDY_GROUPS['precision']}", "", precision]
    if costs and costs_section(everything):
        lines += ["", "### What the runs cost", "", costs_section(everything)]
    return "\n".join(lines) + "\n"


def headline_block(everything: Results, figure_names: list[str], image_prefix: str) -> str:
    """The README's headline: the two models, the headline claims' verdicts, and the scale
    study's answer once it has one (the full report holds the rest)."""
    data = only_runs_of(everything, None)
    verdicts = md_table(
        [_("the chapter says"), _("chapter's figure"), _("measured here"), _("verdict")],
        [[c.claim, c.chapter, c.measured, c.verdict] for c in claims(data)[:HEADLINE_CLAIMS]],
    )
    parts = [
        _("Val loss in nats per character on the default corpus, seeds 42 / 7."),
        headline_section(data) + figure_link("headline", figure_names, image_prefix),
        verdicts,
    ]
    if answer := scale_answer(everything):
        study = scale_data(everything)
        stages = [which_part_earns(study), better_lr_answer(study)]
        answer = joined_sentences([answer, *filter(None, stages)])
        study = STUDY_GROUPS["scale"]  # the study's question, translated where it is marked
        parts.append(_("**{study}** {answer} ([docs/scale.md](docs/scale.md))").format(study=_(study), answer=answer))
    if answer := lr_answer(everything):
        study = STUDY_GROUPS["lr"]
        parts.append(_("**{study}** {answer} ([docs/lr.md](docs/lr.md))").format(study=_(study), answer=answer))
    return "\n\n".join(parts) + "\n"


def readme_blocks(data: Results, figure_names: list[str], image_prefix: str, language: str = ENGLISH) -> dict[str, str]:
    """The README's generated sections by name (README_BLOCKS). A translated README carries the
    headline only, in its language; the costs table stays in the English one."""
    with speaking(language):
        headline = headline_block(data, figure_names, image_prefix)
    if language != ENGLISH:
        return {"headline": headline}
    costs = costs_section(data) or "No shipped run records its wall time yet."
    return {"headline": headline, "costs": costs + "\n"}


def readme_language(path: Path) -> str:
    """README.md is English; README.zh-CN.md is zh_CN (the names GitHub shows side by side)."""
    parts = path.name.split(".")
    if len(parts) == 2 and parts[1] == "md":
        return ENGLISH
    code = parts[1].replace("-", "_") if len(parts) == 3 and parts[2] == "md" else None
    if code not in LANGUAGES:
        raise AnatomyError(
            f"--readme {path}: expected README.md, or README.LANGUAGE.md with LANGUAGE one of "
            + ", ".join(code.replace("_", "-") for code in LANGUAGES if code != ENGLISH)
        )
    return code


def markers(name: str) -> tuple[str, str]:
    return f"<!-- report:{name}:start -->", f"<!-- report:{name}:end -->"


def splice_readme(readme: str, blocks: dict[str, str], path: Path) -> str:
    """The README with the text between each block's markers replaced by that block."""
    for name, body in blocks.items():
        start, end = markers(name)
        if readme.count(start) != 1 or readme.count(end) != 1 or readme.index(start) > readme.index(end):
            raise AnatomyError(
                f"{path}: expected one '{start}' line, then one '{end}' line, "
                f"around the section `anatomy report` writes"
            )
        head, rest = readme.split(start)
        _, tail = rest.split(end)
        readme = f"{head}{start}\n{body}{end}{tail}"
    return readme


def readme_block(readme: str, name: str) -> str:
    """The text between a block's markers, as splice_readme wrote it."""
    start, end = markers(name)
    return readme.split(start, 1)[1].split(end, 1)[0].removeprefix("\n")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--db", type=Path, help="a results database (default: results/anatomy.duckdb)")
    source.add_argument(
        "--runs",
        type=Path,
        help="a folder of run folders to collect first, e.g. results/reference/runs "
        "(with the benchmarks/ and exams/ folders beside it, if any)",
    )
    parser.add_argument(
        "--provenance",
        type=Path,
        default=None,
        help="grid.json of shipped runs, for the costs section (default: the one beside --runs, if any)",
    )
    parser.add_argument("--out", type=Path, default=Path("results/report"), help="folder for report.md and the PNGs")
    parser.add_argument(
        "--readme",
        type=Path,
        nargs="+",
        default=None,
        help="also rewrite these READMEs' generated sections (between their marker lines): README.md's "
        "headline and costs, a translated README.LANGUAGE.md's headline in its language",
    )
    parser.add_argument("--no-figures", action="store_true", help="skip the PNG figures")


def run(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.out.is_dir():
        raise AnatomyError(f"--out {args.out} is a file: expected a folder for report.md and the figures")
    if args.readme is not None and args.no_figures:
        raise AnatomyError("--readme with --no-figures would drop the README's figures: give one or the other")
    languages = {}  # every README checked before any file is written
    for readme in args.readme or []:
        languages[readme] = readme_language(readme)
        if not readme.is_file():
            raise AnatomyError(f"--readme {readme}: no such file")
    if args.runs is not None:
        provenance = read_provenance(args.provenance or args.runs.parent / "grid.json")
        data = load_runs(args.runs, provenance)
    else:
        data = load(args.db or Path("results/anatomy.duckdb"), read_provenance(args.provenance))
    with writing_into(args.out):  # one report writer at a time: what a killed one left can go
        for path in [args.out / "report.md", *(args.out / f"{name}.png" for name in FIGURE_TITLES)]:
            remove_stale_temporaries(path)
        names = [] if args.no_figures else save_figures(figure_charts(data), args.out)
        write_text(args.out / "report.md", "# Results\n\n" + render(data, names))
    print(f"report: {args.out / 'report.md'} ({len(data.runs)} runs, {len(names)} figures)")
    spliced = {}  # every README's new text first: one without its markers changes none of them
    for readme, language in languages.items():
        prefix = Path(os.path.relpath(args.out.resolve(), readme.resolve().parent)).as_posix()
        blocks = readme_blocks(data, names, prefix + "/", language)
        spliced[readme] = (splice_readme(readme.read_text(encoding="utf-8"), blocks, readme), list(blocks))
    for readme, (text, blocks) in spliced.items():
        write_text(readme, text)
        print(f"report: the {' and '.join(blocks)} section(s) of {readme} rewritten")
    return 0
