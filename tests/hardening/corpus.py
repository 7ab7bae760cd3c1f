"""A corpus of damaged session roots in the real on-disk format, each case with its expected behaviour.

Every case is one session in one shared root (so a broken log is also shown
not to hide its healthy neighbours). The bytes are built here, with the store
tests' byte builders (:mod:`store.logbuild`) and the project's log writer,
and each case states what every face must do with it:

* the store: listed or not (and its label), and ``read_surface``'s outcome;
* the resolver: ``prepare`` returns that snapshot or fails with ``READ_FAILED``
  carrying the store's message (it is derived from the store's outcome);
* the CLI and the language server: derived the same way (``prepare --json``,
  ``candidates --json``; the diagnostic code of a mention).

Messages are the ones upstream's session-query gives for the same bytes
where upstream can read them (see ``docs/limits.md`` for the cases where
this port deliberately differs: sizes and symlinks leaving the root).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import zstandard

from dsh_session_reference.jsjson import js_stringify
from dsh_session_reference.store.layout import Compression, log_path
from dsh_session_reference.store.logbase import MAX_LINE_BYTES
from store.logbuild import (
    as_zstd,
    event,
    frame,
    header,
    lines,
    one_turn,
    put,
    title,
    turn_end,
    turn_start,
    user,
)

HUGE_LINE_BYTES = 200 * 1024 * 1024
"""The single committed line of ``line-200mb``."""
BOMB_OUTPUT_BYTES = 2 * 1024**3
"""What the ``zstd-bomb`` frames expand to (from a file of a few tens of kilobytes)."""
TORN_BOMB_OUTPUT_BYTES = 512 * 1024**2
"""A torn final frame is decoded to its end (its records may be recovered), so this one is smaller."""
SECRET = "SECRET-OUTSIDE-THE-ROOT"
"""Text of the session that lives outside the root: it must never reach any output."""

Q, A = "hi", "hello"
NOT_FOUND = "SESSION_QUERY_SESSION_NOT_FOUND"
PERSISTENCE = "SESSION_QUERY_PERSISTENCE_FAILED"
CORRUPT = "SESSION_QUERY_CORRUPT_SESSION"


@dataclass(frozen=True)
class Ok:
    """``read_surface`` succeeds: ``capturedThroughSeq`` and the projected conversation texts."""

    captured: int | None
    texts: tuple[str, ...]


@dataclass(frozen=True)
class Fail:
    """``read_surface`` raises ``StoreError(code)``; ``message`` with ``{root}`` and ``{sid}`` filled in."""

    code: str
    message: str


@dataclass(frozen=True)
class Case:
    name: str
    build: Callable[[Path, str], None]
    listed: bool
    read: Ok | Fail
    label: str | None = None
    """The candidate label when listed (``None``: the id)."""
    heavy: bool = False
    """Costs seconds per read (the 200 MB line, the bomb): read by fewer faces' repetitions."""

    def message(self, root: Path) -> str:
        assert isinstance(self.read, Fail)
        return self.read.message.format(root=root, sid=self.name)


def _put(make: Callable[[str], bytes], compression: Compression = "none") -> Callable[[Path, str], None]:
    def build(root: Path, sid: str) -> None:
        put(root, sid, make(sid), compression)

    return build


def _healthy(sid: str) -> bytes:
    return lines(header(sid), *one_turn(0, Q, A), title(6, "A healthy session"))


def _invalid_utf8(root: Path, sid: str) -> None:
    raw = lines(header(sid), turn_start(0), user(1, "bad BYTES here"), turn_end(2))
    put(root, sid, raw.replace(b"BYTES", b"\xff\xfe\xc3(\xed\xa0\x80"))


