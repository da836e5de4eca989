"""The results report: `python -m anatomy report`.

Reads a results database (or collects a folder of runs into a temporary one) and writes
`report.md` with the experiment's tables, the chapter's claims each next to our measurement
with a verdict (`anatomy/claims.py`), and PNG figures drawn by the same Altair charts as the
dashboard. `--readme README.md` also rewrites the README's generated sections (README_BLOCKS,
between their marker lines) from the same data, so the README's numbers are never typed by
hand; tests/test_report.py holds the two together.
"""

from __future__ import annotations

import argparse
import datetime as dt
import math
import os
from pathlib import Path
from typing import Any

import pandas as pd

from anatomy.atomic import atomic_path, write_text
from anatomy.claims import MEMORISING_RISE, claims
from anatomy.errors import AnatomyError
from anatomy.report_data import (
    ReportData,
    deep_runs,
    delta_text,
    fmt,
    headline_noise,
    headline_of,
    load,
    load_runs,
    md_table,
    paired_deltas,
    per_seed,
    read_provenance,
    seeds_of,
)

# The README sections this report writes, each between `<!-- report:NAME:start -->` and
# `<!-- report:NAME:end -->` lines: the results, and the wall time of each target.
README_BLOCKS = ("results", "costs")
# the chapter's own figures, quoted beside ours (its blog corpus: vocabulary 1,719)
CHAPTER = {
    "vanilla_best": (3.706, 3.705), "vanilla_step": 1100,
    "llama_best": (3.599, 3.612), "llama_step": 500,
    "llama_final_val": 5.083, "llama_final_train": 0.33,
}
TARGETS = {"headline": "headline", "ablation": "ablations", "break": "break_tests"}


# ---------------------------------------------------------------------------------------------
# The sections


def beyond_noise(deltas: pd.Series, noise: float) -> str:
    """Whether every seed's difference lies outside the baselines' seed spread, on one side."""
    if len(deltas) < 2 or math.isnan(noise):
        return "needs 2 seeds"
    if (deltas > noise).all() or (deltas < -noise).all():
        return "**yes**"
    return "no"


def headline_section(data: ReportData) -> str:
    rows = []
    for model, name in (("vanilla", "vanilla (2017)"), ("llama", "mini-LLaMA")):
        runs = headline_of(data, model)
        if runs.empty:
            rows.append([name, "not run yet", "", "", "", "", ""])
            continue
        rows.append([name, seeds_of(runs), f"{int(runs['params'].max()):,}" if runs["params"].notna().any() else "–",
                     per_seed(runs, "best_val_loss"), per_seed(runs, "best_step"),
                     per_seed(runs, "final_val_loss"), per_seed(runs, "final_train_loss")])
    rows.append(["chapter: vanilla", "42 / 7", "1,244,928", " / ".join(map(str, CHAPTER["vanilla_best"])),
                 str(CHAPTER["vanilla_step"]), "", ""])
    rows.append(["chapter: mini-LLaMA", "42 / 7", "1,178,496", " / ".join(map(str, CHAPTER["llama_best"])),
                 str(CHAPTER["llama_step"]), str(CHAPTER["llama_final_val"]), str(CHAPTER["llama_final_train"])])
    return md_table(["model", "seeds", "params", "best val", "at step", "final val", "final train"], rows)


def ablation_section(data: ReportData) -> str:
    if data.ablations.empty:
        return "No ablation runs yet: `snakemake --cores 1 ablations` trains them."
    noise = headline_noise(data)
    rows = []
    for part in sorted(data.ablations["part"].unique()):
        cells = [part]
        for direction in ("add", "remove"):
            match = data.ablations[(data.ablations["part"] == part) & (data.ablations["direction"] == direction)]
            if match.empty:
                cells += ["not run yet", ""]
                continue
            entry = match.iloc[0]
            mine = data.runs[data.runs["experiment"] == entry["experiment"]]
            base = data.runs[data.runs["experiment"] == entry["baseline"]]
            deltas = paired_deltas(mine, base)
            cells += [delta_text(deltas), beyond_noise(deltas, noise)]
        rows.append(cells)
    table = md_table(["part", "Δ best val, added to vanilla", "beyond seed noise?",
                      "Δ best val, removed from llama", "beyond seed noise?"], rows)
    return (f"{table}\n\nΔ is the experiment's best val minus its baseline's, seed by seed (mean, then the range "
            f"over seeds): negative means lower loss. Seed noise is the largest spread of the headline models' best val over "
            f"seeds, {fmt(noise)} nats; a part beyond it moves every seed further than the seed alone does.")


