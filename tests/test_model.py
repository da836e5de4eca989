"""The model: exact parameter counts, causality, RoPE's relative-position property, manual == fused,
cached == uncached, GQA semantics, and that both presets can learn."""

import itertools

import pytest
import torch
from short_training import TEXT, short_training_losses

from anatomy.check import rope_shift_error
from anatomy.config import PRESETS, preset
from anatomy.errors import AnatomyError
from anatomy.model import MiniLM, apply_rope, apply_rope_adjacent, rope_angles, swiglu_hidden
from anatomy.training.trainer import resolve_model_config

VOCAB = 50

# Every combination of the five switches; n_kv_head 2 is GQA, 4 is plain multi-head.
SWITCHES = {
    "norm_type": ["layernorm", "rmsnorm"],
    "norm_pos": ["post", "pre"],
    "pos_type": ["learned", "rope"],
    "n_kv_head": [4, 2],
    "ffn_type": ["gelu", "swiglu"],
}
COMBOS = [dict(zip(SWITCHES, values)) for values in itertools.product(*SWITCHES.values())]


def test_the_module_map_names_every_switch():
    """model.py's docstring is the map a learner reads first: each switch of ModelConfig (a choice
    among named values, a yes or no, and n_kv_head) is named there, with where it acts."""
    import dataclasses
    import typing

    import anatomy.model
    from anatomy.config import ModelConfig

    hints = typing.get_type_hints(ModelConfig)
    switches = [
        field.name
        for field in dataclasses.fields(ModelConfig)
        if typing.get_origin(hints[field.name]) is typing.Literal or hints[field.name] is bool
    ]
    assert {"qk_norm", "rope_break", "impl", "norm_type"} <= set(switches)
    missing = [name for name in [*switches, "n_kv_head"] if name not in anatomy.model.__doc__]
    assert not missing, f"model.py's module map does not name: {missing}"


def combo_id(combo):
    return "-".join(str(v) for v in combo.values())


def tiny(impl="manual", **overrides):
    torch.manual_seed(0)
    return MiniLM(preset("debug", vocab_size=VOCAB, impl=impl, **overrides)).eval()


def tokens(batch=2, length=12, seed=1):
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


# --- parameter counts (the chapter's table, vocab 1719) -----------------------------------------------


def test_parameter_counts_match_the_chapter():
    vanilla = MiniLM(preset("vanilla", vocab_size=1719))
    llama = MiniLM(preset("llama", vocab_size=1719))
    assert vanilla.num_params() == 1_244_928
    assert llama.num_params() == 1_178_496
    layer = vanilla.blocks[0]
    assert sum(p.numel() for p in layer.attn.parameters()) == 65_536
    assert sum(p.numel() for p in layer.ffn.parameters()) == 131_072
    assert sum(vanilla.param_table().values()) == vanilla.num_params()
    assert sum(llama.param_table().values()) == llama.num_params()


def test_no_linear_has_a_bias_and_embeddings_are_untied():
    model = MiniLM(preset("llama", vocab_size=VOCAB))
    assert all(m.bias is None for m in model.modules() if isinstance(m, torch.nn.Linear))
    assert model.tok_emb.weight.data_ptr() != model.lm_head.weight.data_ptr()


def test_swiglu_hidden_size_rule():
    assert swiglu_hidden(128) == 352
    assert swiglu_hidden(4096, multiple_of=256) == 11008  # LLaMA-2-7B's rule


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_preset_is_what_training_it_trains(name):
    """`preset("llama")` describes exactly the model `anatomy train --preset llama` builds, impl
    included: the trainer adds only the data's vocabulary."""
    assert resolve_model_config(name, {}, VOCAB) == preset(name, vocab_size=VOCAB)
    assert preset(name).impl == "fused"


def test_final_norm_only_for_pre_norm():
    assert MiniLM(preset("debug", vocab_size=VOCAB, norm_pos="pre")).final_norm is not None
    assert MiniLM(preset("debug", vocab_size=VOCAB, norm_pos="post")).final_norm is None


# --- properties over every combination of parts and both implementations -----------------------


@pytest.mark.parametrize("impl", ["manual", "fused"])
@pytest.mark.parametrize("combo", COMBOS, ids=combo_id)
def test_causality(combo, impl):
    model = tiny(impl, **combo)
    idx = tokens()
    t = 7
    changed = idx.clone()
    changed[:, t] = (changed[:, t] + 1) % VOCAB
    with torch.no_grad():
        before, _ = model(idx)
        after, _ = model(changed)
    torch.testing.assert_close(before[:, :t], after[:, :t], atol=1e-6, rtol=0)
    assert not torch.allclose(before[:, t:], after[:, t:])  # the change is seen from t on


