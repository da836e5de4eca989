"""Atomic file writes: write to a temporary file beside the target, then rename.

A reader (or a rerun after a crash) sees either the old file or the whole new one,
never half of it. Every file this project writes goes through here. Files that only make
sense together (a restored run) go in as one folder: `atomic_folder`; files that sit among others
(a tokenized corpus beside its text) go in as a set, the file that marks the set whole last
(`atomic_paths`). A writer stopped by an exception of any kind (Ctrl-C too) removes its temporary
file. One killed with SIGKILL cannot: the next write of the same target removes it. A writer holds
a lock on its temporary file (`flock`, released by the kernel however the writer ends), so a
temporary nobody holds is a dead writer's (`remove_abandoned_temporaries`); and a writer holding
the lock every writer of the target holds removes them all (`remove_stale_temporaries`).

A write that finds the disk full is one line naming the file, not a traceback
(`naming_a_full_disk`): every writer here says it, so each command that writes through them does.
A folder the user may not write is one line that says what to do too (`not_writable_advice`).

A write replaces only a regular file, and writes through a symbolic link to the file it names
(`check_file_target`, `file_behind`). Reading goes through here too: `opened_regular_file` opens
only a regular file, and `read_regular_file` reads only so much of it, so that a named pipe or a
device put where a file was expected is one line, not a command that waits for good or fills the
memory.
"""

from __future__ import annotations

import errno
import fcntl
import glob
import json
import os
import re
import shutil
import stat
import tempfile
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from anatomy.errors import AnatomyError
from anatomy.files.locks import held_lock


# ---------------------------------------------------------------------------------------------
# A full disk: one line naming the file, not a traceback
# ---------------------------------------------------------------------------------------------

# The errors a write gets when the disk (or the user's quota) is full
DISK_FULL = {errno.ENOSPC: "no space left on device"}
if hasattr(errno, "EDQUOT"):  # not on every platform
    DISK_FULL[errno.EDQUOT] = "no space left on device (disk quota exceeded)"
# DuckDB writes through C++ and loses the errno: a full disk is an IOException or FatalException
# whose text holds the system's words (strerror), so they are matched as text
DISK_FULL_WORDS = {
    "No space left on device": DISK_FULL[errno.ENOSPC],
    "Disk quota exceeded": "no space left on device (disk quota exceeded)",
}
# torch.save loses it too: a failed write surfaces as a RuntimeError whose text has one of these
# (what a full disk gave, by torch version)
TORCH_WRITE_FAILED = (
    "PytorchStreamWriter failed writing file",
    "file write failed",
    "unexpected pos",
    "iostream error",
)
# numpy's np.save (ndarray.tofile) loses it too: a short write is an OSError with no errno whose
# text is "17961 requested and 12224 written"
NUMPY_SHORT_WRITE = re.compile(r"\b\d+ requested and \d+ written\b")
FULL_DISK_ADVICE = "free some space and run the command again"

# A folder this user may not write (a read-only checkout, a shared course folder): the errors a
# write gets there, and what to do. Every command that meets one says the same (anatomy/cli.py for
# all of them, corpus.py for its --out), so the advice is spelled here once.
NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


def not_writable_advice(output: str = "its output (--out, --db, --json)") -> str:
    """What to do where a command may not write; `output`: the option(s) that choose where it writes."""
    return f"run the command in a copy of the project you may write to, or point {output} at a folder you may write to"


def readable_bytes(n: float) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if abs(n) < 1024:
            return f"{n:.0f} {unit}" if unit == "bytes" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def free_space(path: Path) -> str:
    """How much room is left on the disk that holds `path` (its nearest existing folder)."""
    folder = next((p for p in (path, *path.parents) if p.is_dir()), Path("."))
    try:
        return readable_bytes(shutil.disk_usage(folder).free)
    except OSError:
        return "unknown space"


def full_disk_cause(err: Exception, path: Path) -> str | None:
    """What `err` says of a full disk, in words; None for any other failure (it keeps its own message)."""
    text = str(err)
    if isinstance(err, OSError) and err.errno is None and NUMPY_SHORT_WRITE.search(text):
        return f"the file was cut short, most likely no space left on device ({free_space(path)} free there)"
    if isinstance(err, OSError):
        return DISK_FULL.get(err.errno)
    for words, cause in DISK_FULL_WORDS.items():
        if words in text:
            return cause
    if isinstance(err, RuntimeError) and any(marker in text for marker in TORCH_WRITE_FAILED):
        return f"torch.save failed, most likely no space left on device ({free_space(path)} free there)"
    return None


