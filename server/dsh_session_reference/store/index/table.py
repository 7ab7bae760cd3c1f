"""The index's rows of one root: in memory, and in the index file behind them.

A row is what a read of one log found at one fingerprint (:mod:`.rows`): its listing entry and its
title. :class:`RowTable` loads the rows from the file on first use (one row alone for a lookup,
all of them for a full walk), keeps what reads add, and writes it behind (:meth:`RowTable.flush`).
The walk (:mod:`.walk`) and the store (:mod:`.store`) both use it; it calls neither.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
import time
from collections.abc import Callable, Container, Iterator
from dataclasses import replace
from typing import Final

from ...model import SessionRecord, TitleObservation
from ..layout import is_within
from .database import IndexDatabase, default_index_dir, index_file, tidy_once
from .kept import SharedWithRows
from .records import Verified
from .rows import (
    LISTED,
    PARSED,
    Fingerprint,
    IndexRow,
    ListingEntry,
    ParsedTitle,
    TitleEntry,
    header_text,
    title_entry,
)

LOG = logging.getLogger("dsh_session_reference.index")

FLUSH_ROWS: Final = 1000
"""Rows per index-file transaction when pending rows are written (about 20 ms each)."""
CLOSE_SECONDS: Final = 0.5
"""How long :meth:`RowTable.close` writes pending rows; what is left is dropped (the index is a
cache: a row not written is read again from its log by the next process). A server that had just
listed 200,000 sessions spent 2.6-3.7 s in ``exit`` writing them."""


class RowTable:
    """The rows of the root ``root`` (resolved), in ``index_dir`` (default :func:`default_index_dir`);
    ``persistent=False`` keeps them in memory only (tests, read-only homes, the CLI's plain reads)."""

    def __init__(self, root: str, index_dir: str | os.PathLike[str] | None, persistent: bool) -> None:
        self.root = root
        self._index_dir = (
            os.path.abspath(os.fspath(index_dir)) if index_dir is not None else default_index_dir()
        )
        self._persistent = persistent
        self._lock = threading.RLock()
        self._db: IndexDatabase | None = None
        self._rows: dict[str, IndexRow] | None = None
        self._some: dict[str, IndexRow | None] = {}
        """Rows read one by one (``None``: not in the file) while ``_rows`` is not loaded whole."""
        self._whole = True
        """``_rows`` holds every row of the file that is of use (see :meth:`table`)."""
        self._shared: SharedWithRows | None = None
        """The kept listing being served, until a full walk: the rows loaded meanwhile share its
        objects (:meth:`share_with`)."""
        self._prune = False
        """The file holds rows never loaded that are of no use: removed at the next :meth:`flush`."""
        self._dirty: list[str] = []
        """Paths whose rows changed (or went) since the last :meth:`flush`, in the order they did,
        each written as its row is then: a path twice is written twice. A table of them with
        their rows was 7.7 MB at the end of a 200,000-session root's first walk, its peak."""
        self._flushing = threading.Lock()
        """Keeps writes to the file in the order their rows were made."""
        self._until: float | None = None
        """Set by :meth:`close`: no write transaction begins after this time (``time.monotonic``)."""
        self._paths: dict[str, str] = {}
        """Every log path the walks and the kept listing hold that no loaded row holds, as one
        string each (:meth:`shared_path`); of what the latest full walk saw."""
        self.walked: dict[str, Fingerprint] = {}
        """Every regular log file the latest full listing looked at, with its fingerprint."""
        self.directories = 0
        """Directories the latest full listing listed or looked in (project directories, and session
        directories with a log or not): what a walk costs."""

    @property
    def cold(self) -> bool:
        """No index file exists yet for this root (a warm one holds most titles)."""
        return self._persistent and not os.path.exists(
            index_file(self._index_dir, os.path.realpath(self.root))
        )

    def close(self) -> None:
        """Write what is pending, for at most :data:`CLOSE_SECONDS` (a flush already running stops
        at the same time), and close the index file. A thread still reading the file is not waited
        for past that: a walk loading 200,000 rows holds the rows' lock for seconds, and ``exit``
        took 4.1-4.5 s when it came then. The file is left as it is (a cache, read again next time)."""
        self._until = time.monotonic() + CLOSE_SECONDS
        try:
            self.flush()
            with self._held(self._lock) as held:
                if not held:
                    LOG.info("closing: the index is being read; left as it is")
                    return
                if self._db is not None:
                    self._db.close()
                    self._db = None
                    self._rows = None
                    self._some = {}
        finally:
            self._until = None

    @contextlib.contextmanager
    def _held(self, lock: threading.Lock | threading.RLock) -> Iterator[bool]:
        """``lock`` held; while closing (:meth:`close`), only until its deadline: ``False`` then."""
        until = self._until
        if until is None:
            with lock:
                yield True
            return
        held = lock.acquire(timeout=max(0.0, until - time.monotonic()))
        try:
            yield held
        finally:
            if held:
                lock.release()

    @property
    def index_path(self) -> str | None:
        """The index file, ``None`` while the index is kept in memory."""
        return self._database().path

    def _database(self) -> IndexDatabase:
        with self._lock:
            if self._db is None:
                root_key = os.path.realpath(self.root)
                path: str | None = None
                if self._persistent:
                    path = index_file(self._index_dir, root_key)
                    index_real = os.path.realpath(self._index_dir)
                    if index_real == root_key or is_within(root_key, index_real):
                        LOG.warning("the index folder %s is inside the sessions root; using memory", path)
                        path = None
                    else:
                        tidy_once(self._index_dir)
                self._db = IndexDatabase(path, root_key)
            return self._db

    def table(self) -> dict[str, IndexRow]:
        """Every row of a log that is there as its row says (:meth:`.database.IndexDatabase.load`;
        loaded on first use; rows this store already read or changed win)."""
        with self._lock:
            if self._rows is None:
                shared = self._shared

                def keep(path: str, row: IndexRow) -> str:
                    path = self._placed(path, row)
                    if shared is not None:
                        shared.share(path, row)
                    return path

                rows, self._whole = self._database().load(keep)
                for path, row in self._some.items():
                    if row is None:
                        rows.pop(path, None)
                    else:
                        rows[row.path or self._placed(path, row)] = row
                self._rows = rows
                if self._whole:
                    self._some = {}
                self._let_rows_hold_paths()
            return self._rows

    def shared_path(self, path: str) -> str:
        """The one string kept for the log path ``path``, wherever it came from.

        A log's path is a key in several maps (the rows', the walk's fingerprints, the listing's,
        the title board's) and each source makes its own copy: the listing a server left, the
        index file's rows, each walk's directory names. Over a warm index of 200,000 sessions
        the copies were three, 76 MB more than one. Every source takes its paths from here; a
        walk's end forgets those it did not see (:meth:`walk_done`). Interning them instead
        cost the interpreter's own table, grown by doubling (700 bytes a log at 3,000).

        A log with a row in the loaded table has its string there (:attr:`.rows.IndexRow.path`),
        one the kept listing being served lists has its record's (:meth:`share_with`); only the
        others are kept in a table of their own (:meth:`_let_rows_hold_paths`)."""
        rows = self._rows
        row = None if rows is None else rows.get(path)
        if row is not None and row.path:
            return row.path
        shared = self._shared
        kept = None if shared is None else shared.path_of(path)
        return kept if kept is not None else self._paths.setdefault(path, path)

    def _placed(self, path: str, row: IndexRow) -> str:
        """``row``, about to be kept for ``path``, holding the one string for it (returned)."""
        row.path = self.shared_path(path)
        return row.path

    def _let_rows_hold_paths(self, walked: Container[str] | None = None) -> None:
        """Forget the strings the loaded rows hold (and, after a full walk, those of logs it did
        not see, ``walked`` being what it saw): a table of every log's path to itself beside the
        rows' (keyed by the same strings) was 7.7 MB at 200,000 sessions, held for as long as the
        server ran. Made anew (a dict keeps the table it grew to); a path a source adds meanwhile
        may be lost, and then kept again as another string: never a wrong one."""
        rows = self._rows
        if rows is not None and self._paths:
            self._paths = {
                path: path for path in self._paths if path not in rows and (walked is None or path in walked)
            }

    def row(self, path: str) -> IndexRow | None:
        """One log's row; before anything needs the whole table (or when the file was not loaded
        whole), read from the file alone."""
        with self._lock:
            if not self._in_rows(path) and path not in self._some:
                row = self._some[path] = self._database().load_row(path)
                if row is not None:
                    self._placed(path, row)
                    if self._shared is not None:
                        self._shared.share(path, row)
            return self._current(path)

    def share_with(self, shared: SharedWithRows) -> None:
        """Rows loaded from now on, until a full walk, hold the objects of the kept listing being
        served where they say the same about a log (:class:`.kept.SharedWithRows`): a server
        answering from a kept listing keeps its records."""
        with self._lock:
            self._shared = shared

    def last_walked(self) -> dict[str, Fingerprint]:
        """What the latest full walk saw; before one, what the kept listing being served lists (a
        walk that sees the same gives that table back: :class:`.walk._FullWalk`)."""
        shared = self._shared
        return self.walked or ({} if shared is None else shared.walked)

    def _set(self, path: str, row: IndexRow) -> None:
        with self._lock:
            path = self._placed(path, row)
            self._dirty.append(path)
            if self._rows is None or not self._whole:
                self._some[path] = row
            if self._rows is not None:
                self._rows[path] = row

    def flush(self, pause: Callable[[], object] | None = None) -> None:
        """Write pending rows to the index file (after every store call, unless ``autoflush`` is off).

        Rows are taken under the store's lock but written outside it, :data:`FLUSH_ROWS` per
        transaction, so readers of the in-memory rows never wait for the file; ``pause`` is
        called between transactions (the language server's background thread passes one
        that waits while a request is being answered). Once the store is closing, no transaction
        begins past its deadline: the rows left are dropped, each transaction being whole.
        """
        with self._held(self._flushing) as flushing:
            with self._held(self._lock) as held:
                if not (flushing and held):
                    LOG.info("closing: the index is busy; %d rows left unwritten", len(self._dirty))
                    return
                pending, self._dirty = self._dirty, []
                kept = list(self._rows) if self._prune and self._rows is not None else None
                self._prune = False
                database = self._database()
            paths = iter(pending)
            written = 0
            while batch := list(itertools.islice(paths, FLUSH_ROWS)):
                if self._closing_late():
                    LOG.info("closing: %d index rows left unwritten", len(pending) - written)
                    return
                if written and pause is not None:
                    pause()
                with self._held(self._lock) as held:  # each row as it is now (None: it went)
                    if not held:
                        LOG.info("closing: the index is busy; %d rows left unwritten", len(pending) - written)
                        return
                    chunk = {path: self._current(path) for path in batch}
                database.write(chunk)
                written += len(batch)
            if kept is not None and not self._closing_late():
                database.keep_only(kept, pause)

    def _in_rows(self, path: str) -> bool:
        """Whether the loaded rows say what the index holds for ``path`` (else :attr:`_some` may)."""
        return self._rows is not None and (self._whole or path in self._rows)

    def _current(self, path: str) -> IndexRow | None:
        """``path``'s row as this store holds it now, without reading the file (``None``: none)."""
        rows = self._rows if self._in_rows(path) else self._some
        return None if rows is None else rows.get(path)

    def _closing_late(self) -> bool:
        until = self._until
        return until is not None and time.monotonic() >= until

    def keep_listing(
        self, path: str, fp: Fingerprint, started: int, text: str, parsed: ListingEntry | None = None
    ) -> None:
        """Keep the listing entry a walk (or a worker for it) read of ``path`` at ``fp``: ``text``,
        or ``parsed``, that text as :func:`.rows.parse_listing` reads it, when the walk has it."""
        with self._lock:
            kept = self._row_at(path, fp)
            title, title_ns, parsed_title = kept.title, kept.title_ns, kept.parsed_title
            if parsed is None:
                row = IndexRow(fp, text, started, title, title_ns, parsed_title=parsed_title).parse(path)
            else:
                row = IndexRow(
                    fp, PARSED, started, title, title_ns, parsed_listing=parsed, parsed_title=parsed_title
                ).fold(path)
            row.title_here = kept.title_here
            self._set(path, row)

    def _row_at(self, path: str, fp: Fingerprint) -> IndexRow:
        """``path``'s row if it is at ``fp``, else an empty one."""
        current = self.row(path)
        return current if current is not None and current.fp == fp else IndexRow(fp)

    def walk_done(self, walked: dict[str, Fingerprint], directories: int) -> None:
        """A full walk finished: rows of logs it did not see as the one log of their directory go
        (the log is gone or moved, or its directory holds two: no row answers for those).
        ``directories``: how many it listed or looked in (:attr:`..listing.Walk.directories`)."""
        with self._lock:
            table = self.table()
            if not self._whole:  # the rows never loaded, of logs not looked at, go when next written
                table.update((path, row) for path, row in self._some.items() if row is not None)
                self._whole, self._some, self._prune = True, {}, True
            for path in [path for path in table if path not in walked]:
                del table[path]
                self._dirty.append(path)  # removed from the file when next written
            self.walked = walked
            self._shared = None  # every row that could share it has been loaded
            self.directories = directories
            self._let_rows_hold_paths(walked)

    def cached_title(
        self, record: SessionRecord, fp: Fingerprint, key: str | None
    ) -> TitleObservation | None:
        """The indexed observation for ``record`` if its log still has fingerprint ``fp``.

        ``key`` is :func:`header_text` of the record's header; ``None`` asserts
        that the record is one this store listed at ``fp``, so its header is the
        one the listing entry holds (which spares serialising every header).
        """
        path = record.location
        row = None if path is None else self.row(path)
        if path is None or row is None:
            return None
        kept = row.title_value(fp)
        value = None if kept is None else title_entry(kept)
        if value is None or value.id != record.id:
            return None
        if value.key == LISTED:
            if key is None:
                if row.listed_header(fp, path) is None:
                    return None
            elif key != row.listed_key(fp, path):
                return None
        elif value.key != (row.listed_key(fp, path) if key is None else key):
            return None
        if isinstance(kept, TitleObservation) and (kept.title is None or kept.error is None):
            return kept  # the board's own observation, which the row shares
        if value.error is not None:
            return TitleObservation(record.id, error=value.error)
        return TitleObservation(record.id, title=value.title)

    def remember_verified(self, record: SessionRecord, found: Verified) -> None:
        """Keep what a worker's title read of ``record`` found (``None``: nothing to keep)."""
        if found is not None:
            observation, fp, started_ns = found
            self.remember_title(record, fp, header_text(record.header), observation, started_ns)

    def remember_title(
        self, record: SessionRecord, fp: Fingerprint, key: str, observation: TitleObservation, started_ns: int
    ) -> None:
        """Keep an observation of ``record``'s log at ``fp`` from a read that began at ``started_ns``."""
        path = record.location
        if path is None:
            return
        with self._lock:
            kept = self._row_at(path, fp)
            listed = kept.listed_key(fp, path)
            # A title read for the very header this row's listing holds (the usual case) says so,
            # so a lookup for a listed record needs no header serialised; the row then keeps the
            # observation itself, which the title board keeps too.
            entry: ParsedTitle
            if listed == key and observation.session_id == record.id:
                entry = observation
                if observation.session_id is not record.id:  # the record's id, not an equal copy
                    entry = TitleObservation(record.id, observation.title, observation.error)
            else:
                entry = TitleEntry(
                    record.id, LISTED if listed == key else key, observation.title, observation.error
                )
            row = replace(kept, title=PARSED, title_ns=started_ns, parsed_title=entry, title_here=True)
            self._set(path, row)
