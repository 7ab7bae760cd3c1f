"""What upstream does with a log's events after reading them, in one streaming pass.

Upstream's persistence coordinator (``prepareCore``) runs these stages over
the whole event list, each to completion before the next:

1. reject obsolete vocabulary (``request/header-delta``, ``mode/set``, a
   ``request/header`` with reason ``fallback``), each found by its own scan;
2. upgrade legacy shapes (pre-react-loop ``turn/start``/``turn/end``/steering,
   pre-identity messages) and check every message's shape;
3. refuse unknown event types not marked ``ignorable``;
4. compute the recovery closers for an open last turn (and check them);
5. validate the header, then every event's envelope and the surface fold.

The first failing stage decides the error. Here the stages run side by side
over a stream, each remembering its own first failure; a stage stops working
once an earlier stage has failed (its outcome can no longer matter), so the
reported error is the same as upstream's and no event list is ever held.

Over 500 lines because it is one upstream stage run as one streaming pass: the legacy migrations, the
message and envelope validation and the recovery closers share that pass's state, and apart they would
spread one upstream function over several files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from .jsvalue import (
    UNDEFINED,
    JsTypeError,
    as_record,
    is_number,
    is_safe_integer,
    js_string,
    prop,
    read_prop,
    strict_equal,
)
from .surface import SurfaceError, SurfaceFold, SurfaceKeeper

KNOWN_SESSION_EVENT_TYPES: Final = frozenset(
    {
        "agent-preset/selected",
        "agent/inbox/spliced",
        "approval/asked",
        "approval/decided",
        "approval/policy",
        "assistant/chunk",
        "assistant/message",
        "command/done",
        "command/run",
        "compaction/end",
        "compaction/prune",
        "compaction/start",
        "compaction/summary",
        "feedback/record",
        "goal/change",
        "hook/invoked",
        "hook/result",
        "llm/retry",
        "llm/retry-started",
        "permission/preset",
        "plan/mode",
        "request/context",
        "request/header",
        "sandbox/mode",
        "schedule/change",
        "session/end-seed",
        "session/title",
        "session/title-llm-request",
        "step/end",
        "step/start",
        "subagent/descriptor",
        "team/member",
        "team/message/delivered",
        "team/message/queued",
        "team/task",
        "todo/write",
        "tool-workflow/agent-end",
        "tool-workflow/agent-start",
        "tool-workflow/run-end",
        "tool-workflow/run-start",
        "tool/call",
        "tool/code-dispatch",
        "tool/code-dispatch-start",
        "tool/result",
        "turn/end",
        "turn/start",
        "user/message",
        "web/deepseek-search-llm-request",
    }
)
"""The event vocabulary of ``dsh-session`` 0.1.0-rc.8 (``KNOWN_SESSION_EVENT_TYPES``)."""

TOOL_NOT_STARTED: Final = "TOOL_NOT_STARTED"
TOOL_OUTCOME_UNKNOWN: Final = "TOOL_OUTCOME_UNKNOWN"
_UNKNOWN_OUTCOME_TEXT: Final = (
    "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is "
    "unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or "
    "idempotent; if it may have side effects, first verify external state or ask the user. "
    "Do not retry blindly."
)
_NOT_STARTED_TEXT: Final = (
    "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."
)
_ENVELOPE_KEYS: Final = frozenset(
    {"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"}
)
_MESSAGE_TYPES: Final = frozenset({"user/message", "assistant/message", "tool/result"})
_LEGACY_TYPES: Final = frozenset({"request/header-delta", "mode/set", "request/header"})
_MIGRATED_TYPES: Final = _MESSAGE_TYPES | {"turn/start", "turn/end", "steering/message"}
_TURN_TYPES: Final = frozenset(
    {"turn/start", "turn/end", "step/start", "step/end", "assistant/message", "tool/call", "tool/result"}
)

# Stages, in upstream's order; the lowest failing stage is the reported error.
_DELTA, _MODE, _FALLBACK, _MIGRATE, _UNKNOWN, _CLOSERS, _CLOSER_SHAPE, _HEADER, _EVENTS = range(9)


class ReplayFailure(Exception):
    """Why upstream refuses the log: ``message`` and the JS error ``name`` it was thrown as.

    ``unsupported`` is upstream's ``SessionFormatUnsupportedError`` (an
    unknown event type): reported as an inspection failure, not corruption.
    """

    def __init__(self, message: str, name: str = "Error", *, unsupported: bool = False) -> None:
        super().__init__(message)
        self.message = message
        self.name = name
        self.unsupported = unsupported


@dataclass(frozen=True)
class TitleFold:
    """``foldSessionTitle`` over the log: the last ``session/title``'s ``title``
    (``UNDEFINED`` when it has none), or ``error`` when upstream's fold throws."""

    title: Any
    event_seq: int
    error: str | None = None


