"""One training, one run: run folders that repeat another's training are collected once.

The workflow refuses to declare a training twice (workflow/rules/common.smk), but a folder of runs
can still hold a repeat: runs of an experiment declared in an older version, restored beside the
newer ones, or trained by hand. The studies read runs by their settings, so a repeat would count
as a seed it is not: it would pull the mean toward its seed and narrow the interval. Collect keeps
one run of each training, the one whose experiment is declared (else the first by name), and says
which it left out.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from anatomy.config import ModelConfig, TrainConfig, settings_key, training_key
from anatomy.errors import AnatomyError
from anatomy.files.run_folder import RunFolder, read_run_config

# what tells one text from another in every run's config.json: the digest of its tokens where the
# run recorded one (a folder spelled two ways is one text), else its folder and sizes (the grid's
# runs predate the corpus's name and digest)
TEXT_FIELDS = ("dir", "vocab_size", "train_tokens", "val_tokens")


def training_of(folder: Path) -> tuple[str | None, str | None]:
    """The run's experiment and its training as a key (anatomy.config.training_key); a key of None
    where the config does not resolve, which reading the run then says in its own words."""
    try:
        config = read_run_config(RunFolder(folder).config)
        return (config.get("tags") or {}).get("experiment"), run_key(config, training_key)
    except (AnatomyError, KeyError, TypeError, AttributeError):
        return None, None


def settings_of(config: dict) -> str | None:
    """The run's training without its seed (anatomy.config.settings_key), from its config.json;
    None where the config does not resolve."""
    try:
        return run_key(config, settings_key)
    except (AnatomyError, KeyError, TypeError, AttributeError):
        return None


def run_key(config: dict, key: Callable[[ModelConfig, TrainConfig, str], str]) -> str:
    data = config.get("data") or {}
    text = json.dumps(
        {"digest": data["digest"]} if data.get("digest") else {field: data.get(field) for field in TEXT_FIELDS}
    )
    return key(ModelConfig.from_dict(config["model"]), TrainConfig.from_dict(config["train"]), text)


def repeated_trainings(folders: list[Path], runs_root: Path, declared: set[str]) -> dict[str, str]:
    """Run id -> the run id whose training it repeats, for every run collect leaves out."""
    kept: dict[str, str] = {}
    repeats = {}
    order = []
    for folder in folders:
        experiment, key = training_of(folder)
        order.append((experiment not in declared, folder.relative_to(runs_root).as_posix(), key))
    for _, run_id, key in sorted(order):  # declared experiments first, then by name
        if key is None:
            continue
        if key in kept:
            repeats[run_id] = kept[key]
        else:
            kept[key] = run_id
    return repeats


def repeats_note(repeats: dict[str, str]) -> str | None:
    """The line collect prints when it left repeats out (None: there were none)."""
    if not repeats:
        return None
    pairs = "; ".join(f"{run} repeats {kept}" for run, kept in sorted(repeats.items()))
    return (
        f"collect: counted once, as the first named: {pairs} (the same model, training settings, text and "
        "seed). Remove the repeat's folder to silence this."
    )
