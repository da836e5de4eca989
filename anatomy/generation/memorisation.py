"""How much of a generated text is copied from the training text, measured.

A span of at least `min_chars` generated characters that also appears verbatim in the training
split counts as copied. The figures per sample:
- `copied_fraction`: the share of generated characters (the prefix excluded) inside such spans;
- the longest copied span, and where the training text has it (post and line);
- `val_copied_fraction`: the same share against the validation split, as a control. Text the
  model never saw cannot be recalled, so spans found there are what the language itself repeats
  (set phrases, refrains); copying well above that level is memorisation.

A suffix array of the reference text (every suffix's start, in sorted order) answers "the
longest substring starting here that occurs in the text" for a position of the sample with one
binary search; the answers for every start give the longest match ending at every position. A
500-character sample costs about 500 searches of 23 steps, whatever the corpus size.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from anatomy.data.text_files import TEXT_LIMIT, read_text, read_utf8
from anatomy.files.atomic import write_json
from anatomy.files.run_folder import read_json_file
from anatomy.errors import AnatomyError

DEFAULT_MIN_CHARS = 12
# The index is built in numpy: 29 s and about 570 MB at its peak for the 8,192,000 characters of
# poems_8m (2026-12-06, AMD EPYC, two trainings beside it). Past this many training characters it
# is not built, and the sampling says so instead. (A suffix automaton, the index before it, took
# 470 MB a million characters in Python objects: poems_8m was out of reach.)
INDEX_CHARS = 16_000_000


def suffix_array(text: str) -> np.ndarray:
    """The start of every suffix of `text`, the suffixes in sorted order (as Python compares
    strings: by code point, a prefix first). Prefix doubling: sorted by their first k characters,
    then by 2k, each round a sort of (rank of the first k, rank of the next k); done when every
    rank differs, after log2 of the longest repeated substring's length rounds."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    n = len(codes)
    if n == 0:
        return np.zeros(0, dtype=np.int32)
    rank = np.unique(codes, return_inverse=True)[1].astype(np.int64)
    k = 1
    while True:
        following = np.zeros(n, dtype=np.int64)  # 0: past the end, which sorts first
        following[: n - k] = rank[k:] + 1
        key = rank * (n + 1) + following  # the pair as one number: below 2**63 for n < 3e9
        order = np.argsort(key, kind="stable")
        ordered = key[order]
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.concatenate(([0], np.cumsum(ordered[1:] != ordered[:-1])))
        if rank[order[-1]] == n - 1 or k >= n:
            return order.astype(np.int32 if n < 2**31 else np.int64)
        k *= 2


class SuffixIndex:
    """Where a text has a string: its suffix array, searched by binary search."""

    def __init__(self, text: str):
        self.text = text
        self.order = suffix_array(text)

    def _lower_bound(self, query: str) -> int:
        """Where `query` would go among the sorted suffixes, each compared by its first len(query)
        characters."""
        m = len(query)
        return bisect.bisect_left(self.order, query, key=lambda start: self.text[start : start + m])

    def _bounds(self, query: str) -> tuple[int, int]:
        """The range of the suffix array whose suffixes start with `query`."""
        m, first = len(query), self._lower_bound(query)
        return first, bisect.bisect_right(self.order, query, lo=first, key=lambda start: self.text[start : start + m])

    def longest_prefix(self, query: str) -> int:
        """The length of the longest prefix of `query` that occurs in the text: the suffix sharing
        most with it sorts right before or after where `query` would go."""
        m, where = len(query), self._lower_bound(query)
        return max(
            (
                len(os.path.commonprefix([query, self.text[self.order[i] : self.order[i] + m]]))
                for i in (where - 1, where)
                if 0 <= i < len(self.order)
            ),
            default=0,
        )

    def longest_matches(self, query: str) -> list[int]:
        """For each position i of `query`: the length of the longest substring of query ending at
        i that occurs in the text."""
        reach = [start + self.longest_prefix(query[start:]) for start in range(len(query))]
        # query[start:reach] occurs, so query[start + 1:reach] does: `reach` never falls, and the
        # longest match ending at i starts at the first start whose match reaches past i
        lengths, start = [], 0
        for end in range(len(query)):
            while start <= end and reach[start] <= end:
                start += 1
            lengths.append(end - start + 1)
        return lengths

    def first_occurrence(self, query: str) -> int:
        """Where the text first has `query` (-1: nowhere), as str.find says, without its scan."""
        start, stop = self._bounds(query)
        return int(self.order[start:stop].min()) if stop > start else -1


