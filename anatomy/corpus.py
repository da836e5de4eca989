"""A blog into one text: `python -m anatomy corpus SRC --out DIR`.

SRC is a folder of Markdown posts (Hugo, Jekyll, Hexo...) or a single `.txt` file. Posts are
read in a stable order (sorted relative path), their front matter (YAML between `---` lines,
or TOML between `+++` lines) is parsed and dropped, line endings become `\\n`, and the bodies
are joined with one blank line. Hidden files and files that are not Markdown are skipped and
counted, so nothing is mixed in silently.

Writes DIR/corpus.txt and DIR/stats.json.
"""

from __future__ import annotations

import argparse
import os
import re
from collections import Counter
from pathlib import Path

try:
    import tomllib  # Python 3.11+
except ModuleNotFoundError:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

import yaml
from frontmatter.default_handlers import BaseHandler, YAMLHandler

from anatomy.atomic import write_json, write_text
from anatomy.errors import AnatomyError

MARKDOWN_SUFFIXES = (".md", ".markdown")
TEXT_SUFFIX = ".txt"


class TomlHandler(BaseHandler):
    """python-frontmatter's `+++` splitting, parsed with the standard library's tomllib.

    (The library's own TOML handler needs the unmaintained `toml` package.)
    """

    FM_BOUNDARY = re.compile(r"^\+{3,}\s*$", re.MULTILINE)
    START_DELIMITER = END_DELIMITER = "+++"

    def load(self, fm: str) -> dict:
        return tomllib.loads(fm)


# (handler, delimiter, format name, the errors its parser raises)
FRONT_MATTER = [
    (YAMLHandler(), "---", "YAML", yaml.YAMLError),
    (TomlHandler(), "+++", "TOML", tomllib.TOMLDecodeError),
]


def read_utf8(path: Path) -> str:
    """The file's text; a clear error, with the byte offset, if it is not UTF-8."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise AnatomyError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise AnatomyError(f"{path}: is a folder, expected a file") from None
    except OSError as err:
        raise AnatomyError(f"{path}: cannot read: {err.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise AnatomyError(
            f"{path}: not UTF-8 text: byte 0x{data[err.start]:02x} at byte offset {err.start} "
            f"(line {line}); save the file as UTF-8"
        ) from None
    return text.removeprefix("\ufeff")  # a byte-order mark some editors add


def normalise_newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


def strip_front_matter(text: str, path: Path) -> str:
    """The body of a post: its front matter, if any, parsed (so errors show) and removed."""
    for handler, delimiter, name, parse_error in FRONT_MATTER:
        if not handler.detect(text):
            continue
        try:
            front, body = handler.split(text)
        except ValueError:
            raise AnatomyError(
                f"{path}: front matter opened with '{delimiter}' on line 1 is never closed "
                f"(expected a second '{delimiter}' line)"
            ) from None
        try:
            metadata = handler.load(front)
        except parse_error as err:
            raise AnatomyError(f"{path}: front matter is not valid {name}: {parse_error_detail(err)}") from None
        if metadata is not None and not isinstance(metadata, dict):
            raise AnatomyError(
                f"{path}: front matter between '{delimiter}' lines must be 'key: value' pairs, "
                f"got a {type(metadata).__name__}"
            )
        return body
    return text


def parse_error_detail(err: Exception) -> str:
    """The parser's complaint with its line and column. The front matter text handed to the
    parser starts on the file's line 1, so those are the file's line numbers too."""
    mark = getattr(err, "problem_mark", None)  # PyYAML marks count from 0
    if mark is None:
        return str(err)  # tomllib already says "(at line L, column C)"
    detail = f"{err.problem} at line {mark.line + 1}, column {mark.column + 1}"
    context_mark = getattr(err, "context_mark", None)
    if err.context and context_mark is not None:
        detail += f" ({err.context} started at line {context_mark.line + 1}, column {context_mark.column + 1})"
    return detail


def find_posts(folder: Path) -> tuple[list[Path], list[dict]]:
    """Markdown files under `folder` (relative paths, sorted) and the files skipped, with why."""
    posts, skipped = [], []
    for root, dirs, files in os.walk(folder):
        root_path = Path(root)
        for name in sorted(dirs):
            if name.startswith("."):  # .git, .obsidian...: skipped whole, counted once
                skipped.append({"path": (root_path / name).relative_to(folder).as_posix() + "/", "reason": "hidden"})
        dirs[:] = [name for name in dirs if not name.startswith(".")]
        for name in files:
            relative = (root_path / name).relative_to(folder)
            if name.startswith("."):
                skipped.append({"path": relative.as_posix(), "reason": "hidden"})
            elif not name.lower().endswith(MARKDOWN_SUFFIXES):
                skipped.append({"path": relative.as_posix(), "reason": "not markdown"})
            else:
                posts.append(relative)
    # Sorting on path parts gives the same order on every file system and OS.
    posts.sort(key=lambda p: p.parts)
    return posts, skipped


def read_post(path: Path) -> str:
    """A Markdown post's text without its front matter or surrounding blank lines."""
    return strip_front_matter(normalise_newlines(read_utf8(path)), path).strip()


