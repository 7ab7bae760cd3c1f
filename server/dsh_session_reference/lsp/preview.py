"""The "Preview referenced-session context" document, the exact model-facing text, and the
status-bar summary.

Both documents are made from the document's analysis, which holds ``prepare``'s own reads and
retention of every source (the tested invariant: no error findings iff ``prepare`` succeeds), so
what they show is what dsh would send; where the analysis has errors, upstream's error is that of
``prepare``'s first failing step, found in the analysis too: no log is read again for a preview.
They are rendered by :mod:`..report`: the preview for reading, the model text exactly as
``dsh-session-reference prepare`` prints it. They live at ``dsh-preview:`` URIs that clients with
LSP 3.18 virtual documents open read-only.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import quote, unquote, urlsplit

from ..analysis import Analysis, Reference
from ..display import display_block_text, display_label, kilobytes, size, wrapped
from ..errors import INVALID_REFERENCE, SessionReferenceError
from ..jsjson import js_byte_length
from ..resolver import AgentRef, PreparedMessage, SessionReferenceResolver, normalize_references
from ..snapshot import build_additional_context
from ..tokens import COUNTER, TokenCount
from ..uri import parse_prompt_text

PREVIEW_SCHEME: Final = "dsh-preview"


@dataclass(frozen=True)
class Preview:
    """``dshSessionReference.preview``'s result: ``{uri, text, summary, ok}``."""

    uri: str
    text: str
    summary: str
    ok: bool


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
        """Drop both previews of a closed document: the context and the model text."""
        for model_text in (False, True):
            self._texts.pop(preview_uri(document_uri, model_text=model_text), None)

    def text(self, uri: str) -> str | None:
        return self._texts.get(uri)

    @property
    def uris(self) -> list[str]:
        return list(self._texts)


CONTEXT_SUFFIX: Final = " (context).txt"
MODEL_TEXT_SUFFIX: Final = " (model text).txt"


def preview_uri(document_uri: str, *, model_text: bool = False) -> str:
    """``dsh-preview:/<name> (context).txt?<document uri>``: readable in a tab, reversible; with
    ``model_text``, ``… (model text).txt``: the exact text the model receives."""
    name = urlsplit(document_uri).path.rsplit("/", 1)[-1] or "untitled"
    suffix = MODEL_TEXT_SUFFIX if model_text else CONTEXT_SUFFIX
    return f"{PREVIEW_SCHEME}:/{quote(unquote(name) + suffix)}?{quote(document_uri, safe='')}"


def document_of_preview(uri: str) -> str | None:
    """The document a preview URI (either kind) was made for (``None`` for anything else)."""
    parts = urlsplit(uri)
    if parts.scheme != PREVIEW_SCHEME or not parts.query:
        return None
    return unquote(parts.query)


def is_model_text(uri: str) -> bool:
    """Whether a preview URI is of the exact model-facing text."""
    return unquote(urlsplit(uri).path).endswith(MODEL_TEXT_SUFFIX)


MODEL_TEXT_COMMAND: Final = "DSH: Show model-facing text"


def _sources(analysis: Analysis) -> list[Reference]:
    """The references ``prepare`` reads, in its order: the distinct ones within ``maxReferences``."""
    return [r for r in analysis.references if r.index is not None and r.index < analysis.max_references]


def _prepared(analysis: Analysis) -> tuple[str, PreparedMessage]:
    """The readable text and ``prepare``'s result, from the analysis that already holds every
    source's read and retention (the tested invariant: no error findings iff ``prepare``
    succeeds, with the same retention, :meth:`~..resolver.SessionReferenceResolver.render_sources`)."""
    readable = parse_prompt_text(analysis.text).text
    retained = [r.retained for r in _sources(analysis) if r.retained is not None]
    context = build_additional_context(retained) if retained else None
    return readable, PreparedMessage([{"type": "text", "text": readable}], context)


def _weight(readable: str, prepared: PreparedMessage) -> tuple[int, TokenCount]:
    """What both user messages weigh together, in bytes and tokens (the readable text, and the
    snapshot where there is one). Blocking (a first count of a big snapshot takes tens of ms)."""
    context = prepared.additional_context
    total, tokens = js_byte_length(readable), COUNTER.count(readable)
    if context is not None:
        total += context.text_bytes
        tokens += COUNTER.count(context.text)
    return total, tokens


