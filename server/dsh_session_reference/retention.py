"""Per-source byte budget: upstream's ``retainReferencedSession`` and its
``dsh-output-retention`` head/tail truncation, reproduced step for step.

The loops are kept exactly as upstream runs them (including the binary search
that is *not* "largest r that fits"), because any shortcut changes which bytes
the model sees. Sizes are maintained incrementally instead of re-serializing the
whole object on every step; the arithmetic equals the full serialization's
UTF-8 length because the conversation array is the only part that changes.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .jsjson import js_byte_length, js_utf8, stringify_tag_safe_json
from .model import ConversationSnapshot, SurfaceSnapshot
from .projection import ConversationItem, LongText, project_conversation


@dataclass(frozen=True)
class HeadTail:
    """A ``TextRetainer({kind: 'headTail'})`` result on one complete string."""

    text: str
    omitted_bytes: int


def _trim_trailing_partial_utf8(data: bytes) -> bytes:
    i = len(data) - 1
    while i >= 0 and (data[i] & 0xC0) == 0x80 and len(data) - i <= 3:
        i -= 1
    if i < 0:
        return data
    lead = data[i]
    expected = 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4 if lead < 0xF8 else 0
    if expected == 0:
        return data
    return data[:i] if len(data) - i < expected else data


def _trim_leading_continuation_utf8(data: bytes) -> bytes:
    i = 0
    while i < len(data) and (data[i] & 0xC0) == 0x80:
        i += 1
    return data[i:]


def _ends(front: bytes, back: bytes, head: int, tail: int) -> tuple[bytes, bytes]:
    """The first ``head`` bytes of ``front`` and the last ``tail`` of ``back`` (UTF-8), each cut
    back to a character boundary."""
    suffix = back[len(back) - tail :] if tail > 0 else b""
    return _trim_trailing_partial_utf8(front[:head]), _trim_leading_continuation_utf8(suffix)


def _joined(prefix: bytes, suffix: bytes) -> str:
    return prefix.decode("utf-8", "replace") + suffix.decode("utf-8", "replace")


def retain_head_tail(text: str, head: int, tail: int) -> HeadTail:
    """``TextRetainer`` head/tail on a whole string: the kept text and exact omitted bytes."""
    encoded = js_utf8(text)
    prefix, suffix = (encoded, b"") if len(encoded) <= head + tail else _ends(encoded, encoded, head, tail)
    return HeadTail(_joined(prefix, suffix), len(encoded) - len(prefix) - len(suffix))


def _notice(omitted: int) -> str:
    return f"\n[… omitted {omitted} UTF-8 bytes …]"


def truncate_with_notice(text: str | LongText, max_output_bytes: int) -> HeadTail:
    """Head + tail + ``\\n[… omitted N UTF-8 bytes …]`` within ``max_output_bytes``, or ``""``.

    ``encoded`` is valid UTF-8 (lone surrogates became U+FFFD), and the cuts are
    trimmed to boundaries, so a candidate's UTF-8 length is the sum of its parts.
    A :class:`LongText` read for a budget of at least ``max_output_bytes`` holds the
    first ``ceil(max/2)`` and last ``floor(max/2)`` bytes, the most any candidate cut
    keeps, so it gives the same result as its whole text would.
    """
    if isinstance(text, LongText):
        total = text.utf8_bytes
        if (
            text.evicted
            or total <= max_output_bytes
            or len(text.head) < (max_output_bytes + 1) // 2
            or len(text.tail) < max_output_bytes // 2
        ):
            raise ValueError("a long text was cut without the bytes the cut would keep")
        front, back = text.head, text.tail
    else:
        front = back = js_utf8(text)
        total = len(front)
        if total <= max_output_bytes:
            return HeadTail(text, 0)

    low, high = 0, max_output_bytes
    best_parts: tuple[bytes, bytes, int] | None = None
    while low <= high:
        retained = (low + high) // 2
        # The first half and the last half of ``retained`` bytes (never all of the text, which is
        # longer than ``max_output_bytes``), each cut back to a character boundary.
        prefix, suffix = _ends(front, back, (retained + 1) // 2, retained // 2)
        omitted = total - len(prefix) - len(suffix)
        if len(prefix) + len(suffix) + len(_notice(omitted).encode("utf-8")) <= max_output_bytes:
            best_parts = (prefix, suffix, omitted)
            low = retained + 1
        else:
            high = retained - 1
    if best_parts is None:
        return HeadTail("", total)
    prefix, suffix, omitted = best_parts
    return HeadTail(_joined(prefix, suffix) + _notice(omitted), omitted)


@dataclass(frozen=True)
class RetentionStats:
    compacted: bool
    original_messages: int
    retained_messages: int
    omitted_messages: int
    omitted_bytes: int
    truncated: bool

    def to_json(self) -> dict[str, Any]:
        """Upstream's stats keys, in upstream's order."""
        return {
            "compacted": self.compacted,
            "originalMessages": self.original_messages,
            "retainedMessages": self.retained_messages,
            "omittedMessages": self.omitted_messages,
            "omittedBytes": self.omitted_bytes,
            "truncated": self.truncated,
        }


@dataclass(frozen=True)
class RetainedSource:
    """One source's model-facing data object (upstream key order) and its stats."""

    data: dict[str, Any]
    stats: RetentionStats

    @functools.cached_property
    def serialized(self) -> str:
        """The data as the snapshot serializes it; made once (hints, hovers and token counts all
        ask, and a source is up to ``maxReferenceBytes`` of JSON)."""
        return stringify_tag_safe_json(self.data)

    @functools.cached_property
    def serialized_bytes(self) -> int:
        return js_byte_length(self.serialized)


