"""Characters to token ids: what `python -m anatomy tokenize DIR/corpus.txt --out DIR` does.

One character is one token, as in the chapter: the vocabulary is the corpus's distinct
characters, sorted, so the same text always gives the same ids. The text is split once,
the first 90% for training and the last 10% for validation (a contiguous tail, never
shuffled, so validation text is text the model has not seen).

A corpus that comes split already (the scale study's, workflow/corpora.yaml) is given as its
training file and `--val FILE`, and may be cut to its first `--train-chars` characters: then
the vocabulary is every character of both whole files, so that every size of one corpus
trains the very same model. Either file may be xz-compressed (`.xz`, as data/poems ships).

Writes DIR/vocab.json, DIR/train.npy, DIR/val.npy and, last, DIR/split.json, as one set
(`atomic_paths`): all four are written before any is renamed into place, and the old split.json
goes first, so that a full disk leaves the old set whole and a kill never leaves a split.json
beside another corpus's tokens (a reader refuses a folder without one). A run records
the corpus it read by name and by digest (`corpus_identity`): the digest tells two corpora
apart even when their sizes agree. split.json records that digest too, and the digest of the text
the tokens were made from (`text_digest`): `load_tokenized` refuses token files that are not the
set split.json was written with, or that were made from another text than the corpus.txt beside
them (a kill, a copy, a corpus extracted over the folder), in one line.

The command itself (its arguments and what it prints) is anatomy/data/tokenize.py, as train.py is to
trainer.py. It also warns when the file given is a Markdown post, which takes the corpus step's
parser; keeping that out of here lets the corpus step import this module (its file names, the
shortest corpus it takes) without a cycle.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from anatomy.files.atomic import atomic_paths, json_text, naming_a_full_disk, write_json
from anatomy.errors import AnatomyError
from anatomy.data.text_files import read_text, read_utf8

TRAIN_FRACTION = 0.9
DEFAULT_CTX_LEN = 128
VOCAB_FILE, TRAIN_FILE, VAL_FILE, SPLIT_FILE = "vocab.json", "train.npy", "val.npy", "split.json"


def describe(char: str) -> str:
    """A character as a reader can find it: '孔' (U+5B54), '\\n' (U+000A)."""
    return f"{char!r} (U+{ord(char):04X})"


class CharTokenizer:
    """A character-level vocabulary: id i is the i-th character in sorted order."""

    def __init__(self, chars: Sequence[str], source: str = "vocabulary"):
        self.chars = list(chars)
        self.source = source  # named in error messages
        bad = [c for c in self.chars if not isinstance(c, str) or len(c) != 1]
        if bad:
            raise AnatomyError(f"{source}: every vocabulary entry must be one character, got {bad[:5]!r}")
        if self.chars != sorted(set(self.chars)):
            raise AnatomyError(f"{source}: the vocabulary must be distinct characters in sorted order")
        self.index = {char: i for i, char in enumerate(self.chars)}

    @classmethod
    def from_text(cls, text: str, source: str = "vocabulary") -> "CharTokenizer":
        return cls(sorted(set(text)), source)

    @property
    def vocab_size(self) -> int:
        return len(self.chars)

    @property
    def dtype(self) -> np.dtype:
        """The smallest integer type that holds every id (uint16 up to 65,536 characters)."""
        return np.dtype(np.uint16 if self.vocab_size <= 2**16 else np.int32)

    def encode(self, text: str) -> list[int]:
        try:
            return [self.index[char] for char in text]
        except KeyError as err:
            char = err.args[0]
            raise AnatomyError(
                f"{self.source}: character {describe(char)} at position {text.index(char)} "
                f"is not in the vocabulary of {self.vocab_size} characters"
            ) from None

    def decode(self, ids: Iterable[int]) -> str:
        ids = [int(i) for i in ids]
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise AnatomyError(f"{self.source}: token id {bad[0]} is outside the vocabulary (0..{self.vocab_size - 1})")
        return "".join(self.chars[i] for i in ids)

    def record(self) -> dict:
        """What vocab.json holds."""
        return {"type": "char", "vocab_size": self.vocab_size, "chars": self.chars}

    def save(self, path: str | os.PathLike) -> None:
        write_json(path, self.record())

    @classmethod
    def load(cls, path: str | os.PathLike) -> "CharTokenizer":
        data = read_json(Path(path))
        chars = data.get("chars") if isinstance(data, dict) else None
        if not isinstance(chars, list):
            raise AnatomyError(f"{path}: expected a JSON object with a 'chars' list (written by `anatomy tokenize`)")
        if data.get("vocab_size") != len(chars):
            raise AnatomyError(f"{path}: 'vocab_size' is {data.get('vocab_size')} but 'chars' holds {len(chars)}")
        return cls(chars, source=str(path))


def read_json(path: Path):
    try:
        return json.loads(read_utf8(path))
    except json.JSONDecodeError as err:
        raise AnatomyError(f"{path}: not valid JSON: {err}") from None


def split_sizes(n_tokens: int) -> tuple[int, int]:
    """(train, val) sizes: the first 90% and the rest, e.g. 122,620 -> 110,358 + 12,262."""
    n_train = int(TRAIN_FRACTION * n_tokens)
    return n_train, n_tokens - n_train


def min_corpus_length(window: int) -> int:
    """The shortest text whose train and val splits each hold one `window` of tokens. Both splits
    only grow with the text, so it is found by halving (counting up from 2 x window took 80 s to
    answer ctx_len=10,000,000)."""
    low = high = 2 * window
    while min(split_sizes(high)) < window:
        low, high = high + 1, 2 * high
    while low < high:  # the answer lies in [low, high]
        middle = (low + high) // 2
        if min(split_sizes(middle)) < window:
            low = middle + 1
        else:
            high = middle
    return low


def check_windows(n_train: int, n_val: int, ctx_len: int, source: str | os.PathLike) -> None:
    """Both splits must hold one training window: ctx_len inputs plus the one target after them."""
    window = ctx_len + 1
    if n_train < window or n_val < window:
        raise AnatomyError(
            f"{source}: corpus too short for ctx_len {ctx_len}: {n_train + n_val:,} characters split into "
            f"{n_train:,} train + {n_val:,} val tokens, but each split needs at least {window:,} "
            f"(ctx_len + 1); give at least {min_corpus_length(window):,} characters or a smaller ctx_len"
        )


# The most characters tokenized without --large: four times the 8.3 M of the largest corpus this
# lab trains on (the scale study's poems_8m, 250 MB of memory to tokenize, some 20 bytes a
# character at the peak). A few kilobytes of xz can hold 100 M characters (2 GB to tokenize):
# past this, the reader says so, rather than the memory running out.
LARGE_CORPUS_CHARS = 32_000_000


def check_size(n_chars: int, source: str | os.PathLike, allow_large: bool) -> None:
    """Refuse to tokenize more than LARGE_CORPUS_CHARS characters unless asked (`allow_large`)."""
    if n_chars > LARGE_CORPUS_CHARS and not allow_large:
        raise AnatomyError(
            f"{source}: {n_chars:,} characters to tokenize, more than the {LARGE_CORPUS_CHARS:,} tokenized "
            f"without asking (about {n_chars * 20 / 1e9:.1f} GB of memory); give --large to tokenize them all"
        )


def save_array(path: Path, array: np.ndarray) -> None:
    # An open file, because np.save would append '.npy' to the temporary name.
    with open(path, "wb") as f:
        np.save(f, array, allow_pickle=False)


def corpus_digest(tokenizer: CharTokenizer, train: np.ndarray, val: np.ndarray) -> str:
    """sha256 of the vocabulary and both token arrays: equal digests, the same training data."""
    digest = hashlib.sha256("".join(tokenizer.chars).encode("utf-8"))
    for ids in (train, val):
        digest.update(np.ascontiguousarray(ids, dtype=np.int64).tobytes())
    return digest.hexdigest()


def text_digest(text: str) -> str:
    """sha256 of a text in UTF-8: which corpus.txt a set of tokens was made from."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def write_tokenized(out_dir: Path, tokenizer: CharTokenizer, train: np.ndarray, val: np.ndarray, split: dict) -> dict:
    """The four files as one set, split.json last: its presence means the rest is complete."""
    split = {
        **split,
        "vocab_size": tokenizer.vocab_size,
        "dtype": tokenizer.dtype.name,
        "digest": corpus_digest(tokenizer, train, val),  # the set's identity, checked when read
    }
    writers = {
        VOCAB_FILE: lambda tmp: tmp.write_text(json_text(tokenizer.record()), encoding="utf-8"),
        TRAIN_FILE: lambda tmp: save_array(tmp, train),
        VAL_FILE: lambda tmp: save_array(tmp, val),
        SPLIT_FILE: lambda tmp: tmp.write_text(json_text(split), encoding="utf-8"),
    }
    with atomic_paths(*(out_dir / name for name in writers)) as temporaries:
        for (name, write), tmp in zip(writers.items(), temporaries):
            with naming_a_full_disk(out_dir / name):  # each file by its own name, not the set's first
                write(tmp)
    return split


