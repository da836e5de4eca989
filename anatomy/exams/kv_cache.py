"""GQA's exam: what the KV cache costs and what it buys. `python -m anatomy exam kv_cache RUN_DIR`

Generating one character at a time, a model keeps the keys and values of every position so far
(the KV cache) instead of recomputing them. Its size is

    2 (k and v) x n_layer x n_kv_head x head_dim x tokens x bytes per value

so grouped-query attention, which shares each key/value head between several query heads,
shrinks it by n_head / n_kv_head. The exam measures, for one run:

- the cache's bytes, from the real cache tensors after 1, 512 and 2048 positions, next to the
  formula (they must agree), and the formula at LLaMA scale, where it decides what fits on a GPU;
- generation time with the cache and without it (the whole context recomputed for every new
  character), after contexts of 128, 512 and 2048 characters.

Timing starts with the context's characters in the window and no cache: the cached run first
reads the context once (prefill), then one character per step; the recomputing run reads the
whole window at every step. A RoPE model may read past its training length; learned positions
end at ctx_len, so longer contexts are skipped (a note, not a row), and within ctx_len the window
jumps forward by half once full, as `anatomy generate` does.

It runs in fp32 whatever the run's precision: the cache's bytes are the formula's at 4 bytes per
value, which is what the MHA, GQA and MQA runs are compared at (under bf16 autocast every
cached value would be 2 bytes, halving each row alike).

Writes RUN/exams/kv_cache.json; `anatomy collect` reads it with `read_rows` into the
exam_kv_cache and exam_kv_timing tables, and `scale_rows` into exam_kv_scale.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from anatomy.training.devices import pick_device, sync
from anatomy.config import kv_cache_bytes as cache_bytes
from anatomy.errors import AnatomyError
from anatomy.exams import run_exam_output, write_result
from anatomy.generation.generate import DEFAULT_TEMPERATURE, load_model, pick_next, window_start
from anatomy.model import KVCache, MiniLM
from anatomy.files.run_folder import check_value, read_json_object

DEFAULT_TOKENS = [1, 512, 2048]
DEFAULT_CONTEXTS = [128, 512, 2048]
DEFAULT_CHARS = 32
DEFAULT_ROUNDS = 3
GIB = 2**30

# The chapter's LLaMA-scale estimate: a 7B-class model (LLaMA 2 7B's shape) at a 128k context,
# 16-bit values, with a key/value head per query head (MHA) against 8 shared ones (GQA).
LLAMA_7B = {"n_layer": 32, "head_dim": 128, "tokens": 131072, "element_bytes": 2}
LLAMA_7B_KV_HEADS = {"7B-class, 32 KV heads (MHA)": 32, "7B-class, 8 KV heads (GQA)": 8}

# column -> kind of the rows as kv_cache.json holds them (run_id and n_kv_head come from the file)
CACHE_FIELDS: dict[str, type] = {"tokens": int, "measured_bytes": int, "formula_bytes": int}
TIMING_FIELDS: dict[str, type] = {"context": int, "chars": int, "cached": bool, "seconds": float, "chars_per_s": float}
CACHE_COLUMNS = ["run_id", "n_kv_head", *CACHE_FIELDS]
TIMING_COLUMNS = ["run_id", "n_kv_head", *TIMING_FIELDS]


# ---------------------------------------------------------------------------------------------
# The formula, and what it says at LLaMA scale
# ---------------------------------------------------------------------------------------------


def scale_rows() -> list[dict[str, Any]]:
    """The exam_kv_scale rows: a 7B-class model's cache at 128k tokens, MHA against GQA."""
    return [
        {
            "name": name,
            "n_layer": LLAMA_7B["n_layer"],
            "n_kv_head": n_kv_head,
            "head_dim": LLAMA_7B["head_dim"],
            "tokens": LLAMA_7B["tokens"],
            "element_bytes": LLAMA_7B["element_bytes"],
            "bytes": cache_bytes(
                LLAMA_7B["n_layer"], n_kv_head, LLAMA_7B["head_dim"], LLAMA_7B["tokens"], LLAMA_7B["element_bytes"]
            ),
        }
        for name, n_kv_head in LLAMA_7B_KV_HEADS.items()
    ]


