"""The index file of one root: a SQLite database in the user's cache folder, never in the root.

Opened, checked (application id, schema, root, ``quick_check``, a checksum per row) and rebuilt
whenever it cannot be trusted; kept in memory when the cache folder cannot be written. Also the
cache folder's housekeeping: the lock held while a file is made, and removing the indexes of
roots that are gone.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import logging
import os
import sqlite3
import tempfile
import threading
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Final

try:
    import fcntl
except ImportError:  # Windows: index files are made without the lock (see _making)
    fcntl = None  # type: ignore[assignment]

from ...jsjson import js_utf8
from ..cache_files import open_private, read_private, remove_database, unlink_own, vet_database, write_private
from .rows import (
    Fingerprint,
    IndexRow,
    Untrusted,
    fp_parse,
    fp_text,
    key_path,
    path_key,
    regular_fingerprint,
    row_crc,
    too_many_missing,
)

LOG = logging.getLogger("dsh_session_reference.index")


SCHEMA_VERSION: Final = 4
"""2: log paths and the root are stored as BLOBs of their UTF-8 bytes (any name survives);
3: the listing a language server last served, whole (:meth:`IndexDatabase.kept_listing`);
4: that listing's body is its row's last column (:meth:`IndexDatabase.write_listing`)."""
APPLICATION_ID: Final = 0x64736872  # "dshr"
MAX_LISTING_BYTES: Final = 64 << 20
"""The largest kept listing read back (50,000 sessions make 15 MB): the cache folder is not
trusted, and a bigger document is not read at all (the rows answer instead). What it can make a
server hold is bounded by the root, not by this: its entries must name the root's own logs
(:func:`.kept.kept_listing`)."""
PRUNE_ROWS: Final = 10_000
"""Rows removed per transaction when rows never loaded go from the file (:meth:`IndexDatabase.keep_only`)."""
LISTING_CHUNK: Final = 1 << 20
"""Bytes of the kept listing read at a time: it is parsed a line at a time as it arrives."""
WRITE_CHUNK: Final = 64 << 10
"""Bytes of a listing being kept copied at a time from the file that holds it into the index."""


def _checked_pieces(blob: sqlite3.Blob, crc: int) -> Iterator[bytes]:
    """``blob`` in pieces, then :class:`.rows.Untrusted` if the CRC-32 of them all is not ``crc``."""
    running = 0
    while True:
        try:
            piece = blob.read(LISTING_CHUNK)
        except sqlite3.Error as error:  # rewritten by another process while it was read
            raise Untrusted(f"the kept listing changed while it was read ({error})") from None
        if not piece:
            break
        running = zlib.crc32(piece, running)
        yield piece
    if running != crc:
        raise Untrusted("the kept listing's checksum does not hold")


def default_index_dir(environ: Mapping[str, str] | None = None) -> str:
    """``${XDG_CACHE_HOME:-~/.cache}/dsh-session-reference/index``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(os.path.abspath(base), "dsh-session-reference", "index")


