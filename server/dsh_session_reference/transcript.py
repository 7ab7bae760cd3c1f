"""A referenced session as a person reads it: a read-only transcript of what ``prepare`` sees.

The transcript is the projection ``prepare`` retains from (direct user messages, assistant
text, compaction checkpoints), in surface order, newest last, with the messages the byte
budget would omit fenced where they begin and end, so a reader sees what the model will not.
It is rendered from one bounded read (:meth:`~.model.SessionSource.read_conversation`
with a head): a long session shows its first :data:`HEAD_BYTES` and its newest
:data:`TAIL_BYTES` (or the budget, if larger), and says how much lies between.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from .conversation import message_counts
from .display import (
    display_inline_text,
    display_label,
    kilobytes,
    quoted_lines,
    readable_time,
    share,
)
from .jsjson import js_byte_length
from .model import ConversationSnapshot
from .projection import ConversationItem, LongText
from .resolver import SessionReferenceResolver, find_titled
from .retention import RetainedSource, drop_order, retain_referenced_session, text_bytes

HEAD_BYTES: Final = 64 << 10
"""The first messages' bytes a transcript shows (how the session began)."""
TAIL_BYTES: Final = 256 << 10
"""The newest messages' bytes a transcript shows at least (the budget's worth if that is more)."""
MAX_CHARS: Final = 2 << 20
"""A transcript's length at most: checkpoints are all kept (as ``prepare`` keeps them), so hundreds
of them could otherwise make tens of megabytes; past this its middle is cut, and says so."""
_UNREAD: Final = (
    f"not shown: a transcript shows a session's first {kilobytes(HEAD_BYTES)} KB and its newest messages"
)


def cost_label(retained: RetainedSource, budget: int) -> str:
    """One mention's cost as an inlay hint says it: ``12 msgs · 5.8 / 64 KB`` (``· truncated``)."""
    stats = retained.stats
    label = (
        f"{stats.retained_messages} msg{'' if stats.retained_messages == 1 else 's'} · "
        f"{kilobytes(retained.serialized_bytes)} / {kilobytes(budget)} KB"
    )
    return label + " · truncated" if stats.truncated else label


@dataclass(frozen=True)
class Transcript:
    """A rendered transcript and the session it is of."""

    session_id: str
    title: str | None
    text: str


class NoSuchSession(LookupError):
    """The root lists no session with this id."""


async def read_transcript(
    resolver: SessionReferenceResolver, session_id: str, label: str | None = None
) -> Transcript:
    """One session's transcript from one bounded read, with retention for the resolver's budget
    and ``label`` (a mention's; by default the session's title, as a mention picked from the list
    has it). A log that cannot be read gives a transcript that says why. Raises :class:`NoSuchSession`."""
    source = resolver.query
    titled = await find_titled(source, session_id)
    if titled is None:
        raise NoSuchSession(session_id)
    record, seen = titled
    title = seen.title if seen.error is None else None
    budget = resolver.config.max_reference_bytes
    try:  # read for at least the budget: retention for it must be exact over the read
        snapshot = await asyncio.to_thread(
            source.read_conversation, record.id, max(budget, TAIL_BYTES), None, HEAD_BYTES
        )
    except Exception as error:  # a damaged log: the transcript says so rather than failing
        message = getattr(error, "message", None)
        reason = message if isinstance(message, str) else str(error)
        text = (
            f"dsh session transcript (read-only)\ntitle:     {display_label(title or '(untitled)')}\n"
            f"session:   {display_label(record.id)}\n\n"
            f"This session's log cannot be read, so a mention of it fails: {display_inline_text(reason)}\n"
        )
        return Transcript(record.id, title, text)
    if snapshot is None:
        raise TypeError("a transcript needs a source that reads bounded conversations")
    # The label a mention picked from the list would carry: the title (else the id), escaped as shown.
    shown = label if label is not None else display_label(title if title is not None else record.id)
    retained = await asyncio.to_thread(retain_referenced_session, snapshot, shown, budget)
    text = await asyncio.to_thread(render_transcript, snapshot, title, retained, budget, label)
    return Transcript(record.id, title, text)


def render_transcript(
    snapshot: ConversationSnapshot,
    title: str | None,
    retained: RetainedSource | None,
    budget: int,
    label: str | None = None,
) -> str:
    """The transcript's text (see the module docstring). Pure: the same read gives the same text.
    ``retained``: retention of the session for ``budget`` (``None``: it cannot fit at all), for a
    mention labelled ``label`` (``None``: the session's title)."""
    session = snapshot.session
    items = list(snapshot.items)
    seq = snapshot.captured_through_seq
    lines = [
        "dsh session transcript (read-only)",
        f"title:     {'(untitled)' if title is None else display_label(title)}",
        f"session:   {display_label(session.id)}",
        f"cwd:       {'(none)' if session.cwd is None else display_label(session.cwd)}",
        f"created:   {readable_time(session.created_at)}",
        f"events:    {'none' if seq is None else f'through seq {seq}'}",
        f"messages:  {message_counts(items)}",
        *_mention_lines(retained, budget, label),
        "",
    ]
    omitted = set() if retained is None else _omitted(items, retained)
    cut = _cut(items, omitted, retained)
    first, last = (min(omitted), max(omitted)) if omitted else (-1, -1)
    gap: list[ConversationItem] = []
    for index, item in enumerate(items):
        if index == first:
            _flush(lines, gap, "message", _UNREAD)
            count = len(omitted)
            lines += [
                f"════ the {kilobytes(budget)} KB budget omits {count} message"
                f"{'' if count == 1 else 's'} from here ════",
                "",
            ]
        if isinstance(item.text, LongText) and item.text.evicted:
            gap.append(item)
        else:
            _flush(lines, gap, "message", _UNREAD)
            lines += _entry(index, item, cut.get(index), kept=first < index < last)
        if index == last:
            _flush(lines, gap, "message", _UNREAD)
            lines += ["════ end of what the budget omits ════", ""]
    _flush(lines, gap, "message", _UNREAD)
    if not items:
        lines.append("(no messages yet)")
    return _bounded("\n".join(lines).rstrip("\n") + "\n")


