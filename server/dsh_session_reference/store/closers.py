"""Upstream's recovery closers: the events that end a log's last turn when dsh stopped inside it.

A log whose last turn has no ``turn/end`` (dsh was killed mid-turn) reads as if the turn had been
interrupted (``interruptedTurnClosers``): each tool call still without a result gets an error
result, an open step is ended, then the turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from .jsvalue import UNDEFINED, is_number, js_string, prop, read_prop

TURN_TYPES: Final = frozenset(
    {"turn/start", "turn/end", "step/start", "step/end", "assistant/message", "tool/call", "tool/result"}
)
"""The events :meth:`OpenTurn.track` follows; no other event changes what the closers are."""
_UNKNOWN_OUTCOME_TEXT: Final = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is "
    "unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or "
    "idempotent; if it may have side effects, first verify external state or ask the user. "
    "Do not retry blindly."
)
_NOT_STARTED_TEXT: Final = (
    "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."
)


@dataclass
class _PendingCall:
    call_id: Any
    step: Any
    call_seq: int | None = None


class OpenTurn:
    """Upstream's ``interruptedTurnClosers`` scan, one event at a time: the open turn, its open step,
    and its tool calls still without a result."""

    def __init__(self) -> None:
        self._turn: Any = None
        self._step: Any = None
        self._pending: dict[tuple[Any, ...], _PendingCall] = {}

    def track(self, event: Mapping[str, Any]) -> None:
        """Follow one event of :data:`TURN_TYPES`; :class:`~.jsvalue.JsTypeError` where upstream's
        scan throws."""
        kind = event.get("type")
        data = event.get("data", UNDEFINED)
        if kind in ("turn/start", "turn/end"):
            self._turn = read_prop(data, "turn") if kind == "turn/start" else None
            self._step = None
            self._pending.clear()
        elif kind == "step/start":
            self._step = read_prop(data, "step")
        elif kind == "step/end":
            self._pending.clear()
            self._step = None
        elif kind == "assistant/message":
            for block in data["message"]["content"]:
                if read_prop(block, "type") == "tool-call":
                    call_id = prop(block, "id")
                    self._pending[_map_key(call_id)] = _PendingCall(call_id, prop(data, "step"))
        elif kind == "tool/call":
            entry = self._pending.get(_map_key(read_prop(data, "callId")))
            if entry is not None:
                entry.call_seq = event["seq"]
        elif kind == "tool/result":
            self._pending.pop(_map_key(data["message"]["source"]["callId"]), None)

    def closers(self, last: tuple[int, Any] | None) -> list[dict[str, Any]]:
        """The events that close the open turn after the log's last event ``(seq, time)``, if any."""
        if self._turn is None or last is None:
            return []
        last_seq, time = last
        closers: list[dict[str, Any]] = []

        def next_seq() -> int:
            return last_seq + len(closers) + 1

        def close(kind: str, data: dict[str, Any], **marks: Any) -> None:
            event = {"type": kind, "seq": next_seq(), "time": time, "data": _drop_undefined(data)}
            closers.append({**event, **marks})

        for entry in self._pending.values():
            seq = next_seq()  # the seq close() gives this result: its message id names it
            started = entry.call_seq is not None
            result = {
                "type": "tool-result",
                "toolCallId": entry.call_id,
                "isError": True,
                "content": [
                    {"type": "text", "text": _UNKNOWN_OUTCOME_TEXT if started else _NOT_STARTED_TEXT}
                ],
            }
            message = {
                "id": f"interrupted-tool-result-{js_string(entry.call_id)}-{seq}",
                "role": "user",
                "source": _drop_undefined({"kind": "tool", "callId": entry.call_id}),
                "content": [_drop_undefined(result)],
            }
            error = (
                {"name": "ToolOutcomeUnknownError", "code": "TOOL_OUTCOME_UNKNOWN"}
                if started
                else {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"}
            )
            sources = {"sourceEventSeqs": [entry.call_seq]} if started else {}
            data = {"turn": self._turn, "step": entry.step, "message": message, "error": error}
            close("tool/result", data, surfaceOp="append", **sources)
        if self._step is not None:
            close("step/end", {"turn": self._turn, "step": self._step})
        close("turn/end", {"turn": self._turn, "reason": {"kind": "interrupted"}})
        return closers


def _map_key(value: object) -> tuple[Any, ...]:
    """A key with JS ``Map`` identity (SameValueZero; objects by reference)."""
    if isinstance(value, str):
        return ("string", value)
    if isinstance(value, bool):
        return ("boolean", value)
    if is_number(value):
        return ("number", float(value))  # type: ignore[arg-type]
    if value is None:
        return ("null",)
    if value is UNDEFINED:
        return ("undefined",)
    return ("object", id(value))


def _drop_undefined(record: dict[str, Any]) -> dict[str, Any]:
    """Keys holding ``undefined`` do not exist once the event is JSON."""
    return {key: value for key, value in record.items() if value is not UNDEFINED}
