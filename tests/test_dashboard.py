"""The dashboard under Streamlit's AppTest: every view, on real tiny runs and on edge cases.

`dashboard_db` is built by the real code (train, generate, collect) from a tiny grid;
`fixture_grid_db` holds run folders written by hand in the contract format, for the states
real runs rarely give on demand (NaN/inf losses after some finite steps, a run still going).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from anatomy.results.groups import STUDY_GROUPS
from streamlit.proto.Metric_pb2 import Metric
from streamlit.testing.v1 import AppTest

from anatomy.report import chart_data
from anatomy.report.claims import (
    MEMORISING_RISE,
    ablation_intervals,
    claims_by_key,
    finding_text,
    largest_ablation_change,
)
from anatomy.report.roles import only_runs_of
from anatomy.report.uncertainty import interval_text, judged_against_baselines
from anatomy.results.collect import SCHEMA_PATH, collect
from anatomy.results.reader import load
from run_folders import (
    LLAMA_PARTS,
    SCALE_SIZES,
    write_fixture_grid,
    write_parts_runs,
    write_run_folder,
    write_scale_ablation,
    write_scale_runs,
)

from dashboard_pages import (  # noqa: F401 (no_reference: a fixture)
    APP,
    PAGES,
    chart_specs,
    chart_tables,
    curve_labels,
    no_reference,
    open_page,
    pages_in_the_inner_loop,
    texts,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
if str(REPO_ROOT) not in sys.path:  # the dashboard is an app folder, not an installed package
    sys.path.insert(0, str(REPO_ROOT))
from dashboard import analysis, loaders  # noqa: E402

# every page but Progress reads the database (Progress reads the run folders while they train)
DATABASE_PAGES = [page for page in PAGES if page != "progress"]


@pytest.fixture
def shipped_reference(tmp_path, monkeypatch):
    """The fixture grid shipped as reference results, as `anatomy reference` ships them (with the
    experiments file beside them, which declares their baselines)."""
    from anatomy.results.reference import EXPERIMENTS_FILE, ship, ship_experiments

    runs = tmp_path / "trained" / "runs"
    write_fixture_grid(runs)
    ship(runs, tmp_path / "reference")
    ship_experiments(runs.parent / EXPERIMENTS_FILE, tmp_path / "reference")
    monkeypatch.setattr(loaders, "REFERENCE_DIR", tmp_path / "reference")
    monkeypatch.setattr(loaders, "REFERENCE_DB", tmp_path / "reference.duckdb")
    return tmp_path / "reference"


def db_rows(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def labels_of(db: Path, where: str = "TRUE") -> set[str]:
    return {f"{e} · seed {s}" for e, s in db_rows(db, f"SELECT experiment, seed FROM runs WHERE {where}")}


# ---------------------------------------------------------------------------------------------
# Every view on the database built from real tiny runs


def test_overview_shows_the_headline_runs(dashboard_db, monkeypatch):
    app = open_page(dashboard_db, "overview", monkeypatch)
    headline = labels_of(dashboard_db, "\"group\" = 'headline'")
    assert headline == {"vanilla · seed 42", "vanilla · seed 7", "llama · seed 42", "llama · seed 7"}
    (table,) = app.dataframe
    assert set(table.value["label"]) == headline
    # step times are read next to whether the run was compiled (the tiny runs were not)
    assert {"step_time_ms", "compiled"} <= set(table.value.columns)
    assert not table.value["compiled"].any()
    (chart,) = chart_tables(app)
    assert set(chart["label"].dropna()) == headline
    # each run's best point is the minimum val of that run in the database
    best = dict(db_rows(dashboard_db, "SELECT experiment || ' · seed ' || seed, best_val_loss FROM run_summary"))
    marked = chart.dropna(subset=["val_loss"]).drop_duplicates("label").set_index("label")["val_loss"]
    for label, value in marked.items():
        assert value == pytest.approx(best[label])
    # the grid's state is said in words: one run still going, one diverged
    prose = texts(app)
    assert "still running" in prose and "deep_post_nowarmup · seed 42" in prose
    assert "vanilla" in prose and "llama" in prose
    # the model with no baseline first; the other against the baseline it names, paired by seed
    assert [m.label.split(":")[0] for m in app.metric[4:]] == ["vanilla", "llama"]
    grid = load(dashboard_db)
    difference = judged_against_baselines(only_runs_of(grid, None), ["llama"])["llama"]
    assert app.metric[5].proto.delta.startswith(f"{difference.mean:+.3f} vs vanilla") and not app.metric[4].proto.delta
    MetricColor = Metric.MetricColor
    # a difference within noise (its interval holds zero) is never coloured as a win or a loss
    beyond = bool(difference.beyond)
    assert app.metric[5].proto.delta.endswith("" if beyond else " (within noise)")
    assert (app.metric[5].proto.color == MetricColor.GRAY) == (not beyond)  # delta_color "off"
    assert interval_text(difference) in app.metric[5].proto.help
    # the page opens with the report's verdicts on the headline claims
    found = claims_by_key(only_runs_of(grid, None))
    assert finding_text(found["lower_valley"]) in prose and finding_text(found["learns_faster"]) in prose


def test_curves_follow_the_controls(dashboard_db, monkeypatch):
    app = open_page(dashboard_db, "curves", monkeypatch)
    headline = labels_of(dashboard_db, "\"group\" = 'headline'")
    # grouped: one line per experiment and split, the mean over its seeds, with the seeds' range
    chart = chart_tables(app)[0]
    assert curve_labels(app) == headline and set(chart["split"]) == {"train", "val"}
    val = dict(
        db_rows(
            dashboard_db,
            "SELECT step, avg(val_loss) FROM metrics JOIN runs USING (run_id) WHERE experiment = 'llama' GROUP BY step",
        )
    )
    llama = chart[(chart["experiment"] == "llama") & (chart["split"] == "val")].set_index("step")
    assert llama["mean"].to_dict() == pytest.approx(val)
    assert (llama["low"] <= llama["mean"]).all() and (llama["mean"] <= llama["high"]).all()
    # each run on demand: its own thin line beside the means, every evaluation, train and val
    app.toggle(key="curves_each").set_value(True).run()
    runs_layer = chart_tables(app)[0].dropna(subset=["label"])
    n_rows = db_rows(dashboard_db, "SELECT count(*) FROM metrics JOIN runs USING (run_id) WHERE \"group\" = 'headline'")
    assert set(runs_layer["label"]) == headline and len(runs_layer) == 2 * n_rows[0][0]
    # zoom and pan: the scales are bound to an interval selection
    assert any(param.get("bind") == "scales" for param in chart_specs(app)[0].get("params", []))

    app.toggle(key="curves_grouped").set_value(False).run()
    app.multiselect(key="curves_experiments").set_value(["mqa"]).run()
    app.segmented_control(key="curves_x").set_value("wall-clock").run()
    app.toggle(key="curves_log").set_value(True).run()
    app.slider(key="curves_smoothing").set_value(0.8).run()
    assert not app.exception
    spec, chart = chart_specs(app)[0], chart_tables(app)[0]
    assert set(chart["label"]) == {"mqa · seed 42"}
    assert spec["encoding"]["x"]["field"] == "elapsed_s"
    assert spec["encoding"]["y"]["scale"]["type"] == "log"
    val = chart[chart["split"] == "val"].sort_values("step")
    assert val["smoothed"].tolist() == pytest.approx(_ema(val["loss"], 0.8).tolist())
    assert val["smoothed"].tolist() != pytest.approx(val["loss"].tolist())
    # legend-click highlight: a selection bound to the legend drives the opacity
    assert any(param.get("bind") == "legend" for param in spec.get("params", []))


def _ema(values: pd.Series, weight: float) -> pd.Series:
    """The bias-corrected EMA written out by hand, to check the smoothing against."""
    out, num, den = [], 0.0, 0.0
    for value in values:
        num = weight * num + (1 - weight) * value
        den = weight * den + (1 - weight)
        out.append(num / den)
    return pd.Series(out, index=values.index)


def test_overfitting_view_marks_min_and_turn(dashboard_db, monkeypatch):
    app = open_page(dashboard_db, "overfitting", monkeypatch)
    table = app.dataframe[0].value
    # every run with a finite val is in the table (the run that diverged at step 2 has none)
    assert set(table["label"]) == labels_of(dashboard_db, "experiment != 'deep_post_nowarmup'")
    best = dict(db_rows(dashboard_db, "SELECT experiment || ' · seed ' || seed, best_step FROM run_summary"))
    for label, min_step in zip(table["label"], table["min_step"]):
        assert min_step == best[label]
    assert len(app.get("vega_lite_chart")) == 4  # the headline runs by default
    # the turn: the first evaluation after the minimum more than the report's margin above it (one owner)
    assert app.number_input(key="turn_margin").value == MEMORISING_RISE
    turned = table.dropna(subset=["turn_step"])
    assert len(turned) >= 4  # the tiny runs do overfit
    for _, row in turned.iterrows():
        experiment, seed = row["label"].split(" · seed ")
        val = dict(
            db_rows(dashboard_db, f"SELECT step, val_loss FROM metrics WHERE run_id = '{experiment}/seed{seed}'")
        )
        assert val[row["turn_step"]] > row["min_val"] + MEMORISING_RISE
        assert all(
            v <= row["min_val"] + MEMORISING_RISE
            for step, v in val.items()
            if row["min_step"] <= step < row["turn_step"]
        )

    # a huge margin: val never rises that far above its minimum, so no turn step
    app.number_input(key="turn_margin").set_value(5.0).run()
    assert app.dataframe[0].value["turn_step"].isna().all()


def test_ablations_view_pairs_parts_with_baselines(dashboard_db, monkeypatch):
    app = open_page(dashboard_db, "ablations", monkeypatch)
    (chart,) = chart_tables(app)
    bars = chart.dropna(subset=["part"])
    # mqa_minus_swiglu is in no experiments.yaml: its baseline (mqa) places it, no code names it
    assert set(zip(bars["part"], bars["direction"])) == {
        ("swiglu", "added to vanilla"),
        ("swiglu", "removed from llama"),
        ("swiglu", "removed from mqa"),
    }
    best = dict(db_rows(dashboard_db, "SELECT run_id, best_val_loss FROM run_summary"))
    # Δ = experiment minus baseline, in the chart as in the table (negative: lower loss)
    deltas = [best[f"vanilla_plus_swiglu/seed{s}"] - best[f"vanilla/seed{s}"] for s in (42, 7)]
    added = bars[bars["direction"] == "added to vanilla"].iloc[0]
    assert added["delta"] == pytest.approx(np.mean(deltas))
    # the bar's line is the report's interval for it (the ablations judged together)
    judged = ablation_intervals(only_runs_of(load(dashboard_db), None)).set_index(["part", "direction"])
    expected = judged.loc[("swiglu", "added to vanilla")]
    assert (added["low"], added["high"]) == pytest.approx((expected["low"], expected["high"]))
    assert added["low"] < added["delta"] < added["high"]
    removed = bars[bars["direction"] == "removed from mqa"].iloc[0]
    assert removed["delta"] == pytest.approx(best["mqa_minus_swiglu/seed42"] - best["mqa/seed42"])
    table = app.dataframe[0].value
    assert dict(zip(table["experiment"], table["baseline"])) == {
        "vanilla_plus_swiglu": "vanilla",
        "llama_minus_swiglu": "llama",
        "mqa_minus_swiglu": "mqa",
    }


def test_break_view_flags_the_divergence(dashboard_db, monkeypatch):
    app = open_page(dashboard_db, "breaks", monkeypatch)
    (error,) = app.error
    assert "deep_post_nowarmup · seed 42 diverged" in error.value and "step 2" in error.value
    tables = chart_tables(app)
    deep = tables[0]  # the depth section comes first: the 4-layer runs
    assert set(deep["label"].dropna()) == {"deep_pre_nowarmup · seed 42", "deep_post_nowarmup · seed 42"}
    assert "✕ deep_post_nowarmup · seed 42\ndiverged (NaN/inf) at step 2" in set(deep["text"].dropna())
    assert "before its first evaluation" in error.value
    others = tables[1]
    assert set(others["experiment"].dropna()) == {"llama", "mqa", "rope_k_unrotated"}  # with their baseline
    # each against the baseline its experiment names, as the baseline_summary view pairs them
    deltas = tables[2].dropna(subset=["experiment"]).set_index("experiment")
    expected = dict(
        db_rows(
            dashboard_db,
            """SELECT experiment, delta_best_val_mean FROM baseline_summary
                                              WHERE experiment IN ('mqa', 'rope_k_unrotated')""",
        )
    )
    assert set(deltas.index) == set(expected) and set(deltas["baseline"]) == {"llama"}
    assert deltas["delta"].to_dict() == pytest.approx(expected)
    assert set(app.dataframe[0].value["label"]) == labels_of(dashboard_db, "\"group\" = 'break'")


def test_samples_view_shows_generated_text_side_by_side(dashboard_db, monkeypatch):
    app = open_page(dashboard_db, "samples", monkeypatch)
    shown = {element.value for element in app.text}
    chosen = app.multiselect(key="samples_runs").value
    assert set(chosen) == labels_of(dashboard_db, "\"group\" = 'headline'")
    for label in chosen:
        experiment, seed = label.split(" · seed ")
        (text,) = db_rows(dashboard_db, f"SELECT text FROM samples WHERE run_id = '{experiment}/seed{seed}'")[0]
        # st.text drops trailing whitespace, which a sample may end in (it is invisible anyway)
        assert text.rstrip() in shown and text.startswith("## ")
    # a diverged run has no text to show, only the note saying why
    app.multiselect(key="samples_runs").set_value(["deep_post_nowarmup · seed 42"]).run()
    # (the last warning: the first says the tiny grid is not the chapter's protocol)
    assert not app.text and "no checkpoint to sample from" in app.warning[-1].value


# ---------------------------------------------------------------------------------------------
# Edge cases: NaN/inf losses, an empty database, no database, a database being rebuilt


@pytest.mark.parametrize("page", PAGES)
def test_views_survive_non_finite_losses_and_a_running_grid(fixture_grid_db, page, monkeypatch):
    app = open_page(fixture_grid_db, page, monkeypatch)
    # every view draws something (the fixture grid was never examined: the Exams page says how to fill it)
    if page == "exams":
        assert len(app.info) >= 4 and all("snakemake --cores 1 exams" in info.value for info in app.info)
    elif page == "studies":  # the fixture grid has no study: the page says how to run each
        assert len(app.info) == len(STUDY_GROUPS) and all("snakemake" in info.value for info in app.info)
    elif page == "progress":  # read from the run folders: nothing trains now, two diverged
        assert {m.label: m.value for m in app.metric}["diverged"] == "2" and "No run is training" in texts(app)
    else:
        assert app.get("vega_lite_chart") or app.text
    if page == "breaks":
        assert len(app.error) == 2  # both seeds of the post-norm run diverged
    # every legend under its plot, one entry a line: beside it, at a phone's width, it squeezes the
    # plot to a sliver; and the plot keeps its own height, the legend added below it
    for spec in chart_specs(app):
        assert spec["config"]["legend"]["orient"] == "bottom" and spec["config"]["legend"]["columns"] == 1
        assert spec["autosize"] == {"type": "fit-x", "contains": "padding"}


@pytest.mark.parametrize("page", pages_in_the_inner_loop(PAGES, "curves", "overfitting"))
def test_headline_runs_without_a_finite_val_loss(tmp_path, page, monkeypatch):
    """A grid collected in progress: one headline run diverged before its first evaluation,
    another has only just started (config.json, no metrics yet)."""
    runs = tmp_path / "runs"
    write_fixture_grid(runs)
    write_run_folder(runs, "llama", 99, status="diverged", diverged_step=0, samples=False)
    started = runs / "vanilla" / "seed5"
    started.mkdir()
    config = json.loads((runs / "vanilla" / "seed42" / "config.json").read_text())
    config["train"]["seed"] = 5
    (started / "config.json").write_text(json.dumps(config))
    db = tmp_path / "anatomy.duckdb"
    collect(runs, db)
    app = open_page(db, page, monkeypatch)
    prose = texts(app)
    assert "<NA>" not in prose and "nan" not in prose.lower().split()
    if page == "curves":
        app.multiselect(key="curves_runs").set_value(["vanilla · seed 5", "vanilla · seed 42"]).run()
        assert not app.exception
        assert "vanilla · seed 5 is still running (no evaluation yet)" in texts(app)
    if page == "overfitting":
        assert "llama · seed 99" not in app.multiselect(key="turn_runs").value


@pytest.mark.parametrize("page", pages_in_the_inner_loop(DATABASE_PAGES, "overview"))
def test_no_database_says_how_to_make_one(tmp_path, page, monkeypatch):
    app = open_page(tmp_path / "results" / "anatomy.duckdb", page, monkeypatch)
    (info,) = app.info
    assert "no results database" in info.value and "snakemake --cores 2 --configfile workflow/quick.yaml" in info.value
    assert not app.get("vega_lite_chart")


def test_a_database_being_renamed_into_place_is_not_an_error(tmp_path, monkeypatch):
    from anatomy.files.locks import held_lock
    from anatomy.results.collect import collect_lock_path

    db = tmp_path / "anatomy.duckdb"
    (tmp_path / ".anatomy.duckdb.k2j4.tmp").write_bytes(b"")  # collect's temporary file
    with held_lock(collect_lock_path(db)):  # ... and a collect writing it right now
        app = open_page(db, "overview", monkeypatch)
    assert "being rebuilt" in app.warning[0].value


def test_a_temporary_file_left_by_a_killed_collect_is_not_a_rebuild(tmp_path, monkeypatch):
    """No collect holds the lock: the file is a leftover, and the page must not wait for it forever."""
    (tmp_path / ".anatomy.duckdb.k2j4.tmp").write_bytes(b"half a database")
    app = open_page(tmp_path / "anatomy.duckdb", "overview", monkeypatch)
    assert not app.warning
    assert "no results database" in app.info[0].value


@pytest.mark.parametrize(
    "content, words",
    [
        (b"", "is an empty file, not a DuckDB database"),
        (b"this is not a duckdb file" * 100, "is not a DuckDB database"),
    ],
)
def test_a_file_that_is_not_a_database_is_named_as_such(tmp_path, monkeypatch, content, words):
    db = tmp_path / "anatomy.duckdb"
    db.write_bytes(content)
    app = open_page(db, "curves", monkeypatch)
    assert not app.warning  # not "may be being rebuilt": nothing will change it by itself
    assert words in app.error[0].value and str(db) in app.error[0].value


def older_database(tmp_path, monkeypatch) -> Path:
    """A database as an earlier version of collect made it: no `compiled` column anywhere."""
    from anatomy.results import collect

    schema = collect.SCHEMA_PATH.read_text(encoding="utf-8")
    schema = schema.replace(
        "    compiled         BOOLEAN,              -- training steps ran through torch.compile\n", ""
    )
    schema = schema.replace("    r.tokens_per_s,\n    r.compiled\n", "    r.tokens_per_s\n")
    assert "compiled" not in schema
    old_schema = tmp_path / "old_schema.sql"
    old_schema.write_text(schema, encoding="utf-8")
    runs = tmp_path / "runs"
    write_fixture_grid(runs)
    with monkeypatch.context() as patch:
        patch.setattr(collect, "SCHEMA_PATH", old_schema)
        patch.setattr(collect, "RUN_COLUMNS", [c for c in collect.RUN_COLUMNS if c != "compiled"])
        collect.collect(runs, tmp_path / "old.duckdb")
    return tmp_path / "old.duckdb"


@pytest.mark.parametrize("page", pages_in_the_inner_loop(DATABASE_PAGES, "overview"))
def test_a_database_from_an_older_version_says_to_collect_again(tmp_path, monkeypatch, page):
    app = open_page(older_database(tmp_path, monkeypatch), page, monkeypatch)
    message = app.warning[0].value
    assert "made by an older version" in message and "python -m anatomy collect" in message
    assert "runs.compiled" in message


def test_a_database_with_no_runs_yet(tmp_path, monkeypatch):
    (tmp_path / "runs").mkdir()
    collect(tmp_path / "runs", tmp_path / "anatomy.duckdb", allow_empty=True)
    app = open_page(tmp_path / "anatomy.duckdb", "overview", monkeypatch)
    assert "holds no runs yet" in app.info[0].value


def test_a_folder_as_the_database_is_named_as_such(tmp_path, monkeypatch):
    """Not "may be being rebuilt": the words of `collect --db` and `report --db`."""
    app = open_page(tmp_path, "curves", monkeypatch)
    assert not app.warning
    assert "is a folder, expected a DuckDB file" in app.error[0].value and str(tmp_path) in app.error[0].value


def test_a_named_pipe_as_the_database_is_refused_not_waited_on(tmp_path, monkeypatch):
    """Opening a named pipe waits for a writer: the page would hang for good."""
    import threading

    pipe = tmp_path / "anatomy.duckdb"
    os.mkfifo(pipe)
    done = threading.Event()

    def free_a_stuck_reader():  # without the check: so that the test fails, not hangs
        while not done.wait(2):
            try:
                os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass  # no reader waiting on the pipe: as it should be

    threading.Thread(target=free_a_stuck_reader, daemon=True).start()
    try:
        app = open_page(pipe, "curves", monkeypatch)
    finally:
        done.set()
    assert "is not a regular file (a named pipe): expected a DuckDB file" in app.error[0].value


def test_one_render_reads_one_database_while_collect_replaces_it(tmp_path, monkeypatch):
    """Issue #28, item 3: a collect lands between two queries of one render (here: right after
    the page read its runs). The page must not take runs from the old database and experiments
    from the new one: it shows the old one whole, and the next render the new one whole."""
    runs, db = tmp_path / "runs", tmp_path / "anatomy.duckdb"
    write_fixture_grid(runs)
    collect(runs, db)
    write_run_folder(runs, "llama_qk_norm", 42, group="break", part="qk_norm")
    collect(runs, tmp_path / "newer.duckdb")  # what the collect in the middle of the render writes
    older, newer = labels_of(db), labels_of(tmp_path / "newer.duckdb")
    real_read, replaced = loaders.read, []

    class CollectLandsAfterTheRuns:
        """The render's connection, but a collect puts the newer database in place right after
        the runs were read."""

        def __init__(self, con):
            self.con = con

        def execute(self, sql, *args):
            found = self.con.execute(sql, *args)
            if "FROM run_summary" in sql and not replaced:
                os.replace(tmp_path / "newer.duckdb", db)  # as collect puts a database into place
                replaced.append(sql)
            return found

    drawn_from = []  # the Results each render drew its page from
    real_load = loaders.load_results

    def load_results(path):
        drawn_from.append(real_load(path))
        return drawn_from[-1]

    def one_database(shown: loaders.Results, labels: set[str]) -> None:
        assert set(shown.runs["label"]) == labels  # the runs of one database ...
        assert set(shown.experiments["experiment"]) == set(shown.runs["experiment"])  # ... its experiments
        assert set(shown.band["experiment"]) <= set(shown.runs["experiment"])  # ... and its curves

    monkeypatch.setattr(loaders, "read", lambda con, path: real_read(CollectLandsAfterTheRuns(con), path))
    monkeypatch.setattr(loaders, "load_results", load_results)
    app = open_page(db, "overview", monkeypatch)
    assert replaced
    one_database(drawn_from[-1], older)  # the render the collect landed in: the old database whole
    assert app.metric[0].value == str(len(older))  # "runs collected", as the page says it
    app.run()
    one_database(drawn_from[-1], newer)  # the next render: the new one whole
    assert app.metric[0].value == str(len(newer))


def test_sidebar_path_and_a_rebuilt_database_are_picked_up(fixture_grid_db, tmp_path, monkeypatch):
    monkeypatch.setenv(loaders.ALLOWED_ENV_VAR, str(tmp_path))  # the sidebar may open any database here
    app = open_page(tmp_path / "missing.duckdb", "overview", monkeypatch)
    assert app.info and not app.dataframe
    # a second database, grown by a rerun of collect while the app is open
    runs = tmp_path / "runs"
    write_fixture_grid(runs)
    db = tmp_path / "anatomy.duckdb"
    collect(runs, db)
    app.sidebar.text_input(key="db_path").set_value(str(db)).run()
    assert len(app.dataframe[0].value) == 4  # the headline runs
    app.switch_page("views/breaks.py").run()
    before = set(app.dataframe[0].value["label"])
    write_run_folder(runs, "llama_qk_norm", 42, group="break", part="qk_norm")
    collect(runs, db)
    app.run()
    assert set(app.dataframe[0].value["label"]) == before | {"llama_qk_norm · seed 42"}


# ---------------------------------------------------------------------------------------------
# The numbers behind the charts


def schema_with(runs: list[tuple], metrics: list[tuple]) -> duckdb.DuckDBPyConnection:
    """An in-memory database of anatomy/results/schema.sql holding these runs (run_id, experiment, seed,
    baseline) and metrics (run_id, step, val_loss): the views compute, the dashboard reshapes."""
    con = duckdb.connect(":memory:")
    con.execute(SCHEMA_PATH.read_text(encoding="utf-8"))
    con.executemany(
        "INSERT INTO runs (run_id, experiment, seed, baseline, config, status, diverged) "
        "VALUES (?, ?, ?, ?, '{}', 'done', false)",
        runs,
    )
    con.executemany("INSERT INTO metrics (run_id, step, val_loss) VALUES (?, ?, ?)", metrics)
    return con


def test_the_turn_is_the_first_val_past_the_margin_above_the_best():
    steps, val = [10, 20, 30, 40, 50, 60], [3.0, 2.5, 2.4, 2.42, 2.6, np.inf]
    con = schema_with(
        [("a/seed1", "a", 1, None), ("b/seed1", "b", 1, None)],
        [("a/seed1", s, v) for s, v in zip(steps, val)] + [("b/seed1", s, np.nan) for s in steps],
    )
    above = con.execute("SELECT * FROM val_above_best").df()
    assert analysis.turn_steps(above, 0.05).to_dict() == {"a/seed1": 50}
    assert analysis.turn_steps(above, 0.01).to_dict() == {"a/seed1": 40}
    assert analysis.turn_steps(above, 1.0).empty  # never that far above: no turn (and b never had a best)


def test_part_deltas_keep_one_sign_in_both_directions():
    ablations = pd.DataFrame(
        {
            "experiment": ["vanilla_plus_x", "llama_minus_x"],
            "part": ["x", "x"],
            "direction": ["add", "remove"],
            "baseline": ["vanilla", "llama"],
            "delta_best_val_mean": [-0.10, 0.08],
            "delta_best_val_min": [-0.12, 0.05],
            "delta_best_val_max": [-0.07, 0.11],
            "n_seeds": [2, 2],
        }
    )
    deltas = chart_data.part_deltas(ablations).set_index("direction")
    # adding x lowered vanilla's loss (negative), removing it raised llama's (positive): as the table says
    assert deltas.loc["added to vanilla", "delta"] == pytest.approx(-0.10)
    assert deltas.loc["removed from llama", "delta"] == pytest.approx(0.08)
    assert (deltas.loc["added to vanilla", "delta_low"], deltas.loc["added to vanilla", "delta_high"]) == (
        pytest.approx((-0.12, -0.07))
    )
    # the words name the baseline the ablation names, whatever it is
    other = chart_data.part_deltas(ablations.assign(baseline=["mqa", "deep"]))
    assert set(other["direction"]) == {"added to mqa", "removed from deep"}


def test_seed_band_and_baseline_comparison_pair_by_seed():
    con = schema_with(
        [("a/seed1", "a", 1, None), ("a/seed2", "a", 2, None)],
        [("a/seed1", 1, 1.0), ("a/seed2", 1, 3.0), ("a/seed1", 2, 2.0), ("a/seed2", 2, np.nan)],
    )
    band = con.execute("SELECT * FROM seed_band").df().set_index("step")
    assert band.loc[1, ["mean", "min", "max", "n_seeds"]].tolist() == [2.0, 1.0, 3.0, 2]
    assert band.loc[2, "n_seeds"] == 1
    best = {("ref", 1): 2.0, ("ref", 2): 3.0, ("b", 1): 2.5, ("b", 2): 3.1, ("c", 2): 9.0}
    con = schema_with(
        [(f"{e}/seed{s}", e, s, None if e == "ref" else "ref") for e, s in best],
        [(f"{e}/seed{s}", 1, v) for (e, s), v in best.items()],
    )
    comparisons = con.execute("SELECT * FROM baseline_summary").df()
    rows = analysis.versus_baseline(comparisons, ["b", "c", "ref"]).set_index("experiment")
    assert list(rows.index) == ["b", "c"]  # ref has no baseline
    assert tuple(rows.loc["b", ["delta", "delta_low", "delta_high", "n_seeds"]]) == pytest.approx((0.3, 0.1, 0.5, 2))
    assert tuple(rows.loc["c", ["delta", "n_seeds"]]) == pytest.approx((6.0, 1))  # only the seed both have


def test_views_hold_no_connection_and_never_write(fixture_grid_db, tmp_path, monkeypatch):
    db = tmp_path / "anatomy.duckdb"
    db.write_bytes(fixture_grid_db.read_bytes())
    before = db.read_bytes()
    app = open_page(db, "overview", monkeypatch)
    for page in PAGES[1:]:
        app.switch_page(f"views/{page}.py").run()
        assert not app.exception
    assert db.read_bytes() == before
    # DuckDB refuses a read-write connection while a read-only one to the same file is open
    with duckdb.connect(str(db)) as writer:
        assert writer.execute("SELECT count(*) FROM runs").fetchone()[0] > 0


# ---------------------------------------------------------------------------------------------
# The shipped reference results


def test_with_no_database_of_your_own_the_reference_opens_labelled(shipped_reference, tmp_path, monkeypatch):
    monkeypatch.delenv("ANATOMY_DB", raising=False)
    monkeypatch.chdir(tmp_path)  # no results/anatomy.duckdb here
    monkeypatch.setattr(loaders, "REPO_ROOT", tmp_path)  # nor in the repository
    app = AppTest.from_file(str(APP), default_timeout=60)
    app.run()
    assert not app.exception, [e.value for e in app.exception]
    assert app.sidebar.text_input(key="db_path").value == str(loaders.REFERENCE_DB)
    note = app.info[0].value
    assert note.startswith("**Reference results**") and "14 full-size runs, trained on cpu" in note
    assert len(app.dataframe[0].value) == 4  # the headline runs of the shipped grid
    # the user's own view of it draws no reference band behind itself
    assert all("reference: " not in str(table.get("experiment", "")) for table in chart_tables(app))

    # new shipped files (a later grid) rebuild the database the next time it is asked for
    built = loaders.REFERENCE_DB.stat().st_mtime_ns
    summary = shipped_reference / "runs" / "vanilla" / "seed42" / "summary.json"
    summary.write_text(summary.read_text())
    os.utime(summary, ns=(built + 10**9, built + 10**9))
    loaders.reference_db()
    assert loaders.REFERENCE_DB.stat().st_mtime_ns > built


def test_the_dashboards_notes_give_the_readmes_commands():
    """The reference banner said `snakemake --cores 1` where the README says `--cores 2`: the
    commands have one owner (anatomy.results.groups), which the READMEs and the notes quote."""
    from anatomy.results.groups import HEADLINE_COMMAND, QUICK_GRID_COMMAND

    for readme in ("README.md", "README.zh-CN.md"):
        text = (REPO_ROOT / readme).read_text(encoding="utf-8")
        assert f"`{QUICK_GRID_COMMAND}`" in text and f"`{HEADLINE_COMMAND}`" in text, readme
    assert f"`{HEADLINE_COMMAND}`" in loaders.reference_note()
    make_one = loaders._(loaders.MAKE_DATABASE_HELP)
    assert "--cores 1" not in make_one and "{quick}" in make_one and "{headline}" in make_one


def test_a_reference_database_from_an_older_version_is_rebuilt(shipped_reference, tmp_path, monkeypatch):
    """Shipped files unchanged, but the database was built by the version before an upgrade."""
    (tmp_path / "old").mkdir()
    old = older_database(tmp_path / "old", monkeypatch)
    loaders.REFERENCE_DB.write_bytes(old.read_bytes())
    path = loaders.reference_db()
    found = db_rows(Path(path), "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'")
    assert ("compiled",) in found


@pytest.fixture
def reference_on_the_same_corpus(dashboard_db, tmp_path, monkeypatch):
    """The tiny grid's own runs shipped as reference results: trained on the corpus of dashboard_db."""
    from anatomy.results.reference import ship

    ship(dashboard_db.parent / "runs", tmp_path / "reference")
    monkeypatch.setattr(loaders, "REFERENCE_DIR", tmp_path / "reference")
    monkeypatch.setattr(loaders, "REFERENCE_DB", tmp_path / "reference.duckdb")
    return tmp_path / "reference"


