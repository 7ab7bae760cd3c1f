"""``foldSurface`` and the streaming reader's own results, below the store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dsh_session_reference.store.logbase import LogError
from dsh_session_reference.store.logfile import read_log
from dsh_session_reference.store.surface import SurfaceError, fold_surface
from zstd_backends import by_compression

from .logbuild import as_zstd, event, header, lines, one_turn, tool_result, user


def _replace(seq: int, start: int, end: int, sources: list[int]) -> dict[str, Any]:
    return event(
        "user/message",
        seq,
        user(seq, "summary")["data"],
        surfaceOp={"op": "replace", "start": start, "end": end},
        sourceEventSeqs=sources,
    )


def test_fold_orders_replacements_in_place() -> None:
    events = [
        user(0, "a"),
        user(1, "b"),
        user(2, "c"),
        _replace(3, 0, 1, [0, 1]),
        user(4, "d"),
        _replace(5, 3, 3, [3]),
    ]
    assert fold_surface(events) == [5, 2, 4]


@pytest.mark.parametrize(
    ("events", "message"),
    [
        ([user(1, "a")], "session event seq 1 is not contiguous; expected 0"),
        (
            [user(0, "a"), _replace(1, 0, 0, [])],
            "sourceEventSeqs must not be empty except on assistant/message",
        ),
        ([user(0, "a"), _replace(1, 5, 5, [0])], "surface replace: start seq 5 not found in surface"),
        ([user(0, "a"), _replace(1, 0, 7, [0])], "surface replace: end seq 7 not found in surface"),
        (
            [user(0, "a"), user(1, "b"), _replace(2, 0, 1, [0, 0])],
            "sourceEventSeqs must not contain duplicates",
        ),
        (
            [user(0, "a"), _replace(1, 0, 0, [0, 1])],
            "sourceEventSeqs must reference earlier events: 1 >= current seq 1",
        ),
        (
            [
                user(0, "a"),
                {
                    **tool_result(1, "c", "x"),
                    "surfaceOp": {"op": "replace", "start": 0, "end": 0},
                    "sourceEventSeqs": [0],
                },
            ],
            "tool/result surface replacement must target a current tool/result",
        ),
        (
            [{**user(0, "a"), "surfaceOp": {"op": "replace", "start": 0, "end": 0, "x": 1}}],
            'session event "user/message" carries an invalid replace surfaceOp',
        ),
        (
            [event("step/end", 0, {}, sourceEventSeqs=[])],
            'session event "step/end" is not surface-eligible and cannot carry sourceEventSeqs',
        ),
    ],
)
def test_fold_messages(events: list[dict[str, Any]], message: str) -> None:
    with pytest.raises(SurfaceError) as raised:
        fold_surface(events)
    assert str(raised.value) == message


class SeqRecorder:
    """An event sink noting the seq of every event it is given."""

    def __init__(self) -> None:
        self.seqs: list[int] = []

    def push(self, event: dict[str, Any]) -> None:
        self.seqs.append(event["seq"])

    def push_chunks(self, first_seq: int, times: list[Any]) -> None:
        self.seqs.extend(range(first_seq, first_seq + len(times)))


@by_compression
def test_read_log_streams_committed_events(tmp_path: Path, compression: str) -> None:
    data = lines(header("s"), *one_turn(), user(6, "cut")) + b'{"type":"tur'
    if compression == "zstd":
        data = as_zstd(data)[:-3]  # a torn final frame in place of a torn line
    seen = SeqRecorder()
    headers: list[dict[str, Any]] = []

    def start(found: dict[str, Any]) -> SeqRecorder:
        headers.append(found)
        return seen

    (tmp_path / "log").write_bytes(data)
    with open(tmp_path / "log", "rb") as handle:
        prefix = read_log(handle, compression, start)
    assert headers == [prefix.header] and prefix.header["id"] == "s"
    assert seen.seqs == list(range(7)) and prefix.event_count == 7
    assert prefix.torn


def test_read_log_reports_upstream_errors(tmp_path: Path) -> None:
    (tmp_path / "log").write_bytes(b"")
    with (
        open(tmp_path / "log", "rb") as handle,
        pytest.raises(LogError, match=r"^empty or header-less session log$"),
    ):
        read_log(handle, "none", lambda header: SeqRecorder())