@dataclass(frozen=True)
class ReplayResult:
    captured_through_seq: int | None
    surface: list[Mapping[str, Any]]
    title: TitleFold | None


class _Malformed(Exception):
    pass


def _only_keys(record: Mapping[str, Any], required: tuple[str, ...], optional: tuple[str, ...] = ()) -> bool:
    """Upstream's ``hasOnlyKeys``."""
    allowed = required + optional
    return all(key in allowed for key in record) and all(key in record for key in required)


def _positive_turn(value: object) -> bool:
    return is_safe_integer(value) and value >= 1  # type: ignore[operator]


def legacy_message_id(session_id: str, seq: int) -> str:
    return f"legacy-message:{session_id}:{js_string(seq)}"


def _migrate_turn_start(event: dict[str, Any], session_id: str) -> dict[str, Any]:
    if event.get("type") != "turn/start":
        return event
    data = as_record(event.get("data"))
    if data is None or "trigger" not in data:
        return event
    trigger = as_record(data["trigger"])
    kind = trigger.get("kind") if trigger is not None else None
    if (
        not _positive_turn(data.get("turn", UNDEFINED))
        or not _only_keys(data, ("turn", "trigger"))
        or not isinstance(kind, str)
        or kind == ""
    ):
        raise _Malformed(
            f'session "{session_id}" contains malformed pre-react-loop turn/start '
            f"at seq {js_string(event['seq'])}"
        )
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
        raise _Malformed()
    kind = reason["kind"]
    if kind in ("completed", "blocked", "max-tokens", "interrupted"):
        if not _only_keys(reason, ("kind",)):
            raise _Malformed()
        return None
    if kind == "aborted":
        if "reason" in reason:
            return None
        if not _only_keys(reason, ("kind",)):
            raise _Malformed()
        return {"kind": "aborted", "reason": {"kind": "legacy"}}
    if kind == "disposed":
        if not _only_keys(reason, ("kind",)):
            raise _Malformed()
        return {"kind": "aborted", "reason": {"kind": "disposed"}}
    if kind != "error":
        return None
    if "error" in reason:
        return None
    step = reason.get("step", UNDEFINED)
    if not is_safe_integer(step) or step < 0:
        raise _Malformed()
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
    required = ("kind", "step", "message") if "code" not in reason else ("kind", "step", "message", "code")
    if (
        not _only_keys(reason, required)
        or not isinstance(reason.get("message"), str)
        or ("code" in reason and not isinstance(reason["code"], str))
    ):
        raise _Malformed()
    code = reason.get("code")
    return {
        "kind": "error",
        "error": {"message": reason["message"], "code": code if isinstance(code, str) else "UNKNOWN"},
    }


def _migrate_turn_end(event: dict[str, Any], session_id: str) -> dict[str, Any]:
    if event.get("type") != "turn/end":
        return event
    data = as_record(event.get("data"))
    if data is None:
        return event
    try:
        reason = _current_turn_end_reason(data)
    except _Malformed:
        raise _Malformed(
            f'session "{session_id}" contains malformed pre-react-loop turn/end '
            f"at seq {js_string(event['seq'])}"
        ) from None
    if reason is None:
        return event
    return {**event, "data": {**data, "reason": reason}}


