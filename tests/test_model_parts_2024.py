"""The parts of 2024-26 as switches (issue 44): QK-norm, MLA (attn_type mla) and a mixture of
experts (ffn_type moe). Each: exact parameter counts, causality, manual == fused, cached ==
uncached, and what makes it that part; the defaults leave every existing model as it was."""

import math

import pytest
import torch
from short_training import TEXT, short_training_losses

from anatomy.check import rope_shift_error
from anatomy.config import ModelConfig, preset
from anatomy.errors import AnatomyError
from anatomy.generation.export import llama_differences
from anatomy.model import LatentAttention, MiniLM, MixtureOfExperts, swiglu_hidden

VOCAB = 50
CHAPTER_VOCAB = 1719
# On the debug preset (d_model 32, 4 heads of 8): MLA needs rope_dim below head_dim, and n_kv_head = n_head
MLA = {"attn_type": "mla", "n_kv_head": 4, "kv_latent": 8, "rope_dim": 4}
MOE = {"ffn_type": "moe", "n_experts": 4, "top_k": 2}
LLAMA_PARTS = {"norm_type": "rmsnorm", "norm_pos": "pre", "pos_type": "rope"}
SWITCHES = {
    "qk_norm": {**LLAMA_PARTS, "qk_norm": True},
    "mla": {**LLAMA_PARTS, **MLA},
    "mla_post_layernorm": {"pos_type": "rope", **MLA},
    "moe": {**LLAMA_PARTS, **MOE},
    "moe_top1": {**LLAMA_PARTS, **MOE, "top_k": 1},
    "mla_moe": {**LLAMA_PARTS, **MLA, **MOE},
}


def tiny(impl="manual", **overrides):
    torch.manual_seed(0)
    return MiniLM(preset("debug", vocab_size=VOCAB, impl=impl, **overrides)).eval()


def tokens(batch=2, length=12, seed=1):
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


# --- the defaults leave every existing model as it was -------------------------------------------


# Measured on the commit before these parts existed (c0ce66d): parameters, the loss of a seed-0
# model on seed-0 tokens, (2, 32) at the chapter's vocabulary, and the number of weight names
BEFORE = {
    ("vanilla", False): (1_244_928, 7.4445514679, 35),
    ("vanilla", True): (1_245_440, 7.4437260628, 51),
    ("llama", False): (1_178_496, 7.4781370163, 31),
    ("llama", True): (1_178_752, 7.4799890518, 39),
}


