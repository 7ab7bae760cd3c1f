"""The completion feature: ``textDocument/completion`` after an ``@`` and ``completionItem/resolve``,
owning the completions in flight and the listing a slow answer left running."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence
from typing import Any, ClassVar, Final, NamedTuple

from lsprotocol import types

from ...assembly import start_over
from ...cancellation import AbortSignal
from ...errors import CANCELLED, SessionReferenceError
from ...resolver import Candidate
from ..completion import completion_items, find_trigger, item_data, listing_item
from ..contract import Feature, Handler, Services
from ..hover import documentation, read_session_facts, session_summary
from ..progress import list_with_progress, titles_with_progress

LOG = logging.getLogger(__name__)

COMPLETION_PATIENCE: Final = 0.1
"""Seconds a completion waits for the session list before it answers with a single "Listing dsh
sessions…" row (:func:`..completion.listing_item`): a fresh server over a big root lists for a
second or more, and a popup that stays shut meanwhile reads as nothing happening. The listing goes
on; the next ask waits on it rather than start another. Warm answers take a few milliseconds."""
MEMORY_PATIENCE: Final = 1.0
"""Seconds a completion waits in all while the sessions are listed from memory (the listing the
last server left, being read or read, with its titles: :meth:`..model.LiveSource.from_memory`)
rather than by a walk of the root: what is left is a bounded read and the claimed titles of the
first rows, so the first answer over the index a server left holds the sessions, where the
"Listing" row would have cost a retry (the VS Code extension asks again after 250 ms). Not over a
root this server walked itself with no titles kept: hinting them from the logs took over this
second in a starting editor, which showed nothing meanwhile."""


class Running(NamedTuple):
    """A completion's candidates being found: for which query, how to stop them, and the work."""

    query: str
    signal: AbortSignal
    work: asyncio.Future[list[Candidate] | None]


def now_ms() -> int:
    return int(time.time() * 1000)


