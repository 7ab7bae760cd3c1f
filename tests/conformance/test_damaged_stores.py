"""Crash tails and corrupt lines, judged by upstream: upstream's persistence writes a
root, one log is damaged the way crashes and bad tools damage logs (torn lines and
frames, garbage, seq gaps, junk after the last frame, CRLF, invalid UTF-8), and both
sides read the same damaged files.

A log upstream cannot read stays listed (labelled by its id) and fails ``prepare``
with ``SESSION_REFERENCE_READ_FAILED``; the project words that cause itself, so for
a damaged session only the code is compared. Everything else, including what a
recovered tail keeps and ``capturedThroughSeq`` after recovery, must be identical.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from zstd_backends import zstd

from . import python_side as py
from .conftest import Oracle, Outcome, conformance_settings
from .strategies import OMIT, Agent, Damage, ListOp, PrepareOp, StoreCase, damaged_store_cases, store_cases
from .test_resolver import compare, digest

READ_FAILED = "SESSION_REFERENCE_READ_FAILED"


def _next_seq(plaintext: bytes) -> int:
    """The seq the next event would get: one past the last committed event or packed member."""
    following = 0
    for line in plaintext.split(b"\n")[1:]:
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if isinstance(record, dict) and isinstance(record.get("seq"), int):
            following = record["seq"] + 1
        elif isinstance(record, dict) and isinstance(record.get("seq0"), int):
            members = record["data"].get("texts") or record["data"].get("args") or []
            following = record["seq0"] + len(members)
    return following


def _event_line(seq: int, text: str = "x") -> bytes:
    event = {"type": "todo/write", "seq": seq, "time": 0, "data": {"todos": [{"content": text}]}}
    return json.dumps(event, separators=(",", ":")).encode("utf-8") + b"\n"


def _chunk(seq: int, **changes: Any) -> dict[str, Any]:
    """An ``assistant/chunk`` event line with ``changes`` to its envelope (``None`` drops a key)."""
    event: dict[str, Any] = {
        "type": "assistant/chunk",
        "seq": seq,
        "time": 0,
        "data": {"turn": 1, "step": 1, "chunk": {"type": "text-delta", "index": 0, "text": "x"}},
    }
    event.update(changes)
    return {key: value for key, value in event.items() if value is not None}


# The replay takes a shortcut for chunk events (most of a big log): each of these envelopes must
# still be accepted or refused exactly as upstream does.
CHUNK_ENVELOPES: list[Callable[[int], dict[str, Any]]] = [
    lambda seq: _chunk(seq),
    lambda seq: _chunk(seq, time=-(2**53) + 1),
    lambda seq: _chunk(seq, time=2**53),
    lambda seq: _chunk(seq, time=1.5),
    lambda seq: _chunk(seq, time="0"),
    lambda seq: _chunk(seq, time=None),
    lambda seq: _chunk(seq, data=None),
    lambda seq: {**_chunk(seq), "data": None},
    lambda seq: _chunk(seq, extra=1),
    lambda seq: _chunk(seq, ignorable=True),
    lambda seq: _chunk(seq, ignorable=False),
    lambda seq: _chunk(seq, surfaceOp="append"),
    lambda seq: _chunk(seq, sourceEventSeqs=[]),
    lambda seq: {key: value for key, value in _chunk(seq).items() if key != "time"} | {"extra": 0},
    lambda seq: _chunk(seq, data=None, extra=1),
]


def _first_frame_length(raw: bytes) -> int:
    decompressor = zstandard.ZstdDecompressor().decompressobj()
    decompressor.decompress(raw)
    return len(raw) - len(decompressor.unused_data)


def _damage_plain(raw: bytes, damage: Damage) -> bytes:
    header_end = raw.index(b"\n") + 1
    body = raw[header_end:]
    following = _next_seq(raw)
    kind = damage.kind
    if kind == "torn-line":
        return raw + _event_line(following)[: max(1, int(damage.position * 40))].rstrip(b"\n")
    if kind == "garbage-line":
        return raw + b"not json at all\n"
    if kind == "blank-line":
        return raw + b"\n"
    if kind == "null-line":
        return raw + b"null\n"
    if kind == "number-line":
        return raw + b"42\n"
    if kind == "empty-object-line":
        return raw + b"{}\n"
    if kind == "seq-gap-line":
        return raw + _event_line(following + 1)
    if kind == "garbage-before-turn-end":
        # Damage before the last committed turn/end rejects the log; after it, it is a crash tail.
        lines = body.split(b"\n")[:-1]
        if not lines:
            return raw + b"garbage\n"
        ends = [i for i, line in enumerate(lines) if b'"type":"turn/end"' in line]
        cut = ends[-1] if ends and damage.position < 0.7 else int(damage.position * len(lines))
        return raw[:header_end] + b"".join(line + b"\n" for line in [*lines[:cut], b"garbage", *lines[cut:]])
    if kind == "bad-packed-row":
        return (
            raw
            + json.dumps({"type": "text-chunks", "seq0": following, "time0": 0, "data": {}}).encode()
            + b"\n"
        )
    if kind == "chunk-envelope":
        chunk = CHUNK_ENVELOPES[damage.junk[0] % len(CHUNK_ENVELOPES)](following)
        return raw + json.dumps(chunk, separators=(",", ":")).encode() + b"\n"
    if kind == "cut":
        return raw[: header_end + int(damage.position * len(body))]
    if kind == "crlf":
        return raw.replace(b"\n", b"\r\n")
    if kind == "invalid-utf8":
        marker = raw.find(b'"text":"', header_end)
        if marker < 0:
            return raw + _event_line(following).replace(b'"x"', b'"\xff\xfe"')
        at = marker + len(b'"text":"')
        return raw[:at] + b"\xff" + raw[at:]
    raise AssertionError(f"unknown plain damage {kind}")


def _damage_zstd(raw: bytes, damage: Damage) -> bytes:
    first = _first_frame_length(raw)
    plaintext = _decompress_all(raw)
    kind = damage.kind
    with_checksum = zstandard.ZstdCompressor(write_checksum=True)
    if kind == "cut":
        if len(raw) <= first:
            return raw + damage.junk[:2]
        return raw[: first + int(damage.position * (len(raw) - first))]
    if kind == "junk":
        return raw + damage.junk
    if kind == "garbage-frame":
        return raw + with_checksum.compress(b"garbage\n")
    if kind == "torn-frame":
        return raw + with_checksum.compress(_event_line(_next_seq(plaintext)).rstrip(b"\n")[:20])
    if kind == "frame-without-checksum":
        return raw + zstandard.ZstdCompressor(write_checksum=False).compress(
            _event_line(_next_seq(plaintext))
        )
    raise AssertionError(f"unknown zstd damage {kind}")


def _decompress_all(raw: bytes) -> bytes:
    out = []
    rest = raw
    while rest:
        decompressor = zstandard.ZstdDecompressor().decompressobj()
        out.append(decompressor.decompress(rest))
        rest = decompressor.unused_data
    return b"".join(out)


def damage_root(root: Path, files: list[list[str]], damage: Damage) -> tuple[str, str]:
    """Damage one log in place; returns its path and its session id (from its header)."""
    relative = files[damage.target % len(files)][0]
    path = root / relative
    raw = path.read_bytes()
    plain = relative.endswith(".jsonl")
    header = json.loads((raw if plain else _decompress_all(raw[: _first_frame_length(raw)])).split(b"\n")[0])
    path.write_bytes(_damage_plain(raw, damage) if plain else _damage_zstd(raw, damage))
    return relative, header["id"]


def _both_read_failed(python: Outcome, upstream: Outcome) -> bool:
    return (
        not python.ok
        and not upstream.ok
        and python.error is not None
        and upstream.error is not None
        and python.error["code"] == upstream.error["code"] == READ_FAILED
    )


@zstd
@conformance_settings(ci_examples=60)
@given(damaged_store_cases())
def test_damaged_logs_read_like_upstream(oracle: Oracle, case_and_damage: tuple[StoreCase, Damage]) -> None:
    check_damaged(oracle, *case_and_damage)


@pytest.mark.parametrize("envelope", range(len(CHUNK_ENVELOPES)))
@conformance_settings(ci_examples=2)
@given(case=store_cases(), target=st.integers(0, 5))
def test_chunk_event_envelopes_are_judged_like_upstream(
    oracle: Oracle, envelope: int, case: StoreCase, target: int
) -> None:
    case = dataclasses.replace(case, compression="none")
    check_damaged(oracle, case, Damage(target, "chunk-envelope", 0.0, bytes([envelope])))


def check_damaged(oracle: Oracle, case: StoreCase, damage: Damage) -> None:
    """Upstream writes ``case``'s root, one log is damaged, and every call must agree."""
    root = Path(tempfile.mkdtemp(prefix="dsh-sr-damaged-"))
    try:
        written = oracle.require(
            "write_store",
            root=str(root),
            compression=case.compression,
            packChunks=case.pack_chunks,
            sessions=[s.oracle_spec() for s in case.sessions],
        )
        if not written["files"]:
            return
        damaged, damaged_id = damage_root(root, written["files"], damage)
        # Whatever the generated calls do, also list everything and read the damaged log.
        outside = Agent("agent outside the store \x00", None)
        case = dataclasses.replace(
            case,
            ops=[
                *case.ops,
                ListOp(outside, None, OMIT),
                PrepareOp(outside, [{"type": "text", "text": "x"}], [{"sessionId": damaged_id}], False),
            ],
        )
        reply = oracle.require(
            "disk",
            root=str(root),
            compression=case.compression,
            config=case.config.oracle_spec(),
            ops=[op.oracle_spec() for op in case.ops],
        )
        assert reply["rootUnchanged"], "upstream's read changed the root"
        before = digest(root)
        python = py.run_store_ops(root, case)
        assert digest(root) == before, "the Python store changed the root"
        for op, mine, theirs in zip(case.ops, python, reply["results"], strict=True):
            upstream = py.upstream_op_outcome(op, theirs)
            if isinstance(op, PrepareOp) and _both_read_failed(mine, upstream):
                continue
            compare(mine, upstream, case, op, f"damaged {damaged}: {damage}")
        oracle.count(len(case.ops))
    finally:
        shutil.rmtree(root, ignore_errors=True)
