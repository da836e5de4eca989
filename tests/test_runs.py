"""The run folder has one owner: every file a run writes is one RunFolder names, reading a folder
needs no torch, and no module reaches into the `anatomy train` command for any of it."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from anatomy.cli import main
from anatomy.errors import AnatomyError
from anatomy.exams import exam_result_path
from anatomy.grad_norms import GRAD_NORMS_FILE
from anatomy.runs import RunFolder

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


def test_reading_run_folders_needs_no_torch():
    """collect and the dashboard read run folders; only checkpoints load torch, when they are read."""
    code = "import sys, anatomy.runs, anatomy.results; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"


def test_only_the_cli_reaches_the_train_command_module():
    """anatomy/train.py is the `anatomy train` command; what it uses lives in modules of its own."""
    importers = []
    for path in sorted((REPO / "anatomy").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.ImportFrom):
                continue
            names = {alias.name for alias in node.names}
            if node.module == "anatomy.train" or (node.module == "anatomy" and "train" in names):
                importers.append(path.relative_to(REPO).as_posix())
    assert importers == []


def test_only_a_full_disk_is_turned_into_one_line(tmp_path):
    """Other write failures (no permission, torch's other errors) keep their own message."""
    import errno

    from anatomy.runs import naming_a_full_disk

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
