"""A dashboard served to a class (issue #45): what a visitor's link can make it do.

A link is anyone's to write, `?db=` included. The dashboard opens only databases in the results
folder and those its owner lists, and says nothing about any other path; a crafted database
is one line on the page, never a raw error; a DuckDB file this project did not make is not
called an older version of one; and a learner whose own database is missing is told so, not
shown the reference results as if they were theirs.
"""

from __future__ import annotations

import shutil
import threading
from types import SimpleNamespace
from pathlib import Path

import duckdb
import pytest
from streamlit.testing.v1 import AppTest

from anatomy.results import database
from dashboard_pages import APP, loaders, no_reference, open_page, texts  # noqa: F401 - no_reference: autouse
from run_folders import write_fixture_grid

REFUSED = loaders.REFUSED.format(variable=loaders.ALLOWED_ENV_VAR)  # as the page says it in English


def errors(app: AppTest) -> list[str]:
    return [element.value for element in app.error]


# ---------------------------------------------------------------------------------------------
# ?db= opens the results folder and what the owner lists, nothing else


@pytest.mark.parametrize(
    "asked",
    [
        "/etc/passwd",  # a file that is no database: was "not a DuckDB database"
        "/root",  # a folder: was "is a folder"
        "/no/such/folder/anatomy.duckdb",  # was "no results database ... yet"
        "results/../../../../../../etc/passwd",  # under results/ as written, not once resolved
    ],
)
def test_a_link_to_any_other_path_is_refused_in_one_line_that_names_none(dashboard_db, asked, monkeypatch):
    app = open_page(dashboard_db, "curves", monkeypatch, params={"db": asked})
    assert errors(app) == [REFUSED]  # the same line whether the path exists or not
    assert not app.warning and not app.info and not app.dataframe
    shown = texts(app)
    assert "passwd" not in shown and "/root" not in shown and "/no/such" not in shown


def test_a_link_inside_the_results_folder_to_a_database_outside_is_refused(dashboard_db, tmp_path, monkeypatch):
    """Links are resolved before the check: results/x.duckdb may lead anywhere."""
    monkeypatch.chdir(tmp_path)  # its results/ is the working folder's results folder
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "link.duckdb").symlink_to(dashboard_db)
    app = open_page(
        tmp_path / "results" / "anatomy.duckdb", "overview", monkeypatch, params={"db": "results/link.duckdb"}
    )
    assert errors(app) == [REFUSED]
    assert not app.dataframe


def test_the_progress_page_reads_no_runs_folder_outside(dashboard_db, tmp_path, monkeypatch):
    """The Progress page reads the runs/ beside the chosen database: any folder's, before."""
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(dashboard_db.parent / "runs", elsewhere / "runs")
    app = open_page(dashboard_db, "progress", monkeypatch, params={"db": str(elsewhere / "anatomy.duckdb")})
    assert errors(app) == [REFUSED]
    assert "elsewhere" not in texts(app) and not app.dataframe


def test_the_owner_lists_more_places_to_open(dashboard_db, fixture_grid_db, tmp_path, monkeypatch):
    monkeypatch.setenv(loaders.ALLOWED_ENV_VAR, f"{tmp_path / 'other'}:{fixture_grid_db.parent}")
    app = open_page(dashboard_db, "overview", monkeypatch, params={"db": str(fixture_grid_db)})
    assert not app.error and len(app.dataframe[0].value) == 4  # the fixture grid's headline runs


# ---------------------------------------------------------------------------------------------
# A crafted database: one line, and one bounded render


def crafted(dashboard_db: Path, tmp_path: Path, view: str) -> Path:
    """A copy of a collected database whose seed_band view is `view` (on seed_band_as_built)."""
    db = tmp_path / "crafted.duckdb"
    shutil.copy(dashboard_db, db)
    with duckdb.connect(str(db)) as con:
        con.execute("ALTER VIEW seed_band RENAME TO seed_band_as_built")
        con.execute(f"CREATE VIEW seed_band AS {view}")
    return db


def test_a_view_that_overflows_is_one_line_not_a_raw_error(dashboard_db, tmp_path, monkeypatch):
    db = crafted(
        dashboard_db,
        tmp_path,
        "SELECT * FROM seed_band_as_built WHERE 2147483647::INTEGER + CAST(step AS INTEGER) + 1 > 0",
    )
    app = open_page(db, "curves", monkeypatch)  # no exception: open_page checks
    (line,) = errors(app)
    assert line.startswith(f"`{db}` cannot be read: a query on it failed on its data (`Out of Range Error: Overflow ")
    assert "\n" not in line


