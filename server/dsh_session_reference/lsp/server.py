"""The pygls server: wiring, settings and lifecycle; every feature is a function elsewhere in this package.

Threads and the event loop: documents, positions and scans of small texts run
on the loop; store reads, big scans and retention run in worker threads (the
resolver and :func:`.analysis.analyze` move them there), so one slow disk or a
10 MB document never stalls typing. One analysis per document version is
shared by diagnostics, hover, code actions and the status summary; a newer
version cancels the older analysis, a newer completion cancels the older
completion, and ``$/cancelRequest`` cancels requests and commands alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

from lsprotocol import types
from pygls.capabilities import ServerCapabilitiesBuilder, get_capability
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.uris import to_fs_path

from .. import __version__
from ..analysis import Analysis, AnalysisCancelled, analyze
from ..assembly import make_resolver, open_source, sessions_root, target_session
from ..candidates import label_for
from ..errors import CANCELLED, SessionReferenceError
from ..jsjson import read_text
from ..lines import Encoding
from ..logsetup import progress_after
from ..resolver import AbortSignal, AgentRef, find_session
from ..store.catalog import INDEXING_BODIES, SessionCatalog
from ..store.layout import root_origin, root_problem
from . import transport
from .actions import code_actions
from .completion import candidate_json, completion_items, find_trigger, item_data
from .diagnostics import to_diagnostics
from .documents import Document, DocumentStore
from .hover import documentation, hover_text, read_session_facts, session_summary
from .idle_gc import IdleCollector
from .positions import LineIndex, encoding_of
from .preview import PREVIEW_SCHEME, Preview, build_preview, document_of_preview, document_summary
from .settings import SECTION, Settings, apply_settings

LOG = logging.getLogger(__name__)

NAME: Final = "dsh-session-reference"
PREVIEW_COMMAND: Final = "dshSessionReference.preview"
CANDIDATES_COMMAND: Final = "dshSessionReference.candidates"
SUMMARY_COMMAND: Final = "dshSessionReference.documentSummary"
DIAGNOSTIC_DELAY: Final = 0.12
"""Seconds of quiet after a change before pushed diagnostics are recomputed."""
CLIENT_REQUEST_TIMEOUT: Final = 10.0
UNOPENED_READ_TIMEOUT: Final = 10.0
"""Seconds a command may wait for a file that is not open (a stalled network mount, say)."""
PROGRESS_AFTER: Final = progress_after()
"""Work shorter than this shows no progress (see :func:`..logsetup.progress_after`)."""
PROGRESS_EVERY: Final = 0.25
"""Seconds between progress reports."""


class Engine:
    """One sessions root behind its cache, and a resolver with the current limits.

    A new engine for the same root (a limit changed) keeps the warm cache and
    the targets already found.
    """

    root: str
    source: SessionCatalog

    def __init__(self, root: str, settings: Settings, previous: Engine | None = None) -> None:
        same_root = previous is not None and previous.root == root
        self.root = root
        self.source = previous.source if previous is not None and same_root else open_source(root, live=True)
        self.targets: dict[str, AgentRef] = previous.targets if previous is not None and same_root else {}
        self.body_search = settings.body_search
        if settings.body_search and (previous is None or not previous.body_search):
            self.source.resume_bodies()  # turned on (again): indexing a user cancelled resumes
        self.resolver = make_resolver(self.source, settings.limits, body_search=settings.body_search)


@dataclass
class _AnalysisRun:
    text: str
    version: int | None
    generation: int
    task: asyncio.Task[Analysis]
    stop: threading.Event


@dataclass(frozen=True)
class Analysed:
    """An analysis with the index of the very text it analysed (offsets are into that text)."""

    document: Document
    analysis: Analysis
    version: int | None
    index: LineIndex

    @property
    def current(self) -> bool:
        """Whether the document still holds the analysed text."""
        return self.document.text is self.analysis.text or self.document.text == self.analysis.text


@dataclass(frozen=True)
class _InvalidMessage:
    """A request whose params did not fit the method's type: answered with InvalidParams."""

    id: int | str
    method: str
    jsonrpc: str
    error: JsonRpcException


