"""Markup removed from a post's prose: HTML comments (Hexo's `<!-- more -->`), template tags
(`{% ... %}`, Hugo's `{{< ... >}}`), and raw HTML turned into its text. The Markdown itself and all
code (fenced, indented, inline, and template code blocks) stay as written: the model learns that
skeleton. A `MarkupTally` counts what each kind removed, for the corpus statistics.
"""

from __future__ import annotations

import re
from collections import Counter
from html.parser import HTMLParser
from typing import Iterator

from markdown_it import MarkdownIt
from markdown_it.common.html_re import HTML_TAG_RE

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
