"""Build the data-scale corpus `data/poems/` from the npm package `chinese-poetry` 2.0.1.

Run by hand, once; the pipeline never runs it and never touches the network. The files it
writes are committed, so everyone trains on exactly the same text. See data/README.md.

    npm pack chinese-poetry@2.0.1          # in a scratch folder outside the repository
    tar xzf chinese-poetry-2.0.1.tgz       # unpacks to ./package
    pip install opencc==1.4.2              # build-time only, not a dependency of the project
    python data/build_poems.py path/to/package

It writes three files:

- `data/poems/train.txt.xz`: the training text, poems in a fixed pseudo-random order, so that
  any prefix of it (128k, 1M, 8.2M characters) is a sample of the same mix of poems;
- `data/poems/val.txt.xz`: about 100,000 characters of whole poems drawn at random from the
  same mix, none of them in the training text;
- `data/poems/SOURCE.json`: where the text came from, what was dropped, and the sha256 of the
  two decompressed texts.

Each poem is `## TITLE`, its lines (one per paragraph of the source), then a blank line. The
source is the Tang and Song shi poems of the package (`dist/quantangshi/poet.tang.*.json` and
`poet.song.*.json`, 311,855 poems). One vocabulary serves every prefix: only poems whose
characters are all among the K most frequent characters of the whole converted source are kept.
Running it twice gives byte-identical files (the order comes from sha256, not from `random`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import lzma
import re
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path

from anatomy.files.atomic import write_bytes, write_json
from build_posts import PACKAGE, PUNCTUATION, VERSION, check_package

POEMS_DIR = Path(__file__).resolve().parent / "poems"
OPENCC_VERSION = "1.4.2"  # another version may convert a few characters differently
OPENCC_CONFIG = "t2s"

SOURCE_GLOBS = ("quantangshi/poet.tang.*.json", "quantangshi/poet.song.*.json")
SEED = 20240613  # the shuffle: poems sorted by sha256(f"{SEED}\n{title}\n{body}")
K = 3700  # keep poems whose characters are all among the K most frequent of the whole source
TRAIN_MIN = 8_400_000  # characters; the study reads 2000 steps x 32 x 128 = 8,192,000
VAL_MIN = 100_000  # characters; validation poems are taken until the text reaches this
XZ_PRESET = 9 | lzma.PRESET_EXTREME

# Punctuation a poem may hold besides CJK ideographs (after the PUNCTUATION table of build_posts).
# Anything else (editorial brackets （）[]{}〖〗〔〕, □ for a lost character, ○ used as zero,
# digits, ASCII letters, / and = of composed-character notations) marks a poem as edited
# rather than the poem itself, and the poem is dropped.
ALLOWED_PUNCTUATION = set("，。？！：；、“”‘’《》·")


def is_ideograph(char: str) -> bool:
    return unicodedata.name(char, "").startswith(("CJK UNIFIED IDEOGRAPH", "CJK COMPATIBILITY IDEOGRAPH"))


def file_order(path: Path) -> tuple[str, int]:
    """poet.tang.2000.json -> ("tang", 2000): the package's own order, not the string order."""
    _, dynasty, number, _ = path.name.split(".")
    return dynasty, int(number)


