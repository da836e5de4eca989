"""Ship finished runs as reference results: `python -m anatomy reference`.

A full-size grid costs hours of CPU, so its results are committed to the repository, and a
fresh clone can show them before anything is trained. This command copies each finished run's
small files (config, metrics, summary, samples; never a checkpoint) from `results/runs/` into
`results/reference/runs/`, with its Snakemake benchmark record, and records where and when each
run was made in `results/reference/grid.json`.

It can run while the grid is still training: runs without `summary.json` and `samples.json`
are left for the next call, and a run already shipped is not copied again unless it changed.
`python -m anatomy collect --runs results/reference/runs --benchmarks results/reference/benchmarks`
builds a database from what was shipped.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import Any

from anatomy.machine import cpu_description
from anatomy.files.atomic import (
    atomic_folder,
    read_regular_file,
    remove_stale_temporaries,
    write_bytes,
    write_bytes_if_changed,
    write_json,
    writing_into,
)
from anatomy.errors import AnatomyError
from anatomy.files.locks import is_locked
from anatomy.data.tokenizer import corpus_digest, load_tokenized
from anatomy.files.run_folder import (
    LAYER_LOG_FILES,
    RESULT_FILES,
    SMALL_FILE_LIMIT,
    has_results,
    find_run_folders,
    read_json_object,
    read_run_config,
    read_small_file,
    read_summary,
)
from anatomy.results.collect import EXPERIMENTS_FILE, read_run
from anatomy.files.run_folder import load_checkpoint

# A finished run ships its RESULT_FILES (anatomy/files/run_folder.py), never its checkpoints
# (*.pt), which are large and can be recomputed; the exams' results ship too where they exist
# (they need the checkpoints, so they cannot be made later), and so do the logs a run writes at
# its logged steps (gradient norms; the experts' shares and largest logits where it has them),
# which only training again could remake.
EXAM_FILES = ("exams/*.json", *LAYER_LOG_FILES)  # patterns, relative to the run folder
EXAM_FILE = "a result file of an exam (no checkpoint)"
BENCHMARK_RULE = "train_model"  # the Snakemake rule whose benchmark file times a training run
BENCHMARK_FILE = "a Snakemake benchmark file"
PROVENANCE_FILE = "grid.json"


def small_file_bytes(path: Path, what: str = "a result file of a run (no checkpoint)") -> bytes:
    """A file this command copies (a run's results, a benchmark, an exam's), read only if it is a
    regular file of at most SMALL_FILE_LIMIT: a named pipe would make the copy wait for good, and
    a link to /dev/zero fill the memory. Else one line naming the file."""
    return read_regular_file(path, SMALL_FILE_LIMIT, what)


def copy_small_file(source: Path, target: Path) -> None:
    target.write_bytes(small_file_bytes(source))


def benchmark_seconds(path: Path | None) -> float | None:
    """Wall-clock seconds from a Snakemake benchmark file (its 's' column), if there is one."""
    if path is None or not path.is_file():
        return None
    lines = read_small_file(path, BENCHMARK_FILE).splitlines()
    if len(lines) < 2:
        return None
    header, values = lines[0].split("\t"), lines[1].split("\t")
    try:
        return float(values[header.index("s")])
    except (ValueError, IndexError):
        raise AnatomyError(f"{path}: not a Snakemake benchmark file (no number in its 's' column)") from None


def finished_at(path: Path) -> str:
    """When a file was last written, as UTC ISO 8601 (summary.json is the last file of a run)."""
    stamp = dt.datetime.fromtimestamp(path.stat().st_mtime, tz=dt.timezone.utc)
    return stamp.replace(microsecond=0).isoformat().replace("+00:00", "Z")


def provenance(folder: Path, benchmark: Path | None, machine: str) -> dict[str, Any]:
    """Where, when and how long one run trained."""
    summary = read_summary(folder / "summary.json")
    return {
        "device": summary.get("device"),
        "machine": summary.get("machine") or machine,  # where it trained; older runs: where shipped
        "torch_version": summary.get("torch_version"),
        "compiled": summary.get("compiled"),
        "finished_utc": finished_at(folder / "summary.json"),
        "train_s": summary.get("elapsed_s"),  # the training loop itself
        "job_s": benchmark_seconds(benchmark),  # the whole job, as Snakemake timed it
    }


def read_provenance(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {"runs": {}}
    record = read_json_object(path, "where and when each shipped run was made")
    if not isinstance(record.get("runs"), dict):
        raise AnatomyError(f"{path}: expected an object with a 'runs' object")
    return record


def grid_totals(runs: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The grid as a whole: how many runs, from when to when, how much compute."""
    finished = sorted(entry["finished_utc"] for entry in runs.values())
    return {
        "n_runs": len(runs),
        "first_finished_utc": finished[0] if finished else None,
        "last_finished_utc": finished[-1] if finished else None,
        "devices": sorted({str(entry["device"]) for entry in runs.values()}),
        "machines": sorted({str(entry["machine"]) for entry in runs.values()}),
        "torch_versions": sorted({str(entry["torch_version"]) for entry in runs.values()}),
        "train_s_total": round(sum(entry["train_s"] or 0.0 for entry in runs.values()), 1),
    }