def tokenize_split(
    train_path: str | os.PathLike,
    val_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    train_chars: int | None = None,
    name: str | None = None,
    ctx_len: int = DEFAULT_CTX_LEN,
    allow_large: bool = False,
) -> dict:
    """A corpus split already: the first `train_chars` characters of the training file (all of it
    if None) and the whole validation file, under the vocabulary of both whole files. More than
    LARGE_CORPUS_CHARS to tokenize only with `allow_large`."""
    train_path, val_path, out_dir = Path(train_path), Path(val_path), Path(out_dir)
    train_text, val_text = read_text(train_path), read_text(val_path)
    if train_chars is not None and not 0 < train_chars <= len(train_text):
        raise AnatomyError(
            f"--train-chars {train_chars:,} is not valid: {train_path} holds {len(train_text):,} characters"
        )
    check_size(len(train_text[:train_chars]) + len(val_text), f"{train_path} and {val_path}", allow_large)
    tokenizer = CharTokenizer(sorted(set(train_text) | set(val_text)), source=f"vocabulary of {train_path}")
    train = np.asarray(tokenizer.encode(train_text[:train_chars]), dtype=tokenizer.dtype)
    val = np.asarray(tokenizer.encode(val_text), dtype=tokenizer.dtype)
    check_windows(len(train), len(val), ctx_len, train_path)  # before anything is written
    split = {
        "name": name or train_path.as_posix(),
        "corpus": train_path.as_posix(),
        "val_corpus": val_path.as_posix(),
        "characters": len(train) + len(val),
        "train_tokens": len(train),
        "val_tokens": len(val),
        "train_fraction": None,  # split by the files, not by a fraction
    }
    return write_tokenized(out_dir, tokenizer, train, val, split)


