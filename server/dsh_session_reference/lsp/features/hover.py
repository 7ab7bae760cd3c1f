"""The hover feature: ``textDocument/hover`` on a mention, from the document's analysis."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from lsprotocol import types

from ..contract import Feature, Handler
from ..hover import hover_text
from .completion import now_ms


class Hover(Feature):
    """Owns nothing."""

    uses: ClassVar = frozenset({"analysis", "encoding", "markdown"})
    reads: ClassVar = "the mention at the cursor: its span, reference and retained source (hover_text)"

    def handlers(self) -> Sequence[Handler]:
        return (Handler(types.TEXT_DOCUMENT_HOVER, self.hover, reads_store=True),)

    async def hover(self, params: types.HoverParams) -> types.Hover | None:
        ls = self.ls
        result = await ls.analysis(params.text_document.uri)
        if result is None:
            return None
        offset = result.index.offset_at(params.position, ls.encoding)
        markdown = ls.markdown("text_document.hover.content_format")
        found = hover_text(result.analysis, offset, markdown=markdown, now_ms=now_ms())
        if found is None:
            return None
        text, span = found
        kind = types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText
        return types.Hover(
            contents=types.MarkupContent(kind=kind, value=text),
            range=result.index.range_of(span.start, span.end, ls.encoding),
        )
