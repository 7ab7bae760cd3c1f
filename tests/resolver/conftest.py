"""Real-format stores for resolver tests, built with the project's log writer.

``append_conversation`` is upstream's spec helper of the same name: fourteen
events (seq 0-13) covering every projection rule.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from dsh_session_reference import JsonlSessionStore, SessionReferenceResolver
from dsh_session_reference.store.writer import SessionLog, write_session_log

COMPACT = {"kind": "plugin", "plugin": "compact", "compactionId": "conversation"}


def append_conversation(log: SessionLog) -> SessionLog:
    log.user("old user")
    log.assistant("old assistant")
    log.user(
        "<compacted-summary>checkpoint</compacted-summary>",
        source=COMPACT,
        surface_op={"op": "replace", "start": 0, "end": 1},
        source_event_seqs=[0, 1],
    )
    log.user("recent user")
    log.user("workspace secret", source={"kind": "plugin", "plugin": "workspace"})
    log.user("human steer")
    log.user("plugin steer", source={"kind": "plugin", "plugin": "goal"})
    log.tool_result("call-1", "tool output")
    log.assistant(
        [{"type": "reasoning", "text": "private reasoning"}, {"type": "text", "text": "visible answer"}]
    )
    log.user("plugin-generated user", source={"kind": "plugin", "plugin": "goal"})
    log.user([{"type": "reasoning", "text": "r1"}])
    log.user([{"type": "reasoning", "text": "r2"}])
    log.assistant([{"type": "reasoning", "text": "r3"}])
    log.chunk("text-delta", "unfinished answer")
    return log


class StoreBuilder:
    """Writes sessions into a temporary root and hands out resolvers over it."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def session(self, session_id: str, created_at: int = 1, cwd: str | None = "/source") -> SessionLog:
        return SessionLog(session_id, created_at, cwd)

    def write(self, *logs: SessionLog, compression: str = "zstd") -> None:
        for log in logs:
            write_session_log(self.root, log, compression)  # type: ignore[arg-type]

    def resolver(self, **limits: object) -> SessionReferenceResolver:
        return SessionReferenceResolver(JsonlSessionStore(self.root), **limits)  # type: ignore[arg-type]


@pytest.fixture
def store(tmp_path: Path) -> StoreBuilder:
    return StoreBuilder(tmp_path / "sessions")


ConversationWriter = Callable[[SessionLog], SessionLog]