def small_files(folder: Path) -> list[str]:
    """The run's files to ship, relative to its folder: results first, then any exam results."""
    exams = sorted({path.relative_to(folder).as_posix() for pattern in EXAM_FILES for path in folder.glob(pattern)})
    return [*RESULT_FILES, *exams]


def ship_weights(runs_root: Path, out: Path, run_ids: list[str]) -> list[Path]:
    """The float16 weights of these runs' best and last checkpoints, beside their shipped files,
    so that generation works on a fresh clone (anatomy/files/weights.py). Returns the files written: a
    file that already holds these weights is left as it is."""
    from anatomy.files.weights import SUFFIX, save_weights  # torch: only when weights are shipped

    written = []
    for run_id in run_ids:
        folder = runs_root / run_id
        if not (out / "runs" / run_id / "summary.json").is_file():
            raise AnatomyError(f"--weights {run_id}: not a shipped run of {out} (is it finished?)")
        for checkpoint in ("best", "last"):
            source = folder / f"{checkpoint}.pt"
            if not source.is_file():
                raise AnatomyError(f"--weights {run_id}: {source} is missing, so its weights cannot be shipped")
    with writing_into(out):
        for run_id in run_ids:
            for checkpoint in ("best", "last"):
                target = out / "runs" / run_id / f"{checkpoint}{SUFFIX}"
                remove_stale_temporaries(target)  # what a killed call left beside it
                if save_weights(load_checkpoint(runs_root / run_id / f"{checkpoint}.pt"), target):
                    written.append(target)
    return written


def ship(runs_root: Path, out: Path, benchmarks_root: Path | None = None) -> dict[str, list[str]]:
    """Copy every finished run under `runs_root` into `out`; return run ids by what happened."""
    runs_root, out = Path(runs_root), Path(out)
    if not runs_root.is_dir():
        raise AnatomyError(f"--runs {runs_root}: no such folder (train a model first)")
    if out.resolve() == runs_root.resolve() or runs_root.resolve() in out.resolve().parents:
        raise AnatomyError(f"--out {out} is inside --runs {runs_root}: expected a separate folder")
    if out.exists() and not out.is_dir():
        raise AnatomyError(f"--out {out} is a file: expected a folder (e.g. results/reference)")
    record = read_provenance(out / PROVENANCE_FILE)
    machine = cpu_description()
    report: dict[str, list[str]] = {"added": [], "updated": [], "unchanged": [], "not finished": []}
    finished = []
    for folder in find_run_folders(runs_root):
        if (folder / "summary.json").is_file():
            read_run(folder, runs_root)  # collect's checks, on every finished run before anything is written
        if has_results(folder):
            finished.append(folder)
        else:
            report["not finished"].append(folder.relative_to(runs_root).as_posix())
    if not finished and not record["runs"]:
        return report  # nothing finished yet: nothing to write
    with writing_into(out):
        for folder in finished:
            run_id = folder.relative_to(runs_root).as_posix()
            target = out / "runs" / run_id
            files = {target / name: small_file_bytes(folder / name) for name in small_files(folder)}
            benchmark = Path(benchmarks_root, BENCHMARK_RULE, f"{run_id}.tsv") if benchmarks_root else None
            if benchmark is not None and benchmark.is_file():
                # Snakemake's layout, so that collect --benchmarks reads them unchanged
                files[out / "benchmarks" / BENCHMARK_RULE / f"{run_id}.tsv"] = small_file_bytes(
                    benchmark, BENCHMARK_FILE
                )
            for path in files:
                remove_stale_temporaries(path)  # what a killed call left beside it
            if run_id in record["runs"] and all(
                path.is_file() and small_file_bytes(path) == data for path, data in files.items()
            ):
                report["unchanged"].append(run_id)
                continue
            report["updated" if (target / "summary.json").exists() else "added"].append(run_id)
            for path, data in files.items():
                write_bytes_if_changed(path, data)
            record["runs"][run_id] = provenance(folder, benchmark, machine)
        record["runs"] = dict(sorted(record["runs"].items()))
        remove_stale_temporaries(out / PROVENANCE_FILE)
        write_json(out / PROVENANCE_FILE, {"grid": grid_totals(record["runs"]), "runs": record["runs"]})
    return report


