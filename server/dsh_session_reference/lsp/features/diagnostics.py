"""The diagnostics feature: ``textDocument/diagnostic`` for clients that pull, pushed diagnostics
for the others, each from the document's one analysis."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import ClassVar, Final

from lsprotocol import types

from ..contract import Analysed, Feature, Handler, Services, ask_client
from ..diagnostics import SOURCE, to_diagnostics

DIAGNOSTIC_DELAY: Final = 0.12
"""Seconds of quiet after a change before pushed diagnostics are recomputed."""


class Diagnostics(Feature):
    """Esbonio's rule: push only to clients without ``textDocument/diagnostic``. Owns the pushes
    waiting for their quiet moment (one per document, the newest)."""

    uses: ClassVar = frozenset(
        {
            "analysis",
            "capability",
            "encoding",
            "pull_diagnostics",
            "spawn",
            "text_document_publish_diagnostics",
            "workspace_diagnostic_refresh_async",
        }
    )
    reads: ClassVar = "the findings (to_diagnostics)"

    def __init__(self, ls: Services) -> None:
        super().__init__(ls)
        self.pending: dict[str, asyncio.Task[None]] = {}
        """A push waiting for quiet after an edit, per document."""

    def handlers(self) -> Sequence[Handler]:
        options = types.DiagnosticOptions(
            identifier=SOURCE, inter_file_dependencies=False, workspace_diagnostics=False
        )
        return (Handler(types.TEXT_DOCUMENT_DIAGNOSTIC, self.diagnostic, options, reads_store=True),)

    async def diagnostic(
        self, params: types.DocumentDiagnosticParams
    ) -> types.RelatedFullDocumentDiagnosticReport:
        result = await self.ls.analysis(params.text_document.uri)
        items = [] if result is None else self._diagnostics(result, push=False)
        return types.RelatedFullDocumentDiagnosticReport(items=items)

    # --- pushed -------------------------------------------------------------------------------------

    def opened(self, uri: str) -> None:
        if not self.ls.pull_diagnostics:
            self._schedule(uri, 0)

    def changed(self, uri: str) -> None:
        if not self.ls.pull_diagnostics:
            self._schedule(uri, DIAGNOSTIC_DELAY)

    def closed(self, uri: str) -> None:
        pending = self.pending.pop(uri, None)
        if pending is not None:
            pending.cancel()
        if not self.ls.pull_diagnostics:
            self._publish(uri, [])

    def redraw(self, uris: Iterable[str]) -> None:
        """Pushed again, or asked for again by a client that pulls them and takes refresh requests."""
        if not self.ls.pull_diagnostics:
            for uri in uris:
                self._schedule(uri, 0)
        elif self.ls.capability("workspace.diagnostics.refresh_support", False):
            self.ls.spawn(ask_client(self.ls.workspace_diagnostic_refresh_async))

    def _schedule(self, uri: str, delay: float) -> None:
        previous = self.pending.pop(uri, None)
        if previous is not None:
            previous.cancel()
        self.pending[uri] = self.ls.spawn(self._publish_after(uri, delay))

    async def _publish_after(self, uri: str, delay: float) -> None:
        if delay:
            await asyncio.sleep(delay)
        result = await self.ls.analysis(uri)
        if result is not None and result.current:
            self._publish(uri, self._diagnostics(result, push=True), result.version)
        if self.pending.get(uri) is asyncio.current_task():
            del self.pending[uri]

    def _diagnostics(self, result: Analysed, *, push: bool) -> list[types.Diagnostic]:
        path = "text_document.publish_diagnostics" if push else "text_document.diagnostic"
        tags = types.DiagnosticTag.Unnecessary in (self.ls.capability(f"{path}.tag_support.value_set") or [])
        return to_diagnostics(result.analysis, result.index, self.ls.encoding, tags_supported=tags)

    def _publish(self, uri: str, diagnostics: Sequence[types.Diagnostic], version: int | None = None) -> None:
        if not self.ls.capability("text_document.publish_diagnostics.version_support", False):
            version = None
        self.ls.text_document_publish_diagnostics(
            types.PublishDiagnosticsParams(uri=uri, diagnostics=list(diagnostics), version=version)
        )