@pytest.mark.parametrize("name, qk_norm", sorted(BEFORE))
def test_the_defaults_build_the_same_models_as_before(name, qk_norm):
    torch.manual_seed(0)
    model = MiniLM(preset(name, vocab_size=CHAPTER_VOCAB, qk_norm=qk_norm)).eval()
    idx = torch.randint(0, CHAPTER_VOCAB, (2, 32), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        _, loss = model(idx, idx)
    params, before, weight_names = BEFORE[(name, qk_norm)]
    assert model.num_params() == params
    assert loss.item() == pytest.approx(before, abs=1e-6)
    # the same weight names, so every saved run and shipped weight file loads as it did
    if qk_norm:
        assert {"blocks.0.attn.q_norm.weight", "blocks.0.attn.k_norm.weight"} <= set(model.state_dict())
    assert len(model.state_dict()) == weight_names


# --- parameter counts at the chapter's size ------------------------------------------------------


def chapter_model(**overrides):
    return MiniLM(preset("llama", vocab_size=CHAPTER_VOCAB, **overrides))


def test_qk_norm_is_its_own_row_of_the_parameter_table():
    llama, with_qk_norm = chapter_model().param_table(), chapter_model(qk_norm=True).param_table()
    assert with_qk_norm["QK-norm (all layers)"] == 4 * 2 * 32  # 4 layers x (q and k) x head_dim RMSNorm weights
    assert with_qk_norm["attention (all layers)"] == llama["attention (all layers)"]
    assert "QK-norm (all layers)" not in llama


def test_mla_parameter_count():
    """d 128, 4 heads of 32 (16 of them rotated), latent 32: per layer q 128x128, kv_down 128x32,
    its RMSNorm 32, kv_up 32 x 4 x (16 + 32), the shared rotated key 128x16, o 128x128."""
    model = chapter_model(attn_type="mla", n_kv_head=4, kv_latent=32, rope_dim=16)
    per_layer = 128 * 128 + 128 * 32 + 32 + 32 * 4 * (16 + 32) + 128 * 16 + 128 * 128
    assert per_layer == 45_088  # against 49,152 for the llama's GQA (2 kv heads) and 65,536 for MHA
    assert model.param_table()["attention (all layers)"] == 4 * per_layer
    assert model.num_params() == chapter_model().num_params() - 4 * 49_152 + 4 * per_layer
    assert sum(model.param_table().values()) == model.num_params()


def test_moe_parameter_count_and_active_parameters():
    model = chapter_model(ffn_type="moe", n_experts=4, top_k=1)
    expert = 3 * 128 * swiglu_hidden(128)  # gate, up and down of one SwiGLU
    table = model.param_table()
    assert table["feed-forward (all layers)"] == 4 * 4 * expert
    assert table["router (all layers)"] == 4 * 128 * 4
    assert sum(table.values()) == model.num_params()
    # top-1: a token passes through one SwiGLU, as in the llama, plus the router
    assert model.active_params() == chapter_model().num_params() + 4 * 128 * 4
    assert chapter_model(ffn_type="moe", n_experts=4, top_k=2).active_params() == model.active_params() + 4 * expert


# --- properties of every switch, both implementations --------------------------------------------


@pytest.mark.parametrize("impl", ["manual", "fused"])
@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_causality(switch, impl):
    model = tiny(impl, **SWITCHES[switch])
    idx, t = tokens(), 7
    changed = idx.clone()
    changed[:, t] = (changed[:, t] + 1) % VOCAB
    with torch.no_grad():
        before, after = model(idx)[0], model(changed)[0]
    torch.testing.assert_close(before[:, :t], after[:, :t], atol=1e-6, rtol=0)
    assert not torch.allclose(before[:, t:], after[:, t:])


@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_manual_equals_fused(switch):
    manual, fused = tiny("manual", **SWITCHES[switch]), tiny("fused", **SWITCHES[switch])
    fused.load_state_dict(manual.state_dict())
    idx = tokens()
    with torch.no_grad():
        torch.testing.assert_close(manual(idx)[0], fused(idx)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("impl", ["manual", "fused"])
@pytest.mark.parametrize("switch", sorted(SWITCHES))
def test_cached_equals_uncached(switch, impl):
    model = tiny(impl, **SWITCHES[switch])
    idx = tokens(length=12)
    with torch.no_grad():
        full, _ = model(idx)
        logits, cache = model.forward_cached(idx[:, :5])  # a prompt, a chunk of three, then one at a time
        steps = [logits]
        logits, cache = model.forward_cached(idx[:, 5:8], cache)
        steps.append(logits)
        for t in range(8, 12):
            logits, cache = model.forward_cached(idx[:, t : t + 1], cache)
            steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    assert cache.length == 12 and cache.nbytes() == 2 * model.kv_cache_bytes(12)  # batch of 2


# --- MLA -----------------------------------------------------------------------------------------


def test_mla_caches_the_latent_and_the_shared_rotated_key_only():
    model = tiny(**LLAMA_PARTS, **MLA)
    with torch.no_grad():
        _, cache = model.forward_cached(tokens(length=12))
    latent, k_rope = cache.layers[0]
    assert latent.shape == (2, 1, 12, 8) and k_rope.shape == (2, 1, 12, 4)
    # per token and layer kv_latent + rope_dim = 12 numbers, against 2 x 4 heads x 8 = 64 for MHA
    assert model.kv_cache_bytes(1) == 2 * 12 * 4
    assert tiny(**LLAMA_PARTS).kv_cache_bytes(1) == 2 * 64 * 4


def test_mla_keys_and_values_come_from_the_latent_and_the_key_rope_part_is_shared():
    """Every head's key content and value is kv_up of the normalised latent; the rotated part of
    the key is one vector, the same in every head, from x directly (not from the latent)."""
    model = tiny(**LLAMA_PARTS, **MLA)
    attn: LatentAttention = model.blocks[0].attn
    x = torch.randn(2, 6, 32, generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        latent, k_rope = attn.compress(x, model.rope, start=0)
        k, v = attn.keys_values(latent, k_rope)
        up = attn.kv_up(attn.kv_norm(attn.kv_down(x))).view(2, 6, 4, 4 + 8).transpose(1, 2)
        torch.testing.assert_close(k[..., :4], up[..., :4])  # content_dim = head_dim 8 - rope_dim 4
        torch.testing.assert_close(v, up[..., 4:])
        assert all(torch.equal(k[:, h, :, 4:], k[:, 0, :, 4:]) for h in range(4))
        # position 0 is no rotation: the shared key is the projection of x itself there
        torch.testing.assert_close(k[:, 0, 0, 4:], attn.k_rope_proj(x)[:, 0])


def test_mla_scores_depend_only_on_relative_position_and_break_with_a_broken_rope():
    x = torch.randn(1, 10, 32, generator=torch.Generator().manual_seed(3))
    assert rope_shift_error(tiny(**LLAMA_PARTS, **MLA), x, shift=5) < 1e-5
    assert rope_shift_error(tiny(**LLAMA_PARTS, **MLA, rope_break="k_adjacent"), x, shift=5) > 1e-2


# --- mixture of experts --------------------------------------------------------------------------


def moe_layer(top_k, router_logits):
    """A layer whose router gives every token the same logits (x is all ones)."""
    torch.manual_seed(0)
    layer = MixtureOfExperts(preset("debug", vocab_size=VOCAB, **{**MOE, "top_k": top_k}))
    with torch.no_grad():
        layer.router.weight.copy_(torch.tensor(router_logits)[:, None].expand(4, 32) / 32)
    return layer


def test_routing_renormalises_the_top_k_and_the_balance_loss_is_switch_s():
    """Router probabilities [1/2, 1/4, 1/8, 1/8], top 2: experts 0 and 1 take every token, weights
    2/3 and 1/3. Balance: 4 x (1/2 x 1/2 + 1/2 x 1/4 + 0 + 0) = 1.5 (1 would be an even load)."""
    layer = moe_layer(2, [math.log(4), math.log(2), 0.0, 0.0])
    gates = layer.route(torch.ones(6, 32))
    torch.testing.assert_close(gates, torch.tensor([[2 / 3, 1 / 3, 0.0, 0.0]]).expand(6, 4))
    assert layer.aux_loss.item() == pytest.approx(1.5)
    torch.testing.assert_close(layer.token_share, torch.tensor([0.5, 0.5, 0.0, 0.0]))


def test_an_even_load_costs_one():
    """Even probabilities, each expert taking a quarter of the tokens: the loss's minimum, 1."""
    layer = moe_layer(1, [0.0, 0.0, 0.0, 0.0])
    with torch.no_grad():
        layer.router.weight.copy_(torch.eye(4, 32))
    x = torch.eye(32)[[0, 1, 2, 3]] * 1e-4  # token i leans a hair towards expert i
    layer.route(x)
    assert layer.aux_loss.item() == pytest.approx(1.0, abs=1e-4)
    torch.testing.assert_close(layer.token_share, torch.full((4,), 0.25))


def test_each_token_is_the_gate_weighted_sum_of_its_chosen_experts():
    layer = MixtureOfExperts(preset("debug", vocab_size=VOCAB, **MOE, impl="fused"))
    x = torch.randn(2, 5, 32, generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        y = layer(x)
        probs = torch.softmax(layer.router(x[1, 3]), dim=-1)
        weights, chosen = probs.topk(2)
        by_hand = sum(w / weights.sum() * layer.experts[e](x[1, 3]) for w, e in zip(weights, chosen.tolist()))
    torch.testing.assert_close(y[1, 3], by_hand, atol=1e-6, rtol=1e-5)


def test_training_adds_the_weighted_balance_loss_and_evaluation_does_not():
    model = tiny("fused", **LLAMA_PARTS, **MOE, moe_aux_weight=0.5)
    idx = tokens()
    model.train()
    _, train_loss = model(idx, idx)
    aux = model.moe_aux_loss()
    model.eval()
    _, eval_loss = model(idx, idx)
    assert aux.item() >= 1.0 - 1e-6  # 1 is an even load, the least it can be
    torch.testing.assert_close(train_loss, eval_loss + 0.5 * aux)
    model.train()
    model.zero_grad()
    model(idx, idx)[1].backward()
    assert model.blocks[0].ffn.router.weight.grad.abs().sum() > 0  # the router learns from the balance too


def test_the_share_of_tokens_per_expert_is_exposed_for_the_trainer():
    model = tiny("fused", **LLAMA_PARTS, **MOE)
    assert tiny("fused", **LLAMA_PARTS).expert_token_shares() == []
    with torch.no_grad():
        model(tokens())
    shares = model.expert_token_shares()
    assert len(shares) == 2 and all(len(layer) == 4 for layer in shares)
    assert all(sum(layer) == pytest.approx(1.0) for layer in shares)
    assert "blocks.0.ffn.token_share" not in model.state_dict()  # derived, never saved


@pytest.mark.parametrize("switch", ["mla", "moe"])
def test_short_training_drives_loss_down(switch):
    torch.manual_seed(0)
    model = MiniLM(preset("debug", vocab_size=len(set(TEXT)), **SWITCHES[switch]))
    losses = short_training_losses(model)
    assert sum(losses[-5:]) / 5 < 0.5 * losses[0]


# --- validation and export -----------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides, message",
    [
        (
            {"attn_type": "mla", "n_kv_head": 4},
            r"rope_dim = 16 is not valid for attn_type 'mla': expected an even number below head_dim 8",
        ),
        ({**MLA, "rope_dim": 3}, r"rope_dim = 3 is not valid .* expected an even number below head_dim 8"),
        ({**MLA, "pos_type": "learned"}, r"attn_type 'mla' needs pos_type 'rope', not 'learned'"),
        ({**MLA, "n_kv_head": 2}, r"set n_kv_head to n_head \(4\), not 2"),
        ({**MLA, "qk_norm": True}, r"qk_norm is for attn_type 'mha'"),
        ({**MLA, "kv_latent": 0}, r"ModelConfig.kv_latent = 0 is not valid: expected a positive number"),
        ({**MOE, "top_k": 5}, r"top_k = 5 is not valid: expected at most n_experts \(4\)"),
        ({**MOE, "n_experts": 0}, r"ModelConfig.n_experts = 0 is not valid: expected a positive number"),
        ({**MOE, "moe_aux_weight": -0.1}, r"moe_aux_weight = -0.1 is not valid: expected a finite number >= 0"),
        ({**MOE, "moe_aux_weight": float("nan")}, r"moe_aux_weight = nan is not valid"),
        ({"attn_type": "gqa"}, r"ModelConfig.attn_type = 'gqa' is not valid: expected one of 'mha', 'mla'"),
    ],
)
def test_bad_settings_are_one_clear_line(overrides, message):
    with pytest.raises(AnatomyError, match=message):
        preset("debug", **{"pos_type": "rope", **overrides})


def test_the_defaults_are_the_switches_off():
    cfg = ModelConfig()
    assert (cfg.attn_type, cfg.ffn_type, cfg.qk_norm, cfg.moe_aux_weight) == ("mha", "gelu", False, 0.01)


def test_the_export_names_the_parts_a_llama_cannot_hold():
    cfg = preset("llama", vocab_size=10, attn_type="mla", n_kv_head=4, ffn_type="moe")
    assert llama_differences(cfg) == ["ffn_type 'moe' (LLaMA: 'swiglu')", "attn_type 'mla' (LLaMA: 'mha')"]


# --- through the trainer and generation ----------------------------------------------------------


def test_a_run_with_mla_and_experts_trains_and_generates_the_same_with_and_without_the_cache(tiny_data, tmp_path):
    from tiny_runs import FAST

    from anatomy.generation.generate import load_model, sample
    from anatomy.training.trainer import train

    summary = train(tiny_data, tmp_path / "run", "debug", {**LLAMA_PARTS, **MLA, **MOE}, FAST)
    assert summary["status"] == "done"
    model, tokenizer = load_model(tmp_path / "run", "best")
    assert model.cfg.attn_type == "mla" and model.cfg.ffn_type == "moe"
    # past ctx_len (16), so the cache is refilled from a moved window too
    prefix = tokenizer.decode([1, 2])
    cached = sample(model, tokenizer, chars=40, temperature=0, prefix=prefix)
    assert cached == sample(model, tokenizer, chars=40, temperature=0, prefix=prefix, use_cache=False)


@pytest.mark.parametrize("impl, experts", [("fused", 2), ("manual", 4)])
def test_the_memory_estimate_counts_the_experts_a_token_passes_through(impl, experts):
    """The fused layer runs a token through its top_k experts, the manual one through all of them."""
    from anatomy.config import TrainConfig
    from anatomy.training.trainer import memory_need

    moe = preset("debug", vocab_size=VOCAB, impl=impl, **LLAMA_PARTS, **MOE)
    dense = preset("debug", vocab_size=VOCAB, impl=impl, **LLAMA_PARTS, ffn_type="swiglu")
    extra = memory_need(moe, TrainConfig()).train - memory_need(dense, TrainConfig()).train
    assert extra == 4 * 32 * 16 * 2 * 28 * (experts - 1) * 32  # bytes x batch x ctx x layers x 28 d per expert
