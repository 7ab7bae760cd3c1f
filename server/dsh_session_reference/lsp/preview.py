"""The "Preview referenced-session context" document and the status-bar summary.

The preview runs the real ``parse`` + ``prepare`` on the document, so what it
shows is what dsh would send, and renders it with :mod:`..report`, the same
text ``dsh-session-reference prepare`` prints. It lives at a ``dsh-preview:``
URI that clients with LSP 3.18 virtual documents open read-only.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, unquote, urlsplit

from ..analysis import Analysis
from ..display import display_label
from ..errors import SessionReferenceError
from ..jsjson import js_byte_length
from ..report import render_prepared_report
from ..resolver import AgentRef, PreparedMessage, SessionReferenceResolver
from ..snapshot import build_additional_context
from ..tokens import COUNTER, TokenCount
from ..uri import parse_session_reference_text

PREVIEW_SCHEME: Final = "dsh-preview"


@dataclass(frozen=True)
class Preview:
    """``dshSessionReference.preview``'s result: ``{uri, text, summary, ok}``."""

    uri: str
    text: str
    summary: str
    ok: bool

    def to_json(self) -> dict[str, Any]:
        return {"uri": self.uri, "text": self.text, "summary": self.summary, "ok": self.ok}


MAX_KEPT: Final = 16
"""Previews whose text is kept (the newest)."""


class KeptPreviews:
    """The text of each preview served, by its URI: what a preview of a document that can no
    longer be read (closed and untitled) shows, and which previews a store change may alter. At
    most :data:`MAX_KEPT`, and a document's goes when it closes."""

    def __init__(self) -> None:
        self._texts: OrderedDict[str, str] = OrderedDict()

    def keep(self, preview: Preview) -> None:
        self._texts[preview.uri] = preview.text
        self._texts.move_to_end(preview.uri)
        while len(self._texts) > MAX_KEPT:
            self._texts.popitem(last=False)

    def forget(self, document_uri: str) -> None:
        self._texts.pop(preview_uri(document_uri), None)

    def text(self, uri: str) -> str | None:
        return self._texts.get(uri)

    @property
    def uris(self) -> list[str]:
        return list(self._texts)


def preview_uri(document_uri: str) -> str:
    """``dsh-preview:/<name> (context).txt?<document uri>``: readable in a tab, reversible."""
    name = urlsplit(document_uri).path.rsplit("/", 1)[-1] or "untitled"
    return f"{PREVIEW_SCHEME}:/{quote(unquote(name) + ' (context).txt')}?{quote(document_uri, safe='')}"


def document_of_preview(uri: str) -> str | None:
    """The document a preview URI was made for (``None`` for anything else)."""
    parts = urlsplit(uri)
    if parts.scheme != PREVIEW_SCHEME or not parts.query:
        return None
    return unquote(parts.query)


async def build_preview(
    document_uri: str,
    text: str,
    resolver: SessionReferenceResolver,
    agent: AgentRef,
    target_label: str | None = None,
) -> Preview:
    """Parse and prepare ``text`` as dsh would, and render the result or the failure.

    ``target_label``: the target session's title, shown with its id (a bare id tells a reader
    nothing)."""
    if agent.id is None:
        target = "none (no session excluded; sessions in the workspace folder rank first)"
    elif target_label is not None and target_label != agent.id:
        target = f"{display_label(target_label)} ({display_label(agent.id)})"
    else:
        target = display_label(agent.id)
    header = [
        "Referenced-session context preview",
        f"document: {_document_name(document_uri)}",
        f"target session: {target}",
        "",
    ]
    try:
        parsed = await asyncio.to_thread(parse_session_reference_text, text)
        prepared: PreparedMessage = await resolver.prepare(
            agent, [{"type": "text", "text": parsed.text}], parsed.references
        )
    except SessionReferenceError as error:
        summary = f"prepare failed: {error.code}: {error.message}"
        body = [
            summary,
            "",
            "dsh would not send this message; fix the mentions flagged in the document and preview again.",
        ]
        return Preview(preview_uri(document_uri), "\n".join(header + body) + "\n", summary, False)
    report = await asyncio.to_thread(
        render_prepared_report, parsed.text, prepared, resolver.config, for_reading=True
    )
    context = prepared.additional_context
    message_bytes = js_byte_length(parsed.text)
    message_tokens = await asyncio.to_thread(COUNTER.count, parsed.text)  # kept from the report: at once
    if context is None:
        summary = f"no sessions referenced; message {message_bytes} bytes ({message_tokens.describe()})"
    else:
        total = message_bytes + context.text_bytes
        count = len(context.sources)
        tokens = message_tokens + await asyncio.to_thread(COUNTER.count, context.text)
        summary = (
            f"{count} session{'s' if count != 1 else ''} referenced; "
            f"{total} bytes in all ({tokens.describe()}), snapshot {context.text_bytes} bytes"
        )
    return Preview(preview_uri(document_uri), "\n".join(header) + report + "\n", summary, True)


def _document_name(document_uri: str) -> str:
    """A ``file:`` document's path (what a person recognises), any other URI as it is."""
    parts = urlsplit(document_uri)
    return unquote(parts.path) if parts.scheme == "file" and parts.path else document_uri


def document_summary(analysis: Analysis) -> dict[str, Any]:
    """``dshSessionReference.documentSummary``:
    ``{mentions, sessions, errors, bytes, tokens, tokensExact}``.

    ``bytes`` is what both user messages would weigh (readable text plus the
    snapshot), ``None`` while the document has errors and prepare would fail;
    ``tokens`` their tokens, DeepSeek's own count when ``tokensExact``, else an estimate.
    Blocking (a first count of a big snapshot takes tens of milliseconds).
    """
    errors = analysis.error_count
    total: int | None = None
    tokens: TokenCount | None = None
    if errors == 0:
        readable = parse_session_reference_text(analysis.text).text
        total = js_byte_length(readable)
        tokens = COUNTER.count(readable)
        rendered = [reference.retained for reference in analysis.references if reference.retained is not None]
        if rendered:
            context = build_additional_context(rendered)
            total += context.text_bytes
            tokens += COUNTER.count(context.text)
    return {
        "mentions": analysis.mention_count,
        "sessions": len(analysis.references),
        "errors": errors,
        "bytes": total,
        "tokens": None if tokens is None else tokens.tokens,
        "tokensExact": tokens is not None and tokens.exact,
    }


def referenced_sessions(analysis: Analysis) -> list[dict[str, Any]]:
    """``documentSummary``'s ``references``: ``[{sessionId, label, mentions}]``, the sessions the
    document references within ``maxReferences``, in ``prepare``'s order (a self reference, and
    the sessions past the limit, are errors already): what a picker offers to replace when a
    pick would go past the limit. ``label`` is the session's title (else the first mention's
    label), as a row shows it."""
    out: list[dict[str, Any]] = []
    for reference in analysis.references:
        if reference.index is None or reference.index >= analysis.max_references:
            continue
        label = display_label(reference.title if reference.title is not None else reference.label)
        out.append({"sessionId": reference.session_id, "label": label, "mentions": len(reference.spans)})
    return out