def _migrate_steering(event: dict[str, Any], session_id: str) -> dict[str, Any]:
    if event.get("type") != "steering/message":
        return event
    malformed = _Malformed(
        f'session "{session_id}" contains malformed pre-react-loop steering/message '
        f"at seq {js_string(event['seq'])}"
    )
    data = as_record(event.get("data"))
    if data is None:
        raise malformed
    wrapped = as_record(data.get("message"))
    turn = data.get("turn", UNDEFINED)
    if wrapped is not None and is_safe_integer(turn) and _only_keys(data, ("turn", "message")):
        return {**event, "type": "user/message", "data": wrapped}
    if not is_safe_integer(turn) or not _only_keys(data, ("turn", "content", "source")):
        raise malformed
    message = {key: value for key, value in data.items() if key != "turn"}
    message["id"] = legacy_message_id(session_id, event["seq"])
    message["role"] = "user"
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
        return {**event, "data": {**data, "id": legacy_message_id(session_id, event["seq"]), "role": "user"}}
    if kind == "assistant/message":
        if "message" in data or "content" not in data or "provenance" not in data:
            return event
        rest = {key: value for key, value in data.items() if key not in ("content", "provenance")}
        provenance = as_record(data["provenance"]) or {}
        rest["message"] = {
            "id": legacy_message_id(session_id, event["seq"]),
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
            legacy_message_id(session_id, event["seq"]) if inherited is None else message_ids.get(inherited)
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


def _has_provider_model(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    provider, model = value.get("provider"), value.get("model")
    return isinstance(provider, str) and provider != "" and isinstance(model, str) and model != ""


def message_shape_problem(event: Mapping[str, Any]) -> str | None:
    """Upstream's ``assertMessageEventShape``: what is wrong with a message event, after its subject."""
    kind = event.get("type")
    if not isinstance(kind, str) or kind not in _MESSAGE_TYPES:
        return None
    data = event.get("data", UNDEFINED)
    record = data if isinstance(data, dict | list) else None
    message: Any
    if kind == "user/message":
        message = record
    else:
        message = prop(record, "message") if record is not None else UNDEFINED
    if not isinstance(message, dict) or not isinstance(message.get("id"), str) or message["id"] == "":
        return "lacks an identified message"
    expected_role = "assistant" if kind == "assistant/message" else "user"
    if message.get("role") != expected_role or not isinstance(message.get("role"), str):
        return f'message must have role "{expected_role}"'
    source = message.get("source")
    if not isinstance(source, dict) or not isinstance(source.get("kind"), str) or source["kind"] == "":
        return "message has invalid source"
    content = message.get("content")
    if not isinstance(content, list):
        return "message has invalid content"
    if kind == "assistant/message":
        if source["kind"] != "model" or not _has_provider_model(source):
            return "message must have model source"
        return None
    if kind != "tool/result":
        return None
    call_id = source.get("callId")
    if source["kind"] != "tool" or not isinstance(call_id, str) or call_id == "":
        return "message must have tool source"
    block = content[0] if content else UNDEFINED
    if (
        len(content) != 1
        or not isinstance(block, dict)
        or block.get("type") != "tool-result"
        or not isinstance(block.get("content"), list)
    ):
        return "message must contain one tool-result block"
    if not strict_equal(block.get("toolCallId", UNDEFINED), call_id):
        return "message has mismatched tool call ids"
    return None


def assert_message_shape(event: Mapping[str, Any], subject: str) -> None:
    """Raise upstream's message-shape error for ``event`` named by ``subject``."""
    problem = message_shape_problem(event)
    if problem is not None:
        raise ReplayFailure(f"{subject} {problem}")


def _message_id(event: Mapping[str, Any]) -> str | None:
    data = event.get("data")
    message = data if event.get("type") == "user/message" else prop(as_record(data), "message")
    identity = message.get("id") if isinstance(message, dict) else None
    return identity if isinstance(identity, str) else None


def _assert_request_header(event: Mapping[str, Any], index: int) -> None:
    data = event["data"]
    header = data.get("header") if isinstance(data, dict) else UNDEFINED
    header_record = header if isinstance(header, dict) else None
    config = header_record.get("config") if header_record is not None else UNDEFINED
    if not _has_provider_model(config):
        raise ReplayFailure(f"seed request/header at index {index} lacks provider/model")
    assert isinstance(config, dict)
    effort = config.get("reasoningEffort", UNDEFINED)
    if effort is not UNDEFINED and (not isinstance(effort, str) or effort == ""):
        raise ReplayFailure(f"seed request/header at index {index} has an invalid reasoningEffort")
    defaults = header_record.get("adapterDefaults", UNDEFINED) if header_record is not None else UNDEFINED
    if defaults is UNDEFINED:
        return
    if (
        not isinstance(defaults, dict)
        or any(key not in ("reasoningEffort", "maxTokens") for key in defaults)
        or any(marker is not True for marker in defaults.values())
        or (defaults.get("reasoningEffort") is True and "reasoningEffort" not in config)
        or (defaults.get("maxTokens") is True and "maxTokens" not in config)
    ):
        raise ReplayFailure(f"seed request/header at index {index} has invalid adapterDefaults")


def _assert_envelope(event: Mapping[str, Any], index: int, shape_checked: bool = False) -> None:
    """Upstream's ``assertSessionEventEnvelope`` (legacy request headers were refused earlier);
    ``shape_checked``: ``event`` is a message event whose shape already passed (migration checks
    it), so it is not checked twice."""
    seq, time = event.get("seq", UNDEFINED), event.get("time", UNDEFINED)
    ignorable = event.get("ignorable", UNDEFINED)
    if (
        not event.keys() <= _ENVELOPE_KEYS
        or not isinstance(event.get("type"), str)
        or not is_safe_integer(seq)
        or seq < 0
        or not is_safe_integer(time)
        or "data" not in event
        or (ignorable is not UNDEFINED and ignorable is not True)
    ):
        raise ReplayFailure(f"seed event at index {index} has an invalid event envelope")
    kind = event["type"]
    if kind == "request/header":
        _assert_request_header(event, index)
    elif kind in _MESSAGE_TYPES and not shape_checked:
        problem = message_shape_problem(event)
        if problem is not None:
            raise ReplayFailure(f"seed {kind} at index {index} {problem}")


def validate_header(session_id: str, header: Mapping[str, Any]) -> None:
    """Upstream's ``validateSessionHeader`` for a restored header (POSIX ``isAbsolute``)."""
    if header.get("version") != 0 or not is_number(header.get("version")):
        raise ReplayFailure(
            f"session header version must be 0, got {js_string(header.get('version', UNDEFINED))}"
        )
    if header.get("id") != session_id:
        raise ReplayFailure(
            f'session header id "{js_string(header.get("id", UNDEFINED))}" '
            f'does not match session id "{session_id}"'
        )
    created = header.get("createdAt", UNDEFINED)
    if not is_safe_integer(created) or created < 0:
        raise ReplayFailure("session header createdAt must be a non-negative safe integer")
    if "cwd" in header:
        cwd = header["cwd"]
        if not isinstance(cwd, str):
            raise ReplayFailure("session header cwd must be a string")
        if not cwd.startswith("/"):
            raise ReplayFailure(f'session header cwd must be an absolute path, got "{cwd}"')
    if "parentSession" in header and not isinstance(header["parentSession"], str):
        raise ReplayFailure("session header parentSession must be a string")
    if "seedLength" in header and not (is_safe_integer(header["seedLength"]) and header["seedLength"] >= 0):
        raise ReplayFailure("session header seedLength must be a non-negative safe integer")
    if "origin" in header and header["origin"] != "subagent":
        raise ReplayFailure('session header origin must be "subagent"')
    depth = header.get("delegationDepth", UNDEFINED)
    if depth is not UNDEFINED and not (is_safe_integer(depth) and depth >= 0):
        raise ReplayFailure("session header delegationDepth must be a non-negative safe integer")
    if "agentPreset" in header and not isinstance(header["agentPreset"], str):
        raise ReplayFailure("session header agentPreset must be a string")


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


@dataclass
class _PendingCall:
    call_id: Any
    step: Any
    call_seq: int | None = None


def _drop_undefined(record: dict[str, Any]) -> dict[str, Any]:
    """Keys holding ``undefined`` do not exist once the event is JSON."""
    return {key: value for key, value in record.items() if value is not UNDEFINED}


def fold_title(data: object) -> Any:
    """``foldSessionTitle`` on the last title event's data: its ``title``, or raise as upstream throws."""
    title = read_prop(data, "title")
    seqs = read_prop(data, "messageSeqs")
    if not isinstance(seqs, list | str):
        raise JsTypeError("event.data.messageSeqs is not iterable")
    source = read_prop(data, "source")
    kind = read_prop(source, "kind")
    if not isinstance(kind, str) or kind not in ("fallback", "provider", "user"):
        raise ReplayFailure(f"Unhandled SessionTitleSource: {js_string(kind)}")
    return title


class Replay:
    """Feed a log's committed events in order with :meth:`push`, then :meth:`finish`.

    ``log_path`` is the path upstream names in format refusals (``locate()``).
    """

    def __init__(
        self,
        session_id: str,
        header: Mapping[str, Any],
        log_path: str,
        *,
        keep_surface: bool | SurfaceKeeper = True,
    ) -> None:
        self._id = session_id
        self._header = header
        self._log_path = log_path
        self._errors: dict[int, ReplayFailure] = {}
        self._message_ids: dict[int, str] = {}
        self._fold = SurfaceFold(keep_events=keep_surface)
        self._open_turn: Any = None
        self._open_step: Any = None
        self._pending: dict[tuple[Any, ...], _PendingCall] = {}
        self._last: tuple[Any, Any] | None = None
        self._title_data: tuple[Any, int] | None = None
        self._first_failed = _EVENTS + 1
        try:
            validate_header(session_id, header)
        except ReplayFailure as failure:
            self._fail(_HEADER, failure)

    def _alive(self, stage: int) -> bool:
        """Whether ``stage`` can still decide the outcome (no earlier or equal stage has failed)."""
        return self._first_failed > stage

    def _fail(self, stage: int, failure: ReplayFailure) -> None:
        self._errors.setdefault(stage, failure)
        self._first_failed = min(self._first_failed, stage)

    def push(self, event: dict[str, Any]) -> None:
        """One committed stored event (a dict whose ``seq`` is its index)."""
        seq = event["seq"]
        raw_kind = event.get("type")
        if raw_kind == "assistant/chunk" and len(event) == 4 and "data" in event:
            time = event.get("time")
            if is_safe_integer(time):
                # Exactly type, seq, time and data, with a safe time: every check below passes and
                # nothing is folded (a chunk is neither legacy, migrated, a turn event nor on the
                # surface). Big logs are mostly chunks: this spares most of a replay's validation.
                if self._first_failed > _MIGRATE:
                    self._last = (seq, time)
                return
        kind = (
            raw_kind if isinstance(raw_kind, str) else None
        )  # an object type is unhashable, and never known
        if kind in _LEGACY_TYPES:
            self._legacy_checks(event, seq)
        if self._first_failed <= _MIGRATE:
            return
        current = event
        migrated = kind in _MIGRATED_TYPES
        if migrated:
            try:
                upgraded = _migrate_steering(
                    _migrate_turn_end(_migrate_turn_start(event, self._id), self._id), self._id
                )
                current = _migrate_message(upgraded, self._id, self._message_ids)
                problem = message_shape_problem(current)
                if problem is not None:
                    raise ReplayFailure(f"session event at seq {js_string(seq)} {problem}")
            except _Malformed as error:
                self._fail(_MIGRATE, ReplayFailure(str(error)))
                return
            except ReplayFailure as failure:
                self._fail(_MIGRATE, failure)
                return
            identity = _message_id(current)
            if identity is not None:
                self._message_ids[seq] = identity
            kind = current["type"]
        self._last = (seq, current.get("time", UNDEFINED))
        if kind == "session/title":
            self._title_data = (current.get("data", UNDEFINED), seq)
        if self._first_failed > _UNKNOWN and not (
            kind in KNOWN_SESSION_EVENT_TYPES or current.get("ignorable") is True
        ):
            self._fail(
                _UNKNOWN,
                ReplayFailure(
                    f'session "{js_string(self._header.get("id"))}" '
                    f'contains event type "{js_string(raw_kind)}" '
                    f"(seq {js_string(seq)}) unknown to this harness and not marked ignorable; refusing to "
                    "interpret the log — it was likely written by a newer harness "
                    f"(raw log: {self._log_path})",
                    unsupported=True,
                ),
            )
        if self._first_failed > _CLOSERS and kind in _TURN_TYPES:
            try:
                self._track_turn(current)
            except JsTypeError as error:
                self._fail(_CLOSERS, ReplayFailure(str(error), "TypeError"))
        if self._first_failed > _EVENTS:
            self._validate(current, seq, shape_checked=migrated)

    def push_chunks(self, first_seq: int, times: list[Any]) -> None:
        """A packed row's chunk events: what :meth:`push` does with each of them."""
        if self._first_failed > _MIGRATE:
            self._last = (first_seq + len(times) - 1, times[-1])

    def push_unread(self, seq: int, time: int) -> None:
        """An event a discovery read skipped unread: taken as valid, never a title."""
        if self._first_failed > _MIGRATE:
            self._last = (seq, time)

    def _legacy_checks(self, event: dict[str, Any], seq: int) -> None:
        kind = event.get("type")
        if kind == "request/header-delta" and _DELTA not in self._errors:
            self._fail(
                _DELTA,
                ReplayFailure(
                    f'session "{self._id}" contains unsupported legacy request/header-delta event '
                    f"at seq {js_string(seq)}"
                ),
            )
        elif kind == "mode/set" and _MODE not in self._errors:
            self._fail(
                _MODE,
                ReplayFailure(
                    f'session "{self._id}" contains unsupported legacy mode/set event at seq {js_string(seq)}'
                ),
            )
        elif kind == "request/header" and _FALLBACK not in self._errors:
            try:
                reason = read_prop(event.get("data", UNDEFINED), "reason")
            except JsTypeError as error:
                self._fail(_FALLBACK, ReplayFailure(str(error), "TypeError"))
                return
            if reason == "fallback":
                self._fail(
                    _FALLBACK,
                    ReplayFailure(
                        f'session "{self._id}" contains unsupported legacy request/header reason "fallback" '
                        f"at seq {js_string(seq)}"
                    ),
                )

    def _track_turn(self, event: Mapping[str, Any]) -> None:
        """Upstream's ``interruptedTurnClosers`` scan, one event at a time."""
        kind = event.get("type")
        data = event.get("data", UNDEFINED)
        if kind == "turn/start":
            self._open_turn = read_prop(data, "turn")
            self._open_step = None
            self._pending.clear()
        elif kind == "turn/end":
            self._open_turn = None
            self._open_step = None
            self._pending.clear()
        elif kind == "step/start":
            self._open_step = read_prop(data, "step")
        elif kind == "step/end":
            self._pending.clear()
            self._open_step = None
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

    def _validate(self, event: Mapping[str, Any], index: int, shape_checked: bool = False) -> None:
        try:
            _assert_envelope(event, index, shape_checked)
        except ReplayFailure as failure:
            self._fail(_EVENTS, failure)
            return
        try:
            self._fold.apply(event)
        except SurfaceError as error:
            self._fail(_EVENTS, ReplayFailure(f"invalid seed event at index {index}: {error}"))

    def _closers(self) -> list[dict[str, Any]]:
        if self._open_turn is None or self._last is None:
            return []
        seq, time = self._last
        seq += 1
        closers: list[dict[str, Any]] = []
        for entry in self._pending.values():
            started = entry.call_seq is not None
            message = _drop_undefined(
                {
                    "id": f"interrupted-tool-result-{js_string(entry.call_id)}-{seq}",
                    "role": "user",
                    "source": _drop_undefined({"kind": "tool", "callId": entry.call_id}),
                    "content": [
                        _drop_undefined(
                            {
                                "type": "tool-result",
                                "toolCallId": entry.call_id,
                                "isError": True,
                                "content": [
                                    {
                                        "type": "text",
                                        "text": _UNKNOWN_OUTCOME_TEXT if started else _NOT_STARTED_TEXT,
                                    }
                                ],
                            }
                        )
                    ],
                }
            )
            closer: dict[str, Any] = {
                "type": "tool/result",
                "seq": seq,
                "time": time,
                "data": _drop_undefined(
                    {
                        "turn": self._open_turn,
                        "step": entry.step,
                        "message": message,
                        "error": {"name": "ToolOutcomeUnknownError", "code": TOOL_OUTCOME_UNKNOWN}
                        if started
                        else {"name": "ToolNotStartedError", "code": TOOL_NOT_STARTED},
                    }
                ),
                "surfaceOp": "append",
            }
            if started:
                closer["sourceEventSeqs"] = [entry.call_seq]
            closers.append(closer)
            seq += 1
        if self._open_step is not None:
            closers.append(
                {
                    "type": "step/end",
                    "seq": seq,
                    "time": time,
                    "data": _drop_undefined({"turn": self._open_turn, "step": self._open_step}),
                }
            )
            seq += 1
        closers.append(
            {
                "type": "turn/end",
                "seq": seq,
                "time": time,
                "data": _drop_undefined({"turn": self._open_turn, "reason": {"kind": "interrupted"}}),
            }
        )
        return closers

    def finish(self) -> ReplayResult:
        """Close the log: add recovery closers, then raise upstream's error or return the result."""
        last_seq = self._last[0] if self._last is not None else None
        if self._alive(_CLOSER_SHAPE):
            closers = self._closers()
            for closer in closers:
                try:
                    assert_message_shape(closer, f"session event at seq {js_string(closer['seq'])}")
                except ReplayFailure as failure:
                    self._fail(_CLOSER_SHAPE, failure)
                    break
            if closers:
                last_seq = closers[-1]["seq"]
            for closer in closers:
                if not self._alive(_EVENTS):
                    break
                self._validate(closer, closer["seq"])
        title: TitleFold | None = None
        if not self._errors and self._title_data is not None:
            data, seq = self._title_data
            try:
                title = TitleFold(fold_title(data), seq)
            except (JsTypeError, ReplayFailure) as error:
                title = TitleFold(UNDEFINED, seq, str(error))
        if self._errors:
            raise self._errors[min(self._errors)]
        return ReplayResult(last_seq, self._fold.current_events(), title)
