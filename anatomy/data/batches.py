"""What the model sees: training batches that depend only on (seed, step), fixed evaluation windows.

What makes runs comparable: the batches depend only on (seed, step), never on the model, so
two runs that differ only in their parts see byte-identical batches in the same order, and a
resumed run continues exactly where it stopped. Evaluation reads fixed windows over the whole
split, so it is deterministic too. The trainer (anatomy/training/trainer.py) and the length exam
(anatomy/exams/length.py) cut their windows here.
"""

from __future__ import annotations

import numpy as np
import torch


def batch_starts(seed: int, step: int, n_tokens: int, ctx_len: int, batch_size: int) -> np.ndarray:
    """Window starts of the batch for `step`: a pure function of (seed, step), independent of the
    model and of torch's RNG, so every model sees the same batches and a resumed run continues
    exactly where it stopped."""
    rng = np.random.default_rng([seed, step])
    return rng.integers(0, n_tokens - ctx_len, size=batch_size)


def windows_at(data: torch.Tensor, starts: np.ndarray, ctx_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs (B, ctx_len) and next-character targets (B, ctx_len) for the given window starts."""
    offsets = torch.as_tensor(starts, dtype=torch.long)[:, None] + torch.arange(ctx_len + 1)
    chunk = data[offsets]
    return chunk[:, :-1], chunk[:, 1:]


def eval_starts(n_tokens: int, ctx_len: int, max_windows: int | None = None) -> np.ndarray:
    """Fixed, non-overlapping windows covering the split (or `max_windows` of them, evenly spread)."""
    starts = np.arange(0, n_tokens - ctx_len, ctx_len)
    if max_windows is not None and len(starts) > max_windows:
        starts = starts[np.linspace(0, len(starts) - 1, max_windows).round().astype(int)]
    return starts
