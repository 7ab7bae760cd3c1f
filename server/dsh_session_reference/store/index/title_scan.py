"""The last ``session/title`` of a log found by a byte scan, without replaying the log.

A hint the language server shows while the index is being built (see :func:`scan_last_title`).
"""

from __future__ import annotations

from functools import partial
from typing import Final

from ...cancellation import AbortSignal, check
from ..jsvalue import js_parse_line
from ..listing import compression_of
from ..logbase import MAX_LINE_BYTES, LogError, open_artifact
from ..zstd_frames import zstd_plaintext

_SCAN_CHUNK: Final = 1 << 20

_TITLE_MARKER: Final = b'{"type":"session/title"'


def scan_last_title(path: str, root_real: str, stop: AbortSignal | None = None) -> str | None:
    """The ``title`` of the last complete ``session/title`` line in a log, found by a byte scan.

    A hint, not the answer: unlike a title read it neither validates the log
    nor honours a crash tail, so a damaged log (whose real label is its id) may
    still show a title here. The language server shows these while the index
    is being built and replaces them as logs are verified.
    """
    last: bytes | None = None
    pending = bytearray()  # the unfinished line so far (amortised appends, no re-copying)
    skipping = False  # inside a line that cannot be a title: wait for its newline, holding none of it
    compression = compression_of(path)
    try:
        # zstd logs are walked frame by frame through their own 1 MiB reads: a small buffer
        # serves the frame bodies without holding a second copy of the file's bytes.
        buffering = 64 * 1024 if compression == "zstd" else _SCAN_CHUNK
        with open_artifact(path, root_real, buffering=buffering) as handle:
            read_chunk = partial(handle.read, _SCAN_CHUNK)
            # The log as JSONL text, one bounded chunk at a time (damage ends a zstd log's early).
            chunks = zstd_plaintext(handle, stop) if compression == "zstd" else iter(read_chunk, b"")
            for chunk in chunks:
                check(stop)
                if skipping:
                    newline = chunk.find(b"\n")
                    if newline < 0:
                        continue
                    chunk = chunk[newline + 1 :]
                    skipping = False
                pending += chunk  # starts at the start of a line
                end = pending.rfind(b"\n")
                if end >= 0:
                    at = pending.rfind(_TITLE_MARKER, 0, end)
                    while at > 0 and pending[at - 1] != 10:
                        at = pending.rfind(_TITLE_MARKER, 0, at)
                    if at >= 0:
                        last = bytes(pending[at : pending.index(b"\n", at)])
                    del pending[: end + 1]
                # What is left is the start of an unfinished line, held only while it may be a
                # title line a read would hold: a 200 MB message or a decompression bomb's one
                # endless line costs this scan nothing, so it never holds a big buffer beside
                # a request's read in the same process.
                if len(pending) > MAX_LINE_BYTES or not _TITLE_MARKER.startswith(
                    pending[: len(_TITLE_MARKER)]
                ):
                    pending = bytearray()
                    skipping = True
    except (OSError, LogError):
        return None
    if last is None:
        return None
    try:
        event = js_parse_line(last)
    except ValueError:
        return None
    payload = event.get("data") if isinstance(event, dict) else None
    title = payload.get("title") if isinstance(payload, dict) else None
    return title if isinstance(title, str) else None
