"""Reading one session's log as upstream's ``sessionQuery`` does, and the plain store over a root.

:class:`JsonlSessionStore` is the plain :class:`~dsh_session_reference.model.SessionSource`. The
same sessions, in the same order, with the same titles, surfaces and error messages as
upstream, for every root upstream can read. Two things differ on purpose (see the
upstream-semantics notes, "Where this project deliberately differs"):

* **No root-wide failures.** Only a bad artifact is skipped (:mod:`.listing`), and reading the id
  it belongs to fails with its reason. A root whose logs use different encodings is read log by
  log, each in its own encoding, exactly as upstream configured for that encoding would.
* **Bounded memory.** Logs are streamed (``logfile.py``); a title read keeps nothing but the last
  title, a surface read keeps only the current surface.

The reads are plain functions of the root and an :class:`~.listing.Artifact`: the plain store
here and the index (:mod:`.index.store`) both call them, and neither lends the other a hook.
Nothing under the root is ever written, created, locked or renamed.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..cancellation import AbortSignal, check
from ..jsjson import js_normalize
from ..model import (
    ConversationRead,
    SessionRecord,
    StoreError,
    SurfaceSnapshot,
    TitleObservation,
    WarmListing,
    kept_header,
)
from .jsvalue import UNDEFINED, strict_equal
from .layout import encode_segment, log_path, resolve_root
from .listing import (
    PERSISTENCE_FAILED,
    Artifact,
    Skips,
    Walk,
    compression_of,
    fs_message,
    identity_problem,
    not_found,
    record_at,
    root_real,
    walk_root,
)
from .logbase import LogChanged, LogError, open_artifact
from .logfile import line_too_long, read_log
from .replay import Replay, ReplayResult, TitleFold
from .surface import SurfaceKeeper
from .validation import ReplayFailure

_LOG = logging.getLogger("dsh_session_reference.store")

CORRUPT_SESSION = "SESSION_QUERY_CORRUPT_SESSION"
SOURCE_CONFLICT = "SESSION_QUERY_SOURCE_CONFLICT"

_READ_ATTEMPTS = 3


def headers_compatible(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    """Upstream's ``assertSessionHeadersCompatible`` (two observations of one source)."""
    keys = ("version", "id", "createdAt", "cwd", "parentSession", "seedLength")
    if not all(strict_equal(a.get(key, UNDEFINED), b.get(key, UNDEFINED)) for key in keys):
        return False
    return strict_equal(a.get("delegationDepth", 0), b.get("delegationDepth", 0))


def lookup_segment(root: str, session_id: str) -> str:
    """The session directory name a walk for ``session_id`` looks for; upstream's not-found
    failure when there is no root or no id (a root that is no directory fails its own way)."""
    if root_real(root) is None or session_id == "":
        raise not_found(session_id)
    return encode_segment(session_id)


def artifact_of(root: str, record: SessionRecord, stop: AbortSignal | None, skips: Skips) -> Artifact:
    """The log a record was listed from (one without a location is looked up by name)."""
    if record.location is not None:
        return Artifact(record.location, compression_of(record.location), dict(record.header))
    session_id = js_normalize(record.id)
    return walk_root(root, Walk(skips), lookup_segment(root, session_id), stop).artifact(session_id)


def observed_title(session_id: str, title: TitleFold | None) -> TitleObservation:
    """What a log's folded title says as an observation (upstream: ``title?.title ?? id``)."""
    if title is None:
        return TitleObservation(session_id)
    if title.error is not None:
        return TitleObservation(session_id, error=f"session title cannot be folded: {title.error}")
    if title.title is UNDEFINED or title.title is None:
        return TitleObservation(session_id)
    if not isinstance(title.title, str):
        # Upstream would use the non-string value as the label; dsh never writes one.
        return TitleObservation(session_id, error="session title is not a string")
    return TitleObservation(session_id, title=title.title)