def break_section(data: ReportData) -> str:
    breaks = data.runs[data.runs["group"] == "break"]
    if breaks.empty:
        return "No break-test runs yet: `snakemake --cores 1 break_tests` trains them."
    llama = headline_of(data, "llama")
    rows = []
    for experiment, runs in breaks.groupby("experiment", sort=False):
        diverged = runs[runs["diverged"]].sort_values("seed", ascending=False)
        broke = "no" if diverged.empty else ", ".join(
            f"seed {int(r.seed)} at step {int(r.diverged_step)}" if pd.notna(r.diverged_step) else f"seed {int(r.seed)}"
            for r in diverged.itertuples())
        rows.append([f"`{experiment}`", str(runs["description"].iloc[0] or ""), seeds_of(runs), broke,
                     per_seed(runs, "best_val_loss"), per_seed(runs, "best_step"),
                     delta_text(paired_deltas(runs, llama))])
    return md_table(["experiment", "what it does", "seeds", "diverged", "best val", "at step", "Δ vs mini-LLaMA"], rows)


def memorisation_section(data: ReportData) -> str:
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
            cells += [f"{int(sample['step'])}", f"{sample['copied_fraction']:.1%} ({sample['val_copied_fraction']:.1%}), "
                      f"longest {int(sample['longest_copy'])}"]
        rows.append(cells)
    if not rows:
        return "No measured samples yet: `python -m anatomy memorised RUN_DIR` measures a run's samples."
    min_chars = int(data.memorisation["copy_min_chars"].iloc[0])
    return (md_table(["run", "best: step", "best: copied (val control), longest span",
                      "last: step", "last: copied (val control), longest span"], rows)
            + f"\n\nCopied: the share of generated characters (the prefix excluded) inside a span of {min_chars} or "
              "more characters found verbatim in the training split; in brackets, the same against the validation "
              "split, which the model never saw (phrases the language itself repeats).")


def overfitting_section(data: ReportData) -> str:
    rows = []
    for experiment, runs in data.runs.groupby("experiment", sort=True):
        finite = runs[runs["best_val_loss"].notna()]
        if finite.empty:
            continue
        rows.append([f"`{experiment}`", seeds_of(finite), per_seed(finite, "best_step"),
                     per_seed(finite, "best_val_loss"), per_seed(finite, "val_rise"),
                     per_seed(finite, "final_train_loss"), per_seed(finite, "train_val_gap")])
    return md_table(["experiment", "seeds", "val bottoms out at step", "best val", "val rise after it",
                     "final train", "final val - train"], rows)


def claims_section(data: ReportData) -> str:
    return md_table(["the chapter says", "chapter's figure", "measured here", "verdict"],
                    [[c.claim, c.chapter, c.measured, c.verdict] for c in claims(data)])


def wall_clock_hours(entries: list[dict[str, Any]]) -> float:
    """From the first job's start to the last job's end (each start is its end minus its length)."""
    ends = [dt.datetime.fromisoformat(entry["finished_utc"].replace("Z", "+00:00")) for entry in entries]
    starts = [end - dt.timedelta(seconds=entry["job_s"] or entry["train_s"] or 0.0) for end, entry in zip(ends, entries)]
    return (max(ends) - min(starts)).total_seconds() / 3600