# The workflow's results/experiments.json (each experiment's baseline, group and declared runs) is
# shipped beside the runs (collect's EXPERIMENTS_FILE): collecting the shipped runs then pairs each
# run with the baseline the workflow's collect gave it, and each study says what is still to train.
# A run no file or tag declares has no baseline.


def ship_experiments(experiments: Path, out: Path) -> bool:
    """Copy the experiments file into `out`, if there is one; whether it changed."""
    if not Path(experiments).is_file():
        return False
    with writing_into(out):
        data = small_file_bytes(Path(experiments), "an experiments file (each experiment's baseline)")
        return write_bytes_if_changed(out / EXPERIMENTS_FILE, data)


def ship_exams(exams_root: Path, out: Path) -> list[str]:
    """The exams of no one run (results/exams/: the depth map's finished cells, the wall clock)
    into out/exams/, without checkpoints or hidden files (locks). Returns the files that changed."""
    changed = []
    with writing_into(out):
        for path in sorted(Path(exams_root).rglob("*")):
            relative = path.relative_to(exams_root)
            if not path.is_file() or path.suffix == ".pt" or any(part.startswith(".") for part in relative.parts):
                continue
            if (path.parent / "config.json").is_file() and not (path.parent / "summary.json").is_file():
                continue  # a depth cell still training: it ships once finished, as runs do
            target = out / "exams" / relative
            remove_stale_temporaries(target)  # what a killed call left beside it
            if write_bytes_if_changed(target, small_file_bytes(path, EXAM_FILE)):
                changed.append(relative.as_posix())
    return changed


# What a run's config.json records of its corpus, and the tokenized corpus's split.json too.
CORPUS_FACTS = ("vocab_size", "train_tokens", "val_tokens")


def corpus_differences(one: dict[str, Any], other: dict[str, Any]) -> list[str]:
    """The corpus facts two records both hold and disagree on: not empty means two corpora, whose
    losses do not compare (restoring onto one, or drawing one's reference band behind the other)."""
    return [key for key in CORPUS_FACTS if key in one and key in other and one[key] != other[key]]


def fact_value(value: Any) -> str:
    """A corpus fact as recorded, for people: a count with thousands separators (3,563), anything
    else as it is (a config may hold what no trainer wrote)."""
    return f"{value:,}" if isinstance(value, int) else str(value)


def check_corpus(shipped_runs: list[Path], corpus: Path) -> None:
    """The corpus the restored runs will count as trained on must exist, and be theirs.

    It must exist before the restore: Snakemake judges a run by its files' times, so a corpus
    built after the restore is newer than every restored run, and the grid would train them all
    again. And it must be the one they were trained on, or a user's own corpus would show the
    shipped runs' numbers as if they were its own: the same vocabulary and token counts, and,
    where a run records the digest of its tokens, the same digest (other text of the same sizes
    is another corpus).
    """
    split_path = Path(corpus) / "split.json"
    if not split_path.is_file():
        raise AnatomyError(
            f"{split_path}: no tokenized corpus yet; build it before restoring "
            f"(`snakemake --cores 1 {split_path}`): built after, it is newer than the restored runs "
            "and Snakemake would train them all again"
        )
    split = read_json_object(split_path, "the tokenized corpus's facts, written by anatomy tokenize")
    digest_here: str | None = None  # of the tokens at `corpus`: computed once, if a run records one
    for folder in shipped_runs:
        config_path = folder / "config.json"
        if not config_path.is_file():
            raise AnatomyError(f"{config_path}: missing, so the shipped run's corpus cannot be told")
        data = read_run_config(config_path)["data"]
        if "vocab_size" not in data:  # every trainer has recorded at least the vocabulary
            raise AnatomyError(
                f"{config_path}: field 'data.vocab_size' missing, so the shipped run's corpus cannot be told"
            )
        if differ := corpus_differences(data, split):
            theirs = ", ".join(f"{key} {data[key]}" for key in differ)
            ours = ", ".join(f"{key} {split[key]}" for key in differ)
            raise AnatomyError(
                f"{split_path}: {ours}, but the shipped run {folder.parent.name}/{folder.name} was "
                f"trained on a corpus with {theirs}: restore only onto the corpus the runs were trained on"
            )
        if isinstance(recorded := data.get("digest"), str):
            digest_here = digest_here or corpus_digest(*load_tokenized(corpus))
            if recorded != digest_here:
                raise AnatomyError(
                    f"{Path(corpus)}: its tokens' digest is {digest_here[:12]}..., but the shipped run "
                    f"{folder.parent.name}/{folder.name} records {recorded[:12]}... (data.digest in its config.json): "
                    "the same sizes, other text; restore only onto the corpus the runs were trained on"
                )


