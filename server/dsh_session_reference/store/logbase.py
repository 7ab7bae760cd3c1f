"""What every part of reading a log shares: its size limits, its errors, opening it safely.

The limits are this reader's own (upstream has none; see :mod:`.logfile`); the errors carry
upstream's messages. A log is opened only where it resolves inside the root, never followed
through a link out of it, and never if it is not a regular file.
"""

from __future__ import annotations

import errno
import os
import stat
from typing import IO, Final

from .layout import is_within
from .zstd_codec import Codec, CodecMissing, codec

MAX_LINE_BYTES: Final = 32 * 1024 * 1024
"""Largest committed record (one JSONL line, header included) this reader accepts."""

FRAME_BUFFER_BYTES: Final = 8 * 1024 * 1024
"""Zstd frame output held for single-pass validation; larger frames are decoded twice."""

READ_CHUNK: Final = 1024 * 1024
HEADER_BUFFER: Final = 16 * 1024
"""Read buffer for header-only reads: a header is a few hundred bytes, a log can be megabytes."""
ZSTD_MAGIC: Final = 0xFD2FB528


class LogError(Exception):
    """A failure of upstream's ``loadStored`` for this log; ``message`` is upstream's text.

    ``unsupported`` marks upstream's ``SessionFormatUnsupportedError`` (a log
    from another format version), which callers report without the
    "corrupt" wording.
    """

    def __init__(self, message: str, *, unsupported: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.unsupported = unsupported


def header_too_long() -> LogError:
    return LogError(f"session log header line is larger than {MAX_LINE_BYTES} bytes")


class LogChanged(Exception):
    """The log was truncated or rewritten while it was being read; read it again."""


def zstd_codec(path: str | None = None) -> Codec:
    """The Zstandard codec (see :mod:`.zstd_codec`), imported on first use of a ``.jsonl.zstd`` log.

    It can be missing (an old Python without the compiled binding); plain logs must still work
    then, and a zstd log must fail like any unreadable log, through :class:`LogError`, naming the
    log when ``path`` is given.
    """
    try:
        return codec()
    except (CodecMissing, ValueError) as error:
        name = f'"{path}"' if path is not None else "Zstandard session logs (.jsonl.zstd)"
        raise LogError(f"cannot read {name}: {error}") from error


def open_artifact(
    path: str, root_real: str, *, resolved: str | None = None, buffering: int = READ_CHUNK
) -> IO[bytes]:
    """Open a log read-only, refusing anything that resolves outside the root or is not a file.

    A symlinked ``session.jsonl`` inside the root works as upstream; one that
    points outside the root is never followed (upstream would read it). A
    ``.zstd`` log is refused, naming it, when no Zstandard codec is installed.

    ``resolved`` is ``realpath(path)`` when the caller knows it (the listing
    walk checks every directory without following links and has just seen the
    log to be a regular file): the log is then opened there directly, which
    spares the ~10 ``lstat`` calls of ``realpath`` per log. Should the log have
    become a link since, ``O_NOFOLLOW`` refuses it and the general path runs.
    ``buffering`` is small for reads that only want a header, so they do not
    pull a whole log into the buffer.
    """
    flags = (
        os.O_RDONLY
        | getattr(os, "O_NOFOLLOW", 0)
        | getattr(os, "O_NONBLOCK", 0)
        | getattr(os, "O_CLOEXEC", 0)
        | getattr(os, "O_NOCTTY", 0)
    )
    fd = -1
    if resolved is not None and is_within(root_real, resolved):
        try:
            fd = os.open(resolved, flags)
        except OSError as error:
            if error.errno != errno.ELOOP:
                raise
    if fd < 0:
        real = os.path.realpath(path)
        if not is_within(root_real, real):
            raise LogError(
                f'session artifact "{path}" resolves outside the sessions root and is not followed'
            )
        fd = os.open(real, flags)
    try:
        if path.endswith(".zstd"):
            zstd_codec(path)  # refuse a log this Python cannot decode before reading it
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise LogError("EISDIR: illegal operation on a directory, read")
        if not stat.S_ISREG(mode):
            raise LogError(f'session artifact "{path}" is not a regular file')
        return os.fdopen(fd, "rb", buffering=buffering)
    except BaseException:
        os.close(fd)
        raise


def file_size(handle: IO[bytes]) -> int:
    return os.fstat(handle.fileno()).st_size


def read_span(handle: IO[bytes], offset: int, length: int) -> bytes:
    handle.seek(offset)
    return handle.read(length)
