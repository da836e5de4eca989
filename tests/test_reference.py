"""Shipping finished runs as reference results: small files only, provenance, idempotence."""

from __future__ import annotations

import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import duckdb
import pytest

from anatomy.results import reference

from anatomy.results import collect
from anatomy.cli import main
from anatomy.files.locks import held_lock
from anatomy.files.run_folder import SMALL_FILE_LIMIT


def shipped_files(out: Path) -> set[str]:
    return {path.relative_to(out).as_posix() for path in out.rglob("*") if path.is_file()}


def test_ships_finished_runs_small_files_and_their_benchmark_only(fixture_runs, tmp_path):
    runs_root, benchmarks_root = fixture_runs
    # a checkpoint beside the results must stay behind
    (runs_root / "vanilla" / "seed42" / "last.pt").write_bytes(b"weights")
    out = tmp_path / "reference"

    report = reference.ship(runs_root, out, benchmarks_root)

    # the running run has no summary; the diverged runs have summary and samples, so they ship
    assert report["not finished"] == ["llama_minus_rope/seed42"]
    assert len(report["added"]) == 14 and not report["updated"] and not report["unchanged"]
    files = shipped_files(out)
    assert not any(name.endswith(".pt") for name in files)
    assert "runs/vanilla/seed42/metrics.jsonl" in files
    assert {name for name in files if not name.startswith("runs/")} == {
        "grid.json",
        "benchmarks/train_model/vanilla/seed42.tsv",
    }
    for run_id in report["added"]:
        for name in reference.RESULT_FILES:
            assert (out / "runs" / run_id / name).read_bytes() == (runs_root / run_id / name).read_bytes()

    grid = json.loads((out / "grid.json").read_text())
    assert sorted(grid["runs"]) == sorted(report["added"])
    vanilla = grid["runs"]["vanilla/seed42"]
    assert vanilla["job_s"] == 12.5 and vanilla["device"] == "cpu" and vanilla["torch_version"] == "2.13.0"
    assert vanilla["finished_utc"].endswith("Z") and "cores" in vanilla["machine"]
    assert grid["runs"]["llama/seed42"]["job_s"] is None  # no benchmark file for it
    assert grid["grid"]["n_runs"] == 14 and grid["grid"]["devices"] == ["cpu"]


def test_collect_builds_the_same_database_from_the_reference(fixture_runs, tmp_path):
    runs_root, benchmarks_root = fixture_runs
    out = tmp_path / "reference"
    reference.ship(runs_root, out, benchmarks_root)
    # as `anatomy reference` does: the baselines are declared beside the shipped runs too
    reference.ship_experiments(runs_root.parent / reference.EXPERIMENTS_FILE, out)
    (runs_root / "llama_minus_rope").rename(tmp_path / "unfinished")  # only finished runs compare

    original, shipped = tmp_path / "original.duckdb", tmp_path / "shipped.duckdb"
    collect.collect(runs_root, original, None, benchmarks_root)
    collect.collect(out / "runs", shipped, None, out / "benchmarks")
    sql = "SELECT * EXCLUDE (elapsed_s) FROM run_summary ORDER BY run_id"
    with duckdb.connect(str(original), read_only=True) as a, duckdb.connect(str(shipped), read_only=True) as b:
        # compared as text: a diverged run's NaN is not equal to itself
        assert repr(a.execute(sql).fetchall()) == repr(b.execute(sql).fetchall())
        assert a.execute("SELECT * FROM benchmarks").fetchall() == b.execute("SELECT * FROM benchmarks").fetchall()


