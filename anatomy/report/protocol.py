"""How the grid's runs were made, against the chapter's protocol: the text they read, the model's
size and how long it trained, and whether it learned anything at all.

The chapter's claims are about its models, trained its way: 2,000 steps of a 4-layer, 128-wide
model (anatomy.config's defaults, anatomy.chapter). The quick grid's 30-step toy models, or runs
that never got below the loss of a model that ignores the context, can show none of them: there
every claim reads "not testable at this size", with the reason, and the report and every page say
so first. The numbers are still shown; they are just not findings.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from anatomy.chapter import CHAPTER
from anatomy.config import CHAPTER_VOCAB, ModelConfig
from anatomy.language import _, ngettext
from anatomy.report.wording import fmt, listed, sentences
from anatomy.results.groups import is_study
from anatomy.results.reader import Results

SHAPE = ("n_layer", "d_model", "ctx_len")  # the model's size
# the chapter's run: its steps, and the model size ModelConfig's defaults set (its table's models)
CHAPTER_PROTOCOL = {"steps": CHAPTER.steps, **{field: getattr(ModelConfig(), field) for field in SHAPE}}


@dataclass(frozen=True)
class Protocol:
    """The grid's headline runs, described: what they read, how big and how long."""

    corpora: tuple[str, ...]  # corpus names (in words for a run that names none)
    characters: tuple[int, ...]  # training-set sizes
    vocab_sizes: tuple[int, ...]
    steps: int | None  # the longest headline run's last step; None: no headline run yet
    shape: dict[str, int]  # the headline runs' n_layer, d_model, ctx_len (their largest)
    running: int  # grid runs still training
    unlearned: tuple[float, float] | None  # (worst best val, unigram loss) where a run learned nothing

    @property
    def shrunk(self) -> list[str]:
        """How the runs fall short of the chapter's: fewer steps, a smaller model."""
        short = []
        if self.steps is not None and self.steps < CHAPTER_PROTOCOL["steps"]:
            short.append(
                _("{steps} steps (the chapter: {chapter})").format(
                    steps=f"{self.steps:,}", chapter=f"{CHAPTER_PROTOCOL['steps']:,}"
                )
            )
        for field in SHAPE:
            if field in self.shape and self.shape[field] < CHAPTER_PROTOCOL[field]:
                short.append(
                    _("{field} {value} (the chapter: {chapter})").format(
                        field=field, value=self.shape[field], chapter=CHAPTER_PROTOCOL[field]
                    )
                )
        return short

    @property
    def warned(self) -> bool:
        """Whether every page says so above itself (dashboard.findings.show_protocol): the runs
        are not the chapter's, or grid runs are still training."""
        return self.steps is not None and bool(self.untestable_reason or self.running)

    @property
    def untestable_reason(self) -> str | None:
        """Why the chapter's claims cannot be judged on these runs; None where they can."""
        if self.shrunk:
            return _("these runs are smaller or shorter than the chapter's: {how}").format(how=listed(self.shrunk))
        if self.unlearned is not None:
            worst, unigram = self.unlearned
            return _(
                "a headline run's best val ({worst}) is not below the text's unigram loss ({unigram}), what a model "
                "that ignores the context reaches: it learned nothing a verdict can rest on"
            ).format(worst=fmt(worst), unigram=fmt(unigram))
        return None


def protocol_of(data: Results) -> Protocol:
    """The protocol of the grid's headline runs (the claims' runs) in `data`."""
    runs = data.runs
    grid = runs[runs["group"].map(is_study).eq(False)]  # the grid's runs, as only_runs_of takes them
    headline = runs[runs["group"] == "headline"]
    finished = headline[headline["status"].ne("running").fillna(True)]
    shape = {field: int(finished[field].max()) for field in SHAPE if finished[field].notna().any()}
    steps = finished["last_step"].dropna()  # a run with no evaluation logged has no last step
    return Protocol(
        corpora=tuple(
            sorted({str(c) if pd.notna(c) else _("a text its runs do not name") for c in headline["corpus"]})
        ),
        characters=tuple(sorted({int(n) for n in headline["train_tokens"].dropna()})),
        vocab_sizes=tuple(sorted({int(n) for n in headline["vocab_size"].dropna()})),
        steps=int(steps.max()) if len(steps) else None,
        shape=shape,
        running=int(grid["status"].eq("running").fillna(False).sum()),
        unlearned=unlearned(data, finished),
    )


def unigram_loss(data: Results) -> float | None:
    """The text's unigram loss, what a model that ignores the context reaches: the depth exam
    measures it on the grid's text; None where that exam has not run."""
    unigram = data.exams.depth["unigram_loss"].dropna()
    return float(unigram.iloc[0]) if len(unigram) else None


def unlearned(data: Results, headline: pd.DataFrame) -> tuple[float, float] | None:
    """(worst best val, unigram loss) when a finished headline run's best val is not below the
    text's unigram loss; None otherwise, or where no unigram loss was measured."""
    unigram = unigram_loss(data)
    worst = headline["best_val_loss"].max()
    if unigram is None or pd.isna(worst) or worst < unigram:
        return None
    return float(worst), unigram


def not_a_finding(shown: str) -> str:
    """What runs that are not the chapter's showed, said so that it never reads as a finding about
    the part (the page's banner, or the report's opening paragraph, says why)."""
    return _("**Not testable at this size.** What these runs, not the chapter's, showed: {finding}").format(
        finding=shown
    )


def protocol_text(protocol: Protocol) -> str:
    """What the report and every page open with: the text and the protocol the verdicts judge."""
    if protocol.steps is None:
        return _("No headline run has finished yet: no claim can be judged.")
    said = [
        _(
            "These results judge runs on {corpora} ({characters} training characters, a vocabulary of {vocab}). "
            "The chapter trained on its own text (a vocabulary of {chapter_vocab}): another text moves every loss, "
            "so set verdicts beside the chapter's, not loss values."
        ).format(
            corpora=listed(protocol.corpora),
            characters=listed(f"{n:,}" for n in protocol.characters),
            vocab=listed(f"{n:,}" for n in protocol.vocab_sizes),
            chapter_vocab=f"{CHAPTER_VOCAB:,}",
        )
    ]
    if reason := protocol.untestable_reason:
        said.append(
            _(
                '**Not the chapter\'s protocol**: {reason}. Every claim below reads "not testable at this size"; '
                "the numbers show the pipeline works, not what the parts do."
            ).format(reason=reason)
        )
    else:
        said.append(
            _("The chapter's protocol: {steps} steps of a {n_layer}-layer, {d_model}-wide model.").format(
                steps=f"{protocol.steps:,}", n_layer=protocol.shape["n_layer"], d_model=protocol.shape["d_model"]
            )
        )
    if protocol.running:
        said.append(
            ngettext(
                "{n} grid run is still training: these numbers will change.",
                "{n} grid runs are still training: these numbers will change.",
                protocol.running,
            ).format(n=protocol.running)
        )
    return sentences(said)
