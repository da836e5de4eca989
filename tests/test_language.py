"""The two languages: every sentence marked in the code has its Chinese, the catalogue holds
nothing the code no longer says, a translation keeps its placeholders, every sentence is one
whole msgid and a short word that reads two ways has its context, the documented extract command
finds what the code marks and keeps the translators' notes, the language belongs to one reader
(one thread), English unless set, lists are joined as the reader's language joins them, and
every dashboard page speaks Chinese when its link asks (`?lang=zh_CN`)."""

from __future__ import annotations

import re
import shlex
import threading
from pathlib import Path

import duckdb
import pytest
from babel.messages.extract import extract_from_dir
from babel.messages.frontend import CommandLineInterface
from babel.messages.pofile import read_po

from anatomy import language
from anatomy.errors import AnatomyError
from anatomy.language import _
from dashboard_pages import (  # noqa: F401 (no_reference: a fixture)
    PAGES,
    english_left,
    no_reference,
    open_page,
    pages_in_the_inner_loop,
    texts,
)

REPO = Path(__file__).resolve().parents[1]
PLACEHOLDER = re.compile(r"\{[^{}]*\}")


def marked_in_code() -> dict[tuple[str | None, str], str]:
    """Each sentence marked with `_`, `ngettext` or `pgettext` in anatomy/ and dashboard/, and each
    study's question and scope in workflow/studies.yaml (babel.cfg's extractor for it), as (its
    context or None, itself) -> where (file:line)."""
    found: dict[tuple[str | None, str], str] = {}
    for top, method_map in (
        ("anatomy", [("**.py", "python")]),
        ("dashboard", [("**.py", "python")]),
        ("workflow", [("studies.yaml", "anatomy.results.studies:extract_messages")]),
    ):
        for filename, line, message, _comments, context in extract_from_dir(REPO / top, method_map=method_map):
            for text in message if isinstance(message, tuple) else (message,):
                if text:
                    found.setdefault((context, text), f"{top}/{filename}:{line}")
    return found


def chinese() -> dict[tuple[str | None, str], str | tuple]:
    """(context, msgid) -> its Chinese; a sentence with a count (ngettext) under its singular and
    its plural."""
    with language.catalogue_path("zh_CN").open("rb") as file:
        messages = [m for m in read_po(file) if m.id]
    return {(m.context, text): m.string for m in messages for text in (m.id if isinstance(m.id, tuple) else (m.id,))}


def shown(key: tuple[str | None, str]) -> str:
    context, text = key
    return repr(text) if context is None else f"{text!r} (context {context!r})"


def test_every_marked_sentence_has_its_chinese():
    catalogue = chinese()
    missing = [f"{where}: {shown(key)}" for key, where in marked_in_code().items() if not catalogue.get(key)]
    assert not missing, (
        f"{len(missing)} sentence(s) without Chinese in {language.catalogue_path('zh_CN').relative_to(REPO)} "
        "(docs/translating.md):\n" + "\n".join(missing[:40])
    )


def test_no_translation_is_marked_fuzzy():
    """pybabel marks a guess fuzzy when a msgid changes, and the compiled catalogue drops fuzzy
    entries: the sentence would stay English on a Chinese page while it looks translated here."""
    with language.catalogue_path("zh_CN").open("rb") as file:
        fuzzy = [message.id for message in read_po(file) if message.id and message.fuzzy]
    assert not fuzzy, f"fuzzy, so shown in English: {fuzzy[:5]}"


def test_the_catalogue_holds_no_sentence_the_code_no_longer_says():
    in_code = marked_in_code()
    stale = [key for key in chinese() if key not in in_code]
    assert not stale, "translated, but no longer in the code (remove them): " + "; ".join(map(shown, stale[:20]))


def test_a_translation_keeps_every_placeholder():
    wrong = []
    for (_context, text), translated in chinese().items():
        for one in translated if isinstance(translated, tuple) else (translated,):
            if one and sorted(PLACEHOLDER.findall(one)) != sorted(PLACEHOLDER.findall(text)):
                wrong.append(f"{text!r} -> {one!r}")
    assert not wrong, "placeholders differ:\n" + "\n".join(wrong)


