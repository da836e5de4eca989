"""`python -m anatomy tokenize DIR/corpus.txt --out DIR`: the command, its arguments and its report.

The work is anatomy/data/tokenizer.py's (as train.py is to trainer.py). The command also warns when
the file given is a Markdown post with front matter, which anatomy/data/posts.py recognises: the
corpus step imports the tokenizer (its file names, the shortest corpus it takes), so the
tokenizer cannot import the corpus step, and the command, which needs both, sits above both.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from anatomy.data.posts import front_matter_warning
from anatomy.errors import AnatomyError
from anatomy.data.tokenizer import DEFAULT_CTX_LEN, LARGE_CORPUS_CHARS, tokenize_corpus, tokenize_split


def report(split: dict, out_dir: Path) -> str:
    n = split["characters"]
    return "\n".join(
        [
            f"tokenize: {split['corpus']} -> {out_dir}",
            f"  characters   {n:,}",
            f"  vocabulary   {split['vocab_size']:,} characters ({split['dtype']})",
            f"  train        {split['train_tokens']:,} tokens ({split['train_tokens'] / n:.1%})",
            f"  val          {split['val_tokens']:,} tokens ({split['val_tokens'] / n:.1%})",
        ]
    )


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "corpus", type=Path, help="the corpus.txt written by `anatomy corpus`, or a training text with --val"
    )
    parser.add_argument("--val", type=Path, help="a validation text: the corpus is split already (no 90/10 cut)")
    parser.add_argument(
        "--train-chars", type=int, help="with --val: train on the first N characters (the vocabulary stays the whole)"
    )
    parser.add_argument("--name", help="with --val: the corpus's name, recorded by every run that reads it")
    parser.add_argument("--out", type=Path, required=True, help="folder for vocab.json, train.npy, val.npy, split.json")
    parser.add_argument(
        "--large",
        action="store_true",
        help=f"tokenize more than {LARGE_CORPUS_CHARS:,} characters (refused without it: memory)",
    )
    parser.add_argument(
        "--ctx-len",
        type=int,
        default=DEFAULT_CTX_LEN,
        help="context length the splits must hold (plus one target); default %(default)s",
    )


def run(args: argparse.Namespace) -> int:
    if args.ctx_len < 1:
        raise AnatomyError(f"--ctx-len must be at least 1, got {args.ctx_len}")
    if args.val is None and (args.train_chars is not None or args.name is not None):
        raise AnatomyError("--train-chars and --name go with --val (a corpus that comes split already)")
    warning = front_matter_warning(args.corpus)
    if args.val is not None:
        split = tokenize_split(
            args.corpus, args.val, args.out, args.train_chars, args.name, ctx_len=args.ctx_len, allow_large=args.large
        )
    else:
        split = tokenize_corpus(args.corpus, args.out, ctx_len=args.ctx_len, allow_large=args.large)
    print(report(split, args.out))
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    return 0
