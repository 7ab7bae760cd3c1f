"""One log's index row, and the pieces a row is made of.

A row holds, for one log path at one fingerprint, the listing entry (what the store's walk found
in that session directory) and the title entry (the store's own title observation), each as the
JSON text kept in the file and parsed on first use. Everything here is plain data: the file
(:mod:`.database`) stores rows, the store (:mod:`.store`) makes and trusts them.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import time
import zlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Generic, NamedTuple, NewType, TypeVar

from ...model import TitleObservation, kept_header
from ..jsvalue import MAX_SAFE_INTEGER
from ..layout import LOG_NAMES, Compression
from ..listing import Misnamed, compression_of
from .headers import KeptHeader, UsualHeader, compact_header, header_json

T = TypeVar("T")

RACY_NS: Final = 2_000_000_000
"""A log is trusted from the index only if it was last modified this long before it was read."""
SETTLED_NS: Final = 1 << 62
"""What a row keeps as the time a read began once that read is trusted at the row's fingerprint
(:meth:`IndexRow.fresh`): one ``int`` for every such row, not one each (two a row, 13 MB at
200,000 logs). Any time a read could have begun at is before it (it is in the year 2116), so a
row is fresh at its fingerprint with it exactly when it was with the time it replaced."""

LISTED: Final = "="
"""A title entry's header key meaning "the header of this row's listing entry" (never JSON)."""


Fingerprint = NewType("Fingerprint", int)
"""What identifies one state of a regular file: a log whose fingerprint is unchanged holds the same
bytes (racily written ones aside: see :data:`RACY_NS`). Its five numbers (``st_dev``, ``st_ino``,
``st_size``, ``st_mtime_ns``, ``st_ctime_ns``) packed into one ``int`` (:func:`fingerprint`),
compared and hashed as such, and taken apart by :func:`fp_numbers`.

A server keeps one for every listed log. As a tuple of five ``int`` objects each was about 250
bytes; as a ``bytes`` subclass of nine bytes a number, 96 (a subclass's objects are tracked by the
cyclic collector, 16 bytes more); as a plain ``int`` of the numbers' own lengths, 48 for a log's
usual numbers: 9.6 MB less at 200,000 sessions, and 200,000 objects fewer for every collection to
look at."""

_LENGTH_BITS: Final = 7
"""Bits that give the length of each packed number: a number of up to 127 bits. A fingerprint's
numbers are ``st_*`` fields (64-bit) or what the cache folder spells (at most 20 digits); the
difference of two such, zigzagged, has at most 69."""


def fingerprint(dev: int, ino: int, size: int, mtime_ns: int, ctime_ns: int) -> Fingerprint:
    """The five numbers as one :data:`Fingerprint`: each zigzagged (so a negative time, before 1970,
    packs small) and packed as its bits under a 7-bit length, ``st_mtime_ns`` lowest; ``st_ctime_ns``
    as its difference from ``st_mtime_ns``, no bits when they are equal (as a log's usually are).
    The same five numbers always make the same ``int`` and :func:`fp_numbers` takes it apart, so
    two fingerprints are equal exactly when their numbers are."""
    packed = 0
    for number in (ctime_ns - mtime_ns, dev, ino, size, mtime_ns):
        zigzag = number << 1 if number >= 0 else ~number << 1 | 1
        bits = zigzag.bit_length()
        if bits >> _LENGTH_BITS:
            raise ValueError(f"a number too large for a fingerprint: {number}")
        packed = (packed << bits | zigzag) << _LENGTH_BITS | bits
    return Fingerprint(packed)


def _unpacked(packed: int, count: int) -> list[int]:
    """The first ``count`` numbers :func:`fingerprint` packed into ``packed``, lowest first."""
    numbers = []
    for _ in range(count):
        bits = packed & ((1 << _LENGTH_BITS) - 1)
        packed >>= _LENGTH_BITS
        zigzag = packed & ((1 << bits) - 1)
        packed >>= bits
        numbers.append(~(zigzag >> 1) if zigzag & 1 else zigzag >> 1)
    return numbers


def fp_numbers(fp: Fingerprint) -> tuple[int, int, int, int, int]:
    """``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)`` of a fingerprint."""
    mtime_ns, size, ino, dev, change = _unpacked(fp, 5)
    return dev, ino, size, mtime_ns, mtime_ns + change


