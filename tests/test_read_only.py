"""A read-only checkout (issue 37, item 5): the shipped results still show, and every write that
cannot be made says in one line what to do.

tests/test_reference.py and tests/test_collect.py test this with chmod, which does not stop root:
there they are skipped, and root is who runs the tests in a container or on CI. So here the folder
is made read-only as a read-only file system is (a mount, a container's image): every write the
Python side makes under it fails with EROFS, as the kernel's would, whoever runs the tests.
"""

from __future__ import annotations

import builtins
import errno
import io
import os
from pathlib import Path

import duckdb
import pytest

from anatomy.cli import main
from anatomy.errors import AnatomyError
from anatomy.results import collect, reference
from anatomy.results.reference_db import cached_path, reference_database

# The flags of an open that writes
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_TRUNC | os.O_APPEND
# The calls of os that change a folder's contents or a file's metadata, by a path
CHANGING = ("mkdir", "rmdir", "unlink", "remove", "rename", "replace", "utime", "chmod", "symlink", "link")


def read_only_file_system(monkeypatch, *folders: Path) -> None:
    """Every write under `folders` fails with EROFS (Read-only file system), as on a read-only
    mount, for root too; os.access says they may not be written. DuckDB's own writes are C++,
    not Python's: a database written there anyway is found by the tests, not stopped."""
    folders = tuple(Path(os.path.abspath(folder)) for folder in folders)

    def inside(path) -> bool:
        if isinstance(path, int):
            return False  # a descriptor: opened before, where it was allowed
        path = Path(os.path.abspath(os.fsdecode(path)))
        return any(path == folder or folder in path.parents for folder in folders)

    def refuse(path) -> None:
        raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fsdecode(path))

    real_open = os.open

    def checked_open(path, flags, mode=0o777, *, dir_fd=None):
        if dir_fd is None and inside(path):
            writes = flags & WRITE_FLAGS
            # O_CREAT alone opens a file that is there (to lock it, say), as the kernel lets it
            makes = flags & os.O_CREAT and (flags & os.O_EXCL or not os.path.exists(path))
            if writes or makes:
                refuse(path)
        return real_open(path, flags, mode, dir_fd=dir_fd)

    monkeypatch.setattr(os, "open", checked_open)
    for name in CHANGING:
        real = getattr(os, name)

        def changing(*args, _real=real, _name=name, **kwargs):
            paths = args[:2] if _name in ("rename", "replace", "symlink", "link") else args[:1]
            if kwargs.get("dir_fd") is None and any(inside(path) for path in paths):
                if _name == "mkdir" and os.path.isdir(args[0]):
                    raise FileExistsError(errno.EEXIST, os.strerror(errno.EEXIST), os.fsdecode(args[0]))
                if _name != "mkdir" and not os.path.lexists(paths[0]):  # nothing to change: as unlink(missing_ok)
                    raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), os.fsdecode(paths[0]))
                refuse(paths[-1] if _name in ("symlink", "link") else paths[0])
            return _real(*args, **kwargs)

        monkeypatch.setattr(os, name, changing)
    real_access = os.access
    monkeypatch.setattr(
        os,
        "access",
        lambda path, mode, **kw: False if mode & os.W_OK and inside(path) else real_access(path, mode, **kw),
    )
    real_io_open = io.open

    def checked_io_open(file, mode="r", *args, **kwargs):
        if not isinstance(file, int) and set(mode) & set("wax+") and inside(file):
            refuse(file)
        return real_io_open(file, mode, *args, **kwargs)

    monkeypatch.setattr(io, "open", checked_io_open)
    monkeypatch.setattr(builtins, "open", checked_io_open)


@pytest.fixture
def checkout(fixture_runs, tmp_path, monkeypatch) -> Path:
    """results/ of a checkout whose shipped results are the fixture grid's; the cache in tmp_path."""
    results = tmp_path / "checkout" / "results"
    reference.ship(fixture_runs[0], results / "reference")
    monkeypatch.setenv("ANATOMY_CACHE", str(tmp_path / "cache"))
    return results


