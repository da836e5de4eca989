"""anatomy.files.atomic's writes: a writer stopped in any way leaves no temporary file for long
(issue #37, item 9). An exception of any kind, Ctrl-C and sys.exit too, removes it at once; a
SIGKILL cannot, so the next write of the same target removes it, and never a writer's at work."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anatomy.files.atomic import atomic_path, remove_abandoned_temporaries, write_json
from guarded_command import GUARD_S, MEMORY_CAP, cap_memory

# A writer of `target` that stops half-way through its temporary file and waits to be killed
HALF_WRITTEN = """
import sys
from anatomy.files.atomic import atomic_path

with atomic_path(sys.argv[1]) as tmp:
    tmp.write_text("half written")
    print(tmp.name, flush=True)
    sys.stdin.read()  # until killed
"""


def temporaries(folder: Path) -> list[str]:
    return sorted(path.name for path in folder.glob(".*.tmp"))


@pytest.mark.parametrize("stop", [KeyboardInterrupt, SystemExit, OSError])
def test_a_writer_stopped_by_any_exception_removes_its_temporary(tmp_path, stop):
    target = tmp_path / "samples.json"
    with pytest.raises(stop):
        with atomic_path(target) as tmp:
            tmp.write_text("half written")
            raise stop
    assert temporaries(tmp_path) == [] and not target.exists()


def test_a_temporary_left_by_a_kill_is_removed_by_the_next_write_of_its_target(tmp_path):
    target = tmp_path / "samples.json"
    writer = subprocess.Popen(
        [sys.executable, "-c", HALF_WRITTEN, str(target)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        left = writer.stdout.readline().strip()
        # while its writer is at work, another write of the same target leaves it alone
        write_json(target, {"first": 1})
        assert temporaries(tmp_path) == [left]
    finally:
        writer.kill()  # SIGKILL: no cleanup code runs
        writer.communicate()
    assert temporaries(tmp_path) == [left]
    write_json(target, {"second": 2})
    assert temporaries(tmp_path) == []
    assert json.loads(target.read_text()) == {"second": 2}


def test_only_the_targets_own_abandoned_temporaries_are_removed(tmp_path):
    """One of an older version (no lock on it) goes; another file's temporaries stay."""
    (tmp_path / ".samples.json.k1ll3d.tmp").write_text("half written")
    (tmp_path / ".metrics.jsonl.k1ll3d.tmp").write_text("another file's")
    (tmp_path / ".samples.json.notatemp").write_text("not a temporary")
    removed = remove_abandoned_temporaries(tmp_path / "samples.json")
    assert [path.name for path in removed] == [".samples.json.k1ll3d.tmp"]
    assert temporaries(tmp_path) == [".metrics.jsonl.k1ll3d.tmp"]
    assert (tmp_path / ".samples.json.notatemp").exists()


# Writes `{}` to each target named, if it does not hold it already: what it did, or its one line
WRITE_IF_CHANGED = """
import sys
from anatomy.errors import AnatomyError
from anatomy.files.atomic import write_bytes_if_changed

for target in sys.argv[1:]:
    try:
        print(write_bytes_if_changed(target, b"{}"))
    except AnatomyError as err:
        print(err)
"""


def test_a_file_is_read_to_compare_only_when_its_size_matches_and_only_if_regular(tmp_path):
    """write_bytes_if_changed read the file there whole to compare: a 2 GiB sparse stats.json in
    `corpus --out` ended in a MemoryError. Under a cap on memory, a file bigger than the cap is
    replaced unread; a named pipe is never opened (it would wait for a writer): not a file that
    holds the bytes, so the write refuses it in one line. In a process of its own, with a time limit."""
    sparse, pipe = tmp_path / "stats.json", tmp_path / "pipe.json"
    with open(sparse, "wb") as hole:  # no disk space: a hole
        hole.truncate(MEMORY_CAP + 1024**3)
    os.mkfifo(pipe)
    done = subprocess.run(
        [sys.executable, "-c", WRITE_IF_CHANGED, str(sparse), str(sparse), str(pipe)],
        capture_output=True,
        text=True,
        timeout=GUARD_S,
        preexec_fn=cap_memory,
    )
    assert done.stdout.splitlines() == [
        "True",
        "False",  # the same size: read, and found to hold the bytes already
        f"{pipe}: is not a regular file (a named pipe); expected the path of a file to write",
    ], done.stderr[-2000:]
    assert sparse.read_bytes() == b"{}"