@dataclass
class Span:
    start: int  # in the generated part of the sample
    length: int
    source_start: int  # in the reference text: where it first has the span


def copied_spans(generated: str, index: SuffixIndex, min_chars: int) -> list[Span]:
    """The maximal spans of `generated`, at least `min_chars` long, that occur in the text."""
    spans = []
    matches = index.longest_matches(generated)
    for end, length in enumerate(matches):
        following = matches[end + 1] if end + 1 < len(matches) else 0
        # a match is maximal where it does not go on one character further
        if length >= min_chars and following <= length:
            start = end - length + 1
            spans.append(Span(start, length, index.first_occurrence(generated[start : end + 1])))
    return spans


def covered_fraction(spans: list[Span], size: int) -> float:
    """The share of `size` characters inside at least one span."""
    if size == 0:
        return 0.0
    inside = [False] * size
    for span in spans:
        for i in range(span.start, span.start + span.length):
            inside[i] = True
    return sum(inside) / size


@contextmanager
def corpus_errors(data_dir: Path) -> Iterator[None]:
    """A corpus folder's read, failing in one line that names the folder and what is wrong."""
    try:
        yield
    except AnatomyError as err:  # it names the file, and what is wrong with it
        raise AnatomyError(f"{data_dir}: not a tokenized corpus folder that can be read ({err})") from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise AnatomyError(
            f"{data_dir}: not a tokenized corpus folder (split.json, and the corpus.txt "
            f"it names) ({type(err).__name__}: {err})"
        ) from None


@dataclass
class Corpus:
    """A tokenized corpus folder's text, split as training saw it, with the posts it came from."""

    train: str
    val: str
    posts: list[tuple[str, int]]  # (post path, first character in the corpus text)

    @classmethod
    def load(cls, data_dir: Path) -> "Corpus":
        """Each file read only if it is a regular file of a sane size (a named pipe would make this
        wait for good, a link to /dev/zero fill the memory): else one line naming the file."""
        data_dir = Path(data_dir)
        with corpus_errors(data_dir):
            split = read_json_file(data_dir / "split.json", "a tokenized corpus's facts, written by anatomy tokenize")
            n_train = int(split["train_tokens"])
        if n_train > INDEX_CHARS:
            raise AnatomyError(
                f"{data_dir}: its training text has {n_train:,} characters, more than the {INDEX_CHARS:,} "
                "this measurement takes (its index needs about 70 MB a million characters while it is built)"
            )
        with corpus_errors(data_dir):
            if split.get("val_corpus"):  # split by its files (tokenize --val): the first n_train of one, the other
                train = read_text(Path(split["corpus"]))[:n_train]
                # a copy is found in the training file itself: named, not as the corpus.txt it has no
                return cls(train, read_text(Path(split["val_corpus"])), [(str(split["corpus"]), 0)])
            # the pipeline tokenizes corpus.txt in the same folder; split.json names it either way
            corpus_path = data_dir / "corpus.txt"
            if not corpus_path.is_file():
                corpus_path = Path(split["corpus"])
            text = read_utf8(corpus_path, TEXT_LIMIT, "a corpus text")
            # the corpus step's stats name the posts; a corpus tokenized by hand may have none.
            # They grow with the posts (100,000 posts: about 8 MB), so they are capped as the text is.
            stats_path = data_dir / "stats.json"
            stats = (
                json.loads(read_utf8(stats_path, TEXT_LIMIT, "the corpus step's statistics"))
                if stats_path.is_file()
                else {}
            )
        posts, start = [], 0
        for post in stats.get("post_lengths") or []:
            posts.append((str(post["path"]), start))
            start += int(post["characters"]) + 2  # posts are joined by one blank line
        return cls(text[:n_train], text[n_train:], posts)

    def locate(self, position: int) -> dict[str, Any]:
        """The post and line (1-based, in the post's extracted text) of a corpus position."""
        path, start = "corpus.txt", 0
        for post_path, post_start in self.posts:
            if post_start > position:
                break
            path, start = post_path, post_start
        text = self.train + self.val
        return {"post": path, "line": text.count("\n", start, position) + 1}


