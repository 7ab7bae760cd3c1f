"""What an LSP feature is: an object that declares what it registers, what it reads and what state
it owns, given the server's services and nothing else.

A feature (:class:`Feature`) registers its LSP methods with their options (:meth:`Feature.handlers`)
and its commands (:meth:`Feature.commands`); what it asks of the server is :class:`Services`, and
the members it touches are declared in :attr:`Feature.uses` (``tests/lsp/test_feature_contract.py``
reads each feature's code and fails when the two differ). The state a feature keeps between
requests (a completion's listing still running, a diagnostics push waiting for quiet) is its own;
the server keeps the services every feature shares (documents, settings, the engine, one
:class:`Analysed` per document version) and tells each feature of the events that concern it
through the hooks below, as esbonio's ``LanguageFeature`` does. What a feature computes stays in
a pure module (:mod:`.completion`, :mod:`.hover`, ...): the feature object only translates.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Protocol

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from ..analysis import Analysis
from ..assembly import ROOT_NOT_FOUND, root_failure
from ..dsh_profile import ProfileBudgets
from ..lines import Encoding
from ..model import LiveSource
from ..resolver import AgentRef, SessionReferenceResolver
from .documents import Document, DocumentStore
from .idle_gc import IdleCollector
from .live import Live
from .positions import LineIndex
from .preview import KeptPreviews
from .progress import CLIENT_REQUEST_TIMEOUT, ProgressHost
from .settings import Settings


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
        return self.document.index is self.index


class EngineView(Protocol):
    """The engine of the current settings (:class:`.server.Engine`): one root's store behind its
    cache, and the resolver with the current limits."""

    @property
    def root(self) -> str: ...

    @property
    def store(self) -> LiveSource: ...

    @property
    def resolver(self) -> SessionReferenceResolver: ...


class Services(ProgressHost, Protocol):
    """What the server gives its features (:class:`.server.DshLanguageServer` is the one
    implementation): the shared state, the document's one analysis, the client's capabilities,
    and the client requests and notifications the features send."""

    # --- shared state -------------------------------------------------------------------------
    documents: DocumentStore
    settings: Settings
    encoding: Encoding
    """The position encoding negotiated on ``initialize``."""
    content_registered: bool
    """Whether ``workspace/textDocumentContent`` was registered with the client."""
    previews: KeptPreviews
    live: Live
    idle_gc: IdleCollector

    @property
    def engine(self) -> EngineView: ...

    @property
    def pull_diagnostics(self) -> bool: ...

    @property
    def is_closing(self) -> bool: ...

    # --- the client -----------------------------------------------------------------------------
    def capability(self, path: str, default: Any = None) -> Any: ...

    def markdown(self, path: str) -> bool: ...

    def client_command(self, key: str) -> str | None: ...

    def completion_columns(self) -> float | None: ...

    # --- settings and the engine ----------------------------------------------------------------
    def apply(self, raw: object) -> bool: ...

    def adopt_profile(self, profile: ProfileBudgets) -> bool: ...

    async def reconfigure(self, raw: object = None) -> bool: ...

    async def settings_changed(self) -> None: ...

    def report_root(self) -> None: ...

    def root_origin(self) -> str: ...

    async def list_ahead(self) -> None: ...

    async def warm_up(self) -> None: ...

    # --- documents and their analyses -----------------------------------------------------------
    def folder_path(self, uri: str | None) -> str | None: ...

    async def agent_for(self, uri: str | None) -> AgentRef: ...

    async def analysis(self, uri: str) -> Analysed | None: ...

    def opened(self, uri: str) -> None: ...

    def changed(self, uri: str) -> None: ...

    def closed(self, uri: str) -> None: ...

    # --- work in flight -------------------------------------------------------------------------
    def spawn(self, work: Any) -> asyncio.Task[Any]: ...

    def tracked_command(self) -> contextlib.AbstractContextManager[None]: ...

    async def cancel_grace(self) -> None: ...

    def stop_everything(self) -> None: ...

    # --- what pygls sends -----------------------------------------------------------------------
    def window_log_message(self, params: types.LogMessageParams) -> None: ...

    def window_show_message(self, params: types.ShowMessageParams) -> None: ...

    async def window_show_document_async(
        self, params: types.ShowDocumentParams
    ) -> types.ShowDocumentResult: ...

    async def workspace_apply_edit_async(
        self, params: types.ApplyWorkspaceEditParams
    ) -> types.ApplyWorkspaceEditResult: ...

    async def client_register_capability_async(self, params: types.RegistrationParams) -> None: ...

    def text_document_publish_diagnostics(self, params: types.PublishDiagnosticsParams) -> None: ...

    async def workspace_diagnostic_refresh_async(self, params: None) -> None: ...

    async def workspace_inlay_hint_refresh_async(self, params: None) -> None: ...

    async def workspace_code_lens_refresh_async(self, params: None) -> None: ...


@dataclass(frozen=True)
class Handler:
    """One LSP method a feature answers: pygls registers ``function`` for ``method`` and puts
    ``options`` in the server's capabilities. A request that reads the store (``reads_store``) is
    answered with the root's problem when it fails on a root that is no directory
    (:func:`root_errors`)."""

    method: str
    function: Callable[[Any], Any]
    options: Any = None
    reads_store: bool = False


Command = Callable[..., Awaitable[Any]]
"""A ``workspace/executeCommand`` handler: the command's arguments in, its JSON-able answer out."""