def fp_mtime_ns(fp: Fingerprint) -> int:
    """A fingerprint's ``st_mtime_ns`` (the lowest number: every trust check reads it)."""
    return _unpacked(fp, 1)[0]


def fp_size(fp: Fingerprint) -> int:
    """A fingerprint's ``st_size``."""
    return _unpacked(fp, 2)[1]


class ReadAt(NamedTuple, Generic[T]):
    """What a read of the log at ``path`` found (``value``), with the fingerprint the log had
    throughout the read (:func:`stable_read`)."""

    path: str
    fp: Fingerprint
    value: T


def stat_numbers(info: os.stat_result) -> tuple[int, int, int, int, int]:
    """The five numbers of a status a fingerprint is made of, in :func:`fingerprint`'s order."""
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def fingerprint_of(info: os.stat_result) -> Fingerprint:
    return fingerprint(*stat_numbers(info))


def fingerprint_at(path: str) -> Fingerprint | None:
    """The fingerprint of what is at ``path`` now (links not followed); ``None`` if it cannot be looked at."""
    try:
        return fingerprint_of(os.lstat(path))
    except OSError:
        return None


def header_text(header: Mapping[str, Any]) -> str:
    """A header as exact JSON (key order, ``-0.0``, big integers and lone surrogates survive the trip).

    A ``version`` of ``1e400`` parses as Infinity, which JSON cannot spell; it is written
    ``Infinity`` here (a comparison key, never a document) rather than failing the caller.
    """
    return json.dumps(header, ensure_ascii=True, separators=(",", ":"), default=header_json)


MAX_MISSING: Final = 64
"""Logs the index names that are not there (deleted while nothing ran) taken in stride, beyond one
in eight of those that are: see :func:`too_many_missing`."""


def too_many_missing(missing: int, present: int) -> bool:
    """Whether ``missing`` entries naming a log that is not there, against ``present`` naming one that
    is, are more than sessions deleted while nothing ran explain. Anyone who can write the cache
    folder can add rows (a checksum is no signature); a log they name must be there, so what a forged
    document can make us hold is bounded by the root, and reading one stops past this."""
    return missing > MAX_MISSING + present // 8


def non_negative_safe(value: object) -> bool:
    """A non-negative safe integer: the ``createdAt`` a header can hold (upstream's ``isHeaderLine``),
    or a count. A number read back from the cache folder must be one, so a forged one stays a number
    every date, sort and comparison can take."""
    return type(value) is int and 0 <= value <= MAX_SAFE_INTEGER


class Untrusted(Exception):
    """The index file is not one this code wrote for this root, or it is damaged."""


Artifacts = tuple[tuple[str | None, Compression, KeptHeader], ...]
Blocks = tuple[tuple[str, str, str] | Misnamed, ...]


class ListingEntry:
    """A listing entry, parsed: the artifacts it lists (a ``None`` path is the row's own) and
    the blocks it reports as ``[segment, path, reason]``, or as the :class:`~..listing.Misnamed`
    the row's own log is (stored as ``"m": [header id, cwd]``).

    Nearly every entry is the row's own log, listed, with nothing blocked: that one keeps just its
    compression and header, and makes its tuples when asked (a row keeps its entry for as long as
    the root is listed, and the tuples were 136 bytes a session)."""

    __slots__ = ("_compression", "_general", "_header")

    def __init__(self, artifacts: Artifacts, blocks: Blocks) -> None:
        self._general: tuple[Artifacts, Blocks] | None = None
        if len(artifacts) == 1 and artifacts[0][0] is None and not blocks:
            _, self._compression, self._header = artifacts[0]
        else:
            self._general = (tuple(artifacts), tuple(blocks))

    @property
    def artifacts(self) -> Artifacts:
        if self._general is None:
            return ((None, self._compression, self._header),)
        return self._general[0]

    @property
    def blocks(self) -> Blocks:
        return () if self._general is None else self._general[1]

    def own_header(self, path: str) -> KeptHeader | None:
        """The header, if this entry is the usual one for the log at ``path``: that log alone,
        listed in the encoding its name says, nothing blocked (what a row keeps of it)."""
        if self._general is None and self._compression == compression_of(path):
            return self._header
        return None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ListingEntry):
            return NotImplemented
        return (self.artifacts, self.blocks) == (other.artifacts, other.blocks)

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"ListingEntry(artifacts={self.artifacts!r}, blocks={self.blocks!r})"


