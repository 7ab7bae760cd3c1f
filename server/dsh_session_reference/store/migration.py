"""Upstream's upgrades of legacy event shapes, so that a log written before them reads as a current one.

Pre-react-loop ``turn/start``, ``turn/end`` and ``steering/message`` events and pre-identity
messages are rewritten to their current shape before anything else looks at them; a legacy event
that fits no known shape refuses the log, and every migrated message's shape is then checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .jsvalue import UNDEFINED, as_record, is_number, is_safe_integer, js_string, prop
from .validation import MESSAGE_TYPES, ReplayFailure, assert_message_shape

MIGRATED_TYPES: Final = MESSAGE_TYPES | {"turn/start", "turn/end", "steering/message"}
"""The events a legacy upgrade may rewrite; every other event is read as it is stored."""


class Migration:
    """One log's legacy upgrades, event by event: remembers each message's id by seq, since a
    legacy ``tool/result`` that replaces a surface node inherits that node's message id."""

    def __init__(self, session_id: str) -> None:
        self._id = session_id
        self._message_ids: dict[int, str] = {}

    def upgrade(self, event: dict[str, Any]) -> dict[str, Any]:
        """``event`` in its current shape, its message checked; :class:`ReplayFailure` as upstream's
        migration throws."""
        seq = event["seq"]
        try:
            upgraded = _migrate_steering(_migrate_turn_end(_migrate_turn_start(event)), self._id)
        except _Malformed:
            raise ReplayFailure(
                f'session "{self._id}" contains malformed pre-react-loop {event["type"]} '
                f"at seq {js_string(seq)}"
            ) from None
        current = _migrate_message(upgraded, self._id, self._message_ids)
        assert_message_shape(current, f"session event at seq {js_string(seq)}")
        identity = _message_id(current)
        if identity is not None:
            self._message_ids[seq] = identity
        return current


class _Malformed(Exception):
    """A legacy event that fits no shape upstream's migration knows."""


def _only_keys(record: Mapping[str, Any], required: tuple[str, ...], optional: tuple[str, ...] = ()) -> bool:
    """Upstream's ``hasOnlyKeys``."""
    allowed = required + optional
    return all(key in allowed for key in record) and all(key in record for key in required)


def _positive_turn(value: object) -> bool:
    return is_safe_integer(value) and value >= 1  # type: ignore[operator]


def _legacy_message_id(session_id: str, seq: int) -> str:
    return f"legacy-message:{session_id}:{js_string(seq)}"


def _migrate_turn_start(event: dict[str, Any]) -> dict[str, Any]:
    if event.get("type") != "turn/start":
        return event
    data = as_record(event.get("data"))
    if data is None or "trigger" not in data:
        return event
    kind = prop(data["trigger"], "kind")
    if (
        not _positive_turn(data.get("turn", UNDEFINED))
        or not _only_keys(data, ("turn", "trigger"))
        or not isinstance(kind, str)
        or kind == ""
    ):
        raise _Malformed
    return {**event, "data": {"turn": data["turn"]}}


def _current_turn_end_reason(data: dict[str, Any]) -> dict[str, Any] | None:
    """The upgraded ``turn/end`` reason, ``None`` when the event is already current."""
    reason = as_record(data.get("reason"))
    if (
        not _positive_turn(data.get("turn", UNDEFINED))
        or not _only_keys(data, ("turn", "reason"))
        or reason is None
        or not isinstance(reason.get("kind"), str)
    ):
        raise _Malformed
    kind = reason["kind"]
    if kind == "aborted" and "reason" in reason:
        return None
    if kind in ("completed", "blocked", "max-tokens", "interrupted", "aborted", "disposed"):
        if not _only_keys(reason, ("kind",)):
            raise _Malformed
        abort = {"aborted": "legacy", "disposed": "disposed"}.get(kind)  # the reasons that were renamed
        return None if abort is None else {"kind": "aborted", "reason": {"kind": abort}}
    if kind != "error" or "error" in reason:
        return None
    step = reason.get("step", UNDEFINED)
    if not is_safe_integer(step) or step < 0:
        raise _Malformed
    failure = as_record(reason.get("failure"))
    if (
        failure is not None
        and _only_keys(reason, ("kind", "step", "failure"))
        and _only_keys(failure, ("message", "code"), ("status", "providerRetryAfterMs", "requestId"))
        and isinstance(failure.get("message"), str)
        and isinstance(failure.get("code"), str)
        and ("status" not in failure or is_number(failure["status"]))
        and ("providerRetryAfterMs" not in failure or is_number(failure["providerRetryAfterMs"]))
        and ("requestId" not in failure or isinstance(failure["requestId"], str))
    ):
        return {"kind": "error", "error": failure}
    if (
        not _only_keys(reason, ("kind", "step", "message"), ("code",))
        or not isinstance(reason.get("message"), str)
        or ("code" in reason and not isinstance(reason["code"], str))
    ):
        raise _Malformed
    return {"kind": "error", "error": {"message": reason["message"], "code": reason.get("code", "UNKNOWN")}}


