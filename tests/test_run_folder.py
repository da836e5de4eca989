"""The run folder has one owner: every file a run writes is one RunFolder names, reading a folder
needs no torch, and no module reaches into the `anatomy train` command for any of it."""

from __future__ import annotations

import ast
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from anatomy.cli import main
from anatomy.errors import AnatomyError
from anatomy.files.atomic import read_regular_file, write_text
from deep_folders import make_deep_chain, remove_deep_chain
from guarded_command import GUARD_S
from anatomy.files.run_folder import GRAD_NORMS_FILE, exam_result_path
from anatomy.files.run_folder import RunFolder

REPO = Path(__file__).resolve().parent.parent


def named_files(folder: Path) -> dict[str, Path]:
    """Every file RunFolder names for `folder` (the exams' results under their own folder)."""
    run = RunFolder(folder)
    return {
        path.name: path
        for path in (run.config, run.metrics, run.grad_norms, run.summary, run.samples, run.last, run.best)
    }


def test_every_file_of_a_generated_run_is_one_runfolder_names(tiny_runs):
    run_dir = tiny_runs["llama"]
    assert main(["generate", str(run_dir), "--chars", "10", "--out", str(RunFolder(run_dir).samples)]) == 0
    named = named_files(run_dir)
    assert len(named) == 7  # seven files, seven different names
    written = {path.name for path in run_dir.iterdir() if not path.name.startswith(".")}
    assert written == set(named), f"files no RunFolder name covers: {written - set(named)}"


def test_the_names_owned_elsewhere_are_taken_from_their_owners(tmp_path):
    run = RunFolder(tmp_path)
    assert run.grad_norms == tmp_path / GRAD_NORMS_FILE
    assert run.exam("length") == exam_result_path(tmp_path, "length")


def test_a_checkpoint_is_last_or_best(tmp_path):
    with pytest.raises(AnatomyError, match="checkpoint 'middle' is not valid: expected 'last' or 'best'"):
        RunFolder(tmp_path).checkpoint_file("middle")
    with pytest.raises(AnatomyError, match="last.pt: no such checkpoint"):
        RunFolder(tmp_path).checkpoint("last")


def test_a_model_is_read_from_the_checkpoint_else_from_the_shipped_weights(tmp_path):
    """One rule picks the file a run's model is read from: generate, export, the length exam and
    the Listen page all ask RunFolder.model_file."""
    run = RunFolder(tmp_path)
    assert run.model_file("best") is None  # neither: nothing to read
    run.weights_file("best").write_bytes(b"")
    assert run.weights_file("best") == tmp_path / "best.safetensors"
    assert run.model_file("best") == run.weights_file("best")  # a shipped reference run
    run.checkpoint_file("best").write_bytes(b"")
    assert run.model_file("best") == run.checkpoint_file("best")  # a trained run: its checkpoint
    assert run.model_file("last") is None
    with pytest.raises(AnatomyError, match="checkpoint 'middle' is not valid"):
        run.model_file("middle")


