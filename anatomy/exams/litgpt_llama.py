"""litgpt's GPT built in our mini-LLaMA's shape, for `anatomy bench` to time against ours.

litgpt (Lightning AI's LLM library) is not a dependency of this project: where it is installed
(tried with 0.5.13; INSTALL_HINT says how), the bench trains its GPT next to our llama on the same
batch, at the same precision, with the same optimizer. Same shape: the vocabulary, 128 wide, 4
layers of 4 heads sharing 2 key/value heads, RMSNorm (eps 1e-6), full RoPE pairing each dimension
with the one half a head away, a SwiGLU MLP 352 wide, no biases, an untied output projection. So
both hold the same parameters, and any difference in step time is the code, not the model.

The code differs where it is a choice: litgpt's RMSNorm is spelled out in float32 (ours is
`F.rms_norm`), and it repeats the key/value heads before attention (ours lets
`scaled_dot_product_attention` share them).
"""

from __future__ import annotations

import importlib.metadata

import torch
import torch.nn.functional as F
from torch import nn

from anatomy.config import ModelConfig
from anatomy.model import RMS_NORM_EPS, swiglu_hidden

# --no-deps: a plain `pip install litgpt` would move huggingface_hub back to a release the export's
# transformers cannot use; its model needs only these three besides torch
INSTALL_HINT = "pip install --no-deps litgpt lightning lightning-utilities torchmetrics"


def litgpt_classes():
    """litgpt's (Config, GPT), or None where litgpt is not installed."""
    try:
        from litgpt.config import Config
        from litgpt.model import GPT
    except ImportError:
        return None
    return Config, GPT


def litgpt_version() -> str:
    return importlib.metadata.version("litgpt")


def litgpt_config(cfg: ModelConfig, config_class):
    """litgpt's Config for the model `cfg` describes: our llama parts only (litgpt has no
    post-norm, learned positions or GELU-without-bias block to match the others with)."""
    llama_parts = (cfg.norm_type, cfg.norm_pos, cfg.pos_type, cfg.ffn_type) == ("rmsnorm", "pre", "rope", "swiglu")
    if not llama_parts or cfg.qk_norm or cfg.rope_break != "none":
        raise ValueError("litgpt_config matches the llama preset's parts only")
    return config_class(
        name="anatomy-mini-llama",
        vocab_size=cfg.vocab_size,
        padded_vocab_size=cfg.vocab_size,  # litgpt pads to a multiple of 512 unless told
        n_embd=cfg.d_model,
        n_layer=cfg.n_layer,
        n_head=cfg.n_head,
        n_query_groups=cfg.n_kv_head,
        block_size=cfg.ctx_len,
        norm_class_name="RMSNorm",
        norm_eps=RMS_NORM_EPS,
        mlp_class_name="LLaMAMLP",
        intermediate_size=swiglu_hidden(cfg.d_model),
        rotary_percentage=1.0,
        bias=False,
        parallel_residual=False,
    )


class LitgptLM(nn.Module):
    """litgpt's GPT behind our model's call, `(idx, targets) -> (logits, mean cross-entropy)`, so
    the bench's step (`forward_backward`, autocast, torch.compile) treats both alike."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        config_class, gpt_class = litgpt_classes()
        self.cfg = cfg  # the config it was built to match (compiled_or_eager reads it)
        self.gpt = gpt_class(litgpt_config(cfg, config_class))

    def forward(self, idx: torch.Tensor, targets: torch.Tensor):
        logits = self.gpt(idx)
        return logits, F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
