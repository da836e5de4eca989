"""Reading a results database is bounded (issue #37, item 4): the dashboard may be pointed at one
this project did not build, whose views are anyone's SQL. A slow view held a page for over 50 s,
and a metrics table of 5,000,000 rows took the dashboard to 12.8 GB: each query now stops after
QUERY_SECONDS, DuckDB works within MEMORY_LIMIT, and a table of more rows than the pages draw is
refused before it is read, each in one line naming the file."""

from __future__ import annotations

import shutil
import threading
from pathlib import Path

import duckdb
import pytest

from anatomy.results import database, reader
from hang import HANG_S


def crafted(fixture_grid_db: Path, tmp_path: Path, condition: str) -> Path:
    """A copy of a collected database whose experiment_summary view (the same columns) first
    computes `condition`, a scalar subquery: what a crafted database may hold."""
    db = tmp_path / "crafted.duckdb"
    shutil.copy(fixture_grid_db, db)
    with duckdb.connect(str(db)) as con:
        con.execute("ALTER VIEW experiment_summary RENAME TO experiment_summary_as_built")
        con.execute(
            f"CREATE VIEW experiment_summary AS SELECT * FROM experiment_summary_as_built WHERE ({condition}) >= 0"
        )
    return db


def load_in_a_thread(db: Path) -> BaseException | None:
    """reader.load(db) and what it raised; a guard against a hang, not a timing."""
    outcome: list[BaseException | None] = []

    def load() -> None:
        try:
            reader.load(db)
            outcome.append(None)
        except BaseException as err:  # noqa: BLE001 - handed to the test
            outcome.append(err)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(HANG_S)
    assert outcome, "reading the database did not end"
    return outcome[0]


def test_a_query_that_runs_too_long_is_stopped_in_one_line(fixture_grid_db, tmp_path, monkeypatch):
    monkeypatch.setattr(database, "QUERY_SECONDS", 1)
    db = crafted(fixture_grid_db, tmp_path, "SELECT sum(i) FROM range(10000000000000) t(i)")  # hours
    err = load_in_a_thread(db)
    assert isinstance(err, database.ReadLimitExceeded)
    assert str(err).startswith(f"{db}: a query ran for more than 1 s and was stopped; ")
    assert "\n" not in str(err)
    reader.load(fixture_grid_db)  # the connection's timer is gone with its query: the next read is whole


def test_a_query_that_needs_too_much_memory_is_stopped_in_one_line(fixture_grid_db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where DuckDB would spill to disk (.tmp) if it could
    monkeypatch.setattr(database, "MEMORY_LIMIT", "128MB")
    db = crafted(fixture_grid_db, tmp_path, "SELECT count(DISTINCT i) FROM range(30000000) t(i)")
    err = load_in_a_thread(db)
    assert isinstance(err, database.ReadLimitExceeded)
    assert str(err).startswith(f"{db}: a query needed more than 128MB of memory and was stopped; ")
    assert not (tmp_path / ".tmp").exists()


def test_a_table_with_more_rows_than_the_pages_draw_is_refused_unread(fixture_grid_db, monkeypatch):
    rows = reader.load(fixture_grid_db).metrics.shape[0]
    monkeypatch.setitem(database.ROW_LIMITS, "metrics", rows - 1)
    with pytest.raises(database.ReadLimitExceeded) as refused:
        reader.load(fixture_grid_db)
    assert str(refused.value) == (
        f"{fixture_grid_db}: table metrics holds {rows:,} rows, more than a results database of this project "
        f"holds ({rows - 1:,} at most), so it is not read: {database.REBUILD_ADVICE}"
    )


def test_the_shipped_reference_database_reads_within_every_bound(tmp_path, monkeypatch):
    """The bounds are far above what this project's own databases need."""
    from anatomy.results.collect import collect_folder

    collect_folder(
        Path(__file__).resolve().parents[1] / "results" / "reference" / "runs", tmp_path / "reference.duckdb"
    )
    monkeypatch.setattr(database, "MEMORY_LIMIT", "256MB")  # half the real limit
    results = reader.load(tmp_path / "reference.duckdb")
    assert len(results.metrics) * 100 < database.ROW_LIMITS["metrics"]
