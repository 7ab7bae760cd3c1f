"""The server's lifecycle: ``initialize``, ``initialized``, settings, the documents' open, change
and close, and ``shutdown``, each handed to the server's services, which tell the other features.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections.abc import Sequence
from typing import ClassVar

from lsprotocol import types
from pygls.capabilities import ServerCapabilitiesBuilder
from pygls.exceptions import JsonRpcException

from ...assembly import dsh_profile_budgets as profile_budgets
from ..contract import Feature, Handler
from ..positions import encoding_of
from ..preview import PREVIEW_SCHEME
from ..progress import CLIENT_REQUEST_TIMEOUT, follow_background
from ..sessions import TRANSCRIPT_SCHEME

LOG = logging.getLogger(__name__)


class Lifecycle(Feature):
    """Starts and stops the server's services and keeps its documents; owns nothing. Registers
    ``workspace/textDocumentContent`` with the client after ``initialized`` where the client
    takes dynamic registration (pygls never advertises it)."""

    uses: ClassVar = frozenset(
        {
            "live",
            "idle_gc",
            "encoding",
            "settings",
            "apply",
            "adopt_profile",
            "capability",
            "client_register_capability_async",
            "content_registered",
            "reconfigure",
            "settings_changed",
            "report_root",
            "spawn",
            "list_ahead",
            "warm_up",
            "documents",
            "opened",
            "changed",
            "closed",
            "stop_everything",
        }
    )

    def handlers(self) -> Sequence[Handler]:
        return (
            Handler(types.INITIALIZE, self.initialize),
            Handler(types.INITIALIZED, self.initialized),
            Handler(types.WORKSPACE_DID_CHANGE_CONFIGURATION, self.did_change_configuration),
            Handler(types.TEXT_DOCUMENT_DID_OPEN, self.did_open),
            Handler(types.TEXT_DOCUMENT_DID_CHANGE, self.did_change),
            Handler(types.TEXT_DOCUMENT_DID_CLOSE, self.did_close),
            Handler(types.SHUTDOWN, self.shutdown),
        )

    def initialize(self, params: types.InitializeParams) -> None:
        ls = self.ls
        ls.live.loop = asyncio.get_running_loop()
        ls.idle_gc.start(asyncio.get_running_loop())
        ls.encoding = encoding_of(ServerCapabilitiesBuilder.choose_position_encoding(params.capabilities))
        ls.apply(params.initialization_options)
        # Before any request is served (two small bounded reads): the first preview is at dsh's budgets.
        ls.adopt_profile(profile_budgets(ls.settings.profile))
        ls.spawn(ls.list_ahead())  # after this answer is sent: the task starts on the next turn

    async def initialized(self, params: types.InitializedParams) -> None:
        ls = self.ls
        if ls.capability("workspace.text_document_content.dynamic_registration", False):
            registration = types.Registration(
                id=str(uuid.uuid4()),
                method=types.WORKSPACE_TEXT_DOCUMENT_CONTENT,
                register_options=types.TextDocumentContentRegistrationOptions(
                    schemes=[PREVIEW_SCHEME, TRANSCRIPT_SCHEME]
                ),
            )
            try:
                await asyncio.wait_for(
                    ls.client_register_capability_async(
                        types.RegistrationParams(registrations=[registration])
                    ),
                    CLIENT_REQUEST_TIMEOUT,
                )
                ls.content_registered = True
            except (JsonRpcException, TimeoutError) as error:
                LOG.warning("could not register %s: %s", types.WORKSPACE_TEXT_DOCUMENT_CONTENT, error)
        if await ls.reconfigure():
            await ls.settings_changed()
        else:
            ls.report_root()
            ls.spawn(ls.warm_up())
        ls.spawn(follow_background(ls))

    async def did_change_configuration(self, params: types.DidChangeConfigurationParams) -> None:
        if await self.ls.reconfigure(params.settings):
            await self.ls.settings_changed()

    def did_open(self, params: types.DidOpenTextDocumentParams) -> None:
        self.ls.documents.open(params.text_document)
        self.ls.opened(params.text_document.uri)

    def did_change(self, params: types.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        self.ls.documents.change(uri, params.text_document.version, params.content_changes, self.ls.encoding)
        self.ls.changed(uri)

    def did_close(self, params: types.DidCloseTextDocumentParams) -> None:
        self.ls.closed(params.text_document.uri)

    def shutdown(self, params: None) -> None:
        self.ls.idle_gc.stop()
        self.ls.stop_everything()