def _failure(analysis: Analysis, agent: AgentRef) -> SessionReferenceError | None:
    """Why ``prepare`` rejects the document, in upstream's words, or ``None`` when it would not.

    ``prepare``'s steps in its order, none of them reading a log again: the strict parse and the
    references' checks, then the first source the analysis could not read (``prepare`` reads every
    source before it retains any), then the first that cannot fit the budget; the analysis read
    and retained each one as ``prepare`` does. Blocking (the parse of a big document)."""
    if not analysis.has_errors:
        return None
    try:
        parsed = parse_prompt_text(analysis.text)
        normalize_references(agent.id, parsed.references, analysis.max_references)
    except SessionReferenceError as error:
        return error
    failed = [r for r in _sources(analysis) if r.error is not None]
    failed.sort(key=lambda r: r.snapshot is not None)  # unread first: prepare reads all, then retains
    if failed:
        return failed[0].error
    first = next(finding for finding in analysis.findings if finding.severity == "error")
    return SessionReferenceError(first.message, INVALID_REFERENCE)  # the analysis and prepare disagree


async def build_preview(
    document_uri: str,
    analysis: Analysis,
    resolver: SessionReferenceResolver,
    agent: AgentRef,
    target_label: str | None = None,
) -> Preview:
    """The preview of an analysed document: what dsh would send, for reading (the totals, each
    session's accounting and the messages the model reads of it, the readable message), or why
    dsh would not send it.

    ``target_label``: the target session's title, shown with its id (a bare id tells a reader
    nothing)."""
    # The renderer (and the transcript view it uses) only once a preview is asked for: this module
    # is imported at the server's start (KeptPreviews), which need not pay for it.
    from ..report import render_readable_report

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
    uri = preview_uri(document_uri)
    error = await asyncio.to_thread(_failure, analysis, agent)
    if error is not None:
        summary = f"prepare failed: {error.code}: {error.message}"
        body = [
            wrapped(display_block_text(summary)),
            "",
            "dsh would not send this message; fix the mentions flagged in the document and preview again.",
        ]
        return Preview(uri, "\n".join(header + body) + "\n", summary, False)
    readable, prepared = await asyncio.to_thread(_prepared, analysis)
    snapshots = [r.snapshot for r in _sources(analysis) if r.snapshot is not None]
    exact = (
        f'The exact text the model receives: "{MODEL_TEXT_COMMAND}",\n'
        f"or in a terminal `dsh-session-reference prepare {_document_name(document_uri)}`."
    )
    report = await asyncio.to_thread(
        render_readable_report, readable, prepared, resolver.config, snapshots, exact
    )
    context = prepared.additional_context
    total, tokens = await asyncio.to_thread(_weight, readable, prepared)  # counts kept from the report
    if context is None:
        summary = f"no sessions referenced; message {size(total)}, {tokens.describe()}"
    else:
        count = len(context.sources)
        summary = (
            f"{count} session{'s' if count != 1 else ''} referenced; "
            f"{size(total)} in all, {tokens.describe()}; snapshot {kilobytes(context.text_bytes)} KB"
        )
    return Preview(uri, "\n".join([*header, report]) + "\n", summary, True)


async def build_model_text(
    document_uri: str, analysis: Analysis, resolver: SessionReferenceResolver, agent: AgentRef
) -> Preview:
    """The exact model-facing text of an analysed document: what ``dsh-session-reference prepare``
    prints for it, byte for byte (or the error ``prepare`` fails with)."""
    from ..report import render_prepared_report  # as in build_preview: asked for, not at the start

    uri = preview_uri(document_uri, model_text=True)
    error = await asyncio.to_thread(_failure, analysis, agent)
    if error is not None:
        summary = f"prepare failed: {error.code}: {error.message}"
        return Preview(uri, f"error: {error.code}: {error.message}\n", summary, False)
    readable, prepared = await asyncio.to_thread(_prepared, analysis)
    text = await asyncio.to_thread(render_prepared_report, readable, prepared, resolver.config)
    return Preview(uri, text + "\n", "the exact model-facing text", True)


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
    total, tokens = _weight(*_prepared(analysis)) if errors == 0 else (None, None)
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
    return [
        {
            "sessionId": reference.session_id,
            "label": display_label(reference.title if reference.title is not None else reference.label),
            "mentions": len(reference.spans),
        }
        for reference in _sources(analysis)
    ]
