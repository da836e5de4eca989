"""Collecting run folders into DuckDB: contents, summary views, idempotence, atomic rebuild."""

from __future__ import annotations

import errno
import json
import math
import os
import stat
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb
import pytest

from anatomy.results import collect, database
from anatomy.cli import main
from anatomy.errors import AnatomyError
from guarded_command import run_anatomy
from run_folders import LLAMA_PARTS, write_run_folder


# the database, its JSON summary, and the lock file collect holds while writing (a lock's handle
# stays; only temporary files must not)
KEPT_BESIDE_THE_DATABASE = [".anatomy.duckdb.lock", "anatomy.duckdb", "results.json"]


def query(db: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(db), read_only=True) as con:
        return con.execute(sql).fetchall()


def metrics_of(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]


def file_row_counts(runs_root: Path) -> dict[str, int]:
    """What the run folders hold, counted straight from the files."""
    folders = [path.parent for path in runs_root.rglob("config.json")]
    samples = sum(len(json.loads((f / "samples.json").read_text())) for f in folders if (f / "samples.json").exists())
    return {"runs": len(folders), "metrics": sum(len(metrics_of(f)) for f in folders), "samples": samples}


@pytest.fixture
def collected(fixture_runs, tmp_path):
    runs_root, benchmarks_root = fixture_runs
    db, json_path = tmp_path / "out" / "anatomy.duckdb", tmp_path / "out" / "results.json"
    counts = collect.collect(runs_root, db, json_path, benchmarks_root)
    return runs_root, db, json_path, counts


def test_collect_holds_every_run_metric_sample_and_benchmark(collected):
    runs_root, db, _, counts = collected
    expected = file_row_counts(runs_root)
    assert {name: counts[name] for name in expected} == expected
    for table, count in expected.items():
        assert query(db, f"SELECT count(*) FROM {table}")[0][0] == count
    assert query(db, "SELECT rule, job, run_id, s, max_rss FROM benchmarks") == [
        ("train_model", "vanilla/seed42", "vanilla/seed42", 12.5, 310.2)
    ]
    # tags become columns; the whole config is kept as JSON
    row = query(
        db,
        """SELECT experiment, seed, "group", part, direction, config->>'$.train.seed'
                       FROM runs WHERE run_id = 'vanilla_plus_swiglu/seed7'""",
    )
    assert row == [("vanilla_plus_swiglu", 7, "ablation", "swiglu", "add", "7")]


def test_running_and_diverged_runs_keep_their_state(collected):
    _, db, _, _ = collected
    assert query(db, "SELECT status, diverged, params FROM runs WHERE run_id = 'llama_minus_rope/seed42'") == [
        ("running", False, None)
    ]
    assert query(db, "SELECT status, diverged, diverged_step FROM runs WHERE run_id = 'deep_post_nowarmup/seed42'") == [
        ("diverged", True, 30)
    ]
    # the non-finite losses are stored as NaN/inf (what happened), not NULL (not evaluated)
    train, val = query(
        db, "SELECT train_loss, val_loss FROM metrics WHERE run_id = 'deep_post_nowarmup/seed42' AND step = 30"
    )[0]
    assert math.isnan(train) and val == math.inf
    assert query(db, "SELECT text, note FROM samples WHERE run_id = 'deep_post_nowarmup/seed42'") == [
        (None, "run diverged at step 30; no checkpoint to sample from")
    ]


def test_runs_record_whether_training_was_compiled(collected):
    _, db, _, _ = collected
    rows = dict(query(db, "SELECT run_id, compiled FROM run_summary WHERE seed = 42"))
    assert rows["llama/seed42"] is True
    assert rows["vanilla/seed42"] is False  # no such key: written before the option, so eager
    assert rows["llama_minus_rope/seed42"] is None  # still running: not known yet


def test_run_summary_finds_the_overfitting_turn(collected):
    runs_root, db, _, _ = collected
    for run_id, best_val, best_step, final_val, final_train, rise, gap, last_step in query(
        db,
        """
            SELECT run_id, best_val_loss, best_step, final_val_loss, final_train_loss, val_rise,
                   train_val_gap, last_step FROM run_summary WHERE NOT diverged""",
    ):
        rows = metrics_of(runs_root / run_id)
        best = min(rows, key=lambda row: (row["val_loss"], row["step"]))
        assert (best_val, best_step) == pytest.approx((best["val_loss"], best["step"]))
        assert (final_val, final_train) == pytest.approx((rows[-1]["val_loss"], rows[-1]["train_loss"]))
        assert rise == pytest.approx(rows[-1]["val_loss"] - best["val_loss"])
        assert gap == pytest.approx(rows[-1]["val_loss"] - rows[-1]["train_loss"])
        assert last_step == rows[-1]["step"]
    # the fixture curves turn where they were told to
    assert query(db, "SELECT best_step FROM run_summary WHERE run_id = 'llama/seed42'") == [(40,)]
    # a diverged run's best is taken over its finite evaluations
    assert query(db, "SELECT best_step FROM run_summary WHERE run_id = 'deep_post_nowarmup/seed7'") == [(20,)]


def test_experiment_summary_is_mean_min_max_over_seeds(collected):
    _, db, _, _ = collected
    per_run = dict(query(db, "SELECT seed, best_val_loss FROM run_summary WHERE experiment = 'llama'"))
    assert set(per_run) == {7, 42} and per_run[7] != per_run[42]
    n_runs, seeds, mean, low, high = query(
        db,
        """
        SELECT n_runs, seeds, best_val_mean, best_val_min, best_val_max
        FROM experiment_summary WHERE experiment = 'llama'""",
    )[0]
    assert (n_runs, seeds) == (2, [7, 42])
    assert (mean, low, high) == pytest.approx((sum(per_run.values()) / 2, min(per_run.values()), max(per_run.values())))
    assert query(
        db, "SELECT n_diverged, n_running FROM experiment_summary WHERE experiment = 'deep_post_nowarmup'"
    ) == [(2, 0)]


def test_ablation_summary_pairs_each_run_with_its_baseline_by_seed(collected):
    _, db, _, _ = collected
    best = dict(query(db, "SELECT run_id, best_val_loss FROM run_summary"))
    row = query(
        db,
        """SELECT baseline, n_seeds, delta_best_val_mean, delta_best_val_min, delta_best_val_max
                       FROM ablation_summary WHERE experiment = 'llama_minus_swiglu'""",
    )[0]
    deltas = [best[f"llama_minus_swiglu/seed{s}"] - best[f"llama/seed{s}"] for s in (7, 42)]
    assert row[:2] == ("llama", 2)
    assert row[2:] == pytest.approx((sum(deltas) / 2, min(deltas), max(deltas)))
    assert query(db, "SELECT baseline FROM ablation_summary WHERE direction = 'add'") == [("vanilla",)]


def test_runs_keep_the_model_settings_the_pages_group_by(collected):
    _, db, _, _ = collected
    columns = "n_layer, ctx_len, n_head, n_kv_head, norm_type, norm_pos, pos_type, rope_break, ffn_type"
    # from config.json; what it leaves out is ModelConfig's default (n_head 4, ctx_len 128, no break)
    assert query(db, f"SELECT {columns} FROM run_summary WHERE run_id = 'mqa/seed7'") == [
        (1, 128, 4, 1, "rmsnorm", "pre", "rope", "none", "swiglu")
    ]
    assert query(db, f"SELECT {columns} FROM runs WHERE run_id = 'deep_post_nowarmup/seed42'") == [
        (12, 128, 4, 2, "rmsnorm", "post", "rope", "none", "swiglu")
    ]
    assert query(db, f"SELECT {columns} FROM runs WHERE run_id = 'vanilla/seed42'") == [
        (1, 128, 4, 4, "layernorm", "post", "learned", "none", "gelu")
    ]


