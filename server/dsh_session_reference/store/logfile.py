"""Reading one dsh session log, plain or zstd, exactly as upstream's JSONL backend reads it.

This is upstream's ``loadStored`` (``dsh-session-persistence-jsonl``): the
header record, the event scanner with its crash-tail rule, packed chunk rows,
the zstd frame container with its torn-final-frame recovery, and every error
message those produce. The next stage (``replay.py``) validates what it yields.

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
"""

from __future__ import annotations

import errno
import itertools
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from itertools import accumulate
from typing import IO, Any, Final, NamedTuple, Protocol

from ..cancellation import AbortSignal, check
from .jsvalue import (
    UNDEFINED,
    is_negative_zero,
    is_number,
    is_safe_integer,
    js_parse,
    js_string,
)
from .layout import Compression, is_within
from .zstd_codec import Codec, CodecMissing, codec

MAX_LINE_BYTES: Final = 32 * 1024 * 1024
"""Largest committed record (one JSONL line, header included) this reader accepts."""

FRAME_BUFFER_BYTES: Final = 8 * 1024 * 1024
"""Zstd frame output held for single-pass validation; larger frames are decoded twice."""

READ_CHUNK: Final = 1024 * 1024
HEADER_BUFFER: Final = 16 * 1024
"""Read buffer for header-only reads: a header is a few hundred bytes, a log can be megabytes."""
SESSION_FORMAT_VERSION: Final = 0
ZSTD_MAGIC: Final = 0xFD2FB528
_NEWLINE: Final = 10
_JSON_SPACE: Final = b" \t\r"
_ROW_TAGS: Final = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})


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


StartLog = Callable[[dict[str, Any]], EventSink]


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


class LimitExceeded(LogError):
    """This reader's own size limit (see :data:`MAX_LINE_BYTES`); upstream has none."""


class LogChanged(Exception):
    """The log was truncated or rewritten while it was being read; read it again."""


class _RowError(Exception):
    """A malformed packed chunk row (upstream: an unparsable committed event)."""


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


# --- header ---------------------------------------------------------------


def version_refusal(session_id: object, version: int | float) -> str:
    """Upstream's ``sessionFormatVersionRefusal`` text."""
    name = session_id if isinstance(session_id, str) else js_string(session_id)
    shown = js_string(version)
    if version > SESSION_FORMAT_VERSION:
        return (
            f'session "{name}" uses log format v{shown}, but this harness reads only '
            f"v{SESSION_FORMAT_VERSION}: the log was written by a newer harness — "
            "upgrade the harness to open it"
        )
    return (
        f'session "{name}" uses log format v{shown}, older than the supported '
        f"v{SESSION_FORMAT_VERSION}, and this build ships no upgrade path for it"
    )


def _non_negative_safe(value: object) -> bool:
    return is_safe_integer(value) and value >= 0 and not is_negative_zero(value)  # type: ignore[operator]


def is_header_line(value: object) -> bool:
    """Upstream's ``isHeaderLine`` guard."""
    if not isinstance(value, dict):
        return False
    origin = value.get("origin", UNDEFINED)
    preset = value.get("agentPreset", UNDEFINED)
    return (
        value.get("type") == "session"
        and is_number(value.get("version", UNDEFINED))
        and isinstance(value.get("id"), str)
        and _non_negative_safe(value.get("createdAt", UNDEFINED))
        and _non_negative_safe(value.get("delegationDepth", UNDEFINED))
        and (origin is UNDEFINED or origin == "subagent")
        and (preset is UNDEFINED or isinstance(preset, str))
    )


_OPTIONAL_BEFORE_DEPTH: Final = ("cwd", "parentSession", "seedLength", "origin")


