"""The finding a page opens with: the report's own verdict on the chapter's claim (anatomy.report.claims),
so that a page and report.md never say one finding two ways. Judged on the grid's runs only, as
the report judges them; the studies have their own page."""

from __future__ import annotations

import streamlit as st

from anatomy.report.claims import claims_by_key, finding_text
from anatomy.report.roles import only_runs_of
from anatomy.results.reader import Results


def show_findings(results: Results, *keys: str) -> None:
    """The verdicts of these claims (anatomy.report.claims.CLAIM_KEYS), one paragraph each."""
    found = claims_by_key(only_runs_of(results, None))
    for key in keys:
        st.markdown(finding_text(found[key]))