def _bounded(text: str) -> str:
    """``text``, or its first quarter and last three quarters of :data:`MAX_CHARS`, cut at line
    breaks, with a notice of what lies between."""
    if len(text) <= MAX_CHARS:
        return text
    head_end = text.rfind("\n", 0, MAX_CHARS // 4) + 1
    tail_start = text.find("\n", len(text) - MAX_CHARS * 3 // 4) + 1
    hidden = text[head_end:tail_start]
    notice = (
        f"[… {hidden.count(chr(10)):,} lines ({js_byte_length(hidden):,} bytes) of this transcript "
        f"not shown: a transcript is at most {MAX_CHARS >> 20} MB long …]\n\n"
    )
    return text[:head_end] + notice + text[tail_start:]


def _mention_lines(retained: RetainedSource | None, budget: int, label: str | None) -> list[str]:
    """What a mention keeps, a fact a line: editors show a transcript beside the prompt, in a
    pane about 60 columns wide, and do not wrap it."""
    if retained is None:
        return [
            f"mention:   cannot fit in the {kilobytes(budget)} KB budget",
            "           (prepare fails: BUDGET_EXCEEDED)",
        ]
    stats = retained.stats
    lines = [
        f"mention:   keeps {stats.retained_messages} of {stats.original_messages} messages",
        f"           {share(retained.serialized_bytes, budget)}",
    ]
    if stats.truncated:
        lines.append(f"           omits {stats.omitted_bytes:,} bytes of text")
    lines.append(
        "           for a mention labelled with its title"
        if label is None
        else f'           for a mention labelled "{display_label(label)}"'
    )
    return lines


def _omitted(items: Sequence[ConversationItem], retained: RetainedSource) -> set[int]:
    """Indexes of the messages retention drops: it drops the oldest that are neither a
    checkpoint nor the newest, one at a time (:func:`~.retention.retain_items`)."""
    return set(drop_order(items)[: retained.stats.omitted_messages])


def _cut(
    items: Sequence[ConversationItem], omitted: set[int], retained: RetainedSource | None
) -> dict[int, int]:
    """For each kept message retention shortened: the UTF-8 bytes of text the model gets of it."""
    if retained is None:
        return {}
    kept = [i for i in range(len(items)) if i not in omitted]
    conversation: list[dict[str, Any]] = retained.data["conversation"]
    cut: dict[int, int] = {}
    for index, entry in zip(kept, conversation, strict=True):
        text = items[index].text
        if isinstance(text, LongText) or entry["text"] != text:
            cut[index] = js_byte_length(entry["text"])
    return cut


def _heading(index: int, item: ConversationItem) -> str:
    """``── 3 · user · 2026-06-28 14:46 UTC``: which message, whose, and when the log recorded it."""
    kind = f"checkpoint ({item.role})" if item.checkpoint else item.role
    when = "" if item.time is None else f" · {readable_time(item.time)}"
    return f"── {index + 1} · {kind}{when}"


def model_view(items: Sequence[ConversationItem], retained: RetainedSource) -> list[str]:
    """What the model reads of a session, for a person: each message ``prepare`` keeps, with its
    heading and its text as retention left it (real line breaks, long lines wrapped, each line in
    the :func:`~.display.gutter`), and one notice where the budget omits a run of messages."""
    omitted = _omitted(items, retained)
    texts = iter(retained.data["conversation"])
    lines: list[str] = []
    run: list[ConversationItem] = []
    for index, item in enumerate(items):
        if index in omitted:
            run.append(item)
            continue
        _flush(lines, run, "older message", "the budget omits")
        text = next(texts)["text"]
        lines += [_heading(index, item) + " ──", *quoted_lines(text), ""]
    _flush(lines, run, "older message", "the budget omits")
    return lines or ["(no messages)"]


def _entry(index: int, item: ConversationItem, kept_bytes: int | None, *, kept: bool) -> list[str]:
    """One message; ``kept``: inside the omitted stretch but kept (a checkpoint always is)."""
    heading = _heading(index, item)
    if kept and item.checkpoint:
        heading += " · kept: the budget never omits a checkpoint"
    if kept_bytes is not None:
        heading += f" · the budget keeps {kept_bytes:,} of {text_bytes(item.text):,} bytes of it"
    lines = [heading + " ──"]
    text = item.text
    if isinstance(text, LongText):
        head = text.head.decode("utf-8", "ignore")
        tail = text.tail.decode("utf-8", "ignore")
        hidden = text.utf8_bytes - len(text.head) - len(text.tail)
        lines += [
            *quoted_lines(head),
            f"[… {hidden:,} bytes of this message not shown …]",
            *quoted_lines(tail),
        ]
    else:
        lines += quoted_lines(text)
    return [*lines, ""]


def _flush(lines: list[str], run: list[ConversationItem], what: str, why: str) -> None:
    """One notice for a run of messages not shown, ``what`` they are and ``why`` not: the budget
    omits them, or the bounded read did not keep them (:data:`_UNREAD`)."""
    if run:
        count, size = len(run), sum(text_bytes(item.original_text) for item in run)
        lines += [f"[… {count} {what}{'' if count == 1 else 's'} ({size:,} bytes) {why} …]", ""]
        run.clear()