def test_reading_run_folders_needs_no_torch():
    """collect and the dashboard read run folders; only checkpoints load torch, when they are read."""
    code = "import sys, anatomy.files.run_folder, anatomy.results.collect; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_only_the_cli_reaches_the_train_command_module():
    """anatomy/training/train.py is the `anatomy train` command; what it uses lives in modules of its own."""
    importers = []
    for path in sorted((REPO / "anatomy").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            names = {alias.name for alias in node.names}
            if node.module == "anatomy.training.train" or (node.module == "anatomy" and "train" in names):
                importers.append(path.relative_to(REPO).as_posix())
    assert importers == []


def test_only_a_full_disk_is_turned_into_one_line(tmp_path):
    """Other write failures (no permission, torch's other errors) keep their own message."""
    import errno

    from anatomy.files.run_folder import naming_a_full_disk

    target = tmp_path / "last.pt"
    with pytest.raises(AnatomyError, match=r"last\.pt: cannot write: no space left on device \(disk quota exceeded\)"):
        with naming_a_full_disk(target):
            raise OSError(errno.EDQUOT, "Disk quota exceeded")
    with pytest.raises(AnatomyError, match=r"last\.pt: cannot write: torch\.save failed, most likely no space left"):
        with naming_a_full_disk(target):
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")
    with pytest.raises(PermissionError):
        with naming_a_full_disk(target):
            raise PermissionError(errno.EACCES, "Permission denied")
    with pytest.raises(RuntimeError, match="size mismatch"):
        with naming_a_full_disk(target):
            raise RuntimeError("size mismatch for lm_head.weight")


# --- a full disk in every writer of anatomy/files/atomic.py (issue #28, item 5) -------------------------


def test_the_full_disk_helper_lives_with_the_writes():
    """Moved to anatomy/files/atomic.py, the owner of writes; train and generate import it from runs."""
    from anatomy.files import atomic
    from anatomy.files import run_folder

    assert run_folder.naming_a_full_disk is atomic.naming_a_full_disk


def no_space(*args, **kwargs):
    import errno
    import os

    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@pytest.mark.parametrize("writer", ["write_text", "write_bytes", "write_json", "atomic_path", "atomic_folder"])
def test_every_atomic_writer_names_a_full_disk(tmp_path, monkeypatch, writer):
    """Report, reference, export and collect write through these: each gets the one line for free
    (report's figures are saved into an atomic_path by vl-convert, for one)."""
    from anatomy.files import atomic

    target = tmp_path / "out" / "report.md"
    target.parent.mkdir()
    target.write_text("the old report")
    monkeypatch.setattr(Path, "write_text", no_space)
    monkeypatch.setattr(Path, "write_bytes", no_space)
    with pytest.raises(AnatomyError) as raised:
        if writer == "write_text":
            atomic.write_text(target, "new")
        elif writer == "write_bytes":
            atomic.write_bytes(target, b"new")
        elif writer == "write_json":
            atomic.write_json(target, {"new": 1})
        elif writer == "atomic_path":
            with atomic.atomic_path(target) as tmp:
                tmp.write_bytes(b"a png")  # as a chart's save fills it
        else:
            target = tmp_path / "out" / "shipped"
            with atomic.atomic_folder(target) as folder:
                (folder / "summary.json").write_text("{}")
    said = str(raised.value)
    assert said == f"{target}: cannot write: no space left on device; free some space and run the command again"
    monkeypatch.undo()
    assert (tmp_path / "out" / "report.md").read_text() == "the old report"  # the old file is whole
    assert not list((tmp_path / "out").glob(".*.tmp"))  # and no temporary is left


def test_a_full_disk_making_a_folder_to_write_into_is_one_line(tmp_path, monkeypatch):
    from anatomy.files import atomic

    monkeypatch.setattr(Path, "mkdir", no_space)
    with pytest.raises(AnatomyError, match=r"report: cannot write: no space left on device"):
        with atomic.writing_into(tmp_path / "report"):
            pass


def test_duckdb_full_disk_is_recognised_by_its_words_and_nested_writes_keep_their_name(tmp_path):
    """DuckDB loses the errno: its IOException or FatalException says it in the system's words."""
    import duckdb

    from anatomy.files.atomic import naming_a_full_disk

    db = tmp_path / "anatomy.duckdb"
    with pytest.raises(AnatomyError, match=r"anatomy\.duckdb: cannot write: no space left on device;"):
        with naming_a_full_disk(db):
            raise duckdb.FatalException('Could not write file ".anatomy.duckdb.x.tmp": No space left on device')
    with pytest.raises(AnatomyError, match=r"\(disk quota exceeded\)"):
        with naming_a_full_disk(db):
            raise duckdb.IOException('Could not write file "x": Disk quota exceeded')
    with pytest.raises(duckdb.IOException, match="Permission denied"):  # not a full disk: its own words
        with naming_a_full_disk(db):
            raise duckdb.IOException('Cannot open file "x": Permission denied')
    # the innermost writer names its file (results.json written while collecting the database)
    with pytest.raises(AnatomyError, match=r"^.*results\.json: cannot write"):
        with naming_a_full_disk(db), naming_a_full_disk(tmp_path / "results.json"):
            no_space()


# ---------------------------------------------------------------------------------------------
# Reading only regular files; writing through links, never over what is not a regular file


def test_a_named_pipe_swapped_in_after_the_look_is_caught_when_opened(tmp_path, monkeypatch):
    """The path is looked at, then opened: a pipe put there in between must not make the open
    wait for a writer (O_NONBLOCK), and is refused by the look at the opened file."""
    pipe = tmp_path / "metrics.jsonl"
    os.mkfifo(pipe)
    real_stat = os.stat
    looks_regular = os.stat_result((stat.S_IFREG | 0o644, *real_stat(pipe)[1:]))
    monkeypatch.setattr(
        os, "stat", lambda path, *args, **kwargs: looks_regular if Path(path) == pipe else real_stat(path)
    )
    said = []

    def read():
        try:
            read_regular_file(pipe, 1024, "the metrics anatomy train logs")
        except AnatomyError as err:
            said.append(str(err))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    reader.join(GUARD_S)
    if reader.is_alive():
        os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))  # free it, then fail
        pytest.fail("opening the named pipe waited for a writer")
    assert said == [f"{pipe}: is not a regular file (a named pipe): expected the metrics anatomy train logs"]


def test_a_write_goes_through_a_link_and_never_over_a_special_file(tmp_path):
    real = tmp_path / "elsewhere" / "results.json"
    write_text(real, "old")
    link = tmp_path / "results.json"
    link.symlink_to(real)
    write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"
    assert sorted(path.name for path in real.parent.iterdir()) == ["results.json"]  # no temporaries left
    pipe = tmp_path / "pipe.json"
    os.mkfifo(pipe)
    with pytest.raises(AnatomyError, match="is not a regular file \\(a named pipe\\); expected the path of a file"):
        write_text(pipe, "new")
    assert stat.S_ISFIFO(os.lstat(pipe).st_mode)


