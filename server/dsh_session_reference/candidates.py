"""``listCandidates``' ranking and matching, as one pure table both store paths share.

Upstream filters every listed session by a lowercase substring of its id, cwd
or label, then orders by cwd rank (same cwd, no cwd, other cwd) and listing
order, and cuts at the limit. :class:`CandidateTable` is exactly that over a
fixed listing with its labels, built so that repeated queries (an ``@`` popup
asks again at every keystroke) cost work proportional to the matches rather
than to the store:

* each row's label and id are lowercased once (kept as they are when lowering leaves them so,
  as it does an id), and each distinct cwd once, so a query is a substring test of a row's
  label and id and a lookup of whether its cwd matched (:class:`_Fields`);
* a query that extends the previous one (``mig`` -> ``migr``) only re-tests
  the previous matches, since a substring of a match is a match;
* the ranked order for a target cwd is computed once per cwd, so an empty
  query is a walk over the first rows of that order.

The resolver builds a throwaway table from a fresh listing when the store has
no persistent one (the upstream-shaped path), so there is one implementation
of the rule, not two.
"""

from __future__ import annotations

import re
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from .cancellation import AbortSignal, check
from .jsjson import js_has_surrogates, js_includes, js_lower
from .model import SessionRecord, TitleObservation

MAX_ORDERS: Final = 8
"""Target cwds whose ranked order a table keeps (an editor has one target at a time)."""
_CHECK_EVERY: Final = 256
"""Rows tested between looks at the stop signal, where a row is tested field by field."""


def candidate_rank(candidate_cwd: str | None, target_cwd: str | None) -> int:
    """Same cwd 0, no cwd 1, another cwd 2 (every cwd is "other" when the target has none)."""
    if candidate_cwd is None:
        return 1
    return 0 if candidate_cwd == target_cwd else 2


def rank_order(records: Sequence[SessionRecord], target_cwd: str | None) -> Sequence[int]:
    """Indices of ``records`` in ``listCandidates``' rank order for ``target_cwd`` (listing order
    within a rank): one machine integer each (a list of ``int`` objects from a sort was 40 bytes a
    session, kept for as long as the table)."""
    ranks = [array("l") for _ in range(3)]
    for index, record in enumerate(records):
        ranks[candidate_rank(record.cwd, target_cwd)].append(index)
    order = ranks[0]
    order.extend(ranks[1])
    order.extend(ranks[2])
    return order


def label_for(record: SessionRecord, observation: TitleObservation) -> str:
    """The session's last title, or its id when it has none or its log could not be read."""
    title = observation.title if observation.error is None else None
    return record.id if title is None else title


@dataclass(frozen=True, slots=True)
class Row:
    """One listed session and the label ``listCandidates`` shows for it."""

    record: SessionRecord
    label: str