def item_json_bytes(role: str, text: str) -> int:
    """UTF-8 size of one conversation entry as the prompt serializes it."""
    return js_byte_length(stringify_tag_safe_json({"role": role, "text": text}))


def item_bytes(role: str, text: str | LongText) -> int:
    """UTF-8 size of one conversation entry as the prompt serializes it (a long text's whole size)."""
    return text.item_bytes if isinstance(text, LongText) else item_json_bytes(role, text)


def text_bytes(text: str | LongText) -> int:
    """A message text's UTF-8 bytes (a long one's whole size)."""
    return text.utf8_bytes if isinstance(text, LongText) else js_byte_length(text)


def bounded_text(role: str, text: str, max_bytes: int) -> str | LongText:
    """``text`` itself, or a :class:`LongText` when it is longer than ``max_bytes`` (it cannot be
    retained whole, so only its sizes and ``max_bytes`` from each end are needed)."""
    if len(text) * 4 <= max_bytes:
        return text
    encoded = js_utf8(text)
    if len(encoded) <= max_bytes:
        return text
    head, tail = (max_bytes + 1) // 2, max_bytes // 2  # the most any cut within max_bytes keeps
    return LongText(encoded[:head], encoded[len(encoded) - tail :], len(encoded), item_json_bytes(role, text))


def drop_order(items: Sequence[ConversationItem]) -> list[int]:
    """Indices of the messages retention may drop, in the order it drops them while the rest does
    not fit: oldest first, never a compaction checkpoint, never the newest message."""
    newest = len(items) - 1
    return [index for index, item in enumerate(items) if not item.checkpoint and index != newest]


def reachable(items: Sequence[ConversationItem], sizes: Sequence[int], max_bytes: int) -> list[int]:
    """Indices of the messages whose text retention could keep within ``max_bytes`` (``sizes``:
    each item's serialized bytes): all it never drops, and of those it may drop the newest that fit
    the budget together, since it drops oldest first. A reader that keeps only these texts gives
    retention exactly what the whole conversation would (:mod:`.conversation`)."""
    order = drop_order(items)
    kept = set(range(len(items))).difference(order)
    total = 0
    for index in reversed(order):
        total += sizes[index]
        if total > max_bytes:
            break
        kept.add(index)
    return sorted(kept)


