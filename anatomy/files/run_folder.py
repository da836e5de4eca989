"""The run folder: every file in it, its checkpoints, and the rules for starting again.

`anatomy train` writes one run into one folder; generating, collecting, the exams and shipping
read it back. All of them find its files through `RunFolder`, so each name is spelled once:

    config.json        the settings (preset, model, train, data, tags), written before training
    metrics.jsonl      one line per evaluation: losses, learning rate, tokens seen, time
    grad_norms.jsonl   each block's gradient norm at the logged steps (name: anatomy/training/grad_norms.py)
    expert_shares.jsonl, max_logits.jsonl
                       at the same steps: each expert's share of the tokens (runs with experts),
                       the largest attention logit (opt-in); anatomy/training/layer_logs.py
    last.pt, best.pt   checkpoints: the latest evaluation, and the best validation loss so far
    last.safetensors, best.safetensors
                       their weights alone, float16: what a shipped reference run has instead
                       (anatomy/files/weights.py); `model_file` picks what generation reads
    summary.json       written last: its presence means the run is finished
    samples.json       generated text (`anatomy generate --out`)
    exams/NAME.json    the run's exam results (name: anatomy/exams/__init__.py)

Starting a run in a folder that already holds one is safe: the same settings resume it (or find
it finished), other settings are refused unless asked to start over (`settle_folder`). What
counts as "the same settings" is `run_settings`: what defines the numbers, not where they run.

A write that finds the disk full is one line naming the file (`naming_a_full_disk`, in
anatomy/files/atomic.py with the writes); the writes are atomic, so what was there before is still whole.

The small files are read checked rather than trusted. `summary.json` says a run finished;
training, generation and collecting all act on what it holds. A value of the wrong type must not
slip through: the string "false" is truthy in Python, so an unchecked `"diverged": "false"` would
read as a diverged run. Every reader goes through here, so they all agree on what a valid file is.
They are read only as regular files of a sane size (`read_small_file`): a named pipe put in a run
folder would make collecting (or the Progress page) wait for good, a link to /dev/zero fill the memory.

No torch at import: collecting and the dashboard read run folders too; only checkpoints need it.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from anatomy.config import RUNTIME_KEYS, TrainConfig
from anatomy.errors import AnatomyError
from anatomy.files.atomic import (
    atomic_path,
    folder_entries,
    naming_a_full_disk,
    read_regular_file,
    remove_stale_temporaries,
    write_json,
)
from anatomy.files.atomic import readable_bytes  # noqa: F401 (the trainer imports it from here)
from anatomy.files.locks import held_lock

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"
SAMPLES_FILE = "samples.json"
CHECKPOINTS = ("last", "best")  # each saved as NAME.pt
CHECKPOINT_SUFFIX = ".pt"
WEIGHTS_SUFFIX = ".safetensors"  # a checkpoint's weights alone, shipped as NAME.safetensors
GRAD_NORMS_FILE = "grad_norms.jsonl"  # written and read by anatomy/training/grad_norms.py
EXPERT_SHARES_FILE = "expert_shares.jsonl"  # these two: anatomy/training/layer_logs.py
MAX_LOGITS_FILE = "max_logits.jsonl"
LAYER_LOG_FILES = (GRAD_NORMS_FILE, EXPERT_SHARES_FILE, MAX_LOGITS_FILE)  # one row per logged step each


def exam_result_path(run_dir: str | Path, name: str) -> Path:
    """Where a run's result of exam `name` lives: RUN/exams/NAME.json, beside its metrics."""
    return Path(run_dir) / "exams" / f"{name}.json"


# The files that hold a run's results: a finished run has them all. The checkpoints are not
# among them: they are large and stay where the run trained (`anatomy reference`, `batch-run`).
RESULT_FILES = (CONFIG_FILE, METRICS_FILE, SUMMARY_FILE, SAMPLES_FILE)


def has_results(folder: str | Path) -> bool:
    return all((Path(folder) / name).is_file() for name in RESULT_FILES)


RUN_MARKERS = (CONFIG_FILE, SUMMARY_FILE)


