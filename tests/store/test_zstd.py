"""The ``.jsonl.zstd`` container: torn final frames, damaged frames, and bounded decoding.

Expectations come from upstream's JSONL persistence reading the same bytes.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import zstandard

from dsh_session_reference.model import StoreError
from dsh_session_reference.store import JsonlSessionStore, logbase, logfile, zstd_frames
from dsh_session_reference.store.logbase import ZSTD_MAGIC
from zstd_backends import zstd

from .logbuild import frame, header, lines, one_turn, put, step_start, turn_end, turn_start, user

pytestmark = zstd

FIRST = lines(*one_turn())  # seqs 0-5, one complete turn
SECOND = lines(*one_turn(6, "second question", "second answer"))  # seqs 6-11


def _read(root: Path, sid: str) -> tuple[object, ...]:
    try:
        snapshot = JsonlSessionStore(root).read_surface(sid)
    except StoreError as error:
        return ("error", error.message.replace(str(root), "<root>"))
    return ("ok", snapshot.captured_through_seq, [e["seq"] for e in snapshot.events])


def _log(sid: str, *frames: bytes) -> bytes:
    return frame(lines(header(sid))) + b"".join(frames)


def _cases() -> dict[str, tuple[bytes, tuple[object, ...]]]:
    second = frame(SECOND)
    rnd = random.Random(7)
    big_text = "".join(rnd.choice("abcdefghij ") for _ in range(300_000))
    big = frame(lines(turn_start(6, 2), user(7, big_text), user(8, "tail"), turn_end(9, 2)))
    wide = "".join(chr(0x4E00 + rnd.randrange(20_000)) for _ in range(100_000))
    raw = zstandard.ZstdCompressor(level=1, write_checksum=True).compress(
        lines(turn_start(6, 2), user(7, "before"), user(8, wide), turn_end(9, 2))
    )
    garbage_block = (
        ZSTD_MAGIC.to_bytes(4, "little")
        + bytes([0x20, 100])  # single segment, 100 bytes of content
        + (0 | 2 << 1 | 20 << 3).to_bytes(3, "little")  # a compressed block, not the last
        + b"\xff" * 20
        + b"\x01"  # the next block header, torn
    )
    bad_middle = bytearray(frame(FIRST))
    bad_middle[-1] ^= 0xFF
    skippable = (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"xyz"
    full = ("ok", 11, [1, 3, 7, 9])
    first_only = ("ok", 5, [1, 3])
    return {
        "complete": (_log("complete", frame(FIRST), second), full),
        "no-checksums": (
            frame(lines(header("no-checksums")), checksum=False)
            + frame(FIRST, checksum=False)
            + frame(SECOND, checksum=False),
            full,
        ),
        "torn-mid-frame": (_log("torn-mid-frame", frame(FIRST), second[: len(second) // 2]), first_only),
        "torn-checksum-only": (_log("torn-checksum-only", frame(FIRST), second[:-4]), full),
        "torn-inside-checksum": (_log("torn-inside-checksum", frame(FIRST), second[:-2]), full),
        "torn-inside-magic": (_log("torn-inside-magic", frame(FIRST), second[:2]), first_only),
        "torn-inside-frame-header": (_log("torn-inside-frame-header", frame(FIRST), second[:6]), first_only),
        "junk-under-4-bytes": (_log("junk-under-4-bytes", frame(FIRST), b"abc"), first_only),
        "junk-4-bytes": (
            _log("junk-4-bytes", frame(FIRST), b"abcd"),
            (
                "error",
                'failed to inspect session "junk-4-bytes": corrupt Zstandard session log: invalid frame magic at byte 383',
            ),
        ),
        "skippable-frame": (
            _log("skippable-frame", frame(FIRST), skippable, second),
            (
                "error",
                'failed to inspect session "skippable-frame": corrupt Zstandard session log: invalid frame magic at byte 384',
            ),
        ),
        "bad-checksum-in-complete-frame": (
            _log("bad-checksum-in-complete-frame", bytes(bad_middle), second),
            (
                "error",
                'failed to inspect session "bad-checksum-in-complete-frame": corrupt Zstandard session log: '
                "frame at byte 116 failed validation",
            ),
        ),
        "complete-frame-without-newline": (
            _log("complete-frame-without-newline", frame(FIRST), frame(SECOND[:-1])),
            (
                "error",
                'failed to inspect session "complete-frame-without-newline": corrupt Zstandard session log: '
                "complete frame contains a torn JSONL record",
            ),
        ),
        "bad-line-in-torn-frame": (
            _log(
                "bad-line-in-torn-frame",
                frame(FIRST),
                frame(lines(user(6, "kept")) + b"garbage\n" + lines(user(8, "x")))[:-4],
            ),
            ("ok", 6, [1, 3, 6]),
        ),
        "bad-line-then-turn-end-in-torn-frame": (
            _log(
                "bad-line-then-turn-end-in-torn-frame",
                frame(FIRST),
                frame(b"garbage\n" + lines(turn_end(7)))[:-4],
            ),
            (
                "error",
                'failed to inspect session "bad-line-then-turn-end-in-torn-frame": corrupt session log: '
                "unparsable committed event at line 7",
            ),
        ),
        "open-turn-in-torn-frame": (
            _log(
                "open-turn-in-torn-frame",
                frame(FIRST),
                frame(lines(turn_start(6, 2), user(7, "q"), step_start(8, 2)) + b'{"ty')[:-4],
            ),
            ("ok", 10, [1, 3, 7]),
        ),
        "torn-multi-block-frame": (
            _log("torn-multi-block-frame", frame(FIRST), big[: len(big) * 2 // 3]),
            ("ok", 7, [1, 3]),
        ),
        "torn-raw-block-is-streamed": (
            _log("torn-raw-block-is-streamed", frame(FIRST), raw[: len(raw) * 3 // 4]),
            ("ok", 8, [1, 3, 7]),
        ),
        # A torn frame whose complete first block does not decode gives up nothing at all.
        "torn-frame-that-fails-to-decode": (
            _log("torn-frame-that-fails-to-decode", frame(FIRST), garbage_block),
            first_only,
        ),
        "header-only": (_log("header-only"), ("ok", None, [])),
    }


def test_zstd_container_reads_as_upstream(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    got, want = {}, {}
    for sid, (data, expected) in _cases().items():
        put(root, sid, data, "zstd")
        got[sid], want[sid] = _read(root, sid), expected
    assert got == want


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (
            frame(lines(header("bad")) + FIRST),
            "corrupt Zstandard session log: first frame is not exactly one header line",
        ),
        (lines(header("bad")) + FIRST, "corrupt Zstandard session log: invalid frame magic at byte 0"),
    ],
)
def test_bad_header_frames_skip_only_that_session(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, data: bytes, message: str
) -> None:
    """Upstream's listing throws for the whole root here; only this session is skipped."""
    root = tmp_path / "sessions"
    put(root, "bad", data, "zstd")
    put(root, "good", _log("good", frame(FIRST)), "zstd")
    store = JsonlSessionStore(root)
    with caplog.at_level("WARNING", logger="dsh_session_reference.store"):
        assert [r.id for r in store.list_sessions()] == ["good"]
    assert any(message in record.getMessage() for record in caplog.records)
    with pytest.raises(StoreError) as raised:
        store.read_surface("bad")
    assert raised.value.message == f"session persistence listing failed: {message}"