def test_every_sentence_is_one_whole_msgid():
    """A sentence glued from fragments (", at peak lr {lr}" added to another) cannot be reordered
    by its translator: every msgid starts and ends with its own words."""
    fragments = [
        f"{where}: {shown(key)}"
        for key, where in marked_in_code().items()
        if key[1] != key[1].strip() or key[1][:1] in ",;:."
    ]
    assert not fragments, "make each a whole sentence with its placeholders:\n" + "\n".join(fragments)


def test_bold_in_either_language_renders_as_bold():
    """`**` must close where Markdown (CommonMark, as Streamlit reads it) can close it: after a
    full-width full stop, `**` followed by a Chinese character stays two literal asterisks on the
    page ("**在这个规模下无法检验。**这些运行"). Each sentence is rendered with its placeholders
    filled, and no `**` may be left in the HTML."""
    from markdown_it import MarkdownIt  # Streamlit's own dependency (through rich)

    markdown = MarkdownIt("commonmark")
    literal = []
    for (_context, text), translated in chinese().items():
        for sentence in (text, *(translated if isinstance(translated, tuple) else (translated,))):
            if "**" in sentence and "**" in markdown.renderInline(PLACEHOLDER.sub("X", sentence)):
                literal.append(repr(sentence))
    assert not literal, "a `**` that Markdown shows as it is (close bold before the punctuation):\n" + "\n".join(
        literal
    )


# a half-width parenthesis beside Chinese, once code spans and link targets are taken out
HALF_WIDTH_PARENTHESES = re.compile(r"[\u4e00-\u9fff，。：；、]\s*\([^)]*\)|\([^)]*\)\s*[\u4e00-\u9fff，。：；、]")


def test_chinese_puts_its_parentheses_full_width():
    """ "验证损失 (val loss) 随之回升" read as English punctuation dropped into Chinese: （）."""
    half = []
    for translated in chinese().values():
        for sentence in translated if isinstance(translated, tuple) else (translated,):
            prose = re.sub(r"\]\([^)]*\)", "]", re.sub(r"`[^`]*`", "", sentence))
            if HALF_WIDTH_PARENTHESES.search(prose):
                half.append(repr(sentence))
    assert not half, "use （） in these:\n" + "\n".join(half)


# One-word msgids that read two ways: each is marked with its context (pgettext)
AMBIGUOUS = {"no", "yes", "**no**", "**yes**", "none", "lower", "higher", "part", "state", "result"}


def test_a_short_word_that_reads_two_ways_has_its_context():
    bare = [
        f"{where}: {text!r}"
        for (context, text), where in marked_in_code().items()
        if where.startswith("anatomy/") and context is None and text in AMBIGUOUS
    ]
    assert not bare, "mark these with pgettext(context, word):\n" + "\n".join(bare)


def documented_extract() -> list[str]:
    """The `pybabel extract` command of docs/translating.md, as its words."""
    doc = (REPO / "docs" / "translating.md").read_text(encoding="utf-8")
    return shlex.split(next(line for line in doc.splitlines() if line.startswith("pybabel extract")))


def test_the_documented_extract_finds_every_sentence_with_its_notes_and_the_catalogue_covers_it(tmp_path, monkeypatch):
    words = documented_extract()
    assert words[words.index("-F") + 1] == "babel.cfg"
    template = tmp_path / "messages.pot"
    words[words.index("-o") + 1] = str(template)
    monkeypatch.chdir(REPO)
    CommandLineInterface().run([words[0], "--quiet", *words[1:]])
    with template.open("rb") as file:
        extracted = [m for m in read_po(file) if m.id]
    keys = {(m.context, text) for m in extracted for text in (m.id if isinstance(m.id, tuple) else (m.id,))}
    # babel.cfg and the command's keywords find what the code marks, pgettext's context included
    assert keys == set(marked_in_code())
    # the translators' notes reach the catalogue's template
    notes = [c for m in extracted for c in m.auto_comments]
    assert any(note.startswith("TRANSLATORS:") for note in notes), "the extract command drops the translators' notes"
    catalogue = chinese()
    missing = [shown(key) for key in sorted(keys, key=str) if not catalogue.get(key)]
    assert not missing, f"{len(missing)} extracted sentence(s) without Chinese:\n" + "\n".join(missing[:40])