def costs_section(data: ReportData) -> str:
    """Time per target, from the shipped runs' records (grid.json)."""
    if not data.provenance:
        return ""
    records = data.provenance.get("runs", {})
    rows = []
    groups = data.runs.set_index("run_id")["group"].to_dict()
    for group, target in TARGETS.items():
        mine = [entry for run_id, entry in records.items() if groups.get(run_id) == group]
        jobs = [entry["job_s"] or entry["train_s"] or 0.0 for entry in mine]
        if not jobs:
            rows.append([f"`{target}`", "0", "–", "–", "–"])
            continue
        rows.append([f"`{target}`", str(len(jobs)), f"{sum(jobs) / len(jobs) / 60:.1f}",
                     f"{sum(jobs) / 3600:.2f}", f"{wall_clock_hours(mine):.2f}"])
    grid = data.provenance.get("grid", {})
    return (md_table(["target", "runs shipped", "minutes per run", "run-hours in all", "wall-clock hours"], rows)
            + f"\n\nOn {', '.join(grid.get('machines', [])) or 'an unrecorded machine'} "
              f"({', '.join(grid.get('devices', []))}, torch {', '.join(grid.get('torch_versions', []))}), "
              f"runs finished {grid.get('first_finished_utc', '?')[:10]} to {grid.get('last_finished_utc', '?')[:10]}. "
              "Minutes per run: Snakemake's benchmark of each training job (compile, training, evaluations, "
              "checkpoints). Wall-clock: from the first of the target's jobs to start to the last to end, so far.")


# ---------------------------------------------------------------------------------------------
# Figures: the dashboard's own charts, saved as PNG (Altair saves through vl-convert)


def figure_charts(data: ReportData) -> dict[str, Any]:
    """The figures the data allow, as Altair charts by name."""
    from dashboard import analysis, charts  # Altair, only when figures are wanted

    drawn: dict[str, Any] = {}
    headline = data.metrics[data.metrics["run_id"].isin(data.runs.loc[data.runs["group"] == "headline", "run_id"])]
    if not headline.empty:
        drawn["headline"] = charts.seed_band_chart(analysis.seed_band(headline),
                                                   analysis.long_curves(headline, splits=("val_loss",)),
                                                   analysis.best_points(headline)).properties(width=760)
    llama = headline_of(data, "llama").sort_values("seed", ascending=False)
    if not llama.empty:
        run = data.metrics[data.metrics["run_id"] == llama["run_id"].iloc[0]].sort_values("step")
        table = analysis.overfitting_table(run, margin=MEMORISING_RISE)
        if not table.empty:
            drawn["overfitting"] = charts.overfitting_chart(run, table.iloc[0], MEMORISING_RISE).properties(
                width=760, title=f"{run['label'].iloc[0]}: the overfitting turn")
    if not data.ablations.empty:
        drawn["ablations"] = charts.benefit_chart(
            analysis.part_benefit(data.ablations), headline_noise(data)
        ).properties(width=680)
    deep = pd.concat([deep_runs(data, "post"), deep_runs(data, "pre")])
    if not deep.empty:
        metrics = data.metrics[data.metrics["run_id"].isin(deep["run_id"])]
        drawn["depth"] = charts.loss_curves(analysis.long_curves(metrics)).properties(width=760)
    breaks = data.runs[data.runs["group"] == "break"]
    llama_name = headline_of(data, "llama")["experiment"]
    if not breaks.empty and not llama_name.empty:
        deltas = analysis.versus_reference(data.runs, list(dict.fromkeys(breaks["experiment"])), llama_name.iloc[0])
        if not deltas.empty:
            drawn["breaks"] = charts.delta_chart(deltas, llama_name.iloc[0]).properties(width=680)
    return drawn


def save_figures(charts: dict[str, Any], out_dir: Path) -> list[str]:
    """Each chart as out_dir/NAME.png, written atomically; returns the names."""
    for name, chart in charts.items():
        with atomic_path(out_dir / f"{name}.png") as tmp:
            chart.save(str(tmp), format="png", scale_factor=1.5)
    return list(charts)


FIGURE_TITLES = {
    "headline": "Val loss, vanilla vs mini-LLaMA (band: min to max over seeds; ◆ best val)",
    "overfitting": "The overfitting turn of the mini-LLaMA",
    "ablations": "Each part's gain in best val, added to vanilla and removed from the mini-LLaMA",
    "depth": "12 layers without warmup: post-norm vs pre-norm",
    "breaks": "Break tests: best val minus the mini-LLaMA's",
}


