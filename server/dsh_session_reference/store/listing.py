"""Upstream's listing of a sessions root: the walk over ``<root>/<project>/<session>/``, each
directory's listing step, and the order sessions are listed in.

Plain functions over a :class:`Walk` the caller owns: the plain store runs
:func:`walk_root`; the index's walk (:mod:`.index.walk`) iterates the same
:func:`session_directories` and answers a directory from its row where it can, calling
:func:`inspect_directory` for the rest. Nothing here calls back into its caller.

Upstream's listing throws for the whole root on the first bad artifact; here only that artifact
is skipped (:meth:`Walk.block`), with a reason logged once, and reading the id its directory names
fails with that reason (see the upstream-semantics notes, "Where this project deliberately
differs"). Only paths found by listing the root (or built with :func:`~.layout.encode_segment`)
are opened, read-only, after resolving inside the root.
"""

from __future__ import annotations

import errno
import itertools
import logging
import operator
import os
import stat
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from ..cancellation import AbortSignal, check
from ..collation import locale_compare_key
from ..display import SHOWN_CHARS, shortened
from ..jsjson import js_has_surrogates, js_stringify
from ..model import MAX_HEADER_CHARS, SessionRecord, StoreError, kept_header
from .jsvalue import UNDEFINED, js_string
from .layout import PLAIN_NAME, ZSTD_NAME, Compression, decode_segment, is_real, log_path
from .log_header import parse_header_meta, read_first_line
from .logbase import HEADER_BUFFER, LogError, open_artifact
from .zstd_frames import read_first_zstd_line

_LOG = logging.getLogger("dsh_session_reference.store")

NOT_FOUND = "SESSION_QUERY_SESSION_NOT_FOUND"
PERSISTENCE_FAILED = "SESSION_QUERY_PERSISTENCE_FAILED"

_FLAT_SUFFIXES = (".jsonl.zstd", ".jsonl")

NAME_MAX: Final = 255
"""The longest file name (bytes; UTF-16 units on Windows) a file system holds: no session
directory is named by a longer id."""

MAX_REPORTED: Final = 10_000
"""Skipped artifacts remembered as already logged (each is logged once, up to this many)."""


def fs_message(error: OSError, syscall: str, path: str) -> str:
    """An ``fs`` error worded as Node words it (``EACCES: permission denied, open '/x'``)."""
    code = errno.errorcode.get(error.errno or 0, "EIO")
    text = (
        "illegal operation on a directory" if error.errno == errno.EISDIR else (error.strerror or "").lower()
    )
    return f"{code}: {text}, {syscall} '{path}'"


def compression_of(path: str) -> Compression:
    return "zstd" if path.endswith(".zstd") else "none"


class Misnamed(NamedTuple):
    """Why a log whose header names another session's log is skipped (upstream's
    ``assertStoredIdentity``), kept as the log's path (the string its index row is keyed by), the
    header's id and its cwd: the message, which spells out both paths, is made only when said. A
    root of 150,000 such logs kept 327 MB of rows and their messages; now a skipped log costs its
    row and its header id."""

    path: str
    session_id: str
    cwd: str | None

    @property
    def root(self) -> str:
        """The root the log was found under: ``<root>/<project>/<session>/<log name>``."""
        return os.path.dirname(os.path.dirname(os.path.dirname(self.path)))

    def __str__(self) -> str:
        try:
            expected = log_path(self.root, self.cwd, self.session_id, compression_of(self.path))
        except ValueError:  # only in a row forged in the cache folder: a walk never makes one
            return f'corrupt session log "{self.path}": header id cannot name a storage path'
        return _misnamed(self.path, self.session_id, expected)


Reason = str | Misnamed
"""Why an artifact is skipped: its message, or what makes it (``str(reason)``)."""


class Skips:
    """Where skipped artifacts are said: each ``(path, reason)`` logged once per store
    (``report=False``: not at all, as in a worker process, whose caller reports them)."""

    def __init__(self, report: bool = True) -> None:
        self._on = report
        self._said: set[tuple[str, Reason]] = set()
        self._lock = threading.Lock()

    def report(self, path: str, reason: Reason) -> None:
        if not self._on:
            return
        with self._lock:
            if (path, reason) in self._said:
                return
            if len(self._said) >= MAX_REPORTED:
                self._said.clear()  # a root of more broken logs than this says some of them again
            self._said.add((path, reason))
        _LOG.warning("skipping %s: %s", path, reason)


