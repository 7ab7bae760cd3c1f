"""A strict reader for the YAML dsh's profile patch files are written in, without running any of it.

dsh reads ``cordis.patch.yml`` with js-yaml's JSON schema plus a ``!!js`` tag whose scalar is a
JavaScript expression the loader evaluates. This module reads the common subset of that dialect
(block mappings and sequences, flow ``[...]``/``{...}``, plain, quoted and block scalars, comments)
and returns plain Python values; a ``!!js`` scalar comes back as :class:`JsExpression`, never
evaluated. Anything outside the subset (anchors, aliases, other tags, complex keys, multi-line
quoted strings, directives) raises :class:`YamlSubsetError` naming the line: the caller ignores
the file rather than guess at what dsh reads from it. The input is untrusted: nesting is bounded
and every loop consumes input, so a hostile file costs time and memory linear in its size.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final

MAX_DEPTH: Final = 64
"""Nesting (block or flow) deeper than this is refused; profile files nest four or five levels."""

_INT = re.compile(r"[-+]?[0-9]+\Z")
_EXACT_DIGITS: Final = 24
"""An integer longer than this is read as JavaScript reads it, a double: past every safe integer
anyway, and Python's ``int()`` refuses strings of more than 4,300 digits (a ``ValueError``)."""
_FLOAT = re.compile(r"(?:[-+]?[0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+(?:[eE][-+]?[0-9]+)?)\Z")
_OTHER_NUMBER = re.compile(r"[-+]?(?:0[box][0-9a-fA-F_]+|\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))\Z")
_ESCAPES: Final = {
    "0": "\0", "a": "\a", "b": "\b", "t": "\t", "\t": "\t", "n": "\n", "v": "\v", "f": "\f",
    "r": "\r", "e": "\x1b", " ": " ", '"': '"', "/": "/", "\\": "\\", "N": "\x85", "_": "\xa0",
    "L": "\u2028", "P": "\u2029",
}  # fmt: skip
_HEX_ESCAPES: Final = {"x": 2, "u": 4, "U": 8}


class YamlSubsetError(ValueError):
    """The text is not YAML this reader reads (or not YAML at all); ``line`` is 1-based."""

    def __init__(self, line: int, why: str) -> None:
        super().__init__(f"line {line}: {why}")
        self.line = line
        self.why = why


@dataclass(frozen=True)
class JsExpression:
    """A ``!!js`` scalar: JavaScript that dsh's loader would evaluate, kept as text."""

    source: str


class OtherNumber(str):
    """A number js-yaml reads that this reader does not (``0x10``, ``0o7``, ``.inf``): its text."""

    __slots__ = ()


@dataclass
class _Line:
    number: int
    indent: int
    text: str


def _is_blank(text: str) -> bool:
    return text == "" or text.startswith("#")


def _strip_comment(text: str) -> str:
    """``text`` without a trailing `` # comment`` (outside quotes)."""
    quote = ""
    for index, char in enumerate(text):
        if quote:
            if char == quote:
                quote = ""
        elif char in "\"'" and (index == 0 or text[index - 1] in " \t[{,:"):
            quote = char
        elif char == "#" and (index == 0 or text[index - 1] in " \t"):
            return text[:index].rstrip(" \t")
    return text.rstrip(" \t")


def plain_value(text: str) -> object:
    """A plain scalar resolved as js-yaml's JSON schema does (null, booleans, numbers, else text)."""
    if text in ("", "~", "null", "Null", "NULL"):
        return None
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if _INT.match(text):
        return int(text) if len(text) <= _EXACT_DIGITS else float(text)
    if _FLOAT.match(text):
        return float(text)
    if _OTHER_NUMBER.match(text) or ("_" in text and _INT.match(text.replace("_", ""))):
        return OtherNumber(text)
    return text


_NON_PRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ufffe\uffff\ud800-\udfff]")
"""What js-yaml refuses anywhere in a stream ("the stream contains non-printable characters")."""