def from_header_line(line: dict[str, Any]) -> dict[str, Any]:
    """Upstream's ``fromHeaderLine``: the header in its fixed key order (absent fields omitted)."""
    if "sandboxMode" in line or "approvalPolicy" in line:
        raise LogError("session header uses retired policy baseline fields")
    header: dict[str, Any] = {"version": line["version"], "id": line["id"], "createdAt": line["createdAt"]}
    for key in _OPTIONAL_BEFORE_DEPTH:
        if key in line:
            header[key] = line[key]
    header["delegationDepth"] = line["delegationDepth"]
    if "agentPreset" in line:
        header["agentPreset"] = line["agentPreset"]
    return header


def _parse_header_value(text: str) -> Any:
    return js_parse(text, keep_negative_zero=True)


def parse_header_meta(first_line: str) -> dict[str, Any] | None:
    """Upstream's ``parseHeaderMeta`` (listing): the header, or ``None`` when the line is not one.

    Raises :class:`LogError` for a header with retired fields, which upstream
    lets fail the whole listing.
    """
    try:
        parsed = _parse_header_value(first_line)
    except ValueError:
        return None
    if not is_header_line(parsed):
        return None
    return from_header_line(parsed)


def parse_header_record(record: bytes) -> dict[str, Any]:
    """Upstream's ``parseHeaderRecord``: one newline-terminated header record, or a :class:`LogError`."""
    if len(record) == 0 or record[-1] != _NEWLINE or record.find(b"\n") != len(record) - 1:
        raise LogError("empty or header-less session log")
    try:
        parsed = _parse_header_value(record[:-1].decode("utf-8", "replace"))
    except ValueError:
        raise LogError("corrupt session log: header line is not valid JSON") from None
    if isinstance(parsed, dict):
        version = parsed.get("version", UNDEFINED)
        if is_number(version) and version != SESSION_FORMAT_VERSION:
            raise LogError(version_refusal(parsed.get("id", UNDEFINED), version), unsupported=True)
    if not is_header_line(parsed):
        raise LogError("corrupt session log: first line is not a session header")
    return from_header_line(parsed)


# --- packed chunk rows ----------------------------------------------------


def _exact_keys(value: dict[str, Any], keys: tuple[str, ...]) -> bool:
    return len(value) == len(keys) and all(key in value for key in keys)


def _run_payload(data: dict[str, Any], payload_key: str) -> list[str]:
    if not (is_number(data.get("turn")) and is_number(data.get("step")) and is_number(data.get("index"))):
        raise _RowError("turn/step/index must be numbers")
    payload = data.get(payload_key)
    if not isinstance(payload, list) or not payload or not all(isinstance(item, str) for item in payload):
        raise _RowError(f"{payload_key} must be a non-empty string array")
    dt = data.get("dt")
    if not isinstance(dt, list) or not all(is_safe_integer(gap) for gap in dt):
        raise _RowError("dt must be an array of safe integers")
    if len(dt) != len(payload) - 1:
        raise _RowError("dt length does not match members")
    return payload


_TOOL_KEYS_NAMED: Final = ("turn", "step", "index", "id", "name", "dt", "args")
_TOOL_KEYS: Final = ("turn", "step", "index", "id", "dt", "args")
_TEXT_KEYS: Final = ("turn", "step", "index", "dt", "texts")


def packed_row(value: Any) -> tuple[int, list[Any]] | None:
    """Upstream's ``validateRow`` for a packed chunk row: the first seq and every member's time
    of the events ``expandRow`` would make (see :meth:`EventSink.push_chunks`), or ``None``
    for a record that is one event as is. :class:`_RowError` for a row upstream refuses.
    """
    tag = value.get("type") if isinstance(value, dict) else None
    if not (isinstance(tag, str) and tag in _ROW_TAGS):
        return None
    if not _exact_keys(value, ("type", "seq0", "time0", "data")):
        raise _RowError("envelope")
    seq0, time0, data = value["seq0"], value["time0"], value["data"]
    if not is_safe_integer(seq0) or seq0 < 0:
        raise _RowError("seq0")
    if not is_safe_integer(time0):
        raise _RowError("time0")
    if not isinstance(data, dict):
        raise _RowError("data")  # an array has index keys, never the exact row keys
    if tag == "tool-call-chunks":
        named = _exact_keys(data, _TOOL_KEYS_NAMED)
        if not named and not _exact_keys(data, _TOOL_KEYS):
            raise _RowError("data keys")
        if not isinstance(data["id"], str) or (named and not isinstance(data["name"], str)):
            raise _RowError("id/name")
        members = _run_payload(data, "args")
    else:
        if not _exact_keys(data, _TEXT_KEYS):
            raise _RowError("data keys")
        members = _run_payload(data, "texts")
    if not is_safe_integer(seq0 + len(members) - 1):
        raise _RowError("member seqs")
    times = list(accumulate(data["dt"], initial=time0))
    if not all(map(is_safe_integer, times)):
        raise _RowError("member times")
    return seq0, times


