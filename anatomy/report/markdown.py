"""The results report: `python -m anatomy report`.

Reads a results database (or collects a folder of runs into a temporary one) and writes
`report.md` with the experiment's tables (grid_sections.py), the chapter's claims each next to
our measurement with a verdict (`anatomy/report/claims.py`), each part's training loss beside the
exam made for it (exams_section.py: which part wins where), the studies' sections, what the runs
cost (costs_section.py), and PNG figures drawn by the same Altair charts as the dashboard
(figures.py). `--readme README.md README.zh-CN.md` also rewrites the READMEs' generated sections
(readme.py) from the same data, each in its file's language, so the README's numbers are never
typed by hand; tests/test_report.py holds them together. This module puts the sections in order
and is the command.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from anatomy.errors import AnatomyError
from anatomy.language import _
from anatomy.files.atomic import remove_stale_temporaries, write_text, writing_into
from anatomy.report.costs_section import costs_section, read_provenance
from anatomy.report.exams_section import exams_section
from anatomy.report.findings import FOUND, findings_block
from anatomy.report.figures import FIGURE_TITLES, figure_charts, figure_link, save_figures
from anatomy.report.grid_sections import (
    ablation_section,
    break_section,
    claims_section,
    headline_section,
    memorisation_section,
    overfitting_section,
)
from anatomy.report.protocol import protocol_of, protocol_text
from anatomy.report.readme import readme_blocks, readme_language, splice_readme
from anatomy.report.roles import only_runs_of
from anatomy.report.still_to_train import still_to_train
from anatomy.report.study_section import LR_BY_PARAMS, by_text_size, figure_caption, per_setup, study_section
from anatomy.results.studies import declared
from anatomy.results.collect import load_runs
from anatomy.results.reader import Results, load


def render(everything: Results, figure_names: list[str], image_prefix: str = "", costs: bool = True) -> str:
    """The report's Markdown body (### sections); figures are linked as image_prefix + name.png.
    The grid's sections read the grid's runs only; each study has a section of its own."""
    data = only_runs_of(everything, None)

    def figure(name: str, caption: str | None = None) -> str:
        return figure_link(name, figure_names, image_prefix, caption)

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
    ]
    if found := findings_block(everything):
        lines += ["", f"### {_(FOUND)}", "", found]
    lines += [
        "",
        protocol_text(protocol_of(data)),
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
    for study in declared().values():  # in workflow/studies.yaml's order
        lines += study_lines(everything, study.name, figure)
    if costs and costs_section(everything):
        lines += ["", "### What the runs cost", "", costs_section(everything)]
    return "\n".join(lines) + "\n"


def study_lines(everything: Results, name: str, figure) -> list[str]:
    """A study's section under its question, if it has runs, rendered from its declaration, and
    then the runs it still waits for."""
    study = declared()[name]
    if not (everything.runs["group"] == name).any():
        return []
    text = study_section(everything, study, figure)
    if text and study.compare == "models" and not per_setup(study):  # the others link theirs in their text
        text += figure(name, figure_caption(everything, study))
        if not by_text_size(study):
            text += figure(f"{name}_lr", _(LR_BY_PARAMS))
    said = [part for part in (text, still_to_train(everything, study)) if part]
    return ["", f"### {study.question}", "", "\n\n".join(said)] if said else []


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
    drawn = {} if args.no_figures else figure_charts(data)
    with writing_into(args.out):  # one report writer at a time: what a killed one left can go
        for path in [args.out / "report.md", *(args.out / f"{name}.png" for name in [*FIGURE_TITLES, *drawn])]:
            remove_stale_temporaries(path)
        names = save_figures(drawn, args.out)
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