NAMED_CORPORA = Path("results/corpora")  # where the workflow tokenizes workflow/corpora.yaml's


def corpus_folder_of(folder: Path, default_corpus: Path) -> Path:
    """The tokenized corpus a shipped run was trained on: a named corpus's folder, as its
    config.json records it (results/corpora/NAME), or else the default corpus, wherever --data
    says it is."""
    recorded = Path(str(read_run_config(folder / "config.json")["data"].get("dir", "")))
    return recorded if recorded.parent == NAMED_CORPORA else default_corpus


def check_shipped_run(folder: Path, shipped: Path) -> None:
    """A shipped run must hold every result file, or restoring it would make a run that the
    workflow counts as done (or trains again) and that collect refuses."""
    for name in RESULT_FILES:
        if not (folder / name).is_file():
            run_id = folder.relative_to(shipped).as_posix()
            raise AnatomyError(
                f"{folder / name}: missing, so the shipped run {run_id} cannot be restored; "
                "nothing of it was copied (ship it again, or delete its folder)"
            )


def half_restored(target: Path, shipped: Path, names: list[str]) -> bool:
    """Whether `target` is what an older restore, killed half way, left of the shipped folder
    (`names`: the files a restore copies): some of them missing, and every file there one of them,
    byte for byte. A run or depth cell of this machine has a file no restore writes (a
    checkpoint) or numbers of its own."""
    present = {
        path.relative_to(target).as_posix()
        for path in target.rglob("*")
        if path.is_file() and not path.name.endswith(".tmp")  # a killed writer's temporaries
    }
    return present < set(names) and all(
        small_file_bytes(target / name) == small_file_bytes(shipped / name) for name in present
    )


def restore_folder(shipped: Path, names: list[str], target: Path) -> bool:
    """Copy the files `names` of a shipped folder (a run, a depth cell) into `target`, all or
    nothing: into a temporary folder beside it, renamed into place once complete. Only where
    `target` is missing or half restored (half_restored), and no trainer is at work in it; never
    over a run of this machine, finished or resumable. Returns whether it copied. Only while
    holding the lock on the folder above (writing_into), so a temporary folder found beside
    `target` is a killed restore's."""
    remove_stale_temporaries(target)
    if target.exists() and (is_locked(target) or not half_restored(target, shipped, names)):
        return False
    with atomic_folder(target) as tmp:
        for name in names:  # in order: Snakemake compares the files' times
            (tmp / name).parent.mkdir(parents=True, exist_ok=True)
            copy_small_file(shipped / name, tmp / name)
    return True


def restore(reference: Path, runs_root: Path, corpus: Path) -> tuple[list[str], dict[str, list[str]]]:
    """Copy the shipped runs' small files into `runs_root` where that run is not there yet, so a
    grid continued on another machine trains only what is missing (the workflow counts a run
    with summary.json and samples.json as done). Each run's tokenized corpus must be there first,
    and be the run's own (check_corpus): the default corpus must; runs of a named corpus not yet
    tokenized are left for later. Each run is copied whole or not at all, and a run an older
    restore left half copied is completed. Returns the run ids copied, and those left by their
    corpus."""
    shipped = Path(reference) / "runs"
    if not shipped.is_dir():
        raise AnatomyError(f"--out {reference}: no shipped runs in it (expected {shipped})")
    by_corpus: dict[Path, list[Path]] = {}
    for folder in find_run_folders(shipped):
        if not (folder / "config.json").is_file():
            raise AnatomyError(f"{folder / 'config.json'}: missing, so the shipped run's corpus cannot be told")
        by_corpus.setdefault(corpus_folder_of(folder, Path(corpus)), []).append(folder)
    folders, left = [], {}
    for corpus_dir, runs in by_corpus.items():
        if corpus_dir != Path(corpus) and not (corpus_dir / "split.json").is_file():
            left[corpus_dir.as_posix()] = [run.relative_to(shipped).as_posix() for run in runs]
            continue
        check_corpus(runs, corpus_dir)
        folders += runs
    for folder in folders:  # every run checked before anything is copied
        check_shipped_run(folder, shipped)
    copied = []
    if not folders:
        return copied, left
    with writing_into(runs_root):
        for folder in sorted(folders):
            run_id = folder.relative_to(shipped).as_posix()
            # exam results after summary.json (small_files' order), so Snakemake sees them up to date
            if restore_folder(folder, small_files(folder), Path(runs_root) / run_id):
                copied.append(run_id)
    return copied, left