# ---------------------------------------------------------------------------------------------
# Measuring the real cache
# ---------------------------------------------------------------------------------------------


def reach(model: MiniLM) -> int | None:
    """The most positions the model can read: ctx_len with learned positions, no limit with RoPE."""
    return model.cfg.ctx_len if model.pos_emb is not None else None


def context_ids(model: MiniLM, length: int, seed: int = 0) -> list[int]:
    """`length` characters of the model's vocabulary, drawn at random: the cache's size and the
    time per step depend on how many there are, not on which."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.cfg.vocab_size, (length,), generator=generator).tolist()


def element_bytes(model: MiniLM) -> int:
    return next(model.parameters()).element_size()


@torch.inference_mode()
def measured_bytes(model: MiniLM, tokens: int) -> int:
    """KVCache.nbytes of the cache the model builds after reading `tokens` positions."""
    device = next(model.parameters()).device
    ids = torch.tensor([context_ids(model, tokens)], device=device)
    _, cache = model.forward_cached(ids)
    return cache.nbytes()


def cache_rows(model: MiniLM, token_counts: list[int]) -> tuple[list[dict[str, Any]], list[str]]:
    """(a row per token count: measured and formula bytes, notes on the counts skipped)."""
    cfg, limit = model.cfg, reach(model)
    rows, notes = [], []
    for tokens in token_counts:
        if limit is not None and tokens > limit:
            notes.append(f"cache after {tokens} positions: skipped, learned positions end at ctx_len {limit}")
            continue
        measured = measured_bytes(model, tokens)
        formula = cache_bytes(cfg.n_layer, cfg.n_kv_head, cfg.head_dim, tokens, element_bytes(model))
        if measured != formula:  # not bad input: the model holds more (or less) than it should
            raise RuntimeError(
                f"the KV cache after {tokens} positions holds {measured} bytes, but the formula says {formula}"
            )
        rows.append({"tokens": tokens, "measured_bytes": measured, "formula_bytes": formula})
    return rows, notes


# ---------------------------------------------------------------------------------------------
# Timing generation with and without the cache
# ---------------------------------------------------------------------------------------------


@torch.inference_mode()
def generate_ids(model: MiniLM, context: list[int], chars: int, use_cache: bool, seed: int = 0) -> list[int]:
    """`chars` new ids after `context`, as anatomy.generation.generate.stream makes them, but with the window
    limited by what the model can read (`reach`) rather than by its training length."""
    limit = reach(model)
    device = next(model.parameters()).device
    generator = torch.Generator(device=device).manual_seed(seed)
    ids = list(context)
    cache: KVCache | None = None
    cache_start = None
    for _ in range(chars):
        start = 0 if limit is None else window_start(len(ids), limit)
        if not use_cache:  # the whole window, every step
            logits, _ = model(torch.tensor([ids[start:]], device=device))
        elif cache is None or start != cache_start:  # read the window into a fresh cache
            logits, cache = model.forward_cached(torch.tensor([ids[start:]], device=device))
            cache_start = start
        else:  # only the newest character goes through the model
            logits, cache = model.forward_cached(torch.tensor([ids[-1:]], device=device), cache)
        ids.append(pick_next(logits[0, -1], DEFAULT_TEMPERATURE, generator))
    return ids[len(context) :]


def time_context(model: MiniLM, context: int, chars: int, rounds: int) -> list[dict[str, Any]]:
    """Two rows for one context, cached and recomputed: the median over rounds that alternate
    the two, so a machine that slows down mid-way slows both alike."""
    device = next(model.parameters()).device
    ids = context_ids(model, context)
    for use_cache in (True, False):  # warm-up: the first calls pay for allocations
        generate_ids(model, ids, min(chars, 2), use_cache)
    times: dict[bool, list[float]] = {True: [], False: []}
    for _ in range(rounds):
        for use_cache in (True, False):
            sync(device)
            start = time.perf_counter()
            generate_ids(model, ids, chars, use_cache)
            sync(device)
            times[use_cache].append(time.perf_counter() - start)
    rows = []
    for use_cache, samples in times.items():
        seconds = statistics.median(samples)
        rows.append(
            {
                "context": context,
                "chars": chars,
                "cached": use_cache,
                "seconds": seconds,
                "chars_per_s": chars / seconds,
            }
        )
    return rows


def timing_rows(model: MiniLM, contexts: list[int], chars: int, rounds: int) -> tuple[list[dict[str, Any]], list[str]]:
    """(two rows per context the model can read, notes on the contexts skipped)."""
    limit = reach(model)
    rows, notes = [], []
    for context in contexts:
        if limit is not None and context > limit:
            notes.append(f"timing after a context of {context}: skipped, learned positions end at ctx_len {limit}")
            continue
        rows += time_context(model, context, chars, rounds)
    return rows, notes


# ---------------------------------------------------------------------------------------------
# kv_cache.json, and reading it back
# ---------------------------------------------------------------------------------------------


def read_rows(path: Path, run_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(exam_kv_cache rows, exam_kv_timing rows) of one run's kv_cache.json, each field checked."""
    path = Path(path)
    data = read_json_object(path, "the KV-cache exam's results, written by `anatomy exam kv_cache`")
    n_kv_head = required(data, "n_kv_head", int, path)
    cache = checked_rows(data, "cache", CACHE_FIELDS, ("tokens",), path)
    timing = checked_rows(data, "timing", TIMING_FIELDS, ("context", "cached"), path)
    return (
        [{"run_id": run_id, "n_kv_head": n_kv_head, **row} for row in cache],
        [{"run_id": run_id, "n_kv_head": n_kv_head, **row} for row in timing],
    )


