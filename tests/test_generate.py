"""Generation: the KV cache changes speed, never the text; seeds; prefixes; the command line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from anatomy.cli import main
from anatomy.errors import AnatomyError
from anatomy.generation.generate import generate_samples, load_model, sample, sample_next, window_start
from tiny_runs import TINY_TEXT


def test_window_start_jumps_by_half_a_window():
    ctx = 16
    assert [window_start(n, ctx) for n in (1, 16, 17, 24, 25, 32, 33)] == [0, 0, 8, 8, 16, 16, 24]
    for n in range(1, 200):  # the model never sees more than ctx_len tokens
        assert 0 < n - window_start(n, ctx) <= ctx


def test_sample_next_follows_the_softmax_distribution():
    """Inverse-CDF sampling: frequencies match softmax(logits / T); a -inf logit is never drawn."""
    logits = torch.tensor([2.0, 0.0, float("-inf"), 1.0, -1.0])
    temperature = 0.8
    generator = torch.Generator().manual_seed(0)
    draws = torch.tensor([sample_next(logits, temperature, generator) for _ in range(20_000)])
    frequencies = torch.bincount(draws, minlength=5).float() / len(draws)
    expected = torch.softmax(logits / temperature, dim=-1)
    assert frequencies[2] == 0
    torch.testing.assert_close(frequencies, expected, atol=0.015, rtol=0)


def test_sample_next_never_returns_an_index_past_the_vocabulary():
    """Even when rounding leaves the cumulative sum a hair below the drawn number."""
    peaked = torch.tensor([0.0] * 7 + [50.0])  # all the mass on the last token
    generator = torch.Generator().manual_seed(1)
    assert {sample_next(peaked, 1.0, generator) for _ in range(500)} == {7}


@pytest.mark.parametrize("name", ["vanilla", "llama"])
def test_cache_gives_the_same_text_as_recomputing(tiny_runs, name):
    model, tokenizer = load_model(tiny_runs[name])
    chars = 5 * model.cfg.ctx_len  # several window jumps
    cached = sample(model, tokenizer, chars=chars, seed=3, use_cache=True)
    recomputed = sample(model, tokenizer, chars=chars, seed=3, use_cache=False)
    assert cached == recomputed
    assert cached.startswith("## ") and len(cached) == 3 + chars


def test_seed_decides_the_text(tiny_runs):
    model, tokenizer = load_model(tiny_runs["llama"])
    first = sample(model, tokenizer, chars=60, seed=1)
    assert sample(model, tokenizer, chars=60, seed=1) == first
    assert sample(model, tokenizer, chars=60, seed=2) != first


def test_temperature_zero_always_takes_the_most_likely_character(tiny_runs):
    """Greedy decoding, step by step against the argmax of a full forward pass, whatever the seed."""
    model, tokenizer = load_model(tiny_runs["llama"])
    chars = model.cfg.ctx_len - 3  # within one window, so every step sees the whole text
    greedy = sample(model, tokenizer, chars=chars, temperature=0, seed=1)
    ids = tokenizer.encode("## ")
    with torch.no_grad():
        for _ in range(chars):
            ids.append(int(model(torch.tensor([ids]))[0][0, -1].argmax()))
    assert greedy == tokenizer.decode(ids)
    assert sample(model, tokenizer, chars=chars, temperature=0, seed=2) == greedy
    assert sample(model, tokenizer, chars=chars, seed=1) != greedy  # sampling is not greedy


def test_trained_model_writes_text_from_its_corpus(tiny_runs):
    model, tokenizer = load_model(tiny_runs["llama"])
    text = sample(model, tokenizer, chars=200, temperature=0.5, prefix="子曰", seed=0)
    assert "不亦" in text or "子曰" in text[2:]  # 60 steps on a repeated text is enough to echo it


def test_prefix_outside_the_vocabulary_is_named(tiny_runs):
    model, tokenizer = load_model(tiny_runs["vanilla"])
    with pytest.raises(AnatomyError, match=r"'Q' \(U\+0051\) at position 1 is not in the vocabulary"):
        sample(model, tokenizer, prefix="#Q")
    with pytest.raises(AnatomyError, match=r"temperature = -0.5 is not valid: expected 0 \(greedy\)"):
        sample(model, tokenizer, temperature=-0.5)


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    with pytest.raises(AnatomyError, match="best.pt: no such checkpoint"):
        load_model(tmp_path, "best")


def test_command_line_writes_samples_json(tiny_runs, tmp_path, capsys):
    out = tmp_path / "samples.json"
    args = ["generate", str(tiny_runs["llama"]), "--chars", "40", "--seed", "5", "--out", str(out)]
    assert main(args) == 0
    [record] = json.loads(out.read_text())
    assert record["checkpoint"] == "last" and record["temperature"] == 0.8 and record["prefix"] == "## "
    assert record["text"] == capsys.readouterr().out.rstrip("\n") and len(record["text"]) == 43
    assert main(["generate", str(tiny_runs["llama"]), "--prefix", "☃"]) == 2
    assert "U+2603" in capsys.readouterr().err


def test_samples_from_the_last_and_the_best_checkpoint(tiny_runs, tmp_path, capsys):
    out = tmp_path / "samples.json"
    common = [str(tiny_runs["llama"]), "--chars", "40", "--seed", "5"]
    assert main(["generate", *common, "--checkpoint", "last", "best", "--out", str(out)]) == 0
    last, best = json.loads(out.read_text())
    assert (last["checkpoint"], best["checkpoint"]) == ("last", "best")
    # each is the text that checkpoint alone gives at this seed
    assert last["text"] == generate_samples(tiny_runs["llama"], "last", chars=40, seed=5)["text"]
    assert best["text"] == generate_samples(tiny_runs["llama"], "best", chars=40, seed=5)["text"]
    # each measured against the run's own training text (its corpus folder is at hand)
    for record in (last, best):
        figures = record["memorisation"]
        assert 0.0 <= figures["copied_fraction"] <= 1.0 and figures["min_chars"] == 12
        assert all(record["text"][start : start + length] in TINY_TEXT for start, length, *_ in figures["copied_spans"])
    printed = capsys.readouterr().out
    assert printed.index("--- last checkpoint") < printed.index(last["text"]) < printed.index("--- best checkpoint")


@pytest.mark.slow  # seconds: CI runs it, the inner loop leaves it out
def test_a_reader_that_stops_early_is_not_an_error(tiny_runs, tmp_path):
    """`python -m anatomy generate RUN | head -3`: head closes the pipe before the text is printed.
    No traceback, exit 0, and the samples file is whole."""
    out = tmp_path / "samples.json"
    command = [sys.executable, "-m", "anatomy", "generate", str(tiny_runs["llama"]), "--chars", "40", "--out", str(out)]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the child writes anything
    stderr = proc.stderr.read().decode()
    assert proc.wait() == 0, stderr
    assert "Traceback" not in stderr and "Broken pipe" not in stderr
    assert len(json.loads(out.read_text())[0]["text"]) == 43


def test_diverged_run_is_sampled_from_its_best_checkpoint(tiny_runs, tmp_path):
    import shutil

    run = tmp_path / "diverged"
    shutil.copytree(tiny_runs["vanilla"], run)
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "diverged": True, "diverged_step": 55}))
    record = generate_samples(run, chars=10)
    assert record["checkpoint"] == "best" and "diverged at step 55" in record["note"]
    assert len(record["text"]) == 13
    # diverged before any finite evaluation: no best weights either, whichever is asked for
    (run / "best.pt").unlink()
    for checkpoint in ("last", "best"):
        record = generate_samples(run, checkpoint, chars=10)
        assert record["checkpoint"] is None and record["text"] is None
        assert record["note"] == "run diverged at step 55; no checkpoint to sample from"


def test_a_diverged_flag_written_as_text_is_an_error(tiny_runs, tmp_path):
    """ "false" is a non-empty string, so it used to read as true and sample from best.pt."""
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_runs["vanilla"], run)
    summary = json.loads((run / "summary.json").read_text())
    (run / "summary.json").write_text(json.dumps({**summary, "diverged": "false"}))
    with pytest.raises(AnatomyError, match=r"summary\.json: field 'diverged' must be true or false, got 'false'"):
        generate_samples(run, chars=10)


@pytest.mark.parametrize("content", [{"weights": 1}, {"model": {}, "vocab": []}])
def test_a_checkpoint_that_is_not_ours_is_one_line(tmp_path, capsys, content):
    torch.save(content, tmp_path / "last.pt")
    assert main(["generate", str(tmp_path)]) == 2
    assert "last.pt: not a checkpoint written by `anatomy train` (missing" in capsys.readouterr().err


def test_out_on_a_folder_is_named(tiny_runs, tmp_path, capsys):
    assert main(["generate", str(tiny_runs["llama"]), "--chars", "5", "--out", str(tmp_path)]) == 2
    assert "is a folder" in capsys.readouterr().err


@pytest.mark.parametrize("temperature", ["nan", "inf"])
def test_a_temperature_that_is_not_a_finite_number_is_refused(tiny_runs, tmp_path, capsys, temperature):
    out = tmp_path / "samples.json"
    assert main(["generate", str(tiny_runs["llama"]), "--temperature", temperature, "--out", str(out)]) == 2
    assert f"temperature = {float(temperature)} is not valid" in capsys.readouterr().err
    assert not out.exists()


def test_a_full_disk_is_one_line_naming_the_samples_file(tiny_runs, tmp_path, monkeypatch, capsys):
    import errno
    import os

    from anatomy.generation import generate

    def write_json(target, obj):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(generate, "write_json", write_json)
    out = tmp_path / "samples.json"
    assert main(["generate", str(tiny_runs["llama"]), "--chars", "5", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {out}: cannot write: no space left on device; " + err.split("; ", 1)[1]
    assert err.count("\n") == 1


def test_a_checkpoint_from_another_run_is_named(tiny_runs, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(tiny_runs["vanilla"], run)
    shutil.copy(tiny_runs["llama"] / "best.pt", run / "best.pt")  # same vocabulary, other parts
    assert main(["generate", str(run), "--checkpoint", "best", "--chars", "5"]) == 2
    err = capsys.readouterr().err
    assert f"{run / 'best.pt'}: this checkpoint is not from the run that {run / 'config.json'} describes" in err
    assert "(model.ffn_type: 'swiglu' in the checkpoint, 'gelu' in config.json;" in err and err.count("\n") == 1
    # where and how a run ran is no part of it: other threads or device in config.json still match
    config = json.loads((run / "config.json").read_text())
    config["train"].update(threads=2, device="cpu", compile=True)
    (run / "config.json").write_text(json.dumps(config))
    assert main(["generate", str(run), "--checkpoint", "last", "--chars", "5"]) == 0
    # a checkpoint of the same shape from another seed is another run too
    config["train"]["seed"] = 7
    (run / "config.json").write_text(json.dumps(config))
    with pytest.raises(AnatomyError, match=r"last\.pt: .*\(train\.seed: 42 in the checkpoint, 7 in config\.json\)"):
        load_model(run, "last")


def test_a_seed_torch_cannot_take_is_refused(tiny_runs, capsys):
    assert main(["generate", str(tiny_runs["llama"]), "--seed", str(2**64)]) == 2
    assert "--seed 18446744073709551616 is not valid: expected 0 to 18446744073709551615" in capsys.readouterr().err


def test_a_long_generation_shows_its_progress_and_warns_when_slow(tiny_runs, monkeypatch, capsys):
    from anatomy.generation import generate

    args = ["generate", str(tiny_runs["llama"]), "--chars", "40", "--seed", "3"]
    assert main(args) == 0
    quiet = capsys.readouterr()
    assert "characters" not in quiet.err
    # as if 40 characters were long and slow: progress on stderr, the text itself unchanged
    monkeypatch.setattr(generate, "PROGRESS_FROM", 40)
    monkeypatch.setattr(generate, "MEASURE_CHARS", 8)
    monkeypatch.setattr(generate, "SLOW_S", 0)
    assert main(args) == 0
    shown = capsys.readouterr()
    assert shown.out == quiet.out
    lines = shown.err.splitlines()
    [warning] = [line for line in lines if line.startswith("warning: ")]  # once, after MEASURE_CHARS
    assert "40 characters will take about" in warning and "at the speed of the first 8" in warning
    assert [line.split(": ")[-1].split(",")[0] for line in lines[1:] if "characters," in line][-1] == "40/40 characters"
    assert sum("characters," in line for line in lines) == 10  # a line every tenth


# A `generate --out` killed (SIGKILL) while it writes samples.json: it prints the temporary file's
# name once it is there, then waits for the kill
KILLED_WHILE_WRITING = """
import sys
from pathlib import Path
from anatomy.cli import main

