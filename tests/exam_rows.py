"""Rows of the exam tables, written by hand: the builders the report's and the dashboard's exam
tests share. Each returns dicts by column name of anatomy/results/schema.sql, so columns added to the
schema later (nullable) do not break them; `new_database` makes an empty one with that schema, and
`insert` puts them into it.
"""

from __future__ import annotations

from pathlib import Path

import duckdb

from anatomy.results.collect import SCHEMA_PATH

GIB = 2**30

# position buckets of a 1024-character window: two inside the training length (128), two past it
BUCKETS = [(0, 31, 32), (32, 127, 96), (128, 511, 384), (512, 1023, 512)]


def new_database(path: Path, schema: str | None = None) -> Path:
    """An empty results database: collect's schema, or an older one given as text."""
    with duckdb.connect(str(path)) as con:
        con.execute(schema if schema is not None else SCHEMA_PATH.read_text(encoding="utf-8"))
    return path


def insert(db: Path, table: str, rows: list[dict]) -> None:
    with duckdb.connect(str(db)) as con:
        for row in rows:
            names = ", ".join(f'"{name}"' for name in row)
            con.execute(f"INSERT INTO {table} ({names}) VALUES ({', '.join('?' * len(row))})", list(row.values()))


def length_rows(
    run_id: str, losses: list[float | None], ctx_len: int = 128, window_len: int = 1024, reason: str | None = None
) -> list[dict]:
    """A loss per bucket of one window; None: not possible, for `reason` (default: a learned table)."""
    rows = []
    for (start, end, predictions), loss in zip(BUCKETS, losses):
        if end >= window_len:
            break
        rows.append(
            {
                "run_id": run_id,
                "checkpoint": "best",
                "ctx_len": ctx_len,
                "window_len": window_len,
                "bucket_start": start,
                "bucket_end": end,
                "possible": loss is not None,
                "reason": None if loss is not None else reason or f"learned positions end at ctx_len {ctx_len}",
                "loss": loss,
                "predictions": predictions if loss is not None else 0,
            }
        )
    return rows


def cache_rows(
    run_id: str, n_kv_head: int, n_layer: int = 4, head_dim: int = 32, tokens: tuple[int, ...] = (1, 512, 2048)
) -> list[dict]:
    """The cache's bytes, measured equal to the formula: k and v x layers x heads x head_dim x float32."""
    per_token = 2 * n_layer * n_kv_head * head_dim * 4
    return [
        {
            "run_id": run_id,
            "n_kv_head": n_kv_head,
            "tokens": cached,
            "measured_bytes": per_token * cached,
            "formula_bytes": per_token * cached,
        }
        for cached in tokens
    ]


def depth_row(
    norm_pos: str,
    lr: float,
    *,
    trained: bool,
    best: float | None = None,
    diverged_step: int | None = None,
    final_train: float | None = None,
    final_val: float | None = None,
) -> dict:
    """One cell of the stability map (12 layers, 300 steps); the final losses default to `best`."""
    return {
        "cell": f"{norm_pos}_lr{lr:g}",
        "norm_pos": norm_pos,
        "lr": lr,
        "n_layer": 12,
        "steps": 300,
        "seed": 42,
        "status": "diverged" if diverged_step is not None else "done",
        "diverged": diverged_step is not None,
        "diverged_step": diverged_step,
        "trained": trained,
        "best_val_loss": best,
        "best_step": 250,
        "final_train_loss": best if final_train is None else final_train,
        "final_val_loss": best if final_val is None else final_val,
    }


def wall_clock_row(part: str, variant: str, impl: str, median_ms: float, rounds: int = 20) -> dict:
    return {
        "part": part,
        "variant": variant,
        "impl": impl,
        "shape": "32x128x128",
        "median_ms": median_ms,
        "min_ms": 0.9 * median_ms,
        "max_ms": 1.2 * median_ms,
        "rounds": rounds,
    }


def timing_rows(run_id: str, n_kv_head: int, speeds: dict[int, tuple[float, float]], chars: int = 32) -> list[dict]:
    """Generation timed at each context: context -> (cached, recomputed) characters per second."""
    return [
        {
            "run_id": run_id,
            "n_kv_head": n_kv_head,
            "context": context,
            "chars": chars,
            "cached": cached,
            "seconds": chars / speed,
            "chars_per_s": speed,
        }
        for context, pair in speeds.items()
        for cached, speed in zip((True, False), pair)
    ]


def kv_scale_row(name: str, n_kv_head: int) -> dict:
    """A 7B-class model's KV cache at 128k tokens in bf16: 32 layers, head_dim 128."""
    return {
        "name": name,
        "n_layer": 32,
        "n_kv_head": n_kv_head,
        "head_dim": 128,
        "tokens": 131072,
        "element_bytes": 2,
        "bytes": 2 * 32 * n_kv_head * 128 * 131072 * 2,
    }


KV_SCALE = [kv_scale_row("7B-class, 32 KV heads (MHA)", 32), kv_scale_row("7B-class, 8 KV heads (GQA)", 8)]