def test_a_slow_view_holds_a_render_once_not_for_every_read(dashboard_db, tmp_path, monkeypatch):
    """A render reads the database more than once (the banner, then the page): each read of one
    slow view ran the whole time limit again, 62 s in all. Now the render's reads share one limit:
    the view is interrupted once, and the next read is refused before it starts."""
    interrupts = []

    class CountedTimer(threading.Timer):  # a timer that counts the interrupts it makes
        def __init__(self, interval: float, interrupt) -> None:
            super().__init__(interval, lambda: (interrupts.append(interval), interrupt()))

    monkeypatch.setattr(database, "threading", SimpleNamespace(Timer=CountedTimer))  # database.py's timers only
    monkeypatch.setattr(database, "QUERY_SECONDS", 2)
    db = crafted(
        dashboard_db,
        tmp_path,
        "SELECT * FROM seed_band_as_built WHERE (SELECT sum(i) FROM range(10000000000000) t(i)) >= 0",
    )
    app = open_page(db, "curves", monkeypatch)
    (line,) = errors(app)
    assert "its queries ran for more than 2 s and were stopped" in line
    assert len(interrupts) == 1


def test_served_pages_show_no_error_details():
    """An error nobody expected shows Streamlit's notice, not its text and traceback (server paths)."""
    import tomllib

    settings = tomllib.loads((APP.parent.parent / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert settings["client"]["showErrorDetails"] == "none"


# ---------------------------------------------------------------------------------------------
# A DuckDB file this project did not make


def test_a_duckdb_file_from_elsewhere_is_not_called_an_older_version(tmp_path, monkeypatch):
    db = tmp_path / "notes.duckdb"
    with duckdb.connect(str(db)) as con:
        con.execute("CREATE TABLE notes (line VARCHAR)")
    app = open_page(db, "overview", monkeypatch)
    (line,) = errors(app)
    assert line.startswith(f"`{db}` is a DuckDB database this project did not make (it has no runs, metrics, ")
    assert "older version" not in texts(app) and "Collect it again" not in texts(app)
    assert not [button for button in app.button if button.label == "Reload"]


# ---------------------------------------------------------------------------------------------
# The learner's own database missing: said, not the reference in its place without a word


@pytest.fixture
def shipped_reference(tmp_path, monkeypatch):
    """The fixture grid shipped as reference results; no database of the learner's own anywhere."""
    from anatomy.results.reference import ship

    write_fixture_grid(tmp_path / "trained" / "runs")
    ship(tmp_path / "trained" / "runs", tmp_path / "reference")
    monkeypatch.setattr(loaders, "REFERENCE_DIR", tmp_path / "reference")
    monkeypatch.setattr(loaders, "REFERENCE_DB", tmp_path / "reference.duckdb")
    monkeypatch.delenv("ANATOMY_DB", raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(loaders, "REPO_ROOT", tmp_path)
    return tmp_path / "results"


def open_default(tmp_path) -> AppTest:
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    return app


MISSING = "Your database `results/anatomy.duckdb` is missing, though your results folder shows a grid was run"


@pytest.mark.parametrize("left", ["runs/vanilla/seed42/metrics.jsonl", "results.json"])
def test_runs_without_their_database_are_said_above_the_reference(shipped_reference, tmp_path, left):
    """Runs trained but never collected, or a database that was there (collect wrote results.json
    beside it) and is gone."""
    (shipped_reference / left).parent.mkdir(parents=True)
    (shipped_reference / left).write_text("{}")
    app = open_default(tmp_path)
    assert app.sidebar.text_input(key="db_path").value == str(loaders.REFERENCE_DB)
    (warning,) = [w.value for w in app.warning if w.value.startswith(MISSING)]
    assert f"Make yours with `{loaders.COLLECT_OWN}`." in warning
    assert app.info[0].value.startswith("**Reference results**")


def test_a_fresh_clone_opens_the_reference_without_that_warning(shipped_reference, tmp_path):
    app = open_default(tmp_path)
    assert not [w for w in app.warning if w.value.startswith(MISSING)]
    assert app.info[0].value.startswith("**Reference results**")
