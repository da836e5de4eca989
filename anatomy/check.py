"""`python -m anatomy check`: a self-check a learner can run before training anything.

Builds both presets at the chapter's size, runs a forward pass, prints the parameters per part,
runs the RoPE shift test (and shows that the broken variants fail it), and checks that the
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
    torch.manual_seed(seed)
    model = MiniLM(preset("llama", vocab_size=64, rope_break=rope_break)).eval()
    return rope_shift_error(model, torch.randn(1, 32, model.cfg.d_model))


def run(args: argparse.Namespace) -> int:
    ok = True

    def report(passed: bool, text: str) -> None:
        nonlocal ok
        ok &= passed
        print(f"  [{'ok' if passed else 'FAIL'}] {text}")

    idx = torch.randint(0, args.vocab_size, (2, 128), generator=torch.Generator().manual_seed(0))
    tables = {}
    print(f"Models at the chapter's size (vocab {args.vocab_size}):")
    for name in ("vanilla", "llama"):
        torch.manual_seed(0)
        manual = MiniLM(preset(name, vocab_size=args.vocab_size, impl="manual")).eval()
        fused = MiniLM(preset(name, vocab_size=args.vocab_size, impl="fused")).eval()
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
        if args.vocab_size == CHAPTER_VOCAB:
            published = CHAPTER.model(name).params
            report(params == published, f"{name}: {params:,} parameters (chapter: {published:,})")
        report(gap < 1e-4, f"{name}: manual and fused agree (max difference {gap:.1e})")

    print("\nParameters per part:")
    parts = list(dict.fromkeys(list(tables["vanilla"]) + list(tables["llama"])))
    print(f"  {'part':<28}{'vanilla':>12}{'llama':>12}")
    for part in parts + ["total"]:
        counts = [sum(t.values()) if part == "total" else t.get(part, 0) for t in tables.values()]
        print(f"  {part:<28}{counts[0]:>12,}{counts[1]:>12,}")

    print(f"\nRoPE: shift every position by {ROPE_SHIFT}; the QK scores should not change:")
    err = llama_rope_shift_error("none")
    report(err < 1e-4, f"correct RoPE: max change {err:.1e}")
    for broken in ("k_unrotated", "k_adjacent"):
        err = llama_rope_shift_error(broken)
        report(err > 1e-3, f"rope_break={broken}: max change {err:.2f} (relative position lost, as it should be)")

    mha = MiniLM(preset("vanilla", vocab_size=args.vocab_size))
    gqa = MiniLM(preset("llama", vocab_size=args.vocab_size))
    print(
        f"\nKV cache for 128 tokens (float32): MHA {mha.kv_cache_bytes(128):,} bytes, "
        f"GQA (2 kv heads) {gqa.kv_cache_bytes(128):,} bytes"
    )
    print("\nall checks passed" if ok else "\nSOME CHECKS FAILED")
    return 0 if ok else 1
