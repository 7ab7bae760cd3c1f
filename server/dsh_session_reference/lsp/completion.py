"""``@`` completion: which token is being completed, and the items for the candidates.

The active token is upstream TUI's: an ``@`` at the start of the text or after
whitespace, followed by non-whitespace up to the cursor (JS ``\\s``). A quoted
``@"...`` token was a file search there and is left alone, as is ``@[``, which
is a mention being typed (or already inserted) by hand.

Real VS Code drops or doubles the ``@`` unless every item carries a
``text_edit`` from the ``@`` to the cursor and a ``filter_text`` that starts
with ``@``. It then ranks rows by its own fuzzy score of what was typed
against each ``filter_text`` before it looks at ``sort_text``, so every row's
filter text starts with exactly what was typed: all rows score the same, and
the server's rank (``sort_text``) decides. The server filters by the typed
query itself (``list_candidates`` searches every session, not a loaded subset),
so the list is always ``is_incomplete`` and comes again with each keystroke.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from lsprotocol import types

from ..display import SHOWN_CHARS, display_label, short_age
from ..lines import Lines
from ..resolver import BodyCandidate, Candidate
from ..uri import JS_SPACE, format_session_reference_mention

BODY_MARK: Final = "matched in messages"
"""How a body-search row says why it is there (``bodySearch``)."""

LISTING_LABEL: Final = "Listing dsh sessions…"
"""The row a completion shows while the sessions are still being listed (:func:`listing_item`)."""
LISTING_DATA: Final = {"listing": True}
"""That row's ``data``: how a client tells it from a session's row (the VS Code extension asks
again while it shows)."""

ROW_COLUMNS: Final = 46.0
"""What one row of VS Code's suggestion popup has room for, in columns of the editor's monospace
font, at its default width (430 px) and font (14 px: 8.4 px a column; the icon and padding take
the rest): what the VS Code extension declares as ``completionRowColumns``. VS Code draws
``labelDetails.description`` at 85% of the font size, after a gap of 1.1 of its ems, and cuts it
before the label (it shrinks four times as fast), so a row whose label and description do not
fit loses its age and project first: for a client that declares its row width, the label is
shortened instead (:func:`fitted_row`). The whole title is in the row's documentation and its
filter text. Other clients (Neovim's and Emacs' menus grow to fit) get whole titles."""
MIN_ROW_COLUMNS: Final = 24
MAX_ROW_COLUMNS: Final = 1000
"""The row widths a client may declare; any other value is ignored (rows keep whole titles)."""
DESCRIPTION_SCALE: Final = 0.85
DESCRIPTION_GAP: Final = 1.6
"""The gap before the description, in columns (1.1 em at 85%, and a little to spare)."""
MIN_LABEL_COLUMNS: Final = 16
"""A label keeps at least this much; past it a very long project name is shortened too."""

MAX_TOKEN_LENGTH: Final = 512
"""A longer run of non-space text before the cursor is not a mention being typed."""


@dataclass(frozen=True)
class Trigger:
    """An ``@`` token before the cursor: ``at`` is the offset of the ``@``, ``query`` what follows it."""

    at: int
    cursor: int
    query: str


_SPACE: Final = re.compile("[" + JS_SPACE + "]")


MAX_WORDS: Final = 6
"""Words a query may hold while the popup stays open (``@zstd log`` finds "... zstd logs ...")."""


def find_trigger(text: str | Lines, cursor: int, *, continuing: bool = False) -> Trigger | None:
    """The active ``@`` token ending at ``cursor`` (an offset into ``text``), if any. Only the
    :data:`MAX_TOKEN_LENGTH` characters before the cursor are read (of a document's
    :class:`~..lines.Lines`, without joining it).

    ``continuing``: the popup is open and the editor asks again as the user types (LSP's
    ``TriggerForIncompleteCompletions``). Then the query may run on past spaces, back to the
    ``@`` that opened the popup on the same line, for at most :data:`MAX_WORDS` words and
    without mention syntax in between; a fresh request (typing ``@``, or prose that an editor
    completes on its own) still takes one token, so words after a mention never open a popup.
    """
    cursor = max(0, min(cursor, len(text)))
    floor = max(0, cursor - MAX_TOKEN_LENGTH - 1)
    window = text[floor:cursor]
    if continuing:
        spanning = _spanning_trigger(window, floor, cursor)
        if spanning is not None:
            return spanning
    start = max((match.end() for match in _SPACE.finditer(window)), default=None)
    if start is None:
        if floor > 0:
            return None
        start = 0
    token = window[start:]
    if not token.startswith("@") or token.startswith(('@"', "@[")):
        return None
    return Trigger(floor + start, cursor, token[1:])


def _spanning_trigger(window: str, floor: int, cursor: int) -> Trigger | None:
    """The query back to the ``@`` that opened the popup, in ``window`` (the text from ``floor``
    to ``cursor``)."""
    at = window.rfind("@")
    if at < 0 or (at > 0 and not _SPACE.match(window[at - 1])) or (at == 0 and floor > 0):
        return None
    query = window[at + 1 :]
    if (
        not query
        or "\n" in query
        or "\r" in query
        or query[0] in '"['
        or any(mark in query for mark in ("](", "dsh-session:"))
        or len(query.split()) > MAX_WORDS
    ):
        return None
    return Trigger(floor + at, cursor, query)


@dataclass(frozen=True)
class Shown:
    """What a row shows of a candidate, escaped (see :func:`completion_items`)."""

    label: str
    session_id: str
    cwd: str | None
    project: str | None
    """Its cwd's last folder (``terraform``); ``None`` for a session without a cwd."""
    mention: str
    searchable: str


