"""RoPE's exam: length extrapolation. `python -m anatomy exam length results/runs/llama/seed42`

A model is trained on windows of ctx_len characters. Can it read further? The exam evaluates
validation windows of 1x, 2x, 4x and 8x that length and reports the loss by position: the mean
cross-entropy of predicting character t+1 from characters 0..t of the window, in buckets that
double from the training length (for ctx_len 128: 0-127, 128-255, 256-511, 512-1023).

Learned positions are a table of ctx_len rows: past its end there is nothing to look up, so
those buckets are recorded as impossible, with the reason, not as an error. Positions inside
the table are still measured in the longer windows: a causal model's prediction at position t
depends only on characters 0..t, so reading the first ctx_len characters gives those numbers
exactly. RoPE has no table: it rotates by the position, whatever it is, so it runs on; whether
its loss holds up there is what the exam shows.

Writes RUN/exams/length.json; `anatomy collect` reads it with `read_rows` into the exam_length
table of anatomy/results/schema.sql.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from anatomy.data.batches import eval_starts, windows_at
from anatomy.training.devices import pick_device
from anatomy.errors import AnatomyError
from anatomy.exams import run_exam_output, write_result
from anatomy.generation.generate import load_model
from anatomy.model import MiniLM
from anatomy.precision import autocast
from anatomy.files.run_folder import RunFolder, check_value, read_json_object, read_run_config, read_summary
from anatomy.files.run_folder import run_precision
from anatomy.data.tokenizer import CharTokenizer, load_tokenized

DEFAULT_WINDOWS = [128, 256, 512, 1024]
DEFAULT_MAX_WINDOWS = 32
# Windows per forward pass: as many as make this many tokens, so a batch's logits
# (tokens x vocabulary floats) stay a few hundred MB at the chapter's vocabulary of ~3,500.
TOKENS_PER_BATCH = 8192

# column -> kind of the exam_length rows as length.json holds them (run_id comes from the caller)
ROW_FIELDS: dict[str, type] = {
    "window_len": int,
    "bucket_start": int,
    "bucket_end": int,
    "possible": bool,
    "reason": str,
    "loss": float,
    "predictions": int,
}
COLUMNS = ["run_id", "checkpoint", "ctx_len", *ROW_FIELDS]


# ---------------------------------------------------------------------------------------------
# Which positions, which windows
# ---------------------------------------------------------------------------------------------


def position_buckets(ctx_len: int, window_len: int) -> list[tuple[int, int]]:
    """(first, last) position of each bucket a window of `window_len` reaches, doubling from the
    training length: 0..ctx_len-1, ctx_len..2ctx_len-1, 2ctx_len..4ctx_len-1, ... The last bucket
    ends with the window."""
    buckets, start, end = [], 0, ctx_len
    while start < window_len:
        buckets.append((start, min(end, window_len) - 1))
        start, end = end, 2 * end
    return buckets


def readable_length(model: MiniLM, window_len: int) -> int:
    """How many positions of the window the model can read: all with RoPE, ctx_len with a table."""
    if model.pos_emb is None:
        return window_len
    return min(window_len, model.cfg.ctx_len)


# ---------------------------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------------------------


@torch.no_grad()
def position_losses(
    model: MiniLM, data: torch.Tensor, starts: np.ndarray, length: int, precision: str = "fp32"
) -> torch.Tensor:
    """Mean loss at each position 0..length-1 over the windows at `starts`: (length,) float64.

    Position t's loss is the cross-entropy of the character at t+1 given characters 0..t, in the
    run's own precision (anatomy/precision.py)."""
    model.eval()
    device = next(model.parameters()).device
    batch = max(1, TOKENS_PER_BATCH // length)
    total = torch.zeros(length, dtype=torch.float64)
    for i in range(0, len(starts), batch):
        x, y = windows_at(data, starts[i : i + batch], length)
        with autocast(precision, device):  # the loss itself in fp32 under bf16 too
            logits, _ = model(x.to(device))
            losses = F.cross_entropy(logits.transpose(1, 2), y.to(device), reduction="none")  # (B, length)
        total += losses.sum(dim=0).double().cpu()
    return total / len(starts)


def impossible_rows(window_len: int, buckets: list[tuple[int, int]], reason: str) -> list[dict[str, Any]]:
    return [
        {
            "window_len": window_len,
            "bucket_start": first,
            "bucket_end": last,
            "possible": False,
            "reason": reason,
            "loss": None,
            "predictions": 0,
        }
        for first, last in buckets
    ]


def window_rows(
    model: MiniLM, val: torch.Tensor, window_len: int, max_windows: int, precision: str = "fp32"
) -> list[dict[str, Any]]:
    """The rows of one window length: a loss per bucket, or why there is none."""
    ctx_len = model.cfg.ctx_len
    buckets = position_buckets(ctx_len, window_len)
    starts = eval_starts(len(val), window_len, max_windows)  # non-overlapping, spread over the split
    if len(starts) == 0:
        return impossible_rows(
            window_len,
            buckets,
            f"the val split holds {len(val)} tokens, too few for one window of {window_len} + the character after it",
        )
    readable = readable_length(model, window_len)
    means = position_losses(model, val, starts, readable, precision)
    rows = []
    for first, last in buckets:
        if last >= readable:
            rows += impossible_rows(window_len, [(first, last)], f"learned positions end at ctx_len {ctx_len}")
            continue
        rows.append(
            {
                "window_len": window_len,
                "bucket_start": first,
                "bucket_end": last,
                "possible": True,
                "reason": None,
                "loss": float(means[first : last + 1].mean()),
                "predictions": len(starts) * (last - first + 1),
            }
        )
    return rows


def length_exam(
    model: MiniLM, val_ids: np.ndarray, windows: list[int], max_windows: int, precision: str = "fp32"
) -> list[dict[str, Any]]:
    """Every row of the exam: for each window length, its position buckets."""
    val = torch.as_tensor(val_ids.astype(np.int64))
    return [row for window_len in windows for row in window_rows(model, val, window_len, max_windows, precision)]


def check_vocabulary(model_tokenizer: CharTokenizer, data_tokenizer: CharTokenizer, data_dir: Path) -> None:
    """The corpus must be tokenized with the checkpoint's vocabulary, or the ids mean other characters."""
    if model_tokenizer.chars != data_tokenizer.chars:
        raise AnatomyError(
            f"{data_dir}: its vocabulary ({data_tokenizer.vocab_size} characters) is not the "
            f"checkpoint's ({model_tokenizer.vocab_size}); give the corpus the run trained on (--data)"
        )


# ---------------------------------------------------------------------------------------------
# length.json, and reading it back
# ---------------------------------------------------------------------------------------------


def read_rows(path: Path, run_id: str) -> list[dict[str, Any]]:
    """The exam_length rows of one run's length.json, each field checked."""
    path = Path(path)
    data = read_json_object(path, "the length exam's results, written by `anatomy exam length`")
    for name, kind in (("checkpoint", str), ("ctx_len", int), ("rows", list)):
        if name not in data:
            raise AnatomyError(f"{path}: no field '{name}'")
        if not isinstance(data[name], kind) or isinstance(data[name], bool):
            raise AnatomyError(f"{path}: field '{name}' must be a {kind.__name__}, got {data[name]!r}")
    if data["checkpoint"] not in ("best", "last"):
        raise AnatomyError(f"{path}: field 'checkpoint' must be 'best' or 'last', got {data['checkpoint']!r}")
    rows, seen = [], set()
    for i, record in enumerate(data["rows"]):
        row = checked_row(record, path, i)
        key = (row["window_len"], row["bucket_start"])
        if key in seen:
            raise AnatomyError(f"{path}: rows[{i}]: window_len {key[0]}, bucket_start {key[1]} appears twice")
        seen.add(key)
        rows.append({"run_id": run_id, "checkpoint": data["checkpoint"], "ctx_len": data["ctx_len"], **row})
    return rows


def checked_row(record: Any, path: Path, i: int) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise AnatomyError(f"{path}: rows[{i}] must be an object, got {record!r}")
    for name, kind in ROW_FIELDS.items():
        if name not in record:
            raise AnatomyError(f"{path}: rows[{i}] has no field '{name}'")
        check_value(record[name], kind, path, f"rows[{i}].{name}")
    row = {name: record[name] for name in ROW_FIELDS}
    if row["possible"] and (row["loss"] is None or row["predictions"] is None):
        raise AnatomyError(f"{path}: rows[{i}] is possible but has no 'loss' or 'predictions'")
    if not row["possible"] and (row["reason"] is None or row["loss"] is not None):
        raise AnatomyError(f"{path}: rows[{i}] is not possible: it needs a 'reason' and a null 'loss'")
    if row["loss"] is not None:
        row["loss"] = float(row["loss"])
    return row


# ---------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, help="a run folder written by `anatomy train`")
    parser.add_argument("--checkpoint", default="best", choices=["best", "last"], help="default %(default)s")
    parser.add_argument(
        "--data",
        type=Path,
        default=Path("results/corpus"),
        help="the tokenized corpus whose val split is read (default %(default)s)",
    )
    parser.add_argument(
        "--windows",
        type=int,
        nargs="+",
        default=DEFAULT_WINDOWS,
        metavar="N",
        help="window lengths in characters (default 128 256 512 1024)",
    )
    parser.add_argument(
        "--max-windows",
        type=int,
        default=DEFAULT_MAX_WINDOWS,
        help="at most this many windows per length, spread over the split (default %(default)s)",
    )
    parser.add_argument("--device", default="auto", help="auto (cuda > mps > cpu, the default), cpu, cuda, mps")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--out", type=Path, help="where to write the JSON (default RUN_DIR/exams/length.json)")


def print_table(result: dict[str, Any]) -> None:
    print(f"loss by position, {result['checkpoint']} checkpoint, trained on ctx_len {result['ctx_len']}")
    print(f"{'window':>7}{'positions':>12}{'loss':>8}{'predictions':>13}")
    for row in result["rows"]:
        positions = f"{row['bucket_start']}-{row['bucket_end']}"
        if row["possible"]:
            print(f"{row['window_len']:>7}{positions:>12}{row['loss']:>8.3f}{row['predictions']:>13,}")
        else:
            print(f"{row['window_len']:>7}{positions:>12}{'-':>8}{'':>13}  {row['reason']}")


def diverged_without_weights(run_dir: Path, checkpoint: str) -> dict[str, Any] | None:
    """A run that diverged before its first evaluation has no best weights: that is its result
    (every bucket impossible, with the reason), not an error that stops a workflow."""
    run = RunFolder(run_dir)
    if not run.summary.is_file() or run.model_file(checkpoint) is not None:
        return None
    summary = read_summary(run.summary)
    if not summary.get("diverged"):
        return None
    return {"step": summary.get("diverged_step"), "ctx_len": read_run_config(run.config)["model"]["ctx_len"]}


def run(args: argparse.Namespace) -> int:
    for option, value in [*(("--windows", n) for n in args.windows), ("--max-windows", args.max_windows)]:
        if value < 1:
            raise AnatomyError(f"{option} {value} is not valid: expected at least 1")
    out = run_exam_output(args, "length")
    if args.threads:
        torch.set_num_threads(args.threads)
    if (diverged := diverged_without_weights(args.run_dir, args.checkpoint)) is not None:
        reason = f"the run diverged at step {diverged['step']}, before any {args.checkpoint} weights were saved"
        rows = [
            row
            for window_len in dict.fromkeys(args.windows)
            for row in impossible_rows(window_len, position_buckets(diverged["ctx_len"], window_len), reason)
        ]
        write_result(out, {"checkpoint": args.checkpoint, "ctx_len": diverged["ctx_len"], "rows": rows}, print_table)
        return 0
    model, model_tokenizer = load_model(args.run_dir, args.checkpoint)
    data_tokenizer, _, val_ids = load_tokenized(args.data)
    check_vocabulary(model_tokenizer, data_tokenizer, args.data)
    model.to(pick_device(args.device))
    windows = list(dict.fromkeys(args.windows))
    result = {
        "checkpoint": args.checkpoint,
        "ctx_len": model.cfg.ctx_len,
        "pos_type": model.cfg.pos_type,
        "max_windows": args.max_windows,
        "val_tokens": len(val_ids),
        "precision": run_precision(args.run_dir),
        "rows": length_exam(model, val_ids, windows, args.max_windows, run_precision(args.run_dir)),
    }
    write_result(out, result, print_table)
    return 0
