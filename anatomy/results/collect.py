"""Collect run folders into the DuckDB database and `results.json`: `python -m anatomy collect`.

This is the only writer of the database. Training jobs each write their own run folder;
this step reads all of them (and Snakemake's benchmark files) and builds a fresh database.
The database is built in a temporary file beside the target and renamed into place, so a
reader (the dashboard) sees the old database or the new one, never half of one. Rebuilding
from scratch every time makes collecting idempotent: rerunning gives the same rows.

What a database is, and how it is opened to be read, is anatomy/results/database.py: the reader
and the dashboard read through it and never import this writer.

Collect is the gate: what no reader could use is refused here, in one line naming the run folder
and the field, before a database holds it. A model that ModelConfig does not accept
(`model_columns`), and an experiment whose seeds read different corpora
(`check_one_corpus_per_experiment`), are refused.

Collect replaces only files it made: a file already at --db must be a DuckDB database with the
tables every version of collect wrote (`database_path_problem`, `not_made_here`), one at --json a
results.json (`not_a_results_json`), so that a mistyped path costs no one's notes or database. A --db or --json that is a symbolic link is written through: the link stays,
and the database it leads to is the one rebuilt (anatomy/files/atomic.py, `file_behind`). Every
file of a run folder is read only if it is a regular file of a sane size (`read_small_file`): a
named pipe or a link to /dev/zero is one line, not a collect that waits or fills the memory.

A run folder with `metrics.jsonl` but no `summary.json` is still training (status
"running"); it is collected with what it has so far, so the dashboard can show a grid in
progress.

Each run's baseline (the experiment it is compared with, seed by seed) is data: a `baseline` tag
in its config.json (`anatomy train --tag baseline=NAME`), else its experiment's entry in the
experiments file: `--experiments`, or else the experiments.json beside the folder of runs (the
workflow writes results/experiments.json from workflow/experiments.yaml; `anatomy reference`
ships it beside the shipped runs). A run declared in neither is compared with nothing, and
collect says which experiments those are (`undeclared_note`): it never guesses one from names.
"""

from __future__ import annotations

import argparse
import csv
import functools
import io
import json
import math
import re
import sys
import tempfile
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import duckdb
import pyarrow as pa

import yaml

from anatomy.training import grad_norms, layer_logs
from anatomy.files.atomic import (
    atomic_path,
    check_file_target,
    file_behind,
    json_text,
    naming_a_full_disk,
    remove_stale_temporaries,
)
from anatomy.config import ModelConfig, TrainConfig, optimizer_recipe
from anatomy.errors import AnatomyError
from anatomy.exams import depth, exam_module, mla, moe, qk_norm
from anatomy.files.locks import held_lock
from anatomy.files.run_folder import check_summary, json_loss, json_number, read_json_file, read_metrics
from anatomy.files.run_folder import find_run_folders, read_small_file
from anatomy.files.run_folder import CONFIG_FILE, SUMMARY_FILE, RunFolder
from anatomy.results.database import SCHEMA_PATH, check_database_path, collect_lock_path, open_read_only
from anatomy.results.reader import Results, load
from anatomy.results.repeats import repeated_trainings, repeats_note, settings_of

# DuckDB type in schema.sql -> Arrow type of the column handed to DuckDB
ARROW_BY_SQL_TYPE = {
    "VARCHAR": pa.string(),
    "JSON": pa.string(),
    "BOOLEAN": pa.bool_(),
    "INTEGER": pa.int64(),
    "BIGINT": pa.int64(),
    "DOUBLE": pa.float64(),
}
# The settings kept as columns of `runs`, so that no reader parses config.json again: every field
# of the model (its vocabulary is the corpus's, data.vocab_size), and the training settings a
# study compares (one model at several learning rates, with or without warmup).
MODEL_COLUMNS = tuple(name for name in ModelConfig.__dataclass_fields__ if name != "vocab_size")
# Snakemake's benchmark header -> our column (only "h:m:s" is not a valid SQL name)
BENCHMARK_HEADER = {"h:m:s": "hms"}


@functools.lru_cache(maxsize=1)
def schema_tables() -> dict[str, list[tuple[str, pa.DataType]]]:
    """Every table of schema.sql -> its columns in order, with their Arrow types: the one list of
    what a table holds (the views are not tables: nothing is inserted into them)."""
    with duckdb.connect(":memory:") as con:
        con.execute(SCHEMA_PATH.read_text(encoding="utf-8"))
        rows = con.execute(
            "SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c "
            "JOIN information_schema.tables t USING (table_name) WHERE t.table_type = 'BASE TABLE' "
            "ORDER BY c.table_name, c.ordinal_position"
        ).fetchall()
    tables: dict[str, list[tuple[str, pa.DataType]]] = {}
    for table, column, sql_type in rows:
        tables.setdefault(table, []).append((column, ARROW_BY_SQL_TYPE[sql_type]))
    return tables


def column_names(table: str) -> list[str]:
    return [name for name, _ in schema_tables()[table]]


RUN_COLUMNS = column_names("runs")
METRIC_COLUMNS = column_names("metrics")
SAMPLE_COLUMNS = column_names("samples")
BENCHMARK_COLUMNS = column_names("benchmarks")
ARROW_TYPES = {name: arrow for columns in schema_tables().values() for name, arrow in columns}


