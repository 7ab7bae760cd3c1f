"""JavaScript string and JSON semantics, reproduced exactly.

Upstream's bytes are defined by V8: ``JSON.stringify`` (which escapes lone
surrogates as ``\\udXXX``), ``Buffer.byteLength`` / ``TextEncoder`` (which turn a
lone surrogate into U+FFFD) and UTF-16 string semantics. Python strings are code
point sequences that may hold surrogate code points (``json.loads`` yields them
for ``\\udXXX`` escapes), so every step that turns text into bytes goes through
this module instead of ``json.dumps`` or ``str.encode``.
"""

from __future__ import annotations

import json
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


def js_normalize(text: str) -> str:
    """Join surrogate code point pairs into the astral character JS would see.

    In JS ``"\\ud83d" + "\\ude00"`` *is* ``"😀"``; in Python it is two code points.
    Only unpaired surrogates survive this, exactly the ones JS calls lone.
    """
    if not _SURROGATE.search(text):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def js_utf8(text: str) -> bytes:
    """UTF-8 bytes as ``TextEncoder``/``Buffer.from(s, 'utf8')`` produce them."""
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        repaired = text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace")
        return repaired.encode("utf-8")


def js_byte_length(text: str) -> int:
    """``Buffer.byteLength(text, 'utf8')``: lone surrogates count as 3 (U+FFFD)."""
    if text.isascii():
        return len(text)
    return len(js_utf8(text))


def _escape_lone(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def js_stringify(value: Any) -> str:
    """``JSON.stringify(value)`` for JSON-shaped Python data (dict key order kept).

    ``json.dumps(ensure_ascii=False)`` already matches V8's escape set (``\\"``,
    ``\\\\``, ``\\b\\f\\n\\r\\t``, other C0 controls as lowercase ``\\u00xx``, DEL and
    U+2028/9 raw); the one difference is lone surrogates, which V8 writes as
    escapes and Python would emit raw.
    """
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    if _SURROGATE.search(text):
        text = _SURROGATE.sub(_escape_lone, js_normalize(text))
    return text


def stringify_tag_safe_json(value: Any) -> str:
    """Upstream's ``stringifyTagSafeJson``: compact JSON with every ``<`` as ``\\u003c``.

    ``<`` can only occur inside JSON strings, so the result parses to the same
    value while no data can spell ``</referenced-sessions>`` or open a tag.
    """
    try:
        serialized = js_stringify(value)
    except (TypeError, ValueError) as error:
        raise TypeError("session-reference data is not JSON-serializable") from error
    return serialized.replace("<", "\\u003c")


def js_lower(text: str) -> str:
    """``String.prototype.toLocaleLowerCase()`` in a root/en locale."""
    return text.lower()


def js_includes(haystack: str, needle: str) -> bool:
    """``haystack.includes(needle)`` over UTF-16 code units.

    Differs from ``in`` only when a lone surrogate in the needle matches half of
    a pair in the haystack, which JS allows.
    """
    if needle in haystack:
        return True
    if not _SURROGATE.search(needle):
        return False
    hay = haystack.encode("utf-16-le", "surrogatepass")
    pin = needle.encode("utf-16-le", "surrogatepass")
    start = hay.find(pin)
    while start != -1:
        if start % 2 == 0:
            return True
        start = hay.find(pin, start + 1)
    return False