def _migrate_turn_end(event: dict[str, Any]) -> dict[str, Any]:
    if event.get("type") != "turn/end":
        return event
    data = as_record(event.get("data"))
    if data is None:
        return event
    reason = _current_turn_end_reason(data)
    if reason is None:
        return event
    return {**event, "data": {**data, "reason": reason}}


def _migrate_steering(event: dict[str, Any], session_id: str) -> dict[str, Any]:
    if event.get("type") != "steering/message":
        return event
    data = as_record(event.get("data"))
    if data is None:
        raise _Malformed
    wrapped = as_record(data.get("message"))
    turn = data.get("turn", UNDEFINED)
    if wrapped is not None and is_safe_integer(turn) and _only_keys(data, ("turn", "message")):
        return {**event, "type": "user/message", "data": wrapped}
    if not is_safe_integer(turn) or not _only_keys(data, ("turn", "content", "source")):
        raise _Malformed
    message = {key: value for key, value in data.items() if key != "turn"}
    message.update(id=_legacy_message_id(session_id, event["seq"]), role="user")
    return {**event, "type": "user/message", "data": message}


def _migrate_message(event: dict[str, Any], session_id: str, message_ids: dict[int, str]) -> dict[str, Any]:
    data = as_record(event.get("data"))
    if data is None:
        return event
    kind = event.get("type")
    if kind == "user/message":
        if (
            "id" in data
            or "role" in data
            or "message" in data
            or "content" not in data
            or "source" not in data
        ):
            return event
        return {**event, "data": {**data, "id": _legacy_message_id(session_id, event["seq"]), "role": "user"}}
    if kind == "assistant/message":
        if "message" in data or "content" not in data or "provenance" not in data:
            return event
        rest = {key: value for key, value in data.items() if key not in ("content", "provenance")}
        provenance = as_record(data["provenance"]) or {}
        rest["message"] = {
            "id": _legacy_message_id(session_id, event["seq"]),
            "role": "assistant",
            "content": data["content"],
            "source": {**provenance, "kind": "model"},
        }
        return {**event, "data": rest}
    if kind == "tool/result":
        if "message" in data or "callId" not in data or "content" not in data or "isError" not in data:
            return event
        rest = {key: value for key, value in data.items() if key not in ("callId", "content", "isError")}
        op = as_record(event.get("surfaceOp"))
        inherited = (
            op["start"]
            if op is not None and op.get("op") == "replace" and is_number(op.get("start"))
            else None
        )
        message_id = (
            _legacy_message_id(session_id, event["seq"]) if inherited is None else message_ids.get(inherited)
        )
        call_id = data["callId"]
        rest["message"] = {
            "id": message_id,
            "role": "user",
            "content": [
                {
                    "type": "tool-result",
                    "toolCallId": call_id,
                    "content": data["content"],
                    "isError": data["isError"],
                }
            ],
            "source": {"kind": "tool", "callId": call_id},
        }
        return {**event, "data": rest}
    return event


def _message_id(event: Mapping[str, Any]) -> str | None:
    data = event.get("data")
    message = data if event.get("type") == "user/message" else prop(as_record(data), "message")
    identity = message.get("id") if isinstance(message, dict) else None
    return identity if isinstance(identity, str) else None