def find_run_folders(runs_root: Path) -> list[Path]:
    """Every folder under the root holding a config.json (a run that has at least started) or a
    summary.json (a finished run: one that lost its config.json is named, not left out).
    Folders reached through symbolic links count too (runs kept on another disk); each real
    folder is visited once, so a link that loops back is harmless. A folder that cannot be read
    (or whose path is longer than the system allows) holds no run that could be read: passed over.

    The folders still to look in are kept in a list, not by recursion: os.walk (Python 3.11)
    recurses once per level, and 1,100 nested folders under a runs folder ended collect, reference
    and the Progress page in a RecursionError. No depth is set: the layouts put runs two levels
    down (EXPERIMENT/seedN, in results/runs and results/reference/runs alike), but --runs may name
    any folder above or below that, and a bound would leave runs out without a word."""
    found, seen = [], set()
    to_visit = [Path(runs_root)]
    while to_visit:
        folder = to_visit.pop()
        try:
            real = os.stat(folder)  # a link followed: the folder it leads to
            if (real.st_dev, real.st_ino) in seen:
                continue
            seen.add((real.st_dev, real.st_ino))
            subfolders, files = folder_entries(folder)
        except OSError:
            continue
        if any(marker in files for marker in RUN_MARKERS):
            found.append(folder)
        # last in, first out: the first name is looked in first, as os.walk's top-down order did
        to_visit += [folder / name for name in sorted(subfolders, reverse=True) if not name.startswith(".")]
    return sorted(found)


# ---------------------------------------------------------------------------------------------
# Reading the small files, checked: JSON files, and metrics.jsonl (the loss curve)
# ---------------------------------------------------------------------------------------------

# summary.json field -> what it holds (None is allowed where a field has no value yet)
SUMMARY_FIELDS: dict[str, type] = {
    "params": int,
    "best_val_loss": float,
    "best_step": int,
    "final_train_loss": float,
    "final_val_loss": float,
    "step_time_s": float,
    "tokens_per_s": float,
    "steps_done": int,
    "device": str,
    "machine": str,  # the CPU or GPU in words (runs trained before 2026-12-04 lack it)
    "compiled": bool,
    "precision": str,
    "torch_version": str,
    "python_version": str,
    "diverged": bool,
    "diverged_step": int,
    "status": str,
    "batch_digest": str,
    "elapsed_s": float,
}
SUMMARY_STATUSES = ("done", "diverged")
# its losses -> whether the loss must be finite: a best val is the lowest finite one; a final loss
# may be NaN or Infinity (a run that blew up). Checked with the types, so that every reader
# (collect, `train` finding a run finished) refuses the same summaries
SUMMARY_LOSSES = {"best_val_loss": True, "final_train_loss": False, "final_val_loss": False}
# what `run_settings` needs from config.json
CONFIG_SECTIONS = ("model", "train", "data")


# The most a small file of a run (or of an exam) may hold. The largest a shipped run has is 66 KB
# (grad_norms.jsonl of a 12-layer run, 236 lines; metrics.jsonl: 5.6 KB, samples.json: 4.6 KB,
# config.json: 1.2 KB). 16 MiB is 250 times that: some 100,000 evaluations of metrics.jsonl (a
# line is about 150 bytes), far more than any run logs, and read and parsed in well under a second
# with about 100 MB of memory. A bigger file is no file this project wrote (a sparse 2 GB file cost
# collect 4.3 GB, and the Progress page reread it on every refresh): it is refused, unread.
SMALL_FILE_LIMIT = 16 * 1024**2


def read_small_file(path: Path, what: str) -> str:
    """A small file's text: a regular file (a named pipe would make the reader wait for good) of at
    most SMALL_FILE_LIMIT bytes, in UTF-8; else one line naming the file. `what`: what it should be."""
    data = read_regular_file(path, SMALL_FILE_LIMIT, what)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise AnatomyError(f"{path}: not UTF-8 text (bad byte at offset {err.start})") from None


