"""An incremental header and title index in front of :class:`~.jsonl_store.JsonlSessionStore`.

Listing a dsh root opens every log for its header, and a title read replays a
whole log (upstream's ``readTitleSnapshots`` inspects every log in full, so a
non-empty ``@`` query over 10,000 sessions reads about a gigabyte). Logs are
append-only and rarely change once a session is over, so what a read found is
kept in a SQLite file in the user's cache folder
(``${XDG_CACHE_HOME:-~/.cache}/dsh-session-reference/index/``), keyed by the
log's path and its ``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)``.
Only logs whose key changed are read again; the answers are exactly those of
the uncached store, because a hit replays the very outcome the uncached code
produced for those bytes:

* a listing entry is the result of the store's own per-directory inspection
  (the artifact's header, or why it is skipped, or nothing);
* a title entry is the store's own title observation (title, none, or the read
  error), valid only for the same record id and header.

An entry is stored only when the log's key is the same after the read as
before it, and it is trusted only when the log had not changed for
:data:`RACY_NS` before it was read (a write in the same timestamp tick could
otherwise hide behind an unchanged key, the "racy git" problem).

A cold index is CPU work, so it is shared with worker processes
(``workers`` > 1): the first walk of a root with many unseen logs has them
read headers from the end of the walk while it reads from the start
(:class:`_HeaderReaders`), and a title read over many megabytes of unseen logs
replays them in parallel. Their results are entries like any other.

The index is a cache, never a source of truth: a file that is not this
index (another application id, schema, or root), fails SQLite's
``quick_check``, or holds a row whose checksum does not match is deleted and
rebuilt. It is never placed inside the sessions root, which stays read-only;
when the cache folder cannot be written the index lives in memory.

Beyond the store API, two optional helpers serve the language server and the
opt-in body search: :func:`scan_last_title` (the last ``session/title``
line of a log found by a byte scan, without decoding the log's events) and a
SQLite FTS5 table of message text (:meth:`IndexedSessionStore.index_bodies`,
:meth:`IndexedSessionStore.search_bodies`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import sqlite3
import stat
import sys
import threading
import time
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from typing import IO, Any, Final

try:
    import fcntl
except ImportError:  # Windows: index files are made without the lock (see _making)
    fcntl = None  # type: ignore[assignment]

from ..conversation import ConversationKeeper, ConversationSnapshot
from ..jsjson import js_normalize, js_utf8
from ..model import SessionRecord, TitleObservation
from ..projection import project_conversation
from .cache_files import (
    open_private,
    read_private,
    remove_database,
    unlink_own,
    vet_database,
    write_private,
)
from .jsonl_store import JsonlSessionStore, _Artifact, _compression_of, _Scan, _sorted_entries
from .jsvalue import js_parse
from .layout import LOG_NAMES, Compression, is_within
from .logfile import LogChanged, LogError, check_stop, open_artifact, read_log, zstd_plaintext
from .workers import WorkerProcess, drop_spare, run_apart, take_spare

_LOG = logging.getLogger("dsh_session_reference.index")

SCHEMA_VERSION: Final = 2
"""2: log paths and the root are stored as BLOBs of their UTF-8 bytes (any name survives)."""
APPLICATION_ID: Final = 0x64736872  # "dshr"
RACY_NS: Final = 2_000_000_000
"""A log is trusted from the index only if it was last modified this long before it was read."""

PARALLEL_MIN_BYTES: Final = 32 << 20
"""Below this much of logs to verify, starting worker processes costs more than it saves."""

FLUSH_ROWS: Final = 1000
"""Rows per index-file transaction when pending rows are written (about 20 ms each)."""

PARALLEL_MIN_LOGS: Final = 2000
"""A first walk that will find this many logs the index has never seen shares their header reads
with worker processes (below it, starting one costs about as much as it saves)."""
HEADER_BATCH: Final = 64
"""Directories per header-reading task: small, so the walk and the workers meet with little overlap."""

APART_READ_BYTES: Final = 8 << 20
"""A log of more JSONL than this (a ``.jsonl.zstd`` one counted at :data:`ZSTD_EXPANSION` times its
size) is read for ``prepare`` in a process of its own, where one is wanted (``apart_bytes``):
about 0.2 s to start, against seconds of replay that would hold the caller's GIL and grow its heap."""

BODY_CHARS: Final = 200_000
"""Message text kept per session for body search (the newest messages win)."""

_LISTED: Final = "="
"""A title entry's header key meaning "the header of this row's listing entry" (never JSON)."""
_SCAN_CHUNK: Final = 1 << 20
_ZSTD_NAME: Final = os.sep + LOG_NAMES["zstd"]
_PLAIN_NAME: Final = os.sep + LOG_NAMES["none"]
_TITLE_MARKER: Final = b'{"type":"session/title"'

Fingerprint = tuple[int, int, int, int, int]
"""``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)`` of a regular file."""
_Walk = tuple[dict[str, Fingerprint], set[str]]
"""A full walk in progress: each single log it saw, at its fingerprint, and every log path it looked at."""


def fingerprint_of(info: os.stat_result) -> Fingerprint:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


