"""A character-level Transformer whose five parts can each be the 2017 or the LLaMA version.

Read top to bottom: the parts (norms, RoPE, attention, feed-forward), then the block that
wires them, then the model. Every switch of ModelConfig (anatomy/config.py), and where it acts:

  The five swapped parts, each a small piece below       switch       where
  1. RMSNorm        replaces LayerNorm                   norm_type    class RMSNorm, make_norm
  2. pre-norm       replaces post-norm                   norm_pos     Block.forward, MiniLM
  3. RoPE           replaces learned positions           pos_type     apply_rope, RotaryEmbedding
  4. GQA            replaces plain multi-head            n_kv_head    CausalSelfAttention
  5. SwiGLU         replaces the GELU MLP                ffn_type     class SwiGLU

  And three more
  QK-norm           a norm on q and k before scoring     qk_norm      CausalSelfAttention
  broken RoPE       k turned the wrong way, or not       rope_break   ROTATE_K (the break tests)
  manual or fused   the maths spelled out for the        impl         every part's forward
                    reader, or PyTorch's fused kernels:
                    the same numbers (the tests check it)
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
import torch.nn as nn
import torch.nn.functional as F

from anatomy.config import ModelConfig
from anatomy.errors import AnatomyError

# ---------------------------------------------------------------------------------------------
# Part 1: the norm
# ---------------------------------------------------------------------------------------------

RMS_NORM_EPS = 1e-6  # the epsilon under RMSNorm's square root (anatomy/generation/export.py writes it out)


class LayerNorm(nn.Module):
    """The 2017 norm: subtract the mean, divide by the standard deviation, scale and shift."""

    def __init__(self, dim: int, impl: str, eps: float = 1e-5):
        super().__init__()
        self.impl, self.eps = impl, eps
        self.weight = nn.Parameter(torch.ones(dim))
        self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.impl == "fused":
            return F.layer_norm(x, self.weight.shape, self.weight, self.bias, self.eps)
        mean = x.mean(dim=-1, keepdim=True)
        var = x.var(dim=-1, keepdim=True, unbiased=False)
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class RMSNorm(nn.Module):
    """Replaces LayerNorm. Drops the mean subtraction and the bias: only rescale by the root
    mean square. Fewer operations and parameters, and in practice just as stable."""

    def __init__(self, dim: int, impl: str, eps: float = RMS_NORM_EPS):
        super().__init__()
        self.impl, self.eps = impl, eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.impl == "fused":
            return F.rms_norm(x, self.weight.shape, self.weight, self.eps)
        rms = torch.sqrt(x.pow(2).mean(dim=-1, keepdim=True) + self.eps)
        return x / rms * self.weight


NORMS = {"layernorm": LayerNorm, "rmsnorm": RMSNorm}


def make_norm(cfg: ModelConfig, dim: int | None = None) -> nn.Module:
    return NORMS[cfg.norm_type](dim or cfg.d_model, cfg.impl)


# ---------------------------------------------------------------------------------------------
# Part 3: positions. Learned positions are a table in MiniLM; RoPE rotates q and k instead.
# ---------------------------------------------------------------------------------------------

ROPE_THETA = 10000.0  # RoPE's base wavelength, as in LLaMA 1 and 2 (LLaMA 3 uses 500,000)


def rope_angles(head_dim: int, length: int, base: float = ROPE_THETA) -> torch.Tensor:
    """Angle t * base^(-2i/head_dim) for every position t < length and pair i: (length, head_dim/2)."""
    freqs = base ** (-torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim)
    positions = torch.arange(length, dtype=torch.float32)
    return torch.outer(positions, freqs)


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Half-split pairing (as in the Hugging Face LLaMA code): dimension i turns with i + head_dim/2.

    x: (..., head_dim); cos, sin: (..., head_dim/2), broadcast against x (one angle per position).
    """
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x1 * sin + x2 * cos), dim=-1)


