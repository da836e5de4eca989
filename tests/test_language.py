"""The two languages: every sentence marked in the code has its Chinese, the catalogue holds
nothing the code no longer says, a translation keeps its placeholders, the language belongs to
one reader (one thread), English unless set, and every dashboard page speaks Chinese when its
link asks (`?lang=zh_CN`)."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import duckdb
import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.pofile import read_po

from anatomy import language
from anatomy.errors import AnatomyError
from anatomy.language import _
from dashboard_pages import PAGES, english_left, no_reference, open_page, texts  # noqa: F401 (no_reference: a fixture)

REPO = Path(__file__).resolve().parents[1]
PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def marked_in_code() -> dict[str, str]:
    """Each sentence marked with `_` or `ngettext` in anatomy/ and dashboard/ -> where (file:line)."""
    found: dict[str, str] = {}
    for top in ("anatomy", "dashboard"):
        for filename, line, message, _comments, _context in extract_from_dir(
            REPO / top, method_map=[("**.py", "python")]
        ):
            for text in message if isinstance(message, tuple) else (message,):
                if text:
                    found.setdefault(text, f"{top}/{filename}:{line}")
    return found


def chinese() -> dict[str, str | tuple]:
    """msgid -> its Chinese; a sentence with a count (ngettext) under its singular and its plural."""
    with language.catalogue_path("zh_CN").open("rb") as file:
        messages = [m for m in read_po(file) if m.id]
    return {text: m.string for m in messages for text in (m.id if isinstance(m.id, tuple) else (m.id,))}


def test_every_marked_sentence_has_its_chinese():
    catalogue = chinese()
    missing = [f"{where}: {text!r}" for text, where in marked_in_code().items() if not catalogue.get(text)]
    assert not missing, (
        f"{len(missing)} sentence(s) without Chinese in {language.catalogue_path('zh_CN').relative_to(REPO)} "
        "(docs/translating.md):\n" + "\n".join(missing[:40])
    )


def test_the_catalogue_holds_no_sentence_the_code_no_longer_says():
    in_code = marked_in_code()
    stale = [text for text in chinese() if text not in in_code]
    assert not stale, "translated, but no longer in the code (remove them): " + "; ".join(map(repr, stale[:20]))


def test_a_translation_keeps_every_placeholder():
    wrong = []
    for text, translated in chinese().items():
        for one in translated if isinstance(translated, tuple) else (translated,):
            if one and sorted(PLACEHOLDER.findall(one)) != sorted(PLACEHOLDER.findall(text)):
                wrong.append(f"{text!r} -> {one!r}")
    assert not wrong, "placeholders differ:\n" + "\n".join(wrong)


def test_english_unless_set_and_each_thread_speaks_its_own():
    text = next(iter(chinese()))
    assert language.current() == "en" and _(text) == text
    heard = {}

    def reader():
        language.use("zh_CN")
        heard["zh"] = _(text)

    thread = threading.Thread(target=reader)
    thread.start()
    thread.join()
    assert heard["zh"] == chinese()[text] != text
    assert _(text) == text  # the other reader's choice did not reach this one


def test_an_unknown_language_is_one_line():
    with pytest.raises(AnatomyError, match=r"language 'fr': expected one of en, zh_CN"):
        language.use("fr")


# Every page of the dashboard, in Chinese: no English sentence left outside code and the samples' own text
@pytest.mark.parametrize("page", PAGES)
def test_every_page_speaks_chinese_when_the_link_asks(fixture_grid_db, page, monkeypatch):
    app = open_page(fixture_grid_db, page, monkeypatch, language="zh_CN")
    assert re.search(r"[\u4e00-\u9fff]", app.title[0].value), app.title[0].value
    with duckdb.connect(str(fixture_grid_db), read_only=True) as con:
        samples = [text for (text,) in con.execute("SELECT text FROM samples WHERE text IS NOT NULL").fetchall()]
    english = english_left(app, samples)
    assert not english, f"/{page} in Chinese still shows: " + " | ".join(english[:5])
    # Chinese puts no space after its full-width punctuation (report.roles.sentences joins them)
    spaced = [line for line in texts(app).splitlines() if re.search(r"[。！？；：，] ", line)]
    spaced = [line for line in spaced if not any(line.strip() in text for text in samples)]
    assert not spaced, f"/{page} in Chinese has a space after a full stop: " + " | ".join(spaced[:5])
