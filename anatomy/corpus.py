"""A blog into one text: `python -m anatomy corpus SRC --out DIR`.

SRC is a folder of Markdown posts (Hugo, Jekyll, Hexo, Zola...) or a single `.txt` file. Posts
are read in a stable order (sorted relative path), their front matter is parsed and dropped
(YAML between `---` lines, TOML between `+++` lines, JSON as Hugo and Hexo write it, and Hexo's
forms closed by `---` or `;;;` alone), line endings become `\\n`, and the bodies are joined with
one blank line. Hidden files, files that are not Markdown and drafts are skipped and counted, so
nothing is mixed in, or left out, silently. Every post that cannot be used is reported in one run.

Writes DIR/corpus.txt and DIR/stats.json.
"""

from __future__ import annotations

import argparse
import json
import os
import re
from collections import Counter
from dataclasses import dataclass
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
DRAFTS_FOLDER = "_drafts"  # Hexo's and Jekyll's unpublished posts


@dataclass(frozen=True)
class Options:
    """The choices `anatomy corpus` offers on its command line (see add_arguments)."""

    skip_bad: bool = False  # leave out posts that cannot be used, listed in stats.json
    include_drafts: bool = False  # keep drafts: _drafts/, draft: true, published: false


class TomlHandler(BaseHandler):
    """python-frontmatter's `+++` splitting, parsed with the standard library's tomllib.

    (The library's own TOML handler needs the unmaintained `toml` package.)
    """

    FM_BOUNDARY = re.compile(r"^\+{3,}\s*$", re.MULTILINE)
    START_DELIMITER = END_DELIMITER = "+++"

    def load(self, fm: str) -> dict:
        return tomllib.loads(fm)


# Each format's parser, and the errors it raises for bad input. PyYAML's ValueError: it builds
# dates with datetime, which rejects 2016-02-30, month 13 and hour 24.
PARSERS = {
    "YAML": (YAMLHandler().load, (yaml.YAMLError, ValueError)),
    "TOML": (tomllib.loads, tomllib.TOMLDecodeError),
    "JSON": (json.loads, json.JSONDecodeError),
}

# Front matter between two delimiter lines: (splitter, delimiter, format)
DELIMITED = [(YAMLHandler(), "---", "YAML"), (TomlHandler(), "+++", "TOML")]

# Hexo also reads front matter closed by a `---` (YAML) or `;;;` (JSON) line but never opened.
# A first paragraph followed by a horizontal rule has that shape too, so the form counts only
# when line 1 sets a key Hexo's own front matter uses.
HEXO_KEY_LINE = re.compile(
    r'"?(title|date|updated|tags|categories|layout|permalink|comments|published|excerpt|lang)"?[ \t]*:'
)
HEXO_CLOSING_LINE = re.compile(r"^(-{3,}|;{3,})[ \t]*$", re.MULTILINE)
HEXO_JSON_LINE = re.compile(r"^;{3,}[ \t]*$", re.MULTILINE)
HUGO_JSON_START = re.compile(r'\{\s*["}]')  # `{` then a key or `}`: not `{%` or `{{<`


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


def split_front_matter(text: str, path: Path) -> tuple[dict, str]:
    """(metadata, body) of a post: its front matter, if any, parsed (so errors show) and removed.

    The forms: YAML between `---` lines (Jekyll, Hexo, Hugo), TOML between `+++` lines (Hugo),
    a JSON object (Hugo), JSON members between `;;;` lines (Hexo), and Hexo's forms with only
    the closing `---` or `;;;`.
    """
    for split in (split_delimited, split_hugo_json, split_hexo_json, split_hexo_closing_only):
        found = split(text, path)
        if found is not None:
            return found
    return {}, text


def split_delimited(text: str, path: Path) -> tuple[dict, str] | None:
    """YAML between `---` lines or TOML between `+++` lines, as python-frontmatter splits them."""
    for handler, delimiter, fmt in DELIMITED:
        if handler.detect(text):
            try:
                front, body = handler.split(text)
            except ValueError:
                raise never_closed(path, delimiter) from None
            return parse_front_matter(front, fmt, path), body
    return None


