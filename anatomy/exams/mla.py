"""MLA's exam: what each way of caching keys and values costs per character, and what it loses.
`python -m anatomy exam mla`

Generation keeps every past position's keys and values (the KV cache). MHA keeps a key and a
value per head, GQA per shared head, MQA one pair, and MLA (DeepSeek-V2) only a latent of
kv_latent numbers plus one shared rotated key of rope_dim. Per character and layer:

    mha  2 x n_head x head_dim      gqa  2 x n_head/2 x head_dim      mqa  2 x head_dim
    mla  kv_latent + rope_dim

A smaller cache is only worth it if the model stays as good, so the exam trains one cell of each
(the mini-LLaMA, MLA at latent widths 16, 32 and 64; 1000 steps, seed 42; each an ordinary run
folder, OUT/CELL, anatomy/exams/cells.py) and sets its best validation loss beside its cache.
The cache's bytes are measured from the cache tensors after `--tokens` positions and checked
against the formula (ModelConfig.kv_cache_bytes; they must agree), and generation with the cache
is timed (characters per second, the median of `--rounds`, after a context of `--context`), with
the best weights, in fp32. Each cell's measurements go to OUT/CELL/exams/mla.json; `anatomy
collect` reads them with `read_cells` into exam_mla.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

from anatomy.config import ModelConfig
from anatomy.errors import AnatomyError
from anatomy.exams.cells import add_cell_arguments, at_least_one, number, read_cell, train_cells
from anatomy.files.atomic import write_json
from anatomy.files.run_folder import exam_result_path, read_json_object

FOLDER = "mla"  # under results/exams/
DEFAULT_OUT = Path("results") / "exams" / FOLDER
HEAD_CELLS = ("mha", "gqa", "mqa")
DEFAULT_LATENTS = (16, 32, 64)
DEFAULT_STEPS = 1000
DEFAULT_SEED = 42
DEFAULT_TOKENS = 512
DEFAULT_CONTEXT = 128
DEFAULT_CHARS = 32
DEFAULT_ROUNDS = 3
OWN_SETTINGS = {"attn_type", "n_kv_head", "kv_latent"}

COLUMNS = [
    "cell",
    "attn_type",
    "n_kv_head",
    "kv_latent",
    "tokens",
    "measured_bytes",
    "formula_bytes",
    "bytes_per_char",
    "best_val_loss",
    "chars_per_s",
]


def cell_settings(cell: str, n_head: int) -> dict[str, Any]:
    """The model settings of a cell: mha, gqa, mqa, or mla_latentN."""
    heads = {"mha": n_head, "gqa": max(1, n_head // 2), "mqa": 1}
    if cell in heads:
        return {"attn_type": "mha", "n_kv_head": heads[cell]}
    if cell.startswith("mla_latent") and cell[len("mla_latent") :].isdigit():
        return {"attn_type": "mla", "n_kv_head": n_head, "kv_latent": int(cell[len("mla_latent") :])}
    raise AnatomyError(f"cell {cell!r} is not valid: expected mha, gqa, mqa or mla_latentN")


def measure(run_dir: Path, tokens: int, context: int, chars: int, rounds: int) -> dict[str, Any]:
    """The cache's bytes after `tokens` positions (tensors and formula, which must agree), and
    generation with the cache, characters per second, from the cell's best weights."""
    import torch

    # kv_cache's own helpers, and the loader it uses: the same cache and generation it measures
    from anatomy.exams.kv_cache import context_ids, element_bytes, generate_ids, load_model, measured_bytes

    model, _ = load_model(run_dir, "best")
    measured = measured_bytes(model, tokens)
    formula = model.kv_cache_bytes(tokens, element_bytes(model))
    if measured != formula:  # not bad input: the model caches more (or less) than it says
        raise RuntimeError(
            f"{run_dir}: the cache after {tokens} positions holds {measured} bytes, the formula says {formula}"
        )
    ids = context_ids(model, context)
    generate_ids(model, ids, 2, use_cache=True)  # warm-up: the first call pays for allocations
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        generate_ids(model, ids, chars, use_cache=True)
        times.append(time.perf_counter() - start)
    return {
        "tokens": tokens,
        "measured_bytes": measured,
        "formula_bytes": formula,
        "bytes_per_char": formula / tokens,
        "element_bytes": element_bytes(model),
        "context": context,
        "chars": chars,
        "rounds": rounds,
        "chars_per_s": chars / statistics.median(times),
        "threads": torch.get_num_threads(),
    }