def _huge_line(root: Path, sid: str) -> None:
    """A committed 200 MB line (a user message), written in chunks: never held in memory. Its title
    comes after it: discovery skips the line and keeps the title, ``prepare`` fails on the line."""
    path = log_path(str(root), "/w", sid, "none")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    prefix, suffix = js_stringify(user(7, "FILL")).encode().split(b"FILL")
    with open(path, "wb") as handle:
        handle.write(lines(header(sid), *one_turn(0, Q, A), turn_start(6)) + prefix)
        chunk = b"x" * (1024 * 1024)
        for _ in range(HUGE_LINE_BYTES // len(chunk)):
            handle.write(chunk)
        handle.write(suffix + b"\n" + lines(turn_end(8), title(9, "Past a 200 MB line")))


def bomb_frame(output_bytes: int, *, newline: bool = False) -> bytes:
    """One checksummed zstd frame expanding to ``output_bytes`` of ``a`` (a few bytes per 128 KiB)."""
    body = bytearray()
    chunker = zstandard.ZstdCompressor(level=1, write_checksum=True).chunker(size=output_bytes)
    block = b"a" * (1 << 22)
    full, rest = divmod(output_bytes - 1, len(block))
    for piece in [block] * full + [block[:rest], b"\n" if newline else b"a"]:
        body += b"".join(chunker.compress(piece))
    body += b"".join(chunker.finish())  # type: ignore[no-untyped-call]
    return bytes(body)


def _bomb(root: Path, sid: str) -> None:
    """Header frame, one real turn, then a frame expanding to 2 GiB of one line without a newline."""
    put(root, sid, as_zstd(lines(header(sid), *one_turn(0, Q, A))) + bomb_frame(BOMB_OUTPUT_BYTES), "zstd")


def _bomb_in_header(root: Path, sid: str) -> None:
    """The first frame, which listing decodes for every session, expands to 2 GiB."""
    put(root, sid, bomb_frame(BOMB_OUTPUT_BYTES, newline=True), "zstd")


def _bomb_torn(root: Path, sid: str) -> None:
    """A torn final frame (its checksum missing) expanding to TORN_BOMB_OUTPUT_BYTES of one line."""
    torn = bomb_frame(TORN_BOMB_OUTPUT_BYTES)[:-4]
    put(root, sid, as_zstd(lines(header(sid), *one_turn(0, Q, A))) + torn, "zstd")


def _zstd_frames(sid: str) -> bytes:
    return (
        frame(lines(header(sid))) + frame(lines(*one_turn(0, Q, A))) + frame(lines(*one_turn(6, "q2", "a2")))
    )


def _zstd_truncated(root: Path, sid: str) -> None:
    data = _zstd_frames(sid)
    last = frame(lines(*one_turn(6, "q2", "a2")))
    put(root, sid, data[: len(data) - len(last) // 2], "zstd")


def _zstd_corrupt(root: Path, sid: str) -> None:
    head = frame(lines(header(sid)))
    middle = bytearray(frame(lines(*one_turn(0, Q, A), user(6, "z" * 2000))))
    middle[len(middle) // 2] ^= 0x55
    put(root, sid, head + bytes(middle) + frame(lines(turn_end(7))), "zstd")


def _symlink_loop(root: Path, sid: str) -> None:
    path = Path(log_path(str(root), "/w", sid, "none"))
    path.parent.mkdir(parents=True)
    os.symlink(path.name, path)  # session.jsonl -> session.jsonl
    loop = root / "--loop--"
    os.symlink(".", loop)  # a project directory that is the root again


def outside_dir(root: Path) -> Path:
    """The sentinel tree beside the root: a valid session any escape would find."""
    return root.parent / "outside"


def _symlink_outside(root: Path, sid: str) -> None:
    outside = outside_dir(root)
    target = outside / "--w--" / sid / "session.jsonl"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(lines(header(sid), *one_turn(0, SECRET, SECRET), title(6, SECRET)))
    path = Path(log_path(str(root), "/w", sid, "none"))
    path.parent.mkdir(parents=True)
    os.symlink(target, path)


def _symlink_dir_outside(root: Path, sid: str) -> None:
    outside = outside_dir(root)
    target = outside / "--w--" / sid
    target.mkdir(parents=True, exist_ok=True)
    (target / "session.jsonl").write_bytes(lines(header(sid), *one_turn(0, SECRET, SECRET)))
    (root / "--w--").mkdir(exist_ok=True)
    os.symlink(target, root / "--w--" / sid)


def _failed(what: str) -> str:
    return 'failed to inspect session "{sid}": ' + what


def _invalid_seed(index: int, what: str) -> str:
    return (
        'stored session "{sid}" is corrupt: stored session "{sid}" failed validation: '
        f"Error: invalid seed event at index {index}: {what}"
    )


def _too_long(line: int) -> str:
    return _failed(
        f"session log line {line} is larger than {MAX_LINE_BYTES} bytes, the most this reader holds in memory"
    )


LOG = "{root}/--w--/{sid}/session.jsonl"
_TURN = one_turn(0, Q, A)
_HEADER_FRAME_BYTES = len(frame(lines(header("zstd-corrupt-frame"))))

CASES: tuple[Case, ...] = (
    Case("healthy", _put(_healthy), True, Ok(6, (Q, A)), label="A healthy session"),
    Case(
        "healthy-zstd",
        _put(lambda sid: as_zstd(_healthy(sid)), "zstd"),
        True,
        Ok(6, (Q, A)),
        label="A healthy session",
    ),
    Case("header-only", _put(lambda sid: lines(header(sid))), True, Ok(None, ())),
    Case(
        "torn-last-line",
        _put(lambda sid: lines(header(sid), *_TURN) + b'{"type":"user/message","seq":6,"ti'),
        True,
        Ok(5, (Q, A)),
    ),
    Case(
        "garbage-in-the-middle",
        _put(lambda sid: lines(header(sid), *_TURN, "}{ not json", *one_turn(6, "q2", "a2"))),
        True,
        Fail(PERSISTENCE, _failed("corrupt session log: unparsable committed event at line 7")),
    ),
    Case(
        "garbage-after-the-last-turn",  # a crash tail: cut there, as upstream
        _put(lambda sid: lines(header(sid), *_TURN, "}{ not json", turn_start(6), user(7, "lost"))),
        True,
        Ok(5, (Q, A)),
    ),
    Case(
        "seq-gap",
        _put(lambda sid: lines(header(sid), *_TURN, *one_turn(7, "q2", "a2"))),
        True,
        Fail(
            PERSISTENCE,
            _failed("corrupt session log: seq gap in committed region at line 7 (expected 6, got 7)"),
        ),
    ),
    Case(
        "seq-repeated",
        _put(lambda sid: lines(header(sid), *_TURN, *one_turn(5, "q2", "a2"))),
        True,
        Fail(
            PERSISTENCE,
            _failed("corrupt session log: seq gap in committed region at line 7 (expected 6, got 5)"),
        ),
    ),
    Case(
        "surface-op-out-of-range",
        _put(
            lambda sid: lines(
                header(sid),
                turn_start(0),
                user(1, "first"),
                event(
                    "user/message",
                    2,
                    user(2, "replaces nothing")["data"],
                    sourceEventSeqs=[1],
                    surfaceOp={"op": "replace", "start": 9, "end": 9},
                ),
                turn_end(3),
            )
        ),
        True,
        Fail(CORRUPT, _invalid_seed(2, "surface replace: start seq 9 not found in surface")),
    ),
    Case(
        "surface-op-on-a-turn",
        _put(
            lambda sid: lines(
                header(sid), event("turn/start", 0, {"turn": 1}, surfaceOp="append"), turn_end(1)
            )
        ),
        True,
        Fail(
            CORRUPT,
            _invalid_seed(0, 'session event "turn/start" is not surface-eligible and cannot carry surfaceOp'),
        ),
    ),
    Case(
        "message-without-surface-op",
        _put(
            lambda sid: lines(
                header(sid), turn_start(0), event("user/message", 1, user(1, "x")["data"]), turn_end(2)
            )
        ),
        True,
        Fail(
            CORRUPT,
            _invalid_seed(
                1, 'session event "user/message" is surface-eligible and requires a surfaceOp marker'
            ),
        ),
    ),
    Case(
        "format-version-1",  # listed (labelled by its id), unreadable: upstream's refusal
        _put(lambda sid: lines(header(sid, version=1), *_TURN)),
        True,
        Fail(
            PERSISTENCE,
            _failed(
                'session "{sid}" uses log format v1, but this harness reads only v0: the log was written '
                "by a newer harness — upgrade the harness to open it (raw log: " + LOG + ")"
            ),
        ),
    ),
    Case(
        "invalid-utf8",  # WHATWG replacement, as upstream's TextDecoder
        _invalid_utf8,
        True,
        Ok(2, ("bad \ufffd\ufffd\ufffd(\ufffd\ufffd\ufffd here",)),
    ),
    Case(
        "line-200mb",
        _huge_line,
        True,
        Fail(PERSISTENCE, _too_long(8)),
        label="Past a 200 MB line",
        heavy=True,
    ),
    Case("zstd-truncated-frame", _zstd_truncated, True, Ok(5, (Q, A))),
    Case(
        "zstd-corrupt-frame",
        _zstd_corrupt,
        True,
        Fail(
            PERSISTENCE,
            _failed(f"corrupt Zstandard session log: frame at byte {_HEADER_FRAME_BYTES} failed validation"),
        ),
    ),
    Case("zstd-bomb", _bomb, True, Fail(PERSISTENCE, _too_long(7)), heavy=True),
    Case(
        "zstd-bomb-in-header",
        _bomb_in_header,
        False,
        Fail(
            PERSISTENCE,
            f"session persistence listing failed: session log header line is larger than {MAX_LINE_BYTES} bytes",
        ),
    ),
    Case("zstd-bomb-torn", _bomb_torn, True, Ok(5, (Q, A)), heavy=True),
    Case("empty-file", _put(lambda sid: b""), False, Fail(NOT_FOUND, 'session "{sid}" not found')),
    Case(
        "symlink-loop",
        _symlink_loop,
        False,
        Fail(
            PERSISTENCE,
            "session persistence listing failed: ELOOP: too many levels of symbolic links, open '"
            + LOG
            + "'",
        ),
    ),
    Case(
        "symlink-outside",
        _symlink_outside,
        False,
        Fail(
            PERSISTENCE,
            'session persistence listing failed: session artifact "'
            + LOG
            + '" resolves outside the sessions '
            "root and is not followed",
        ),
    ),
    Case("symlink-dir-outside", _symlink_dir_outside, False, Fail(NOT_FOUND, 'session "{sid}" not found')),
)


def build_root(root: Path) -> Path:
    """Write every case into ``root`` (and the sentinel tree beside it)."""
    root.mkdir(parents=True, exist_ok=True)
    for case in CASES:
        case.build(root, case.name)
    return root
