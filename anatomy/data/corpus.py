"""A blog into one text: `python -m anatomy corpus SRC --out DIR`.

SRC is a folder of Markdown posts (Hugo, Jekyll, Hexo, Zola, MDX...) or a single `.txt` file. Posts
are read in a stable order (sorted relative path), their front matter is parsed and dropped
(YAML between `---` lines, TOML between `+++` lines, JSON as Hugo and Hexo write it, and Hexo's
forms closed by `---` or `;;;` alone), line endings become `\\n`, and the bodies are joined with
one blank line. Hidden files, files that are not Markdown and drafts are skipped and counted, so
nothing is mixed in, or left out, silently; so are folders linked in (not followed), folders that
cannot be read and Markdown names that are no regular file (a named pipe, a link to a device: never
opened, since reading one waits for good or never ends), each named. Every post that cannot be used
is reported in one run; so is a post too long to be one (POST_LIMIT).

Outside code, HTML comments (Hexo's `<!-- more -->`), template tags (`{% ... %}`, `{{ ... }}`,
Hugo's `{{< ... >}}`), kramdown's attribute lists and MDX's syntax are dropped and raw HTML becomes
its text; the Markdown itself and all code stay as written (`--keep-markup` keeps everything). The
statistics count what each kind removed.

Writes DIR/corpus.txt and DIR/stats.json, which also names the posts whose characters no other post
holds (each costs embedding parameters for a character the model meets in one post only), and
records what the corpus was made from (corpus_source.py), so that a folder made from another source
is never taken for this one's. A file whose bytes are unchanged is not written again, and the token
files beside an unchanged text stay: rebuilding the same corpus makes nothing after it stale.

The steps, each in its module: front_matter.py (a post's front matter, parsed and cut off),
markup.py (markup out of the prose), posts.py (which files are posts, each read, the ones that
cannot be used named), corpus_stats.py (stats.json and the summary printed), corpus_source.py (what
the corpus was made from). This module joins them and is the command: its arguments, and writing
DIR without leaving stale tokens.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from anatomy.data.corpus_source import made_from
from anatomy.data.corpus_stats import report, size_warning, statistics, vocabulary_warning
from anatomy.data.posts import TEXT_SUFFIX, Options, extract_file, extract_folder, shown
from anatomy.data.tokenizer import SPLIT_FILE, TRAIN_FILE, VAL_FILE, VOCAB_FILE, read_json, text_digest
from anatomy.errors import AnatomyError
from anatomy.files.atomic import NOT_WRITABLE, not_writable_advice, write_bytes_if_changed


def extract_corpus(src: str | os.PathLike, **options) -> tuple[str, dict]:
    """One text from a folder of posts or a single file, and its statistics.

    options: those of `Options` (skip_bad, include_drafts, keep_markup), all off by default.
    """
    src, options = Path(src), Options(**options)
    if not src.exists():
        raise AnatomyError(f"{shown(src)}: no such file or folder (expected a folder of Markdown posts or a .txt file)")
    # Before the posts are read: a post edited meanwhile then makes the record differ, not match
    record = made_from(src, options)
    if src.is_dir():
        bodies, lengths, skipped, tally = extract_folder(src, options)
    else:
        text, tally = extract_file(src, options)
        bodies, lengths, skipped = [text], [{"path": shown(src.name), "characters": len(text)}], []
    text = "\n\n".join(bodies)
    return text, statistics(src, text, bodies, lengths, skipped, tally, options.keep_markup, record)


def write_corpus(out_dir: str | os.PathLike, text: str, stats: dict) -> None:
    """Both files or neither: both are encoded before either is written. A file that holds these
    bytes already is left as it is, so that its time says when the corpus last changed."""
    out_dir = Path(out_dir)
    corpus = text.encode("utf-8")
    stats_json = (json.dumps(stats, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    write_bytes_if_changed(out_dir / "corpus.txt", corpus)
    write_bytes_if_changed(out_dir / "stats.json", stats_json)


def check_out_folder(out_dir: Path) -> None:
    """--out names a folder, existing or to be made: checked before anything is written."""
    if out_dir.is_dir():
        return
    if out_dir.exists():
        raise AnatomyError(f"--out {shown(out_dir)}: is a file; expected a folder for corpus.txt and stats.json")
    if out_dir.suffix.lower() in (TEXT_SUFFIX, ".json"):
        raise AnatomyError(
            f"--out {shown(out_dir)}: expected a folder, which gets corpus.txt and stats.json, not a file "
            f"name; for example --out {shown(out_dir.parent)}"
        )
    # The nearest part of the path that is there, even as a link to nothing (os.path.lexists)
    nearest = next(path for path in (out_dir, *out_dir.parents) if os.path.lexists(path))
    if nearest.is_symlink() and not nearest.exists():
        raise AnatomyError(
            f"--out {shown(out_dir)}: {shown(nearest)} is a symbolic link to {shown(os.readlink(nearest))}, "
            "which does not exist; make that folder, or give another --out"
        )
    if not nearest.is_dir():
        raise AnatomyError(f"--out {shown(out_dir)}: {shown(nearest)} is a file, so no folder can be made there")


@contextmanager
def writing_in(out_dir: Path) -> Iterator[None]:
    """A file system's refusal to write in --out (a read-only folder, a full disk) as one line; for
    a folder the user may not write, with what to do."""
    try:
        yield
    except OSError as err:
        where = shown(err.filename or out_dir)
        advice = f"; {not_writable_advice('--out')}" if err.errno in NOT_WRITABLE else ""
        raise AnatomyError(f"--out {shown(out_dir)}: cannot write {where}: {err.strerror}{advice}") from None


def tokens_of(out_dir: Path, text: str) -> bool:
    """Whether the token files in `out_dir` were made from `text`, the corpus.txt beside them: its
    split.json records the digest of the text it was made from (a split.json from before that
    record cannot say, and counts as another text's)."""
    corpus, split = out_dir / "corpus.txt", out_dir / SPLIT_FILE
    if not (corpus.is_file() and split.is_file()):
        return False
    try:
        recorded = read_json(split)
    except AnatomyError:
        return False
    return isinstance(recorded, dict) and recorded.get("text_digest") == text_digest(text)


def remove_stale_tokens(out_dir: Path) -> None:
    """Delete the token files an earlier `anatomy tokenize` left in `out_dir`: they were made from
    the corpus.txt beside them, so no later step may train on them once it is replaced or gone.
    split.json goes first: it says the rest is complete."""
    for name in (SPLIT_FILE, VOCAB_FILE, TRAIN_FILE, VAL_FILE):
        (out_dir / name).unlink(missing_ok=True)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", type=Path, help="a folder of Markdown posts, or one .txt file")
    parser.add_argument(
        "--out", type=Path, required=True, help="folder for corpus.txt and stats.json (made if missing)"
    )
    parser.add_argument(
        "--skip-bad",
        action="store_true",
        help="leave out the posts that cannot be used, listed in stats.json, instead of stopping",
    )
    parser.add_argument(
        "--include-drafts",
        action="store_true",
        help="keep drafts (in _drafts/, or marked draft: true or published: false)",
    )
    parser.add_argument(
        "--keep-markup",
        action="store_true",
        help="keep HTML comments, template tags ({%% %%}, {{< >}}) and raw HTML as written",
    )


def run(args: argparse.Namespace) -> int:
    check_out_folder(args.out)
    with writing_in(args.out):
        if not (args.out / "corpus.txt").exists():
            # Tokens without their corpus (Snakemake deletes a job's outputs before it runs) belong
            # to no corpus: they go now, so that none are left if this extraction fails.
            remove_stale_tokens(args.out)
    # Anything else stays until the new corpus is ready: a failed extraction (a typo in SRC, a
    # broken post) leaves the old corpus.txt and its tokens, which still belong together.
    text, stats = extract_corpus(
        args.src, skip_bad=args.skip_bad, include_drafts=args.include_drafts, keep_markup=args.keep_markup
    )
    with writing_in(args.out):
        if not tokens_of(args.out, text):
            remove_stale_tokens(args.out)
        write_corpus(args.out, text, stats)
    print(report(stats, args.out))
    for warning in (
        size_warning(stats["characters"], drafts=stats["skipped"].get("draft", 0)),
        vocabulary_warning(stats),
    ):
        if warning:
            print(f"warning: {warning}", file=sys.stderr)
    return 0
