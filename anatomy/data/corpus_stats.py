"""The corpus's statistics (stats.json) and the summary `anatomy corpus` prints of them: posts,
characters, files skipped, markup removed, the characters rarely meant as text, and the characters
found in only one post (each costs embedding parameters for a character the model sees in one post
only), with a warning when one post brings a great many of them.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from pathlib import Path

from anatomy.config import ModelConfig
from anatomy.data.markup import MarkupTally
from anatomy.data.posts import NOT_REGULAR, shown
from anatomy.data.tokenizer import DEFAULT_CTX_LEN, min_corpus_length


def statistics(
    src: Path,
    text: str,
    bodies: list[str],
    lengths: list[dict],
    skipped: list[dict],
    tally: MarkupTally,
    markup_kept: bool,
    made_from: dict | None = None,
) -> dict:
    """stats.json: the corpus `text`, joined from `bodies` (each post's path and length in `lengths`);
    `made_from`: what it was made from (corpus_source.py: the source's digest, the options)."""
    return {
        "source": shown(src.as_posix()),
        **(made_from or {}),
        "posts": len(lengths),
        "characters": len(text),
        "distinct_characters": len(set(text)),
        "skipped": dict(sorted(Counter(s["reason"] for s in skipped).items())),
        "odd_characters": odd_characters(text),
        "in_one_post": in_one_post(bodies, [post["path"] for post in lengths]),
        "markup_kept": markup_kept,
        "markup_removed": tally.as_dict(),
        "post_lengths": lengths,
        "skipped_files": skipped,
    }


# Characters rarely meant as text, by kind, as the report names them. Zero-width ones are invisible:
# a space, the (non-)joiners, the word joiner, and a byte-order mark inside the text.
ODD_KINDS = {
    "control": "control",
    "private_use": "private use",
    "noncharacter": "noncharacter",
    "zero_width": "zero width",
    "bidi_control": "bidi control",
    "soft_hyphen": "soft hyphen",
    "separator": "line/paragraph separator",
    "no_break_space": "no-break space",
    "replacement": "U+FFFD",
}
ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\ufeff")
# Marks that set the direction of text (left-to-right and right-to-left marks, embeddings,
# overrides, isolates): invisible, and able to show a line in another order than it is stored
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
SINGLE_ODD = {"\ufffd": "replacement", "\u00ad": "soft_hyphen", "\u2028": "separator", "\u2029": "separator"}
# U+00A0 typed or pasted into the text (markup.py turns the `&nbsp;` of HTML into a plain space)
SINGLE_ODD["\u00a0"] = "no_break_space"
ZWJ = "\u200d"
COUNTED_ONE_BY_ONE = 64  # odd characters counted with str.count, each a pass over the text


def odd_kind(char: str) -> str | None:
    """Characters rarely meant as text: control characters (newline and tab are meant), private-use
    characters (icon fonts, text decoded with the wrong table), noncharacters, zero-width and bidi
    characters (pasted from web pages and chat), the soft hyphen, the line and paragraph separators
    (U+2028, U+2029: line breaks that are not "\\n"), the no-break space, and U+FFFD, which a
    decoder leaves where bytes were lost."""
    if char in SINGLE_ODD:
        return SINGLE_ODD[char]
    if char in ZERO_WIDTH:
        return "zero_width"
    if char in BIDI_CONTROLS:
        return "bidi_control"
    code = ord(char)
    if 0xFDD0 <= code <= 0xFDEF or code & 0xFFFE == 0xFFFE:
        return "noncharacter"
    category = unicodedata.category(char)
    if category == "Cc" and char not in "\n\t":
        return "control"
    return "private_use" if category == "Co" else None


def is_emoji_part(char: str) -> bool:
    """A character an emoji sequence is made of: a symbol, the emoji presentation selector, a skin
    tone. Python knows no Extended_Pictographic property; symbols (category So) stand for it."""
    return char == "\ufe0f" or "\U0001f3fb" <= char <= "\U0001f3ff" or unicodedata.category(char) == "So"


def emoji_joiners(text: str) -> int:
    """The zero-width joiners that join two parts of one emoji (👩‍💻 is 👩 U+200D 💻): meant."""
    return sum(
        1
        for match in re.finditer(ZWJ, text)
        if 0 < match.start() < len(text) - 1
        and is_emoji_part(text[match.start() - 1])
        and is_emoji_part(text[match.start() + 1])
    )


def odd_characters(text: str) -> dict:
    """How many odd characters of each kind the text holds, and which: each becomes a token.
    A few are counted one by one; many (a crafted post holds 137,000) in one pass over the text,
    since counting each through the whole text took a minute."""
    odd = sorted(char for char in set(text) if odd_kind(char))
    counts = Counter(text) if len(odd) > COUNTED_ONE_BY_ONE else None
    found = {char: counts[char] if counts else text.count(char) for char in odd}
    if ZWJ in found:
        found[ZWJ] -= emoji_joiners(text)
        if not found[ZWJ]:
            del found[ZWJ]
    counts = Counter()
    for char, count in found.items():
        counts[odd_kind(char)] += count
    return {
        **{kind: counts[kind] for kind in ODD_KINDS},
        "found": {f"U+{ord(char):04X}": count for char, count in found.items()},
    }


EMBEDDING_WIDTH = ModelConfig.d_model  # the default d_model, at which the cost below is counted
POSTS_NAMED = 5  # the posts in_one_post names, most first
# One post bringing this many characters found in no other post is warned of: a table of
# characters, a list of symbols. The default corpus's most is 62; the blog that asked for the
# warning had one post bringing 18,105 of its 21,073.
ONE_POST_WARNING = 1000


def in_one_post(bodies: list[str], paths: list[str]) -> dict:
    """The characters found in only one post, what they cost, and the posts they come from (most
    first). Each is a vocabulary entry the model meets in one place, too rarely to learn, yet it
    costs 2 x d_model parameters: a row of the input embedding and one of the output projection
    (the two are not tied). One post (a table of characters, even one shown twice) can bring
    thousands. Counted by post, not by occurrence: a table repeated in its post is still one post's.
    A corpus of one post (a .txt) has no other post to compare with: none are counted."""
    posts_holding, holder = Counter(), {}
    for index, body in enumerate(bodies):
        for char in set(body):
            posts_holding[char] += 1
            holder[char] = index
    only = [char for char, n in posts_holding.items() if n == 1] if len(bodies) > 1 else []
    by_post = Counter(paths[holder[char]] for char in only)
    return {
        "characters": len(only),
        "d_model": EMBEDDING_WIDTH,
        "embedding_parameters": 2 * EMBEDDING_WIDTH * len(only),
        "posts": [{"path": path, "characters": n} for path, n in by_post.most_common(POSTS_NAMED)],
    }


def vocabulary_warning(stats: dict) -> str | None:
    """A warning when one post alone brings ONE_POST_WARNING or more characters no other post holds."""
    posts = stats["in_one_post"]["posts"]
    if not posts or posts[0]["characters"] < ONE_POST_WARNING:
        return None
    path, n = posts[0]["path"], posts[0]["characters"]
    return (
        f"{path} alone brings {n:,} of the corpus's {stats['distinct_characters']:,} distinct characters, "
        f"found in no other post: {2 * EMBEDDING_WIDTH * n:,} embedding parameters (at d_model "
        f"{EMBEDDING_WIDTH}) for characters the model meets in one post only; if it is a table or a list "
        "of characters, leave it out (move it out of the folder, or mark it draft: true)"
    )


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
            f"  in one post only     {in_one_post_report(stats['in_one_post'], stats['distinct_characters'])}",
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


def in_one_post_report(once: dict, distinct: int) -> str:
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
    "attribute_lists": "attribute lists {: }",
    "mdx_syntax": "MDX import, JSX, {}",
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
    for kind, name in MARKUP_NAMES.items():  # the kinds found (stats.json has every kind)
        count, characters = removed[kind]["count"], removed[kind]["characters"]
        if count or characters:
            lines.append(f"    {name:<21}{count:,} ({characters:,} characters)")
    return lines
