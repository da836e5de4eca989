"""The results dashboard: `streamlit run dashboard` from the repository root.

This entry file sets the page up, lets the learner choose the database in the sidebar
(default: $ANATOMY_DB, else results/anatomy.duckdb, else the shipped reference results) and
hands over to one file per view.
"""

from __future__ import annotations

import sys
from pathlib import Path

import streamlit as st

# `streamlit run dashboard` puts only this folder on sys.path; the views import `dashboard.*`
REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

from anatomy.language import _  # noqa: E402
from dashboard import findings, language_choice, loaders, url_state  # noqa: E402

# an emoji, drawn by the browser itself: a :material/...: icon is fetched from fonts.gstatic.com
st.set_page_config(page_title="llm-anatomy lab", page_icon="🔬", layout="wide")
# A wide Markdown table (the report's size table on Studies) scrolls inside itself: left as it is,
# at a phone's width (390 px) it would widen the whole page.
st.html("<style>[data-testid='stMarkdownContainer'] table {display: block; overflow-x: auto; max-width: 100%;}</style>")

with st.sidebar:  # first: every text below is in the language chosen here
    language_choice.choose()

VIEWS = Path(__file__).parent / "views"
# each page's address comes from its file name, so a link works in either language
pages = [
    st.Page(VIEWS / "overview.py", title=_("Overview"), icon=":material/dashboard:", default=True),
    st.Page(VIEWS / "progress.py", title=_("Progress"), icon=":material/pending_actions:"),
    st.Page(VIEWS / "listen.py", title=_("Listen"), icon=":material/hearing:"),
    st.Page(VIEWS / "curves.py", title=_("Curves"), icon=":material/show_chart:"),
    st.Page(VIEWS / "overfitting.py", title=_("Overfitting turn"), icon=":material/trending_up:"),
    st.Page(VIEWS / "ablations.py", title=_("Ablations"), icon=":material/extension:"),
    st.Page(VIEWS / "breaks.py", title=_("Break tests"), icon=":material/bolt:"),
    st.Page(VIEWS / "exams.py", title=_("Exams"), icon=":material/quiz:"),
    st.Page(VIEWS / "studies.py", title=_("Studies"), icon=":material/science:"),
    st.Page(VIEWS / "samples.py", title=_("Samples"), icon=":material/article:"),
]
page = st.navigation(pages)

with st.sidebar:
    url_state.widget(  # in the link, as the rest of the view: a shared link opens the same database
        st.text_input,
        _("Results database"),
        key="db_path",
        param="db",
        default=loaders.default_db_path(),
        parse=loaders.database_path_text,
        help=_("A DuckDB file made by `python -m anatomy collect`. Set ${variable} to change the default.").format(
            variable=loaders.DB_ENV_VAR
        ),
    )
    st.button(
        _("Reload data"),
        on_click=st.cache_data.clear,
        help=_("Re-read the database (it is re-read on its own when it changes)"),
    )
    st.caption(_("llm-anatomy lab: a 2017 Transformer vs a mini-LLaMA, part by part."))

with loaders.one_database_per_render():  # a collect landing mid-page cannot mix two databases
    if loaders.is_reference(st.session_state.get("db_path") or ""):
        if loaders.own_database_missing():  # not without a word: the learner expects their own runs
            st.warning(loaders.own_database_missing_note(), icon=":material/database:")
        st.info(loaders.reference_note(), icon=":material/verified:")
    else:
        findings.show_protocol(st.session_state.get("db_path") or loaders.default_db_path())
    page.run()
