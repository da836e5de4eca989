"""`python -m anatomy check`: a self-check a learner can run before training anything.

Builds both presets at the chapter's size, and the mini-LLaMA with each part of 2024-26 (QK-norm,
MLA, a mixture of experts), runs a forward pass, prints the parameters per part, runs the RoPE
shift test (MLA's too, and shows that the broken variants fail it), and checks that the
hand-written and fused implementations agree. Exit status 1 if any check fails.
"""

from __future__ import annotations

import argparse

import torch

from anatomy.chapter import CHAPTER
from anatomy.config import CHAPTER_VOCAB, preset
from anatomy.model import MiniLM

ROPE_SHIFT = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--vocab-size",
        type=int,
        default=CHAPTER_VOCAB,
        help=f"vocabulary size for the check (default {CHAPTER_VOCAB}, the chapter's)",
    )


def rope_shift_error(model: MiniLM, x: torch.Tensor, shift: int = ROPE_SHIFT) -> float:
    """Largest change of the first layer's QK scores when every position moves by `shift`.

    With a correct RoPE the scores depend only on relative positions, so the change is ~0."""
    attn = model.blocks[0].attn
    with torch.no_grad():
        base = attn.qk_scores(x, model.rope, start=0)
        shifted = attn.qk_scores(x, model.rope, start=shift)
    return (base - shifted).abs().max().item()


def llama_rope_shift_error(rope_break: str = "none", seed: int = 0) -> float:
    """rope_shift_error of a freshly initialised llama-preset model on random input."""
    return shift_error_of_llama_with(rope_break=rope_break, seed=seed)


def mla_rope_shift_error() -> float:
    """The same test of MLA, whose rotated part of each head is rope_dim of its head_dim."""
    return shift_error_of_llama_with(**NEWER_PARTS["llama+mla"])


def shift_error_of_llama_with(seed: int = 0, **overrides) -> float:
    torch.manual_seed(seed)
    model = MiniLM(preset("llama", vocab_size=64, **overrides)).eval()
    return rope_shift_error(model, torch.randn(1, 32, model.cfg.d_model))


# The parts of 2024-26 (anatomy/model.py's map), each added to the mini-LLaMA alone
NEWER_PARTS = {
    "llama+qk_norm": {"qk_norm": True},
    "llama+mla": {"attn_type": "mla", "n_kv_head": 4},  # MLA caches a latent, not key/value heads
    "llama+moe": {"ffn_type": "moe"},
}
MODELS = {"vanilla": ("vanilla", {}), "llama": ("llama", {}), **{name: ("llama", o) for name, o in NEWER_PARTS.items()}}


def merged_rows(tables) -> list[str]:
    """Every table's parts in one list, each new part right after the one it follows in its own
    table: QK-norm's row beside attention, the router beside the feed-forward."""
    rows: list[str] = []
    for table in tables:
        previous = None
        for part in table:
            if part not in rows:
                rows.insert(rows.index(previous) + 1 if previous else 0, part)
            previous = part
    return rows


def run(args: argparse.Namespace) -> int:
    ok = True

    def report(passed: bool, text: str) -> None:
        nonlocal ok
        ok &= passed
        print(f"  [{'ok' if passed else 'FAIL'}] {text}")

    idx = torch.randint(0, args.vocab_size, (2, 128), generator=torch.Generator().manual_seed(0))
    tables = {}
    print(f"Models at the chapter's size (vocab {args.vocab_size}):")
    for name, (preset_name, overrides) in MODELS.items():
        torch.manual_seed(0)
        manual = MiniLM(preset(preset_name, vocab_size=args.vocab_size, impl="manual", **overrides)).eval()
        fused = MiniLM(preset(preset_name, vocab_size=args.vocab_size, impl="fused", **overrides)).eval()
        fused.load_state_dict(manual.state_dict())
        with torch.no_grad():
            logits, loss = manual(idx, idx)
            gap = (logits - fused(idx)[0]).abs().max().item()
        tables[name] = manual.param_table()
        params = manual.num_params()
        report(
            logits.shape == (2, 128, args.vocab_size),
            f"{name}: forward (2, 128) -> {tuple(logits.shape)}, loss {loss.item():.3f}",
        )
        if args.vocab_size == CHAPTER_VOCAB and name in ("vanilla", "llama"):
            published = CHAPTER.model(name).params
            report(params == published, f"{name}: {params:,} parameters (chapter: {published:,})")
        elif manual.active_params() != params:
            print(f"         {name}: {params:,} parameters, {manual.active_params():,} of them active per token")
        report(gap < 1e-4, f"{name}: manual and fused agree (max difference {gap:.1e})")

    print("\nParameters per part:")
    parts = merged_rows(tables.values())
    print(f"  {'part':<27}" + "".join(f"{name:>15}" for name in tables))
    for part in parts + ["total"]:
        counts = [sum(t.values()) if part == "total" else t.get(part, 0) for t in tables.values()]
        print(f"  {part:<27}" + "".join(f"{count:>15,}" for count in counts))

    print(f"\nRoPE: shift every position by {ROPE_SHIFT}; the QK scores should not change:")
    err = llama_rope_shift_error("none")
    report(err < 1e-4, f"correct RoPE: max change {err:.1e}")
    err = mla_rope_shift_error()
    report(err < 1e-4, f"MLA's decoupled RoPE: max change {err:.1e}")
    for broken in ("k_unrotated", "k_adjacent"):
        err = llama_rope_shift_error(broken)
        report(err > 1e-3, f"rope_break={broken}: max change {err:.2f} (relative position lost, as it should be)")

    kv_bytes = {
        label: MiniLM(preset(preset_name, vocab_size=args.vocab_size, **overrides)).kv_cache_bytes(128)
        for label, (preset_name, overrides) in {
            "MHA": ("vanilla", {}),
            "GQA (2 kv heads)": ("llama", {}),
            "MLA (latent 32 + rope 16)": MODELS["llama+mla"],
        }.items()
    }
    print("\nKV cache for 128 tokens (float32): " + ", ".join(f"{k} {v:,} bytes" for k, v in kv_bytes.items()))
    print("\nall checks passed" if ok else "\nSOME CHECKS FAILED")
    return 0 if ok else 1
