"""The Hugging Face export: transformers loads it as a LlamaForCausalLM that gives our logits, our
greedy text and our token ids; a planted RoPE pairing bug is caught; non-LLaMA runs are refused."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, GenerationConfig

from anatomy.generation import export
from anatomy.cli import main
from anatomy.config import preset
from anatomy.data.corpus import extract_corpus
from anatomy.errors import AnatomyError
from anatomy.generation.export import (
    CONFIG_FILE,
    MARK_FILE,
    UNK_TOKEN,
    WEIGHTS_FILE,
    build_tokenizer,
    export_run,
    llama_differences,
    tokenizer_config,
)
from anatomy.generation.generate import load_model, sample
from anatomy.files.run_folder import load_checkpoint
from anatomy.training.trainer import train
from tiny_runs import FAST
from run_folders import LLAMA_PARTS

REPO = Path(__file__).resolve().parent.parent
TOLERANCE = 1e-5  # float32 logits, ours against transformers'
GREEDY_CHARS = 64
PREFIX = "## "
# Our generation jumps its window forward once the text outgrows ctx_len (anatomy/generation/generate.py);
# transformers keeps the whole text. Both agree while prefix + generated text fits in ctx_len.
CTX_LEN = 80
LLAMA = {k: v for k, v in LLAMA_PARTS.items() if k != "n_kv_head"}  # heads vary here
KV_HEADS = {"mha": 4, "gqa": 2, "mqa": 1}  # of 4 query heads


@pytest.fixture(scope="module")
def llama_runs(tiny_data, tmp_path_factory):
    """Tiny llamas trained a few tens of steps, with plain, grouped and single key/value heads."""
    root = tmp_path_factory.mktemp("tiny_llamas")
    for name, kv_heads in KV_HEADS.items():
        model = {**LLAMA, "n_kv_head": kv_heads, "ctx_len": CTX_LEN}
        train(tiny_data, root / name, "debug", model, {**FAST, "steps": 60, "lr": 3e-3})
    return {name: root / name for name in KV_HEADS}


@pytest.fixture(scope="module")
def exports(llama_runs, tmp_path_factory):
    root = tmp_path_factory.mktemp("hf_exports")
    for name, run in llama_runs.items():
        export_run(run, root / name)
    return {name: root / name for name in KV_HEADS}


def load_hf(folder: Path):
    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


def max_logit_difference(run: Path, folder: Path) -> float:
    """Largest |ours - transformers'| over the logits of random token windows of full length."""
    ours, _ = load_model(run)
    theirs = load_hf(folder)
    ids = torch.randint(0, ours.cfg.vocab_size, (3, ours.cfg.ctx_len), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return (ours(ids)[0] - theirs(ids).logits).abs().max().item()


# ---------------------------------------------------------------------------------------------
# The files
# ---------------------------------------------------------------------------------------------


def test_config_holds_the_llama_fields_transformers_reads(llama_runs, exports):
    cfg, _ = load_model(llama_runs["gqa"])
    cfg = cfg.cfg
    written = json.loads((exports["gqa"] / "config.json").read_text())
    assert written["architectures"] == ["LlamaForCausalLM"]
    expected = {
        "vocab_size": cfg.vocab_size,
        "hidden_size": 32,
        "intermediate_size": 96,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 8,
        "max_position_embeddings": CTX_LEN,
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "attention_bias": False,
        "mlp_bias": False,
        # no special token ids: LlamaConfig's defaults, 1 and 2, would be characters of the vocabulary
        "bos_token_id": None,
        "eos_token_id": None,
        "pad_token_id": None,
    }
    loaded = AutoConfig.from_pretrained(exports["gqa"])
    assert {key: getattr(loaded, key) for key in expected} == expected
    assert written["rope_theta"] == 10000.0 and loaded.rope_parameters["rope_theta"] == 10000.0
    generation = GenerationConfig.from_pretrained(exports["gqa"])
    assert (generation.do_sample, generation.temperature, generation.top_k) == (True, 0.8, 0)


def test_every_weight_lands_where_transformers_expects_it(exports):
    """A weight under a wrong name would be left at random initialisation by transformers, quietly."""
    for folder in exports.values():
        _, info = AutoModelForCausalLM.from_pretrained(folder, output_loading_info=True)
        assert not any(info.values()), info  # missing, unexpected, mismatched keys, errors


# ---------------------------------------------------------------------------------------------
# Parity
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(KV_HEADS))
def test_logits_match_ours(llama_runs, exports, name):
    assert max_logit_difference(llama_runs[name], exports[name]) < TOLERANCE