# --- the event scanner ----------------------------------------------------


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

    def __init__(self, header_record: bytes, start: StartLog) -> None:
        self.header = parse_header_record(header_record)
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
        run = MAX_LINE_BYTES + 1 if self._oversized else self._part_bytes
        line = self._line + 1

        def too_long() -> LimitExceeded:
            return LimitExceeded(
                f"session log line {line} is larger than {MAX_LINE_BYTES} bytes, "
                "the most this reader holds in memory"
            )

        def guard(output: bytes) -> None:
            nonlocal run, line
            first = output.find(b"\n")
            if first == -1:
                run += len(output)
            elif run + first > MAX_LINE_BYTES:
                raise too_long()
            else:
                line += output.count(b"\n")
                run = len(output) - output.rfind(b"\n") - 1
            if run > MAX_LINE_BYTES:
                raise too_long()

        return guard

    def _note_oversized(self, piece: bytes) -> None:
        window = self._overlap + piece
        if b"turn/end" in window or b"\\" in window:
            self._oversized_matters = True
        self._overlap = window[-8:]

    def _take_line(self, tail: bytes, end_byte: int) -> None:
        if self._oversized:
            self._note_oversized(tail)
            self._oversized = False
            self._line += 1
            if self._issue is None or self._oversized_matters:
                raise LimitExceeded(
                    f"session log line {self._line} is larger than {MAX_LINE_BYTES} bytes, "
                    "the most this reader holds in memory"
                )
            return
        if self._parts:
            if self._part_bytes + len(tail) > MAX_LINE_BYTES:
                self._hold(tail)
                self._take_line(b"", end_byte)
                return
            self._parts.append(tail)
            line = b"".join(self._parts)
            self._parts = []
            self._part_bytes = 0
        else:
            if len(tail) > MAX_LINE_BYTES:
                self._hold(tail)
                self._take_line(b"", end_byte)
                return
            line = tail
        self._consume(line, end_byte)

    def _consume(self, line: bytes, end_byte: int) -> None:
        self._line += 1
        if self._issue is not None and not _could_close_turn(line):
            return
        try:
            value = js_parse(line.decode("utf-8", "replace"))
            row = packed_row(value)
        except (ValueError, _RowError):
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
        if self._issue is not None:
            if _type_of(value) == "turn/end":
                raise LogError(self._issue)
            return
        if value is None:
            raise LogError("Cannot read properties of null (reading 'seq')")
        seq = value.get("seq", UNDEFINED) if isinstance(value, dict) else UNDEFINED
        if not (is_number(seq) and seq == self.event_count):
            self._issue = self._gap(seq)
            if _type_of(value) == "turn/end":
                raise LogError(self._issue)
            return
        self._sink.push(value)
        self.event_count += 1
        self.committed_bytes = end_byte

    def _gap(self, seq: Any) -> str:
        return (
            f"corrupt session log: seq gap in committed region at line {self._line} "
            f"(expected {self.event_count}, got {js_string(seq)})"
        )


# --- files ------------------------------------------------------------------


@dataclass(frozen=True)
class LogPrefix:
    """What one read produced: the header, and how much of the log the events cover."""

    header: dict[str, Any]
    event_count: int
    torn: bool


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


