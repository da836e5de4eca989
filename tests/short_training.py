"""A model trained for a few dozen steps on one repeated sentence: does its loss come down? The
model tests ask this of every combination of the parts, the parts of 2024-26 too."""

from __future__ import annotations

import torch

TEXT = "the quick brown fox jumps over the lazy dog. " * 20


def short_training_losses(model: torch.nn.Module, text: str = TEXT, steps: int = 60) -> list[float]:
    """The training loss at each of `steps` AdamW steps on random 16-character windows of `text`
    (characters as the model's tokens, in sorted order), seeded, so every run is the same."""
    chars = sorted(set(text))
    data = torch.tensor([chars.index(c) for c in text])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    gen = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(steps):
        starts = torch.randint(0, len(data) - 17, (8,), generator=gen)
        x = torch.stack([data[s : s + 16] for s in starts])
        y = torch.stack([data[s + 1 : s + 17] for s in starts])
        _, loss = model(x, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses
