"""A blog into one text: `python -m anatomy corpus SRC --out DIR`.

SRC is a folder of Markdown posts (Hugo, Jekyll, Hexo, Zola...) or a single `.txt` file. Posts
are read in a stable order (sorted relative path), their front matter is parsed and dropped
(YAML between `---` lines, TOML between `+++` lines, JSON as Hugo and Hexo write it, and Hexo's
forms closed by `---` or `;;;` alone), line endings become `\\n`, and the bodies are joined with
one blank line. Hidden files, files that are not Markdown and drafts are skipped and counted, so
nothing is mixed in, or left out, silently; so are folders linked in (not followed), folders that
cannot be read and Markdown names that are no regular file (a named pipe, a link to a device: never
opened, since reading one waits for good or never ends), each named. Every post that cannot be used
is reported in one run; so is a post too long to be one (POST_LIMIT).

Outside code, HTML comments (Hexo's `<!-- more -->`) and template tags (`{% ... %}`, Hugo's
`{{< ... >}}`) are dropped and raw HTML becomes its text; the Markdown itself and all code stay as
written (`--keep-markup` keeps everything). The statistics count what each kind removed.

Writes DIR/corpus.txt and DIR/stats.json, which also names the posts whose characters occur
nowhere else (each costs embedding parameters for a character the model sees once).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import stat
import sys
import unicodedata
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from typing import Iterator

try:
    import tomllib  # Python 3.11+
except ModuleNotFoundError:  # Python 3.10: the same parser, published as tomli
    import tomli as tomllib

import yaml
from frontmatter.default_handlers import BaseHandler, YAMLHandler
from markdown_it import MarkdownIt
from markdown_it.common.html_re import HTML_TAG_RE

from anatomy.files.atomic import file_kind, write_bytes
from anatomy.config import ModelConfig
from anatomy.errors import AnatomyError
from anatomy.data.text_files import read_utf8
from anatomy.data.tokenizer import DEFAULT_CTX_LEN, SPLIT_FILE, TRAIN_FILE, VAL_FILE, VOCAB_FILE, min_corpus_length

MARKDOWN_SUFFIXES = (".md", ".markdown")
TEXT_SUFFIX = ".txt"
DRAFTS_FOLDER = "_drafts"  # Hexo's and Jekyll's unpublished posts
# The most one post may hold. The whole default corpus is 0.3 MB and the scale study's largest
# text about 24 MB; a "post" of more than 64 MiB is something else (a dump, a log renamed .md),
# and reading it whole would take several times its size in memory.
POST_LIMIT = 64 * 1024**2
NOT_REGULAR = "not a regular file"  # the reason a Markdown name that is no file is skipped


@dataclass(frozen=True)
class Options:
    """The choices `anatomy corpus` offers on its command line (see add_arguments)."""

    skip_bad: bool = False  # leave out posts that cannot be used, listed in stats.json
    include_drafts: bool = False  # keep drafts: _drafts/, draft: true, published: false
    keep_markup: bool = False  # keep HTML comments, template tags and raw HTML as written


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


def yaml_scalars(root):
    """Every scalar (key or value) under a composed YAML node, in document order, each once. An
    alias is the very node it names, so walking it again each time would take exponential time
    on an alias bomb (a: &a [x, x], b: &b [*a, *a], c: &c [*b, *b], ...)."""
    seen, stack = set(), [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.ScalarNode):
            yield node
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
        elif isinstance(node, yaml.MappingNode):
            stack.extend(reversed([child for pair in node.value for child in pair]))


# ---------------------------------------------------------------------------------------------
# Markup: HTML comments, template tags and raw HTML, removed outside code
# ---------------------------------------------------------------------------------------------

COMMONMARK = MarkdownIt("commonmark")
BLANK_LINE = r"\n[ \t]*\n"
NO_BLANK_LINE = rf"(?:(?!{BLANK_LINE}).)*?"  # markup never spans a blank line; a stray `{%` stays

# Template code blocks: their content is code even outside a Markdown fence. Hexo's codeblock
# and code, Jekyll's highlight, Liquid's raw (no tags inside), Hugo's highlight shortcode.
# An opening holds no blank line and no second opening, like any template tag (below); its
# closing is looked for once per kind, so a thousand unclosed `{% raw %}` cost one search.
LIQUID_CODE_OPENING = re.compile(
    r"\{%-?\s*(?P<tag>codeblock|code|highlight|raw)\b(?:(?!\n[ \t]*\n|\{%).)*?%\}", re.DOTALL
)
HUGO_CODE_OPENING = re.compile(r"\{\{[<%]\s*highlight\b(?:(?!\n[ \t]*\n|\{\{).)*?[>%]\}\}", re.DOTALL)


def liquid_closing(opening: re.Match) -> re.Pattern:
    return re.compile(r"\{%-?\s*end" + opening["tag"] + r"\s*-?%\}")


def hugo_closing(opening: re.Match) -> re.Pattern:
    return re.compile(r"\{\{[<%]\s*/highlight\s*[>%]\}\}")


# A code span, kept as written: `x`, ``a ` b``.
CODE_SPAN = re.compile(rf"(?<!`)(?P<ticks>`+)(?!`){NO_BLANK_LINE}(?<!`)(?P=ticks)(?!`)", re.DOTALL)


def tag_pattern(opening: str, closing: str) -> str:
    """A template tag from `opening` to the first `closing`, within one paragraph. A tag never
    holds a second `opening`: a stray `{%` is then given up at the next `{%` instead of being
    searched past to the paragraph's end, which made a paragraph of stray ones quadratic."""
    inside = rf"(?:(?!{BLANK_LINE}|{re.escape(opening)}).)*?"
    return re.escape(opening) + inside + re.escape(closing)


