"""Markup removed from a post's prose: HTML comments (Hexo's `<!-- more -->`), template tags
(Liquid's `{% ... %}` and `{{ ... }}`, Hugo's `{{< ... >}}`), kramdown's attribute lists
(`{: .class}`), MDX's import/export lines, JSX tags and `{expressions}` (in .mdx posts), and raw
HTML turned into its text (table cells apart, `&nbsp;` a plain space). The Markdown itself and all
code (fenced, indented, inline, and template code blocks) stay as written: the model learns that
skeleton. A `MarkupTally` counts what each kind removed, for the corpus statistics.

Every pattern here runs in time linear in the post: a post is anyone's text, and a pattern that
searched to the paragraph's end from each of its openings took minutes on a crafted one.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections import Counter
from itertools import chain
from html.parser import HTMLParser
from typing import Iterator

from markdown_it import MarkdownIt
from markdown_it.common.html_re import HTML_TAG_RE

from anatomy.errors import AnatomyError

# Block structure only: code blocks are blocks. The inline pass, whose tokens nothing here reads,
# took seconds on a paragraph of half a megabyte.
COMMONMARK_BLOCKS = MarkdownIt("commonmark").disable("inline")
BLANK_LINE = r"\n[ \t]*\n"

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


# Code spans, kept as written: `x`, ``a ` b``. Each run of backticks, found once (`code_spans`).
BACKTICK_RUN = re.compile(r"`+")
BLANK_LINE_START = re.compile(rf"(?={BLANK_LINE})")  # every place a blank line starts


def tag_pattern(opening: str, closing: str) -> str:
    """A template tag from `opening` to the first `closing`, within one paragraph. A tag never
    holds a second `opening`: a stray `{%` is then given up at the next `{%` instead of being
    searched past to the paragraph's end, which made a paragraph of stray ones quadratic."""
    inside = rf"(?:(?!{BLANK_LINE}|{re.escape(opening)}).)*?"
    return re.escape(opening) + inside + re.escape(closing)


# Liquid and Nunjucks tags {% ... %} and output tags {{ ... }} (Jekyll, Hexo: a page whose body
# lives in _includes/ is `{{ about | markdownify }}`), and Hugo's shortcodes {{< ... >}}, {{% ... %}}.
# Tried in this order at each place, so `{{<` is a shortcode before it is an output tag.
TEMPLATE_TAGS = (("{%", "%}"), ("{{<", ">}}"), ("{{%", "%}}"), ("{{", "}}"))
TEMPLATE_TAG = re.compile("|".join(tag_pattern(opening, closing) for opening, closing in TEMPLATE_TAGS), re.DOTALL)

# kramdown's attribute lists (Jekyll's default Markdown): `{: .note}` under a paragraph, `{:#id}`
# after a heading, `{:ref: .class}` defining one, `{::options ... /}`. Within one line.
ATTRIBUTE_LIST = re.compile(r"\{:[^{}\n]*\}")

# MDX (.mdx posts): ESM import/export blocks (from the line that starts one to the next blank
# line), JSX tags (attributes may hold strings and {expressions}, one level of braces inside), and
# {expressions} in the text, comments {/* ... */} among them. A string stops at a `<` and an
# expression's text at any brace, so that an unclosed one is given up at once.
MDX_ESM = re.compile(r"^(?:import|export)\b[^\n]*(?:\n(?![ \t]*\n)[^\n]*)*", re.MULTILINE)
MDX_EXPRESSION_PATTERN = r"\{(?:[^{}]|\{[^{}]*\})*\}"
MDX_EXPRESSION = re.compile(MDX_EXPRESSION_PATTERN)
JSX_TAG = re.compile(
    r"</?[A-Za-z][\w.:-]*(?:\s(?:[^<>{}\"']|\"[^\"<]*\"|'[^'<]*'|" + MDX_EXPRESSION_PATTERN + r")*)?/?>|</?>"
)

# What CommonMark counts as raw HTML (a tag, comment, declaration...), as markdown-it's own parser
# matches it at a `<`. Any other `<` is text: `$x<y$`, `a <- b`, an autolink <https://...>.
COMMONMARK_HTML = re.compile(HTML_TAG_RE.pattern.removeprefix("^"))  # older versions anchor with ^

# An `&` that does not start a character reference as CommonMark reads them (`&name;`, `&#123;`):
# text, where an HTML parser would also decode `&para` in `?a=1&para=2`.
BARE_AMPERSAND = re.compile(r"&(?!#[0-9]{1,7};|#[xX][0-9a-fA-F]{1,6};|[A-Za-z][A-Za-z0-9]{1,31};)")

MARKUP_KINDS = ("html_comments", "template_tags", "attribute_lists", "mdx_syntax", "html_tags", "emptied_lines")

# `&nbsp;` (and its numeric forms) becomes a plain space, not U+00A0: on a page it looks like one,
# and kept, it is a second space character in the vocabulary (47,127 of them in one blog). A U+00A0
# typed into the text stays, and the statistics count it among the odd characters.
NBSP_ENTITY = re.compile(r"&(?:nbsp|#0*160|#[xX]0*[aA]0);")


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
CELL_BREAK = object()  # where a table cell ends: " ", unless a space or a line break follows anyway


class HtmlToText(HTMLParser):
    """Raw HTML into the text a reader sees, with Python's own HTML parser.

    Tags and comments go, each leaving `marker` where it was (so lines that held nothing else
    can go too); text between them stays as written; entities (&amp;, &lt;) become their
    characters; script and style content goes. Table cells stay apart: glued, `<td>and</td><td>A
    logical AND</td>` read as the non-word "andA".
    """

    CELLS = frozenset({"td", "th"})

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
        self.in_cell = False  # a <td> or <th> open: the next one ends it (HTML may leave out </td>)
        self.tags = self.comments = self.comment_characters = 0

    def handle_starttag(self, tag, attrs):
        self.tags += 1
        self.hidden_depth += tag in self.HIDDEN
        if tag in self.CELLS:
            if self.in_cell:
                self.parts.append(CELL_BREAK)
            self.in_cell = True
        self.parts.append(LINE_BREAK if tag == "br" else self.marker)

    def handle_startendtag(self, tag, attrs):  # <br/>, <img ... />: one tag, not two
        self.tags += 1
        self.parts.append(LINE_BREAK if tag == "br" else self.marker)

    def handle_endtag(self, tag):
        self.tags += 1
        if tag in self.HIDDEN and self.hidden_depth:
            self.hidden_depth -= 1
        if tag in self.CELLS or tag == "tr":
            self.in_cell = False
        if tag in self.CELLS:
            self.parts.append(CELL_BREAK)
        else:
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
        starts a line anyway; a cell break becomes " " only before text that does not start with
        a space or a line break. Read from the end, so that the next part is known at each break
        (looking ahead from every break instead made a page of <p> paragraphs quadratic)."""
        resolved, following = [], ""
        for part in reversed(self.parts):
            if part is LINE_BREAK:
                starts_line = isinstance(following, str) and following.startswith("\n")
                resolved.append(self.marker if starts_line else "\n")
            elif part is CELL_BREAK:
                glued = isinstance(following, str) and following[:1] not in ("", " ", "\t", "\n")
                resolved.append(" " if glued else self.marker)
            else:
                resolved.append(part)
            if part != self.marker:
                following = part
        return "".join(reversed(resolved))


def clean_markup(body: str, tally: MarkupTally, mdx: bool = False) -> str:
    """The body without HTML comments, template tags or attribute lists (and, if `mdx`, MDX's
    import/export lines, JSX tags and expressions), its raw HTML turned into text; what went is
    added to `tally`.

    Code (fenced, indented, inline, and template code blocks) and the Markdown itself (headings,
    lists, quotes) are kept as written: the model learns that skeleton.
    """
    if not mdx and not any(sign in body for sign in "<&{"):
        return body
    marker = unused_character(body)
    pieces = [text if is_code else clean_prose(text, marker, tally, mdx) for is_code, text in code_and_prose(body)]
    return drop_emptied_lines("".join(pieces), marker, tally)


# Stand-ins for removed markup, first choice first: the 66 Unicode noncharacters (set aside for a
# program's internal use), then the private-use characters, the supplementary planes' first.
STAND_INS = chain(
    range(0xFDD0, 0xFDF0),
    (plane + last for plane in range(0, 0x110000, 0x10000) for last in (0xFFFE, 0xFFFF)),
    range(0xF0000, 0xFFFFE),
    range(0x100000, 0x10FFFE),
    range(0xE000, 0xF900),
)


def unused_character(text: str) -> str:
    """A stand-in for removed markup that cannot clash with the text: a character it does not
    hold, noncharacters first. A crafted post may hold all 32 of U+FDD0..U+FDEF (the next() over
    them alone then raised StopIteration); one holding all 137,534 candidates is refused."""
    if "\ufdd0" not in text:  # the usual case, without building the set
        return "\ufdd0"
    used = set(text)
    for code in STAND_INS:
        if chr(code) not in used:
            return chr(code)
    raise AnatomyError(
        "holds every Unicode noncharacter and private-use character, so none is left to stand in for "
        "the markup removed; --keep-markup keeps the posts as written"
    )


def code_and_prose(body: str) -> list[tuple[bool, str]]:
    """The body cut into (is_code, text) pieces that join back into it."""
    pieces = markdown_code_blocks(body)
    pieces = split_out_code(pieces, lambda text: template_code_spans(text, LIQUID_CODE_OPENING, liquid_closing))
    pieces = split_out_code(pieces, lambda text: template_code_spans(text, HUGO_CODE_OPENING, hugo_closing))
    return split_out_code(pieces, code_spans)


def markdown_code_blocks(body: str) -> list[tuple[bool, str]]:
    """Fenced and indented code blocks, where a CommonMark parser finds them (in lists and quotes
    too, and not in an HTML block), as code; the rest as prose."""
    line_starts = [0]
    for line in body.split("\n"):
        line_starts.append(line_starts[-1] + len(line) + 1)
    pieces, position = [], 0
    for token in COMMONMARK_BLOCKS.parse(body):
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


def code_spans(text: str) -> Iterator[tuple[int, int]]:
    """Where each code span lies, as CommonMark reads them: a run of backticks opens one, the next
    run of the same length closes it, and none spans a blank line (a run without its closing is
    text). Each run is paired with the next of its length in one pass from the end, so a paragraph
    of unmatched runs costs one look at each; a regular expression that searched to the
    paragraph's end from each run took 40 s on 1.1 MB of them."""
    runs = [match.span() for match in BACKTICK_RUN.finditer(text)]
    if len(runs) < 2:
        return
    blank_lines = [match.start() for match in BLANK_LINE_START.finditer(text)]
    next_of_length, following = [None] * len(runs), {}
    for i in range(len(runs) - 1, -1, -1):
        length = runs[i][1] - runs[i][0]
        next_of_length[i], following[length] = following.get(length), i
    i = 0
    while i < len(runs):
        closing = next_of_length[i]
        if closing is not None and not blank_line_within(blank_lines, runs[i][1], runs[closing][0]):
            yield runs[i][0], runs[closing][1]
            i = closing + 1
        else:
            i += 1


def blank_line_within(blank_lines: list[int], start: int, end: int) -> bool:
    """Whether a blank line starts in text[start:end] (`blank_lines`: where each starts, sorted)."""
    k = bisect_left(blank_lines, start)
    return k < len(blank_lines) and blank_lines[k] < end


def remove(pattern: re.Pattern, kind: str, text: str, marker: str, tally: MarkupTally) -> str:
    """Each match of `pattern` replaced by `marker`, and counted in `tally` as `kind`."""
    found = [match.group() for match in pattern.finditer(text)]
    if not found:
        return text
    tally.add(kind, len(found), sum(map(len, found)))
    return pattern.sub(marker, text)


def clean_prose(text: str, marker: str, tally: MarkupTally, mdx: bool = False) -> str:
    if mdx:
        text = remove(MDX_ESM, "mdx_syntax", text, marker, tally)
    if "{" in text:
        text = remove(TEMPLATE_TAG, "template_tags", text, marker, tally)
        text = remove(ATTRIBUTE_LIST, "attribute_lists", text, marker, tally)
    if mdx:
        text = remove(JSX_TAG, "mdx_syntax", text, marker, tally)
        text = remove(MDX_EXPRESSION, "mdx_syntax", text, marker, tally)
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
    escaped, so that the parser gives it back as text, and `&nbsp;` a plain space. Raw HTML is
    passed over whole, so that a `<` inside a comment or an attribute is not looked at again. A
    <script> or <style> that nothing closes is text too ("the <script> tag"): read as a tag, it
    hid the rest of the prose, where the parser looked for its end."""
    text = NBSP_ENTITY.sub(" ", BARE_AMPERSAND.sub("&amp;", text))
    last_closing = {closing: text.rfind(closing) for _, closing in RAW_HTML_CLOSINGS}
    last_hidden_closing = {match.group(1).lower(): match.start() for match in HIDDEN_CLOSING.finditer(text)}
    pieces, position = [], 0
    while (less := text.find("<", position)) >= 0:
        html = None if html_never_closed(text, less, last_closing) else COMMONMARK_HTML.match(text, less)
        if html and (hidden := HIDDEN_OPENING.match(html.group())):
            if last_hidden_closing.get(hidden.group(1).lower(), -1) < html.end():
                html = None
        end = html.end() if html else less + 1
        pieces += [text[position:less], text[less:end] if html else "&lt;"]
        position = end
    return "".join(pieces) + text[position:]


# The elements whose content the parser hides (HtmlToText.HIDDEN), and what closes each
HIDDEN_OPENING = re.compile(r"<(script|style)\b", re.IGNORECASE)
HIDDEN_CLOSING = re.compile(r"</(script|style)\b", re.IGNORECASE)

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
