"""Following the sessions root as dsh writes it: which open documents and served transcripts a
change may alter.

The root's store watches it (:meth:`~..model.LiveSource.watch`) and says which listed sessions'
logs changed, after its listing has caught up. Documents whose analysis read one of them (or, when
sessions came or went, any that mentions a session the root did not list), and transcripts of
those sessions, are handed to the server (:meth:`Host.refresh`), which analyses the documents
again and tells the client. Changes that arrive while one refresh is under way are merged into the
next, so a reply dsh streams in many appends costs a handful of refreshes, not one per chunk.

The server is seen only through :class:`Host`: this module imports nothing of :mod:`.server`.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Coroutine
from typing import Any, Final, Protocol

from ..analysis import Analysis
from ..model import LiveSource, StoreChange
from .documents import DocumentStore

LOG = logging.getLogger(__name__)

MAX_TRACKED_TRANSCRIPTS: Final = 64


class Host(Protocol):
    """What following the root needs of the server."""

    documents: DocumentStore

    @property
    def is_closing(self) -> bool: ...

    def spawn(self, work: Coroutine[Any, Any, Any]) -> object: ...

    def analysis_done(self, uri: str) -> Analysis | None:
        """The document's finished analysis (``None`` while one runs or when it failed)."""

    async def refresh(self, documents: list[str], transcripts: list[str]) -> None:
        """Analyse ``documents`` again and tell the client they (and the served ``transcripts``)
        may read differently; returns once their analyses ended."""


class Live:
    """The server's side of watching: which store it follows, and what a change affects."""

    def __init__(self, host: Host) -> None:
        self.host = host
        self.loop: asyncio.AbstractEventLoop | None = None
        """The server's event loop (set on ``initialize``), which the store's watcher hands its
        changes to."""
        self._followed: weakref.ref[LiveSource] | None = None
        """Weakly: a store dropped for another root must be collected (that stops its threads)."""
        self._changes: list[StoreChange] = []
        self._refreshing = False
        self._transcripts: dict[str, str] = {}
        """Transcript URIs served, with their session (the newest :data:`MAX_TRACKED_TRANSCRIPTS`)."""
        self._read: dict[str, frozenset[str]] = {}
        """Each open document's listed sessions, as its last finished analysis read them: kept
        while a newer analysis runs, so the sessions watched do not come and go as one types."""
        self._interest: frozenset[str] = frozenset()
        """The sessions the followed store was last told to watch."""

    def follow(self, store: LiveSource) -> None:
        """Have ``store`` tell this server of changes (once per store; a store that cannot
        watch keeps checking the root when a request asks, as before)."""
        if self.loop is None or (self._followed is not None and self._followed() is store):
            return
        self._followed = followed = weakref.ref(store)
        self._interest = frozenset()  # the new store is told afresh
        loop = self.loop

        def changed(change: StoreChange) -> None:  # the store's thread
            if not loop.is_closed():
                loop.call_soon_threadsafe(self.changed, followed, change)

        reason = store.watch(changed)
        if reason is not None:
            LOG.warning("not watching the sessions root (it is checked when asked instead): %s", reason)

    def served(self, uri: str, session_id: str) -> None:
        """A transcript was served: a change to its session's log tells the client."""
        self._transcripts.pop(uri, None)
        self._transcripts[uri] = session_id
        while len(self._transcripts) > MAX_TRACKED_TRANSCRIPTS:
            del self._transcripts[next(iter(self._transcripts))]
        self.interested()

    def analysed(self, uri: str, task: asyncio.Future[Analysis]) -> None:
        """An analysis of ``uri`` ended (a cancelled or failed one changes nothing)."""
        if not task.cancelled() and task.exception() is None:
            references = task.result().references
            self._read[uri] = frozenset(r.session_id for r in references if r.record is not None)
        self.interested()

    def interested(self) -> None:
        """Tell the followed store which sessions' logs matter here (those the open documents'
        analyses read, then those of served transcripts, newest first), so it watches them even
        on a root too big to watch every log. Cheap when unchanged."""
        store = None if self._followed is None else self._followed()
        if store is None:
            return
        documents = self.host.documents
        for uri in [uri for uri in self._read if documents.get(uri) is None]:
            del self._read[uri]  # closed
        sessions = dict.fromkeys(session for read in self._read.values() for session in sorted(read))
        sessions.update((session, None) for session in reversed(self._transcripts.values()))
        if frozenset(sessions) != self._interest:
            self._interest = frozenset(sessions)
            store.watch_sessions(list(sessions))

    def changed(self, store: weakref.ref[LiveSource], change: StoreChange) -> None:
        """On the loop: a burst of changes under the root of ``store``."""
        if self.host.is_closing or store is not self._followed:
            return
        self._changes.append(change)
        if not self._refreshing:
            self._refreshing = True
            self.host.spawn(self._refresh())

    def affected(self, uri: str, change: StoreChange) -> bool:
        """Whether the document's analysis may read differently after ``change``."""
        analysis = self.host.analysis_done(uri)
        if analysis is None:
            return True
        if change.listing and (analysis.intended or any(r.record is None for r in analysis.references)):
            return True
        return any(reference.session_id in change.sessions for reference in analysis.references)

    async def _refresh(self) -> None:
        """Rounds of refreshing until no change is left. A round waits for the analyses it asked
        for before the next one starts: dsh appending every few milliseconds to a log a document
        mentions must not cancel each analysis before it ends (a request waiting for it would wait
        for ever), so the document is analysed at most once per round, each round on the newest log."""
        try:
            while self._changes:
                await asyncio.sleep(0)  # let the rest of a burst in
                changes, self._changes = self._changes, []
                merged = StoreChange(
                    frozenset().union(*(change.sessions for change in changes)),
                    any(change.listing for change in changes),
                )
                await self.host.refresh(
                    [document.uri for document in self.host.documents if self.affected(document.uri, merged)],
                    [uri for uri, session in self._transcripts.items() if session in merged.sessions],
                )
        finally:
            self._refreshing = False