def test_your_own_curves_are_drawn_over_the_reference_band(reference_on_the_same_corpus, dashboard_db, monkeypatch):
    app = open_page(dashboard_db, "overview", monkeypatch)
    assert not any("Reference results" in info.value for info in app.info)
    (chart,) = chart_tables(app)
    behind = chart[chart["experiment"].astype(str).str.startswith("reference: ")]
    assert set(behind["experiment"]) == {"reference: vanilla", "reference: llama"}
    # the band is the reference grid's min and max over seeds at each step
    reference_metrics = db_rows(
        loaders.REFERENCE_DB,
        """
        SELECT min(val_loss), max(val_loss) FROM metrics JOIN runs USING (run_id)
        WHERE experiment = 'llama' AND step = 40""",
    )
    row = behind[(behind["experiment"] == "reference: llama") & (behind["step"] == 40)].iloc[0]
    assert (row["min"], row["max"]) == pytest.approx(reference_metrics[0])
    app.toggle(key="overview_reference").set_value(False).run()
    (chart,) = chart_tables(app)
    assert not chart["experiment"].astype(str).str.startswith("reference: ").any()


def test_a_toy_grid_is_not_drawn_on_the_references_step_axis(shipped_reference, tmp_path, monkeypatch):
    """The shipped grid trained 100 steps; a toy grid on the same corpus, 20. Behind it the band
    would stretch the axis five times past its curves: the toggle starts off. On the reference
    itself there is no toggle: it is not drawn behind itself."""
    for seed in (42, 7):
        write_run_folder(tmp_path / "runs", "vanilla", seed, steps=20, floor=2.3, turn_step=10)
        write_run_folder(tmp_path / "runs", "llama", seed, steps=20, floor=2.1, turn_step=10, model=LLAMA_PARTS)
    collect(tmp_path / "runs", tmp_path / "toy.duckdb")
    app = open_page(tmp_path / "toy.duckdb", "overview", monkeypatch)
    assert not app.toggle(key="overview_reference").value
    (chart,) = chart_tables(app)
    assert chart["step"].max() == 20 and not chart["experiment"].astype(str).str.startswith("reference: ").any()

    app = open_page(loaders.reference_db(), "overview", monkeypatch)
    assert "overview_reference" not in {toggle.key for toggle in app.toggle}


