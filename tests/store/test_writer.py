"""The fixture writer produces dsh's real format (checked against upstream's packChunkRuns)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from dsh_session_reference.jsjson import js_stringify
from dsh_session_reference.store import JsonlSessionStore
from dsh_session_reference.store.chunk_rows import packed_row
from dsh_session_reference.store.writer import (
    SessionLog,
    encode_log,
    header_line,
    pack_chunk_runs,
    write_session_log,
)
from dsh_session_reference.store.zstd_frames import scan_zstd_frames
from zstd_backends import by_compression, zstd


def _chunk(seq: int, kind: str, *, index: int = 0, time: int | None = None, **extra: Any) -> dict[str, Any]:
    chunk: dict[str, Any] = {"type": kind, "index": index}
    if kind == "tool-call-delta":
        chunk.update({"id": "c", **extra, "argumentsDelta": f"a{seq}"})
    else:
        chunk["text"] = f"t{seq}"
    return {
        "type": "assistant/chunk",
        "seq": seq,
        "time": 100 + seq if time is None else time,
        "data": {"turn": 1, "step": 1, "chunk": chunk},
    }


def test_header_line_order_and_defaults() -> None:
    line = header_line({"id": "s", "createdAt": 5, "agentPreset": "p", "cwd": "/w", "origin": "subagent"})
    assert js_stringify(line) == (
        '{"type":"session","version":0,"id":"s","createdAt":5,"cwd":"/w","origin":"subagent",'
        '"delegationDepth":0,"agentPreset":"p"}'
    )


def test_pack_chunk_runs_matches_upstream() -> None:
    events = [
        {"type": "turn/start", "seq": 0, "time": 100, "data": {"turn": 1}},
        _chunk(1, "text-delta"),
        _chunk(2, "text-delta"),
        _chunk(3, "text-delta", time=110),
        _chunk(4, "reasoning-delta"),
        _chunk(5, "reasoning-delta"),
        _chunk(6, "tool-call-delta", index=1, name="read"),
        _chunk(7, "tool-call-delta", index=1, name="read"),
        _chunk(8, "tool-call-delta", index=1, name="read"),
        _chunk(9, "text-delta", time=120),
    ]
    packed = pack_chunk_runs(events)
    # Output of upstream's packChunkRuns for the same events (Node 24).
    assert js_stringify(packed) == (
        '[{"type":"turn/start","seq":0,"time":100,"data":{"turn":1}},'
        '{"type":"text-chunks","seq0":1,"time0":101,"data":{"turn":1,"step":1,"index":0,"dt":[1,8],'
        '"texts":["t1","t2","t3"]}},'
        '{"type":"assistant/chunk","seq":4,"time":104,"data":{"turn":1,"step":1,"chunk":{"type":"reasoning-delta",'
        '"index":0,"text":"t4"}}},'
        '{"type":"assistant/chunk","seq":5,"time":105,"data":{"turn":1,"step":1,"chunk":{"type":"reasoning-delta",'
        '"index":0,"text":"t5"}}},'
        '{"type":"tool-call-chunks","seq0":6,"time0":106,"data":{"turn":1,"step":1,"index":1,"dt":[1,1],"id":"c",'
        '"name":"read","args":["a6","a7","a8"]}},'
        '{"type":"assistant/chunk","seq":9,"time":120,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta",'
        '"index":0,"text":"t9"}}}]'
    )
    numbered: list[tuple[int, int]] = []  # what the reader makes of the rows: every event's seq and time
    for record in packed:
        row = packed_row(record)
        if row is None:
            numbered.append((record["seq"], record["time"]))
        else:
            numbered.extend(zip(range(row[0], row[0] + len(row[1])), row[1], strict=True))
    assert numbered == [(event["seq"], event["time"]) for event in events]


@zstd
def test_zstd_log_is_a_header_frame_plus_one_frame_per_batch(tmp_path: Path) -> None:
    log = SessionLog("s", 1, cwd="/w")
    log.start_turn()
    log.user("one")
    log.commit()
    log.assistant("two")
    log.commit()
    log.end_turn()
    data = encode_log(log, "zstd")
    path = tmp_path / "log"
    path.write_bytes(data)
    with open(path, "rb") as handle:
        scan = scan_zstd_frames(handle, len(data))
    assert scan.count == 4 and scan.torn_start is None
    plain = encode_log(log, "none").decode()
    assert (
        plain.splitlines()[0]
        == '{"type":"session","version":0,"id":"s","createdAt":1,"cwd":"/w","delegationDepth":0}'
    )
    assert plain.endswith("\n") and len(plain.splitlines()) == 5


@by_compression
@pytest.mark.parametrize("pack", [True, False])
def test_written_logs_read_back_exactly(tmp_path: Path, compression: str, pack: bool) -> None:
    log = SessionLog("s~é", 7, cwd="/w")
    log.start_turn()
    log.user("question")
    log.start_step()
    for k in range(5):
        log.chunk("text-delta", f"piece {k}")
    log.assistant("answer")
    log.end_step()
    log.end_turn()
    log.commit()
    path = write_session_log(tmp_path / "root", log, compression, pack_chunks=pack)
    assert path == os.path.join(str(tmp_path / "root"), "--w--", "s~007E~00E9", os.path.basename(path))
    snapshot = JsonlSessionStore(tmp_path / "root").read_surface("s~é")
    assert snapshot.captured_through_seq == len(log.events) - 1
    assert [js_stringify(e) for e in snapshot.events] == [
        js_stringify(log.events[1]),
        js_stringify(log.events[8]),
    ]


@zstd
def test_refuses_to_overwrite_any_existing_log(tmp_path: Path) -> None:
    log = SessionLog("s", 1)
    log.user("x")
    write_session_log(tmp_path, log, "none")
    for compression in ("none", "zstd"):
        with pytest.raises(FileExistsError):
            write_session_log(tmp_path, log, compression)  # type: ignore[arg-type]