class _Parser:
    def __init__(self, text: str) -> None:
        if (bad := _NON_PRINTABLE.search(text)) is not None:
            line = text.count("\n", 0, bad.start()) + 1
            raise YamlSubsetError(line, f"a character YAML does not allow ({bad.group()!r})")
        self.lines: list[_Line] = []
        # A lone CR ends a line too (YAML's line breaks; js-yaml reads a CR-only file as lines).
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        for number, raw in enumerate(lines, start=1):
            body = raw.lstrip(" ")
            if body.startswith("\t") and not _is_blank(body.lstrip(" \t")):
                raise YamlSubsetError(number, "a tab in indentation")
            self.lines.append(_Line(number, len(raw) - len(body), body.rstrip(" \t")))
        self.at = 0

    # -- lines ---------------------------------------------------------------------------------

    def _skip_blank(self) -> _Line | None:
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if not _is_blank(line.text):
                return line
            self.at += 1
        return None

    def document(self) -> object:
        first = self._skip_blank()
        if first is not None and first.text.startswith("%"):
            raise YamlSubsetError(first.number, "YAML directives are not read")
        if first is not None and first.indent == 0 and (first.text == "---" or first.text.startswith("--- ")):
            rest = first.text[3:].strip(" \t")
            if rest and not rest.startswith("#"):
                raise YamlSubsetError(first.number, "content on the document-start line is not read")
            self.at += 1
        value = self.block(0, 0) if self._skip_blank() is not None else None
        trailing = self._skip_blank()
        if trailing is not None and trailing.indent == 0 and trailing.text in ("...", "---"):
            if trailing.text == "---":
                raise YamlSubsetError(trailing.number, "more than one document")
            self.at += 1
            trailing = self._skip_blank()
        if trailing is not None:
            raise YamlSubsetError(trailing.number, "bad indentation")
        return value

    # -- block nodes ---------------------------------------------------------------------------

    def block(self, min_indent: int, depth: int) -> object:
        """The node that starts on the next non-blank line, indented at least ``min_indent``."""
        if depth > MAX_DEPTH:
            raise YamlSubsetError(self.lines[min(self.at, len(self.lines) - 1)].number, "nested too deep")
        line = self._skip_blank()
        if line is None or line.indent < min_indent:
            return None
        if line.text == "-" or line.text.startswith("- "):
            return self.sequence(line.indent, depth)
        if self._key_split(line) is not None:
            return self.mapping(line.indent, depth)
        self.at += 1
        return self.inline(line.text, line, depth)

    def sequence(self, indent: int, depth: int) -> list[object]:
        items: list[object] = []
        while (line := self._skip_blank()) is not None and line.indent == indent:
            if not (line.text == "-" or line.text.startswith("- ")):
                break
            rest = line.text[1:]
            body = rest.lstrip(" ")
            if _is_blank(body):
                self.at += 1
                items.append(self.block(indent + 1, depth + 1))
            else:  # the item starts on this line: read it as if the dash were indentation
                line.indent += 1 + len(rest) - len(body)
                line.text = body
                items.append(self.block(line.indent, depth + 1))
        self._check_dedent(indent)
        return items

    def mapping(self, indent: int, depth: int) -> dict[str, object]:
        result: dict[str, object] = {}
        while (line := self._skip_blank()) is not None and line.indent == indent:
            split = self._key_split(line)
            if split is None:
                raise YamlSubsetError(line.number, "expected a 'key: value' line")
            key, rest = split
            if key in result:
                raise YamlSubsetError(line.number, f"duplicated mapping key {key!r}")
            self.at += 1
            if _is_blank(rest):
                after = self._skip_blank()
                if after is not None and after.indent > indent:
                    result[key] = self.block(indent + 1, depth + 1)
                elif (
                    after is not None
                    and after.indent == indent
                    and (after.text == "-" or after.text.startswith("- "))
                ):
                    result[key] = self.sequence(indent, depth + 1)
                else:
                    result[key] = None
            else:
                result[key] = self.inline(rest, line, depth + 1, indent)
        self._check_dedent(indent)
        return result

    def _check_dedent(self, indent: int) -> None:
        line = self._skip_blank()
        if line is not None and line.indent > indent:
            raise YamlSubsetError(line.number, "bad indentation")

    def _key_split(self, line: _Line) -> tuple[str, str] | None:
        """``(key, rest)`` when ``line`` is a ``key: value`` line, else ``None``."""
        text = line.text
        if text.startswith("? "):
            raise YamlSubsetError(line.number, "complex mapping keys are not read")
        if text[:1] in ("'", '"'):
            value, end = _quoted(text, 0, line.number)
            after = text[end:].lstrip(" ")
            if after == ":" or after.startswith((": ", ":\t")):
                return str(value), after[1:].lstrip(" \t")
            return None
        if text[:1] in "[{&*!|>%@`" or text.startswith("- ") or text == "-":
            return None
        for match in re.finditer(r":(?:[ \t]|$)", text):
            key = text[: match.start()]
            if " #" in key:
                return None
            return key.rstrip(" \t"), text[match.end() :].lstrip(" \t")
        return None

    # -- values on a line ----------------------------------------------------------------------

    def inline(self, text: str, line: _Line, depth: int, parent_indent: int | None = None) -> object:
        """A value that starts in ``text`` (the rest of ``line``), which may run on below it."""
        indent = line.indent if parent_indent is None else parent_indent
        if text.startswith("!!js"):
            rest = text[4:]
            if rest and not rest.startswith(" "):
                raise YamlSubsetError(line.number, "unknown tag")
            rest = rest.lstrip(" ")
            value = self.inline(rest, line, depth, indent) if not _is_blank(rest) else ""
            return JsExpression("" if value is None else str(value))
        if text[:1] in "&*":
            raise YamlSubsetError(line.number, "anchors and aliases are not read")
        if text[:1] == "!":
            raise YamlSubsetError(line.number, "tags other than !!js are not read")
        if text[:1] in "|>":
            if not re.fullmatch(r"[|>][-+0-9]*(?: +#.*)?", text):
                raise YamlSubsetError(line.number, "a block scalar header this reader does not read")
            return self._block_scalar(text, indent)
        if text[:1] in "[{":
            return self._flow(text, line, depth)
        if text[:1] in "'\"":
            value, end = _quoted(text, 0, line.number)
            if not _is_blank(text[end:].lstrip(" ")):
                raise YamlSubsetError(line.number, "text after a quoted scalar")
            return value
        if text[:1] in "@`":
            raise YamlSubsetError(line.number, f"a plain scalar cannot start with {text[0]!r}")
        parts = [_strip_comment(text)]
        continued = parent_indent is not None  # a mapping value may go on below; a list item not
        while continued and (after := self._skip_blank()) is not None and after.indent > indent:
            parts.append(_strip_comment(after.text))  # a plain scalar continued on the next lines
            self.at += 1
        return plain_value(" ".join(parts))

    def _block_scalar(self, header: str, indent: int) -> str:
        """A literal (``|``) or folded (``>``) scalar below its header, chomped as the header says."""
        raw: list[_Line] = []
        while self.at < len(self.lines):
            line = self.lines[self.at]
            if line.text and line.indent <= indent:
                break
            raw.append(line)
            self.at += 1
        content = [line for line in raw if line.text]
        base = min((line.indent for line in content), default=0)
        texts = [" " * (line.indent - base) + line.text if line.text else "" for line in raw]
        if header[0] == "|":
            body = "\n".join(texts)
        else:
            body = ""
            for index, text in enumerate(texts):
                if index == 0:
                    body = text
                elif text == "" or texts[index - 1] == "" or text.startswith(" "):
                    body += "\n" + text
                else:
                    body += " " + text
        stripped = body.rstrip("\n")
        if "-" in header:
            return stripped
        if "+" in header:
            return body + "\n"
        return stripped + "\n" if stripped else ""

    def _flow(self, text: str, line: _Line, depth: int) -> object:
        """A flow collection, which may span lines until its brackets close: the lines are gathered
        first (one pass, counting brackets outside quotes), then parsed once."""
        pieces = [_strip_comment(text)]
        open_brackets = _bracket_balance(pieces[0], 0)
        while open_brackets > 0:
            nxt = self._skip_blank()
            if nxt is None:
                raise YamlSubsetError(line.number, "a flow collection that is never closed")
            self.at += 1
            pieces.append(_strip_comment(nxt.text))
            open_brackets = _bracket_balance(pieces[-1], open_brackets)
        parser = _Flow(" ".join(pieces), line.number)
        try:
            value = parser.value(depth)
            parser.skip_space()
        except _NeedMore:
            raise YamlSubsetError(line.number, "a flow collection that is never closed") from None
        if parser.at != len(parser.text):
            raise YamlSubsetError(line.number, "text after a flow collection")
        return value


