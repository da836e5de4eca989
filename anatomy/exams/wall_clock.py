"""Pitfall 4: a hand-written part can be slow where its fused PyTorch version is not.

The same maths spelled out in plain tensor operations (`impl: manual`) launches one kernel per
operation and keeps every intermediate for the backward pass; PyTorch's fused version
(`impl: fused`) does it in one. Whole-step timings hide which part pays, so this exam times
forward + backward of each part alone, manual against fused, each built from the model's own
classes with the ModelConfig that trains it:

    norm       layernorm (LayerNorm, vanilla's config), rmsnorm (RMSNorm, llama's)
    rope       the rotation of q and k (RotaryEmbedding + apply_rope). The model has no fused RoPE:
               both impls run the same code, so the variant says "no fused kernel" and its
               ratio shows how far two timings of one and the same thing differ
    attention  mha (4 KV heads, vanilla's config), gqa (2 KV heads, llama's): CausalSelfAttention
               with its projections, without RoPE (timed on its own above)
    ffn        gelu (GeluMLP), swiglu (SwiGLU)
    step       vanilla, llama: a whole training step of MiniLM (forward, backward, AdamW)

At the presets' size (d_model 128, ctx_len 128, 4 layers) and batch 32, unless told otherwise,
in fp32: the pitfall is about kernels, not number formats (`anatomy bench` times bf16).
After a warm-up, each round times manual and fused back to back, in alternating order, so a
busy machine slows both alike; the ratio quoted is the median of the per-round ratios.

`python -m anatomy exam wall_clock` writes results/exams/wall_clock.json; `anatomy collect`
reads it with `read_rows` into the exam_wall_clock table. `anatomy bench --parts` prints the
same rows.
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from anatomy.files.atomic import check_file_target, write_json
from anatomy.training.compiling import forward_backward
from anatomy.config import CHAPTER_VOCAB, DEVICE_PATTERN, ModelConfig, preset
from anatomy.config_fields import parse_value
from anatomy.training.devices import pick_device, sync
from anatomy.errors import AnatomyError
from anatomy.model import FFNS, CausalSelfAttention, MiniLM, RotaryEmbedding, apply_rope, make_norm
from anatomy.files.run_folder import check_value, read_json_object

RESULT_FILE = "wall_clock.json"  # under results/exams/, where `anatomy collect` looks for it
DEFAULT_OUT = Path("results") / "exams" / RESULT_FILE
DEFAULT_BATCH_SIZE = 32
DEFAULT_ROUNDS = 10
WARMUP_CALLS = 2  # per impl before timing: first calls allocate memory and AdamW's state
# A timed sample repeats its call until it lasts about this long: a norm takes a few ms, and on a
# busy machine one preemption would swing a single call's time by more than the gap being measured
MIN_SAMPLE_S = 0.1
IMPLS = ("manual", "fused")

ROPE_VARIANT = "rope (no fused kernel)"
# variant -> (part, the preset whose config builds it)
VARIANTS: dict[str, tuple[str, str]] = {
    "layernorm": ("norm", "vanilla"),
    "rmsnorm": ("norm", "llama"),
    ROPE_VARIANT: ("rope", "llama"),
    "mha": ("attention", "vanilla"),
    "gqa": ("attention", "llama"),
    "gelu": ("ffn", "vanilla"),
    "swiglu": ("ffn", "llama"),
    "vanilla": ("step", "vanilla"),
    "llama": ("step", "llama"),
}
# What key=value may change. The heads stay the presets' (4 query heads, 4 or 2 KV heads), so
# mha and gqa keep their meaning.
SIZE_KEYS = ("d_model", "n_layer", "ctx_len", "vocab_size")
# The exam_wall_clock columns of anatomy/results/schema.sql, with what each holds
ROW_FIELDS: dict[str, type] = {
    "part": str,
    "variant": str,
    "impl": str,
    "shape": str,
    "median_ms": float,
    "min_ms": float,
    "max_ms": float,
    "rounds": int,
}


# ---------------------------------------------------------------------------------------------
# Building each part, as the model builds it
# ---------------------------------------------------------------------------------------------


def part_config(variant: str, impl: str, sizes: dict[str, int]) -> ModelConfig:
    """The config that trains this part: its preset, the impl, and the size overrides."""
    return preset(VARIANTS[variant][1], impl=impl, **{"vocab_size": CHAPTER_VOCAB, **sizes})


@dataclass
class Workload:
    """One part built for one impl, with its input. `run()` is what a round times: forward and
    backward (and the optimizer step, for a whole step); it returns the forward's output."""

    module: nn.Module
    inputs: torch.Tensor | None  # the input whose gradient backward computes; None for a step (token ids)
    shape: str  # of the input, e.g. "32x128x128" (batch x length x width)
    run: Callable[[], torch.Tensor]


