"""The code's pointers into the docs name pages and sections that exist.

A comment that sends the reader to `docs/cluster.md`, to `README, "Tests"` or to
`docs/workflow.md ("Adding an experiment")` is a promise: when a section moves, the pointer must
move with it. Each page named must exist, and each section named (in quotes after the page, or as
a `#anchor`) must be one of its headings, the start of one being enough ("Quickstart" for
"Quickstart, fastest result first").
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CODE_FOLDERS = ("anatomy", "dashboard", "tests", "workflow", "data", ".ci")
CODE_SUFFIXES = {".py", ".smk", ".yaml", ".toml", ".cfg", ".sql", ".sh"}
CODE_NAMES = {"Snakefile", "run"}  # workflow/Snakefile, .ci/run
TOP_FILES = ("pyproject.toml", "babel.cfg")
# README or a page of docs/, then a section: `#anchor`, `, "Heading"` or ` ("Heading")`
POINTER = re.compile(r'\b(README|docs/[\w./-]+\.md)(?:#([\w-]+)|,? \(?"([^"\n]+)")?')


def code_files() -> list[Path]:
    found = [REPO / name for name in TOP_FILES]
    for folder in CODE_FOLDERS:
        found += [
            path
            for path in sorted((REPO / folder).rglob("*"))
            if path.is_file() and (path.suffix in CODE_SUFFIXES or path.name in CODE_NAMES)
        ]
    return [path for path in found if path.is_file() and path != Path(__file__).resolve()]


def headings(page: Path) -> list[str]:
    """The Markdown headings of a page, leaving out `#` lines inside code blocks."""
    found, in_code = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.lstrip().startswith("```"):
            in_code = not in_code
        elif not in_code and (match := re.match(r"#{1,6} (.+)", line)):
            found.append(match.group(1).strip())
    return found


def anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def pointers() -> list[tuple[str, str, str | None, str | None]]:
    """(where, page, anchor, heading) for each pointer into the docs in the code."""
    found = []
    for path in code_files():
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in POINTER.finditer(line):
                page = "README.md" if match.group(1) == "README" else match.group(1)
                found.append((f"{path.relative_to(REPO)}:{number}", page, match.group(2), match.group(3)))
    return found


def test_the_pattern_reads_every_form_of_pointer():
    said = 'see docs/lr.md#the-noise-rule, (README, "Tests"), README ("Scaling out") and docs/x.md ("Y")'
    assert [m.groups() for m in POINTER.finditer(said)] == [
        ("docs/lr.md", "the-noise-rule", None),
        ("README", None, "Tests"),
        ("README", None, "Scaling out"),
        ("docs/x.md", None, "Y"),
    ]
    assert anchor("Does bf16 change any finding?") == "does-bf16-change-any-finding"


def test_every_page_and_section_the_code_points_to_exists():
    found = pointers()
    assert any(page.startswith("docs/") for _, page, _, _ in found)  # the pattern still finds them
    broken = []
    for where, page, to_anchor, heading in found:
        if not (REPO / page).is_file():
            broken.append(f"{where}: {page} does not exist")
            continue
        if to_anchor is None and heading is None:
            continue
        titles = headings(REPO / page)
        if to_anchor is not None and to_anchor not in map(anchor, titles):
            broken.append(f"{where}: {page} has no heading with the anchor #{to_anchor}")
        if heading is not None and not any(title.startswith(heading) for title in titles):
            broken.append(f'{where}: {page} has no section "{heading}" (its headings: {titles})')
    assert not broken, "a pointer into the docs has drifted:\n" + "\n".join(broken)
