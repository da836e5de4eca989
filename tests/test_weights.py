"""Float16 weights files: what they hold, generation from them, and the shipped reference voices."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from anatomy.files import weights
from anatomy.cli import main
from anatomy.errors import AnatomyError
from anatomy.generation.generate import generate_samples, load_model
from anatomy.files.run_folder import load_checkpoint
from anatomy.files.weights import load_weights, save_weights


REPO = Path(__file__).resolve().parent.parent
# Float16 rounds each weight (relative error up to about 5e-4), so every probability moves a
# little. Sampling draws one uniform number per character and picks where it falls in the
# cumulative probabilities: once a draw lands near a boundary that moved, the rounded model picks
# the neighbouring character and the two texts part for good. So the shipped weights follow their
# checkpoint's sample only for its first characters; how many depends on where that first near
# miss happens (docs/reference.md has the counts). This is the prefix plus three characters.
SAME_FIRST_CHARS = 6


def weights_only_copy(run: Path, dest: Path) -> Path:
    """The run's small files plus float16 weights: how a shipped reference run looks."""
    dest.mkdir()
    for name in ("config.json", "summary.json"):
        shutil.copy(run / name, dest / name)
    for checkpoint in ("best", "last"):
        save_weights(load_checkpoint(run / f"{checkpoint}.pt"), dest / f"{checkpoint}.safetensors")
    return dest


def test_weights_are_the_checkpoints_rounded_to_float16(tiny_runs, tmp_path):
    saved = load_checkpoint(tiny_runs["llama"] / "last.pt")
    save_weights(saved, tmp_path / "last.safetensors")
    state, config, vocab = load_weights(tmp_path / "last.safetensors")
    assert config == saved["config"]["model"] and vocab == saved["vocab"]
    assert set(state) == set(saved["model"])
    for name, tensor in state.items():
        assert tensor.dtype == torch.float32
        assert torch.equal(tensor, saved["model"][name].to(torch.float16).to(torch.float32))


def test_generation_from_weights_alone(tiny_runs, tmp_path):
    run = weights_only_copy(tiny_runs["llama"], tmp_path / "shipped")
    for checkpoint in ("best", "last"):
        original, _ = load_model(tiny_runs["llama"], checkpoint)
        shipped, tokenizer = load_model(run, checkpoint)
        ids = torch.tensor([tokenizer.encode("## 子曰：学而时习之")])
        with torch.no_grad():
            expected, got = original(ids)[0], shipped(ids)[0]
        assert torch.allclose(got, expected, atol=5e-3), (got - expected).abs().max()
        text = generate_samples(run, checkpoint, chars=40, seed=3)["text"]
        full = generate_samples(tiny_runs["llama"], checkpoint, chars=40, seed=3)["text"]
        assert text[:SAME_FIRST_CHARS] == full[:SAME_FIRST_CHARS]
    assert main(["generate", str(run), "--checkpoint", "best", "--chars", "5"]) == 0


def reordered(data: bytes) -> bytes:
    """The same safetensors file with its header's keys in another order (and non-ASCII escaped):
    as valid, other bytes, as safetensors itself may write from one process to the next."""
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    header["__metadata__"] = dict(reversed(header["__metadata__"].items()))
    text = json.dumps(dict(reversed(header.items())), separators=(",", ":")).encode("ascii")
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + size :]


def test_equal_weights_give_equal_bytes_and_are_not_written_again(tiny_runs, tmp_path, monkeypatch):
    """Shipped weights must not churn in git: safetensors orders the metadata differently from one
    process to the next, so the file's header is written in one order of our own."""
    saved = load_checkpoint(tiny_runs["llama"] / "last.pt")
    target = tmp_path / "last.safetensors"
    assert save_weights(saved, target)
    written, stamp = target.read_bytes(), target.stat().st_mtime_ns
    real_save = weights.save
    monkeypatch.setattr(weights, "save", lambda tensors, metadata: reordered(real_save(tensors, metadata=metadata)))
    assert save_weights(saved, tmp_path / "again.safetensors")
    assert (tmp_path / "again.safetensors").read_bytes() == written
    assert not save_weights(saved, target)  # the same bytes: not written again
    assert target.stat().st_mtime_ns == stamp
    state, config, vocab = load_weights(target)
    assert config == saved["config"]["model"] and vocab == saved["vocab"] and set(state) == set(saved["model"])


def test_a_foreign_weights_file_is_one_clear_line(tmp_path):
    bad = tmp_path / "last.safetensors"
    bad.write_bytes(b"not a safetensors file at all")
    with pytest.raises(AnatomyError, match="last.safetensors: not a weights file of this project"):
        load_weights(bad)


def test_reference_ships_weights_of_the_named_runs(tiny_runs, tmp_path, capsys):
    runs = tmp_path / "runs"
    shutil.copytree(tiny_runs["llama"], runs / "llama" / "seed42")
    (runs / "llama" / "seed42" / "samples.json").write_text("[]")
    out = tmp_path / "reference"
    assert main(["reference", "--runs", str(runs), "--out", str(out), "--weights", "llama/seed42"]) == 0
    shipped = out / "runs" / "llama" / "seed42"
    assert sorted(p.name for p in shipped.glob("*.safetensors")) == ["best.safetensors", "last.safetensors"]
    assert not list(out.rglob("*.pt"))
    assert "weights:" in capsys.readouterr().out
    # a killed call's leftover goes; the same weights are not written again
    leftover = shipped / ".best.safetensors.x1y2.tmp"
    leftover.write_bytes(b"half written")
    stamps = {path: path.stat().st_mtime_ns for path in shipped.glob("*.safetensors")}
    assert main(["reference", "--runs", str(runs), "--out", str(out), "--weights", "llama/seed42"]) == 0
    assert "weights:" not in capsys.readouterr().out
    assert not leftover.exists()
    assert {path: path.stat().st_mtime_ns for path in shipped.glob("*.safetensors")} == stamps
    assert main(["reference", "--runs", str(runs), "--out", str(out), "--weights", "vanilla/seed7"]) == 2
    assert "--weights vanilla/seed7: not a shipped run" in capsys.readouterr().err


SHIPPED = sorted((REPO / "results" / "reference" / "runs").glob("*/*/*.safetensors"))


@pytest.mark.parametrize("weights", SHIPPED, ids=[str(p.relative_to(REPO)) for p in SHIPPED])
def test_a_shipped_voice_starts_its_stored_sample(weights):
    """The reference weights (float16) begin the text their float32 checkpoint wrote at the same seed."""
    run, checkpoint = weights.parent, weights.name.removesuffix(".safetensors")
    stored = [
        s for s in json.loads((run / "samples.json").read_text(encoding="utf-8")) if s["checkpoint"] == checkpoint
    ]
    assert stored, f"{run}/samples.json has no sample from the {checkpoint} checkpoint"
    sample = stored[0]
    text = generate_samples(
        run,
        checkpoint,
        chars=SAME_FIRST_CHARS,
        temperature=sample["temperature"],
        prefix=sample["prefix"],
        seed=sample["seed"],
    )["text"]
    assert text[:SAME_FIRST_CHARS] == sample["text"][:SAME_FIRST_CHARS]