def test_no_reference_band_behind_runs_on_another_corpus(shipped_reference, dashboard_db, monkeypatch):
    # the shipped fixture grid says vocabulary 50; the tiny grid was trained on a corpus of its own
    vocab = db_rows(dashboard_db, "SELECT DISTINCT json_extract(config, '$.data.vocab_size') FROM runs")
    assert vocab != [("50",)] and len(vocab) == 1
    app = open_page(dashboard_db, "overview", monkeypatch)
    (chart,) = chart_tables(app)
    assert not chart["experiment"].astype(str).str.startswith("reference: ").any()
    said = " ".join(caption.value for caption in app.caption)
    assert (
        "No reference band: these runs were trained on another corpus than the shipped reference results "
        f"(vocab_size {int(vocab[0][0]):,} against 50), so their losses do not compare."
    ) in said


def test_samples_show_what_they_copied_and_the_share_by_step(tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    write_fixture_grid(runs)
    run = runs / "llama" / "seed42"
    text = "## 子曰：学而时习之<b>不亦说乎"

    def sample(checkpoint, copied, spans):
        return {
            "checkpoint": checkpoint,
            "prefix": "## ",
            "temperature": 0.8,
            "seed": 0,
            "chars": 17,
            "text": text,
            "memorisation": {
                "min_chars": 12,
                "copied_fraction": copied,
                "val_copied_fraction": 0.01,
                "longest_copy": 9 if spans else 0,
                "longest_copy_text": None,
                "longest_copy_source": {"post": "lunyu.md", "line": 3} if spans else None,
                "copied_spans": spans,
            },
        }

    # two overlapping spans from one post read as one highlighted stretch
    (run / "samples.json").write_text(
        json.dumps([sample("last", 0.6, [[3, 6, "lunyu.md", 3], [6, 5, "lunyu.md", 3]]), sample("best", 0.0, [])])
    )
    db = tmp_path / "anatomy.duckdb"
    collect(runs, db)
    app = open_page(db, "samples", monkeypatch)
    app.multiselect(key="samples_runs").set_value(["llama · seed 42"]).run()
    assert not app.exception
    (marked,) = [element for element in app.get("html") if "<mark" in element.proto.body]
    assert (
        '<mark style="background:#fdd9a0" title="copied from lunyu.md, line 3">子曰：学而时习之</mark>'
        in marked.proto.body
    )
    assert "&lt;b&gt;" in marked.proto.body  # the sample's own text is escaped, never markup
    prose = texts(app)
    assert "**60.0%** of the generated characters" in prose and "from lunyu.md line 3" in prose
    (chart,) = chart_tables(app)
    rows = chart.set_index(["checkpoint", "against"])["share"]
    assert rows[("last", "training text")] == pytest.approx(0.6) and rows[("best", "training text")] == 0.0
    best_step, last_step = db_rows(db, "SELECT best_step, last_step FROM run_summary WHERE run_id = 'llama/seed42'")[0]
    assert set(chart["step"]) == {best_step, last_step}


# ---------------------------------------------------------------------------------------------
# Listen: live generation through the package's own code


def test_listen_generates_what_the_command_line_generates(dashboard_db, monkeypatch):
    from anatomy.generation.generate import generate_samples

    app = open_page(dashboard_db, "listen", monkeypatch)
    assert app.multiselect(key="listen_runs").value == ["llama · seed 42", "vanilla · seed 42"]
    app.segmented_control(key="listen_checkpoint").set_value("best")
    app.number_input(key="listen_chars").set_value(30)
    app.number_input(key="listen_seed").set_value(4)
    app.number_input(key="listen_temperature").set_value(0.9)
    app.button(key="listen_go").click().run()
    assert not app.exception, [e.value for e in app.exception]
    texts = app.session_state["listen_texts"]
    runs = dashboard_db.parent / "runs"
    for label, run_id in (("llama · seed 42", "llama/seed42"), ("vanilla · seed 42", "vanilla/seed42")):
        expected = generate_samples(runs / run_id, "best", chars=30, temperature=0.9, prefix="## ", seed=4)["text"]
        assert texts[label] == expected
    stats = [caption.value for caption in app.caption if "characters/s" in caption.value]
    assert len(stats) == 2 and all(s.startswith("30 characters") and "KV cache" in s for s in stats)
    # the tiny runs' corpus folder is on disk, so what they copied is measured and marked
    assert all("copied" in s and "not measured" not in s for s in stats)
    assert len([h for h in app.get("html") if "<pre" in h.proto.body]) == 2


def test_listen_without_weights_says_why_and_offers_the_stored_sample(fixture_grid_db, monkeypatch):
    app = open_page(fixture_grid_db, "listen", monkeypatch)
    app.multiselect(key="listen_runs").set_value(["vanilla · seed 42"]).run()
    (info,) = [i for i in app.info if "weights on disk" in i.value]
    assert "No `last` weights on disk" in info.value
    assert "## vanilla seed 42 says hello" in app.text[0].value
    assert not [b for b in app.button if b.key == "listen_go"]  # nothing to generate from


def test_the_dashboard_listens_on_this_machine_only_by_default():
    """Only this machine may reach it, unless docs/dashboard.md's `--server.address` is given on purpose."""
    import tomllib

    settings = tomllib.loads((REPO_ROOT / ".streamlit" / "config.toml").read_text(encoding="utf-8"))
    assert settings["server"]["address"] == "localhost"
    page = (REPO_ROOT / "docs" / "dashboard.md").read_text(encoding="utf-8")
    assert "streamlit run dashboard --server.address 0.0.0.0" in page


def test_a_view_that_reads_outside_the_database_is_refused_in_words(tmp_path, monkeypatch):
    monkeypatch.setenv(loaders.ALLOWED_ENV_VAR, str(tmp_path))
    db = tmp_path / "hostile.duckdb"
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the dashboard")
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE VIEW samples AS SELECT content AS text FROM read_text('{secret}')")
    with pytest.raises(loaders.DatabaseProblem, match="asks to read outside itself, which the dashboard refuses"):
        loaders.run_query(str(db), "SELECT * FROM samples")


# ---------------------------------------------------------------------------------------------
# Studies: the questions asked beside the grid, in the report's own sentences

# fixture runs read 100 steps x 256 tokens: these sizes are read 64 times, 8 times and once


@pytest.fixture(scope="module")
def studies_db(tmp_path_factory) -> Path:
    """The fixture grid, the scale study at three sizes (llama no better on the smallest, lower
    by 0.1 and 0.3 on the others) and the bf16 headline pair, collected by the real code."""
    root = tmp_path_factory.mktemp("studies_db")
    runs = root / "runs"
    write_fixture_grid(runs)
    write_scale_runs(runs, {"s": (2.0, 2.0), "m": (1.9, 1.8), "l": (1.8, 1.5)})
    largest = {"vocab_size": 50, "train_tokens": SCALE_SIZES["l"], "val_tokens": 500, "corpus": "poems_l"}
    # stage 2: SwiGLU removed from llama at the largest size, 0.2 higher
    write_scale_ablation(runs, "swiglu", "remove", {**LLAMA_PARTS, "ffn_type": "gelu"}, floor=1.7)
    for preset, floor in (("vanilla", 1.6), ("llama", 1.45)):  # stage 3: both at lr 1e-3, seed 42
        model = LLAMA_PARTS if preset == "llama" else None
        other_lr = dict(group="scale", data=largest, train={"precision": "bf16", "lr": 1.0e-3})
        write_run_folder(runs, f"scale_l_{preset}_lr1e3", 42, preset=preset, model=model, floor=floor, **other_lr)
    for seed in (42, 7):  # the grid's headline pair again in bf16, a hair off its fp32 twins
        bf16 = dict(group="precision", train={"precision": "bf16"})
        write_run_folder(runs, "vanilla_bf16", seed, preset="vanilla", floor=2.301, turn_step=70, **bf16)
        write_run_folder(runs, "llama_bf16", seed, preset="llama", model=LLAMA_PARTS, floor=2.101, turn_step=40, **bf16)
    db = root / "anatomy.duckdb"
    collect(runs, db)
    return db


def test_the_studies_page_says_the_reports_findings(studies_db, monkeypatch):
    from anatomy.report import study_section
    from anatomy.report.findings import findings_block
    from anatomy.report.twins_section import twins_findings
    from anatomy.results.studies import declared

    everything = load(studies_db)
    app = open_page(studies_db, "studies", monkeypatch)
    said = [element.value for element in app.markdown]
    # the page opens with the studies' numbered findings, then each study's section as the report
    # words it, never a second wording of them
    studies = {study.name for study in declared().values()}
    assert said[0] == findings_block(everything, link_prefix=None, evidence=studies)
    assert said[0].startswith("1. At one shared lr (0.0003) on 25,600 characters of poems_l")
    scale = study_section.study_section(everything, declared()["scale"])
    assert scale in said  # the scale study, rendered from its declaration like every other
    assert "So the mini-LLaMA is lower beyond noise at 3,200 characters of poems_m (bf16), 25,600" in scale
    assert "the mini-LLaMA without SwiGLU: Δ +0.200 [" in scale  # stage 2, at the largest size
    assert "At lr 0.001 on 25,600 characters of poems_l (bf16): llama minus vanilla -0.150 [" in scale  # stage 3
    # the precision study: the report's answer and its two tables
    findings = twins_findings(everything, declared()["precision"])
    assert "\n\n".join([findings.comparison, findings.answer, findings.verdicts]) in said
    assert [info.value.split(".")[0] for info in app.info] == [
        "No runs of this study in this database yet",  # lr
        "No runs of this study in this database yet",  # size
        "No runs of this study in this database yet",  # parts
    ]
    # the figure: every run of the pair at the shared lr at every size, one point each
    size_points, curves = chart_tables(app)
    assert len(size_points.dropna(subset=["seed"])) == 12


def test_the_point_selectbox_chooses_whose_curves_are_drawn(studies_db, monkeypatch):
    app = open_page(studies_db, "studies", monkeypatch)
    point = app.selectbox(key="studies_point_scale")
    assert point.options == [
        "400 characters of poems_s (bf16) (read 64x)",
        "3,200 characters of poems_m (bf16) (read 8x)",
        "25,600 characters of poems_l (bf16) (read 1x)",
    ]
    assert point.value == 2  # the last first: the largest size
    _, curves = chart_tables(app)
    assert set(curves["experiment"]) == {
        "scale_vanilla_l",
        "scale_llama_l",
        "scale_l_llama_minus_swiglu",
        "scale_l_vanilla_lr1e3",
        "scale_l_llama_lr1e3",
    }
    point.set_value(0).run()
    assert not app.exception
    _, curves = chart_tables(app)
    assert set(curves["experiment"]) == {"scale_vanilla_s", "scale_llama_s"}
    assert set(curves["split"]) == {"val", "train"} and set(curves["seed"]) == {42, 7}


def test_the_parts_study_draws_each_points_curves_over_lr(tmp_path, monkeypatch):
    """Where QK-norm pays is the lr it survives: the Studies page draws, at each point of the parts
    study, the plain mini-LLaMA and each part over lr (any study's runs with their settings: the
    break test's QK-norm at 4e-3 too), in the parts' colours, beside the section's sentences."""
    from anatomy.report import colours

    write_parts_runs(tmp_path / "runs")
    collect(tmp_path / "runs", tmp_path / "anatomy.duckdb")
    app = open_page(tmp_path / "anatomy.duckdb", "studies", monkeypatch)
    (points,) = [table for table in chart_tables(app) if "QK-norm" in set(table.get("model", []))]
    assert set(points["model"]) == {"the plain mini-LLaMA", "QK-norm", "experts (MoE)"}
    assert sorted(points.loc[points["model"] == "QK-norm", "lr"].unique()) == [5e-4, 1e-3, 2e-3, 4e-3]
    (spec,) = [spec for spec in chart_specs(app) if colours.NEW_PARTS["moe"] in json.dumps(spec)]
    assert colours.BREAKS["qk_norm"] in json.dumps(spec) and colours.LLAMA in json.dumps(spec)
    assert any("Adding experts (MoE) lowers the loss beyond noise" in element.value for element in app.markdown)


def test_the_exams_page_says_each_parts_full_size_answer_under_its_exam(tmp_path, monkeypatch):
    """The parts study's runs have their rows on the Exams page: under each part's exam, the
    study's sentence on it at the chapter's size, or that it is not answered yet."""
    import shutil

    write_parts_runs(tmp_path / "runs")
    collect(tmp_path / "runs", tmp_path / "answered.duckdb")
    said = texts(open_page(tmp_path / "answered.duckdb", "exams", monkeypatch))
    assert "**At the chapter's size** (the parts study's full-size runs): Adding QK-norm leaves the loss level" in said
    assert "**At the chapter's size** (the parts study's full-size runs): Adding experts (MoE) lowers the loss" in said
    assert said.count("At the chapter's size") == 2  # no MLA run in this study: nothing said of it

    shutil.rmtree(tmp_path / "runs" / "parts_qk_norm_0_004")  # QK-norm's best lr is now the edge
    collect(tmp_path / "runs", tmp_path / "waiting.duckdb")
    said = texts(open_page(tmp_path / "waiting.duckdb", "exams", monkeypatch))
    waiting = "(the parts study's full-size runs): not answered yet; the Studies page says what it waits for."
    # QK-norm's answer waits; the experts' runs are all in, and their answer stays
    assert said.count(waiting) == 1 and "Adding QK-norm" not in said
    assert "**At the chapter's size** (the parts study's full-size runs): Adding experts (MoE) lowers the loss" in said


def test_the_break_tests_page_shows_no_study_run(studies_db, monkeypatch):
    """The scale and bf16 runs are not break tests: only the grid's runs join its pages."""
    app = open_page(studies_db, "breaks", monkeypatch)
    shown = {str(value) for frame in app.dataframe for value in frame.value.to_numpy().ravel()}
    assert any("mqa" in value for value in shown)
    assert not any("scale_" in value or "bf16" in value for value in shown)


def test_the_studies_page_on_a_grid_without_studies_says_how_to_run_them(fixture_grid_db, monkeypatch):
    app = open_page(fixture_grid_db, "studies", monkeypatch)
    scale, lr, size, precision, parts = (info.value for info in app.info)  # declared studies in their order
    assert "`snakemake parts_stage1 --cores 2 --config train_threads=1`" in parts
    assert "`snakemake lr_stage1 --cores 2 --config train_threads=1`" in lr
    assert "`snakemake size_stage1 --cores 2 --config train_threads=1`" in size
    assert "`snakemake scale_stage1 --cores 2 --config train_threads=1`" in scale
    assert "`snakemake precision_check --cores 2 --config train_threads=1`" in precision
    assert not app.get("vega_lite_chart")


@pytest.mark.parametrize(
    "page, keys",
    [  # two pages in the inner loop, all four in CI
        pytest.param("overfitting", ["memorises"], marks=pytest.mark.slow),
        pytest.param("samples", ["copied"], marks=pytest.mark.slow),
        ("ablations", ["which_part"]),
        ("breaks", ["deep_postnorm", "broken_rope", "mqa"]),
    ],
)
def test_each_page_opens_with_the_reports_verdict(dashboard_db, monkeypatch, page, keys):
    """The page's finding is the report's own verdict on the chapter's claim (anatomy.report.claims), never
    a second wording of it."""
    app = open_page(dashboard_db, page, monkeypatch)
    found = claims_by_key(only_runs_of(load(dashboard_db), None))
    said = [element.value for element in app.markdown]
    for key in keys:
        assert finding_text(found[key]) in said, key
    if page == "ablations":  # and the longest bar of its chart, said
        assert largest_ablation_change(only_runs_of(load(dashboard_db), None)) in said


def test_a_run_keeps_its_colour_whatever_else_is_shown():
    """Colours follow the experiment, not the selection's order: a run is the same colour on every
    page (tests/test_dashboard_colours.py opens them all)."""
    from anatomy.report import colours as palette
    from anatomy.report.charts import color_scale

    def colours(names, known=None):
        scale = color_scale(names, known)
        return dict(zip(scale.domain, scale.range))

    many = colours(["vanilla", "mqa", "rope_k_unrotated", "llama", "deep_post_nowarmup"])
    assert colours(["rope_k_unrotated"])["rope_k_unrotated"] == many["rope_k_unrotated"]
    assert colours(["deep_post_nowarmup", "mqa"]) == {k: many[k] for k in ("deep_post_nowarmup", "mqa")}
    assert (many["vanilla"], many["llama"]) == (palette.VANILLA, palette.LLAMA)  # the two models' roles
    assert len(set(many.values())) == len(many)  # never two names of one chart in one colour
    known = {"mqa": palette.BREAKS["mqa"]}  # the database's colours (palette.experiment_colours) first
    assert colours(["mqa", "vanilla"], known)["mqa"] == palette.BREAKS["mqa"]


def test_the_samples_legend_tells_solid_from_dashed():
    """Two identical dots told the training text and the control apart before: now line pieces."""
    from dashboard.charts import memorisation_chart

    measured = pd.DataFrame(
        {
            "label": ["llama · seed 42"] * 2,
            "experiment": ["llama"] * 2,
            "step": [500, 2000],
            "checkpoint": ["best", "last"],
            "copied_fraction": [0.0, 0.06],
            "val_copied_fraction": [0.0, 0.0],
        }
    )
    lines, points = memorisation_chart(measured).to_dict()["layer"]
    legend = lines["encoding"]["strokeDash"]["legend"]
    # line pieces with a stroke of their own; the points a layer apart, which would blank them
    assert legend["symbolType"] == "stroke" and legend["symbolStrokeColor"]
    assert lines["mark"].get("point") is None and points["mark"]["type"] == "point"


def test_the_break_run_table_shows_its_numbers_before_the_description(fixture_grid_db, monkeypatch):
    """At 1400 px the table was cut off before best val: the long description now comes last."""
    app = open_page(fixture_grid_db, "breaks", monkeypatch)
    columns = list(app.dataframe[-1].value.columns)
    assert columns.index("best_val_loss") < 3 and columns[-1] == "description"
    # a run that did not diverge has no "diverged at": a blank cell, not the word "None"
    table = app.dataframe[-1].value.set_index("label")
    assert not table.isna().any().any()
    assert table.loc["deep_post_nowarmup · seed 42", "diverged_step"] == "30"
    assert table.loc["deep_pre_nowarmup · seed 42", "diverged_step"] == ""


def test_a_chart_not_drawn_has_no_caption(fixture_grid_db, monkeypatch):
    """The hand-written grid logged no gradient norms: the Curves page says so, and describes no
    gradient-norm chart under the learning rate's."""
    said = texts(open_page(fixture_grid_db, "curves", monkeypatch))
    assert "These runs logged no gradient norms" in said
    assert "gradient norm of all blocks together" not in said
    assert "The learning rate of each step" in said


def test_the_overfitting_charts_share_one_loss_axis(fixture_grid_db, monkeypatch):
    """Charts side by side are compared: one loss range for all, from every run shown."""
    app = open_page(fixture_grid_db, "overfitting", monkeypatch)
    specs = chart_specs(app)
    domains = [
        layer["encoding"]["y"]["scale"]["domain"]
        for spec in specs
        for layer in spec["layer"]
        if "domain" in layer.get("encoding", {}).get("y", {}).get("scale", {})
    ]
    assert len(specs) >= 2 and len(domains) == len(specs)
    losses = pd.concat(
        [table[column] for table in chart_tables(app) for column in ("train_loss", "val_loss") if column in table]
    )
    losses = losses[np.isfinite(losses.astype(float))]
    assert all(domain == [losses.min(), losses.max()] for domain in domains)


def test_the_studies_page_says_each_studys_runs_still_to_train_after_its_answer(studies_db, monkeypatch):
    """The page shows the line the report puts after each study's section (still_to_train, whose
    own tests say what it lists), for every study with runs, after its answer."""
    from anatomy.report import still_to_train as still_to_train_module
    from anatomy.report import study_section
    from anatomy.results.studies import declared

    monkeypatch.setattr(still_to_train_module, "still_to_train", lambda everything, study: f"left: {study.name}")
    app = open_page(studies_db, "studies", monkeypatch)
    said = [element.value for element in app.markdown]
    with_runs = [name for name in declared() if (load(studies_db).runs["group"] == name).any()]
    assert with_runs == ["scale", "precision"]
    assert [text for text in said if text.startswith("left: ")] == [f"left: {name}" for name in with_runs]
    scale = study_section.study_section(load(studies_db), declared()["scale"])
    assert said.index("left: scale") == said.index(scale) + 1
