"""Upstream's checks of a restored session: its header, each event's envelope, each message's shape.

Each check raises :class:`ReplayFailure` with upstream's exact text; :mod:`.replay` decides which
failure is reported when several stages fail.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from .jsvalue import UNDEFINED, is_safe_integer, prop, strict_equal

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

_ENVELOPE_KEYS: Final = frozenset(
    {"type", "seq", "time", "data", "surfaceOp", "sourceEventSeqs", "ignorable"}
)
MESSAGE_TYPES: Final = frozenset({"user/message", "assistant/message", "tool/result"})
"""The message events: the ones that carry a message, and the only ones on the surface."""


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


def has_provider_model(value: object) -> bool:
    if not isinstance(value, dict):
        return False
    provider, model = value.get("provider"), value.get("model")
    return isinstance(provider, str) and provider != "" and isinstance(model, str) and model != ""


def assert_message_shape(event: Mapping[str, Any], subject: str) -> None:
    """Upstream's ``assertMessageEventShape``: raise its error for ``event``, named by ``subject``."""
    kind = event.get("type")
    if not isinstance(kind, str) or kind not in MESSAGE_TYPES:
        return
    data = event.get("data", UNDEFINED)
    message = data if kind == "user/message" else prop(data, "message")
    if not isinstance(message, dict) or not isinstance(message.get("id"), str) or message["id"] == "":
        raise ReplayFailure(f"{subject} lacks an identified message")
    expected_role = "assistant" if kind == "assistant/message" else "user"
    if message.get("role") != expected_role or not isinstance(message.get("role"), str):
        raise ReplayFailure(f'{subject} message must have role "{expected_role}"')
    source = message.get("source")
    if not isinstance(source, dict) or not isinstance(source.get("kind"), str) or source["kind"] == "":
        raise ReplayFailure(f"{subject} message has invalid source")
    content = message.get("content")
    if not isinstance(content, list):
        raise ReplayFailure(f"{subject} message has invalid content")
    if kind == "assistant/message":
        if source["kind"] != "model" or not has_provider_model(source):
            raise ReplayFailure(f"{subject} message must have model source")
        return
    if kind != "tool/result":
        return
    call_id = source.get("callId")
    if source["kind"] != "tool" or not isinstance(call_id, str) or call_id == "":
        raise ReplayFailure(f"{subject} message must have tool source")
    block = content[0] if content else UNDEFINED
    if (
        len(content) != 1
        or not isinstance(block, dict)
        or block.get("type") != "tool-result"
        or not isinstance(block.get("content"), list)
    ):
        raise ReplayFailure(f"{subject} message must contain one tool-result block")
    if not strict_equal(block.get("toolCallId", UNDEFINED), call_id):
        raise ReplayFailure(f"{subject} message has mismatched tool call ids")


def _assert_request_header(event: Mapping[str, Any], index: int) -> None:
    header = prop(event["data"], "header")
    config = prop(header, "config")
    if not has_provider_model(config):
        raise ReplayFailure(f"seed request/header at index {index} lacks provider/model")
    assert isinstance(config, dict)
    effort = config.get("reasoningEffort", UNDEFINED)
    if effort is not UNDEFINED and (not isinstance(effort, str) or effort == ""):
        raise ReplayFailure(f"seed request/header at index {index} has an invalid reasoningEffort")
    defaults = prop(header, "adapterDefaults")
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


def assert_envelope(event: Mapping[str, Any], index: int, shape_checked: bool = False) -> None:
    """Upstream's ``assertSessionEventEnvelope`` (legacy request headers were refused earlier);
    ``shape_checked``: ``event`` is a message event whose shape already passed (migration checks
    it), so it is not checked twice. Its ``seq`` is its index (the log reader checked that)."""
    time = event.get("time", UNDEFINED)
    ignorable = event.get("ignorable", UNDEFINED)
    if (
        not event.keys() <= _ENVELOPE_KEYS
        or not isinstance(event.get("type"), str)
        or not is_safe_integer(time)
        or "data" not in event
        or (ignorable is not UNDEFINED and ignorable is not True)
    ):
        raise ReplayFailure(f"seed event at index {index} has an invalid event envelope")
    kind = event["type"]
    if kind == "request/header":
        _assert_request_header(event, index)
    elif kind in MESSAGE_TYPES and not shape_checked:
        assert_message_shape(event, f"seed {kind} at index {index}")


def validate_header(header: Mapping[str, Any]) -> None:
    """Upstream's ``validateSessionHeader`` for a restored header (POSIX ``isAbsolute``), less what
    is checked before a replay can report: the version, ``createdAt``, ``delegationDepth``,
    ``origin`` and ``agentPreset`` (``parseHeaderRecord``'s ``isHeaderLine``) and the id (the
    store's read fails first when it is not the one asked for)."""
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