@pytest.mark.parametrize("combo", COMBOS, ids=combo_id)
def test_manual_equals_fused(combo):
    manual, fused = tiny("manual", **combo), tiny("fused", **combo)
    fused.load_state_dict(manual.state_dict())
    idx = tokens()
    with torch.no_grad():
        torch.testing.assert_close(manual(idx)[0], fused(idx)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("impl", ["manual", "fused"])
@pytest.mark.parametrize("combo", COMBOS, ids=combo_id)
def test_cached_equals_uncached(combo, impl):
    model = tiny(impl, **combo)
    idx = tokens(length=12)
    with torch.no_grad():
        full, _ = model(idx)
        # a prompt, then a chunk of three (a mask with an offset), then one token at a time
        logits, cache = model.forward_cached(idx[:, :5])
        steps = [logits]
        logits, cache = model.forward_cached(idx[:, 5:8], cache)
        steps.append(logits)
        for t in range(8, idx.shape[1]):
            logits, cache = model.forward_cached(idx[:, t : t + 1], cache)
            steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)
    # The cache holds only the n_kv_head heads, never the repeated ones.
    k, v = cache.layers[0]
    assert k.shape == v.shape == (2, combo["n_kv_head"], 12, model.cfg.head_dim)
    assert cache.nbytes() == 2 * model.kv_cache_bytes(12)  # batch of 2


def test_kv_cache_bytes_formula_and_mqa_is_a_quarter_of_mha():
    mha = MiniLM(preset("vanilla", vocab_size=VOCAB))
    mqa = MiniLM(preset("llama", vocab_size=VOCAB, n_kv_head=1))
    assert mha.kv_cache_bytes(128) == 2 * 4 * 4 * 32 * 128 * 4
    assert mqa.kv_cache_bytes(128) * 4 == mha.kv_cache_bytes(128)