def _file_size(handle: IO[bytes]) -> int:
    return os.fstat(handle.fileno()).st_size


def _read_span(handle: IO[bytes], offset: int, length: int) -> bytes:
    handle.seek(offset)
    return handle.read(length)


def read_first_line(handle: IO[bytes], stop: AbortSignal | None = None) -> str | None:
    """Upstream's ``readFirstLine`` (plain listing): the first line, or ``None`` without one."""
    parts: list[bytes] = []
    total = 0
    while True:
        check(stop)
        chunk = handle.read(8192)
        if not chunk:
            return None
        newline = chunk.find(b"\n")
        if newline != -1:
            parts.append(chunk[:newline])
            return b"".join(parts).decode("utf-8", "replace")
        parts.append(chunk)
        total += len(chunk)
        if total > MAX_LINE_BYTES:
            raise LimitExceeded(f"session log header line is larger than {MAX_LINE_BYTES} bytes")


# --- zstd container -----------------------------------------------------------


class Frame(NamedTuple):
    """One zstd frame's byte range and the most plaintext it can hold (``end`` ``None``: torn)."""

    start: int
    end: int | None
    bound: int


@dataclass
class FrameScan:
    """A zstd log's frame structure, validated whole: how many complete frames, the first one,
    and where a torn final frame starts. Nothing per frame is kept (a log of eight million
    empty frames costs no more memory than one of three)."""

    count: int
    first: Frame | None
    torn_start: int | None


_FRAME_HEAD_MAX: Final = 4 + 1 + 14 + 3
"""A frame's magic, descriptor, longest header rest and first block header."""


def zstd_frames(
    handle: IO[bytes], size: int, stop: AbortSignal | None = None, offset: int = 0
) -> Iterator[Frame]:
    """Upstream's ``scanZstdFrames`` over the first ``size`` bytes of a file, lazily, without decoding.

    Invalid complete structure raises :class:`LogError`; end of data inside the last frame
    yields it as torn (``end`` ``None``). Each frame's ``bound`` is its plaintext at most: a raw
    or RLE block's size, a compressed block's :data:`_BLOCK_MAX_OUTPUT`. The file is read
    through a :data:`READ_CHUNK` buffer and headers are parsed in place: a log may be millions
    of tiny frames, so this loop is the cost of reading one. ``offset``: where a frame starts.
    """
    data = b""
    base = 0  # file offset of data[0]
    count = 0
    from_bytes = int.from_bytes
    while offset < size:
        count += 1
        if not count & 1023:
            check(stop)
        start = offset
        if offset - base + _FRAME_HEAD_MAX > len(data) and base + len(data) < size:
            handle.seek(offset)
            data = b""  # drop the old buffer first: one buffer at a time, not two
            data, base = handle.read(min(READ_CHUNK, size - offset)), offset
        at = offset - base
        if size - offset < 5:
            if size - offset == 4 and from_bytes(data[at : at + 4], "little") != ZSTD_MAGIC:
                raise LogError(f"corrupt Zstandard session log: invalid frame magic at byte {offset}")
            yield Frame(start, None, 0)
            return
        if from_bytes(data[at : at + 4], "little") != ZSTD_MAGIC:
            raise LogError(f"corrupt Zstandard session log: invalid frame magic at byte {offset}")
        descriptor = data[at + 4]
        offset += 5
        if descriptor & 24:
            raise LogError(f"corrupt Zstandard session log: reserved frame-header bit at byte {offset - 1}")
        remaining = _HEADER_REST[descriptor]
        if size - offset < remaining:
            yield Frame(start, None, 0)
            return
        offset += remaining
        bound = 0
        while True:
            if size - offset < 3:
                yield Frame(start, None, 0)
                return
            at = offset - base
            if at < 0 or at + 3 > len(data):
                handle.seek(offset)
                data = b""
                data, base, at = handle.read(min(READ_CHUNK, size - offset)), offset, 0
            block_header = from_bytes(data[at : at + 3], "little")
            offset += 3
            block_type = (block_header >> 1) & 3
            if block_type == 3:
                raise LogError(f"corrupt Zstandard session log: reserved block type at byte {offset - 3}")
            if block_type == 1:  # RLE: one stored byte, ``size`` copies of it
                payload, bound = 1, bound + (block_header >> 3)
            elif block_type == 2:
                payload, bound = block_header >> 3, bound + _BLOCK_MAX_OUTPUT
            else:
                payload = block_header >> 3
                bound += payload
            if size - offset < payload:
                yield Frame(start, None, 0)
                return
            offset += payload
            if block_header & 1:
                break
        if descriptor & 4:
            if size - offset < 4:
                yield Frame(start, None, 0)
                return
            offset += 4
        yield Frame(start, offset, bound)