def split_hugo_json(text: str, path: Path) -> tuple[dict, str] | None:
    """Hugo's JSON front matter: one object at the top; the JSON parser finds where it ends."""
    if not HUGO_JSON_START.match(text):
        return None
    try:
        metadata, end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as err:
        raise AnatomyError(f"{path}: front matter opened with '{{' is not valid JSON: {json_error_detail(err)}") from None
    return metadata, text[end:]


def split_hexo_json(text: str, path: Path) -> tuple[dict, str] | None:
    """Hexo's JSON front matter: the members of an object, without braces, between `;;;` lines."""
    opening = HEXO_JSON_LINE.match(text)
    if opening is None:
        return None
    closing = HEXO_JSON_LINE.search(text, opening.end() + 1)
    if closing is None:
        raise never_closed(path, ";;;")
    # Sliced from the end of line 1, so the parser's line numbers are the file's.
    return parse_front_matter(text[opening.end():closing.start()], "JSON", path), text[closing.end():]


def split_hexo_closing_only(text: str, path: Path) -> tuple[dict, str] | None:
    """Hexo's front matter with only its closing line: `title: Hello` ... `---`, then the body."""
    if not HEXO_KEY_LINE.match(text):
        return None
    closing = HEXO_CLOSING_LINE.search(text)
    if closing is None:
        raise AnatomyError(
            f"{path}: unrecognised front matter: line 1 sets '{HEXO_KEY_LINE.match(text).group(1)}' "
            f"but no '---' or ';;;' line closes it"
        )
    fmt = "JSON" if closing.group(1).startswith(";") else "YAML"
    return parse_front_matter(text[:closing.start()], fmt, path), text[closing.end():]


def never_closed(path: Path, delimiter: str) -> AnatomyError:
    return AnatomyError(
        f"{path}: front matter opened with '{delimiter}' on line 1 is never closed "
        f"(expected a second '{delimiter}' line)"
    )


def parse_front_matter(front: str, fmt: str, path: Path) -> dict:
    """The key: value pairs of front matter in `fmt`; a clear error if they are not."""
    parse, parse_errors = PARSERS[fmt]
    if fmt == "JSON" and not front.lstrip().startswith("{"):
        front = "{" + front + "}"  # Hexo writes the members only, as JSON.parse('{' + text + '}')
    try:
        metadata = parse(front)
    except parse_errors as err:
        raise AnatomyError(f"{path}: front matter is not valid {fmt}: {parse_error_detail(err, fmt, front)}") from None
    if metadata is None:  # only comments, or nothing, between the delimiters
        return {}
    if not isinstance(metadata, dict):
        raise AnatomyError(f"{path}: front matter must be 'key: value' pairs, got a {type(metadata).__name__}")
    return metadata


def parse_error_detail(err: Exception, fmt: str, front: str) -> str:
    """The parser's complaint with its line and column. The front matter text handed to the
    parser starts on the file's line 1, so those are the file's line numbers too."""
    if fmt == "JSON":
        return json_error_detail(err)
    if fmt == "TOML":
        return str(err)  # tomllib already says "(at line L, column C)"
    if not isinstance(err, yaml.YAMLError):
        return impossible_date_detail(front, err)
    mark = getattr(err, "problem_mark", None)  # PyYAML marks count from 0
    if mark is None:
        return str(err)
    detail = f"{err.problem} at line {mark.line + 1}, column {mark.column + 1}"
    context_mark = getattr(err, "context_mark", None)
    if err.context and context_mark is not None:
        detail += f" ({err.context} started at line {context_mark.line + 1}, column {context_mark.column + 1})"
    return detail


def json_error_detail(err: json.JSONDecodeError) -> str:
    return f"{err.msg} at line {err.lineno}"


def is_draft(metadata: dict) -> bool:
    """Hugo's `draft: true`, or Jekyll's and Hexo's `published: false` (as booleans or text)."""
    return str(metadata.get("draft")).lower() == "true" or str(metadata.get("published")).lower() == "false"


def impossible_date_detail(front: str, err: ValueError) -> str:
    """Which YAML date does not exist, and on which line: PyYAML's ValueError names neither."""
    for node in yaml_scalars(yaml.compose(front, Loader=yaml.SafeLoader)):
        if node.tag == "tag:yaml.org,2002:timestamp":
            try:
                yaml.SafeLoader("").construct_yaml_timestamp(node)
            except ValueError as bad_date:
                return f"{node.value!r} at line {node.start_mark.line + 1} is not a date that exists ({bad_date})"
    return str(err)


