"""The index's walk: each session directory listed from its row when the row is fresh at the log's
fingerprint, read by the plain store (and kept as a row) otherwise.

The walk of an :class:`.store.IndexedSessionStore`: it goes over the root's session directories
as the plain store's (:func:`..listing.session_directories`) and, for each, uses the row or calls
the plain listing step (:func:`..listing.inspect_directory`); nothing calls back into it.
A cold root's first walk shares its header reads with worker processes (:class:`HeaderReaders`):
they read from the end of the walk while the walk reads from the start, and meet in the middle.
"""

from __future__ import annotations

import json
import logging
import os
import stat
from concurrent.futures import Future
from functools import partial
from typing import Any, Final

from ...cancellation import AbortSignal
from ...model import StoreError
from ..layout import PLAIN_NAME, ZSTD_NAME, is_walk_relative
from ..listing import (
    Artifact,
    Misnamed,
    Skips,
    Walk,
    inspect_directory,
    inspect_log,
    root_real,
    session_directories,
)
from ..workers import WorkerProcess, drop_spare, take_spare
from .headers import compact_header, header_dict, header_json
from .kept import StoredListing
from .rows import Fingerprint, ListingEntry, fingerprint_of, stable_read
from .table import RowTable

LOG = logging.getLogger("dsh_session_reference.index")

PARALLEL_MIN_LOGS: Final = 2000
"""A first walk that will find this many logs the index has never seen shares their header reads
with worker processes (below it, starting one costs about as much as it saves)."""
HEADER_BATCH: Final = 64
"""Directories per header-reading task: small, so the walk and the workers meet with little overlap."""


def walk_rows(rows: RowTable, walk: Walk, only: str | None, stop: AbortSignal | None, workers: int) -> Walk:
    """Upstream's listing of the root into ``walk`` (``only``: just the session directories of that
    name), each directory listed from its row when the row is fresh, else read and kept as a row.
    A full walk also tells ``rows`` every single log it saw (:meth:`.table.RowTable.walk_done`); the
    first full walk of a cold root shares its header reads with ``workers - 1`` worker processes."""
    root = rows.root
    real = root_real(root)
    if real is None:
        return walk
    full = readers = None
    if only is None:
        full = _FullWalk(rows.last_walked())  # the walk before's, or before the first the kept listing's
        rows.table()  # a full walk looks up every row: one query for all, not one per log
        readers = start_header_readers(rows, workers) if not rows.walked and workers > 1 else None
    try:
        for directory, segment in session_directories(root, walk, only, stop):
            _inspect(rows, walk, full, readers, real, directory, segment, stop)
        walk.settle(root)
        if full is not None:
            rows.walk_done(full.result(), walk.directories)
    finally:
        if readers is not None:
            readers.close()
        if full is not None:
            drop_spare()  # a first walk that did not need it leaves it unclaimed
    return walk


class _FullWalk:
    """Each single log a full walk sees, at its fingerprint: the only logs rows are kept for (a set
    of every name looked at, both in every directory, was 40 MB of a walk of 200,000 sessions).

    A walk that sees every log the one before it saw, each at the same fingerprint, and no other,
    gives that walk's table back (:meth:`result`): a walk of an unchanged root made a table equal
    to the one it replaced, 7.7 MB beside it at 200,000 sessions at the end of every full walk
    (the first over a kept listing among them, a server's peak there). Until a log differs, the
    walk keeps the paths it saw in a list, a pointer each; at the first that differs it makes its
    own table, as every walk did before."""

    __slots__ = ("_before", "_same", "_walked")

    def __init__(self, before: dict[str, Fingerprint]) -> None:
        self._before = before
        self._same: list[str] | None = []
        """The logs seen as ``before`` has them, while every one so far was (else ``None``)."""
        self._walked: dict[str, Fingerprint] = {}

    def saw(self, path: str, fp: Fingerprint) -> None:
        """The walk saw the one log ``path`` of a directory at ``fp``."""
        same = self._same
        if same is not None:
            if self._before.get(path) == fp:
                same.append(path)
                return
            self._own(same)
        self._walked[path] = fp

    def _own(self, same: list[str]) -> None:
        before = self._before
        self._walked = {path: before[path] for path in same}
        self._same = None

    def result(self) -> dict[str, Fingerprint]:
        """What the walk saw: the walk before's own table when it saw the very same."""
        same = self._same
        if same is not None:
            if len(same) == len(self._before):
                return self._before
            self._own(same)
        return self._walked