def baselines_of(db: Path) -> dict[str, str | None]:
    return dict(query(db, "SELECT DISTINCT experiment, baseline FROM runs"))


# what workflow/experiments.yaml declares for the fixture grid's experiments: a headline model
# against the 2017 model, every other experiment against the headline model of its preset
FIXTURE_BASELINES = {
    "vanilla": None,
    "llama": "vanilla",
    "vanilla_plus_swiglu": "vanilla",
    "llama_minus_swiglu": "llama",
    "llama_minus_rope": "llama",
    "deep_pre_nowarmup": "llama",
    "deep_post_nowarmup": "llama",
    "mqa": "llama",
}


def test_without_experiments_collect_reads_the_experiments_file_beside_the_runs(fixture_runs, tmp_path, capsys):
    """No --experiments: the experiments.json beside --runs (where the workflow writes it, and
    where `anatomy reference` ships it) declares the baselines, and collect has nothing to say."""
    runs_root, _ = fixture_runs
    assert (runs_root.parent / collect.EXPERIMENTS_FILE).is_file()
    db = tmp_path / "out" / "anatomy.duckdb"
    assert main(["collect", "--runs", str(runs_root), "--db", str(db)]) == 0
    assert baselines_of(db) == FIXTURE_BASELINES
    assert "baseline" not in capsys.readouterr().err


def test_a_run_declared_nowhere_is_compared_with_nothing_and_collect_says_so(fixture_runs, tmp_path, capsys):
    """No tag and no experiments file: no baseline is guessed from the names; one line names the
    experiments left without one and where a baseline is declared."""
    runs_root, _ = fixture_runs
    (runs_root.parent / collect.EXPERIMENTS_FILE).unlink()
    db = tmp_path / "anatomy.duckdb"
    collect.collect(runs_root, db)
    assert set(baselines_of(db).values()) == {None}
    assert query(db, "SELECT count(*) FROM ablation_summary") == [(0,)]
    note = capsys.readouterr().err
    assert note == (
        f"collect: no baseline declared for {', '.join(sorted(FIXTURE_BASELINES))} (no `baseline` tag, "
        "no --experiments file and no experiments.json beside --runs), so they are compared with nothing; "
        "name one with `anatomy train --tag baseline=NAME` or in workflow/experiments.yaml\n"
    )


def test_a_baseline_comes_from_the_runs_tag_then_the_experiments_file(fixture_runs, tmp_path, capsys):
    runs_root, _ = fixture_runs
    # trained by hand with --tag baseline=mqa; and an experiment that exists only in this test's file
    write_run_folder(
        runs_root,
        "mqa_minus_swiglu",
        42,
        group="ablation",
        part="swiglu",
        direction="remove",
        baseline="mqa",
        model={"n_kv_head": 1},
    )
    write_run_folder(runs_root, "wider", 42, group="extra", preset="llama")
    experiments = tmp_path / "experiments.yaml"
    experiments.write_text(
        "experiments:\n  wider: {baseline: deep_pre_nowarmup}\n  mqa_minus_swiglu: {baseline: llama}\n"
        "  llama: {baseline: null}\n",
        encoding="utf-8",
    )
    db = tmp_path / "anatomy.duckdb"
    collect.collect(runs_root, db, experiments_path=experiments)
    found = baselines_of(db)
    assert (found["wider"], found["mqa_minus_swiglu"], found["llama"]) == ("deep_pre_nowarmup", "mqa", None)
    # the file given replaces the one beside the runs: what it leaves out has no baseline, and is named
    assert found["vanilla_plus_swiglu"] is None
    note = capsys.readouterr().err
    assert "no baseline declared for deep_post_nowarmup, deep_pre_nowarmup, llama_minus_rope," in note
    assert f"(no `baseline` tag, not in {experiments})" in note
    # and the views pair by it: the new ablation against mqa, the extra run against the deep run
    best = dict(query(db, "SELECT run_id, best_val_loss FROM run_summary"))
    assert query(
        db, "SELECT baseline, delta_best_val_mean FROM ablation_summary WHERE experiment = 'mqa_minus_swiglu'"
    ) == [("mqa", pytest.approx(best["mqa_minus_swiglu/seed42"] - best["mqa/seed42"]))]
    assert query(db, "SELECT baseline_run_id, delta_best_val FROM baseline_pairs WHERE experiment = 'wider'") == [
        ("deep_pre_nowarmup/seed42", pytest.approx(best["wider/seed42"] - best["deep_pre_nowarmup/seed42"]))
    ]
    assert "llama" not in {row[0] for row in query(db, "SELECT experiment FROM baseline_summary")}


@pytest.mark.parametrize(
    "content, message",
    [
        ("experiments: [a, b]\n", "expected an 'experiments' mapping"),
        ("experiments:\n  a: {baseline: 3}\n", "experiments.a.baseline must be an experiment name, got 3"),
        ("experiments: {a: [\n", "not YAML or JSON"),
    ],
)
def test_a_bad_experiments_file_is_one_line(fixture_runs, tmp_path, content, message):
    experiments = tmp_path / "experiments.yaml"
    experiments.write_text(content, encoding="utf-8")
    with pytest.raises(AnatomyError, match="--experiments .*experiments.yaml: ") as err:
        collect.collect(fixture_runs[0], tmp_path / "a.duckdb", experiments_path=experiments)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_results_json_mirrors_the_views(collected):
    _, db, json_path, counts = collected
    text = json_path.read_text()
    assert "NaN" not in text and "Infinity" not in text  # plain JSON for any reader
    data = json.loads(text)
    assert data["counts"] == counts
    assert len(data["run_summary"]) == counts["runs"]
    by_id = {row["run_id"]: row for row in data["run_summary"]}
    assert by_id["llama/seed42"]["best_val_loss"] == pytest.approx(
        query(db, "SELECT best_val_loss FROM run_summary WHERE run_id = 'llama/seed42'")[0][0]
    )
    assert by_id["deep_post_nowarmup/seed42"]["final_val_loss"] is None  # inf -> null
    assert {row["experiment"] for row in data["experiment_summary"]} == {
        row[0] for row in query(db, "SELECT DISTINCT experiment FROM runs")
    }


def test_collect_is_idempotent(collected):
    runs_root, db, json_path, counts = collected
    tables = ["runs", "metrics", "samples", "benchmarks"]
    before = {table: query(db, f"SELECT * FROM {table} ORDER BY ALL") for table in tables}
    json_before = json_path.read_text()
    again = collect.collect(runs_root, db, json_path, runs_root.parent / "benchmarks")
    assert again == counts
    after = {table: query(db, f"SELECT * FROM {table} ORDER BY ALL") for table in tables}
    # NaN != NaN, so compare the reprs
    assert repr(after) == repr(before)
    assert json_path.read_text() == json_before


def test_rebuild_is_atomic_for_a_reader(collected, tmp_path):
    runs_root, db, json_path, counts = collected
    reader = duckdb.connect(str(db), read_only=True)  # a dashboard query in flight
    try:
        write_run_folder(runs_root, "llama_qk_norm", 42, group="break", part="qk_norm")
        collect.collect(runs_root, db, json_path)
        # the open reader still sees the whole old database ...
        assert reader.execute("SELECT count(*) FROM runs").fetchone()[0] == counts["runs"]
    finally:
        reader.close()
    # ... and the next reader the whole new one; nothing temporary is left beside it
    assert query(db, "SELECT count(*) FROM runs")[0][0] == counts["runs"] + 1
    assert sorted(path.name for path in db.parent.iterdir()) == KEPT_BESIDE_THE_DATABASE