class Completion(Feature):
    """``@`` completion over ``listCandidates``; a newer completion of a document supersedes
    (aborts) the older one."""

    uses: ClassVar = frozenset(
        {
            "documents",
            "encoding",
            "engine",
            "store",
            "agent_for",
            "capability",
            "markdown",
            "completion_columns",
            "window_log_message",
            "spawn",
        }
    )

    def __init__(self, ls: Services) -> None:
        super().__init__(ls)
        self.running: dict[str, Running] = {}
        """The candidates in flight per document: joined by a completion for the same query,
        stopped when one for another query starts (:meth:`_start`)."""
        self.pending_listing: asyncio.Future[Any] | None = None
        """A completion's listing still running after its answer went out (see
        :data:`COMPLETION_PATIENCE`)."""
        self.listing_awaited = asyncio.Event()
        """Set when a completion answered "Listing dsh sessions…": the listing's progress shows at once."""
        self.warming = False
        """While :meth:`warm_up`'s listing runs: its progress goes on through a completion's titles."""

    def handlers(self) -> Sequence[Handler]:
        options = types.CompletionOptions(trigger_characters=["@"], resolve_provider=True)
        return (
            Handler(types.TEXT_DOCUMENT_COMPLETION, self.completion, options, reads_store=True),
            Handler(types.COMPLETION_ITEM_RESOLVE, self.resolve, reads_store=True),
        )

    def reset(self) -> None:
        # Listed under the old settings (maybe a stalled old root): the next ask joins none of it.
        self.pending_listing = None
        for running in self.running.values():
            running.signal.abort("superseded")
        self.running.clear()

    async def warm_up(self) -> None:
        """List the root and find the target before the first ``@``: a big root over a cold index
        takes seconds to list, which would otherwise be spent while the user waits for a popup
        (a request that arrives meanwhile shares this listing rather than starting its own)."""
        source = self.ls.engine.store
        self.warming = True
        try:
            try:
                await list_with_progress(self.ls, source, self.listing_awaited, lambda: self.pending_listing)
            finally:
                self.warming = False
            self.listing_awaited.clear()
            await self.ls.agent_for(None)
        except Exception as error:  # the first request meets the same problem and reports it
            LOG.info("listing the sessions root ahead of requests failed: %s", error)

    def stop(self) -> None:
        for running in self.running.values():
            running.signal.abort("shutdown")

    async def completion(self, params: types.CompletionParams) -> types.CompletionList:
        answer = await self._complete(params)
        if answer.items:
            # The answer to an `@` ends the server's start (the store's background work waited for
            # it), once pygls has written it: its done callback is queued as this returns, and the
            # inner call_soon runs after it.
            loop = asyncio.get_running_loop()
            loop.call_soon(loop.call_soon, start_over, self.ls.store)
        return answer

    async def _complete(self, params: types.CompletionParams) -> types.CompletionList:
        ls = self.ls
        uri = params.text_document.uri
        document = ls.documents.get(uri)
        empty = types.CompletionList(is_incomplete=False, items=[])
        if document is None:
            return empty
        cursor = document.index.offset_at(params.position, ls.encoding)
        continuing = (
            params.context is not None
            and params.context.trigger_kind == types.CompletionTriggerKind.TriggerForIncompleteCompletions
        )
        trigger = find_trigger(document.index, cursor, continuing=continuing)
        if trigger is None:
            return empty
        edit_range = document.index.range_of(trigger.at, trigger.cursor, ls.encoding)
        typed = document.index[trigger.at : trigger.cursor]

        def listing() -> types.CompletionList:
            self.listing_awaited.set()
            row = listing_item(edit_range, typed, ls.store.walked_sessions)
            return types.CompletionList(is_incomplete=True, items=[row])

        # An earlier answer's listing still running (a cold root): wait on it, not beside it.
        pending = self.pending_listing
        if pending is not None and not pending.done() and not await self._patient(pending):
            return listing()
        running = self._start(uri, trigger.query)
        if not await self._patient(running):
            self.pending_listing = running
            if not self.warming:  # its progress ended with the walk, or there was none
                self.ls.spawn(titles_with_progress(ls, ls.store, running))
            return listing()
        items = completion_items(
            running.result() or [],  # none when it failed or was superseded
            edit_range,
            now_ms=now_ms(),
            label_details=bool(
                ls.capability("text_document.completion.completion_item.label_details_support")
            ),
            typed=typed,
            filter_text=bool(
                ls.capability("text_document.completion.completion_item.insert_replace_support")
            ),
            row_columns=ls.completion_columns(),
        )
        return types.CompletionList(is_incomplete=True, items=items)

    async def _patient(self, work: asyncio.Future[Any]) -> bool:
        """Whether ``work`` (a completion's candidates) ended within :data:`COMPLETION_PATIENCE`, or
        within :data:`MEMORY_PATIENCE` while the sessions are listed from memory, looked at again
        every :data:`COMPLETION_PATIENCE` (a listing the last server left that turns out not to be
        served, a small or cold root, is walked: the "Listing" row then goes out at once)."""
        deadline = time.monotonic() + MEMORY_PATIENCE
        done, _ = await asyncio.wait({work}, timeout=COMPLETION_PATIENCE)
        while not done and (left := deadline - time.monotonic()) > 0 and self.ls.store.from_memory():
            done, _ = await asyncio.wait({work}, timeout=min(left, COMPLETION_PATIENCE))
        return bool(done)

    async def _candidates(self, uri: str, query: str, signal: AbortSignal) -> list[Candidate] | None:
        """``listCandidates`` for a completion in ``uri``; ``None`` when it failed (said in the log) or
        a newer completion superseded it. Never raises: its answer may be nobody's (see
        :data:`COMPLETION_PATIENCE`)."""
        try:
            agent = await self.ls.agent_for(uri)
            return await self.ls.engine.resolver.list_candidates(agent, query, signal=signal)
        except Exception as error:  # an unreadable root: no rows, and say why in the log
            if not (isinstance(error, SessionReferenceError) and error.code == CANCELLED):
                self.ls.window_log_message(
                    types.LogMessageParams(type=types.MessageType.Warning, message=f"completion: {error}")
                )
            return None
        finally:
            self._end(uri, signal)

    def _start(self, uri: str, query: str) -> asyncio.Future[list[Candidate] | None]:
        """The candidates for ``query`` in ``uri``. Those still being found for the same query are
        joined: the editor asks again for the popup it has open (VS Code, as a client starts,
        cancelled three asks of one `@` in a row on a cold root, and each began the work again on
        cores its start kept busy). Those for another query are superseded (aborted)."""
        previous = self.running.get(uri)
        if previous is not None:
            if previous.query == query and not previous.work.done():
                return previous.work
            previous.signal.abort("superseded")
        signal = AbortSignal()
        work = asyncio.ensure_future(self._candidates(uri, query, signal))
        self.running[uri] = Running(query, signal, work)
        return work

    def _end(self, uri: str, signal: AbortSignal) -> None:
        running = self.running.get(uri)
        if running is not None and running.signal is signal:
            del self.running[uri]

    async def resolve(self, item: types.CompletionItem) -> types.CompletionItem:
        data = item_data(item)
        if data is None:
            return item
        facts = await read_session_facts(self.ls.engine.resolver, *data)
        markdown = self.ls.markdown("text_document.completion.completion_item.documentation_format")
        summary = session_summary(facts, markdown=markdown, now_ms=now_ms(), id_last=True)
        item.documentation = documentation(summary, markdown)
        return item