def read_json_file(path: Path, what: str = "a JSON file") -> Any:
    """The parsed file, or one line naming the file and what is wrong with it."""
    try:
        # Python's json reads the NaN / Infinity tokens that a diverged run's summary may hold
        return json.loads(read_small_file(Path(path), what))
    except json.JSONDecodeError as err:
        raise AnatomyError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """A JSON file that must hold one object; `what` says what the object should be."""
    data = read_json_file(path, f"a JSON object ({what})")
    if not isinstance(data, dict):
        raise AnatomyError(f"{path}: expected a JSON object ({what}), got a {type(data).__name__}")
    return data


def check_value(value: Any, kind: type, path: Path, name: str) -> None:
    """One field against its kind; bools are not numbers here, and ints are not bools."""
    if kind is bool:
        if not isinstance(value, bool):
            raise AnatomyError(f"{path}: field '{name}' must be true or false, got {value!r}")
        return
    if value is None:
        return
    if kind is str:
        if not isinstance(value, str):
            raise AnatomyError(f"{path}: field '{name}' must be a string or null, got {value!r}")
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AnatomyError(f"{path}: field '{name}' must be a number or null, got {value!r}")
    if kind is int and not isinstance(value, int):
        raise AnatomyError(f"{path}: field '{name}' must be a whole number, got {value!r}")


def check_summary(summary: dict[str, Any], path: Path) -> dict[str, Any]:
    """Every field that is present has its type. Fields may be missing: summaries written by
    earlier versions lack the newer ones (`compiled`), and readers fall back for those."""
    for name, kind in SUMMARY_FIELDS.items():
        if name in summary:
            check_value(summary[name], kind, path, name)
    if "status" in summary and summary["status"] not in SUMMARY_STATUSES:
        raise AnatomyError(f"{path}: field 'status' must be 'done' or 'diverged', got {summary['status']!r}")
    for name, finite in SUMMARY_LOSSES.items():
        json_loss(summary.get(name), path, name, finite)
    return summary


def read_summary(path: Path) -> dict[str, Any]:
    return check_summary(read_json_object(path, "a finished run's summary, written by anatomy train"), path)


def read_run_config(path: Path) -> dict[str, Any]:
    """config.json as `anatomy train` writes it: a preset name and model, train and data objects."""
    config = read_json_object(path, "a run's settings, written by anatomy train")
    if not isinstance(config.get("preset"), str):
        raise AnatomyError(f"{path}: field 'preset' must be a preset name, got {config.get('preset')!r}")
    for section in CONFIG_SECTIONS:
        if not isinstance(config.get(section), dict):
            raise AnatomyError(f"{path}: field '{section}' must be an object, got {config.get(section)!r}")
    return config


