"""What ``prepare`` needs of a session, in memory the byte budget dictates rather than the log size.

Retention (``retention.py``) drops the oldest messages that are neither
compaction checkpoints nor the newest one until the rest fits, then cuts the
longest texts. So of a conversation of any length it can only ever use:

* every checkpoint and the newest message, and
* the newest other messages whose serialized sizes add up to at most the
  budget (anything older is dropped whatever the label or cwd), and
* of any text longer than the budget, at most ``budget`` bytes of its head
  and of its tail (see :class:`~.projection.LongText`).

:class:`ConversationKeeper` folds a log's surface keeping just that: every
node's projected sizes, and texts only while they could still be retained.
The cut is decided from surface order as the log streams; a later
replacement that removes newer messages can bring an older one back into
reach, in which case the log is read a second time for exactly the texts it
then needs (:attr:`ConversationKeeper.missing`). Retention over the kept items
is byte-identical to retention over the full surface.

:class:`BoundedRead` is that read as the store runs it (:meth:`~.model.SessionSource.read_conversation`):
the store replays its log into the keepers it is handed and knows neither the budget nor when
to read again.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .model import ConversationSnapshot, SessionRecord
from .projection import ConversationItem, LongText, project_conversation
from .retention import bounded_text, item_bytes, reachable, text_bytes


class ConversationKeeper:
    """A :class:`~.store.surface.SurfaceKeeper` keeping each node's projected item, texts bounded.

    ``wanted``: keep texts of exactly these seqs (a second read); ``evict=False``
    keeps every text (the last resort when a log keeps changing between reads).
    ``head_bytes``: also keep the texts of the first messages up to that many bytes, which
    retention never uses but a transcript shows (how a session began).
    """

    def __init__(
        self,
        max_bytes: int,
        wanted: frozenset[int] | None = None,
        *,
        evict: bool = True,
        head_bytes: int = 0,
    ) -> None:
        self.max_bytes = max_bytes
        self.wanted = wanted
        self.evict = evict
        self.head_bytes = head_bytes
        self.start()

    def start(self) -> None:
        """Forget everything: a read that is retried starts a new fold."""
        self.items: dict[int, ConversationItem] = {}
        self._sizes: dict[int, int] = {}
        self._window: list[int] = []  # non-checkpoint items whose text is kept, in surface order
        self._window_bytes = 0
        self._head: set[int] = set()
        self._head_room = self.head_bytes
        self._ordered = True
        self.nodes: list[int] | None = None
        self.needed: frozenset[int] = frozenset()
        self.missing: frozenset[int] = frozenset()

    # SurfaceKeeper

    def add(self, seq: int, event: Mapping[str, Any], appended: bool) -> None:
        projected = project_conversation([event])
        if not projected:
            return
        [item] = projected
        assert isinstance(item.text, str)
        item.text = item.original_text = bounded_text(item.role, item.text, self.max_bytes)
        size = item_bytes(item.role, item.text)
        self._sizes[seq] = size
        if appended and self._ordered and self._head_room > 0:
            self._head_room -= size
            self._head.add(seq)
        if self.wanted is not None and seq not in self.wanted and seq not in self._head:
            self.items[seq] = _evicted(item, size)
            return
        self.items[seq] = item
        if item.checkpoint or self.wanted is not None or not self.evict or seq in self._head:
            return
        if not appended:
            self._ordered = False  # a message inserted mid-surface: stop evicting, check at close
        if not self._ordered:
            return
        self._window.append(seq)
        self._window_bytes += size
        while len(self._window) > 1 and self._window_bytes - size > self.max_bytes:
            oldest = self._window.pop(0)
            self._window_bytes -= self._sizes[oldest]
            self.items[oldest] = _evicted(self.items[oldest], self._sizes[oldest])

    def drop(self, seq: int) -> None:
        if self.items.pop(seq, None) is not None and seq in self._window:
            self._window.remove(seq)
            self._window_bytes -= self._sizes[seq]
        self._sizes.pop(seq, None)

    def close(self, nodes: Sequence[int]) -> None:
        self.nodes = [seq for seq in nodes if seq in self.items]
        items = [self.items[seq] for seq in self.nodes]
        sizes = [self._sizes[seq] for seq in self.nodes]
        self.needed = frozenset(self.nodes[index] for index in reachable(items, sizes, self.max_bytes))
        self.missing = frozenset(seq for seq in self.needed if _is_evicted(self.items[seq]))

    def again(self, reads: int) -> ConversationKeeper | None:
        """The keeper for another read of the log (after ``reads`` reads), when this fold let go of
        texts retention turned out to use (a replacement brought older messages back into reach):
        for exactly those, and at the fourth read for every text, should the log keep changing
        under the reads. ``None`` when this fold holds everything retention can use."""
        if not self.missing or reads > 3:
            return None
        if reads < 3:
            return ConversationKeeper(self.max_bytes, self.needed, head_bytes=self.head_bytes)
        return ConversationKeeper(self.max_bytes, evict=False)

    # results

    def conversation(self) -> list[ConversationItem]:
        """The projected items in surface order (after :meth:`close`)."""
        assert self.nodes is not None
        return [self.items[seq] for seq in self.nodes]


def _evicted(item: ConversationItem, size: int) -> ConversationItem:
    """``item`` with a text retention cannot use: only its sizes are kept."""
    gone = LongText(b"", b"", text_bytes(item.original_text), size, evicted=True)
    return ConversationItem(item.role, gone, item.checkpoint, gone, time=item.time)


def _is_evicted(item: ConversationItem) -> bool:
    return isinstance(item.original_text, LongText) and item.original_text.evicted


@dataclass(frozen=True)
class BoundedRead:
    """``prepare``'s read of one session for a ``max_bytes`` budget (``head_bytes``: a transcript's
    head kept as well): a value, so a store keys its cache by it and sends it to a worker process
    as it is. The store runs :meth:`fold` over its log; the keeper and its retries are the core's."""

    max_bytes: int
    head_bytes: int = 0

    def fold(
        self, replay: Callable[[ConversationKeeper], tuple[SessionRecord, int | None]]
    ) -> ConversationSnapshot:
        """The conversation ``replay`` (one replay of the log into a keeper: the session it read and
        its ``capturedThroughSeq``) yields, read again while :meth:`ConversationKeeper.again` asks."""
        keeper: ConversationKeeper | None = ConversationKeeper(self.max_bytes, head_bytes=self.head_bytes)
        reads = 0
        while keeper is not None:
            session, captured_through_seq = replay(keeper)
            reads += 1
            kept, keeper = keeper, keeper.again(reads)
        return ConversationSnapshot(session, captured_through_seq, kept.conversation(), self.max_bytes)