def scan_zstd_frames(
    handle: IO[bytes], size: int, max_frames: int | None = None, stop: AbortSignal | None = None
) -> FrameScan:
    """The structure :func:`zstd_frames` finds, validated to the end (or to ``max_frames``)."""
    count = 0
    first: Frame | None = None
    for frame in zstd_frames(handle, size, stop):
        if frame.end is None:
            return FrameScan(count, first, frame.start)
        count += 1
        first = first or frame
        if count == max_frames:
            break
    return FrameScan(count, first, None)


def _header_rest(descriptor: int) -> int:
    """Bytes of a frame header after its magic number and descriptor byte: the window
    descriptor, dictionary id and content size that ``descriptor``'s flags declare."""
    single_segment = bool(descriptor & 32)
    dictionary_flag = descriptor & 3
    content_flag = descriptor >> 6
    return (
        (0 if single_segment else 1)
        + (4 if dictionary_flag == 3 else dictionary_flag)
        + ((1 if single_segment else 0) if content_flag == 0 else 1 << content_flag)
    )


_HEADER_REST: Final = tuple(_header_rest(descriptor) for descriptor in range(256))


def _block_payload(block_header: int) -> int:
    """Bytes that follow a block's 3-byte header (an RLE block stores its one byte)."""
    return 1 if (block_header >> 1) & 3 == 1 else block_header >> 3


def _frame_pieces(handle: IO[bytes], start: int, end: int) -> Iterator[bytes]:
    """A frame's bytes cut at block boundaries, so each decoder call yields at most one block.

    For a torn frame ``end`` is the end of the data and the last piece may be partial.
    """
    header = _read_span(handle, start, min(end - start, 5))
    if len(header) < 5:
        if header:
            yield header
        return
    rest = _header_rest(header[4])
    offset = start + 5 + rest
    yield header + _read_span(handle, start + 5, min(rest, end - start - 5))
    while offset < end:
        block_header = _read_span(handle, offset, min(3, end - offset))
        if len(block_header) < 3:
            yield block_header
            return
        value = int.from_bytes(block_header, "little")
        length = min(3 + _block_payload(value), end - offset)
        while length > 0:  # a declared block may be up to 2 MiB: hand it over in bounded slices
            piece = _read_span(handle, offset, min(length, READ_CHUNK))
            if not piece:
                return
            yield piece
            offset += len(piece)
            length -= len(piece)
        if value & 1:
            break
    if offset < end:
        yield _read_span(handle, offset, end - offset)


class _FrameFailed(Exception):
    pass


def _decode_frame(
    handle: IO[bytes],
    start: int,
    end: int,
    emit: Callable[[bytes], None] | None,
    complete: bool,
    stop: AbortSignal | None,
) -> None:
    """Decode one frame, passing output to ``emit``; raise :class:`_FrameFailed` if it does not decode.

    A complete frame must end exactly at ``end`` (checksum verified); a torn
    frame is decoded as far as its bytes go (upstream's ``ZSTD_e_flush`` read).
    """
    zstd = zstd_codec()
    with zstd.frame_decoder() as decoder:
        try:
            for piece in _frame_pieces(handle, start, end):
                check(stop)
                if decoder.eof:
                    raise _FrameFailed("trailing input")
                output = decoder.decompress(piece)
                if output and emit is not None:
                    emit(output)
        except zstd.error as error:
            raise _FrameFailed(str(error)) from error
    if complete and (not decoder.eof or decoder.unused_data):
        raise _FrameFailed("incomplete frame")