# ---------------------------------------------------------------------------------------------
# The report


def render(data: ReportData, figure_names: list[str], image_prefix: str = "", costs: bool = True) -> str:
    """The report's Markdown body (### sections); figures are linked as image_prefix + name.png."""
    def figure(name: str) -> str:
        return f"\n\n![{FIGURE_TITLES[name]}]({image_prefix}{name}.png)" if name in figure_names else ""

    n_done = int((data.runs["status"] != "running").sum())
    grid = (data.provenance or {}).get("grid", {})
    lines = [
        f"Made by `python -m anatomy report` from {n_done} finished runs "
        f"({', '.join(sorted(data.runs['experiment'].unique()))})"
        + (f", trained on {', '.join(grid['devices'])} with torch {', '.join(grid['torch_versions'])}."
           if grid.get("devices") else "."),
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
        "### The overfitting turn of every experiment",
        "",
        overfitting_section(data),
        "",
        "### How much of the samples is memorised",
        "",
        memorisation_section(data),
    ]
    if costs and costs_section(data):
        lines += ["", "### What the runs cost", "", costs_section(data)]
    return "\n".join(lines) + "\n"


def readme_blocks(data: ReportData, figure_names: list[str], image_prefix: str) -> dict[str, str]:
    """The README's generated sections by name (README_BLOCKS)."""
    costs = costs_section(data) or "No shipped run records its wall time yet."
    return {"results": render(data, figure_names, image_prefix, costs=False), "costs": costs + "\n"}


def markers(name: str) -> tuple[str, str]:
    return f"<!-- report:{name}:start -->", f"<!-- report:{name}:end -->"


def splice_readme(readme: str, blocks: dict[str, str], path: Path) -> str:
    """The README with the text between each block's markers replaced by that block."""
    for name, body in blocks.items():
        start, end = markers(name)
        if readme.count(start) != 1 or readme.count(end) != 1 or readme.index(start) > readme.index(end):
            raise AnatomyError(f"{path}: expected one '{start}' line, then one '{end}' line, "
                               f"around the section `anatomy report` writes")
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
    source.add_argument("--runs", type=Path,
                        help="a folder of run folders to collect first, e.g. results/reference/runs")
    parser.add_argument("--provenance", type=Path, default=None,
                        help="grid.json of shipped runs, for the costs section "
                             "(default: the one beside --runs, if any)")
    parser.add_argument("--out", type=Path, default=Path("results/report"), help="folder for report.md and the PNGs")
    parser.add_argument("--readme", type=Path, default=None,
                        help="also rewrite this README's results and costs sections (between their marker lines)")
    parser.add_argument("--no-figures", action="store_true", help="skip the PNG figures")


def run(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.out.is_dir():
        raise AnatomyError(f"--out {args.out} is a file: expected a folder for report.md and the figures")
    if args.readme is not None and args.no_figures:
        raise AnatomyError("--readme with --no-figures would drop the README's figures: give one or the other")
    if args.runs is not None:
        provenance = read_provenance(args.provenance or args.runs.parent / "grid.json")
        data = load_runs(args.runs, provenance)
    else:
        data = load(args.db or Path("results/anatomy.duckdb"), read_provenance(args.provenance))
    names = [] if args.no_figures else save_figures(figure_charts(data), args.out)
    write_text(args.out / "report.md", "# Results\n\n" + render(data, names))
    print(f"report: {args.out / 'report.md'} ({len(data.runs)} runs, {len(names)} figures)")
    if args.readme is not None:
        if not args.readme.is_file():
            raise AnatomyError(f"--readme {args.readme}: no such file")
        prefix = Path(os.path.relpath(args.out.resolve(), args.readme.resolve().parent)).as_posix()
        readme = args.readme.read_text(encoding="utf-8")
        write_text(args.readme, splice_readme(readme, readme_blocks(data, names, prefix + "/"), args.readme))
        print(f"report: the {' and '.join(README_BLOCKS)} sections of {args.readme} rewritten")
    return 0
