"""The run folder: every file in it, its checkpoints, and the rules for starting again.

`anatomy train` writes one run into one folder; generating, collecting, the exams and shipping
read it back. All of them find its files through `RunFolder`, so each name is spelled once:

    config.json        the settings (preset, model, train, data, tags), written before training
    metrics.jsonl      one line per evaluation: losses, learning rate, tokens seen, time
    grad_norms.jsonl   each block's gradient norm at the logged steps (name: anatomy/grad_norms.py)
    last.pt, best.pt   checkpoints: the latest evaluation, and the best validation loss so far
    summary.json       written last: its presence means the run is finished
    samples.json       generated text (`anatomy generate --out`)
    exams/NAME.json    the run's exam results (name: anatomy/exams/__init__.py)

Starting a run in a folder that already holds one is safe: the same settings resume it (or find
it finished), other settings are refused unless asked to start over (`settle_folder`). What
counts as "the same settings" is `run_settings`: what defines the numbers, not where they run.

A write that finds the disk full is one line naming the file (`naming_a_full_disk`, in
anatomy/atomic.py with the writes); the writes are atomic, so what was there before is still whole.

No torch at import: collecting and the dashboard read run folders too; only checkpoints need it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from anatomy.atomic import atomic_path, naming_a_full_disk, remove_stale_temporaries, write_json
from anatomy.atomic import readable_bytes  # noqa: F401 (the trainer imports it from here)
from anatomy.errors import AnatomyError
from anatomy.exams import exam_result_path
from anatomy.grad_norms import GRAD_NORMS_FILE
from anatomy.locks import held_lock
from anatomy.run_files import read_run_config, read_summary

CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
SUMMARY_FILE = "summary.json"
SAMPLES_FILE = "samples.json"
CHECKPOINTS = ("last", "best")  # each saved as NAME.pt
CHECKPOINT_SUFFIX = ".pt"


class RunFolder:
    """Paths of one run, and the few rules about them (summary.json last = finished)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)
        self.config = self.root / CONFIG_FILE
        self.metrics = self.root / METRICS_FILE
        self.grad_norms = self.root / GRAD_NORMS_FILE
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
        for path in (self.config, self.metrics, self.grad_norms, self.summary, self.last, self.best):
            remove_stale_temporaries(path)

    def clear(self) -> None:
        for path in (self.summary, self.last, self.best, self.metrics, self.grad_norms, self.config, self.samples):
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


# Where and how a run runs, not what it computes: these may change between a kill and a resume
RUNTIME_KEYS = ("device", "threads", "compile")


def train_settings(train: dict) -> dict:
    """The training settings that define a run's numbers (all but RUNTIME_KEYS)."""
    train = {k: v for k, v in train.items() if k not in RUNTIME_KEYS}
    # Precision changes the numbers, so it is a setting; runs made before it existed were fp32.
    return {"precision": "fp32", **train}


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


def settle_folder(run: RunFolder, resolved: dict, restart_on_change: bool) -> dict | None:
    """Check what the folder already holds against the run asked for. Returns the summary of a
    finished run with the same settings (nothing left to do), or None: train, fresh or resumed.
    A run whose settings cannot be checked counts as different: nothing is trusted unchecked."""
    previous, current = run.previous_settings(), run_settings(resolved)
    if previous is not None:
        previous = with_corpus_identity(previous, current)
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
