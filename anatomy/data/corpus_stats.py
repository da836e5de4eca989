"""The corpus's statistics (stats.json) and the summary `anatomy corpus` prints of them: posts,
characters, files skipped, markup removed, the characters rarely meant as text, and the characters
seen once (each costs embedding parameters for a character the model sees once).
"""

from __future__ import annotations

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
) -> dict:
    """stats.json: the corpus `text`, joined from `bodies` (each post's path and length in `lengths`)."""
    return {
        "source": shown(src.as_posix()),
        "posts": len(lengths),
        "characters": len(text),
        "distinct_characters": len(set(text)),
        "skipped": dict(sorted(Counter(s["reason"] for s in skipped).items())),
        "odd_characters": odd_characters(text),
        "seen_once": seen_once(text, bodies, [post["path"] for post in lengths]),
        "markup_kept": markup_kept,
        "markup_removed": tally.as_dict(),
        "post_lengths": lengths,
        "skipped_files": skipped,
    }


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