def tokenize_corpus(
    corpus_path: str | os.PathLike,
    out_dir: str | os.PathLike,
    ctx_len: int = DEFAULT_CTX_LEN,
    allow_large: bool = False,
) -> dict:
    """Build the vocabulary and the two token arrays; return what split.json records. More than
    LARGE_CORPUS_CHARS only with `allow_large`."""
    corpus_path, out_dir = Path(corpus_path), Path(out_dir)
    if not corpus_path.is_file():
        raise AnatomyError(f"{corpus_path}: no such file (expected the corpus.txt written by `anatomy corpus`)")
    text = read_utf8(corpus_path)
    check_size(len(text), corpus_path, allow_large)
    tokenizer = CharTokenizer.from_text(text, source=str(corpus_path))
    ids = np.asarray(tokenizer.encode(text), dtype=tokenizer.dtype)
    n_train, n_val = split_sizes(len(ids))
    check_windows(n_train, n_val, ctx_len, corpus_path)  # before anything is written

    split = {
        "corpus": corpus_path.as_posix(),
        "characters": len(ids),
        "train_tokens": n_train,
        "val_tokens": n_val,
        "train_fraction": TRAIN_FRACTION,
        "text_digest": text_digest(text),  # the text the tokens were made from
    }
    return write_tokenized(out_dir, tokenizer, ids[:n_train], ids[n_train:], split)