def test_the_same_corpus_given_by_another_path_is_the_same_run(tmp_path):
    """`--data ./results/corpus`, an absolute path or a link to it: the same tokens (digest and
    sizes), so the run in the folder is resumed, not refused as one with "different settings"."""
    from anatomy.files.run_folder import settle_folder

    data = {"dir": "results/corpus", "corpus": "data/posts", "digest": "a" * 64, "vocab_size": 50}
    resolved = {"preset": "debug", "model": {"n_layer": 2}, "train": {"seed": 42}, "tags": {}, "data": data}
    run = RunFolder(tmp_path / "run")
    run.root.mkdir()
    run.write_config(resolved)
    elsewhere = {"dir": "/srv/course/results/corpus", "corpus": "/srv/course/data/posts"}
    assert settle_folder(run, {**resolved, "data": {**data, **elsewhere}}, restart_on_change=False) is None
    with pytest.raises(AnatomyError, match=r"different settings \(data\.digest: 'a{64}' in the folder, 'b{64}'"):
        settle_folder(run, {**resolved, "data": {**data, **elsewhere, "digest": "b" * 64}}, restart_on_change=False)


# --- every small file of a run is read through the cap (issue #37, item 4) ---------------------------


def readers_of_a_run(folder: Path) -> dict[str, object]:
    """Each reader of a run folder's small files, by the file it reads, as a call on `folder`."""
    from anatomy.files.run_folder import read_json_file, read_metrics, read_run_config, read_summary
    from anatomy.generation.memorisation import data_dir_of
    from anatomy.training.grad_norms import read_grad_norms

    return {
        "metrics.jsonl": lambda: read_metrics(folder / "metrics.jsonl", "run", finished=True),
        "grad_norms.jsonl": lambda: read_grad_norms(folder / "grad_norms.jsonl", "run"),
        "summary.json": lambda: read_summary(folder / "summary.json"),
        "config.json": lambda: read_run_config(folder / "config.json"),
        "samples.json": lambda: read_json_file(folder / "samples.json"),  # collect's reader of it
        "config.json (memorised)": lambda: data_dir_of(folder),
        "samples.json (memorised)": lambda: main(["memorised", str(folder), "--data", str(folder)]),
    }


@pytest.mark.parametrize("reader", list(readers_of_a_run(Path("."))))
def test_a_run_file_past_the_cap_is_refused_unread_by_every_reader(tmp_path, reader, capsys):
    """A sparse file of a run folder cost collect gigabytes, and the Progress page reread it at
    every refresh: every reader refuses it in one line naming the file and its size, unread."""
    from anatomy.files.run_folder import SMALL_FILE_LIMIT

    name = reader.split()[0]
    with open(tmp_path / name, "wb") as sparse:  # no disk space: a hole of 20 MiB
        sparse.truncate(20 * 1024**2)
    assert 20 * 1024**2 > SMALL_FILE_LIMIT
    read = readers_of_a_run(tmp_path)[reader]
    if reader.startswith("samples.json (memorised)"):
        assert read() == 2
        message = capsys.readouterr().err.removeprefix("error: ").rstrip("\n")
    else:
        with pytest.raises(AnatomyError) as refused:
            read()
        message = str(refused.value)
    assert message.startswith(f"{tmp_path / name}: 20.0 MiB is more than ")
    assert "(16.0 MiB at most), so it is not read" in message and "\n" not in message


def test_the_cap_is_well_above_every_small_file_a_shipped_run_has():
    from anatomy.files.run_folder import SMALL_FILE_LIMIT

    shipped = [path for path in (REPO / "results" / "reference" / "runs").rglob("*.json*") if path.is_file()]
    assert shipped, "the shipped reference runs are part of the repository"
    assert SMALL_FILE_LIMIT >= 10 * max(path.stat().st_size for path in shipped)


# --- finding the runs under a folder ----------------------------------------------------------------


@pytest.mark.slow  # seconds: CI runs it, the inner loop leaves it out
def test_runs_nested_deeper_than_a_recursive_walk_goes_are_found_and_links_that_loop_are_passed(tmp_path):
    """os.walk (Python 3.11) recurses once per level: 1,100 nested folders under a runs folder
    ended collect, reference and the Progress page in a RecursionError. A link back up, or to
    itself, is passed over, and a run folder reached twice is found once."""
    from anatomy.files.run_folder import find_run_folders

    runs, depth = tmp_path / "runs", 1100
    write_text(runs / "vanilla" / "seed42" / "config.json", "{}")
    (runs / "vanilla" / "seed42" / "up").symlink_to("../..")  # back to runs/: looked in once
    (runs / "itself").symlink_to("itself")  # a link that loops on itself
    make_deep_chain(runs, depth, {depth: {"summary.json": "{}"}}, folder_name="a")
    try:
        found = find_run_folders(runs)
    finally:
        remove_deep_chain(runs, depth, folder_name="a")
    assert found == [runs.joinpath(*["a"] * depth), runs / "vanilla" / "seed42"]
