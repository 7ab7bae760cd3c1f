"""Write session logs in dsh's real on-disk format, for sample stores and test fixtures.

The bytes follow upstream's JSONL backend: the header line, then one
``JSON.stringify`` line per event (or per packed chunk row), newline
terminated; as ``.jsonl.zstd`` the header is its own checksummed zstd frame
and every append batch one more frame. Only ever used on a directory the
caller owns (never a user's sessions root), and it refuses to overwrite a log.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar, Final

from ..jsjson import js_stringify
from .chunk_rows import exact_keys
from .jsvalue import is_number, is_safe_integer
from .layout import LOG_NAMES, Compression, log_path
from .log_header import from_header_line
from .zstd_codec import codec

MIN_RUN: Final = 3
"""Upstream packs runs of at least three same-block delta chunks into one row."""


def header_line(header: Mapping[str, Any]) -> dict[str, Any]:
    """Upstream's ``toHeaderLine``: the first line's object, in the key order a read gives it
    (:func:`~.log_header.from_header_line`), absent (or ``None``) fields omitted."""
    present = {key: value for key, value in header.items() if value is not None}
    return {"type": "session", **from_header_line({"version": 0, "delegationDepth": 0, **present})}


# --- chunk packing (upstream chunk-rows.ts) -------------------------------------


def _delta_kind(event: Mapping[str, Any]) -> str | None:
    """Upstream's ``classify``: the delta kind when the whole shape is whitelisted."""
    if event.get("type") != "assistant/chunk" or not exact_keys(event, ("type", "seq", "time", "data")):
        return None
    if not is_safe_integer(event["seq"]) or event["seq"] < 0 or not is_safe_integer(event["time"]):
        return None
    data = event["data"]
    if not isinstance(data, dict) or not exact_keys(data, ("turn", "step", "chunk")):
        return None
    if not (is_number(data["turn"]) and is_number(data["step"])):
        return None
    chunk = data["chunk"]
    if not isinstance(chunk, dict) or not is_number(chunk.get("index")):
        return None
    kind = chunk.get("type")
    if kind in ("text-delta", "reasoning-delta"):
        return (
            kind if exact_keys(chunk, ("type", "index", "text")) and isinstance(chunk["text"], str) else None
        )
    if kind == "tool-call-delta":
        shaped = exact_keys(chunk, ("type", "index", "id", "argumentsDelta")) or (
            exact_keys(chunk, ("type", "index", "id", "name", "argumentsDelta"))
            and isinstance(chunk["name"], str)
        )
        if shaped and isinstance(chunk["id"], str) and isinstance(chunk["argumentsDelta"], str):
            return "tool-call-delta"
    return None


def _continues(prev: Mapping[str, Any], nxt: Mapping[str, Any], kind: str) -> bool:
    if nxt["seq"] != prev["seq"] + 1 or not is_safe_integer(nxt["time"] - prev["time"]):
        return False
    a, b = prev["data"], nxt["data"]
    if a["turn"] != b["turn"] or a["step"] != b["step"] or a["chunk"]["index"] != b["chunk"]["index"]:
        return False
    if kind != "tool-call-delta":
        return True
    ca, cb = a["chunk"], b["chunk"]
    return ca["id"] == cb["id"] and ("name" in ca) == ("name" in cb) and ca.get("name") == cb.get("name")


def _row(kind: str, run: list[Mapping[str, Any]]) -> dict[str, Any]:
    first = run[0]
    base = {
        "turn": first["data"]["turn"],
        "step": first["data"]["step"],
        "index": first["data"]["chunk"]["index"],
        "dt": [event["time"] - run[i]["time"] for i, event in enumerate(run[1:])],
    }
    envelope = {"seq0": first["seq"], "time0": first["time"]}
    if kind == "tool-call-delta":
        call = first["data"]["chunk"]
        data = {**base, "id": call["id"]}
        if "name" in call:
            data["name"] = call["name"]
        data["args"] = [event["data"]["chunk"]["argumentsDelta"] for event in run]
        return {"type": "tool-call-chunks", **envelope, "data": data}
    texts = {**base, "texts": [event["data"]["chunk"]["text"] for event in run]}
    tag = "text-chunks" if kind == "text-delta" else "reasoning-chunks"
    return {"type": tag, **envelope, "data": texts}


