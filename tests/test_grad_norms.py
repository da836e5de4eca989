"""Gradient-norm logging: the per-block norm, when it is logged, grad_norms.jsonl across a
kill and a resume, that logging leaves the trained numbers alone, and reading the file back."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from anatomy.training import compiling

from anatomy.training import grad_norms
from anatomy.training import trainer as trainer_module
from anatomy.config import preset
from anatomy.errors import AnatomyError
from anatomy.files.run_folder import GRAD_NORMS_FILE
from anatomy.training.grad_norms import block_grad_norms, read_grad_norms, should_log
from anatomy.model import MiniLM
from anatomy.files.run_folder import RunFolder
from anatomy.training.trainer import train
from tiny_runs import FAST

# warmup 0 and a real lr, so that 20-odd steps move the weights
SHORT = {**FAST, "steps": 23, "eval_every": 5, "warmup_steps": 0, "lr": 3e-3}
THREE_LAYERS = {"n_layer": 3}


def logged_lines(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / GRAD_NORMS_FILE).read_text().splitlines()]


def metric_numbers(run_dir: Path) -> list[tuple]:
    """Everything a metrics row says about the model (not how long it took)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    return [(r["step"], r["train_loss"], r["val_loss"], r["lr"]) for r in rows]


# --- the norm and the schedule ------------------------------------------------------------------


def test_block_norms_match_torch_total_norm_over_each_block():
    torch.manual_seed(0)
    model = MiniLM(preset("debug", vocab_size=20, n_layer=3))
    idx = torch.randint(0, 20, (2, 16))
    model(idx, idx)[1].backward()
    norms = block_grad_norms(model.blocks)
    assert len(norms) == 3
    for block, norm in zip(model.blocks, norms):
        expected = torch.nn.utils.get_total_norm([p.grad for p in block.parameters()]).item()
        assert norm == pytest.approx(expected, rel=1e-5) and norm > 0
    assert len(set(norms)) == 3  # each block its own number, not one shared one


def test_a_block_without_gradients_counts_zero():
    torch.manual_seed(0)
    model = MiniLM(preset("debug", vocab_size=20))
    idx = torch.randint(0, 20, (2, 16))
    model(idx, idx)[1].backward()
    for p in model.blocks[1].parameters():
        p.grad = None
    norms = block_grad_norms(model.blocks)
    assert norms[0] > 0 and norms[1] == 0.0


def test_should_log_every_step_until_200_then_at_evals_and_the_last_step():
    assert all(should_log(step, 50, 2000) for step in range(1, 201))
    assert [step for step in range(201, 2001) if should_log(step, 50, 2000)] == list(range(250, 2001, 50))
    assert should_log(333, 50, 333) and not should_log(332, 50, 333)


# --- grad_norms.jsonl in a run folder --------------------------------------------------------


def test_the_file_holds_exactly_the_logged_steps_with_one_norm_per_block(tiny_data, tmp_path, monkeypatch):
    monkeypatch.setattr(grad_norms, "EVERY_STEP_UNTIL", 8)  # the schedule's turn, within a tiny run
    train(tiny_data, tmp_path / "run", "debug", THREE_LAYERS, SHORT)
    lines = logged_lines(tmp_path / "run")
    assert [line["step"] for line in lines] == [1, 2, 3, 4, 5, 6, 7, 8, 10, 15, 20, 23]
    assert all(len(line["norms"]) == 3 and all(n > 0 for n in line["norms"]) for line in lines)
    rows = read_grad_norms(tmp_path / "run" / GRAD_NORMS_FILE, "demo/seed42")
    assert len(rows) == 12 * 3
    assert rows[3] == {"run_id": "demo/seed42", "step": 2, "layer": 0, "norm": lines[1]["norms"][0]}


def test_logging_does_not_change_what_a_run_trains_to(tiny_data, tmp_path, monkeypatch):
    """The same run with logging on, and with it off (the trainer as it was before logging): the
    same losses to the last bit. A logger that touched the gradients would show here, as the
    meddling one below does."""
    logged = tmp_path / "logged"
    train(tiny_data, logged, "debug", {}, SHORT)
    assert len(logged_lines(logged)) == 23  # it did log, every step

    monkeypatch.setattr(trainer_module, "should_log", lambda *args: False)
    train(tiny_data, tmp_path / "unlogged", "debug", {}, SHORT)
    assert logged_lines(tmp_path / "unlogged") == []
    assert metric_numbers(logged) == metric_numbers(tmp_path / "unlogged")

    def meddling(blocks):
        norms = block_grad_norms(blocks)
        for p in blocks[0].parameters():
            p.grad.zero_()
        return norms

    monkeypatch.setattr(trainer_module, "should_log", should_log)
    monkeypatch.setattr(trainer_module, "block_grad_norms", meddling)
    train(tiny_data, tmp_path / "meddled", "debug", {}, SHORT)
    assert metric_numbers(tmp_path / "meddled") != metric_numbers(logged)


def test_a_stopped_and_resumed_run_writes_the_same_file_as_an_uninterrupted_one(tiny_data, tmp_path, monkeypatch):
    """Stopped at step 17 (the last checkpoint is step 15, so the file already holds 16 and 17),
    with a half-written line on top: the resumed run drops those and logs them again, once."""
    reference = tmp_path / "reference"
    train(tiny_data, reference, "debug", THREE_LAYERS, SHORT)

    stopped = tmp_path / "stopped"
    steps_seen = []

    def stop_at_step_17():
        steps_seen.append(None)
        return len(steps_seen) == 17

    monkeypatch.setattr(trainer_module, "lifeline_lost", stop_at_step_17)
    with pytest.raises(AnatomyError, match="stops too, at step 17"):
        train(tiny_data, stopped, "debug", THREE_LAYERS, SHORT)
    assert [line["step"] for line in logged_lines(stopped)] == list(range(1, 18))
    with open(stopped / GRAD_NORMS_FILE, "a") as f:
        f.write('{"step": 18, "norms": [0.1')

    monkeypatch.setattr(trainer_module, "lifeline_lost", lambda: False)
    train(tiny_data, stopped, "debug", THREE_LAYERS, SHORT)
    assert (stopped / GRAD_NORMS_FILE).read_text() == (reference / GRAD_NORMS_FILE).read_text()
    assert [line["step"] for line in logged_lines(stopped)] == list(range(1, 24))
    assert metric_numbers(stopped) == metric_numbers(reference)


