"""bf16 autocast against fp32: what each precision computes in, what a run records, and that a run
never resumes in another precision."""

from __future__ import annotations

import json

import pytest
import torch

from anatomy.training import compiling

from anatomy import precision
from anatomy.training import trainer as trainer_module
from anatomy.config import TrainConfig, preset
from anatomy.errors import AnatomyError
from anatomy.generation.generate import generate_samples
from anatomy.model import MiniLM
from anatomy.training.trainer import train
from tiny_runs import FAST, tiny_data  # noqa: F401 - a fixture

CPU = torch.device("cpu")


def batch(vocab_size: int = 50, ctx_len: int = 16):
    data = torch.randint(0, vocab_size, (4, ctx_len + 1), generator=torch.Generator().manual_seed(0))
    return data[:, :-1], data[:, 1:]


def read_json(path):
    return json.loads(path.read_text(encoding="utf-8"))


# --- what auto picks ---------------------------------------------------------------------------


@pytest.mark.parametrize("native, expected", [(True, "bf16"), (False, "fp32")])
def test_auto_takes_bf16_only_where_the_hardware_multiplies_it(monkeypatch, native, expected):
    monkeypatch.setattr(precision, "native_bf16", lambda device: native)
    assert precision.resolve_precision("auto", CPU) == expected
    # an explicit setting is taken as it is, whatever the hardware
    assert precision.resolve_precision("bf16", CPU) == "bf16"
    assert precision.resolve_precision("fp32", CPU) == "fp32"


def test_auto_is_fp32_on_mps_until_measured():
    assert precision.native_bf16(torch.device("mps")) is False


def test_an_unknown_precision_is_named():
    with pytest.raises(AnatomyError, match=r"TrainConfig.precision = 'fp16' is not valid: expected one of 'fp32'"):
        TrainConfig(precision="fp16")


# --- what each precision computes in -----------------------------------------------------------


def test_bf16_multiplies_in_bf16_but_keeps_weights_optimizer_and_loss_in_fp32():
    torch.manual_seed(0)
    model = MiniLM(preset("llama", vocab_size=50, d_model=32, n_layer=2, ctx_len=16))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    x, y = batch()
    with precision.autocast("bf16", CPU):
        logits, loss = model(x, y)
    assert logits.dtype == torch.bfloat16 and loss.dtype == torch.float32
    compiling.forward_backward(model, optimizer, x, y, "bf16")
    optimizer.step()
    assert {p.dtype for p in model.parameters()} == {torch.float32}
    assert {p.grad.dtype for p in model.parameters()} == {torch.float32}
    moments = [s["exp_avg"].dtype for s in optimizer.state.values()]
    assert moments and set(moments) == {torch.float32}


@pytest.mark.parametrize("impl", ["fused", "manual"])
def test_fp32_computes_exactly_what_it_did_before_the_setting(impl):
    """fp32 adds nothing around the forward pass: the shipped runs reproduce bit for bit."""
    torch.manual_seed(0)
    model = MiniLM(preset("llama", vocab_size=50, d_model=32, n_layer=2, ctx_len=16, impl=impl))
    x, y = batch()
    _, plain = model(x, y)
    with precision.autocast("fp32", CPU):
        _, wrapped = model(x, y)
    assert torch.equal(plain, wrapped)


@pytest.mark.parametrize("impl", ["fused", "manual"])
def test_bf16_loss_is_close_to_fp32_but_rounded(impl):
    torch.manual_seed(0)
    model = MiniLM(preset("vanilla", vocab_size=50, d_model=32, n_layer=2, ctx_len=16, impl=impl))
    x, y = batch()
    _, fp32 = model(x, y)
    with precision.autocast("bf16", CPU):
        _, bf16 = model(x, y)
    assert not torch.equal(fp32, bf16)  # bf16 really ran
    assert abs(fp32.item() - bf16.item()) < 0.05


def test_compile_auto_compiles_every_fused_model_under_bf16(monkeypatch):
    """Autocast's casts are small ops too; under bf16 compiling pays for vanilla as well."""
    monkeypatch.setattr(compiling, "backend_available", lambda device: True)
    vanilla = preset("vanilla", vocab_size=50)
    assert not compiling.compile_wanted("auto", CPU, vanilla, "fp32")
    assert compiling.compile_wanted("auto", CPU, vanilla, "bf16")
    assert not compiling.compile_wanted("auto", CPU, preset("vanilla", vocab_size=50, impl="manual"), "bf16")


# --- a run in bf16: trains, records, resumes, generates ----------------------------------------