def apply_rope_adjacent(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """The other common pairing: dimension 2i turns with 2i + 1 (used only to break RoPE on purpose).

    Either pairing alone is a valid RoPE; giving q one and k the other destroys relative position.
    """
    x_even, x_odd = x[..., 0::2], x[..., 1::2]
    rotated = torch.stack((x_even * cos - x_odd * sin, x_even * sin + x_odd * cos), dim=-1)
    return rotated.flatten(-2)


def leave_unrotated(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """No rotation at all (used only to break RoPE on purpose: k then carries no position)."""
    return x


# How k is rotated, by cfg.rope_break. A correct RoPE turns k exactly as it turns q; the two break
# tests turn it the wrong way or not at all.
ROTATE_K = {"none": apply_rope, "k_adjacent": apply_rope_adjacent, "k_unrotated": leave_unrotated}


class RotaryEmbedding(nn.Module):
    """Replaces the learned position table. Instead of adding a position vector to the input, rotate
    each (q, k) pair of dimensions by an angle proportional to the position, so the score q.k depends
    only on the distance between the two positions. No parameters, and no hard length limit."""

    def __init__(self, head_dim: int, length: int):
        super().__init__()
        self.head_dim = head_dim
        self._set_length(length)

    def _set_length(self, length: int, device: torch.device | None = None) -> None:
        angles = rope_angles(self.head_dim, length).to(device)
        # Tables are derived, not learned: kept out of the state dict (persistent=False).
        self.register_buffer("cos", angles.cos(), persistent=False)
        self.register_buffer("sin", angles.sin(), persistent=False)

    def forward(self, start: int, length: int) -> tuple[torch.Tensor, torch.Tensor]:
        """cos and sin for positions start .. start+length-1, extending the tables on demand.

        Tables rather than computing the angles at every call: generating one token at a time pays
        for it (measured: docs/speed.md)."""
        end = start + length
        if end > self.cos.shape[0]:
            self._set_length(max(end, 2 * self.cos.shape[0]), self.cos.device)
        return self.cos[start:end], self.sin[start:end]


# ---------------------------------------------------------------------------------------------
# Part 4: attention, with grouped key/value heads
# ---------------------------------------------------------------------------------------------

LayerCache = tuple[torch.Tensor, torch.Tensor]  # (k, v), each (B, n_kv_head, T_so_far, head_dim)


class CausalSelfAttention(nn.Module):
    """Replaces plain multi-head attention with grouped-query attention (GQA): n_head query heads
    share n_kv_head key/value heads, query head h reading kv head h // (n_head / n_kv_head).
    n_kv_head == n_head is plain multi-head attention; 1 is multi-query attention. Fewer K/V heads
    shrink the KV cache at inference; training gains little.

    Reads in order: project x, split into q, k and v, optionally normalise q and k (QK-norm), rotate
    q, rotate k (RoPE), attend."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.n_head, self.n_kv_head, self.head_dim = cfg.n_head, cfg.n_kv_head, cfg.head_dim
        # One projection for q, k and v, its rows [n_head query heads | n_kv_head key heads |
        # n_kv_head value heads], head_dim rows each; splitting its output is the same as three
        # projections. (The saved weights and the Hugging Face export use this layout.)
        self.qkv_proj = nn.Linear(cfg.d_model, (cfg.n_head + 2 * cfg.n_kv_head) * cfg.head_dim, bias=False)
        self.o_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        # QK-norm: normalise q and k per head before scoring, so scores cannot blow up.
        self.q_norm = make_norm(cfg, cfg.head_dim) if cfg.qk_norm else nn.Identity()
        self.k_norm = make_norm(cfg, cfg.head_dim) if cfg.qk_norm else nn.Identity()
        self.rotate_k = ROTATE_K[cfg.rope_break]  # apply_rope, unless RoPE is broken on purpose

    def project_qkv(
        self, x: torch.Tensor, rope: RotaryEmbedding | None, start: int
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q: (B, n_head, T, head_dim); k, v: (B, n_kv_head, T, head_dim), positions from `start`."""
        B, T, _ = x.shape
        heads = self.qkv_proj(x).view(B, T, self.n_head + 2 * self.n_kv_head, self.head_dim)
        q, k, v = heads.split([self.n_head, self.n_kv_head, self.n_kv_head], dim=2)
        q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:  # RoPE turns q and k, never v
            cos, sin = rope(start, T)
            cos, sin = cos[:, None], sin[:, None]  # (T, 1, head_dim/2): the same angle for every head
            q = apply_rope(q, cos, sin)
            k = self.rotate_k(k, cos, sin)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def qk_scores(self, x: torch.Tensor, rope: RotaryEmbedding | None, start: int = 0) -> torch.Tensor:
        """The raw attention scores q.k / sqrt(head_dim), (B, n_head, T, T): used by the RoPE check."""
        q, k, _ = self.project_qkv(x, rope, start)
        k = k.repeat_interleave(self.n_head // self.n_kv_head, dim=1)
        return q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)

    def forward(
        self,
        x: torch.Tensor,
        rope: RotaryEmbedding | None = None,
        cache: LayerCache | None = None,
    ) -> tuple[torch.Tensor, LayerCache]:
        B, T, C = x.shape
        start = 0 if cache is None else cache[0].shape[2]
        q, k, v = self.project_qkv(x, rope, start)
        if cache is not None:  # the cache holds only the n_kv_head heads, never the repeated ones
            k = torch.cat((cache[0], k), dim=2)
            v = torch.cat((cache[1], v), dim=2)
        new_cache = (k, v)
        if self.cfg.impl == "fused":
            y = self._fused_attention(q, k, v, start)
        else:
            y = self._manual_attention(q, k, v, start)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, n_head * head_dim)
        return self.o_proj(y), new_cache

    def _manual_attention(self, q, k, v, start: int) -> torch.Tensor:
        group = self.n_head // self.n_kv_head
        k = k.repeat_interleave(group, dim=1)  # (B, n_head, S, head_dim): head h reads kv h // group
        v = v.repeat_interleave(group, dim=1)
        scores = q @ k.transpose(-2, -1) / math.sqrt(self.head_dim)  # (B, n_head, T, S)
        T, S = q.shape[2], k.shape[2]
        future = torch.ones(T, S, dtype=torch.bool, device=q.device).triu(start + 1)
        scores = scores.masked_fill(future, float("-inf"))
        # softmax in float32 even under bf16 autocast (a no-op in fp32), as the fused kernel does
        return F.softmax(scores.float(), dim=-1).to(v.dtype) @ v  # (B, n_head, T, head_dim)

    def _fused_attention(self, q, k, v, start: int) -> torch.Tensor:
        T, S = q.shape[2], k.shape[2]
        gqa = self.n_kv_head != self.n_head
        if start == 0:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
        # One new token after the cache may see every key: no mask to build (measured: docs/speed.md).
        if T == 1:
            return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
        # With a cache, query i sits at position start + i: allow keys up to there.
        allowed = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(start)
        return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=gqa)