def required(record: dict[str, Any], name: str, kind: type, path: Path, where: str = "") -> Any:
    """A field that must be there, of its kind, and not null (every column here is NOT NULL).
    `where` names the row it is in, e.g. "timing[2]"."""
    label = f"{where}.{name}" if where else name
    if record.get(name) is None:
        raise AnatomyError(f"{path}: field '{label}' is missing or null")
    check_value(record[name], kind, path, label)
    return float(record[name]) if kind is float else record[name]


def checked_rows(
    data: dict[str, Any], key: str, fields: dict[str, type], unique: tuple[str, ...], path: Path
) -> list[dict[str, Any]]:
    records = data.get(key)
    if not isinstance(records, list):
        raise AnatomyError(f"{path}: field '{key}' must be a list of rows, got {records!r}")
    rows, seen = [], set()
    for i, record in enumerate(records):
        if not isinstance(record, dict):
            raise AnatomyError(f"{path}: {key}[{i}] must be an object, got {record!r}")
        row = {name: required(record, name, kind, path, f"{key}[{i}]") for name, kind in fields.items()}
        identity = tuple(row[name] for name in unique)
        if identity in seen:
            raise AnatomyError(f"{path}: {key}[{i}]: {dict(zip(unique, identity))} appears twice")
        seen.add(identity)
        rows.append(row)
    return rows


