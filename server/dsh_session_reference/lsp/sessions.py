"""Sessions as places: a mention's transcript (go to definition, document links), sessions as
workspace symbols, and the mention a picker inserts.

A transcript lives at a ``dsh-transcript:`` URI whose query is the session id, so any client can
ask for it again (``workspace/textDocumentContent``, or the ``dshSessionReference.transcript``
command where the client has no virtual documents); its path is only a readable tab name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final
from urllib.parse import quote, unquote, urlsplit

from lsprotocol import types

from ..analysis import Analysis
from ..candidates import label_for
from ..display import display_inline_text
from ..lines import Encoding
from ..model import SessionSource
from ..resolver import Candidate, find_titled
from .completion import mention_for
from .positions import LineIndex

TRANSCRIPT_SCHEME: Final = "dsh-transcript"
NAME_CHARS: Final = 60
"""A tab name's length at most (the session's title, shortened)."""
_TOP: Final = types.Position(line=0, character=0)
TOP: Final = types.Range(start=_TOP, end=_TOP)
"""Where a transcript is opened: its first line."""


def transcript_uri(session_id: str, title: str | None, label: str | None = None) -> str:
    """``dsh-transcript:/<title>.txt?<session id>``: the tab reads as the title, the query says
    which session. ``label``: the label a mention gives it, when not its title, as the fragment
    (retention's sizes depend on the label, so the transcript counts as that mention does)."""
    name = display_inline_text(title if title else session_id).replace("/", "∕").strip() or "session"
    if len(name) > NAME_CHARS:
        name = name[: NAME_CHARS - 1] + "…"
    uri = f"{TRANSCRIPT_SCHEME}:/{quote(name + '.txt')}?{quote(session_id, safe='')}"
    if label is not None and label != (display_inline_text(title) if title is not None else session_id):
        uri += "#" + quote(label, safe="")
    return uri


def transcript_target(uri: str) -> tuple[str, str | None] | None:
    """The session a transcript URI is of, and the mention's label it carries (``None``: the
    session's title); ``None`` for any other URI."""
    if urlsplit(uri).scheme != TRANSCRIPT_SCHEME or "?" not in uri:
        return None
    query = uri.split("?", 1)[1]
    session_id, marked, label = query.partition("#")
    return unquote(session_id), unquote(label) if marked else None


def session_of_transcript(uri: str) -> str | None:
    """The session a transcript URI is of (``None`` for any other URI)."""
    target = transcript_target(uri)
    return None if target is None else target[0]


def _linked(analysis: Analysis) -> list[tuple[int, int, str]]:
    """``(start, end, transcript URI)`` of each mention whose session the root lists, with the
    label ``prepare`` uses for it (its first mention's)."""
    found = []
    for reference in analysis.references:
        if reference.record is None:
            continue
        uri = transcript_uri(reference.session_id, reference.title, reference.label)
        for span in reference.spans:
            found.append((span.start, span.end, uri))
    return sorted(found)


def definition(analysis: Analysis, offset: int) -> str | None:
    """The transcript URI of the listed session mentioned at ``offset``."""
    for start, end, uri in _linked(analysis):
        if start <= offset <= end:
            return uri
    return None


def document_links(analysis: Analysis, index: LineIndex, encoding: Encoding) -> list[types.DocumentLink]:
    """A link over each mention of a listed session, to its transcript."""
    return [
        types.DocumentLink(
            range=index.range_of(start, end, encoding),
            target=uri,
            tooltip="Open the transcript of this session (read-only)",
        )
        for start, end, uri in _linked(analysis)
    ]


def location_of(session_id: str, title: str | None) -> types.Location:
    return types.Location(uri=transcript_uri(session_id, title), range=TOP)


def workspace_symbols(candidates: Sequence[Candidate]) -> list[types.SymbolInformation]:
    """``listCandidates``' answer as symbols, in its order (the client may re-sort by its own
    fuzzy score): each named by its label, in its working directory, at its transcript."""
    return [
        types.SymbolInformation(
            name=display_inline_text(candidate.label),
            kind=types.SymbolKind.Event,
            location=location_of(candidate.session_id, candidate.label),
            container_name=None if candidate.cwd is None else display_inline_text(candidate.cwd),
        )
        for candidate in candidates
    ]


async def listed_candidate(source: SessionSource, session_id: str) -> Candidate | None:
    """The listed session ``session_id`` as ``listCandidates`` shows it (its label and cwd)."""
    titled = await find_titled(source, session_id)
    if titled is None:
        return None
    record, seen = titled
    return Candidate(record.id, label_for(record, seen), record.cwd, record.created_at)


def mention_edit(
    uri: str,
    version: int | None,
    ranges: Sequence[types.Range],
    candidate: Candidate,
    *,
    document_changes: bool,
) -> tuple[str, types.WorkspaceEdit]:
    """The mention a pick puts at each of ``ranges`` (the same text an ``@`` completion inserts):
    an empty range at the cursor, or the mentions of a session it replaces; checked against the
    document's version where the client takes versioned edits."""
    mention = mention_for(candidate)
    edits = [types.TextEdit(range=where, new_text=mention) for where in ranges]
    if not document_changes:
        return mention, types.WorkspaceEdit(changes={uri: edits})
    document = types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version)
    return mention, types.WorkspaceEdit(
        document_changes=[types.TextDocumentEdit(text_document=document, edits=edits)]
    )
