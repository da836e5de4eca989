"""Build dashboard/static/rare-han-*.woff: the rare Chinese characters the models can write, as a
small web font the dashboard serves, so that none shows as an empty box in the browser.

The corpora are classical Chinese. Every common font (PingFang, Microsoft YaHei, Noto Sans CJK,
WenQuanYi) covers the basic block of CJK ideographs, U+4E00-U+9FEF, but few cover the extension
blocks, where about fifty characters of the default corpus's vocabulary live. A generated sample
can only hold characters of its run's vocabulary, so this script takes the vocabularies, keeps the
ideographs outside the basic block, and cuts them out of Hanazono Mincho (HanaMinA for the Basic
Multilingual Plane, HanaMinB for the supplementary planes: GlyphWiki's fonts, under the SIL Open
Font License 1.1). The OFL reserves the names "HanaMinA" and "HanaMinB" for the unmodified fonts,
so the subsets are named "Rare Han". .streamlit/config.toml declares them with their Unicode
ranges: the browser takes them only for those characters, and every other character keeps the
theme's fonts.

    apt-get download fonts-hanazono && dpkg -x fonts-hanazono_*.deb /tmp/hanazono
    pip install fonttools
    python data/build_font.py /tmp/hanazono/usr/share/fonts/truetype/hanazono \\
        results/corpus/vocab.json results/corpora/poems_8m/vocab.json

(the vocabularies: `snakemake --cores 1 results/corpus/split.json results/corpora/poems_8m/split.json`).
It prints the characters it kept and any that no Hanazono font has.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fontTools import subset
from fontTools.ttLib import TTFont

OUT = Path(__file__).resolve().parent.parent / "dashboard" / "static"
BASIC_BLOCK = range(0x4E00, 0x9FF0)  # CJK Unified Ideographs as every common CJK font has them
# the ideograph blocks outside it: Extension A, compatibility ideographs, Extensions B to H
RARE_BLOCKS = [range(0x3400, 0x4DC0), range(0x9FF0, 0xA000), range(0xF900, 0xFB00), range(0x20000, 0x32400)]
FAMILY = "Rare Han"
# output file -> the Hanazono font it is cut from, and the planes it serves
FILES = {
    "rare-han-a.woff": ("HanaMinA.ttf", range(0, 0x10000)),
    "rare-han-b.woff": ("HanaMinB.ttf", range(0x10000, 0x40000)),
}


def rare_characters(vocabularies: list[Path]) -> list[str]:
    chars: set[str] = set()
    for path in vocabularies:
        try:
            chars |= set(json.loads(path.read_text(encoding="utf-8"))["chars"])
        except (OSError, ValueError, KeyError) as err:
            sys.exit(f"{path}: expected a vocab.json written by `anatomy tokenize` ({err})")
    return sorted(c for c in chars if any(ord(c) in block for block in RARE_BLOCKS))


def cut(source: Path, chars: list[str], out: Path) -> list[str]:
    """Write the glyphs of `chars` that `source` has into `out`; return those it lacks."""
    font = TTFont(source)
    cmap = font.getBestCmap()
    have = [c for c in chars if ord(c) in cmap]
    options = subset.Options()
    options.flavor = "woff"  # zlib-compressed; woff2 would need brotli for one small file
    options.layout_features = []
    subsetter = subset.Subsetter(options)
    subsetter.populate(unicodes=[ord(c) for c in have])
    subsetter.subset(font)
    names = font["name"]
    names.names = []  # the OFL reserves the original names for the unmodified font
    for name_id, text in ((1, FAMILY), (2, "Regular"), (4, FAMILY), (6, FAMILY.replace(" ", "-"))):
        names.setName(text, name_id, 3, 1, 0x409)
    font.flavor = "woff"
    font.save(out)
    return [c for c in chars if ord(c) not in cmap]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("hanazono", type=Path, help="the folder holding HanaMinA.ttf and HanaMinB.ttf")
    parser.add_argument("vocab", type=Path, nargs="+", help="vocab.json of each corpus the models read")
    args = parser.parse_args()
    chars = rare_characters(args.vocab)
    OUT.mkdir(parents=True, exist_ok=True)
    lacking = []
    for name, (source, plane) in FILES.items():
        mine = [c for c in chars if ord(c) in plane]
        lacking += cut(args.hanazono / source, mine, OUT / name)
        print(f"{name}: {len(mine)} characters, {(OUT / name).stat().st_size:,} bytes")
    print("kept:", "".join(c for c in chars if c not in lacking))
    if lacking:
        print("no Hanazono font has:", " ".join(f"{c} U+{ord(c):04X}" for c in lacking))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