@pytest.mark.parametrize("name", list(KV_HEADS))
def test_greedy_generation_gives_our_text(llama_runs, exports, name):
    assert len(PREFIX) + GREEDY_CHARS - 1 <= CTX_LEN  # the last character is predicted from the whole text
    model, tokenizer = load_model(llama_runs[name])
    ours = sample(model, tokenizer, chars=GREEDY_CHARS, temperature=0, prefix=PREFIX)
    hf_tokenizer = AutoTokenizer.from_pretrained(exports[name])
    inputs = hf_tokenizer(PREFIX, return_tensors="pt")
    output = load_hf(exports[name]).generate(**inputs, max_new_tokens=GREEDY_CHARS, do_sample=False)
    theirs = hf_tokenizer.decode(output[0])
    assert theirs == ours and len(ours) == len(PREFIX) + GREEDY_CHARS
    assert len(set(ours[len(PREFIX) :])) > 1  # a text, not one character repeated


def swap_k_halves(folder: Path, head_dim: int) -> None:
    """Plant the classic conversion bug: within every key head, the two halves that RoPE pairs
    (dimension i with i + head_dim/2) are swapped, as a wrong permutation would leave them."""
    path = folder / "model.safetensors"
    weights = load_file(path)
    for name, tensor in weights.items():
        if name.endswith("k_proj.weight"):
            heads = tensor.view(-1, 2, head_dim // 2, tensor.shape[1])
            weights[name] = heads.flip(1).reshape(tensor.shape).contiguous()
    save_file(weights, path, metadata={"format": "pt"})


def test_a_planted_pairing_bug_fails_the_parity_test(llama_runs, exports, tmp_path):
    broken = tmp_path / "broken"
    shutil.copytree(exports["gqa"], broken)
    swap_k_halves(broken, head_dim=8)
    assert load_file(broken / "model.safetensors").keys() == load_file(exports["gqa"] / "model.safetensors").keys()
    assert max_logit_difference(llama_runs["gqa"], broken) > 100 * TOLERANCE


# ---------------------------------------------------------------------------------------------
# The tokenizer
# ---------------------------------------------------------------------------------------------


def test_shipped_run_exports_and_its_tokenizer_round_trips_the_default_corpus(tmp_path, capsys):
    """The shipped reference run has float16 weights only (no .pt): enough to export."""
    out = tmp_path / "hf"
    assert main(["export", str(REPO / "results/reference/runs/llama/seed42"), str(out)]) == 0
    assert "LlamaForCausalLM: 4 layers, hidden 128" in capsys.readouterr().out
    _, ours = load_model(REPO / "results/reference/runs/llama/seed42")
    text, _ = extract_corpus(REPO / "data/posts")
    sample_text = text[:20_000]  # headings, blank lines, poems, prose
    tokenizer = AutoTokenizer.from_pretrained(out)
    ids = tokenizer(sample_text)["input_ids"]
    assert ids == ours.encode(sample_text)
    assert tokenizer.decode(ids) == sample_text


def tokenizer_folder(chars: list[str], folder: Path) -> Path:
    """The two tokenizer files the export writes, for a vocabulary of our choosing."""
    folder.mkdir()
    build_tokenizer(chars).save(str(folder / "tokenizer.json"))
    (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config()))
    return folder