def yaml_scalars(node):
    """Every scalar (key or value) under a composed YAML node."""
    if isinstance(node, yaml.ScalarNode):
        yield node
    elif isinstance(node, yaml.SequenceNode):
        for child in node.value:
            yield from yaml_scalars(child)
    elif isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            yield from yaml_scalars(key)
            yield from yaml_scalars(value)


def shown(path: str | os.PathLike) -> str:
    """A path as text that can be printed and written to JSON: a name that is not UTF-8 (say GBK
    bytes from a zip made on Windows) shows its bytes as \\xNN instead of failing later."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def is_utf8_name(name: str) -> bool:
    # os.walk hands bytes that are not UTF-8 over as lone surrogates, which cannot be encoded.
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def find_posts(folder: Path) -> tuple[list[Path], list[dict], list[dict]]:
    """Markdown files under `folder` (relative paths, sorted), the files skipped with why, and the
    files and folders whose names are not UTF-8 (never opened: their names could not be stored)."""
    posts, skipped, bad_names = [], [], []
    for root, dirs, files in os.walk(folder):
        root_path = Path(root)
        for name in sorted(dirs):
            if name.startswith("."):  # .git, .obsidian...: skipped whole, counted once
                skipped.append({"path": (root_path / name).relative_to(folder).as_posix() + "/", "reason": "hidden"})
        for name in sorted(dirs + files):
            if not is_utf8_name(name):
                where = shown(root_path / name)
                bad_names.append({"path": shown((root_path / name).relative_to(folder)),
                                  "error": f"{where}: the name is not UTF-8 (its bytes shown as \\xNN); rename it"})
        dirs[:] = [name for name in dirs if not name.startswith(".") and is_utf8_name(name)]
        for name in files:
            relative = (root_path / name).relative_to(folder)
            if not is_utf8_name(name):
                continue
            if name.startswith("."):
                skipped.append({"path": relative.as_posix(), "reason": "hidden"})
            elif not name.lower().endswith(MARKDOWN_SUFFIXES):
                skipped.append({"path": relative.as_posix(), "reason": "not markdown"})
            else:
                posts.append(relative)
    # Sorting on path parts gives the same order on every file system and OS.
    posts.sort(key=lambda p: p.parts)
    return posts, skipped, bad_names


def read_post(path: Path) -> tuple[dict, str]:
    """A Markdown post's metadata, and its text without the front matter."""
    return split_front_matter(normalise_newlines(read_utf8(path)), path)


def in_drafts_folder(relative: Path) -> bool:
    return DRAFTS_FOLDER in relative.parts[:-1]


def extract_folder(folder: Path, options: Options) -> tuple[list[str], list[dict], list[dict]]:
    """(post bodies, their lengths, skipped files) for a folder of posts.

    Every post is read before any error is raised, so one run reports all the bad ones.
    """
    paths, skipped, bad = find_posts(folder)
    bodies, lengths = [], []
    for relative in paths:
        name = relative.as_posix()
        if in_drafts_folder(relative) and not options.include_drafts:
            skipped.append({"path": name, "reason": "draft"})
            continue
        try:
            metadata, body = read_post(folder / relative)
        except AnatomyError as err:
            bad.append({"path": name, "error": str(err)})
            continue
        if is_draft(metadata) and not options.include_drafts:
            skipped.append({"path": name, "reason": "draft"})
            continue
        body = body.strip()
        if not body:  # e.g. Hugo's _index.md: front matter only
            skipped.append({"path": name, "reason": "empty"})
            continue
        bodies.append(body)
        lengths.append({"path": name, "characters": len(body)})
    if bad and not options.skip_bad:
        raise bad_files_error(folder, bad)
    skipped += [{"path": b["path"], "reason": "bad", "error": b["error"]} for b in bad]
    if not bodies:
        raise AnatomyError(f"{shown(folder)}: no Markdown posts with text (.md, .markdown){skip_summary(skipped)}")
    return bodies, lengths, sorted(skipped, key=lambda s: s["path"])


