"""Which parts of a source session the model may see.

Only what a person said or read stays: direct user messages, compaction
checkpoints (the canonical ``plugin: 'compact'`` marker) and assistant text.
Tools, reasoning, injected context (including earlier session-reference
snapshots, so snapshots never nest), other plugin messages and unfinished
chunks are dropped.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal


@dataclass(frozen=True)
class LongText:
    """A message text too long to keep: its sizes, and the UTF-8 bytes a cut could keep.

    A text longer than the byte budget can never be shown whole (it cannot fit),
    and a head/tail cut within the budget keeps at most ``ceil(budget/2)`` bytes of
    its head and ``floor(budget/2)`` of its tail, so those bytes and the sizes are
    all retention needs of it. An ``evicted`` text has no bytes at all: the store
    found it could not be retained.
    """

    head: bytes
    tail: bytes
    utf8_bytes: int
    item_bytes: int
    """UTF-8 size of the tag-safe JSON ``{"role","text"}`` object with the whole text."""
    evicted: bool = False


@dataclass
class ConversationItem:
    """One projected message; ``text`` shrinks under retention, ``original_text`` never does.

    Both are a :class:`LongText` when the store kept only what the budget can use.
    """

    role: Literal["user", "assistant"]
    text: str | LongText
    checkpoint: bool
    original_text: str | LongText
    omitted_bytes: int = 0
    time: int | None = None
    """When the log recorded it (ms since the epoch), for a person reading it; never in the snapshot."""


def is_compact_checkpoint_source(source: Mapping[str, Any]) -> bool:
    """The ``dsh-compaction`` marker: ``kind === 'plugin' && plugin === 'compact'``, nothing else."""
    return source.get("kind") == "plugin" and source.get("plugin") == "compact"


def text_content(content: object) -> str:
    """Text blocks joined with ``\\n``; every other block type is dropped."""
    if not isinstance(content, list):
        return ""
    return "\n".join(
        block["text"]
        for block in content
        if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
    )


def _user_content(data: Mapping[str, Any]) -> object:
    """July-era logs baked the snapshot into the prompt and kept the person's own
    words in ``envelope.displayContent``; projecting that keeps snapshots from nesting."""
    envelope = data.get("envelope")
    if isinstance(envelope, dict) and isinstance(envelope.get("displayContent"), list):
        return envelope["displayContent"]
    return data.get("content")


def project_conversation(events: Iterable[Mapping[str, Any]]) -> list[ConversationItem]:
    """Upstream's ``projectSessionConversation`` over folded surface events."""
    items: list[ConversationItem] = []
    for event in events:
        kind = event.get("type")
        data = event.get("data")
        time = event.get("time")
        time = time if isinstance(time, int) and not isinstance(time, bool) else None
        if not isinstance(data, dict):
            continue
        if kind == "user/message":
            source = data.get("source")
            if not isinstance(source, dict):
                continue
            checkpoint = is_compact_checkpoint_source(source)
            if not checkpoint and source.get("kind") != "user":
                continue
            text = text_content(_user_content(data))
            if text != "":
                items.append(ConversationItem("user", text, checkpoint, text, time=time))
        elif kind == "assistant/message":
            message = data.get("message")
            text = text_content(message.get("content") if isinstance(message, dict) else None)
            if text != "":
                items.append(ConversationItem("assistant", text, False, text, time=time))
    return items