@dataclass
class CollectedRuns:
    """Everything read from the run folders, as rows ready for the database."""

    runs: list[dict[str, Any]] = field(default_factory=list)
    metrics: list[dict[str, Any]] = field(default_factory=list)
    samples: list[dict[str, Any]] = field(default_factory=list)
    benchmarks: list[dict[str, Any]] = field(default_factory=list)
    exams: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # exam table -> rows
    experiments_path: Path | None = None  # the experiments file the baselines came from, if any
    undeclared: list[str] = field(default_factory=list)  # experiments no tag or file gives a baseline
    repeats: dict[str, str] = field(default_factory=dict)  # run left out -> the run of its training kept
    declared: list[dict[str, Any]] = field(default_factory=list)  # the experiments file's runs, trained or not

    def add_exam_rows(self, table: str, rows: list[dict[str, Any]]) -> None:
        self.exams.setdefault(table, []).extend(rows)


# ---------------------------------------------------------------------------------------------
# Reading run folders


def _seed_of(folder: Path, config: dict[str, Any]) -> int | None:
    train = config.get("train") if isinstance(config.get("train"), dict) else {}
    if isinstance(train.get("seed"), int):
        return train["seed"]
    match = re.fullmatch(r"seed(\d+)", folder.name)
    return int(match.group(1)) if match else None


def corpus_columns(config: dict[str, Any], path: Path) -> dict[str, Any]:
    """Which text the run read, from config.json's data section (None where it says nothing)."""
    data = config.get("data") if isinstance(config.get("data"), dict) else {}
    columns = {}
    for column, key in (("corpus", "corpus"), ("corpus_digest", "digest")):
        if data.get(key) is not None and not isinstance(data[key], str):
            raise AnatomyError(f"{path}: field 'data.{key}' must be a string or null, got {data[key]!r}")
        columns[column] = data.get(key)
    for name in ("vocab_size", "train_tokens", "val_tokens"):
        columns[name] = json_number(data.get(name), path, f"data.{name}", int)
    return columns


def model_columns(config: dict[str, Any], path: Path) -> dict[str, Any]:
    """The run's MODEL_COLUMNS, its lr, schedule, warmup_steps and optimizer recipe; a setting its config.json leaves
    out is the default of ModelConfig or TrainConfig. The model must be one ModelConfig accepts (n_head
    dividing d_model, ...): collect is the gate, so that no reader meets a model it cannot build.
    A key ModelConfig does not know (a setting a later version dropped) is no setting of it."""
    model = config.get("model") if isinstance(config.get("model"), dict) else {}
    known = {name: value for name, value in model.items() if name in ModelConfig.__dataclass_fields__}
    try:
        cfg = ModelConfig.from_dict(known)
    except AnatomyError as err:
        raise AnatomyError(
            f"{path}: field 'model' holds a model no reader can build ({err}); train the run again "
            "with valid settings, or move its folder out of --runs"
        ) from None
    train = config.get("train") if isinstance(config.get("train"), dict) else {}
    schedule = train.get("schedule", TrainConfig.schedule)
    if not isinstance(schedule, str):
        raise AnatomyError(f"{path}: field 'train.schedule' must be a string, got {schedule!r}")
    return {
        **{name: getattr(cfg, name) for name in MODEL_COLUMNS},
        "lr": json_number(train.get("lr", TrainConfig.lr), path, "train.lr"),
        "schedule": schedule,
        "warmup_steps": json_number(
            train.get("warmup_steps", TrainConfig.warmup_steps), path, "train.warmup_steps", int
        ),
        "optimizer": optimizer_recipe(
            *(train_number(train, name, path) for name in ("beta2", "weight_decay")),
            train.get("decay_matrices_only") is True,
            train_number(train, "grad_clip", path),
        ),
    }


def train_number(train: dict[str, Any], name: str, path: Path) -> float:
    """A number of config.json's train settings; TrainConfig's default where a run from before it
    was a setting leaves it out."""
    value = json_number(train.get(name), path, f"train.{name}")
    return getattr(TrainConfig, name) if value is None else value


# what `anatomy generate` records of every sample (`note` too, but records from before it lack it)
SAMPLE_FIELDS = ("checkpoint", "prefix", "temperature", "seed", "chars", "text")


