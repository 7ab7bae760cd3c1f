"""JavaScript string and JSON semantics, reproduced exactly.

Upstream's bytes are defined by V8: ``JSON.stringify`` (which escapes lone
surrogates as ``\\udXXX``), ``Buffer.byteLength`` / ``TextEncoder`` (which turn a
lone surrogate into U+FFFD) and UTF-16 string semantics. Python strings are code
point sequences that may hold surrogate code points (``json.loads`` yields them
for ``\\udXXX`` escapes), so every step that turns text into bytes goes through
this module instead of ``json.dumps`` or ``str.encode``.
"""

from __future__ import annotations

import errno
import io
import json
import math
import os
import re
import stat
from typing import Any, Final

_SURROGATE = re.compile("[\ud800-\udfff]")
_SEARCH_STEP: Final = 1 << 20


def js_normalize(text: str) -> str:
    """Join surrogate code point pairs into the astral character JS would see.

    In JS ``"\\ud83d" + "\\ude00"`` *is* ``"😀"``; in Python it is two code points.
    Only unpaired surrogates survive this, exactly the ones JS calls lone. The search goes a
    megabyte at a time, so a worker thread normalizing a big document lets the event loop run.
    """
    if text.isascii() or not any(
        _SURROGATE.search(text, start, start + _SEARCH_STEP) for start in range(0, len(text), _SEARCH_STEP)
    ):
        return text
    return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


UNTRUSTED_DOCUMENT_BYTES: Final = 64 << 20
"""The largest file the language server reads for a client that named it (see :func:`read_text`)."""


def read_text(path: str, *, untrusted: bool = False) -> str:
    """A prompt file as dsh would read it (UTF-8; undecodable bytes become U+FFFD), JS-normalized.

    ``untrusted``: the path came from a client (a document URI that is not open), which may name
    anything: only a regular file of at most :data:`UNTRUSTED_DOCUMENT_BYTES` is read
    (:func:`read_untrusted`). Otherwise (a path the user typed on the command line) a FIFO is read
    as well, as ``<(...)`` expects. Blocking: call it in a worker thread.
    """
    if untrusted:
        data = read_untrusted(path, UNTRUSTED_DOCUMENT_BYTES)
    else:
        with open(os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0)), "rb") as handle:
            data = handle.read()
    # Decoded as ``open(path, encoding="utf-8")`` would (universal newlines included).
    with io.TextIOWrapper(io.BytesIO(data), encoding="utf-8", errors="replace") as text:
        return js_normalize(text.read())


class NotRegularFile(OSError):
    """:func:`read_untrusted` was pointed at something other than a regular file."""


class FileTooLarge(OSError):
    """:func:`read_untrusted` found more bytes than it may read."""


def read_untrusted(path: str, limit: int) -> bytes:
    """The bytes of the regular file at ``path`` (a symlink to one is followed), at most ``limit``:
    the one way a file a client, a workspace or the cache folder names is read. Opened without
    blocking and checked to be a regular file, so a FIFO cannot hang the reader, and read up to
    ``limit`` + 1 bytes, so ``/dev/zero`` or a file that grows cannot fill memory; a terminal never
    becomes the server's controlling one (it leads its own process session).
    :class:`NotRegularFile`, :class:`FileTooLarge`, or the :class:`OSError` of the open or read."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NONBLOCK", 0)
    flags |= getattr(os, "O_NOCTTY", 0)
    with open(os.open(path, flags), "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(errno.EINVAL, "not a regular file", path)
        too_big = FileTooLarge(errno.EFBIG, f"larger than {_size(limit)}", path)
        if info.st_size > limit:
            raise too_big
        data = handle.read(limit + 1)  # it may have grown since
    if len(data) > limit:
        raise too_big
    return data


def _size(limit: int) -> str:
    return f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit >> 10} KiB"


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

    Strings go through ``json.dumps(ensure_ascii=False)``, whose escape set is
    V8's (``\\"``, ``\\\\``, ``\\b\\f\\n\\r\\t``, other C0 controls as lowercase
    ``\\u00xx``, DEL and U+2028/9 raw) except for lone surrogates, which V8
    writes as escapes; numbers print as ``Number::toString`` does (``1e-7``, not
    ``1e-07``; NaN and infinities as ``null``).
    """
    if isinstance(value, str):
        return _js_string_literal(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return js_number_string(value) if math.isfinite(value) else "null"
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(
                _js_string_literal(_key(key)) + ":" + js_stringify(item) for key, item in value.items()
            )
            + "}"
        )
    if isinstance(value, list | tuple):
        return "[" + ",".join(js_stringify(item) for item in value) + "]"
    raise TypeError(f"{type(value).__name__} is not JSON-serializable")


def _key(key: object) -> str:
    if isinstance(key, str):
        return key
    raise TypeError(f"JSON object keys must be strings, not {type(key).__name__}")


def _js_string_literal(text: str) -> str:
    literal = json.dumps(text, ensure_ascii=False)
    if _SURROGATE.search(literal):
        literal = _SURROGATE.sub(_escape_lone, js_normalize(literal))
    return literal


MAX_SAFE_INTEGER: Final = 2**53 - 1


def js_number_string(value: int | float) -> str:
    """``String(number)``: ECMAScript's Number::toString with shortest round-trip digits."""
    if isinstance(value, int):
        if abs(value) <= MAX_SAFE_INTEGER:
            return str(value)
        value = float(value)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value.is_integer() and abs(value) <= MAX_SAFE_INTEGER:
        return str(int(value))  # ``-0`` as well: it prints as ``0``
    sign = "-" if value < 0 else ""
    mantissa, _, exponent = repr(abs(value)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    all_digits = whole + fraction
    point = len(whole) + (int(exponent) if exponent else 0)
    leading = len(all_digits) - len(all_digits.lstrip("0"))
    digits = all_digits[leading:].rstrip("0")
    n = point - leading
    k = len(digits)
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        power = n - 1
        sign_e = "+" if power >= 0 else "-"
        head = digits if k == 1 else digits[0] + "." + digits[1:]
        text = f"{head}e{sign_e}{abs(power)}"
    return sign + text


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


def js_has_surrogates(text: str) -> bool:
    """Whether ``text`` holds surrogate code points (where JS and Python string semantics part)."""
    return _SURROGATE.search(text) is not None


def js_lower(text: str) -> str:
    """``String.prototype.toLocaleLowerCase()`` in a root/en locale."""
    return text.lower()


def js_includes(haystack: str, needle: str, pin: bytes | None = None) -> bool:
    """``haystack.includes(needle)`` over UTF-16 code units (``pin``: the needle so encoded, when
    one needle is tested against many haystacks).

    Differs from ``in`` only when a lone surrogate in the needle matches half of
    a pair in the haystack, which JS allows.
    """
    if needle in haystack:
        return True
    if not _SURROGATE.search(needle):
        return False
    hay = haystack.encode("utf-16-le", "surrogatepass")
    if pin is None:
        pin = needle.encode("utf-16-le", "surrogatepass")
    start = hay.find(pin)
    while start != -1:
        if start % 2 == 0:
            return True
        start = hay.find(pin, start + 1)
    return False