def grad_norm_rows(run_id: str, by_step: dict[int, list[float]]) -> list[dict]:
    """step -> each block's gradient norm, block 0 first."""
    return [
        {"run_id": run_id, "step": step, "layer": layer, "norm": norm}
        for step, norms in by_step.items()
        for layer, norm in enumerate(norms)
    ]


# ---------------------------------------------------------------------------------------------
# The parts of 2024-26: exam_qk_norm, exam_mla, exam_moe, max_logits


def qk_norm_row(
    variant: str,
    lr: float,
    *,
    trained: bool,
    best: float | None = None,
    peak: float | None = None,
    diverged_step: int | None = None,
) -> dict:
    """One cell of the QK-norm map (300 steps), named as anatomy/exams/qk_norm.py names it."""
    return {
        "cell": f"{variant}_lr{lr!r}",
        "variant": variant,
        "lr": lr,
        "steps": 300,
        "status": "diverged" if diverged_step is not None else "done",
        "diverged_step": diverged_step,
        "trained": trained,
        "best_val_loss": best,
        "final_train_loss": best,
        "peak_max_logit": peak,
        "last_max_logit": peak,
    }


def mla_row(
    cell: str,
    n_kv_head: int,
    per_char: int | None,
    best: float,
    chars_per_s: float | None = None,
    kv_latent: int | None = None,
    tokens: int = 512,
) -> dict:
    """One cell of the MLA exam: its cache measured after `tokens` positions, equal to the formula."""
    measured = None if per_char is None else per_char * tokens
    return {
        "cell": cell,
        "attn_type": "mla" if kv_latent is not None else "mha",
        "n_kv_head": n_kv_head,
        "kv_latent": kv_latent,
        "tokens": tokens if per_char is not None else None,
        "measured_bytes": measured,
        "formula_bytes": measured,
        "bytes_per_char": per_char,
        "best_val_loss": best,
        "chars_per_s": chars_per_s,
    }


def moe_row(
    cell: str,
    params: int,
    active: int,
    best: float,
    *,
    top_k: int | None = None,
    n_experts: int = 4,
    shares: tuple[float, float] | None = None,
    step_ms: float | None = None,
    step_ratio: float | None = None,
) -> dict:
    """One cell of the experts' exam (top_k None: dense)."""
    return {
        "cell": cell,
        "n_experts": n_experts if top_k is not None else None,
        "top_k": top_k,
        "params": params,
        "active_params": active,
        "best_val_loss": best,
        "min_share": shares[0] if shares else None,
        "max_share": shares[1] if shares else None,
        "run_step_s": None if step_ms is None else step_ms / 1000,
        "step_ms": step_ms,
        "step_ratio": step_ratio,
    }


def max_logit_rows(run_id: str, by_step: dict[int, list[float]]) -> list[dict]:
    """step -> each layer's largest attention logit, layer 0 first."""
    return [
        {"run_id": run_id, "step": step, "layer": layer, "max_logit": value}
        for step, values in by_step.items()
        for layer, value in enumerate(values)
    ]


# plain trains up to 3e-3 and diverges at 1e-2; QK-norm trains at 1e-2 too: 3.33x the lr
QK_NORM = [
    qk_norm_row("plain", 1e-3, trained=True, best=2.30, peak=12.0),
    qk_norm_row("plain", 3e-3, trained=True, best=2.25, peak=40.0),
    qk_norm_row("plain", 1e-2, trained=False, peak=250.0, diverged_step=80),
    qk_norm_row("qk_norm", 1e-3, trained=True, best=2.32, peak=6.0),
    qk_norm_row("qk_norm", 3e-3, trained=True, best=2.22, peak=7.5),
    qk_norm_row("qk_norm", 1e-2, trained=True, best=2.20, peak=8.0),
]
# bytes per character: 2 x 1 layer x KV heads x head_dim 32 x 4 bytes (MHA 1,024); MLA (latent + rope 16) x 4
MLA = [
    mla_row("mha", 4, 1024, 2.10, 500.0),
    mla_row("gqa", 2, 512, 2.12, 520.0),
    mla_row("mqa", 1, 256, 2.16, 540.0),
    mla_row("mla_latent16", 4, 128, 2.20, 300.0, kv_latent=16),
    mla_row("mla_latent32", 4, 192, 2.14, 290.0, kv_latent=32),  # the better of the two latents
]
MOE = [
    moe_row("dense", 800_000, 800_000, 2.12, step_ms=100.0, step_ratio=1.0),
    moe_row("moe_top1", 1_400_000, 801_024, 2.08, top_k=1, shares=(0.18, 0.34), step_ms=230.0, step_ratio=2.3),
    moe_row("moe_top2", 1_400_000, 1_001_024, 2.05, top_k=2, shares=(0.2, 0.3), step_ms=300.0, step_ratio=3.0),
    moe_row("moe_all", 1_400_000, 1_400_000, 2.03, top_k=4, shares=(0.25, 0.25), step_ms=400.0, step_ratio=4.0),
]