def test_empty_and_torn_header_frames_hide_the_session(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    put(root, "empty", b"", "zstd")
    put(root, "torn", frame(lines(header("torn")))[:10], "zstd")
    assert JsonlSessionStore(root).list_sessions() == []


def test_large_frames_are_validated_before_use(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A frame larger than the buffer is decoded twice (validate, then scan): same result."""
    root = tmp_path / "sessions"
    put(root, "s", _log("s", frame(FIRST), frame(SECOND)), "zstd")
    expected = _read(root, "s")
    monkeypatch.setattr(logfile, "FRAME_BUFFER_BYTES", 64)
    assert _read(root, "s") == expected == ("ok", 11, [1, 3, 7, 9])
    bad = bytearray(frame(SECOND))
    bad[-1] ^= 0xFF
    put(root, "t", _log("t", frame(FIRST), bytes(bad)), "zstd")
    assert _read(root, "t")[1].endswith("failed validation")  # type: ignore[union-attr]


def test_decompression_bomb_is_read_in_bounded_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Output per decoder call is one block; an endless line fails clearly instead of being held."""
    monkeypatch.setattr(logfile, "MAX_LINE_BYTES", 1 << 20)
    compressor = zstandard.ZstdCompressor(level=3, write_checksum=True).compressobj()
    bomb = b"".join(compressor.compress(b"a" * (1 << 20)) for _ in range(8)) + compressor.flush()
    root = tmp_path / "sessions"
    # No newline in a complete frame: refused once the line passes the limit, not decoded to its end
    # (upstream, holding it whole, would end with "complete frame contains a torn JSONL record").
    put(root, "bomb", _log("bomb", frame(FIRST), bomb), "zstd")
    assert _read(root, "bomb") == (
        "error",
        'failed to inspect session "bomb": session log line 7 is larger than 1048576 bytes, '
        "the most this reader holds in memory",
    )
    # The same line committed by a newline is larger than this reader holds.
    lined = zstandard.ZstdCompressor(write_checksum=True).compress(
        lines(turn_start(6, 2)) + b"x" * (2 << 20) + b"\n"
    )
    put(root, "line", _log("line", frame(FIRST), lined), "zstd")
    assert _read(root, "line") == (
        "error",
        'failed to inspect session "line": session log line 8 is larger than 1048576 bytes, '
        "the most this reader holds in memory",
    )


def test_oversized_line_after_a_crash_cannot_matter_and_is_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logfile, "MAX_LINE_BYTES", 1 << 16)
    root = tmp_path / "sessions"
    data = lines(header("s"), *one_turn(), "garbage") + b"y" * (1 << 18) + b"\n" + lines(user(7, "later"))
    put(root, "s", data, "none")
    assert _read(root, "s") == ("ok", 5, [1, 3])
    torn = lines(header("t"), *one_turn()) + b"z" * (1 << 18)  # an oversized torn tail is just a torn tail
    put(root, "t", torn, "none")
    assert _read(root, "t") == ("ok", 5, [1, 3])
    mentions_turn_end = lines(header("u"), *one_turn(), "garbage") + b"turn/end" * (1 << 15) + b"\n"
    put(root, "u", mentions_turn_end, "none")
    assert _read(root, "u")[0] == "error"


def _first_line(path: Path, data: bytes, *, quick: bool) -> tuple[str, object]:
    """``read_first_zstd_line`` over a file of ``data``, through the in-memory path or only the
    general one."""
    path.write_bytes(data)
    original = zstd_frames._quick_first_frame
    try:
        if not quick:
            zstd_frames._quick_first_frame = lambda prefix: None  # type: ignore[assignment]
        with open(path, "rb", buffering=logbase.HEADER_BUFFER) as handle:
            return ("ok", zstd_frames.read_first_zstd_line(handle))
    except logbase.LogError as error:
        return (type(error).__name__, error.message)
    finally:
        zstd_frames._quick_first_frame = original


def _header_frames() -> list[bytes]:
    """First frames as writers may make them, and as damage or malice may leave them."""
    rnd = random.Random(11)
    line = lines(header("quick"))
    long_line = lines(header("quick", cwd="/" + "w" * 40_000))
    rle = (
        ZSTD_MAGIC.to_bytes(4, "little")
        + bytes([0x00, 0x58])  # no content size, a window descriptor
        + b"".join((1 | 1 << 1 | (128 << 10) << 3).to_bytes(3, "little") + b"a" for _ in range(20))
    )  # RLE blocks, none the last: 2.5 MB of output from 80 bytes (and no end)
    rle_end = rle[:-4] + (1 | 1 << 1 | 10 << 3 | 1).to_bytes(3, "little") + b"\n"
    frames = [
        frame(line),
        frame(line, checksum=False),
        frame(line + line),  # two lines in the header frame
        frame(line[:-1]),  # no newline
        frame(b""),
        frame(long_line),  # larger than the read-ahead
        zstandard.ZstdCompressor(level=1, write_content_size=False).compress(line),
        zstandard.ZstdCompressor(level=19, write_checksum=True).compress(line),
        frame(line) + frame(line),
        rle,
        rle_end,
        (0x184D2A50).to_bytes(4, "little") + (3).to_bytes(4, "little") + b"xyz" + frame(line),
        b"",
        b"\x28\xb5",
    ]
    base = frame(line)
    for _ in range(300):
        damaged = bytearray(base)
        for _ in range(rnd.randint(1, 3)):
            damaged[rnd.randrange(len(damaged))] ^= 1 << rnd.randrange(8)
        frames.append(bytes(damaged))
        frames.append(base[: rnd.randrange(len(base))])  # torn
        frames.append(base + bytes(rnd.randrange(256) for _ in range(rnd.randint(1, 8))))
    return frames


def test_the_in_memory_header_path_answers_as_the_general_path(tmp_path: Path) -> None:
    outcomes: dict[str, int] = {}
    path = tmp_path / "session.jsonl.zstd"
    for data in _header_frames():
        quick = _first_line(path, data, quick=True)
        assert quick == _first_line(path, data, quick=False), data[:64]
        kind = quick[0] if quick[0] != "ok" else "none" if quick[1] is None else "line"
        outcomes[kind] = outcomes.get(kind, 0) + 1
    assert set(outcomes) == {"line", "none", "LogError"}, outcomes  # every kind of answer is covered


def test_the_in_memory_header_path_takes_the_common_frame_and_declines_bombs() -> None:
    line = lines(header("quick"))
    assert zstd_frames._quick_first_frame(frame(line) + frame(line)) == line
    assert zstd_frames._quick_first_frame(frame(line)[:-1]) is None  # torn: the general path decides
    bomb = (
        ZSTD_MAGIC.to_bytes(4, "little")
        + bytes([0x00, 0x58])
        + b"".join((1 << 1 | (128 << 10) << 3).to_bytes(3, "little") + b"a" for _ in range(9))
        + (1 | 1 << 1 | (128 << 10) << 3).to_bytes(3, "little")
        + b"a"
    )  # ten RLE blocks: 1.25 MiB of output declared in 42 bytes
    assert zstd_frames._quick_first_frame(bomb) is None
