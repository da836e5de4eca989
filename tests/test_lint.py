"""The code passes ruff's checks (configured in pyproject.toml): no unused imports or names,
no undefined names, no syntax a newer Python would reject. And it is formatted: the Python files
as `ruff format` writes them, the workflow as `snakefmt` does, so a diff shows only real changes.

The tools run from this interpreter's environment (`python -m ...`): the test extra installs them,
so a missing one fails here rather than skipping a check CI is meant to make.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def run_tool(*arguments: str) -> subprocess.CompletedProcess:
    """Run `python -m TOOL ARGUMENTS` in the repository root, as the fixing command would be run."""
    return subprocess.run([sys.executable, "-m", *arguments], capture_output=True, text=True, cwd=REPO)


def failure(result: subprocess.CompletedProcess, fix: str) -> str:
    return f"{result.stdout}{result.stderr}\nTo fix, run from the repository root: {fix}"


def test_ruff_finds_nothing():
    result = run_tool("ruff", "check", "--no-cache", str(REPO))
    assert result.returncode == 0, failure(result, "ruff check . (and ruff check --fix . for what it can fix)")


def test_python_files_are_ruff_formatted():
    result = run_tool("ruff", "format", "--check", "--no-cache", str(REPO))
    assert result.returncode == 0, failure(result, "ruff format .")


def test_workflow_is_snakefmt_formatted():
    # snakefmt reads its settings (line length 120) from pyproject.toml in the repository root;
    # --compact-diff shows the lines it would change, not only how many files
    result = run_tool("snakefmt", "--check", "--compact-diff", "workflow")
    assert result.returncode == 0, failure(result, "snakefmt workflow/")
