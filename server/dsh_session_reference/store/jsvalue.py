"""JavaScript semantics for values parsed from a session log.

Upstream validates logs with ``typeof``, ``===``, ``Number.isSafeInteger`` and
template literals over ``JSON.parse`` results, and its error messages print
values with JS's ``String()``. Python's ``json`` differs in small ways that
change which logs are accepted and what the messages say (``True == 1``,
unbounded ints, ``NaN`` literals, ``1.0`` versus ``1``, the key order of
objects with integer-like keys), so every log line is parsed and inspected
through this module.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final

from ..jsjson import MAX_SAFE_INTEGER as MAX_SAFE_INTEGER
from ..jsjson import js_number_string


class _Undefined:
    """JS ``undefined``: a key that is absent, as opposed to JSON ``null``."""

    def __repr__(self) -> str:
        return "undefined"

    def __reduce__(self) -> str:
        return "UNDEFINED"  # a copy or an unpickled one is the one instance below


UNDEFINED: Final = _Undefined()


def _from_double(value: float, keep_negative_zero: bool) -> int | float:
    """The Python value that behaves (and prints) like the JS number ``value``."""
    if value == 0:
        return -0.0 if keep_negative_zero and math.copysign(1.0, value) < 0 else 0
    if math.isfinite(value) and value.is_integer() and abs(value) < 1e21:
        # Beyond 2**53 JS prints the shortest digits that round-trip, padded with
        # zeros; an int with exactly those digits prints (and converts back) the same.
        return int(value) if abs(value) <= MAX_SAFE_INTEGER else int(js_number_string(value))
    return value


def _parse_int_as_js(text: str, keep_negative_zero: bool) -> int | float:
    if len(text) <= 17:
        number = int(text)
        if abs(number) <= MAX_SAFE_INTEGER and (number != 0 or not text.startswith("-")):
            return number
    return _from_double(float(text), keep_negative_zero)


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _is_array_index(key: str) -> bool:
    """A canonical ASCII integer below 2**32 - 1 (``isdigit`` alone also accepts "²" and "٣")."""
    return (
        key.isascii()
        and key.isdigit()
        and (key == "0" or key[0] != "0")
        and len(key) <= 10
        and int(key) < 2**32 - 1
    )


def _js_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object with JS's enumeration order: array-index keys first, ascending."""
    result = dict(pairs)  # a repeated key keeps its first position and its last value, as in JS
    if not any(map(str.isdigit, result)):
        return result  # no key can be an index (the usual case, checked without a Python frame per key)
    indices = sorted((key for key in result if _is_array_index(key)), key=int)
    if not indices:
        return result
    ordered = {key: result[key] for key in indices}
    ordered.update((key, value) for key, value in result.items() if key not in ordered)
    return ordered


def _decoder(keep_negative_zero: bool, *, exact_ints: bool = True) -> json.JSONDecoder:
    # The order-fixing hook runs on every object: measured on real logs it costs less than
    # scanning each line for a key that could need it (0.5 s vs 0.9 s per 100 MB).
    return json.JSONDecoder(
        parse_int=(lambda text: _parse_int_as_js(text, keep_negative_zero)) if exact_ints else int,
        parse_float=lambda text: _from_double(float(text), keep_negative_zero),
        parse_constant=_reject_constant,
        object_pairs_hook=_js_object,
    )


_DECODERS: Final = {keep: _decoder(keep) for keep in (False, True)}
_SHORT_INTS: Final = _decoder(False, exact_ints=False)
"""For text without 16 digits in a row: every integer literal in it is safe, where Python's
``int`` is JS's number, so the C scanner builds them without a Python call each (a third of a
log's parse time: chunk rows are mostly integers)."""
_DIGITS_AS_ZERO: Final = bytes.maketrans(b"123456789", b"000000000")
_SIXTEEN_DIGITS: Final = b"0" * 16


