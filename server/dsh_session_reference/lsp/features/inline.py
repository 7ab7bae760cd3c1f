"""The inline costs feature: ``textDocument/inlayHint`` after each mention and
``textDocument/codeLens`` over the first, from the document's analysis."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import ClassVar

from lsprotocol import types

from ..actions import PREVIEW_COMMAND
from ..contract import Feature, Handler, ask_client
from ..inline import code_lenses, inlay_hints
from ..preview import document_summary


class InlineCosts(Feature):
    """Answers only for the analysis of the text the document still holds when the answer goes
    (a stale one would place hints and lenses at old offsets); owns nothing. Turned off by the
    ``inlayHints`` and ``codeLens`` settings."""

    uses: ClassVar = frozenset(
        {
            "settings",
            "analysis",
            "encoding",
            "client_command",
            "capability",
            "spawn",
            "workspace_inlay_hint_refresh_async",
            "workspace_code_lens_refresh_async",
        }
    )
    reads: ClassVar = "each included mention's retained source and tokens, and the document's totals"

    def handlers(self) -> Sequence[Handler]:
        return (
            Handler(
                types.TEXT_DOCUMENT_INLAY_HINT,
                self.inlay_hint,
                types.InlayHintOptions(resolve_provider=False),
                reads_store=True,
            ),
            Handler(
                types.TEXT_DOCUMENT_CODE_LENS,
                self.code_lens,
                types.CodeLensOptions(resolve_provider=False),
                reads_store=True,
            ),
        )

    def redraw(self, uris: Iterable[str]) -> None:
        """Hints and lenses show figures for the budget and the root: the client asks again."""
        if self.ls.capability("workspace.inlay_hint.refresh_support", False):
            self.ls.spawn(ask_client(self.ls.workspace_inlay_hint_refresh_async))
        if self.ls.capability("workspace.code_lens.refresh_support", False):
            self.ls.spawn(ask_client(self.ls.workspace_code_lens_refresh_async))

    async def inlay_hint(self, params: types.InlayHintParams) -> list[types.InlayHint]:
        ls = self.ls
        if not ls.settings.inlay_hints:
            return []
        result = await ls.analysis(params.text_document.uri)
        if result is None or not result.current:
            return []
        start = result.index.offset_at(params.range.start, ls.encoding)
        end = result.index.offset_at(params.range.end, ls.encoding)
        return inlay_hints(result.analysis, result.index, ls.encoding, start, end)

    async def code_lens(self, params: types.CodeLensParams) -> list[types.CodeLens]:
        ls = self.ls
        if not ls.settings.code_lens:
            return []
        uri = params.text_document.uri
        # Neovim 0.7 keeps a late answer whatever text it was asked about, and drops the refresh
        # it asks for meanwhile: an edit that lands while the total is made gets the lenses
        # made again for the newer text, never the old text's lines.
        while (result := await ls.analysis(uri)) is not None:
            summary = await asyncio.to_thread(document_summary, result.analysis)
            if result.current:
                preview = types.Command(
                    "Preview", ls.client_command("previewCommand") or PREVIEW_COMMAND, arguments=[uri]
                )
                return code_lenses(result.analysis, result.index, ls.encoding, summary, preview)
        return []
