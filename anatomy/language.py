"""The language of every sentence a reader sees: English, or 中文.

The code is written in English, and each sentence a reader sees is marked for translation with
`_`: `_("best val {loss}").format(loss=...)`, never an f-string, so that the whole sentence,
placeholders and all, is what a translator sees. A short word that could mean two things is
marked with its context (`pgettext`), and a list is joined by the language's own rules
(`join_list`). A constant made at import time is marked with
`N_` and translated with `_` where it is shown. The translations live in one gettext catalogue
per language, anatomy/locale/LANGUAGE/LC_MESSAGES/messages.po, which Babel reads here (and
extracts from the code: docs/translating.md). English needs no catalogue: a sentence is its own
English.

The language belongs to one reader, not to the process: the dashboard serves several readers at
once, each page render in a thread of its own, so it lives in a context variable that each render
sets (`use`). The report writes English, except the headline of a translated README
(`README.zh-CN.md`), which it writes inside `speaking`.
"""

from __future__ import annotations

import gettext
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from functools import cache
from io import BytesIO
from pathlib import Path

from anatomy.errors import AnatomyError

LOCALE_DIR = Path(__file__).with_name("locale")
DOMAIN = "messages"
ENGLISH = "en"
# code -> the language's own name, as the switch shows it
LANGUAGES = {ENGLISH: "English", "zh_CN": "中文"}

_language: ContextVar[str] = ContextVar("language", default=ENGLISH)


def catalogue_path(language: str) -> Path:
    return LOCALE_DIR / language / "LC_MESSAGES" / f"{DOMAIN}.po"


@cache
def translations(language: str) -> gettext.NullTranslations:
    """The language's catalogue, compiled once per process (English: none, every text as written)."""
    if language == ENGLISH:
        return gettext.NullTranslations()
    # Babel only here: marking a text (`N_`, `_` in English) must not load it, the workflow marks some
    from babel.messages.mofile import write_mo
    from babel.messages.pofile import read_po

    path = catalogue_path(language)
    try:
        with path.open("rb") as file:
            catalogue = read_po(file, locale=language)
    except (OSError, ValueError) as err:
        raise AnatomyError(f"{path}: cannot read this translation catalogue ({err})") from None
    compiled = BytesIO()
    write_mo(compiled, catalogue)  # Babel compiles; the standard gettext reads the result
    compiled.seek(0)
    return gettext.GNUTranslations(compiled)


def known(language: str) -> str:
    if language not in LANGUAGES:
        raise AnatomyError(f"language {language!r}: expected one of {', '.join(LANGUAGES)}")
    return language


def use(language: str) -> None:
    """Speak `language` from here on, in this thread (a dashboard render) only."""
    _language.set(known(language))


@contextmanager
def speaking(language: str) -> Iterator[None]:
    """Speak `language` inside the block only (the report writes each README in its language)."""
    token = _language.set(known(language))
    try:
        yield
    finally:
        _language.reset(token)


def current() -> str:
    return _language.get()


def _(message: str) -> str:
    """`message` in the reader's language (as written where it has no translation)."""
    return translations(_language.get()).gettext(message)


def N_(message: str) -> str:
    """Marks a sentence for translation where it is defined (a constant made at import, before any
    reader's language is known); `_(CONSTANT)` translates it where it is shown."""
    return message


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural of a sentence with a count, in the reader's language."""
    return translations(_language.get()).ngettext(singular, plural, n)


def pgettext(context: str, message: str) -> str:
    """`message` in the reader's language, as meant in `context`: a short word that reads two ways
    in English ("post" the norm's position, or a blog post) is two msgids for the translator."""
    return translations(_language.get()).pgettext(context, message)


def join_list(items: Iterable[str], style: str = "standard") -> str:
    """Items joined as the reader's language lists them, by Babel's CLDR rules: "a, b, and c",
    "a、b和c". `style` is CLDR's: "standard" (and), "or", "unit" (no conjunction)."""
    from babel.lists import format_list  # Babel only here, as in `translations`

    return format_list(list(items), style=style, locale=_language.get())