# Liquid and Nunjucks tags {% ... %} (Jekyll, Hexo) and Hugo's shortcodes {{< ... >}}, {{% ... %}}
TEMPLATE_TAG = re.compile(
    "|".join(tag_pattern(opening, closing) for opening, closing in (("{%", "%}"), ("{{<", ">}}"), ("{{%", "%}}"))),
    re.DOTALL,
)

# What CommonMark counts as raw HTML (a tag, comment, declaration...), as markdown-it's own parser
# matches it at a `<`. Any other `<` is text: `$x<y$`, `a <- b`, an autolink <https://...>.
COMMONMARK_HTML = re.compile(HTML_TAG_RE.pattern.removeprefix("^"))  # older versions anchor with ^

# An `&` that does not start a character reference as CommonMark reads them (`&name;`, `&#123;`):
# text, where an HTML parser would also decode `&para` in `?a=1&para=2`.
BARE_AMPERSAND = re.compile(r"&(?!#[0-9]{1,7};|#[xX][0-9a-fA-F]{1,6};|[A-Za-z][A-Za-z0-9]{1,31};)")

MARKUP_KINDS = ("html_comments", "template_tags", "html_tags", "emptied_lines")


class MarkupTally:
    """Markup removed, by kind: how many pieces, and how many characters they held."""

    def __init__(self):
        self.count, self.characters = Counter(), Counter()

    def add(self, kind: str, count: int, characters: int) -> None:
        self.count[kind] += count
        self.characters[kind] += characters

    def as_dict(self) -> dict:
        return {kind: {"count": self.count[kind], "characters": self.characters[kind]} for kind in MARKUP_KINDS}


LINE_BREAK = object()  # where HTML ends a line: "\n", unless the source already does


