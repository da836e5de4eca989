"""Build the default corpus `data/posts/` from the npm package `chinese-poetry` 2.0.1.

Run by hand, once; the pipeline never runs it and never touches the network. The posts it
writes are committed, so everyone trains on exactly the same text. See data/README.md.

    npm pack chinese-poetry@2.0.1          # in a scratch folder outside the repository
    tar xzf chinese-poetry-2.0.1.tgz       # unpacks to ./package
    pip install opencc                     # build-time only, not a dependency of the project
    python data/build_posts.py path/to/package

The Book of Songs comes first and Mencius last, so the validation split (the last 10%)
is Mencius prose, like most of the training text, rather than a different genre.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

from anatomy.files.atomic import write_text

PACKAGE = "chinese-poetry"
VERSION = "2.0.1"
POSTS_DIR = Path(__file__).resolve().parent / "posts"

# Punctuation, made uniform: the source files mix corner quotes with curly ones, and a few
# ASCII marks slipped into the Chinese text. One form of each keeps the vocabulary honest.
PUNCTUATION = str.maketrans({"「": "“", "」": "”", "『": "‘", "』": "’", ",": "，", ":": "：", "?": "？"})

# Editorial notes that the source left inside the text (a footnote marker and its note).
# Each must match exactly once, so a different package version cannot slip through unnoticed.
EDITORIAL_FIXES = [
    ("見且猶1不得亟", "見且猶不得亟"),
    ("1. 猶 : 或作「由」。《孟子正義》作「由」。", ""),
]


def load_json(package: Path, relative: str):
    return json.loads((package / "dist" / relative).read_text(encoding="utf-8"))


def check_package(package: Path) -> None:
    meta = json.loads((package / "package.json").read_text(encoding="utf-8"))
    if (meta.get("name"), meta.get("version")) != (PACKAGE, VERSION):
        sys.exit(f"{package}: expected {PACKAGE} {VERSION}, found {meta.get('name')} {meta.get('version')}")


def make_cleaner():
    import opencc  # build-time only

    converter = opencc.OpenCC("t2s")
    fixes_applied = {old: 0 for old, _ in EDITORIAL_FIXES}

    def clean(text: str) -> str:
        for old, new in EDITORIAL_FIXES:
            if old in text:
                fixes_applied[old] += text.count(old)
                text = text.replace(old, new)
        return converter.convert(text).translate(PUNCTUATION).strip()

    return clean, fixes_applied


def render_post(title: str, source: str, order: int, tags: list[str], sections) -> str:
    """A blog post: YAML front matter, then one `## heading` per section, paragraphs between."""
    front = yaml.safe_dump(
        {"title": title, "source": source, "order": order, "tags": tags},
        allow_unicode=True,
        sort_keys=False,
    )
    body = "\n\n".join(f"## {heading}\n\n" + "\n\n".join(paragraphs) for heading, paragraphs in sections)
    return f"---\n{front}---\n\n{body}\n"


def build_posts(package: Path):
    """Yield (file name, title, source, tags, sections) in reading order."""
    clean, fixes_applied = make_cleaner()

    # Book of Songs: one post per section (a state's airs, a decade of odes), one heading per poem.
    groups: dict[tuple[str, str], list] = {}
    for poem in load_json(package, "shijing/shijing.json"):
        groups.setdefault((poem["chapter"], poem["section"]), []).append(poem)
    for number, ((chapter, section), poems) in enumerate(groups.items(), start=1):
        sections = [(clean(p["title"]), [clean(s) for s in p["content"]]) for p in poems]
        yield (
            f"1-shijing-{number:02d}.md",
            f"诗经·{clean(chapter)}·{clean(section)}",
            "shijing/shijing.json",
            ["诗经", clean(chapter)],
            sections,
        )

    # Great Learning and Doctrine of the Mean: one post each.
    for number, name in ((2, "daxue"), (3, "zhongyong")):
        book = load_json(package, f"sishuwujing/{name}.json")
        title = clean(book["chapter"])
        yield (
            f"{number}-{name}.md",
            title,
            f"sishuwujing/{name}.json",
            ["四书", title],
            [(title, [clean(p) for p in book["paragraphs"]])],
        )

    # Analects and Mencius: one post per chapter.
    for number, book_title, relative in ((4, "论语", "lunyu/lunyu.json"), (5, "孟子", "sishuwujing/mengzi.json")):
        name = Path(relative).stem
        for index, chapter in enumerate(load_json(package, relative), start=1):
            title = clean(chapter["chapter"])
            yield (
                f"{number}-{name}-{index:02d}.md",
                f"{book_title}·{title}",
                relative,
                ["四书", book_title],
                [(title, [clean(p) for p in chapter["paragraphs"]])],
            )

    missed = [old for old, count in fixes_applied.items() if count != 1]
    if missed:
        sys.exit(f"editorial fixes that did not match exactly once: {missed}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", type=Path, help="the unpacked npm package (the folder holding package.json)")
    args = parser.parse_args()
    check_package(args.package)

    posts = list(build_posts(args.package))
    POSTS_DIR.mkdir(exist_ok=True)
    for old in POSTS_DIR.glob("*.md"):
        old.unlink()
    for order, (file_name, title, relative, tags, sections) in enumerate(posts, start=1):
        source = f"{PACKAGE} {VERSION}, dist/{relative}"
        write_text(POSTS_DIR / file_name, render_post(title, source, order, tags, sections))
    print(f"wrote {len(posts)} posts to {POSTS_DIR}")


if __name__ == "__main__":
    main()
