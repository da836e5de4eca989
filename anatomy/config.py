"""The model's config: one flat dataclass of plain values that chooses every part.

Switches are strings typed as `Literal[...]`, so the config stays data: it round-trips through
JSON and YAML, and a run folder can always say exactly which parts produced its numbers.
The defaults are the 2017 parts; the `llama` preset swaps in the five newer ones. A preset
describes exactly what `anatomy train --preset NAME` trains. Each field is checked against its
type when a config is made (anatomy/config_fields.py), then against the others here.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from dataclasses import dataclass
from typing import Any, Literal

from anatomy.config_fields import check_field_types, config_from_dict, require_positive
from anatomy.errors import AnatomyError
from anatomy.precision import Precision

NormType = Literal["layernorm", "rmsnorm"]
NormPos = Literal["post", "pre"]
PosType = Literal["learned", "rope"]
FfnType = Literal["gelu", "swiglu", "moe"]
AttnType = Literal["mha", "mla"]
RopeBreak = Literal["none", "k_unrotated", "k_adjacent"]
Impl = Literal["manual", "fused"]


# ---------------------------------------------------------------------------------------------
# The model config
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelConfig:
    vocab_size: int | None = None  # set from the tokenizer's vocabulary
    d_model: int = 128
    n_layer: int = 4
    n_head: int = 4
    n_kv_head: int = 4  # = n_head: plain multi-head; 2: GQA; 1: MQA
    ctx_len: int = 128
    norm_type: NormType = "layernorm"
    norm_pos: NormPos = "post"
    pos_type: PosType = "learned"
    ffn_type: FfnType = "gelu"
    rope_break: RopeBreak = "none"  # break-it experiment: how k is (mis)rotated
    qk_norm: bool = False  # a norm on q and k before scoring (the newest standard part)
    # The parts of 2024-26, each off by default. mha: the attention above, with n_kv_head heads;
    # mla: keys and values rebuilt from a cached latent of kv_latent numbers per token, plus one
    # shared rotated key of rope_dim (DeepSeek-V2). Read only when attn_type is mla.
    attn_type: AttnType = "mha"
    kv_latent: int = 32
    rope_dim: int = 16  # of head_dim, the dimensions of q and k that RoPE turns (the rest: the latent's)
    # moe: n_experts SwiGLU feed-forwards, top_k of them per token; moe_aux_weight x the
    # load-balancing loss is added to the training loss. Read only when ffn_type is moe.
    n_experts: int = 4
    top_k: int = 2
    moe_aux_weight: float = 0.01
    # fused: PyTorch's fused kernels, what `anatomy train` trains; manual: the maths spelled out
    # (the same numbers, slower: for reading, and for the tests and exams that compare the two)
    impl: Impl = "fused"

    def __post_init__(self) -> None:
        check_field_types(self)
        require_positive(self, "vocab_size", "d_model", "n_layer", "n_head", "n_kv_head", "ctx_len")
        require_positive(self, "kv_latent", "rope_dim", "n_experts", "top_k")  # the parts of 2024-26
        if self.d_model % self.n_head:
            raise AnatomyError(f"ModelConfig: d_model {self.d_model} is not divisible by n_head {self.n_head}")
        if self.n_head % self.n_kv_head:
            raise AnatomyError(
                f"ModelConfig: n_head {self.n_head} is not divisible by n_kv_head {self.n_kv_head} "
                "(each key/value head must serve the same number of query heads)"
            )
        if self.pos_type == "rope" and self.head_dim % 2:
            raise AnatomyError(
                f"ModelConfig: RoPE rotates pairs of dimensions, so head_dim must be even; "
                f"d_model {self.d_model} / n_head {self.n_head} = {self.head_dim}"
            )
        if self.rope_break != "none" and self.pos_type != "rope":
            raise AnatomyError(
                f"ModelConfig: rope_break = {self.rope_break!r} needs pos_type 'rope', not {self.pos_type!r}"
            )
        if self.attn_type == "mla":
            self._check_mla()
        if self.ffn_type == "moe":
            self._check_moe()

    def _check_mla(self) -> None:
        if self.pos_type != "rope":
            raise AnatomyError(
                f"ModelConfig: attn_type 'mla' needs pos_type 'rope', not {self.pos_type!r} "
                "(its keys carry position in a rotated part of their own)"
            )
        if self.rope_dim % 2 or self.rope_dim >= self.head_dim:
            raise AnatomyError(
                f"ModelConfig: rope_dim = {self.rope_dim} is not valid for attn_type 'mla': expected an even "
                f"number below head_dim {self.head_dim} (the rest of each head is read from the latent)"
            )
        if self.n_kv_head != self.n_head:
            raise AnatomyError(
                f"ModelConfig: attn_type 'mla' caches a latent, not key/value heads: set n_kv_head to "
                f"n_head ({self.n_head}), not {self.n_kv_head}"
            )
        if self.qk_norm:
            raise AnatomyError(
                "ModelConfig: qk_norm is for attn_type 'mha'; 'mla' rebuilds its keys from a latent it "
                "normalises itself"
            )

    def _check_moe(self) -> None:
        if self.top_k > self.n_experts:
            raise AnatomyError(
                f"ModelConfig: top_k = {self.top_k} is not valid: expected at most n_experts ({self.n_experts})"
            )
        if not (math.isfinite(self.moe_aux_weight) and self.moe_aux_weight >= 0):
            raise AnatomyError(
                f"ModelConfig: moe_aux_weight = {self.moe_aux_weight!r} is not valid: expected a finite number >= 0"
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    def kv_cache_bytes(self, tokens: int, element_size: int = 4) -> int:
        """What generation caches for `tokens` positions: a key and a value per layer and KV head.
        GQA pays here: fewer KV heads, a smaller cache (no torch needed to say it). MLA caches its
        latent and the shared rotated key instead: kv_latent + rope_dim numbers per layer and token."""
        if self.attn_type == "mla":
            return self.n_layer * (self.kv_latent + self.rope_dim) * tokens * element_size
        return kv_cache_bytes(self.n_layer, self.n_kv_head, self.head_dim, tokens, element_size)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "model config") -> "ModelConfig":
        return config_from_dict(cls, data, source)

    def replace(self, **overrides: Any) -> "ModelConfig":
        return config_from_dict(type(self), {**self.to_dict(), **overrides}, "model overrides")

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)


def kv_cache_bytes(n_layer: int, n_kv_head: int, head_dim: int, tokens: int, element_size: int) -> int:
    """The KV cache's size: 2 (k and v) x n_layer x n_kv_head x head_dim x tokens x bytes per element.
    The one formula: the model, the GQA exam and the report all ask here."""
    return 2 * n_layer * n_kv_head * head_dim * tokens * element_size


# The chapter's vocabulary size: its corpus has 1,719 distinct characters. The check, the bench
# and the wall-clock exam build their models at it, so that their parameter counts and timings
# compare with the chapter's table.
CHAPTER_VOCAB = 1719

# Presets are data: a name and the fields it changes from the 2017 defaults.
PRESETS: dict[str, dict[str, Any]] = {
    "vanilla": {},
    "llama": {
        "norm_type": "rmsnorm",
        "norm_pos": "pre",
        "pos_type": "rope",
        "ffn_type": "swiglu",
        "n_kv_head": 2,
    },
    # Tiny, for tests: every part still has room to differ (4 heads, 2 layers, even head_dim).
    "debug": {"d_model": 32, "n_layer": 2, "n_head": 4, "n_kv_head": 4, "ctx_len": 16},
}


def preset(name: str, **overrides: Any) -> ModelConfig:
    """Build a ModelConfig by preset name plus field overrides."""
    if name not in PRESETS:
        raise AnatomyError(f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}")
    return ModelConfig.from_dict({**PRESETS[name], **overrides}, source=f"preset {name!r}")


# ---------------------------------------------------------------------------------------------
# The training config (here, not in train.py, so that checking a config needs no torch: the
# workflow checks every experiment's settings when it is parsed)
# ---------------------------------------------------------------------------------------------

Schedule = Literal["constant", "cosine"]
DEVICE_PATTERN = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")
# The largest seed torch.manual_seed takes (an unsigned 64-bit number); the batch RNG takes any
# seed >= 0, so this is the bound for both
SEED_MAX = 2**64 - 1
# AdamW's beta1 (torch's default, and LLaMA's). Its first step moves a weight by up to
# lr / (1 - beta1) = 10 x lr, a number torch turns into a 32-bit float: an lr above LR_MAX
# overflows it (torch's RuntimeError mid-run), where a smaller absurd lr diverges as a result.
ADAM_BETA1 = 0.9
FLOAT32_MAX = 3.4028234663852886e38
LR_MAX = FLOAT32_MAX * (1 - ADAM_BETA1)


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 2000
    batch_size: int = 32
    lr: float = 3e-4
    warmup_steps: int = 100  # linear warmup; 0 means full lr from the first step
    schedule: Schedule = "constant"  # after warmup: constant, or cosine down to min_lr
    min_lr: float = 0.0
    weight_decay: float = 0.01  # torch's AdamW default
    grad_clip: float = 0.0  # 0: off, so that instability shows (the deep post-norm test)
    # AdamW's second-moment decay: torch's default 0.999; LLaMA trained with 0.95 (a shorter
    # memory of the gradients' size, steadier when it changes fast)
    beta2: float = 0.999
    # False: weight decay on every parameter (torch's default). True: on the matrices only (every
    # parameter of 2 or more dimensions, the embeddings included, as nanoGPT does; LLaMA's paper
    # does not say which), never on the norms' gains and biases, whose size is not capacity
    decay_matrices_only: bool = False
    seed: int = 42
    eval_every: int = 50
    eval_batch_size: int = 64  # windows per forward pass during evaluation
    max_train_eval_windows: int = 128  # train loss: this many fixed windows spread over the split
    device: str = "auto"  # auto = cuda > mps > cpu
    threads: int = 0  # 0: torch's default
    # torch.compile the training step (anatomy/training/compiling.py): True, False, or auto = for models
    # with RMSNorm, RoPE or SwiGLU where a backend is installed. Evaluation and generation run eagerly.
    compile: bool | Literal["auto"] = "auto"
    # The number format of the forward pass (anatomy/precision.py): fp32, bf16 autocast, or auto =
    # bf16 where the hardware multiplies it natively. fp32 reproduces the shipped runs bit for bit.
    precision: Precision = "fp32"
    # Log the largest attention logit of each layer at the gradient norms' steps (max_logits.jsonl,
    # anatomy/training/layer_logs.py): an extra forward at those steps, so off unless asked for
    log_max_logits: bool = False

    def __post_init__(self) -> None:
        check_field_types(self)
        for name in ("lr", "min_lr", "weight_decay", "grad_clip", "beta2"):  # nan passes every comparison
            if not math.isfinite(getattr(self, name)):
                raise AnatomyError(
                    f"TrainConfig.{name} = {getattr(self, name)!r} is not valid: expected a finite number"
                )
        for name in ("lr", "min_lr"):  # the schedule moves between the two
            if getattr(self, name) > LR_MAX:
                raise AnatomyError(
                    f"TrainConfig.{name} = {getattr(self, name)!r} is not valid: expected at most {LR_MAX:.2g} "
                    f"(AdamW's first step is lr / (1 - beta1) = {1 / (1 - ADAM_BETA1):g} x lr, which must fit "
                    f"a 32-bit float, at most {FLOAT32_MAX:.2g})"
                )
        if not 0 < self.beta2 < 1:
            raise AnatomyError(
                f"TrainConfig.beta2 = {self.beta2!r} is not valid: expected a number between 0 and 1, "
                "both excluded (torch's default 0.999, LLaMA's 0.95)"
            )
        require_positive(self, "steps", "batch_size", "lr", "eval_every", "eval_batch_size", "max_train_eval_windows")
        # the batch RNG takes only non-negative seeds
        for name in ("warmup_steps", "min_lr", "weight_decay", "grad_clip", "threads", "seed"):
            if getattr(self, name) < 0:
                raise AnatomyError(f"TrainConfig.{name} = {getattr(self, name)!r} is not valid: expected >= 0")
        if self.seed > SEED_MAX:  # checked here, before a run folder is written, not by torch mid-start
            raise AnatomyError(
                f"TrainConfig.seed = {self.seed} is not valid: expected 0 to {SEED_MAX} (2**64 - 1, "
                "the largest seed torch takes)"
            )
        if not DEVICE_PATTERN.match(self.device):
            raise AnatomyError(
                f"TrainConfig.device = {self.device!r} is not valid: expected auto, cpu, mps, cuda or cuda:N"
            )

    @property
    def optimizer_recipe(self) -> str:
        """The AdamW recipe in words: runs with another recipe are another curve of the lr study."""
        return optimizer_recipe(self.beta2, self.weight_decay, self.decay_matrices_only, self.grad_clip)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "train config") -> "TrainConfig":
        return config_from_dict(cls, data, source)


def optimizer_recipe(beta2: float, weight_decay: float, decay_matrices_only: bool, grad_clip: float) -> str:
    """'AdamW beta2 0.999, weight decay 0.01 on every parameter, no clipping': a run's recipe, as the
    database records it and the report names it."""
    on = "the matrices" if decay_matrices_only else "every parameter"
    clip = f"clipping at {grad_clip:g}" if grad_clip else "no clipping"
    return f"AdamW beta2 {beta2:g}, weight decay {weight_decay:g} on {on}, {clip}"


# Where and how a run runs, not what it computes (these may change between a kill and a resume),
# and what it writes beside its numbers: neither makes another training
RUNTIME_KEYS = ("device", "threads", "compile")
LOGGING_KEYS = ("log_max_logits",)


def training_key(model: ModelConfig, train: TrainConfig, text: str) -> str:
    """One training, as a key: two runs with the same key compute the same numbers (bit for bit on
    one CPU), whichever experiment declares them. `text` names what it trains on."""
    settings = {key: value for key, value in train.to_dict().items() if key not in RUNTIME_KEYS + LOGGING_KEYS}
    return json.dumps({"model": model.to_dict(), "train": settings, "text": text}, sort_keys=True)


def settings_key(model: ModelConfig, train: TrainConfig, text: str) -> str:
    """One training without its seed, as a key: runs that share it differ in the seed alone, so how
    far apart they land is the seed's noise, whichever experiments declare them."""
    return training_key(model, dataclasses.replace(train, seed=0), text)


DEFAULT_RECIPE = optimizer_recipe(
    TrainConfig.beta2, TrainConfig.weight_decay, TrainConfig.decay_matrices_only, TrainConfig.grad_clip
)