def test_a_diverged_run_logs_its_last_step_with_null_norms(tiny_data, tmp_path, monkeypatch):
    """Even where the schedule would skip it: the step that blew up ends the log. Its norms are
    null in the file and NaN in the rows."""
    monkeypatch.setattr(grad_norms, "EVERY_STEP_UNTIL", 0)  # only evals and the last step, by schedule
    summary = train(tiny_data, tmp_path / "run", "debug", {}, {**SHORT, "lr": 1e30})
    assert summary["diverged"] and summary["diverged_step"] < 5
    lines = logged_lines(tmp_path / "run")
    assert lines == [{"step": summary["diverged_step"], "norms": [None, None]}]
    rows = read_grad_norms(tmp_path / "run" / GRAD_NORMS_FILE, "x")
    assert len(rows) == 2 and all(math.isnan(row["norm"]) for row in rows)


@pytest.mark.slow  # seconds: CI runs it, the inner loop leaves it out
@pytest.mark.skipif(not compiling.backend_available(torch.device("cpu")), reason="no C++ compiler for torch.compile")
def test_a_compiled_step_logs_the_same_norms_as_an_eager_one(tiny_data, tmp_path):
    """torch.compile's wrapper shares the model's parameters, so the model's own blocks hold the
    gradients a compiled step makes (equal up to float rounding)."""
    settings = {**SHORT, "steps": 6}
    train(tiny_data, tmp_path / "eager", "debug", {}, {**settings, "compile": False})
    summary = train(tiny_data, tmp_path / "compiled", "debug", {}, {**settings, "compile": True})
    assert summary["compiled"] is True
    eager, compiled = logged_lines(tmp_path / "eager"), logged_lines(tmp_path / "compiled")
    assert [line["step"] for line in compiled] == [1, 2, 3, 4, 5, 6]
    for a, b in zip(eager, compiled):
        assert b["norms"] == pytest.approx(a["norms"], rel=1e-4)


def test_clearing_a_run_folder_removes_the_log(tmp_path):
    run = RunFolder(tmp_path / "run")
    run.root.mkdir()
    run.append_grad_norms({"step": 1, "norms": [1.0]})
    assert run.grad_norms.name == GRAD_NORMS_FILE and run.grad_norms.is_file()
    run.clear()
    assert not run.grad_norms.exists()


# --- reading the file -------------------------------------------------------------------------


def test_reading_rows_and_a_half_written_last_line(tmp_path):
    path = tmp_path / GRAD_NORMS_FILE
    path.write_text('{"step": 1, "norms": [0.5, 0.25]}\n{"step": 2, "norms": [null, 2]}\n{"step": 3, "norms": [0.')
    rows = read_grad_norms(path, "depth/post_lr0.001")
    assert [(r["run_id"], r["step"], r["layer"]) for r in rows] == [
        ("depth/post_lr0.001", 1, 0),
        ("depth/post_lr0.001", 1, 1),
        ("depth/post_lr0.001", 2, 0),
        ("depth/post_lr0.001", 2, 1),
    ]
    assert [r["norm"] for r in rows[:2]] == [0.5, 0.25] and math.isnan(rows[2]["norm"]) and rows[3]["norm"] == 2.0
    assert all(set(r) == {"run_id", "step", "layer", "norm"} for r in rows)
    assert read_grad_norms(tmp_path / "missing.jsonl", "x") == []


@pytest.mark.parametrize(
    "text, message",
    [
        (
            '{"step": 1, "norms": [0.5]}\n{"step": 2, "norms": [0.\n{"step": 3, "norms": [1]}\n',
            r"line 2 is not valid JSON",
        ),
        ('{"step": 1, "norms": [0.5]}\n{"step": 2, "norms": [0.', None),  # skipped, not an error
        ('{"step": 1, "norms": [0.5]}\n{"step": 2, "norms": [0.\n', r"line 2 is not valid JSON"),  # ended: complete
        ('{"step": 0, "norms": [0.5]}\n', r"line 1: 'step' must be a whole number from 1, got 0"),
        ('{"step": 1, "norms": [0.5, "big"]}\n', r"line 1: 'norms' must hold numbers or null, got 'big'"),
        ('{"step": 1, "norms": []}\n', r"line 1: 'norms' must be a list of one number per block"),
        ('{"step": 1, "norms": [1, 2]}\n{"step": 2, "norms": [1]}\n', r"line 2 has 1 norms, the lines before it 2"),
        ("[1, 2]\n", r"line 1 must be an object with 'step' and 'norms' fields"),
    ],
)
def test_a_bad_file_is_an_error_naming_file_and_line(tmp_path, text, message):
    path = tmp_path / GRAD_NORMS_FILE
    path.write_text(text)
    if message is None:
        assert [r["step"] for r in read_grad_norms(path, "x")] == [1]
        return
    with pytest.raises(AnatomyError, match=rf"{GRAD_NORMS_FILE}: {message}"):
        read_grad_norms(path, "x")
