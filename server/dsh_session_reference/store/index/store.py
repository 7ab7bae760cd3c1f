"""``IndexedSessionStore``: the store answering from the index for every log that has not changed.

It holds the rows (loaded from :mod:`.database` on first use, written behind), walks the root
through them (:mod:`.walk`), answers titles from them, verifies many cold titles in worker
processes, and reads huge logs for ``prepare`` apart. What misses is read with the plain reading
functions (:mod:`..jsonl_store`, :mod:`..listing`). As the editor's live store it has and starts its
catalog (:meth:`IndexedSessionStore.start_catalog`, :mod:`..catalog`): the listing kept in memory,
the title board, the kept reads, the background round, watching and write-behind, which its
reads ask.

The rows (which ones are loaded, kept, written, pruned) are its base, :class:`.table.RowTable`;
what else stands alone is in modules of its own: :mod:`.database`, :mod:`.rows`, :mod:`.walk`,
:mod:`.kept`, :mod:`.verify`, :mod:`.bodies`.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Final

from ...cancellation import AbortSignal, check
from ...jsjson import js_normalize
from ...model import (
    BodyMatch,
    ConversationRead,
    ConversationSnapshot,
    SessionRecord,
    StoreChange,
    SurfaceSnapshot,
    TitleObservation,
    WarmListing,
)
from ..jsonl_store import (
    ReadsOnDemand,
    lookup_segment,
    named_segment,
    record_named,
)
from ..layout import resolve_root
from ..listing import Artifact, Reuse, Skips, Walk, record_at
from ..surface import SurfaceKeeper
from ..surfaces import Read
from ..workers import run_apart
from .bodies import fts_query, message_text
from .kept import KeptTitle, StoredListing, kept_listing, listing_pieces
from .records import read_texts
from .rows import (
    Fingerprint,
    ReadAt,
    fingerprint_at,
    fp_size,
    fp_text,
    header_text,
    regular_fingerprint,
    stable_read,
)
from .table import RowTable
from .verify import TitleWorkers
from .walk import stored_walk, walk_rows

if TYPE_CHECKING:
    from ..catalog import SessionCatalog
    from ..scheduler import Scheduler

LOG = logging.getLogger("dsh_session_reference.index")


PARALLEL_MIN_BYTES: Final = 32 << 20
"""Below this much of logs to verify, starting worker processes costs more than it saves."""

APART_READ_BYTES: Final = 8 << 20
"""A log of more JSONL than this (a ``.jsonl.zstd`` one counted at :data:`ZSTD_EXPANSION` times its
size) is read for ``prepare`` in a process of its own, where one is wanted (``apart_bytes``):
about 0.2 s to start, against seconds of replay that would hold the caller's GIL and grow its heap."""