def extract_folder(folder: Path) -> tuple[list[str], list[dict], list[dict]]:
    """(post bodies, their lengths, skipped files) for a folder of posts."""
    paths, skipped = find_posts(folder)
    bodies, lengths = [], []
    for relative in paths:
        body = read_post(folder / relative)
        if not body:  # e.g. Hugo's _index.md: front matter only
            skipped.append({"path": relative.as_posix(), "reason": "empty"})
            continue
        bodies.append(body)
        lengths.append({"path": relative.as_posix(), "characters": len(body)})
    if not bodies:
        raise AnatomyError(f"{folder}: no Markdown posts with text (.md, .markdown){skip_summary(skipped)}")
    return bodies, lengths, sorted(skipped, key=lambda s: s["path"])


def extract_file(path: Path) -> str:
    """A single file as the whole corpus: a .txt as it is, a Markdown post without front matter."""
    suffix = path.suffix.lower()
    if suffix not in (TEXT_SUFFIX, *MARKDOWN_SUFFIXES):
        raise AnatomyError(f"{path}: expected a folder of Markdown posts or a .txt file, got a '{path.suffix}' file")
    text = normalise_newlines(read_utf8(path)) if suffix == TEXT_SUFFIX else read_post(path)
    if not text.strip():
        raise AnatomyError(f"{path}: the file is empty")
    return text


def extract_corpus(src: str | os.PathLike) -> tuple[str, dict]:
    """One text from a folder of posts or a single file, and its statistics."""
    src = Path(src)
    if not src.exists():
        raise AnatomyError(f"{src}: no such file or folder (expected a folder of Markdown posts or a .txt file)")
    if src.is_dir():
        bodies, lengths, skipped = extract_folder(src)
        text = "\n\n".join(bodies)
    else:
        text = extract_file(src)
        lengths, skipped = [{"path": src.name, "characters": len(text)}], []

    stats = {
        "source": src.as_posix(),
        "posts": len(lengths),
        "characters": len(text),
        "distinct_characters": len(set(text)),
        "skipped": dict(sorted(Counter(s["reason"] for s in skipped).items())),
        "post_lengths": lengths,
        "skipped_files": skipped,
    }
    return text, stats


def skip_summary(skipped: list[dict]) -> str:
    counts = Counter(s["reason"] for s in skipped)
    if not counts:
        return " (the folder is empty)"
    return "; skipped: " + ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))


def write_corpus(out_dir: str | os.PathLike, text: str, stats: dict) -> None:
    out_dir = Path(out_dir)
    write_text(out_dir / "corpus.txt", text)
    write_json(out_dir / "stats.json", stats)


def report(stats: dict, out_dir: Path) -> str:
    skipped = stats["skipped"]
    skipped_text = ", ".join(f"{n} {reason}" for reason, n in skipped.items()) if skipped else "none"
    return "\n".join([
        f"corpus: {stats['source']} -> {out_dir / 'corpus.txt'}",
        f"  posts                {stats['posts']:,}",
        f"  characters           {stats['characters']:,}",
        f"  distinct characters  {stats['distinct_characters']:,}",
        f"  skipped files        {skipped_text}",
    ])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", type=Path, help="a folder of Markdown posts, or one .txt file")
    parser.add_argument("--out", type=Path, required=True, help="folder for corpus.txt and stats.json")


def run(args: argparse.Namespace) -> int:
    text, stats = extract_corpus(args.src)
    write_corpus(args.out, text, stats)
    print(report(stats, args.out))
    return 0
