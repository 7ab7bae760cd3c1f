"""Opt-in body search: the message text a person said or read in a log, and its FTS5 query."""

from __future__ import annotations

import re
from collections import deque
from typing import Any, Final

from ...cancellation import AbortSignal
from ...projection import project_conversation
from ..listing import compression_of
from ..logbase import LogChanged, LogError, open_artifact
from ..logfile import read_log

BODY_CHARS: Final = 200_000
"""Message text kept per session for body search (the newest messages win)."""


class _MessageTexts:
    """An event sink keeping the newest :data:`BODY_CHARS` of projected message text."""

    def __init__(self) -> None:
        self.kept: deque[str] = deque()
        self._size = 0

    def push(self, event: dict[str, Any]) -> None:
        if event.get("type") not in ("user/message", "assistant/message"):
            return
        for item in project_conversation([event]):
            text = item.text
            assert isinstance(text, str)  # a projection holds whole texts
            self.kept.append(text)
            self._size += len(text)
            while self._size > BODY_CHARS and len(self.kept) > 1:
                self._size -= len(self.kept.popleft())

    def push_chunks(self, first_seq: int, times: list[Any]) -> None:
        pass  # streamed deltas: the message they make is logged whole

    def push_unread(self, seq: int, time: int) -> None:
        pass  # a message too big to hold is not searched; the rest of the log still is


def message_text(path: str, root_real: str, stop: AbortSignal | None = None) -> str:
    """What a person said or read in a log (the projected messages), newest kept, for body search."""
    texts = _MessageTexts()
    try:
        with open_artifact(path, root_real) as handle:
            read_log(handle, compression_of(path), lambda header: texts, stop, discovery=True)
    except (OSError, LogError, LogChanged):
        pass
    text = "\n".join(texts.kept)
    return text[-BODY_CHARS:]


_WORD = re.compile(r"\w+")


def fts_query(query: str) -> str | None:
    """The FTS5 query for an ``@`` query: its words as a phrase, the last one a prefix."""
    words = _WORD.findall(query)
    if not words:
        return None
    return '"' + " ".join(words) + '"*'