class IndexedSessionStore(RowTable, ReadsOnDemand):
    """The store answering as :class:`~..jsonl_store.JsonlSessionStore` does, from the index for every
    log that has not changed: its walks ask the rows first (:func:`.walk.walk_rows`) and its title
    reads go through :meth:`read_title`; what misses is read and kept.

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
        super().__init__(resolve_root(root), index_dir, persistent)
        self.skips = Skips()
        self.workers = workers
        self.apart_bytes = apart_bytes
        self.autoflush = autoflush
        self._title_workers = TitleWorkers(workers)
        self.catalog: SessionCatalog | None = None
        """The parts this store has as the editor's live store (:meth:`start_catalog`)."""

    def start_catalog(
        self, *, background: bool = True, scheduler: Scheduler | None = None
    ) -> IndexedSessionStore:
        """Have and start a catalog (:class:`..catalog.SessionCatalog`): the listing kept in
        memory and the title board its reads answer from, and with ``background`` its thread,
        worker process and write-behind (without it every answer stays exact and synchronous, as
        the CLI's body search wants). Imported here, not above: a CLI run without it does not pay
        for its imports."""
        from ..catalog import SessionCatalog

        self.catalog = SessionCatalog(self, background=background, scheduler=scheduler)
        return self

    def start_title_workers(self) -> None:
        """Start the worker processes a cold title read will use, now, if the index file does not
        exist yet: a caller about to read every title (a query over a cold index) overlaps their
        start-up (0.1-0.2 s each) with its own and with the listing. The next title read takes
        them, or closes them when it has nothing for them to do."""
        if self.cold:
            self._title_workers.start()

    def close(self) -> None:
        """Stop the catalog's background work, the title workers, write what is pending and close
        the index file."""
        if self.catalog is not None:
            self.catalog.stop()
        self._title_workers.close()
        super().close()

    # --- SessionSource ---------------------------------------------------------------------------

    def list_sessions(self, stop: AbortSignal | None = None) -> list[SessionRecord]:
        """A walk, or the catalog's latest listing: its own list, shared (callers must not mutate
        it): the candidate table knows an unchanged listing by this very object, where a copy
        compared record by record cost 30-40 ms a request at 200,000 sessions, before the request
        could look at its cancellation."""
        catalog = self.catalog
        return self.walk_listing(stop) if catalog is None else catalog.listing(stop).records

    def find_records(
        self, session_ids: Iterable[str], stop: AbortSignal | None = None
    ) -> dict[str, SessionRecord]:
        """The listed record of each id that has one: from the catalog's listing (kept in memory),
        else each found where its log must be."""
        catalog = self.catalog
        if catalog is None:
            return super().find_records(session_ids, stop)
        listing = catalog.listing(stop)
        found = ((session_id, listing.record_of(session_id)) for session_id in session_ids)
        return {session_id: record for session_id, record in found if record is not None}

    def warm_listing(self, since: int | None, stop: AbortSignal | None = None) -> WarmListing | None:
        """The catalog's listing and titles version (:meth:`..catalog.SessionCatalog.warm`); ``None``
        without a catalog (nothing is kept warm)."""
        return None if self.catalog is None else self.catalog.warm(since, stop)

    def titles_since(
        self, version: int, stop: AbortSignal | None = None
    ) -> tuple[int, dict[str, TitleObservation]]:
        catalog = self.catalog
        return (version, {}) if catalog is None else catalog.changed_titles(version, stop)

    def walk_listing(
        self, stop: AbortSignal | None = None, reuse: Reuse | None = None
    ) -> list[SessionRecord]:
        """Every session, walked now through the rows (:func:`.walk.walk_rows`); ``reuse``: the
        records of a listing before it, kept for the same logs (:attr:`.listing.Walk.reuse`)."""
        walk = self._walking = Walk(self.skips, reuse=reuse)
        try:
            return walk_rows(self, walk, None, stop, self.workers).listing()
        finally:
            self._walked, self._walking = walk.sessions, None
            self._call_done()

    def find_record(self, session_id: str, stop: AbortSignal | None = None) -> SessionRecord | None:
        session_id = js_normalize(session_id)
        segment = named_segment(self.root, session_id)
        if segment is None:
            return None
        return record_named(walk_rows(self, Walk(self.skips), segment, stop, self.workers), session_id)

    def locate(self, session_id: str, stop: AbortSignal | None) -> Artifact:
        """The log of ``session_id``, found through the rows, else upstream's failure."""
        segment = lookup_segment(self.root, session_id)
        return walk_rows(self, Walk(self.skips), segment, stop, self.workers).artifact(session_id)

    def stored_listing(self) -> StoredListing:
        """The listing the index remembers, without looking at the disk: possibly stale, so only
        for answering until a walk has listed the root. The one a language server left
        (:meth:`keep_whole_listing`) is one document with its titles; without it, the rows'
        (:func:`.walk.stored_walk`). A caller that keeps the first has the rows share its objects
        (:meth:`~.table.RowTable.share_with`)."""
        with self._database().kept_listing() as pieces:
            kept = None if pieces is None else kept_listing(pieces, self.root)
        return stored_walk(self, self.skips) if kept is None else kept

    def keep_whole_listing(
        self,
        records: list[SessionRecord],
        walked: dict[str, Fingerprint],
        directories: int,
        shown: Callable[[str, Fingerprint], TitleObservation | None] | None = None,
    ) -> None:
        """Keep ``records``, a walk's listing (its logs at ``walked``, ``directories`` listed), with
        every title the index holds for them, as one document: what the next language server
        answers its first ``@`` from (:meth:`stored_listing`), in one query and one pass. A log
        the rows hold no verified title for is kept with the title ``shown`` for it (the
        catalog's board: a hint, a claim), marked a hint, so a server that closes before its
        titles are verified still leaves the next one a first answer (it verifies them)."""

        def title(record: SessionRecord) -> KeptTitle | None:
            location = record.location
            if location is None or location not in walked:
                return None
            fp = walked[location]
            verified = self.cached_title(record, fp, None)
            if verified is not None:
                return verified, False
            hinted = None if shown is None else shown(location, fp)
            return None if hinted is None else (hinted, True)

        titles = map(title, records)
        try:
            self._database().write_listing(listing_pieces(self.root, records, walked, titles, directories))
        except ValueError:
            return  # a header number JSON cannot spell: the rows still answer

    def read_titles(
        self, records: Sequence[SessionRecord], stop: AbortSignal | None = None
    ) -> list[TitleObservation]:
        """Each record's title: from the catalog's title board when there is one (hints included:
        :meth:`..catalog.SessionCatalog.titles_of`), else :meth:`read_titles_exact`."""
        catalog = self.catalog
        return self.read_titles_exact(records, stop) if catalog is None else catalog.titles_of(records, stop)

    def read_titles_exact(
        self, records: Sequence[SessionRecord], stop: AbortSignal | None = None
    ) -> list[TitleObservation]:
        """Each record's title from the rows, else read (in worker processes when many cold logs
        are worth it), and kept."""
        try:
            if self.workers > 1:
                self._verify_in_workers(records, stop)
            return super().read_titles(records, stop)
        finally:
            self._title_workers.close()  # those started ahead and not needed
            self._call_done()

    def _call_done(self) -> None:
        if self.autoflush:
            self.flush()

    def _verify_in_workers(self, records: Sequence[SessionRecord], stop: AbortSignal | None) -> None:
        """Index the titles of the records that miss, in worker processes, when that is worth it."""
        misses: list[tuple[int, SessionRecord]] = []
        seen: set[str] = set()
        for record in records:
            if record.location is None or record.id in seen:
                continue
            seen.add(record.id)
            fp = regular_fingerprint(record.location)
            if fp is not None and self.cached_title(record, fp, header_text(record.header)) is None:
                misses.append((fp_size(fp), record))
        if len(misses) < 2 or sum(size for size, _ in misses) < PARALLEL_MIN_BYTES:
            return

        self._title_workers.verify(self.root, misses, self.remember_verified, stop)

    # --- bounded reads ---------------------------------------------------------------------------

    def read_surface(self, session_id: str, stop: AbortSignal | None = None) -> SurfaceSnapshot:
        """``readSurface``, kept by the catalog while the log is unchanged (:mod:`..surfaces`)."""
        return self._kept(("surface", session_id), partial(super().read_surface, session_id, stop))

    def read_conversation(
        self, session_id: str, read: ConversationRead, stop: AbortSignal | None = None
    ) -> ConversationSnapshot:
        """What ``prepare`` needs of a session, without holding the log: ``read`` folds replays of
        it (the same header, ``capturedThroughSeq`` and errors as :meth:`read_surface`), kept by
        the catalog while the log is unchanged. A log over ``apart_bytes`` is read in a process of
        its own (see ``__init__``)."""
        return self._kept(
            ("conversation", session_id, read), partial(self._read_conversation, session_id, read, stop)
        )

    def _kept(self, key: tuple[object, ...], read: Callable[[], Read]) -> Read:
        catalog = self.catalog
        return read() if catalog is None else catalog.kept(key, read)

    def _read_conversation(
        self, session_id: str, read: ConversationRead, stop: AbortSignal | None
    ) -> ConversationSnapshot:
        session_id = js_normalize(session_id)
        artifact = self.locate(session_id, stop)
        if self.apart_bytes is not None and _replay_bytes(artifact) > self.apart_bytes:
            conversation: ConversationSnapshot = run_apart(
                "read_conversation", self.root, session_id, read, stop=stop
            )
            return conversation

        def replayed(keeper: SurfaceKeeper) -> tuple[SessionRecord, int | None]:
            header, result = self.replay(session_id, artifact, keeper, stop)
            return record_at(artifact.path, header), result.captured_through_seq

        return read.fold(replayed)

    # --- titles ----------------------------------------------------------------------------------

    def read_title(self, record: SessionRecord, stop: AbortSignal | None) -> TitleObservation:
        """One record's title: from the index when the log is unchanged, else read, and kept when
        the log held still while it was read."""
        path = record.location
        fp = None if path is None else regular_fingerprint(path)
        if path is None or fp is None:
            return super().read_title(record, stop)
        key = header_text(record.header)
        hit = self.cached_title(record, fp, key)
        if hit is not None:
            return hit
        observation, unchanged, started = stable_read(path, partial(super().read_title, record, stop), fp)
        if unchanged is not None:
            self.remember_title(record, fp, key, observation, started)
        return observation

    # --- message text ----------------------------------------------------------------------------

    def bodies_to_index(self, records: Sequence[SessionRecord]) -> list[str]:
        """The listed logs whose message text is not indexed at their current fingerprint.

        Entries of logs no longer listed are dropped on the way.
        """
        database = self._database()
        known = database.body_fingerprints()
        listed = {record.location for record in records if record.location is not None}
        database.drop_bodies([path for path in known if path not in listed])
        return sorted(
            path
            for path in listed
            if (fp := fingerprint_at(path)) is not None and known.get(path) != fp_text(fp)
        )

    def put_bodies(self, found: Iterable[ReadAt[str]]) -> None:
        """Store texts read by :func:`.bodies.message_text` (:func:`.records.read_texts`)."""
        database = self._database()
        for text in found:
            database.put_body(text.path, text.fp, text.value)

    def index_bodies(self, records: Sequence[SessionRecord], stop: AbortSignal | None = None) -> int:
        """Put the message text of every listed log that changed into the full-text index (here,
        in this thread); returns how many logs were read."""
        stale = self.bodies_to_index(records)
        for path in stale:
            check(stop)
            self.put_bodies(read_texts(self.root, [path], partial(message_text, stop=stop)))
        return len(stale)

    def search_bodies(self, query: str, records: Sequence[SessionRecord], limit: int) -> list[BodyMatch]:
        """Listed sessions whose indexed message text matches ``query`` (word prefixes), best first;
        the catalog's first search starts indexing message text."""
        if self.catalog is not None:
            self.catalog.want_bodies(records)
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

    # --- the live store's lifecycle (:class:`~...model.LiveSource`) -------------------------------

    def touch(self) -> None:
        if self.catalog is not None:
            self.catalog.touch()

    def background_work(self) -> tuple[str, int] | None:
        return None if self.catalog is None else self.catalog.background_work()

    def from_memory(self) -> bool:
        return self.catalog is not None and self.catalog.from_memory()

    def stop_bodies(self) -> None:
        if self.catalog is not None:
            self.catalog.stop_bodies()

    def resume_bodies(self) -> None:
        if self.catalog is not None:
            self.catalog.resume_bodies()

    def watch(self, listener: Callable[[StoreChange], None]) -> str | None:
        return "this store has no catalog" if self.catalog is None else self.catalog.watch(listener)

    def watch_sessions(self, session_ids: Iterable[str]) -> None:
        if self.catalog is not None:
            self.catalog.watch_sessions(session_ids)


ZSTD_EXPANSION: Final = 3
"""About how many bytes of JSONL a byte of a ``.jsonl.zstd`` log holds (the benchmark stores: 2.6-2.7)."""


def _replay_bytes(artifact: Artifact) -> int:
    """About how much JSONL replaying a log means, for deciding where to read it (0 when the log
    cannot be seen: the read then fails and says why)."""
    try:
        size = os.lstat(artifact.path).st_size
    except OSError:
        return 0
    return size * ZSTD_EXPANSION if artifact.compression == "zstd" else size