class HtmlToText(HTMLParser):
    """Raw HTML into the text a reader sees, with Python's own HTML parser.

    Tags and comments go, each leaving `marker` where it was (so lines that held nothing else
    can go too); text between them stays as written; entities (&nbsp;, &lt;) become their
    characters; script and style content goes.
    """

    HIDDEN = frozenset({"script", "style"})
    # <br>, and the end of a block: each ends a line of the text
    ENDS_A_LINE = frozenset(
        {"br", "p", "div", "li", "tr", "blockquote", "pre", "table", "h1", "h2", "h3", "h4", "h5", "h6"}
    )

    def __init__(self, marker: str):
        super().__init__(convert_charrefs=True)
        self.marker = marker
        self.parts: list = []
        self.hidden_depth = 0
        self.tags = self.comments = self.comment_characters = 0

    def handle_starttag(self, tag, attrs):
        self.tags += 1
        self.hidden_depth += tag in self.HIDDEN
        self.parts.append(LINE_BREAK if tag == "br" else self.marker)

    def handle_startendtag(self, tag, attrs):  # <br/>, <img ... />: one tag, not two
        self.tags += 1
        self.parts.append(LINE_BREAK if tag == "br" else self.marker)

    def handle_endtag(self, tag):
        self.tags += 1
        if tag in self.HIDDEN and self.hidden_depth:
            self.hidden_depth -= 1
        self.parts.append(LINE_BREAK if tag in self.ENDS_A_LINE else self.marker)

    def handle_data(self, data):
        self.parts.append(self.marker if self.hidden_depth else data)

    def handle_comment(self, data):
        self.comments += 1
        self.comment_characters += len("<!--") + len(data) + len("-->")
        self.parts.append(self.marker)

    def handle_decl(self, decl):  # <!DOCTYPE html>
        self.handle_startendtag(decl, [])

    handle_pi = unknown_decl = handle_decl

    def text(self) -> str:
        """The parts joined. A line break becomes "\\n", unless the next text, past other tags,
        starts a line anyway. Read from the end, so that the next part is known at each break
        (looking ahead from every break instead made a page of <p> paragraphs quadratic)."""
        resolved, following = [], ""
        for part in reversed(self.parts):
            if part is LINE_BREAK:
                starts_line = isinstance(following, str) and following.startswith("\n")
                resolved.append(self.marker if starts_line else "\n")
            else:
                resolved.append(part)
            if part != self.marker:
                following = part
        return "".join(reversed(resolved))


def clean_markup(body: str, tally: MarkupTally) -> str:
    """The body without HTML comments or template tags, its raw HTML turned into text; what
    went is added to `tally`.

    Code (fenced, indented, inline, and template code blocks) and the Markdown itself (headings,
    lists, quotes) are kept as written: the model learns that skeleton.
    """
    if not any(sign in body for sign in "<&{"):
        return body
    marker = unused_character(body)
    pieces = [text if is_code else clean_prose(text, marker, tally) for is_code, text in code_and_prose(body)]
    return drop_emptied_lines("".join(pieces), marker, tally)


def unused_character(text: str) -> str:
    """A stand-in for removed markup that cannot clash with the text: a Unicode noncharacter
    (U+FDD0..U+FDEF, set aside for a program's internal use) that the text does not hold."""
    return next(char for char in map(chr, range(0xFDD0, 0xFDF0)) if char not in text)


def code_and_prose(body: str) -> list[tuple[bool, str]]:
    """The body cut into (is_code, text) pieces that join back into it."""
    pieces = markdown_code_blocks(body)
    pieces = split_out_code(pieces, lambda text: template_code_spans(text, LIQUID_CODE_OPENING, liquid_closing))
    pieces = split_out_code(pieces, lambda text: template_code_spans(text, HUGO_CODE_OPENING, hugo_closing))
    return split_out_code(pieces, lambda text: (match.span() for match in CODE_SPAN.finditer(text)))


def markdown_code_blocks(body: str) -> list[tuple[bool, str]]:
    """Fenced and indented code blocks, where a CommonMark parser finds them (in lists and quotes
    too, and not in an HTML block), as code; the rest as prose."""
    line_starts = [0]
    for line in body.split("\n"):
        line_starts.append(line_starts[-1] + len(line) + 1)
    pieces, position = [], 0
    for token in COMMONMARK.parse(body):
        if token.type in ("fence", "code_block") and token.map:
            start, end = line_starts[token.map[0]], line_starts[token.map[1]]
            pieces += [(False, body[position:start]), (True, body[start:end])]
            position = end
    return pieces + [(False, body[position:])]


def split_out_code(pieces: list[tuple[bool, str]], code_spans) -> list[tuple[bool, str]]:
    """The prose pieces cut further: each (start, end) that `code_spans(text)` yields becomes code."""
    result = []
    for is_code, text in pieces:
        position = 0
        if not is_code:
            for start, end in code_spans(text):
                result += [(False, text[position:start]), (True, text[start:end])]
                position = end
        result.append((is_code, text[position:]))
    return result