def js_parse(text: str, *, keep_negative_zero: bool = False) -> Any:
    """``JSON.parse(text)``; raises :class:`ValueError` where JS throws a ``SyntaxError``.

    ``keep_negative_zero`` keeps ``-0`` as ``-0.0`` for the header checks that
    reject it (``Object.is(x, -0)``); elsewhere ``-0`` behaves as ``0`` in
    every check upstream makes and prints as ``0``, so it is parsed as ``0``.
    Nesting deeper than Python's recursion limit counts as unparsable.
    """
    try:
        return _DECODERS[keep_negative_zero].decode(text)
    except RecursionError as error:
        raise ValueError("JSON nesting is too deep") from error


def js_parse_line(line: bytes) -> Any:
    """``JSON.parse`` of one log line as upstream's reader decodes it (bad UTF-8 replaced).

    The same values as :func:`js_parse`; a line without a run of 16 digits (no integer
    literal in it can be unsafe, so ``-0`` is the only integer JS reads differently, and it is
    read as ``0`` here anyway) takes the scanner's native integers.
    """
    text = line.decode("utf-8", "replace")
    decoder = _DECODERS[False] if _SIXTEEN_DIGITS in line.translate(_DIGITS_AS_ZERO) else _SHORT_INTS
    try:
        return decoder.decode(text)
    except RecursionError as error:
        raise ValueError("JSON nesting is too deep") from error


def is_number(value: object) -> bool:
    """``typeof value === 'number'``."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def is_safe_integer(value: object) -> bool:
    """``Number.isSafeInteger(value)``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    if isinstance(value, float):
        return value.is_integer() and abs(value) <= MAX_SAFE_INTEGER
    return False


def is_negative_zero(value: object) -> bool:
    """``Object.is(value, -0)``."""
    return isinstance(value, float) and value == 0 and math.copysign(1.0, value) < 0


def as_record(value: object) -> dict[str, Any] | None:
    """A plain (non-array) object, else ``None``."""
    return value if isinstance(value, dict) else None


def prop(value: object, key: str) -> Any:
    """``value[key]`` for a value that is not null or undefined: an object's own key (missing:
    ``UNDEFINED``); no other value has any of the keys upstream reads here."""
    return value.get(key, UNDEFINED) if isinstance(value, dict) else UNDEFINED


def read_prop(value: object, key: str) -> Any:
    """``value.key`` including the ``TypeError`` JS throws on ``null``/``undefined``."""
    if value is None or value is UNDEFINED:
        raise JsTypeError(f"Cannot read properties of {js_string(value)} (reading '{key}')")
    return prop(value, key)


class JsTypeError(Exception):
    """A ``TypeError`` upstream's code would throw at this point (``String(e)`` starts ``TypeError: ``)."""


def strict_equal(a: object, b: object) -> bool:
    """``a === b`` over parsed JSON values."""
    if is_number(a) and is_number(b):
        return a == b
    if isinstance(a, str) and isinstance(b, str):
        return a == b
    return a is b  # booleans, null and undefined are singletons; objects compare by identity


def deep_equal_json(a: object, b: object) -> bool:
    """Upstream's ``isDeepEqualJson`` (used to police tool-result rewrites)."""
    if strict_equal(a, b):
        return True
    if isinstance(a, list) or isinstance(b, list):
        if not isinstance(a, list) or not isinstance(b, list) or len(a) != len(b):
            return False
        return all(deep_equal_json(x, y) for x, y in zip(a, b, strict=True))
    if not isinstance(a, dict) or not isinstance(b, dict) or len(a) != len(b):
        return False
    return all(key in b and deep_equal_json(value, b[key]) for key, value in a.items())


def js_string(value: object) -> str:
    """``String(value)`` / a template-literal substitution, for parsed JSON values."""
    if value is UNDEFINED:
        return "undefined"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return js_number_string(value)
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return ",".join("" if item is None or item is UNDEFINED else js_string(item) for item in value)
    return "[object Object]"