class DshProtocol(LanguageServerProtocol):
    """pygls' protocol with the server's own documents, a safe shutdown and answered bad requests."""

    _server: DshLanguageServer

    @lsp_method(types.TEXT_DOCUMENT_DID_OPEN)
    def lsp_text_document__did_open(self, params: types.DidOpenTextDocumentParams) -> Iterator[Any]:
        self._server.documents.open(params.text_document)
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_OPEN)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CHANGE)
    def lsp_text_document__did_change(self, params: types.DidChangeTextDocumentParams) -> Iterator[Any]:
        document = params.text_document
        self._server.documents.change(
            document.uri, document.version, params.content_changes, self._server.encoding
        )
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CHANGE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.TEXT_DOCUMENT_DID_CLOSE)
    def lsp_text_document__did_close(self, params: types.DidCloseTextDocumentParams) -> Iterator[Any]:
        self._server.documents.close(params.text_document.uri)
        if (handler := self.fm.features.get(types.TEXT_DOCUMENT_DID_CLOSE)) is not None:
            yield handler, (params,), None

    @lsp_method(types.SHUTDOWN)
    def lsp_shutdown(self, *args: Any) -> Generator[Any, Any, None]:
        """pygls' shutdown, iterating over a copy of the in-flight requests (pygls#606)."""
        if (handler := self.fm.features.get(types.SHUTDOWN)) is not None:
            yield handler, args, None
        current = self.msg_id
        for msg_id, future in list(self._request_futures.items()):
            if msg_id != current and not future.done():
                future.cancel()
        self._shutdown = True
        return None

    def _execute_handler(
        self,
        msg_id: int | str,
        handler: Any,
        callback: Any,
        args: tuple[Any, ...] | None = None,
        kwargs: dict[str, Any] | None = None,
    ) -> None:
        super()._execute_handler(msg_id, handler, callback, args, kwargs)
        if isinstance(callback, functools.partial) and callback.func == self._send_handler_result:
            return  # a client request: answering it removes its entry
        # A notification, or a step of a built-in handler (didChange, executeCommand...): pygls 2.1
        # files it under a fresh id in ``_request_futures`` and never removes it, so every keystroke
        # and command would stay in memory for the whole session.
        future = self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(lambda _: self._request_futures.pop(msg_id, None))

    def _handle_cancel_notification(self, msg_id: int | str) -> None:
        if not isinstance(msg_id, (int, str)):
            # lsprotocol types the id loosely; a dict id would raise deep inside pygls' reader.
            LOG.warning("ignoring $/cancelRequest with an invalid id %r", msg_id)
            return
        # pygls cancels only the outer future of workspace/executeCommand; stop the command too.
        self._server.cancel_command(msg_id)
        if msg_id not in self._request_futures:
            # The answer went out before the cancel arrived: the normal race of a client that
            # cancels as you type. pygls logs it as a warning, which editors show as an error.
            LOG.debug("$/cancelRequest for %r, already answered", msg_id)
            return
        super()._handle_cancel_notification(msg_id)

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if "id" in data and isinstance(data.get("method"), str):
                return _InvalidMessage(data["id"], data["method"], "2.0", error)
            raise

    def handle_message(self, message: Any) -> None:
        self._server.touch()
        if isinstance(message, _InvalidMessage):
            reason = message.error.__cause__ or message.error
            LOG.warning("invalid params for %s (id %r): %s", message.method, message.id, reason)
            self._send_response(
                message.id,
                error=types.ResponseError(
                    code=types.ErrorCodes.InvalidParams,
                    message=f"invalid params for {message.method}: {reason}",
                ),
            )
            return
        method = getattr(message, "method", None)
        if self._shutdown and method not in (None, types.EXIT) and getattr(message, "id", None) is not None:
            # LSP: requests after shutdown error with InvalidRequest; pygls drops them unanswered,
            # which leaves the client waiting until its own timeout.
            self._send_response(
                message.id,
                error=types.ResponseError(
                    code=types.ErrorCodes.InvalidRequest, message=f"{method}: the server is shutting down"
                ),
            )
            return
        super().handle_message(message)