def template_code_spans(text: str, opening_pattern: re.Pattern, closing_of) -> Iterator[tuple[int, int]]:
    """Where the code of each template code block lies: from an opening tag to the first closing
    that `closing_of(opening)` matches. Its tags stay prose, where they are removed as markup.
    A closing not found is remembered: no later opening of that kind can find one either."""
    position, unclosed = 0, set()
    while opening := opening_pattern.search(text, position):
        closing_pattern = closing_of(opening)
        closing = None if closing_pattern.pattern in unclosed else closing_pattern.search(text, opening.end())
        if closing is None:
            unclosed.add(closing_pattern.pattern)
            position = opening.end()
            continue
        yield opening.end(), closing.start()
        position = closing.end()


def clean_prose(text: str, marker: str, tally: MarkupTally) -> str:
    tags = [match.group() for match in TEMPLATE_TAG.finditer(text)]
    if tags:
        tally.add("template_tags", len(tags), sum(map(len, tags)))
        text = TEMPLATE_TAG.sub(marker, text)
    if "<" in text or "&" in text:
        text = html_to_text(text, marker, tally)
    return text


def html_to_text(text: str, marker: str, tally: MarkupTally) -> str:
    parser = HtmlToText(marker)
    parser.feed(as_html(text))
    parser.close()
    result = parser.text()
    tally.add("html_comments", parser.comments, parser.comment_characters)
    removed = len(text.replace(marker, "")) - len(result.replace(marker, ""))  # markers: template tags
    tally.add("html_tags", parser.tags, removed - parser.comment_characters)  # entities decoded too
    return result


def as_html(text: str) -> str:
    """Prose as the HTML parser should read it: each `&` and `<` that CommonMark reads as text
    escaped, so that the parser gives it back as text. Raw HTML is passed over whole, so that a
    `<` inside a comment or an attribute is not looked at again."""
    text = BARE_AMPERSAND.sub("&amp;", text)
    last_closing = {closing: text.rfind(closing) for _, closing in RAW_HTML_CLOSINGS}
    pieces, position = [], 0
    while (less := text.find("<", position)) >= 0:
        html = None if html_never_closed(text, less, last_closing) else COMMONMARK_HTML.match(text, less)
        end = html.end() if html else less + 1
        pieces += [text[position:less], text[less:end] if html else "&lt;"]
        position = end
    return "".join(pieces) + text[position:]


# Raw HTML that runs to a closing string. Where none follows, the regex would search to the end
# of the text from each opening: 8,000 unclosed `<!--` took 12 s.
RAW_HTML_CLOSINGS = (("<!--", "-->"), ("<?", "?>"), ("<![CDATA[", "]]>"), ("<!", ">"))


def html_never_closed(text: str, less: int, last_closing: dict[str, int]) -> bool:
    """Whether the `<` at `less` opens raw HTML whose closing string comes nowhere after it."""
    for opening, closing in RAW_HTML_CLOSINGS:
        if text.startswith(opening, less):
            return last_closing[closing] < less
    return False


def drop_emptied_lines(text: str, marker: str, tally: MarkupTally) -> str:
    """Drop the lines that held nothing but markup, and a blank line that would then double
    another (`<!-- more -->` between two paragraphs leaves one blank line), then the markers."""
    kept, dropped, after_dropped = [], 0, False
    for line in text.split("\n"):
        blank = not line.strip()
        if marker in line and not line.replace(marker, "").strip():
            dropped, after_dropped = dropped + 1, True
        elif after_dropped and blank and (not kept or not kept[-1].strip()):
            dropped += 1
        else:
            kept.append(line.replace(marker, ""))
            after_dropped = after_dropped and blank
    result = "\n".join(kept)
    tally.add("emptied_lines", dropped, len(text.replace(marker, "")) - len(result))
    return result


def shown(path: str | os.PathLike) -> str:
    """A path (or a message naming one) as text that can be printed and written to JSON: a name
    that is not UTF-8 (say GBK bytes from a zip made on Windows) shows its bytes as \\xNN."""
    return os.fsencode(path).decode("utf-8", "backslashreplace")