def read_samples(path: Path, run_id: str) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    records = read_json_file(path, "the samples anatomy generate writes")
    if not isinstance(records, list):
        raise AnatomyError(f"{path}: expected a list of samples, got {type(records).__name__}")
    rows = []
    for idx, record in enumerate(records):
        if not isinstance(record, dict):
            raise AnatomyError(f"{path}: sample {idx} must be an object, got {record!r}")
        if missing := [name for name in SAMPLE_FIELDS if name not in record]:
            raise AnatomyError(
                f"{path}: sample {idx} lacks {', '.join(repr(name) for name in missing)} "
                f"(anatomy generate records {', '.join(SAMPLE_FIELDS)})"
            )
        # text is null when there was nothing to sample from (a diverged run); `note` says why
        text = record["text"]
        if not isinstance(text, (str, type(None))):
            raise AnatomyError(f"{path}: sample {idx}: 'text' must be a string or null, got {text!r}")
        if record["checkpoint"] not in ("best", "last") and not (record["checkpoint"] is None and text is None):
            raise AnatomyError(
                f"{path}: sample {idx}: 'checkpoint' must be 'best' or 'last' (null only for a sample "
                f"without text), got {record['checkpoint']!r}"
            )
        if not isinstance(record["prefix"], str):
            raise AnatomyError(f"{path}: sample {idx}: 'prefix' must be a string, got {record['prefix']!r}")
        rows.append(
            {
                "run_id": run_id,
                "sample_idx": idx,
                "checkpoint": record["checkpoint"],
                "prefix": record["prefix"],
                "temperature": _required(record["temperature"], path, f"temperature (sample {idx})"),
                "seed": _required(record["seed"], path, f"seed (sample {idx})", int),
                "chars": _required(record["chars"], path, f"chars (sample {idx})", int),
                "text": text,
                "note": None if record.get("note") is None else str(record["note"]),
                **memorisation_columns(record.get("memorisation"), text or "", path, idx),
            }
        )
    return rows


def _required(value: Any, path: Path, name: str, kind: type = float) -> Any:
    """A number that must be there (`json_number` lets null through)."""
    if value is None:
        raise AnatomyError(f"{path}: field '{name}' must be a number, got null")
    return json_number(value, path, name, kind)


def memorisation_columns(figures: Any, text: str, path: Path, idx: int) -> dict[str, Any]:
    """A sample's memorisation figures (anatomy/generation/memorisation.py) as columns; NULL if not measured."""
    if figures is None:
        return {}
    if not isinstance(figures, dict):
        raise AnatomyError(f"{path}: sample {idx}: 'memorisation' must be an object, got {figures!r}")
    source = figures.get("longest_copy_source") or {}
    if not isinstance(source, dict):
        raise AnatomyError(
            f"{path}: sample {idx}: 'memorisation.longest_copy_source' must be an object, got {source!r}"
        )
    where = f"memorisation of sample {idx}"
    columns = {
        "copy_min_chars": _required(figures.get("min_chars"), path, f"min_chars ({where})", int),
        "copied_fraction": _required(figures.get("copied_fraction"), path, f"copied_fraction ({where})"),
        "val_copied_fraction": _required(figures.get("val_copied_fraction"), path, f"val_copied_fraction ({where})"),
        "longest_copy": _required(figures.get("longest_copy"), path, f"longest_copy ({where})", int),
        "longest_copy_text": figures.get("longest_copy_text"),
        "longest_copy_post": source.get("post"),
        "longest_copy_line": json_number(source.get("line"), path, f"longest_copy_source.line ({where})", int),
        "copied_spans": json.dumps(copied_spans(figures.get("copied_spans"), text, path, idx)),
    }
    if columns["longest_copy"] and not (isinstance(source.get("post"), str) and columns["longest_copy_line"]):
        raise AnatomyError(
            f"{path}: sample {idx}: a longest copy of {columns['longest_copy']} characters needs "
            f"'memorisation.longest_copy_source' with its post and line, got {figures.get('longest_copy_source')!r}"
        )
    return columns


def copied_spans(spans: Any, text: str, path: Path, idx: int) -> list[list]:
    """The copied spans as the Samples page marks them: [start, length, post, line] each, inside
    the sample's text (a span outside it would mark nothing, or the wrong characters)."""
    spans = [] if spans is None else spans
    if not isinstance(spans, list):
        raise AnatomyError(f"{path}: sample {idx}: 'memorisation.copied_spans' must be a list, got {spans!r}")
    for n, span in enumerate(spans):
        if not (
            isinstance(span, list)
            and len(span) == 4
            and all(isinstance(span[i], int) and not isinstance(span[i], bool) for i in (0, 1, 3))
            and isinstance(span[2], str)
            and span[0] >= 0
            and span[1] > 0
            and span[0] + span[1] <= len(text)
        ):
            raise AnatomyError(
                f"{path}: sample {idx}: 'memorisation.copied_spans' item {n} must be [start, length, post, "
                f"line], a span inside the text ({len(text)} characters), got {span!r}"
            )
    return spans


