"""anatomy.data.tokenizer: the character vocabulary, the 90/10 split and the token files."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from anatomy.cli import main
from anatomy.data.corpus import extract_corpus, write_corpus
from anatomy.errors import AnatomyError
from anatomy.data import tokenizer as tokenizer_module
from anatomy.data.text_files import read_text
from anatomy.data.tokenizer import (
    LARGE_CORPUS_CHARS,
    CharTokenizer,
    check_windows,
    corpus_digest,
    corpus_name,
    load_tokenized,
    min_corpus_length,
    split_sizes,
    text_digest,
    tokenize_corpus,
    tokenize_split,
)

REPO = Path(__file__).resolve().parents[1]
SAMPLE = "## 学而\n\n子曰：“学而时习之，不亦说乎？”\nAnd some ASCII, an emoji 🙂, a tab\t.\n"


def write_corpus_file(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def test_vocabulary_is_the_sorted_distinct_characters():
    tokenizer = CharTokenizer.from_text("cabbage")
    assert tokenizer.chars == ["a", "b", "c", "e", "g"]
    assert tokenizer.vocab_size == 5
    assert tokenizer.encode("bag") == [1, 0, 4]


def test_encode_decode_round_trip():
    tokenizer = CharTokenizer.from_text(SAMPLE)
    ids = tokenizer.encode(SAMPLE)
    assert len(ids) == len(SAMPLE)  # one character, one token, even outside the BMP
    assert tokenizer.decode(ids) == SAMPLE
    assert tokenizer.decode(np.asarray(ids, dtype=np.uint16)) == SAMPLE


def test_unknown_character_is_named_with_its_code_point():
    tokenizer = CharTokenizer.from_text("子曰学而")
    with pytest.raises(AnatomyError, match=r"'孟' \(U\+5B5F\) at position 2 is not in the vocabulary of 4"):
        tokenizer.encode("子曰孟")


def test_decode_rejects_ids_outside_the_vocabulary():
    with pytest.raises(AnatomyError, match="token id 3 is outside the vocabulary"):
        CharTokenizer.from_text("abc").decode([0, 3])


def test_constructor_rejects_unsorted_or_multi_character_entries():
    with pytest.raises(AnatomyError, match="sorted"):
        CharTokenizer(["b", "a"])
    with pytest.raises(AnatomyError, match="one character"):
        CharTokenizer(["a", "bc"])


def test_save_and_load_round_trip(tmp_path):
    tokenizer = CharTokenizer.from_text(SAMPLE)
    tokenizer.save(tmp_path / "vocab.json")
    loaded = CharTokenizer.load(tmp_path / "vocab.json")
    assert loaded.chars == tokenizer.chars
    assert loaded.encode(SAMPLE) == tokenizer.encode(SAMPLE)
    saved = json.loads((tmp_path / "vocab.json").read_text(encoding="utf-8"))
    assert saved["vocab_size"] == len(saved["chars"]) == len(set(SAMPLE))


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "no such file"),
        ("{not json", "not valid JSON"),
        ('["a", "b"]', "'chars' list"),
        ('{"vocab_size": 3, "chars": ["a", "b"]}', "'vocab_size' is 3 but 'chars' holds 2"),
        ('{"vocab_size": 2, "chars": ["b", "a"]}', "sorted order"),
    ],
    ids=["missing", "not json", "not an object", "size mismatch", "unsorted"],
)
def test_load_rejects_bad_vocabulary_files(tmp_path, content, words):
    path = tmp_path / "vocab.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(AnatomyError) as err:
        CharTokenizer.load(path)
    assert str(path) in str(err.value) and words in str(err.value)


def test_split_sizes_match_the_protocol():
    assert split_sizes(122_620) == (110_358, 12_262)
    assert split_sizes(10) == (9, 1)
    assert split_sizes(41) == (36, 5)


def test_min_corpus_length_is_the_shortest_that_fits():
    # window 5 (ctx_len 4): 41 -> 36 + 5 fits, 40 -> 36 + 4 does not.
    assert min_corpus_length(5) == 41
    assert min(split_sizes(41)) >= 5 > min(split_sizes(40))


def test_check_windows_names_the_file_and_the_lengths():
    check_windows(36, 5, ctx_len=4, source="c.txt")  # exactly one window in each split: fine
    with pytest.raises(AnatomyError) as err:
        check_windows(36, 4, ctx_len=4, source="c.txt")
    message = str(err.value)
    for words in ("c.txt", "ctx_len 4", "36 train + 4 val", "at least 5", "at least 41 characters"):
        assert words in message, (words, message)


def test_tokenize_writes_vocab_arrays_and_split(tmp_path):
    text = SAMPLE * 3
    corpus = write_corpus_file(tmp_path / "corpus.txt", text)
    split = tokenize_corpus(corpus, tmp_path / "data", ctx_len=8)
    n_train = int(0.9 * len(text))
    assert split == {
        "corpus": corpus.as_posix(),
        "characters": len(text),
        "train_tokens": n_train,
        "val_tokens": len(text) - n_train,
        "train_fraction": 0.9,
        "vocab_size": len(set(text)),
        "dtype": "uint16",
        "text_digest": text_digest(text),  # the text the tokens were made from
        "digest": corpus_digest(*load_tokenized(tmp_path / "data")),  # the set's own
    }
    assert json.loads((tmp_path / "data" / "split.json").read_text(encoding="utf-8")) == split

    tokenizer, train, val = load_tokenized(tmp_path / "data")
    assert train.dtype == val.dtype == np.uint16
    assert (len(train), len(val)) == (n_train, len(text) - n_train)
    assert tokenizer.decode(train) == text[:n_train]  # the first 90%...
    assert tokenizer.decode(val) == text[n_train:]  # ...and the last 10%, in order


def test_a_vocabulary_past_65536_characters_is_stored_as_int32(tmp_path):
    # CJK Unified Ideographs plus Extension A and B: about 70,000 distinct characters.
    chars = [chr(c) for r in ((0x3400, 0x4DC0), (0x4E00, 0xA000), (0x20000, 0x2A6E0)) for c in range(*r)]
    text = "".join(chars)
    corpus = write_corpus_file(tmp_path / "corpus.txt", text)
    split = tokenize_corpus(corpus, tmp_path / "data", ctx_len=8)
    assert split["vocab_size"] == len(chars) > 2**16 and split["dtype"] == "int32"
    tokenizer, train, val = load_tokenized(tmp_path / "data")
    assert train.dtype == np.int32 and int(val.max()) == len(chars) - 1
    assert tokenizer.decode(np.concatenate([train, val])) == text


def test_too_short_corpus_is_an_error_and_writes_nothing(tmp_path):
    corpus = write_corpus_file(tmp_path / "corpus.txt", "abcdefghij" * 4)  # 40 characters
    with pytest.raises(AnatomyError, match=r"corpus\.txt: corpus too short for ctx_len 4: 40 characters"):
        tokenize_corpus(corpus, tmp_path / "data", ctx_len=4)
    assert not (tmp_path / "data").exists()
    corpus = write_corpus_file(tmp_path / "corpus.txt", "abcdefghij" * 4 + "k")  # 41: just enough
    assert tokenize_corpus(corpus, tmp_path / "data", ctx_len=4)["val_tokens"] == 5


def test_tokenize_rejects_missing_and_non_utf8_corpus(tmp_path):
    with pytest.raises(AnatomyError, match="nowhere.txt: no such file"):
        tokenize_corpus(tmp_path / "nowhere.txt", tmp_path / "data")
    bad = tmp_path / "latin1.txt"
    bad.write_bytes("café".encode("latin-1") * 100)
    with pytest.raises(AnatomyError, match=r"latin1\.txt: not UTF-8 text: byte 0xe9 at byte offset 3"):
        tokenize_corpus(bad, tmp_path / "data", ctx_len=4)


def test_load_tokenized_catches_missing_and_mismatched_files(tmp_path):
    with pytest.raises(AnatomyError, match="split.json: no such file"):
        load_tokenized(tmp_path / "data")
    tokenize_corpus(write_corpus_file(tmp_path / "corpus.txt", SAMPLE * 3), tmp_path / "data", ctx_len=8)

    np.save(tmp_path / "data" / "val.npy", np.zeros(3, dtype=np.uint16))
    with pytest.raises(AnatomyError, match="split.json: records vocab/train/val"):
        load_tokenized(tmp_path / "data")

    np.save(tmp_path / "data" / "val.npy", np.full(3, 60_000, dtype=np.uint16))
    with pytest.raises(AnatomyError, match="val.npy: token id 60000 is outside the vocabulary"):
        load_tokenized(tmp_path / "data")

    (tmp_path / "data" / "train.npy").unlink()
    with pytest.raises(AnatomyError, match="train.npy: no such file"):
        load_tokenized(tmp_path / "data")


def test_cli_tokenize_reports_and_returns_zero_or_two(tmp_path, capsys):
    corpus = write_corpus_file(tmp_path / "corpus.txt", SAMPLE * 3)
    assert main(["tokenize", str(corpus), "--out", str(tmp_path), "--ctx-len", "8"]) == 0
    out = capsys.readouterr().out
    n = len(SAMPLE) * 3
    assert f"vocabulary   {len(set(SAMPLE))} characters (uint16)" in out
    assert f"train        {int(0.9 * n)} tokens" in out and f"val          {n - int(0.9 * n)} tokens" in out

    assert main(["tokenize", str(corpus), "--out", str(tmp_path / "short")]) == 2  # default ctx_len 128
    assert "corpus too short for ctx_len 128" in capsys.readouterr().err
    assert main(["tokenize", str(corpus), "--out", str(tmp_path), "--ctx-len", "0"]) == 2


def test_default_corpus_tokenizes_into_the_protocol_split(tmp_path, capsys):
    assert main(["corpus", str(REPO / "data" / "posts"), "--out", str(tmp_path)]) == 0
    assert main(["tokenize", str(tmp_path / "corpus.txt"), "--out", str(tmp_path)]) == 0
    text = (tmp_path / "corpus.txt").read_text(encoding="utf-8")
    tokenizer, train, val = load_tokenized(tmp_path)
    n = len(text)
    assert 110_000 <= n <= 125_000
    assert (len(train), len(val)) == (int(0.9 * n), n - int(0.9 * n))
    assert tokenizer.vocab_size == len(set(text)) and train.dtype == np.uint16
    assert tokenizer.decode(val[:4]) == text[len(train) : len(train) + 4]
    assert "## " in tokenizer.decode(train[:10])  # the sampling prefix exists in the vocabulary


def test_extracted_text_round_trips_through_tokenizer(tmp_path):
    (tmp_path / "posts").mkdir()
    (tmp_path / "posts" / "a.md").write_text("---\ntitle: a\n---\n孔子曰\r\n", encoding="utf-8")
    text, stats = extract_corpus(tmp_path / "posts")
    write_corpus(tmp_path, text, stats)
    tokenizer = CharTokenizer.from_text(text)
    assert tokenizer.decode(tokenizer.encode(text)) == "孔子曰"


# --- a corpus that comes split already (workflow/corpora.yaml) ----------------------------------


def write_xz(path: Path, text: str) -> Path:
    import lzma

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(lzma.compress(text.encode("utf-8")))
    return path


def test_a_split_corpus_trains_on_a_prefix_under_the_whole_vocabulary(tmp_path):
    train_text = "春眠不觉晓，处处闻啼鸟。" * 20 + "夜来风雨声，花落知多少。"  # the tail's characters
    train = write_xz(tmp_path / "train.txt.xz", train_text)
    val = write_corpus_file(tmp_path / "val.txt", "床前明月光，疑是地上霜。" * 3)
    split = tokenize_split(train, val, tmp_path / "small", train_chars=60, name="small", ctx_len=8)
    tokenizer, train_ids, val_ids = load_tokenized(tmp_path / "small")
    assert tokenizer.decode(train_ids) == train_text[:60]
    assert tokenizer.decode(val_ids) == "床前明月光，疑是地上霜。" * 3
    # characters only past the prefix, and only in val, are still in the one vocabulary
    assert {"夜", "花", "床", "霜"} <= set(tokenizer.chars)
    assert (split["name"], split["train_tokens"], split["val_tokens"]) == ("small", 60, 36)
    whole = tokenize_split(train, val, tmp_path / "whole", ctx_len=8)
    assert whole["vocab_size"] == split["vocab_size"] and whole["train_tokens"] == len(train_text)
    assert corpus_name(tmp_path / "small") == "small"


def test_the_digest_tells_corpora_of_equal_size_apart(tmp_path):
    val = write_corpus_file(tmp_path / "val.txt", "床前明月光，疑是地上霜。" * 3)
    one = write_corpus_file(tmp_path / "one.txt", "春眠不觉晓，处处闻啼鸟。" * 5)
    other = write_corpus_file(tmp_path / "other.txt", "春眠不觉晓，处处闻啼鸟。" * 4 + "处处闻啼鸟，春眠不觉晓。")
    digests = []
    for source in (one, other, one):
        out = tmp_path / f"tok{len(digests)}"
        tokenize_split(source, val, out, ctx_len=8)
        digests.append(corpus_digest(*load_tokenized(out)))
    assert digests[0] == digests[2] != digests[1]


def test_a_split_corpus_checks_its_size_and_files(tmp_path, capsys):
    train = write_corpus_file(tmp_path / "train.txt", "春眠不觉晓，处处闻啼鸟。" * 5)
    val = write_corpus_file(tmp_path / "val.txt", "床前明月光，疑是地上霜。" * 3)
    with pytest.raises(AnatomyError, match=r"--train-chars 1,000 is not valid: .*train.txt holds 60 characters"):
        tokenize_split(train, val, tmp_path / "out", train_chars=1000, ctx_len=8)
    (tmp_path / "broken.txt.xz").write_bytes(b"not xz at all")
    with pytest.raises(AnatomyError, match=r"broken.txt.xz: not a readable xz file"):
        tokenize_split(tmp_path / "broken.txt.xz", val, tmp_path / "out", ctx_len=8)
    assert not (tmp_path / "out" / "split.json").exists()
    assert main(["tokenize", str(train), "--train-chars", "10", "--out", str(tmp_path / "out")]) == 2
    assert "--train-chars and --name go with --val" in capsys.readouterr().err


def test_an_xz_bomb_stops_at_the_text_limit_naming_the_file(tmp_path):
    """Issue 45: 14.7 KB of xz held 100 M characters, all decompressed without a word."""
    bomb = write_xz(tmp_path / "bomb.txt.xz", "a" * 3_000_000)  # 3 MB of text in 568 bytes of xz
    with pytest.raises(AnatomyError) as caught:
        read_text(bomb, limit=1024**2)
    assert str(caught.value) == (
        f"{bomb}: its 568 bytes of xz hold more than 1.0 MiB of text, the most a text file may hold, "
        "so it is not decompressed further"
    )
    assert read_text(bomb, limit=3_000_000) == "a" * 3_000_000  # at the limit: read


def test_xz_streams_one_after_another_and_a_cut_short_file(tmp_path):
    import lzma

    path = tmp_path / "two.txt.xz"
    path.write_bytes(lzma.compress("春眠".encode()) + lzma.compress("不觉晓".encode()))
    assert read_text(path) == "春眠不觉晓"
    path.write_bytes(lzma.compress(("春眠不觉晓" * 100).encode())[:-20])
    with pytest.raises(AnatomyError, match=r"two.txt.xz: not a readable xz file"):
        read_text(path)


def test_a_corpus_past_the_large_limit_is_tokenized_only_when_asked(tmp_path, monkeypatch, capsys):
    """Tokenizing takes some 20 bytes a character: 200 M characters from two xz bombs took 2.1 GB."""
    monkeypatch.setattr(tokenizer_module, "LARGE_CORPUS_CHARS", 100)
    train = write_xz(tmp_path / "train.txt.xz", "春眠不觉晓，处处闻啼鸟。" * 10)
    val = write_xz(tmp_path / "val.txt.xz", "床前明月光，疑是地上霜。" * 3)
    out = tmp_path / "out"
    assert main(["tokenize", str(train), "--val", str(val), "--out", str(out), "--ctx-len", "8"]) == 2
    assert capsys.readouterr().err == (
        f"error: {train} and {val}: 156 characters to tokenize, more than the 100 tokenized without asking "
        "(about 0.0 GB of memory); give --large to tokenize them all\n"
    )
    assert not out.exists()
    assert (
        main(["tokenize", str(train), "--val", str(val), "--train-chars", "60", "--out", str(out), "--ctx-len", "8"])
        == 0
    )
    corpus = write_corpus_file(tmp_path / "corpus.txt", "学而时习之，不亦说乎。" * 20)
    with pytest.raises(AnatomyError, match=r"corpus.txt: 220 characters to tokenize, more than the 100"):
        tokenize_corpus(corpus, tmp_path / "whole", ctx_len=8)
    assert main(["tokenize", str(corpus), "--out", str(tmp_path / "whole"), "--ctx-len", "8", "--large"]) == 0


@pytest.mark.slow  # decompresses 25 MB: CI runs it, the inner loop leaves it out
def test_the_shipped_poems_fit_every_limit():
    """workflow/corpora.yaml's poems (9.6 M characters of train, 25 MiB of xz text) are read and
    tokenized without --large."""
    train, val = (read_text(REPO / "data" / "poems" / name) for name in ("train.txt.xz", "val.txt.xz"))
    assert len(train) + len(val) <= LARGE_CORPUS_CHARS


def test_a_default_corpus_is_named_by_its_source(tmp_path):
    posts = REPO / "data" / "posts"
    text, stats = extract_corpus(posts)
    write_corpus(tmp_path, text, stats)
    tokenize_corpus(tmp_path / "corpus.txt", tmp_path)
    assert corpus_name(tmp_path) == stats["source"] and stats["source"].endswith("data/posts")


def test_tokenizing_a_markdown_post_warns_that_its_front_matter_is_kept(tmp_path, capsys):
    body = "春眠不觉晓，处处闻啼鸟。夜来风雨声，花落知多少。\n" * 5
    post = write_corpus_file(tmp_path / "spring.md", "---\ntitle: 春晓\ndate: 2020-01-01\n---\n" + body)
    assert main(["tokenize", str(post), "--out", str(tmp_path / "out"), "--ctx-len", "8"]) == 0
    assert capsys.readouterr().err == (
        f"warning: {post} looks like a Markdown post with front matter, which is tokenized as text; "
        f"`python -m anatomy corpus {post} --out DIR` strips it\n"
    )
    assert set("---title:") <= set(CharTokenizer.load(tmp_path / "out" / "vocab.json").chars)  # tokenized all the same
    plain = write_corpus_file(tmp_path / "plain.md", body)  # a post without front matter: nothing to say
    assert main(["tokenize", str(plain), "--out", str(tmp_path / "out"), "--ctx-len", "8"]) == 0
    assert capsys.readouterr().err == ""
