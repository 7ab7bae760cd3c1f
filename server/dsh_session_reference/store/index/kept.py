"""The listing a language server leaves in the index for the next one, and reading it back untrusted.

A fresh server answers its first ``@`` from the listing the last one left (records, fingerprints,
titles: one document, one query) while the walk that revalidates it waits for the editor's first
pause. The cache folder is not trusted, so the document is read a line at a time and refused at
the first line a walk could not have made, and each entry must name a log of the root that is
there: what a forged document can make a server hold is bounded by the root. Its titles are
claims (:mod:`..titles`), and its records count only until the walk.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Final, NamedTuple

from ...model import SessionRecord, TitleObservation, kept_header
from ..layout import is_walk_relative
from ..listing import record_at
from .headers import KeptHeader, UsualHeader, compact_header, header_json
from .rows import (
    Fingerprint,
    IndexRow,
    Untrusted,
    fingerprint,
    fp_numbers,
    non_negative_safe,
    regular_fingerprint,
    too_many_missing,
)


class StoredListing(NamedTuple):
    """A listing the index remembers: its records, each listed log's fingerprint, and the titles it
    knew for them (by log path; the others are looked up in the rows as usual)."""

    records: list[SessionRecord]
    walked: dict[str, Fingerprint]
    titles: dict[str, TitleObservation]
    whole: bool
    """Read from the one document a server left (:func:`kept_listing`), not from the rows."""
    directories: int
    """Directories the walk that made it listed (what a walk of the root costs), as that document
    says; for the rows' listing, the session directories it lists."""
    hints: frozenset[str] = frozenset()
    """The logs among :attr:`titles` whose title the server that left it had only hinted (scanned,
    not verified): verified by the next server even where its scan agrees."""


class SharedWithRows:
    """A kept listing's records, fingerprints and titles, for the rows loaded after it to share.

    Over a warm index a server holds both for every log: the kept listing (its first answers, and
    the records the walk keeps, :func:`..listed.same_record`) and the rows the walk reads. Each
    parsed its own header, session id, title and fingerprint, equal to the other's: about 560
    bytes a session (110 MB at 200,000). A row that says the very same thing as the listing about
    its log takes the listing's objects instead (:meth:`share`); any other row is left as read.

    It looks them up where its owner keeps them (the catalog: its listing's table of records by
    log, the walk's fingerprints, the title board) rather than in tables of its own: a table of
    the records by log and the listing's own titles by log, 15 MB at 200,000 sessions, were held
    beside those until the rows were loaded, the peak of a server over a kept index.
    """

    __slots__ = ("_records", "_title_of", "walked")

    def __init__(
        self,
        records: Mapping[str, SessionRecord],
        walked: dict[str, Fingerprint],
        title_of: Callable[[str, Fingerprint], TitleObservation | None],
    ) -> None:
        """``records`` by log path, ``walked`` (the listing's fingerprints: what a walk that sees
        the same gives back, :class:`.walk._FullWalk`), and the title shown for a log at a
        fingerprint."""
        self._records = records
        self.walked = walked
        self._title_of = title_of

    def path_of(self, path: str) -> str | None:
        """The string the listing's record holds for the log path ``path``, if it lists that log."""
        record = self._records.get(path)
        return None if record is None else record.location

    def share(self, path: str, row: IndexRow) -> None:
        """Have ``row`` (of the log at ``path``, just loaded) hold the listing's fingerprint, header
        and title observation wherever it holds equal ones."""
        record = self._records.get(path)
        fp = self.walked.get(path)
        if record is None or fp is None or row.fp != fp:
            return
        row.fp = fp
        header = row.parsed_listing
        kept = record.header
        if (
            isinstance(header, dict | UsualHeader)
            and isinstance(kept, dict | UsualHeader)
            and same_header(header, kept)
        ):
            row.parsed_listing = kept  # a row keeps the usual entry as its header (IndexRow.fold)
        title = self._title_of(path, fp)
        if title is not None and type(row.parsed_title) is TitleObservation and row.parsed_title == title:
            row.parsed_title = title