def read_run(folder: Path, runs_root: Path) -> tuple[dict[str, Any], list, list]:
    """One run folder -> (runs row, metrics rows, samples rows)."""
    files = RunFolder(folder)
    config_path = files.config
    if not config_path.exists():  # a named pipe there is said by the reader, as such
        raise AnatomyError(
            f"{folder}: {SUMMARY_FILE} but no {CONFIG_FILE}, so its settings are unknown; train it again with "
            f"the same settings ({CONFIG_FILE} is written back from {files.last.name}) or delete the folder"
        )
    config = read_json_file(config_path, "a run's settings, written by anatomy train")
    if not isinstance(config, dict):
        raise AnatomyError(f"{config_path}: expected a JSON object with model, train and tags")
    tags = config.get("tags") or {}
    if not isinstance(tags, dict):
        raise AnatomyError(f"{config_path}: 'tags' must be an object of key: value, got {tags!r}")
    run_id = folder.relative_to(runs_root).as_posix()

    summary_path = files.summary
    summary = read_json_file(summary_path, "a finished run's summary") if summary_path.exists() else None
    if summary is not None and not isinstance(summary, dict):
        raise AnatomyError(f"{summary_path}: expected a JSON object")
    if summary is not None:
        check_summary(summary, summary_path)  # "false" is a truthy string: types are checked
    metrics = read_metrics(files.metrics, run_id, finished=summary is not None)

    def from_summary(name: str, kind: type = float) -> Any:
        return None if summary is None else json_number(summary.get(name), summary_path, name, kind)

    def loss_from_summary(name: str, finite: bool = False) -> float | None:
        return None if summary is None else json_loss(summary.get(name), summary_path, name, finite)

    diverged = bool(summary.get("diverged")) if summary else False
    if summary is None:
        status = "running"
    else:
        status = str(summary.get("status") or ("diverged" if diverged else "done"))
    train = config.get("train") if isinstance(config.get("train"), dict) else {}
    run = {
        "run_id": run_id,
        # the folder layout {experiment}/seed{seed} is the fallback when tags are missing
        "experiment": str(
            tags.get("experiment") or (folder.parent.name if folder.parent != runs_root else folder.name)
        ),
        "seed": _seed_of(folder, config),
        "group": tags.get("group"),
        "part": tags.get("part"),
        "direction": tags.get("direction"),
        "baseline": tags.get("baseline"),  # else from the experiments file: see assign_baselines
        "description": tags.get("description"),
        **corpus_columns(config, config_path),
        "precision": str(train.get("precision", "fp32")),  # runs from before the setting: fp32
        "config": json.dumps(config, allow_nan=True),
        "settings": settings_of(config),
        "preset": config.get("preset") or tags.get("preset") or train.get("preset"),
        **model_columns(config, config_path),
        "params": from_summary("params", int),
        "device": None if summary is None else summary.get("device"),
        # summaries written before the compile option have no such key: they ran eagerly
        "compiled": None if summary is None else bool(summary.get("compiled", False)),
        "torch_version": None if summary is None else summary.get("torch_version"),
        "status": status,
        "diverged": diverged,
        "diverged_step": from_summary("diverged_step", int),
        "steps_done": from_summary("steps_done", int) if summary else (metrics[-1]["step"] if metrics else None),
        "best_val_loss": loss_from_summary("best_val_loss", finite=True),  # the lowest finite val
        "best_step": from_summary("best_step", int),
        "final_train_loss": loss_from_summary("final_train_loss"),
        "final_val_loss": loss_from_summary("final_val_loss"),
        "step_time_s": from_summary("step_time_s"),
        "tokens_per_s": from_summary("tokens_per_s"),
    }
    for name in ("group", "part", "direction", "baseline", "description", "preset", "device", "torch_version"):
        if run[name] is not None:
            run[name] = str(run[name])
    return run, metrics, read_samples(files.samples, run_id)


# ---------------------------------------------------------------------------------------------
# Baselines: which experiment each run is compared with

# The experiments file collect reads when --experiments names none: the one beside the folder of
# runs (results/experiments.json, which the workflow writes; results/reference/, which ships it).
EXPERIMENTS_FILE = "experiments.json"


def experiments_file(runs_root: Path, given: Path | None) -> Path | None:
    """The experiments file for the runs under `runs_root`: `given`, else the one beside them."""
    if given is not None:
        return Path(given)
    beside = Path(runs_root).parent / EXPERIMENTS_FILE
    return beside if beside.is_file() else None


def read_experiments_file(path: Path) -> dict[str, Any]:
    """The `experiments:` mapping of an experiments file: workflow/experiments.yaml, or the
    results/experiments.json the workflow writes from it (JSON is YAML too)."""
    try:
        document = yaml.safe_load(read_small_file(Path(path), "an experiments file (YAML or JSON)"))
    except AnatomyError as err:
        raise AnatomyError(f"--experiments {err}") from None
    except yaml.YAMLError as err:
        raise AnatomyError(f"--experiments {path}: not YAML or JSON ({str(err).splitlines()[0]})") from None
    experiments = document.get("experiments") if isinstance(document, dict) else None
    if not isinstance(experiments, dict):
        raise AnatomyError(f"--experiments {path}: expected an 'experiments' mapping of name -> entry")
    return experiments


def read_baselines(experiments: dict[str, Any], path: Path) -> dict[str, str | None]:
    """Experiment name -> the baseline it names (None: compared with nothing)."""
    baselines = {}
    for name, entry in experiments.items():
        baseline = entry.get("baseline") if isinstance(entry, dict) else None
        if not isinstance(baseline, (str, type(None))):
            raise AnatomyError(
                f"--experiments {path}: experiments.{name}.baseline must be an experiment name, got {baseline!r}"
            )
        baselines[str(name)] = baseline
    return baselines