def test_failed_collect_leaves_the_old_database(collected):
    runs_root, db, json_path, counts = collected
    write_run_folder(runs_root, "broken", 1)
    (runs_root / "broken" / "seed1" / "summary.json").write_text('{"params": "many"}')
    with pytest.raises(AnatomyError, match=r"summary\.json: field 'params' must be a number"):
        collect.collect(runs_root, db, json_path)
    assert query(db, "SELECT count(*) FROM runs")[0][0] == counts["runs"]
    assert sorted(path.name for path in db.parent.iterdir()) == KEPT_BESIDE_THE_DATABASE


def test_a_crash_while_writing_the_database_leaves_the_old_one(collected, monkeypatch):
    runs_root, db, _, counts = collected
    real_table = collect._arrow_table

    def crash_on_samples(rows, columns):
        if columns is collect.SAMPLE_COLUMNS:
            raise OSError("disk full")
        return real_table(rows, columns)

    monkeypatch.setattr(collect, "_arrow_table", crash_on_samples)
    write_run_folder(runs_root, "llama_qk_norm", 42, group="break", part="qk_norm")
    with pytest.raises(OSError, match="disk full"):
        collect.collect(runs_root, db)
    assert query(db, "SELECT count(*) FROM runs")[0][0] == counts["runs"]
    assert sorted(path.name for path in db.parent.iterdir()) == KEPT_BESIDE_THE_DATABASE


def test_a_half_written_last_line_is_skipped_only_while_running(tmp_path):
    runs_root = tmp_path / "runs"
    folder = write_run_folder(runs_root, "llama", 42, status="running")
    complete = len(metrics_of(folder))
    with (folder / "metrics.jsonl").open("a") as handle:
        handle.write('{"step": 110, "train_lo')
    assert collect.collect(runs_root, tmp_path / "a.duckdb")["metrics"] == complete
    # the same line in a finished run is a broken file, named with its line number
    (folder / "summary.json").write_text(json.dumps({"status": "done", "diverged": False}))
    with pytest.raises(AnatomyError, match=rf"metrics\.jsonl: line {complete + 1} is not valid JSON"):
        collect.collect(runs_root, tmp_path / "b.duckdb")


def samples_json(**changes) -> str:
    """samples.json with one sample as `anatomy generate` records it, with `changes`."""
    sample = {"checkpoint": "last", "prefix": "## ", "temperature": 0.8, "seed": 0, "chars": 9, "text": "## abcdef"}
    return json.dumps([{**sample, **changes}])


def measured_samples_json(**changes) -> str:
    """samples.json with one sample and its memorisation figures (anatomy memorised), with `changes`."""
    figures = {
        "min_chars": 3,
        "copied_fraction": 0.5,
        "val_copied_fraction": 0.0,
        "longest_copy": 3,
        "longest_copy_text": "abc",
        "longest_copy_source": {"post": "a.md", "line": 1},
        "copied_spans": [[3, 3, "a.md", 1]],
    }
    return samples_json(memorisation={**figures, **changes})


@pytest.mark.parametrize(
    "file_name, content, message",
    [
        ("config.json", "{not json", r"config\.json: not valid JSON"),
        ("config.json", '{"tags": ["experiment"]}', r"config\.json: 'tags' must be an object"),
        (
            "metrics.jsonl",
            '{"step": 0, "val_loss": "low"}\n',
            r"metrics\.jsonl: field 'val_loss \(line 1\)' must be a number",
        ),
        ("metrics.jsonl", '{"val_loss": 1.0}\n', r"line 1 must be an object with a 'step' field"),
        ("samples.json", '{"text": "hi"}', r"samples\.json: expected a list of samples"),
        ("samples.json", '["hi"]', r"sample 0 must be an object, got 'hi'"),
        ("samples.json", '[{"prefix": "## "}]', r"sample 0 lacks 'checkpoint', 'temperature', 'seed', 'chars', 'text'"),
        # a sample holding only its text would show as "checkpoint None, temperature nan"
        ("samples.json", '[{"text": "hi"}]', r"sample 0 lacks 'checkpoint', 'prefix', 'temperature', 'seed', 'chars' "),
        ("samples.json", samples_json(text=5), r"sample 0: 'text' must be a string or null, got 5"),
        ("samples.json", samples_json(checkpoint="middle"), r"sample 0: 'checkpoint' must be 'best' or 'last'"),
        (
            "samples.json",
            samples_json(checkpoint=None),
            r"'checkpoint' must be .*\(null only for a sample without text",
        ),
        (
            "samples.json",
            samples_json(temperature=None),
            r"field 'temperature \(sample 0\)' must be a number, got null",
        ),
        ("samples.json", samples_json(prefix=3), r"sample 0: 'prefix' must be a string, got 3"),
        # malformed copied spans crashed the Samples page
        (
            "samples.json",
            measured_samples_json(copied_spans="3-6"),
            r"sample 0: 'memorisation.copied_spans' must be a list, got '3-6'",
        ),
        (
            "samples.json",
            measured_samples_json(copied_spans=[[3, 3]]),
            r"'memorisation.copied_spans' item 0 must be \[start, length, post, line\]",
        ),
        (
            "samples.json",
            measured_samples_json(copied_spans=[[3, 3, "a.md", 1], [7, 5, "a.md", 2]]),
            r"'memorisation.copied_spans' item 1 must be .* inside the text \(9 characters\), got \[7, 5, 'a.md', 2\]",
        ),
        (
            "samples.json",
            measured_samples_json(longest_copy_source=None),
            r"sample 0: a longest copy of 3 characters needs 'memorisation.longest_copy_source'",
        ),
        (
            "samples.json",
            measured_samples_json(min_chars=None),
            r"field 'min_chars \(memorisation of sample 0\)' must be a number, got null",
        ),
        # a cross-entropy is never negative: -Infinity is a damaged file, not a loss
        (
            "summary.json",
            '{"status": "done", "diverged": false, "best_val_loss": -Infinity}',
            r"summary\.json: field 'best_val_loss' must be a finite loss \(0 or more\) or null, got -inf",
        ),
        (
            "summary.json",
            '{"status": "done", "diverged": false, "best_val_loss": NaN}',
            r"field 'best_val_loss' must be a finite loss",
        ),
        (
            "summary.json",
            '{"status": "done", "diverged": false, "final_val_loss": -0.5}',
            r"field 'final_val_loss' must be a loss \(0 or more, or NaN or Infinity\) or null, got -0\.5",
        ),
        (
            "metrics.jsonl",
            '{"step": 0, "val_loss": -Infinity}\n',
            r"metrics\.jsonl: field 'val_loss \(line 1\)' must be a loss",
        ),
        # a finished run whose curve is empty: the report and the Overfitting page read it
        ("metrics.jsonl", "\n", r"metrics\.jsonl: missing or empty, but summary\.json says the run finished"),
        # a non-empty string reads as true: "false" must not mark a run as diverged
        (
            "summary.json",
            '{"status": "done", "diverged": "false"}',
            r"field 'diverged' must be true or false, got 'false'",
        ),
        (
            "summary.json",
            '{"status": "done", "diverged": false, "compiled": "false"}',
            r"field 'compiled' must be true or false, got 'false'",
        ),
        ("summary.json", '{"status": "finished", "diverged": false}', r"field 'status' must be 'done' or 'diverged'"),
    ],
)
def test_bad_run_files_name_the_file_and_field(tmp_path, file_name, content, message):
    runs_root = tmp_path / "runs"
    folder = write_run_folder(runs_root, "llama", 42)
    (folder / file_name).write_text(content)
    with pytest.raises(AnatomyError, match=message):
        collect.collect(runs_root, tmp_path / "a.duckdb")
    assert not (tmp_path / "a.duckdb").exists()


