"""A character-level Transformer whose five parts can each be the 2017 or the LLaMA version.

Read top to bottom: the parts (norms, RoPE, attention, feed-forward), then the block that
wires them, then the model. Every switch of ModelConfig (anatomy/config.py), and where it acts:

  The five swapped parts, each a small piece below       switch       where
  1. RMSNorm        replaces LayerNorm                   norm_type    class RMSNorm, make_norm
  2. pre-norm       replaces post-norm                   norm_pos     Block.forward, MiniLM
  3. RoPE           replaces learned positions           pos_type     apply_rope, RotaryEmbedding
  4. GQA            replaces plain multi-head            n_kv_head    CausalSelfAttention
  5. SwiGLU         replaces the GELU MLP                ffn_type     class SwiGLU

  The parts of 2024-26, each off by default
  QK-norm           a norm on q and k before scoring     qk_norm      CausalSelfAttention.q_norm, k_norm
  MLA               k and v rebuilt from a cached        attn_type    class LatentAttention
                    latent, plus one shared rotated key  (kv_latent, rope_dim)
  mixture of        top_k of n_experts SwiGLUs per       ffn_type     class MixtureOfExperts
  experts           token, and a load-balancing loss     (n_experts, top_k, moe_aux_weight)

  And two more
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

# mha: (k, v), each (B, n_kv_head, T_so_far, head_dim); mla: (latent (B, 1, T_so_far, kv_latent),
# shared rotated key (B, 1, T_so_far, rope_dim)). Time is dimension 2 in both.
LayerCache = tuple[torch.Tensor, torch.Tensor]


def manual_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    """softmax(q.k / sqrt(d) + causal mask) @ v, spelled out. q: (B, n_head, T, d); k, v: (B,
    n_kv_head, S, d) with S = start + T; query head h reads kv head h // (n_head / n_kv_head)."""
    group = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(group, dim=1)  # (B, n_head, S, d): head h reads kv h // group
    v = v.repeat_interleave(group, dim=1)
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])  # (B, n_head, T, S)
    T, S = q.shape[2], k.shape[2]
    future = torch.ones(T, S, dtype=torch.bool, device=q.device).triu(start + 1)
    scores = scores.masked_fill(future, float("-inf"))
    # softmax in float32 even under bf16 autocast (a no-op in fp32), as the fused kernel does
    return F.softmax(scores.float(), dim=-1).to(v.dtype) @ v  # (B, n_head, T, d)


def fused_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start: int) -> torch.Tensor:
    """The same as manual_attention, in PyTorch's fused kernel."""
    T, S = q.shape[2], k.shape[2]
    gqa = k.shape[1] != q.shape[1]
    if start == 0:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=gqa)
    # One new token after the cache may see every key: no mask to build (measured: docs/speed.md).
    if T == 1:
        return F.scaled_dot_product_attention(q, k, v, enable_gqa=gqa)
    # With a cache, query i sits at position start + i: allow keys up to there.
    allowed = torch.ones(T, S, dtype=torch.bool, device=q.device).tril(start)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=allowed, enable_gqa=gqa)


ATTEND = {"manual": manual_attention, "fused": fused_attention}


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
        # QK-norm (OLMo 2, Qwen 3, 2024-25): normalise every query and key head before scoring, so
        # no q.k can grow without bound and saturate the softmax. The whole part is these two norms
        # (2 x head_dim weights a layer with RMSNorm) and their one line in project_qkv.
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
        q, k = self.q_norm(q), self.k_norm(k)  # QK-norm: per head, before RoPE (a no-op without it)
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
        y = ATTEND[self.cfg.impl](q, k, v, start)  # (B, n_head, T, head_dim)
        y = y.transpose(1, 2).reshape(B, T, C)  # (B, T, n_head * head_dim)
        return self.o_proj(y), new_cache