def test_english_unless_set_and_each_thread_speaks_its_own():
    key = next(key for key in chinese() if key[0] is None)
    _context, text = key
    assert language.current() == "en" and _(text) == text
    heard = {}

    def reader():
        language.use("zh_CN")
        heard["zh"] = _(text)

    thread = threading.Thread(target=reader)
    thread.start()
    thread.join()
    assert heard["zh"] == chinese()[key] != text
    assert _(text) == text  # the other reader's choice did not reach this one


def test_an_unknown_language_is_one_line():
    with pytest.raises(AnatomyError, match=r"language 'fr': expected one of en, zh_CN"):
        language.use("fr")


def test_a_short_word_is_translated_as_its_context_means_it(tmp_path, monkeypatch):
    catalogue = tmp_path / "zh_CN" / "LC_MESSAGES" / "messages.po"
    catalogue.parent.mkdir(parents=True)
    catalogue.write_text(
        'msgid ""\nmsgstr "Content-Type: text/plain; charset=UTF-8\\n"\n\n'
        'msgctxt "norm position"\nmsgid "post"\nmsgstr "后置"\n\n'
        'msgctxt "blog"\nmsgid "post"\nmsgstr "文章"\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(language, "LOCALE_DIR", tmp_path)
    language.translations.cache_clear()
    try:
        with language.speaking("zh_CN"):
            heard = language.pgettext("norm position", "post"), language.pgettext("blog", "post"), _("post")
        assert heard == ("后置", "文章", "post")  # without a context, no translation was asked for
        assert language.pgettext("norm position", "post") == "post"  # English: the word as written
    finally:
        language.translations.cache_clear()  # the next test reads the real catalogue


def test_a_list_is_joined_as_the_readers_language_lists():
    assert language.join_list(["rmsnorm", "swiglu", "rope"]) == "rmsnorm, swiglu, and rope"
    assert language.join_list(["rmsnorm", "swiglu"]) == "rmsnorm and swiglu"
    assert language.join_list(["7", "42"], style="or") == "7 or 42"
    assert language.join_list(["rmsnorm"]) == "rmsnorm" and language.join_list([]) == ""
    with language.speaking("zh_CN"):
        assert language.join_list(["rmsnorm", "swiglu", "rope"]) == "rmsnorm、swiglu和rope"
        assert language.join_list(iter(["7", "42"]), style="or") == "7或42"


# Every page of the dashboard, in Chinese: no English sentence left outside code and the samples' own text.
# The inner loop opens two (some 11 s for all ten there); CI opens all ten.
@pytest.mark.parametrize("page", pages_in_the_inner_loop(PAGES, "overview", "curves"))
def test_every_page_speaks_chinese_when_the_link_asks(fixture_grid_db, page, monkeypatch):
    app = open_page(fixture_grid_db, page, monkeypatch, language="zh_CN")
    assert re.search(r"[\u4e00-\u9fff]", app.title[0].value), app.title[0].value
    with duckdb.connect(str(fixture_grid_db), read_only=True) as con:
        samples = [text for (text,) in con.execute("SELECT text FROM samples WHERE text IS NOT NULL").fetchall()]
    english = english_left(app, samples)
    assert not english, f"/{page} in Chinese still shows: " + " | ".join(english[:5])
    # Chinese puts no space after its full-width punctuation (report.wording.sentences joins them)
    spaced = [line for line in texts(app).splitlines() if re.search(r"[。！？；：，] ", line)]
    spaced = [line for line in spaced if not any(line.strip() in text for text in samples)]
    assert not spaced, f"/{page} in Chinese has a space after a full stop: " + " | ".join(spaced[:5])


def test_the_pages_name_runs_states_devices_and_checkpoints_in_chinese(fixture_grid_db, monkeypatch):
    """ "llama · seed 42", "done", "cpu", "best" and "last" were left in English on Chinese pages:
    short words, which no four-word check finds."""
    app = open_page(fixture_grid_db, "overview", monkeypatch, language="zh_CN")
    table = app.dataframe[-1].value
    assert table["label"].str.contains(" · 种子 ").all(), list(table["label"])
    assert not set(table["status"]) & {"done", "running", "diverged"}, set(table["status"])
    assert not set(table["device"]) & {"cpu", "cuda", "mps"}, set(table["device"])
    app = open_page(fixture_grid_db, "samples", monkeypatch, language="zh_CN")
    options = app.selectbox(key="samples_checkpoint").options
    assert "best" not in options and "last" not in options and "最终（last）" in options, options