def shown(candidate: Candidate) -> Shown:
    """What a row shows of a candidate: every field at most :data:`~..display.SHOWN_CHARS`
    characters (a row repeats its label four times; fifty 2 MB titles made a 400 MB answer)."""
    cut = SHOWN_CHARS + 1  # what display_label looks at: the memo's key holds no more
    cwd = candidate.cwd
    where = None if cwd is None else (cwd[:cut], project_name(cwd)[:cut])
    return _shown_memo(candidate.session_id, candidate.label[:cut], where)


@functools.lru_cache(maxsize=4096)
def _shown_memo(session_id: str, label: str, where: tuple[str, str] | None) -> Shown:
    """Memoized: the same few dozen rows come back keystroke after keystroke, and escaping and
    encoding them was a third of building the items. Keyed by the parts shown (and the id, a
    directory name), so the memo holds a bounded amount of text however long titles are."""
    shown_label = display_label(label)
    shown_id = display_label(session_id)
    shown_cwd = None if where is None else display_label(where[0])
    return Shown(
        shown_label,
        shown_id,
        shown_cwd,
        None if where is None else display_label(where[1]),
        format_session_reference_mention(session_id, shown_label),
        " ".join(part for part in (shown_label, shown_id, shown_cwd) if part),
    )


def project_name(cwd: str) -> str:
    """The last folder of a working directory (``/home/dev/shop`` -> ``shop``), what a narrow row
    has room for; the whole path is in the row's documentation."""
    return cwd.rstrip("/\\").rsplit("/", 1)[-1].rsplit("\\", 1)[-1] or cwd


def completion_items(
    candidates: Sequence[Candidate],
    edit_range: types.Range,
    *,
    now_ms: int,
    label_details: bool,
    typed: str = "@",
    filter_text: bool = True,
    row_columns: float | None = None,
) -> list[types.CompletionItem]:
    """One item per candidate, in ``list_candidates`` order.

    A row shows first what tells sessions apart (title, age, project) and the id
    last. VS Code filters on ``filter_text``: it starts with ``typed`` (what the
    edit replaces, from the ``@`` to the cursor), so VS Code keeps every row and
    keeps the server's order (see the module docstring); the rest lets a row
    survive a keystroke typed before the next answer arrives. Neovim 0.7 inserts
    at the cursor instead of the edit's start whenever ``filterText`` is present:
    clients with ``insertReplaceSupport`` get it; the others filter on the label.
    ``row_columns``: what the client declared one row has room for (:data:`ROW_COLUMNS`).
    """
    width = max(4, len(str(len(candidates))))
    items: list[types.CompletionItem] = []
    for rank, candidate in enumerate(candidates):
        # Ids, titles and cwds are anyone's text: escaped like the label, so a newline or a
        # terminal escape in any of them cannot break the row (or the filter text) apart.
        row = shown(candidate)
        id_differs = candidate.label != candidate.session_id
        body = candidate if isinstance(candidate, BodyCandidate) else None
        parts = [short_age(candidate.created_at, now_ms), *([row.project] if row.project else [])]
        if body is not None:
            parts.insert(0, BODY_MARK)
        label = row.label
        if label_details:
            # The id is the last line of the documentation: a detail would show it again, and
            # wrapped, above the title there.
            if filter_text and row_columns is not None:
                # A client that filters on filterText reads the label only: it may be shortened
                # so that age and project stay whole (a client filtering on the label gets it all).
                label, parts = fitted_row(row.label, parts, row_columns)
            details = types.CompletionItemLabelDetails(description=" · ".join(parts))
            detail = None
        else:
            details = None
            detail = " · ".join([*parts, *([row.session_id] if id_differs else [])])
        searchable = f"{typed} {row.searchable}"
        if body is not None:
            # The match is in the messages, not the label: say where, and let the editor's own
            # filter keep the row (it filters on filterText, which must contain what was typed).
            excerpt = display_label(body.snippet)
            detail = f"{detail} · “{excerpt}”" if detail else f"“{excerpt}”"
            searchable = f"{typed} {body.matched} {row.searchable}"
        items.append(
            types.CompletionItem(
                label=label,
                label_details=details,
                kind=types.CompletionItemKind.Reference,
                detail=detail,
                sort_text=f"{rank:0{width}d}",
                filter_text=searchable if filter_text else None,
                text_edit=types.TextEdit(range=edit_range, new_text=row.mention),
                data={"sessionId": candidate.session_id, "label": row.label},
            )
        )
    return items