real_write_text = Path.write_text

def write_text(self, *args, **kwargs):
    real_write_text(self, "half written")
    print(self.name, flush=True)
    sys.stdin.read()  # until killed

Path.write_text = write_text
main(sys.argv[1:])
"""


def test_a_killed_generate_leaves_no_temporary_past_the_next_one(tiny_runs, tmp_path, capsys):
    """Issue #37, item 9: a `.samples.json.*.tmp` of a killed `generate --out` stayed for good."""
    out = tmp_path / "samples.json"
    args = ["generate", str(tiny_runs["llama"]), "--chars", "10", "--out", str(out)]
    killed = subprocess.Popen(
        [sys.executable, "-c", KILLED_WHILE_WRITING, *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        left = killed.stdout.readline().strip()
    finally:
        killed.kill()
        killed.communicate()
    assert left.startswith(".samples.json.") and (tmp_path / left).exists()
    assert main(args) == 0
    assert sorted(path.name for path in tmp_path.iterdir()) == ["samples.json"]
    assert len(json.loads(out.read_text())[0]["text"]) == 13


def test_ctrl_c_while_generate_writes_leaves_no_temporary(tiny_runs, tmp_path, monkeypatch, capsys):
    out = tmp_path / "samples.json"

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(type(out), "write_text", interrupted)
    assert main(["generate", str(tiny_runs["llama"]), "--chars", "10", "--out", str(out)]) == 130
    assert capsys.readouterr().err == "stopped (Ctrl-C)\n"
    assert list(tmp_path.iterdir()) == []