def zstd_plaintext(handle: IO[bytes], size: int, stop: AbortSignal | None = None) -> Iterator[bytes]:
    """The plaintext of a zstd log's first ``size`` bytes in order, for scans that need no replay.

    Each piece is at most one block's output (a frame may expand to gigabytes), each frame is
    decoded from exactly its own bytes (so no backend copies the rest of the input after a frame
    end), and the pieces end quietly at the first damage or at a torn end, after everything that
    decoded before it.
    """
    zstd = zstd_codec()
    try:
        for frame in zstd_frames(handle, size, stop):
            end = size if frame.end is None else frame.end
            with zstd.frame_decoder() as decoder:
                for piece in _frame_pieces(handle, frame.start, end):
                    check(stop)
                    if decoder.eof:
                        return
                    output = decoder.decompress(piece)
                    if output:
                        yield output
    except (LogError, zstd.error):
        return


_QUICK_FRAME_OUTPUT: Final = 1 << 20
"""Most plaintext :func:`_quick_first_frame` may decode in one call (a header is a few hundred bytes)."""
_BLOCK_MAX_OUTPUT: Final = 128 * 1024


def _quick_first_frame(prefix: bytes) -> bytes | None:
    """The first frame's plaintext when the frame lies whole in ``prefix`` (a log's first bytes),
    is well formed, and decodes cleanly in one call to at most :data:`_QUICK_FRAME_OUTPUT`.

    ``None`` leaves every other case (torn, corrupt, dictionary, large) to the general path,
    which then reads the file block by block and says exactly what is wrong. When this returns
    bytes, they are what that path would decode: the same frame, validated the same way
    (checksum, nothing after its end), with a bound on the output known before decoding.
    """
    size = len(prefix)
    if size < 5 or int.from_bytes(prefix[:4], "little") != ZSTD_MAGIC:
        return None
    descriptor = prefix[4]
    if descriptor & 24:
        return None
    offset = 5 + _header_rest(descriptor)
    bound = 0
    while True:
        if size - offset < 3:
            return None
        block = int.from_bytes(prefix[offset : offset + 3], "little")
        offset += 3
        block_type = (block >> 1) & 3
        if block_type == 3:
            return None
        bound += _BLOCK_MAX_OUTPUT if block_type == 2 else block >> 3  # raw or RLE: its size is its output
        offset += _block_payload(block)
        if offset > size or bound > _QUICK_FRAME_OUTPUT:
            return None
        if block & 1:
            break
    if descriptor & 4:
        offset += 4  # the checksum
        if offset > size:
            return None
    zstd = zstd_codec()
    with zstd.frame_decoder() as decoder:
        try:
            output = decoder.decompress(prefix[:offset])
        except zstd.error:
            return None
    return output if decoder.eof and not decoder.unused_data else None


BATCH_OUTPUT: Final = 1 << 20
"""Most plaintext consecutive frames may hold to be decoded in one call (dsh appends one frame
per event, so a log is mostly small frames; one decoder call each would cost more than the bytes)."""


def _frames_output(
    handle: IO[bytes],
    start: int,
    end: int,
    stop: AbortSignal | None,
    watch: Callable[[bytes], None] | None,
) -> bytes | None:
    """The plaintext of the consecutive complete frames from ``start`` to ``end``, decoded in one
    call, or ``None`` if they do not all decode (the caller then decodes them one by one, which
    names the frame that fails).

    The range comes from the validated structure, so its frames end where their blocks say;
    each frame's checksum is verified by the decoder.
    """
    check(stop)
    handle.seek(start)
    data = handle.read(end - start)
    zstd = zstd_codec()
    assert zstd.decode_frames is not None  # only codecs that decode across frames batch them
    try:
        output = zstd.decode_frames(data)
    except zstd.error:
        return None
    if watch is not None:
        watch(output)
    return output


