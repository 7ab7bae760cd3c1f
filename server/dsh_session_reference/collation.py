"""``String.prototype.localeCompare`` as upstream's ``listSessions`` uses it.

Sessions created in the same millisecond are ordered by
``a.id.localeCompare(b.id)``: V8 hands both UTF-16 strings to an ICU collator
for the process locale, which for dsh (``C.UTF-8``/``en-US``) is the CLDR root
collation at tertiary strength. Code-point order disagrees with it for mixed
case (``sess-b`` < ``sess-C``), accents (``x-ä`` < ``x-Z``) and punctuation, and
ICU calls some distinct strings equal (``"a\\0"`` and ``"a"``), so a stable sort
on the ICU sort key reproduces upstream's order exactly (Node 24 ships ICU 78,
PyICU 77: the two differ only for characters new in Unicode 17).

Where PyICU is missing (it has no wheel for every platform the editor bundle
runs on) a documented approximation is used instead and one warning is logged:
the key compares letters case- and accent-insensitively first, then accents,
then lower case before upper case, with whitespace and punctuation before
digits before letters. That matches ICU for ASCII ids and common accents;
only exotic scripts and symbol orderings can differ.
"""

from __future__ import annotations

import functools
import logging
import threading
import unicodedata
from typing import Any

_LOG = logging.getLogger("dsh_session_reference.collation")

_local = threading.local()
_NOT_IMPORTED: Any = object()
_icu: Any = _NOT_IMPORTED
"""PyICU, imported at the first key (:func:`_icu_module`); ``None`` where it is missing."""


def _icu_module() -> Any:
    """PyICU, imported when first needed: only ids created in the same millisecond need a key,
    which most listings never have, and its import was a sizeable part of the server's start."""
    global _icu
    if _icu is _NOT_IMPORTED:
        try:  # pragma: no branch - which arm runs depends on the platform
            import icu
        except ImportError:  # pragma: no cover - exercised only where no PyICU wheel exists
            icu = None
        _icu = icu
    return _icu


def icu_available() -> bool:
    """Whether the exact ICU collation is in use (the fallback is an approximation)."""
    return _icu_module() is not None


def _collator() -> Any:
    """One root collator per thread: ICU collators must not be shared across threads."""
    collator = getattr(_local, "collator", None)
    if collator is None:
        icu = _icu_module()
        collator = icu.Collator.createInstance(icu.Locale.getRoot())
        _local.collator = collator
    return collator


@functools.lru_cache(maxsize=1 << 12)
def _icu_key(text: str) -> bytes:
    """Memoised: a listing sorts the same tied ids again at every walk."""
    # PyICU passes lone surrogates through as UTF-16 code units, exactly as V8
    # hands a JS string to ICU, so no repair is needed (or wanted) here.
    key: bytes = _collator().getSortKey(text)
    return key


_SPACING_CONTROLS = frozenset("\t\n\v\f\r\x85")


def _class_of(char: str) -> int:
    """0 ignorable, 1 spaces/punctuation/symbols, 2 digits, 3 letters, 4 everything else."""
    category = unicodedata.category(char)
    if category in ("Cc", "Cf"):
        return 1 if char in _SPACING_CONTROLS else 0
    return {"Z": 1, "P": 1, "S": 1, "N": 2, "L": 3, "M": 3}.get(category[0], 4)


def _fallback_key(text: str) -> tuple[tuple[tuple[int, str], ...], tuple[str, ...], tuple[int, ...]]:
    """Approximate UCA root: (base characters, accents, case) compared level by level. A lone
    surrogate decomposes to itself: a class 4 base with no accent and no case."""
    primary: list[tuple[int, str]] = []
    secondary: list[str] = []
    tertiary: list[int] = []
    for char in text:
        decomposed = unicodedata.normalize("NFD", char)
        base = decomposed[0]
        marks = "".join(c for c in decomposed[1:] if unicodedata.combining(c))
        klass = _class_of(base)
        if klass == 0:
            continue  # ICU ignores NUL, most controls and format characters
        folded = base.casefold()
        primary.append((klass, folded))
        secondary.append(marks)
        tertiary.append(0 if base == folded else 1)
    return tuple(primary), tuple(secondary), tuple(tertiary)


@functools.cache
def _warn_once() -> None:
    _LOG.warning(
        "PyICU is not available: session ids created in the same millisecond are ordered by an "
        "approximation of ICU root collation, which can differ from dsh for unusual characters"
    )


def locale_compare_key(text: str) -> Any:
    """A sort key whose order is ``a.localeCompare(b)``; equal keys mean ICU calls the strings equal."""
    if _icu_module() is not None:
        return _icu_key(text)
    _warn_once()
    return _fallback_key(text)


def locale_compare(a: str, b: str) -> int:
    """``a.localeCompare(b)``: negative, zero or positive."""
    key_a, key_b = locale_compare_key(a), locale_compare_key(b)
    return int(key_a > key_b) - int(key_a < key_b)
