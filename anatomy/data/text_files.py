"""Reading a text file as UTF-8, with one clear line when it cannot be read.

The corpus step reads posts with it, the tokenize step the corpus (and a split corpus's files,
which may be xz-compressed). Both import this one. Only a regular file is read, and only up to a
limit (anatomy/files/atomic.py, `read_regular_file`): a named pipe named like a post would make
the step wait for good, and a link to /dev/zero would read until the memory runs out.
"""

from __future__ import annotations

import lzma
from pathlib import Path

from anatomy.errors import AnatomyError
from anatomy.files.atomic import read_regular_file, readable_bytes

# The most a text file may hold. The largest text this lab trains on (the scale study's) is 8 M
# characters, about 24 MB; 1 GiB is forty times that and, with its token arrays, still fits in a
# laptop's memory. Past it, a file is not a corpus this lab can train on (or it never ends).
TEXT_LIMIT = 1024**3


def read_utf8(path: Path, limit: int = TEXT_LIMIT, what: str = "a text file") -> str:
    """The file's text; a clear error, with the byte offset, if it is not UTF-8. `what`: what the
    file should be, for the error when it is no regular file, or more than `limit` bytes."""
    return decode_utf8(read_regular_file(path, limit, what), path)


def decode_utf8(data: bytes, path: Path) -> str:
    """Bytes read from `path` as text; a clear error, with the byte offset, if they are not UTF-8."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise AnatomyError(
            f"{path}: not UTF-8 text: byte 0x{data[err.start]:02x} at byte offset {err.start} "
            f"(line {line}); save the file as UTF-8"
        ) from None
    return text.removeprefix("\ufeff")  # a byte-order mark some editors add


def read_text(path: Path, limit: int = TEXT_LIMIT) -> str:
    """A UTF-8 text file, or an xz-compressed one (`.xz`), of at most `limit` bytes of text."""
    if path.suffix != ".xz":
        return read_utf8(path, limit)
    return decode_utf8(decompress_xz(path, limit), path)


def decompress_xz(path: Path, limit: int) -> bytes:
    """The bytes an xz file holds, stopped past `limit`: a few kilobytes of xz can hold a hundred
    megabytes of one repeated character (an "xz bomb"), so the text is capped, not the file."""
    compressed = read_regular_file(path, limit, "an xz-compressed text file")
    text, rest = b"", compressed
    while rest:  # one xz stream after another, as `xz` and lzma.decompress read them
        decompressor = lzma.LZMADecompressor()
        try:
            text += decompressor.decompress(rest, max_length=limit + 1 - len(text))
        except lzma.LZMAError as err:
            raise AnatomyError(f"{path}: not a readable xz file ({err})") from None
        if len(text) > limit:
            raise AnatomyError(
                f"{path}: its {readable_bytes(len(compressed))} of xz hold more than {readable_bytes(limit)} of text, "
                "the most a text file may hold, so it is not decompressed further"
            )
        if not decompressor.eof:
            raise AnatomyError(f"{path}: not a readable xz file (it ends before its end mark: cut short?)")
        rest = decompressor.unused_data
    return text