def replay(
    root: str,
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
    real = root_real(root)
    if real is None:
        raise not_found(session_id)
    path = artifact.path

    def failed(message: str) -> StoreError:
        return StoreError(f'failed to inspect session "{session_id}": {message}', PERSISTENCE_FAILED)

    replays: list[Replay] = []

    def start(header: dict[str, Any]) -> Replay:
        try:
            location = log_path(root, header.get("cwd"), header["id"], artifact.compression)
        except (ValueError, TypeError):
            location = path
        replays.append(Replay(session_id, header, location, keep_surface=keep_surface))
        return replays[-1]

    for _ in range(_READ_ATTEMPTS):
        replays.clear()
        try:
            with open_artifact(path, real) as handle:
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
            raise not_found(session_id) from None
        except OSError as error:
            raise failed(fs_message(error, "open", path)) from error
    else:
        raise failed("the log kept shrinking while it was read")
    if meta["id"] != session_id:
        raise failed(
            f'corrupt session log "{path}": requested id "{session_id}" '
            f'does not match header id "{meta["id"]}"'
        )
    problem = identity_problem(root, path, meta, artifact.compression)
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
    if not headers_compatible(kept_header(meta), artifact.header):  # the listed header is kept bounded
        raise StoreError(f'session source headers conflict for session "{session_id}"', SOURCE_CONFLICT)
    return meta, result


def named_segment(root: str, session_id: str) -> str | None:
    """The one session directory name a lookup of ``session_id`` (normalized) walks, or ``None``
    when there is nothing to walk (no root, no id): a log is listed only at the path its header's
    id names, so a lookup of one session need not list a root of 50,000."""
    if root_real(root) is None or session_id == "":
        return None
    return encode_segment(session_id)


def record_named(walk: Walk, session_id: str) -> SessionRecord | None:
    """The record a walk of ``session_id``'s directory lists for it, or ``None``."""
    return walk.usable().get(session_id)


class ReadsOnDemand:
    """What a store that reads on demand (the plain store, the index) answers alike: records are
    found one by one where their logs must be, and no title is kept warm (every title read reads).
    Each store walks with the functions above itself; every log either reads (a title, a surface,
    the index's bounded conversation) goes through :meth:`replay`, the one place a test counts
    replays."""

    root: str
    skips: Skips
    _walking: Walk | None = None
    _walked = 0

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.root!r})"

    def replay(
        self,
        session_id: str,
        artifact: Artifact,
        keep_surface: bool | SurfaceKeeper,
        stop: AbortSignal | None,
        *,
        discovery: bool = False,
    ) -> tuple[dict[str, Any], ReplayResult]:
        """:func:`replay` of a log of this store's root."""
        return replay(self.root, session_id, artifact, keep_surface, stop, discovery=discovery)

    def read_title(self, record: SessionRecord, stop: AbortSignal | None) -> TitleObservation:
        """``readTitleSnapshots`` for one listed record: the last ``session/title`` of its log, or
        why the log could not be read."""
        try:
            artifact = artifact_of(self.root, record, stop, self.skips)
            _, result = self.replay(js_normalize(record.id), artifact, False, stop, discovery=True)
        except StoreError as error:
            return TitleObservation(record.id, error=error.message)
        return observed_title(record.id, result.title)

    @property
    def walked_sessions(self) -> int:
        """Session directories the latest full walk has looked at so far (progress). A walk after
        one that ended (a revalidation behind the requests) counts from that one's total, so the
        figure a person reads never goes back: a popup row said "1,316 read", then "1,038 read"."""
        walking = self._walking
        return self._walked if walking is None else max(self._walked, walking.sessions)

    def find_record(self, session_id: str, stop: AbortSignal | None = None) -> SessionRecord | None:
        raise NotImplementedError

    def locate(self, session_id: str, stop: AbortSignal | None) -> Artifact:
        raise NotImplementedError

    def find_records(
        self, session_ids: Iterable[str], stop: AbortSignal | None = None
    ) -> dict[str, SessionRecord]:
        """Each id's record, found alone: a lookup costs the same in a root of 50,000 as of 50."""
        found = {session_id: self.find_record(session_id, stop) for session_id in session_ids}
        return {
            session_id: record for session_id, record in found.items() if record and record.id == session_id
        }

    def read_titles(
        self, records: Sequence[SessionRecord], stop: AbortSignal | None = None
    ) -> list[TitleObservation]:
        """The latest ``session/title`` of each record's log; a log that fails to read gives an error."""
        seen: dict[str, TitleObservation] = {}
        for record in records:
            check(stop)
            if record.id not in seen:
                seen[record.id] = self.read_title(record, stop)
        return [seen[record.id] for record in records]

    def read_surface(self, session_id: str, stop: AbortSignal | None = None) -> SurfaceSnapshot:
        """``readSurface``: the header, ``capturedThroughSeq`` and the current surface events of the
        log :meth:`locate` finds."""
        session_id = js_normalize(session_id)  # JS sees a surrogate pair as the one character it spells
        artifact = self.locate(session_id, stop)
        header, result = self.replay(session_id, artifact, True, stop)
        return SurfaceSnapshot(
            session=record_at(artifact.path, header),
            captured_through_seq=result.captured_through_seq,
            events=result.surface,
        )

    def warm_listing(self, since: int | None, stop: AbortSignal | None = None) -> WarmListing | None:
        """No listing is kept warm: every listing walks, every title read reads."""
        return None

    def titles_since(
        self, version: int, stop: AbortSignal | None = None
    ) -> tuple[int, dict[str, TitleObservation]]:
        return version, {}


class JsonlSessionStore(ReadsOnDemand):
    """Read-only view of a dsh sessions root (``None``: ``$DSH_HOME/sessions`` or ``~/.dsh/sessions``)
    that reads every log afresh: the CLI's ``--no-index``, and the differential suite's subject.

    Thread-safe: every call reads the disk afresh, so the resolver can run several reads at once
    and always sees the logs as they are now.
    """

    def __init__(self, root: str | os.PathLike[str] | None = None) -> None:
        self.root = resolve_root(root)
        self.skips = Skips()

    def list_sessions(self, stop: AbortSignal | None = None) -> list[SessionRecord]:
        """Every readable-header session, newest first, ties by ICU ``localeCompare`` of ids."""
        walk = self._walking = Walk(self.skips)
        try:
            return walk_root(self.root, walk, None, stop).listing()
        finally:
            self._walked, self._walking = walk.sessions, None

    def find_record(self, session_id: str, stop: AbortSignal | None = None) -> SessionRecord | None:
        """The record :meth:`list_sessions` lists for ``session_id``, or ``None``, found by walking
        only that id's directory (:func:`named_segment`)."""
        session_id = js_normalize(session_id)
        segment = named_segment(self.root, session_id)
        if segment is None:
            return None
        return record_named(walk_root(self.root, Walk(self.skips), segment, stop), session_id)

    def locate(self, session_id: str, stop: AbortSignal | None) -> Artifact:
        """The log of ``session_id``, else upstream's failure."""
        segment = lookup_segment(self.root, session_id)
        return walk_root(self.root, Walk(self.skips), segment, stop).artifact(session_id)

    def read_conversation(
        self, session_id: str, read: ConversationRead, stop: AbortSignal | None = None
    ) -> None:
        """Surfaces only: ``prepare`` over this store retains from :meth:`read_surface`, upstream's way."""
        return None

    def search_bodies(self, query: str, records: Sequence[SessionRecord], limit: int) -> None:
        """No message text is indexed here."""
        return None