def test_a_finished_run_without_metrics_is_refused_naming_the_file(tmp_path, capsys):
    runs_root = tmp_path / "runs"
    write_run_folder(runs_root, "llama", 42)
    folder = write_run_folder(runs_root, "vanilla", 42)
    (folder / "metrics.jsonl").unlink()
    db = tmp_path / "a.duckdb"
    assert main(["collect", "--runs", str(runs_root), "--db", str(db)]) == 2
    error = capsys.readouterr().err
    assert f"{folder / 'metrics.jsonl'}: missing or empty, but summary.json says the run finished" in error
    assert error.count("\n") == 1 and not db.exists()
    # still training, it has no curve yet: collected as running
    (folder / "summary.json").unlink()
    assert main(["collect", "--runs", str(runs_root), "--db", str(db)]) == 0
    assert query(db, "SELECT status, n_evals FROM run_summary WHERE run_id = 'vanilla/seed42'") == [("running", None)]


def test_measured_samples_keep_their_spans_and_a_diverged_run_its_empty_sample(tmp_path):
    runs_root = tmp_path / "runs"
    folder = write_run_folder(runs_root, "llama", 42)
    (folder / "samples.json").write_text(measured_samples_json())
    write_run_folder(runs_root, "vanilla", 42, status="diverged", diverged_step=30)  # checkpoint and text null
    db = tmp_path / "a.duckdb"
    collect.collect(runs_root, db)
    assert query(db, "SELECT run_id, checkpoint, copied_spans FROM samples ORDER BY run_id") == [
        ("llama/seed42", "last", '[[3, 3, "a.md", 1]]'),
        ("vanilla/seed42", None, None),  # not measured
    ]


def test_bad_benchmark_file_is_named(tmp_path):
    runs_root, benchmarks = tmp_path / "runs", tmp_path / "benchmarks"
    write_run_folder(runs_root, "llama", 42)
    (benchmarks / "train_model" / "llama").mkdir(parents=True)
    (benchmarks / "train_model" / "llama" / "seed42.tsv").write_text("s\tmax_rss\nfast\t1\n")
    with pytest.raises(AnatomyError, match=r"seed42\.tsv: column 's' must be a number, got 'fast'"):
        collect.collect(runs_root, tmp_path / "a.duckdb", benchmarks_root=benchmarks)


def test_cli_collect(fixture_runs, tmp_path, capsys):
    runs_root, benchmarks_root = fixture_runs
    db, json_path = tmp_path / "db" / "anatomy.duckdb", tmp_path / "db" / "results.json"
    argv = [
        "collect",
        "--runs",
        str(runs_root),
        "--db",
        str(db),
        "--json",
        str(json_path),
        "--benchmarks",
        str(benchmarks_root),
    ]
    assert main(argv) == 0
    assert "collected 15 runs" in capsys.readouterr().out
    assert json.loads(json_path.read_text())["counts"]["runs"] == 15
    # a missing runs folder is a clear error, not a traceback
    assert main(["collect", "--runs", str(tmp_path / "nowhere"), "--db", str(db)]) == 2
    assert "nowhere: no such folder" in capsys.readouterr().err


def test_a_finished_run_without_its_config_is_named_not_left_out(tmp_path):
    runs_root = tmp_path / "runs"
    write_run_folder(runs_root, "llama", 42)
    folder = write_run_folder(runs_root, "vanilla", 42)
    (folder / "config.json").unlink()
    with pytest.raises(AnatomyError, match=r"vanilla/seed42: summary\.json but no config\.json"):
        collect.collect(runs_root, tmp_path / "a.duckdb")


def test_db_pointing_at_a_folder_is_one_line(fixture_runs, tmp_path, capsys):
    runs_root, _ = fixture_runs
    assert main(["collect", "--runs", str(runs_root), "--db", str(tmp_path)]) == 2
    assert f"--db {tmp_path}: is a folder, expected a DuckDB file\n" in capsys.readouterr().err


def test_a_reader_opened_after_a_collect_reads_the_new_file_while_the_old_one_is_open(collected):
    """A plain second connect to a path gets the database a first connection still holds open:
    a dashboard render holding the old file would make the next render read it under the new
    file's name (issue #28, item 3). Each reader reads the file at the path when it opened."""
    runs_root, db, _, counts = collected
    with database.open_read_only(db) as old:
        write_run_folder(runs_root, "llama_qk_norm", 42, group="break", part="qk_norm")
        collect.collect(runs_root, db)  # renames a new file into place
        with database.open_read_only(db) as new:
            assert new.execute("SELECT count(*) FROM runs").fetchone()[0] == counts["runs"] + 1
        assert old.execute("SELECT count(*) FROM runs").fetchone()[0] == counts["runs"]


@contextmanager
def freeing_readers_of(pipe: Path) -> Iterator[None]:
    """Whoever opens `pipe` to read waits for a writer: be one every 2 s, so that a test of code
    that should not open it fails instead of hanging."""
    done = threading.Event()

    def free():
        while not done.wait(2):
            try:
                os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass  # nobody waiting on it

    threading.Thread(target=free, daemon=True).start()
    try:
        yield
    finally:
        done.set()


def test_db_that_is_a_named_pipe_is_one_line_not_a_hang(fixture_runs, tmp_path, capsys):
    """Issue #28, item 11b: `report --db` on a named pipe waited for good; collect replaced it."""
    runs_root, _ = fixture_runs
    pipe = tmp_path / "anatomy.duckdb"
    os.mkfifo(pipe)
    said = f"--db {pipe}: is not a regular file (a named pipe): expected a DuckDB file\n"
    with freeing_readers_of(pipe):
        assert main(["collect", "--runs", str(runs_root), "--db", str(pipe)]) == 2
        assert said in capsys.readouterr().err
        assert main(["report", "--db", str(pipe), "--out", str(tmp_path / "report"), "--no-figures"]) == 2
        assert said in capsys.readouterr().err
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)  # left as it was
    # a device says what it is (not collected into: renaming over /dev/null would replace it)
    assert (
        database.database_path_problem("/dev/null")
        == "is not a regular file (a character device): expected a DuckDB file"
    )
    assert database.database_path_problem(tmp_path / "missing.duckdb") is None  # each reader says that itself


NO_SPACE = "No space left on device"
# what a full disk raises while collect writes: the OS's error, and DuckDB's, which loses the errno
FULL_DISK_ERRORS = {
    "oserror": OSError(errno.ENOSPC, NO_SPACE),
    "duckdb_io": duckdb.IOException(f'IO Error: Could not write file ".anatomy.duckdb.x.tmp": {NO_SPACE}'),
    "duckdb_fatal": duckdb.FatalException(
        "FATAL Error: Failed to create checkpoint because of error: "
        f'Could not write file ".anatomy.duckdb.x.tmp": {NO_SPACE}'
    ),
}


