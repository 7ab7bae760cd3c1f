"""The catalog's title board: each listed log's title as last observed, verified or hinted.

A title enters only through :meth:`TitleBoard.observe`, which stamps it with a version newer than
any a reader has seen, so a candidate table kept across requests asks what changed since it was
labelled and relabels only those rows.
Titles the index does not know yet are first shown from a byte scan (a hint, see
:func:`.index.title_scan.scan_last_title`) and queued for a worker process to verify; a verified
title replaces its hint, and a hint never replaces a verified title.

A title taken from the cache folder (the listing a server left, or an index row this process did
not write) is a claim: anyone who can write that folder can forge it, with a checksum that holds,
for a log that has not changed. It is shown until the log has been scanned here (queued at once, in
a worker process), and counts only where the scan finds the same title; otherwise the scan's title
is shown (an error claim keeps the session's id) and the log is verified.
"""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from typing import Final, TypeVar

from ..cancellation import AbortSignal
from ..display import shortened
from ..model import MAX_TITLE_CHARS, SessionRecord, TitleObservation
from .index.rows import Fingerprint
from .index.title_scan import scan_last_title

HINT_BUDGET: Final = 0.3
"""Seconds the first request may spend scanning logs for title hints; the rest are scanned behind it."""
LATER_HINT_BUDGET: Final = 0.05
"""The same for later requests: the background is scanning by then, and typing must stay responsive."""


READ: Final = 0
"""An observation read here (:attr:`Observed.claimed`)."""
CLAIM: Final = 1
"""A title taken from the cache folder, shown until its log is scanned (:meth:`TitleBoard.prove`)."""
HINTED_CLAIM: Final = 2
"""A claim that was a hint where it was made: verified even where the scan agrees (a hint and the
scan that proves it read the same bytes)."""


T = TypeVar("T")


def _let_go(table: dict[str, T]) -> dict[str, T]:
    """``table``, or a new one once it holds a small part of what its table was grown for: a dict
    keeps its table as it empties, and the board's queues each held one of 200,000 logs (4-8 MB)
    for as long as the server ran, then until the last log was taken, when the titles verified
    meanwhile were all held (the peak of a cold root's server). A copy once more than half are gone
    (the first table a copy can make half as big) costs a pass over what is left; each is a
    fraction of the one before, and all of them together about one pass over the queue."""
    if not table:
        return {}
    return dict(table) if sys.getsizeof(table) > _BYTES_AN_ENTRY * len(table) + 65_536 else table


_BYTES_AN_ENTRY: Final = 88
"""What a queue's dict may take an entry before :func:`_let_go` copies it: a dict grown to 200,000
entries takes 38 bytes an entry, and a copy sized for what is left takes at most half its table
once fewer than 87,382 of them are left (88 bytes an entry of that table). Copying only once four
fifths were gone (160) left 7.7 MB held for 84,000 claims at the end of the first walk over a kept
index, the peak of a server there."""


class Observed:
    """A title as observed at one fingerprint of its log, and the board version it made.

    ``claimed``: :data:`READ`, :data:`CLAIM` or :data:`HINTED_CLAIM` (true for a claim). A board
    keeps one a listed log: slotted, 64 bytes (a named tuple of the four was 80)."""

    __slots__ = ("claimed", "fp", "observation", "version")

    def __init__(
        self, fp: Fingerprint, observation: TitleObservation, version: int, claimed: int = READ
    ) -> None:
        self.fp = fp
        self.observation = observation
        self.version = version
        self.claimed = claimed

    def proved(self) -> Observed:
        """This observation, read here now (no longer a claim): the same label, the same version."""
        return Observed(self.fp, self.observation, self.version)

    def __repr__(self) -> str:
        return f"Observed({self.fp!r}, {self.observation!r}, {self.version}, claimed={self.claimed})"


Claim = tuple[SessionRecord, Fingerprint, TitleObservation]
"""What a claim is about: a listed log's record, the fingerprint it is listed at, the title claimed."""


class ListingClaims(Mapping[str, Claim]):
    """The claims a kept listing makes, by log path: its ``titles``, each with the log's record in
    ``records`` and its fingerprint in ``walked``. Each claim is made as the board takes it: a
    table of all of them, a tuple each, was 20 MB at once at 200,000 sessions, at a fresh
    server's first answer."""

    def __init__(
        self,
        titles: Mapping[str, TitleObservation],
        records: Mapping[str, SessionRecord],
        walked: Mapping[str, Fingerprint],
    ) -> None:
        self._titles = titles
        self._records = records
        self._walked = walked

    def __getitem__(self, location: str) -> Claim:
        return self._records[location], self._walked[location], self._titles[location]

    def __iter__(self) -> Iterator[str]:
        return iter(self._titles)

    def __len__(self) -> int:
        return len(self._titles)