def json_number(value: Any, path: Path, name: str, kind: type = float) -> Any:
    """A number from JSON (None stays None); anything else is an error naming the field."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AnatomyError(f"{path}: field '{name}' must be a number or null, got {value!r}")
    if kind is int:
        if isinstance(value, float) and not value.is_integer():
            raise AnatomyError(f"{path}: field '{name}' must be a whole number, got {value!r}")
        return int(value)
    return float(value)


def json_loss(value: Any, path: Path, name: str, finite: bool = False) -> float | None:
    """A loss from JSON: a cross-entropy is 0 or more, so a negative one (-Infinity) is damage.
    NaN and +Infinity mark a run that blew up, unless `finite` (a best val is the lowest finite
    one); None is a loss not evaluated."""
    value = json_number(value, path, name)
    if value is not None and (value < 0 or (finite and not math.isfinite(value))):
        expected = "a finite loss (0 or more)" if finite else "a loss (0 or more, or NaN or Infinity)"
        raise AnatomyError(f"{path}: field '{name}' must be {expected} or null, got {value!r}")
    return value


def read_metrics(path: Path, run_id: str, finished: bool) -> list[dict[str, Any]]:
    """Rows of metrics.jsonl. A run still training may have none yet, or a half-written last line
    (skipped). A finished one has at least one: every report and page reads its curve."""
    lines = read_small_file(path, "the metrics anatomy train logs").splitlines() if path.exists() else []
    if finished and not any(line.strip() for line in lines):
        raise AnatomyError(
            f"{path}: missing or empty, but summary.json says the run finished: its curve is lost "
            "(delete the folder to train it again)"
        )
    rows: dict[int, dict[str, Any]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            if number == len(lines) and not finished:
                break  # the trainer is appending this line right now
            raise AnatomyError(f"{path}: line {number} is not valid JSON ({err.msg})") from None
        if not isinstance(record, dict) or "step" not in record:
            raise AnatomyError(f"{path}: line {number} must be an object with a 'step' field")
        step = json_number(record["step"], path, f"step (line {number})", int)
        # a resumed run re-evaluates some steps: the later row wins, so each step is one row
        rows[step] = {
            "run_id": run_id,
            "step": step,
            **{
                name: json_loss(record.get(name), path, f"{name} (line {number})")
                for name in ("train_loss", "val_loss")
            },
            **{name: json_number(record.get(name), path, f"{name} (line {number})") for name in ("lr", "elapsed_s")},
            "tokens_seen": json_number(record.get("tokens_seen"), path, f"tokens_seen (line {number})", int),
        }
    return [rows[step] for step in sorted(rows)]


class RunFolder:
    """Paths of one run, and the few rules about them (summary.json last = finished)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.config = self.root / CONFIG_FILE
        self.metrics = self.root / METRICS_FILE
        self.grad_norms = self.root / GRAD_NORMS_FILE
        self.expert_shares = self.root / EXPERT_SHARES_FILE
        self.max_logits = self.root / MAX_LOGITS_FILE
        self.summary = self.root / SUMMARY_FILE
        self.samples = self.root / SAMPLES_FILE
        self.last = self.checkpoint_file("last")
        self.best = self.checkpoint_file("best")

    def checkpoint_file(self, which: str) -> Path:
        """Where checkpoint `which` (last or best) is saved, whether or not it exists yet."""
        if which not in CHECKPOINTS:
            raise AnatomyError(f"checkpoint {which!r} is not valid: expected 'last' or 'best'")
        return self.root / f"{which}{CHECKPOINT_SUFFIX}"

    def checkpoint(self, which: str) -> Path:
        """Checkpoint `which`, which must exist."""
        path = self.checkpoint_file(which)
        if not path.is_file():
            raise AnatomyError(f"{path}: no such checkpoint (has this run trained yet?)")
        return path

    def weights_file(self, which: str) -> Path:
        """Where checkpoint `which`'s weights alone are shipped (float16), whether or not they are."""
        return self.checkpoint_file(which).with_suffix(WEIGHTS_SUFFIX)

    def model_file(self, which: str) -> Path | None:
        """The file that generation reads checkpoint `which`'s model from: the checkpoint itself
        if the run has it, else its shipped float16 weights (a reference run's checkpoints are not
        committed); None when the run has neither."""
        for path in (self.checkpoint_file(which), self.weights_file(which)):
            if path.is_file():
                return path
        return None

    def exam(self, name: str) -> Path:
        """Where this run's result of exam `name` lives."""
        return exam_result_path(self.root, name)

    def previous_settings(self) -> dict | None:
        """The settings of the run already in this folder, if any (from config.json or last.pt)."""
        if self.config.is_file():
            return run_settings(read_run_config(self.config))
        if self.last.is_file():
            return load_checkpoint(self.last).get("settings")
        return None

    def locked(self):
        """Hold this folder's lock: one trainer per run folder. A second one waits for the first
        to stop, then finds the run finished or resumes it; a killed holder releases it at once."""
        return held_lock(
            self.root,
            on_wait=lambda: print(
                f"{self.root}: another trainer is writing this folder; waiting for it to stop", flush=True
            ),
        )

    def remove_leftovers(self) -> None:
        """Temporary files of writes that were killed half way (a SIGKILL during torch.save).
        Only while holding the lock: then no other trainer can be writing them."""
        for path in (self.config, self.metrics, *self.layer_logs, self.summary, self.last, self.best):
            remove_stale_temporaries(path)

    def clear(self) -> None:
        for path in (self.summary, self.last, self.best, self.metrics, *self.layer_logs, self.config, self.samples):
            path.unlink(missing_ok=True)

    def write_config(self, resolved: dict) -> None:
        with naming_a_full_disk(self.config):
            write_json(self.config, resolved)

    def write_summary(self, summary: dict) -> None:
        with naming_a_full_disk(self.summary):
            write_json(self.summary, summary)

    def write_metrics(self, rows: list[dict]) -> None:
        write_lines(self.metrics, rows)

    def append_metric(self, row: dict) -> None:
        append_line(self.metrics, row)

    def write_grad_norms(self, rows: list[dict]) -> None:
        write_lines(self.grad_norms, rows)

    def append_grad_norms(self, row: dict) -> None:
        append_line(self.grad_norms, row)

    @property
    def layer_logs(self) -> tuple[Path, Path, Path]:
        """The logs of one row per logged step: gradient norms, experts' shares, largest logits."""
        return tuple(self.root / name for name in LAYER_LOG_FILES)