@dataclass(frozen=True, slots=True)
class Artifact:
    path: str
    compression: Compression
    header: Mapping[str, Any]

    @property
    def session_id(self) -> str:
        session_id: str = self.header["id"]
        return session_id


def record_at(path: str, header: Mapping[str, Any]) -> SessionRecord:
    """The record of the log at ``path`` with ``header`` (a validated header, owned by the record)."""
    cwd = header.get("cwd")
    return SessionRecord(
        id=header["id"],
        created_at=int(header["createdAt"]),
        cwd=cwd if isinstance(cwd, str) else None,
        header=header,
        location=path,
    )


Reuse = Callable[[str, Any, Mapping[str, Any]], SessionRecord | None]
"""What a walk asks of a listing before it: its record for the log at a path, seen at a
fingerprint, with a header, if it is the record the walk would make (:func:`.listed.reusable`)."""


@dataclass
class Walk:
    """One look at the root: the usable logs' records, and why other ids are unusable."""

    skips: Skips
    found: list[SessionRecord] = field(default_factory=list)
    """The record of every usable log, in directory order, made as the log is found: the record is
    what a listing keeps, and an :class:`Artifact` made beside each and dropped when the walk
    ended was 13 MB at 200,000 sessions, on top of what the listing held."""
    blocked: dict[str, Reason] = field(default_factory=dict)
    duplicates: set[str] = field(default_factory=set)
    directories: int = 0
    """Directories the walk listed or looked in: project directories, and session directories
    with a log or not. What a walk costs grows with it, not with the sessions it finds."""
    sessions: int = 0
    """Session directories looked at so far: read from another thread to show a long first
    listing's progress (a plain int, so reads need no lock)."""
    reuse: Reuse | None = field(default=None, repr=False)
    """The record a listing before this walk has for a log at ``path``, seen at a fingerprint,
    with a header, if it is the one this walk would make (:func:`.listed.reusable`): the walk
    keeps it rather than making an equal one that the listing would then drop for it (16 MB
    made and dropped at the end of every walk of 200,000 logs)."""

    def usable(self) -> dict[str, SessionRecord]:
        """Records by id, in directory order, without ids that are blocked as duplicates (made
        when asked: a walk for one session asks, a full walk's listing does not)."""
        return {r.id: r for r in self.found if r.id not in self.duplicates}

    def block(self, segment: str, path: str, reason: Reason) -> None:
        """Skip ``path`` for ``reason``: logged once, and the id its directory names fails with it."""
        self.skips.report(path, reason)
        blocked_id = decode_segment(segment)
        if blocked_id is not None:
            self.blocked.setdefault(blocked_id, reason)

    def add(self, path: str, header: Mapping[str, Any], fp: object = None) -> None:
        """A usable log at ``path`` with ``header`` (the walk's own: the record takes it), seen at
        ``fp`` when its row told the walk what it holds."""
        reused = None if self.reuse is None or fp is None else self.reuse(path, fp, header)
        self.found.append(record_at(path, header) if reused is None else reused)

    def note(self, segment: str, path: str, found: Artifact | Reason | None) -> None:
        """Take what :func:`inspect_log` found in ``segment``'s log ``path``."""
        if isinstance(found, Artifact):
            self.add(found.path, found.header)
        elif found is not None:
            self.block(segment, path, found)

    def settle(self, root: str) -> None:
        """Block the ids found in more than one directory; note a root of two encodings.

        Ids are counted in a sorted list of them, a pointer each: a table of every id was 7.7 MB
        at the end of a walk of 200,000 sessions, beside the listing it replaced."""
        ids = sorted(record.id for record in self.found)
        twice = {one for one, other in itertools.pairwise(ids) if one == other}
        del ids
        for record in self.found if twice else ():
            if record.id in twice:
                reason = f'duplicate JSONL session id "{record.id}" appears in multiple project directories'
                self.skips.report(str(record.location), reason)
                self.duplicates.add(record.id)
                self.blocked[record.id] = reason
        if len({compression_of(str(record.location)) for record in self.found}) > 1:
            self.skips.report(
                root,
                "the root holds both .jsonl and .jsonl.zstd logs (dsh reads one encoding per root); "
                "each log is read in its own encoding",
            )

    def listing(self) -> list[SessionRecord]:
        """What the walk lists (after :meth:`settle`), newest first."""
        duplicates = self.duplicates
        return newest_first([record for record in self.found if record.id not in duplicates])

    def artifact(self, session_id: str) -> Artifact:
        """The usable artifact of ``session_id`` (a walk named after it), else upstream's failure."""
        record = self.usable().get(session_id)
        if record is not None:
            location = str(record.location)
            return Artifact(location, compression_of(location), dict(record.header))
        reason = self.blocked.get(session_id)
        raise not_found(session_id) if reason is None else listing_failed(str(reason))


