"""The chapter's published figures have one owner, anatomy/chapter.py: the check, the report's
headline table and the claims read them there, and no other module types them."""

from __future__ import annotations

import re
from pathlib import Path

from anatomy.chapter import CHAPTER

REPO = Path(__file__).resolve().parent.parent
OWNER = REPO / "anatomy" / "chapter.py"


def typed_forms() -> set[str]:
    """How each figure of the chapter's own (not a small round step count) would be typed."""
    forms = set()
    for model in (CHAPTER.vanilla, CHAPTER.llama):
        forms |= {str(model.params), f"{model.params:,}", f"{model.params:_}"}
        forms |= {str(value) for value in (*model.best_val, model.final_val) if value is not None}
    return forms | {str(value) for value in CHAPTER.gap}


def test_no_module_but_the_owner_types_the_chapters_figures():
    forms = typed_forms()
    assert "3.599" in forms and "1,244,928" in forms and "1_178_496" in forms
    pattern = re.compile(r"(?<![\w.])(" + "|".join(map(re.escape, sorted(forms))) + r")(?![\w])")
    typed = [
        f"{path.relative_to(REPO)}:{number}: {match.group(1)}"
        for top in ("anatomy", "dashboard")
        for path in sorted((REPO / top).rglob("*.py"))
        if path != OWNER
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        for match in pattern.finditer(line)
    ]
    assert not typed, "read these from anatomy.chapter.CHAPTER: " + "; ".join(typed)


def test_the_owner_holds_what_the_report_prints():
    """The figures as the chapter printed them, so that a slip in the owner shows here too."""
    assert CHAPTER.seeds == (42, 7) and CHAPTER.steps == 2000
    assert (CHAPTER.vanilla.params, CHAPTER.llama.params) == (1_244_928, 1_178_496)
    assert (CHAPTER.vanilla.best_val, CHAPTER.llama.best_val) == ((3.706, 3.705), (3.599, 3.612))
    assert (CHAPTER.vanilla.best_step, CHAPTER.llama.best_step) == (1100, 500)
    assert (CHAPTER.llama.final_val, CHAPTER.llama.final_train, CHAPTER.gap) == (5.083, 0.33, (0.107, 0.094))
    assert CHAPTER.model("llama") is CHAPTER.llama