def read_declared_runs(experiments: dict[str, Any], path: Path) -> list[dict[str, Any]]:
    """The declared_runs rows: each experiment's `runs` (seed and stage, as the workflow writes
    them) with its `group`; an entry without `runs` declares none."""
    rows = []
    for name, entry in experiments.items():
        runs = entry.get("runs") if isinstance(entry, dict) else None
        if runs is None:
            continue
        where = f"--experiments {path}: experiments.{name}"
        group = entry.get("group")
        if not isinstance(group, (str, type(None))):
            raise AnatomyError(f"{where}.group must be a group's name, got {group!r}")
        if not isinstance(runs, list):
            raise AnatomyError(f"{where}.runs must be a list of {{seed, stage}}, got {runs!r}")
        seeds = set()
        for run in runs:
            seed, stage = (run.get("seed"), run.get("stage")) if isinstance(run, dict) else (None, None)
            if not isinstance(seed, int) or isinstance(seed, bool) or not isinstance(stage, (int, type(None))):
                raise AnatomyError(f"{where}.runs: expected {{seed: a whole number, stage: one or null}}, got {run!r}")
            if seed in seeds:
                raise AnatomyError(f"{where}.runs: seed {seed} is declared twice")
            seeds.add(seed)
            rows.append({"experiment": str(name), "seed": seed, "group": group, "stage": stage})
    return rows


def assign_baselines(runs: list[dict[str, Any]], declared: dict[str, str | None]) -> list[str]:
    """Each run's baseline: its own `baseline` tag, else its experiment's entry in `declared` (the
    experiments file). Returns the experiments declared in neither, whose runs keep no baseline."""
    undeclared = set()
    for run in runs:
        if run["baseline"] is not None:
            continue  # the run's own tag
        if run["experiment"] in declared:
            run["baseline"] = declared[run["experiment"]]
        else:
            undeclared.add(run["experiment"])
    return sorted(undeclared)


def undeclared_note(undeclared: list[str], experiments_path: Path | None) -> str | None:
    """The line collect prints when some experiments have no baseline declared (None: all have)."""
    if not undeclared:
        return None
    where = (
        f"not in {experiments_path}"
        if experiments_path is not None
        else f"no --experiments file and no {EXPERIMENTS_FILE} beside --runs"
    )
    return (
        f"collect: no baseline declared for {', '.join(undeclared)} (no `baseline` tag, {where}), so they are "
        "compared with nothing; name one with `anatomy train --tag baseline=NAME` or in workflow/experiments.yaml"
    )


# ---------------------------------------------------------------------------------------------
# One experiment, one corpus

# The columns that tell two corpora apart, each with its field in config.json's data section: the
# sizes, then the digest of the tokens (equal sizes, other text). A run that does not record one
# (from before digests) is judged by the others.
CORPUS_IDENTITY = (
    ("vocab_size", "vocab_size"),
    ("train_tokens", "train_tokens"),
    ("val_tokens", "val_tokens"),
    ("corpus_digest", "digest"),
)


def corpus_difference(run: dict[str, Any], other: dict[str, Any]) -> tuple[str, str] | None:
    """The first (column, data field) on which two runs' corpora differ; None: they may be one."""
    for column, key in CORPUS_IDENTITY:
        if run[column] is not None and other[column] is not None and run[column] != other[column]:
            return column, key
    return None


def corpus_value(run: dict[str, Any], column: str) -> str:
    """One of CORPUS_IDENTITY for people: a count with thousands separators, a digest's start."""
    return f"{run[column][:12]}..." if column == "corpus_digest" else f"{run[column]:,}"


SIZES = ("vocab_size", "train_tokens", "val_tokens")


def name_unnamed_corpora(runs: list[dict[str, Any]]) -> None:
    """Give a run whose config.json names no corpus (runs trained before corpora had names: the
    shipped grid) the name of the one corpus whose runs it may have read: the same sizes, and no
    digest that differs (corpus_difference). A noise estimate and a curve pool runs by their
    setup, corpus name included, so the grid's runs and a later run on the same text belong
    together. Two names that fit, or none, leave it unnamed."""
    named = [run for run in runs if run["corpus"] is not None]
    for run in runs:
        if run["corpus"] is not None or any(run[size] is None for size in SIZES):
            continue
        names = {other["corpus"] for other in named if corpus_difference(run, other) is None}
        if len(names) == 1:
            run["corpus"] = names.pop()


def check_one_corpus_per_experiment(runs: list[dict[str, Any]], runs_root: Path) -> None:
    """Refuse an experiment whose runs read different texts. Its seeds are averaged into one row,
    and every comparison pairs it seed by seed: a seed on your own writing beside a seed on the
    shipped poems would make a mean of two experiments, under one name, without a word. Renaming
    one side on the quiet would not do either (baselines and links name experiments), so collect
    stops and says which runs differ, in what, and what to do."""
    by_experiment: dict[str, list[dict[str, Any]]] = {}
    for run in runs:
        by_experiment.setdefault(run["experiment"], []).append(run)
    for experiment, members in by_experiment.items():
        for i, run in enumerate(members):
            for other in members[i + 1 :]:
                if (differs := corpus_difference(run, other)) is None:
                    continue
                column, key = differs
                raise AnatomyError(
                    f"--runs {runs_root}: the runs of experiment {experiment!r} read different corpora "
                    f"(data.{key} {corpus_value(run, column)} in {run['run_id']}/{CONFIG_FILE}, "
                    f"{corpus_value(other, column)} in {other['run_id']}/{CONFIG_FILE}), and an experiment's "
                    "seeds are averaged as one; train them again on one corpus, or move one corpus's runs "
                    "into a runs folder of their own"
                )


# ---------------------------------------------------------------------------------------------
# Snakemake benchmark files


