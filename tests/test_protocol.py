"""Toy numbers never pass for findings (anatomy/report/protocol.py): runs smaller or shorter than
the chapter's, or runs that learned nothing, make every claim "not testable at this size", and the
report opens by naming the text and the protocol it judges."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest

from anatomy.report import markdown, protocol
from anatomy.report.claims import claims_by_key
from anatomy.report.readme import readme_blocks
from anatomy.results import collect
from anatomy.results.reader import load
from run_folders import LLAMA_PARTS, write_run_folder

CHAPTERS = dict(protocol.CHAPTER_PROTOCOL)  # before conftest sets the tests' small one


@pytest.fixture
def headline(tmp_path):
    """The headline pair, two seeds: the mini-LLaMA lower by 0.5, far beyond the seeds' spread."""
    runs_root = tmp_path / "runs"
    data = {"corpus": "my_blog", "train_tokens": 5_000, "val_tokens": 500}
    for seed in (42, 7):
        write_run_folder(runs_root, "vanilla", seed, floor=2.5, data=data)
        write_run_folder(runs_root, "llama", seed, floor=2.0, model=LLAMA_PARTS, data=data)
    db = tmp_path / "anatomy.duckdb"
    collect.collect(runs_root, db)
    return load(db)


def test_runs_at_the_chapters_size_are_judged(headline, monkeypatch):
    monkeypatch.setattr(protocol, "CHAPTER_PROTOCOL", {"steps": 100, "n_layer": 1, "d_model": 16, "ctx_len": 128})
    assert protocol.protocol_of(headline).untestable_reason is None
    assert claims_by_key(headline)["lower_valley"].verdict.startswith("**reproduced**")


def test_toy_runs_make_every_claim_not_testable_with_the_reason(headline, monkeypatch):
    monkeypatch.setattr(protocol, "CHAPTER_PROTOCOL", CHAPTERS)
    found = claims_by_key(headline)
    judged = [claim for claim in found.values() if claim.verdict != "not yet run"]
    assert judged and all(claim.verdict.startswith("**not testable at this size**") for claim in judged)
    verdict = found["lower_valley"].verdict
    assert "100 steps (the chapter: 2,000)" in verdict and "d_model 16 (the chapter: 128)" in verdict
    assert "n_layer 1 (the chapter: 4)" in verdict
    assert "best val" in found["lower_valley"].measured  # what was measured is still shown


def test_runs_that_learned_nothing_make_every_claim_not_testable(headline):
    # the depth exam measured the text's unigram loss above the runs' best val: no context learned
    depth = pd.DataFrame({"unigram_loss": [2.4]})
    data = dataclasses.replace(headline, exams=dataclasses.replace(headline.exams, depth=depth))
    reason = protocol.protocol_of(data).untestable_reason
    assert reason is not None and "(2.530) is not below the text's unigram loss (2.400)" in reason
    assert claims_by_key(data)["lower_valley"].verdict.startswith("**not testable at this size**")
    learned = dataclasses.replace(
        headline, exams=dataclasses.replace(headline.exams, depth=depth.assign(unigram_loss=3.0))
    )
    assert protocol.protocol_of(learned).untestable_reason is None


def test_the_report_opens_with_the_text_and_the_protocol(headline, monkeypatch):
    monkeypatch.setattr(protocol, "CHAPTER_PROTOCOL", CHAPTERS)
    report = markdown.render(headline, [], costs=False)
    opening = report[: report.index("### Headline")]
    assert "These results judge runs on my_blog (5,000 training characters, a vocabulary of 50)" in opening
    assert "**Not the chapter's protocol**" in opening
    monkeypatch.setattr(protocol, "CHAPTER_PROTOCOL", {key: 1 for key in CHAPTERS})
    opening = markdown.render(headline, [], costs=False)
    assert "The chapter's protocol: 100 steps of a 1-layer, 16-wide model." in opening


def which_part_wins_where(report: str) -> str:
    start = report.index("### Which part wins where")
    return report[start : report.index("###", start + 3)]


def test_the_reports_part_sentences_on_toy_runs_are_not_findings(headline, monkeypatch):
    monkeypatch.setattr(protocol, "CHAPTER_PROTOCOL", CHAPTERS)
    section = which_part_wins_where(markdown.render(headline, [], costs=False))
    parts = [line for line in section.split("**")[1::2] if line in ("RMSNorm", "pre-norm", "RoPE", "GQA", "SwiGLU")]
    assert len(parts) == 5
    assert section.count("**Not testable at this size.** What these runs, not the chapter's, showed:") == 5
    monkeypatch.setattr(protocol, "CHAPTER_PROTOCOL", {key: 1 for key in CHAPTERS})
    assert "Not testable" not in which_part_wins_where(markdown.render(headline, [], costs=False))


def test_the_readme_headline_names_the_text_and_the_protocol(headline, monkeypatch):
    monkeypatch.setattr(protocol, "CHAPTER_PROTOCOL", CHAPTERS)
    for language in ("en", "zh_CN"):
        block = readme_blocks(headline, [], "", language)["headline"]
        assert "my_blog" in block.split("\n\n")[0]  # the first paragraph names the text
    english = readme_blocks(headline, [], "")["headline"]
    assert english.startswith(protocol.protocol_text(protocol.protocol_of(headline)))
    assert "**Not the chapter's protocol**" in english