class Feature:
    """One LSP feature: its contract is what :meth:`handlers` and :meth:`commands` register,
    :attr:`uses` (the :class:`Services` members its code reads), :attr:`reads` (what it takes from
    a document's :class:`~..analysis.Analysis`) and the state its ``__init__`` makes. The hooks are
    the server's events; a feature overrides the ones that concern what it owns."""

    uses: ClassVar[frozenset[str]] = frozenset()
    """Every :class:`Services` member the feature's module reads (checked against its code)."""
    reads: ClassVar[str] = "nothing"
    """What it takes from a document's analysis, in words (docs/architecture.md lists it)."""

    def __init__(self, ls: Services) -> None:
        self.ls = ls

    def handlers(self) -> Sequence[Handler]:
        """The LSP methods this feature answers, with their registration options."""
        return ()

    def commands(self) -> Mapping[str, Command]:
        """The commands this feature runs, by name."""
        return {}

    # --- the server's events (no-ops unless the feature owns state they concern) ------------------
    def opened(self, uri: str) -> None:
        """A document was opened (its text is in ``documents``)."""

    def changed(self, uri: str) -> None:
        """A document was edited (its analysis was dropped)."""

    def closed(self, uri: str) -> None:
        """A document was closed: nothing kept for it may stay."""

    def redraw(self, uris: Iterable[str]) -> None:
        """What the client shows for ``uris`` may read differently (new settings, a store change)."""

    def reset(self) -> None:
        """A new engine replaced the old (new settings or root): drop what was computed under it."""

    def stop(self) -> None:
        """Shutdown: stop the work this feature has in flight."""

    async def warm_up(self) -> None:
        """A new root or new settings: the work worth doing before the first request asks."""


REQUEST_FAILED: Final = int(types.LSPErrorCodes.RequestFailed)
"""-32803: the request was well formed and cannot be answered (LSP 3.17)."""


def root_error(ls: Services) -> JsonRpcException | None:
    """A request's answer while the sessions root is missing or no directory (a file, a FIFO, a
    symlink loop): the CLI's code and words, as ``RequestFailed``; ``None`` for a directory."""
    failure = root_failure(ls.engine.root, ls.root_origin())
    if failure is None:
        return None
    data = {"code": ROOT_NOT_FOUND, "message": failure}
    return JsonRpcException(f"{ROOT_NOT_FOUND}: {failure}", REQUEST_FAILED, data)


def root_errors(ls: Services, function: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """``function`` answering with :func:`root_error` where it fails while the root is no directory:
    a store cannot list such a root and raises on every read, which pygls would answer as
    InternalError with a traceback. An error of the request's own (bad params) goes out as is."""

    async def answered(*args: Any) -> Any:
        try:
            return await function(*args)
        except (JsonRpcException, asyncio.CancelledError):
            raise
        except Exception:
            error = root_error(ls)
            if error is None:
                raise
            raise error from None

    return answered


async def ask_client(request: Callable[[None], Awaitable[object]]) -> None:
    """A refresh request to the client, whose answer (or silence) changes nothing here."""
    with contextlib.suppress(JsonRpcException, TimeoutError):
        await asyncio.wait_for(request(None), CLIENT_REQUEST_TIMEOUT)


def wrapped(function: Callable[..., Any]) -> Callable[..., Any]:
    """``function`` as pygls registers it: a plain function (pygls sets attributes on what it
    registers, which a bound method refuses), synchronous when ``function`` is, so that a
    notification such as ``didChange`` is still handled before the next message is read. Its
    arguments are typed ``Any``, which pygls does not take for a request for the server itself
    (a first parameter named ``ls`` or typed as a server class would be handed the server)."""
    if asyncio.iscoroutinefunction(function):

        async def run_async(*args: Any) -> Any:
            return await function(*args)

        return run_async

    def run(*args: Any) -> Any:
        return function(*args)

    return run