def _benchmark_value(raw: str, path: Path, name: str) -> float | None:
    if raw in ("", "-", "NA", "nan"):  # Snakemake writes "-" / "NA" where psutil had no figure
        return None
    try:
        return float(raw)
    except ValueError:
        raise AnatomyError(f"{path}: column '{name}' must be a number, got {raw!r}") from None


def read_benchmarks(root: Path, run_ids: set[str]) -> list[dict[str, Any]]:
    """results/benchmarks/{rule}/{job}.tsv -> rows; job "vanilla/seed42" maps to that run."""
    rows = []
    for path in sorted(root.rglob("*.tsv")):
        relative = path.relative_to(root).with_suffix("")
        rule = relative.parts[0] if len(relative.parts) > 1 else ""
        job = Path(*relative.parts[1:]).as_posix() if len(relative.parts) > 1 else relative.as_posix()
        with io.StringIO(read_small_file(path, "a Snakemake benchmark file"), newline="") as handle:
            reader = csv.DictReader(handle, delimiter="\t")
            if reader.fieldnames is None or "s" not in reader.fieldnames:
                raise AnatomyError(f"{path}: not a Snakemake benchmark file (no 's' column in the header)")
            for repeat, record in enumerate(reader):
                row = {"rule": rule, "job": job, "run_id": job if job in run_ids else None, "repeat": repeat}
                for header, raw in record.items():
                    name = BENCHMARK_HEADER.get(header, header)
                    if name == "hms":
                        row[name] = raw
                    elif name in BENCHMARK_COLUMNS:
                        row[name] = _benchmark_value((raw or "").strip(), path, header)
                rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# Building the database


# ---------------------------------------------------------------------------------------------
# The exams' results (anatomy/exams/): each exam module owns its file and reads it into rows


def read_run_exams(folder: Path, run_id: str, collected: CollectedRuns) -> None:
    """A run folder's exam files: exams/length.json, exams/kv_cache.json and grad_norms.jsonl."""
    files = RunFolder(folder)
    # exam modules load torch: imported (exam_module) only where there is a file to read
    if (path := files.exam("length")).is_file():
        collected.add_exam_rows("exam_length", exam_module("length").read_rows(path, run_id))
    if (path := files.exam("kv_cache")).is_file():
        sizes, timings = exam_module("kv_cache").read_rows(path, run_id)
        collected.add_exam_rows("exam_kv_cache", sizes)
        collected.add_exam_rows("exam_kv_timing", timings)
    if (path := files.grad_norms).is_file():
        collected.add_exam_rows("grad_norms", grad_norms.read_grad_norms(path, run_id))
    read_layer_logs(files, run_id, collected)


def read_layer_logs(files: RunFolder, run_id: str, collected: CollectedRuns) -> None:
    """The logs beside the gradient norms, where a run has them (anatomy/training/layer_logs.py)."""
    collected.add_exam_rows("max_logits", layer_logs.read_max_logits(files.max_logits, run_id))
    shares = layer_logs.read_expert_shares(files.expert_shares, run_id)
    collected.add_exam_rows("expert_shares", shares)
    if (load := layer_logs.expert_load(shares)) is not None:
        collected.add_exam_rows("expert_load", [{"run_id": run_id, **load}])


def read_exams_folder(exams_root: Path, collected: CollectedRuns) -> None:
    """results/exams/: the depth map's cells (each a run folder of its own) and the wall clock."""
    from anatomy.exams import wall_clock  # torch: only where there are exams to read

    depth_root = exams_root / depth.DEPTH_FOLDER
    cells = depth.read_cells(depth_root)
    collected.add_exam_rows("exam_depth", cells)
    for cell in cells:
        if (path := RunFolder(depth_root / cell["cell"]).grad_norms).is_file():
            collected.add_exam_rows(
                "grad_norms", grad_norms.read_grad_norms(path, f"{depth.DEPTH_FOLDER}/{cell['cell']}")
            )
    if (path := exams_root / wall_clock.RESULT_FILE).is_file():
        collected.add_exam_rows("exam_wall_clock", wall_clock.read_rows(path))
    read_parts_exams(exams_root, collected)


def read_parts_exams(exams_root: Path, collected: CollectedRuns) -> None:
    """The exams of the parts of 2024-26: QK-norm's map, MLA's cells, the MoE exam's result, and
    their cells' logs (run_id "qk_norm/CELL", as the depth map's)."""
    collected.add_exam_rows("exam_qk_norm", qk_norm.read_cells(exams_root / qk_norm.FOLDER))
    collected.add_exam_rows("exam_mla", mla.read_cells(exams_root / mla.FOLDER))
    collected.add_exam_rows("exam_moe", moe.read_result(exams_root / moe.FOLDER / moe.RESULT_FILE))
    for module in (qk_norm, mla, moe):
        root = exams_root / module.FOLDER
        for folder in sorted(root.iterdir()) if root.is_dir() else []:
            if (folder / "config.json").is_file():
                files, run_id = RunFolder(folder), f"{module.FOLDER}/{folder.name}"
                collected.add_exam_rows("grad_norms", grad_norms.read_grad_norms(files.grad_norms, run_id))
                read_layer_logs(files, run_id, collected)