def is_utf8_name(name: str) -> bool:
    # os.walk hands bytes that are not UTF-8 over as lone surrogates, which cannot be encoded.
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def find_posts(folder: Path) -> tuple[list[Path], list[dict], list[dict]]:
    """Markdown files under `folder` (relative paths, sorted), the files and folders skipped with
    why, and those that cannot be used: names that are not UTF-8 (never opened: their names could
    not be stored) and folders that cannot be read. A folder's entries end in "/"."""
    posts, skipped, bad = [], [], []

    def unreadable(err: OSError) -> None:  # os.walk's report of a folder it cannot list
        if Path(err.filename) == folder:
            raise AnatomyError(f"{shown(folder)}: cannot read the folder: {err.strerror}")
        entry = Path(err.filename).relative_to(folder).as_posix() + "/"
        bad.append({"path": shown(entry), "error": f"{shown(err.filename)}: cannot read the folder: {err.strerror}"})

    for root, dirs, files in os.walk(folder, onerror=unreadable):
        root_path = Path(root)
        for name in sorted(dirs + files):
            if not is_utf8_name(name):
                where = shown(root_path / name)
                bad.append(
                    {
                        "path": shown((root_path / name).relative_to(folder)) + ("/" if name in dirs else ""),
                        "error": f"{where}: the name is not UTF-8 (its bytes shown as \\xNN); rename it",
                    }
                )
        followed = []
        for name in sorted(dirs):
            if not is_utf8_name(name):
                continue
            entry = (root_path / name).relative_to(folder).as_posix() + "/"
            if name.startswith("."):  # .git, .obsidian...: skipped whole, counted once
                skipped.append({"path": entry, "reason": "hidden"})
            elif (root_path / name).is_symlink():
                # Not followed (a link can lead out of the blog, or back into it, round and round),
                # as the workflow's list of corpus files does not follow it: named instead.
                skipped.append({"path": entry, "reason": "linked folder"})
            else:
                followed.append(name)
        dirs[:] = followed
        for name in files:
            relative = (root_path / name).relative_to(folder)
            if not is_utf8_name(name):
                continue
            if name.startswith("."):
                skipped.append({"path": relative.as_posix(), "reason": "hidden"})
            elif not name.lower().endswith(MARKDOWN_SUFFIXES):
                skipped.append({"path": relative.as_posix(), "reason": "not markdown"})
            elif (kind := special_file_kind(root_path / name)) is not None:
                skipped.append({"path": relative.as_posix(), "reason": NOT_REGULAR, "kind": kind})
            else:
                posts.append(relative)
    # Sorting on path parts gives the same order on every file system and OS.
    posts.sort(key=lambda p: p.parts)
    return posts, skipped, bad


def special_file_kind(path: Path) -> str | None:
    """What a Markdown name is when it is no regular file (a link is followed): "a named pipe",
    "a character device"...; None for a regular file, and for a path that cannot be looked at
    (a link to nothing: reading it says why, as for any post)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return None if stat.S_ISREG(mode) else file_kind(mode)


def read_post(path: Path) -> tuple[dict, str]:
    """A Markdown post's metadata, and its text without the front matter."""
    text = read_utf8(path, POST_LIMIT, "a Markdown post")
    return split_front_matter(normalise_newlines(text), path)


def front_matter_warning(path: Path) -> str | None:
    """For `anatomy tokenize` given a post instead of a corpus.txt: it tokenizes every character,
    so the post's front matter (title, date, tags) would become training text."""
    if path.suffix.lower() not in MARKDOWN_SUFFIXES or not path.is_file():
        return None
    text = normalise_newlines(read_utf8(path))
    try:
        has_front_matter = split_front_matter(text, path)[1] != text
    except AnatomyError:  # front matter that does not parse is front matter all the same
        has_front_matter = True
    if not has_front_matter:
        return None
    return (
        f"{shown(path)} looks like a Markdown post with front matter, which is tokenized as text; "
        f"`python -m anatomy corpus {shown(path)} --out DIR` strips it"
    )


def in_drafts_folder(relative: Path) -> bool:
    return DRAFTS_FOLDER in relative.parts[:-1]


def post_text(body: str, options: Options, tally: MarkupTally) -> str:
    """A post's body as it enters the corpus: markup removed (unless kept), outer blank lines too."""
    if not options.keep_markup:
        body = clean_markup(body, tally)
    return body.strip()