def bad_files_error(folder: Path, bad: list[dict]) -> AnatomyError:
    """One line per bad file, so that all of them can be fixed before the next run."""
    hint = "--skip-bad leaves {} out of the corpus".format("it" if len(bad) == 1 else "them")
    if len(bad) == 1:
        return AnatomyError(f"{bad[0]['error']} ({hint})")
    lines = [f"{shown(folder)}: {len(bad)} files cannot be used ({hint}):"]
    lines += [f"  {b['error']}" for b in sorted(bad, key=lambda b: b["path"])]
    return AnatomyError("\n".join(lines))


def extract_file(path: Path, options: Options) -> str:
    """A single file as the whole corpus: a .txt as it is, a Markdown post without front matter."""
    suffix = path.suffix.lower()
    if suffix not in (TEXT_SUFFIX, *MARKDOWN_SUFFIXES):
        raise AnatomyError(f"{path}: expected a folder of Markdown posts or a .txt file, got a '{path.suffix}' file")
    if suffix == TEXT_SUFFIX:
        text = normalise_newlines(read_utf8(path))
    else:
        metadata, text = read_post(path)
        if is_draft(metadata) and not options.include_drafts:
            raise AnatomyError(f"{path}: is a draft (draft: true or published: false); --include-drafts uses it")
        text = text.strip()
    if not text.strip():
        raise AnatomyError(f"{path}: the file is empty")
    return text


def extract_corpus(src: str | os.PathLike, **options) -> tuple[str, dict]:
    """One text from a folder of posts or a single file, and its statistics.

    options: those of `Options` (skip_bad, include_drafts), all off by default.
    """
    src, options = Path(src), Options(**options)
    if not src.exists():
        raise AnatomyError(f"{shown(src)}: no such file or folder (expected a folder of Markdown posts or a .txt file)")
    if src.is_dir():
        bodies, lengths, skipped = extract_folder(src, options)
        text = "\n\n".join(bodies)
    else:
        text = extract_file(src, options)
        lengths, skipped = [{"path": shown(src.name), "characters": len(text)}], []

    stats = {
        "source": shown(src.as_posix()),
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
    nearest = next(parent for parent in out_dir.parents if parent.exists())
    if not nearest.is_dir():
        raise AnatomyError(f"--out {shown(out_dir)}: {shown(nearest)} is a file, so no folder can be made there")


def remove_stale_tokens(out_dir: Path) -> None:
    """Delete the token files an earlier `anatomy tokenize` left in `out_dir`.

    They were made from the corpus this extraction replaces, so no later step may train on them,
    whether this extraction succeeds or fails. split.json goes first: it says the rest is complete.
    """
    from anatomy.tokenizer import SPLIT_FILE, TRAIN_FILE, VAL_FILE, VOCAB_FILE  # it imports this module

    for name in (SPLIT_FILE, VOCAB_FILE, TRAIN_FILE, VAL_FILE):
        (out_dir / name).unlink(missing_ok=True)


def report(stats: dict, out_dir: Path) -> str:
    skipped = stats["skipped"]
    skipped_text = ", ".join(f"{n} {reason}" for reason, n in skipped.items()) if skipped else "none"
    return "\n".join([
        f"corpus: {stats['source']} -> {shown(out_dir / 'corpus.txt')}",
        f"  posts                {stats['posts']:,}",
        f"  characters           {stats['characters']:,}",
        f"  distinct characters  {stats['distinct_characters']:,}",
        f"  skipped files        {skipped_text}",
    ])


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("src", type=Path, help="a folder of Markdown posts, or one .txt file")
    parser.add_argument("--out", type=Path, required=True,
                        help="folder for corpus.txt and stats.json (made if missing)")
    parser.add_argument("--skip-bad", action="store_true",
                        help="leave out the posts that cannot be used, listed in stats.json, instead of stopping")
    parser.add_argument("--include-drafts", action="store_true",
                        help="keep drafts (in _drafts/, or marked draft: true or published: false)")


def run(args: argparse.Namespace) -> int:
    check_out_folder(args.out)
    remove_stale_tokens(args.out)  # before extracting: a failed extraction must not leave them either
    text, stats = extract_corpus(args.src, skip_bad=args.skip_bad, include_drafts=args.include_drafts)
    write_corpus(args.out, text, stats)
    print(report(stats, args.out))
    return 0
