"""A post's front matter: found, parsed (so that its errors show, with their line) and cut off.

The forms: YAML between `---` lines (Jekyll, Hexo, Hugo; closed by `...` too, as Jekyll and Pandoc
read it), TOML between `+++` lines (Hugo), a JSON object (Hugo), JSON members between `;;;` lines
(Hexo), and Hexo's forms closed by `---` or `;;;` alone. Line endings become `\\n` first
(`normalise_newlines`): the patterns below expect them.

Dates stay the text they are written as: the corpus uses none, so a placeholder no calendar holds
(WordPress's `0000-00-00 00:00:00`, `9999-99-99`) costs no post.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

try:
    import tomllib  # Python 3.11+
except ModuleNotFoundError:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

import yaml
from frontmatter.default_handlers import BaseHandler

from anatomy.errors import AnatomyError


class TomlHandler(BaseHandler):
    """python-frontmatter's `+++` splitting, parsed with the standard library's tomllib.

    (The library's own TOML handler needs the unmaintained `toml` package.)
    """

    FM_BOUNDARY = re.compile(r"^\+{3,}\s*$", re.MULTILINE)
    START_DELIMITER = END_DELIMITER = "+++"

    def load(self, fm: str) -> dict:
        return tomllib.loads(fm)


class TextDatesLoader(yaml.SafeLoader):
    """PyYAML's safe loader, with dates left as their text. Built with datetime, a date no calendar
    holds (2016-02-30, WordPress's 0000-00-00 00:00:00) refused the whole post over a field the
    corpus never reads."""


TextDatesLoader.add_constructor("tag:yaml.org,2002:timestamp", yaml.SafeLoader.construct_yaml_str)


def load_yaml(front: str):
    return yaml.load(front, Loader=TextDatesLoader)


# Each format's parser, and the errors it raises for bad input
PARSERS = {
    "YAML": (load_yaml, yaml.YAMLError),
    "TOML": (tomllib.loads, tomllib.TOMLDecodeError),
    "JSON": (json.loads, json.JSONDecodeError),
}

# YAML front matter: opened by a `---` line 1, closed by the next `---` line or YAML's own end of
# document, `...` (Jekyll and Pandoc read both). Missing the `...`, a later `---` rule closed it
# instead, and the heading between was read as a YAML comment.
YAML_OPENING = re.compile(r"-{3,}[ \t]*$", re.MULTILINE)
YAML_CLOSING = re.compile(r"^(?:-{3,}|\.{3})[ \t]*$", re.MULTILINE)

# Hexo also reads front matter closed by a `---` (YAML) or `;;;` (JSON) line but never opened.
# A first paragraph followed by a horizontal rule has that shape too, so the form counts only
# when line 1 sets a key Hexo's own front matter uses.
HEXO_KEY_LINE = re.compile(
    r'"?(title|date|updated|tags|categories|layout|permalink|comments|published|excerpt|lang)"?[ \t]*:'
)
HEXO_CLOSING_LINE = re.compile(r"^(-{3,}|;{3,})[ \t]*$", re.MULTILINE)
HEXO_JSON_LINE = re.compile(r"^;{3,}[ \t]*$", re.MULTILINE)
HUGO_JSON_START = re.compile(r'\{\s*["}]')  # `{` then a key or `}`: not `{%` or `{{<`


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
    """YAML between `---` and `---` or `...` lines, or TOML between `+++` lines (as
    python-frontmatter splits it)."""
    opening = YAML_OPENING.match(text)
    if opening is not None:
        closing = YAML_CLOSING.search(text, opening.end() + 1)
        if closing is None:
            raise never_closed(path, "---", "a '---' or '...' line")
        # Sliced from the end of line 1, so the parser's line numbers are the file's.
        return parse_front_matter(text[opening.end() : closing.start()], "YAML", path), text[closing.end() :]
    handler = TomlHandler()
    if not handler.detect(text):
        return None
    try:
        front, body = handler.split(text)
    except ValueError:
        raise never_closed(path, "+++") from None
    return parse_front_matter(front, "TOML", path), body


def split_hugo_json(text: str, path: Path) -> tuple[dict, str] | None:
    """Hugo's JSON front matter: one object at the top; the JSON parser finds where it ends."""
    if not HUGO_JSON_START.match(text):
        return None
    try:
        metadata, end = json.JSONDecoder().raw_decode(text)
    except json.JSONDecodeError as err:
        detail = json_error_detail(err)
        raise AnatomyError(f"{path}: front matter opened with '{{' is not valid JSON: {detail}") from None
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
    return parse_front_matter(text[opening.end() : closing.start()], "JSON", path), text[closing.end() :]


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
    return parse_front_matter(text[: closing.start()], fmt, path), text[closing.end() :]


def never_closed(path: Path, delimiter: str, closing: str | None = None) -> AnatomyError:
    closing = closing or f"a second '{delimiter}' line"
    return AnatomyError(
        f"{path}: front matter opened with '{delimiter}' on line 1 is never closed (expected {closing})"
    )


def parse_front_matter(front: str, fmt: str, path: Path) -> dict:
    """The key: value pairs of front matter in `fmt`; a clear error if they are not."""
    parse, parse_errors = PARSERS[fmt]
    if fmt == "JSON" and not front.lstrip().startswith("{"):
        front = "{" + front + "}"  # Hexo writes the members only, as JSON.parse('{' + text + '}')
    try:
        metadata = parse(front)
    except parse_errors as err:
        raise AnatomyError(f"{path}: front matter is not valid {fmt}: {parse_error_detail(err, fmt)}") from None
    if metadata is None:  # only comments, or nothing, between the delimiters
        return {}
    if not isinstance(metadata, dict):
        raise AnatomyError(f"{path}: front matter must be 'key: value' pairs, got a {type(metadata).__name__}")
    return metadata


def parse_error_detail(err: Exception, fmt: str) -> str:
    """The parser's complaint with its line and column. The front matter text handed to the
    parser starts on the file's line 1, so those are the file's line numbers too."""
    if fmt == "JSON":
        return json_error_detail(err)
    if fmt == "TOML":
        return str(err)  # tomllib already says "(at line L, column C)"
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
    return says(metadata, "draft", "true") or says(metadata, "published", "false")


def says(metadata: dict, key: str, word: str) -> bool:
    """Whether `key` is the boolean or the text `word`. Only those are turned into text: a list
    built of YAML aliases (a: &a [x, x], b: &b [*a, *a], ...) would print exponentially long."""
    value = metadata.get(key)
    return isinstance(value, (bool, str)) and str(value).lower() == word