def extract_folder(folder: Path, options: Options) -> tuple[list[str], list[dict], list[dict], MarkupTally]:
    """(post bodies, their lengths, skipped files, markup removed) for a folder of posts.

    Every post is read before any error is raised, so one run reports all the bad ones.
    """
    paths, skipped, bad = find_posts(folder)
    bodies, lengths, tally = [], [], MarkupTally()
    for relative in paths:
        name = relative.as_posix()
        if in_drafts_folder(relative) and not options.include_drafts:
            skipped.append({"path": name, "reason": "draft"})
            continue
        try:
            metadata, body = read_post(folder / relative)
        except AnatomyError as err:
            bad.append({"path": name, "error": shown(str(err))})
            continue
        if is_draft(metadata) and not options.include_drafts:
            skipped.append({"path": name, "reason": "draft"})
            continue
        body = post_text(body, options, tally)
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
    return bodies, lengths, sorted(skipped, key=lambda s: s["path"]), tally


def bad_files_error(folder: Path, bad: list[dict]) -> AnatomyError:
    """One line per bad file, so that all of them can be fixed before the next run."""
    hint = site_root_hint(folder, bad) or "--skip-bad leaves {} out of the corpus".format(
        "it" if len(bad) == 1 else "them"
    )
    if len(bad) == 1:
        return AnatomyError(f"{bad[0]['error']}; {hint}")
    lines = [f"{shown(folder)}: {len(bad)} files cannot be used ({hint}):"]
    lines += [f"  {b['error']}" for b in sorted(bad, key=lambda b: b["path"])]
    return AnatomyError("\n".join(lines))


# A site's folder of templates for new posts (front matter full of `{{ .Date }}`, which no parser
# reads), and the posts folders to point at instead, first the usual one.
SITE_TEMPLATES = {"archetypes": ("Hugo", ("content/posts", "content")), "scaffolds": ("Hexo", ("source/_posts",))}


def site_root_hint(folder: Path, bad: list[dict]) -> str | None:
    """When bad files are a site's post templates, SRC is the site's root: where its posts are."""
    for templates in (b["path"].split("/")[0] for b in bad):
        if templates in SITE_TEMPLATES:
            site, candidates = SITE_TEMPLATES[templates]
            posts = next((folder / c for c in candidates if (folder / c).is_dir()), folder / candidates[0])
            return (
                f"{shown(folder)} looks like the root of a {site} site ({templates}/ holds templates for new "
                f"posts, not posts): give its posts folder instead, e.g. {shown(posts)}"
            )
    return None


def extract_file(path: Path, options: Options) -> tuple[str, MarkupTally]:
    """A single file as the whole corpus: a .txt as it is, a Markdown post as a post in a folder."""
    suffix, tally = path.suffix.lower(), MarkupTally()
    if suffix not in (TEXT_SUFFIX, *MARKDOWN_SUFFIXES):
        raise AnatomyError(f"{path}: expected a folder of Markdown posts or a .txt file, got a '{path.suffix}' file")
    if suffix == TEXT_SUFFIX:
        text = normalise_newlines(read_utf8(path))
    else:
        metadata, text = read_post(path)
        if is_draft(metadata) and not options.include_drafts:
            raise AnatomyError(f"{path}: is a draft (draft: true or published: false); --include-drafts uses it")
        text = post_text(text, options, tally)
    if not text.strip():
        raise AnatomyError(f"{path}: the file is empty")
    return text, tally


def extract_corpus(src: str | os.PathLike, **options) -> tuple[str, dict]:
    """One text from a folder of posts or a single file, and its statistics.

    options: those of `Options` (skip_bad, include_drafts, keep_markup), all off by default.
    """
    src, options = Path(src), Options(**options)
    if not src.exists():
        raise AnatomyError(f"{shown(src)}: no such file or folder (expected a folder of Markdown posts or a .txt file)")
    if src.is_dir():
        bodies, lengths, skipped, tally = extract_folder(src, options)
    else:
        text, tally = extract_file(src, options)
        bodies, lengths, skipped = [text], [{"path": shown(src.name), "characters": len(text)}], []
    text = "\n\n".join(bodies)

    stats = {
        "source": shown(src.as_posix()),
        "posts": len(lengths),
        "characters": len(text),
        "distinct_characters": len(set(text)),
        "skipped": dict(sorted(Counter(s["reason"] for s in skipped).items())),
        "odd_characters": odd_characters(text),
        "seen_once": seen_once(text, bodies, [post["path"] for post in lengths]),
        "markup_kept": options.keep_markup,
        "markup_removed": tally.as_dict(),
        "post_lengths": lengths,
        "skipped_files": skipped,
    }
    return text, stats