def newest_first(records: list[SessionRecord]) -> list[SessionRecord]:
    """``records`` in upstream's listing order, sorted in place: ``createdAt`` descending, ties by
    ``localeCompare`` of the ids.

    Only ties need ICU sort keys, so only they get one (keys for every id of a big root cost time
    and memory for nothing). Python's sort is stable, as V8's is, also in reverse: ICU-equal ids keep
    directory order. The times are the records' own ``int`` objects, and ties are sorted where they
    lie: a negated time for each record and a second list were 8 MB at 200,000 sessions.
    """
    records.sort(key=_created, reverse=True)
    start, count = 0, len(records)
    while start < count:
        end = start + 1
        created = records[start].created_at
        while end < count and records[end].created_at == created:
            end += 1
        if end - start > 1:
            records[start:end] = sorted(records[start:end], key=lambda record: locale_compare_key(record.id))
        start = end
    return records


_created = operator.attrgetter("created_at")


def not_found(session_id: str) -> StoreError:
    return StoreError(f'session "{session_id}" not found', NOT_FOUND)


def listing_failed(reason: str) -> StoreError:
    return StoreError(f"session persistence listing failed: {reason}", PERSISTENCE_FAILED)


def root_real(root: str) -> str | None:
    """The resolved root, ``None`` when it does not exist; a root that is not a directory is an error."""
    try:
        mode = os.stat(root).st_mode
    except FileNotFoundError:
        return None
    except OSError as error:
        raise listing_failed(fs_message(error, "scandir", root)) from error
    if not stat.S_ISDIR(mode):
        raise listing_failed(f"ENOTDIR: not a directory, scandir '{root}'")
    return os.path.realpath(root)


DIRECTORY: Final = 0
FILE: Final = 1
OTHER: Final = 2
"""The kinds of entry :func:`sorted_entries` tells apart (as ``lstat`` would: a link is OTHER)."""


def _kind(entry: os.DirEntry[str]) -> int:
    try:
        if entry.is_dir(follow_symlinks=False):
            return DIRECTORY
        return FILE if entry.is_file(follow_symlinks=False) else OTHER
    except OSError:  # gone since it was listed (a file system that does not say an entry's type)
        return OTHER


def sorted_entries(path: str) -> list[tuple[str, int]]:
    """A directory's entries as ``(name, kind)`` in libuv's ``scandir`` order (byte order of the
    names). Names and kinds only: ``scandir``'s entries, each with its path, were 7 MB at once for
    a project of 18,000 sessions, at every walk of a big root."""
    with os.scandir(path) as iterator:
        entries = [(entry.name, _kind(entry)) for entry in iterator]
    # ``os.fsdecode`` spells a byte that is not UTF-8 as a lone surrogate; without one, UTF-8
    # keeps code point order, so the names sort as strings.
    if any(not name.isascii() and js_has_surrogates(name) for name, _ in entries):
        entries.sort(key=lambda entry: os.fsencode(entry[0]))
    else:
        entries.sort()  # each name once in a directory: the kinds are never compared
    return entries


