"""Sessions as places: a mention's transcript (go to definition, document links), sessions as
workspace symbols, and the mention a picker inserts.

A transcript lives at a ``dsh-transcript:`` URI whose query is the session id, so any client can
ask for it again (``workspace/textDocumentContent``, or the ``dshSessionReference.transcript``
command where the client has no virtual documents); its path is only a readable tab name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final
from urllib.parse import quote, unquote, urlsplit

from lsprotocol import types

from ..analysis import Analysis, Reference
from ..candidates import label_for
from ..display import display_inline_text, display_label, relative_time
from ..labels import misleading_labels
from ..lines import Encoding
from ..model import SessionSource
from ..resolver import Candidate, find_titled
from .completion import data_strings, shown
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
    name = display_label(title if title else session_id, NAME_CHARS).replace("/", "∕").strip() or "session"
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


def _linked(analysis: Analysis) -> list[tuple[int, int, Reference]]:
    """``(start, end, reference)`` of each mention whose session the root lists."""
    found = [
        (span.start, span.end, reference)
        for reference in analysis.references
        if reference.record is not None
        for span in reference.spans
    ]
    return sorted(found, key=lambda link: link[:2])


def reference_transcript(reference: Reference) -> str:
    """The transcript URI of a referenced session, with the label ``prepare`` uses for it (its
    first mention's)."""
    return transcript_uri(reference.session_id, reference.title, reference.label)


def definition(analysis: Analysis, offset: int) -> str | None:
    """The transcript URI of the listed session mentioned at ``offset``."""
    for start, end, reference in _linked(analysis):
        if start <= offset <= end:
            return reference_transcript(reference)
    return None


MAX_LINK_TARGET: Final = 2_048
"""A link's target is sent with it up to this length; a longer one (the first mention's label is
in it, and every mention of the session repeats it) is sent when the link is followed."""
LINK_TOOLTIP: Final = "Open the transcript of this session (read-only)"


def document_links(
    analysis: Analysis, index: LineIndex, encoding: Encoding, document_uri: str
) -> list[types.DocumentLink]:
    """A link over each mention of a listed session, to its transcript: a target each mention of
    the session shares, or, where that is long, what resolves it (``documentLink/resolve``), so
    the answer grows with the mentions, not with mentions times label."""
    targets = {reference.session_id: reference_transcript(reference) for reference in analysis.references}
    # A mention whose label misleads gets its target only when followed, as a long one does: editors
    # draw a chip only over a link that has its target, so none draws such a mention as a chip, in
    # the same answer and with no wait for the warning that says why.
    misleading = {
        reference.session_id: misleading_labels(reference.title, reference.session_id, reference.spans)
        for reference in analysis.references
        if reference.record is not None
    }
    links = []
    for start, end, reference in _linked(analysis):
        target = targets[reference.session_id]
        eager = len(target) <= MAX_LINK_TARGET and start not in misleading[reference.session_id]
        links.append(
            types.DocumentLink(
                range=index.range_of(start, end, encoding),
                target=target if eager else None,
                tooltip=LINK_TOOLTIP,
                data=None if eager else {"uri": document_uri, "sessionId": reference.session_id},
            )
        )
    return links


def link_to_resolve(link: types.DocumentLink) -> tuple[str, str] | None:
    """``(document URI, session id)`` of a link :func:`document_links` sent without its target."""
    return None if link.target is not None else data_strings(link.data, "uri", "sessionId")


def resolve_link(analysis: Analysis | None, session_id: str, link: types.DocumentLink) -> types.DocumentLink:
    """``link`` with its target: from the document's current analysis, or the session's own
    transcript when the document no longer mentions it."""
    reference = None if analysis is None else analysis.reference_for(session_id)
    link.target = transcript_uri(session_id, None) if reference is None else reference_transcript(reference)
    link.data = None
    return link


def session_detail(candidate: Candidate, now_ms: int) -> str:
    """``3 days ago · terraform``: what tells sessions of one title apart, as a completion row's
    description reads. A folder's name, not its path: a row has room for the one, and a path
    beside a session reads as a file it lives in."""
    project = shown(candidate).project
    age = relative_time(candidate.created_at, now_ms)
    return age if project is None else f"{age} · {project}"


def workspace_symbols(candidates: Sequence[Candidate], now_ms: int) -> list[types.SymbolInformation]:
    """``listCandidates``' answer as symbols, in its order: each named by its title (its label),
    its age and project as the container, at its transcript.

    For clients that list what the server answers (Neovim's quickfix list, eglot's
    ``xref-find-apropos``). VS Code's Go to Symbol in Workspace cannot show these as dsh does: it
    keeps only the rows whose *name* its fuzzy filter matches (a project folder or an id query
    finds nothing), sorts them by its own score and shows the location's path beside each. The
    VS Code extension therefore searches sessions in its own picker, from :func:`candidate_row`'s
    rows, and leaves them out of that list."""
    return [
        types.SymbolInformation(
            name=display_label(candidate.label),
            kind=types.SymbolKind.Event,
            location=types.Location(uri=transcript_uri(candidate.session_id, candidate.label), range=TOP),
            container_name=session_detail(candidate, now_ms),
        )
        for candidate in candidates
    ]


def candidate_row(candidate: Candidate) -> dict[str, Any]:
    """The ``dshSessionReference.candidates`` command's row: upstream's remote face plus
    ``mention``, its label and cwd as a completion row shows them (escaped, at most
    :data:`~..display.SHOWN_CHARS`), and what a client's session picker shows and opens besides:
    ``project`` (as a completion row) and ``transcript``, the URI Go to Definition gives for the
    session."""
    row = shown(candidate)
    return {
        **candidate.to_json(),
        "label": row.label,
        "cwd": row.cwd,
        "mention": row.mention,
        "project": row.project,
        "transcript": transcript_uri(candidate.session_id, candidate.label),
    }


async def listed_candidate(source: SessionSource, session_id: str) -> Candidate | None:
    """The listed session ``session_id`` as ``listCandidates`` shows it (its label and cwd)."""
    titled = await find_titled(source, session_id)
    if titled is None:
        return None
    record, seen = titled
    return Candidate(record.id, label_for(record, seen), record.cwd, record.created_at)