# ---------------------------------------------------------------------------------------------
# Part 5: the feed-forward network
# ---------------------------------------------------------------------------------------------


class GeluMLP(nn.Module):
    """The 2017-style feed-forward: d -> 4d -> d with a GELU in between."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.impl = cfg.impl
        self.up = nn.Linear(cfg.d_model, 4 * cfg.d_model, bias=False)
        self.down = nn.Linear(4 * cfg.d_model, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.up(x)
        if self.impl == "fused":
            h = F.gelu(h)
        else:
            h = 0.5 * h * (1.0 + torch.erf(h / math.sqrt(2.0)))
        return self.down(h)


def swiglu_hidden(d_model: int, multiple_of: int = 32) -> int:
    """2/3 of 4d, rounded up to a multiple: three matrices at about the cost of GELU's two.
    (LLaMA rounds to multiples of 256, which is how 4096 becomes 11008.)"""
    hidden = int(4 * d_model * 2 / 3)
    return multiple_of * math.ceil(hidden / multiple_of)


class SwiGLU(nn.Module):
    """Replaces the GELU MLP. A gate branch, passed through SiLU, multiplies a second linear branch:
    down(silu(gate(x)) * up(x)). The multiplicative gate lets each unit decide how much passes."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.impl = cfg.impl
        hidden = swiglu_hidden(cfg.d_model)
        self.gate = nn.Linear(cfg.d_model, hidden, bias=False)
        self.up = nn.Linear(cfg.d_model, hidden, bias=False)
        self.down = nn.Linear(hidden, cfg.d_model, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        g = self.gate(x)
        g = F.silu(g) if self.impl == "fused" else g * torch.sigmoid(g)
        return self.down(g * self.up(x))


FFNS = {"gelu": GeluMLP, "swiglu": SwiGLU}


# ---------------------------------------------------------------------------------------------
# The block. Part 2 lives here: where the norm sits.
# ---------------------------------------------------------------------------------------------


class Block(nn.Module):
    """One Transformer layer. Post-norm (2017) normalises after adding the residual; pre-norm
    normalises only the branch input, leaving a clean residual path from input to output, which
    keeps deep stacks trainable without a careful warmup."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.pre_norm = cfg.norm_pos == "pre"
        self.norm1 = make_norm(cfg)
        self.attn = CausalSelfAttention(cfg)
        self.norm2 = make_norm(cfg)
        self.ffn = FFNS[cfg.ffn_type](cfg)

    def forward(self, x, rope=None, cache: LayerCache | None = None):
        if self.pre_norm:
            attn_out, cache = self.attn(self.norm1(x), rope, cache)
            x = x + attn_out
            x = x + self.ffn(self.norm2(x))
        else:
            attn_out, cache = self.attn(x, rope, cache)
            x = self.norm1(x + attn_out)
            x = self.norm2(x + self.ffn(x))
        return x, cache


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------


@dataclass
class KVCache:
    """Per-layer keys and values of the tokens seen so far, for generating one token at a time."""

    layers: list[LayerCache | None] = field(default_factory=list)

    @property
    def length(self) -> int:
        first = self.layers[0] if self.layers else None
        return 0 if first is None else first[0].shape[2]

    def nbytes(self) -> int:
        return sum(
            k.nelement() * k.element_size() + v.nelement() * v.element_size() for k, v in filter(None, self.layers)
        )


class MiniLM(nn.Module):
    """The chapter's mini language model: characters in, next-character logits out.

    Token embedding (plus a learned position table, unless RoPE turns q and k instead), n_layer
    Blocks, a final norm for pre-norm stacks, and an output projection not tied to the embedding.
    `cfg` picks every part; `preset("vanilla")` is the 2017 Transformer, `preset("llama")` the
    mini-LLaMA. `forward` scores a whole window (training); `forward_cached` feeds new tokens one
    chunk at a time against a KVCache (generation)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        if cfg.vocab_size is None:
            raise AnatomyError("ModelConfig.vocab_size is not set: it comes from the tokenizer's vocabulary")
        self.cfg = cfg
        self.tok_emb = nn.Embedding(cfg.vocab_size, cfg.d_model)
        if cfg.pos_type == "learned":
            self.pos_emb = nn.Embedding(cfg.ctx_len, cfg.d_model)
            self.rope = None
        else:
            self.pos_emb = None
            self.rope = RotaryEmbedding(cfg.head_dim, cfg.ctx_len)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        # Pre-norm leaves the residual stream unnormalised, so it needs one last norm; post-norm's
        # last block already ends in one. Forgetting it raises no error: it only trains worse.
        self.final_norm = make_norm(cfg) if cfg.norm_pos == "pre" else None
        self.lm_head = nn.Linear(cfg.d_model, cfg.vocab_size, bias=False)  # not tied to tok_emb
        self.apply(self._init_weights)

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def _embed(self, idx: torch.Tensor, start: int) -> torch.Tensor:
        x = self.tok_emb(idx)  # (B, T, d_model)
        if self.pos_emb is not None:
            end = start + idx.shape[1]
            if end > self.cfg.ctx_len:
                raise AnatomyError(
                    f"learned positions only cover 0..{self.cfg.ctx_len - 1} (ctx_len {self.cfg.ctx_len}), "
                    f"but position {end - 1} was asked for; use a shorter input or pos_type 'rope'"
                )
            x = x + self.pos_emb(torch.arange(start, end, device=idx.device))
        return x

    def _head(self, x: torch.Tensor) -> torch.Tensor:
        if self.final_norm is not None:
            x = self.final_norm(x)
        return self.lm_head(x)  # (B, T, vocab_size)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        """idx: (B, T) token ids -> (logits (B, T, vocab), mean cross-entropy loss or None)."""
        x = self._embed(idx, 0)
        for block in self.blocks:
            x, _ = block(x, self.rope)
        logits = self._head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        return logits, loss

    def forward_cached(self, idx: torch.Tensor, cache: KVCache | None = None):
        """Run only the new tokens `idx`, attending to the cached ones; returns (logits, cache)."""
        cache = cache if cache is not None else KVCache([None] * len(self.blocks))
        x = self._embed(idx, cache.length)
        new_layers: list[LayerCache | None] = []
        for block, layer_cache in zip(self.blocks, cache.layers):
            x, layer_cache = block(x, self.rope, layer_cache)
            new_layers.append(layer_cache)
        return self._head(x), KVCache(new_layers)

    def kv_cache_bytes(self, tokens: int, element_size: int = 4) -> int:
        """2 (k and v) x n_layer x n_kv_head x head_dim x tokens x bytes per element (config.py's formula)."""
        return self.cfg.kv_cache_bytes(tokens, element_size)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def param_table(self) -> dict[str, int]:
        """Parameters per part, for the learner's self-check."""
        table = {"token embedding": self.tok_emb.weight.numel()}
        if self.pos_emb is not None:
            table["position table"] = self.pos_emb.weight.numel()
        blocks = self.blocks
        table["attention (all layers)"] = sum(p.numel() for b in blocks for p in b.attn.parameters())
        table["feed-forward (all layers)"] = sum(p.numel() for b in blocks for p in b.ffn.parameters())
        table["norms"] = sum(p.numel() for b in blocks for n in (b.norm1, b.norm2) for p in n.parameters())
        if self.final_norm is not None:
            table["norms"] += sum(p.numel() for p in self.final_norm.parameters())
        table["output projection"] = self.lm_head.weight.numel()
        return table