def test_a_second_call_ships_only_what_is_new_or_changed(fixture_runs, tmp_path):
    runs_root, benchmarks_root = fixture_runs
    out = tmp_path / "reference"
    reference.ship(runs_root, out, benchmarks_root)
    first = json.loads((out / "grid.json").read_text())

    # the running run finishes; another run is trained again and differs
    running = runs_root / "llama_minus_rope" / "seed42"
    for name in ("summary.json", "samples.json"):
        (running / name).write_text((runs_root / "llama" / "seed42" / name).read_text())
    (runs_root / "mqa" / "seed7" / "samples.json").write_text("[]")

    report = reference.ship(runs_root, out, benchmarks_root)
    assert report["added"] == ["llama_minus_rope/seed42"]
    assert report["updated"] == ["mqa/seed7"]
    assert len(report["unchanged"]) == 13 and not report["not finished"]
    assert (out / "runs" / "mqa" / "seed7" / "samples.json").read_text() == "[]"
    second = json.loads((out / "grid.json").read_text())
    # a run shipped before keeps its record (it may come from another machine or session)
    assert second["runs"]["vanilla/seed42"] == first["runs"]["vanilla/seed42"]
    assert second["grid"]["n_runs"] == 15


def test_a_run_collect_cannot_read_is_not_shipped(fixture_runs, tmp_path):
    runs_root, _ = fixture_runs
    (runs_root / "mqa" / "seed7" / "summary.json").write_text("{not json")
    with pytest.raises(Exception, match=r"mqa/seed7/summary.json: not valid JSON"):
        reference.ship(runs_root, tmp_path / "reference")
    assert not (tmp_path / "reference" / "grid.json").exists()


