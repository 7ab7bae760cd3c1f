"""The sessions-as-places feature: ``textDocument/definition`` and ``textDocument/documentLink``
on a mention (its transcript), ``documentLink/resolve``, and sessions as ``workspace/symbol``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, Final

from lsprotocol import types

from ...model import MAX_TITLE_CHARS
from ..contract import Feature, Handler
from ..sessions import TOP, definition, document_links, link_to_resolve, resolve_link, workspace_symbols
from .completion import now_ms

MAX_SYMBOL_QUERY: Final = MAX_TITLE_CHARS
"""A longer ``workspace/symbol`` query is answered at once with nothing: titles are kept to this
length and ids are file names, so only a cwd that long could match, and a 2 MB query was matched
against every session's fields."""


class Places(Feature):
    """Owns nothing."""

    uses: ClassVar = frozenset({"analysis", "encoding", "agent_for", "engine", "cancel_grace"})
    reads: ClassVar = "each valid mention's span and reference (definition, document_links)"

    def handlers(self) -> Sequence[Handler]:
        return (
            Handler(types.TEXT_DOCUMENT_DEFINITION, self.definition, reads_store=True),
            Handler(
                types.TEXT_DOCUMENT_DOCUMENT_LINK,
                self.document_link,
                types.DocumentLinkOptions(resolve_provider=True),
                reads_store=True,
            ),
            Handler(types.DOCUMENT_LINK_RESOLVE, self.document_link_resolve, reads_store=True),
            Handler(types.WORKSPACE_SYMBOL, self.workspace_symbol, reads_store=True),
        )

    async def definition(self, params: types.DefinitionParams) -> types.Location | None:
        result = await self.ls.analysis(params.text_document.uri)
        if result is None:
            return None
        uri = definition(result.analysis, result.index.offset_at(params.position, self.ls.encoding))
        return None if uri is None else types.Location(uri=uri, range=TOP)

    async def document_link(self, params: types.DocumentLinkParams) -> list[types.DocumentLink]:
        uri = params.text_document.uri
        result = await self.ls.analysis(uri)
        return [] if result is None else document_links(result.analysis, result.index, self.ls.encoding, uri)

    async def document_link_resolve(self, link: types.DocumentLink) -> types.DocumentLink:
        wanted = link_to_resolve(link)
        if wanted is None:
            return link
        uri, session_id = wanted
        result = await self.ls.analysis(uri)
        return resolve_link(None if result is None else result.analysis, session_id, link)

    async def workspace_symbol(self, params: types.WorkspaceSymbolParams) -> list[types.SymbolInformation]:
        if len(params.query) > MAX_SYMBOL_QUERY:
            return []
        await self.ls.cancel_grace()
        agent = await self.ls.agent_for(None)
        candidates = await self.ls.engine.resolver.list_candidates(agent, params.query)
        return workspace_symbols(candidates, now_ms())
