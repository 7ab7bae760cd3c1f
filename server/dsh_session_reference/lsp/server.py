"""The server's services: documents, settings, the engine, analyses and the work in flight, which
every feature shares (:class:`.contract.Services`); the features own the rest.

Threads and the event loop: documents, positions and scans of small texts run
on the loop; store reads, big scans and retention run in worker threads (the
resolver and :func:`.analysis.analyze` move them there), so one slow disk or a
10 MB document never stalls typing. One analysis per document version is
shared by diagnostics, hover, code actions and the status summary; a newer
version cancels the older analysis, and ``$/cancelRequest`` cancels requests
and commands alike. The features are told of documents opened, changed and
closed, of a redraw, a new engine and shutdown (:class:`.contract.Feature`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from lsprotocol import types
from pygls.capabilities import get_capability
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer
from pygls.uris import to_fs_path

from .. import __version__
from ..analysis import Analysis, analyze
from ..assembly import dsh_profile_budgets as profile_budgets
from ..assembly import make_resolver, open_live, root_origin, root_problem, sessions_root, target_session
from ..cancellation import AbortSignal, Cancelled
from ..config import ResolverConfig
from ..dsh_profile import ProfileBudgets
from ..lines import Encoding
from ..model import LiveSource
from ..resolver import AgentRef, SessionReferenceResolver, find_session
from .completion import MAX_ROW_COLUMNS, MIN_ROW_COLUMNS
from .contract import Analysed, Feature
from .documents import Document, DocumentStore
from .idle_gc import IdleCollector
from .live import Live
from .positions import LineIndex
from .preview import KeptPreviews, document_of_preview
from .progress import CLIENT_REQUEST_TIMEOUT
from .pygls_patches import DshProtocol
from .settings import SECTION, OnceWarnings, Settings, apply_settings, resolve_limits

LOG = logging.getLogger(__name__)

NAME: Final = "dsh-session-reference"
MAX_TARGETS: Final = 16
"""Target sessions whose record is remembered (a settings change may name a new one each time)."""
CANCEL_GRACE: Final = 0.002
"""Seconds a listing request (a symbol search, the session picker's candidates) waits before its
work while a message is already waiting behind it (:meth:`DshLanguageServer.cancel_grace`)."""
CONTENT_CHANGED: Final = "dshSessionReference/contentChanged"
"""Notification ``{uris}``: virtual documents this server served (previews, transcripts) that may
read differently now; a client showing one asks for it again."""


class Engine:
    """One sessions root behind its cache, and a resolver with the current limits.

    A new engine for the same root (a limit changed) keeps the warm cache and
    the targets already found.
    """

    root: str
    store: LiveSource
    resolver: SessionReferenceResolver

    def __init__(
        self, root: str, settings: Settings, limits: ResolverConfig, previous: Engine | None = None
    ) -> None:
        kept = previous if previous is not None and previous.root == root else None
        self.root = root
        # Its background work waits for the first completion's answer (features/completion.py).
        self.store = open_live(root, held=True) if kept is None else kept.store
        self.targets: dict[str, AgentRef] = {} if kept is None else kept.targets
        if settings.body_search and (previous is None or not previous.resolver.body_search):
            self.store.resume_bodies()  # turned on (again): indexing a user cancelled resumes
        self.resolver = make_resolver(self.store, limits, body_search=settings.body_search)


@dataclass
class _AnalysisRun:
    index: LineIndex
    """The text analysed (a document's edit makes a new one; this one stays as it was)."""
    version: int | None
    engine: weakref.ref[Engine]
    """The engine of the settings it ran under (new settings make a new one), held weakly: a kept
    analysis must not keep an old root's store, whose collection stops its watcher and worker."""
    task: asyncio.Task[Analysis]
    stop: AbortSignal


def _nothing_waiting() -> bool:
    return False


class DshLanguageServer(LanguageServer):
    """The services every feature is given: documents, settings, the engine, one analysis per
    document version, and the work in flight."""

    protocol: DshProtocol

    def __init__(self, sessions: str | None = None) -> None:
        super().__init__(NAME, __version__, protocol_cls=DshProtocol)
        self.sessions_fallback = sessions
        self.documents = DocumentStore()
        self.settings = Settings()
        self.encoding: Encoding = "utf-16"
        self.content_registered = False
        self._engine: Engine | None = None
        self._analyses: dict[str, _AnalysisRun] = {}
        self._commands: dict[int | str, asyncio.Task[Any]] = {}
        self.previews = KeptPreviews()
        self.live = Live(self)
        self._background: set[asyncio.Task[Any]] = set()
        self._warnings = OnceWarnings()
        self.profile = ProfileBudgets()  # dsh's own budgets, read with the settings (reconfigure)
        self.limits, _ = resolve_limits(self.settings, self.profile)
        self._root_reported: tuple[str, str] | None = None
        self.idle_gc = IdleCollector()
        self.features: list[Feature] = []
        """The installed features (:func:`.features.create_server`), told of the events below in
        this order."""
        self.message_waiting: Callable[[], bool] = _nothing_waiting
        """Whether a message from the client has arrived and is not handled yet: the transport
        sets it (:meth:`.transport.FrameReader.waiting`); without one nothing can be waiting."""

    def touch(self) -> None:
        """A message arrived: work that waits for an idle editor (full collections, the index's
        revalidation walk) waits a little longer."""
        self.idle_gc.touch()
        if self._engine is not None:
            self._engine.store.touch()

    # --- client capabilities -------------------------------------------------------------------

    def capability(self, path: str, default: Any = None) -> Any:
        return get_capability(self.client_capabilities, path, default)

    @property
    def pull_diagnostics(self) -> bool:
        """Esbonio's rule: push only to clients without ``textDocument/diagnostic``."""
        return self.capability("text_document.diagnostic") is not None

    def client_command(self, key: str) -> str | None:
        """A client-side command the client declared in ``experimental.dshSessionReference`` (LSP
        has no request for either): ``triggerSuggestCommand`` opens completion; ``previewCommand``
        shows a document's preview (taking ``[documentUri]``), so a code lens runs it rather than
        the server's command, which can only ask to show a document."""
        command = self._ours().get(key)
        return command if isinstance(command, str) and command else None

    def completion_columns(self) -> float | None:
        """The columns one completion row has room for, as the client declares them in
        ``experimental.dshSessionReference.completionRowColumns`` (the VS Code extension: its
        popup's default width, see :data:`.completion.ROW_COLUMNS`); ``None`` when it does not, or
        declares a number no popup has (rows then carry whole titles)."""
        columns = self._ours().get("completionRowColumns")
        if isinstance(columns, bool) or not isinstance(columns, int | float):
            return None
        return float(columns) if MIN_ROW_COLUMNS <= columns <= MAX_ROW_COLUMNS else None

    def _ours(self) -> dict[str, Any]:
        """The client's ``experimental.dshSessionReference`` capabilities (empty when none)."""
        experimental = self.capability("experimental")
        ours = experimental.get("dshSessionReference") if isinstance(experimental, dict) else None
        return ours if isinstance(ours, dict) else {}

    def markdown(self, path: str) -> bool:
        return types.MarkupKind.Markdown in (self.capability(path) or [])

    # --- settings and engine ----------------------------------------------------------------------

    @property
    def store(self) -> LiveSource:
        """The current root's session store (its background work is shown as progress)."""
        return self.engine.store

    @property
    def engine(self) -> Engine:
        engine = self._engine
        if engine is None or engine.root != self._root():
            engine = self._new_engine()
        self.live.follow(engine.store)
        return engine

    def _root(self) -> str:
        return sessions_root(self.settings.sessions_root, self.sessions_fallback)

    def _new_engine(self) -> Engine:
        """An engine for the current settings (the same root's keeps its warm cache)."""
        engine = self._engine = Engine(self._root(), self.settings, self.limits, self._engine)
        for feature in self.features:
            feature.reset()
        return engine

    def apply(self, raw: object) -> bool:
        """Merge a settings object; ``True`` when anything changed."""
        updated, warnings = apply_settings(self.settings, raw)
        self._warnings.add(warnings)
        return self._adopt(updated, self.profile)

    def adopt_profile(self, profile: ProfileBudgets) -> bool:
        """Take dsh's budgets as just read from its profile; ``True`` when the limits changed."""
        self._warnings.add(profile.warnings)
        return self._adopt(self.settings, profile)

    def _adopt(self, settings: Settings, profile: ProfileBudgets) -> bool:
        """Take ``settings`` and ``profile`` and the limits they make; ``True`` when any changed."""
        limits, warnings = resolve_limits(settings, profile)
        self._warnings.add(warnings)
        self.profile = profile
        if settings == self.settings and (limits, limits.origins) == (self.limits, self.limits.origins):
            return False
        self.settings, self.limits = settings, limits
        self.live.follow(self._new_engine().store)
        return True

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
        origin = self.root_origin()
        message = (
            f'dsh: the sessions root "{root}" ({origin}) {problem}, so no sessions can be listed or '
            f"mentioned. Set {SECTION}.sessionsRoot to your dsh sessions folder."
        )
        LOG.warning("%s", message)
        self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=message))

    def root_origin(self) -> str:
        """Where the sessions root came from, in words for a message."""
        if self.settings.sessions_root:
            return f"from the {SECTION}.sessionsRoot setting"
        return root_origin(self.sessions_fallback, "from the server's --sessions option")

    async def reconfigure(self, raw: object = None) -> bool:
        """Merge ``raw`` (pushed settings), then our section from ``workspace/configuration`` when
        the client declares it; ``True`` when anything changed or a value was rejected (then
        :meth:`settings_changed`)."""
        changed = self.apply(raw)
        if self.capability("workspace.configuration", False):
            params = types.ConfigurationParams(items=[types.ConfigurationItem(section=SECTION)])
            try:
                result = await asyncio.wait_for(
                    self.workspace_configuration_async(params), CLIENT_REQUEST_TIMEOUT
                )
            except (JsonRpcException, TimeoutError) as error:
                LOG.warning("workspace/configuration failed: %s", error)
            else:
                # An answer that is no object holds no section: applying it changes nothing.
                changed = (bool(result) and self.apply({SECTION: result[0]})) or changed
        profile = await asyncio.to_thread(profile_budgets, self.settings.profile)
        changed = self.adopt_profile(profile) or changed
        return changed or bool(self._warnings)

    async def list_ahead(self) -> None:
        """List the root in a worker thread from ``initialize`` on, as soon as its settings are
        known: over the index a server left, the listing it left is read (tens of milliseconds at
        3,000 sessions) while the client answers ``initialize`` and opens the prompt, so the first
        ``@`` finds it read; a later listing (:meth:`warm_up`'s, the first request's) takes this
        one rather than start its own."""
        store = self.store
        try:
            await asyncio.to_thread(store.list_sessions)
        except Exception as error:  # the first request meets the same problem and reports it
            LOG.info("listing the sessions root at initialize failed: %s", error)

    async def warm_up(self) -> None:
        """The work each feature does ahead of its first request on a new root or settings (the
        completion lists the root and finds the target before the first ``@``)."""
        for feature in self.features:
            await feature.warm_up()

    async def settings_changed(self) -> None:
        """Re-check every open document under the new settings (a new root is listed ahead); hints
        and lenses show figures for the budget and root, or are turned on or off."""
        self.spawn(self.warm_up())
        for warning in self._warnings.take():
            self.window_show_message(types.ShowMessageParams(type=types.MessageType.Warning, message=warning))
        self.report_root()
        self.redraw(document.uri for document in self.documents)
        self.content_changed(self.previews.uris)  # a new budget, target or root: previews read differently

    async def refresh(self, documents: list[str], transcripts: list[str]) -> None:
        """The store changed under ``documents`` and served ``transcripts`` (:class:`.live.Live`
        finds which): the documents are analysed again, and the client told what may read
        differently (their previews too). Returns once those analyses ended."""
        for uri in documents:
            self.drop_analysis(uri)
        content = transcripts + [uri for uri in self.previews.uris if document_of_preview(uri) in documents]
        if documents:
            self.redraw(documents)
        self.content_changed(content)
        await asyncio.gather(*(self.analysis(uri) for uri in documents), return_exceptions=True)

    def content_changed(self, uris: list[str]) -> None:
        """Tell the client that the virtual documents ``uris`` may read differently.

        Only to clients that asked (``experimental.dshSessionReference.contentChanged: true``) or
        show our virtual documents through ``workspace/textDocumentContent``: others would only
        log an unknown method."""
        if uris and (self.content_registered or self._ours().get("contentChanged") is True):
            self.protocol.notify(CONTENT_CHANGED, {"uris": uris})

    def redraw(self, uris: Iterable[str]) -> None:
        """Have the client show anew what each feature shows for ``uris`` (diagnostics, inlay hints
        and code lenses)."""
        uris = list(uris)
        for feature in self.features:
            feature.redraw(uris)

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
            record = await find_session(engine.store, target)
        except Exception as error:  # an unreadable root still has a target to exclude
            LOG.info("listing for the target session failed: %s", error)
            return AgentRef(target, fallback)
        if record is None:
            return AgentRef(target, fallback)
        agent = engine.targets[target] = AgentRef(target, record.cwd)
        while len(engine.targets) > MAX_TARGETS:
            del engine.targets[next(iter(engine.targets))]
        return agent

    # --- analysis -----------------------------------------------------------------------------------

    def _run_for(self, document: Document) -> _AnalysisRun:
        run = self._analyses.get(document.uri)
        if (
            run is not None
            and not run.task.cancelled()
            and run.index is document.index
            and run.engine() is self.engine
        ):
            return run
        self.drop_analysis(document.uri)
        stop = AbortSignal()
        task = asyncio.ensure_future(self._analyze(document.uri, document.index, stop))
        task.add_done_callback(partial(self.live.analysed, document.uri))  # the sessions it read are watched
        run = _AnalysisRun(document.index, document.version, weakref.ref(self.engine), task, stop)
        self._analyses[document.uri] = run
        return run

    async def _analyze(self, uri: str, index: LineIndex, stop: AbortSignal) -> Analysis:
        agent = await self.agent_for(uri)
        text = await asyncio.to_thread(lambda: index.text)  # joined off the loop
        return await analyze(text, self.engine.resolver, agent, stop, count_tokens=True)

    async def analysis(self, uri: str) -> Analysed | None:
        """The current version's analysis; one superseded by an edit is redone on the newer text."""
        while True:
            document = self.documents.get(uri)
            if document is None:
                return None
            run = self._run_for(document)
            try:
                analysis = await asyncio.shield(run.task)
            except (asyncio.CancelledError, Cancelled):
                current = asyncio.current_task()
                if self.is_closing or (current is not None and current.cancelling()):
                    raise
                if self.documents.get(uri) is document and self._analyses.get(uri) is run:
                    raise
                continue
            return Analysed(document, analysis, run.version, run.index)

    def drop_analysis(self, uri: str) -> None:
        run = self._analyses.pop(uri, None)
        if run is not None:
            run.stop.abort()
            run.task.cancel()

    # --- work in flight -----------------------------------------------------------------------------

    @property
    def is_closing(self) -> bool:
        return self.protocol.shutting_down

    def spawn(self, work: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(work)
        self._background.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._background.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            LOG.error("background work failed: %r", error, exc_info=error)

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

    async def cancel_grace(self) -> None:
        """Let a ``$/cancelRequest`` already on its way reach this request before it works: a
        client that sends a burst of requests and cancels sends each cancel right behind its
        request, and a request cancelled meanwhile never starts (300 cancelled
        ``workspace/symbol`` requests had each built its answer). Only while a message is
        waiting: a request with nothing behind it has no cancel to wait for, and a fixed wait made
        every warm candidates command 2.3 ms slower (1.4 -> 3.7 ms at 1,000 sessions)."""
        if self.message_waiting():
            await asyncio.sleep(CANCEL_GRACE)

    def cancel_command(self, msg_id: int | str) -> None:
        task = self._commands.pop(msg_id, None)
        if task is not None:
            LOG.info("cancelling command request %r", msg_id)
            task.cancel()

    def stop_everything(self) -> None:
        """On shutdown: stop analyses, what each feature has in flight, commands and background work."""
        for uri in list(self._analyses):
            self.drop_analysis(uri)
        for feature in self.features:
            feature.stop()
        for task in [*self._commands.values(), *self._background]:
            task.cancel()

    # --- documents ------------------------------------------------------------------------------------

    def opened(self, uri: str) -> None:
        """A document opened (its text is kept)."""
        for feature in self.features:
            feature.opened(uri)

    def changed(self, uri: str) -> None:
        """A document was edited (its text is changed): its analysis is redone when next asked for."""
        self.drop_analysis(uri)
        for feature in self.features:
            feature.changed(uri)

    def closed(self, uri: str) -> None:
        """A document closed: nothing kept for it stays (its text, its analysis, its preview, what
        any feature kept for it)."""
        self.documents.close(uri)
        self.drop_analysis(uri)
        self.previews.forget(uri)
        for feature in self.features:
            feature.closed(uri)

    def analysis_done(self, uri: str) -> Analysis | None:
        """The document's finished analysis, if it has one (``None`` while one runs or failed)."""
        run = self._analyses.get(uri)
        if run is None or not run.task.done() or run.task.cancelled() or run.task.exception() is not None:
            return None
        return run.task.result()