def _inspect(
    rows: RowTable,
    scan: Walk,
    walk: _FullWalk | None,
    readers: HeaderReaders | None,
    real: str,
    directory: str,
    segment: str,
    stop: AbortSignal | None,
) -> None:
    # One string per log path, shared by the walk's sets and the records: a 50,000-log root
    # would otherwise keep twice as many path strings (and fragment the heap with the rest).
    paths = (directory + ZSTD_NAME, directory + PLAIN_NAME)
    delivered = None if readers is None else readers.delivered(directory)
    # A worker of this walk that found the one log here and read it (both names looked at,
    # fingerprint checked around the read) looked for the walk.
    if delivered is not None and _listed_from_row(
        rows, scan, walk, rows.shared_path(delivered[0]), delivered[1]
    ):
        return
    single = single_log(paths)
    if single is None:
        inspect_directory(rows.root, scan, real, directory, segment, stop)
        return
    path, fp = single
    path = rows.shared_path(path)
    if _listed_from_row(rows, scan, walk, path, fp):
        return
    if walk is not None:
        walk.saw(path, fp)
    entry = probe(rows.root, scan, real, segment, path, fp, stop)
    if entry is not None:
        rows.keep_listing(path, fp, *entry)


def _listed_from_row(rows: RowTable, scan: Walk, walk: _FullWalk | None, path: str, fp: Fingerprint) -> bool:
    """List the one log ``path`` (seen at ``fp``) from its index row, if that row is fresh at
    ``fp``; ``False`` when the log must be read. ``path`` is the row table's own string for it
    (:meth:`.table.RowTable.shared_path`): the walk and the records keep it."""
    row = rows.row(path)
    if row is None or (cached := row.listing_outcome(fp, path)) is None:
        return False
    if walk is not None:
        walk.saw(path, row.fp)  # one fingerprint for the row and the walk: a big root keeps both
    _replay_listing(scan, path, fp, cached)
    return True


def _replay_listing(scan: Walk, path: str, fp: Fingerprint, outcome: ListingEntry) -> None:
    for artifact_path, _compression, header in outcome.artifacts:
        if artifact_path is None:
            scan.add(path, header_dict(header), fp)
        else:
            scan.add(artifact_path, header_dict(header))
    for block in outcome.blocks:
        if isinstance(block, Misnamed):
            scan.block(os.path.basename(os.path.dirname(block.path)), block.path, block)
        else:
            scan.block(*block)


def stored_walk(rows: RowTable, skips: Skips) -> StoredListing:
    """The listing the index's rows remember, without looking at the disk, and the fingerprint of
    every log it lists: what a walk of the root would list if no log had changed since each row
    was written (a fresh language server answers its first ``@`` from it while a walk runs behind).

    Only rows a walk itself makes count: one log at ``<root>/<project>/<session>/<log name>``
    whose listing entry is fresh at the row's own fingerprint and names no other path. The index
    folder is not trusted, so a row for any other path is ignored; taken in the walk's order
    (names by their bytes), the rows list their sessions in the order the walk would.
    """
    prefix = os.path.join(rows.root, "")
    found: dict[tuple[bytes, bytes], tuple[str, Fingerprint, ListingEntry] | None] = {}
    for path, row in rows.table().items():
        relative = path[len(prefix) :]
        if not (path.startswith(prefix) and is_walk_relative(relative)):
            continue
        parts = relative.split(os.sep)
        outcome = row.listing_outcome(row.fp, path)
        if outcome is None or any(artifact[0] is not None for artifact in outcome.artifacts):
            continue
        directory = (os.fsencode(parts[0]), os.fsencode(parts[1]))
        # Rows for both log names of one directory: the walk would look at it afresh, so none.
        found[directory] = None if directory in found else (path, row.fp, outcome)
    scan = Walk(skips)
    walked: dict[str, Fingerprint] = {}
    for path, fp, outcome in filter(None, (found[directory] for directory in sorted(found))):
        walked[path] = fp
        _replay_listing(scan, path, fp, outcome)
    scan.settle(rows.root)
    return StoredListing(scan.listing(), walked, {}, False, len(walked))


def probe(
    root: str,
    scan: Walk,
    real: str,
    segment: str,
    path: str,
    fp: Fingerprint,
    stop: AbortSignal | None,
) -> tuple[int, str, ListingEntry | None] | None:
    """The listing step for the one log ``path`` (just seen at ``fp``) into ``scan``, and the index
    entry for it, ``(read at, listing text, the entry parsed)``, unless the log changed while it
    was read. The parsed entry, when the log is listed, holds the very header dict the walk's
    record takes, so the row and the record share it.

    The ``lstat`` that found the log already told upstream's existence checks' answer:
    exactly this regular file. So the outcome depends on this log alone, and only its
    fingerprint is checked after.
    """
    found, unchanged, started = stable_read(path, partial(inspect_log, root, real, path, True, stop), fp)
    parsed = None
    if isinstance(found, Artifact) and found.path == path:
        header = compact_header(found.header)
        found = Artifact(found.path, found.compression, header)
        parsed = ListingEntry(((None, found.compression, header),), ())
    scan.note(segment, path, found)
    if unchanged is None:
        return None
    artifacts = [[found.path, found.compression, found.header]] if isinstance(found, Artifact) else []
    blocks = [[segment, path, found]] if isinstance(found, str) else []
    outcome: dict[str, Any] = {"a": artifacts, "b": blocks}
    if isinstance(found, Misnamed):
        outcome["m"] = [found.session_id, found.cwd]  # the message is made again from these
    try:
        text = json.dumps(
            outcome, ensure_ascii=True, separators=(",", ":"), allow_nan=False, default=header_json
        )
    except ValueError:
        return None  # a header number JSON cannot spell (Infinity): listed, just not indexed
    return started, text, parsed