def restore_exams(reference: Path, exams_root: Path) -> list[str]:
    """The shipped exams of no one run back into `exams_root`: each depth cell and the wall clock
    where this machine has none of its own. Returns what was copied (cell folders, files)."""
    shipped = Path(reference) / "exams"
    entries = sorted(shipped.iterdir()) if shipped.is_dir() else []
    if not entries:
        return []
    copied = []
    with writing_into(exams_root):
        for entry in entries:
            for unit in sorted(entry.iterdir()) if entry.is_dir() else [entry]:  # depth/CELL folders, or a file
                target = Path(exams_root) / unit.relative_to(shipped)
                if unit.is_dir():
                    # summary.json last: a cell is finished only once everything is there
                    files = sorted((p for p in unit.rglob("*") if p.is_file()), key=lambda p: p.name == "summary.json")
                    if not restore_folder(unit, [path.relative_to(unit).as_posix() for path in files], target):
                        continue
                elif target.exists():
                    continue  # this machine's own: never overwrite it
                else:
                    remove_stale_temporaries(target)
                    write_bytes(target, small_file_bytes(unit, EXAM_FILE))
                copied.append(unit.relative_to(shipped).as_posix())
    return copied


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--runs", type=Path, default=Path("results/runs"), help="folder of run folders")
    parser.add_argument(
        "--benchmarks",
        type=Path,
        default=Path("results/benchmarks"),
        help="Snakemake's benchmark files, for each run's wall time (optional)",
    )
    parser.add_argument("--out", type=Path, default=Path("results/reference"), help="the reference folder")
    parser.add_argument(
        "--exams",
        type=Path,
        default=None,
        help="the exams of no one run (depth map, wall clock), shipped into OUT/exams if present "
        "(default: the folder `exams` beside --runs, e.g. results/exams)",
    )
    parser.add_argument(
        "--weights",
        nargs="+",
        default=[],
        metavar="RUN_ID",
        help="also ship these runs' best and last weights as float16 safetensors "
        "(e.g. vanilla/seed42 llama/seed42), so a fresh clone can generate",
    )
    parser.add_argument(
        "--restore",
        action="store_true",
        help="the other way: copy the shipped runs into --runs where missing, so a grid "
        "continued elsewhere trains only the runs not shipped yet",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=Path("results/corpus"),
        help="with --restore: the tokenized corpus the grid trains on; it must exist and be the shipped runs' own",
    )


def run(args: argparse.Namespace) -> int:
    args.exams = args.exams if args.exams is not None else args.runs.parent / "exams"
    if args.restore:
        copied, left = restore(args.out, args.runs, args.data)
        print(f"restored {len(copied)} shipped runs into {args.runs}" + (f": {', '.join(copied)}" if copied else ""))
        for corpus_dir, run_ids in left.items():
            print(
                f"not restored: {len(run_ids)} runs of {corpus_dir}, which is not tokenized here yet "
                f"(`snakemake --cores 1 {corpus_dir}/split.json`, then restore again): {', '.join(run_ids)}"
            )
        exams = restore_exams(args.out, args.exams)
        print(f"restored {len(exams)} shipped exam folders into {args.exams}")
        return 0
    benchmarks = args.benchmarks if args.benchmarks.is_dir() else None
    report = ship(args.runs, args.out, benchmarks)
    if ship_experiments(args.runs.parent / EXPERIMENTS_FILE, args.out):
        print(f"{args.out / EXPERIMENTS_FILE}: the baseline each experiment names, updated")
    for what, run_ids in report.items():
        if run_ids:
            print(f"{what:>13}: {len(run_ids)}  ({', '.join(run_ids)})")
    if args.exams.is_dir():
        changed = ship_exams(args.exams, args.out)
        print(f"        exams: {len(changed)} files changed in {args.out / 'exams'}")
    for path in ship_weights(args.runs, args.out, args.weights):
        print(f"      weights: {path} ({path.stat().st_size / 1e6:.1f} MB)")
    total = len(report["added"]) + len(report["updated"]) + len(report["unchanged"])
    print(f"{args.out}: {total} finished runs shipped; {args.out / PROVENANCE_FILE} says where and when")
    return 0
