"""ModelConfig: presets, round-trips, and a clear message for every kind of bad value."""

import json

import pytest

from anatomy.config import PRESETS, ModelConfig, preset
from anatomy.config_fields import parse_value
from anatomy.errors import AnatomyError


def test_defaults_are_the_2017_parts():
    cfg = ModelConfig()
    assert (cfg.d_model, cfg.n_layer, cfg.n_head, cfg.n_kv_head, cfg.ctx_len) == (128, 4, 4, 4, 128)
    assert (cfg.norm_type, cfg.norm_pos, cfg.pos_type, cfg.ffn_type) == ("layernorm", "post", "learned", "gelu")
    assert cfg.rope_break == "none" and cfg.qk_norm is False


def test_llama_preset_swaps_the_five_parts():
    cfg = preset("llama")
    assert (cfg.norm_type, cfg.norm_pos, cfg.pos_type, cfg.ffn_type, cfg.n_kv_head) == (
        "rmsnorm",
        "pre",
        "rope",
        "swiglu",
        2,
    )


def test_preset_with_overrides_and_unknown_preset():
    assert preset("vanilla", n_layer=12).n_layer == 12
    with pytest.raises(AnatomyError, match="unknown preset 'gpt'.*vanilla, llama, debug"):
        preset("gpt")


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_round_trip_through_json(name):
    cfg = preset(name, vocab_size=99, qk_norm=True)
    again = ModelConfig.from_dict(json.loads(json.dumps(cfg.to_dict())))
    assert again == cfg


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"norm_type": "batchnorm"}, r"norm_type = 'batchnorm' is not valid: expected one of 'layernorm', 'rmsnorm'"),
        ({"norm_pos": "middle"}, r"norm_pos = 'middle'.*'post', 'pre'"),
        ({"pos_type": "alibi"}, r"pos_type = 'alibi'.*'learned', 'rope'"),
        ({"ffn_type": "relu"}, r"ffn_type = 'relu'.*'gelu', 'swiglu'"),
        ({"impl": "triton"}, r"impl = 'triton'.*'manual', 'fused'"),
        ({"rope_break": "q", "pos_type": "rope"}, r"rope_break = 'q'.*'none', 'k_unrotated', 'k_adjacent'"),
        ({"d_model": 130}, r"d_model 130 is not divisible by n_head 4"),
        ({"n_kv_head": 3}, r"n_head 4 is not divisible by n_kv_head 3"),
        ({"d_model": 12, "n_head": 4, "n_kv_head": 4, "pos_type": "rope"}, r"head_dim must be even.*= 3"),
        ({"n_layer": 0}, r"n_layer = 0 is not valid: expected a positive number"),
        ({"d_model": -8}, r"d_model = -8 is not valid: expected a positive number"),
        ({"vocab_size": 0}, r"vocab_size = 0 is not valid"),
        ({"n_layer": "4"}, r"n_layer = '4' is not valid: expected int"),
        ({"qk_norm": "yes"}, r"qk_norm = 'yes' is not valid: expected bool"),
        ({"rope_break": "k_unrotated"}, r"rope_break = 'k_unrotated' needs pos_type 'rope'"),
    ],
)
def test_bad_values_are_named(overrides, message):
    with pytest.raises(AnatomyError, match=message):
        ModelConfig(**{**PRESETS["debug"], **overrides})


def test_unknown_keys_are_an_error():
    with pytest.raises(AnatomyError, match=r"unknown ModelConfig field\(s\) d_modle, layers; known fields: .*d_model"):
        ModelConfig.from_dict({"d_modle": 64, "layers": 2})
    with pytest.raises(AnatomyError, match="unknown ModelConfig field"):
        preset("llama").replace(nlayer=3)


def test_parse_value_from_command_line_text():
    assert parse_value(ModelConfig, "n_layer", "12") == 12
    assert parse_value(ModelConfig, "qk_norm", "true") is True
    assert parse_value(ModelConfig, "vocab_size", "none") is None
    assert parse_value(ModelConfig, "norm_type", "rmsnorm") == "rmsnorm"
    with pytest.raises(AnatomyError, match="n_layer = 'twelve'"):
        ModelConfig(n_layer=parse_value(ModelConfig, "n_layer", "twelve"))


def test_a_seed_beyond_what_torch_takes_is_refused():
    from anatomy.config import SEED_MAX, TrainConfig

    assert TrainConfig(seed=SEED_MAX).seed == 2**64 - 1
    with pytest.raises(
        AnatomyError, match=r"seed = 18446744073709551616 is not valid: expected 0 to 18446744073709551615"
    ):
        TrainConfig(seed=2**64)


def test_the_lesson_opens_with_the_model_config():
    """A learner reads config.py top to bottom: the settings come first, the generic checking of a
    dataclass's fields lives in anatomy/config_fields.py."""
    import ast
    from pathlib import Path

    import anatomy.config

    tree = ast.parse(Path(anatomy.config.__file__).read_text(encoding="utf-8"))
    definitions = [node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    assert definitions[0] == "ModelConfig", f"config.py defines {definitions[:3]} before ModelConfig"


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"beta2": 0.0}, r"beta2 = 0.0 is not valid: expected a number between 0 and 1, both excluded"),
        ({"beta2": 1.0}, r"beta2 = 1.0 is not valid: expected a number between 0 and 1"),
        ({"beta2": float("nan")}, r"beta2 = nan is not valid: expected a finite number"),
        ({"lr": 1e308}, r"lr = 1e\+308 is not valid: expected at most 3.4e\+37 .*32-bit float"),
        ({"min_lr": 1e38}, r"min_lr = 1e\+38 is not valid: expected at most 3.4e\+37"),
    ],
)
def test_the_optimizer_settings_are_checked(overrides, message):
    from anatomy.config import TrainConfig

    with pytest.raises(AnatomyError, match=message):
        TrainConfig(**overrides)


def test_the_defaults_keep_torchs_adamw_and_llamas_recipe_is_allowed():
    """Every shipped run trained with beta2 0.999 and weight decay on every parameter."""
    from anatomy.config import LR_MAX, TrainConfig

    default = TrainConfig()
    recipe = (default.beta2, default.weight_decay, default.decay_matrices_only, default.grad_clip)
    assert recipe == (0.999, 0.01, False, 0)
    llama = TrainConfig(beta2=0.95, weight_decay=0.1, decay_matrices_only=True, grad_clip=1.0, lr=LR_MAX, min_lr=LR_MAX)
    assert llama.decay_matrices_only and llama.lr == LR_MAX
