"""The gradient norm of every block: how strongly the training signal reaches each depth.

A deep post-norm model without warmup fails when the gradients of its blocks drift apart in
scale, the last blocks' growing against the first ones' (Xiong et al. 2020, "On Layer
Normalization in the Transformer Architecture"). Logging one norm per block and step shows it
happening. The depth exam (anatomy/exams/depth.py) draws it as a layer x step heatmap.

The trainer writes them to `grad_norms.jsonl` in the run folder, one line per logged step:

    {"step": 12, "norms": [0.91, 0.64, 0.52]}       block 0 (nearest the embedding) first

A norm that is not a finite number (the gradients of a diverged step) is written as `null`, so
that the file stays strict JSON for any reader; `read_grad_norms` turns it back into NaN, which
is what the grad_norms table holds for it. Reading needs no torch: `anatomy collect` uses it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anatomy.errors import AnatomyError
from anatomy.files.run_folder import read_small_file

if TYPE_CHECKING:
    from torch import nn

# Every step until here (the early steps are where a no-warmup run goes wrong), then at every eval.
EVERY_STEP_UNTIL = 200


def should_log(step: int, eval_every: int, last_step: int) -> bool:
    """Whether update `step` (1-based, as in metrics.jsonl) logs its gradient norms."""
    return step <= EVERY_STEP_UNTIL or step % eval_every == 0 or step == last_step


def block_grad_norms(blocks: nn.ModuleList) -> list[float]:
    """The L2 norm of each block's gradient, all of the block's parameters taken as one vector
    (block 0, nearest the embedding, first). A block with no gradient yet counts 0.
    It only reads `.grad`: logging cannot change what the model trains to."""
    import torch  # here, not at the top: reading the log (collect, the dashboard) needs no torch

    device = next(blocks.parameters()).device
    per_block = []
    for block in blocks:
        grads = [p.grad for p in block.parameters() if p.grad is not None]
        # one fused call for the parameter norms, then the norm of those norms
        norm = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(grads))) if grads else None
        per_block.append(norm if norm is not None else torch.zeros((), device=device))
    return torch.stack(per_block).float().tolist()  # one device sync for all blocks, not one per block


def norms_row(step: int, norms: list[float]) -> dict[str, Any]:
    """One line of grad_norms.jsonl; NaN and inf become null (strict JSON)."""
    return {"step": step, "norms": [norm if math.isfinite(norm) else None for norm in norms]}


# ---------------------------------------------------------------------------------------------
# Reading grad_norms.jsonl into rows of the grad_norms table


def _parsed_line(path: Path, number: int, line: str) -> tuple[int, list[float]]:
    """(step, norms) of one line, or an error naming the file, the line and what is wrong."""
    try:
        record = json.loads(line)
    except json.JSONDecodeError as err:
        raise AnatomyError(f"{path}: line {number} is not valid JSON ({err.msg})") from None
    if not isinstance(record, dict) or "step" not in record or "norms" not in record:
        raise AnatomyError(f"{path}: line {number} must be an object with 'step' and 'norms' fields")
    step, norms = record["step"], record["norms"]
    if isinstance(step, bool) or not isinstance(step, int) or step < 1:
        raise AnatomyError(f"{path}: line {number}: 'step' must be a whole number from 1, got {step!r}")
    if not isinstance(norms, list) or not norms:
        raise AnatomyError(f"{path}: line {number}: 'norms' must be a list of one number per block, got {norms!r}")
    for norm in norms:
        if norm is not None and (isinstance(norm, bool) or not isinstance(norm, (int, float))):
            raise AnatomyError(f"{path}: line {number}: 'norms' must hold numbers or null, got {norm!r}")
    return step, [math.nan if norm is None else float(norm) for norm in norms]


def read_grad_norms(path: Path, run_id: str) -> list[dict[str, Any]]:
    """Rows (run_id, step, layer, norm) of a run's grad_norms.jsonl, by step then layer; none if
    the run has no such file. The trainer writes every line whole with its newline, so a last
    line without one that does not parse is being written right now: it is left out."""
    path = Path(path)
    if not path.exists():
        return []
    text = read_small_file(path, "the gradient norms anatomy train logs")  # a capped read, as for metrics.jsonl
    lines = text.splitlines()
    if lines and not text.endswith("\n"):
        try:
            json.loads(lines[-1])
        except json.JSONDecodeError:
            lines.pop()  # half-written by a run still training
    by_step: dict[int, list[float]] = {}
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        step, norms = _parsed_line(path, number, line)
        n_blocks = len(next(iter(by_step.values()), norms))
        if len(norms) != n_blocks:
            raise AnatomyError(f"{path}: line {number} has {len(norms)} norms, the lines before it {n_blocks}")
        by_step[step] = norms  # a step written twice: the later line wins, as in read_metrics
    return [
        {"run_id": run_id, "step": step, "layer": layer, "norm": norm}
        for step in sorted(by_step)
        for layer, norm in enumerate(by_step[step])
    ]