@contextmanager
def naming_a_full_disk(path: str | os.PathLike) -> Iterator[None]:
    """Turn a write that failed for want of space into one line naming the file. Writes are atomic,
    so the file's previous version is still whole: nothing is lost."""
    path = Path(path)
    try:
        yield
    except AnatomyError:
        raise  # already in words (a write nested in this one named its own file)
    except Exception as err:
        cause = full_disk_cause(err, path)
        if cause is None:
            raise
        # given a folder (a whole run, an export), name the file in it that the OS named, if it named one
        named = isinstance(err, OSError) and err.filename and path.is_dir()
        where = err.filename if named else path
        raise AnatomyError(f"{where}: cannot write: {cause}; {FULL_DISK_ADVICE}") from None


# ---------------------------------------------------------------------------------------------
# Only regular files: a named pipe waits for a writer, a device never ends
# ---------------------------------------------------------------------------------------------

# What a path that is not a regular file is, in words
FILE_KINDS = {
    stat.S_ISDIR: "a folder",
    stat.S_ISFIFO: "a named pipe",
    stat.S_ISCHR: "a character device",
    stat.S_ISBLK: "a block device",
    stat.S_ISSOCK: "a socket",
}
# What a write says to a file it will not replace
NOT_REPLACED = "it is left as it is: give another path, or move that file away"


def folder_entries(folder: Path) -> tuple[list[str], list[str]]:
    """(names of the folders in `folder`, names of everything else), as os.walk divides them: a
    link to a folder is a folder (named, not followed), anything else (a file, a link to nothing, a
    pipe) is not. The walks that keep their own list of folders (no recursion) read a folder with it."""
    subfolders, others = [], []
    with os.scandir(folder) as entries:
        for entry in entries:
            try:
                is_folder = entry.is_dir()
            except OSError:
                is_folder = False
            (subfolders if is_folder else others).append(entry.name)
    return subfolders, others


def file_kind(mode: int) -> str:
    """What a file of this mode (os.stat's st_mode) is, in words."""
    if stat.S_ISREG(mode):
        return "a regular file"
    return next((name for is_kind, name in FILE_KINDS.items() if is_kind(mode)), "a special file")


def not_regular(path: Path, mode: int, what: str) -> AnatomyError | None:
    """The one line for a path that is not a regular file (None: it is one)."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return AnatomyError(f"{path}: is a folder, expected {what}")
    return AnatomyError(f"{path}: is not a regular file ({file_kind(mode)}): expected {what}")


@contextmanager
def opened_regular_file(path: str | os.PathLike, what: str = "a file") -> Iterator[BinaryIO]:
    """The regular file at `path` (a link is followed), open to read; else one line (AnatomyError)
    saying what is there instead; `what`: what the file should be.

    Opening a named pipe waits for a writer, and reading one waits for its data, both for good; a
    device such as /dev/zero never ends. So the path is looked at before it is opened, and the
    opened file again, since another may have taken its place in between (O_NONBLOCK lets even a
    pipe open at once, so that this second look is reached)."""
    path = Path(path)
    try:
        if (problem := not_regular(path, os.stat(path).st_mode, what)) is not None:
            raise problem
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY)
    except FileNotFoundError:
        raise AnatomyError(f"{path}: no such file") from None
    except OSError as err:
        raise AnatomyError(f"{path}: cannot read: {err.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        if (problem := not_regular(path, os.fstat(fd).st_mode, what)) is not None:
            raise problem
        yield handle


def read_regular_file(path: str | os.PathLike, limit: int, what: str = "a file") -> bytes:
    """The bytes of the regular file at `path` (`opened_regular_file`), if it holds at most `limit`;
    else one line saying it is more than `what` should hold, so that no file fills the memory."""
    with opened_regular_file(path, what) as handle:
        size = os.fstat(handle.fileno()).st_size
        data = handle.read(limit + 1) if size <= limit else b""
    size = max(size, len(data))  # a file still growing is stopped at the limit too
    if size > limit:
        raise AnatomyError(
            f"{path}: {readable_bytes(size)} is more than {what} should hold ({readable_bytes(limit)} at most), "
            "so it is not read"
        )
    return data


# ---------------------------------------------------------------------------------------------
# Atomic writes
# ---------------------------------------------------------------------------------------------


@contextmanager
def atomic_path(target: str | os.PathLike) -> Iterator[Path]:
    """Yield a temporary path in the target's folder; rename it onto `target` on success.
    Whatever fills the temporary file, a full disk is named as `target`'s."""
    target = Path(target)
    check_file_target(target)
    with naming_a_full_disk(target), _atomic_path(file_behind(target)) as tmp:
        yield tmp


