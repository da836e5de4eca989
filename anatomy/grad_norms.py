"""The gradient norm of every block: how strongly the training signal reaches each depth.

A deep post-norm model without warmup fails when the gradients of its blocks drift apart in
scale, the last blocks' growing against the first ones' (Xiong et al. 2020, "On Layer
Normalization in the Transformer Architecture"). Logging one norm per block and step shows it
happening. The depth exam (anatomy/exams/depth.py) draws it as a layer x step heatmap.
"""

from __future__ import annotations

import torch
from torch import nn

# Every step until here (the early steps are where a no-warmup run goes wrong), then at every eval.
EVERY_STEP_UNTIL = 200


def should_log(step: int, eval_every: int, last_step: int) -> bool:
    """Whether update `step` (1-based, as in metrics.jsonl) logs its gradient norms."""
    return step <= EVERY_STEP_UNTIL or step % eval_every == 0 or step == last_step


def block_grad_norms(blocks: nn.ModuleList) -> list[float]:
    """The L2 norm of each block's gradient, all of the block's parameters taken as one vector
    (block 0, nearest the embedding, first). A block with no gradient yet counts 0."""
    device = next(blocks.parameters()).device
    per_block = []
    for block in blocks:
        grads = [p.grad for p in block.parameters() if p.grad is not None]
        # one fused call for the parameter norms, then the norm of those norms
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))) if grads else None
        per_block.append(norm if norm is not None else torch.zeros((), device=device))
    return torch.stack(per_block).float().tolist()  # one device sync for all blocks, not one per block
