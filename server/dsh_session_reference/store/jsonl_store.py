"""A read-only :class:`~dsh_session_reference.model.SessionSource` over a real dsh sessions root.

It answers as upstream's ``sessionQuery`` does over ``dsh-session-persistence-jsonl``:
the same sessions, in the same order, with the same titles, surfaces and
error messages, for every root upstream can read. Two things differ on purpose
(see the upstream-semantics notes, "Where this project deliberately differs"):

* **No root-wide failures.** Upstream's listing throws for the whole root on
  the first bad artifact (a duplicate id, a header that does not match its
  path, retired header fields, a damaged zstd header frame, a flat legacy
  file, a session directory holding both encodings, an unreadable log...),
  and every read re-lists the root, so one bad file makes every reference
  fail. Here only that artifact is skipped, with a logged reason, and reading
  the id it belongs to (named by its directory) fails with that reason; for a
  duplicate id both copies are skipped. A root whose logs use different
  encodings (upstream is configured for one) is read log by log, each in its
  own encoding, exactly as upstream configured for that encoding would.
* **Bounded memory.** Logs are streamed (``logfile.py``); a title read keeps
  nothing but the last title, a surface read keeps only the current surface.

Nothing under the root is ever written, created, locked or renamed: files are
opened read-only, and only paths found by listing the root (or built with
:func:`~.layout.encode_segment`) are opened, after resolving inside the root.

Over 500 lines because it is upstream's ``sessionQuery`` over the JSONL backend, whole: the walk,
locating a session, inspecting a directory, the replay wrapper and every message they word; splitting
it would separate each failure from the step that words it.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

from ..cancellation import AbortSignal, check
from ..collation import locale_compare_key
from ..jsjson import js_normalize, js_stringify
from ..model import SessionRecord, StoreError, SurfaceSnapshot, TitleObservation
from .jsvalue import UNDEFINED, js_string, strict_equal
from .layout import LOG_NAMES, Compression, decode_segment, encode_segment, log_path, resolve_root
from .log_header import parse_header_meta, read_first_line
from .logbase import HEADER_BUFFER, LogChanged, LogError, open_artifact
from .logfile import line_too_long, read_log
from .replay import Replay, ReplayResult
from .surface import SurfaceKeeper
from .validation import ReplayFailure
from .zstd_frames import read_first_zstd_line

_LOG = logging.getLogger("dsh_session_reference.store")

NOT_FOUND = "SESSION_QUERY_SESSION_NOT_FOUND"
PERSISTENCE_FAILED = "SESSION_QUERY_PERSISTENCE_FAILED"
CORRUPT_SESSION = "SESSION_QUERY_CORRUPT_SESSION"
SOURCE_CONFLICT = "SESSION_QUERY_SOURCE_CONFLICT"

_READ_ATTEMPTS = 3
_FLAT_SUFFIXES = (".jsonl.zstd", ".jsonl")


def _fs_message(error: OSError, syscall: str, path: str) -> str:
    """An ``fs`` error worded as Node words it (``EACCES: permission denied, open '/x'``)."""
    code = errno.errorcode.get(error.errno or 0, "EIO")
    text = (
        "illegal operation on a directory" if error.errno == errno.EISDIR else (error.strerror or "").lower()
    )
    return f"{code}: {text}, {syscall} '{path}'"


def compression_of(path: str) -> Compression:
    return "zstd" if path.endswith(".zstd") else "none"


def _exists(path: str) -> tuple[bool, bool]:
    """Upstream's ``exists`` (absent, a dangling symlink too, is false; any other failure shows
    on open), and whether the path is a regular file itself rather than a link to one."""
    try:
        info = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False, False
    except OSError:
        return True, False
    if not stat.S_ISLNK(info.st_mode):
        return True, stat.S_ISREG(info.st_mode)
    try:
        os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return False, False
    except OSError:
        return True, False
    return True, False


def _newest_first(records: list[SessionRecord]) -> list[SessionRecord]:
    """Upstream's listing order: ``createdAt`` descending, ties by ``localeCompare`` of the ids.

    Only ties need ICU sort keys, so only they get one (keys for every id of a big root
    cost time and memory for nothing). Python's sort is stable, as V8's is: ICU-equal ids
    keep directory order.
    """
    records.sort(key=lambda record: -record.created_at)
    start = 0
    while start < len(records):
        end = start + 1
        while end < len(records) and records[end].created_at == records[start].created_at:
            end += 1
        if end - start > 1:
            records[start:end] = sorted(records[start:end], key=lambda record: locale_compare_key(record.id))
        start = end
    return records


def _listed(scan: Walk) -> list[SessionRecord]:
    return _newest_first([artifact.record() for artifact in scan.usable().values()])


def _same_file(a: str, b: str) -> bool:
    try:
        return os.path.realpath(a, strict=True) == os.path.realpath(b, strict=True)
    except OSError:
        return False


def sorted_entries(path: str) -> list[os.DirEntry[str]]:
    """Directory entries in libuv's ``scandir`` order (byte order of the names)."""
    with os.scandir(path) as iterator:
        entries = list(iterator)
    entries.sort(key=lambda entry: os.fsencode(entry.name))
    return entries


