"""``SessionReferenceResolver``: ``list_candidates`` and ``prepare``, orchestration only.

All I/O goes through a :class:`~dsh_session_reference.model.SessionSource`,
run in worker threads so an event loop (the language server's) never blocks.
Cancellation works two ways, both ending in ``SESSION_REFERENCE_CANCELLED``:
an :class:`AbortSignal` (upstream's ``signal``), or cancelling the awaiting
task; either one sets the stop event the store checks between chunks.

Body search is an option of the resolver, not a kind of it: with ``body_search`` on, an ``@``
query also matches what was said in a session. Upstream's candidate discovery matches ids, cwds
and titles only, and the seed keeps that the default. With it on (the ``bodySearch`` setting,
``--body-search`` on the CLI) the candidates upstream would give come first, unchanged, and
sessions whose message text matches follow, as :class:`BodyCandidate` rows that say they matched
in the messages and show where. The store indexes the text (SQLite FTS5 beside the title index,
word-prefix matching), so a query never reads logs.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from .cancellation import AbortSignal, Cancelled
from .candidate_cache import CandidateCache
from .candidates import CandidateTable, Row, label_for
from .config import ResolverConfig, is_positive_safe_integer, resolver_config
from .errors import (
    BUDGET_EXCEEDED,
    INVALID_REFERENCE,
    READ_FAILED,
    SELF_REFERENCE,
    TOO_MANY,
    SessionReferenceError,
    cancelled,
)
from .jsjson import js_lower, js_normalize, js_stringify
from .model import (
    ConversationSnapshot,
    SessionRecord,
    SessionSource,
    SurfaceSnapshot,
    TitleObservation,
    kept_text,
)
from .retention import RetainedSource, retain_referenced_session
from .snapshot import AdditionalContext, build_additional_context
from .uri import SessionReference, format_session_reference_mention

T = TypeVar("T")


@dataclass(frozen=True)
class AgentRef:
    """The session a message is being written for: excluded as self, its cwd ranks candidates.

    ``id=None`` (an extension for editors with no target session) excludes nothing.
    """

    id: str | None
    cwd: str | None = None

    def __post_init__(self) -> None:
        # Compared with listed cwds, which are kept bounded: a long cwd as they keep it.
        if self.cwd is not None:
            object.__setattr__(self, "cwd", kept_text(self.cwd))


@dataclass(frozen=True)
class Candidate:
    """One ``listCandidates`` entry."""

    session_id: str
    label: str
    cwd: str | None
    created_at: int

    @property
    def mention(self) -> str:
        """The canonical mention a host inserts (upstream's remote ``candidates`` face)."""
        return format_session_reference_mention(self.session_id, self.label)

    def to_json(self) -> dict[str, Any]:
        """Upstream's shape: the ``cwd`` key is absent, not null, for a cwd-less session."""
        out: dict[str, Any] = {"sessionId": self.session_id, "label": self.label}
        if self.cwd is not None:
            out["cwd"] = self.cwd
        out["createdAt"] = self.created_at
        return out


@dataclass(frozen=True)
class BodyCandidate(Candidate):
    """A candidate found in message text rather than by id, cwd or title."""

    snippet: str = ""
    matched: str = ""
    """The query it matched (editors filter on it: the row's label need not contain it)."""

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "match": "body", "snippet": self.snippet}


@dataclass(frozen=True)
class PreparedMessage:
    """``prepare``'s result: the detached content and zero or one context message."""

    content: list[Any]
    additional_context: AdditionalContext | None = None


def normalize_references(
    target_id: str | None, references: Sequence[object], max_references: int
) -> list[SessionReference]:
    """Validate in input order, self check before dedupe, first mention wins, then the limit.

    Ids are compared as JS compares them, as UTF-16 strings: a surrogate pair
    spelled as two code points is the same id as the astral character.
    """
    normalized: dict[str, SessionReference] = {}
    target_id = None if target_id is None else js_normalize(target_id)
    for candidate in references:
        session_id, label = _reference_fields(candidate)
        session_id = js_normalize(session_id)
        label = None if label is None else js_normalize(label)
        if target_id is not None and session_id == target_id:
            raise SessionReferenceError(
                f"session {js_stringify(target_id)} cannot reference itself", SELF_REFERENCE
            )
        if session_id not in normalized:
            normalized[session_id] = SessionReference(session_id, session_id if label is None else label)
    if len(normalized) > max_references:
        raise SessionReferenceError(f"a message may reference at most {max_references} sessions", TOO_MANY)
    return list(normalized.values())


_SHAPE = "session reference must contain a string sessionId and optional string label"


def _reference_fields(candidate: object) -> tuple[str, str | None]:
    """Upstream's runtime checks on one item, with JS types mapped: a dict or a list is
    an object (a list has no ``sessionId``), ``None`` is ``null``, a missing key is ``undefined``."""
    if isinstance(candidate, SessionReference):
        fields: Mapping[str, object] = candidate.to_json()
    elif isinstance(candidate, Mapping):
        fields = candidate
    elif isinstance(candidate, list | tuple):
        fields = {}
    else:
        raise SessionReferenceError("session reference must be an object", INVALID_REFERENCE)
    session_id = fields.get("sessionId")
    label = fields.get("label", _MISSING)
    if not isinstance(session_id, str) or (label is not _MISSING and not isinstance(label, str)):
        raise SessionReferenceError(_SHAPE, INVALID_REFERENCE)
    return session_id, None if label is _MISSING else str(label)


