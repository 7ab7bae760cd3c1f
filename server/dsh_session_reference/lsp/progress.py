"""Long work shown as LSP work-done progress: a cold listing, title verification, indexing.

The LSP side of :meth:`..model.LiveSource.background_work`; nothing here is shown in a
client that does not offer ``window.workDoneProgress``, or for work shorter than
:data:`PROGRESS_AFTER`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Final, Protocol

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.progress import Progress

from ..logsetup import progress_after
from ..model import INDEXING_BODIES, LiveSource

LOG = logging.getLogger(__name__)

CLIENT_REQUEST_TIMEOUT: Final = 10.0
"""Seconds the server waits for the client to answer one of its requests."""
PROGRESS_AFTER: Final = progress_after()
"""Work shorter than this shows no progress (see :func:`..logsetup.progress_after`)."""
PROGRESS_EVERY: Final = 0.25
"""Seconds between progress reports."""


class ProgressHost(Protocol):
    """What progress needs of the server (:class:`.server.DshLanguageServer`)."""

    @property
    def work_done_progress(self) -> Progress: ...

    @property
    def store(self) -> LiveSource: ...

    def capability(self, path: str, default: Any = None) -> Any: ...


async def follow_background(ls: ProgressHost) -> None:
    """Show the session store's background work (title verification, message-text
    indexing; see ``LiveSource.background_work``) as work-done progress once it has
    run for :data:`PROGRESS_AFTER`: one progress per kind of work, reporting the logs left,
    ended when that work is done. Indexing message text is cancellable: it stops, and body
    search answers from what was indexed until the setting is turned on again. Runs until
    shutdown cancels it."""
    if not ls.capability("window.work_done_progress", False):
        return
    shown: tuple[str, str] | None = None  # (token, title) of the progress on screen
    started: tuple[str, float] | None = None  # (title, when first seen) of the work under way
    while True:
        await asyncio.sleep(PROGRESS_EVERY)
        store = ls.store
        if shown is not None and shown[1] == INDEXING_BODIES:
            cancel = ls.work_done_progress.tokens.get(shown[0])
            if cancel is not None and cancel.cancelled():
                store.stop_bodies()
                stopped = "stopped: body search answers from the logs indexed so far"
                ls.work_done_progress.end(shown[0], types.WorkDoneProgressEnd(message=stopped))
                shown = None
        work = store.background_work()
        if shown is not None and (work is None or shown[1] != work[0]):
            ls.work_done_progress.end(shown[0], types.WorkDoneProgressEnd(message="done"))
            shown = None
        if work is None:
            started = None
            continue
        title, message = work[0], f"{work[1]:,} logs to go"
        if shown is not None:
            ls.work_done_progress.report(shown[0], types.WorkDoneProgressReport(message=message))
            continue
        if started is None or started[0] != title:
            started = (title, time.monotonic())
        if time.monotonic() - started[1] < PROGRESS_AFTER:
            continue
        token = await _progress_token(ls)
        if token is None:
            return
        cancellable = title == INDEXING_BODIES  # titles are needed; body search can wait
        begin = types.WorkDoneProgressBegin(title=title, message=message, cancellable=cancellable)
        ls.work_done_progress.begin(token, begin)
        shown = (token, title)


async def _progress_token(ls: ProgressHost) -> str | None:
    """A new work-done progress token the client has accepted, or ``None`` (it refused or
    did not answer in time: the work goes on without progress)."""
    token = f"dsh-{uuid.uuid4()}"
    try:
        await asyncio.wait_for(ls.work_done_progress.create_async(token), CLIENT_REQUEST_TIMEOUT)
    except (JsonRpcException, TimeoutError) as error:
        LOG.info("no progress shown: %s", error)
        return None
    return token


async def list_with_progress(
    ls: ProgressHost,
    store: LiveSource,
    waiting: asyncio.Event | None = None,
    then: Callable[[], asyncio.Future[Any] | None] | None = None,
) -> None:
    """List ``store``; if that takes longer than :data:`PROGRESS_AFTER`, or someone is ``waiting``
    for it (a completion answered "Listing dsh sessions…"), show it as work-done progress (begin,
    a report every :data:`PROGRESS_EVERY`, end) in clients that support it, so a cold root of
    thousands of logs is seen to be read, not taken for a hang (VS Code shows window progress
    150 ms after it begins: a popup waiting on the listing has it in the status bar within 0.5 s).
    Once shown, it stays while the future ``then`` gives is running: the completion still waiting
    after the listing, on the titles of the sessions it ranks (its popup still says "Listing")."""
    work = asyncio.ensure_future(asyncio.to_thread(store.list_sessions))
    watched: set[asyncio.Future[Any]] = {work}
    wanted = None if waiting is None else asyncio.ensure_future(waiting.wait())
    if wanted is not None:
        watched.add(wanted)
    try:
        await asyncio.wait(watched, timeout=PROGRESS_AFTER, return_when=asyncio.FIRST_COMPLETED)
    finally:
        if wanted is not None:
            wanted.cancel()
    shown = not work.done() and ls.capability("window.work_done_progress", False)
    token = await _progress_token(ls) if shown else None
    if token is not None:
        progress = ls.work_done_progress
        progress.begin(token, types.WorkDoneProgressBegin(title=LISTING_TITLE, message=_read(store)))
        try:
            while not work.done():
                await asyncio.wait({work}, timeout=PROGRESS_EVERY)
                if not work.done():
                    progress.report(token, types.WorkDoneProgressReport(message=_read(store)))
            following = None if then is None else then()
            if following is not None and not following.done():
                progress.report(token, types.WorkDoneProgressReport(message=_read(store, titles=True)))
                await asyncio.wait({following})
        finally:
            progress.end(token, types.WorkDoneProgressEnd(message=_read(store)))
    await work


async def titles_with_progress(ls: ProgressHost, store: LiveSource, titles: asyncio.Future[Any]) -> None:
    """A completion answered "Listing dsh sessions…" once the root's walk was over (:func:`list_with_progress`
    ran ahead of it from the server's start, its progress ended with the walk), while the titles of
    the sessions it ranks are still being read: the same progress, at once, until ``titles`` is
    done, so the popup's row never waits without it in the status bar. A client that starts the
    server before its editor is up (the VS Code extension does) sends ``initialize`` early enough
    for the walk of a big cold root to be over by the first ``@``."""
    if titles.done() or not ls.capability("window.work_done_progress", False):
        return
    token = await _progress_token(ls)
    if token is None:
        return
    progress = ls.work_done_progress
    progress.begin(token, types.WorkDoneProgressBegin(title=LISTING_TITLE, message=_read(store, titles=True)))
    try:
        await asyncio.wait({titles})
    finally:
        progress.end(token, types.WorkDoneProgressEnd(message=_read(store)))


LISTING_TITLE: Final = "Listing dsh sessions"
"""The title of a listing's progress (the popup's row says the same)."""


def _read(store: LiveSource, *, titles: bool = False) -> str:
    """A listing's progress message: the sessions walked so far, and whether titles are being read."""
    read = f"{store.walked_sessions:,} sessions read"
    return f"{read}; reading titles" if titles else read