# Characters rarely meant as text, by kind, as the report names them. Zero-width ones are invisible:
# a space, the (non-)joiners, the word joiner, and a byte-order mark inside the text.
ODD_KINDS = {"control": "control", "private_use": "private use", "zero_width": "zero width", "replacement": "U+FFFD"}
ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff")


def odd_kind(char: str) -> str | None:
    """Characters rarely meant as text: control characters (newline and tab are meant), private-use
    characters (icon fonts, text decoded with the wrong table), zero-width characters (pasted from
    web pages and chat) and U+FFFD, which a decoder leaves where bytes were lost."""
    if char == "\ufffd":
        return "replacement"
    if char in ZERO_WIDTH:
        return "zero_width"
    category = unicodedata.category(char)
    if category == "Cc" and char not in "\n\t":
        return "control"
    return "private_use" if category == "Co" else None


def odd_characters(text: str) -> dict:
    """How many odd characters of each kind the text holds, and which: each becomes a token."""
    found = {char: text.count(char) for char in sorted(set(text)) if odd_kind(char)}
    counts = Counter()
    for char, count in found.items():
        counts[odd_kind(char)] += count
    return {
        **{kind: counts[kind] for kind in ODD_KINDS},
        "found": {f"U+{ord(char):04X}": count for char, count in found.items()},
    }


EMBEDDING_WIDTH = ModelConfig.d_model  # the default d_model, at which the cost below is counted
POSTS_NAMED = 5  # the posts seen_once names, most first


def seen_once(text: str, bodies: list[str], paths: list[str]) -> dict:
    """The characters that occur once in the whole corpus, what they cost, and the posts they come
    from (most first). Each is a vocabulary entry the model sees once, too rarely to learn, yet it
    costs 2 x d_model parameters: a row of the input embedding and one of the output projection
    (the two are not tied). One post (a table of characters, say) can bring thousands."""
    once = {char for char, count in Counter(text).items() if count == 1}
    by_post = Counter({path: len(once.intersection(body)) for path, body in zip(paths, bodies)})
    return {
        "characters": len(once),
        "d_model": EMBEDDING_WIDTH,
        "embedding_parameters": 2 * EMBEDDING_WIDTH * len(once),
        "posts": [{"path": path, "characters": n} for path, n in by_post.most_common(POSTS_NAMED) if n],
    }


def size_warning(characters: int, drafts: int = 0) -> str | None:
    """A warning when the tokenize step will refuse the corpus at its default context length."""
    minimum = min_corpus_length(DEFAULT_CTX_LEN + 1)
    if characters >= minimum:
        return None
    more = f"add posts, or bring back the drafts left out ({drafts:,}) with --include-drafts" if drafts else "add posts"
    return (
        f"{characters:,} characters are too few to train on at ctx_len {DEFAULT_CTX_LEN}: tokenizing needs "
        f"at least {minimum:,}; {more}, or use a shorter context: `anatomy tokenize --ctx-len N`, then train "
        "with ctx_len=N"
    )


def skip_summary(skipped: list[dict]) -> str:
    counts = Counter(s["reason"] for s in skipped)
    if not counts:
        return " (the folder is empty)"
    return "; skipped: " + ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))


def write_corpus(out_dir: str | os.PathLike, text: str, stats: dict) -> None:
    """Both files or neither: both are encoded before either is written."""
    out_dir = Path(out_dir)
    corpus = text.encode("utf-8")
    stats_json = (json.dumps(stats, indent=2, ensure_ascii=False) + "\n").encode("utf-8")
    write_bytes(out_dir / "corpus.txt", corpus)
    write_bytes(out_dir / "stats.json", stats_json)


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
    """A file system's refusal to write in --out (a read-only folder, a full disk) as one line."""
    try:
        yield
    except OSError as err:
        where = shown(err.filename or out_dir)
        raise AnatomyError(f"--out {shown(out_dir)}: cannot write {where}: {err.strerror}") from None


