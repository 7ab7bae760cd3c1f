"""One listing the catalog serves: its records, the fingerprint of every log its walk saw, and the
lookups every request makes of it, built once per listing.

Records of logs that did not change keep being the same objects from one listing to the next
(:func:`same_record`), so whatever is kept for a record (a label, a surface) stays valid.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Final

from ..model import SessionRecord
from .index.rows import Fingerprint, header_text
from .layout import PLAIN_NAME, ZSTD_NAME


@dataclass(frozen=True)
class Listed:
    """One listing: its records, the fingerprint of every log the walk saw, and when its walk began."""

    records: list[SessionRecord]
    walked: dict[str, Fingerprint]
    taken: float
    directories: int
    """Directories the walk listed or looked in (:attr:`.listing.Walk.directories`; at least one
    per record)."""
    by_location: dict[str, SessionRecord] = field(default_factory=dict)
    state: int | None = None
    """:func:`root_state` just before this listing (background refreshes only)."""
    by_id: list[SessionRecord] = field(default_factory=list, compare=False)
    """The records sorted by id (:meth:`record_of`), filled on first use; the listings that follow
    with the very same records share it."""

    @classmethod
    def of(
        cls,
        records: list[SessionRecord],
        walked: dict[str, Fingerprint],
        taken: float,
        directories: int,
        state: int | None = None,
        previous: Listed | None = None,
    ) -> Listed:
        """The listing of ``records``; ``previous``: the one it follows, whose records and lookups it
        takes if it lists the very same records in the same order (a walk that found nothing new:
        two new lookups of 200,000 sessions beside the old ones were 15 MB at the walk's end)."""
        if previous is not None and _same_records(previous.records, records):
            return cls(
                previous.records, walked, taken, directories, previous.by_location, state, previous.by_id
            )
        by_location = {record.location: record for record in records if record.location is not None}
        return cls(records, walked, taken, directories, by_location, state)

    def record_of(self, session_id: str) -> SessionRecord | None:
        """The record listed with ``session_id`` (the last one, were two listed with it; a walk
        lists each id once), found among the records sorted by id: a table of every id was 7.7 MB
        at 200,000 sessions, held for as long as the listing was served; the sorted list is 1.6 MB,
        made when an id is first looked up, and a lookup takes microseconds. dsh's ids begin with
        their time, so the newest-first listing is its ids sorted backwards, which a sort takes in
        one pass: 12 ms at 200,000 (the table took 30); ids in no order would take 140."""
        by_id = self.by_id
        if len(by_id) != len(self.records):
            # Stable: records of one id keep their order. One assignment, so a lookup meanwhile sees
            # the list empty or whole, and two threads filling it fill it with the same.
            by_id[:] = sorted(self.records, key=_ID)
        index = bisect_right(by_id, session_id, key=_ID) - 1
        return by_id[index] if index >= 0 and by_id[index].id == session_id else None

    def in_directory(self, directory: str) -> SessionRecord | None:
        """The session listed from ``directory`` (what a watched path is matched against): a
        listed log is that directory's ``ZSTD_NAME`` or ``PLAIN_NAME``. Looked up by its log
        rather than from a table of directories, which the first change dsh wrote made: at
        200,000 sessions a string a directory and the table, 46 MB."""
        return self.by_location.get(directory + ZSTD_NAME) or self.by_location.get(directory + PLAIN_NAME)


_ID: Final = attrgetter("id")


def _same_records(old: list[SessionRecord], new: list[SessionRecord]) -> bool:
    return len(old) == len(new) and all(a is b for a, b in zip(old, new, strict=True))


def same_record(
    record: SessionRecord, previous: Listed, walked: dict[str, Fingerprint], exact: bool = False
) -> SessionRecord:
    """The previous listing's record for an unchanged log (same file at the same fingerprint);
    ``exact``: only if its header is also the one just read, to the byte (:func:`reusable`)."""
    location = record.location
    fp = None if location is None else walked.get(location)
    old = None if location is None or fp is None else reusable(previous, location, fp, record.header, exact)
    return record if old is None else old


def reusable(
    previous: Listed, path: str, fp: object, header: Mapping[str, Any], exact: bool = False
) -> SessionRecord | None:
    """``previous``'s record for the log at ``path``, seen now at ``fp`` with ``header``, if the log
    is unchanged: listed at the same fingerprint with the same id (``exact``: and the same header,
    to the byte). The one rule both the walk (:attr:`.listing.Walk.reuse`, which then makes no
    record) and :func:`same_record` (for the records the walk did make) keep records by."""
    old = previous.by_location.get(path)
    if old is None or previous.walked.get(path) != fp or old.id != header.get("id"):
        return None
    if exact and old.header is not header and header_text(old.header) != header_text(header):
        return None
    return old