@dataclass(frozen=True, slots=True)
class TitleEntry:
    """A title entry, parsed: for session ``id`` with header ``key`` (:data:`LISTED` for the
    listing entry's), the title or the error."""

    id: str
    key: str
    title: str | None
    error: str | None


ParsedTitle = TitleEntry | TitleObservation
"""A row's title entry as kept: a :class:`~...model.TitleObservation` is the entry of the header
the row's listing entry holds (key :data:`LISTED`), and is the very observation the title board
shows for the log, shared (a :class:`TitleEntry` made beside it was 64 bytes a verified log)."""


def title_entry(value: ParsedTitle) -> TitleEntry:
    """``value`` as the title entry it stands for."""
    if isinstance(value, TitleEntry):
        return value
    return TitleEntry(value.session_id, LISTED, value.title, value.error)


_UNPARSED: Final[Any] = object()
PARSED: Final = ""
""":attr:`IndexRow.listing` (or :attr:`~IndexRow.title`) once its entry is parsed: the text is made
again from the entry when the row is written (:meth:`IndexRow.listing_text`). Keeping both, every
listed header twice, was a quarter of a 200,000-session server's memory."""


def _settled(started_ns: int, trusted_from: int) -> int:
    """:data:`SETTLED_NS` for a read begun at ``started_ns`` that is trusted (at or after
    ``trusted_from``), else the time itself."""
    return SETTLED_NS if trusted_from <= started_ns <= SETTLED_NS else started_ns


@dataclass(slots=True)
class IndexRow:
    """What the index knows about one log path at one fingerprint.

    The listing entry and the title entry were each produced by a read that
    started at ``*_ns``; each is trusted only if the log had not been modified
    for :data:`RACY_NS` by then (a time so trusted is kept as :data:`SETTLED_NS`). The entries
    are kept as the JSON text stored in the file and parsed on first use.
    """

    fp: Fingerprint
    listing: str | None = None
    listing_ns: int = 0
    title: str | None = None
    title_ns: int = 0
    parsed_listing: ListingEntry | KeptHeader | None = field(default=_UNPARSED, compare=False, repr=False)
    """The listing entry parsed, or for the usual entry (:meth:`ListingEntry.own_header`) its
    header alone (:meth:`fold`): an entry object a listed log was 64 bytes, 13 MB at 200,000."""
    parsed_title: ParsedTitle | None = field(default=_UNPARSED, compare=False, repr=False)
    title_here: bool = field(default=False, compare=False)
    """The title entry was read by this process (not loaded from the file, which anyone who can
    write the cache folder can forge, checksum and all): the language server counts a title it
    did not read only once it has scanned the log (:mod:`..titles`)."""
    path: str = field(default="", compare=False, repr=False)
    """The log's path, once the row table keeps the row: the one string every map of the log
    holds (:meth:`.table.RowTable.shared_path`), so the table needs no map of paths beside it."""

    def __post_init__(self) -> None:
        trusted_from = fp_mtime_ns(self.fp) + RACY_NS
        self.listing_ns = _settled(self.listing_ns, trusted_from)
        self.title_ns = _settled(self.title_ns, trusted_from)

    def fresh(self, fp: Fingerprint, recorded_ns: int) -> bool:
        return self.fp == fp and fp_mtime_ns(fp) + RACY_NS <= recorded_ns

    def listing_outcome(self, fp: Fingerprint, path: str) -> ListingEntry | None:
        """The listing entry, if fresh at ``fp``; ``path`` is this row's (its key in the index)."""
        if self.listing is None or not self.fresh(fp, self.listing_ns):
            return None
        return self.parse(path).entry(path)

    def entry(self, path: str) -> ListingEntry | None:
        """The parsed listing entry (made again around its header for the usual one), fresh or not."""
        kept = self.parsed_listing
        if isinstance(kept, dict | UsualHeader):
            return ListingEntry(((None, compression_of(path), kept),), ())
        return kept if isinstance(kept, ListingEntry) else None

    def fold(self, path: str) -> IndexRow:
        """This row keeping the usual listing entry as its header alone; ``path`` is this row's."""
        entry = self.parsed_listing
        if isinstance(entry, ListingEntry) and (header := entry.own_header(path)) is not None:
            self.parsed_listing = header
        return self

    def parse(self, path: str) -> IndexRow:
        """This row, its listing entry parsed and its text let go (:data:`PARSED`); ``path`` is
        this row's. Rows are parsed as they are made or loaded: a walk uses every one."""
        if self.parsed_listing is _UNPARSED and self.listing:
            self.parsed_listing = parse_listing(self.listing, path)
            if self.parsed_listing is not None:
                self.listing = PARSED
                self.fold(path)
        return self

    def listing_text(self, path: str) -> str | None:
        """The listing entry as stored in the file (made again from the parsed entry)."""
        entry = self.entry(path)
        if self.listing == PARSED and entry is not None:
            return entry_text(entry, path)
        return self.listing

    def listed_header(self, fp: Fingerprint, path: str) -> KeptHeader | None:
        """The header this row's listing entry holds, if it holds exactly one."""
        outcome = self.listing_outcome(fp, path)
        return outcome.artifacts[0][2] if outcome is not None and len(outcome.artifacts) == 1 else None

    def listed_key(self, fp: Fingerprint, path: str) -> str | None:
        """:func:`header_text` of the one header this row's listing found, if any."""
        header = self.listed_header(fp, path)
        if header is None:
            return None
        return header_text(header)

    def title_value(self, fp: Fingerprint) -> ParsedTitle | None:
        """The title entry, if fresh at ``fp`` (:func:`title_entry` says which it stands for)."""
        if self.title is None or not self.fresh(fp, self.title_ns):
            return None
        self.parse_title()
        return self.parsed_title

    def parse_title(self) -> IndexRow:
        """This row, its title entry parsed and its text let go (as :meth:`parse` does)."""
        if self.parsed_title is _UNPARSED and self.title:
            self.parsed_title = _parse_title(self.title)
            if self.parsed_title is not None:
                self.title = PARSED
        return self

    def title_text(self) -> str | None:
        """The title entry as stored in the file (made again from the parsed entry)."""
        entry = self.parsed_title
        if self.title == PARSED and entry is not None and entry is not _UNPARSED:
            return title_entry_text(title_entry(entry))
        return self.title


