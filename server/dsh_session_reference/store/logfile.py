"""Reading one dsh session log, plain or zstd, exactly as upstream's JSONL backend reads it.

This is upstream's ``loadStored`` (``dsh-session-persistence-jsonl``): the event scanner with its
crash-tail rule, driven over a plain log or the frames of a zstd one with its torn-final-frame
recovery, and every error message those produce. The header record (:mod:`.log_header`), packed
chunk rows (:mod:`.chunk_rows`), the zstd container (:mod:`.zstd_frames`) and what every part
shares (:mod:`.logbase`) are modules of their own; :mod:`.replay` validates what a read yields.

Crash tails, as upstream defines them. A log is committed line by line; the
first line that is torn, unparsable or out of ``seq`` order starts an *issue*:
nothing from it on is kept, and the log is rejected only if a later line still
decodes and contains a ``turn/end`` (a crash cannot be followed by a completed
turn). In zstd logs that cut is only allowed inside a torn final frame: a bad
or unterminated line in a complete frame rejects the log. A torn final frame
gives up every complete record it holds, unless decoding it fails, in which
case it gives up nothing.

Two deliberate differences, both about resources rather than results:

* Logs are streamed, never read whole. Zstd frames are fed to the decoder one
  block at a time, so one call never produces more than a block (128 KiB) of
  output and a decompression bomb costs time, not memory. A frame's output is
  buffered up to :data:`FRAME_BUFFER_BYTES` so that, as upstream, a frame is
  validated before any of its records is used; a larger frame is decoded
  twice (validate, then scan) instead of being held. A complete frame (or a
  header frame) expanding to a line above :data:`MAX_LINE_BYTES` is refused
  as soon as that size is passed, so a bomb costs that much work, not its
  whole expansion; a torn final frame is decoded to its end (linear time).
* A single record (line) may be at most :data:`MAX_LINE_BYTES`. A committed
  line above that fails the log with a clear error (upstream would try to
  hold it, e.g. a 200 MB line or a bomb without newlines); an oversized torn
  tail is ignored like any torn tail, and after an issue an oversized line
  that cannot contain a ``turn/end`` is skipped unread, as upstream would.
  A read for discovery only (a title, message text to index) skips an
  oversized line instead, when its first bytes show upstream's own envelope of
  a content-carrying event in sequence (:data:`SKIPPABLE_TYPES`): that event is
  counted and taken as valid, and the read says which lines it skipped, so a
  session keeps its title while ``prepare`` of it still fails with the error.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, Final, Protocol

from ..cancellation import AbortSignal, check
from .chunk_rows import RowError, packed_row
from .jsvalue import UNDEFINED, is_number, js_parse_line, js_string
from .layout import Compression
from .log_header import first_line, parse_header_record
from .logbase import (
    FRAME_BUFFER_BYTES,
    MAX_LINE_BYTES,
    READ_CHUNK,
    LogChanged,
    LogError,
    file_size,
    zstd_codec,
)
from .zstd_frames import (
    BATCH_OUTPUT,
    Frame,
    FrameFailed,
    decode_frame,
    frame_output,
    frames_output,
    header_frame,
    scan_zstd_frames,
    zstd_frames,
)

_JSON_SPACE: Final = b" \t\r"
SKIPPABLE_TYPES: Final = frozenset(
    {"user/message", "assistant/message", "tool/result", "tool/call", "command/done", "hook/result"}
)
"""Event types whose oversized line a discovery read skips: the ones that carry what a person
pasted or a tool produced. Anything else that large (a turn boundary, a title) fails as always."""
MAX_SKIPPED_LINE_BYTES: Final = (1 << 29) - 24
"""The longest line a discovery read skips: V8's longest string, so upstream cannot read a longer
one either (and a decompression bomb's endless line still stops a read at this much output)."""
_ENVELOPE_HEAD: Final = re.compile(
    rb'\{"type":"([a-z][a-z/-]{0,63})","seq":(0|[1-9]\d{0,14}),"time":(0|[1-9]\d{0,14}),'
)
"""The start of an event line as upstream's writer spells it (``JSON.stringify`` of the envelope)."""
_HEAD_BYTES: Final = 128
_HOLD_LIMIT: Final = "the most this reader holds in memory"
_SKIP_LIMIT: Final = "the longest line a discovery read skips"


class EventSink(Protocol):
    """Where a log's committed events go, in order."""

    def push(self, event: dict[str, Any]) -> None:
        """The next committed event, as stored."""

    def push_chunks(self, first_seq: int, times: list[Any]) -> None:
        """The ``assistant/chunk`` events one packed row stores: seqs ``first_seq`` on, one per time.

        Only their seqs and times are handed over: these events are valid by construction
        and never on the surface, and building them (three dicts each) was a fifth of the
        work of replaying a big log, most of whose events are chunks.
        """

    def push_unread(self, seq: int, time: int) -> None:
        """An event whose line a discovery read skipped (see :data:`SKIPPABLE_TYPES`): counted,
        taken as valid, and not a title."""


StartLog = Callable[[dict[str, Any]], EventSink]


def line_too_long(line: int) -> str:
    """The error of a read that meets committed line ``line`` over :data:`MAX_LINE_BYTES`."""
    return f"session log line {line} is larger than {MAX_LINE_BYTES} bytes, {_HOLD_LIMIT}"


def _type_of(value: Any) -> Any:
    """``value.type``, throwing JS's TypeError for ``null``."""
    if value is None:
        raise LogError("Cannot read properties of null (reading 'type')")
    return value.get("type", UNDEFINED) if isinstance(value, dict) else UNDEFINED


def _could_close_turn(line: bytes) -> bool:
    """After an issue, only a line that might decode to a ``turn/end`` (or to ``null``,
    which makes upstream throw) can change the outcome; the rest need not be parsed."""
    return b"turn/end" in line or b"\\" in line or line.strip(_JSON_SPACE) == b"null"


class EventScanner:
    """Upstream's ``SessionLogScanner``, streaming: committed events go to a sink in order.

    ``start(header)`` is called once the header record is valid and returns
    the sink. A row's events reach the sink only once the whole row is known
    to continue the contiguous prefix, so the sink sees exactly upstream's
    ``events``.
    """

    def __init__(self, header_record: bytes, start: StartLog, *, discovery: bool = False) -> None:
        self.header = parse_header_record(header_record)
        self._discovery = discovery
        self.skipped: list[int] = []
        self._head = b""
        """The first bytes of the line being held once it is oversized (its envelope)."""
        self._oversized_bytes = 0
        self.input_bytes = len(header_record)
        self.committed_bytes = len(header_record)
        self.event_count = 0
        self._sink = start(self.header)
        self._parts: list[bytes] = []
        self._part_bytes = 0
        self._oversized = False
        self._oversized_matters = False
        self._overlap = b""
        self._line = 0
        self._issue: str | None = None

    def write(self, chunk: bytes) -> None:
        """Consume the next bytes of the log."""
        base = self.input_bytes
        self.input_bytes += len(chunk)
        start = 0
        end = len(chunk)
        while start < end:
            newline = chunk.find(b"\n", start)
            if newline == -1:
                self._hold(chunk[start:])
                return
            if self._issue is not None and not self._parts and not self._oversized:
                last = chunk.rfind(b"\n", start)
                if not any(chunk.find(marker, start, last) != -1 for marker in (b"turn/end", b"\\", b"null")):
                    start = last + 1  # nothing in these lines can matter any more
                    continue
            self._take_line(chunk[start:newline], base + newline + 1)
            start = newline + 1

    def _hold(self, fragment: bytes) -> None:
        if self._oversized:
            self._note_oversized(fragment)
            return
        if self._part_bytes + len(fragment) > MAX_LINE_BYTES:
            self._oversized = True
            self._oversized_matters = False
            self._overlap = b""
            self._head = b"".join(part[:_HEAD_BYTES] for part in [*self._parts[:_HEAD_BYTES], fragment])[
                :_HEAD_BYTES
            ]  # the parts hold up to MAX_LINE_BYTES: never join them whole
            self._oversized_bytes = 0  # counted again below, part by part
            for part in self._parts:
                self._note_oversized(part)
            self._note_oversized(fragment)
            self._parts = []
            self._part_bytes = 0
            return
        self._parts.append(fragment)
        self._part_bytes += len(fragment)

    def line_guard(self) -> Callable[[bytes], None] | None:
        """A check on the next complete frame's output while it is validated, before the scan.

        In complete frames a committed line above :data:`MAX_LINE_BYTES` fails
        the log whatever follows (at its newline, or as a torn record if none
        comes; after an issue the log fails anyway), so a frame expanding to
        one endless line (a decompression bomb) is refused there instead of
        being decoded to its end twice. ``None`` when the verdict is already an error.
        """
        if self._issue is not None:
            return None
        cap, limit = (
            (MAX_SKIPPED_LINE_BYTES, _SKIP_LIMIT) if self._discovery else (MAX_LINE_BYTES, _HOLD_LIMIT)
        )
        run = self._oversized_bytes if self._oversized else self._part_bytes
        line = self._line + 1

        def guard(output: bytes) -> None:
            nonlocal run, line
            first = output.find(b"\n")
            if first == -1:
                run += len(output)
            elif run + first > cap:
                run += first
            else:
                line += output.count(b"\n")
                run = len(output) - output.rfind(b"\n") - 1
            if run > cap:
                raise LogError(f"session log line {line} is larger than {cap} bytes, {limit}")

        return guard

    def _note_oversized(self, piece: bytes) -> None:
        self._oversized_bytes += len(piece)
        window = self._overlap + piece
        if b"turn/end" in window or b"\\" in window:
            self._oversized_matters = True
        self._overlap = window[-8:]

    def _take_line(self, tail: bytes, end_byte: int) -> None:
        if self._oversized or self._part_bytes + len(tail) > MAX_LINE_BYTES:
            self._hold(tail)  # the end of an oversized line, or a line that becomes one with it
            self._oversized = False
            self._line += 1
            if self._issue is None and self._discovery and self._skip_unread(end_byte):
                return
            if self._issue is None or self._oversized_matters:
                raise LogError(line_too_long(self._line))
            return
        if self._parts:
            self._parts.append(tail)
            line = b"".join(self._parts)
            self._parts = []
            self._part_bytes = 0
        else:
            line = tail
        self._consume(line, end_byte)

    def _skip_unread(self, end_byte: int) -> bool:
        """Take the oversized line just ended as the one event its envelope names, unread, if a
        discovery read may (see :data:`SKIPPABLE_TYPES`)."""
        head = _ENVELOPE_HEAD.match(self._head)
        if head is None or self._oversized_bytes > MAX_SKIPPED_LINE_BYTES:
            return False
        kind, seq, time = head[1].decode(), int(head[2]), int(head[3])
        if kind not in SKIPPABLE_TYPES or seq != self.event_count:
            return False
        self._sink.push_unread(seq, time)
        self.event_count += 1
        self.committed_bytes = end_byte
        self.skipped.append(self._line)
        return True

    def _consume(self, line: bytes, end_byte: int) -> None:
        self._line += 1
        if self._issue is not None and not _could_close_turn(line):
            return
        try:
            value = js_parse_line(line)
            row = packed_row(value)
        except (ValueError, RowError):
            if self._issue is None:
                self._issue = f"corrupt session log: unparsable committed event at line {self._line}"
            return
        if row is not None:  # chunk events: never a turn/end, and numbered from seq0 on
            first, times = row
            if self._issue is None and first != self.event_count:
                self._issue = self._gap(first)
            if self._issue is None:
                self._sink.push_chunks(first, times)
                self.event_count += len(times)
                self.committed_bytes = end_byte
            return
        if self._issue is None:
            if value is None:
                raise LogError("Cannot read properties of null (reading 'seq')")
            seq = value.get("seq", UNDEFINED) if isinstance(value, dict) else UNDEFINED
            if is_number(seq) and seq == self.event_count:
                self._sink.push(value)
                self.event_count += 1
                self.committed_bytes = end_byte
                return
            self._issue = self._gap(seq)
        if _type_of(value) == "turn/end":  # a crash cannot be followed by a completed turn
            raise LogError(self._issue)

    def prefix(self, torn: bool) -> LogPrefix:
        """What the read produced, the log's end ``torn`` or not."""
        return LogPrefix(self.header, self.event_count, torn, tuple(self.skipped))

    def _gap(self, seq: Any) -> str:
        return (
            f"corrupt session log: seq gap in committed region at line {self._line} "
            f"(expected {self.event_count}, got {js_string(seq)})"
        )


@dataclass(frozen=True)
class LogPrefix:
    """What one read produced: the header, and how much of the log the events cover."""

    header: dict[str, Any]
    event_count: int
    torn: bool
    skipped: tuple[int, ...] = ()
    """Lines a discovery read skipped for their size (see :data:`SKIPPABLE_TYPES`)."""


def _read_plain(
    handle: IO[bytes], size: int, start: StartLog, stop: AbortSignal | None, discovery: bool
) -> LogPrefix:
    handle.seek(0)
    remaining = size

    def read() -> bytes:
        nonlocal remaining
        chunk = handle.read(min(READ_CHUNK, remaining)) if remaining > 0 else b""
        remaining -= len(chunk)
        return chunk

    line = first_line(read, stop)
    if line is None:
        raise LogError("empty or header-less session log")
    scanner = EventScanner(line[0] + b"\n", start, discovery=discovery)
    chunk = line[1]
    while chunk:
        scanner.write(chunk)
        check(stop)
        chunk = read()
    return scanner.prefix(scanner.committed_bytes < size)


def _read_zstd(
    handle: IO[bytes], size: int, start: StartLog, stop: AbortSignal | None, discovery: bool
) -> LogPrefix:
    scan = scan_zstd_frames(handle, size, stop)  # the whole structure first, as upstream
    if scan.first is None or scan.first.end is None:
        raise LogError("empty or header-less Zstandard session log")
    header = header_frame(handle, scan.first, stop, f"frame at byte {scan.first.start}")
    scanner = EventScanner(header, start, discovery=discovery)

    def one(frame: Frame) -> None:
        assert frame.end is not None
        try:
            plaintext = frame_output(
                handle, frame.start, frame.end, stop, FRAME_BUFFER_BYTES, watch=scanner.line_guard()
            )
        except FrameFailed:
            raise LogError(
                f"corrupt Zstandard session log: frame at byte {frame.start} failed validation"
            ) from None
        if plaintext is not None:
            scanner.write(plaintext)
            return
        for output in decode_frame(handle, frame.start, frame.end, True, stop):  # too large to hold
            scanner.write(output)

    def flush(first: Frame, last: Frame, frames: int) -> None:
        assert last.end is not None
        if frames > 1:
            plaintext = frames_output(handle, first.start, last.end, stop, watch=scanner.line_guard())
            if plaintext is not None:
                scanner.write(plaintext)
                return
        # One frame, or a batch that failed: frame by frame (a batch's frames parsed again, as
        # nothing per frame is kept), so the error names the frame that fails.
        for frame in [last] if frames == 1 else zstd_frames(handle, last.end, stop, first.start):
            one(frame)

    # The standard library's codec decodes one frame per call anyway: batches would only
    # hold their bytes and a second frame walk beside this walk's own buffer.
    batching = zstd_codec().decode_frames is not None
    first = last = scan.first
    frames = bound = 0
    for frame in itertools.islice(zstd_frames(handle, size, stop), 1, scan.count):
        assert frame.end is not None
        if frames and (
            not batching or bound + frame.bound > BATCH_OUTPUT or frame.end - first.start > READ_CHUNK
        ):
            flush(first, last, frames)
            frames = 0
        if not frames:
            first, bound = frame, 0
        last = frame
        bound += frame.bound
        frames += 1
    if frames:
        flush(first, last, frames)
    if scanner.committed_bytes != scanner.input_bytes:
        raise LogError("corrupt Zstandard session log: complete frame contains a torn JSONL record")
    if scan.torn_start is None:
        return scanner.prefix(False)
    try:
        # Upstream decodes the torn frame in one call and keeps nothing if it
        # fails, so it is validated before any of it reaches the scanner.
        for _ in decode_frame(handle, scan.torn_start, size, False, stop):
            pass
    except FrameFailed:
        return scanner.prefix(True)
    for output in decode_frame(handle, scan.torn_start, size, False, stop):
        scanner.write(output)
    return scanner.prefix(True)


def read_log(
    handle: IO[bytes],
    compression: Compression,
    start: StartLog,
    stop: AbortSignal | None = None,
    *,
    discovery: bool = False,
) -> LogPrefix:
    """Stream one log's committed events into the sink ``start(header)`` returns; raise
    :class:`LogError` where upstream's read fails. ``discovery``: the read is for a title or
    message text only, and skips an oversized line where it may (see :data:`SKIPPABLE_TYPES`).

    The log is read as it was when opened (it is append-only); if it shrank
    meanwhile (a repair truncated it) :class:`LogChanged` asks for a new read.
    """
    size = file_size(handle)
    reader = _read_zstd if compression == "zstd" else _read_plain
    prefix = reader(handle, size, start, stop, discovery)
    if file_size(handle) < size:
        raise LogChanged()
    return prefix