def columns(text: str) -> int:
    """Columns ``text`` takes in a monospace font: East Asian wide and fullwidth characters two."""
    return sum(2 if unicodedata.east_asian_width(char) in "WF" else 1 for char in text)


def clipped(text: str, room: int) -> str:
    """``text`` in at most ``room`` columns, its last one ``…`` when cut."""
    if columns(text) <= room:
        return text
    kept, used = [], 1
    for char in text:
        used += columns(char)
        if used > room:
            break
        kept.append(char)
    return "".join(kept) + "…"


def fitted_row(label: str, parts: list[str], row_columns: float = ROW_COLUMNS) -> tuple[str, list[str]]:
    """A row's label and description parts (``[age, project]``, a body row's mark first) that fit
    ``row_columns`` together: the label is shortened first, down to :data:`MIN_LABEL_COLUMNS`;
    only then the project (the last part), so the age is never cut."""

    def room_for_label(shown: list[str]) -> int:
        return int(row_columns - DESCRIPTION_GAP - DESCRIPTION_SCALE * columns(" · ".join(shown)))

    room = room_for_label(parts)
    if room < MIN_LABEL_COLUMNS and len(parts) > 1:
        fixed = columns(" · ".join(parts[:-1])) + 3
        project_room = int((row_columns - DESCRIPTION_GAP - MIN_LABEL_COLUMNS) / DESCRIPTION_SCALE) - fixed
        parts = [*parts[:-1], clipped(parts[-1], max(4, project_room))]
        room = room_for_label(parts)
    return clipped(label, max(MIN_LABEL_COLUMNS, room)), parts


def item_data(item: types.CompletionItem) -> tuple[str, str] | None:
    """``(session id, label)`` from an item this server produced, else ``None``."""
    return data_strings(item.data, "sessionId", "label")


def data_strings(data: object, first: str, second: str) -> tuple[str, str] | None:
    """The string fields ``first`` and ``second`` of the ``data`` of an item or link this server
    sent, as the client sends it back, else ``None``."""
    if not isinstance(data, Mapping):
        return None
    one, two = data.get(first), data.get(second)
    return (one, two) if isinstance(one, str) and isinstance(two, str) else None


def only_listing(result: types.CompletionList) -> bool:
    """Whether an answer is the :func:`listing_item` alone: a client that wants the sessions
    (the demo, the tests) asks again, as the VS Code extension does."""
    return result.is_incomplete and len(result.items) == 1 and result.items[0].data == LISTING_DATA


def listing_item(edit_range: types.Range, typed: str, read: int) -> types.CompletionItem:
    """The one row of a completion answered before the sessions are listed (a fresh server over a
    big root): it says the list is coming, and how far the listing is, rather than leave the popup
    shut while the user waits. It inserts nothing: its edit puts back what was typed. Its filter
    text is what was typed, so the client keeps it whatever the query; the list is incomplete, so
    the next keystroke (or the VS Code extension, at once) asks again."""
    return types.CompletionItem(
        label=LISTING_LABEL,
        kind=types.CompletionItemKind.Text,
        # Short enough to read whole beside the label in VS Code's default popup.
        detail=f"{read:,} read" if read else "reading the folder",
        sort_text="0",
        filter_text=typed,
        text_edit=types.TextEdit(range=edit_range, new_text=typed),
        data=LISTING_DATA,
    )
