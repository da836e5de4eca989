"""The finding a page opens with: the report's own verdict on the chapter's claim (anatomy.report.claims),
so that a page and report.md never say one finding two ways. Judged on the grid's runs only, as
the report judges them; the studies have their own page. And the parts' names, glossed once on
each page that uses them."""

from __future__ import annotations

import dataclasses

import streamlit as st

from anatomy.language import N_, _
from anatomy.report.claims import claims_by_key, finding_text
from anatomy.report.protocol import protocol_of, protocol_text
from anatomy.report.roles import only_runs_of
from anatomy.results.reader import Results
from dashboard import loaders
from dashboard.tables import markdown_literal


def show_protocol(path: str) -> None:
    """Above every page of a database that is not the chapter's protocol (a toy or partial grid,
    or runs that learned nothing): what it holds, that its claims are not testable at this size,
    and the shipped reference one click away. Nothing where the database cannot be read: the page
    says why."""
    try:
        results = loaders.load_results(path)
    except loaders.DatabaseProblem:
        return
    protocol = protocol_of(only_runs_of(results, None))
    if not protocol.warned:
        return
    # a corpus name is anyone's to write (its config.json): shown as text, never as markup
    named = dataclasses.replace(protocol, corpora=tuple(markdown_literal(name) for name in protocol.corpora))
    st.warning(protocol_text(named), icon=":material/science:")
    if reference := loaders.reference_db():
        st.button(
            _("Open the shipped reference results"),
            on_click=lambda: st.session_state.update(db_path=reference),
            help=_("The full-size runs shipped with the repository (results/reference/)."),
        )


def show_findings(results: Results, *keys: str) -> None:
    """The verdicts of these claims (by their keys in anatomy.report.claims.claims_by_key), one paragraph each."""
    found = claims_by_key(only_runs_of(results, None))
    for key in keys:
        st.markdown(finding_text(found[key]))


# each part's name with what it is, once at the top of a page that names the parts: the names
# stay as the chapter writes them (pre-norm, RoPE), their meaning in the reader's words
PART_GLOSSARY = N_(
    "The five parts: RMSNorm (root-mean-square normalisation, in place of LayerNorm), pre-norm (the norm "
    "before each sublayer, not after the residual sum), RoPE (rotary position embedding, in place of a "
    "learned position table), GQA (grouped-query attention: query heads share key/value heads) and SwiGLU "
    "(a gated feed-forward, in place of GELU)."
)


def show_part_glossary() -> None:
    """The parts' names glossed, in one caption: said once per page, before the page uses them."""
    st.caption(_(PART_GLOSSARY))