def build_workload(variant: str, impl: str, sizes: dict[str, int], batch_size: int, device: torch.device) -> Workload:
    """The part of `variant` for `impl`. Weights and inputs come from fixed seeds, so manual and
    fused get the same ones (the tests check that both then compute the same)."""
    part = VARIANTS[variant][0]
    cfg = part_config(variant, impl, sizes)
    torch.manual_seed(0)
    generator = torch.Generator().manual_seed(1)
    if part == "step":
        return step_workload(cfg, batch_size, device, generator)
    B, T = batch_size, cfg.ctx_len
    if part == "norm":
        module = make_norm(cfg)
        forward, x = module, torch.randn(B, T, cfg.d_model, generator=generator)
    elif part == "rope":
        module = RotaryEmbedding(cfg.head_dim, cfg.ctx_len)
        forward = _rope_forward(module)
        x = torch.randn(B, T, cfg.n_head + cfg.n_kv_head, cfg.head_dim, generator=generator)
    elif part == "attention":
        module = CausalSelfAttention(cfg)
        forward, x = _first_output(module), torch.randn(B, T, cfg.d_model, generator=generator)
    else:
        module = FFNS[cfg.ffn_type](cfg)
        forward, x = module, torch.randn(B, T, cfg.d_model, generator=generator)
    return part_workload(module.to(device), forward, x.to(device), generator)


def _rope_forward(rope: RotaryEmbedding) -> Callable[[torch.Tensor], torch.Tensor]:
    """The rotation CausalSelfAttention applies to q and then to k, timed on both heads' worth at
    once, (B, T, n_head + n_kv_head, head_dim): the same work, the same angle for every head."""

    def rotate(qk: torch.Tensor) -> torch.Tensor:
        cos, sin = rope(0, qk.shape[1])
        return apply_rope(qk, cos[:, None], sin[:, None])

    return rotate


def _first_output(attention: CausalSelfAttention) -> Callable[[torch.Tensor], torch.Tensor]:
    return lambda x: attention(x)[0]  # (output, KV cache): the cache is not trained


def part_workload(
    module: nn.Module, forward: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor, generator: torch.Generator
) -> Workload:
    x.requires_grad_()
    with torch.no_grad():
        out_shape = forward(x).shape
    # A fixed gradient from "above", as the rest of the model would send back
    grad_out = torch.randn(out_shape, generator=generator).to(x.device)

    def run() -> torch.Tensor:
        module.zero_grad(set_to_none=True)
        x.grad = None
        out = forward(x)
        out.backward(grad_out)
        return out

    return Workload(module, x, "x".join(map(str, x.shape)), run)