@pytest.mark.parametrize("error", list(FULL_DISK_ERRORS))
def test_a_full_disk_while_collecting_is_one_line_naming_the_database(collected, monkeypatch, capsys, error):
    """Issue #28, item 5: DuckDB's 25-line FatalException, as one line; the old database stays."""
    runs_root, db, json_path, counts = collected
    real_table = collect._arrow_table

    def disk_full_at_the_samples(rows, columns):
        if columns is collect.SAMPLE_COLUMNS:
            raise FULL_DISK_ERRORS[error]
        return real_table(rows, columns)

    monkeypatch.setattr(collect, "_arrow_table", disk_full_at_the_samples)
    write_run_folder(runs_root, "llama_qk_norm", 42, group="break", part="qk_norm")
    argv = ["collect", "--runs", str(runs_root), "--db", str(db), "--json", str(json_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {db}: cannot write: no space left on device; free some space")
    assert err.count("\n") == 1
    assert query(db, "SELECT count(*) FROM runs")[0][0] == counts["runs"]
    assert sorted(path.name for path in db.parent.iterdir()) == KEPT_BESIDE_THE_DATABASE


def test_a_full_disk_while_writing_results_json_names_it(collected, monkeypatch, capsys):
    runs_root, db, json_path, counts = collected
    real_write = Path.write_text

    def write_text(self, *args, **kwargs):
        if self.name.startswith(f".{json_path.name}."):  # results.json's temporary file
            raise OSError(errno.ENOSPC, NO_SPACE)
        return real_write(self, *args, **kwargs)

    monkeypatch.setattr(Path, "write_text", write_text)
    write_run_folder(runs_root, "llama_qk_norm", 42, group="break", part="qk_norm")
    argv = ["collect", "--runs", str(runs_root), "--db", str(db), "--json", str(json_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {json_path}: cannot write: no space left on device") and err.count("\n") == 1
    # the database goes into place after its results.json: neither changed
    assert query(db, "SELECT count(*) FROM runs")[0][0] == counts["runs"]
    assert sorted(path.name for path in db.parent.iterdir()) == KEPT_BESIDE_THE_DATABASE


# --- leftovers and drops ------------------------------------------------------------------------


def test_a_killed_collect_leaves_nothing_the_next_one_keeps(collected):
    """SIGKILL cannot run cleanup code: the next collect (holding the lock, so no other writer is
    at work) removes what a killed one left beside the database."""
    runs_root, db, json_path, _ = collected
    leftovers = [".anatomy.duckdb.x1y2.tmp", ".anatomy.duckdb.x1y2.tmp.wal", ".results.json.a9b8.tmp"]
    for name in leftovers:
        (db.parent / name).write_bytes(b"half written")
    collect.collect(runs_root, db, json_path)
    assert sorted(path.name for path in db.parent.iterdir()) == KEPT_BESIDE_THE_DATABASE


def test_results_json_and_the_database_are_replaced_together(collected, monkeypatch):
    """A collect that dies while summarising leaves the old pair: the database is renamed into
    place last, after results.json is written from the new one."""
    runs_root, db, json_path, counts = collected
    json_before = json_path.read_text()
    write_run_folder(runs_root, "llama_qk_norm", 42, group="break", part="qk_norm")

    def killed(_db_path):
        raise KeyboardInterrupt  # as a Ctrl-C would, half way through

    monkeypatch.setattr(collect, "summary_tables", killed)
    with pytest.raises(KeyboardInterrupt):
        collect.collect(runs_root, db, json_path)
    assert query(db, "SELECT count(*) FROM runs")[0][0] == counts["runs"]
    assert json_path.read_text() == json_before
    assert sorted(path.name for path in db.parent.iterdir()) == KEPT_BESIDE_THE_DATABASE


@pytest.mark.parametrize("killed_before", ["anatomy.duckdb", "results.json"])
def test_a_kill_between_the_renames_never_leaves_results_json_ahead_of_the_database(
    collected, monkeypatch, killed_before
):
    """Issue #37, item 9: killed just before the database's rename, results.json was the new one
    beside the old database. Now a kill there leaves no results.json (the next collect writes it),
    and never one that the database beside it does not match."""
    runs_root, db, json_path, counts = collected
    write_run_folder(runs_root, "llama_qk_norm", 42, group="break", part="qk_norm")
    real_replace = os.replace

    def killed(source, target):
        if Path(target).name == killed_before:
            raise KeyboardInterrupt  # as a signal there would; SIGKILL leaves the same files
        real_replace(source, target)

    monkeypatch.setattr(os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        collect.collect(runs_root, db, json_path)
    monkeypatch.undo()
    runs_in_db = query(db, "SELECT count(*) FROM runs")[0][0]
    assert runs_in_db == (counts["runs"] if killed_before == "anatomy.duckdb" else counts["runs"] + 1)
    assert not json_path.exists()
    assert sorted(path.name for path in db.parent.iterdir()) == [".anatomy.duckdb.lock", "anatomy.duckdb"]
    collect.collect(runs_root, db, json_path)  # the next collect makes the pair whole
    assert json.loads(json_path.read_text())["counts"]["runs"] == counts["runs"] + 1


def test_no_runs_do_not_replace_a_database_unless_asked(collected, tmp_path, capsys):
    _, db, _, counts = collected
    empty = tmp_path / "empty_runs"
    empty.mkdir()
    assert main(["collect", "--runs", str(empty), "--db", str(db)]) == 2
    err = capsys.readouterr().err
    assert "no run folders" in err and "--allow-empty" in err
    assert query(db, "SELECT count(*) FROM runs")[0][0] == counts["runs"]
    assert main(["collect", "--runs", str(empty), "--db", str(db), "--allow-empty"]) == 0
    assert query(db, "SELECT count(*) FROM runs")[0][0] == 0


def test_run_folders_reached_through_symlinks_are_collected(tmp_path):
    """A runs folder that links to runs kept elsewhere (another disk, a colleague's grid)."""
    elsewhere, runs_root = tmp_path / "elsewhere", tmp_path / "runs"
    write_run_folder(elsewhere, "llama", 42)
    write_run_folder(runs_root, "vanilla", 42)
    (runs_root / "llama").symlink_to(elsewhere / "llama", target_is_directory=True)
    (runs_root / "loop").symlink_to(runs_root, target_is_directory=True)  # a cycle is followed once
    collect.collect(runs_root, tmp_path / "a.duckdb")
    assert query(tmp_path / "a.duckdb", "SELECT run_id FROM runs ORDER BY run_id") == [
        ("llama/seed42",),
        ("vanilla/seed42",),
    ]


def test_a_run_is_never_paired_with_a_baseline_on_another_corpus(tmp_path):
    """A baseline on other text: an experiment retrained on your own writing beside its baseline
    on the shipped text, or a user's experiment beside the shipped runs (no digest, judged by sizes)."""
    runs_root = tmp_path / "runs"
    sizes = {"vocab_size": 50, "train_tokens": 1000, "val_tokens": 100}
    poems = {**sizes, "corpus": "poems", "digest": "a" * 64}
    blog = {**sizes, "corpus": "blog", "digest": "b" * 64}
    write_run_folder(runs_root, "vanilla", 42, data=poems)
    write_run_folder(runs_root, "llama", 42, baseline="vanilla", data=blog)  # another text, equal sizes
    write_run_folder(runs_root, "vanilla", 7, data=sizes)  # from before digests
    write_run_folder(runs_root, "llama", 7, baseline="vanilla", data=sizes)
    db = tmp_path / "anatomy.duckdb"
    collect.collect(runs_root, db)
    assert query(db, "SELECT run_id, baseline_run_id FROM baseline_pairs") == [("llama/seed7", "vanilla/seed7")]
    assert query(db, 'SELECT run_id, corpus, corpus_digest, "precision" FROM runs ORDER BY run_id')[0] == (
        "llama/seed42",
        "blog",
        "b" * 64,
        "fp32",
    )
    write_run_folder(runs_root, "wider", 7, baseline="vanilla", data={**sizes, "train_tokens": 999})
    collect.collect(runs_root, db)
    assert "wider/seed7" not in {row[0] for row in query(db, "SELECT run_id FROM baseline_pairs")}


def test_reading_a_database_never_runs_what_its_views_ask_outside_it(collected, tmp_path):
    """A results database is data: a view planted to read a file (or an address) is refused by
    every reader, while the project's own views still answer."""
    from anatomy.results.reader import load

    db = tmp_path / "hostile.duckdb"
    db.write_bytes(collected[1].read_bytes())
    secret = tmp_path / "secret.txt"
    secret.write_text("not for the dashboard")
    with duckdb.connect(str(db)) as con:
        con.execute(f"CREATE VIEW leak AS SELECT content FROM read_text('{secret}')")
    with database.open_read_only(db) as con:
        assert con.execute("SELECT count(*) FROM run_summary").fetchone()[0] > 0
        with pytest.raises(duckdb.PermissionException):
            con.execute("SELECT * FROM leak").fetchall()
    with duckdb.connect(str(db)) as con:  # the same trick inside a view the report reads
        con.execute("ALTER VIEW sample_memorisation RENAME TO honest")  # same columns, one file read more
        con.execute(f"CREATE VIEW sample_memorisation AS SELECT honest.* FROM honest, read_text('{secret}')")
    with pytest.raises(AnatomyError, match="not a results database of this project.*Permission"):
        load(db)


# ---------------------------------------------------------------------------------------------
# Nothing hangs or eats the machine: only regular files are read, and only so much of them


def put_in_place_of(path: Path, kind: str) -> None:
    """Replace the file at `path` with a named pipe, or a link to /dev/zero, which never ends."""
    path.unlink(missing_ok=True)
    if kind == "pipe":
        os.mkfifo(path)
    else:
        path.symlink_to("/dev/zero")


SPECIAL = {"pipe": "a named pipe", "zero": "a character device"}


RUN_FILES = {
    "metrics.jsonl": "the metrics anatomy train logs",
    "summary.json": "a finished run's summary",
    "config.json": "a run's settings, written by anatomy train",
    "samples.json": "the samples anatomy generate writes",
}
# the inner loop tries two of the eight (a collect each, some 8 s for all); CI tries them all
INNER_LOOP_RUN_FILES = {("metrics.jsonl", "pipe"), ("summary.json", "zero")}


@pytest.mark.parametrize(
    "name, what, kind",
    [
        pytest.param(name, what, kind, marks=() if (name, kind) in INNER_LOOP_RUN_FILES else pytest.mark.slow)
        for name, what in RUN_FILES.items()
        for kind in SPECIAL
    ],
)
def test_a_run_file_that_is_no_regular_file_is_one_line_not_a_hang(fixture_runs, tmp_path, name, what, kind):
    runs_root, _ = fixture_runs
    path = runs_root / "vanilla" / "seed42" / name
    put_in_place_of(path, kind)
    done = run_anatomy("collect", "--runs", str(runs_root), "--db", str(tmp_path / "a.duckdb"))
    assert done.returncode == 2
    assert done.stderr == f"error: {path}: is not a regular file ({SPECIAL[kind]}): expected {what}\n"
    assert not (tmp_path / "a.duckdb").exists()


@pytest.mark.parametrize("kind", list(SPECIAL))
def test_a_benchmark_or_experiments_file_that_is_no_regular_file_is_one_line(fixture_runs, tmp_path, kind):
    runs_root, benchmarks_root = fixture_runs
    benchmark = benchmarks_root / "train_model" / "vanilla" / "seed42.tsv"
    put_in_place_of(benchmark, kind)
    argv = ["collect", "--runs", str(runs_root), "--db", str(tmp_path / "a.duckdb")]
    done = run_anatomy(*argv, "--benchmarks", str(benchmarks_root))
    assert (done.returncode, done.stderr) == (
        2,
        f"error: {benchmark}: is not a regular file ({SPECIAL[kind]}): expected a Snakemake benchmark file\n",
    )
    experiments = tmp_path / "experiments.json"
    put_in_place_of(experiments, kind)
    done = run_anatomy(*argv, "--experiments", str(experiments))
    assert (done.returncode, done.stderr) == (
        2,
        f"error: --experiments {experiments}: is not a regular file ({SPECIAL[kind]}): "
        "expected an experiments file (YAML or JSON)\n",
    )


def test_a_run_file_too_big_to_be_one_is_refused_unread(fixture_runs, tmp_path, monkeypatch):
    """A "metrics.jsonl" of gigabytes is no run's: it is named, not read into memory."""
    from anatomy.files import run_folder

    # the real limit is 16 MiB; 64 KiB still holds every other file the fixture has (its experiments file)
    monkeypatch.setattr(run_folder, "SMALL_FILE_LIMIT", 64 * 1024)
    runs_root, _ = fixture_runs
    metrics = runs_root / "vanilla" / "seed42" / "metrics.jsonl"
    with metrics.open("a") as handle:
        handle.write("\n" * (80 * 1024))
    with pytest.raises(AnatomyError) as refused:
        collect.collect(runs_root, tmp_path / "a.duckdb")
    size = metrics.stat().st_size / 1024
    assert str(refused.value) == (
        f"{metrics}: {size:.1f} KiB is more than the metrics anatomy train logs should hold (64.0 KiB at most), "
        "so it is not read"
    )


# ---------------------------------------------------------------------------------------------
# A file collect did not make is not overwritten; a link is written through


def test_a_db_that_is_not_a_duckdb_database_is_left_as_it_is(fixture_runs, tmp_path, capsys):
    runs_root, _ = fixture_runs
    for content in ("# my notes\n", ""):
        notes = tmp_path / "notes.md"
        notes.write_text(content)
        assert main(["collect", "--runs", str(runs_root), "--db", str(notes)]) == 2
        assert capsys.readouterr().err == (
            f"error: --db {notes}: holds a file that is not a DuckDB database (it does not start like one); "
            "it is left as it is: give another path, or move that file away\n"
        )
        assert notes.read_text() == content


def test_a_duckdb_database_this_project_did_not_make_is_left_as_it_is(fixture_runs, tmp_path, capsys):
    runs_root, _ = fixture_runs
    theirs = tmp_path / "their.duckdb"
    with duckdb.connect(str(theirs)) as con:
        con.execute("CREATE TABLE orders (id INTEGER, total DOUBLE)")
        con.execute("INSERT INTO orders VALUES (1, 9.5)")
    before = theirs.read_bytes()
    assert main(["collect", "--runs", str(runs_root), "--db", str(theirs)]) == 2
    assert capsys.readouterr().err == (
        f"error: --db {theirs}: holds a DuckDB database this project did not make (collect writes the tables "
        "runs, metrics, samples, benchmarks); it is left as it is: give another path, or move that file away\n"
    )
    assert theirs.read_bytes() == before


def test_a_database_of_an_older_version_of_collect_is_replaced(fixture_runs, tmp_path):
    """The first schema.sql's tables, without the columns added since: collect's own, rebuilt."""
    runs_root, _ = fixture_runs
    older = tmp_path / "anatomy.duckdb"
    with duckdb.connect(str(older)) as con:
        con.execute("CREATE TABLE runs (run_id VARCHAR PRIMARY KEY, experiment VARCHAR, seed INTEGER, config JSON)")
        con.execute("CREATE TABLE metrics (run_id VARCHAR, step INTEGER, train_loss DOUBLE, val_loss DOUBLE)")
        con.execute("CREATE TABLE samples (run_id VARCHAR, sample_idx INTEGER, text VARCHAR)")
        con.execute("CREATE TABLE benchmarks (rule VARCHAR, job VARCHAR, s DOUBLE)")
    assert main(["collect", "--runs", str(runs_root), "--db", str(older)]) == 0
    with duckdb.connect(str(older), read_only=True) as con:
        assert database.missing_columns(con) == []


@pytest.mark.parametrize(
    "content", ["my thesis\n", "", '{"counts": {"runs": 1}}', '["counts", "run_summary", "experiment_summary"]']
)
def test_a_json_that_collect_did_not_write_is_left_as_it_is(fixture_runs, tmp_path, capsys, content):
    runs_root, _ = fixture_runs
    thesis = tmp_path / "thesis.txt"
    thesis.write_text(content)
    db = tmp_path / "anatomy.duckdb"
    assert main(["collect", "--runs", str(runs_root), "--db", str(db), "--json", str(thesis)]) == 2
    assert capsys.readouterr().err == (
        f"error: --json {thesis}: holds a file that is not a results.json written by collect (a JSON object with "
        "'counts', 'run_summary', 'experiment_summary'); it is left as it is: give another path, or move that "
        "file away\n"
    )
    assert thesis.read_text() == content
    assert not db.exists()  # refused before anything was written


def test_collect_replaces_its_own_database_and_results_json(collected):
    runs_root, db, json_path, counts = collected
    write_run_folder(runs_root, "llama_qk_norm", 42, group="break", part="qk_norm")
    assert collect.collect(runs_root, db, json_path)["runs"] == counts["runs"] + 1
    assert json.loads(json_path.read_text())["counts"]["runs"] == counts["runs"] + 1


def test_a_named_pipe_as_json_is_refused_not_replaced(fixture_runs, tmp_path, capsys):
    runs_root, _ = fixture_runs
    pipe = tmp_path / "results.json"
    os.mkfifo(pipe)
    assert main(["collect", "--runs", str(runs_root), "--db", str(tmp_path / "a.duckdb"), "--json", str(pipe)]) == 2
    assert capsys.readouterr().err == (
        f"error: --json {pipe}: is not a regular file (a named pipe); expected the path of a file to write\n"
    )
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)


def test_a_db_and_json_reached_by_links_are_written_through(collected, tmp_path):
    """The link stays and leads to the new database: replaced by a plain file, it would leave
    the database it named (kept on another disk, say) stale without a word."""
    runs_root, real_db, real_json, counts = collected
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / "anatomy.duckdb").symlink_to(real_db)
    (linked / "results.json").symlink_to(real_json)
    write_run_folder(runs_root, "llama_qk_norm", 42, group="break", part="qk_norm")
    collect.collect(runs_root, linked / "anatomy.duckdb", linked / "results.json")
    assert (linked / "anatomy.duckdb").is_symlink() and (linked / "results.json").is_symlink()
    assert query(real_db, "SELECT count(*) FROM runs")[0][0] == counts["runs"] + 1
    assert json.loads(real_json.read_text())["counts"]["runs"] == counts["runs"] + 1
    # the lock and the temporaries are the real database's, beside it: one lock per database
    assert sorted(path.name for path in real_db.parent.iterdir()) == KEPT_BESIDE_THE_DATABASE
    assert sorted(path.name for path in linked.iterdir()) == ["anatomy.duckdb", "results.json"]
    assert database.collect_lock_path(linked / "anatomy.duckdb") == database.collect_lock_path(real_db)


# ---------------------------------------------------------------------------------------------
# Collect is the gate: what no reader can use is refused, in one line naming the run and the field


@pytest.mark.parametrize(
    "model, said",
    [
        ({"d_model": 32, "n_head": 3, "n_kv_head": 3}, "d_model 32 is not divisible by n_head 3"),
        ({"n_head": 4, "n_kv_head": 3}, "n_head 4 is not divisible by n_kv_head 3"),
        ({"d_model": 12, "n_head": 4, "pos_type": "rope"}, "head_dim must be even"),
        ({"rope_break": "k_adjacent"}, "rope_break = 'k_adjacent' needs pos_type 'rope'"),
        ({"n_layer": 0}, "ModelConfig.n_layer = 0 is not valid"),
    ],
)
def test_a_model_no_reader_can_build_is_refused_naming_the_run(tmp_path, model, said):
    """Collected, such a run once failed the report without naming it, and broke three pages."""
    runs_root = tmp_path / "runs"
    write_run_folder(runs_root, "vanilla", 42)
    write_run_folder(runs_root, "odd", 42, model=model)
    with pytest.raises(AnatomyError) as err:
        collect.collect(runs_root, tmp_path / "a.duckdb")
    message = str(err.value)
    assert message.startswith(f"{runs_root / 'odd' / 'seed42' / 'config.json'}: field 'model' holds a model no reader")
    assert said in message and "\n" not in message
    assert not (tmp_path / "a.duckdb").exists()


def test_every_model_setting_is_a_column_so_no_reader_parses_config_json(tmp_path):
    from anatomy.config import ModelConfig

    runs_root = tmp_path / "runs"
    write_run_folder(
        runs_root,
        "llama_qk",
        42,
        model={**LLAMA_PARTS, "d_model": 24, "n_head": 2, "n_kv_head": 1, "qk_norm": True},
        train={"lr": 2e-3, "schedule": "cosine", "warmup_steps": 0},
    )
    write_run_folder(runs_root, "vanilla", 42)  # the defaults, where config.json says nothing
    db = tmp_path / "a.duckdb"
    collect.collect(runs_root, db)
    columns = {
        row[0] for row in query(db, "SELECT column_name FROM information_schema.columns WHERE table_name = 'runs'")
    }
    assert set(ModelConfig.__dataclass_fields__) - {"vocab_size"} <= columns  # its vocabulary: data.vocab_size
    settings = "d_model, n_head, n_kv_head, qk_norm, impl, lr, schedule, warmup_steps"
    parts = "llama_parts(norm_type, norm_pos, pos_type, n_head, n_kv_head, ffn_type)"
    assert query(db, f"SELECT run_id, {settings}, {parts} FROM runs ORDER BY run_id") == [
        ("llama_qk/seed42", 24, 2, 1, True, "fused", 2e-3, "cosine", 0, 5),
        ("vanilla/seed42", 16, 4, 4, False, "fused", 3e-4, "constant", 100, 0),
    ]


def test_runs_of_one_experiment_on_two_corpora_are_refused(tmp_path):
    """Seeds on different text would be averaged into one row as if one experiment: collect stops
    and names both runs and what differs; a run from before digests is judged by its sizes."""
    runs_root = tmp_path / "runs"
    sizes = {"vocab_size": 50, "train_tokens": 1000, "val_tokens": 100}
    write_run_folder(runs_root, "vanilla", 42, data={**sizes, "corpus": "data/posts", "digest": "a" * 64})
    write_run_folder(runs_root, "vanilla", 7, data=sizes)  # from before digests: the same sizes, no word
    collect.collect(runs_root, tmp_path / "a.duckdb")
    write_run_folder(runs_root, "vanilla", 1, data={**sizes, "corpus": "poems_128k", "digest": "b" * 64})
    with pytest.raises(AnatomyError) as err:
        collect.collect(runs_root, tmp_path / "b.duckdb")
    assert str(err.value) == (
        f"--runs {runs_root}: the runs of experiment 'vanilla' read different corpora (data.digest "
        f"{'b' * 12}... in vanilla/seed1/config.json, {'a' * 12}... in vanilla/seed42/config.json), and an "
        "experiment's seeds are averaged as one; train them again on one corpus, or move one corpus's runs "
        "into a runs folder of their own"
    )
    write_run_folder(runs_root, "llama", 42, data={**sizes, "train_tokens": 999})
    write_run_folder(runs_root, "llama", 7, data=sizes)
    with pytest.raises(AnatomyError, match=r"experiment 'llama' read different corpora \(data.train_tokens 999 in"):
        collect.collect(runs_root, tmp_path / "b.duckdb")


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder: chmod does not bite")
def test_collect_in_a_folder_it_may_not_write_is_one_line(fixture_runs, tmp_path, capsys):
    results = tmp_path / "results"
    results.mkdir()
    results.chmod(0o555)
    try:
        assert main(["collect", "--runs", str(fixture_runs[0]), "--db", str(results / "anatomy.duckdb")]) == 2
    finally:
        results.chmod(0o755)
    err = capsys.readouterr().err
    assert err.startswith(f"error: {results}") and "Permission denied" in err and "a folder you may write to" in err
    assert err.count("\n") == 1  # one line, no traceback


def test_a_run_that_names_no_corpus_takes_the_name_of_the_one_corpus_it_fits(tmp_path):
    """The shipped grid's runs predate corpus names; a later run on the same text names it. Both
    must fall in one setup (one noise estimate, one lr curve), and only where one name fits."""
    runs = tmp_path / "runs"
    sizes = {"vocab_size": 50, "train_tokens": 1000, "val_tokens": 100}
    write_run_folder(runs, "vanilla", 42, data=sizes)  # no name: trained before corpora had names
    write_run_folder(runs, "llama", 42, data={**sizes, "corpus": "data/posts", "digest": "ab" * 32})
    write_run_folder(runs, "other_size", 42, group="extra", data={**sizes, "train_tokens": 2000})
    collected = collect.collect_runs(runs)
    corpus = {run["experiment"]: run["corpus"] for run in collected.runs}
    assert corpus == {"vanilla": "data/posts", "llama": "data/posts", "other_size": None}


def test_a_run_that_fits_two_named_corpora_stays_unnamed(tmp_path):
    runs = tmp_path / "runs"
    sizes = {"vocab_size": 50, "train_tokens": 1000, "val_tokens": 100}
    write_run_folder(runs, "vanilla", 42, data=sizes)
    write_run_folder(runs, "llama", 42, data={**sizes, "corpus": "mine"})
    write_run_folder(runs, "llama_minus_rope", 42, data={**sizes, "corpus": "yours"})
    corpus = {run["experiment"]: run["corpus"] for run in collect.collect_runs(runs).runs}
    assert corpus["vanilla"] is None


def write_training(runs_root: Path, experiment: str, seed: int, group: str, floor: float, **train) -> None:
    """A run folder whose config.json resolves as `anatomy train` writes it (the fixture's
    `max_steps` is no training setting)."""
    folder = write_run_folder(
        runs_root, experiment, seed, group=group, model=LLAMA_PARTS, floor=floor, train={"lr": 1e-3, **train}
    )
    config = json.loads((folder / "config.json").read_text())
    config["train"].pop("max_steps")
    (folder / "config.json").write_text(json.dumps(config))


def test_a_run_that_repeats_another_training_is_collected_once(tmp_path, capsys):
    """One training, one run: an experiment of an older declaration restored beside the newer ones
    (the plain mini-LLaMA trained again to log its logits) would count as a seed it is not. The
    declared experiment's run stays; the repeat is left out, and collect says so."""
    runs_root = tmp_path / "runs"
    write_training(runs_root, "lr_llama_1e3", 42, "lr", 2.0)
    write_training(runs_root, "lr_llama_1e3", 7, "lr", 2.1)
    write_training(runs_root, "a_old_llama_1e3", 42, "parts", 2.0, log_max_logits=True)  # first by name
    write_training(runs_root, "a_old_llama_3e3", 42, "parts", 2.2, lr=3e-3)  # another lr: its own training
    experiments = tmp_path / "experiments.yaml"
    experiments.write_text("experiments:\n  lr_llama_1e3: {baseline: null}\n  a_old_llama_3e3: {baseline: null}\n")

    collect.collect(runs_root, tmp_path / "db.duckdb", experiments_path=experiments)

    runs = {row[0] for row in query(tmp_path / "db.duckdb", "SELECT run_id FROM runs")}
    assert runs == {"lr_llama_1e3/seed42", "lr_llama_1e3/seed7", "a_old_llama_3e3/seed42"}
    assert query(tmp_path / "db.duckdb", "SELECT count(*) FROM metrics WHERE run_id LIKE 'a_old_llama_1e3%'") == [(0,)]
    said = capsys.readouterr().err
    assert "a_old_llama_1e3/seed42 repeats lr_llama_1e3/seed42" in said and said.count("repeats") == 1


def test_runs_that_differ_in_the_seed_alone_share_their_settings_key(tmp_path):
    """The noise pools seeds by training, not by experiment: a seed 7 declared by another study
    shares the settings of the seed 42 it pairs with; another lr, or what a run only logs, does not
    and does make another training."""
    runs_root = tmp_path / "runs"
    write_training(runs_root, "size_m_llama_5e4", 42, "size", 2.0, lr=5e-4)
    write_training(runs_root, "parts_8m_llama_5e4", 7, "parts", 2.1, lr=5e-4, log_max_logits=True)
    write_training(runs_root, "parts_8m_llama_2e3", 7, "parts", 2.2, lr=2e-3)

    collect.collect(runs_root, tmp_path / "db.duckdb")

    settings = dict(query(tmp_path / "db.duckdb", "SELECT experiment, settings FROM runs"))
    assert settings["size_m_llama_5e4"] == settings["parts_8m_llama_5e4"] is not None
    assert settings["parts_8m_llama_2e3"] != settings["size_m_llama_5e4"]
    assert query(tmp_path / "db.duckdb", "SELECT trainings, df FROM setup_noise") == [(1, 1)]


def test_the_experiments_files_runs_are_kept_as_declared_runs(fixture_runs, tmp_path):
    runs_root, _ = fixture_runs
    experiments = tmp_path / "experiments.json"
    declared = {"vanilla": {"baseline": None, "group": "headline", "runs": [{"seed": 42, "stage": None}]}}
    declared["lr_x"] = {
        "baseline": "vanilla",
        "group": "lr",
        "runs": [{"seed": 42, "stage": 1}, {"seed": 7, "stage": 2}],
    }
    declared["old"] = {"baseline": None}  # an entry without runs (workflow/experiments.yaml's) declares none
    experiments.write_text(json.dumps({"experiments": declared}))
    collect.collect(runs_root, tmp_path / "a.duckdb", experiments_path=experiments)
    rows = query(tmp_path / "a.duckdb", 'SELECT experiment, seed, "group", stage FROM declared_runs ORDER BY ALL')
    assert rows == [("lr_x", 7, "lr", 2), ("lr_x", 42, "lr", 1), ("vanilla", 42, "headline", None)]


@pytest.mark.parametrize(
    "runs, said",
    [
        ("42", "experiments.x.runs must be a list of {seed, stage}, got '42'"),
        ([{"seed": "42", "stage": 1}], "experiments.x.runs: expected {seed: a whole number, stage: one or null}, got"),
        ([{"seed": 42, "stage": 1}, {"seed": 42, "stage": 2}], "experiments.x.runs: seed 42 is declared twice"),
    ],
)
def test_a_bad_declared_run_is_one_line_naming_it(fixture_runs, tmp_path, runs, said):
    runs_root, _ = fixture_runs
    experiments = tmp_path / "experiments.json"
    experiments.write_text(json.dumps({"experiments": {"x": {"group": "lr", "runs": runs}}}))
    with pytest.raises(AnatomyError) as refused:
        collect.collect(runs_root, tmp_path / "a.duckdb", experiments_path=experiments)
    assert str(refused.value).startswith(f"--experiments {experiments}: {said}")
    assert not (tmp_path / "a.duckdb").exists()


def test_a_declared_run_left_out_as_a_repeat_names_the_run_it_repeats(tmp_path):
    """Under an override two declarations can train alike (vanilla_bf16 is vanilla under
    precision=bf16): the folder left out is no run still to train, it is finished as the other."""
    runs_root = tmp_path / "runs"
    write_training(runs_root, "lr_llama_1e3", 42, "lr", 2.0)
    write_training(runs_root, "parts_llama_1e3", 42, "parts", 2.0)
    experiments = tmp_path / "experiments.json"
    declared = {
        name: {"baseline": None, "group": group, "runs": [{"seed": 42, "stage": 1}]}
        for name, group in (("lr_llama_1e3", "lr"), ("parts_llama_1e3", "parts"))
    }
    experiments.write_text(json.dumps({"experiments": declared}))
    collect.collect(runs_root, tmp_path / "db.duckdb", experiments_path=experiments)
    rows = query(tmp_path / "db.duckdb", "SELECT experiment, repeat_of FROM declared_runs ORDER BY experiment")
    assert rows == [("lr_llama_1e3", None), ("parts_llama_1e3", "lr_llama_1e3/seed42")]