def fp_text(fp: Fingerprint) -> str:
    return ":".join(str(part) for part in fp_numbers(fp))


_FP_PART: Final = "(?:0|-?[1-9][0-9]{0,19})"
_FP_TEXT: Final = re.compile(f"{_FP_PART}(?::{_FP_PART}){{4}}")
"""What :func:`fp_text` writes: five ASCII integers of at most 20 digits (``st_*`` fields are 64-bit;
a time before 1970 is negative).
``isdecimal`` alone also passes ``"٣"`` and 5,000 digits, on which ``int()`` raises ``ValueError``."""


def fp_parse(text: str) -> Fingerprint:
    """A stored fingerprint; :class:`Untrusted` (so a rebuild) for what :func:`fp_text` never writes."""
    if _FP_TEXT.fullmatch(text) is None:
        raise Untrusted("malformed fingerprint")
    dev, ino, size, mtime_ns, ctime_ns = map(int, text.split(":"))
    return fingerprint(dev, ino, size, mtime_ns, ctime_ns)


def path_key(text: str) -> bytes:
    """A path as the index stores it: the bytes of any ``str`` Python can hold. File names need not
    be UTF-8 (``os.fsdecode`` keeps the odd bytes as lone surrogates, which SQLite's text refuses),
    and ``surrogatepass`` encodes and decodes every such string one to one."""
    return text.encode("utf-8", "surrogatepass")


def key_path(key: object) -> str:
    if not isinstance(key, bytes):
        raise Untrusted("a path that is not a BLOB")
    try:
        return key.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as error:
        raise Untrusted(f"a path that is no string: {error}") from None


def row_crc(
    path: str, fp: str, listing: str | None, listing_ns: int, title: str | None, title_ns: int
) -> int:
    payload = "\0".join((path, fp, listing or "\1", str(listing_ns), title or "\1", str(title_ns)))
    return zlib.crc32(payload.encode("utf-8", "surrogatepass"))


def regular_fingerprint(path: str) -> Fingerprint | None:
    """The fingerprint of ``path`` if it is a regular file (a log; links not followed), else ``None``."""
    try:
        info = os.lstat(path)
    except OSError:
        return None
    return fingerprint_of(info) if stat.S_ISREG(info.st_mode) else None