def same_header(one: KeptHeader, other: KeptHeader) -> bool:
    """Whether two flat headers would be written as the same JSON text: the same keys in the same
    order, each value of the same type and equal (a float by its spelling: ``-0.0`` is not
    ``0.0``). Nested headers are never shared (:func:`.rows.header_dict` copies them)."""
    if list(one) != list(other):
        return False
    for key, value in one.items():
        theirs = other[key]
        kind = type(value)
        if kind is not type(theirs) or kind in (dict, list):
            return False
        if value != theirs if kind is not float else repr(value) != repr(theirs):
            return False
    return True


KeptTitle = tuple[TitleObservation, bool]
"""A title a listing is kept with, and whether it is a hint (shown, not verified yet)."""


_FIVE_INTS: Final = [int] * 5
_FP_BOUND: Final = 1 << 64
"""A fingerprint's numbers are ``st_*`` fields: 64-bit."""

PIECE_LINES: Final = 256
"""Lines of a kept listing encoded at once when it is written (about 60 KB: a piece is held three
times over as it is made, its lines, their join and the encoded copy)."""
LISTING_VERSION: Final = 3
"""The kept listing's format: a first line ``{"v": 3, "d": directories}``, then one line per entry
(version 3 added the hint mark to titles; an older document is refused and the rows answer once)."""
PARSE_LINES: Final = 128
"""Lines of a kept listing parsed at once (at most this many times :data:`MAX_ENTRY_BYTES`)."""
MAX_ENTRY_BYTES: Final = 64 << 10
"""The longest line of a kept listing read back (an entry is a path, a fingerprint, a header and a
title: a few hundred bytes). A longer one refuses the document and the rows answer instead (a
server writes one only for a header of tens of kilobytes)."""


def listing_pieces(
    root: str,
    records: list[SessionRecord],
    walked: dict[str, Fingerprint],
    titles: Iterable[KeptTitle | None],
    directories: int,
) -> Iterator[bytes]:
    """``records`` (a walk's listing of ``root``, its logs at ``walked``, ``directories`` listed)
    with the titles known for them (``None`` where unknown; one per record, taken as each entry is
    made; a hint is marked so) as one document for :func:`kept_listing`, encoded in pieces of
    :data:`PIECE_LINES` lines: a line of its own per entry, so it is read back one bounded line at
    a time; paths are kept relative to the root. ``ValueError`` (as the piece is made) for a
    header JSON cannot spell (Infinity).

    In pieces, each made as it is taken, so what holds the document is the writer's choice
    (:meth:`.database.IndexDatabase.write_listing`): at 200,000 sessions its lines, their join, the
    join's copy with the last line break and the encoded copy were about 250 MB at once, the peak
    of a cold root's first listing."""
    prefix = os.path.join(root, "")
    head = json.dumps({"v": LISTING_VERSION, "d": directories}, separators=(",", ":"))
    entries = (
        json.dumps(
            [
                record.location[len(prefix) :],
                list(fp_numbers(walked[record.location])),
                record.header,
                None if title is None else [title[0].title, title[0].error, *([True] if title[1] else [])],
            ],
            ensure_ascii=True,
            separators=(",", ":"),
            allow_nan=False,
            default=header_json,
        )
        for record, title in zip(records, titles, strict=True)
        if record.location is not None and record.location in walked and record.location.startswith(prefix)
    )
    lines = itertools.chain([head], entries)
    while piece := list(itertools.islice(lines, PIECE_LINES)):
        piece.append("")  # each line ends with a line break
        yield "\n".join(piece).encode("ascii")  # ASCII JSON (ensure_ascii)