class _TooLarge(Exception):
    """Stops decoding a frame whose output is already known to be too large to use."""


def _frame_output(
    handle: IO[bytes],
    start: int,
    end: int,
    stop: AbortSignal | None,
    limit: int,
    *,
    whole: bool = True,
    watch: Callable[[bytes], None] | None = None,
) -> bytes | None:
    """A validated complete frame's plaintext, or ``None`` if it is larger than ``limit``.

    With ``whole=False`` decoding stops as soon as the output passes ``limit``
    (a header frame that large is refused whatever the rest holds, so a
    decompression bomb in it costs ``limit`` bytes, not its full expansion).
    ``watch`` sees each piece of output as it is decoded and may raise to stop.
    """
    held: list[bytes] = []
    held_bytes = 0
    overflow = False

    def keep(output: bytes) -> None:
        nonlocal held_bytes, overflow
        if watch is not None:
            watch(output)
        if overflow:
            return
        held_bytes += len(output)
        if held_bytes > limit:
            if not whole:
                raise _TooLarge
            overflow = True
            held.clear()
        else:
            held.append(output)

    try:
        _decode_frame(handle, start, end, keep, True, stop)
    except _TooLarge:
        return None
    return None if overflow else b"".join(held)


def read_first_zstd_line(handle: IO[bytes], stop: AbortSignal | None = None) -> str | None:
    """Upstream's ``readFirstZstdLine`` (zstd listing): the header line from the first frame.

    ``None`` when the file ends before its first frame does; :class:`LogError`
    (upstream: a root-wide listing failure) for a bad first frame.
    """
    handle.seek(0)
    plaintext = _quick_first_frame(handle.read(HEADER_BUFFER))
    if plaintext is None:
        first = scan_zstd_frames(handle, _file_size(handle), 1, stop).first
        if first is None or first.end is None:
            return None
        try:
            plaintext = _frame_output(handle, first.start, first.end, stop, MAX_LINE_BYTES + 1, whole=False)
        except _FrameFailed:
            raise LogError("corrupt Zstandard session log: header frame failed validation") from None
        if plaintext is None:
            raise LimitExceeded(f"session log header line is larger than {MAX_LINE_BYTES} bytes")
    _assert_header_frame(plaintext)
    return plaintext[:-1].decode("utf-8", "replace")


def _assert_header_frame(plaintext: bytes) -> None:
    if len(plaintext) == 0 or plaintext.find(b"\n") != len(plaintext) - 1:
        raise LogError("corrupt Zstandard session log: first frame is not exactly one header line")


# --- whole logs ----------------------------------------------------------------


def _read_plain(handle: IO[bytes], size: int, start: StartLog, stop: AbortSignal | None) -> LogPrefix:
    handle.seek(0)
    header_parts: list[bytes] = []
    header_bytes = 0
    remaining = size
    chunk = b""
    while True:
        check(stop)
        chunk = handle.read(min(READ_CHUNK, remaining)) if remaining > 0 else b""
        remaining -= len(chunk)
        if not chunk:
            raise LogError("empty or header-less session log")
        newline = chunk.find(b"\n")
        if newline != -1:
            header_parts.append(chunk[: newline + 1])
            chunk = chunk[newline + 1 :]
            break
        header_parts.append(chunk)
        header_bytes += len(chunk)
        if header_bytes > MAX_LINE_BYTES:
            raise LimitExceeded(f"session log header line is larger than {MAX_LINE_BYTES} bytes")
    scanner = EventScanner(b"".join(header_parts), start)
    while chunk:
        scanner.write(chunk)
        check(stop)
        chunk = handle.read(min(READ_CHUNK, remaining)) if remaining > 0 else b""
        remaining -= len(chunk)
    return LogPrefix(scanner.header, scanner.event_count, scanner.committed_bytes < size)