def test_a_bf16_run_records_its_precision_and_differs_from_fp32(tiny_data, tmp_path):  # noqa: F811
    fp32 = train(tiny_data, tmp_path / "fp32", "debug", {}, FAST)
    bf16 = train(tiny_data, tmp_path / "bf16", "debug", {}, {**FAST, "precision": "bf16"})
    assert (fp32["precision"], bf16["precision"]) == ("fp32", "bf16")
    assert read_json(tmp_path / "bf16" / "config.json")["train"]["precision"] == "bf16"
    assert bf16["batch_digest"] == fp32["batch_digest"]  # same batches: only the precision differs
    assert bf16["best_val_loss"] != fp32["best_val_loss"]
    assert abs(bf16["best_val_loss"] - fp32["best_val_loss"]) < 0.1


def test_auto_records_what_it_resolved_to(tiny_data, tmp_path, monkeypatch):  # noqa: F811
    monkeypatch.setattr(precision, "native_bf16", lambda device: False)
    summary = train(tiny_data, tmp_path / "run", "debug", {}, {**FAST, "precision": "auto"})
    assert summary["precision"] == "fp32"
    assert read_json(tmp_path / "run" / "config.json")["train"]["precision"] == "fp32"


def test_a_bf16_run_stopped_midway_resumes_to_the_same_numbers(tiny_data, tmp_path, monkeypatch):  # noqa: F811
    settings = {**FAST, "precision": "bf16"}
    uninterrupted = train(tiny_data, tmp_path / "whole", "debug", {}, settings)

    calls = {"n": 0}

    def lost_at_step_15():
        calls["n"] += 1
        return calls["n"] == 15

    monkeypatch.setattr(trainer_module, "lifeline_lost", lost_at_step_15)
    with pytest.raises(AnatomyError, match="stops too, at step 15"):
        train(tiny_data, tmp_path / "stopped", "debug", {}, settings)
    monkeypatch.setattr(trainer_module, "lifeline_lost", lambda: False)
    resumed = train(tiny_data, tmp_path / "stopped", "debug", {}, settings)
    for key in ("best_val_loss", "final_train_loss", "final_val_loss", "batch_digest"):
        assert resumed[key] == uninterrupted[key], key


def test_a_run_never_resumes_in_another_precision(tiny_data, tmp_path):  # noqa: F811
    run_dir = tmp_path / "run"
    train(tiny_data, run_dir, "debug", {}, {**FAST, "precision": "bf16"})
    with pytest.raises(AnatomyError, match="train.precision: 'bf16' in the folder, 'fp32' asked for"):
        train(tiny_data, run_dir, "debug", {}, FAST)
    again = train(tiny_data, run_dir, "debug", {}, FAST, restart_on_change=True)
    assert again["precision"] == "fp32"


def test_a_run_from_before_the_setting_counts_as_fp32(tiny_data, tmp_path, capsys):  # noqa: F811
    """The shipped reference runs' config.json has no precision: they are fp32 runs, not foreign ones."""
    run_dir = tmp_path / "run"
    train(tiny_data, run_dir, "debug", {}, FAST)
    config = read_json(run_dir / "config.json")
    del config["train"]["precision"]
    (run_dir / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert train(tiny_data, run_dir, "debug", {}, FAST)["steps_done"] == 30
    assert "already finished" in capsys.readouterr().out
    with pytest.raises(AnatomyError, match="train.precision: 'fp32' in the folder, 'bf16' asked for"):
        train(tiny_data, run_dir, "debug", {}, {**FAST, "precision": "bf16"})


def test_generation_uses_the_runs_own_precision(tiny_data, tmp_path, monkeypatch):  # noqa: F811
    train(tiny_data, tmp_path / "run", "debug", {}, {**FAST, "precision": "bf16"})
    used = []
    real_autocast = precision.autocast

    def spy(which, device):
        used.append(which)
        return real_autocast(which, device)

    monkeypatch.setattr("anatomy.generation.generate.autocast", spy)
    record = generate_samples(tmp_path / "run", "best", chars=5)
    assert record["precision"] == "bf16" and len(record["text"]) == len("## ") + 5
    assert used and set(used) == {"bf16"}


def test_the_length_exam_reads_a_bf16_run_in_bf16(tiny_data, tmp_path, monkeypatch):  # noqa: F811
    from anatomy.cli import main

    run_dir = tmp_path / "run"
    train(tiny_data, run_dir, "debug", {"pos_type": "rope"}, {**FAST, "precision": "bf16"})
    used = []
    real_autocast = precision.autocast
    monkeypatch.setattr(
        "anatomy.exams.length.autocast", lambda which, device: used.append(which) or real_autocast(which, device)
    )
    out = tmp_path / "length.json"
    assert main(["exam", "length", str(run_dir), "--data", str(tiny_data), "--windows", "16", "--out", str(out)]) == 0
    assert read_json(out)["precision"] == "bf16" and set(used) == {"bf16"}