class TitleBoard:
    """Observed titles, scanned hints, and the logs waiting to be verified or scanned."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.observed: dict[str, Observed] = {}
        """Each log's title as last observed, with the :attr:`version` that observation made."""
        self._version = 0
        self._seen = True
        """:attr:`version` may have been read since it was last bumped (as a reader may take the
        first, 0, for granted): the next change bumps it again."""
        self._hinted = False
        self.queued: dict[str, SessionRecord] = {}
        """Listed logs whose titles a worker process is to verify, in the order requests left them."""
        self.to_scan: dict[str, SessionRecord] = {}
        """Listed logs whose hints a request had no time to scan, each scanned at the fingerprint
        it is listed at when its turn comes (a triple of its position, record and fingerprint
        each was 64 bytes, 13 MB while a cold root's first 200,000 waited)."""
        self._scan_order: deque[str] = deque()
        """:attr:`to_scan`'s logs in the order they came, taken from the front: a dict's first key
        is found past every key deleted before it, so scanning 200,000 hints one at a time took
        15 s of the interpreter in that search alone. A log forgotten meanwhile is skipped."""
        self.in_flight: set[str] = set()
        """Logs a worker process is verifying now."""
        self.to_prove: dict[str, SessionRecord] = {}
        """Logs whose claimed titles are to be scanned, in the order they were claimed, after
        :attr:`_first_claims`. The fingerprint a claim is about is its entry's in :attr:`observed`
        (a pair of the record and the fingerprint a log was 64 bytes, 13 MB while a server's first
        200,000 claims waited)."""
        self._first_claims: deque[SessionRecord] = deque()
        """The records of claims made while none waited (the listing a server left, all at once),
        in order, each log once: a pointer a claim, where a dict of them was 7.7 MB at 200,000
        logs, held through the first walk over that listing, a server's peak there. A log claimed
        again while it waits here waits in :attr:`to_prove` instead (:meth:`to_scan_claims`)."""
        self.proving: set[str] = set()
        """Logs a worker process is scanning now."""

    # --- observations -----------------------------------------------------------------------------

    @property
    def version(self) -> int:
        """The version of :attr:`observed`: every change after this read is stamped with a newer one."""
        with self._lock:
            self._seen = True
            return self._version

    def _stamp(self) -> int:
        """The version a change made now is stamped with: a new one when the current one has been
        read (:attr:`version`, :meth:`changed_since`), else the current one again. Changes no reader
        told apart share one version, one ``int`` object: a stamp each was 32 bytes a listed log."""
        if self._seen:
            self._version += 1
            self._seen = False
        return self._version

    def current(self, location: str, fp: Fingerprint) -> TitleObservation | None:
        """The observation of the log at ``location`` if it was made at ``fp``."""
        entry = self.observed.get(location)
        return entry.observation if entry is not None and entry.fp == fp else None

    def observe(self, location: str, fp: Fingerprint, observation: TitleObservation) -> None:
        """The one way a title enters the board (kept tables then know they are stale)."""
        with self._lock:
            self._observe(location, fp, observation)

    def claim(
        self,
        claims: Mapping[str, tuple[SessionRecord, Fingerprint, TitleObservation]],
        hinted: Container[str] = (),
    ) -> None:
        """Titles taken from the cache folder (the listing a server left, an index row written
        elsewhere), as one change: shown until each log is scanned (:meth:`prove`), and queued for
        that; those in ``hinted`` were hints where they were made, and are verified after. A
        title read here at the same fingerprint is kept instead."""
        with self._lock:
            version = self._stamp()
            first = not self.claims_waiting()
            for location, (record, fp, observation) in claims.items():
                entry = self.observed.get(location)
                if entry is not None and entry.fp == fp and not entry.claimed:
                    continue
                claimed = HINTED_CLAIM if location in hinted else CLAIM
                self.observed[location] = Observed(fp, observation, version, claimed)
                if location in self.proving:
                    continue
                if first:  # each log once in ``claims``: no table needed to keep them apart
                    self._first_claims.append(record)
                else:
                    self.to_prove[location] = record

    def claims_waiting(self) -> bool:
        """Whether claimed titles wait to be scanned (:meth:`to_scan_claims`)."""
        return bool(self._first_claims or self.to_prove)

    def prove(self, location: str, fp: Fingerprint, scanned: str | None) -> bool:
        """What a scan of the log at ``fp`` found (its last ``session/title``) against the title
        claimed for it: the claim counts where they agree; a claimed title that disagrees gives
        way to the scan's, and a claimed error (the id shown) stays until the log is verified.
        ``True``: they disagree, or the claim was a hint, and the log is to be verified."""
        with self._lock:
            entry = self.observed.get(location)
            if entry is None or entry.fp != fp or not entry.claimed:
                return False  # observed here meanwhile (or the log changed): nothing to prove
            claimed = entry.observation
            if scanned is None:  # no title in the log: the label is its id, as for an error
                agree = claimed.error is not None or claimed.title is None
            else:
                agree = claimed.error is None and claimed.title == scanned
            if agree:
                self.observed[location] = entry.proved()  # the same label: no new version
                return entry.claimed == HINTED_CLAIM  # a hint proved by a scan is still a hint: verified next
            if claimed.error is None:
                self._observe(location, fp, TitleObservation(claimed.session_id, title=scanned))
            return True

    def provisional(self, location: str, fp: Fingerprint, hint: TitleObservation) -> None:
        """Show a hint until the verified title replaces it (a verified one is never replaced; a
        claimed one is, the hint being read from the log): checked and written under one lock, so
        a verification landing meanwhile is never undone."""
        with self._lock:
            entry = self.observed.get(location)
            if entry is None or entry.fp != fp or entry.claimed:
                self._observe(location, fp, hint)

    def _observe(self, location: str, fp: Fingerprint, observation: TitleObservation) -> None:
        entry = self.observed.get(location)
        if entry is not None and entry.fp == fp:
            if entry.observation == observation:
                if entry.claimed:  # read here: the claim is the observation now
                    self.observed[location] = entry.proved()
                return  # a verified title that confirms its hint changes no label
            # The fingerprint this log is listed at, not an equal copy a worker sent back: at
            # 200,000 sessions the copies were 50 MB.
            fp = entry.fp
        self.observed[location] = Observed(fp, observation, self._stamp())

    def keep_only(self, listed: Container[str]) -> None:
        """Forget the logs a new listing no longer lists (deleted, moved): what the board holds is
        bounded by the root, not by every log a long-running server ever saw."""
        with self._lock:
            for kept in (self.observed, self.queued, self.to_scan, self.to_prove):
                for location in [location for location in kept if location not in listed]:
                    del kept[location]
            live = (location for location in self._scan_order if location in self.to_scan)
            self._scan_order = deque(dict.fromkeys(live))  # each log once, in its first place
            self._first_claims = deque(r for r in self._first_claims if r.location in listed)

    def changed_since(self, version: int) -> tuple[int, list[str]]:
        """The current version and every log observed after ``version``."""
        with self._lock:
            self._seen = True
            changed = [location for location, entry in self.observed.items() if entry.version > version]
            return self._version, changed

    # --- hints ------------------------------------------------------------------------------------

    def hint(self, location: str, root_real: str, stop: AbortSignal | None) -> str | None:
        """The title a byte scan finds in the log at ``location``, shortened as observations are
        (then kept as one: :meth:`provisional`)."""
        found = scan_last_title(location, root_real, stop)
        return None if found is None else shortened(found, MAX_TITLE_CHARS)

    def scan_hints(
        self, root_real: str, go_on: Callable[[], bool], listed_at: Callable[[str], Fingerprint | None]
    ) -> None:
        """Scan the hints requests had no time for, in the order they left them, while ``go_on()``
        (the background's pause: the scan is mostly decompression, outside the GIL), each at the
        fingerprint ``listed_at`` says its log is listed at (``None``: not listed any more)."""
        while go_on():
            with self._lock:
                if not self.to_scan:
                    self.to_scan = _let_go(self.to_scan)
                    self._scan_order.clear()
                    return
                while (record := self.to_scan.pop(self._scan_order.popleft(), None)) is None:
                    pass  # forgotten (no longer listed) after it was queued
                if len(self.to_scan) % 1024 == 0:
                    self.to_scan = _let_go(self.to_scan)
            location = str(record.location)
            fp = listed_at(location)
            if fp is not None and self.current(location, fp) is None:
                hint = TitleObservation(record.id, title=self.hint(location, root_real, None))
                self.provisional(location, fp, hint)

    # --- the verification queue -------------------------------------------------------------------

    def hint_in_order(
        self,
        records: Sequence[SessionRecord],
        positions: Sequence[int],
        listed_at: Callable[[str], Fingerprint | None],
        root_real: str,
        stop: AbortSignal | None,
        *,
        rows: int | None = None,
    ) -> list[tuple[int, TitleObservation]]:
        """Hints for listed logs whose titles are too many to read now (``records`` at
        ``positions``, each at the fingerprint ``listed_at`` says), in the order asked (the core
        asks in ``listCandidates``' rank order) as far as the time allows (:data:`HINT_BUDGET` for
        the first request, :data:`LATER_HINT_BUDGET` after), every one queued for a worker process
        to verify for the next request. With ``rows``, only logs at positions below it are scanned
        now. The rest, scanned behind, have no hint here: the caller labels them by their id (a
        pair of a position and an untitled observation each was 24 MB at once at 200,000
        sessions, at a cold root's first ``@``).

        The logs left to scan go straight onto the board, their records alone: at 200,000
        sessions, dicts of them made first and then copied over were 40 MB at once."""
        hints: list[tuple[int, TitleObservation]] = []
        deadline = time.monotonic() + (LATER_HINT_BUDGET if self._hinted else HINT_BUDGET)
        self._hinted = True
        scanned = 0
        for index in positions:
            if time.monotonic() >= deadline or (rows is not None and index >= rows):
                break
            scanned += 1
            record = records[index]
            location = str(record.location)
            if (fp := listed_at(location)) is None:
                continue  # not listed any more
            hint = TitleObservation(record.id, title=self.hint(location, root_real, stop))
            self.provisional(location, fp, hint)
            hints.append((index, hint))
        with self._lock:
            for index in itertools.islice(positions, scanned, None):
                record = records[index]
                location = str(record.location)
                if location not in self.to_scan:
                    self._scan_order.append(location)
                self.to_scan[location] = record
            for index in positions:
                record = records[index]
                location = str(record.location)
                if location not in self.in_flight:
                    self.queued.setdefault(location, record)
        return hints

    def enqueue(self, verify: dict[str, SessionRecord]) -> None:
        """Queue logs to verify (those not being verified already)."""
        with self._lock:
            for location, record in verify.items():
                if location not in self.in_flight:
                    self.queued.setdefault(location, record)

    def pending(self) -> int:
        """Titles queued or being verified, and claimed titles not scanned yet: at 200,000
        sessions over the index a server left, every title is a claim to scan, work a person
        waits on (a claim may be a forged title on show) and the progress says so."""
        with self._lock:
            claims = len(self._first_claims) + len(self.to_prove)
            return len(self.queued) + len(self.in_flight) + claims + len(self.proving)

    def take(self, batch: list[SessionRecord]) -> None:
        """``batch`` (from :attr:`queued`) goes to a worker process."""
        with self._lock:
            for record in batch:
                self.queued.pop(str(record.location), None)
                self.in_flight.add(str(record.location))
            self.queued = _let_go(self.queued)

    def done(self, batch: list[SessionRecord]) -> None:
        with self._lock:
            self.in_flight.difference_update(str(record.location) for record in batch)

    def busy(self) -> bool:
        with self._lock:
            return bool(self.in_flight or self.proving)

    def waiting(self, count: int) -> list[SessionRecord]:
        """Up to ``count`` queued logs to verify next, in the order they were queued."""
        with self._lock:
            return list(itertools.islice(self.queued.values(), count))

    def to_scan_claims(self, count: int) -> list[tuple[SessionRecord, Fingerprint]]:
        """Up to ``count`` claimed logs to scan next (now in a worker process's hands), in the
        order they were claimed."""
        with self._lock:
            taken: list[tuple[str, SessionRecord]] = []
            first = self._first_claims
            while first and len(taken) < count:
                record = first.popleft()
                location = str(record.location)
                if location not in self.to_prove:  # else claimed again since: taken from there
                    taken.append((location, record))
            taken += itertools.islice(self.to_prove.items(), count - len(taken))
            claims = []
            for location, record in taken:
                self.to_prove.pop(location, None)
                if (entry := self.observed.get(location)) is not None:
                    self.proving.add(location)
                    # The entry's fingerprint: a claim made again at another one replaced it and
                    # its record here; an observation that replaced the claim leaves nothing to prove.
                    claims.append((record, entry.fp))
            self.to_prove = _let_go(self.to_prove)
            return claims

    def scanned(self, locations: Iterable[str], unproved: Iterable[str] = ()) -> None:
        """A scan batch is over. The claims of ``unproved`` logs (the scan failed, or the log
        changed under it) are withdrawn, as one change: the next request asks the index again and
        claims anew what it finds there, to be scanned in turn."""
        with self._lock:
            self.proving.difference_update(locations)
            withdrawn = [
                location for location in unproved if (entry := self.observed.get(location)) and entry.claimed
            ]
            if withdrawn:
                self._stamp()
                for location in withdrawn:
                    del self.observed[location]
