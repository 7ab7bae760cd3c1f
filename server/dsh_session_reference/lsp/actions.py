"""Code actions: quick fixes for mentions, and the "Preview referenced-session context" source action.

Fixes are computed from the document's analysis (offsets), not from the
diagnostics the client echoes back, so they work the same in clients that send
no or stale diagnostics with the request. Every rewrite produces a mention the
strict parser accepts; labels are escaped as upstream's TUI did.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final

from lsprotocol import types

from ..analysis import (
    DUPLICATE_REFERENCE,
    MALFORMED_URI,
    NONCANONICAL_URI,
    SELF_REFERENCE,
    TOO_MANY_REFERENCES,
    UNKNOWN_SESSION,
    Analysis,
    quoted,
)
from ..display import display_label
from ..labels import STALE_LABEL, is_current_label, own_label
from ..lines import Encoding
from ..uri import MentionSpan, encode_session_reference_uri, format_session_reference_mention
from .diagnostics import SOURCE
from .positions import LineIndex

PREVIEW_COMMAND: Final = "dshSessionReference.preview"
PREVIEW_TITLE: Final = "Preview referenced-session context"
PREVIEW_KIND: Final = "source.dshSessionReference.preview"


@dataclass(frozen=True)
class Fix:
    """One quick fix: replace ``[start, end)`` of the analysed text with ``new_text``."""

    title: str
    start: int
    end: int
    new_text: str
    codes: tuple[str, ...]
    span: MentionSpan
    """The mention it fixes."""
    preferred: bool = False
    pick: bool = False
    """The edit leaves an ``@`` query: the client then opens completion, to pick a session."""


def fixes_for(analysis: Analysis, start: int, end: int) -> list[Fix]:
    """The quick fixes for every mention touching ``[start, end]``."""
    return [fix for span in analysis.spans_at(start, end) for fix in _span_fixes(analysis, span)]


def _span_fixes(analysis: Analysis, span: MentionSpan) -> Iterator[Fix]:
    if span.session_id is None:
        # Only a session the store has is worth rewriting to: a canonical URI of an id no session
        # has (``dsh-session:IiJ`` decodes to "") would be an error again at once.
        intended = analysis.intended.get(span.start)
        if intended is not None:
            canonical = encode_session_reference_uri(intended.session_id)
            if span.kind == "markdown":
                start, replace_end, new_text = span.uri_start, span.uri_start + len(span.uri), canonical
            else:
                # A bare URI becomes a labelled mention; one glued to a following word keeps the
                # word, separated by a space.
                # A raw id is all of the URI; a decoded one may be glued to a word after it.
                start, replace_end = span.start, span.end if intended.raw else span.uri_replace_end
                new_text = format_session_reference_mention(intended.session_id, intended.label)
                new_text += " " if replace_end < span.end else ""
            yield Fix(
                f"Use session {intended.name}",
                start,
                replace_end,
                new_text,
                (MALFORMED_URI, NONCANONICAL_URI),
                preferred=True,
                span=span,
            )
        else:
            query = display_label(span.label or "") if span.kind == "markdown" else ""
            yield Fix(
                "Pick a session for this mention…",
                span.start,
                span.end,
                "@" + query,
                (MALFORMED_URI, NONCANONICAL_URI),
                span=span,
                pick=True,
            )
    else:
        reference = analysis.reference_for(span.session_id)
        title = None if reference is None else reference.title
        if span.kind == "bare":
            label = display_label(span.session_id if title is None else title)
            yield Fix(
                f"Turn into a labelled mention @[{label}]",
                span.start,
                span.end,
                format_session_reference_mention(span.session_id, label),
                (),
                span=span,
            )
        elif (
            reference is not None
            and reference.record is not None
            and not is_current_label(span.label, own := own_label(title, span.session_id))
        ):
            label = display_label(own)
            what = "current title" if title is not None else "session's id (it has no title)"
            yield Fix(
                f"Refresh the label to the {what} {quoted(own)}",
                span.start,
                span.end,
                format_session_reference_mention(span.session_id, label),
                (STALE_LABEL,),
                preferred=True,
                span=span,
            )
    yield Fix(
        "Remove this mention",
        span.start,
        span.end,
        "",
        (
            MALFORMED_URI,
            NONCANONICAL_URI,
            SELF_REFERENCE,
            TOO_MANY_REFERENCES,
            UNKNOWN_SESSION,
            DUPLICATE_REFERENCE,
        ),
        span=span,
    )


def _kind_wanted(kind: str, only: Sequence[str] | None) -> bool:
    return not only or any(kind == wanted or kind.startswith(wanted + ".") for wanted in only)


def _overlaps(a: types.Range, b: types.Range) -> bool:
    return a.start <= b.end and b.start <= a.end  # lsprotocol orders positions by (line, character)


class _Overlapping:
    """The diagnostics overlapping each of a run of ranges asked for in document order (the fixes'
    mentions), in one sweep: a select-all over 10,000 mentions compared every diagnostic with every
    fix on the event loop, 100 million comparisons."""

    def __init__(self, diagnostics: list[types.Diagnostic]) -> None:
        self._waiting = sorted(diagnostics, key=lambda d: d.range.start, reverse=True)
        self._open: list[types.Diagnostic] = []

    def at(self, wanted: types.Range) -> list[types.Diagnostic]:
        """Those overlapping ``wanted``, whose start is at or after every range asked for before."""
        while self._waiting and self._waiting[-1].range.start <= wanted.end:
            self._open.append(self._waiting.pop())
        self._open = [d for d in self._open if wanted.start <= d.range.end]  # ended before: done with
        return [d for d in self._open if _overlaps(d.range, wanted)]


def code_actions(
    analysis: Analysis,
    index: LineIndex,
    encoding: Encoding,
    params: types.CodeActionParams,
    *,
    version: int | None,
    literal_support: bool,
    document_changes: bool,
    suggest_command: str | None = None,
) -> list[types.CodeAction | types.Command]:
    """``textDocument/codeAction``'s answer for one request.

    ``suggest_command``: the client-side command that opens completion, where the client
    declared one (``experimental.dshSessionReference.triggerSuggestCommand``; the VS Code
    extension does): only then is "Pick a session for this mention…" offered, as its edit
    alone would leave the user with an ``@`` and nothing to pick from."""
    uri = params.text_document.uri
    preview = types.Command(title=PREVIEW_TITLE, command=PREVIEW_COMMAND, arguments=[uri])
    if not literal_support:
        return [preview]
    only = params.context.only
    start = index.offset_at(params.range.start, encoding)
    end = max(start, index.offset_at(params.range.end, encoding))
    actions: list[types.CodeAction | types.Command] = []
    if _kind_wanted(types.CodeActionKind.QuickFix.value, only):
        ours = _Overlapping([d for d in params.context.diagnostics if d.source == SOURCE])
        for fix in fixes_for(analysis, start, end):
            if fix.pick and suggest_command is None:
                continue
            fix_range = index.range_of(fix.start, fix.end, encoding)
            edit = types.TextEdit(range=fix_range, new_text=fix.new_text)
            span_range = index.range_of(fix.span.start, fix.span.end, encoding)
            related = [d for d in ours.at(span_range) if d.code in fix.codes]
            actions.append(
                types.CodeAction(
                    title=fix.title,
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=related or None,
                    is_preferred=fix.preferred or None,
                    edit=workspace_edit(uri, version, [edit], document_changes=document_changes),
                    command=types.Command(title=fix.title, command=suggest_command)
                    if fix.pick and suggest_command is not None
                    else None,
                )
            )
    if _kind_wanted(PREVIEW_KIND, only):
        actions.append(types.CodeAction(title=PREVIEW_TITLE, kind=PREVIEW_KIND, command=preview))
    return actions


def workspace_edit(
    uri: str, version: int | None, edits: list[types.TextEdit], *, document_changes: bool
) -> types.WorkspaceEdit:
    """``edits`` to one document: checked against its version where the client takes versioned
    edits (``document_changes``), else as plain changes."""
    if document_changes:
        identifier = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
        return types.WorkspaceEdit(
            document_changes=[types.TextDocumentEdit(text_document=identifier, edits=edits)]
        )
    return types.WorkspaceEdit(changes={uri: edits})
