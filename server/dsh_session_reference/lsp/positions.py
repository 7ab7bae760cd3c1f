"""LSP positions <-> offsets: :class:`..lines.Lines` in the client's types and negotiated encoding."""

from __future__ import annotations

from lsprotocol import types

from ..lines import Encoding, Lines


def encoding_of(kind: types.PositionEncodingKind | str | None) -> Encoding:
    """The encoding pygls negotiated (``None`` means the LSP default, UTF-16; the kinds are strings)."""
    if kind == "utf-8":
        return "utf-8"
    if kind == "utf-32":
        return "utf-32"
    return "utf-16"


class LineIndex(Lines):
    """:class:`..lines.Lines` speaking ``Position`` and ``Range``."""

    def offset_at(self, position: types.Position, encoding: Encoding = "utf-16") -> int:
        """The offset a client position means; positions past a line's end or the text's end clamp."""
        return self.offset_in(position.line, position.character, encoding)

    def position_at(self, offset: int, encoding: Encoding = "utf-16") -> types.Position:
        """The client position of ``offset`` (clamped into the text)."""
        line, character = self.line_and_units(offset, encoding)
        return types.Position(line=line, character=character)

    def range_of(self, start: int, end: int, encoding: Encoding = "utf-16") -> types.Range:
        return types.Range(start=self.position_at(start, encoding), end=self.position_at(end, encoding))