def walk_root(root: str, walk: Walk, only: str | None, stop: AbortSignal | None) -> Walk:
    """Upstream's listing of ``root`` (its resolved path ``root_real``) into ``walk``, every
    directory read from its log; ``only``: just the session directories of that name."""
    real = root_real(root)
    if real is not None:
        for directory, segment in session_directories(root, walk, only, stop):
            inspect_directory(root, walk, real, directory, segment, stop)
        walk.settle(root)
    return walk


def session_directories(
    root: str, walk: Walk, only: str | None, stop: AbortSignal | None
) -> Iterator[tuple[str, str]]:
    """Each session directory of ``<root>/<project>/<session>/`` (or only those named ``only``), as
    ``(path, name)``, in upstream's order; flat-layout logs found on the way are blocked in ``walk``."""
    try:
        projects = sorted_entries(root)
    except OSError as error:
        raise listing_failed(fs_message(error, "scandir", root)) from error
    for name, kind in projects:
        check(stop)
        if kind != DIRECTORY:
            continue
        walk.directories += 1
        if only is None:
            yield from _project_directories(walk, os.path.join(root, name), stop)
        else:
            yield from _named_directories(walk, os.path.join(root, name), only)


def _project_directories(walk: Walk, project: str, stop: AbortSignal | None) -> Iterator[tuple[str, str]]:
    try:
        entries = sorted_entries(project)
    except OSError as error:
        walk.skips.report(project, fs_message(error, "scandir", project))
        return
    for name, kind in entries:
        check(stop)
        if kind == FILE:
            for suffix in _FLAT_SUFFIXES:
                if name.endswith(suffix):
                    path = os.path.join(project, name)
                    walk.block(name[: -len(suffix)], path, _flat_layout(path))
                    break
        elif kind == DIRECTORY:
            yield os.path.join(project, name), name
            walk.directories += 1
            walk.sessions += 1


def _named_directories(walk: Walk, project: str, segment: str) -> Iterator[tuple[str, str]]:
    flats = [
        flat
        for flat in (os.path.join(project, segment + suffix) for suffix in _FLAT_SUFFIXES)
        if is_real(flat, stat.S_ISREG)
    ]
    directory = os.path.join(project, segment)
    found = is_real(directory, stat.S_ISDIR)
    if not (flats or found):
        return
    # A listing sees nothing in a project folder it cannot list, even one it may search
    # (mode 0311): a lookup by name must not find more than the listing would.
    try:
        with os.scandir(project):
            pass
    except OSError as error:
        walk.skips.report(project, fs_message(error, "scandir", project))
        return
    for flat in flats:
        walk.block(segment, flat, _flat_layout(flat))
    if found:
        yield directory, segment


def _exists(path: str) -> tuple[bool, bool]:
    """Upstream's ``exists`` (absent, a dangling symlink too, is false; any other failure shows
    on open), and whether the path is a regular file itself rather than a link to one."""
    try:
        info = os.lstat(path)
        if stat.S_ISLNK(info.st_mode):
            os.stat(path)
            return True, False
    except (FileNotFoundError, NotADirectoryError):
        return False, False
    except OSError:
        return True, False
    return True, stat.S_ISREG(info.st_mode)


def inspect_directory(
    root: str, walk: Walk, real: str, directory: str, segment: str, stop: AbortSignal | None
) -> None:
    """Upstream's per-directory listing step, with its root-wide failures turned into blocks."""
    zstd_path, plain_path = directory + ZSTD_NAME, directory + PLAIN_NAME
    (has_zstd, zstd_file), (has_plain, plain_file) = _exists(zstd_path), _exists(plain_path)
    if has_zstd and has_plain:
        try:
            os.stat(zstd_path)
            os.stat(plain_path)
        except OSError as error:  # not two logs: a directory that cannot be searched
            walk.block(segment, zstd_path, fs_message(error, "stat", zstd_path))
            return
        walk.block(segment, plain_path, _encoding_mismatch(plain_path))
    elif has_zstd or has_plain:
        path, is_file = (zstd_path, zstd_file) if has_zstd else (plain_path, plain_file)
        walk.note(segment, path, inspect_log(root, real, path, is_file, stop))