def single_log(paths: tuple[str, str]) -> tuple[str, Fingerprint] | None:
    """The one log of a session directory (``paths``: its two log names), when it holds exactly
    one and it is a regular file (anything else, or a directory that cannot be looked at, takes
    upstream's general listing step)."""
    found: list[tuple[str, os.stat_result]] = []
    for path in paths:
        try:
            found.append((path, os.lstat(path)))
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError:
            return None
    if len(found) == 1 and stat.S_ISREG(found[0][1].st_mode):
        return found[0][0], fingerprint_of(found[0][1])
    return None


def start_header_readers(rows: RowTable, workers: int) -> HeaderReaders | None:
    """Worker processes for the headers of a cold index, when the first walk of this store
    will find at least :data:`PARALLEL_MIN_LOGS` session directories the index has never seen.

    Later walks find few new logs, so only the first one pays for this look (a ``scandir``
    of every project, about 3 ms per thousand sessions).
    """
    table = rows.table()
    look = Walk(Skips(report=False))  # what it finds on the way, the walk itself reports
    try:
        unseen = [
            directory  # its name is the segment: one string a directory, not two and a tuple
            for directory, _ in session_directories(rows.root, look, None, None)
            if directory + ZSTD_NAME not in table and directory + PLAIN_NAME not in table
        ]
    except StoreError:
        return None
    if len(unseen) < PARALLEL_MIN_LOGS:
        return None
    try:
        return HeaderReaders(rows, unseen, workers - 1)
    except OSError as error:  # no process to be had: the walk reads every header itself
        LOG.info("header reads stay in this process: %s", error)
        return None


class HeaderReaders:
    """Worker processes reading a cold index's headers from the end of the walk, while the walk
    reads them from the start; they meet in the middle.

    Results become index rows, which the walk takes as its own look at those directories: a
    worker looks at both log names and checks the fingerprint around its read just as the walk
    does (and a listing is revalidated against a walk taken before it began), so the walk does
    not look again. A row counts only when the log had been still for ``RACY_NS`` when it was
    read. Whatever a worker has not delivered when the walk gets there, the walk reads itself.
    """

    def __init__(self, rows: RowTable, unseen: list[str], count: int) -> None:
        self._rows = rows
        self._batches = [unseen[at : at + HEADER_BATCH] for at in range(0, len(unseen), HEADER_BATCH)]
        self._batch_of = {
            directory: number for number, batch in enumerate(self._batches) for directory in batch
        }
        self._next = len(self._batches) - 1
        """The next batch to hand out; batches are handed out from the last one backwards."""
        self._reached = 0
        """The batch the walk is in: handing that one or an earlier one out would be wasted."""
        self._workers: list[WorkerProcess] = []
        try:
            for _ in range(count):
                self._workers.append(take_spare() or WorkerProcess())
        except OSError:
            self.close()
            raise
        self._pending: list[Future[list[tuple[str, Fingerprint, int, str]]]] = []
        self._delivered: dict[str, tuple[str, Fingerprint]] = {}
        """Each session directory a worker read, with its log and the fingerprint it was read at."""
        self._hand_out()

    def _hand_out(self) -> None:
        for worker in self._workers:
            while worker.busy < 2 and self._next > self._reached:
                self._pending.append(
                    worker.submit(
                        "read_headers",
                        self._rows.root,
                        [(os.path.basename(directory), directory) for directory in self._batches[self._next]],
                    )
                )
                self._next -= 1

    def delivered(self, directory: str) -> tuple[str, Fingerprint] | None:
        """``(log, fingerprint)`` if a worker has read ``directory``'s log, its entry now in the
        index; else ``None``, and the walk reads it itself."""
        found = self._delivered.pop(directory, None)
        if found is not None:
            return found
        self._reached = max(self._reached, self._batch_of.get(directory, self._reached))
        for future in [future for future in self._pending if future.done()]:
            self._pending.remove(future)
            if future.exception() is None:  # a failed worker only leaves more for the walk
                for path, fp, started_ns, text in future.result():
                    self._rows.keep_listing(path, fp, started_ns, text)
                    self._delivered[os.path.dirname(path)] = (path, fp)
        self._hand_out()
        return self._delivered.pop(directory, None)

    def close(self) -> None:
        for worker in self._workers:
            worker.close()
