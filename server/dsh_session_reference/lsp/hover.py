"""Hover on a mention, and the session summary it shares with completion previews.

Everything shown comes from one :class:`~.analysis.Analysis` (or one read for
a completion item), so a hover never disagrees with the diagnostics. Text from
sessions is escaped for Markdown, and Markdown is only sent to clients that
declare it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

from lsprotocol import types

from ..analysis import Analysis, Intended, Reference, read_reference
from ..conversation import message_counts, readable
from ..display import (
    display_block_text,
    display_label,
    legible,
    readable_time,
    relative_time,
    share,
    shortened,
)
from ..resolver import SessionReferenceResolver, find_session
from ..retention import RetainedSource, conversation_items
from ..tokens import TokenCount
from ..uri import MentionSpan, encode_session_reference_uri

RECENT_MESSAGES: Final = 3
PREVIEW_CHARS: Final = 240
QUOTED_LINES: Final = 4


def escape_markdown(text: str) -> str:
    """Text shown literally in Markdown: every ASCII punctuation mark backslash-escaped."""
    return "".join("\\" + char if char in _MARKDOWN_PUNCTUATION else char for char in text)


_MARKDOWN_PUNCTUATION: Final = frozenset("\\`*_{}[]()<>#+-.!|~\"'&$=:")


@dataclass(frozen=True)
class SessionFacts:
    """What a completion preview or a hover says about one session: its reference as read and
    retained (against ``budget``), and why it cannot be referenced, if it cannot."""

    reference: Reference
    budget: int
    error: str | None = None


def session_summary(
    facts: SessionFacts, *, markdown: bool, now_ms: int, recent: bool = True, id_last: bool = False
) -> str:
    """What a person wants to know of a session before mentioning it, in the order they ask it:
    which one (title, how old, which project), what is in it (counts, the last few messages it
    was asked), and what mentioning it costs. The id comes after the title, or last with
    ``id_last`` (a completion row's documentation, read after the title, age and project)."""
    text: Callable[[str], str] = escape_markdown if markdown else _plain
    code: Callable[[str], str] = _code_span if markdown else _plain
    reference, record = facts.reference, facts.reference.record
    title = reference.title if reference.title is not None else reference.label
    label = legible(title) or "(a session with an empty id)"
    lines: list[str] = [f"**{text(label)}**" if markdown else label]
    id_line: list[str] = []
    if title != reference.session_id:
        session_id = display_label(reference.session_id)
        id_line.append(f"id {code(session_id)}" if session_id else "an empty id")
    if not id_last:
        lines += id_line
    where: list[str] = []
    if record is not None:
        created = record.created_at
        where.append(f"created {relative_time(created, now_ms)} ({readable_time(created)})")
        if record.cwd is not None:
            where.append(f"in {code(display_label(record.cwd))}")
    if where:
        lines.append(" · ".join(where))
    if facts.error is not None:
        lines.append(f"cannot be referenced: {text(facts.error)}")
        return _join(lines + id_line if id_last else lines, markdown)
    if reference.snapshot is not None:
        items = conversation_items(reference.snapshot)
        lines.append(message_counts(items, messages=True))
        direct = [readable(item.text) for item in items if item.role == "user" and not item.checkpoint][
            -RECENT_MESSAGES:
        ]
        if direct and recent:
            lines.append("last asked:")
            lines.extend(_quoted(message, markdown) for message in direct)
    if reference.retained is not None:
        lines.append(cost_line(reference.retained, facts.budget, reference.tokens))
    return _join(lines + id_line if id_last else lines, markdown)


def _quoted(message: str, markdown: bool) -> str:
    """One message, its line breaks kept (at most :data:`QUOTED_LINES` lines of it), as a Markdown
    quote whose lines end in a hard break, or indented in plain text."""
    lines = [line.strip() for line in display_block_text(shortened(message, PREVIEW_CHARS)).split("\n")]
    lines = [line for line in lines if line]
    if len(lines) > QUOTED_LINES:
        lines = [*lines[: QUOTED_LINES - 1], "…"]
    if markdown:
        return "  \n".join(f"> {escape_markdown(line)}" for line in lines)
    return "\n".join(f"    {line}" for line in lines)


def _code_span(value: str) -> str:
    return escape_markdown(value) if "`" in value else f"`{value}`"


def cost_line(retained: RetainedSource, budget: int, tokens: TokenCount | None = None) -> str:
    """What the reference would cost: its serialized bytes against ``maxReferenceBytes`` (and its
    tokens, where they were counted)."""
    stats = retained.stats
    line = f"mentioning it costs {share(retained.serialized_bytes, budget)}"
    if tokens is not None:
        line += f", {tokens.describe()}"
    if stats.truncated:
        line += (
            f"; keeps {stats.retained_messages} of {stats.original_messages} messages, "
            f"omits {stats.omitted_bytes:,} UTF-8 bytes"
        )
    return line


def _join(lines: Sequence[str], markdown: bool) -> str:
    # Separate Markdown paragraphs, so a quoted message cannot swallow the lines after it.
    return ("\n\n" if markdown else "\n").join(lines)


def documentation(value: str, markdown: bool) -> types.MarkupContent | str:
    return types.MarkupContent(kind=types.MarkupKind.Markdown, value=value) if markdown else value


async def read_session_facts(resolver: SessionReferenceResolver, session_id: str, label: str) -> SessionFacts:
    """A completion candidate's facts: one listing lookup, one read and ``prepare``'s retention.

    The cost is computed for the label a pick would insert, so it is what the
    mention will cost once it is in the prompt.
    """
    reference = Reference(session_id, display_label(label))
    budget = resolver.config.max_reference_bytes
    try:
        reference.record = await find_session(resolver.query, session_id)
        await read_reference(reference, resolver)
    except Exception as error:  # an unreadable root: say so instead of failing the request
        return SessionFacts(reference, budget, str(error))
    return SessionFacts(reference, budget, None if reference.error is None else reference.error.message)


def invalid_mention_help(span: MentionSpan, intended: Intended | None, *, markdown: bool) -> str:
    """What a hover on an invalid mention adds to its diagnostic, which editors show in the same
    popup: the session it meant and its canonical URI when the store has that session, else the
    URI's form and how to pick a session.

    The diagnostic already says what is wrong (and whether a quick fix exists), so repeating it
    would show the same sentence twice.
    """
    code: Callable[[str], str] = _code_span if markdown else _plain
    text: Callable[[str], str] = escape_markdown if markdown else _plain
    if intended is not None:
        lines = [
            f"meant: {text(intended.label)} (id {code(display_label(intended.session_id))})",
            f"its canonical URI: {code(encode_session_reference_uri(intended.session_id))}",
        ]
        return _join(lines, markdown)
    what, form = (
        ("a session mention", "@[label](dsh-session:…)")
        if span.kind == "markdown"
        else ("a session URI", "dsh-session:…")
    )
    lines = [
        f"{what} is {code(form)}: the URI's payload is the session id as a JSON string, "
        "UTF-8, base64url-encoded without padding",
        f"type {code('@')} to insert a mention from the list of sessions",
    ]
    return _join(lines, markdown)


def hover_text(
    analysis: Analysis, offset: int, *, markdown: bool, now_ms: int
) -> tuple[str, MentionSpan] | None:
    """What hovering at ``offset`` shows, and the mention it belongs to."""
    spans = analysis.spans_at(offset)
    if not spans:
        return None
    span = spans[-1]
    text = escape_markdown if markdown else _plain
    if span.session_id is None:
        return invalid_mention_help(span, analysis.intended.get(span.start), markdown=markdown), span
    reference = analysis.reference_for(span.session_id)
    if reference is None:
        return None
    notes: list[str] = []
    if reference.self_reference:
        notes.append("this is the target session: it cannot reference itself")
    elif reference.index is not None and reference.index >= analysis.max_references:
        notes.append(f"beyond maxReferences ({analysis.max_references}): prepare rejects the message")
    elif reference.spans and span is not reference.spans[0]:
        notes.append("a duplicate mention: prepare uses the first mention of this session")
    error = None if reference.error is None else reference.error.message
    summary = session_summary(
        SessionFacts(reference, analysis.max_reference_bytes, error),
        markdown=markdown,
        now_ms=now_ms,
        recent=False,
    )
    return _join([summary, *(text(note) for note in notes)], markdown), span


def _plain(value: str) -> str:
    return value