def index_file(index_dir: str, root_key: str) -> str:
    """The index file of the root whose real path is ``root_key``."""
    name = hashlib.sha256(root_key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
    return os.path.join(index_dir, f"{name}.sqlite3")


_ROW_COLUMNS: Final = "path, fp, listing, listing_ns, title, title_ns, crc"


def _checked_row(
    path: object,
    fp: object,
    listing: object,
    listing_ns: object,
    title: object,
    title_ns: object,
    crc: object,
) -> IndexRow:
    """One row as read from the file, or :class:`Untrusted` if its types or checksum are wrong."""
    path = key_path(path)
    if not (
        isinstance(fp, str)
        and (listing is None or isinstance(listing, str))
        and (title is None or isinstance(title, str))
        and type(listing_ns) is int
        and type(title_ns) is int
        and type(crc) is int
    ):
        raise Untrusted("a row of the wrong types")
    if row_crc(path, fp, listing, listing_ns, title, title_ns) != crc:
        raise Untrusted(f"checksum mismatch for {path!r}")
    return IndexRow(fp_parse(fp), listing, listing_ns, title, title_ns).parse(path).parse_title()


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
            except (sqlite3.Error, Untrusted, OSError) as error:
                LOG.info("index %s cannot be used (%s); rebuilding it", self.path, error)
            return self._recreate(self.path)

    def _recreate(self, path: str) -> sqlite3.Connection:
        """A new empty index file in place of ``path``'s (under :func:`_making`), or an index in
        memory when the file cannot be written."""
        try:
            _remove_index(path)
            return self._create(path)
        except (sqlite3.Error, OSError) as error:
            LOG.warning("index %s cannot be written (%s); keeping the index in memory", path, error)
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
            raise Untrusted("not a dsh-session-reference index")
        if conn.execute("PRAGMA user_version").fetchone()[0] != SCHEMA_VERSION:
            raise Untrusted("another schema version")
        meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        if meta.get("root") != path_key(self.root_key):
            raise Untrusted("the index of another root")
        if conn.execute("PRAGMA quick_check").fetchone()[0] != "ok":
            raise Untrusted("damaged")
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
            CREATE TABLE listing(
                id INTEGER PRIMARY KEY CHECK (id = 0), crc INTEGER NOT NULL, body BLOB NOT NULL
            );
            CREATE TABLE body_docs(path BLOB PRIMARY KEY, docid INTEGER UNIQUE NOT NULL, fp TEXT NOT NULL);
            CREATE VIRTUAL TABLE body USING fts5(text, tokenize = 'unicode61 remove_diacritics 2');
            PRAGMA application_id = {APPLICATION_ID};
            PRAGMA user_version = {SCHEMA_VERSION};
            COMMIT;
            """
        )
        conn.execute("INSERT INTO meta(key, value) VALUES ('root', ?)", (path_key(self.root_key),))
        return conn

    def rebuild(self, reason: str) -> None:
        """Throw everything away and start an empty index (the file was found untrustworthy)."""
        with self._lock:
            LOG.warning("index %s is damaged (%s); rebuilding it", self.path or ":memory:", reason)
            with contextlib.suppress(sqlite3.Error):
                self._conn.close()
            if self.path is not None:
                try:
                    with _making(self.path):
                        self._conn = self._recreate(self.path)
                    return
                except OSError:  # the lock could not be taken
                    self.path = None
            self._conn = self._create(":memory:")

    def close(self) -> None:
        with self._lock, contextlib.suppress(sqlite3.Error):
            self._conn.close()

    # rows

    def load(self, each: Callable[[str, IndexRow], str] | None = None) -> tuple[dict[str, IndexRow], bool]:
        """The rows of logs that are there, at the row's own fingerprint, each checked against its
        checksum (any bad one means the file is rebuilt), and whether that is every row the file
        holds. A checksum is no signature, so rows are not taken on the file's word: a row of a
        log that changed since is of no use and is not kept; one of a log that is not there (gone
        since, or never there) is removed from the file; past :func:`.rows.too_many_missing`,
        loading stops (the rest is looked up row by row), so what a forged file costs in memory
        and time is bounded by the root. ``each`` is called with every row kept, as it is loaded,
        and gives the string to key it by (the caller's own for its path)."""
        rows: dict[str, IndexRow] = {}
        gone: list[str] = []
        whole = True
        with self._reading() as conn:
            cursor = conn.execute(f"SELECT {_ROW_COLUMNS} FROM logs")
            while whole and (batch := cursor.fetchmany(1000)):
                for values in batch:
                    path = key_path(values[0])
                    fp = regular_fingerprint(path)
                    if fp is None:
                        gone.append(path)
                        if too_many_missing(len(gone), len(rows)):
                            whole = False
                            break
                    elif values[1] == fp_text(fp):
                        row = _checked_row(*values)
                        rows[path if each is None else each(path, row)] = row
            cursor.close()
            self.write(dict.fromkeys(gone))
            return rows, whole
        return {}, True

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        """The connection, for one read: a file that fails it (SQLite, or a row not ours) is rebuilt,
        and the read ends there."""
        with self._lock:
            try:
                yield self._conn
            except (sqlite3.Error, Untrusted) as error:
                self.rebuild(str(error))

    def keep_only(self, paths: Iterable[str], pause: Callable[[], object] | None = None) -> None:
        """Remove every row but those of ``paths``, in the file itself (for a file not loaded whole,
        :meth:`load`), :data:`PRUNE_ROWS` at a time, calling ``pause`` in between."""
        with self._transaction("prune") as conn:
            conn.execute("CREATE TEMP TABLE IF NOT EXISTS kept(path BLOB PRIMARY KEY)")
            conn.execute("DELETE FROM kept")
            conn.executemany("INSERT OR IGNORE INTO kept(path) VALUES (?)", ((path_key(p),) for p in paths))
        while True:
            removed = 0
            with self._transaction("prune") as conn:
                removed = conn.execute(
                    "DELETE FROM logs WHERE rowid IN (SELECT rowid FROM logs "
                    "WHERE path NOT IN (SELECT path FROM kept) LIMIT ?)",
                    (PRUNE_ROWS,),
                ).rowcount
            if removed < PRUNE_ROWS:
                return
            if pause is not None:
                pause()

    def load_row(self, path: str) -> IndexRow | None:
        """The row of one log, checked as :meth:`load` checks every row (a bad one rebuilds the file).

        A targeted lookup (``prepare`` of a few sessions) reads only the rows it needs:
        loading all 50,000 rows of a big root costs about a second.
        """
        with self._reading() as conn:
            values = conn.execute(
                f"SELECT {_ROW_COLUMNS} FROM logs WHERE path = ?", (path_key(path),)
            ).fetchone()
            return None if values is None else _checked_row(*values)
        return None

    @contextlib.contextmanager
    def kept_listing(self) -> Iterator[Iterator[bytes] | None]:
        """The listing :meth:`write_listing` left, in pieces of :data:`LISTING_CHUNK` bytes (``None``:
        none, or one too big to be ours), for a reader that refuses it at its first bad line without
        reading further: the cache folder is not trusted. Its checksum is checked as the last piece
        is read (:class:`.rows.Untrusted` if it does not hold). The index is held meanwhile."""
        with self._lock:
            found = None
            with self._reading() as conn:
                # Kept as a BLOB: SQLite knows its length without reading it (a TEXT's it must read).
                found = conn.execute(
                    "SELECT crc FROM listing WHERE id = 0 AND typeof(body) = 'blob' AND length(body) <= ?",
                    (MAX_LISTING_BYTES,),
                ).fetchone()
            if found is None or type(found[0]) is not int:
                yield None  # none yet, damaged or too big to be ours: the rows answer instead
                return
            try:
                blob = self._conn.blobopen("listing", "body", 0, readonly=True)
            except sqlite3.Error as error:  # removed by another process meanwhile
                LOG.info("the kept listing could not be read (%s); the rows answer", error)
                yield None
                return
            with blob:
                yield _checked_pieces(blob, found[0])

    def write_listing(self, pieces: Iterable[bytes]) -> None:
        """Keep the document ``pieces`` spell (:func:`.kept.listing_pieces`), or none once it is
        longer than :data:`MAX_LISTING_BYTES` (:meth:`kept_listing` would never read it back).

        The blob's size comes first: the pieces are held meanwhile in a file without a name beside
        the index (in memory they were the peak of a verified 200,000-session server), or in memory
        for an index kept there (the temporary folder may be the root). A piece that cannot be made
        or held leaves the index as it was. The blob, its row's last column, is written in place."""
        size = crc = 0
        try:
            with (
                tempfile.TemporaryFile(dir=os.path.dirname(self.path)) if self.path else io.BytesIO() as held
            ):
                for piece in pieces:
                    size += len(piece)
                    if size > MAX_LISTING_BYTES:
                        with self._transaction("drop the listing") as conn:
                            conn.execute("DELETE FROM listing WHERE id = 0")  # the one kept before is stale
                        return
                    crc = zlib.crc32(piece, crc)
                    held.write(piece)
                held.seek(0)
                with self._transaction("write the listing") as conn:
                    conn.execute("INSERT OR REPLACE INTO listing VALUES (0, ?, zeroblob(?))", (crc, size))
                    with conn.blobopen("listing", "body", 0) as blob:
                        while piece := held.read(WRITE_CHUNK):
                            blob.write(piece)
        except OSError as error:  # no file could be made there, or its disk is full
            LOG.info("the listing is not kept: it could not be held while it was made (%s)", error)

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
                LOG.warning("index %s: %s failed (%s)", self.path or ":memory:", what, error)

    def write(self, rows: Mapping[str, IndexRow | None]) -> None:
        """Upsert (or, for ``None``, delete) rows in one transaction; a failure only loses the cache."""
        if not rows:
            return
        upserts = []
        deletes = []
        for path, row in rows.items():
            if row is None:
                deletes.append((path_key(path),))
                continue
            fp = fp_text(row.fp)
            listing = row.listing_text(path)
            title = row.title_text()
            crc = row_crc(path, fp, listing, row.listing_ns, title, row.title_ns)
            upserts.append((path_key(path), fp, listing, row.listing_ns, title, row.title_ns, crc))
        with self._transaction("write") as conn:
            conn.executemany("DELETE FROM logs WHERE path = ?", deletes)
            conn.executemany(
                f"INSERT OR REPLACE INTO logs({_ROW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)", upserts
            )

    # message text (opt-in body search)

    def body_fingerprints(self) -> dict[str, str]:
        with self._reading() as conn:
            rows = conn.execute("SELECT path, fp FROM body_docs").fetchall()
            return {key_path(path): str(fp) for path, fp in rows}
        return {}

    def put_body(self, path: str, fp: Fingerprint, text: str) -> None:
        # A lone surrogate (valid JSON, ``"\ud83d"``) is no text to SQLite: index it as JS would
        # encode it, U+FFFD, as the snapshot would show it.
        text = js_utf8(text).decode("utf-8")
        with self._transaction("body write") as conn:
            self._drop_body(conn, path_key(path))
            cursor = conn.execute("INSERT INTO body(text) VALUES (?)", (text,))
            conn.execute(
                "INSERT INTO body_docs(path, docid, fp) VALUES (?, ?, ?)",
                (path_key(path), cursor.lastrowid, fp_text(fp)),
            )

    def drop_bodies(self, paths: Iterable[str]) -> None:
        with self._transaction("body removal") as conn:
            for path in paths:
                self._drop_body(conn, path_key(path))

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
                    (key_path(path), str(snippet))
                    for path, snippet in self._conn.execute(
                        "SELECT d.path, snippet(body, 0, '', '', '…', 10) FROM body "
                        "JOIN body_docs d ON d.docid = body.rowid WHERE body MATCH ? ORDER BY rank LIMIT ?",
                        (match, limit),
                    ).fetchall()
                ]
            except (sqlite3.Error, Untrusted, UnicodeEncodeError):
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
        LOG.info("index %s is made without its lock file: %s", path, error)
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


def tidy_once(index_dir: str) -> None:
    """Housekeeping in a daemon thread, once per folder per process (never on the request path)."""
    if index_dir in _tidied:
        return
    _tidied.add(index_dir)
    threading.Thread(target=tidy_index_dir, args=(index_dir,), name="dsh-index-tidy", daemon=True).start()