_MISSING = object()


class SessionReferenceResolver:
    """Upstream's resolver over any :class:`SessionSource`, with body search as an option."""

    def __init__(
        self,
        query: SessionSource,
        *,
        max_references: object = None,
        candidate_limit: object = None,
        max_reference_bytes: object = None,
        body_search: bool = False,
    ) -> None:
        self.query = query
        self.candidates = CandidateCache()
        """The table ``list_candidates`` queries over a store that keeps its titles warm."""
        self.config: ResolverConfig = resolver_config(max_references, candidate_limit, max_reference_bytes)
        self.body_search = body_search
        """Whether a query also matches message text, after the upstream-exact candidates."""

    async def list_candidates(
        self,
        agent: AgentRef,
        query: str = "",
        limit: object = None,
        signal: AbortSignal | None = None,
    ) -> list[Candidate]:
        """Other sessions ranked same cwd, no cwd, other cwd; ``query`` filters id, cwd and title."""
        chosen = self.config.candidate_limit if limit is None else limit
        if not is_positive_safe_integer(chosen):
            raise SessionReferenceError("candidate limit must be a positive safe integer", INVALID_REFERENCE)
        cap = int(chosen)
        needle = js_lower(js_normalize(query))
        self_id = None if agent.id is None else js_normalize(agent.id)
        _assert_not_cancelled(signal)
        source = self.query

        def select(stop: AbortSignal) -> list[Row]:
            # A store that keeps its listing and titles warm answers from the one kept table.
            version = source.titles_version()
            if version is None:
                table = self._listing_table(needle, self_id, agent.cwd, cap, stop)
            else:
                table = self.candidates.table(source, version, stop, agent.cwd)
            stop.check()
            return table.select(needle, self_id, agent.cwd, cap, stop)

        rows = await run_blocking(select, signal)
        found = [Candidate(row.record.id, row.label, row.record.cwd, row.record.created_at) for row in rows]
        if self.body_search and query.strip() != "" and len(found) < cap:
            found += await self._body_matches(query, self_id, found, cap - len(found), signal)
        return found

    async def _body_matches(
        self, query: str, self_id: str | None, shown: list[Candidate], room: int, signal: AbortSignal | None
    ) -> list[Candidate]:
        """Up to ``room`` other sessions whose message text matches ``query`` and that are not
        ``shown`` already, best first; none where the store indexes no message text."""
        source = self.query
        taken = {candidate.session_id for candidate in shown}
        records = await run_blocking(lambda stop: source.list_sessions(stop), signal)
        others = [record for record in records if record.id != self_id and record.id not in taken]
        matches = await asyncio.to_thread(source.search_bodies, query, others, room)
        if not matches:
            return []
        titles = await run_blocking(
            lambda stop: source.read_titles([match.record for match in matches], stop), signal
        )
        return [
            BodyCandidate(
                match.record.id,
                label_for(match.record, seen),
                match.record.cwd,
                match.record.created_at,
                match.snippet,
                query,
            )
            for match, seen in zip(matches, titles, strict=True)
        ]

    def _listing_table(
        self, needle: str, self_id: str | None, target_cwd: str | None, cap: int, stop: AbortSignal
    ) -> CandidateTable:
        """Upstream's path: list, then read titles of every other session for a query, or of
        only the ``cap`` best ranked ones for an empty query (labels do not affect that order)."""
        chosen = [record for record in self.query.list_sessions(stop) if record.id != self_id]
        if needle == "":
            unlabelled = CandidateTable([Row(record, record.id) for record in chosen])
            chosen = [row.record for row in unlabelled.select("", None, target_cwd, cap)]
        observations = self.query.read_titles(chosen, stop)
        return CandidateTable(
            [Row(record, label_for(record, seen)) for record, seen in zip(chosen, observations, strict=True)]
        )

    async def prepare(
        self,
        agent: AgentRef,
        content: Sequence[Any],
        references: Sequence[object],
        signal: AbortSignal | None = None,
    ) -> PreparedMessage:
        """Snapshot every referenced session, all or nothing, into one context message."""
        accepted = copy.deepcopy(list(content))
        inputs = normalize_references(agent.id, references, self.config.max_references)
        if not inputs:
            return PreparedMessage(accepted)
        _assert_not_cancelled(signal)
        snapshots = await self.read_sources(inputs, signal)
        _assert_not_cancelled(signal)
        rendered = await asyncio.to_thread(self.render_sources, inputs, snapshots)
        return PreparedMessage(accepted, build_additional_context(rendered))

    async def read_sources(
        self, inputs: Sequence[SessionReference], signal: AbortSignal | None = None
    ) -> list[SurfaceSnapshot | ConversationSnapshot]:
        """``readSurface`` for every input in parallel; the first failure fails them all.

        A source that reads a bounded conversation (``read_conversation``, as the index does)
        gives that instead, for this resolver's byte budget: the result renders identically, and
        a huge log is never held.
        """
        stop = AbortSignal()
        budget = self.config.max_reference_bytes
        source = self.query

        def read(session_id: str) -> SurfaceSnapshot | ConversationSnapshot:
            conversation = source.read_conversation(session_id, budget, stop)
            return source.read_surface(session_id, stop) if conversation is None else conversation

        try:
            return await _race(
                asyncio.gather(*(asyncio.to_thread(read, reference.session_id) for reference in inputs)),
                signal,
                stop,
            )
        except SessionReferenceError:
            raise
        except Exception as error:  # ``_race`` has set ``stop`` already
            if signal is not None and signal.aborted:
                raise cancelled(error) from error
            message = getattr(error, "message", None)
            raise SessionReferenceError(
                f"failed to read referenced session: {message if isinstance(message, str) else error}",
                READ_FAILED,
                error,
            ) from error

    def render_sources(
        self,
        inputs: Sequence[SessionReference],
        snapshots: Sequence[SurfaceSnapshot | ConversationSnapshot],
    ) -> list[RetainedSource]:
        """Retention per source, in reference order; any source that cannot fit fails the message."""
        rendered: list[RetainedSource] = []
        budget = self.config.max_reference_bytes
        for reference, snapshot in zip(inputs, snapshots, strict=True):
            label = reference.session_id if reference.label is None else reference.label
            retained = retain_referenced_session(snapshot, label, budget)
            if retained is None:
                raise SessionReferenceError(
                    "referenced session snapshot cannot fit the configured byte budget", BUDGET_EXCEEDED
                )
            rendered.append(retained)
        return rendered