def default_index_dir(environ: Mapping[str, str] | None = None) -> str:
    """``${XDG_CACHE_HOME:-~/.cache}/dsh-session-reference/index``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(base), "dsh-session-reference", "index")


def index_file(index_dir: str, root_key: str) -> str:
    """The index file of the root whose real path is ``root_key``."""
    name = hashlib.sha256(root_key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return os.path.join(index_dir, f"{name}.sqlite3")


def header_text(header: Mapping[str, Any]) -> str:
    """A header as exact JSON (key order, ``-0.0``, big integers and lone surrogates survive the trip).

    A ``version`` of ``1e400`` parses as Infinity, which JSON cannot spell; it is written
    ``Infinity`` here (a comparison key, never a document) rather than failing the caller.
    """
    return json.dumps(header, ensure_ascii=True, separators=(",", ":"))


class _Untrusted(Exception):
    """The index file is not one this code wrote for this root, or it is damaged."""


_Header = tuple[Any, ...] | dict[str, Any]
"""A listed header as kept in memory: flat ones as ``(key, value, key, value, ...)`` with the keys
(and cwd) interned, since a big root keeps one per log; one with nested values as its dict."""


@dataclass(frozen=True, slots=True)
class _Listing:
    """A listing entry, parsed: the artifacts it lists (a ``None`` path is the row's own) and
    the blocks it reports as ``[segment, path, reason]``."""

    artifacts: tuple[tuple[str | None, Compression, _Header], ...]
    blocks: tuple[tuple[str, str, str], ...]


@dataclass(frozen=True, slots=True)
class _Title:
    """A title entry, parsed: for session ``id`` with header ``key`` (:data:`_LISTED` for the
    listing entry's), the title or the error."""

    id: str
    key: str
    title: str | None
    error: str | None


_UNPARSED: Final[Any] = object()


@dataclass(slots=True)
class _Row:
    """What the index knows about one log path at one fingerprint.

    The listing entry and the title entry were each produced by a read that
    started at ``*_ns``; each is trusted only if the log had not been modified
    for :data:`RACY_NS` by then. The entries are kept as the JSON text stored
    in the file and parsed on first use.
    """

    fp: Fingerprint
    listing: str | None = None
    listing_ns: int = 0
    title: str | None = None
    title_ns: int = 0
    parsed_listing: _Listing | None = field(default=_UNPARSED, compare=False, repr=False)
    parsed_title: _Title | None = field(default=_UNPARSED, compare=False, repr=False)

    def fresh(self, fp: Fingerprint, recorded_ns: int) -> bool:
        return self.fp == fp and fp[3] + RACY_NS <= recorded_ns

    def listing_outcome(self, fp: Fingerprint, path: str) -> _Listing | None:
        """The listing entry, if fresh at ``fp``; ``path`` is this row's (its key in the index)."""
        if self.listing is None or not self.fresh(fp, self.listing_ns):
            return None
        if self.parsed_listing is _UNPARSED:
            self.parsed_listing = _parse_listing(self.listing, path)
        return self.parsed_listing

    def listed_once(self, fp: Fingerprint, path: str) -> bool:
        """Whether this row's listing entry holds exactly one header."""
        outcome = self.listing_outcome(fp, path)
        return outcome is not None and len(outcome.artifacts) == 1

    def listed_key(self, fp: Fingerprint, path: str) -> str | None:
        """:func:`header_text` of the one header this row's listing found, if any."""
        outcome = self.listing_outcome(fp, path)
        if outcome is None or len(outcome.artifacts) != 1:
            return None
        return header_text(_header_dict(outcome.artifacts[0][2]))

    def title_value(self, fp: Fingerprint) -> _Title | None:
        if self.title is None or not self.fresh(fp, self.title_ns):
            return None
        if self.parsed_title is _UNPARSED:
            self.parsed_title = _parse_title(self.title)
        return self.parsed_title


def _fp_text(fp: Fingerprint) -> str:
    return ":".join(str(part) for part in fp)


def _fp_parse(text: object) -> Fingerprint:
    if not isinstance(text, str):
        raise _Untrusted("fingerprint is not text")
    parts = text.split(":")
    if len(parts) != 5 or not all(part.isdigit() for part in parts):
        raise _Untrusted("malformed fingerprint")
    dev, ino, size, mtime, ctime = (int(part) for part in parts)
    return dev, ino, size, mtime, ctime


def _key(text: str) -> bytes:
    """A path as the index stores it: the bytes of any ``str`` Python can hold. File names need not
    be UTF-8 (``os.fsdecode`` keeps the odd bytes as lone surrogates, which SQLite's text refuses),
    and ``surrogatepass`` encodes and decodes every such string one to one."""
    return text.encode("utf-8", "surrogatepass")


def _path_of(key: object) -> str:
    if not isinstance(key, bytes):
        raise _Untrusted("a path that is not a BLOB")
    try:
        return key.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError as error:
        raise _Untrusted(f"a path that is no string: {error}") from None


def _crc(path: str, fp: str, listing: str | None, listing_ns: int, title: str | None, title_ns: int) -> int:
    payload = "\0".join((path, fp, listing or "\1", str(listing_ns), title or "\1", str(title_ns)))
    return zlib.crc32(payload.encode("utf-8", "surrogatepass"))


_ROW_COLUMNS: Final = "path, fp, listing, listing_ns, title, title_ns, crc"


def _checked_row(
    path: object,
    fp: object,
    listing: object,
    listing_ns: object,
    title: object,
    title_ns: object,
    crc: object,
) -> tuple[str, _Row]:
    """One row as read from the file, or :class:`_Untrusted` if its types or checksum are wrong."""
    path = _path_of(path)
    if not (
        isinstance(fp, str)
        and (listing is None or isinstance(listing, str))
        and (title is None or isinstance(title, str))
        and type(listing_ns) is int
        and type(title_ns) is int
        and type(crc) is int
    ):
        raise _Untrusted("a row of the wrong types")
    if _crc(path, fp, listing, listing_ns, title, title_ns) != crc:
        raise _Untrusted(f"checksum mismatch for {path!r}")
    return path, _Row(_fp_parse(fp), listing, listing_ns, title, title_ns)


# --- the SQLite file ------------------------------------------------------------------------------


class IndexDatabase:
    """The index file for one root: opened, checked, and rebuilt whenever it cannot be trusted.

    ``path`` ``None`` keeps the index in memory (nothing persists).
    Thread-safe; several processes may share the file (WAL mode).
    """

    def __init__(self, path: str | None, root_key: str) -> None:
        self.path = path
        self.root_key = root_key
        self._lock = threading.RLock()
        self._conn = self._open()

    # opening and checking

    def _open(self) -> sqlite3.Connection:
        if self.path is None:
            return self._create(":memory:")
        with _making(self.path):
            try:
                conn = self._connect(self.path)
                try:
                    self._check(conn)
                except BaseException:
                    conn.close()
                    raise
                return conn
            except (sqlite3.Error, _Untrusted, OSError) as error:
                _LOG.info("index %s cannot be used (%s); rebuilding it", self.path, error)
            try:
                self._remove_files()
                return self._create(self.path)
            except (sqlite3.Error, OSError) as error:
                _LOG.warning("index %s cannot be written (%s); keeping the index in memory", self.path, error)
                self.path = None
                return self._create(":memory:")

    @staticmethod
    def _connect(path: str) -> sqlite3.Connection:
        if path != ":memory:":
            os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
            vet_database(path)
        conn = sqlite3.connect(path, check_same_thread=False, isolation_level=None, timeout=5.0)
        conn.execute("PRAGMA busy_timeout = 5000")
        return conn

    def _check(self, conn: sqlite3.Connection) -> None:
        if conn.execute("PRAGMA application_id").fetchone()[0] != APPLICATION_ID:
            raise _Untrusted("not a dsh-session-reference index")
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            raise _Untrusted("another schema version")
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("root") != _key(self.root_key):
            raise _Untrusted("the index of another root")
        if conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
            raise _Untrusted("damaged")
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA synchronous = NORMAL")

    def _create(self, path: str) -> sqlite3.Connection:
        conn = self._connect(path)
        if path != ":memory:":
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
            write_private(path + ROOT_SUFFIX, self.root_key)
        conn.executescript(
            f"""
            BEGIN;
            CREATE TABLE meta(key TEXT PRIMARY KEY, value BLOB NOT NULL);
            CREATE TABLE logs(
                path BLOB PRIMARY KEY,
                fp TEXT NOT NULL,
                listing TEXT,
                listing_ns INTEGER NOT NULL,
                title TEXT,
                title_ns INTEGER NOT NULL,
                crc INTEGER NOT NULL
            );
            CREATE TABLE body_docs(path BLOB PRIMARY KEY, docid INTEGER UNIQUE NOT NULL, fp TEXT NOT NULL);
            CREATE VIRTUAL TABLE body USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');
            PRAGMA application_id = {APPLICATION_ID};
            PRAGMA user_version = {SCHEMA_VERSION};
            COMMIT;
            """
        )
        conn.execute("INSERT INTO meta(key, value) VALUES ('root', ?)", (_key(self.root_key),))
        return conn

    def _remove_files(self) -> None:
        assert self.path is not None
        _remove_index(self.path)

    def rebuild(self, reason: str) -> None:
        """Throw everything away and start an empty index (the file was found untrustworthy)."""
        with self._lock:
            _LOG.warning("index %s is damaged (%s); rebuilding it", self.path or ":memory:", reason)
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            if self.path is None:
                self._conn = self._create(":memory:")
                return
            try:
                with _making(self.path):
                    self._remove_files()
                    self._conn = self._create(self.path)
            except (sqlite3.Error, OSError):
                self.path = None
                self._conn = self._create(":memory:")

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.close()

    # rows

    def load(self) -> dict[str, _Row]:
        """Every row, each checked against its checksum; any bad row means the file is rebuilt."""
        with self._lock:
            try:
                rows = self._conn.execute(f"SELECT {_ROW_COLUMNS} FROM logs").fetchall()
                return dict(_checked_row(*values) for values in rows)
            except (sqlite3.Error, _Untrusted) as error:
                self.rebuild(str(error))
                return {}

    def load_row(self, path: str) -> _Row | None:
        """The row of one log, checked as :meth:`load` checks every row (a bad one rebuilds the file).

        A targeted lookup (``prepare`` of a few sessions) reads only the rows it needs:
        loading all 50,000 rows of a big root costs about a second.
        """
        with self._lock:
            try:
                values = self._conn.execute(
                    f"SELECT {_ROW_COLUMNS} FROM logs WHERE path = ?", (_key(path),)
                ).fetchone()
                return None if values is None else _checked_row(*values)[1]
            except (sqlite3.Error, _Untrusted) as error:
                self.rebuild(str(error))
                return None

    @contextlib.contextmanager
    def _transaction(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction. Whatever fails inside it (SQLite, or a value it would not take)
        rolls it back, so the connection is never left inside a transaction for the next write to
        trip over; an ordinary failure only loses the cache and is logged, an interrupt propagates."""
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN")
                yield conn
                conn.execute("COMMIT")
            except BaseException as error:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                if not isinstance(error, Exception):
                    raise
                _LOG.warning("index %s: %s failed (%s)", self.path or ":memory:", what, error)

    def write(self, rows: Mapping[str, _Row | None]) -> None:
        """Upsert (or, for ``None``, delete) rows in one transaction; a failure only loses the cache."""
        if not rows:
            return
        upserts = []
        deletes = []
        for path, row in rows.items():
            if row is None:
                deletes.append((_key(path),))
                continue
            fp = _fp_text(row.fp)
            crc = _crc(path, fp, row.listing, row.listing_ns, row.title, row.title_ns)
            upserts.append((_key(path), fp, row.listing, row.listing_ns, row.title, row.title_ns, crc))
        with self._transaction("write") as conn:
            conn.executemany("DELETE FROM logs WHERE path = ?", deletes)
            conn.executemany(
                "INSERT OR REPLACE INTO logs(path, fp, listing, listing_ns, title, title_ns, crc) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                upserts,
            )

    # message text (opt-in body search)

    def body_fingerprints(self) -> dict[str, str]:
        with self._lock:
            try:
                rows = self._conn.execute("SELECT path, fp FROM body_docs").fetchall()
                return {_path_of(path): str(fp) for path, fp in rows}
            except (sqlite3.Error, _Untrusted) as error:
                self.rebuild(str(error))
                return {}

    def put_body(self, path: str, fp: Fingerprint, text: str) -> None:
        # A lone surrogate (valid JSON, ``"\ud83d"``) is no text to SQLite: index it as JS would
        # encode it, U+FFFD, as the snapshot would show it.
        text = js_utf8(text).decode("utf-8")
        with self._transaction("body write") as conn:
            self._drop_body(conn, _key(path))
            cursor = conn.execute("INSERT INTO body(text) VALUES (?)", (text,))
            conn.execute(
                "INSERT INTO body_docs(path, docid, fp) VALUES (?, ?, ?)",
                (_key(path), cursor.lastrowid, _fp_text(fp)),
            )

    def drop_bodies(self, paths: Iterable[str]) -> None:
        with self._transaction("body removal") as conn:
            for path in paths:
                self._drop_body(conn, _key(path))

    @staticmethod
    def _drop_body(conn: sqlite3.Connection, key: bytes) -> None:
        found = conn.execute("SELECT docid FROM body_docs WHERE path = ?", (key,)).fetchone()
        if found is not None:
            conn.execute("DELETE FROM body WHERE rowid = ?", (found[0],))
            conn.execute("DELETE FROM body_docs WHERE path = ?", (key,))

    def search_bodies(self, match: str, limit: int) -> list[tuple[str, str]]:
        """``(path, snippet)`` for the best ``limit`` documents matching an FTS5 query."""
        with self._lock:
            try:
                return [
                    (_path_of(path), str(snippet))
                    for path, snippet in self._conn.execute(
                        "SELECT d.path, snippet(body, 0, '', '', '…', 10) FROM body "
                        "JOIN body_docs d ON d.docid = body.rowid WHERE body MATCH ? ORDER BY rank LIMIT ?",
                        (match, limit),
                    ).fetchall()
                ]
            except (sqlite3.Error, _Untrusted, UnicodeEncodeError):
                return []


ROOT_SUFFIX: Final = ".root"
"""Next to each index file, the root it indexes, so indexes of roots that are gone can be removed."""
NOTE_BYTES: Final = 64 << 10
"""A root note longer than this is not one of ours (the longest path Linux opens is 4 KiB)."""

_tidied: set[str] = set()


LOCK_SUFFIX: Final = ".lock"


@contextlib.contextmanager
def _making(path: str) -> Iterator[None]:
    """Held while an index file is checked and, when it cannot be trusted, made anew. Another
    process (a second editor window, the CLI) opening the file meanwhile would find it without
    its tables yet, take it for a foreign file and remove it under its maker. A lock file that
    cannot be made (a read-only cache folder) leaves only that race open."""
    try:
        os.makedirs(os.path.dirname(path), mode=0o700, exist_ok=True)
        fd = open_private(path + LOCK_SUFFIX, os.O_RDWR | os.O_CREAT)
    except OSError as error:
        _LOG.info("index %s is made without its lock file: %s", path, error)
        yield
        return
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _remove_index(path: str) -> None:
    remove_database(path)
    unlink_own(path + ROOT_SUFFIX)


def tidy_index_dir(index_dir: str) -> int:
    """Remove the index files of roots that no longer exist; returns how many were removed."""
    removed = 0
    try:
        names = os.listdir(index_dir)
    except OSError:
        return 0
    for name in names:
        if not name.endswith(".sqlite3" + ROOT_SUFFIX):
            continue
        note = os.path.join(index_dir, name)
        root = read_private(note, NOTE_BYTES)
        if root and not os.path.lexists(root):
            index = note[: -len(ROOT_SUFFIX)]
            _remove_index(index)
            unlink_own(index + LOCK_SUFFIX)
            removed += 1
    return removed


def _tidy_once(index_dir: str) -> None:
    """Housekeeping in a daemon thread, once per folder per process (never on the request path)."""
    if index_dir in _tidied:
        return
    _tidied.add(index_dir)
    threading.Thread(target=tidy_index_dir, args=(index_dir,), name="dsh-index-tidy", daemon=True).start()


# --- the store ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class BodyMatch:
    """A session whose message text matches a body search, with a short excerpt."""

    record: SessionRecord
    snippet: str


class IndexedSessionStore(JsonlSessionStore):
    """``JsonlSessionStore`` answering from the index for every log that has not changed.

    ``index_dir``: where the index files live (default :func:`default_index_dir`);
    ``persistent=False`` keeps the index in memory only (tests, read-only homes);
    ``workers`` above 1 lets a title read that misses the index on many
    megabytes of logs verify them in that many worker processes (a cold index
    is CPU-bound: a title read replays the whole log).
    ``autoflush=False``: new rows are written to the index file only by :meth:`flush`
    (the language server's background thread does it, so no request waits on the file).
    ``apart_bytes``: ``read_conversation`` of a log of more JSONL than this runs in
    a short-lived process of its own (:func:`~.workers.run_apart`, about 0.2 s to
    start): several huge sources are then replayed on several cores, and the heap
    a replay of hundreds of megabytes grows is returned when the process exits.
    """

    def __init__(
        self,
        root: str | os.PathLike[str] | None = None,
        *,
        index_dir: str | os.PathLike[str] | None = None,
        persistent: bool = True,
        workers: int = 1,
        apart_bytes: int | None = None,
        autoflush: bool = True,
    ) -> None:
        super().__init__(root)
        self.workers = workers
        self.apart_bytes = apart_bytes
        self.autoflush = autoflush
        self._index_dir = (
            os.path.abspath(os.fspath(index_dir)) if index_dir is not None else default_index_dir()
        )
        self._persistent = persistent
        self._lock = threading.RLock()
        self._db: IndexDatabase | None = None
        self._rows: dict[str, _Row] | None = None
        self._some: dict[str, _Row | None] = {}
        """Rows read one by one (``None``: not in the file) while ``_rows`` is not loaded."""
        self._dirty: dict[str, _Row | None] = {}
        self._flushing = threading.Lock()
        """Keeps writes to the file in the order their rows were made."""
        self._local = threading.local()
        self.walked: dict[str, Fingerprint] = {}
        """Every regular log file the latest full listing looked at, with its fingerprint."""
        self.directories = 0
        """Session directories the latest full listing looked in, with a log or not: what a walk costs."""

    def __repr__(self) -> str:
        return f"IndexedSessionStore({self.root!r})"

    @property
    def index_path(self) -> str | None:
        """The index file, ``None`` while the index is kept in memory."""
        return self._database().path

    def close(self) -> None:
        """Write what is pending and close the index file."""
        self.flush()
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None
                self._rows = None
                self._some = {}

    # --- the index ---------------------------------------------------------------------------------

    def _database(self) -> IndexDatabase:
        with self._lock:
            if self._db is None:
                root_key = os.path.realpath(self.root)
                path: str | None = None
                if self._persistent:
                    path = index_file(self._index_dir, root_key)
                    index_real = os.path.realpath(self._index_dir)
                    if index_real == root_key or is_within(root_key, index_real):
                        _LOG.warning("the index folder %s is inside the sessions root; using memory", path)
                        path = None
                    else:
                        _tidy_once(self._index_dir)
                self._db = IndexDatabase(path, root_key)
            return self._db

    def _table(self) -> dict[str, _Row]:
        """Every row (loaded on first use; rows this store already read or changed win)."""
        with self._lock:
            if self._rows is None:
                rows = self._database().load()
                for path, row in self._some.items():
                    if row is None:
                        rows.pop(path, None)
                    else:
                        rows[path] = row
                self._rows, self._some = rows, {}
            return self._rows

    def _get(self, path: str) -> _Row | None:
        """One log's row; before anything needs the whole table, read from the file alone."""
        with self._lock:
            if self._rows is not None:
                return self._rows.get(path)
            if path not in self._some:
                self._some[path] = self._database().load_row(path)
            return self._some[path]

    def _set(self, path: str, row: _Row | None) -> None:
        with self._lock:
            if row is None:
                if self._get(path) is not None:
                    self._dirty[path] = None
            else:
                self._dirty[path] = row
            if self._rows is None:
                self._some[path] = row
            elif row is None:
                self._rows.pop(path, None)
            else:
                self._rows[path] = row

    def flush(self, pause: Callable[[], object] | None = None) -> None:
        """Write pending rows to the index file (after every store call, unless ``autoflush`` is off).

        Rows are taken under the store's lock but written outside it, :data:`FLUSH_ROWS` per
        transaction, so readers of the in-memory rows never wait for the file; ``pause`` is
        called between transactions (the language server's background thread passes one
        that waits while a request is being answered).
        """
        with self._flushing:
            with self._lock:
                pending, self._dirty = self._dirty, {}
            if not pending:
                return
            database = self._database()
            rows = list(pending.items())
            for start in range(0, len(rows), FLUSH_ROWS):
                if start and pause is not None:
                    pause()
                database.write(dict(rows[start : start + FLUSH_ROWS]))

    # --- SessionSource ---------------------------------------------------------------------------

    def list_sessions(self, stop: threading.Event | None = None) -> list[SessionRecord]:
        try:
            return super().list_sessions(stop)
        finally:
            self._call_done()

    def read_titles(
        self, records: Sequence[SessionRecord], stop: threading.Event | None = None
    ) -> list[TitleObservation]:
        try:
            if self.workers > 1:
                self._verify_in_workers(records, stop)
            return super().read_titles(records, stop)
        finally:
            self._call_done()

    def _call_done(self) -> None:
        if self.autoflush:
            self.flush()

    def _verify_in_workers(self, records: Sequence[SessionRecord], stop: threading.Event | None) -> None:
        """Index the titles of the records that miss, in worker processes, when that is worth it."""
        misses: list[SessionRecord] = []
        seen: set[str] = set()
        total = 0
        for record in records:
            if record.location is None or record.id in seen:
                continue
            seen.add(record.id)
            try:
                info = os.lstat(record.location)
            except OSError:
                continue
            if (
                stat.S_ISREG(info.st_mode)
                and self.cached_title(record, fingerprint_of(info), header_text(record.header)) is None
            ):
                misses.append(record)
                total += info.st_size
        if len(misses) < 2 or total < PARALLEL_MIN_BYTES:
            return
        groups = batches(misses, 16 << 20, 256)
        workers = [WorkerProcess() for _ in range(min(self.workers, len(groups)))]
        futures = {
            workers[number % len(workers)].submit(
                "verify_titles", self.root, [record_data(record) for record in group]
            ): group
            for number, group in enumerate(groups)
        }
        try:
            pending = set(futures)
            while pending:
                check_stop(stop)
                done, pending = wait(pending, timeout=0.1, return_when=FIRST_COMPLETED)
                for future in done:
                    for record, (fp, started, title, error) in zip(
                        futures[future], future.result(), strict=True
                    ):
                        if fp is not None:
                            observation = TitleObservation(record.id, title, error)
                            self.remember_title(record, fp, header_text(record.header), observation, started)
        finally:
            for worker in workers:
                worker.close()

    # --- bounded reads ---------------------------------------------------------------------------

    def read_conversation(
        self, session_id: str, max_bytes: int, stop: threading.Event | None = None
    ) -> ConversationSnapshot:
        """What ``prepare`` needs of a session for a ``max_bytes`` budget, without holding the log.

        The same header, ``capturedThroughSeq`` and errors as :meth:`read_surface`;
        the conversation keeps only what retention can use (see ``conversation.py``),
        so retention over it is byte-identical to retention over the surface. A log
        over ``apart_bytes`` is read in a process of its own (see ``__init__``).
        """
        session_id = js_normalize(session_id)
        artifact = self._locate(session_id, stop)
        if self.apart_bytes is not None and _replay_bytes(artifact) > self.apart_bytes:
            conversation: ConversationSnapshot = run_apart(
                "read_conversation", self.root, session_id, max_bytes, stop=stop
            )
            return conversation
        keeper = ConversationKeeper(max_bytes)
        header, result = self._replay(session_id, artifact, keeper, stop)
        for attempt in range(3):
            if not keeper.missing:
                break
            # A replacement brought back messages whose text was let go: read again for exactly those
            # (and, should the log keep changing under the reads, finally for every text).
            keeper = (
                ConversationKeeper(max_bytes, keeper.needed)
                if attempt < 2
                else ConversationKeeper(max_bytes, evict=False)
            )
            header, result = self._replay(session_id, artifact, keeper, stop)
        return ConversationSnapshot(
            session=_Artifact(artifact.path, artifact.compression, header).record(),
            captured_through_seq=result.captured_through_seq,
            items=keeper.conversation(),
            max_bytes=max_bytes,
        )

    # --- listing ---------------------------------------------------------------------------------

    def _scan(self, root_real: str, only: str | None, stop: threading.Event | None) -> _Scan:
        if only is not None:
            return super()._scan(root_real, only, stop)
        self._table()  # a full walk looks up every row: one query for all, not one per log
        walked: dict[str, Fingerprint] = {}
        looked: set[str] = set()
        self._local.walk = (walked, looked)
        readers = self._header_readers() if not self.walked and self.workers > 1 else None
        self._local.readers = readers
        try:
            scan = super()._scan(root_real, only, stop)
        finally:
            self._local.walk = None
            self._local.readers = None
            if readers is not None:
                readers.close()
            drop_spare()  # a first walk that did not need it leaves it unclaimed
        with self._lock:
            for path in [path for path in self._table() if path not in looked]:
                self._set(path, None)  # the log is gone (or moved): its entry goes too
            self.walked = walked
            self.directories = len(looked) // 2  # two log names looked at in each
        return scan

    def _header_readers(self) -> _HeaderReaders | None:
        """Worker processes for the headers of a cold index, when the first walk of this store
        will find at least :data:`PARALLEL_MIN_LOGS` session directories the index has never seen.

        Later walks find few new logs, so only the first one pays for this look (a ``scandir``
        of every project, about 3 ms per thousand sessions).
        """
        table = self._table()
        unseen: list[tuple[str, str]] = []
        try:
            projects = _sorted_entries(self.root)
        except OSError:
            return None  # the walk itself reports it
        for project in projects:
            if not project.is_dir(follow_symlinks=False):
                continue
            try:
                entries = _sorted_entries(project.path)
            except OSError:
                continue
            for entry in entries:
                directory = entry.path
                if (
                    entry.is_dir(follow_symlinks=False)
                    and directory + _ZSTD_NAME not in table
                    and directory + _PLAIN_NAME not in table
                ):
                    unseen.append((entry.name, directory))
        if len(unseen) < PARALLEL_MIN_LOGS:
            return None
        try:
            return _HeaderReaders(self, unseen, self.workers - 1)
        except OSError as error:  # no process to be had: the walk reads every header itself
            _LOG.info("header reads stay in this process: %s", error)
            return None

    def _block(self, scan: _Scan, segment: str, path: str, reason: str) -> None:
        super()._block(scan, segment, path, reason)
        trail: list[list[str]] | None = getattr(scan, "trail", None)
        if trail is not None:
            trail.append([segment, path, reason])

    def _inspect(
        self, scan: _Scan, root_real: str, directory: str, segment: str, stop: threading.Event | None
    ) -> None:
        walk: _Walk | None = getattr(self._local, "walk", None)
        # One string per log path, shared by the walk's sets and the records: a 50,000-log root
        # would otherwise keep twice as many path strings (and fragment the heap with the rest).
        paths = (directory + _ZSTD_NAME, directory + _PLAIN_NAME)
        if walk is not None:
            walk[1].update(paths)
        readers: _HeaderReaders | None = getattr(self._local, "readers", None)
        delivered = None if readers is None else readers.delivered(directory)
        # A worker of this walk that found the one log here and read it (both names looked at,
        # fingerprint checked around the read) looked for the walk.
        if delivered is not None and self._listed_from_row(scan, walk, *delivered):
            return
        try:
            single = _single_log(paths)
        except OSError:
            single = None
        if single is None:
            super()._inspect(scan, root_real, directory, segment, stop)
            return
        path, info = single
        fp = fingerprint_of(info)
        if self._listed_from_row(scan, walk, path, fp):
            return
        if walk is not None:
            walk[0][path] = fp
        probe, entry = self._probe(root_real, segment, path, fp, stop)
        scan.artifacts.extend(probe.artifacts)
        scan.encodings.update(probe.encodings)
        for segment, block_path, reason in probe.trail:  # type: ignore[attr-defined]
            self._block(scan, segment, block_path, reason)
        if entry is not None:
            self._keep_listing(path, fp, *entry)

    def _listed_from_row(self, scan: _Scan, walk: _Walk | None, path: str, fp: Fingerprint) -> bool:
        """List the one log ``path`` (seen at ``fp``) from its index row, if that row is fresh at
        ``fp``; ``False`` when the log must be read."""
        row = self._get(path)
        cached = None if row is None else row.listing_outcome(fp, path)
        if row is None or cached is None:
            return False
        if walk is not None:
            walk[0][path] = row.fp  # one tuple for the row and the walk: a big root keeps both
        self._replay_listing(scan, path, cached)
        return True

    def _probe(
        self, root_real: str, segment: str, path: str, fp: Fingerprint, stop: threading.Event | None
    ) -> tuple[_Scan, tuple[int, str] | None]:
        """The listing step for the one log ``path`` (just seen at ``fp``), and the index entry for
        it, ``(read at, listing text)``, unless the log changed while it was read.

        The ``lstat`` that found the log already told upstream's existence checks' answer:
        exactly this regular file. So the outcome depends on this log alone, and only its
        fingerprint is checked after.
        """
        started = time.time_ns()
        probe = _Scan()
        probe.trail = []  # type: ignore[attr-defined]
        self._inspect_log(probe, root_real, segment, path, _compression_of(path), True, stop)
        try:
            after = _lstat(path)
        except OSError:
            after = None
        if after is None or fingerprint_of(after) != fp:
            return probe, None
        outcome = {
            "a": [[a.path, a.compression, a.header] for a in probe.artifacts],
            "b": probe.trail,  # type: ignore[attr-defined]
        }
        try:
            text = json.dumps(outcome, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
        except ValueError:
            return probe, None  # a header number JSON cannot spell (Infinity): listed, just not indexed
        return probe, (started, text)

    def _keep_listing(self, path: str, fp: Fingerprint, started: int, text: str) -> None:
        with self._lock:
            current = self._get(path)
            kept = current if current is not None and current.fp == fp else _Row(fp)
            self._set(
                path, _Row(fp, text, started, kept.title, kept.title_ns, parsed_title=kept.parsed_title)
            )

    def _replay_listing(self, scan: _Scan, path: str, outcome: _Listing) -> None:
        for artifact_path, compression, header in outcome.artifacts:
            # ``record()`` copies the header dict; only nested values would be shared.
            scan.artifacts.append(
                _Artifact(
                    path if artifact_path is None else artifact_path,
                    compression,
                    _header_dict(header) if isinstance(header, tuple) else _deep_copy(header),
                )
            )
            scan.encodings.add(compression)
        for segment, block_path, reason in outcome.blocks:
            self._block(scan, segment, block_path, reason)

    # --- titles ----------------------------------------------------------------------------------

    def _title_of(self, record: SessionRecord, stop: threading.Event | None) -> TitleObservation:
        path = record.location
        try:
            info = None if path is None else _lstat(path)
        except OSError:
            info = None
        if path is None or info is None or not stat.S_ISREG(info.st_mode):
            return super()._title_of(record, stop)
        fp = fingerprint_of(info)
        key = header_text(record.header)
        hit = self.cached_title(record, fp, key)
        if hit is not None:
            return hit
        started = time.time_ns()
        observation = super()._title_of(record, stop)
        try:
            unchanged = fingerprint_of(os.lstat(path)) == fp
        except OSError:
            unchanged = False
        if unchanged:
            self.remember_title(record, fp, key, observation, started)
        return observation

    def cached_title(
        self, record: SessionRecord, fp: Fingerprint, key: str | None
    ) -> TitleObservation | None:
        """The indexed observation for ``record`` if its log still has fingerprint ``fp``.

        ``key`` is :func:`header_text` of the record's header; ``None`` asserts
        that the record is one this store listed at ``fp``, so its header is the
        one the listing entry holds (which spares serialising every header).
        """
        path = record.location
        row = None if path is None else self._get(path)
        if path is None or row is None:
            return None
        value = row.title_value(fp)
        if value is None or value.id != record.id:
            return None
        if value.key == _LISTED:
            if key is None:
                if not row.listed_once(fp, path):
                    return None
            elif key != row.listed_key(fp, path):
                return None
        elif value.key != (row.listed_key(fp, path) if key is None else key):
            return None
        if value.error is not None:
            return TitleObservation(record.id, error=value.error)
        return TitleObservation(record.id, title=value.title)

    def remember_title(
        self, record: SessionRecord, fp: Fingerprint, key: str, observation: TitleObservation, started_ns: int
    ) -> None:
        """Keep an observation of ``record``'s log at ``fp`` from a read that began at ``started_ns``."""
        path = record.location
        if path is None:
            return
        with self._lock:
            current = self._get(path)
            listed = current.listed_key(fp, path) if current is not None and current.fp == fp else None
            # A title read for the very header this row's listing holds (the usual case) says so,
            # so a lookup for a listed record needs no header serialised.
            stored = _LISTED if listed is not None and listed == key else key
            value = {"i": record.id, "h": stored, "t": observation.title, "e": observation.error}
            text = json.dumps(value, ensure_ascii=True, separators=(",", ":"))
            kept = current if current is not None and current.fp == fp else _Row(fp)
            row = _Row(
                fp,
                kept.listing,
                kept.listing_ns,
                text,
                started_ns,
                parsed_listing=kept.parsed_listing,
                parsed_title=_Title(record.id, stored, observation.title, observation.error),
            )
            self._set(path, row)

    # --- message text ----------------------------------------------------------------------------

    def bodies_to_index(self, records: Sequence[SessionRecord]) -> list[str]:
        """The listed logs whose message text is not indexed at their current fingerprint.

        Entries of logs no longer listed are dropped on the way.
        """
        database = self._database()
        known = database.body_fingerprints()
        listed = {record.location for record in records if record.location is not None}
        database.drop_bodies([path for path in known if path not in listed])
        stale: list[str] = []
        for path in listed:
            try:
                fp = fingerprint_of(os.lstat(path))
            except OSError:
                continue
            if known.get(path) != _fp_text(fp):
                stale.append(path)
        return sorted(stale)

    def put_bodies(self, found: Iterable[tuple[str, Fingerprint | None, str]]) -> None:
        """Store texts read by :func:`message_texts` (a text read while its log changed is skipped)."""
        database = self._database()
        for path, fp, text in found:
            if fp is not None:
                database.put_body(path, fp, text)

    def index_bodies(self, records: Sequence[SessionRecord], stop: threading.Event | None = None) -> int:
        """Put the message text of every listed log that changed into the full-text index (here,
        in this thread); returns how many logs were read."""
        stale = self.bodies_to_index(records)
        root_real = os.path.realpath(self.root)
        for path in stale:
            check_stop(stop)
            try:
                before = fingerprint_of(os.lstat(path))
            except OSError:
                continue
            text = message_text(path, root_real, stop)
            try:
                unchanged = fingerprint_of(os.lstat(path)) == before
            except OSError:
                unchanged = False
            self.put_bodies([(path, before if unchanged else None, text)])
        return len(stale)

    def search_bodies(self, query: str, records: Sequence[SessionRecord], limit: int) -> list[BodyMatch]:
        """Listed sessions whose indexed message text matches ``query`` (word prefixes), best first."""
        match = fts_query(query)
        if match is None or limit <= 0:
            return []
        by_path = {record.location: record for record in records if record.location is not None}
        found: list[BodyMatch] = []
        for path, snippet in self._database().search_bodies(match, limit * 4 + 16):
            record = by_path.get(path)
            if record is not None:
                found.append(BodyMatch(record, " ".join(snippet.split())))
            if len(found) >= limit:
                break
        return found


# --- verifying titles in other processes ------------------------------------------------------------


RecordData = tuple[str, int, str | None, dict[str, Any], str]
"""A listed record as plain data (it crosses a process boundary): id, createdAt, cwd, header, location."""

Verified = tuple[Fingerprint | None, int, str | None, str | None]
"""What a worker found for one record: the fingerprint its answer holds for (``None`` if the log
changed while it was read), when the read began, and the title or the error."""


def record_data(record: SessionRecord) -> RecordData:
    assert record.location is not None
    return record.id, record.created_at, record.cwd, dict(record.header), record.location


def verify_titles(root: str, items: Sequence[RecordData]) -> list[Verified]:
    """Title observations of listed logs, made by the uncached store (runs in a worker process)."""
    store = JsonlSessionStore(root)
    found: list[Verified] = []
    for session_id, created_at, cwd, header, location in items:
        record = SessionRecord(session_id, created_at, cwd, header, location)
        try:
            before: Fingerprint | None = fingerprint_of(os.lstat(location))
        except OSError:
            before = None
        started = time.time_ns()
        observation = store.read_titles([record])[0]
        try:
            after: Fingerprint | None = fingerprint_of(os.lstat(location))
        except OSError:
            after = None
        found.append((before if before == after else None, started, observation.title, observation.error))
    return found


def message_texts(root: str, paths: Sequence[str]) -> list[tuple[str, Fingerprint | None, str]]:
    """:func:`message_text` of several logs, each with the fingerprint it was read at (worker side)."""
    root_real = os.path.realpath(root)
    found: list[tuple[str, Fingerprint | None, str]] = []
    for path in paths:
        try:
            before: Fingerprint | None = fingerprint_of(os.lstat(path))
        except OSError:
            continue
        text = message_text(path, root_real)
        try:
            after = fingerprint_of(os.lstat(path))
        except OSError:
            continue
        found.append((path, before if before == after else None, text))
    return found


def read_conversation(root: str, session_id: str, max_bytes: int) -> ConversationSnapshot:
    """:meth:`IndexedSessionStore.read_conversation` without an index (runs in a worker process:
    locating one session and replaying its log never touch the index)."""
    return IndexedSessionStore(root, persistent=False).read_conversation(session_id, max_bytes)


def batches(records: Sequence[SessionRecord], max_bytes: int, max_count: int) -> list[list[SessionRecord]]:
    """Records grouped so each batch reads about ``max_bytes`` of logs (sizes from the log files)."""
    grouped: list[list[SessionRecord]] = []
    current: list[SessionRecord] = []
    size = 0
    for record in records:
        try:
            weight = os.lstat(record.location or "").st_size
        except OSError:
            weight = 0
        if current and (size + weight > max_bytes or len(current) >= max_count):
            grouped.append(current)
            current, size = [], 0
        current.append(record)
        size += weight
    if current:
        grouped.append(current)
    return grouped


def _single_log(paths: tuple[str, str]) -> tuple[str, os.stat_result] | None:
    """The one log of a session directory (``paths``: its two log names), when it holds exactly
    one and it is a regular file (anything else takes upstream's general listing step).
    ``OSError`` when it cannot be looked at."""
    found = [(path, info) for path in paths if (info := _lstat(path))]
    if len(found) == 1 and stat.S_ISREG(found[0][1].st_mode):
        return found[0]
    return None


_Entry = tuple[str, Fingerprint, int, str]
"""A listing entry read by a worker: ``(log, fingerprint, read at, text)``."""


class _HeaderReaders:
    """Worker processes reading a cold index's headers from the end of the walk, while the walk
    reads them from the start; they meet in the middle.

    Results become index rows, which the walk takes as its own look at those directories: a
    worker looks at both log names and checks the fingerprint around its read just as the walk
    does (and a listing is revalidated against a walk taken before it began), so the walk does
    not look again. A row counts only when the log had been still for ``RACY_NS`` when it was
    read. Whatever a worker has not delivered when the walk gets there, the walk reads itself.
    """

    def __init__(self, store: IndexedSessionStore, unseen: list[tuple[str, str]], count: int) -> None:
        self._store = store
        self._batches = [unseen[at : at + HEADER_BATCH] for at in range(0, len(unseen), HEADER_BATCH)]
        self._batch_of = {
            directory: number for number, batch in enumerate(self._batches) for _, directory in batch
        }
        self._next = len(self._batches) - 1
        """The next batch to hand out; batches are handed out from the last one backwards."""
        self._reached = 0
        """The batch the walk is in: handing that one or an earlier one out would be wasted."""
        self._workers: list[WorkerProcess] = []
        try:
            for _ in range(max(1, count)):
                self._workers.append(take_spare() or WorkerProcess())
        except OSError:
            self.close()
            raise
        self._pending: list[Future[list[_Entry]]] = []
        self._delivered: dict[str, tuple[str, Fingerprint]] = {}
        """Each session directory a worker read, with its log and the fingerprint it was read at."""
        self._hand_out()

    def _hand_out(self) -> None:
        for worker in self._workers:
            while worker.busy < 2 and self._next > self._reached:
                self._pending.append(
                    worker.submit("read_headers", self._store.root, self._batches[self._next])
                )
                self._next -= 1

    def delivered(self, directory: str) -> tuple[str, Fingerprint] | None:
        """``(log, fingerprint)`` if a worker has read ``directory``'s log, its entry now in the
        index; else ``None``, and the walk reads it itself."""
        found = self._delivered.pop(directory, None)
        if found is not None:
            return found
        self._reached = max(self._reached, self._batch_of.get(directory, self._reached))
        done: list[Future[list[_Entry]]] = []
        waiting: list[Future[list[_Entry]]] = []
        for future in self._pending:
            (done if future.done() else waiting).append(future)
        if done:
            self._pending = waiting
            for future in done:
                if future.exception() is None:  # a failed worker only leaves more for the walk
                    for path, fp, started, text in future.result():
                        self._store._keep_listing(path, fp, started, text)
                        self._delivered[os.path.dirname(path)] = (path, fp)
        self._hand_out()
        return self._delivered.pop(directory, None)

    def close(self) -> None:
        for worker in self._workers:
            worker.close()


class _QuietStore(IndexedSessionStore):
    """The store a worker reads headers with: the walk that takes its results reports each
    problem itself, so the worker does not report it again."""

    def _report(self, path: str, reason: str) -> None:
        pass


def read_headers(root: str, directories: Sequence[tuple[str, str]]) -> list[_Entry]:
    """Index listing entries ``(log, fingerprint, read at, text)`` for session directories the index
    has never seen, as the walk would make them (runs in a worker process)."""
    store = _QuietStore(root, persistent=False)
    root_real = os.path.realpath(root)
    found: list[_Entry] = []
    for segment, directory in directories:
        try:
            single = _single_log((directory + _ZSTD_NAME, directory + _PLAIN_NAME))
        except OSError:
            continue
        if single is None:
            continue
        path, info = single
        fp = fingerprint_of(info)
        _, entry = store._probe(root_real, segment, path, fp, None)
        if entry is not None:
            found.append((path, fp, *entry))
    return found


ZSTD_EXPANSION: Final = 3
"""About how many bytes of JSONL a byte of a ``.jsonl.zstd`` log holds (the benchmark stores: 2.6-2.7)."""


def _replay_bytes(artifact: _Artifact) -> int:
    """About how much JSONL replaying a log means, for deciding where to read it (0 when the log
    cannot be seen: the read then fails and says why)."""
    try:
        size = os.lstat(artifact.path).st_size
    except OSError:
        return 0
    return size * ZSTD_EXPANSION if artifact.compression == "zstd" else size


def _lstat(path: str) -> os.stat_result | None:
    """``lstat``, ``None`` when nothing is there; other failures raise."""
    try:
        return os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None


def _deep_copy(header: dict[str, Any]) -> dict[str, Any]:
    """A header holding nested values, copied so no two records share them."""
    copied: dict[str, Any] = json.loads(json.dumps(header))
    return copied


def _parse_listing(text: str | None, path: str) -> _Listing | None:
    """A stored listing entry of the log at ``path``, checked and made compact; ``None`` if it is
    not one this code wrote."""
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("a"), list)
        or not isinstance(value.get("b"), list)
    ):
        return None
    artifacts: list[tuple[str | None, Compression, _Header]] = []
    for artifact in value["a"]:
        if not (
            isinstance(artifact, list)
            and len(artifact) == 3
            and isinstance(artifact[0], str)
            and artifact[1] in LOG_NAMES
            and isinstance(artifact[2], dict)
            and isinstance(artifact[2].get("id"), str)
            and type(artifact[2].get("createdAt")) is int
        ):
            return None
        listed, compression, header = artifact
        artifacts.append(
            (None if listed == path else listed, _COMPRESSIONS[compression], _compact_header(header))
        )
    blocks: list[tuple[str, str, str]] = []
    for block in value["b"]:
        if not (isinstance(block, list) and len(block) == 3 and all(isinstance(part, str) for part in block)):
            return None
        blocks.append((block[0], block[1], block[2]))
    return _Listing(tuple(artifacts), tuple(blocks))


_COMPRESSIONS: Final[dict[str, Compression]] = {"zstd": "zstd", "none": "none"}


def _compact_header(header: dict[str, Any]) -> _Header:
    if any(type(value) in (dict, list) for value in header.values()):
        return header
    items: list[Any] = []
    for key, value in header.items():
        items.append(sys.intern(key))
        items.append(sys.intern(value) if key == "cwd" and type(value) is str else value)
    return tuple(items)


def _header_dict(header: _Header) -> dict[str, Any]:
    """A fresh dict of a kept header (a nested one is returned as kept: callers copy it)."""
    if isinstance(header, dict):
        return header
    return dict(zip(header[::2], header[1::2], strict=True))


def _parse_title(text: str) -> _Title | None:
    try:
        value = json.loads(text)
    except ValueError:
        return None
    if (
        not isinstance(value, dict)
        or not isinstance(value.get("i"), str)
        or not isinstance(value.get("h"), str)
        or not (value.get("t") is None or isinstance(value.get("t"), str))
        or not (value.get("e") is None or isinstance(value.get("e"), str))
    ):
        return None
    return _Title(value["i"], value["h"], value.get("t"), value.get("e"))


# --- reading logs without replaying them ---------------------------------------------------------


def _plaintext_chunks(
    handle: IO[bytes], compression: Compression, stop: threading.Event | None
) -> Iterable[bytes]:
    """A log's bytes as JSONL text, one bounded chunk at a time; damage ends the stream early."""
    if compression == "none":
        while chunk := handle.read(_SCAN_CHUNK):
            check_stop(stop)
            yield chunk
        return
    yield from zstd_plaintext(handle, os.fstat(handle.fileno()).st_size, stop)


_MAX_TITLE_LINE = 32 * 1024 * 1024
"""A line longer than this cannot be a title (titles are capped when written); it is skipped."""


def scan_last_title(
    path: str, root_real: str, compression: Compression, stop: threading.Event | None = None
) -> str | None:
    """The ``title`` of the last complete ``session/title`` line in a log, found by a byte scan.

    A hint, not the answer: unlike a title read it neither validates the log
    nor honours a crash tail, so a damaged log (whose real label is its id) may
    still show a title here. The language server shows these while the index
    is being built and replaces them as logs are verified.
    """
    last: bytes | None = None
    pending = bytearray()  # the unfinished line so far (amortised appends, no re-copying)
    skipping = False  # inside a line too long to be a title: wait for its newline
    try:
        # zstd logs are walked frame by frame through their own 1 MiB reads: a small buffer
        # serves the frame bodies without holding a second copy of the file's bytes.
        buffering = 64 * 1024 if compression == "zstd" else _SCAN_CHUNK
        with open_artifact(path, root_real, buffering=buffering) as handle:
            for chunk in _plaintext_chunks(handle, compression, stop):
                pending += chunk
                end = pending.rfind(b"\n")
                if end < 0:
                    if len(pending) > _MAX_TITLE_LINE:
                        pending.clear()
                        skipping = True
                    continue
                start = 0
                if skipping:
                    start = pending.index(b"\n") + 1
                    skipping = False
                at = pending.rfind(_TITLE_MARKER, start, end)
                while at > start and pending[at - 1] != 10:
                    at = pending.rfind(_TITLE_MARKER, start, at)
                if at >= start:
                    last = bytes(pending[at : pending.index(b"\n", at)])
                del pending[: end + 1]
    except (OSError, LogError):
        return None
    if last is None:
        return None
    try:
        event = js_parse(last.decode("utf-8", "replace"))
    except ValueError:
        return None
    payload = event.get("data") if isinstance(event, dict) else None
    title = payload.get("title") if isinstance(payload, dict) else None
    return title if isinstance(title, str) else None


class _MessageTexts:
    """An event sink keeping the newest :data:`BODY_CHARS` of projected message text."""

    def __init__(self) -> None:
        self.kept: deque[str] = deque()
        self._size = 0

    def push(self, event: dict[str, Any]) -> None:
        if event.get("type") not in ("user/message", "assistant/message"):
            return
        for item in project_conversation([event]):
            text = item.text
            assert isinstance(text, str)  # a projection holds whole texts
            self.kept.append(text)
            self._size += len(text)
            while self._size > BODY_CHARS and len(self.kept) > 1:
                self._size -= len(self.kept.popleft())

    def push_chunks(self, first_seq: int, times: list[Any]) -> None:
        pass  # streamed deltas: the message they make is logged whole


def message_text(path: str, root_real: str, stop: threading.Event | None = None) -> str:
    """What a person said or read in a log (the projected messages), newest kept, for body search."""
    texts = _MessageTexts()
    compression: Compression = "zstd" if path.endswith(".zstd") else "none"
    try:
        with open_artifact(path, root_real) as handle:
            read_log(handle, compression, lambda header: texts, stop)
    except (OSError, LogError, LogChanged):
        pass
    text = "\n".join(texts.kept)
    return text[-BODY_CHARS:]


_WORD = re.compile(r"\w+")


def fts_query(query: str) -> str | None:
    """The FTS5 query for an ``@`` query: its words as a phrase, the last one a prefix."""
    words = _WORD.findall(query)
    if not words:
        return None
    return '"' + " ".join(words) + '"*'