def inspect_log(
    root: str, real: str, path: str, is_file: bool, stop: AbortSignal | None
) -> Artifact | Reason | None:
    """The listing step for a directory known to hold exactly this one log: its artifact, or the
    reason it is skipped, or ``None`` when it hides the session.

    ``is_file``: the log was just seen to be a regular file, not a link, so it can be opened where
    the walk found it without resolving the path first: the walk reaches each log only through
    directories it checked without following links, so the log resolves to the same place under
    the resolved root.
    """
    compression = compression_of(path)
    resolved = None
    if is_file and path.startswith(root):
        resolved = os.path.join(real, path[len(root) :].lstrip(os.sep))
    try:
        with open_artifact(path, real, resolved=resolved, buffering=HEADER_BUFFER) as handle:
            zstd = compression == "zstd"
            first = read_first_zstd_line(handle, stop) if zstd else read_first_line(handle, stop)
        meta = None if first is None else parse_header_meta(first)
    except LogError as error:
        return error.message
    except OSError as error:
        return fs_message(error, "open", path)
    if meta is None:
        return None  # an empty, torn or non-header first line hides the session, as upstream
    problem = identity(root, path, meta, compression)
    # Kept with its strings bounded; ``prepare`` reads the header afresh (the model gets it whole).
    return Artifact(path, compression, kept_header(meta)) if problem is None else problem


def identity_problem(root: str, path: str, meta: Mapping[str, Any], compression: Compression) -> str | None:
    """Upstream's ``assertStoredIdentity`` (listing form): the header must name this very file."""
    problem = identity(root, path, meta, compression)
    return None if problem is None else str(problem)


def identity(root: str, path: str, meta: Mapping[str, Any], compression: Compression) -> Reason | None:
    """:func:`identity_problem`, a header naming another log's path as :class:`Misnamed`."""
    cwd: Any = meta.get("cwd", UNDEFINED)
    if cwd is not UNDEFINED and not isinstance(cwd, str):
        # Upstream lists some of these (a numeric cwd keys "--root--") and then fails every read;
        # a session without a usable cwd is skipped here instead.
        return f'corrupt session log "{path}": header cwd {js_string(cwd)} is not a string'
    project_cwd = cwd if isinstance(cwd, str) else None
    if len(meta["id"]) > NAME_MAX:  # its directory name, a character or more for each of its own
        shown_id = shortened(meta["id"], SHOWN_CHARS)
        return f'corrupt session log "{path}": header id "{shown_id}" is longer than a file name can be'
    try:
        expected = log_path(root, project_cwd, meta["id"], compression)
    except ValueError:
        return f'corrupt session log "{path}": header id cannot name a storage path'
    if path != expected and not _same_file(path, expected):
        # A reason is kept for as long as the log is listed: it keeps the id (at most a file name
        # long, above) and the cwd only while the cwd is within what a header keeps; past that the
        # message is made now, shortened (see :func:`_misnamed`).
        if project_cwd is None or len(project_cwd) <= MAX_HEADER_CHARS:
            misnamed = Misnamed(path, meta["id"], None if project_cwd is None else sys.intern(project_cwd))
            if misnamed.root == root:  # a log the walk found (else said as it is)
                return misnamed
        return _misnamed(path, meta["id"], expected)
    return None


def _misnamed(path: str, session_id: str, expected: str) -> str:
    """The one message for a header naming another log, the same from a log and from its row; the
    id and the path it makes shortened, as a cwd of megabytes makes a path of megabytes."""
    shown_id, shown_path = shortened(session_id, SHOWN_CHARS), shortened(expected, MAX_HEADER_CHARS)
    return f'corrupt session log "{path}": header id "{shown_id}" and cwd identify "{shown_path}"'


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.realpath(a, strict=True) == os.path.realpath(b, strict=True)
    except OSError:
        return False


def _flat_layout(path: str) -> str:
    return (
        f"session artifact {js_stringify(path)} uses the unsupported flat-file layout; use a separate root "
        "or move it into a project/session directory before loading"
    )


def _encoding_mismatch(path: str) -> str:
    return (
        f"session artifact {js_stringify(path)} uses .jsonl, but this backend is configured for compression "
        '"zstd"; use a separate root or select the matching compression mode'
    )
