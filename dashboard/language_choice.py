"""The reader's language: a switch in the sidebar, kept in the link (`?lang=zh_CN`).

`choose()` draws the switch and makes every `_()` of this render speak the chosen language
(anatomy/language.py). A fragment that reruns on its own (the Progress page's refresh) skips the
top of the script, and runs in a thread of its own: it calls `reapply()` first.
"""

from __future__ import annotations

import streamlit as st

from anatomy import language
from dashboard import url_state

KEY = "language"
PARAM = "lang"


def choose() -> str:
    """The language switch; returns the chosen language's code."""
    chosen = url_state.widget(
        st.selectbox,
        "Language · 语言",  # in both, since the reader may not read the current one
        list(language.LANGUAGES),
        key=KEY,
        param=PARAM,
        default=language.ENGLISH,
        format_func=language.LANGUAGES.get,
    )
    language.use(chosen)
    return chosen


def reapply() -> None:
    """Speak the language this session chose (English before any choice)."""
    language.use(st.session_state.get(KEY, language.ENGLISH))
