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
import itertools
import re
from typing import Final, Literal, Self

from .jsjson import js_normalize

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


CHUNK: Final = 1 << 15
"""Characters a piece of a :class:`Lines` holds (up to twice that): an edit rebuilds the pieces it
touches, never the whole text."""


class _Piece:
    """A run of the text with the offsets just past each line break in it (relative to the run)."""

    __slots__ = ("ascii", "breaks", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.breaks = [match.end() for match in _LINE_BREAK.finditer(text)]
        self.ascii = text.isascii()


def _pieces(text: str) -> list[_Piece]:
    """``text`` cut into pieces of about :data:`CHUNK` characters, never between ``\\r`` and what
    follows it (so a ``\\r\\n`` break is never split, and a break is found where it ends)."""
    pieces: list[_Piece] = []
    start = 0
    while start < len(text) or not pieces:
        end = min(len(text), start + CHUNK)
        while end < len(text) and text[end - 1] == "\r":
            end += 1
        pieces.append(_Piece(text[start:end]))
        start = end
    return pieces


class Lines:
    """A text with its lines, for converting offsets and (line, column) both ways in
    O(log lines + line length), and for editing in time proportional to the edit.

    The text is kept in pieces with their own line breaks; an edit makes a new :class:`Lines`
    (:meth:`edited`) that shares every piece the edit does not touch, so typing in a 25 MB
    document does not copy or rescan it, and an older :class:`Lines` (the text an analysis read)
    stays as it was. The whole string is joined only when asked for (:attr:`text`).

    The editor's positions (:mod:`.lsp.positions`) and ``check``'s ``FILE:LINE:COL`` both count
    through this one rule, so a CI run points where the editor squiggles."""

    __slots__ = ("_breaks_before", "_offsets", "_pieces", "_text")

    def __init__(self, text: str) -> None:
        self._set(_pieces(text))
        self._text: str | None = text

    def _set(self, pieces: list[_Piece]) -> None:
        self._pieces = pieces
        self._offsets = [0, *itertools.accumulate(len(piece.text) for piece in pieces)]
        """Where each piece starts, then the text's length."""
        self._breaks_before = [0, *itertools.accumulate(len(piece.breaks) for piece in pieces)]
        """Line breaks before each piece, then in all."""
        self._text = None

    @property
    def text(self) -> str:
        """The whole text (joined on first use: a worker thread's job for a big document)."""
        if self._text is None:
            self._text = "".join(piece.text for piece in self._pieces)
        return self._text

    def __len__(self) -> int:
        return self._offsets[-1]

    def __getitem__(self, part: slice) -> str:
        """``text[start:stop]`` without joining the whole text (steps other than 1 are refused)."""
        start, stop, step = part.indices(len(self))
        if step != 1:
            raise ValueError("Lines slices take no step")
        if stop <= start:
            return ""
        if self._text is not None:
            return self._text[start:stop]
        first, last = self._piece_at(start), self._piece_at(stop - 1)
        base = self._offsets[first]
        joined = "".join(piece.text for piece in self._pieces[first : last + 1])
        return joined[start - base : stop - base]

    def _piece_at(self, offset: int) -> int:
        """The piece holding the character at ``offset`` (the last piece for the text's end)."""
        return min(bisect.bisect_right(self._offsets, offset) - 1, len(self._pieces) - 1)

    def _ascii(self, start: int, stop: int) -> bool:
        """Whether ``text[start:stop]`` is ASCII, from the pieces' flags (no copy)."""
        if stop <= start:
            return True
        return all(
            piece.ascii for piece in self._pieces[self._piece_at(start) : self._piece_at(stop - 1) + 1]
        )

    @property
    def line_count(self) -> int:
        return self._breaks_before[-1] + 1

    def line_start(self, line: int) -> int:
        """Offset where ``line`` begins (0 for line 0, just past the ``line``-th break otherwise)."""
        if line <= 0:
            return 0
        if line >= self.line_count:
            return len(self)
        number = line - 1
        piece = bisect.bisect_right(self._breaks_before, number) - 1
        return self._offsets[piece] + self._pieces[piece].breaks[number - self._breaks_before[piece]]

    def line_content_end(self, line: int) -> int:
        """Offset where ``line``'s text ends, before its line break."""
        if line + 1 >= self.line_count:
            return len(self)
        end = self.line_start(line + 1)
        return end - 2 if self[end - 2 : end] == "\r\n" else end - 1

    def offset_in(self, line: int, units: int, encoding: Encoding = "utf-16") -> int:
        """The offset ``units`` code units into ``line``; past a line's end or the text's end clamps."""
        if line >= self.line_count:
            return len(self)
        start = self.line_start(line)
        # Every character is at least one unit, so the answer lies in the first ``units`` of them.
        stop = min(self.line_content_end(line), start + max(0, units))
        if encoding == "utf-32" or self._ascii(start, stop):
            return stop
        return start + chars_in_units(self[start:stop], units, encoding)

    def line_and_units(self, offset: int, encoding: Encoding = "utf-16") -> tuple[int, int]:
        """The 0-based line of ``offset`` (clamped into the text) and its column in code units."""
        offset = max(0, min(offset, len(self)))
        piece = self._piece_at(offset)
        line = self._breaks_before[piece] + bisect.bisect_right(
            self._pieces[piece].breaks, offset - self._offsets[piece]
        )
        start = self.line_start(line)
        if encoding == "utf-32" or self._ascii(start, offset):
            return line, offset - start
        return line, code_units(self[start:offset], encoding)

    def edited(self, start: int, end: int, new_text: str) -> Self:
        """This text with ``[start, end)`` replaced by ``new_text`` (JS-normalized where it meets
        the text around it), sharing every piece the edit does not touch."""
        start = max(0, min(start, len(self)))
        end = max(start, min(end, len(self)))
        count = len(self._pieces)
        first, last = self._piece_at(start), self._piece_at(end)
        # Take the neighbours an edit at a piece's edge joins: a \r before a new \n, a lone
        # surrogate before its other half.
        if first > 0 and start == self._offsets[first]:
            first -= 1
        base = self._offsets[first]
        region = "".join(piece.text for piece in self._pieces[first : last + 1])
        region = js_normalize(region[: start - base] + new_text + region[end - base :])
        if region.endswith("\r") and last + 1 < count:  # a \r may not end a piece that has a successor
            last += 1
            region += self._pieces[last].text
        made = [piece for piece in _pieces(region) if piece.text]
        pieces = [*self._pieces[:first], *made, *self._pieces[last + 1 :]]
        lines = type(self).__new__(type(self))
        lines._set(pieces or [_Piece("")])
        return lines
