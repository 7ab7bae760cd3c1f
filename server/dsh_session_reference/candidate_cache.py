"""The candidate table kept across ``@`` keystrokes: built once per listing, relabelled row by row
as titles change.

An ``@`` popup asks again at every keystroke. A store that keeps its listing and titles warm (the
language server's) answers each with one call, :meth:`~.model.SessionSource.warm_listing`: its
listing, the version of its titles and the titles it observed since the version the table was
labelled as of. The resolver keeps one :class:`CandidateCache` and asks it for the table its
queries run on (:class:`.candidates.CandidateTable`), so a keystroke costs work proportional to its
matches, and a title verified in the background relabels one row rather than rebuilding the table.
The ranking is the core's: a new listing's titles are asked for in rank order, which is the order
a cold store hints them in.
"""

from __future__ import annotations

import operator
import threading
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from .cancellation import AbortSignal
from .candidates import CandidateTable, label_for, rank_order
from .model import SessionRecord, SessionSource, TitleObservation


@dataclass(frozen=True)
class _Kept:
    """The candidate table for one listing, labelled as of one titles version."""

    records: list[SessionRecord]
    version: int
    table: CandidateTable
    positions: _Positions | None = None
    """Each listed log's row, built the first time titles change under the table."""


class _Positions:
    """Each listed log's row in ``records``, by its location: an open-addressed table of row
    numbers (plus one: 0 is a free slot) in one ``array``, at most half full, probed from the
    location's hash and confirmed against the listing's own records. A dict of location to row
    kept an entry and an ``int`` object a row, 48 bytes a session for as long as the table was
    kept; this is 8 to 16."""

    __slots__ = ("_mask", "_records", "_slots")

    def __init__(self, records: Sequence[SessionRecord]) -> None:
        size = 1 << (2 * len(records)).bit_length()
        slots = array("i", bytes(4 * size))
        mask = size - 1
        for index, record in enumerate(records):
            location = record.location
            if not location:
                continue
            slot = hash(location) & mask
            while (taken := slots[slot]) and records[taken - 1].location != location:
                slot = (slot + 1) & mask
            slots[slot] = index + 1  # a location listed twice: its last row, as a dict would keep
        self._records, self._slots, self._mask = records, slots, mask

    def get(self, location: str) -> int | None:
        """The row of the log at ``location``, ``None`` if it is not listed."""
        records, slots, mask = self._records, self._slots, self._mask
        slot = hash(location) & mask
        while taken := slots[slot]:
            if records[taken - 1].location == location:
                return taken - 1
            slot = (slot + 1) & mask
        return None


class CandidateCache:
    """The table of a warm store's latest listing, as last labelled."""

    def __init__(self) -> None:
        self._kept: _Kept | None = None
        self._lock = threading.Lock()
        """One request builds or relabels the table at a time; the others then take its work
        (a storm of requests while titles are verified relabelled the table once each, side by
        side, and each copy of a 20,000-row table held the interpreter before the request could
        see its cancellation)."""

    def table(self, store: SessionSource, stop: AbortSignal, target_cwd: str | None) -> CandidateTable | None:
        """Every listed session of ``store`` with its label, as of its latest titles version;
        ``None`` when the store keeps nothing warm.

        A new listing is labelled whole, titles asked for in ``listCandidates``' rank order for
        ``target_cwd`` (a cold store hints them in that order, so the first popup's top rows are
        the right ones), then brought up to the titles observed meanwhile; the same listing is
        relabelled only where a title changed.
        """
        while not self._lock.acquire(timeout=LOCK_POLL):
            stop.check()
        try:
            stop.check()
            return self._table(store, stop, target_cwd)
        finally:
            self._lock.release()

    def _table(
        self, store: SessionSource, stop: AbortSignal, target_cwd: str | None
    ) -> CandidateTable | None:
        kept = self._kept
        warm = store.warm_listing(None if kept is None else kept.version, stop)
        if warm is None:
            return None
        stop.check()
        records = warm.records
        if kept is None or not _same_list(kept.records, records, stop):
            order = rank_order(records, target_cwd)
            observations = store.read_titles([records[index] for index in order], stop)
            labels = [""] * len(records)
            for index, seen in zip(order, observations, strict=True):
                labels[index] = label_for(records[index], seen)
            kept = _Kept(records, warm.version, CandidateTable.labelled(records, labels, {target_cwd: order}))
            stop.check()
            kept = _relabelled(kept, *store.titles_since(kept.version, stop))
        elif warm.version != kept.version:
            stop.check()
            kept = _relabelled(kept, warm.version, warm.changed)
        self._kept = kept
        return kept.table


def _relabelled(kept: _Kept, version: int, changed: Mapping[str, TitleObservation]) -> _Kept:
    """``kept`` brought up to titles ``version``: only rows whose label changed are replaced (the
    same table, memos and all, when none did)."""
    if not changed:
        return _Kept(kept.records, version, kept.table, kept.positions)
    positions = kept.positions
    if positions is None:
        positions = _Positions(kept.records)
    table = kept.table
    labels: dict[int, str] = {}
    for location, observation in changed.items():
        index = positions.get(location)
        if index is None:
            continue  # not in this listing
        label = label_for(kept.records[index], observation)
        if label != table.label(index):
            labels[index] = label
    return _Kept(kept.records, version, table.relabelled(labels) if labels else table, positions)


LOCK_POLL: Final = 0.05
"""Seconds between two looks at the stop signal while another request builds the table."""
SAME_LIST_STEP: Final = 8192
"""Records compared between two looks at the stop signal (about 1 ms)."""


def _same_list(kept: list[SessionRecord], records: list[SessionRecord], stop: AbortSignal) -> bool:
    """Whether two listings hold the same record objects (a re-walk of an unchanged small root
    builds a new list of the same records; a big root's served listing is the same list)."""
    if kept is records:
        return True
    if len(kept) != len(records):
        return False
    for start in range(0, len(kept), SAME_LIST_STEP):
        stop.check()
        end = start + SAME_LIST_STEP
        if not all(map(operator.is_, kept[start:end], records[start:end])):
            return False
    return True