def test_the_simulated_read_only_folder_refuses_every_write_even_roots(tmp_path, monkeypatch):
    """The tests below would pass vacuously if it did not: root may write through chmod."""
    (tmp_path / "ro").mkdir()
    (tmp_path / "ro" / "kept.txt").write_text("kept")
    read_only_file_system(monkeypatch, tmp_path / "ro")
    for write in (
        lambda: (tmp_path / "ro" / "new.txt").write_text("x"),
        lambda: (tmp_path / "ro" / "kept.txt").write_text("x"),
        lambda: (tmp_path / "ro" / "sub").mkdir(),
        lambda: os.close(os.open(tmp_path / "ro" / ".lock", os.O_RDONLY | os.O_CREAT)),
        lambda: (tmp_path / "ro" / "kept.txt").unlink(),
    ):
        with pytest.raises(OSError) as err:
            write()
        assert err.value.errno == errno.EROFS
    assert (tmp_path / "ro" / "kept.txt").read_text() == "kept"
    (tmp_path / "ro").mkdir(exist_ok=True)  # an existing folder is still one
    assert not os.access(tmp_path / "ro", os.W_OK) and os.access(tmp_path, os.W_OK)


def test_a_read_only_checkout_builds_the_reference_database_in_the_cache(checkout, tmp_path, monkeypatch):
    """Every page showed `OSError: [Errno 30] ... results/.reference.duckdb.lock`."""
    read_only_file_system(monkeypatch, checkout)
    db = reference_database(checkout / "reference", checkout / "reference.duckdb")
    assert db == cached_path(checkout / "reference") and db.parent == tmp_path / "cache"
    with duckdb.connect(str(db), read_only=True) as con:
        assert con.execute("SELECT count(*) FROM runs").fetchone()[0] == 14
    assert sorted(path.name for path in checkout.iterdir()) == ["reference"]  # no database, no lock
    assert reference_database(checkout / "reference", checkout / "reference.duckdb") == db  # current: kept


def test_where_not_even_the_cache_may_be_written_one_line_says_what_to_do(checkout, tmp_path, monkeypatch):
    read_only_file_system(monkeypatch, checkout, tmp_path / "cache")
    with pytest.raises(AnatomyError) as err:
        reference_database(checkout / "reference", checkout / "reference.duckdb")
    assert str(err.value) == (
        f"{checkout / 'reference'}: the shipped results cannot be collected into a database: neither {checkout} "
        f"nor the cache folder {tmp_path / 'cache'} may be written; set ANATOMY_CACHE to a folder you may write to"
    )


def test_the_dashboard_on_your_database_in_a_read_only_checkout_shows_it(checkout, fixture_runs, tmp_path, monkeypatch):
    """With ANATOMY_DB set, the reference band still asks for the shipped results' database."""
    from dashboard_pages import open_page
    from dashboard import loaders

    monkeypatch.setattr(loaders, "REFERENCE_DIR", checkout / "reference")
    monkeypatch.setattr(loaders, "REFERENCE_DB", checkout / "reference.duckdb")
    monkeypatch.setattr(loaders, "REPO_ROOT", checkout.parent)
    monkeypatch.chdir(tmp_path)
    mine = tmp_path / "mine.duckdb"
    collect.collect(fixture_runs[0], mine)
    read_only_file_system(monkeypatch, checkout)
    app = open_page(mine, "overview", monkeypatch)  # no exception on the page
    assert not app.error, [e.value for e in app.error]
    assert sorted(path.name for path in checkout.iterdir()) == ["reference"]


@pytest.mark.parametrize("command", ["collect", "corpus"])
def test_a_writing_command_in_a_read_only_folder_is_one_line(
    command, checkout, fixture_runs, tmp_path, monkeypatch, capsys
):
    (tmp_path / "posts").mkdir()
    (tmp_path / "posts" / "post.md").write_text("学而时习之，不亦说乎。\n", encoding="utf-8")
    read_only_file_system(monkeypatch, checkout)
    argv = {
        "collect": ["collect", "--runs", str(fixture_runs[0]), "--db", str(checkout / "anatomy.duckdb")],
        "corpus": ["corpus", str(tmp_path / "posts"), "--out", str(checkout / "corpus")],
    }[command]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err  # one line, no traceback
    assert "Read-only file system" in err and str(checkout) in err
    assert sorted(path.name for path in checkout.iterdir()) == ["reference"]