class DshLanguageServer(LanguageServer):
    """Server state: documents, settings, the engine, and the work in flight."""

    protocol: DshProtocol

    def __init__(self, sessions: str | None = None) -> None:
        super().__init__(NAME, __version__, protocol_cls=DshProtocol)
        self.sessions_fallback = sessions
        self.documents = DocumentStore()
        self.settings = Settings()
        self.encoding: Encoding = "utf-16"
        self.content_registered = False
        self._engine: Engine | None = None
        self._generation = 0
        self._analyses: dict[str, _AnalysisRun] = {}
        self._pending: dict[str, asyncio.Task[None]] = {}
        self._completions: dict[str, AbortSignal] = {}
        self._commands: dict[int | str, asyncio.Task[Any]] = {}
        self._previews: dict[str, str] = {}
        self._background: set[asyncio.Task[Any]] = set()
        self._warnings: list[str] = []
        self._root_reported: tuple[str, str] | None = None
        self.idle_gc = IdleCollector()

    def touch(self) -> None:
        """A message arrived: work that waits for an idle editor (full collections, the index's
        revalidation walk) waits a little longer."""
        self.idle_gc.touch()
        if self._engine is not None:
            self._engine.source.touch()

    # --- client capabilities -------------------------------------------------------------------

    def capability(self, path: str, default: Any = None) -> Any:
        return get_capability(self.client_capabilities, path, default)

    @property
    def pull_diagnostics(self) -> bool:
        """Esbonio's rule: push only to clients without ``textDocument/diagnostic``."""
        return self.capability("text_document.diagnostic") is not None

    @property
    def suggest_command(self) -> str | None:
        """The client-side command that opens completion, if the client declared one in
        ``experimental.dshSessionReference.triggerSuggestCommand`` (LSP has no request for it)."""
        experimental = self.capability("experimental")
        ours = experimental.get("dshSessionReference") if isinstance(experimental, dict) else None
        command = ours.get("triggerSuggestCommand") if isinstance(ours, dict) else None
        return command if isinstance(command, str) and command else None

    def markdown(self, path: str) -> bool:
        return types.MarkupKind.Markdown in (self.capability(path) or [])

    # --- settings and engine ----------------------------------------------------------------------

    @property
    def engine(self) -> Engine:
        root = sessions_root(self.settings.sessions_root, self.sessions_fallback)
        engine = self._engine
        if engine is None or engine.root != root:
            engine = self._engine = Engine(root, self.settings)
        return engine

    def apply(self, raw: object) -> bool:
        """Merge a settings object; ``True`` when anything changed."""
        updated, warnings = apply_settings(self.settings, raw)
        self._warnings.extend(warnings)
        if updated == self.settings:
            return False
        self.settings = updated
        self._engine = Engine(
            sessions_root(updated.sessions_root, self.sessions_fallback), updated, self._engine
        )
        self._generation += 1
        return True

    @property
    def has_warnings(self) -> bool:
        return bool(self._warnings)

    def flush_warnings(self) -> None:
        for warning in self._warnings:
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=warning))
        self._warnings.clear()

    def report_root(self) -> None:
        """Say once, plainly, that the sessions root is missing or no directory (upstream lists
        such a root as empty, which in the editor looks like a store without sessions): with the
        path and where it came from. Said again only for another root or another problem."""
        root = self.engine.root
        problem = root_problem(root)
        if problem is None:
            self._root_reported = None
            return
        if self._root_reported == (root, problem):
            return
        self._root_reported = (root, problem)
        if self.settings.sessions_root:
            origin = f"from the {SECTION}.sessionsRoot setting"
        else:
            origin = root_origin(self.sessions_fallback, "from the server's --sessions option")
        message = (
            f'dsh: the sessions root "{root}" ({origin}) {problem}, so no sessions can be listed or '
            f"mentioned. Set {SECTION}.sessionsRoot to your dsh sessions folder."
        )
        LOG.warning("%s", message)
        self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))

    async def pull_configuration(self) -> bool:
        """``workspace/configuration`` for our section, only when the client declares it."""
        if not self.capability("workspace.configuration", False):
            return False
        params = types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
        try:
            result = await asyncio.wait_for(
                self.workspace_configuration_async(params), CLIENT_REQUEST_TIMEOUT
            )
        except (JsonRpcException, TimeoutError) as error:
            LOG.warning("workspace/configuration failed: %s", error)
            return False
        if not result:
            return False
        return self.apply({SECTION: result[0]} if isinstance(result[0], dict) else None)

    async def warm_up(self) -> None:
        """List the root and find the target before the first ``@``: a big root over a cold index
        takes seconds to list, which would otherwise be spent while the user waits for a popup
        (a request that arrives meanwhile shares this listing rather than starting its own)."""
        source = self.engine.source
        try:
            listing = asyncio.ensure_future(asyncio.to_thread(source.list_sessions))
            await self.with_progress(
                listing, "Listing dsh sessions", lambda: f"{source.index.walked_sessions:,} sessions read"
            )
            await self.agent_for(None)
        except Exception as error:  # the first request meets the same problem and reports it
            LOG.info("listing the sessions root ahead of requests failed: %s", error)

    async def follow_background(self) -> None:
        """Show the session source's background work (title verification, message-text
        indexing; see ``SessionCatalog.background_work``) as work-done progress once it has
        run for :data:`PROGRESS_AFTER`: one progress per kind of work, reporting the logs left,
        ended when that work is done. Indexing message text is cancellable: it stops, and body
        search answers from what was indexed until the setting is turned on again. Runs until
        shutdown cancels it."""
        if not self.capability("window.work_done_progress", False):
            return
        shown: tuple[str, str] | None = None  # (token, title) of the progress on screen
        started: tuple[str, float] | None = None  # (title, when first seen) of the work under way
        while True:
            await asyncio.sleep(PROGRESS_EVERY)
            source = self.engine.source
            if shown is not None and shown[1] == INDEXING_BODIES:
                cancel = self.work_done_progress.tokens.get(shown[0])
                if cancel is not None and cancel.cancelled():
                    source.stop_bodies()
                    stopped = "stopped: body search answers from the logs indexed so far"
                    self.work_done_progress.end(shown[0], types.WorkDoneProgressEnd(message=stopped))
                    shown = None
            work = source.background_work()
            if shown is not None and (work is None or shown[1] != work[0]):
                self.work_done_progress.end(shown[0], types.WorkDoneProgressEnd(message="done"))
                shown = None
            if work is None:
                started = None
                continue
            title, message = work[0], f"{work[1]:,} logs to go"
            if shown is not None:
                self.work_done_progress.report(shown[0], types.WorkDoneProgressReport(message=message))
                continue
            if started is None or started[0] != title:
                started = (title, time.monotonic())
            if time.monotonic() - started[1] < PROGRESS_AFTER:
                continue
            token = await self._progress_token()
            if token is None:
                return
            cancellable = title == INDEXING_BODIES  # titles are needed; body search can wait
            begin = types.WorkDoneProgressBegin(title=title, message=message, cancellable=cancellable)
            self.work_done_progress.begin(token, begin)
            shown = (token, title)

    async def _progress_token(self) -> str | None:
        """A new work-done progress token the client has accepted, or ``None`` (it refused or
        did not answer in time: the work goes on without progress)."""
        token = f"dsh-{uuid.uuid4()}"
        try:
            await asyncio.wait_for(self.work_done_progress.create_async(token), CLIENT_REQUEST_TIMEOUT)
        except (JsonRpcException, TimeoutError) as error:
            LOG.info("no progress shown: %s", error)
            return None
        return token

    async def with_progress(self, work: asyncio.Future[Any], title: str, message: Callable[[], str]) -> None:
        """Await ``work``; if it takes longer than :data:`PROGRESS_AFTER`, show it as work-done
        progress (begin, a report every :data:`PROGRESS_EVERY`, end) in clients that support it,
        so a cold root of thousands of logs is seen to be read, not taken for a hang."""
        done, _ = await asyncio.wait({work}, timeout=PROGRESS_AFTER)
        if done or not self.capability("window.work_done_progress", False):
            await work
            return
        token = await self._progress_token()
        if token is None:
            await work
            return
        progress = self.work_done_progress
        progress.begin(token, types.WorkDoneProgressBegin(title=title, message=message()))
        try:
            while not work.done():
                await asyncio.wait({work}, timeout=PROGRESS_EVERY)
                if not work.done():
                    progress.report(token, types.WorkDoneProgressReport(message=message()))
        finally:
            progress.end(token, types.WorkDoneProgressEnd(message=message()))
        await work

    async def settings_changed(self) -> None:
        """Re-check every open document under the new settings (a new root is listed ahead)."""
        self.spawn(self.warm_up())
        self.flush_warnings()
        self.report_root()
        if self.pull_diagnostics:
            if self.capability("workspace.diagnostics.refresh_support", False):
                self.spawn(self._refresh_diagnostics())
            return
        for document in self.documents:
            self.schedule_publish(document.uri, 0)

    async def _refresh_diagnostics(self) -> None:
        with contextlib.suppress(JsonRpcException, TimeoutError):
            await asyncio.wait_for(self.workspace_diagnostic_refresh_async(None), CLIENT_REQUEST_TIMEOUT)

    # --- the session a document is written for ------------------------------------------------------

    def folder_path(self, uri: str | None) -> str | None:
        """The workspace folder holding ``uri`` (its cwd when the target is unknown), else the root."""
        path = to_fs_path(uri) if uri else None
        folders = [to_fs_path(folder.uri) for folder in self.workspace.folders.values()]
        if path is not None:
            for folder in sorted((f for f in folders if f), key=len, reverse=True):
                if path == folder or path.startswith(folder.rstrip(os.sep) + os.sep):
                    return folder
        root = self.workspace.root_path
        if root:
            return str(root)
        return next((folder for folder in folders if folder), None)

    async def agent_for(self, uri: str | None) -> AgentRef:
        """The target's ``AgentRef`` without a listing per request once the target is known:
        a session's cwd is fixed in its header, so a found target is remembered."""
        target = target_session(self.settings.target_session_id)
        engine = self.engine
        known = engine.targets.get(target) if target is not None else None
        if known is not None:
            return known
        fallback = self.folder_path(uri)
        if target is None:
            return AgentRef(None, fallback)
        try:
            record = await find_session(engine.source, target)
        except Exception as error:  # an unreadable root still has a target to exclude
            LOG.info("listing for the target session failed: %s", error)
            return AgentRef(target, fallback)
        if record is None:
            return AgentRef(target, fallback)
        agent = engine.targets[target] = AgentRef(target, record.cwd)
        return agent

    async def target_json(self) -> dict[str, Any] | None:
        """``documentSummary``'s ``target``: ``{sessionId, label, found}``, ``None`` without a target.

        The label is what ``list_candidates`` shows for a session
        (:func:`..candidates.label_for`: its current title, else its id). A
        target the store does not list (a typo in the setting, another root,
        an unreadable root) has ``found: false`` and its id as the label, so
        the status bar can flag it. ``sessionId`` is the configured id, which
        a client matches to its own setting.
        """
        target = target_session(self.settings.target_session_id)
        if target is None:
            return None
        label = target
        found = False
        source = self.engine.source
        try:
            record = await find_session(source, target)
            if record is not None:
                found = True
                [observation] = await asyncio.to_thread(source.read_titles, [record])
                label = label_for(record, observation)
        except Exception as error:  # an unreadable root: the status bar still names the target
            LOG.info("reading the target session's title failed: %s", error)
        return {"sessionId": target, "label": label, "found": found}

    # --- analysis -----------------------------------------------------------------------------------

    def _run_for(self, document: Document) -> _AnalysisRun:
        run = self._analyses.get(document.uri)
        if (
            run is not None
            and not run.task.cancelled()
            and run.text is document.text
            and run.generation == self._generation
        ):
            return run
        if run is not None:
            run.stop.set()
            run.task.cancel()
        stop = threading.Event()
        task = asyncio.ensure_future(self._analyze(document.uri, document.text, stop))
        run = _AnalysisRun(document.text, document.version, self._generation, task, stop)
        self._analyses[document.uri] = run
        return run

    async def _analyze(self, uri: str, text: str, stop: threading.Event) -> Analysis:
        agent = await self.agent_for(uri)
        return await analyze(text, self.engine.resolver, agent, stop)

    async def analysis(self, uri: str) -> Analysed | None:
        """The current version's analysis; one superseded by an edit is redone on the newer text."""
        while True:
            document = self.documents.get(uri)
            if document is None:
                return None
            run = self._run_for(document)
            try:
                analysis = await asyncio.shield(run.task)
            except (asyncio.CancelledError, AnalysisCancelled):
                current = asyncio.current_task()
                if self.is_closing or (current is not None and current.cancelling()):
                    raise
                if self.documents.get(uri) is document and self._analyses.get(uri) is run:
                    raise
                continue
            index = document.index if document.text is analysis.text else LineIndex(analysis.text)
            return Analysed(document, analysis, run.version, index)

    def drop_analysis(self, uri: str) -> None:
        run = self._analyses.pop(uri, None)
        if run is not None:
            run.stop.set()
            run.task.cancel()

    # --- pushed diagnostics ---------------------------------------------------------------------

    def schedule_publish(self, uri: str, delay: float) -> None:
        previous = self._pending.pop(uri, None)
        if previous is not None:
            previous.cancel()
        task = self.spawn(self._publish_after(uri, delay))
        self._pending[uri] = task

    async def _publish_after(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        result = await self.analysis(uri)
        if result is not None and result.current:
            self.publish(uri, self.diagnostics_for(result, push=True), result.version)
        if self._pending.get(uri) is asyncio.current_task():
            del self._pending[uri]

    def diagnostics_for(self, result: Analysed, *, push: bool) -> list[types.Diagnostic]:
        path = "text_document.publish_diagnostics" if push else "text_document.diagnostic"
        tags = types.DiagnosticTag.Unnecessary in (self.capability(f"{path}.tag_support.value_set") or [])
        return to_diagnostics(result.analysis, result.index, self.encoding, tags_supported=tags)

    def publish(self, uri: str, diagnostics: Sequence[types.Diagnostic], version: int | None = None) -> None:
        if not self.capability("text_document.publish_diagnostics.version_support", False):
            version = None
        self.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=list(diagnostics), version=version)
        )

    # --- work in flight -----------------------------------------------------------------------------

    @property
    def is_closing(self) -> bool:
        return bool(self.protocol._shutdown)

    def spawn(self, work: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            LOG.error("background work failed: %r", error, exc_info=error)

    def begin_completion(self, uri: str) -> AbortSignal:
        """A new completion for ``uri`` supersedes (aborts) the one still running."""
        previous = self._completions.get(uri)
        if previous is not None:
            previous.abort("superseded")
        signal = self._completions[uri] = AbortSignal()
        return signal

    def end_completion(self, uri: str, signal: AbortSignal) -> None:
        if self._completions.get(uri) is signal:
            del self._completions[uri]

    @contextlib.contextmanager
    def tracked_command(self) -> Iterator[None]:
        """Let ``$/cancelRequest`` for this ``workspace/executeCommand`` cancel the command's task."""
        msg_id = self.protocol.msg_id
        task = asyncio.current_task()
        if msg_id is None or task is None:
            yield
            return
        self._commands[msg_id] = task
        try:
            yield
        finally:
            self._commands.pop(msg_id, None)

    def cancel_command(self, msg_id: int | str) -> None:
        task = self._commands.pop(msg_id, None)
        if task is not None:
            LOG.info("cancelling command request %r", msg_id)
            task.cancel()

    def stop_everything(self) -> None:
        """On shutdown: stop analyses, completions, commands and background work."""
        for run in self._analyses.values():
            run.stop.set()
            run.task.cancel()
        self._analyses.clear()
        for signal in self._completions.values():
            signal.abort("shutdown")
        for task in [*self._commands.values(), *self._background]:
            task.cancel()

    # --- documents for commands ---------------------------------------------------------------------

    async def text_of(self, uri: str) -> str | None:
        """An open document's text, else a ``file:`` document read from disk (off the loop, only a
        regular file under a size cap, within :data:`UNOPENED_READ_TIMEOUT`); ``None`` for another
        scheme. A file that cannot be read is ``InvalidParams`` naming why."""
        document = self.documents.get(uri)
        if document is not None:
            return document.text
        path = to_fs_path(uri) if uri.startswith("file:") else None
        if path is None:
            return None
        try:
            reading = asyncio.to_thread(read_text, path, untrusted=True)
            return await asyncio.wait_for(reading, UNOPENED_READ_TIMEOUT)
        except TimeoutError:
            raise _invalid(f"{uri} is not open and took over {UNOPENED_READ_TIMEOUT:g} s to read") from None
        except OSError as error:
            raise _invalid(f"{uri} is not open and cannot be read: {error.strerror or error}") from None

    async def preview(self, uri: str) -> Preview | None:
        text = await self.text_of(uri)
        if text is None:
            return None
        agent = await self.agent_for(uri)
        target = await self.target_json()
        label = None if target is None else target["label"]
        preview = await build_preview(uri, text, self.engine.resolver, agent, label)
        self._previews[preview.uri] = preview.text
        return preview

    def stored_preview(self, uri: str) -> str | None:
        return self._previews.get(uri)


def _now_ms() -> int:
    return int(time.time() * 1000)


def _invalid(message: str) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(message)


def _uri_argument(args: Sequence[Any], command: str) -> str:
    if not args or not isinstance(args[0], str):
        raise _invalid(f"{command} expects [documentUri: string]")
    return args[0]


# --- handlers ------------------------------------------------------------------------------------


def _initialize(ls: DshLanguageServer, params: types.InitializeParams) -> None:
    ls.idle_gc.start(asyncio.get_running_loop())
    ls.encoding = encoding_of(ServerCapabilitiesBuilder.choose_position_encoding(params.capabilities))
    ls.apply(params.initialization_options)


async def _initialized(ls: DshLanguageServer, params: types.InitializedParams) -> None:
    if ls.capability("workspace.text_document_content.dynamic_registration", False):
        registration = types.Registration(
            id=str(uuid.uuid4()),
            method=types.WORKSPACE_TEXT_DOCUMENT_CONTENT,
            register_options=types.TextDocumentContentRegistrationOptions(schemes=[PREVIEW_SCHEME]),
        )
        try:
            await asyncio.wait_for(
                ls.client_register_capability_async(types.RegistrationParams(registrations=[registration])),
                CLIENT_REQUEST_TIMEOUT,
            )
            ls.content_registered = True
        except (JsonRpcException, TimeoutError) as error:
            LOG.warning("could not register %s: %s", types.WORKSPACE_TEXT_DOCUMENT_CONTENT, error)
    changed = await ls.pull_configuration()
    if changed or ls.has_warnings:
        await ls.settings_changed()
    else:
        ls.report_root()
        ls.spawn(ls.warm_up())
    ls.spawn(ls.follow_background())


async def _did_change_configuration(
    ls: DshLanguageServer, params: types.DidChangeConfigurationParams
) -> None:
    changed = ls.apply(params.settings)
    changed = await ls.pull_configuration() or changed
    if changed or ls.has_warnings:
        await ls.settings_changed()


def _did_open(ls: DshLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    if not ls.pull_diagnostics:
        ls.schedule_publish(params.text_document.uri, 0)


def _did_change(ls: DshLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.drop_analysis(uri)
    if not ls.pull_diagnostics:
        ls.schedule_publish(uri, DIAGNOSTIC_DELAY)


def _did_close(ls: DshLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.drop_analysis(uri)
    pending = ls._pending.pop(uri, None)
    if pending is not None:
        pending.cancel()
    if not ls.pull_diagnostics:
        ls.publish(uri, [])


async def _diagnostic(
    ls: DshLanguageServer, params: types.DocumentDiagnosticParams
) -> types.RelatedFullDocumentDiagnosticReport:
    result = await ls.analysis(params.text_document.uri)
    items = [] if result is None else ls.diagnostics_for(result, push=False)
    return types.RelatedFullDocumentDiagnosticReport(items=items)


async def _completion(ls: DshLanguageServer, params: types.CompletionParams) -> types.CompletionList:
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
    trigger = find_trigger(document.text, cursor, continuing=continuing)
    if trigger is None:
        return empty
    signal = ls.begin_completion(uri)
    try:
        agent = await ls.agent_for(uri)
        candidates = await ls.engine.resolver.list_candidates(agent, trigger.query, signal=signal)
    except SessionReferenceError as error:
        if error.code != CANCELLED:
            ls.window_log_message(
                types.LogMessageParams(type=types.MessageType.Warning, message=f"completion: {error.message}")
            )
        return types.CompletionList(is_incomplete=True, items=[])
    except Exception as error:  # an unreadable root: no rows, and say why in the log
        ls.window_log_message(
            types.LogMessageParams(type=types.MessageType.Warning, message=f"completion: {error}")
        )
        return types.CompletionList(is_incomplete=True, items=[])
    finally:
        ls.end_completion(uri, signal)
    edit_range = document.index.range_of(trigger.at, trigger.cursor, ls.encoding)
    items = completion_items(
        candidates,
        edit_range,
        now_ms=_now_ms(),
        label_details=bool(ls.capability("text_document.completion.completion_item.label_details_support")),
        typed=document.text[trigger.at : trigger.cursor],
        filter_text=bool(ls.capability("text_document.completion.completion_item.insert_replace_support")),
    )
    return types.CompletionList(is_incomplete=True, items=items)


async def _completion_resolve(ls: DshLanguageServer, item: types.CompletionItem) -> types.CompletionItem:
    data = item_data(item)
    if data is None:
        return item
    facts = await read_session_facts(ls.engine.resolver, *data)
    markdown = ls.markdown("text_document.completion.completion_item.documentation_format")
    summary = session_summary(facts, markdown=markdown, now_ms=_now_ms(), id_last=True)
    item.documentation = documentation(summary, markdown)
    return item


async def _hover(ls: DshLanguageServer, params: types.HoverParams) -> types.Hover | None:
    result = await ls.analysis(params.text_document.uri)
    if result is None:
        return None
    offset = result.index.offset_at(params.position, ls.encoding)
    markdown = ls.markdown("text_document.hover.content_format")
    found = hover_text(result.analysis, offset, markdown=markdown, now_ms=_now_ms())
    if found is None:
        return None
    text, span = found
    kind = types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText
    return types.Hover(
        contents=types.MarkupContent(kind=kind, value=text),
        range=result.index.range_of(span.start, span.end, ls.encoding),
    )


async def _code_action(
    ls: DshLanguageServer, params: types.CodeActionParams
) -> list[types.CodeAction | types.Command] | None:
    result = await ls.analysis(params.text_document.uri)
    if result is None:
        return None
    return code_actions(
        result.analysis,
        result.index,
        ls.encoding,
        params,
        version=result.version,
        literal_support=ls.capability("text_document.code_action.code_action_literal_support") is not None,
        document_changes=bool(ls.capability("workspace.workspace_edit.document_changes", False)),
        suggest_command=ls.suggest_command,
    )


async def _text_document_content(
    ls: DshLanguageServer, params: types.TextDocumentContentParams
) -> types.TextDocumentContentResult:
    document_uri = document_of_preview(params.uri)
    if document_uri is not None:
        preview = await ls.preview(document_uri)
        if preview is not None:
            return types.TextDocumentContentResult(text=preview.text)
    stored = ls.stored_preview(params.uri)
    if stored is not None:
        return types.TextDocumentContentResult(text=stored)
    raise _invalid(f"no preview for {params.uri}")


async def _preview_command(ls: DshLanguageServer, *args: Any) -> dict[str, Any]:
    uri = _uri_argument(args, PREVIEW_COMMAND)
    with ls.tracked_command():
        preview = await ls.preview(uri)
        if preview is None:
            raise _invalid(f"{PREVIEW_COMMAND}: {uri} is not open and is no file")
        shown = False
        if ls.content_registered and ls.capability("window.show_document.support", False):
            ls.spawn(_show_document(ls, preview))
            shown = True
        if not shown:
            kind = types.MessageType.Info if preview.ok else types.MessageType.Error
            ls.window_show_message(types.ShowMessageParams(type=kind, message=f"dsh: {preview.summary}"))
        return preview.to_json()


async def _show_document(ls: DshLanguageServer, preview: Preview) -> None:
    params = types.ShowDocumentParams(uri=preview.uri, take_focus=True)
    try:
        result = await asyncio.wait_for(ls.window_show_document_async(params), CLIENT_REQUEST_TIMEOUT)
    except (JsonRpcException, TimeoutError):
        result = None
    if result is None or not result.success:
        kind = types.MessageType.Info if preview.ok else types.MessageType.Error
        ls.window_show_message(types.ShowMessageParams(type=kind, message=f"dsh: {preview.summary}"))


async def _candidates_command(ls: DshLanguageServer, *args: Any) -> list[dict[str, Any]]:
    options = args[0] if args else {}
    if options is None:
        options = {}
    if not isinstance(options, dict):
        raise _invalid(f"{CANDIDATES_COMMAND} expects [{{documentUri?: string, query?: string}}]")
    uri = options.get("documentUri")
    query = options.get("query", "")
    if (uri is not None and not isinstance(uri, str)) or not isinstance(query, str):
        raise _invalid(f"{CANDIDATES_COMMAND}: documentUri and query must be strings")
    with ls.tracked_command():
        agent = await ls.agent_for(uri)
        candidates = await ls.engine.resolver.list_candidates(agent, query)
        return [candidate_json(candidate) for candidate in candidates]


async def _summary_command(ls: DshLanguageServer, *args: Any) -> dict[str, Any]:
    uri = _uri_argument(args, SUMMARY_COMMAND)
    with ls.tracked_command():
        result = await ls.analysis(uri)
        if result is None:
            raise _invalid(f"{SUMMARY_COMMAND}: {uri} is not open")
        summary = await asyncio.to_thread(document_summary, result.analysis)
        return {**summary, "target": await ls.target_json()}


def _shutdown(ls: DshLanguageServer, params: None) -> None:
    ls.idle_gc.stop()
    ls.stop_everything()


def create_server(sessions: str | None = None) -> DshLanguageServer:
    """A server with every feature registered (not started)."""
    server = DshLanguageServer(sessions)
    feature = server.feature
    feature(types.INITIALIZE)(_initialize)
    feature(types.INITIALIZED)(_initialized)
    feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(_did_change_configuration)
    feature(types.TEXT_DOCUMENT_DID_OPEN)(_did_open)
    feature(types.TEXT_DOCUMENT_DID_CHANGE)(_did_change)
    feature(types.TEXT_DOCUMENT_DID_CLOSE)(_did_close)
    feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(identifier=NAME, inter_file_dependencies=False, workspace_diagnostics=False),
    )(_diagnostic)
    feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=["@"], resolve_provider=True),
    )(_completion)
    feature(types.COMPLETION_ITEM_RESOLVE)(_completion_resolve)
    feature(types.TEXT_DOCUMENT_HOVER)(_hover)
    feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.Source],
        ),
    )(_code_action)
    feature(types.WORKSPACE_TEXT_DOCUMENT_CONTENT)(_text_document_content)
    feature(types.SHUTDOWN)(_shutdown)
    server.command(PREVIEW_COMMAND)(_preview_command)
    server.command(CANDIDATES_COMMAND)(_candidates_command)
    server.command(SUMMARY_COMMAND)(_summary_command)
    return server


def serve_stdio(sessions: str | None = None) -> int:
    """Serve one client over stdin/stdout until it exits; the exit status
    (:func:`.transport.serve_stdio`). The caller has set up the log (:mod:`..logsetup`)."""
    return transport.serve_stdio(create_server(sessions))