class CandidateTable:
    """A listing (in store order) with labels, ready to answer many queries.

    Immutable in content; the memos it keeps (the last query's matches, ranked
    orders per target cwd) are guarded by a lock, so one table may serve
    concurrent requests. The records and their labels are kept side by side, and a
    :class:`Row` is made only for a row a query returns (one per session was 48 bytes).
    """

    def __init__(self, rows: Sequence[Row], orders: Mapping[str | None, Sequence[int]] | None = None) -> None:
        """``orders``: ranked orders (:func:`rank_order`) already computed for these rows, by target cwd."""
        self._init([row.record for row in rows], [row.label for row in rows], orders)

    @classmethod
    def labelled(
        cls,
        records: Sequence[SessionRecord],
        labels: list[str],
        orders: Mapping[str | None, Sequence[int]] | None = None,
    ) -> CandidateTable:
        """The table of ``records`` (kept as given, never changed) labelled ``labels``."""
        table = cls.__new__(cls)
        table._init(records, labels, orders)
        return table

    def _init(
        self,
        records: Sequence[SessionRecord],
        labels: list[str],
        orders: Mapping[str | None, Sequence[int]] | None,
    ) -> None:
        self._records = records
        self._labels = labels
        self._lowered_labels: list[str] | None = None
        self._fields: _Fields | None = None
        self._lock = threading.Lock()
        self._last: tuple[Sequence[int], str, Sequence[int]] | None = None
        self._orders: OrderedDict[str | None, Sequence[int]] = OrderedDict(orders or {})

    @property
    def rows(self) -> tuple[Row, ...]:
        """Every row, in store order (made on each call: for tests and small tables)."""
        return tuple(Row(record, label) for record, label in zip(self._records, self._labels, strict=True))

    def label(self, index: int) -> str:
        return self._labels[index]

    def relabelled(self, labels: Mapping[int, str]) -> CandidateTable:
        """The same listing with the rows at ``labels``' indices labelled anew.

        Ranked orders and the lowered ids and cwds depend only on the records, so they carry
        over; the lowered labels are copied with only the changed rows lowered again. The last
        query's matches do not carry over: a new label can add or drop a match.
        """
        new_labels = list(self._labels)
        for index, label in labels.items():
            new_labels[index] = label
        with self._lock:
            orders = OrderedDict(self._orders)
        table = CandidateTable.labelled(self._records, new_labels, orders)
        table._fields = self._fields
        if self._lowered_labels is not None:
            lowered = list(self._lowered_labels)
            for index in labels:
                lowered[index] = _lowered(new_labels[index])
            table._lowered_labels = lowered
        return table

    def select(
        self,
        needle: str,
        target_id: str | None,
        target_cwd: str | None,
        cap: int,
        stop: AbortSignal | None = None,
    ) -> list[Row]:
        """The first ``cap`` rows matching ``needle`` (lowered, normalized) in rank order,
        without the row whose id is ``target_id`` (already normalized)."""
        order = self._order(target_cwd)
        records = self._records
        chosen: list[Row] = []
        for index in order if needle == "" else self._matching(needle, order, stop):
            record = records[index]
            if record.id != target_id:
                chosen.append(Row(record, self._labels[index]))
                if len(chosen) == cap:
                    break
        return chosen

    def _matching(self, needle: str, order: Sequence[int], stop: AbortSignal | None) -> Sequence[int]:
        """Indices of the rows ``needle`` matches, in ``order``: the previous query's matches
        narrowed when it was a part of this one (typing on), so no keystroke sorts."""
        with self._lock:
            last = self._last
        pool: Sequence[int] = order
        if last is not None and last[0] is order and last[1] in needle:
            pool = last[2]
        if js_has_surrogates(needle):
            # Rare: a lone surrogate may match half of a pair (JS compares UTF-16). Test field by
            # field, exactly, the needle encoded once (per field, a 2 MB query took minutes over
            # 2,000 rows).
            records, labels = self._records, self._labels
            matches = _field_matcher(needle)
            found = array("l")
            for count, index in enumerate(pool):
                if count % _CHECK_EVERY == 0:
                    check(stop)
                if matches(records[index], labels[index]):
                    found.append(index)
        else:
            labels, fields = self._lowered(), self._row_fields()
            # No id holds a needle with a character no id has (dsh's ids are UUIDs: hex digits
            # and dashes), so most queries test a row's label alone.
            ids = fields.ids if not (fields.hex_ids and _NOT_HEX.search(needle)) else None
            # Whether each distinct cwd holds the needle (the first, None's, never does).
            cwd_holds = bytes(needle in cwd for cwd in fields.cwds)
            cwd_of = fields.cwd_of
            if any(cwd_holds) and ids is not None:
                rows = [
                    index
                    for index in pool
                    if needle in labels[index] or needle in ids[index] or cwd_holds[cwd_of[index]]
                ]
            elif any(cwd_holds):
                rows = [index for index in pool if needle in labels[index] or cwd_holds[cwd_of[index]]]
            elif ids is not None:
                rows = [index for index in pool if needle in labels[index] or needle in ids[index]]
            else:
                rows = [index for index in pool if needle in labels[index]]
            found = array("l", rows)
        with self._lock:
            self._last = (order, needle, found)
        return found

    def _lowered(self) -> list[str]:
        """Each row's label lowered (:func:`_lowered`), built on first use (an empty query needs none)."""
        lowered = self._lowered_labels
        if lowered is None:
            lowered = list(map(_lowered, self._labels))
            self._lowered_labels = lowered
        return lowered

    def _row_fields(self) -> _Fields:
        fields = self._fields
        if fields is None:
            fields = self._fields = _Fields(self._records)
        return fields

    def _order(self, target_cwd: str | None) -> Sequence[int]:
        """Row indices in rank order for ``target_cwd``."""
        with self._lock:
            cached = self._orders.get(target_cwd)
            if cached is not None:
                self._orders.move_to_end(target_cwd)
                return cached
        order = rank_order(self._records, target_cwd)
        with self._lock:
            self._orders[target_cwd] = order
            while len(self._orders) > MAX_ORDERS:
                self._orders.popitem(last=False)
        return order


def _field_matcher(needle: str) -> Callable[[SessionRecord, str], bool]:
    """Upstream's test of one row: ``needle`` (already lowered) in its lowered id, cwd or label,
    as UTF-16 strings. The needle is encoded once, and a field too short to hold it is not
    lowered or looked at (lowering makes a string at most three times longer, and a character
    is at most two UTF-16 units)."""
    pin = needle.encode("utf-16-le", "surrogatepass")

    def holds(field: str) -> bool:
        return 6 * len(field) >= len(pin) // 2 and js_includes(js_lower(field), needle, pin)

    def matches(record: SessionRecord, label: str) -> bool:
        fields = (record.id, record.cwd, label)
        return any(holds(field) for field in fields if field is not None)

    return matches


_HEX: Final = re.compile("[0-9a-f-]*")
_NOT_HEX: Final = re.compile("[^0-9a-f-]")


def _lowered(text: str) -> str:
    """``text`` lowered as upstream lowers a field, or ``text`` itself when that leaves it as it is
    (an id, a lowercase title): a table keeps one per row, and a second string a row beside its
    label was most of the 135 bytes a session its joined id, label and cwd took."""
    lowered = js_lower(text)
    return text if lowered == text else lowered


class _Fields:
    """A listing's lowered ids and cwds, for queries (they depend on the records alone, so a
    relabelled table keeps them): each row's id lowered, each distinct cwd lowered once (first
    ``""`` for rows without one, which no needle is in) and each row's position among them.
    Fields are lowered one by one, as upstream lowers them: context rules such as the final sigma
    must not see a neighbouring field."""

    __slots__ = ("cwd_of", "cwds", "hex_ids", "ids")

    def __init__(self, records: Sequence[SessionRecord]) -> None:
        self.ids = [_lowered(record.id) for record in records]
        self.hex_ids = all(map(_HEX.fullmatch, self.ids))
        """Every id is lowercase hex digits and dashes (as dsh's UUIDs are)."""
        positions: dict[str | None, int] = {None: 0}
        self.cwds = [""]
        for record in records:
            cwd = record.cwd
            if cwd is not None and cwd not in positions:
                positions[cwd] = len(self.cwds)
                self.cwds.append(js_lower(cwd))
        kind = "B" if len(self.cwds) <= 1 << 8 else "H" if len(self.cwds) <= 1 << 16 else "l"
        self.cwd_of = array(kind, [positions[record.cwd] for record in records])
