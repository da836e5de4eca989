"""What a corpus folder was made from, and whether a source is still that.

`anatomy corpus` records it in stats.json beside the text: the source as given (`source`), a digest
of the posts it read (`source_digest`: each post's path and bytes, in the order they are read) and
the choices it was made with (`options`). However the folder was made (by hand, by the Listen page
through default_corpus.py, or by the workflow), the workflow compares that record with its config
`corpus` before it plans (workflow/rules/corpus.smk), and extracts again when they differ: the files'
times cannot tell, since posts older than the folder are the usual case, not the exception. It makes
the extraction run by a note beside the corpus (`note_source_change`).

A stats.json without a record (written before records were, or not by this project) is taken at
its word, as the file times always were.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import re
import time
from pathlib import Path

from anatomy.data.posts import Options, find_posts, shown
from anatomy.data.text_files import TEXT_LIMIT
from anatomy.errors import AnatomyError
from anatomy.files.atomic import opened_regular_file, read_regular_file, write_text

STATS_FILE = "stats.json"
STATS_WHAT = "the corpus step's statistics"  # what stats.json should be, for the line refusing it
# The workflow's note, beside the corpus, that it was made from another source (note_source_change)
SOURCE_CHANGED_NOTE = "source-changed.txt"
# What the note says once the corpus is its source's again, and the line saying when it was first written
NO_SOURCE_CHANGE = "nothing to extract again: the corpus is what its source makes\n"
NOTE_FIRST_WRITTEN = "first written at "
CHUNK = 1 << 20  # a post is read in pieces this size, so that a large one is never whole in memory


def source_digest(src: str | os.PathLike) -> str:
    """sha256 over the posts `anatomy corpus` would read from `src` (a folder, or one file): each
    post's relative path and its bytes. Drafts are in it (a post can stop being one), files that
    are not posts are not (an image changes no corpus). A post that cannot be read counts by its
    error, so that fixing it changes the digest."""
    src = Path(src)
    posts = find_posts(src)[0] if src.is_dir() else [Path(src.name)]
    folder = src if src.is_dir() else src.parent
    digest = hashlib.sha256()
    for relative in posts:
        name = relative.as_posix().encode("utf-8", "surrogateescape")
        digest.update(len(name).to_bytes(8, "big") + name)
        size = 0
        try:
            with opened_regular_file(folder / relative, "a Markdown post") as handle:
                while chunk := handle.read(CHUNK):
                    digest.update(chunk)
                    size += len(chunk)
        except AnatomyError as err:
            digest.update(b"\0cannot be read\0" + str(err).encode("utf-8", "backslashreplace"))
        digest.update(size.to_bytes(8, "big"))
    return digest.hexdigest()


def made_from(src: str | os.PathLike, options: Options) -> dict:
    """What stats.json records of the source beside `source` (the statistics write that)."""
    return {"source_digest": source_digest(src), "options": dataclasses.asdict(options)}


def as_given(path: str | os.PathLike) -> str:
    """A path as stats.json records it (`source`): POSIX separators, any name not UTF-8 as \\xNN."""
    return shown(Path(path).as_posix())


def source_change(corpus_dir: str | os.PathLike, src: str | os.PathLike, options: Options = Options()) -> str | None:
    """Why the corpus in `corpus_dir` is not what `src` with `options` makes, in one sentence;
    None when its record says it is, or there is no record to say otherwise. A stats.json that is
    not read (no regular file, or too big to be one) is named: the record it holds is not known."""
    corpus_dir = Path(corpus_dir)
    stats_path = corpus_dir / STATS_FILE
    if not stats_path.exists():
        return None  # no stats.json, so no corpus either: the workflow makes it anyway
    try:
        # capped: a named pipe there would make the workflow wait for good, a link to /dev/zero or
        # a file of gigabytes fill the memory; each is named instead, and the corpus made again
        stats = json.loads(read_regular_file(stats_path, TEXT_LIMIT, STATS_WHAT))
    except AnatomyError as err:
        return str(err)
    except ValueError:
        return None  # not JSON (or not UTF-8): not ours
    recorded = stats.get("source") if isinstance(stats, dict) else None
    if not isinstance(recorded, str):
        return None
    if Path(recorded) != Path(as_given(src)):
        return f"{shown(corpus_dir)} was made from {recorded}, not from {as_given(src)}"
    wanted = dataclasses.asdict(options)
    recorded_options = stats.get("options")
    if isinstance(recorded_options, dict) and recorded_options != wanted:
        flags = [
            f"--{key.replace('_', '-')}" for key, value in recorded_options.items() if value and not wanted.get(key)
        ]
        made_with = " with " + " ".join(flags) if flags else " with other options"
        return f"{shown(corpus_dir)} was made from {recorded}{made_with}"
    digest = stats.get("source_digest")
    if isinstance(digest, str):
        try:
            digest_now = source_digest(src)
        except AnatomyError as err:  # the extraction says it too, in its own words
            return str(err)
        if digest_now != digest:
            return f"the posts in {as_given(src)} have changed since {shown(corpus_dir)} was made from them"
    return None


def note_source_change(corpus_dir: str | os.PathLike, src: str | os.PathLike) -> str | None:
    """Why the corpus in `corpus_dir` is not what `src` makes (source_change; None: it is), said in
    the workflow's note beside it, SOURCE_CHANGED_NOTE, which the extraction takes as an input
    whenever it is there.

    When the source changed, the note is written now, newer than the corpus and with the time in
    it (Snakemake skips an input newer than its outputs whose content it has seen): the extraction
    runs. Otherwise the note keeps the place it had at the last extraction, since Snakemake reruns
    a job whose set of inputs is not the one it last ran with (its rerun trigger `input`): a note
    that went away once the extraction ran made the next Snakemake extract, and train every run,
    a second time. One written since (a dry run for another source) goes; one that was there
    stays, dated the epoch, never newer than the corpus. The workflow's extraction writes
    stats.json anew (Snakemake removes a job's outputs before it runs), so its time is the last
    extraction's, and the note records when it was first written."""
    corpus_dir = Path(corpus_dir)
    note = corpus_dir / SOURCE_CHANGED_NOTE
    why = source_change(corpus_dir, src)
    first_written = _first_written(note)
    if why is not None:
        now = time.time_ns()
        write_text(note, f"{why} ({now})\n{NOTE_FIRST_WRITTEN}{first_written or now}\n")
    elif first_written is None or first_written >= _mtime_ns(corpus_dir / STATS_FILE):
        note.unlink(missing_ok=True)  # not there at the last extraction: not one of its inputs
    elif note.stat().st_mtime_ns != 0:
        write_text(note, f"{NO_SOURCE_CHANGE}{NOTE_FIRST_WRITTEN}{first_written}\n")
        os.utime(note, ns=(0, 0))
    return why


def _first_written(note: Path) -> int | None:
    """When the note was first written (time.time_ns()), as it says; None when it says nothing
    (not there, or not written by note_source_change)."""
    try:
        text = read_regular_file(note, TEXT_LIMIT, "the workflow's note").decode("utf-8", "replace")
    except (AnatomyError, OSError):
        return None
    found = re.search(f"^{re.escape(NOTE_FIRST_WRITTEN)}(\\d+)$", text, re.MULTILINE)
    return int(found.group(1)) if found else None


def _mtime_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1  # no corpus: no extraction took the note


def as_argument(path: str | os.PathLike) -> str:
    """A path as a command line can give it: a name that starts with '-' (a folder `-posts`) is
    read by argparse as an option, so it goes as ./-posts (the same path; stats.json records it
    as -posts)."""
    path = os.fspath(path)
    return f"./{path}" if path.startswith("-") else path
