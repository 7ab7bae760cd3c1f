"""The virtual documents feature: ``workspace/textDocumentContent`` for ``dsh-preview:`` and
``dsh-transcript:`` URIs (registered with the client by :mod:`.lifecycle`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from ..commands import preview_of, transcript_of
from ..contract import Feature, Handler
from ..preview import document_of_preview, is_model_text
from ..sessions import session_of_transcript


class Content(Feature):
    """Serves what the commands serve (:func:`..commands.preview_of`, :func:`..commands.transcript_of`),
    and a preview kept since (``previews``); owns nothing."""

    uses: ClassVar = frozenset({"previews"})
    reads: ClassVar = "the whole analysis, through the preview (build_preview, build_model_text)"

    def handlers(self) -> Sequence[Handler]:
        return (Handler(types.WORKSPACE_TEXT_DOCUMENT_CONTENT, self.content, reads_store=True),)

    async def content(self, params: types.TextDocumentContentParams) -> types.TextDocumentContentResult:
        if session_of_transcript(params.uri) is not None:
            return types.TextDocumentContentResult(text=(await transcript_of(self.ls, params.uri))[1].text)
        document_uri = document_of_preview(params.uri)
        if document_uri is not None:
            preview = await preview_of(self.ls, document_uri, model_text=is_model_text(params.uri))
            if preview is not None:
                return types.TextDocumentContentResult(text=preview.text)
        stored = self.ls.previews.text(params.uri)
        if stored is not None:
            return types.TextDocumentContentResult(text=stored)
        raise JsonRpcInvalidParams(f"no preview for {params.uri}")