def read_mla_cell(folder: Path) -> dict[str, Any]:
    """One exam_mla row: the cell's settings and best val, with its measurements (None until made)."""
    cell = read_cell(folder)
    model = cell["model"]
    path = exam_result_path(folder, FOLDER)
    measured = read_json_object(path, "the MLA exam's measurements") if path.is_file() else {}
    mla = model.get("attn_type") == "mla"
    return {
        "cell": folder.name,
        "attn_type": model.get("attn_type", "mha"),
        "n_kv_head": model["n_kv_head"],
        "kv_latent": model["kv_latent"] if mla else None,
        **{name: measured.get(name) for name in ("tokens", "measured_bytes", "formula_bytes", "bytes_per_char")},
        "best_val_loss": cell["best_val_loss"],
        "chars_per_s": measured.get("chars_per_s"),
    }


def read_cells(root: Path) -> list[dict[str, Any]]:
    root = Path(root)
    if not root.is_dir():
        return []
    return [read_mla_cell(path) for path in sorted(root.iterdir()) if (path / "config.json").is_file()]


def format_table(rows: list[dict[str, Any]]) -> str:
    lines = [f"{'cell':<14} {'cache bytes/char':>16} {'measured = formula':>18} {'best val':>9} {'chars/s':>9}"]
    for row in rows:
        agree = "-" if row["measured_bytes"] is None else f"{row['measured_bytes']:,}"
        per_char = "-" if row["bytes_per_char"] is None else f"{row['bytes_per_char']:,.0f}"
        speed = "-" if row["chars_per_s"] is None else f"{row['chars_per_s']:,.0f}"
        lines.append(f"{row['cell']:<14} {per_char:>16} {agree:>18} {number(row['best_val_loss']):>9} {speed:>9}")
    return "\n".join(lines)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_cell_arguments(parser, DEFAULT_OUT, DEFAULT_STEPS, DEFAULT_SEED)
    parser.add_argument("--heads", nargs="*", choices=HEAD_CELLS, default=list(HEAD_CELLS), help="default: mha gqa mqa")
    parser.add_argument(
        "--latents", nargs="*", type=int, default=list(DEFAULT_LATENTS), metavar="N", help="default: 16 32 64"
    )
    parser.add_argument("--tokens", type=int, default=DEFAULT_TOKENS, help="cache measured after N positions")
    parser.add_argument("--context", type=int, default=DEFAULT_CONTEXT, help="characters before generating")
    parser.add_argument("--chars", type=int, default=DEFAULT_CHARS, help="characters generated per timing")
    parser.add_argument("--rounds", type=int, default=DEFAULT_ROUNDS, help="timings, median kept")


def run(args: argparse.Namespace) -> int:
    at_least_one("--latents", args.latents)
    at_least_one("--tokens/--context/--chars/--rounds", [args.tokens, args.context, args.chars, args.rounds])
    from anatomy.training.trainer import split_overrides

    n_head = split_overrides(args.overrides)[0].get("n_head", ModelConfig.n_head)
    names = [*args.heads, *(f"mla_latent{width}" for width in dict.fromkeys(args.latents))]
    if not names:
        raise AnatomyError("--heads and --latents are both empty: expected at least one cell")
    cells = {name: (cell_settings(name, n_head), {}) for name in names}
    train_cells(args, "mla", cells, OWN_SETTINGS)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    for name in cells:
        folder = Path(args.out) / name
        write_json(
            exam_result_path(folder, FOLDER), measure(folder, args.tokens, args.context, args.chars, args.rounds)
        )
    print(format_table([read_mla_cell(Path(args.out) / name) for name in cells]))
    return 0