def _is_real_dir(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False


def _is_real_file(path: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False


def headers_compatible(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Upstream's ``assertSessionHeadersCompatible`` (two observations of one source)."""
    keys = ("version", "id", "createdAt", "cwd", "parentSession", "seedLength")
    if not all(strict_equal(a.get(key, UNDEFINED), b.get(key, UNDEFINED)) for key in keys):
        return False
    return strict_equal(a.get("delegationDepth", 0), b.get("delegationDepth", 0))


@dataclass(frozen=True)
class Artifact:
    path: str
    compression: Compression
    header: dict[str, Any]

    @property
    def session_id(self) -> str:
        session_id: str = self.header["id"]
        return session_id

    def record(self) -> SessionRecord:
        return record_at(self.path, dict(self.header))


def record_at(path: str, header: dict[str, Any]) -> SessionRecord:
    """The record of the log at ``path`` with ``header`` (a validated header, owned by the record)."""
    cwd = header.get("cwd")
    return SessionRecord(
        id=header["id"],
        created_at=int(header["createdAt"]),
        cwd=cwd if isinstance(cwd, str) else None,
        header=header,
        location=path,
    )


MAX_REPORTED: Final = 10_000
"""Skipped artifacts remembered as already logged (each is logged once, up to this many)."""


@dataclass
class Walk:
    """One look at the root: the usable artifacts, and why other ids are unusable.

    ``trail``, when a list, also records every block as ``[segment, path, reason]`` (the index
    keeps a directory's blocks in its row, to replay them when the row is used)."""

    artifacts: list[Artifact] = field(default_factory=list)
    blocked: dict[str, str] = field(default_factory=dict)
    duplicates: set[str] = field(default_factory=set)
    encodings: set[Compression] = field(default_factory=set)
    trail: list[list[str]] | None = None
    directories: int = 0
    """Directories the walk listed or looked in: project directories, and session directories
    with a log or not. What a walk costs grows with it, not with the sessions it finds."""

    def usable(self) -> dict[str, Artifact]:
        """Artifacts by id, in directory order, without ids that are blocked as duplicates."""
        return {a.session_id: a for a in self.artifacts if a.session_id not in self.duplicates}


class DirectoryVisitor(Protocol):
    """How one walk reads each session directory it finds (see :data:`Walks`)."""

    def inspect(
        self, walk: Walk, root_real: str, directory: str, segment: str, stop: AbortSignal | None
    ) -> None:
        """Upstream's per-directory listing step for ``directory`` (named ``segment``), into ``walk``."""

    def finish(self, walk: Walk) -> None:
        """The walk found everything it will (not called when it failed or was stopped)."""

    def close(self) -> None:
        """The walk is over, finished or not."""


Walks = Callable[["JsonlSessionStore", bool], DirectoryVisitor]
"""How a store walks: a visitor for each walk (``full``: a listing of the root, else a lookup by
name). The plain store reads every directory's log; the index answers from its rows where it can."""

TitleReader = Callable[[SessionRecord, "AbortSignal | None"], TitleObservation]
"""Where a store's title reads go (the plain store replays the log: :meth:`JsonlSessionStore.title_of`)."""


@dataclass(frozen=True, slots=True)
class _PlainVisitor:
    """Every directory read from its log, as upstream does."""

    reader: JsonlSessionStore

    def inspect(
        self, walk: Walk, root_real: str, directory: str, segment: str, stop: AbortSignal | None
    ) -> None:
        self.reader.inspect_directory(walk, root_real, directory, segment, stop)

    def finish(self, walk: Walk) -> None:
        pass

    def close(self) -> None:
        pass


class JsonlSessionStore:
    """Read-only view of a dsh sessions root (``None``: ``$DSH_HOME/sessions`` or ``~/.dsh/sessions``).

    Thread-safe: every call reads the disk afresh, so the resolver can run
    several reads at once and always sees the logs as they are now.

    Composed, not subclassed: ``walks`` says how each walk reads a session directory and
    ``titles`` where a title read goes (the index, :mod:`.index.store`, answers both from its
    rows and comes back to :meth:`inspect_directory` and :meth:`title_of` for what it has not
    seen). ``report=False`` leaves skipped logs unlogged (a worker process, whose caller reports
    them).
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        walks: Walks | None = None,
        titles: TitleReader | None = None,
        report: bool = True,
    ) -> None:
        self.root = resolve_root(root)
        self._walks: Walks = _plain_walks if walks is None else walks
        self._read_title: TitleReader | None = titles
        """``None``: this store's own :meth:`title_of` (kept as ``None``, not as the bound method,
        so a store holds no reference to itself and is freed as soon as it is dropped)."""
        self._report_skips = report
        self._reported: set[tuple[str, str]] = set()
        self._report_lock = threading.Lock()
        self.walked_sessions = 0
        """Session directories the latest full walk has looked at so far: read from another
        thread to show a long first listing's progress (a plain int, so reads need no lock)."""

    def __repr__(self) -> str:
        return f"JsonlSessionStore({self.root!r})"

    # --- SessionSource -------------------------------------------------------

    def list_sessions(self, stop: AbortSignal | None = None) -> list[SessionRecord]:
        """Every readable-header session, newest first, ties by ICU ``localeCompare`` of ids."""
        root_real = self.root_real()
        if root_real is None:
            return []
        return _listed(self._scan(root_real, None, stop))

    def listing_of(self, scan: Walk) -> list[SessionRecord]:
        """What a walk that found ``scan``'s artifacts lists: ids found twice blocked, newest first
        (how the index lists the rows it keeps before it walks: :func:`.index.walk.stored_walk`)."""
        self._settle(scan)
        return _listed(scan)

    def find_record(self, session_id: str, stop: AbortSignal | None = None) -> SessionRecord | None:
        """The record :meth:`list_sessions` lists for ``session_id``, or ``None``, found by looking
        only where that id's log can be: a log is listed only at the path its header's id names,
        so a lookup of one session (the CLI's target) need not list a root of 50,000."""
        session_id = js_normalize(session_id)
        root_real = self.root_real()
        if root_real is None or session_id == "":
            return None
        artifact = self._scan(root_real, encode_segment(session_id), stop).usable().get(session_id)
        return None if artifact is None else artifact.record()

    def read_titles(
        self, records: Sequence[SessionRecord], stop: AbortSignal | None = None
    ) -> list[TitleObservation]:
        """The latest ``session/title`` of each record's log; a log that fails to read gives an error."""
        seen: dict[str, TitleObservation] = {}
        observations: list[TitleObservation] = []
        for record in records:
            check(stop)
            observation = seen.get(record.id)
            if observation is None:
                read = self._read_title
                observation = self.title_of(record, stop) if read is None else read(record, stop)
                seen[record.id] = observation
            observations.append(observation)
        return observations

    def read_surface(self, session_id: str, stop: AbortSignal | None = None) -> SurfaceSnapshot:
        """``readSurface``: the header, ``capturedThroughSeq`` and the current surface events."""
        session_id = js_normalize(session_id)  # JS sees a surrogate pair as the one character it spells
        artifact = self.locate(session_id, stop)
        header, result = self.replay(session_id, artifact, True, stop)
        return SurfaceSnapshot(
            session=Artifact(artifact.path, artifact.compression, header).record(),
            captured_through_seq=result.captured_through_seq,
            events=result.surface,
        )

    # --- locating ------------------------------------------------------------

    def root_real(self) -> str | None:
        """The resolved root, ``None`` when it does not exist; a root that is not a directory is an error."""
        try:
            mode = os.stat(self.root).st_mode
        except FileNotFoundError:
            return None
        except OSError as error:
            raise StoreError(
                f"session persistence listing failed: {_fs_message(error, 'scandir', self.root)}",
                PERSISTENCE_FAILED,
            ) from error
        if not stat.S_ISDIR(mode):
            raise StoreError(
                f"session persistence listing failed: ENOTDIR: not a directory, scandir '{self.root}'",
                PERSISTENCE_FAILED,
            )
        return os.path.realpath(self.root)

    def locate(self, session_id: str, stop: AbortSignal | None) -> Artifact:
        not_found = StoreError(f'session "{session_id}" not found', NOT_FOUND)
        root_real = self.root_real()
        if root_real is None or session_id == "":
            raise not_found
        scan = self._scan(root_real, encode_segment(session_id), stop)
        artifact = scan.usable().get(session_id)
        if artifact is not None:
            return artifact
        reason = scan.blocked.get(session_id)
        if reason is not None:
            raise StoreError(f"session persistence listing failed: {reason}", PERSISTENCE_FAILED)
        raise not_found

    def _report(self, path: str, reason: str) -> None:
        if not self._report_skips:
            return
        with self._report_lock:
            if (path, reason) in self._reported:
                return
            if len(self._reported) >= MAX_REPORTED:
                self._reported.clear()  # a root of more broken logs than this says some of them again
            self._reported.add((path, reason))
        _LOG.warning("skipping %s: %s", path, reason)

    def block(self, scan: Walk, segment: str, path: str, reason: str) -> None:
        """Skip ``path`` for ``reason``: logged once, and the id its directory names fails with it."""
        self._report(path, reason)
        blocked_id = decode_segment(segment)
        if blocked_id is not None:
            scan.blocked.setdefault(blocked_id, reason)
        if scan.trail is not None:
            scan.trail.append([segment, path, reason])

    def _scan(self, root_real: str, only: str | None, stop: AbortSignal | None) -> Walk:
        """Walk ``<root>/<project>/<session>/``, or only the ``<session>`` directories named ``only``."""
        visitor = self._walks(self, only is None)
        try:
            scan = self._walk(root_real, only, stop, visitor)
            visitor.finish(scan)
        finally:
            visitor.close()
        return scan

    def _walk(
        self, root_real: str, only: str | None, stop: AbortSignal | None, visitor: DirectoryVisitor
    ) -> Walk:
        scan = Walk()
        if only is None:
            self.walked_sessions = 0
        try:
            projects = sorted_entries(self.root)
        except OSError as error:
            raise StoreError(
                f"session persistence listing failed: {_fs_message(error, 'scandir', self.root)}",
                PERSISTENCE_FAILED,
            ) from error
        for project in projects:
            check(stop)
            if not project.is_dir(follow_symlinks=False):
                continue
            scan.directories += 1
            if only is None:
                self._scan_project(scan, root_real, project.path, stop, visitor)
            else:
                self._scan_named(scan, root_real, project.path, only, stop, visitor)
        self._settle(scan)
        return scan

    def _settle(self, scan: Walk) -> None:
        """Block the ids found in more than one directory; note a root of two encodings."""
        counts: dict[str, int] = {}
        for artifact in scan.artifacts:
            counts[artifact.session_id] = counts.get(artifact.session_id, 0) + 1
        for artifact in scan.artifacts:
            if counts[artifact.session_id] > 1:
                reason = (
                    f'duplicate JSONL session id "{artifact.session_id}" '
                    "appears in multiple project directories"
                )
                self._report(artifact.path, reason)
                scan.duplicates.add(artifact.session_id)
                scan.blocked[artifact.session_id] = reason
        if len(scan.encodings) > 1:
            self._report(
                self.root,
                "the root holds both .jsonl and .jsonl.zstd logs (dsh reads one encoding per root); "
                "each log is read in its own encoding",
            )

    def _scan_project(
        self,
        scan: Walk,
        root_real: str,
        project: str,
        stop: AbortSignal | None,
        visitor: DirectoryVisitor,
    ) -> None:
        try:
            entries = sorted_entries(project)
        except OSError as error:
            self._report(project, _fs_message(error, "scandir", project))
            return
        for entry in entries:
            check(stop)
            if entry.is_file(follow_symlinks=False):
                for suffix in _FLAT_SUFFIXES:
                    if entry.name.endswith(suffix):
                        self.block(scan, entry.name[: -len(suffix)], entry.path, _flat_layout(entry.path))
                        break
            elif entry.is_dir(follow_symlinks=False):
                visitor.inspect(scan, root_real, entry.path, entry.name, stop)
                scan.directories += 1
                self.walked_sessions += 1

    def _scan_named(
        self,
        scan: Walk,
        root_real: str,
        project: str,
        segment: str,
        stop: AbortSignal | None,
        visitor: DirectoryVisitor,
    ) -> None:
        flats = [
            flat
            for flat in (os.path.join(project, segment + suffix) for suffix in _FLAT_SUFFIXES)
            if _is_real_file(flat)
        ]
        directory = os.path.join(project, segment)
        found = _is_real_dir(directory)
        if not (flats or found):
            return
        # A listing sees nothing in a project folder it cannot list, even one it may search
        # (mode 0311): a lookup by name must not find more than the listing would.
        try:
            with os.scandir(project):
                pass
        except OSError as error:
            self._report(project, _fs_message(error, "scandir", project))
            return
        for flat in flats:
            self.block(scan, segment, flat, _flat_layout(flat))
        if found:
            visitor.inspect(scan, root_real, directory, segment, stop)

    def inspect_directory(
        self, scan: Walk, root_real: str, directory: str, segment: str, stop: AbortSignal | None
    ) -> None:
        """Upstream's per-directory listing step, with its root-wide failures turned into blocks."""
        zstd_path = os.path.join(directory, LOG_NAMES["zstd"])
        plain_path = os.path.join(directory, LOG_NAMES["none"])
        (has_zstd, zstd_file), (has_plain, plain_file) = _exists(zstd_path), _exists(plain_path)
        if has_zstd and has_plain:
            try:
                os.stat(zstd_path)
                os.stat(plain_path)
            except OSError as error:  # not two logs: a directory that cannot be searched
                self.block(scan, segment, zstd_path, _fs_message(error, "stat", zstd_path))
                return
            self.block(scan, segment, plain_path, _encoding_mismatch(plain_path))
            return
        if not has_zstd and not has_plain:
            return
        compression: Compression = "zstd" if has_zstd else "none"
        path, is_file = (zstd_path, zstd_file) if has_zstd else (plain_path, plain_file)
        self.inspect_log(scan, root_real, segment, path, compression, is_file, stop)

    def inspect_log(
        self,
        scan: Walk,
        root_real: str,
        segment: str,
        path: str,
        compression: Compression,
        is_file: bool,
        stop: AbortSignal | None,
    ) -> None:
        """The listing step for a directory known to hold exactly this one log.

        ``is_file``: the log was just seen to be a regular file, not a link, so it
        can be opened where the walk found it without resolving the path first.
        """
        resolved = self._walked_real(path, root_real) if is_file else None
        try:
            with open_artifact(path, root_real, resolved=resolved, buffering=HEADER_BUFFER) as handle:
                zstd = compression == "zstd"
                first = read_first_zstd_line(handle, stop) if zstd else read_first_line(handle, stop)
            meta = None if first is None else parse_header_meta(first)
        except LogError as error:
            self.block(scan, segment, path, error.message)
            return
        except OSError as error:
            self.block(scan, segment, path, _fs_message(error, "open", path))
            return
        if meta is None:
            return  # an empty, torn or non-header first line hides the session, as upstream
        problem = self._identity_problem(path, meta, compression)
        if problem is not None:
            self.block(scan, segment, path, problem)
            return
        scan.encodings.add(compression)
        scan.artifacts.append(Artifact(path, compression, meta))

    def _walked_real(self, path: str, root_real: str) -> str | None:
        """``realpath(path)`` for a log file that is not a link, found by the walk.

        The walk reaches each log only through directories it checked without
        following links, so the log resolves to the same place under the
        resolved root.
        """
        if not path.startswith(self.root):
            return None
        return os.path.join(root_real, path[len(self.root) :].lstrip(os.sep))

    def _identity_problem(self, path: str, meta: Mapping[str, Any], compression: Compression) -> str | None:
        """Upstream's ``assertStoredIdentity`` (listing form): the header must name this very file."""
        cwd: Any = meta.get("cwd", UNDEFINED)
        if cwd is not UNDEFINED and not isinstance(cwd, str):
            # Upstream lists some of these (a numeric cwd keys "--root--") and then fails every read;
            # a session without a usable cwd is skipped here instead.
            return f'corrupt session log "{path}": header cwd {js_string(cwd)} is not a string'
        project_cwd = cwd if isinstance(cwd, str) else None
        try:
            expected = log_path(self.root, project_cwd, meta["id"], compression)
        except ValueError:
            return f'corrupt session log "{path}": header id cannot name a storage path'
        if path != expected and not _same_file(path, expected):
            return f'corrupt session log "{path}": header id "{meta["id"]}" and cwd identify "{expected}"'
        return None

    # --- reading ---------------------------------------------------------------

    def title_of(self, record: SessionRecord, stop: AbortSignal | None) -> TitleObservation:
        session_id = js_normalize(record.id)
        try:
            if record.location is None:
                artifact = self.locate(session_id, stop)
            else:
                artifact = Artifact(record.location, compression_of(record.location), dict(record.header))
            _, result = self.replay(session_id, artifact, False, stop, discovery=True)
        except StoreError as error:
            return TitleObservation(record.id, error=error.message)
        title = result.title
        if title is None:
            return TitleObservation(record.id)
        if title.error is not None:
            return TitleObservation(record.id, error=f"session title cannot be folded: {title.error}")
        if title.title is UNDEFINED or title.title is None:
            return TitleObservation(record.id)  # upstream: title?.title ?? id
        if not isinstance(title.title, str):
            # Upstream would use the non-string value as the label; dsh never writes one.
            return TitleObservation(record.id, error="session title is not a string")
        return TitleObservation(record.id, title=title.title)

    def replay(
        self,
        session_id: str,
        artifact: Artifact,
        keep_surface: bool | SurfaceKeeper,
        stop: AbortSignal | None,
        *,
        discovery: bool = False,
    ) -> tuple[dict[str, Any], ReplayResult]:
        """Upstream's ``inspect``: read, recover, validate; every failure worded as session-query words it.

        ``discovery`` (a title read): a line too big to hold is skipped where the reader may
        (:data:`~.logfile.SKIPPABLE_TYPES`), and logged, rather than failing the read."""
        root_real = self.root_real()
        if root_real is None:
            raise StoreError(f'session "{session_id}" not found', NOT_FOUND)
        path = artifact.path

        def failed(message: str) -> StoreError:
            return StoreError(f'failed to inspect session "{session_id}": {message}', PERSISTENCE_FAILED)

        replays: list[Replay] = []

        def start(header: dict[str, Any]) -> Replay:
            try:
                location = log_path(self.root, header.get("cwd"), header["id"], artifact.compression)
            except (ValueError, TypeError):
                location = path
            replays.append(Replay(session_id, header, location, keep_surface=keep_surface))
            return replays[-1]

        meta: dict[str, Any] | None = None
        skipped: tuple[int, ...] = ()
        for _ in range(_READ_ATTEMPTS):
            replays.clear()
            try:
                with open_artifact(path, root_real) as handle:
                    prefix = read_log(handle, artifact.compression, start, stop, discovery=discovery)
                meta, skipped = prefix.header, prefix.skipped
                for line in skipped:
                    _LOG.warning(
                        "reading %s for its title, skipped: %s; prepare fails", path, line_too_long(line)
                    )
                break
            except LogChanged:
                continue
            except LogError as error:
                suffix = f" (raw log: {path})" if error.unsupported else ""
                raise failed(error.message + suffix) from error
            except FileNotFoundError:
                raise StoreError(f'session "{session_id}" not found', NOT_FOUND) from None
            except OSError as error:
                raise failed(_fs_message(error, "open", path)) from error
        if meta is None:
            raise failed("the log kept shrinking while it was read")
        if meta["id"] != session_id:
            raise failed(
                f'corrupt session log "{path}": requested id "{session_id}" '
                f'does not match header id "{meta["id"]}"'
            )
        problem = self._identity_problem(path, meta, artifact.compression)
        if problem is not None:
            raise failed(problem)
        try:
            result = replays[0].finish()
        except ReplayFailure as failure:
            if skipped:
                # A skipped line is taken as valid; what fails after one may hinge on what it held
                # (a replace of its event, say), so the read fails as it did before the skip.
                raise failed(line_too_long(skipped[0])) from failure
            if failure.unsupported:
                raise failed(failure.message) from failure
            raise StoreError(
                f'stored session "{session_id}" is corrupt: stored session "{session_id}" failed validation: '
                f"{failure.name}: {failure.message}",
                CORRUPT_SESSION,
            ) from failure
        if not headers_compatible(meta, artifact.header):
            raise StoreError(f'session source headers conflict for session "{session_id}"', SOURCE_CONFLICT)
        return meta, result


def _plain_walks(reader: JsonlSessionStore, full: bool) -> DirectoryVisitor:
    return _PlainVisitor(reader)


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
