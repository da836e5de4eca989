"""Reading a results database is bounded (issue #37, item 4): the dashboard may be pointed at one
this project did not build, whose views are anyone's SQL. A slow view held a page for over 50 s,
and a metrics table of 5,000,000 rows took the dashboard to 12.8 GB: each query now stops after
QUERY_SECONDS, DuckDB works within MEMORY_LIMIT, and a table of more rows than the pages draw is
refused before it is read, each in one line naming the file."""

from __future__ import annotations

import shutil
import threading
import time
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
    assert str(err).startswith(f"{db}: its queries ran for more than 1 s and were stopped; ")
    assert "\n" not in str(err)
    # the connection's timer is gone with its query: the next read is whole (given the time that a
    # busy machine may need to read the fixture: 1 s was not always enough with trainings beside it)
    monkeypatch.setattr(database, "QUERY_SECONDS", 30)
    reader.load(fixture_grid_db)


def test_a_query_that_needs_too_much_memory_is_stopped_in_one_line(fixture_grid_db, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # where DuckDB would spill to disk (.tmp) if it could
    monkeypatch.setattr(database, "MEMORY_LIMIT", "128MB")
    db = crafted(fixture_grid_db, tmp_path, "SELECT count(DISTINCT i) FROM range(30000000) t(i)")
    err = load_in_a_thread(db)
    assert isinstance(err, database.ReadLimitExceeded)
    assert str(err).startswith(f"{db}: a query needed more than 128MB of memory and was stopped; ")
    assert not (tmp_path / ".tmp").exists()


def test_the_time_limit_bounds_a_connection_in_all_not_each_query(fixture_grid_db, tmp_path, monkeypatch):
    """A render reads on one connection, and read the same slow view three times: 62 s. Once the
    connection's time is spent, its next read is refused before it starts."""
    monkeypatch.setattr(database, "QUERY_SECONDS", 2)
    db = crafted(fixture_grid_db, tmp_path, "SELECT sum(i) FROM range(10000000000000) t(i)")
    with database.open_read_only(db) as con:
        with pytest.raises(database.ReadLimitExceeded):
            reader.read(con, db)
        started = time.monotonic()
        with pytest.raises(database.ReadLimitExceeded, match="ran for more than 2 s"):
            reader.read(con, db)
        assert time.monotonic() - started < 1  # refused at once, not after another 2 s


def test_a_table_with_more_rows_than_the_pages_draw_is_refused_unread(fixture_grid_db, monkeypatch):
    rows = reader.load(fixture_grid_db).metrics.shape[0]
    monkeypatch.setitem(database.ROW_LIMITS, "metrics", rows - 1)
    with pytest.raises(database.ReadLimitExceeded) as refused:
        reader.load(fixture_grid_db)
    assert str(refused.value) == (
        f"{fixture_grid_db}: metrics has more than {rows - 1:,} rows, more than a results database of this project "
        f"holds, so it is not read: {database.REBUILD_ADVICE}"
    )


def test_a_view_that_explodes_is_refused_before_it_is_read(fixture_grid_db, tmp_path, monkeypatch):
    """A 3.4 MB database took the dashboard to 9.2 GB: a cross join in a view makes millions of rows
    of a few, and the limits counted tables only. Every relation read is counted, views too."""
    db = tmp_path / "exploding.duckdb"
    shutil.copy(fixture_grid_db, db)
    with duckdb.connect(str(db)) as con:
        con.execute("ALTER VIEW experiment_summary RENAME TO experiment_summary_as_built")
        con.execute("CREATE VIEW experiment_summary AS SELECT e.* FROM experiment_summary_as_built e, range(1000)")
    monkeypatch.setattr(database, "OTHER_TABLE_ROW_LIMIT", 500)
    with pytest.raises(database.ReadLimitExceeded) as refused:
        reader.load(db)
    assert str(refused.value).startswith(f"{db}: experiment_summary has more than 500 rows, ")


def test_a_join_past_the_limit_is_refused_not_read_whole(fixture_grid_db):
    """What a query of the reader or a page gives is read with a LIMIT one past its bound: a join
    of a crafted database's rows never reaches pandas whole."""
    limit = database.row_limit("experiment_summary")
    with database.open_read_only(fixture_grid_db) as con:
        with pytest.raises(
            database.ReadLimitExceeded, match=f"a query on experiment_summary gives more than {limit:,} rows"
        ):
            reader.bounded_table(con, fixture_grid_db, "SELECT * FROM experiment_summary, range(1000000)")
        assert len(reader.bounded_table(con, fixture_grid_db, "SELECT * FROM experiment_summary")) > 0


def test_the_shipped_reference_database_reads_within_every_bound(tmp_path, monkeypatch):
    """The bounds are far above what this project's own databases need."""
    from anatomy.results.collect import collect_folder

    collect_folder(
        Path(__file__).resolve().parents[1] / "results" / "reference" / "runs", tmp_path / "reference.duckdb"
    )
    monkeypatch.setattr(database, "MEMORY_LIMIT", "256MB")  # half the real limit
    results = reader.load(tmp_path / "reference.duckdb")
    assert len(results.metrics) * 50 < database.ROW_LIMITS["metrics"]  # the margin database.py states
