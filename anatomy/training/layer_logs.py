"""Two per-layer logs beside the gradient norms (grad_norms.py), at the same steps.

expert_shares.jsonl, for every run with experts (ffn_type moe): the share of the batch's tokens
each expert took, per layer. The load-balancing loss exists because a router left alone sends
most tokens to a few experts; an expert whose share sinks towards 0 has stopped learning.

    {"step": 12, "shares": [[0.31, 0.19, 0.27, 0.23], [0.25, 0.25, 0.30, 0.20]]}   layer 0 first

max_logits.jsonl, opt-in (train.log_max_logits, off by default): the largest attention logit
q.k / sqrt(head_dim) before the softmax, over the batch, heads and the positions each query may
see, per layer. Logits that grow without bound saturate the softmax and break training at high
learning rates (Dehghani et al. 2023, "Scaling Vision Transformers to 22 Billion Parameters");
QK-norm bounds them. It is computed from q and k in a pass of its own, before the step's update,
whichever attention kernel the training uses (the fused one never shows its scores): an extra
forward at the logged steps only, outside the step's timing.

    {"step": 12, "max_logits": [4.1, 7.9]}

A value that is not a finite number is written as `null`, as in grad_norms.jsonl. Reading needs
no torch: `anatomy collect` and the exams use the readers.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anatomy.errors import AnatomyError
from anatomy.files.run_folder import read_small_file
from anatomy.precision import autocast

if TYPE_CHECKING:
    import torch

    from anatomy.model import MiniLM


def _finite_or_none(value: float) -> float | None:
    return value if math.isfinite(value) else None


def shares_row(step: int, shares: list[list[float]]) -> dict[str, Any]:
    """One line of expert_shares.jsonl."""
    return {"step": step, "shares": [[_finite_or_none(share) for share in layer] for layer in shares]}


def max_logits_row(step: int, logits: list[float]) -> dict[str, Any]:
    """One line of max_logits.jsonl."""
    return {"step": step, "max_logits": [_finite_or_none(logit) for logit in logits]}


def max_attention_logits(model: MiniLM, idx: torch.Tensor, precision: str = "fp32") -> list[float]:
    """The largest q.k / sqrt(head_dim) of each layer (layer 0 first) for the batch `idx`, among
    the scores the causal mask lets through. A pass of its own without gradients: each attention's
    input is caught on the way in and scored by the attention's own qk_scores (the manual maths,
    so that the fused kernel's hidden scores are seen too)."""
    import torch  # here: reading the logs needs no torch

    found: list[torch.Tensor] = []

    def score(attention, args):
        x, rope = args[0], args[1]
        scores = attention.qk_scores(x, rope).float()  # (B, n_head, T, T)
        T = scores.shape[-1]
        future = torch.ones(T, T, dtype=torch.bool, device=scores.device).triu(1)
        found.append(scores.masked_fill(future, float("-inf")).amax())

    hooks = [block.attn.register_forward_pre_hook(score) for block in model.blocks]
    try:
        with torch.no_grad(), autocast(precision, idx.device):
            model(idx)
    finally:
        for hook in hooks:
            hook.remove()
    return torch.stack(found).tolist()  # one device sync for every layer


# ---------------------------------------------------------------------------------------------
# Reading the logs back: rows of (run_id, step, layer, ...)


def _records(path: Path, what: str) -> list[tuple[int, dict]]:
    """(line number, object) of each line; a last line cut short by a run still writing is left out."""
    text = read_small_file(path, what)
    lines = text.splitlines()
    if lines and not text.endswith("\n"):
        try:
            json.loads(lines[-1])
        except json.JSONDecodeError:
            lines.pop()
    records = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise AnatomyError(f"{path}: line {number} is not valid JSON ({err.msg})") from None
        if not isinstance(record, dict):
            raise AnatomyError(f"{path}: line {number} must be an object")
        step = record.get("step")
        if isinstance(step, bool) or not isinstance(step, int) or step < 1:
            raise AnatomyError(f"{path}: line {number}: 'step' must be a whole number from 1, got {step!r}")
        records.append((number, record))
    return records


def _number(value: Any, path: Path, number: int, field: str) -> float:
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise AnatomyError(f"{path}: line {number}: '{field}' must hold numbers or null, got {value!r}")
    return math.nan if value is None else float(value)


def read_max_logits(path: Path, run_id: str) -> list[dict[str, Any]]:
    """Rows (run_id, step, layer, max_logit) of a run's max_logits.jsonl, by step then layer;
    none if the run has no such file. A step written twice: the later line wins."""
    path = Path(path)
    if not path.exists():
        return []
    by_step: dict[int, list[float]] = {}
    for number, record in _records(path, "the largest attention logits anatomy train logs"):
        values = record.get("max_logits")
        if not isinstance(values, list) or not values:
            raise AnatomyError(f"{path}: line {number}: 'max_logits' must be a list of one number per layer")
        by_step[record["step"]] = [_number(value, path, number, "max_logits") for value in values]
    return [
        {"run_id": run_id, "step": step, "layer": layer, "max_logit": value}
        for step in sorted(by_step)
        for layer, value in enumerate(by_step[step])
    ]


def read_expert_shares(path: Path, run_id: str) -> list[dict[str, Any]]:
    """Rows (run_id, step, layer, expert, share) of a run's expert_shares.jsonl, by step, layer
    and expert; none if the run has no such file."""
    path = Path(path)
    if not path.exists():
        return []
    by_step: dict[int, list[list[float]]] = {}
    for number, record in _records(path, "the experts' shares of the tokens anatomy train logs"):
        layers = record.get("shares")
        if not isinstance(layers, list) or not layers or not all(isinstance(layer, list) and layer for layer in layers):
            raise AnatomyError(f"{path}: line {number}: 'shares' must be a list per layer of one number per expert")
        by_step[record["step"]] = [[_number(value, path, number, "shares") for value in layer] for layer in layers]
    return [
        {"run_id": run_id, "step": step, "layer": layer, "expert": expert, "share": share}
        for step in sorted(by_step)
        for layer, shares in enumerate(by_step[step])
        for expert, share in enumerate(shares)
    ]


def expert_load(rows: list[dict[str, Any]]) -> dict[str, float] | None:
    """How evenly the router spreads the tokens: the smallest and largest share any expert of any
    layer took at the last logged step (the first steps are uneven before the balancing loss has
    acted; even is 1 / n_experts). None for a run without shares. The one definition: the MoE exam
    states its cells' load with it, and collect its runs' (the parts study's sentence)."""
    if not rows:
        return None
    last = max(row["step"] for row in rows)
    shares = [row["share"] for row in rows if row["step"] == last]
    return {"min_share": min(shares), "max_share": max(shares)}