@contextmanager
def _atomic_path(target: Path) -> Iterator[Path]:
    target.parent.mkdir(parents=True, exist_ok=True)
    remove_abandoned_temporaries(target)
    fd, tmp_path = _held_temporary(target)
    try:
        os.chmod(tmp_path, 0o666 & ~_umask())  # mkstemp makes 0600; give the file normal permissions
        yield tmp_path
        os.replace(tmp_path, target)
    finally:  # on any exception, KeyboardInterrupt and SystemExit too
        tmp_path.unlink(missing_ok=True)
        os.close(fd)  # last: while the file is there, it is held


def _temporaries_of(target: Path) -> list[Path]:
    """The temporary files beside `target` that a write of it makes: .NAME.XXXXXXXX.tmp."""
    return list(target.parent.glob(f".{glob.escape(target.name)}.*.tmp"))


def _held_temporary(target: Path) -> tuple[int, Path]:
    """A new temporary file beside `target` and an open descriptor holding its lock. A writer of
    the same target may have found it abandoned and removed it before it was locked: then another."""
    while True:
        fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
        fcntl.flock(fd, fcntl.LOCK_EX)  # waits only while another writer is removing it
        if _same_file(Path(name), fd):
            return fd, Path(name)
        os.close(fd)


def _same_file(path: Path, fd: int) -> bool:
    """Whether `path` is still the file open on `fd` (not removed, not replaced)."""
    try:
        return os.stat(path, follow_symlinks=False).st_ino == os.fstat(fd).st_ino
    except OSError:
        return False


def _remove_if_abandoned(path: Path) -> bool:
    """Remove the temporary file at `path` (and DuckDB's .wal of it) unless a writer holds it;
    True if it was removed. A folder (atomic_folder's) is left to remove_stale_temporaries."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY)
    except OSError:  # gone already, a folder that cannot be read, a link: not a temporary of ours
        return False
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False  # its writer is at work
        if not (stat.S_ISREG(os.fstat(fd).st_mode) and _same_file(path, fd)):
            return False
        path.unlink()
        path.with_name(path.name + ".wal").unlink(missing_ok=True)
        return True
    finally:
        os.close(fd)


def remove_abandoned_temporaries(target: str | os.PathLike) -> list[Path]:
    """Remove the temporary files that writers of `target` killed with SIGKILL left beside it: the
    ones no writer holds. Every atomic write does this first, so a leftover lasts only until the
    next write of the same file; a writer at work keeps its own."""
    target = Path(target)
    return [path for path in _temporaries_of(target) if _remove_if_abandoned(path)]


@contextmanager
def atomic_paths(*targets: str | os.PathLike) -> Iterator[list[Path]]:
    """Temporary paths for files that are only good together (a tokenized corpus: its vocabulary,
    its token arrays and split.json); the last target marks the set whole. Every file is written
    first; only then is the last target's old file removed and each renamed into place, the last
    one last. A failure while writing (a full disk) leaves the old set as it was; a kill during
    the renames leaves the set without its mark, which a reader refuses: never a mix of two sets."""
    paths = [Path(target) for target in targets]
    with ExitStack() as stack:  # entered last to first, so that the renames run first to last
        temporaries = [stack.enter_context(atomic_path(path)) for path in reversed(paths)][::-1]
        yield temporaries
        file_behind(paths[-1]).unlink(missing_ok=True)  # the old set is not whole from here on


def _file_above(path: Path) -> Path | None:
    """The nearest existing ancestor of `path` that is not a folder, if any (nothing can go under it)."""
    for parent in path.parents:
        if parent.exists():
            return None if parent.is_dir() else parent
    return None


def file_behind(target: Path) -> Path:
    """The file a write to `target` replaces: `target` itself, or the file a symbolic link there
    leads to. A link is written through, not replaced: replaced, it would no longer lead to the file
    it named (a database kept on another disk, linked in), which would go stale without a word."""
    return Path(os.path.realpath(target)) if target.is_symlink() else target


def _mode_of(target: Path, name: str) -> int | None:
    """os.stat's st_mode of what is at `target` (a link followed); None when nothing is there."""
    try:
        return os.stat(target).st_mode
    except (FileNotFoundError, NotADirectoryError):  # not there (a file above it: said by the caller)
        return None
    except OSError as err:  # a link that loops, a folder that cannot be searched
        raise AnatomyError(f"{name}: cannot be written: {err.strerror}") from None


def check_file_target(
    target: str | os.PathLike, option: str = "", not_ours: Callable[[Path], str | None] | None = None
) -> None:
    """Say in words why a file cannot be written at `target`, before anything is written.

    Only a regular file is ever replaced (renaming over a named pipe or a device would replace
    it). With `not_ours`, which says why an existing file is not one this project wrote (None: it
    is one), only such a file is: a mistyped path (`--db notes.md`) must not cost the file there."""
    target = Path(target)
    name = f"{option} {target}" if option else str(target)
    mode = _mode_of(target, name)
    if mode is not None and stat.S_ISDIR(mode):
        raise AnatomyError(f"{name}: is a folder; expected the path of a file to write")
    if mode is not None and not stat.S_ISREG(mode):
        raise AnatomyError(f"{name}: is not a regular file ({file_kind(mode)}); expected the path of a file to write")
    if mode is not None and not_ours is not None and (problem := not_ours(file_behind(target))) is not None:
        raise AnatomyError(f"{name}: {problem}; {NOT_REPLACED}")
    blocker = _file_above(target)
    if blocker is not None:
        raise AnatomyError(f"{name}: {blocker} is a file, so nothing can be written under it")