def _assert_not_cancelled(signal: AbortSignal | None) -> None:
    if signal is not None and signal.aborted:
        raise cancelled()


async def run_blocking(work: Callable[[AbortSignal], T], signal: AbortSignal | None) -> T:
    """Run one blocking store call in a thread, raced against ``signal`` (``work`` gets the stop
    signal the store checks)."""
    stop = AbortSignal()
    return await _race(asyncio.to_thread(_unless_stopped, work, stop), signal, stop)


def _unless_stopped(work: Callable[[AbortSignal], T], stop: AbortSignal) -> T:
    """``work(stop)``, unless ``stop`` was aborted while the work waited for a thread (a storm of
    cancelled requests queues many)."""
    stop.check()
    return work(stop)


def _retrieve(task: asyncio.Future[Any]) -> None:
    """Mark a finished task's outcome as seen, so asyncio does not log it as never retrieved."""
    if not task.cancelled():
        task.exception()


async def _race(work: Awaitable[T], signal: AbortSignal | None, stop: AbortSignal) -> T:
    """``settleWithCancellation``: whichever of the work and the abort comes first.

    The store's ``stop`` event is set however this ends (harmless once the work
    is done), so on abort or task cancellation the worker thread stops at its
    next check instead of reading on.
    """
    task = asyncio.ensure_future(work)
    # Abandoned work may still end in an error (a read cut short): nobody waits for it then.
    task.add_done_callback(_retrieve)
    if signal is None:
        try:
            return await task
        except Cancelled as error:
            raise cancelled(error) from error
        finally:
            stop.abort()
            if not task.done():
                task.cancel()
    loop = asyncio.get_running_loop()
    aborted = loop.create_future()

    def settle() -> None:
        if not aborted.done():
            aborted.set_result(None)

    unsubscribe = signal.subscribe(lambda: loop.call_soon_threadsafe(settle))
    try:
        await asyncio.wait({task, aborted}, return_when=asyncio.FIRST_COMPLETED)
        if signal.aborted:
            raise cancelled()
        try:
            return task.result()
        except Cancelled as error:
            raise cancelled(error) from error
    finally:
        unsubscribe()
        stop.abort()
        task.cancel()  # no-ops once done
        aborted.cancel()


async def find_session(query: SessionSource, session_id: str) -> SessionRecord | None:
    """The listed record for ``session_id`` (compared as JS strings), or ``None``."""
    wanted = js_normalize(session_id)
    return (await asyncio.to_thread(query.find_records, {wanted})).get(wanted)


async def find_titled(query: SessionSource, session_id: str) -> tuple[SessionRecord, TitleObservation] | None:
    """The listed record for ``session_id`` with its title as the store last read it, or ``None``
    (what a label, a status bar or a transcript shows of one session)."""
    record = await find_session(query, session_id)
    if record is None:
        return None
    [seen] = await asyncio.to_thread(query.read_titles, [record])
    return record, seen


async def agent_for_target(query: SessionSource, target_id: str | None, fallback_cwd: str | None) -> AgentRef:
    """The ``AgentRef`` a message is written for: the target's own cwd when the store
    knows the target, else ``fallback_cwd``. Without a target nothing is excluded as self."""
    if not target_id:
        return AgentRef(None, fallback_cwd)
    record = await find_session(query, target_id)
    return AgentRef(target_id, fallback_cwd if record is None else record.cwd)