def _read_zstd(handle: IO[bytes], size: int, start: StartLog, stop: AbortSignal | None) -> LogPrefix:
    scan = scan_zstd_frames(handle, size, None, stop)  # the whole structure first, as upstream
    first = scan.first
    if first is None or first.end is None:
        raise LogError("empty or header-less Zstandard session log")

    def frame_failed(start: int) -> LogError:
        return LogError(f"corrupt Zstandard session log: frame at byte {start} failed validation")

    try:
        header = _frame_output(handle, first.start, first.end, stop, MAX_LINE_BYTES + 1, whole=False)
    except _FrameFailed:
        raise frame_failed(first.start) from None
    if header is None:
        raise LimitExceeded(f"session log header line is larger than {MAX_LINE_BYTES} bytes")
    _assert_header_frame(header)
    scanner = EventScanner(header, start)

    def one(frame: Frame) -> None:
        assert frame.end is not None
        try:
            plaintext = _frame_output(
                handle, frame.start, frame.end, stop, FRAME_BUFFER_BYTES, watch=scanner.line_guard()
            )
        except _FrameFailed:
            raise frame_failed(frame.start) from None
        if plaintext is not None:
            scanner.write(plaintext)
        else:
            _decode_frame(handle, frame.start, frame.end, scanner.write, True, stop)

    def flush(batch_start: int, batch_end: int, frames: int) -> None:
        if frames > 1:
            plaintext = _frames_output(handle, batch_start, batch_end, stop, watch=scanner.line_guard())
            if plaintext is not None:
                scanner.write(plaintext)
                return
        # One frame, or a batch that failed: frame by frame (parsed again, as nothing per frame
        # is kept), so the error names the frame that fails.
        for frame in zstd_frames(handle, batch_end, stop, batch_start):
            one(frame)

    complete = itertools.islice(zstd_frames(handle, size, stop), 1, scan.count)
    if zstd_codec().decode_frames is None:
        # The standard library's codec decodes one frame per call anyway: batches would only
        # hold their bytes and a second frame walk beside this walk's own buffer.
        for frame in complete:
            one(frame)
    else:
        batch_start = batch_end = batch_bound = frames = 0
        for frame in complete:
            assert frame.end is not None
            if frames and (batch_bound + frame.bound > BATCH_OUTPUT or frame.end - batch_start > READ_CHUNK):
                flush(batch_start, batch_end, frames)
                frames = 0
            if not frames:
                batch_start, batch_bound = frame.start, 0
            batch_end = frame.end
            batch_bound += frame.bound
            frames += 1
        if frames:
            flush(batch_start, batch_end, frames)
    if scanner.committed_bytes != scanner.input_bytes:
        raise LogError("corrupt Zstandard session log: complete frame contains a torn JSONL record")
    if scan.torn_start is None:
        return LogPrefix(scanner.header, scanner.event_count, False)
    try:
        # Upstream decodes the torn frame in one call and keeps nothing if it
        # fails, so it is validated before any of it reaches the scanner.
        _decode_frame(handle, scan.torn_start, size, None, False, stop)
    except _FrameFailed:
        return LogPrefix(scanner.header, scanner.event_count, True)
    _decode_frame(handle, scan.torn_start, size, scanner.write, False, stop)
    return LogPrefix(scanner.header, scanner.event_count, True)


def read_log(
    handle: IO[bytes],
    compression: Compression,
    start: StartLog,
    stop: AbortSignal | None = None,
) -> LogPrefix:
    """Stream one log's committed events into the sink ``start(header)`` returns; raise
    :class:`LogError` where upstream's read fails.

    The log is read as it was when opened (it is append-only); if it shrank
    meanwhile (a repair truncated it) :class:`LogChanged` asks for a new read.
    """
    size = _file_size(handle)
    reader = _read_zstd if compression == "zstd" else _read_plain
    prefix = reader(handle, size, start, stop)
    if _file_size(handle) < size:
        raise LogChanged()
    return prefix
