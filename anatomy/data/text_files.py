"""Reading a text file as UTF-8, with one clear line when it cannot be read.

The corpus step reads posts with it, the tokenize step the corpus (and a split corpus's files,
which may be xz-compressed). No other project module is needed: both import this one.
"""

from __future__ import annotations

import lzma
from pathlib import Path

from anatomy.errors import AnatomyError


def read_utf8(path: Path) -> str:
    """The file's text; a clear error, with the byte offset, if it is not UTF-8."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise AnatomyError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise AnatomyError(f"{path}: is a folder, expected a file") from None
    except OSError as err:
        raise AnatomyError(f"{path}: cannot read: {err.strerror}") from None
    return decode_utf8(data, path)


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


def read_text(path: Path) -> str:
    """A UTF-8 text file, or an xz-compressed one (`.xz`)."""
    if path.suffix != ".xz":
        return read_utf8(path)
    try:
        data = lzma.decompress(path.read_bytes())
    except FileNotFoundError:
        raise AnatomyError(f"{path}: no such file") from None
    except (lzma.LZMAError, OSError) as err:
        raise AnatomyError(f"{path}: not a readable xz file ({err})") from None
    return decode_utf8(data, path)
