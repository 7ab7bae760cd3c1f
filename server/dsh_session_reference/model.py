"""The data the store hands the resolver, and the interface between them.

The resolver never touches files: it sees a :class:`SessionSource`, so the
JSONL store, a cached index (performance issue) or a test double can sit
behind it without the resolver changing. Store methods are synchronous and
blocking on purpose; the resolver runs them in worker threads and passes a
:class:`~.cancellation.AbortSignal` so a cancelled request stops reading promptly.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from .cancellation import AbortSignal
from .display import shortened
from .projection import ConversationItem


class StoreError(Exception):
    """A session could not be listed or read; ``str(error)`` is the message
    upstream's session-query would give (``session "x" not found``, ...)."""

    def __init__(self, message: str, code: str = "SESSION_QUERY_READ_FAILED") -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One listed session: its validated header and where it lives.

    ``header`` keeps the on-disk key order (it is cloned into snapshots);
    ``location`` is opaque to everything but the store that produced it.
    Slotted: a server keeps one per listed session (200,000 of them: 25 MB of instance dicts).
    """

    id: str
    created_at: int
    cwd: str | None
    header: Mapping[str, Any]
    location: str | None = None


@dataclass(frozen=True)
class SurfaceSnapshot:
    """``readSurface()``: the header, the seq of the last event of any type
    (``None`` for an empty log) and the current surface events in node order.

    Events are plain dicts shaped as upstream's ``SessionEvent``."""

    session: SessionRecord
    captured_through_seq: int | None
    events: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


@dataclass(frozen=True)
class ConversationSnapshot:
    """A session as ``prepare`` sees it: the header, ``capturedThroughSeq`` and the projected
    conversation in surface order, texts bounded by the byte budget it was read for
    (``conversation.py`` says what is kept)."""

    session: SessionRecord
    captured_through_seq: int | None
    items: Sequence[ConversationItem]
    max_bytes: int


@dataclass(frozen=True, slots=True)
class TitleObservation:
    """``readTitleSnapshots`` for one id: ``title`` is the last
    ``session/title`` value (``None`` when the log has none); ``error`` is set
    instead when the log could not be read (the label then falls back to the id).

    A title is kept to its first :data:`MAX_TITLE_CHARS` characters (upstream keeps it whole):
    every listed title is held, lowered for search, indexed and kept with the listing, and fifty
    2 MB titles made a 680 MB server."""

    session_id: str
    title: str | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        if self.title is not None and len(self.title) > MAX_TITLE_CHARS:
            object.__setattr__(self, "title", shortened(self.title, MAX_TITLE_CHARS))


MAX_TITLE_CHARS: Final = 1_024
"""The longest title a listing keeps (a query that matches only past it finds nothing there)."""

MAX_HEADER_CHARS: Final = 4_096
"""The longest header string (a cwd, an agent preset, a parent session) a listing keeps whole:
PATH_MAX, so no cwd dsh can run in is cut. Every listed header is held, kept in the index and in
the listing a server leaves, and three logs with an 8 MB cwd made a 713 MB CLI. ``prepare`` reads
the header afresh from the log, so the model gets the cwd whole, as upstream sends it."""
_CUT: Final = "…(cut, sha-256 "
_CUT_CHARS: Final = MAX_HEADER_CHARS + len(_CUT) + 64 + 1


def kept_text(value: str) -> str:
    """``value``, or past :data:`MAX_HEADER_CHARS` (and a marker's length) its first characters
    and the SHA-256 of all of it: two different values never keep the same text (a cut value is
    longer than any value kept whole up to the bound, and names its whole), so a cwd still ranks
    as equal only to itself. Cutting a kept value leaves it as it is."""
    if len(value) <= _CUT_CHARS:
        return value
    digest = hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{value[:MAX_HEADER_CHARS]}{_CUT}{digest})"


def kept_header(header: dict[str, Any]) -> dict[str, Any]:
    """A listed header with every string :func:`kept_text` keeps (a value JSON spells in over
    :data:`MAX_HEADER_CHARS`, which only a hand-made header holds, as that JSON cut); ``header``
    itself when nothing is cut (the usual case: no copy)."""
    cut: dict[str, Any] | None = None
    for key, value in header.items():
        if type(value) is str:
            kept: Any = kept_text(value)
        elif type(value) in (dict, list):
            text = json.dumps(value, ensure_ascii=False)
            kept = kept_text(text) if len(text) > MAX_HEADER_CHARS else value
        else:
            continue
        if kept is not value:
            cut = dict(header) if cut is None else cut
            cut[key] = kept
    return header if cut is None else cut


@dataclass(frozen=True)
class BodyMatch:
    """A session whose message text matches a body search, with a short excerpt."""

    record: SessionRecord
    snippet: str


@dataclass(frozen=True)
class WarmListing:
    """:meth:`SessionSource.warm_listing`: ``records`` (shared, never to be mutated), the titles
    ``version`` they are to be labelled as of, and the titles observed since the version asked
    about, by location."""

    records: list[SessionRecord]
    version: int
    changed: Mapping[str, TitleObservation]