def collect_runs(
    runs_root: Path,
    benchmarks_root: Path | None = None,
    exams_root: Path | None = None,
    experiments_path: Path | None = None,
) -> CollectedRuns:
    runs_root = Path(runs_root)
    experiments_path = experiments_file(runs_root, experiments_path)
    experiments = read_experiments_file(experiments_path) if experiments_path is not None else {}
    declared = read_baselines(experiments, experiments_path)
    collected = CollectedRuns(experiments_path=experiments_path)
    collected.declared = read_declared_runs(experiments, experiments_path)
    if not runs_root.is_dir():
        raise AnatomyError(f"--runs {runs_root}: no such folder (train a model first: python -m anatomy train ...)")
    folders = find_run_folders(runs_root)
    collected.repeats = repeated_trainings(folders, runs_root, set(declared))
    for row in collected.declared:  # the workflow's folders: {experiment}/seed{seed}
        row["repeat_of"] = collected.repeats.get(f"{row['experiment']}/seed{row['seed']}")
    for folder in folders:
        if folder.relative_to(runs_root).as_posix() in collected.repeats:
            continue
        run, metrics, samples = read_run(folder, runs_root)
        collected.runs.append(run)
        collected.metrics.extend(metrics)
        collected.samples.extend(samples)
        read_run_exams(folder, run["run_id"], collected)
    name_unnamed_corpora(collected.runs)
    check_one_corpus_per_experiment(collected.runs, runs_root)
    collected.undeclared = assign_baselines(collected.runs, declared)
    if benchmarks_root is not None and Path(benchmarks_root).is_dir():
        collected.benchmarks = read_benchmarks(Path(benchmarks_root), {run["run_id"] for run in collected.runs})
    if exams_root is not None and Path(exams_root).is_dir():
        read_exams_folder(Path(exams_root), collected)
    if collected.exams.get("exam_kv_cache"):  # the chapter's LLaMA-scale figures, by the same formula
        from anatomy.exams import kv_cache  # torch: only where there is a cache to scale

        collected.add_exam_rows("exam_kv_scale", kv_cache.scale_rows())
    return collected


def _arrow_table(rows: list[dict[str, Any]], columns: list[str]) -> pa.Table:
    # Arrow keeps None (NULL, not evaluated) apart from NaN (a diverged loss), as the schema wants
    return pa.table(
        {name: pa.array([row.get(name) for row in rows], type=ARROW_TYPES.get(name, pa.string())) for name in columns}
    )


@contextmanager
def database_written(collected: CollectedRuns, db_path: Path) -> Iterator[Path]:
    """Build the database in a temporary file beside `db_path` and yield that file, to be read
    (results.json is written from it); it is renamed into place when the `with` block ends well."""
    with atomic_path(db_path) as tmp:
        tmp.unlink()  # DuckDB wants to create the file itself; an empty file is not a database
        try:
            with duckdb.connect(str(tmp)) as con:
                con.execute(SCHEMA_PATH.read_text(encoding="utf-8"))
                for table, rows, columns in [
                    ("runs", collected.runs, RUN_COLUMNS),
                    ("metrics", collected.metrics, METRIC_COLUMNS),
                    ("samples", collected.samples, SAMPLE_COLUMNS),
                    ("benchmarks", collected.benchmarks, BENCHMARK_COLUMNS),
                    ("declared_runs", collected.declared, column_names("declared_runs")),
                    *((table, rows, column_names(table)) for table, rows in sorted(collected.exams.items())),
                ]:
                    con.register("incoming", _arrow_table(rows, columns))
                    con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM incoming")
                    con.unregister("incoming")
                con.execute("CHECKPOINT")
            yield tmp
        finally:
            wal = tmp.with_name(tmp.name + ".wal")
            if wal.exists():
                wal.unlink()