def read_source(package: Path) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The files used and every poem in them, converted to Simplified, punctuation made uniform."""
    import opencc  # build-time only

    if opencc.__version__ != OPENCC_VERSION:
        sys.exit(
            f"opencc {opencc.__version__} is installed; this build needs opencc {OPENCC_VERSION} (pip install opencc=={OPENCC_VERSION})"
        )
    converter = opencc.OpenCC(OPENCC_CONFIG)
    dist = package / "dist"
    files, poems = [], []
    for pattern in SOURCE_GLOBS:
        for path in sorted(dist.glob(pattern), key=file_order):
            files.append(path.relative_to(dist).as_posix())
            for poem in json.loads(path.read_text(encoding="utf-8")):
                lines = [poem["title"], *poem["paragraphs"]]
                if any("\n" in line for line in lines):
                    sys.exit(f"{path}: a title or paragraph holds a line break; the conversion below assumes none")
                converted = converter.convert("\n".join(lines)).translate(PUNCTUATION).split("\n")
                title = re.sub(r"\s+", " ", converted[0]).strip()  # titles hold double spaces and tabs
                body = [line.strip() for line in converted[1:] if line.strip()]
                poems.append((title, body))
    return files, poems


def render(title: str, body: list[str]) -> str:
    return f"## {title}\n" + "".join(f"{line}\n" for line in body)


def build(package: Path) -> tuple[str, str, dict]:
    files, source = read_source(package)

    # Frequencies over the whole converted source, titles and bodies; ties broken by code point.
    frequency = Counter()
    for title, body in source:
        frequency.update(title)
        for line in body:
            frequency.update(line)
    ranked = sorted(frequency, key=lambda char: (-frequency[char], char))
    common = set(ranked[:K])

    dropped = {
        reason: [0, 0]
        for reason in ("empty_title_or_body", "odd_characters", "lost_poem_entries", "duplicates", "rare_characters")
    }
    kept, bodies_seen = [], set()
    for title, body in source:
        text = render(title, body)
        chars = set(title.replace(" ", "")) | set("".join(body))
        if not body or not title:
            reason = "empty_title_or_body"
        elif any(not (is_ideograph(char) or char in ALLOWED_PUNCTUATION) for char in chars):
            reason = "odd_characters"
        elif title.startswith("存目"):
            reason = "lost_poem_entries"  # "存目" entries list a lost poem's title, not a poem
        elif "\n".join(body) in bodies_seen:
            reason = "duplicates"  # the same body filed twice: keep the first
        elif not chars <= common:
            bodies_seen.add("\n".join(body))
            reason = "rare_characters"
        else:
            bodies_seen.add("\n".join(body))
            kept.append((title, body))
            continue
        dropped[reason][0] += 1
        dropped[reason][1] += len(text)

    # A seeded shuffle that does not depend on the random module of one Python version.
    def shuffle_key(poem):
        title, body = poem
        return hashlib.sha256(f"{SEED}\n{title}\n{chr(10).join(body)}".encode("utf-8")).digest()

    kept.sort(key=shuffle_key)
    rendered = [render(title, body) for title, body in kept]

    # Validation: the first poems of the shuffled order, until VAL_MIN characters; train: the rest.
    val_poems, size = [], -1  # size: the length of "\n".join(val_poems)
    while size < VAL_MIN:
        val_poems.append(rendered[len(val_poems)])
        size += len(val_poems[-1]) + 1
    train_poems = rendered[len(val_poems) :]
    train_text = "\n".join(train_poems)
    train_chars = set(train_text)
    unseen = [poem for poem in val_poems if not set(poem) <= train_chars]
    val_text = "\n".join(poem for poem in val_poems if set(poem) <= train_chars)
    if len(val_text) < VAL_MIN:
        sys.exit(f"{len(unseen)} validation poems hold characters the training text lacks; change K or SEED")
    if len(train_text) < TRAIN_MIN:
        sys.exit(f"the training text has {len(train_text):,} characters, fewer than {TRAIN_MIN:,}; raise K")

    facts = {
        "package": PACKAGE,
        "version": VERSION,
        "licence": "MIT (the package); the poems themselves are public domain",
        "files": {pattern: sum(1 for name in files if Path(name).match(pattern)) for pattern in SOURCE_GLOBS},
        "opencc": {"version": OPENCC_VERSION, "config": OPENCC_CONFIG},
        "shuffle": "poems sorted by sha256 of '{seed}\\n{title}\\n{body}' (UTF-8)",
        "seed": SEED,
        "K": K,
        "poems_in_source": len(source),
        "characters_in_source": sum(len(render(title, body)) for title, body in source),
        "distinct_characters_in_source": len(frequency),
        "dropped": {reason: {"poems": poems, "characters": chars} for reason, (poems, chars) in dropped.items()},
        "dropped_from_val_for_characters_not_in_train": len(unseen),
        "poems_kept": len(kept) - len(unseen),
        "train_poems": len(train_poems),
        "val_poems": len(val_poems) - len(unseen),
        "train_characters": len(train_text),
        "val_characters": len(val_text),
        "distinct_characters": len(train_chars | set(val_text)),
        "train_sha256": hashlib.sha256(train_text.encode("utf-8")).hexdigest(),
        "val_sha256": hashlib.sha256(val_text.encode("utf-8")).hexdigest(),
    }
    return train_text, val_text, facts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", type=Path, help="the unpacked npm package (the folder holding package.json)")
    args = parser.parse_args()
    check_package(args.package)
    started = time.monotonic()

    train_text, val_text, facts = build(args.package)
    sizes = {}
    for name, text in (("train.txt.xz", train_text), ("val.txt.xz", val_text)):
        data = lzma.compress(text.encode("utf-8"), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=XZ_PRESET)
        if lzma.decompress(data).decode("utf-8") != text:
            sys.exit(f"{name}: the compressed text does not decompress to the same text")
        write_bytes(POEMS_DIR / name, data)
        sizes[name] = len(data)
    facts["compressed_bytes"] = sizes
    write_json(POEMS_DIR / "SOURCE.json", facts)

    for reason, counts in facts["dropped"].items():
        print(f"dropped for {reason.replace('_', ' ')}: {counts['poems']:,} poems, {counts['characters']:,} characters")
    print(f"poems in source: {facts['poems_in_source']:,}; K = {K}; kept {facts['poems_kept']:,} poems")
    print(f"val poems dropped for characters not in train: {facts['dropped_from_val_for_characters_not_in_train']}")
    print(f"distinct characters (train + val): {facts['distinct_characters']:,}")
    print(
        f"train: {facts['train_poems']:,} poems, {facts['train_characters']:,} characters, {sizes['train.txt.xz']:,} bytes xz"
    )
    print(
        f"val: {facts['val_poems']:,} poems, {facts['val_characters']:,} characters, {sizes['val.txt.xz']:,} bytes xz"
    )
    print(f"wrote {POEMS_DIR} in {time.monotonic() - started:.0f} s")


if __name__ == "__main__":
    main()
