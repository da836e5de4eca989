"""Export a mini-LLaMA run to the Hugging Face format: `python -m anatomy export RUN_DIR OUT_DIR`.

The chapter claims that after the five swaps the model is a LLaMA in structure and differs only
in scale. This command turns the claim into a folder that `transformers` loads as a
`LlamaForCausalLM`, with the character vocabulary as a real tokenizer:

    config.json              the LlamaForCausalLM fields, read from the model
    model.safetensors        the weights under Hugging Face's names, float32
    tokenizer.json           one token per character, built with the `tokenizers` library
    tokenizer_config.json    how `AutoTokenizer` should wrap it
    generation_config.json   sampling at our temperature
    anatomy_export.json      the run it was made from: the mark of an export the next may replace

`tests/test_export.py` proves it: the same logits, the same greedy text, the same token ids.
A run with any 2017 part (or QK-norm, MLA, a mixture of experts, or a broken RoPE) is refused:
LlamaForCausalLM has no place for it. Needs the `hf` extra (`pip install -e '.[hf]'`) for the `tokenizers` library.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import torch
from safetensors.torch import save

from anatomy.files.atomic import (
    atomic_folder,
    json_text,
    naming_a_full_disk,
    remove_stale_temporaries,
    writing_into,
)
from anatomy.config import ModelConfig
from anatomy.errors import AnatomyError
from anatomy.generation.generate import DEFAULT_TEMPERATURE, load_model
from anatomy.model import ROPE_THETA, MiniLM

# What a LLaMA is made of, as our config fields. Head counts are free: MHA, GQA and MQA are all
# LLaMAs (LLaMA 2 7B is MHA, LLaMA 3 GQA).
LLAMA_SHAPE = {
    "norm_type": "rmsnorm",
    "norm_pos": "pre",
    "pos_type": "rope",
    "ffn_type": "swiglu",
    "qk_norm": False,  # LLaMA has no norm on q and k (Qwen 3 and OLMo 2 do)
    "rope_break": "none",
    "attn_type": "mha",  # MLA's latent has no place in LlamaForCausalLM (nor has a mixture of experts, ffn_type)
}
# A character the vocabulary lacks becomes this token, one id past the characters. The model has
# no row for it (config.json's vocab_size counts characters only), so it cannot be fed to the model.
UNK_TOKEN = "<unk>"
WEIGHTS_FILE, CONFIG_FILE = "model.safetensors", "config.json"
# Which run made the export: also what marks a folder as an export of this project, which the
# next export may replace whole. Any other folder that holds files is refused.
MARK_FILE = "anatomy_export.json"


# ---------------------------------------------------------------------------------------------
# Is it a LLaMA?
# ---------------------------------------------------------------------------------------------


def llama_differences(cfg: ModelConfig) -> list[str]:
    """Every field in which this config is not LLaMA-shaped, e.g. "norm_type 'layernorm' (LLaMA: 'rmsnorm')"."""
    return [
        f"{name} {getattr(cfg, name)!r} (LLaMA: {want!r})"
        for name, want in LLAMA_SHAPE.items()
        if getattr(cfg, name) != want
    ]


def require_llama_shape(cfg: ModelConfig, source: str) -> None:
    differences = llama_differences(cfg)
    if differences:
        raise AnatomyError(
            f"{source}: not LLaMA-shaped, so it has no LlamaForCausalLM form; "
            f"it differs in {len(differences)} field(s): {', '.join(differences)}"
        )


# ---------------------------------------------------------------------------------------------
# config.json and the weights
# ---------------------------------------------------------------------------------------------


def hf_config(model: MiniLM) -> dict:
    """config.json for LlamaForCausalLM, each value read from the model that will be exported."""
    cfg, block = model.cfg, model.blocks[0]
    return {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.d_model,
        "intermediate_size": block.ffn.gate.out_features,
        "num_hidden_layers": cfg.n_layer,
        "num_attention_heads": cfg.n_head,
        "num_key_value_heads": cfg.n_kv_head,
        "head_dim": cfg.head_dim,
        # the longest text it was trained on; RoPE itself has no hard limit
        "max_position_embeddings": cfg.ctx_len,
        "rms_norm_eps": model.final_norm.eps,
        "rope_theta": ROPE_THETA,
        "hidden_act": "silu",  # SwiGLU's gate
        "attention_bias": False,
        "mlp_bias": False,
        "tie_word_embeddings": False,  # our lm_head is its own matrix
        # Characters only, no special tokens: LlamaConfig's defaults (1 and 2) would be characters.
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
        "dtype": "float32",
    }


def hf_weights(model: MiniLM) -> dict[str, torch.Tensor]:
    """Our state dict under Hugging Face's names. Both store a Linear as (out, in), so only the
    names change, and our stacked qkv_proj is cut into q_proj, k_proj and v_proj.

    No RoPE permutation is needed: our apply_rope pairs dimension i with i + head_dim/2, which
    is Hugging Face's rotate_half. Meta's original checkpoints pair 2i with 2i + 1, and their
    conversion must permute q and k rows: the classic accident (the chapter's pitfall 2).
    """
    cfg = model.cfg
    q_rows, kv_rows = cfg.n_head * cfg.head_dim, cfg.n_kv_head * cfg.head_dim
    weights = {"model.embed_tokens.weight": model.tok_emb.weight}
    for i, block in enumerate(model.blocks):
        layer = f"model.layers.{i}"
        q, k, v = block.attn.qkv_proj.weight.split([q_rows, kv_rows, kv_rows])
        weights.update(
            {
                f"{layer}.input_layernorm.weight": block.norm1.weight,
                f"{layer}.self_attn.q_proj.weight": q,
                f"{layer}.self_attn.k_proj.weight": k,
                f"{layer}.self_attn.v_proj.weight": v,
                f"{layer}.self_attn.o_proj.weight": block.attn.o_proj.weight,
                f"{layer}.post_attention_layernorm.weight": block.norm2.weight,
                f"{layer}.mlp.gate_proj.weight": block.ffn.gate.weight,
                f"{layer}.mlp.up_proj.weight": block.ffn.up.weight,
                f"{layer}.mlp.down_proj.weight": block.ffn.down.weight,
            }
        )
    weights["model.norm.weight"] = model.final_norm.weight
    weights["lm_head.weight"] = model.lm_head.weight
    # clone: safetensors refuses tensors that share memory, as the q, k, v slices do
    return {name: tensor.detach().to(torch.float32).clone() for name, tensor in weights.items()}


def generation_config() -> dict:
    """Sample as `anatomy generate` does: the full softmax at our temperature. transformers would
    otherwise keep only the 50 likeliest tokens (top_k 0 turns that off)."""
    return {
        "do_sample": True,
        "temperature": DEFAULT_TEMPERATURE,
        "top_k": 0,
        "top_p": 1.0,
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
    }


# ---------------------------------------------------------------------------------------------
# The tokenizer
# ---------------------------------------------------------------------------------------------


def build_tokenizer(chars: list[str]):
    """A `tokenizers.Tokenizer` that gives id i to the i-th character, and <unk> to any other."""
    try:
        from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    except ImportError:
        raise AnatomyError("export needs the tokenizers package: pip install -e '.[hf]'") from None
    vocab = {char: i for i, char in enumerate(chars)}
    vocab[UNK_TOKEN] = len(chars)
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token=UNK_TOKEN))
    # No normalizer: spaces, newlines and accents stay exactly as written.
    # Every character is its own piece ([\s\S]: any character, newlines included).
    tokenizer.pre_tokenizer = pre_tokenizers.Split(Regex(r"[\s\S]"), behavior="isolated")
    tokenizer.decoder = decoders.Fuse()  # join the pieces with nothing between them
    return tokenizer


def tokenizer_config() -> dict:
    return {
        # the generic wrapper around tokenizer.json; the name "llama" would pick LLaMA's own tokenizer
        "tokenizer_class": "PreTrainedTokenizerFast",
        "unk_token": UNK_TOKEN,
        # the text "<unk>" is five characters like any other, never the unknown token
        "split_special_tokens": True,
        # decode must not tidy spaces (" ," -> ","): they are characters of the text
        "clean_up_tokenization_spaces": False,
        "model_input_names": ["input_ids", "attention_mask"],  # no token_type_ids: LLaMA takes none
    }


# ---------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------


def check_out_dir(out_dir: Path, run_dir: Path) -> None:
    if out_dir.exists() and not out_dir.is_dir():
        raise AnatomyError(f"{out_dir}: exists and is not a folder (expected a folder for the export)")
    if out_dir.resolve() == run_dir.resolve():  # its config.json would overwrite the run's
        raise AnatomyError(f"{out_dir}: is the run folder itself; export into another folder")


def check_replaceable(out_dir: Path, names: list[str]) -> None:
    """The export replaces `out_dir` whole: only where it is missing, empty, or an earlier export
    of this project (its mark, and only the export's files: `names`). Another model's folder
    (a config.json beside a pytorch_model.bin) would lose its files, or keep some beside ours."""
    if not out_dir.is_dir():
        return
    present = sorted(os.listdir(out_dir))
    foreign = [name for name in present if name not in names]
    if foreign or (present and MARK_FILE not in present):
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        why = f"it holds {shown}" if foreign else f"it has no {MARK_FILE}"
        raise AnatomyError(
            f"{out_dir}: not empty and not an earlier export of this project ({why}), so it is not replaced; "
            "export into a new or empty folder"
        )


def export_run(run_dir: str | Path, out_dir: str | Path, checkpoint: str = "last") -> dict:
    """Write the Hugging Face folder for one run; returns what was written. Everything is built
    and checked in memory first, so a refused run writes nothing."""
    run_dir, out_dir = Path(run_dir), Path(out_dir)
    check_out_dir(out_dir, run_dir)
    model, tokenizer = load_model(run_dir, checkpoint)
    require_llama_shape(model.cfg, f"{run_dir} ({checkpoint})")
    files = {
        WEIGHTS_FILE: save(hf_weights(model), metadata={"format": "pt"}),  # transformers wants the format
        "tokenizer.json": build_tokenizer(tokenizer.chars).to_str(pretty=True),
        "tokenizer_config.json": tokenizer_config(),
        "generation_config.json": generation_config(),
        CONFIG_FILE: hf_config(model),
        MARK_FILE: {
            "made_by": "python -m anatomy export (llm-anatomy lab)",
            "run": str(run_dir),
            "checkpoint": checkpoint,
        },
    }
    write_export(out_dir, files)
    return {"config": files[CONFIG_FILE], "files": list(files), "params": model.num_params()}


def write_export(out_dir: Path, files: dict[str, bytes | str | dict]) -> None:
    """The export's files as one folder, which takes the place of `out_dir` whole once complete
    (atomic_folder): a reader sees the old export or the new one, never a mix, and an export
    killed half way leaves the old one as it was. Under the lock on the folder above, so that a
    temporary folder beside `out_dir` is a killed export's leftover."""
    with writing_into(out_dir.parent):
        remove_stale_temporaries(out_dir)
        check_replaceable(out_dir, list(files))
        with atomic_folder(out_dir) as tmp:
            for name, content in files.items():
                with naming_a_full_disk(out_dir / name):  # named as it will be, not as the temporary
                    write_file(tmp / name, content)


def write_file(path: Path, content: bytes | str | dict) -> None:
    """One file of the export, into the temporary folder (the folder is what goes in atomically)."""
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content + "\n", encoding="utf-8")
    else:
        path.write_text(json_text(content), encoding="utf-8")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", help="a run folder of a LLaMA-shaped model (a checkpoint, or shipped weights)")
    parser.add_argument("out_dir", help="folder for config.json, model.safetensors, the tokenizer files")
    parser.add_argument("--checkpoint", default="last", choices=["last", "best"], help="default: last")


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    written = export_run(args.run_dir, args.out_dir, args.checkpoint)
    config = written["config"]
    print(f"export: {args.run_dir} ({args.checkpoint}) -> {args.out_dir} in {time.perf_counter() - started:.1f} s")
    print(
        f"  LlamaForCausalLM: {config['num_hidden_layers']} layers, hidden {config['hidden_size']}, "
        f"{config['num_attention_heads']} heads, {config['num_key_value_heads']} KV heads, "
        f"vocabulary {config['vocab_size']:,}, {written['params']:,} parameters"
    )
    print(f"  files: {', '.join(written['files'])}")
    return 0