class LatentAttention(nn.Module):
    """Multi-head latent attention (MLA: DeepSeek-V2, 2024; DeepSeek-V3 and Kimi K2 since).
    Replaces the key and value heads by what they are made from: each token is squeezed to one
    latent c of kv_latent numbers, and every head's key content and value are projected up from
    it when attention needs them. Generation caches c alone, not n_head keys and values.

    RoPE cannot turn a key that is rebuilt from c (the rotation would have to sit between the two
    projections), so position travels apart, "decoupled" as the paper says: each query head gets
    rope_dim rotated dimensions of its own, and the key's rotated part is one vector of rope_dim,
    projected from x directly and shared by every head, cached beside c. A head's score is then
    q_content.k_content + q_rope.k_rope.

    Two simplifications of DeepSeek-V2, for a model this small: q is projected from x in one step
    (V2-Lite does this too; V2 squeezes q through a latent of its own to save training memory),
    and the rotated dimensions are carved out of head_dim rather than added to it (V2: 128 + 64),
    so q.k is head_dim wide as in the attention above. Like the released models, c is normalised
    before it is projected up. The cache per token and layer is kv_latent + rope_dim numbers,
    against 2 x n_kv_head x head_dim for the attention above."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        self.n_head, self.head_dim, self.rope_dim = cfg.n_head, cfg.head_dim, cfg.rope_dim
        self.content_dim = cfg.head_dim - cfg.rope_dim  # the part of q.k that the latent carries
        # q's rows per head: [content_dim | rope_dim]
        self.q_proj = nn.Linear(cfg.d_model, cfg.n_head * cfg.head_dim, bias=False)
        self.kv_down = nn.Linear(cfg.d_model, cfg.kv_latent, bias=False)  # x -> c, what is cached
        self.kv_norm = make_norm(cfg, cfg.kv_latent)
        # c -> every head's key content and value: rows [n_head x content_dim | n_head x head_dim]
        self.kv_up = nn.Linear(cfg.kv_latent, cfg.n_head * (self.content_dim + cfg.head_dim), bias=False)
        self.k_rope_proj = nn.Linear(cfg.d_model, cfg.rope_dim, bias=False)  # x -> the shared rotated key
        self.o_proj = nn.Linear(cfg.d_model, cfg.d_model, bias=False)
        self.rotate_k = ROTATE_K[cfg.rope_break]

    def compress(self, x: torch.Tensor, rope: RotaryEmbedding, start: int) -> LayerCache:
        """What the cache keeps of x (B, T, d_model): the latent (B, 1, T, kv_latent) and the
        rotated shared key (B, 1, T, rope_dim), positions from `start`."""
        latent = self.kv_down(x)[:, None]
        cos, sin = rope(start, x.shape[1])  # (T, rope_dim/2)
        k_rope = self.rotate_k(self.k_rope_proj(x)[:, None], cos, sin)
        return latent, k_rope

    def queries(self, x: torch.Tensor, rope: RotaryEmbedding, start: int) -> torch.Tensor:
        """q: (B, n_head, T, head_dim), its last rope_dim dimensions rotated."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_head, self.head_dim).transpose(1, 2)
        q_content, q_rope = q.split([self.content_dim, self.rope_dim], dim=-1)
        cos, sin = rope(start, T)
        return torch.cat((q_content, apply_rope(q_rope, cos, sin)), dim=-1)

    def keys_values(self, latent: torch.Tensor, k_rope: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Every head's k and v, (B, n_head, S, head_dim), rebuilt from the (cached) latent."""
        B, _, S, _ = latent.shape
        up = self.kv_up(self.kv_norm(latent[:, 0])).view(B, S, self.n_head, self.content_dim + self.head_dim)
        k_content, v = up.transpose(1, 2).split([self.content_dim, self.head_dim], dim=-1)
        k = torch.cat((k_content, k_rope.expand(B, self.n_head, S, self.rope_dim)), dim=-1)
        return k, v

    def qk_scores(self, x: torch.Tensor, rope: RotaryEmbedding, start: int = 0) -> torch.Tensor:
        """The raw attention scores q.k / sqrt(head_dim), (B, n_head, T, T): used by the RoPE check."""
        k, _ = self.keys_values(*self.compress(x, rope, start))
        return self.queries(x, rope, start) @ k.transpose(-2, -1) / math.sqrt(self.head_dim)

    def forward(
        self, x: torch.Tensor, rope: RotaryEmbedding, cache: LayerCache | None = None
    ) -> tuple[torch.Tensor, LayerCache]:
        B, T, C = x.shape
        start = 0 if cache is None else cache[0].shape[2]
        latent, k_rope = self.compress(x, rope, start)
        if cache is not None:  # the cache holds the latent and the shared key, never k and v
            latent = torch.cat((cache[0], latent), dim=2)
            k_rope = torch.cat((cache[1], k_rope), dim=2)
        k, v = self.keys_values(latent, k_rope)  # (B, n_head, S, head_dim)
        y = ATTEND[self.cfg.impl](self.queries(x, rope, start), k, v, start)  # (B, n_head, T, head_dim)
        return self.o_proj(y.transpose(1, 2).reshape(B, T, C)), (latent, k_rope)


ATTENTIONS = {"mha": CausalSelfAttention, "mla": LatentAttention}


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


class MixtureOfExperts(nn.Module):
    """Replaces the one feed-forward by n_experts of them (DeepSeek-V3, Llama 4, Qwen3.5, Kimi K2):
    a router scores the experts for each token, the top_k best take it, and their outputs are
    mixed by the router's softmax weights, renormalised over the chosen. Each expert is the SwiGLU
    above, so the parameters grow n_experts-fold while the work per token is top_k SwiGLUs.

    A router left alone sends most tokens to a few experts, which then learn while the rest
    starve. The load-balancing loss of the Switch Transformer (Fedus et al. 2021) pushes back:
    n_experts x sum over experts of (share of the tokens it takes x its mean router probability),
    1 when the load is even. MiniLM adds moe_aux_weight x it to the training loss.

    manual: the definition, every expert on every token, weighted by its gate (0 where not
    chosen). fused: each expert on only the tokens routed to it, the same numbers. Both run the
    experts one after another in a Python loop, as a CPU must: no kernel here batches experts of
    different token counts (GPUs use grouped matrix multiplies). What the loop costs, measured at
    the chapter's size, batch 32 x 128, one thread, median of 5 interleaved rounds, on the 2-core
    machine at load 6-8 (two trainings running; docs/exams.md): the layer with 4 experts, top-1 (the
    SwiGLU's active parameters plus a 512-weight router) 141-180 ms against the SwiGLU's 116-170
    ms, 1.1-1.2x; the whole forward 1.1-1.2x. Top-2 doubles the layer's work: 1.8-2x. The manual
    impl runs every expert on every token: n_experts / top_k times the work."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.impl, self.n_experts, self.top_k = cfg.impl, cfg.n_experts, cfg.top_k
        self.router = nn.Linear(cfg.d_model, cfg.n_experts, bias=False)
        self.experts = nn.ModuleList(SwiGLU(cfg) for _ in range(cfg.n_experts))
        # Set by each forward: the load-balancing loss (with its gradient), and the share of the
        # tokens each expert took, for the trainer to log (derived: not in the state dict)
        self.aux_loss = torch.zeros(())
        self.register_buffer("token_share", torch.zeros(cfg.n_experts), persistent=False)

    def route(self, x: torch.Tensor) -> torch.Tensor:
        """x: (N, d_model) -> gates (N, n_experts): the renormalised top_k weights, 0 elsewhere.
        Records the load-balancing loss and each expert's share of the tokens on the way."""
        probs = F.softmax(self.router(x).float(), dim=-1)  # (N, n_experts), in float32 like attention's
        weights, chosen = probs.topk(self.top_k, dim=-1)  # (N, top_k)
        gates = torch.zeros_like(probs).scatter(-1, chosen, weights / weights.sum(dim=-1, keepdim=True))
        picked = torch.zeros_like(probs).scatter(-1, chosen, 1.0)  # 1 where an expert takes a token
        share = picked.mean(dim=0) / self.top_k  # (n_experts,), sums to 1
        self.aux_loss = self.n_experts * (share * probs.mean(dim=0)).sum()
        with torch.no_grad():
            self.token_share.copy_(share)
        return gates

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.shape
        tokens = x.reshape(B * T, C)
        gates = self.route(tokens)  # (B*T, n_experts)
        y = torch.zeros(tokens.shape, dtype=torch.float32, device=x.device)
        for e, expert in enumerate(self.experts):  # the loop a CPU pays for
            if self.impl == "manual":
                y = y + gates[:, e : e + 1] * expert(tokens)
            else:
                rows = gates[:, e].nonzero().squeeze(1)  # the tokens routed to expert e
                y = y.index_add(0, rows, gates[rows, e : e + 1] * expert(tokens[rows]))
        return y.to(x.dtype).view(B, T, C)


FFNS = {"gelu": GeluMLP, "swiglu": SwiGLU, "moe": MixtureOfExperts}


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
        self.attn = ATTENTIONS[cfg.attn_type](cfg)
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
            # MLA turns only the rope_dim dimensions set apart for position; the attention above, whole heads
            self.rope = RotaryEmbedding(cfg.rope_dim if cfg.attn_type == "mla" else cfg.head_dim, cfg.ctx_len)
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
        """idx: (B, T) token ids -> (logits (B, T, vocab), mean cross-entropy loss or None).

        With experts, a model in training mode adds moe_aux_weight x the load-balancing loss to
        the loss it learns from; in eval mode (evaluation) the loss is the cross-entropy alone,
        comparable with every other model's."""
        x = self._embed(idx, 0)
        for block in self.blocks:
            x, _ = block(x, self.rope)
        logits = self._head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
            if self.training and self.cfg.ffn_type == "moe":
                loss = loss + self.cfg.moe_aux_weight * self.moe_aux_loss()
        return logits, loss

    def moe_aux_loss(self) -> torch.Tensor:
        """The load-balancing loss of the last forward, averaged over the layers (1: an even load)."""
        return torch.stack([block.ffn.aux_loss for block in self.blocks]).mean()

    def expert_token_shares(self) -> list[list[float]]:
        """The share of the last forward's tokens each expert took, per layer (block 0 first): what
        the trainer logs, like the gradient norms. Empty for a model without experts."""
        if self.cfg.ffn_type != "moe":
            return []
        return torch.stack([block.ffn.token_share for block in self.blocks]).tolist()  # one device sync

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
        """2 (k and v) x n_layer x n_kv_head x head_dim x tokens x bytes per element; with MLA,
        n_layer x (kv_latent + rope_dim) x tokens x bytes (config.py's formula)."""
        return self.cfg.kv_cache_bytes(tokens, element_size)

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def active_params(self) -> int:
        """The parameters one token passes through: all of them, less the experts it is not routed to."""
        if self.cfg.ffn_type != "moe":
            return self.num_params()
        per_expert = sum(p.numel() for p in self.blocks[0].ffn.experts[0].parameters())
        return self.num_params() - len(self.blocks) * (self.cfg.n_experts - self.cfg.top_k) * per_expert

    def param_table(self) -> dict[str, int]:
        """Parameters per part, for the learner's self-check."""
        table = {"token embedding": self.tok_emb.weight.numel()}
        if self.pos_emb is not None:
            table["position table"] = self.pos_emb.weight.numel()
        blocks = self.blocks

        def count(modules) -> int:
            return sum(p.numel() for module in modules for p in module.parameters())

        qk_norms = [norm for b in blocks if self.cfg.qk_norm for norm in (b.attn.q_norm, b.attn.k_norm)]
        table["attention (all layers)"] = count(b.attn for b in blocks) - count(qk_norms)
        if qk_norms:
            table["QK-norm (all layers)"] = count(qk_norms)
        routers = [b.ffn.router for b in blocks if self.cfg.ffn_type == "moe"]
        table["feed-forward (all layers)"] = count(b.ffn for b in blocks) - count(routers)
        if routers:
            table["router (all layers)"] = count(routers)
        table["norms"] = sum(p.numel() for b in blocks for n in (b.norm1, b.norm2) for p in n.parameters())
        if self.final_norm is not None:
            table["norms"] += sum(p.numel() for p in self.final_norm.parameters())
        table["output projection"] = self.lm_head.weight.numel()
        return table
