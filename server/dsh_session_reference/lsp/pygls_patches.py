"""Every place this server reaches into pygls' internals, in one module.

The server uses pygls through its public API (``LanguageServer``, ``feature``, ``command``)
except for what is here: a protocol subclass that leaves documents to the server's own features,
answers bad and late requests, stops commands on ``$/cancelRequest`` and frees finished notifications
(pygls 2.1 keeps them forever); the two hooks the bounded stdio reader (:mod:`.transport`)
needs; and the demo's look at the server process its client started. Each private name this
relies on is listed in :data:`PYGLS_INTERNALS` and :data:`PYGLS_STATE`; :func:`missing_internals`
checks them against the installed pygls, and a test runs it, so a pygls upgrade that renames or
reshapes one fails the suite instead of an editor session.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import threading
import typing
from collections.abc import Callable, Generator, Iterator
from dataclasses import dataclass
from typing import Any, Final, Protocol

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInternalError
from pygls.lsp.client import LanguageClient
from pygls.lsp.server import LanguageServer
from pygls.protocol import LanguageServerProtocol
from pygls.protocol.language_server import lsp_method
from pygls.server import JsonRPCServer

LOG = logging.getLogger(__name__)

PYGLS_INTERNALS: Final[tuple[tuple[type, str, tuple[str, ...]], ...]] = (
    (LanguageServerProtocol, "_execute_handler", ("self", "msg_id", "handler", "callback", "args", "kwargs")),
    (LanguageServerProtocol, "_handle_cancel_notification", ("self", "msg_id")),
    (LanguageServerProtocol, "_send_handler_result", ("self", "future", "msg_id")),
    (LanguageServerProtocol, "_send_response", ("self", "msg_id", "result", "error")),
    (LanguageServerProtocol, "_send_data", ("self", "data")),
    (LanguageServerProtocol, "lsp_shutdown", ("self", "args")),
)
"""``(class, method, parameter names)`` of each pygls internal overridden or called here."""

_DOCUMENT_NOTIFICATIONS: Final = (
    types.TEXT_DOCUMENT_DID_OPEN,
    types.TEXT_DOCUMENT_DID_CHANGE,
    types.TEXT_DOCUMENT_DID_CLOSE,
)

PYGLS_STATE: Final = ("_request_futures", "_shutdown", "_server", "msg_id", "fm", "_converter")
"""Attributes of a pygls protocol instance read or changed here."""


def missing_internals() -> list[str]:
    """What of :data:`PYGLS_INTERNALS` and :data:`PYGLS_STATE` the installed pygls lacks or has
    reshaped (empty when every patch here still fits)."""
    problems: list[str] = []
    for owner, name, parameters in PYGLS_INTERNALS:
        method = getattr(owner, name, None)
        if method is None:
            problems.append(f"{owner.__name__}.{name} is gone")
            continue
        found = tuple(inspect.signature(method).parameters)
        if found != parameters:
            problems.append(f"{owner.__name__}.{name} takes {found}, not {parameters}")
    server = LanguageServer("pygls-check", "0")
    protocol = server.protocol
    problems.extend(
        f"a LanguageServerProtocol has no {name}" for name in PYGLS_STATE if not hasattr(protocol, name)
    )
    builtin = getattr(getattr(protocol, "fm", None), "builtin_features", {})
    problems.extend(
        f"pygls has no built-in {method} handler to leave out"
        for method in _DOCUMENT_NOTIFICATIONS
        if method not in builtin
    )
    if not hasattr(server, "_stop_event"):
        problems.append("a JsonRPCServer has no _stop_event")
    if not hasattr(LanguageClient("pygls-check", "0"), "_server"):
        problems.append("a LanguageClient has no _server")
    return problems


INITIALIZE_ANSWER: Final = (types.InitializeResponse, types.InitializeResult, types.ServerCapabilities)
"""What the answer to ``initialize`` is unstructured as (the rest of it is the few option classes
the features register)."""


def _classes_within(root: type) -> Iterator[type]:
    """``root`` and every attrs class (lsprotocol's) its fields' types name, at any depth, each once."""
    seen: set[type] = set()
    waiting: list[object] = [root]
    while waiting:
        kind = waiting.pop()
        waiting.extend(typing.get_args(kind))
        fields = getattr(kind, "__attrs_attrs__", None)
        if isinstance(kind, type) and fields is not None and kind not in seen:
            seen.add(kind)
            yield kind
            waiting.extend(field.type for field in fields)


class ServerHooks(Protocol):
    """What the protocol asks of the server (:class:`.server.DshLanguageServer`)."""

    def touch(self) -> None: ...

    def cancel_command(self, msg_id: int | str) -> None: ...


@dataclass(frozen=True)
class InvalidMessage:
    """A request whose params did not fit the method's type: answered with InvalidParams."""

    id: int | str
    method: str
    error: JsonRpcException


class DshProtocol(LanguageServerProtocol):
    """pygls' protocol with the server's own documents, a safe shutdown and answered bad requests."""

    _server: Any  # a ServerHooks; pygls types it as its own server class

    def __init__(self, server: LanguageServer, converter: Any) -> None:
        super().__init__(server, converter)
        # pygls calls its built-in handler of a method before the server's feature: without the
        # document ones, the server's features keep the documents (:mod:`.documents`) and pygls'
        # workspace (which splits lines where editors do not, the whole text per keystroke) has none.
        for method in _DOCUMENT_NOTIFICATIONS:
            self.fm.builtin_features.pop(method, None)
        self.initialize_received = False
        """Whether ``initialize`` has come: before it, the LSP answers requests ServerNotInitialized
        and drops notifications (pygls ran them, and the first failed on the capabilities it lacked)."""

    @property
    def hooks(self) -> ServerHooks:
        hooks: ServerHooks = self._server
        return hooks

    @property
    def shutting_down(self) -> bool:
        """Whether ``shutdown`` has been received."""
        return bool(self._shutdown)

    def prepare_initialize(self, waiting: Callable[[], bool]) -> None:
        """Have cattrs write its functions for ``initialize``'s params (about 85 classes of client
        capabilities) and answer while ``waiting()`` is false, one class at a time: the first
        ``initialize`` otherwise wrote them before it could be answered (60 ms of the server's CPU,
        more on the cores an editor's start shares), while a server spawned as the extension's code
        loads is usually idle until its client sends it. A message arriving stops it: what is left
        is written as that message needs it."""
        converter = self._converter
        for kind in _classes_within(types.InitializeRequest):
            if waiting():
                return
            converter.get_structure_hook(kind)
        for kind in INITIALIZE_ANSWER:
            if waiting():
                return
            converter.get_unstructure_hook(kind)

    def send_raw(self, data: dict[str, Any]) -> None:
        """Send a message that is no answer to a parsed request (a parse error's)."""
        self._send_data(data)

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
        # A notification, or a step of a built-in handler (executeCommand...): pygls 2.1
        # files it under a fresh id in ``_request_futures`` and never removes it, so every such
        # notification and command would stay in memory for the whole session.
        future = self._request_futures.get(msg_id)
        if future is not None:
            future.add_done_callback(lambda _: self._request_futures.pop(msg_id, None))

    def _send_handler_result(self, future: Any, *, msg_id: int | str) -> None:
        """A request's answer. An error a handler raises on purpose (a ``JsonRpcException``: a
        broken or unknown mention, a document that is not open, a bad argument) answers an
        ordinary mistake: one line at info, where pygls logs a traceback at error (which editors
        show as the server failing). Anything else is a bug and keeps pygls' traceback."""
        if not future.cancelled():
            error = future.exception()
            if isinstance(error, JsonRpcException) and not isinstance(error, JsonRpcInternalError):
                self._request_futures.pop(msg_id, None)
                LOG.info("request %r answered with an error: %s", msg_id, error)
                self._send_response(msg_id, error=error.to_response_error())
                return
        super()._send_handler_result(future, msg_id=msg_id)

    def _handle_cancel_notification(self, msg_id: int | str) -> None:
        if not isinstance(msg_id, (int, str)):
            # lsprotocol types the id loosely; a dict id would raise deep inside pygls' reader.
            LOG.warning("ignoring $/cancelRequest with an invalid id %r", msg_id)
            return
        # pygls cancels only the outer future of workspace/executeCommand; stop the command too.
        self.hooks.cancel_command(msg_id)
        if msg_id not in self._request_futures:
            # The answer went out before the cancel arrived: the normal race of a client that
            # cancels as you type. pygls logs it as a warning, which editors show as an error.
            LOG.debug("$/cancelRequest for %r, already answered", msg_id)
            return
        super()._handle_cancel_notification(msg_id)

    def answer_cancelled(self, msg_id: int | str) -> None:
        """Answer a request its client cancelled before it started, as pygls answers a cancelled
        one (``RequestCancelled``), without structuring it or starting its handler."""
        self.hooks.touch()
        self._refuse(msg_id, types.LSPErrorCodes.RequestCancelled, f'Request with id "{msg_id}" is canceled')

    def structure_message(self, data: dict[str, Any]) -> Any:
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            if "id" in data and isinstance(data.get("method"), str):
                return InvalidMessage(data["id"], data["method"], error)
            raise

    def handle_message(self, message: Any) -> None:
        self.hooks.touch()
        if isinstance(message, InvalidMessage):
            reason = message.error.__cause__ or message.error
            LOG.warning("invalid params for %s (id %r): %s", message.method, message.id, reason)
            self._refuse(
                message.id, types.ErrorCodes.InvalidParams, f"invalid params for {message.method}: {reason}"
            )
            return
        method = getattr(message, "method", None)
        request = method is not None and getattr(message, "id", None) is not None
        if method == types.INITIALIZE:
            self.initialize_received = True
        elif not self.initialize_received and method not in (None, types.EXIT):
            if request:
                not_yet = f"{method}: the server is not initialized (initialize comes first)"
                self._refuse(message.id, types.ErrorCodes.ServerNotInitialized, not_yet)
            else:
                LOG.debug("dropped %s: it came before initialize", method)
            return
        if self._shutdown and request and method != types.EXIT:
            # LSP: requests after shutdown error with InvalidRequest; pygls drops them unanswered,
            # which leaves the client waiting until its own timeout.
            shutting_down = f"{method}: the server is shutting down"
            self._refuse(message.id, types.ErrorCodes.InvalidRequest, shutting_down)
            return
        super().handle_message(message)

    def _refuse(self, msg_id: int | str, code: int, text: str) -> None:
        """Answer the request ``msg_id`` with an error, without running it."""
        self._send_response(msg_id, error=types.ResponseError(code=code, message=text))


def client_process(client: LanguageClient) -> asyncio.subprocess.Process | None:
    """The server process a pygls client started with ``start_io`` (the demo drains its stderr)."""
    process: asyncio.subprocess.Process | None = client._server
    return process


def own_stop_event(server: JsonRPCServer) -> threading.Event:
    """Give ``server`` the event its ``shutdown`` sets, for a loop pygls does not run (:mod:`.transport`)."""
    server._stop_event = stop = threading.Event()
    return stop
