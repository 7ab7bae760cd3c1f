"""How session labels and times are shown: upstream TUI's ``displayInlineText`` and friends.

A title is text anyone can write (dsh derives it from the conversation), so it
may hold terminal escapes or newlines. Upstream's TUI escaped C0/C1 controls
as ``\\xNN`` (and ``\\n`` as ``\\x0a``) *before* building the mention; doing the
same keeps an inserted mention on one line and free of control bytes.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Final

_TERMINAL_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def display_inline_text(text: str) -> str:
    """``displayInlineText``: controls except ``\\n`` as ``\\xNN``, then ``\\n`` as ``\\x0a``."""
    escaped = _TERMINAL_CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)
    return escaped.replace("\n", "\\x0a")


SHOWN_CHARS: Final = 200
"""The most characters of a title, label, cwd or id any reply shows (ellipsized past it).

Such text is anyone's: dsh derives a title from the conversation, and a label is typed. A
reply repeats it (a finding per mention, a tooltip per hint, four fields per completion row),
so an unbounded copy multiplied a 2 MB title by every mention of it."""


def shortened(text: str, limit: int = SHOWN_CHARS) -> str:
    """``text`` cut to ``limit`` characters, its last one ``…`` when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def display_label(text: str, limit: int = SHOWN_CHARS) -> str:
    """:func:`display_inline_text` of ``text``, at most ``limit`` characters of it: how every reply
    shows a title, label, cwd or id, and the label an inserted mention gets (a label is for a
    person to read in the prompt; fifty rows of 2 MB titles made a 400 MB completion reply).
    Only the part shown is escaped."""
    return shortened(display_inline_text(text[: limit + 1]), limit)


_CONTROL_BUT_LINE_BREAKS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def display_block_text(text: str) -> str:
    """Text shown over several lines (a message quoted in a hover): controls as ``\\xNN`` as
    :func:`display_inline_text` shows them, but line breaks and tabs kept for a person to read."""
    return _CONTROL_BUT_LINE_BREAKS.sub(
        lambda match: f"\\x{ord(match.group()):02x}", text.replace("\r\n", "\n")
    )


def readable_time(created_at_ms: int) -> str:
    """``2026-06-28 14:46 UTC``: the absolute time beside a relative one."""
    try:
        moment = datetime.fromtimestamp(created_at_ms / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return f"{created_at_ms} ms"
    return moment.strftime("%Y-%m-%d %H:%M UTC")


_UNITS = (
    (365 * 24 * 3600, "year"),
    (30 * 24 * 3600, "month"),
    (7 * 24 * 3600, "week"),
    (24 * 3600, "day"),
    (3600, "hour"),
    (60, "minute"),
)


def relative_time(created_at_ms: int, now_ms: int) -> str:
    """A short age such as ``3 hours ago`` for a completion row."""
    seconds = (now_ms - created_at_ms) // 1000
    if seconds < 0:
        return "in the future"
    for size, name in _UNITS:
        if seconds >= size:
            count = seconds // size
            return f"{count} {name}{'' if count == 1 else 's'} ago"
    return "just now"