def write_lines(path: Path, rows: list[dict]) -> None:
    """A .jsonl file, whole and atomically: one JSON object per line."""
    with naming_a_full_disk(path), atomic_path(path) as tmp:
        tmp.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")


def append_line(path: Path, row: dict) -> None:
    # Appending is not atomic, but last.pt holds every row: a resume rewrites the file whole.
    with naming_a_full_disk(path), open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(row) + "\n")


# ---------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------

# What any reader of a checkpoint needs (generation: nothing more), and what resuming needs too.
CHECKPOINT_KEYS = ("model", "config", "vocab")
RESUME_KEYS = (*CHECKPOINT_KEYS, "optimizer", "rng", "state")


def save_checkpoint(path: Path, state: dict) -> None:
    import torch  # here, not at the top: reading the small files needs no torch

    with naming_a_full_disk(path), atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: Path, needs: tuple[str, ...] = CHECKPOINT_KEYS) -> dict:
    import torch

    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a truncated or foreign file: say which and why
        raise AnatomyError(f"{path}: cannot read this checkpoint ({type(err).__name__}: {err})") from None
    if not isinstance(saved, dict):
        missing = list(needs)
    else:
        missing = [key for key in needs if key not in saved]
        if not missing and not (isinstance(saved["config"], dict) and "model" in saved["config"]):
            missing = ["config.model"]
    if missing:  # a file of someone else's torch.save, not a KeyError later
        raise AnatomyError(f"{path}: not a checkpoint written by `anatomy train` (missing {', '.join(missing)})")
    return saved


# ---------------------------------------------------------------------------------------------
# The run's settings, and what a folder that already holds a run means for a new start
# ---------------------------------------------------------------------------------------------


def run_precision(run_dir: str | Path) -> str:
    """The precision a run trained in (config.json; fp32 for runs made before the setting), which
    its evaluation, generation and exams use too."""
    config = RunFolder(run_dir).config
    if not config.is_file():
        return "fp32"
    return read_run_config(config)["train"].get("precision", "fp32")


# Settings added after runs were shipped, with what every run made before them trained with: a
# run's config.json without one is judged with this value, and resumes as it always did.
LATER_TRAIN_SETTINGS = {
    "precision": "fp32",  # it changes the numbers, so it is a setting
    # it changes no number, but whether the folder holds max_logits.jsonl: a run asked to log them
    # is not the finished one that did not
    "log_max_logits": False,
    "beta2": TrainConfig.beta2,  # the optimizer recipe
    "decay_matrices_only": TrainConfig.decay_matrices_only,
}


def train_settings(train: dict) -> dict:
    """The training settings that define a run's numbers (all but RUNTIME_KEYS)."""
    train = {k: v for k, v in train.items() if k not in RUNTIME_KEYS}
    return {**LATER_TRAIN_SETTINGS, **train}