def _bracket_balance(text: str, depth: int) -> int:
    """``depth`` after the brackets of ``text`` (outside quoted scalars, which end on their line)."""
    quote = ""
    index = 0
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\" and quote == '"':
                index += 1
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
        elif char in "]}":
            depth -= 1
            if depth == 0:
                return 0
        index += 1
    return depth


class _NeedMore(Exception):
    """The flow text ended before its collection closed (read the next line too)."""


class _Flow:
    def __init__(self, text: str, number: int) -> None:
        self.text = text
        self.at = 0
        self.number = number

    def skip_space(self) -> None:
        while self.at < len(self.text) and self.text[self.at] in " \t":
            self.at += 1

    def peek(self) -> str:
        self.skip_space()
        if self.at >= len(self.text):
            raise _NeedMore
        return self.text[self.at]

    def value(self, depth: int) -> object:
        if depth > MAX_DEPTH:
            raise YamlSubsetError(self.number, "nested too deep")
        char = self.peek()
        if char == "[":
            self.at += 1
            items: list[object] = []
            while self.peek() != "]":
                items.append(self.value(depth + 1))
                if self.peek() == ",":
                    self.at += 1
                elif self.peek() != "]":
                    raise YamlSubsetError(self.number, "expected ',' or ']'")
            self.at += 1
            return items
        if char == "{":
            self.at += 1
            result: dict[str, object] = {}
            while self.peek() != "}":
                key = self.scalar(key=True)
                if self.peek() == ":":
                    self.at += 1
                    value = self.value(depth + 1) if self.peek() not in ",}" else None
                else:
                    value = None
                if not isinstance(key, str) and key is not None:
                    key = str(key).lower() if isinstance(key, bool) else str(key)
                name = "null" if key is None else key
                if name in result:
                    raise YamlSubsetError(self.number, f"duplicated mapping key {name!r}")
                result[name] = value
                if self.peek() == ",":
                    self.at += 1
                elif self.peek() != "}":
                    raise YamlSubsetError(self.number, "expected ',' or '}'")
            self.at += 1
            return result
        return self.scalar(key=False)

    def scalar(self, *, key: bool) -> object:
        char = self.peek()
        if key and char == "?" and self.text[self.at + 1 : self.at + 2] in (" ", "\t", ""):
            raise YamlSubsetError(self.number, "complex mapping keys are not read")
        if char in "'\"":
            value, self.at = _quoted(self.text, self.at, self.number)
            return value
        if char in "&*":
            raise YamlSubsetError(self.number, "anchors and aliases are not read")
        tagged = False
        if self.text.startswith("!!js ", self.at):
            tagged = True
            self.at += 5
            if self.peek() in "'\"":
                value, self.at = _quoted(self.text, self.at, self.number)
                return JsExpression(value)
        elif char == "!":
            raise YamlSubsetError(self.number, "tags other than !!js are not read")
        start = self.at
        while self.at < len(self.text):
            here = self.text[self.at]
            if here in ",[]{}":
                break
            ends_key = self.text[self.at + 1 : self.at + 2] in (" ", "\t", ",", "}", "]", "")
            if here == ":" and (key or not tagged) and ends_key:
                break
            self.at += 1
        if self.at >= len(self.text):
            raise _NeedMore
        text = self.text[start : self.at].strip(" \t")
        return JsExpression(text) if tagged else plain_value(text)


