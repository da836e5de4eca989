"""Reading the small files of a run folder (its JSON files, and metrics.jsonl, the loss curve),
checked rather than trusted.

`summary.json` says a run finished; training, generation and collecting all act on what it
holds. A value of the wrong type must not slip through: the string "false" is truthy in
Python, so an unchecked `"diverged": "false"` would read as a diverged run. Every reader
goes through here, so they all agree on what a valid file is. No torch: collecting and the
dashboard use this too.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from anatomy.errors import AnatomyError

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
# what `run_settings` needs from config.json
CONFIG_SECTIONS = ("model", "train", "data")


def read_json_file(path: Path) -> Any:
    """The parsed file, or one line naming the file and what is wrong with it."""
    try:
        # Python's json reads the NaN / Infinity tokens that a diverged run's summary may hold
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise AnatomyError(f"{path}: not valid JSON ({err.msg} at line {err.lineno})") from None
    except UnicodeDecodeError as err:
        raise AnatomyError(f"{path}: not UTF-8 text (bad byte at offset {err.start})") from None


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """A JSON file that must hold one object; `what` says what the object should be."""
    data = read_json_file(path)
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
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
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
