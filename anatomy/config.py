"""The model's config: one flat dataclass of plain values that chooses every part.

Switches are strings typed as `Literal[...]`, so the config stays data: it round-trips through
JSON and YAML, and a run folder can always say exactly which parts produced its numbers.
The defaults are the 2017 parts; the `llama` preset swaps in the five newer ones. A preset
describes exactly what `anatomy train --preset NAME` trains.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal

from anatomy.errors import AnatomyError
from anatomy.precision import Precision

NormType = Literal["layernorm", "rmsnorm"]
NormPos = Literal["post", "pre"]
PosType = Literal["learned", "rope"]
FfnType = Literal["gelu", "swiglu"]
RopeBreak = Literal["none", "k_unrotated", "k_adjacent"]
Impl = Literal["manual", "fused"]


# ---------------------------------------------------------------------------------------------
# Validation shared by every config dataclass (ModelConfig and TrainConfig)
# ---------------------------------------------------------------------------------------------


def check_field_types(cfg: Any) -> None:
    """Check each field against its annotation; Literal fields must hold an allowed value."""
    hints = typing.get_type_hints(type(cfg))
    name = type(cfg).__name__
    for field in dataclasses.fields(cfg):
        value = getattr(cfg, field.name)
        expected = hints[field.name]
        if not _matches(value, expected):
            raise AnatomyError(f"{name}.{field.name} = {value!r} is not valid: expected {_describe(expected)}")


def _matches(value: Any, expected: Any) -> bool:
    origin = typing.get_origin(expected)
    if origin is Literal:
        return value in typing.get_args(expected)
    if origin in (typing.Union, types.UnionType):
        return any(_matches(value, arg) for arg in typing.get_args(expected))
    if expected is type(None):
        return value is None
    if expected is bool:
        return isinstance(value, bool)
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if expected is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, expected)


def _describe(expected: Any) -> str:
    origin = typing.get_origin(expected)
    if origin is Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(expected))
    if typing.get_args(expected):
        return " or ".join(_describe(a) for a in typing.get_args(expected))
    return "None" if expected is type(None) else expected.__name__


def require_positive(cfg: Any, *names: str) -> None:
    for field_name in names:
        value = getattr(cfg, field_name)
        if value is not None and value <= 0:
            raise AnatomyError(
                f"{type(cfg).__name__}.{field_name} = {value!r} is not valid: expected a positive number"
            )


def config_from_dict(cls: type, data: dict[str, Any], source: str = "config") -> Any:
    """Build a config dataclass from a dict; unknown keys are an error, never silently dropped."""
    if not isinstance(data, dict):
        raise AnatomyError(f"{source}: expected a mapping of {cls.__name__} fields, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - known)
    if unknown:
        raise AnatomyError(
            f"{source}: unknown {cls.__name__} field(s) {', '.join(unknown)}; known fields: {', '.join(sorted(known))}"
        )
    return cls(**data)


def parse_value(cls: type, key: str, raw: str) -> Any:
    """Turn the text of a command-line `key=value` into the field's type (int, float, bool, str)."""
    hints = typing.get_type_hints(cls)
    expected = hints[key]
    is_union = typing.get_origin(expected) in (typing.Union, types.UnionType)
    kinds = typing.get_args(expected) if is_union else (expected,)
    if raw.lower() in ("none", "null") and type(None) in kinds:
        return None
    for kind in kinds:
        if kind is bool:
            if raw.lower() in ("true", "1", "yes"):
                return True
            if raw.lower() in ("false", "0", "no"):
                return False
        elif kind is int:
            try:
                return int(raw)
            except ValueError:
                pass
        elif kind is float:
            try:
                return float(raw)
            except ValueError:
                pass
    return raw  # strings and Literal values; the dataclass check names what was allowed


# ---------------------------------------------------------------------------------------------
# The model config
# ---------------------------------------------------------------------------------------------


def kv_cache_bytes(n_layer: int, n_kv_head: int, head_dim: int, tokens: int, element_size: int) -> int:
    """The KV cache's size: 2 (k and v) x n_layer x n_kv_head x head_dim x tokens x bytes per element.
    The one formula: the model, the GQA exam and the report all ask here."""
    return 2 * n_layer * n_kv_head * head_dim * tokens * element_size


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
    # fused: PyTorch's fused kernels, what `anatomy train` trains; manual: the maths spelled out
    # (the same numbers, slower: for reading, and for the tests and exams that compare the two)
    impl: Impl = "fused"

    def __post_init__(self) -> None:
        check_field_types(self)
        require_positive(self, "vocab_size", "d_model", "n_layer", "n_head", "n_kv_head", "ctx_len")
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

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_head

    def kv_cache_bytes(self, tokens: int, element_size: int = 4) -> int:
        """What generation caches for `tokens` positions: a key and a value per layer and KV head.
        GQA pays here: fewer KV heads, a smaller cache (no torch needed to say it)."""
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

    def __post_init__(self) -> None:
        check_field_types(self)
        for name in ("lr", "min_lr", "weight_decay", "grad_clip"):  # nan passes every comparison
            if not math.isfinite(getattr(self, name)):
                raise AnatomyError(
                    f"TrainConfig.{name} = {getattr(self, name)!r} is not valid: expected a finite number"
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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "train config") -> "TrainConfig":
        return config_from_dict(cls, data, source)