def _quoted(text: str, start: int, number: int) -> tuple[str, int]:
    """The quoted scalar at ``text[start]`` and the index after its closing quote."""
    quote = text[start]
    out: list[str] = []
    index = start + 1
    while index < len(text):
        char = text[index]
        if quote == "'":
            if char == "'":
                if text[index + 1 : index + 2] == "'":
                    out.append("'")
                    index += 2
                    continue
                return "".join(out), index + 1
            out.append(char)
            index += 1
            continue
        if char == '"':
            return "".join(out), index + 1
        if char == "\\":
            code = text[index + 1 : index + 2]
            if code in _ESCAPES:
                out.append(_ESCAPES[code])
                index += 2
                continue
            width = _HEX_ESCAPES.get(code)
            digits = text[index + 2 : index + 2 + width] if width else ""
            if not width or not re.fullmatch(r"[0-9a-fA-F]+", digits) or len(digits) != width:
                raise YamlSubsetError(number, "a bad escape in a double-quoted scalar")
            point = int(digits, 16)
            if point > 0x10FFFF:
                raise YamlSubsetError(number, "a bad escape in a double-quoted scalar")
            out.append(chr(point))
            index += 2 + width
            continue
        out.append(char)
        index += 1
    raise YamlSubsetError(number, "a quoted scalar that does not end on its line (not read)")


def parse_yaml(text: str) -> object:
    """The single YAML document in ``text`` as plain values (see the module docstring)."""
    return _Parser(text).document()