def parse_listing(text: str | None, path: str) -> ListingEntry | None:
    """A stored listing entry of the log at ``path``, checked and made compact; ``None`` if it is
    not one this code wrote."""
    value = None if text is None else _json_object(text)
    if value is None or not isinstance(value.get("a"), list) or not isinstance(value.get("b"), list):
        return None
    artifacts: list[tuple[str | None, Compression, KeptHeader]] = []
    for artifact in value["a"]:
        if not (
            isinstance(artifact, list)
            and len(artifact) == 3
            and isinstance(artifact[0], str)
            and artifact[1] in LOG_NAMES
            and isinstance(artifact[2], dict)
            and isinstance(artifact[2].get("id"), str)
            and non_negative_safe(artifact[2].get("createdAt"))
        ):
            return None
        listed, compression, header = artifact
        artifacts.append(
            (
                None if listed == path else listed,
                _COMPRESSIONS[compression],
                compact_header(kept_header(header)),
            )
        )
    blocks: list[tuple[str, str, str] | Misnamed] = []
    for block in value["b"]:
        if not (isinstance(block, list) and len(block) == 3 and all(isinstance(part, str) for part in block)):
            return None
        blocks.append((block[0], path if block[1] == path else block[1], block[2]))
    misnamed = value.get("m")
    if misnamed is not None:
        if not (
            isinstance(misnamed, list)
            and len(misnamed) == 2
            and isinstance(misnamed[0], str)
            and (misnamed[1] is None or isinstance(misnamed[1], str))
        ):
            return None
        cwd = misnamed[1]
        blocks.append(Misnamed(path, misnamed[0], None if cwd is None else sys.intern(cwd)))
    return ListingEntry(tuple(artifacts), tuple(blocks))


_COMPRESSIONS: Final[dict[str, Compression]] = {"zstd": "zstd", "none": "none"}


def entry_text(entry: ListingEntry, path: str) -> str:
    """The stored text of the listing entry ``entry`` of the log at ``path``: what
    :func:`parse_listing` reads back as ``entry``."""
    value: dict[str, Any] = {
        "a": [
            [path if listed is None else listed, compression, header]
            for listed, compression, header in entry.artifacts
        ],
        "b": [list(block) for block in entry.blocks if not isinstance(block, Misnamed)],
    }
    for block in entry.blocks:
        if isinstance(block, Misnamed):
            value["m"] = [block.session_id, block.cwd]
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"), default=header_json)


def _json_object(text: str) -> dict[str, Any] | None:
    """A stored entry's JSON object, or ``None`` for text this code did not write."""
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):  # 5,000 digits (int's limit); nesting past the stack
        return None
    return value if isinstance(value, dict) else None


def title_entry_text(entry: TitleEntry) -> str:
    """The stored text of a title entry: what :func:`_parse_title` reads back as ``entry``."""
    value = {"i": entry.id, "h": entry.key, "t": entry.title, "e": entry.error}
    return json.dumps(value, ensure_ascii=True, separators=(",", ":"))


def _parse_title(text: str) -> ParsedTitle | None:
    value = _json_object(text)
    if (
        value is None
        or not isinstance(value.get("i"), str)
        or not isinstance(value.get("h"), str)
        or not (value.get("t") is None or isinstance(value.get("t"), str))
        or not (value.get("e") is None or isinstance(value.get("e"), str))
    ):
        return None
    entry = TitleEntry(value["i"], value["h"], value.get("t"), value.get("e"))
    if entry.key == LISTED:  # kept as the observation a lookup gives (and the board then keeps)
        observation = TitleObservation(entry.id, entry.title, entry.error)
        if title_entry(observation) == entry:  # not a title past what an observation keeps
            return observation
    return entry


# --- reading logs without replaying them ---------------------------------------------------------


def stable_read(path: str, read: Callable[[], T], before: Fingerprint) -> tuple[T, Fingerprint | None, int]:
    """``read()`` of the log at ``path`` (just seen at ``before``), the fingerprint its answer holds
    for, and when it began.

    The fingerprint is ``before`` if the log's is the same after the read; ``None`` when the log
    changed or vanished meanwhile, and then the answer is not to be kept. The start time is what
    :data:`RACY_NS` is measured against. Every row the index makes (a listing, a title, a worker's
    answer, message text) is read so.
    """
    started = time.time_ns()
    value = read()
    return value, before if fingerprint_at(path) == before else None, started