def retain_items(
    original: Sequence[ConversationItem],
    snapshot: SurfaceSnapshot | ConversationSnapshot,
    label: str,
    max_bytes: int,
) -> RetainedSource | None:
    """The exact two-phase budget loop over ``snapshot``'s conversation ``original`` (its session
    and ``capturedThroughSeq`` are the fixed fields); ``None`` means the fixed fields cannot fit."""
    retained = [
        ConversationItem(i.role, i.text, i.checkpoint, i.original_text, i.omitted_bytes, i.time)
        for i in original
    ]

    def data() -> dict[str, Any]:
        return {
            "sessionId": snapshot.session.id,
            "label": label,
            "cwd": snapshot.session.cwd,
            "capturedThroughSeq": snapshot.captured_through_seq,
            "conversation": [{"role": item.role, "text": item.text} for item in retained],
        }

    empty = dict(data(), conversation=[])
    fixed = js_byte_length(stringify_tag_safe_json(empty))  # includes the "[]"
    sizes = [item_bytes(item.role, item.text) for item in retained]
    items_total = sum(sizes)
    count = len(sizes)

    def size() -> int:
        return fixed + items_total + max(0, count - 1)

    dropped: set[int] = set()
    for index in drop_order(retained):
        if size() <= max_bytes:
            break
        dropped.add(index)
        items_total -= sizes[index]
        count -= 1
    omitted_messages = len(dropped)
    dropped_omitted_bytes = sum(text_bytes(retained[index].original_text) for index in dropped)
    retained = [item for index, item in enumerate(retained) if index not in dropped]
    sizes = [item_size for index, item_size in enumerate(sizes) if index not in dropped]

    while size() > max_bytes:
        lengths = [text_bytes(item.text) for item in retained]
        longest_bytes = max(lengths, default=0)
        if longest_bytes == 0:
            return None
        longest_index = lengths.index(longest_bytes)  # the first of the longest
        overflow = size() - max_bytes
        target = max(0, longest_bytes - overflow)
        item = retained[longest_index]
        shortened = truncate_with_notice(item.original_text, target)
        if shortened.text == item.text:
            return None
        item.text = shortened.text
        item.omitted_bytes = shortened.omitted_bytes
        items_total -= sizes[longest_index]
        sizes[longest_index] = item_bytes(item.role, item.text)
        items_total += sizes[longest_index]

    if any(isinstance(item.text, LongText) for item in retained):
        raise ValueError("a long text survived retention untruncated")  # impossible: it cannot fit
    omitted_bytes = sum(item.omitted_bytes for item in retained) + dropped_omitted_bytes
    stats = RetentionStats(
        compacted=any(item.checkpoint for item in original),
        original_messages=len(original),
        retained_messages=len(retained),
        omitted_messages=omitted_messages,
        omitted_bytes=omitted_bytes,
        truncated=omitted_messages > 0 or omitted_bytes > 0,
    )
    return RetainedSource(data(), stats)


def conversation_items(snapshot: SurfaceSnapshot | ConversationSnapshot) -> list[ConversationItem]:
    """The projected conversation of either kind of snapshot."""
    if isinstance(snapshot, ConversationSnapshot):
        return list(snapshot.items)
    return project_conversation(snapshot.events)


def retain_referenced_session(
    snapshot: SurfaceSnapshot | ConversationSnapshot, label: str, max_bytes: int
) -> RetainedSource | None:
    """Upstream's ``retainReferencedSession``: project a folded surface (or take a bounded
    conversation, read for at least ``max_bytes``) and fit it into ``max_bytes`` of tag-safe JSON;
    ``None`` means BUDGET_EXCEEDED."""
    if isinstance(snapshot, ConversationSnapshot) and max_bytes > snapshot.max_bytes:
        raise ValueError("the conversation was read for a smaller byte budget")
    return retain_items(conversation_items(snapshot), snapshot, label, max_bytes)
