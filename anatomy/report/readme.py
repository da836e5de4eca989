"""The README's generated sections, each between `<!-- report:NAME:start -->` and
`<!-- report:NAME:end -->` lines: the numbered findings and the headline (the two models, the
headline claims) in the README's own language, and the costs in the English one. `anatomy report
--readme` rewrites them from the same data as the report, so no README number is typed by hand.
"""

from __future__ import annotations

from pathlib import Path

from anatomy.errors import AnatomyError
from anatomy.language import ENGLISH, LANGUAGES, _, speaking
from anatomy.report.claims import headline_claims
from anatomy.report.costs_section import costs_section
from anatomy.report.figures import figure_link
from anatomy.report.grid_sections import claims_list, headline_section
from anatomy.report.findings import findings_block
from anatomy.report.protocol import protocol_of, protocol_text
from anatomy.report.roles import only_runs_of
from anatomy.report.wording import sentences as joined_sentences
from anatomy.results.reader import Results


# The README sections this report writes, each between `<!-- report:NAME:start -->` and
# `<!-- report:NAME:end -->` lines: the results, and the wall time of each target.
README_BLOCKS = ("findings", "headline", "costs")


def findings_readme_block(everything: Results) -> str:
    """The README's first screen: the numbered findings, each linked to its evidence in the report."""
    return (findings_block(everything, "docs/results/report.md") or _("No finding yet: no run is finished.")) + "\n"


def headline_block(everything: Results, figure_names: list[str], image_prefix: str) -> str:
    """The README's headline: the text and protocol it judges (as the report opens), the two
    models and the headline claims' verdicts. The studies' answers are the numbered findings
    (findings_readme_block); the full report holds the rest."""
    data = only_runs_of(everything, None)
    verdicts = claims_list(list(headline_claims(data).values()))
    parts = [
        joined_sentences([protocol_text(protocol_of(data)), _("Val loss in nats per character, seeds 42 / 7.")]),
        headline_section(data) + figure_link("headline", figure_names, image_prefix),
        verdicts,
    ]
    return "\n\n".join(parts) + "\n"


def readme_blocks(data: Results, figure_names: list[str], image_prefix: str, language: str = ENGLISH) -> dict[str, str]:
    """The README's generated sections by name (README_BLOCKS). A translated README carries the
    findings and the headline only, in its language; the costs table stays in the English one."""
    with speaking(language):
        found = findings_readme_block(data)
        headline = headline_block(data, figure_names, image_prefix)
    if language != ENGLISH:
        return {"findings": found, "headline": headline}
    costs = costs_section(data, study_points=False) or "No shipped run records its wall time yet."
    return {"findings": found, "headline": headline, "costs": costs + "\n"}


def readme_language(path: Path) -> str:
    """README.md is English; README.zh-CN.md is zh_CN (the names GitHub shows side by side)."""
    parts = path.name.split(".")
    if len(parts) == 2 and parts[1] == "md":
        return ENGLISH
    code = parts[1].replace("-", "_") if len(parts) == 3 and parts[2] == "md" else None
    if code not in LANGUAGES:
        raise AnatomyError(
            f"--readme {path}: expected README.md, or README.LANGUAGE.md with LANGUAGE one of "
            + ", ".join(code.replace("_", "-") for code in LANGUAGES if code != ENGLISH)
        )
    return code


def markers(name: str) -> tuple[str, str]:
    return f"<!-- report:{name}:start -->", f"<!-- report:{name}:end -->"


def splice_readme(readme: str, blocks: dict[str, str], path: Path) -> str:
    """The README with the text between each block's markers replaced by that block."""
    for name, body in blocks.items():
        start, end = markers(name)
        if readme.count(start) != 1 or readme.count(end) != 1 or readme.index(start) > readme.index(end):
            raise AnatomyError(
                f"{path}: expected one '{start}' line, then one '{end}' line, "
                f"around the section `anatomy report` writes"
            )
        head, rest = readme.split(start)
        _, tail = rest.split(end)
        readme = f"{head}{start}\n{body}{end}{tail}"
    return readme


def readme_block(readme: str, name: str) -> str:
    """The text between a block's markers, as splice_readme wrote it."""
    start, end = markers(name)
    return readme.split(start, 1)[1].split(end, 1)[0].removeprefix("\n")
