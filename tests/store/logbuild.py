"""Byte-level builders for hand-made session logs (corrupt ones included).

The store must read exactly what dsh writes and survive what a crash or a
person leaves behind, so these helpers produce raw bytes in the real format
rather than going through the writer: every test can then damage a log at the
byte it cares about.
"""

from __future__ import annotations

import os
from typing import Any

import zstandard

from dsh_session_reference.jsjson import js_stringify
from dsh_session_reference.store.layout import Compression, log_path

T0 = 1_700_000_000_000
DROP = object()
"""Marks a header field to leave out."""


def header(session_id: str, **fields: Any) -> dict[str, Any]:
    line: dict[str, Any] = {
        "type": "session",
        "version": 0,
        "id": session_id,
        "createdAt": T0,
        "cwd": "/w",
        "delegationDepth": 0,
    }
    line.update(fields)
    return {key: value for key, value in line.items() if value is not DROP}


def event(kind: str, seq: int, data: Any, **extra: Any) -> dict[str, Any]:
    record: dict[str, Any] = {"type": kind, "seq": seq, "time": T0 + seq, "data": data}
    record.update(extra)
    return record


def user(seq: int, text: str, **extra: Any) -> dict[str, Any]:
    data = {
        "content": [{"type": "text", "text": text}],
        "source": {"kind": "user"},
        "role": "user",
        "id": f"m{seq}",
    }
    return event("user/message", seq, data, surfaceOp="append", **extra)


def assistant(
    seq: int, text: str, *, turn: int = 1, step: int = 1, blocks: list[Any] | None = None
) -> dict[str, Any]:
    message = {
        "role": "assistant",
        "content": blocks if blocks is not None else [{"type": "text", "text": text}],
        "source": {"kind": "model", "provider": "p", "model": "m"},
        "id": f"a{seq}",
    }
    return event(
        "assistant/message", seq, {"turn": turn, "step": step, "message": message}, surfaceOp="append"
    )


def tool_result(seq: int, call: str, text: str, *, step: int = 1, **extra: Any) -> dict[str, Any]:
    message = {
        "role": "user",
        "content": [{"type": "tool-result", "toolCallId": call, "content": [{"type": "text", "text": text}]}],
        "source": {"kind": "tool", "callId": call},
        "id": f"t{seq}",
    }
    extra.setdefault("surfaceOp", "append")
    return event("tool/result", seq, {"turn": 1, "step": step, "message": message}, **extra)


def turn_start(seq: int, turn: int = 1) -> dict[str, Any]:
    return event("turn/start", seq, {"turn": turn})


def turn_end(seq: int, turn: int = 1) -> dict[str, Any]:
    return event("turn/end", seq, {"turn": turn, "reason": {"kind": "completed"}})


def step_start(seq: int, turn: int = 1, step: int = 1) -> dict[str, Any]:
    return event("step/start", seq, {"turn": turn, "step": step})


def step_end(seq: int, turn: int = 1, step: int = 1) -> dict[str, Any]:
    return event("step/end", seq, {"turn": turn, "step": step})


def title(seq: int, text: str, kind: str = "user") -> dict[str, Any]:
    return event("session/title", seq, {"title": text, "messageSeqs": [], "source": {"kind": kind}})


def one_turn(first: int = 0, question: str = "hi", answer: str = "hello") -> list[dict[str, Any]]:
    """A complete turn: seqs ``first`` .. ``first + 5``."""
    return [
        turn_start(first),
        user(first + 1, question),
        step_start(first + 2),
        assistant(first + 3, answer),
        step_end(first + 4),
        turn_end(first + 5),
    ]


def lines(*items: Any) -> bytes:
    """Dicts become JSON lines; ``str`` items are raw lines; ``bytes`` are appended as they are."""
    out = bytearray()
    for item in items:
        if isinstance(item, bytes):
            out += item
        elif isinstance(item, str):
            out += item.encode("utf-8") + b"\n"
        else:
            out += js_stringify(item).encode("utf-8") + b"\n"
    return bytes(out)


def frame(data: bytes, *, checksum: bool = True) -> bytes:
    return zstandard.ZstdCompressor(level=3, write_checksum=checksum).compress(data)


def as_zstd(data: bytes) -> bytes:
    """Plain log bytes as dsh frames them: the header line alone, then the rest."""
    newline = data.find(b"\n")
    if newline == -1:
        return frame(data) if data else b""
    rest = data[newline + 1 :]
    return frame(data[: newline + 1]) + (frame(rest) if rest else b"")


def put(
    root: str | os.PathLike[str],
    session_id: str,
    data: bytes,
    compression: Compression = "none",
    cwd: str | None = "/w",
) -> str:
    """Place raw log bytes where the session's log lives."""
    path = log_path(os.fspath(root), cwd, session_id, compression)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(data)
    return path


def snapshot_tree(root: str | os.PathLike[str]) -> dict[str, tuple[bytes | str, int, int]]:
    """Every entry under ``root`` with its content (or link target), mode and mtime."""
    state: dict[str, tuple[bytes | str, int, int]] = {}
    for directory, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(directory, name)
            info = os.lstat(path)
            if os.path.islink(path):
                content: bytes | str = os.readlink(path)
            elif os.path.isfile(path):
                with open(path, "rb") as handle:
                    content = handle.read()
            else:
                content = "<dir>"
            state[os.path.relpath(path, root)] = (content, info.st_mode, info.st_mtime_ns)
    return state


def many_sessions(root: str | os.PathLike[str], count: int, projects: int = 40, padding: int = 0) -> None:
    """``count`` small titled plain logs (``s-00000``, ...) spread over ``projects`` cwds: a root
    big enough that listing it cold takes a while, written in about a second. ``padding`` more
    bytes in each question make reading every title exactly too much for one request."""
    question = "hi" + " " * padding
    for number in range(count):
        sid = f"s-{number:05d}"
        cwd = f"/p/{number % projects}"
        put(
            root,
            sid,
            lines(header(sid, cwd=cwd), *one_turn(0, question), title(6, f"Task {number}")),
            cwd=cwd,
        )
