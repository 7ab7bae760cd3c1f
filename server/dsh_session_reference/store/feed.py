"""What the catalog's worker process is given, one batch at a time, and what comes back: claimed
titles to scan, titles to verify, and (for body search) logs whose message text to index.

One batch at a time keeps a core free for requests. Claimed titles go first: until its log is
scanned, a claim may be a forged title on show (:meth:`.titles.TitleBoard.claim`); a verification
only confirms what a scan or a hint already shows.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, replace
from typing import Protocol

from ..model import SessionRecord
from .index.records import Verified, batches
from .index.rows import Fingerprint, ReadAt
from .scheduler import Scheduler
from .titles import TitleBoard

LOG = logging.getLogger("dsh_session_reference.store.catalog")

VERIFY_BATCH_BYTES = 8 << 20
SCAN_BATCH = 256
"""Claimed titles per scan a worker process runs (a scan reads the log, but does not replay it)."""


class Index(Protocol):
    """What the feed asks of the index whose worker it feeds
    (:class:`~.index.store.IndexedSessionStore`, which has the feed as a part)."""

    root: str

    def bodies_to_index(self, records: Sequence[SessionRecord]) -> list[str]: ...

    def put_bodies(self, found: Iterable[ReadAt[str]]) -> None: ...

    def remember_verified(self, record: SessionRecord, found: Verified) -> None: ...

    def flush(self, pause: Callable[[], object] | None = None) -> None: ...


@dataclass
class BodyIndexing:
    """Where indexing message text for body search stands."""

    wanted: bool = False
    """Body search has been asked for (indexing starts on the first search)."""
    stopped: bool = False
    """The user cancelled indexing: search answers from what is indexed."""
    left: int = 0
    """Logs left to index while a batch of them is being read (0: none is)."""
    done_for: list[SessionRecord] | None = None
    """The listing every log of which is indexed."""


class WorkerFeed:
    """Feeds the scheduler's worker process for a catalog over ``index`` (``titles``: its board)."""

    def __init__(self, index: Index, titles: TitleBoard, scheduler: Scheduler) -> None:
        self.index = index
        self.titles = titles
        self.scheduler = scheduler
        self.bodies = BodyIndexing()
        self.listing: list[SessionRecord] | None = None
        """The catalog's latest listing, whose logs' message text is indexed when body search is on."""
        self._lock = threading.Lock()

    def feed(self) -> None:
        """Send scans of claimed titles (then queued title verifications, then body texts, when
        wanted) to the worker process: from the background thread, and as a scan of claimed titles
        ends (the next one goes at once, not at the next round, which a walk may hold up)."""
        titles = self.titles
        with self._lock:
            if titles.busy():
                return  # one batch at a time keeps a core free for requests
            # Claimed titles first: until its log is scanned, a claim may be a forged title on show
            # (a verification only confirms what a scan or a hint already shows).
            if titles.claims_waiting():
                worker = self.scheduler.worker()
                if worker is None:
                    return
                claims = titles.to_scan_claims(SCAN_BATCH)
                paths = [str(record.location) for record, _ in claims]
                scan = worker.submit("scan_titles", self.index.root, paths)
                scan.add_done_callback(lambda done: self._scanned(claims, done))
                return
            queued = titles.waiting(256)
            if queued:
                batch = batches(queued, VERIFY_BATCH_BYTES, 256)[0]
                worker = self.scheduler.worker()
                if worker is None:
                    return
                titles.take(batch)
                future = worker.submit("verify_titles", self.index.root, batch)
                future.add_done_callback(lambda done: self._verified(batch, done))
                return
            listing = self.listing
            bodies = self.bodies
            if bodies.wanted and not bodies.stopped and not bodies.left and listing is not None:
                if bodies.done_for is listing:
                    return  # every log of this listing is indexed already
                stale = self.index.bodies_to_index(listing)
                if not stale:
                    bodies.done_for = listing
                    return
                worker = self.scheduler.worker()
                if worker is None:
                    return
                bodies.left = len(stale)
                body = worker.submit("message_texts", self.index.root, stale[:64])
                body.add_done_callback(self._bodies_read)

    def _verified(
        self,
        batch: list[SessionRecord],
        future: Future[list[Verified]],
    ) -> None:
        try:
            results = future.result()
        except Exception as failure:  # a cancelled or crashed batch is queued again on demand
            LOG.info("title verification stopped: %r", failure)
            results = []
        for record, found in zip(batch, results, strict=False):
            if found is not None and found[0].session_id == record.id:
                # The listed record's id, not the copy a worker sent back (kept for every title),
                # and the observation a hint already made when it is the same (its title, not a
                # copy of it, is what the index row then keeps).
                observation, fp, started_ns = found
                observation = replace(observation, session_id=record.id)
                shown = None if record.location is None else self.titles.current(record.location, fp)
                found = (shown if shown == observation else observation, fp, started_ns)
            self.index.remember_verified(record, found)
            if found is not None and record.location is not None:
                self.titles.observe(record.location, found[1], found[0])
        self.index.flush()
        self.titles.done(batch)
        self.scheduler.wake()

    def _scanned(
        self, claims: list[tuple[SessionRecord, Fingerprint]], future: Future[list[ReadAt[str | None]]]
    ) -> None:
        """A worker's scans of claimed titles: the claims that hold count, the others give way to
        the scan and are verified."""
        try:
            results = future.result()
        except Exception as failure:  # withdrawn: the next request claims them anew, to be scanned
            LOG.info("scanning claimed titles stopped: %r", failure)
            results = []
        verify: dict[str, SessionRecord] = {}
        unproved: list[str] = []
        scanned = {found.path: found for found in results}
        for record, fp in claims:
            location = str(record.location)
            found = scanned.get(location)
            if found is None or found.fp != fp:
                unproved.append(location)  # not scanned, or changed under the scan
            elif self.titles.prove(location, fp, found.value):
                verify[location] = record
        self.titles.enqueue(verify)
        self.titles.scanned((str(record.location) for record, _ in claims), unproved)
        try:
            self.feed()
        except Exception:  # the background's next round feeds it instead
            LOG.exception("the next scan of claimed titles could not be sent")
        self.scheduler.wake()

    def _bodies_read(self, future: Future[list[ReadAt[str]]]) -> None:
        try:
            self.index.put_bodies(future.result())
        except Exception as error:
            LOG.info("body indexing stopped: %r", error)
        self.bodies.left = 0
        self.scheduler.wake()