def test_mha_is_gqa_with_every_kv_head_repeated():
    """A GQA model equals the MHA model whose k/v heads are copies: query head h reads kv h // group."""
    gqa = tiny(n_kv_head=2, pos_type="rope")
    mha = tiny(n_kv_head=4, pos_type="rope")
    state = gqa.state_dict()
    n_head, n_kv_head, head_dim = gqa.cfg.n_head, gqa.cfg.n_kv_head, gqa.cfg.head_dim
    for name, weight in list(state.items()):
        if name.endswith("qkv_proj.weight"):  # rows: [query heads | key heads | value heads]
            q, k, v = weight.view(-1, head_dim, weight.shape[1]).split([n_head, n_kv_head, n_kv_head])
            k, v = (heads.repeat_interleave(n_head // n_kv_head, dim=0) for heads in (k, v))
            state[name] = torch.cat((q, k, v)).reshape(-1, weight.shape[1])
    mha.load_state_dict(state)
    idx = tokens()
    with torch.no_grad():
        torch.testing.assert_close(gqa(idx)[0], mha(idx)[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize(
    "rope_break, rotate_k", [("none", apply_rope), ("k_adjacent", apply_rope_adjacent), ("k_unrotated", None)]
)
def test_q_and_k_come_from_their_rows_q_is_always_rotated_and_k_as_rope_break_says(rope_break, rotate_k):
    """qkv_proj's rows are [query heads | key heads | value heads]; RoPE turns q, turns k the way
    rope_break says (the right way, the wrong pairing, or not at all), and never touches v."""
    model = tiny(pos_type="rope", rope_break=rope_break, n_kv_head=2)
    attn, (B, T, start) = model.blocks[0].attn, (2, 6, 3)
    x = torch.randn(B, T, model.cfg.d_model, generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        q, k, v = attn.project_qkv(x, model.rope, start)
        rows = attn.qkv_proj(x).view(B, T, -1, model.cfg.head_dim)
    raw_q, raw_k, raw_v = rows.split([4, 2, 2], dim=2)
    angles = rope_angles(model.cfg.head_dim, start + T)[start:, None]  # (T, 1, head_dim/2)
    cos, sin = angles.cos(), angles.sin()
    torch.testing.assert_close(q, apply_rope(raw_q, cos, sin).transpose(1, 2), atol=1e-6, rtol=0)
    expected_k = raw_k if rotate_k is None else rotate_k(raw_k, cos, sin)
    torch.testing.assert_close(k, expected_k.transpose(1, 2), atol=1e-6, rtol=0)
    assert torch.equal(v, raw_v.transpose(1, 2))


def test_qk_norm_normalises_each_query_and_key_head():
    """QK-norm (RMSNorm here): every q and k head vector has RMS = its norm weight, even after RoPE
    (a rotation keeps length); q_norm acts on q only, k_norm on k only."""
    model = tiny("fused", qk_norm=True, norm_type="rmsnorm", pos_type="rope", n_kv_head=2)
    attn = model.blocks[0].attn
    with torch.no_grad():
        attn.q_norm.weight.fill_(2.0)
        q, k, _ = attn.project_qkv(torch.randn(2, 6, model.cfg.d_model), model.rope, start=3)
    rms = lambda t: t.pow(2).mean(dim=-1).sqrt()  # noqa: E731
    torch.testing.assert_close(rms(q), torch.full(q.shape[:-1], 2.0), atol=1e-3, rtol=0)
    torch.testing.assert_close(rms(k), torch.full(k.shape[:-1], 1.0), atol=1e-3, rtol=0)


@pytest.mark.parametrize("impl", ["manual", "fused"])
def test_qk_norm_model_caches_like_it_recomputes(impl):
    model = tiny(impl, qk_norm=True, norm_type="rmsnorm", pos_type="rope", n_kv_head=2)
    idx = tokens(length=8)
    with torch.no_grad():
        full, _ = model(idx)
        logits, cache = model.forward_cached(idx[:, :5])
        steps = [logits]
        for t in range(5, 8):
            logits, cache = model.forward_cached(idx[:, t : t + 1], cache)
            steps.append(logits)
    torch.testing.assert_close(torch.cat(steps, dim=1), full, atol=1e-5, rtol=1e-5)


# --- RoPE ----------------------------------------------------------------------------------------


def rope_shift_difference(rope_break):
    model = tiny(pos_type="rope", rope_break=rope_break)
    x = torch.randn(1, 10, model.cfg.d_model, generator=torch.Generator().manual_seed(3))
    return rope_shift_error(model, x, shift=5)


def test_rope_scores_depend_only_on_relative_position():
    assert rope_shift_difference("none") < 1e-5


@pytest.mark.parametrize("rope_break", ["k_unrotated", "k_adjacent"])
def test_broken_rope_loses_relative_position(rope_break):
    assert rope_shift_difference(rope_break) > 1e-2


def test_rope_rotation_keeps_length_and_pairs_half_split():
    x = torch.randn(1, 1, 3, 8)
    angles = rope_angles(8, 3)
    rotated = apply_rope(x, angles.cos(), angles.sin())
    torch.testing.assert_close(rotated.norm(dim=-1), x.norm(dim=-1))
    # position 0 is no rotation; dimension 0 pairs with dimension 4 (head_dim / 2)
    torch.testing.assert_close(rotated[..., 0, :], x[..., 0, :])
    pair = rotated[0, 0, 1, [0, 4]]
    a = angles[1, 0]
    expected = torch.stack(
        [x[0, 0, 1, 0] * a.cos() - x[0, 0, 1, 4] * a.sin(), x[0, 0, 1, 0] * a.sin() + x[0, 0, 1, 4] * a.cos()]
    )
    torch.testing.assert_close(pair, expected)


def test_rope_tables_extend_past_ctx_len():
    model = tiny(pos_type="rope")
    ctx = model.cfg.ctx_len
    idx = tokens(batch=1, length=ctx + 6)
    with torch.no_grad():
        logits, cache = model.forward_cached(idx)
    assert logits.shape[1] == ctx + 6 and cache.length == ctx + 6
    assert model.rope.cos.shape[0] >= ctx + 6


def test_learned_positions_refuse_past_ctx_len():
    model = tiny(pos_type="learned")
    ctx = model.cfg.ctx_len
    with pytest.raises(AnatomyError, match=f"learned positions only cover 0..{ctx - 1}"):
        model(tokens(batch=1, length=ctx + 1))
    _, cache = model.forward_cached(tokens(batch=1, length=ctx))
    with pytest.raises(AnatomyError, match=f"position {ctx} was asked for"):
        model.forward_cached(tokens(batch=1, length=1), cache)


def test_model_without_vocab_size_is_a_clear_error():
    with pytest.raises(AnatomyError, match="vocab_size is not set"):
        MiniLM(preset("debug"))


# --- learning ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["vanilla", "llama"])
@pytest.mark.parametrize("impl", ["manual", "fused"])
def test_short_training_drives_loss_down(name, impl):
    cfg = preset(name, vocab_size=len(set(TEXT)), d_model=32, n_layer=2, ctx_len=16, impl=impl)
    torch.manual_seed(0)
    losses = short_training_losses(MiniLM(cfg))
    assert losses[0] > 3.0  # about ln(len(chars)) at the start
    assert sum(losses[-5:]) / 5 < 0.5 * losses[0]