def measure(
    text: str,
    prefix: str,
    corpus: Corpus,
    train: SuffixIndex,
    val: SuffixIndex,
    min_chars: int = DEFAULT_MIN_CHARS,
) -> dict[str, Any]:
    """The memorisation figures of one sample (its prefix is the learner's, not the model's)."""
    generated = text[len(prefix) :] if text.startswith(prefix) else text
    spans = copied_spans(generated, train, min_chars)
    longest = max(spans, key=lambda span: span.length, default=None)
    return {
        "min_chars": min_chars,
        "copied_fraction": covered_fraction(spans, len(generated)),
        # [start in `text`, length, post, line]: where to highlight, and where the copy comes from
        "copied_spans": [
            [
                span.start + len(text) - len(generated),
                span.length,
                *corpus.locate(span.source_start).values(),
            ]
            for span in spans
        ],
        "longest_copy": longest.length if longest else 0,
        "longest_copy_text": generated[longest.start : longest.start + longest.length] if longest else None,
        "longest_copy_source": corpus.locate(longest.source_start) if longest else None,
        "val_copied_fraction": covered_fraction(copied_spans(generated, val, min_chars), len(generated)),
    }


class Memorisation:
    """Measures samples against one corpus; the indexes are built once."""

    def __init__(self, data_dir: Path, min_chars: int = DEFAULT_MIN_CHARS):
        if min_chars < 1:
            raise AnatomyError(f"min_chars = {min_chars} is not valid: expected 1 or more")
        self.corpus = Corpus.load(data_dir)
        self.train, self.val = SuffixIndex(self.corpus.train), SuffixIndex(self.corpus.val)
        self.min_chars = min_chars

    def __call__(self, text: str, prefix: str) -> dict[str, Any]:
        return measure(text, prefix, self.corpus, self.train, self.val, self.min_chars)


def annotate(records: list[dict[str, Any]], measure_sample: Memorisation) -> list[dict[str, Any]]:
    """Sample records (as samples.json holds them) with their `memorisation` figures."""
    return [
        {
            **record,
            "memorisation": None
            if record.get("text") is None
            else measure_sample(record["text"], record.get("prefix") or ""),
        }
        for record in records
    ]


def data_dir_of(run_dir: Path) -> Path:
    """The tokenized corpus a run trained on, as its config.json records it."""
    config_path = Path(run_dir) / "config.json"
    try:  # read as every small file of a run is: a regular file, of a sane size
        config = read_json_file(config_path, "a run's settings, written by anatomy train")
    except AnatomyError as err:
        raise AnatomyError(f"{err}; give --data") from None
    try:
        return Path(config["data"]["dir"])
    except (KeyError, TypeError) as err:
        raise AnatomyError(
            f"{config_path}: no data.dir to find the training text in ({type(err).__name__}: {err}); give --data"
        ) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dirs", nargs="+", type=Path, help="run folders whose samples.json to measure")
    parser.add_argument(
        "--data",
        type=Path,
        default=None,
        help="the tokenized corpus folder (default: the one each run's config.json names)",
    )
    parser.add_argument(
        "--min-chars",
        type=int,
        default=DEFAULT_MIN_CHARS,
        help=f"shortest span that counts as copied (default {DEFAULT_MIN_CHARS})",
    )


def run(args: argparse.Namespace) -> int:
    measurers: dict[Path, Memorisation] = {}
    for run_dir in args.run_dirs:
        path = run_dir / "samples.json"
        if not path.is_file():
            raise AnatomyError(f"{path}: no such file (generate samples first: python -m anatomy generate)")
        records = read_json_file(path, "the samples anatomy generate writes")
        if not isinstance(records, list):
            raise AnatomyError(f"{path}: expected a list of samples, got {type(records).__name__}")
        data_dir = args.data or data_dir_of(run_dir)
        if data_dir not in measurers:
            measurers[data_dir] = Memorisation(data_dir, args.min_chars)
        records = annotate(records, measurers[data_dir])
        write_json(path, records)
        for record in records:
            figures = record["memorisation"]
            if figures is not None:
                print(
                    f"{run_dir} ({record.get('checkpoint')}): {figures['copied_fraction']:.1%} copied from "
                    f"train, {figures['val_copied_fraction']:.1%} from val (spans of {figures['min_chars']}+ "
                    f"characters); longest {figures['longest_copy']}"
                )
    return 0