def remove_stale_tokens(out_dir: Path) -> None:
    """Delete the token files an earlier `anatomy tokenize` left in `out_dir`: they were made from
    the corpus.txt beside them, so no later step may train on them once it is replaced or gone.
    split.json goes first: it says the rest is complete."""
    for name in (SPLIT_FILE, VOCAB_FILE, TRAIN_FILE, VAL_FILE):
        (out_dir / name).unlink(missing_ok=True)


def report(stats: dict, out_dir: Path) -> str:
    skipped = stats["skipped"]
    skipped_text = ", ".join(f"{n} {reason}" for reason, n in skipped.items()) if skipped else "none"
    return "\n".join(
        [
            f"corpus: {stats['source']} -> {shown(out_dir / 'corpus.txt')}",
            f"  posts                {stats['posts']:,}",
            f"  characters           {stats['characters']:,}",
            f"  distinct characters  {stats['distinct_characters']:,}",
            f"  skipped files        {skipped_text}",
            *folders_report(stats["skipped_files"]),
            *not_regular_report(stats["skipped_files"]),
            *markup_report(stats),
            f"  odd characters       {odd_characters_report(stats['odd_characters'])}",
            f"  seen once            {seen_once_report(stats['seen_once'], stats['distinct_characters'])}",
        ]
    )


NAMED_IN_REPORT = 5  # folders left out, files not regular: stats.json lists them all


def folders_report(skipped: list[dict]) -> list[str]:
    """The folders left out, by name: the posts in them are not in the corpus."""
    folders = [f"{s['path']} ({s['reason']})" for s in skipped if s["path"].endswith("/")]
    return [f"  folders left out     {first_named(folders)}"] if folders else []


def not_regular_report(skipped: list[dict]) -> list[str]:
    """The Markdown names that are no regular file, each with what it is: never opened."""
    special = [f"{s['path']} ({s['kind']})" for s in skipped if s["reason"] == NOT_REGULAR]
    return [f"  not regular files    {first_named(special)}: not read"] if special else []


def first_named(entries: list[str]) -> str:
    """The first NAMED_IN_REPORT entries, and how many more there are."""
    more = len(entries) - NAMED_IN_REPORT
    return ", ".join(entries[:NAMED_IN_REPORT]) + (f" and {more:,} more (stats.json lists them)" if more > 0 else "")


def seen_once_report(once: dict, distinct: int) -> str:
    if not once["characters"]:
        return "none"
    posts = ", ".join(f"{post['path']} ({post['characters']:,})" for post in once["posts"])
    return (
        f"{once['characters']:,} of {distinct:,} distinct characters, {once['embedding_parameters']:,} embedding "
        f"parameters (2 x d_model {once['d_model']} each: input embedding and output projection); "
        f"the most from {posts}"
    )


def odd_characters_report(odd: dict) -> str:
    counts = [f"{odd[kind]:,} {name}" for kind, name in ODD_KINDS.items() if odd[kind]]
    if not counts:
        return "none"
    codes = ", ".join(list(odd["found"])[:8])
    return f"{', '.join(counts)} ({codes}): each enters the vocabulary; stats.json lists them"


MARKUP_NAMES = {
    "html_comments": "HTML comments",
    "template_tags": "template tags",
    "html_tags": "HTML tags, entities",
    "emptied_lines": "lines left empty",
}


def markup_report(stats: dict) -> list[str]:
    if stats["markup_kept"]:
        return ["  markup               kept as written (--keep-markup)"]
    removed = stats["markup_removed"]
    total = sum(kind["characters"] for kind in removed.values())
    if not total:
        return ["  markup removed       none"]
    lines = [f"  markup removed       {total:,} characters"]
    for kind, name in MARKUP_NAMES.items():
        count, characters = removed[kind]["count"], removed[kind]["characters"]
        lines.append(f"    {name:<21}{count:,} ({characters:,} characters)")
    return lines


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
        remove_stale_tokens(args.out)
        write_corpus(args.out, text, stats)
    print(report(stats, args.out))
    warning = size_warning(stats["characters"], drafts=stats["skipped"].get("draft", 0))
    if warning:
        print(f"warning: {warning}", file=sys.stderr)
    return 0
