"""How session labels and times are shown: upstream TUI's ``displayInlineText`` and friends.

A title is text anyone can write (dsh derives it from the conversation), so it
may hold terminal escapes or newlines. Upstream's TUI escaped C0/C1 controls
as ``\\xNN`` (and ``\\n`` as ``\\x0a``) *before* building the mention; doing the
same keeps an inserted mention on one line and free of control bytes.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

_TERMINAL_CONTROL = re.compile("[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def display_inline_text(text: str) -> str:
    """``displayInlineText``: controls except ``\\n`` as ``\\xNN``, then ``\\n`` as ``\\x0a``."""
    escaped = _TERMINAL_CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)
    return escaped.replace("\n", "\\x0a")


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