def load_array(path: Path, vocab_size: int) -> np.ndarray:
    if not path.is_file():
        raise AnatomyError(f"{path}: no such file (run `python -m anatomy tokenize` first)")
    try:
        array = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as err:
        raise AnatomyError(f"{path}: not a numpy token array: {err}") from None
    if array.ndim != 1 or not np.issubdtype(array.dtype, np.integer):
        raise AnatomyError(f"{path}: expected a 1-D integer array, got {array.dtype} with shape {array.shape}")
    for bad in (int(array.min()), int(array.max())) if array.size else ():
        if not 0 <= bad < vocab_size:  # an id past either end would index outside the embedding
            raise AnatomyError(f"{path}: token id {bad} is outside the vocabulary (0..{vocab_size - 1})")
    return array


def corpus_name(data_dir: str | os.PathLike) -> str:
    """What a run calls the corpus it read: the name split.json records (a named corpus), else
    the source `anatomy corpus` extracted (stats.json beside it: data/posts, your blog), else
    the folder."""
    data_dir = Path(data_dir)
    split = read_json(data_dir / SPLIT_FILE)
    if isinstance(split, dict) and isinstance(split.get("name"), str):
        return split["name"]
    stats = data_dir / "stats.json"
    if stats.is_file():
        source = read_json(stats).get("source") if isinstance(read_json(stats), dict) else None
        if isinstance(source, str):
            return source
    return data_dir.as_posix()


# What split.json records of the sizes: enough to check a run against before its tokens are read
SPLIT_SIZES = ("vocab_size", "train_tokens", "val_tokens")


def read_split(data_dir: str | os.PathLike) -> dict:
    """split.json of a folder written by `tokenize_corpus`, its sizes whole numbers: a run's
    settings are checked against these before the tokens are loaded (ctx_len=10,000,000 is refused
    at once, not after the corpus is read)."""
    data_dir = Path(data_dir)
    split_path = data_dir / SPLIT_FILE
    if not split_path.is_file():
        raise AnatomyError(f"{split_path}: no such file (run `python -m anatomy tokenize ... --out {data_dir}` first)")
    split = read_json(split_path)
    if not isinstance(split, dict):
        raise AnatomyError(
            f"{split_path}: expected a JSON object (written by `anatomy tokenize`), got a {type(split).__name__}"
        )
    for key in SPLIT_SIZES:
        value = split.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise AnatomyError(f"{split_path}: field '{key}' must be a whole number, got {value!r}; tokenize again")
    return split


def load_tokenized(data_dir: str | os.PathLike) -> tuple[CharTokenizer, np.ndarray, np.ndarray]:
    """(tokenizer, train ids, val ids) from a folder written by `tokenize_corpus`."""
    data_dir = Path(data_dir)
    split_path = data_dir / SPLIT_FILE
    split = read_split(data_dir)
    tokenizer = CharTokenizer.load(data_dir / VOCAB_FILE)
    train = load_array(data_dir / TRAIN_FILE, tokenizer.vocab_size)
    val = load_array(data_dir / VAL_FILE, tokenizer.vocab_size)
    expected = tuple(split[key] for key in SPLIT_SIZES)
    if expected != (tokenizer.vocab_size, len(train), len(val)):
        raise AnatomyError(
            f"{split_path}: records vocab/train/val {expected}, but the files hold "
            f"{(tokenizer.vocab_size, len(train), len(val))}; tokenize again"
        )
    check_identity(data_dir, split, corpus_digest(tokenizer, train, val))
    return tokenizer, train, val


def check_identity(data_dir: Path, split: dict, digest: str) -> None:
    """The token files are the set split.json was written with, made from the corpus.txt beside
    them (where split.json records either: one written before these records cannot say)."""
    again = f"tokenize again: python -m anatomy tokenize {data_dir / 'corpus.txt'} --out {data_dir}"
    recorded = split.get("digest")
    if isinstance(recorded, str) and recorded != digest:
        raise AnatomyError(
            f"{data_dir / SPLIT_FILE}: {VOCAB_FILE}, {TRAIN_FILE} and {VAL_FILE} are not the set it was written "
            f"with (digest {digest[:12]}..., recorded {recorded[:12]}...); {again}"
        )
    corpus = data_dir / "corpus.txt"
    recorded = split.get("text_digest")
    if isinstance(recorded, str) and corpus.is_file() and text_digest(read_utf8(corpus)) != recorded:
        raise AnatomyError(
            f"{data_dir}: the tokens were made from another text than the {corpus.name} beside them "
            f"(split.json records the digest {recorded[:12]}...); {again}"
        )
