"""Lines and columns of a text <-> offsets into the Python string.

LSP counts columns in the negotiated encoding's code units (UTF-16 unless the
client offers something else) and breaks lines only at ``\\r\\n``, ``\\r`` and
``\\n``. Python's ``str.splitlines`` also breaks at ``\\x0b``, ``\\x1c``, ``\\u2028``
and friends, and Python indexes code points, so neither pygls' line list nor a
plain ``len`` can be used: a mention label holding U+2028 or an emoji would put
every later squiggle and edit in the wrong place.
"""

from __future__ import annotations

import bisect
import re
from typing import Literal

Encoding = Literal["utf-8", "utf-16", "utf-32"]

_LINE_BREAK = re.compile(r"\r\n|\r|\n")


def code_units(text: str, encoding: Encoding) -> int:
    """How many code units ``text`` spans in ``encoding`` (a lone surrogate is one UTF-16 unit)."""
    if encoding == "utf-32" or text.isascii():
        return len(text)
    if encoding == "utf-16":
        return len(text.encode("utf-16-le", "surrogatepass")) // 2
    return len(text.encode("utf-8", "surrogatepass"))


def chars_in_units(text: str, units: int, encoding: Encoding) -> int:
    """How many whole characters of ``text`` fit in ``units`` code units (a split character is excluded)."""
    if units <= 0:
        return 0
    if encoding == "utf-32" or text.isascii():
        return min(units, len(text))
    # Every character is at least one unit, so the answer lies in text[:units].
    head = text[:units]
    if encoding == "utf-16":
        encoded = head.encode("utf-16-le", "surrogatepass")[: 2 * units]
        decoded = encoded.decode("utf-16-le", "surrogatepass")
        count = len(decoded)
        if count and decoded[-1] != head[count - 1]:
            count -= 1  # the cut fell between the two halves of an astral character
        return count
    raw = head.encode("utf-8", "surrogatepass")[:units]
    try:
        return len(raw.decode("utf-8", "surrogatepass"))
    except UnicodeDecodeError as error:
        return len(raw[: error.start].decode("utf-8", "surrogatepass"))


class Lines:
    """Line starts of one text, for converting in both directions in O(log lines + line length).

    The editor's positions (:mod:`.lsp.positions`) and ``check``'s ``FILE:LINE:COL`` both count
    through this one rule, so a CI run points where the editor squiggles."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.line_starts = [0, *(match.end() for match in _LINE_BREAK.finditer(text))]

    @property
    def line_count(self) -> int:
        return len(self.line_starts)

    def line_content_end(self, line: int) -> int:
        """Offset where ``line``'s text ends, before its line break."""
        if line + 1 >= len(self.line_starts):
            return len(self.text)
        end = self.line_starts[line + 1]
        if end >= 2 and self.text.startswith("\r\n", end - 2):
            return end - 2
        return end - 1

    def offset_in(self, line: int, units: int, encoding: Encoding = "utf-16") -> int:
        """The offset ``units`` code units into ``line``; past a line's end or the text's end clamps."""
        if line >= len(self.line_starts):
            return len(self.text)
        start = self.line_starts[line]
        end = self.line_content_end(line)
        return start + chars_in_units(self.text[start:end], units, encoding)

    def line_and_units(self, offset: int, encoding: Encoding = "utf-16") -> tuple[int, int]:
        """The 0-based line of ``offset`` (clamped into the text) and its column in code units."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.line_starts, offset) - 1
        start = self.line_starts[line]
        return line, code_units(self.text[start:offset], encoding)