class ConversationRead(Protocol):
    """A bounded read of one log (:class:`.conversation.BoundedRead`): the store calls :meth:`fold`
    with its replay of the log into a keeper, as often as the fold asks; what to keep and when to
    read again are the fold's. A hashable value that pickles (a cache key; sent to a worker)."""

    def fold(self, replay: Callable[[Any], tuple[SessionRecord, int | None]]) -> ConversationSnapshot:
        """The conversation the replays (each: the session read and its ``capturedThroughSeq``) yield."""
        ...


class SessionSource(Protocol):
    """What the resolver needs from a sessions store (upstream's ``sessionQuery``), one protocol
    every store implements whole: what a store cannot do it answers with ``None``, so nothing
    asks which kind of store it holds."""

    @property
    def walked_sessions(self) -> int:
        """Session directories the latest full listing has looked at so far (progress for a cold
        root of thousands of logs), never fewer than the last finished listing's."""
        ...

    def list_sessions(self, stop: AbortSignal | None = None) -> list[SessionRecord]:
        """Every visible session, newest ``createdAt`` first, ties by ICU ``localeCompare`` of ids."""
        ...

    def find_records(
        self, session_ids: Iterable[str], stop: AbortSignal | None = None
    ) -> dict[str, SessionRecord]:
        """The record :meth:`list_sessions` lists for each id that has one (a store that can look
        where one log must be need not list a root of 50,000 for three mentions)."""
        ...

    def read_titles(
        self, records: Sequence[SessionRecord], stop: AbortSignal | None = None
    ) -> list[TitleObservation]:
        """One observation per record, in order (duplicates allowed). A store that shows some
        titles before it has read them (hints) shows first those asked first."""
        ...

    def warm_listing(self, since: int | None, stop: AbortSignal | None = None) -> WarmListing | None:
        """What one ``@`` keystroke asks of a store that keeps its listing and titles warm: the
        latest listing, the version of the titles it keeps (how many times they changed) and, with
        ``since``, the titles observed after that version; ``None`` from a store that keeps none
        (every listing walks, every title read reads)."""
        ...

    def titles_since(
        self, version: int, stop: AbortSignal | None = None
    ) -> tuple[int, dict[str, TitleObservation]]:
        """The titles version now, and each listed log's title observed since ``version`` (by
        location)."""
        ...

    def read_surface(self, session_id: str, stop: AbortSignal | None = None) -> SurfaceSnapshot:
        """The folded current surface of one session; raises :class:`StoreError`."""
        ...

    def read_conversation(
        self, session_id: str, read: ConversationRead, stop: AbortSignal | None = None
    ) -> ConversationSnapshot | None:
        """What ``prepare`` needs of a session, without holding the log: what ``read`` folds of
        its replays (``conversation.py``); ``None`` when this store reads surfaces only."""
        ...

    def search_bodies(
        self, query: str, records: Sequence[SessionRecord], limit: int
    ) -> list[BodyMatch] | None:
        """Listed sessions whose message text matches ``query``, best first; ``None`` when this
        store indexes no message text (body search is opt-in)."""
        ...


VERIFYING_TITLES: Final = "Verifying session titles"
INDEXING_BODIES: Final = "Indexing message text for search"
"""The kinds of background work a :class:`LiveSource` reports (progress titles)."""


@dataclass(frozen=True)
class StoreChange:
    """What a watched root saw change (:meth:`LiveSource.watch`): logs of listed sessions, and
    whether the listing itself may have changed (a session directory came or went, a log of a
    session not listed yet was written)."""

    sessions: frozenset[str]
    listing: bool


class LiveSource(SessionSource, Protocol):
    """A long-lived store for an editor (an indexed store with its catalog,
    :meth:`.store.index.store.IndexedSessionStore.start_catalog`): it keeps its
    listing and titles warm, works in the background while the editor is quiet, and says so."""

    def touch(self) -> None:
        """The editor asked for something: background work waits for the next pause."""

    def background_work(self) -> tuple[str, int] | None:
        """What the source is doing in the background (a title above, and how many logs are left)."""

    def from_memory(self) -> bool:
        """Whether a listing now is served from memory (the one the last server left, being read
        or read, or the latest walk's once the titles came with the one it left), so neither a walk
        of the root nor reads of the first rows' titles stand before an answer."""

    def stop_bodies(self) -> None:
        """Stop indexing message text (the user cancelled it); body search answers from what is indexed."""

    def resume_bodies(self) -> None:
        """Index message text again (body search was turned on again)."""

    def watch(self, listener: Callable[[StoreChange], None]) -> str | None:
        """Watch the root and call ``listener`` (from another thread) once the listing has caught
        up with a change; ``None`` once watching, else why the root cannot be watched."""

    def watch_sessions(self, session_ids: Iterable[str]) -> None:
        """Watch these sessions' logs even where the root has too many to watch them all (those
        the editor's open documents mention): a log dsh appends to refreshes them at once."""

    def close(self) -> None:
        """Stop every thread and process the source started and write what is pending."""
