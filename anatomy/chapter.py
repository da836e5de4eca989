"""The chapter's published figures: what it measured, quoted beside what we measure.

The chapter trained both models on its own blog (vocabulary `CHAPTER_VOCAB`, in config.py, where
the check, the bench and the wall-clock exam build their models at it), seeds 42 and 7, for
2,000 steps. `anatomy check` holds our parameter counts against its table; the report's headline
table and the claims quote the rest. Each figure is typed here once, as the chapter printed it: a
published number is never recomputed (its seed-7 gap, 0.094, came from losses it did not print).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PublishedModel:
    """One model's row of the chapter's table: a pair is one value per seed, in `Chapter.seeds`' order."""

    params: int
    best_val: tuple[float, float]
    best_step: int
    final_val: float | None = None  # the chapter gives its last losses for the mini-LLaMA only
    final_train: float | None = None


@dataclass(frozen=True)
class Chapter:
    seeds: tuple[int, int]  # as the chapter lists them
    steps: int  # where its runs ended: the step of `final_val` and `final_train`
    vanilla: PublishedModel
    llama: PublishedModel
    gap: tuple[float, float]  # vanilla's best val minus the mini-LLaMA's, per seed

    def model(self, name: str) -> PublishedModel:
        """The row of a preset, by its name (vanilla or llama)."""
        return {"vanilla": self.vanilla, "llama": self.llama}[name]


CHAPTER = Chapter(
    seeds=(42, 7),
    steps=2000,
    vanilla=PublishedModel(params=1_244_928, best_val=(3.706, 3.705), best_step=1100),
    llama=PublishedModel(params=1_178_496, best_val=(3.599, 3.612), best_step=500, final_val=5.083, final_train=0.33),
    gap=(0.107, 0.094),
)