# ---------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, help="a run folder written by `anatomy train`")
    parser.add_argument("--checkpoint", default="best", choices=["best", "last"], help="default %(default)s")
    parser.add_argument(
        "--tokens",
        type=int,
        nargs="+",
        default=DEFAULT_TOKENS,
        metavar="N",
        help="measure the cache after this many positions (default 1 512 2048)",
    )
    parser.add_argument(
        "--contexts",
        type=int,
        nargs="+",
        default=DEFAULT_CONTEXTS,
        metavar="N",
        help="time generation after contexts of this many characters (default 128 512 2048)",
    )
    parser.add_argument(
        "--chars", type=int, default=DEFAULT_CHARS, help="characters generated per timing (default %(default)s)"
    )
    parser.add_argument(
        "--rounds", type=int, default=DEFAULT_ROUNDS, help="timings per variant, median kept (default %(default)s)"
    )
    parser.add_argument("--device", default="auto", help="auto (cuda > mps > cpu, the default), cpu, cuda, mps")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--out", type=Path, help="where to write the JSON (default RUN_DIR/exams/kv_cache.json)")


def check_arguments(args: argparse.Namespace) -> None:
    counts = [
        *(("--tokens", n) for n in args.tokens),
        *(("--contexts", n) for n in args.contexts),
        ("--chars", args.chars),
        ("--rounds", args.rounds),
    ]
    for option, value in counts:
        if value < 1:
            raise AnatomyError(f"{option} {value} is not valid: expected at least 1")


def print_tables(result: dict[str, Any]) -> None:
    print(
        f"KV cache of {result['n_kv_head']} kv heads x {result['n_layer']} layers x head_dim {result['head_dim']}, "
        f"{result['element_bytes']} bytes per value"
    )
    print(f"{'tokens':>8}{'measured bytes':>16}{'formula bytes':>15}")
    for row in result["cache"]:
        print(f"{row['tokens']:>8}{row['measured_bytes']:>16,}{row['formula_bytes']:>15,}")
    print(f"\ngenerating {result['chars']} characters on {result['device']}, median of {result['rounds']} rounds")
    print(f"{'context':>8}{'cached s':>10}{'recomputed s':>14}{'cached chars/s':>16}{'recomputed chars/s':>20}")
    by_context: dict[int, dict[bool, dict]] = {}
    for row in result["timing"]:
        by_context.setdefault(row["context"], {})[row["cached"]] = row
    for context, pair in by_context.items():
        cached, recomputed = pair[True], pair[False]
        print(
            f"{context:>8}{cached['seconds']:>10.3f}{recomputed['seconds']:>14.3f}"
            f"{cached['chars_per_s']:>16,.0f}{recomputed['chars_per_s']:>20,.0f}"
        )
    for note in result["skipped"]:
        print(f"note: {note}")
    print("\nat LLaMA scale (the same formula)")
    for row in result["scale"]:
        print(f"  {row['name']}: {row['bytes'] / GIB:g} GiB at {row['tokens']:,} tokens")


def run(args: argparse.Namespace) -> int:
    check_arguments(args)
    out = run_exam_output(args, "kv_cache")
    if args.threads:
        torch.set_num_threads(args.threads)
    model, _ = load_model(args.run_dir, args.checkpoint)
    device = pick_device(args.device)
    model.to(device)
    cfg = model.cfg
    cache, cache_notes = cache_rows(model, list(dict.fromkeys(args.tokens)))
    timing, timing_notes = timing_rows(model, list(dict.fromkeys(args.contexts)), args.chars, args.rounds)
    result = {
        "checkpoint": args.checkpoint,
        "n_layer": cfg.n_layer,
        "n_head": cfg.n_head,
        "n_kv_head": cfg.n_kv_head,
        "head_dim": cfg.head_dim,
        "ctx_len": cfg.ctx_len,
        "pos_type": cfg.pos_type,
        "element_bytes": element_bytes(model),
        "device": str(device),
        "threads": torch.get_num_threads(),
        "chars": args.chars,
        "rounds": args.rounds,
        "temperature": DEFAULT_TEMPERATURE,
        "cache": cache,
        "timing": timing,
        "skipped": cache_notes + timing_notes,
        "scale": scale_rows(),
    }
    write_result(out, result, print_tables)
    return 0