def _json_safe(value: Any) -> Any:
    """NaN and inf are not JSON: write them as null (the status column says the run diverged)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_safe(item) for item in value]
    return value


# What results.json holds at its top level (collect writes it, see `collect`): --json replaces
# only a file that holds these, since every version of collect wrote them
RESULTS_JSON_KEYS = ("counts", "run_summary", "experiment_summary")


def not_a_results_json(path: Path) -> str | None:
    """Why the file at `path` is no results.json that collect wrote (None: it is one)."""
    try:
        data = read_json_file(path, "a results.json")
    except AnatomyError:  # not JSON, not UTF-8, too big for one
        data = None
    if isinstance(data, dict) and all(key in data for key in RESULTS_JSON_KEYS):
        return None
    keys = ", ".join(map(repr, RESULTS_JSON_KEYS))
    return f"holds a file that is not a results.json written by collect (a JSON object with {keys})"


def summary_tables(db_path: Path) -> dict[str, list[dict[str, Any]]]:
    """The summary views as lists of records, read back from the finished database."""
    tables = {}
    with open_read_only(db_path) as con:
        for view, order in [
            ("run_summary", "experiment, seed"),
            ("experiment_summary", "experiment"),
            ("ablation_summary", "part, direction"),
            ("sample_memorisation", "run_id, sample_idx"),
        ]:
            cursor = con.execute(f"SELECT * FROM {view} ORDER BY {order}")
            names = [column[0] for column in cursor.description]
            tables[view] = [dict(zip(names, row)) for row in cursor.fetchall()]
    return tables


def collect(
    runs_root: Path,
    db_path: Path,
    json_path: Path | None = None,
    benchmarks_root: Path | None = None,
    allow_empty: bool = False,
    exams_root: Path | None = None,
    experiments_path: Path | None = None,
) -> dict[str, int]:
    """Read every run folder, write the database (and results.json); return the row counts."""
    db_path = Path(db_path)
    check_database_path(db_path, replacing=True)
    check_file_target(db_path, "--db")
    if json_path is not None:
        check_file_target(json_path, "--json", not_ours=not_a_results_json)
    collected = collect_runs(Path(runs_root), benchmarks_root, exams_root, experiments_path)
    if not collected.runs and not allow_empty:  # a wrong --runs must not wipe a full database
        raise AnatomyError(
            f"--runs {runs_root}: no run folders in it (none holds a config.json or summary.json); "
            f"{db_path} is left as it is. Pass --allow-empty to write a database with no runs."
        )
    counts = {
        "runs": len(collected.runs),
        "metrics": len(collected.metrics),
        "samples": len(collected.samples),
        "benchmarks": len(collected.benchmarks),
        "exam_rows": sum(len(rows) for rows in collected.exams.values()),
    }
    # One writer at a time, and readers can tell it is at work: the lock. A full disk (DuckDB says
    # it in a FatalException) is one line naming the database, which is left as it was.
    with naming_a_full_disk(db_path), held_lock(collect_lock_path(db_path)):
        # Holding the lock, every temporary file beside the database is a killed collect's leftover.
        for target in (db_path, json_path):
            if target is not None:
                remove_stale_temporaries(target)
        # The pair is never a mix: results.json is written from the new database (both still
        # temporary files), then the old results.json is removed, the database renamed into place,
        # and results.json after it. A kill between two of these leaves the old pair, or a
        # database with no results.json (which the next collect writes), never a results.json
        # ahead of (or behind) the database beside it.
        with atomic_path(json_path) if json_path is not None else nullcontext() as json_tmp:
            with database_written(collected, db_path) as new_db:
                if json_tmp is not None:
                    with naming_a_full_disk(json_path):  # named as results.json, not as the database
                        summary = _json_safe({"counts": counts, **summary_tables(new_db)})
                        json_tmp.write_text(json_text(summary), encoding="utf-8")
                    file_behind(json_path).unlink(missing_ok=True)
    for note in (undeclared_note(collected.undeclared, collected.experiments_path), repeats_note(collected.repeats)):
        if note:  # written, then said
            print(note, file=sys.stderr)
    return counts


def collect_folder(runs_root: Path, db_path: Path) -> dict[str, int]:
    """Collect a folder of run folders into `db_path` with what lies beside it: the benchmarks, the
    exams of no one run (the depth map, the wall clock) and the experiments file (the baseline
    each names; collect reads the one beside by itself), where there are some. The one way a
    folder is collected whole: results/reference/ for the shipped runs (the dashboard's reference
    database), any folder for `report --runs`."""
    beside = Path(runs_root).parent
    benchmarks, exams = beside / "benchmarks", beside / "exams"
    return collect(
        runs_root,
        db_path,
        None,
        benchmarks if benchmarks.is_dir() else None,
        allow_empty=True,
        exams_root=exams if exams.is_dir() else None,
    )


def load_runs(runs_root: Path, provenance: dict[str, Any] | None) -> Results:
    """A folder of run folders as the reader reads a database (`report --runs`): collected whole
    (`collect_folder`) into a temporary database, and read back."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "report.duckdb"
        collect_folder(runs_root, db)
        return load(db, provenance)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=Path, default=Path("results/runs"), help="folder of run folders")
    parser.add_argument("--db", type=Path, default=Path("results/anatomy.duckdb"), help="database to (re)build")
    parser.add_argument("--json", type=Path, default=None, help="also write the summary here (results.json)")
    parser.add_argument(
        "--allow-empty",
        action="store_true",
        help="write the database even when --runs holds no run folders (default: refuse)",
    )
    parser.add_argument(
        "--benchmarks", type=Path, default=None, help="folder of Snakemake benchmark files (results/benchmarks)"
    )
    parser.add_argument(
        "--exams",
        type=Path,
        default=None,
        help="folder of the exams not tied to one run: the depth map and the wall clock (results/exams)",
    )
    parser.add_argument(
        "--experiments",
        type=Path,
        default=None,
        help="the experiments the runs were trained from, for the baseline each is compared with "
        "(results/experiments.json, written by the workflow, or workflow/experiments.yaml; "
        f"default: the {EXPERIMENTS_FILE} beside --runs, if any)",
    )


def run(args: argparse.Namespace) -> int:
    counts = collect(
        args.runs,
        args.db,
        args.json,
        args.benchmarks,
        allow_empty=args.allow_empty,
        exams_root=args.exams,
        experiments_path=args.experiments,
    )
    print(
        f"collected {counts['runs']} runs, {counts['metrics']} metric rows, {counts['samples']} samples, "
        f"{counts['benchmarks']} benchmark rows, {counts['exam_rows']} exam rows into {args.db}"
    )
    return 0