def run_settings(resolved: dict) -> dict:
    """What defines a run's numbers: model, training and data, but not where or how it runs
    (RUNTIME_KEYS) nor its tags (labels, not settings)."""
    train = train_settings(resolved["train"])
    return {"preset": resolved["preset"], "model": resolved["model"], "train": train, "data": resolved["data"]}


def settings_difference(
    before: dict, after: dict, prefix: str = "", labels: tuple[str, str] = ("in the folder", "asked for")
) -> str:
    """The first few fields that differ, e.g. "model.n_layer: 2 in the folder, 3 asked for"."""
    differences = []
    for key in sorted(set(before) | set(after), key=str):
        old, new = before.get(key), after.get(key)
        if isinstance(old, dict) and isinstance(new, dict):
            if old != new:
                differences.append(settings_difference(old, new, f"{prefix}{key}.", labels))
        elif old != new:
            differences.append(f"{prefix}{key}: {old!r} {labels[0]}, {new!r} {labels[1]}")
    return "; ".join(differences[:3]) + ("; ..." if len(differences) > 3 else "")


def check_checkpoint_belongs(path: Path, saved_config: dict, run_config: dict, config_path: Path) -> None:
    """A checkpoint's own config ({"model": ..., "train": ...}; weights files: the model alone)
    against the run's config.json: a checkpoint copied in from another run would be resumed (torch's
    "size mismatch" traceback) or sampled (without a word) as if it were this run's."""
    ours: dict[str, Any] = {"model": saved_config["model"]}
    theirs: dict[str, Any] = {"model": run_config["model"]}
    if isinstance(saved_config.get("train"), dict):
        ours["train"], theirs["train"] = train_settings(saved_config["train"]), train_settings(run_config["train"])
    if ours != theirs:
        difference = settings_difference(ours, theirs, labels=("in the checkpoint", f"in {config_path.name}"))
        raise AnatomyError(
            f"{path}: this checkpoint is not from the run that {config_path} describes ({difference}); "
            "move it out of the folder"
        )


def with_corpus_identity(previous: dict, current: dict) -> dict:
    """A run from before runs recorded their corpus's name and digest (the shipped reference runs)
    is judged by the corpus sizes alone, as it always was: it takes the current name and digest."""
    data = {key: current["data"].get(key) for key in ("corpus", "digest") if key not in previous["data"]}
    return {**previous, "data": {**previous["data"], **data}}


# Where a corpus lies, and the name that path gives it, are not what a run read: the same tokens
# given by another path (./results/corpus, an absolute path, a link) make the same run. Its digest
# and sizes say which text it is (a run from before digests: its sizes, with_corpus_identity).
CORPUS_LOCATION_KEYS = ("dir", "corpus")


def without_corpus_location(settings: dict) -> dict:
    return {**settings, "data": {k: v for k, v in settings["data"].items() if k not in CORPUS_LOCATION_KEYS}}


def settle_folder(run: RunFolder, resolved: dict, restart_on_change: bool) -> dict | None:
    """Check what the folder already holds against the run asked for. Returns the summary of a
    finished run with the same settings (nothing left to do), or None: train, fresh or resumed.
    A run whose settings cannot be checked counts as different: nothing is trusted unchecked."""
    previous, current = run.previous_settings(), without_corpus_location(run_settings(resolved))
    if previous is not None:
        previous = without_corpus_location(with_corpus_identity(previous, current))
    if previous is None and run.summary.is_file():
        problem = "holds summary.json, but neither config.json nor last.pt to tell which settings made it"
    elif previous is not None and previous != current:
        problem = f"holds a run with different settings ({settings_difference(previous, current)})"
    else:
        problem = None
    if problem is not None:
        if not restart_on_change:
            raise AnatomyError(
                f"{run.root}: this folder {problem}; use another --out, delete the folder, or pass --restart-on-change"
            )
        print(f"{run.root}: this folder {problem}; starting over", flush=True)
        run.clear()
        return None
    if not run.summary.is_file():
        return None
    summary = read_summary(run.summary)
    if not run.config.is_file():  # last.pt vouched for the settings: put back what was lost
        run.write_config(resolved)
    print(f"{run.root}: already finished, nothing to do")
    return summary
