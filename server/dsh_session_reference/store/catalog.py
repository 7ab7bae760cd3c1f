"""The session catalog: the parts an indexed store has and starts when it is the editor's live
store (:class:`~..model.LiveSource`), so it is fast at any store size.

The index (:class:`~.index.store.IndexedSessionStore`) answers exactly and reads only the logs that
changed, but a listing still looks at every log (about 10 ms per thousand) and a cold index replays
every log once. So its catalog keeps the latest listing in memory and decides per request how much
of that work an ``@`` keystroke may wait for: up to :data:`SYNC_MAX_SESSIONS`
directories every request walks the root again (exact at the very next request); above it the
last listing is served and revalidated behind the editor, never beside a request
(:mod:`.scheduler`); before the first walk, the listing the index remembers is served, its titles
claims until their logs are scanned (:mod:`.titles`); titles too many to read now are hinted and
verified in a worker process (:mod:`.feed`). docs/architecture.md, "The catalog", tells it whole.
Nothing here writes to the sessions root; the index lives in the user's cache folder. The store's
reads are the store's own: it asks its catalog for the listing, the titles and the kept reads.

Over 500 lines because the listing (when it is walked, when it is served from memory), the title
fill and the background round share one snapshot and one lock; what stands alone is in modules of its
own: :mod:`.scheduler`, :mod:`.titles`, :mod:`.feed`, :mod:`.changes`, :mod:`.surfaces`.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import logging
import math
import os
import threading
import time
import weakref
from array import array
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Protocol

from ..cancellation import AbortSignal
from ..model import (
    INDEXING_BODIES,
    VERIFYING_TITLES,
    SessionRecord,
    StoreChange,
    TitleObservation,
    WarmListing,
)
from .changes import Listeners, changed_sessions
from .feed import Index, WorkerFeed
from .index.kept import SharedWithRows, StoredListing
from .index.rows import Fingerprint, IndexRow, fp_size, header_text
from .listed import Listed, reusable, same_record
from .listing import Reuse
from .root_state import root_state
from .scheduler import IDLE_ROUND, Scheduler, weakly
from .surfaces import Read, SurfaceCache
from .titles import ListingClaims, TitleBoard
from .watch import RootWatcher

LOG = logging.getLogger(__name__)

SYNC_MAX_SESSIONS: Final = 500
"""Up to this many directories in a walk (project directories, and session directories with a
session or without: a walk lists or looks in each, about 10 ms per thousand) every listing walks
the root again, so it is exact on every request; above it the last listing is served and
revalidated in the background. A count rather than a measured time, so a busy machine does not
change what a request sees; every directory counts, so no root makes each request walk 100,000
empty ones."""
REFRESH_AFTER: Final = 1.0
"""Seconds after which a served-from-memory listing is walked again in the background."""
SYNC_VERIFY_BYTES: Final = 8 << 20
"""Bytes of changed logs whose titles a request reads itself; more are verified in the background."""
STORED_HINT_ROWS: Final = 64
"""Over the listing the index remembers (before the first walk), a request scans for hints only the
logs it knows no title for among the first this many it is asked for (rank order: the rows an
``@`` shows first; 50 by default), and labels the rest by their id until they are scanned behind
it. The server that left the listing hinted in the same order, so over the listing it left there
are usually none to scan: the first answer holds the sessions at once, rather than waiting on
hints for every log a server closed before scanning (0.3 s of scans at 3,000 sessions)."""
KEEP_LISTING_EVERY: Final = 30.0
"""Seconds at least between two writes of the whole listing to the index
(:meth:`SessionCatalog._keep_listing`): at 50,000 sessions one costs the background half a second."""
FINAL_LISTING_MAX: Final = 10_000
"""The most sessions a closing catalog writes its listing for, if the background has not kept it
yet (about 0.1 s per 10,000): ``exit`` must end within a second at any size, so a bigger listing is
left as the background kept it last (the next server answers from that one, or from the rows, and
walks the root behind)."""


class Backing(Index, Protocol):
    """What the catalog asks of the indexed store that has it
    (:class:`~.index.store.IndexedSessionStore`): its walk, its rows and its exact title reads."""

    walked: dict[str, Fingerprint]
    directories: int
    autoflush: bool

    def walk_listing(
        self, stop: AbortSignal | None = None, reuse: Reuse | None = None
    ) -> list[SessionRecord]: ...

    def stored_listing(self) -> StoredListing: ...

    def cached_title(
        self, record: SessionRecord, fp: Fingerprint, key: str | None
    ) -> TitleObservation | None: ...

    def row(self, path: str) -> IndexRow | None: ...

    def share_with(self, shared: SharedWithRows) -> None: ...

    def read_titles_exact(
        self, records: Sequence[SessionRecord], stop: AbortSignal | None = None
    ) -> list[TitleObservation]: ...

    def index_bodies(self, records: Sequence[SessionRecord], stop: AbortSignal | None = None) -> int: ...

    def keep_whole_listing(
        self,
        records: list[SessionRecord],
        walked: dict[str, Fingerprint],
        directories: int,
        shown: Callable[[str, Fingerprint], TitleObservation | None] | None = None,
    ) -> None: ...

    def close(self) -> None: ...


_LIVE: weakref.WeakSet[SessionCatalog] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for catalog in list(_LIVE):
        with contextlib.suppress(ReferenceError):  # its store is gone: nothing left to write
            catalog.index.close()


class SessionCatalog:
    """The in-memory listing, title board and background parts of one indexed store; thread-safe
    like the store itself.

    Made by :meth:`~.index.store.IndexedSessionStore.start_catalog` (:func:`..assembly.open_live`
    and :func:`..assembly.open_source`); ``background=False`` keeps every answer exact and
    synchronous (no threads, no worker process), as the CLI does. It holds its store weakly: the
    store holds it, and a store dropped for another root is collected at once, stopping this.
    """

    def __init__(
        self, index: Backing, *, background: bool = True, scheduler: Scheduler | None = None
    ) -> None:
        self.index: Any = weakref.proxy(index)
        """The store (:class:`Backing`), held weakly."""
        self.root = index.root
        self.background = background
        self.scheduler = Scheduler() if scheduler is None else scheduler
        """When background work runs (requests first, then the editor's pauses); it owns the
        background thread and the worker process."""
        self.titles = TitleBoard()
        self.surfaces = SurfaceCache()
        self._lock = threading.RLock()
        self._refreshing = threading.Lock()
        self._loading = threading.Lock()
        self._stored_taken = False
        self._stored_loading = False
        """The listing the index remembers is being read (:meth:`_stored`): a bounded read, not a walk."""
        self._stored_whole = False
        """The listing served until the first walk is the one document a server left (its titles are
        every title the rows held then: a log it lists without one is hinted, not looked up)."""
        self._titles_kept = False
        """The listing the index remembers was taken, its titles claimed: the first rows of an
        answer from memory are titled at once (see :meth:`from_memory`)."""
        self._listing_kept: tuple[list[SessionRecord], int] | None = None
        """The listing and titles version last left in the index (:meth:`_keep_listing`)."""
        self._listing_kept_at = -math.inf
        self.snapshot: Listed | None = None
        """The latest listing."""
        self.feed = WorkerFeed(self.index, self.titles, self.scheduler)
        """What the worker process is given (hint scans, verifications, message text)."""
        self._watcher: RootWatcher | None = None
        self.listeners = Listeners()
        self._round = weakly(self._work)
        """This catalog's background round, referenced weakly (made once: ``_ask`` runs per keystroke)."""
        # A dropped catalog (the server switched roots) stops its thread and worker when collected;
        # at exit, _close_all closes every live one whole, index included, so the finalizer must not
        # run first and leave the index unwritten.
        weakref.finalize(self, self.scheduler.close).atexit = False
        _LIVE.add(self)

    # --- what the store's reads ask -----------------------------------------------------------------

    def listing(self, stop: AbortSignal | None) -> Listed:
        """The current listing (shared: callers must not mutate its records), as a request."""
        with self.scheduler.serving():
            return self._listing(stop)

    def warm(self, since: int | None, stop: AbortSignal | None) -> WarmListing:
        """The current listing with the title board's version (:class:`.titles.TitleBoard`), and
        with ``since`` the titles observed after it (:meth:`changed_titles`). Before the first walk,
        the listing the index remembers is taken first, so its titles are observed now, not under
        a table being built from it."""
        with self.scheduler.serving():
            if self.snapshot is None:
                self._stored()
            version = self.titles.version
            records = self._listing(stop).records
            if since is None:
                return WarmListing(records, version, {})
            if self.titles.version == since:
                return WarmListing(records, since, {})
            return WarmListing(records, *self.changed_titles(since, stop))

    def changed_titles(
        self, version: int, stop: AbortSignal | None = None
    ) -> tuple[int, dict[str, TitleObservation]]:
        """Titles observed since ``version`` for logs of the latest listing, by location; one
        observed at another fingerprint than the listing's is read again (:meth:`titles`)."""
        with self.scheduler.serving():
            version, changed = self.titles.changed_since(version)
            snapshot = self.snapshot
            if snapshot is None:
                return version, {}
            listed = (snapshot.by_location.get(location) for location in changed)
            records = [record for record in listed if record is not None]
            titles = self.titles_of(records, stop)
            return version, {str(r.location): seen for r, seen in zip(records, titles, strict=True)}

    def touch(self) -> None:
        """The editor is active (a message arrived): background work waits for it to pause."""
        self.scheduler.touch()

    def from_memory(self) -> bool:
        """Whether a request is answered from memory, with neither a walk of the root nor reads of
        its first rows' titles before it: the listing the index remembers is being read (a bounded
        read of one document), or the latest listing is served (:meth:`_served`) and that one's
        titles came with it (claims). A root this server listed by its own walk over an index that
        kept no listing is not: each row's title is then hinted from its log first, which took a
        second and more on cores an editor's start kept busy."""
        snapshot = self.snapshot
        if snapshot is None:
            return self._stored_loading
        return self._titles_kept and self._served(snapshot)

    def _listing(self, stop: AbortSignal | None) -> Listed:
        """The current listing (shared: callers must not mutate its records); walked again when
        it is not served from memory, and revalidated behind when it is old."""
        snapshot = self.snapshot
        if snapshot is None:
            snapshot = self._stored()
        if snapshot is None or not self._served(snapshot):
            return self._refresh(stop)
        if time.monotonic() - snapshot.taken >= REFRESH_AFTER:
            self._ask(refresh=True)
        return snapshot

    def _stored(self) -> Listed | None:
        """The listing the index remembers (:meth:`~.index.store.IndexedSessionStore.stored_listing`),
        taken once, before the first walk: a root big enough to be served from memory is then
        answered from it at once (a fresh editor's first ``@`` over a warm index), and the walk
        that revalidates it runs behind, as every later check does. It counts as older than any
        walk, so that walk is due at once; titles come from the same rows, and logs that changed
        meanwhile are corrected by it. Its titles are claims (:meth:`.titles.TitleBoard.claim`):
        the cache folder is not trusted, so each counts only once its log has been scanned here."""
        if not self.background:
            return None
        with self._loading:
            if self._stored_taken or self.snapshot is not None:
                return self.snapshot
            self._stored_taken = self._stored_loading = True
            try:
                return self._load_stored()
            finally:
                self._stored_loading = False

    def _load_stored(self) -> Listed | None:
        try:
            records, walked, titles, whole, directories, hints = self.index.stored_listing()
        except Exception:  # a damaged index is the walk's to find and report
            LOG.exception("the index's stored listing could not be read")
            return None
        snapshot = Listed.of(records, walked, -math.inf, max(len(walked), directories))
        if not self._served(snapshot):
            return None  # small roots are walked by every request anyway
        self.titles.claim(ListingClaims(titles, snapshot.by_location, walked), hints)
        self._titles_kept = True
        # The rows the first walk loads hold the listing's objects, found where the catalog keeps them.
        self.index.share_with(SharedWithRows(snapshot.by_location, walked, self.titles.current))
        self._ask()  # the claims are scanned behind
        if whole:  # already the document _keep_listing would write
            self._listing_kept = (records, self.titles.version)
        self._stored_whole = whole
        with self._refreshing:
            if self.snapshot is None:
                self.snapshot = snapshot
                self.feed.listing = snapshot.records
            return self.snapshot

    def _served(self, snapshot: Listed) -> bool:
        """Whether requests are answered from ``snapshot`` (revalidated behind them) rather than
        from a walk of their own: a big root with the background on."""
        return self.background and max(len(snapshot.records), snapshot.directories) > SYNC_MAX_SESSIONS

    def titles_of(
        self, records: Sequence[SessionRecord], stop: AbortSignal | None = None
    ) -> list[TitleObservation]:
        """Each record's title: as observed on the board, else from the index, by reading, or by a
        hint (hinted in the order of ``records``, as far as the time allows)."""
        with self.scheduler.serving():
            snapshot = self.snapshot
            walked = snapshot.walked if snapshot is not None else {}
            by_location = snapshot.by_location if snapshot is not None else {}
            # Before the first walk, the listing the index remembers: its titles are on the board
            # (claims), and a log the document a server left lists without one had no title in the
            # rows then either: hinted, not looked up row by row (1,869 lookups took 0.1 s).
            stored = self.background and snapshot is not None and snapshot.taken == -math.inf
            unlooked = stored and self._stored_whole
            found: list[TitleObservation | None] = [None] * len(records)
            claims: dict[str, tuple[SessionRecord, Fingerprint, TitleObservation]] = {}
            hintable = array("l")  # positions of listed logs to hint: a triple each was 13 MB at once
            exact: list[int] = []
            to_read = on_board = 0
            for index, record in enumerate(records):
                location = record.location
                fp = walked.get(location) if location is not None else None
                if location is None or fp is None:
                    exact.append(index)
                    continue
                listed = by_location.get(location) is record
                if listed and (seen := self.titles.current(location, fp)) is not None:
                    found[index] = seen
                    on_board += 1
                    continue
                if listed and unlooked:
                    hintable.append(index)
                    continue
                observation = self.index.cached_title(
                    record, fp, None if listed else header_text(record.header)
                )
                if observation is not None:
                    found[index] = observation
                    row = self.index.row(location)
                    if self.background and not (row is not None and row.title_here):
                        # From the file, which anyone who can write the cache folder can forge:
                        # shown until the log is scanned (the CLI, with nothing behind it, trusts it).
                        claims[location] = (record, fp, observation)
                    elif listed:
                        self.titles.observe(location, fp, observation)
                    continue
                if listed:
                    hintable.append(index)
                else:
                    exact.append(index)
                to_read += fp_size(fp)
            if claims:
                self.titles.claim(claims)
                self._ask()
            hinting = self.background and (stored or to_read > SYNC_VERIFY_BYTES)
            if hinting:  # too much to read now: hints for the listed logs, exact reads for the rest
                rows = STORED_HINT_ROWS if stored else None
                root_real = os.path.realpath(self.root)
                hints = self.titles.hint_in_order(records, hintable, walked.get, root_real, stop, rows=rows)
                for index, hint in hints:
                    found[index] = hint
                for index in hintable:  # not hinted now: labelled by their ids until scanned
                    if found[index] is None:
                        found[index] = TitleObservation(records[index].id)
            else:
                exact = sorted([*exact, *hintable])
            if exact:
                for index, observation in zip(
                    exact, self.index.read_titles_exact([records[i] for i in exact], stop), strict=True
                ):
                    found[index] = observation
            if hinting:
                self._ask()
            if on_board < len(records):
                self._write_behind()
            return [observation for observation in found if observation is not None]

    def _listed_at(self, location: str) -> Fingerprint | None:
        """The fingerprint the log at ``location`` is listed at now (``None``: not listed)."""
        snapshot = self.snapshot
        return None if snapshot is None else snapshot.walked.get(location)

    def kept(self, key: tuple[object, ...], read: Callable[[], Read]) -> Read:
        """``read()``, or what it returned before while the log is unchanged (:mod:`.surfaces`).
        A request like any other: background walks wait, so a huge log's read does
        not share the interpreter with them."""
        with self.scheduler.serving():
            snapshot = self.snapshot
            listed = snapshot.record_of(str(key[1])) if snapshot is not None else None
            return self.surfaces.read(key, listed.location if listed is not None else None, read)

    def background_work(self) -> tuple[str, int] | None:
        """What the background is doing that a person may be waiting for, and how many logs are
        left: titles of listed logs being verified, or message text being indexed for body
        search. ``None`` when idle. Read by the server to show progress."""
        titles = self.titles.pending()
        if titles:
            return VERIFYING_TITLES, titles
        bodies = self.feed.bodies
        if bodies.left and not bodies.stopped:
            return INDEXING_BODIES, bodies.left
        return None

    def stop_bodies(self) -> None:
        """Stop indexing message text (the user cancelled it): body search answers from the logs
        indexed so far until :meth:`resume_bodies` (body search turned on again)."""
        self.feed.bodies.stopped = True

    def resume_bodies(self) -> None:
        self.feed.bodies.stopped = False
        self._ask()

    # --- body search (opt-in) --------------------------------------------------------------------

    def want_bodies(self, records: Sequence[SessionRecord]) -> None:
        """Body search was asked for: the first time, start indexing message text (in the
        background, else here and now)."""
        if not self.feed.bodies.wanted:
            self.feed.bodies.wanted = True
            if self.background:
                self._ask()
            else:
                self.index.index_bodies(records)

    # --- lifecycle -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop the background work and leave the listing in the index (idempotent; the store's
        :meth:`~.index.store.IndexedSessionStore.close` then writes its rows).

        A catalog whose store is simply dropped (the server switched roots) is stopped when it is
        collected: its thread holds it only weakly.
        """
        if not self.scheduler.close():
            return
        with self._lock:
            watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher.close()
        try:
            self._keep_listing(final=True)
        except Exception:  # the rows still answer the next server
            LOG.exception("the listing could not be left in the index")

    # --- watching --------------------------------------------------------------------------------

    def watch(self, listener: Callable[[StoreChange], None]) -> str | None:
        """Watch the root (:class:`.watch.RootWatcher`) and tell ``listener`` what changed: at once
        on a small root (every request walks it); on a big one, changed logs at once and again
        after the walk the change asks for, which runs as soon as no request is being answered
        when sessions came or went, else at the editor's next pause. ``None`` once watching,
        else why not."""
        with self._lock:
            if self.scheduler.closed:
                return "the catalog is closed"
            self.listeners.add(listener)
            if self._watcher is not None:
                return None
            # The watcher's thread holds this catalog only weakly (as the background thread does):
            # a catalog dropped for another root is collected, and its finalizer stops the watcher.
            # Its first watch waits for the editor's first pause, as the walks do: setting it up
            # holds the interpreter, and the first answers must not wait for it.
            watcher = RootWatcher(self.root, weakly(self._watched), self.scheduler.idle)
            reason = watcher.start()
            if reason is None:
                self._watcher = watcher
                weakref.finalize(self, watcher.close, wait=False)
            return reason

    def watch_sessions(self, session_ids: Iterable[str]) -> None:
        """Watch these listed sessions' logs even on a root too big to watch every log
        (:meth:`.watch.RootWatcher.interest`)."""
        watcher, snapshot = self._watcher, self.snapshot
        if watcher is None or snapshot is None:
            return
        records = (snapshot.record_of(session_id) for session_id in session_ids)
        locations = (r.location for r in records if r is not None and r.location is not None)
        watcher.interest(dict.fromkeys(os.path.dirname(location) for location in locations))

    def _watched(self, paths: frozenset[str]) -> None:
        """The watcher's thread: which listed sessions the changed paths belong to."""
        snapshot = self.snapshot
        change = changed_sessions(self.root, paths, None if snapshot is None else snapshot.in_directory)
        if snapshot is not None and self._served(snapshot):
            # Logs that changed are read afresh by whoever asks (reads check each log's
            # fingerprint): say so now. Their titles, and sessions that came or went, wait for a
            # walk: at once when sessions came or went, else at the editor's next pause (a walk
            # of a big root per chunk dsh streams would take the interpreter from the keystrokes).
            self.listeners.hold(change)
            self._ask(refresh=True, urgent=change.listing)
            if not change.sessions:
                return
            change = StoreChange(change.sessions, False)  # the listing: said after the walk
        self.listeners.tell(change)

    # --- listing ---------------------------------------------------------------------------------

    def _refresh(
        self,
        stop: AbortSignal | None,
        *,
        quick: bool = False,
        pause: Callable[[], object] | None = None,
    ) -> Listed:
        """A new listing. ``quick`` (background refreshes of a big root) first compares a bare walk
        of the root (calling ``pause`` as it goes) with the one the last listing was taken after,
        and keeps that listing when nothing changed. Records of unchanged logs stay the same
        objects, so answers cached for them stay valid across refreshes. Callers that queued
        behind a listing take it if it began after they asked or, for a root served from memory,
        less than ``REFRESH_AFTER`` before (so a cold root is listed once, not once per waiting
        request)."""
        asked = time.monotonic()
        # The background's bare walk pauses while requests are answered, so it runs before the
        # lock is taken: a request never waits for a walk that waits for that request.
        state = root_state(self.root, pause) if quick else None
        with self._refreshing:
            previous = self.snapshot
            if previous is not None and (
                previous.taken >= asked
                or (not quick and self._served(previous) and asked - previous.taken < REFRESH_AFTER)
            ):
                return previous
            began = asked if quick else time.monotonic()
            if state is None and self.background and (previous is None or self._served(previous)):
                # The state a later quick refresh compares with, for any listing that may be
                # served from memory (the first one included: without it, the first background
                # check would list a big root all over again). Small roots are listed by every
                # request and need none.
                state = root_state(self.root)
            if previous is not None and quick and state == previous.state:
                snapshot = dataclasses.replace(previous, taken=began)  # the same records: the feed has them
                self.snapshot = snapshot
                return snapshot
            # A stored listing's records are the index's word until this walk: kept only where
            # the walk read the very same header.
            exact = previous is not None and previous.taken == -math.inf
            reuse = None if previous is None else functools.partial(reusable, previous, exact=exact)
            records = self.index.walk_listing(stop, reuse)
            walked = self.index.walked  # never changed after (the walk before's when the same): shared
            if previous is not None:
                records = [same_record(record, previous, walked, exact) for record in records]
            snapshot = Listed.of(records, walked, began, self.index.directories, state, previous)
            self.snapshot = snapshot
            self.feed.listing = snapshot.records
            if previous is not None:
                self.titles.keep_only(snapshot.by_location)
        self._write_behind()
        return snapshot

    # --- the background worker -------------------------------------------------------------------

    def _write_behind(self) -> None:
        """Have the background thread write what a request added to the index (a request does
        not wait for the index file: 10,000 new rows take a fifth of a second)."""
        if not self.index.autoflush:
            self._ask()

    def _ask(self, *, refresh: bool = False, urgent: bool = False) -> None:
        if self.background:
            self.scheduler.ask(self._round, refresh=refresh, urgent=urgent)

    def _work(self) -> float | None:
        """One round of background work: keep the worker process fed, scan hints, walk the root
        when asked. Returns the seconds until the next round is due unasked (``None`` once the
        source is closed).

        A round starts only while no request is being answered (and not before the first is, for a
        moment: :data:`.scheduler.START_GRACE`): on a cold root, hint scans would otherwise take
        the interpreter from the very request that asked for them. The walk that
        revalidates a listing waits for more: an editor quiet for :data:`IDLE_GRACE` (at most
        :data:`MAX_DEFER`). It is interpreter work that pauses only while a request is answered,
        and at 10,000 sessions (0.12 s, every second) running it between keystrokes added a
        third to the typing p95.
        """
        scheduler = self.scheduler
        if not (scheduler.wait_started() and scheduler.wait_quiet()):
            return None
        deadline = scheduler.refresh_deadline()
        try:
            self.index.flush(scheduler.wait_quiet)
            self.feed.feed()
            self.titles.scan_hints(os.path.realpath(self.root), scheduler.wait_quiet, self._listed_at)
            self._keep_listing()
            if deadline is not None:
                wait = scheduler.until_idle(deadline)
                if wait > 0:
                    return wait
                scheduler.refresh_taken()
                snapshot = self.snapshot
                seen = self.listeners.take()
                if seen or snapshot is None or time.monotonic() - snapshot.taken >= REFRESH_AFTER:
                    self._refresh(None, quick=True, pause=functools.partial(scheduler.idle, deadline))
                    self.feed.feed()
                if seen is not None:
                    self.listeners.tell(seen)
        except ReferenceError:
            # The store was dropped during the round (the server opened another root): as closed.
            # Logged, its traceback would hold this round's frame and so this catalog, its
            # threads and its worker process, for as long as the log record is kept.
            return None
        except Exception:  # the next request still works from the snapshot; say why here
            LOG.exception("background index work failed")
        return IDLE_ROUND

    def _keep_listing(self, *, final: bool = False) -> None:
        """Leave the latest listing in the index, with its titles, for the next server to answer
        its first ``@`` from (:meth:`_stored`). One not walked yet (the rows' listing, served
        until the first walk) is left too: it is what the next server would read from the rows,
        one document instead of ten thousand. Once per listing and titles version, when
        no title is waiting to be verified and the editor has paused (or at ``final``, the catalog
        closing, for at most :data:`FINAL_LISTING_MAX` sessions), and at most every
        :data:`KEEP_LISTING_EVERY` seconds."""
        snapshot = self.snapshot
        if not self.background or snapshot is None:
            return
        scheduler = self.scheduler
        if final and len(snapshot.records) > FINAL_LISTING_MAX:
            return
        if not final and (self.titles.pending() or scheduler.until_idle(math.inf) > 0 or not scheduler.quiet):
            return  # titles still coming, or the editor busy: 10,000 entries take the GIL 0.1 s
        version = self.titles.version
        kept = self._listing_kept
        if kept is not None and kept[0] is snapshot.records and kept[1] == version:
            return
        now = time.monotonic()
        if not final and now - self._listing_kept_at < KEEP_LISTING_EVERY:
            return
        self._listing_kept, self._listing_kept_at = (snapshot.records, version), now
        self.index.keep_whole_listing(
            snapshot.records, snapshot.walked, snapshot.directories, self.titles.current
        )