def test_one_id_per_character_spaces_and_markup_included(tmp_path):
    # "<unk>" as text, a decomposed é, a no-break space, characters beyond U+FFFF
    text = "  <unk> a\n\n\tb  é e\u0301\u00a0,😀𠀀"
    chars = sorted(set(text))
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder(chars, tmp_path / "tok"))
    ids = tokenizer(text)["input_ids"]
    assert ids == [chars.index(char) for char in text]
    assert tokenizer.decode(ids) == text


def test_a_character_outside_the_vocabulary_becomes_unk_one_past_the_characters(tmp_path):
    chars = sorted("ab ")
    tokenizer = AutoTokenizer.from_pretrained(tokenizer_folder(chars, tmp_path / "tok"))
    assert tokenizer.unk_token == UNK_TOKEN and tokenizer.unk_token_id == len(chars)
    assert tokenizer("a☃ b")["input_ids"] == [1, 3, 0, 2]  # ' ' is 0, 'a' 1, 'b' 2
    assert tokenizer.decode([1, 3, 2]) == "a<unk>b"


# ---------------------------------------------------------------------------------------------
# Refusals and the command line
# ---------------------------------------------------------------------------------------------


def test_a_vanilla_run_is_refused_with_every_difference(tiny_runs, tmp_path, capsys):
    out = tmp_path / "hf"
    assert main(["export", str(tiny_runs["vanilla"]), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1
    for difference in (
        "norm_type 'layernorm' (LLaMA: 'rmsnorm')",
        "norm_pos 'post' (LLaMA: 'pre')",
        "pos_type 'learned' (LLaMA: 'rope')",
        "ffn_type 'gelu' (LLaMA: 'swiglu')",
    ):
        assert difference in err
    assert "differs in 4 field(s)" in err
    assert not out.exists()  # refused before anything is written


def test_qk_norm_and_a_broken_rope_are_not_llama():
    assert llama_differences(preset("llama", vocab_size=10)) == []
    assert llama_differences(preset("llama", vocab_size=10, n_kv_head=1)) == []  # MQA is still a LLaMA
    broken = preset("llama", vocab_size=10, qk_norm=True, rope_break="k_adjacent")
    assert llama_differences(broken) == ["qk_norm True (LLaMA: False)", "rope_break 'k_adjacent' (LLaMA: 'none')"]


def test_checkpoint_option_and_bad_output_folders(llama_runs, tmp_path, capsys):
    run = shutil.copytree(llama_runs["mqa"], tmp_path / "run")
    best = load_checkpoint(run / "best.pt")  # a tiny run's best is often its last: make them differ
    best["model"]["lm_head.weight"] *= 2
    torch.save(best, run / "best.pt")
    assert main(["export", str(run), str(tmp_path / "best"), "--checkpoint", "best"]) == 0
    exported = load_file(tmp_path / "best" / "model.safetensors")["lm_head.weight"]
    assert torch.equal(exported, best["model"]["lm_head.weight"])
    assert main(["export", str(run), str(tmp_path / "last")]) == 0  # last by default
    exported = load_file(tmp_path / "last" / "model.safetensors")["lm_head.weight"]
    assert torch.equal(exported, load_checkpoint(run / "last.pt")["model"]["lm_head.weight"])
    (tmp_path / "a_file").write_text("")
    assert main(["export", str(run), str(tmp_path / "a_file")]) == 2
    assert "a_file: exists and is not a folder" in capsys.readouterr().err
    with pytest.raises(AnatomyError, match="is the run folder itself"):
        export_run(run, run)


def test_an_export_over_an_old_one_replaces_it_whole(llama_runs, tmp_path, monkeypatch):
    """Killed half way over an old export, an export leaves the old one as it was, never the old
    config beside the new weights; the next one replaces it whole and removes what it left."""
    out = tmp_path / "hf"
    export_run(llama_runs["mha"], out)
    old = {path.name: path.read_bytes() for path in out.iterdir()}
    real_write = export.write_file

    def killed_after_the_weights(path, content):
        real_write(path, content)
        if path.name == WEIGHTS_FILE:
            raise KeyboardInterrupt

    monkeypatch.setattr(export, "write_file", killed_after_the_weights)
    with pytest.raises(KeyboardInterrupt):
        export_run(llama_runs["mqa"], out)
    assert {path.name: path.read_bytes() for path in out.iterdir()} == old
    (tmp_path / ".hf.x1y2.tmp").mkdir()  # an export killed by SIGKILL left its temporary folder
    monkeypatch.undo()
    export_run(llama_runs["mqa"], out)
    assert json.loads((out / CONFIG_FILE).read_text())["num_key_value_heads"] == KV_HEADS["mqa"]
    assert json.loads((out / MARK_FILE).read_text())["run"] == str(llama_runs["mqa"])
    assert sorted(path.name for path in tmp_path.iterdir()) == ["hf"]


def test_another_models_folder_is_refused_and_left_as_it_was(llama_runs, tmp_path, capsys):
    """Issue 45: an export into another model's folder replaced its config.json and left its
    pytorch_model.bin beside our weights."""
    other = tmp_path / "other_model"
    other.mkdir()
    (other / CONFIG_FILE).write_text('{"model_type": "gpt2"}')
    (other / "pytorch_model.bin").write_bytes(b"their weights")
    assert main(["export", str(llama_runs["mha"]), str(other)]) == 2
    assert capsys.readouterr().err == (
        f"error: {other}: not empty and not an earlier export of this project (it holds pytorch_model.bin), "
        "so it is not replaced; export into a new or empty folder\n"
    )
    (other / "pytorch_model.bin").unlink()  # only the export's names, but no mark: not ours either
    with pytest.raises(AnatomyError, match=rf"other_model: not empty .* \(it has no {MARK_FILE}\)"):
        export_run(llama_runs["mha"], other)
    assert sorted(path.name for path in other.iterdir()) == [CONFIG_FILE]
    assert (other / CONFIG_FILE).read_text() == '{"model_type": "gpt2"}'
    export_run(llama_runs["mha"], tmp_path / "empty")  # a new folder, and an empty one, are fine
    (tmp_path / "made_empty").mkdir()
    export_run(llama_runs["mha"], tmp_path / "made_empty")


def test_a_full_disk_is_one_line_naming_the_file(llama_runs, tmp_path, monkeypatch, capsys):
    """Issue #28, item 5: `OSError: [Errno 28]` and a traceback, as one line naming the weights."""
    import errno
    import os

    out = tmp_path / "hf"
    real_write = Path.write_bytes

    def write_bytes(self, data):
        if self.name == WEIGHTS_FILE:  # the weights, in the export's temporary folder
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(self, data)

    monkeypatch.setattr(Path, "write_bytes", write_bytes)
    assert main(["export", str(llama_runs["mha"]), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {out / WEIGHTS_FILE}: cannot write: no space left on device; free some space")
    assert err.count("\n") == 1
    assert not out.exists()  # no half export for transformers to load
    assert not list(tmp_path.glob(".*.tmp"))


# ---------------------------------------------------------------------------------------------
# The export's page (docs/export.md)
# ---------------------------------------------------------------------------------------------


def readme_export_section() -> str:
    """docs/export.md, the export's page, up to its first sub-heading."""
    page = (REPO / "docs" / "export.md").read_text(encoding="utf-8")
    return re.split(r"\n#{2,3} ", page.split("# Export to Hugging Face", 1)[1], maxsplit=1)[0]


def test_the_readme_lines_load_the_export_and_generate(exports, capsys):
    [code] = re.findall(r"```python\n(.*?)```", readme_export_section(), re.S)
    assert len(code.strip().splitlines()) == 3
    exec(code.replace("/tmp/hf", str(exports["gqa"])), {})
    assert capsys.readouterr().out.startswith(PREFIX)


def test_the_readme_shows_the_default_llama_as_exported(tmp_path):
    export_run(REPO / "results/reference/runs/llama/seed42", tmp_path / "hf")
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", readme_export_section(), re.M)
    assert len(rows) >= 12
    for field, ours in rows:
        assert ours.strip() == json.dumps(config[field]), field