def kept_listing(chunks: Iterable[bytes], root: str) -> StoredListing | None:
    """The listing :func:`listing_pieces` wrote, read from ``chunks`` (the document, in pieces), or
    ``None`` if it is not one a walk of ``root`` could have made. The cache folder is not trusted,
    so it is read one line at a time and refused at the first line that is not an entry a walk
    makes (a path of the root's layout, exact types, each path once), that is longer than
    :data:`MAX_ENTRY_BYTES`, or when too many entries name a log that is not there (a forged
    document's entries must name the root's own logs: what it can hold is bounded by the root).
    ``chunks`` raises :class:`.rows.Untrusted` when the document's checksum does not hold.
    Each log path is one string its record, fingerprint and title share; the rows loaded after it
    take those (:meth:`.table.RowTable.share_with`), so no table of paths is made for them.

    Tens of thousands of containers are made here at once and none of them can form a cycle, so
    the cyclic collector is held off meanwhile: its young collections during the build took a
    third of its time (0.08-0.11 s at 10,000 sessions without them, 0.10-0.22 s with them).
    """
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _kept_listing(_lines(chunks), root)
    except (Untrusted, ValueError, RecursionError):  # RecursionError: nesting past the stack
        return None
    finally:
        if collecting:
            gc.enable()


def _lines(chunks: Iterable[bytes]) -> Iterator[bytes]:
    """The lines of a document given in pieces, one at a time (a piece is never split whole: a
    megabyte of two-byte lines would make half a million objects before the first is looked at);
    ``ValueError`` for a line past :data:`MAX_ENTRY_BYTES`."""
    pending = b""
    for chunk in chunks:
        pending = pending + chunk if pending else chunk
        start = 0
        while (end := pending.find(b"\n", start)) >= 0:
            if end - start > MAX_ENTRY_BYTES:
                raise ValueError("a line too long to be a kept listing's")
            yield pending[start:end]
            start = end + 1
        pending = pending[start:]
        if len(pending) > MAX_ENTRY_BYTES:
            raise ValueError("a line too long to be a kept listing's")
    if pending:
        raise ValueError("a kept listing ends with its last line")


def _entries(lines: Iterator[bytes]) -> Iterator[object]:
    """Each line's JSON value, parsed :data:`PARSE_LINES` lines at a time (one parse of many lines
    costs a fraction of one per line); ``ValueError`` for a batch that is not one value a line."""
    while batch := list(itertools.islice(lines, PARSE_LINES)):
        values = json.loads(b"[" + b",".join(batch) + b"]")
        if len(values) != len(batch):  # a line that was not one value (``1,2``)
            raise ValueError("a kept listing's line is not one entry")
        yield from values


def _kept_listing(lines: Iterator[bytes], root: str) -> StoredListing | None:
    first = json.loads(next(lines, b"null"))
    if not (type(first) is dict and first.get("v") == LISTING_VERSION and non_negative_safe(first.get("d"))):
        return None
    prefix = os.path.join(root, "")
    records: list[SessionRecord] = []
    walked: dict[str, Fingerprint] = {}
    titles: dict[str, TitleObservation] = {}
    hints: set[str] = set()
    missing = 0
    for entry in _entries(lines):
        if not (type(entry) is list and len(entry) == 4):
            return None
        relative, fp, header, title = entry
        if not (type(relative) is str and is_walk_relative(relative)):
            return None
        path = prefix + relative
        if path in walked:
            return None
        if not (
            type(header) is dict
            and type(header.get("id")) is str
            and non_negative_safe(header.get("createdAt"))
        ):
            return None
        if not (
            type(fp) is list
            and list(map(type, fp)) == _FIVE_INTS
            and all(-_FP_BOUND < number < _FP_BOUND for number in fp)
        ):
            return None
        if title is not None:
            if not (type(title) is list and (len(title) == 2 or (len(title) == 3 and title[2] is True))):
                return None
            shown, error = title[:2]
            if not ((shown is None or type(shown) is str) and (error is None or type(error) is str)):
                return None
        if regular_fingerprint(path) is None:
            missing += 1  # deleted since, or never there: a document naming many such is not ours
            if too_many_missing(missing, len(records)):
                return None
            continue
        walked[path] = fingerprint(*fp)
        # A header of its own, fresh from this parse, its repeated strings kept once as a row's are.
        record = record_at(path, compact_header(kept_header(header)))
        records.append(record)
        if title is not None:
            titles[path] = TitleObservation(record.id, title=title[0], error=title[1])
            if len(title) == 3:
                hints.add(path)
    return StoredListing(records, walked, titles, True, max(first["d"], 0), frozenset(hints))