def test_cli_reports_what_it_shipped_and_refuses_bad_folders(fixture_runs, tmp_path, capsys):
    runs_root, benchmarks_root = fixture_runs
    out = tmp_path / "reference"
    assert main(["reference", "--runs", str(runs_root), "--benchmarks", str(benchmarks_root), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "added: 14" in printed and "not finished: 1  (llama_minus_rope/seed42)" in printed

    assert main(["reference", "--runs", str(tmp_path / "nowhere"), "--out", str(out)]) == 2
    assert "--runs" in capsys.readouterr().err
    assert main(["reference", "--runs", str(runs_root), "--out", str(runs_root / "ref")]) == 2
    assert "inside --runs" in capsys.readouterr().err
    a_file = tmp_path / "a_file"
    a_file.write_text("")
    assert main(["reference", "--runs", str(runs_root), "--out", str(a_file)]) == 2
    assert "is a file: expected a folder" in capsys.readouterr().err


def fixture_corpus(folder: Path, vocab_size: int = 50) -> Path:
    """A tokenized corpus as far as restoring reads it: split.json (the fixture runs' vocabulary is 50)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "split.json").write_text(json.dumps({"vocab_size": vocab_size, "train_tokens": 900}))
    return folder


def test_a_corpus_fact_is_a_grouped_count_or_what_was_recorded():
    assert reference.fact_value(105839) == "105,839"
    assert reference.fact_value("many") == "many"  # not a count: said, not a format error


def test_restore_puts_shipped_runs_back_where_missing_and_never_overwrites(fixture_runs, tmp_path, capsys):
    runs_root, benchmarks_root = fixture_runs
    out = tmp_path / "reference"
    reference.ship(runs_root, out, benchmarks_root)
    elsewhere = tmp_path / "elsewhere"
    mine = elsewhere / "vanilla" / "seed42"
    mine.mkdir(parents=True)
    (mine / "config.json").write_text("{}")  # a run of that machine, e.g. half trained
    corpus = fixture_corpus(tmp_path / "corpus")
    assert main(["reference", "--restore", "--out", str(out), "--runs", str(elsewhere), "--data", str(corpus)]) == 0
    assert "restored 13 shipped runs" in capsys.readouterr().out
    assert (mine / "config.json").read_text() == "{}" and not (mine / "summary.json").exists()
    for name in reference.RESULT_FILES:
        assert (elsewhere / "mqa" / "seed7" / name).read_bytes() == (out / "runs" / "mqa" / "seed7" / name).read_bytes()
    assert main(["reference", "--restore", "--out", str(tmp_path / "none"), "--runs", str(elsewhere)]) == 2


@pytest.mark.parametrize(
    ("corpus", "shipped_data", "said"),
    [
        (None, None, "split.json: no tokenized corpus yet; build it before restoring"),
        (77, None, "split.json: vocab_size 77, but the shipped run "),
        # same vocabulary, another text: the token counts tell them apart
        (50, {"vocab_size": 50, "train_tokens": 1000}, "split.json: train_tokens 900, but the shipped run "),
        (
            50,
            {"dir": "corpus"},
            "config.json: field 'data.vocab_size' missing, so the shipped run's corpus cannot be told",
        ),
    ],
)
def test_restore_needs_the_runs_own_corpus_first_and_copies_nothing_without_it(
    fixture_runs, tmp_path, capsys, corpus, shipped_data, said
):
    runs_root, benchmarks_root = fixture_runs
    out = tmp_path / "reference"
    reference.ship(runs_root, out, benchmarks_root)
    if shipped_data is not None:  # what the shipped llama/seed7 records of its corpus
        config_path = out / "runs" / "llama" / "seed7" / "config.json"
        config = json.loads(config_path.read_text())
        config_path.write_text(json.dumps({**config, "data": shipped_data}))
    data = tmp_path / "corpus" if corpus is None else fixture_corpus(tmp_path / "corpus", vocab_size=corpus)
    elsewhere = tmp_path / "elsewhere"
    assert main(["reference", "--restore", "--out", str(out), "--runs", str(elsewhere), "--data", str(data)]) == 2
    error = capsys.readouterr().err
    assert said in error and error.count("\n") == 1, error
    assert not elsewhere.exists()


def test_exam_results_ship_with_their_run_and_come_back_on_restore(fixture_runs, tmp_path):
    runs_root, benchmarks_root = fixture_runs
    run = runs_root / "llama" / "seed42"
    (run / "exams").mkdir()
    (run / "exams" / "length.json").write_text('{"rows": []}')
    (run / "grad_norms.jsonl").write_text('{"step": 1, "norms": [0.5]}\n')
    # a parts run's logs beside them: only training again could remake them
    (run / "expert_shares.jsonl").write_text('{"step": 1, "shares": [[0.5, 0.5]]}\n')
    (run / "max_logits.jsonl").write_text('{"step": 1, "max_logits": [3.5]}\n')
    cell = tmp_path / "exams" / "depth" / "post_lr0.001"  # the exams of no one run, beside runs/
    cell.mkdir(parents=True)
    for name in ("config.json", "summary.json", "last.pt"):
        (cell / name).write_text("{}")
    (tmp_path / "exams" / "wall_clock.json").write_text("[]")
    training = tmp_path / "exams" / "depth" / "pre_lr0.001"  # a cell still training: not shipped yet
    training.mkdir()
    (training / "config.json").write_text("{}")
    out = tmp_path / "reference"

    assert main(["reference", "--runs", str(runs_root), "--benchmarks", str(benchmarks_root), "--out", str(out)]) == 0
    files = shipped_files(out)
    assert {
        "runs/llama/seed42/exams/length.json",
        "runs/llama/seed42/grad_norms.jsonl",
        "runs/llama/seed42/expert_shares.jsonl",
        "runs/llama/seed42/max_logits.jsonl",
        "exams/depth/post_lr0.001/summary.json",
        "exams/wall_clock.json",
    } <= files
    assert "exams/depth/post_lr0.001/last.pt" not in files  # checkpoints never ship
    assert not any(name.startswith("exams/depth/pre_lr0.001") for name in files)

    elsewhere = tmp_path / "elsewhere"
    corpus = fixture_corpus(elsewhere / "corpus")
    assert (
        main(["reference", "--restore", "--out", str(out), "--runs", str(elsewhere / "runs"), "--data", str(corpus)])
        == 0
    )
    restored = elsewhere / "runs" / "llama" / "seed42"
    assert (restored / "exams" / "length.json").read_text() == '{"rows": []}'
    assert (restored / "max_logits.jsonl").read_text() == '{"step": 1, "max_logits": [3.5]}\n'
    # written after summary.json, so a workflow counts the exam as up to date
    assert (restored / "exams" / "length.json").stat().st_mtime_ns >= (restored / "summary.json").stat().st_mtime_ns
    assert (elsewhere / "exams" / "depth" / "post_lr0.001" / "summary.json").is_file()
    assert (elsewhere / "exams" / "wall_clock.json").read_text() == "[]"
    # this machine's own cell is never overwritten
    (elsewhere / "exams" / "wall_clock.json").write_text("mine")
    corpus = fixture_corpus(elsewhere / "corpus")
    assert (
        main(["reference", "--restore", "--out", str(out), "--runs", str(elsewhere / "runs"), "--data", str(corpus)])
        == 0
    )
    assert (elsewhere / "exams" / "wall_clock.json").read_text() == "mine"


def test_runs_of_a_named_corpus_restore_once_that_corpus_is_tokenized(fixture_runs, tmp_path, capsys, monkeypatch):
    runs_root, benchmarks_root = fixture_runs
    out = tmp_path / "reference"
    reference.ship(runs_root, out, benchmarks_root)
    config_path = out / "runs" / "llama" / "seed7" / "config.json"
    config = json.loads(config_path.read_text())
    # a scale-study run: its corpus is one of workflow/corpora.yaml's, with a vocabulary of its own
    config_path.write_text(json.dumps({**config, "data": {"dir": "results/corpora/poems_1m", "vocab_size": 60}}))
    monkeypatch.chdir(tmp_path)  # results/corpora/... is relative to where the workflow runs
    corpus = fixture_corpus(tmp_path / "corpus")
    restore = ["reference", "--restore", "--out", str(out), "--runs", str(tmp_path / "mine"), "--data", str(corpus)]
    assert main(restore) == 0
    said = capsys.readouterr().out
    assert "restored 13 shipped runs" in said  # all but the one
    assert "not restored: 1 runs of results/corpora/poems_1m, which is not tokenized here yet" in said
    assert "snakemake --cores 1 results/corpora/poems_1m/split.json" in said and "llama/seed7" in said
    assert not (tmp_path / "mine" / "llama" / "seed7").exists()
    fixture_corpus(tmp_path / "results" / "corpora" / "poems_1m", vocab_size=60)
    assert main(restore) == 0
    assert "restored 1 shipped runs" in capsys.readouterr().out
    assert (tmp_path / "mine" / "llama" / "seed7" / "summary.json").is_file()


# --- restoring whole runs, and leftovers ------------------------------------------------------


def restore_args(out: Path, runs: Path, corpus: Path) -> list[str]:
    return ["reference", "--restore", "--out", str(out), "--runs", str(runs), "--data", str(corpus)]


def test_a_shipped_run_missing_a_file_is_one_line_and_nothing_is_restored(fixture_runs, tmp_path, capsys):
    """The issue's repro: a shipped run without metrics.jsonl, restored twice. It gave a traceback
    after copying config.json, then "restored N" without the run, which the workflow then failed on."""
    runs_root, benchmarks_root = fixture_runs
    out = tmp_path / "reference"
    reference.ship(runs_root, out, benchmarks_root)
    missing = out / "runs" / "llama" / "seed42" / "metrics.jsonl"
    missing.unlink()
    mine = tmp_path / "mine"
    argv = restore_args(out, mine, fixture_corpus(tmp_path / "corpus"))
    for _ in range(2):
        assert main(argv) == 2
        error = capsys.readouterr().err
        assert f"{missing}: missing, so the shipped run llama/seed42 cannot be restored" in error
        assert error.count("\n") == 1
        assert not (mine / "llama" / "seed42").exists()


def test_a_file_too_big_to_be_a_runs_result_is_one_line_and_not_read(fixture_runs, tmp_path, capsys):
    """A result file past the cap of a run's small files (a sparse file: no disk used) is no file
    anatomy wrote: restoring and shipping name it in one line, without reading it."""
    runs_root, benchmarks_root = fixture_runs
    out = tmp_path / "reference"
    reference.ship(runs_root, out, benchmarks_root)
    shipped = out / "runs" / "llama" / "seed42" / "samples.json"
    os.truncate(shipped, SMALL_FILE_LIMIT + 1)
    mine = tmp_path / "mine"
    assert main(restore_args(out, mine, fixture_corpus(tmp_path / "corpus"))) == 2
    error = capsys.readouterr().err
    assert f"{shipped}: 16.0 MiB is more than a result file of a run" in error and error.count("\n") == 1, error
    assert not (mine / "llama" / "seed42").exists()

    grown = runs_root / "vanilla" / "seed42" / "exams" / "length.json"  # collect's checks do not read it
    grown.parent.mkdir(exist_ok=True)
    grown.touch()
    os.truncate(grown, SMALL_FILE_LIMIT + 1)
    assert main(["reference", "--runs", str(runs_root), "--out", str(tmp_path / "again")]) == 2
    error = capsys.readouterr().err
    assert f"{grown}: 16.0 MiB is more than a result file of a run" in error and error.count("\n") == 1, error


def test_a_restore_killed_half_way_leaves_no_half_run(fixture_runs, tmp_path, monkeypatch, capsys):
    runs_root, benchmarks_root = fixture_runs
    out = tmp_path / "reference"
    reference.ship(runs_root, out, benchmarks_root)
    mine = tmp_path / "mine"
    argv = restore_args(out, mine, fixture_corpus(tmp_path / "corpus"))
    real_copy, copies = reference.copy_small_file, []

    def killed_on_the_third_file(source, target):
        copies.append(target)
        if len(copies) == 3:
            raise KeyboardInterrupt  # as a Ctrl-C would, half way through the first run
        return real_copy(source, target)

    monkeypatch.setattr(reference, "copy_small_file", killed_on_the_third_file)
    assert main(argv) == 130  # Ctrl-C: one line and the shell's code for SIGINT, no traceback
    monkeypatch.undo()
    first = Path(copies[0]).parent.name  # the temporary folder the first run was copied into
    assert not (mine / "deep_post_nowarmup" / "seed42").exists()
    # a SIGKILL runs no cleanup: what it leaves is a hidden temporary folder, which the next restore removes
    stale = mine / "deep_post_nowarmup" / first
    stale.mkdir()
    (stale / "config.json").write_text("{}")
    assert main(argv) == 0
    assert "restored 14 shipped runs" in capsys.readouterr().out
    assert not stale.exists()
    for name in reference.RESULT_FILES:
        shipped = out / "runs" / "deep_post_nowarmup" / "seed42" / name
        assert (mine / "deep_post_nowarmup" / "seed42" / name).read_bytes() == shipped.read_bytes()


def test_a_run_an_older_restore_left_half_copied_is_completed(fixture_runs, tmp_path, capsys):
    """Older versions copied file by file and skipped any folder with a config.json: a kill left a
    run that no later restore completed. Only shipped files, byte for byte, and no checkpoint: it
    is completed; a run of this machine (a checkpoint, or numbers of its own) is never touched."""
    runs_root, benchmarks_root = fixture_runs
    out = tmp_path / "reference"
    reference.ship(runs_root, out, benchmarks_root)
    mine = tmp_path / "mine"
    half, trained, training = mine / "llama" / "seed42", mine / "llama" / "seed7", mine / "vanilla" / "seed7"
    for folder in (half, trained, training):
        folder.mkdir(parents=True)
        for name in ("config.json", "metrics.jsonl"):
            (folder / name).write_bytes((out / "runs" / folder.relative_to(mine) / name).read_bytes())
    (half / ".summary.json.x1y2.tmp").write_text("{")  # the older version's half-written file
    (trained / "last.pt").write_bytes(b"weights")  # this machine trained it: resumable
    with held_lock(training):  # a trainer is at work in it right now
        assert main(restore_args(out, mine, fixture_corpus(tmp_path / "corpus"))) == 0
    said = capsys.readouterr().out
    assert "restored 12 shipped runs" in said and "llama/seed42" in said
    assert sorted(path.name for path in half.iterdir()) == sorted(reference.RESULT_FILES)
    assert sorted(path.name for path in trained.iterdir()) == ["config.json", "last.pt", "metrics.jsonl"]
    assert sorted(path.name for path in training.iterdir()) == ["config.json", "metrics.jsonl"]


def test_shipping_removes_what_a_killed_call_left(fixture_runs, tmp_path):
    runs_root, benchmarks_root = fixture_runs
    out = tmp_path / "reference"
    reference.ship(runs_root, out, benchmarks_root)
    leftovers = [
        out / "runs" / "vanilla" / "seed42" / ".config.json.x1y2.tmp",
        out / "runs" / "vanilla" / "seed42" / ".samples.json.a9b8.tmp",
        out / ".grid.json.c3d4.tmp",
    ]
    for path in leftovers:
        path.write_text("half written")
    before = shipped_files(out)
    report = reference.ship(runs_root, out, benchmarks_root)
    assert len(report["unchanged"]) == 14
    assert not any(path.exists() for path in leftovers)
    assert shipped_files(out) == before - {path.relative_to(out).as_posix() for path in leftovers}


def test_an_exam_cell_an_older_restore_left_half_copied_is_completed(tmp_path):
    out = tmp_path / "reference"
    cell = out / "exams" / "depth" / "post_lr0.001"
    cell.mkdir(parents=True)
    for name in ("config.json", "metrics.jsonl", "summary.json"):
        (cell / name).write_text(f"{name} of the cell")
    exams = tmp_path / "exams"
    (exams / "depth" / "post_lr0.001").mkdir(parents=True)
    (exams / "depth" / "post_lr0.001" / "config.json").write_text("config.json of the cell")
    assert reference.restore_exams(out, exams) == ["depth/post_lr0.001"]
    assert (exams / "depth" / "post_lr0.001" / "summary.json").read_text() == "summary.json of the cell"
    assert reference.restore_exams(out, exams) == []  # complete: left as it is


def test_the_experiments_file_ships_so_a_studys_ablation_pairs_with_its_own_baseline(tmp_path):
    """Without it, collecting the shipped runs would leave a study's ablation with no baseline
    (collect guesses none from names): it would pair with nothing, and the stage-2 table be empty."""
    from run_folders import SCALE_SIZES, write_run_folder, write_scale_runs

    runs = tmp_path / "results" / "runs"
    write_scale_runs(runs, {"l": (1.8, 1.5)})
    data = {"vocab_size": 50, "train_tokens": SCALE_SIZES["l"], "val_tokens": 500, "corpus": "poems_l"}
    for seed in (42, 7):
        write_run_folder(
            runs,
            "scale_l_vanilla_plus_x",
            seed,
            group="scale",
            part="x",
            direction="add",
            preset="vanilla",
            floor=1.7,
            data=data,
            train={"precision": "bf16"},
        )
    experiments = {"experiments": {"scale_l_vanilla_plus_x": {"baseline": "scale_vanilla_l"}}}
    (tmp_path / "results" / "experiments.json").write_text(json.dumps(experiments), encoding="utf-8")
    assert main(["reference", "--runs", str(runs), "--out", str(tmp_path / "reference")]) == 0
    shipped = tmp_path / "reference" / "experiments.json"
    assert json.loads(shipped.read_text(encoding="utf-8")) == experiments
    pairs = collect.load_runs(tmp_path / "reference" / "runs", None).pairs
    ablation = pairs[pairs["experiment"] == "scale_l_vanilla_plus_x"]
    assert set(ablation["baseline"]) == {"scale_vanilla_l"} and len(ablation) == 2
    assert ablation["delta_best_val"].round(3).tolist() == [-0.1, -0.1]


# ---------------------------------------------------------------------------------------------
# Restoring onto the runs' own text: the same sizes are not enough where a digest was recorded


def test_restore_refuses_other_text_of_the_same_sizes_and_takes_the_same_corpus_by_any_path(tmp_path, capsys):
    from anatomy.data.tokenizer import corpus_digest, load_tokenized, tokenize_corpus
    from run_folders import write_run_folder

    text = "## a post\nThe quick brown fox jumps over the lazy dog.\n" * 12

    def tokenized(name: str, content: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        (folder / "corpus.txt").write_text(content, encoding="utf-8")
        tokenize_corpus(folder / "corpus.txt", folder, ctx_len=8)
        return folder

    ours, other = tokenized("ours", text), tokenized("other", text[::-1])  # the same characters, other text
    split = json.loads((ours / "split.json").read_text())
    sizes = {key: split[key] for key in reference.CORPUS_FACTS}
    assert sizes == {key: json.loads((other / "split.json").read_text())[key] for key in reference.CORPUS_FACTS}
    runs = tmp_path / "runs"
    write_run_folder(runs, "vanilla", 42, data={**sizes, "digest": corpus_digest(*load_tokenized(ours))})
    write_run_folder(runs, "vanilla", 7, data=sizes)  # from before digests: judged by its sizes
    reference.ship(runs, tmp_path / "reference")
    restore = ["reference", "--restore", "--out", str(tmp_path / "reference"), "--runs", str(tmp_path / "restored")]

    assert main([*restore, "--data", str(other)]) == 2
    error = capsys.readouterr().err
    assert f"{other}: its tokens' digest is " in error and "the shipped run vanilla/seed42 records " in error
    assert "the same sizes, other text" in error and error.count("\n") == 1
    assert not (tmp_path / "restored").exists()
    (tmp_path / "link").symlink_to(ours, target_is_directory=True)  # the runs' own corpus, by another path
    assert main([*restore, "--data", str(tmp_path / "link")]) == 0
    assert "restored 2 shipped runs" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------
# The shipped results as a database, in a read-only checkout too


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """`folder` and everything in it read-only for the length of the block, as a shared checkout is."""
    paths = [folder, *folder.rglob("*")]
    for path in paths:
        path.chmod(0o555 if path.is_dir() else 0o444)
    try:
        yield
    finally:
        for path in paths:
            path.chmod(0o755 if path.is_dir() else 0o644)


ROOT_WRITES_ANYWHERE = pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only folder")


def test_the_cache_folder_is_the_users_own_and_can_be_moved(tmp_path, monkeypatch):
    from anatomy.results.reference_db import cache_folder, cached_path

    monkeypatch.delenv("ANATOMY_CACHE", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_folder() == tmp_path / "home" / ".cache" / "llm-anatomy"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_folder() == tmp_path / "xdg" / "llm-anatomy"
    monkeypatch.setenv("ANATOMY_CACHE", str(tmp_path / "mine"))
    assert cached_path(tmp_path / "a" / "reference").parent == tmp_path / "mine"
    # two checkouts never share one
    assert cached_path(tmp_path / "a" / "reference") != cached_path(tmp_path / "b" / "reference")


@ROOT_WRITES_ANYWHERE
def test_a_read_only_checkout_collects_the_shipped_results_into_the_cache(fixture_runs, tmp_path, monkeypatch):
    from anatomy.results.reference_db import cached_path, reference_database

    results = tmp_path / "checkout" / "results"
    reference.ship(fixture_runs[0], results / "reference")
    monkeypatch.setenv("ANATOMY_CACHE", str(tmp_path / "cache"))
    with read_only(results):
        db = reference_database(results / "reference", results / "reference.duckdb")
        assert db == cached_path(results / "reference") and db.parent == tmp_path / "cache"
        built = db.stat().st_mtime_ns
        assert reference_database(results / "reference", results / "reference.duckdb") == db  # current: kept
        assert db.stat().st_mtime_ns == built
        with duckdb.connect(str(db), read_only=True) as con:
            assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 14
    assert not (results / "reference.duckdb").exists()
    # writable again, and a shipped file newer than the database: rebuilt where it always was
    summary = results / "reference" / "runs" / "vanilla" / "seed42" / "summary.json"
    os.utime(summary, ns=(built + 10**9, built + 10**9))
    assert reference_database(results / "reference", results / "reference.duckdb") == results / "reference.duckdb"


@ROOT_WRITES_ANYWHERE
def test_the_dashboard_on_a_read_only_checkout_still_shows_the_shipped_results(fixture_runs, tmp_path, monkeypatch):
    from streamlit.testing.v1 import AppTest

    from anatomy.results.reference_db import cached_path
    from dashboard_pages import APP, open_page
    from dashboard import loaders

    results = tmp_path / "checkout" / "results"
    reference.ship(fixture_runs[0], results / "reference")
    monkeypatch.setattr(loaders, "REFERENCE_DIR", results / "reference")
    monkeypatch.setattr(loaders, "REFERENCE_DB", results / "reference.duckdb")
    monkeypatch.setattr(loaders, "REPO_ROOT", tmp_path / "checkout")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ANATOMY_CACHE", str(tmp_path / "cache"))
    mine = tmp_path / "mine.duckdb"
    collect.collect(fixture_runs[0], mine)
    with read_only(results):
        open_page(mine, "overview", monkeypatch)  # ANATOMY_DB set: the reference band still asks for it
        monkeypatch.delenv("ANATOMY_DB")
        app = AppTest.from_file(str(APP), default_timeout=60)
        app.run()
        assert not app.exception, [e.value for e in app.exception]
        assert app.sidebar.text_input(key="db_path").value == str(cached_path(results / "reference"))
        assert app.info[0].value.startswith("**Reference results**")
        assert len(app.dataframe[0].value) == 4  # the headline runs of the shipped grid

        # and where nothing may be written, not even the cache: one line that says what to do
        monkeypatch.setenv("ANATOMY_CACHE", str(tmp_path / "nowhere" / "cache"))
        (tmp_path / "nowhere").mkdir(mode=0o555)
        app = AppTest.from_file(str(APP), default_timeout=60)
        app.run()
        assert not app.exception, [e.value for e in app.exception]
        said = app.error[0].value
        assert said.startswith("The shipped reference results cannot be shown:") and "set ANATOMY_CACHE" in said


def test_every_shipped_run_is_declared_so_the_workflow_can_train_it_again():
    """A learner remakes the shipped numbers with `snakemake`: a shipped run whose experiment or seed
    experiments.yaml does not declare would be in the report, yet never trained by the workflow."""
    import yaml

    repo = Path(__file__).resolve().parents[1]
    config_seeds = yaml.safe_load((repo / "workflow" / "config.yaml").read_text(encoding="utf-8"))["seeds"]
    experiments = yaml.safe_load((repo / "workflow" / "experiments.yaml").read_text(encoding="utf-8"))["experiments"]
    declared = set()
    for name, entry in experiments.items():  # as workflow/rules/common.smk's seeds_by_stage reads them
        stages = entry["stages"].values() if "stages" in entry else [entry.get("seeds", config_seeds)]
        declared |= {f"{name}/seed{seed}" for seeds in stages for seed in seeds}
    shipped = {f"{path.parent.name}/{path.name}" for path in (repo / "results" / "reference" / "runs").glob("*/seed*")}
    assert shipped, "no shipped runs found"
    assert sorted(shipped - declared) == []


def test_no_two_shipped_runs_are_one_training():
    """One training, one run: the studies read runs by their settings, so a run another repeats
    (the same model, training settings, text and seed; logging aside) would be counted twice.
    Collect would leave it out (anatomy/results/repeats.py): none of the shipped runs may be."""
    from anatomy.results.repeats import training_of

    repo = Path(__file__).resolve().parents[1]
    trained = {}
    for folder in sorted((repo / "results" / "reference" / "runs").glob("*/seed*")):
        experiment, key = training_of(folder)
        assert key is not None, folder
        trained.setdefault(key, []).append(f"{folder.parent.name}/{folder.name}")
    assert len(trained) > 100
    assert [runs for runs in trained.values() if len(runs) > 1] == []