def pack_chunk_runs(events: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """Upstream's ``packChunkRuns``: runs of ≥3 same-block deltas become rows, all else verbatim."""
    runs: list[tuple[str | None, list[Mapping[str, Any]]]] = []  # (delta kind or None, events)
    for event in events:
        delta = _delta_kind(event)
        if delta is not None and runs and runs[-1][0] == delta and _continues(runs[-1][1][-1], event, delta):
            runs[-1][1].append(event)
        else:
            runs.append((delta, [event]))
    out: list[Mapping[str, Any]] = []
    for kind, run in runs:
        if kind is not None and len(run) >= MIN_RUN:
            out.append(_row(kind, run))
        else:
            out.extend(run)
    return out


# --- building logs ------------------------------------------------------------------


def _blocks(content: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """A message's content: a string is one text block."""
    return [{"type": "text", "text": content}] if isinstance(content, str) else [dict(b) for b in content]


@dataclass
class SessionLog:
    """A session's header and events, built in order; ``commit()`` ends one append batch.

    Times advance by :attr:`STEP_MS` per event, so fixtures are deterministic.
    """

    STEP_MS: ClassVar[int] = 1000
    """Milliseconds from one event to the next (the benchmark's streamed logs tick faster)."""

    session_id: str
    created_at: int
    cwd: str | None = None
    header_extra: dict[str, Any] = field(default_factory=dict)
    events: list[dict[str, Any]] = field(default_factory=list)
    batch_ends: list[int] = field(default_factory=list)
    turn: int = 0
    step: int = 0

    @property
    def header(self) -> dict[str, Any]:
        """The header's fields, for :func:`header_line` (which adds the defaults and drops ``None``)."""
        return {"id": self.session_id, "createdAt": self.created_at, "cwd": self.cwd, **self.header_extra}

    @property
    def next_seq(self) -> int:
        return len(self.events)

    def append(
        self,
        kind: str,
        data: Any,
        *,
        surface_op: Any = None,
        source_event_seqs: Sequence[int] | None = None,
    ) -> int:
        """Append one event (upstream's key order) and return its seq."""
        seq = self.next_seq
        when = self.created_at + (seq + 1) * self.STEP_MS
        event: dict[str, Any] = {"type": kind, "seq": seq, "time": when, "data": data}
        if source_event_seqs is not None:
            event["sourceEventSeqs"] = list(source_event_seqs)
        if surface_op is not None:
            event["surfaceOp"] = surface_op
        self.events.append(event)
        return seq

    def commit(self) -> None:
        """End the current append batch (one zstd frame)."""
        if not self.batch_ends or self.batch_ends[-1] != len(self.events):
            self.batch_ends.append(len(self.events))

    # Conversation helpers: the shapes dsh writes.

    def message_id(self) -> str:
        return f"00000000-0000-4000-8000-{self.next_seq:012d}"

    def start_turn(self) -> int:
        self.turn += 1
        self.step = 0
        return self.append("turn/start", {"turn": self.turn})

    def end_turn(self) -> int:
        return self.append("turn/end", {"turn": self.turn, "reason": {"kind": "completed"}})

    def start_step(self) -> int:
        self.step += 1
        return self.append("step/start", {"turn": self.turn, "step": self.step})

    def end_step(self) -> int:
        return self.append("step/end", {"turn": self.turn, "step": self.step})

    def user(
        self,
        content: str | Sequence[Mapping[str, Any]],
        *,
        source: Mapping[str, Any] | None = None,
        surface_op: Any = "append",
        source_event_seqs: Sequence[int] | None = None,
        extra: Mapping[str, Any] | None = None,
    ) -> int:
        data: dict[str, Any] = {"content": _blocks(content), "source": dict(source or {"kind": "user"})}
        data.update(extra or {})
        data["role"] = "user"
        data["id"] = self.message_id()
        return self.append("user/message", data, surface_op=surface_op, source_event_seqs=source_event_seqs)

    def assistant(
        self, content: str | Sequence[Mapping[str, Any]], *, usage: Mapping[str, Any] | None = None
    ) -> int:
        message = {
            "role": "assistant",
            "content": _blocks(content),
            "source": {"kind": "model", "provider": "deepseek", "model": "deepseek-chat"},
            "id": self.message_id(),
        }
        data: dict[str, Any] = {"turn": self.turn, "step": self.step, "message": message}
        if usage is not None:
            data["usage"] = dict(usage)
        return self.append("assistant/message", data, surface_op="append")

    def chunk(self, kind: str, text: str, *, index: int = 0) -> int:
        return self.append(
            "assistant/chunk",
            {"turn": self.turn, "step": self.step, "chunk": {"type": kind, "index": index, "text": text}},
        )

    def tool_call_delta(self, call_id: str, name: str, arguments: str) -> int:
        """A streamed piece of a tool call's arguments (block 1: after the step's text)."""
        chunk = {
            "type": "tool-call-delta",
            "index": 1,
            "id": call_id,
            "name": name,
            "argumentsDelta": arguments,
        }
        return self.append("assistant/chunk", {"turn": self.turn, "step": self.step, "chunk": chunk})

    def tool_call(self, call_id: str, name: str, arguments: str) -> int:
        data = {"turn": self.turn, "step": self.step, "callId": call_id, "name": name, "arguments": arguments}
        return self.append("tool/call", data)

    def tool_result(self, call_id: str, text: str, *, call_seq: int | None = None) -> int:
        block = {"type": "tool-result", "toolCallId": call_id, "content": [{"type": "text", "text": text}]}
        message = {
            "role": "user",
            "content": [block],
            "source": {"kind": "tool", "callId": call_id},
            "id": self.message_id(),
        }
        return self.append(
            "tool/result",
            {"turn": self.turn, "step": self.step, "message": message},
            surface_op="append",
            source_event_seqs=None if call_seq is None else [call_seq],
        )

    def compaction(
        self, compaction_id: str, summary_text: str, surface: Sequence[int], *, preamble: str, tokens: int
    ) -> int:
        """dsh's compact plugin: a summary of the ``surface`` messages (seqs, in order), then the
        checkpoint message that replaces them on the surface; ends the batch. Returns the
        checkpoint's seq."""
        self.append("compaction/start", {"compactionId": compaction_id, "turn": None})
        summary = self.append(
            "compaction/summary",
            {
                "compactionId": compaction_id,
                "summary": [{"type": "text", "text": summary_text}],
                "shadowedRange": {"start": surface[0], "end": surface[-1]},
                "shadowedSeqs": list(surface),
                "shadowedTokenCount": tokens,
                "provider": "deepseek",
                "model": "deepseek-chat",
            },
        )
        checkpoint = self.user(
            [
                {"type": "text", "text": preamble},
                {"type": "text", "text": summary_text},
                {"type": "text", "text": "</compacted-summary>"},
            ],
            source={"kind": "plugin", "plugin": "compact", "compactionId": compaction_id},
            surface_op={"op": "replace", "start": surface[0], "end": surface[-1]},
            source_event_seqs=[summary, *surface],
        )
        self.append("compaction/end", {"compactionId": compaction_id, "turn": None})
        self.commit()
        return checkpoint

    def title(
        self, title: str, *, source: Mapping[str, Any] | None = None, message_seqs: Sequence[int] = ()
    ) -> int:
        data = {"title": title, "messageSeqs": list(message_seqs), "source": dict(source or {"kind": "user"})}
        return self.append("session/title", data)


def encode_log(log: SessionLog, compression: Compression = "zstd", *, pack_chunks: bool = True) -> bytes:
    """The log's bytes as upstream's backend writes them (header frame + one frame per batch)."""
    header = (js_stringify(header_line(log.header)) + "\n").encode("utf-8")
    bodies = []
    bounds = [0, *log.batch_ends, len(log.events)]
    for batch in (log.events[start:end] for start, end in itertools.pairwise(bounds) if end > start):
        records = pack_chunk_runs(batch) if pack_chunks else batch
        bodies.append(("\n".join(js_stringify(record) for record in records) + "\n").encode("utf-8"))
    if compression == "none":
        return header + b"".join(bodies)
    return b"".join(codec().compress((header, *bodies), 3))


def write_session_log(
    root: str | os.PathLike[str],
    log: SessionLog,
    compression: Compression = "zstd",
    *,
    pack_chunks: bool = True,
) -> str:
    """Write ``log`` at its upstream path under ``root``; refuses to replace an existing log."""
    root_path = os.path.abspath(os.fspath(root))
    path = log_path(root_path, log.cwd, log.session_id, compression)
    directory = os.path.dirname(path)
    for name in LOG_NAMES.values():
        if os.path.lexists(os.path.join(directory, name)):
            raise FileExistsError(f"refusing to overwrite the existing session log in {directory}")
    data = encode_log(log, compression, pack_chunks=pack_chunks)  # before creating anything: it can fail
    os.makedirs(directory, mode=0o700, exist_ok=True)
    with open(path, "xb") as handle:
        handle.write(data)
    return path
