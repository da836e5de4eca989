"""A run's weights alone, in float16 safetensors: small enough to ship with the repository.

A checkpoint (`best.pt`, `last.pt`) also holds the optimizer's state, the RNG and the metrics,
so that training can resume; a float32 model plus AdamW's two moments is about four times the
weights. To generate, only the weights, the model config and the vocabulary are needed. This
module writes those as `best.safetensors` / `last.safetensors` (float16 halves them again) and
reads them back upcast to float32, so `anatomy generate` works on shipped reference runs whose
checkpoints were never committed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, safe_open, save

from anatomy.files.atomic import write_bytes_if_changed
from anatomy.files.run_folder import WEIGHTS_SUFFIX as SUFFIX  # noqa: F401 (`anatomy reference` uses it)
from anatomy.errors import AnatomyError


def save_weights(saved: dict[str, Any], path: Path) -> bool:
    """Write a loaded checkpoint's model weights as float16, with its model config and vocabulary.
    Equal weights give equal bytes, and a file that already holds them is left as it is (shipped
    weights must not churn in git); returns whether the file was written."""
    tensors = {name: tensor.detach().to(torch.float16).contiguous() for name, tensor in saved["model"].items()}
    metadata = {
        "model_config": json.dumps(saved["config"]["model"]),
        "vocab": json.dumps(saved["vocab"], ensure_ascii=False),
    }
    return write_bytes_if_changed(path, canonical_header(save(tensors, metadata=metadata)))


def canonical_header(data: bytes) -> bytes:
    """The safetensors bytes with their JSON header's keys sorted. safetensors writes the metadata
    in an order that changes from one process to the next; sorted, the same tensors and metadata
    always give the same file. The tensors' offsets count from the end of the header, so they
    stand as they are; the header is padded with spaces to a multiple of 8, as safetensors does."""
    size = int.from_bytes(data[:8], "little")
    header = json.loads(data[8 : 8 + size])
    text = json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    text += b" " * (-len(text) % 8)
    return len(text).to_bytes(8, "little") + text + data[8 + size :]


def load_weights(path: Path) -> tuple[dict[str, torch.Tensor], dict[str, Any], list[str]]:
    """(float32 state dict, model config dict, vocabulary) from a file save_weights wrote."""
    try:
        with safe_open(str(path), framework="pt") as handle:
            metadata = handle.metadata() or {}
        state = load_file(str(path))
        config, vocab = json.loads(metadata["model_config"]), json.loads(metadata["vocab"])
    except (SafetensorError, OSError, KeyError, json.JSONDecodeError) as err:
        raise AnatomyError(f"{path}: not a weights file of this project ({type(err).__name__}: {err})") from None
    return {name: tensor.to(torch.float32) for name, tensor in state.items()}, config, vocab
