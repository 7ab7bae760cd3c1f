"""How sessions are shown to people: labels, times, a conversation's counts; upstream TUI's
``displayInlineText`` and friends.

A title is text anyone can write (dsh derives it from the conversation), so it
may hold terminal escapes or newlines. Upstream's TUI escaped C0/C1 controls
as ``\\xNN`` (and ``\\n`` as ``\\x0a``) *before* building the mention; doing the
same keeps an inserted mention on one line and free of control bytes.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Final

from .projection import ConversationItem, LongText

_TERMINAL_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f]")


def _hex(match: re.Match[str]) -> str:
    return f"\\x{ord(match.group()):02x}"


def display_inline_text(text: str) -> str:
    """``displayInlineText``: controls except ``\\n`` as ``\\xNN``, then ``\\n`` as ``\\x0a``, which
    is its ``\\xNN`` too: every C0/C1 control as ``\\xNN``."""
    return _TERMINAL_CONTROL.sub(_hex, text)


SHOWN_CHARS: Final = 200
"""The most characters of a title, label, cwd or id any reply shows (ellipsized past it).

Such text is anyone's: dsh derives a title from the conversation, and a label is typed. A
reply repeats it (a finding per mention, a tooltip per hint, four fields per completion row),
so an unbounded copy multiplied a 2 MB title by every mention of it."""


def shortened(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, its last one ``…`` when cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


def display_label(text: str, limit: int = SHOWN_CHARS) -> str:
    """:func:`display_inline_text` of ``text``, at most ``limit`` characters of it: how every reply
    shows a title, label, cwd or id, and the label an inserted mention gets (a label is for a
    person to read in the prompt; fifty rows of 2 MB titles made a 400 MB completion reply).
    Only the part shown is escaped."""
    return shortened(display_inline_text(text[: limit + 1]), limit)


UNSEEN: Final = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u034f\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u115f\u1160"
    "\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u2028-\u202e\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0"
    "\ufff9-\ufffb\U000110bd\U000110cd\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0000-\U000e0fff]"
)
"""Characters a person does not see as themselves: controls (line breaks included), Unicode's
format characters (zero-width spaces and joiners, bidi embeddings, overrides and isolates, the
byte-order mark, tags), line and paragraph separators, variation selectors and the blank fillers.
A label holding one can read as other text than it is (``\u202e`` reverses what follows it)."""


def unseen(text: str) -> str | None:
    """The first character of ``text`` a person would not see as itself, as ``U+202E``."""
    found = UNSEEN.search(text)
    return None if found is None else f"U+{ord(found.group()):04X}"


def _code_point(match: re.Match[str]) -> str:
    return f"\\u{{{ord(match.group()):x}}}"


def legible(text: str, limit: int = SHOWN_CHARS) -> str:
    """:func:`display_label`, and every other character :data:`UNSEEN` holds as ``\\u{202e}``: how a
    message or hint meant only for a person names a title or label (never what is inserted or
    sent, which keeps upstream's :func:`display_inline_text`)."""
    return UNSEEN.sub(_code_point, display_label(text, limit))


_CONTROL_BUT_LINE_BREAKS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{{{code:x}}}"


def display_block_text(text: str) -> str:
    """Text shown over several lines (a message quoted in a hover): controls as ``\\xNN`` as
    :func:`display_inline_text` shows them, but line breaks (``\\n``, ``\\r\\n``) and tabs kept for
    a person to read; a lone ``\\r`` and the separators U+2028 and U+2029, which some editors and
    terminals break a line at and others do not, escaped."""
    return _CONTROL_BUT_LINE_BREAKS.sub(_escaped, text.replace("\r\n", "\n"))


GUTTER: Final = "│"
"""What every line of message text starts with wherever a person reads it among lines of our own
(the preview, the transcript, the CLI's report): a message's line can then never pass for a
heading, a notice or an accounting line, whatever it says (issue 35: an assistant message spelled
a third "user" heading and a notice of 41 omitted messages). No line of ours starts with it."""

_LINE_BREAK = re.compile("\r\n|\r|\n")


def gutter(text: str, indent: str = "") -> list[str]:
    """``text``'s lines, split wherever LSP and terminals break a line (``\\r\\n``, ``\\r``,
    ``\\n``), each after ``indent`` and :data:`GUTTER` and a space (an empty line: the gutter
    alone). The text after the gutter is the line exactly: :func:`quoted_lines` for reading,
    or as the model receives it (the CLI's ``prepare``)."""
    return [f"{indent}{GUTTER} {line}" if line else f"{indent}{GUTTER}" for line in _LINE_BREAK.split(text)]


def quoted_lines(text: str, indent: str = "") -> list[str]:
    """Message text for reading among lines of our own: controls escaped
    (:func:`display_block_text`), long lines wrapped (:func:`wrapped`), each line in the
    :func:`gutter`. The one way the preview, the transcript and the CLI's report show a message."""
    return gutter(wrapped(display_block_text(text), WRAP_COLUMNS - len(GUTTER) - 1), indent)


def kilobytes(count: int) -> str:
    """``5.8`` for 5,939 bytes, ``64`` for 65,536, ``2,048`` for 2 MiB: KB of 1,024 bytes, with one
    decimal below 100 KB when it is not a whole number. Every size a person reads is written
    with it (hints, the code lens, hovers, the preview, transcripts, the VS Code status bar)."""
    value = count / 1024
    return f"{value:,.0f}" if value >= 100 or value == int(value) else f"{value:.1f}"


def token_count(tokens: int, exact: bool) -> str:
    """``4,612 tokens`` when DeepSeek's tokenizer counted them, ``~4,612 tokens, estimated``
    otherwise: the one way a token count is written, everywhere (the VS Code extension's
    ``formatTokens`` writes the same, a test compares them)."""
    return f"{tokens:,} tokens" if exact else f"~{tokens:,} tokens, estimated"


def size(count: int) -> str:
    """``30.6 KB (31,347 bytes)``: a size, and its exact bytes where a reader may want them."""
    return f"{kilobytes(count)} KB ({count:,} bytes)"


def share(count: int, budget: int) -> str:
    """``30.6 KB of 64 KB (31,347 of 65,536 bytes, 47.8%)``: a size against a budget."""
    percent = 100 * count / budget
    return f"{kilobytes(count)} KB of {kilobytes(budget)} KB ({count:,} of {budget:,} bytes, {percent:.1f}%)"


WRAP_COLUMNS: Final = 100
"""Where text for reading (the preview) is wrapped: editors do not wrap a virtual document."""


def wrapped(text: str, columns: int = WRAP_COLUMNS) -> str:
    """``text`` with each line longer than ``columns`` broken at spaces (a word longer than that is
    cut), the rest as it is: short lines, blank lines and the indentation of code stay."""
    return wrapped_by(_Wrapper, text, columns)


def wrapped_by(wrapper_class: type[textwrap.TextWrapper], text: str, columns: int) -> str:
    """:func:`wrapped` with ``wrapper_class`` breaking each long line: ``textwrap.TextWrapper``
    itself gives the library's lines, which :class:`_Wrapper` gives faster (its tests compare)."""
    out: list[str] = []
    for line in text.split("\n"):
        if len(line) <= columns:
            out.append(line)
            continue
        indent = line[: len(line) - len(line.lstrip(" \t"))][: columns // 2]
        wrapper = wrapper_class(
            columns,
            subsequent_indent=indent,
            expand_tabs=False,
            replace_whitespace=False,
            break_on_hyphens=False,
        )
        out += wrapper.wrap(line) or [""]
    return "\n".join(out)


class _Wrapper(textwrap.TextWrapper):
    """``textwrap``'s wrapping, with a word longer than a line cut in one pass: the library cuts one
    line off and copies the rest of the word each time, so a 2 MB line without a space took 1.8 s
    (quadratic) in a preview or a report. The lines are the library's, piece for piece."""

    def _handle_long_word(
        self, reversed_chunks: list[str], cur_line: list[str], cur_len: int, width: int
    ) -> None:
        chunk = reversed_chunks[-1]
        if chunk.isspace():
            if cur_len == 0 and width >= 1:
                # Only at the start of the first line (elsewhere a line's leading whitespace is
                # dropped whole): the library cuts it a line's width at a time and drops each cut,
                # until what is left fits; left so, for the next line to take as the library would.
                reversed_chunks[-1] = chunk[(len(chunk) - 1) // width * width :]
            else:
                super()._handle_long_word(reversed_chunks, cur_line, cur_len, width)
            return
        space_left = 1 if width < 1 else width - cur_len
        reversed_chunks.pop()
        cur_line.append(chunk[:space_left])
        # Every line after this one is as wide as the next: the rest of the word goes in pieces of
        # that width, each a line of its own, the last one shared with what follows, as the
        # library would cut them one at a time.
        rest = max(1, self.width - len(self.subsequent_indent))
        reversed_chunks += reversed([chunk[at : at + rest] for at in range(space_left, len(chunk), rest)])


def readable_time(created_at_ms: int) -> str:
    """``2026-06-28 14:46 UTC``: the absolute time beside a relative one."""
    try:
        moment = datetime.fromtimestamp(created_at_ms / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return f"{created_at_ms} ms"
    return moment.strftime("%Y-%m-%d %H:%M UTC")


_UNITS: Final = (
    (365 * 24 * 3600, "year", "y"),
    (30 * 24 * 3600, "month", "mo"),
    (7 * 24 * 3600, "week", "wk"),
    (24 * 3600, "day", "d"),
    (3600, "hour", "h"),
    (60, "minute", "min"),
)
"""Each unit of an age: its seconds, its word, and its short form."""


def _age(created_at_ms: int, now_ms: int) -> tuple[int, str, str] | None:
    """How many of the largest unit that fits the age, with the unit's word and short form;
    ``None`` under a minute. A negative count: a time in the future."""
    seconds = (now_ms - created_at_ms) // 1000
    if seconds < 0:
        return -1, "", ""
    for size_, name, short in _UNITS:
        if seconds >= size_:
            return seconds // size_, name, short
    return None


def short_age(created_at_ms: int, now_ms: int) -> str:
    """``4 mo``, ``3 d``, ``12 min``: an age for a completion row, which VS Code's popup cuts at
    about 45 characters with the title ("4 months a…" left no room for the project)."""
    age = _age(created_at_ms, now_ms)
    if age is None:
        return "now"
    count, _, short = age
    return "future" if count < 0 else f"{count} {short}"


def relative_time(created_at_ms: int, now_ms: int) -> str:
    """A short age such as ``3 hours ago`` for a completion row."""
    age = _age(created_at_ms, now_ms)
    if age is None:
        return "just now"
    count, name, _ = age
    return "in the future" if count < 0 else f"{count} {name}{'' if count == 1 else 's'} ago"


def readable(text: str | LongText) -> str:
    """A text for people to glance at: a long one's kept head and ``…`` (only ``…`` when nothing
    is kept)."""
    return text.head.decode("utf-8", "ignore") + "…" if isinstance(text, LongText) else text


def message_counts(items: Sequence[ConversationItem], *, messages: bool = False) -> str:
    """``3 from the user, 2 replies, 1 compaction checkpoint`` (``3 messages from the user, …``
    with ``messages``): a conversation's direct user messages, replies and compaction checkpoints
    (a checkpoint is a user message dsh wrote, not counted as the user's)."""
    users = sum(1 for item in items if item.role == "user" and not item.checkpoint)
    replies = sum(1 for item in items if item.role == "assistant")
    checkpoints = sum(1 for item in items if item.checkpoint)
    noun = (" message" if users == 1 else " messages") if messages else ""
    text = f"{users}{noun} from the user, {replies} {'reply' if replies == 1 else 'replies'}"
    if checkpoints:
        text += f", {checkpoints} compaction checkpoint{'' if checkpoints == 1 else 's'}"
    return text
