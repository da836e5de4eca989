"""The token files of a corpus (vocab.json, train.npy, val.npy, split.json) are written as one set:
a full disk is one line and leaves the old set whole, and a kill while they go into place leaves no
split.json beside a mix of two corpora (issue #37, item 9)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import numpy as np
import pytest

from anatomy.cli import main
from anatomy.data import tokenizer
from anatomy.errors import AnatomyError

# Two corpora of the same length and the same characters: only the digest tells their tokens apart
ONE = "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。\n" * 12
OTHER = "夜来风雨声，花落知多少。春眠不觉晓，处处闻啼鸟。\n" * 12
# and one with a vocabulary of its own (another vocab.json)
THIRD = "床前明月光，疑是地上霜。举头望明月，低头思故乡。\n" * 12


def tokenized(tmp_path: Path, text: str) -> Path:
    corpus = tmp_path / "corpus.txt"
    corpus.write_text(text, encoding="utf-8")
    assert main(["tokenize", str(corpus), "--out", str(tmp_path), "--ctx-len", "8"]) == 0
    return corpus


def files_of(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(folder.iterdir()) if path.name != "corpus.txt"}


def short_write(file, array, allow_pickle=False):
    """What np.save does on a full disk: writes part, then numpy's own OSError (no errno)."""
    file.write(b"\x93NUMPY half")
    raise OSError("17961 requested and 12224 written")


def no_space(file, array, allow_pickle=False):
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("save", [short_write, no_space], ids=["numpy-short-write", "enospc"])
def test_a_full_disk_while_tokenizing_is_one_line_and_keeps_the_old_set(tmp_path, monkeypatch, capsys, save):
    corpus = tokenized(tmp_path, ONE)
    before = files_of(tmp_path)
    capsys.readouterr()
    corpus.write_text(THIRD, encoding="utf-8")
    monkeypatch.setattr(tokenizer.np, "save", save)
    assert main(["tokenize", str(corpus), "--out", str(tmp_path), "--ctx-len", "8"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"error: {tmp_path / 'train.npy'}: cannot write: ")
    assert "no space left on device" in err and err.rstrip().endswith("free some space and run the command again")
    assert files_of(tmp_path) == before  # nothing half-written, no temporary file, the old set whole


def test_a_kill_while_the_set_goes_into_place_leaves_no_split_json(tmp_path, monkeypatch):
    """Killed after vocab.json went into place, the old tokenize left the new vocabulary beside the
    old tokens and split.json: another corpus's tokens, which train accepted (the sizes agree)."""
    corpus = tokenized(tmp_path, ONE)
    corpus.write_text(OTHER, encoding="utf-8")
    real_replace = os.replace

    def killed_after_vocab(source, target):
        if Path(target).name == tokenizer.TRAIN_FILE:
            raise KeyboardInterrupt  # SIGINT between two renames; SIGKILL leaves the same files
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", killed_after_vocab)
    with pytest.raises(KeyboardInterrupt):
        tokenizer.tokenize_corpus(corpus, tmp_path, ctx_len=8)
    monkeypatch.undo()
    assert not (tmp_path / tokenizer.SPLIT_FILE).exists()
    with pytest.raises(AnatomyError, match="split.json: no such file"):
        tokenizer.load_tokenized(tmp_path)
    assert not list(tmp_path.glob(".*.tmp"))
    tokenizer.tokenize_corpus(corpus, tmp_path, ctx_len=8)  # tokenizing again makes it whole
    _vocab, train, _val = tokenizer.load_tokenized(tmp_path)
    np.testing.assert_array_equal(train, tokenizer.CharTokenizer.from_text(OTHER).encode(OTHER)[: len(train)])


def test_min_corpus_length_answers_an_absurd_ctx_len_at_once():
    """Counting up one character at a time took 80 s for ctx_len=10,000,000."""
    for window in (1, 2, 5, 9, 10, 11, 129, 1000):
        n = tokenizer.min_corpus_length(window)
        assert min(tokenizer.split_sizes(n)) >= window > min(tokenizer.split_sizes(n - 1)), window
    assert tokenizer.min_corpus_length(10_000_001) == 100_000_001
