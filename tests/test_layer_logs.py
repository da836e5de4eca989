"""The per-layer logs beside the gradient norms: the largest attention logit (by hand, fused
against manual, MLA too) and the experts' token shares, in a real run at the gradient norms'
steps; logging changes no number, and a run made before the setting still finishes as itself."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from anatomy.config import preset
from anatomy.data.batches import batch_starts, windows_at
from anatomy.errors import AnatomyError
from anatomy.files.run_folder import EXPERT_SHARES_FILE, GRAD_NORMS_FILE, MAX_LOGITS_FILE
from anatomy.model import MiniLM, apply_rope
from anatomy.training import grad_norms
from anatomy.training.layer_logs import expert_load, max_attention_logits, read_expert_shares, read_max_logits
from anatomy.training import trainer as trainer_module
from anatomy.training.trainer import train
from run_folders import LLAMA_PARTS
from tiny_runs import FAST, tiny_data  # noqa: F401 (a fixture)

SHORT = {**FAST, "steps": 12, "eval_every": 5, "warmup_steps": 0, "lr": 3e-3}
MOE = {**LLAMA_PARTS, "n_kv_head": 4, "ffn_type": "moe", "n_experts": 4, "top_k": 2}


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def hand_max_logits(model: MiniLM, idx: torch.Tensor) -> list[float]:
    """The largest q.k / sqrt(head_dim) of each layer, written out for the pre-norm GQA model:
    project, split the heads, QK-norm, RoPE, score, mask the future, take the max."""
    cfg, found = model.cfg, []
    x = model.tok_emb(idx)
    B, T, _ = x.shape
    angles = torch.outer(
        torch.arange(T, dtype=torch.float32), 10000.0 ** (-torch.arange(0, cfg.head_dim, 2) / cfg.head_dim)
    )
    cos, sin = angles.cos()[:, None], angles.sin()[:, None]
    for block in model.blocks:
        h = block.norm1(x)
        heads = block.attn.qkv_proj(h).view(B, T, cfg.n_head + 2 * cfg.n_kv_head, cfg.head_dim)
        q, k = heads[:, :, : cfg.n_head], heads[:, :, cfg.n_head : cfg.n_head + cfg.n_kv_head]
        q, k = block.attn.q_norm(q), block.attn.k_norm(k)
        q, k = apply_rope(q, cos, sin).transpose(1, 2), apply_rope(k, cos, sin).transpose(1, 2)
        k = k.repeat_interleave(cfg.n_head // cfg.n_kv_head, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(cfg.head_dim)
        allowed = torch.ones(T, T, dtype=torch.bool).tril()
        found.append(scores[..., allowed].max().item())
        x, _ = block(x, model.rope)
    return found


@pytest.mark.parametrize("qk_norm", [False, True])
def test_the_largest_logit_is_the_hand_computed_one(qk_norm):
    torch.manual_seed(0)
    model = MiniLM(preset("debug", vocab_size=20, **{**LLAMA_PARTS, "qk_norm": qk_norm}))
    with torch.no_grad():  # larger weights, so the logits are far from 0 and far apart
        for block in model.blocks:
            block.attn.qkv_proj.weight.mul_(20)
    idx = torch.randint(0, 20, (3, 16))
    with torch.no_grad():
        expected = hand_max_logits(model, idx)
    found = max_attention_logits(model, idx)
    assert found == pytest.approx(expected, rel=1e-5)
    assert len(found) == 2 and found[0] != found[1] and min(found) > 1


@pytest.mark.parametrize("parts", [{}, {"qk_norm": True}, {"attn_type": "mla", "rope_dim": 4, "kv_latent": 8}])
def test_fused_and_manual_attention_give_the_same_largest_logit(parts):
    torch.manual_seed(0)
    cfg = preset("debug", vocab_size=20, **{**LLAMA_PARTS, "n_kv_head": 4}, **parts)
    fused, manual = MiniLM(cfg.replace(impl="fused")), MiniLM(cfg.replace(impl="manual"))
    manual.load_state_dict(fused.state_dict())
    idx = torch.randint(0, 20, (2, 16))
    assert max_attention_logits(fused, idx) == pytest.approx(max_attention_logits(manual, idx), rel=1e-5)


def test_the_pass_leaves_no_hook_and_no_gradient():
    torch.manual_seed(0)
    model = MiniLM(preset("debug", vocab_size=20, **LLAMA_PARTS))
    max_attention_logits(model, torch.randint(0, 20, (2, 16)))
    assert all(not block.attn._forward_pre_hooks for block in model.blocks)
    assert all(p.grad is None for p in model.parameters())


# --- in a run ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def moe_run(tiny_data, tmp_path_factory):  # noqa: F811
    """A 2-layer MoE run with max logits logged, every step logged up to step 8, then at evals."""
    folder = tmp_path_factory.mktemp("moe") / "run"
    patch = pytest.MonkeyPatch()
    patch.setattr(grad_norms, "EVERY_STEP_UNTIL", 8)
    try:
        train(tiny_data, folder, "debug", MOE, {**SHORT, "log_max_logits": True})
    finally:
        patch.undo()
    return folder


def test_both_logs_are_written_at_the_gradient_norms_steps(moe_run):
    steps = [row["step"] for row in lines(moe_run / GRAD_NORMS_FILE)]
    assert steps == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12]
    assert [row["step"] for row in lines(moe_run / EXPERT_SHARES_FILE)] == steps
    assert [row["step"] for row in lines(moe_run / MAX_LOGITS_FILE)] == steps


def test_each_layer_s_shares_are_one_per_expert_and_sum_to_one(moe_run):
    for row in lines(moe_run / EXPERT_SHARES_FILE):
        assert len(row["shares"]) == 2  # layers
        for layer in row["shares"]:
            assert len(layer) == 4 and sum(layer) == pytest.approx(1.0)
            assert all(
                share * 4 * 2 * 16 == pytest.approx(round(share * 4 * 2 * 16)) for share in layer
            )  # tokens x top_k


def test_the_first_logged_logit_is_the_initial_model_s_on_the_first_batch(tiny_data, moe_run):  # noqa: F811
    data = torch.as_tensor(np.load(tiny_data / "train.npy").astype(np.int64))
    x, _ = windows_at(data, batch_starts(42, 0, len(data), 16, 4), 16)
    cfg = json.loads((moe_run / "config.json").read_text())["model"]
    torch.manual_seed(42)
    from anatomy.config import ModelConfig

    model = MiniLM(ModelConfig.from_dict(cfg))
    first = lines(moe_run / MAX_LOGITS_FILE)[0]["max_logits"]
    assert first == pytest.approx(max_attention_logits(model, x), rel=1e-5)


def test_logging_the_logits_changes_no_number_and_an_older_config_still_finishes(tiny_data, moe_run, tmp_path):  # noqa: F811
    plain = tmp_path / "plain"
    train(tiny_data, plain, "debug", MOE, SHORT)
    assert not (plain / MAX_LOGITS_FILE).exists() and (plain / EXPERT_SHARES_FILE).is_file()
    numbers = [[row[k] for k in ("step", "train_loss", "val_loss")] for row in lines(plain / "metrics.jsonl")]
    logged = [[row[k] for k in ("step", "train_loss", "val_loss")] for row in lines(moe_run / "metrics.jsonl")]
    assert numbers == logged
    # a run from before the setting: its config.json lacks it, and it is the run asked for
    config = json.loads((plain / "config.json").read_text())
    del config["train"]["log_max_logits"]
    (plain / "config.json").write_text(json.dumps(config))
    summary = json.loads((plain / "summary.json").read_text())
    assert train(tiny_data, plain, "debug", MOE, SHORT) == summary


def test_a_stopped_and_resumed_run_writes_the_same_logs_as_an_uninterrupted_one(
    tiny_data,  # noqa: F811
    moe_run,
    tmp_path,
    monkeypatch,
):
    """Stopped at step 7 (checkpoint at step 5, so the logs already hold 6 and 7): the resumed run
    drops those rows and logs them again, once, as the gradient norms are."""
    monkeypatch.setattr(grad_norms, "EVERY_STEP_UNTIL", 8)
    calls = []
    monkeypatch.setattr(trainer_module, "lifeline_lost", lambda: calls.append(None) or len(calls) == 7)
    stopped = tmp_path / "stopped"
    with pytest.raises(AnatomyError, match="stops too, at step 7"):
        train(tiny_data, stopped, "debug", MOE, {**SHORT, "log_max_logits": True})
    assert [row["step"] for row in lines(stopped / MAX_LOGITS_FILE)] == list(range(1, 8))
    monkeypatch.setattr(trainer_module, "lifeline_lost", lambda: False)
    train(tiny_data, stopped, "debug", MOE, {**SHORT, "log_max_logits": True})
    for name in (EXPERT_SHARES_FILE, MAX_LOGITS_FILE):
        assert (stopped / name).read_text() == (moe_run / name).read_text()


def test_a_run_without_experts_logs_no_shares(tiny_data, tmp_path):  # noqa: F811
    train(tiny_data, tmp_path / "run", "debug", LLAMA_PARTS, {**SHORT, "steps": 2})
    assert not (tmp_path / "run" / EXPERT_SHARES_FILE).exists()
    assert not (tmp_path / "run" / MAX_LOGITS_FILE).exists()


# --- reading the logs back -------------------------------------------------------------------------


def test_the_readers_give_one_row_per_layer_and_expert_with_null_as_nan(tmp_path):
    logits = tmp_path / MAX_LOGITS_FILE
    logits.write_text('{"step": 1, "max_logits": [1.5, null]}\n{"step": 2, "max_logits": [2.0, 3.0]}\n')
    rows = read_max_logits(logits, "r")
    assert [(row["step"], row["layer"]) for row in rows] == [(1, 0), (1, 1), (2, 0), (2, 1)]
    assert rows[0]["max_logit"] == 1.5 and math.isnan(rows[1]["max_logit"])
    shares = tmp_path / EXPERT_SHARES_FILE
    shares.write_text('{"step": 3, "shares": [[0.5, 0.5], [1.0, 0.0]]}\n{"step": 4, "shar')  # the last: still written
    assert [(r["layer"], r["expert"], r["share"]) for r in read_expert_shares(shares, "r")] == [
        (0, 0, 0.5),
        (0, 1, 0.5),
        (1, 0, 1.0),
        (1, 1, 0.0),
    ]
    assert read_max_logits(tmp_path / "none.jsonl", "r") == []


def test_the_experts_load_is_read_at_the_last_logged_step_whatever_the_order():
    """The load is the smallest and largest share at the run's last step, over every layer: the
    uneven first steps (here expert 0 at 0.7) and the row order never enter it."""
    rows = [
        {"step": 50, "layer": 1, "expert": 0, "share": 0.2},
        {"step": 50, "layer": 1, "expert": 1, "share": 0.8},
        {"step": 1, "layer": 0, "expert": 0, "share": 0.7},
        {"step": 1, "layer": 0, "expert": 1, "share": 0.3},
        {"step": 50, "layer": 0, "expert": 0, "share": 0.45},
        {"step": 50, "layer": 0, "expert": 1, "share": 0.55},
    ]
    assert expert_load(rows) == {"min_share": 0.2, "max_share": 0.8}
    assert expert_load([]) is None


def test_a_damaged_line_is_named(tmp_path):
    path = tmp_path / MAX_LOGITS_FILE
    path.write_text('{"step": 1, "max_logits": ["big"]}\n')
    with pytest.raises(AnatomyError, match=r"line 1: 'max_logits' must hold numbers or null, got 'big'"):
        read_max_logits(path, "r")
    path.write_text('{"step": 0, "shares": [[1.0]]}\n')
    with pytest.raises(AnatomyError, match=r"line 1: 'step' must be a whole number from 1, got 0"):
        read_expert_shares(path, "r")