def check_folder_target(folder: str | os.PathLike, option: str = "") -> None:
    """Say in words why `folder` cannot be used as (or made into) a folder."""
    folder = Path(folder)
    name = f"{option} {folder}" if option else str(folder)
    if folder.exists() and not folder.is_dir():
        raise AnatomyError(f"{name}: is a file; expected a folder (or a path where one can be made)")
    blocker = _file_above(folder)
    if blocker is not None:
        raise AnatomyError(f"{name}: {blocker} is a file, so no folder can be made under it")


def remove_stale_temporaries(target: str | os.PathLike) -> list[Path]:
    """Delete the temporaries a killed writer of `target` left beside it: files, DuckDB's .wal of
    one, and folders (atomic_folder's). Only call this while holding the lock that every writer of
    `target` holds, so that none of these can belong to a writer still at work."""
    target = file_behind(Path(target))  # where a write through a link puts its temporaries
    if not target.parent.is_dir():
        return []
    name = glob.escape(target.name)
    stale = [*target.parent.glob(f".{name}.*.tmp"), *target.parent.glob(f".{name}.*.tmp.wal")]
    for path in stale:
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)
    return stale


@contextmanager
def atomic_folder(target: str | os.PathLike) -> Iterator[Path]:
    """Yield an empty temporary folder beside `target`; on success it takes the place of `target`
    whole (an old `target` is moved aside, then deleted). A reader sees the old folder or the new
    one, never some files of each; a kill between the two renames leaves no folder at all."""
    target = Path(target)
    check_folder_target(target)
    with naming_a_full_disk(target), _atomic_folder(target) as tmp:
        yield tmp


@contextmanager
def _atomic_folder(target: Path) -> Iterator[Path]:
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    os.chmod(tmp, 0o777 & ~_umask())  # mkdtemp makes 0700; give the folder normal permissions
    old = None
    try:
        yield tmp
        if target.exists():
            # a folder can only be renamed onto an empty one: move the old one aside first
            old = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
            os.replace(target, old)
        os.replace(tmp, target)
    except BaseException:
        if old is not None and old.exists() and not target.exists():
            os.replace(old, target)  # the new folder did not go in: the old one goes back
        raise
    finally:
        for leftover in (tmp, old):
            if leftover is not None and leftover.exists():
                shutil.rmtree(leftover)


@contextmanager
def writing_into(folder: str | os.PathLike) -> Iterator[Path]:
    """Hold the lock on `folder` (made if missing) for the `with` block: one writer into it at a
    time, so that a temporary file found there is a killed writer's leftover. The folder is its
    own lock, so nothing is added to it."""
    folder = Path(folder)
    check_folder_target(folder)
    with naming_a_full_disk(folder):
        folder.mkdir(parents=True, exist_ok=True)
    with held_lock(folder):
        yield folder


def write_text(target: str | os.PathLike, text: str) -> None:
    with atomic_path(target) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes(target: str | os.PathLike, data: bytes) -> None:
    with atomic_path(target) as tmp:
        tmp.write_bytes(data)


def write_bytes_if_changed(target: str | os.PathLike, data: bytes) -> bool:
    """Write `data` unless `target` holds exactly it already (no new time stamp, no churn in git);
    returns whether it wrote."""
    if holds_exactly(Path(target), data):
        return False
    write_bytes(target, data)
    return True


def holds_exactly(target: Path, data: bytes) -> bool:
    """Whether `target` is a regular file holding exactly `data`. Its size is compared first, and
    only a file of the same size is read: a file of gigabytes (a sparse one costs nothing on disk)
    must not be read whole just to learn that it differs. Anything else there (nothing, a named
    pipe, a device) does not hold it: the write then says why it cannot replace it (check_file_target)."""
    try:
        with opened_regular_file(target) as handle:
            if os.fstat(handle.fileno()).st_size != len(data):
                return False
            return handle.read(len(data) + 1) == data
    except AnatomyError:
        return False


def json_text(obj: Any) -> str:
    """How every JSON file of this project is written: indented, in UTF-8 (not \\u escapes)."""
    return json.dumps(obj, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def write_json(target: str | os.PathLike, obj: Any) -> None:
    write_text(target, json_text(obj))


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
