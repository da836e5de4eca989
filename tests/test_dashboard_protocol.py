"""Toy numbers never pass for findings on the dashboard (anatomy/report/protocol.py): a database of
runs smaller than the chapter's says so above every page, its claims read "not testable at this
size", its differences are not coloured as wins, and the shipped reference is one click away. The
database in use is part of the link."""

from __future__ import annotations

import pytest
from streamlit.testing.v1 import AppTest

from anatomy.report import protocol
from dashboard_pages import (  # noqa: F401 (no_reference: autouse)
    APP,
    PAGES,
    no_reference,
    open_page,
    pages_in_the_inner_loop,
    texts,
)
from dashboard import loaders

CHAPTERS = {"steps": 2000, "n_layer": 4, "d_model": 128, "ctx_len": 128}  # the chapter's run (protocol.py)


@pytest.fixture
def chapters_protocol(monkeypatch):
    """The real protocol back (conftest lets the tests' small runs stand for the chapter's)."""
    monkeypatch.setattr(protocol, "CHAPTER_PROTOCOL", CHAPTERS)


def test_the_chapters_protocol_is_what_the_package_trains_by_default():
    from anatomy.chapter import CHAPTER
    from anatomy.config import ModelConfig

    assert CHAPTERS == {"steps": CHAPTER.steps, "n_layer": ModelConfig().n_layer, "d_model": 128, "ctx_len": 128}


@pytest.mark.parametrize("page", pages_in_the_inner_loop(PAGES, "curves"))  # the banner is the app's, above any page
def test_every_page_of_a_toy_database_says_so(dashboard_db, monkeypatch, page, chapters_protocol):
    prose = texts(open_page(dashboard_db, page, monkeypatch))
    assert "**Not the chapter's protocol**" in prose and "(the chapter: 2,000)" in prose


def test_the_overview_of_a_toy_database_states_no_finding(dashboard_db, monkeypatch, chapters_protocol):
    app = open_page(dashboard_db, "overview", monkeypatch)
    prose = texts(app)
    assert "Not testable at this size" in prose and "Reproduced." not in prose
    deltas = [m.proto.delta for m in app.metric if m.proto.delta]
    assert deltas and all(d.endswith("(not testable at this size)") for d in deltas)
    assert all(m.proto.color == m.proto.MetricColor.GRAY for m in app.metric if m.proto.delta)


def test_a_database_at_the_chapters_size_gets_no_banner(dashboard_db, monkeypatch):
    # conftest's protocol: the tiny runs stand for the chapter's
    assert "Not the chapter's protocol" not in texts(open_page(dashboard_db, "overview", monkeypatch))


def test_the_reference_is_one_click_away(dashboard_db, monkeypatch, chapters_protocol, tmp_path):
    monkeypatch.setattr(loaders, "reference_db", lambda: str(dashboard_db))  # any database: the click is tested
    app = open_page(dashboard_db, "overview", monkeypatch)
    (button,) = [b for b in app.button if b.label == "Open the shipped reference results"]
    button.click().run()
    assert app.session_state["db_path"] == str(dashboard_db)


def test_the_database_in_use_is_part_of_the_link(dashboard_db, fixture_grid_db, monkeypatch):
    monkeypatch.setenv("ANATOMY_DB", str(dashboard_db))
    monkeypatch.setenv(loaders.ALLOWED_ENV_VAR, str(fixture_grid_db))  # a link may open it (the server's owner says)
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.query_params["db"] = str(fixture_grid_db)
    app.run()
    assert not app.exception
    assert app.session_state["db_path"] == str(fixture_grid_db)
    assert app.query_params["db"] in (str(fixture_grid_db), [str(fixture_grid_db)])
    # a value no file system takes is dropped in words, and the default opens
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.query_params["db"] = "x" * 5000
    app.run()
    assert not app.exception and app.session_state["db_path"] == str(dashboard_db)


def test_a_database_past_a_read_bound_is_one_line_not_a_traceback(dashboard_db, monkeypatch):
    from anatomy.results.database import ReadLimitExceeded

    def too_slow(con, path):
        raise ReadLimitExceeded(f"{path}: a query ran for more than 10 s and was stopped")

    monkeypatch.setattr(loaders, "read", too_slow)
    loaders.st.cache_data.clear()
    monkeypatch.setenv("ANATOMY_DB", str(dashboard_db))
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.run()
    assert not app.exception
    assert any("was stopped" in e.value for e in app.error)


def test_a_corpus_name_in_the_banner_is_text_not_markup(tmp_path, monkeypatch, chapters_protocol):
    from anatomy.results.collect import collect
    from run_folders import LLAMA_PARTS, write_run_folder
    from test_dashboard_url import HOSTILE, shows_as_text

    runs = tmp_path / "runs"
    for seed in (42, 7):
        write_run_folder(runs, "vanilla", seed, data={"corpus": HOSTILE})
        write_run_folder(runs, "llama", seed, model=LLAMA_PARTS, data={"corpus": HOSTILE})
    collect(runs, tmp_path / "anatomy.duckdb")
    app = open_page(tmp_path / "anatomy.duckdb", "overview", monkeypatch)
    (banner,) = [w.value for w in app.warning if "Not the chapter's protocol" in w.value]
    shows_as_text(banner.split(" (")[0], HOSTILE)


def test_the_exams_of_toy_runs_state_no_finding(dashboard_db, monkeypatch, chapters_protocol):
    from anatomy.report import exam_findings
    from anatomy.results.reader import load

    app = open_page(dashboard_db, "exams", monkeypatch)
    said = [m.value for m in app.markdown]
    found = exam_findings.length_finding(load(dashboard_db))
    assert found and f"**{exam_findings.sentence(found)}**" not in said
    assert (
        f"**Not testable at this size.** What these runs, not the chapter's, showed: {exam_findings.sentence(found)}"
        in said
    )
    monkeypatch.setattr(protocol, "CHAPTER_PROTOCOL", {key: 1 for key in CHAPTERS})  # at the chapter's size
    assert f"**{exam_findings.sentence(found)}**" in [
        m.value for m in open_page(dashboard_db, "exams", monkeypatch).markdown
    ]