def step_workload(cfg: ModelConfig, batch_size: int, device: torch.device, generator: torch.Generator) -> Workload:
    """One training step of the whole model, as the trainer takes it (uncompiled)."""
    model = MiniLM(cfg).to(device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    data = torch.randint(0, cfg.vocab_size, (batch_size, cfg.ctx_len + 1), generator=generator)
    x, y = data[:, :-1].to(device), data[:, 1:].to(device)

    def run() -> torch.Tensor:
        loss = forward_backward(model, optimizer, x, y)
        optimizer.step()
        return loss

    return Workload(model, None, f"{batch_size}x{cfg.ctx_len}", run)


# ---------------------------------------------------------------------------------------------
# Timing, interleaved
# ---------------------------------------------------------------------------------------------


def time_ms(call: Callable[[], Any], repeats: int, device: torch.device) -> float:
    """Milliseconds per call, over `repeats` calls; waits for the device before stopping the clock."""
    start = time.perf_counter()
    for _ in range(repeats):
        call()
    sync(device)
    return (time.perf_counter() - start) * 1000 / repeats


def interleaved_ms(
    calls: dict[str, Callable[[], Any]], rounds: int, device: torch.device, repeats: int | None = None
) -> dict[str, list[float]]:
    """Milliseconds per call of each of `calls`, one sample per round. Within a round the calls
    run back to back, their order alternating from round to round, so a machine that slows down
    or speeds up moves them alike. A sample repeats its call `repeats` times (default: as many
    as make the slowest last about MIN_SAMPLE_S, so short parts are not lost in timer noise)."""
    for call in calls.values():
        for _ in range(WARMUP_CALLS):
            call()
    sync(device)
    if repeats is None:
        slowest_ms = max(time_ms(call, 1, device) for call in calls.values())
        repeats = max(1, math.ceil(MIN_SAMPLE_S * 1000 / slowest_ms))
    samples: dict[str, list[float]] = {name: [] for name in calls}
    order = list(calls)
    for round_index in range(rounds):
        for name in order if round_index % 2 == 0 else order[::-1]:
            samples[name].append(time_ms(calls[name], repeats, device))
    return samples


def paired_ratio(first: list[float], second: list[float]) -> float:
    """The median of the per-round ratios first / second (both timed in the same round)."""
    return statistics.median(a / b for a, b in zip(first, second))


@dataclass
class PartTiming:
    part: str
    variant: str
    shape: str
    ms: dict[str, list[float]]  # impl -> milliseconds per call, one per round

    def rows(self) -> list[dict[str, Any]]:
        """Its exam_wall_clock rows, one per impl."""
        return [
            {
                "part": self.part,
                "variant": self.variant,
                "impl": impl,
                "shape": self.shape,
                "median_ms": statistics.median(samples),
                "min_ms": min(samples),
                "max_ms": max(samples),
                "rounds": len(samples),
            }
            for impl, samples in self.ms.items()
        ]

    @property
    def ratio(self) -> float:
        """manual / fused: above 1, the hand-written part is the slower."""
        return paired_ratio(self.ms["manual"], self.ms["fused"])


def time_parts(
    device: torch.device,
    batch_size: int = DEFAULT_BATCH_SIZE,
    rounds: int = DEFAULT_ROUNDS,
    sizes: dict[str, int] | None = None,
    variants: tuple[str, ...] = tuple(VARIANTS),
) -> list[PartTiming]:
    """Each part's forward + backward, manual against fused, one part at a time."""
    timings = []
    for variant in variants:
        workloads = {impl: build_workload(variant, impl, sizes or {}, batch_size, device) for impl in IMPLS}
        ms = interleaved_ms({impl: workload.run for impl, workload in workloads.items()}, rounds, device)
        timings.append(PartTiming(VARIANTS[variant][0], variant, workloads["manual"].shape, ms))
    return timings


def rows_of(timings: list[PartTiming]) -> list[dict[str, Any]]:
    return [row for timing in timings for row in timing.rows()]


def print_table(timings: list[PartTiming]) -> None:
    print(f"{'part':<10}{'variant':<24}{'shape':<15}{'manual ms':>11}{'fused ms':>10}{'manual/fused':>14}")
    for t in timings:
        manual, fused = (statistics.median(t.ms[impl]) for impl in IMPLS)
        print(f"{t.part:<10}{t.variant:<24}{t.shape:<15}{manual:>11.2f}{fused:>10.2f}{t.ratio:>14.2f}")
    rounds = len(timings[0].ms["manual"]) if timings else 0
    print(
        f"(medians over {rounds} rounds; the ratio is the median of the per-round ratios. RoPE runs the "
        "same code in both impls, so its ratio is the noise between two timings of one thing.)"
    )


# ---------------------------------------------------------------------------------------------
# The result file
# ---------------------------------------------------------------------------------------------


def write_result(
    path: Path, timings: list[PartTiming], device: torch.device, batch_size: int, sizes: dict[str, int]
) -> None:
    cfg = part_config("llama", "fused", sizes)
    write_json(
        path,
        {
            "device": str(device),
            "torch_version": torch.__version__,
            "threads": torch.get_num_threads(),
            "machine": platform.machine(),
            "batch_size": batch_size,
            "sizes": {key: getattr(cfg, key) for key in SIZE_KEYS},
            "rows": rows_of(timings),
            "ratios": {f"{t.part}/{t.variant}": t.ratio for t in timings},  # manual / fused, per round
        },
    )


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """The exam_wall_clock rows of a wall_clock.json, each field checked."""
    path = Path(path)
    if not path.is_file():
        raise AnatomyError(f"{path}: no such file (write it with: python -m anatomy exam wall_clock)")
    data = read_json_object(path, "the wall-clock exam's results, written by `anatomy exam wall_clock`")
    records = data.get("rows")
    if not isinstance(records, list) or not records:
        raise AnatomyError(f"{path}: field 'rows' must be a non-empty list of timings, got {records!r:.80}")
    rows, seen = [], set()
    for i, record in enumerate(records):
        row = checked_row(record, path, i)
        key = (row["part"], row["variant"], row["impl"])
        if key in seen:
            raise AnatomyError(f"{path}: rows[{i}]: part {key[0]!r}, variant {key[1]!r}, impl {key[2]!r} appears twice")
        seen.add(key)
        rows.append(row)
    return rows


def checked_row(record: Any, path: Path, i: int) -> dict[str, Any]:
    if not isinstance(record, dict):
        raise AnatomyError(f"{path}: rows[{i}] must be an object, got {record!r:.80}")
    extra = sorted(set(record) - set(ROW_FIELDS))
    if extra:
        raise AnatomyError(
            f"{path}: rows[{i}] has unknown field(s) {', '.join(extra)}; expected {', '.join(ROW_FIELDS)}"
        )
    for name, kind in ROW_FIELDS.items():
        if record.get(name) is None:
            raise AnatomyError(f"{path}: rows[{i}] has no field '{name}'")
        check_value(record[name], kind, path, f"rows[{i}].{name}")
    row = {name: record[name] for name in ROW_FIELDS}
    if row["variant"] not in VARIANTS or VARIANTS[row["variant"]][0] != row["part"]:
        known = ", ".join(f"{part}/{variant}" for variant, (part, _) in VARIANTS.items())
        raise AnatomyError(f"{path}: rows[{i}]: part/variant {row['part']}/{row['variant']} is not one of {known}")
    if row["impl"] not in IMPLS:
        raise AnatomyError(f"{path}: rows[{i}].impl must be 'manual' or 'fused', got {row['impl']!r}")
    for name in ("median_ms", "min_ms", "max_ms"):
        if not (math.isfinite(row[name]) and row[name] > 0):
            raise AnatomyError(f"{path}: rows[{i}].{name} must be a positive finite number, got {row[name]!r}")
        row[name] = float(row[name])
    if not row["min_ms"] <= row["median_ms"] <= row["max_ms"]:
        raise AnatomyError(
            f"{path}: rows[{i}]: expected min_ms <= median_ms <= max_ms, got "
            f"{row['min_ms']}, {row['median_ms']}, {row['max_ms']}"
        )
    if row["rounds"] < 1:
        raise AnatomyError(f"{path}: rows[{i}].rounds must be at least 1, got {row['rounds']}")
    return row


# ---------------------------------------------------------------------------------------------
# The command line
# ---------------------------------------------------------------------------------------------


def parse_sizes(pairs: list[str]) -> dict[str, int]:
    """`d_model=32 ctx_len=16 ...` into size overrides, checked by building the configs."""
    sizes = {}
    for pair in pairs:
        key, sep, raw = pair.partition("=")
        if not sep or key not in SIZE_KEYS:
            raise AnatomyError(
                f"override {pair!r}: expected key=value with key one of {', '.join(SIZE_KEYS)} "
                "(the heads stay the presets', so that mha and gqa keep their meaning)"
            )
        sizes[key] = parse_value(ModelConfig, key, raw)
    for variant in VARIANTS:
        part_config(variant, "manual", sizes)  # a bad value fails here, before anything is timed
    return sizes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "sizes", nargs="*", metavar="key=value", help=f"model size overrides for a quick run: {', '.join(SIZE_KEYS)}"
    )
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"result file (default {DEFAULT_OUT})")
    parser.add_argument(
        "--rounds", type=int, default=DEFAULT_ROUNDS, help=f"interleaved rounds per part (default {DEFAULT_ROUNDS})"
    )
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--device", default="auto", help="auto (cuda > mps > cpu), cpu, cuda, mps")


def run(args: argparse.Namespace) -> int:
    sizes = parse_sizes(args.sizes)
    for option, value, least in (
        ("--rounds", args.rounds, 1),
        ("--batch-size", args.batch_size, 1),
        ("--threads", args.threads, 0),
    ):
        if value < least:
            raise AnatomyError(f"{option} {value}: expected a whole number of at least {least}")
    if not DEVICE_PATTERN.match(args.device):
        raise AnatomyError(f"--device {args.device!r}: expected auto, cpu, mps, cuda or cuda:N")
    check_file_target(args.out, "--out")
    if args.threads:
        torch.set_num_threads(args.threads)
    device = pick_device(args.device)
    print(
        f"wall clock on {device} (torch {torch.__version__}, {torch.get_num_threads()} threads), "
        f"batch {args.batch_size}, forward + backward, {args.rounds} interleaved rounds\n"
    )
    timings = time_parts(device, args.batch_size, args.rounds, sizes)
    print_table(timings)
    write_result(args.out, timings, device, args.batch_size, sizes)
    print(f"\nwritten to {args.out}")
    return 0
