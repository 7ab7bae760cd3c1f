"""Packed chunk rows: many ``assistant/chunk`` events of one log stored as one line.

dsh packs a run of streamed text, reasoning or tool-argument chunks into one row (``seq0``,
``time0``, the members and the time gaps between them); upstream's ``validateRow`` checks a row
and ``expandRow`` makes its events. A malformed row reads as an unparsable committed line.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import accumulate
from typing import Any, Final

from .jsvalue import MAX_SAFE_INTEGER, is_number, is_safe_integer

_ROW_TAGS: Final = frozenset({"text-chunks", "reasoning-chunks", "tool-call-chunks"})


class RowError(Exception):
    """A malformed packed chunk row (upstream: an unparsable committed event)."""


def exact_keys(value: Mapping[str, Any], keys: tuple[str, ...]) -> bool:
    """Whether ``value`` has exactly ``keys`` (in any order)."""
    return len(value) == len(keys) and all(key in value for key in keys)


def _safe_integers(values: list[Any]) -> bool:
    """Whether every item is a safe integer: ``Number.isSafeInteger`` per item, in native calls
    for the usual list of ints (a chunk row's gaps are most of what a big log holds)."""
    if set(map(type, values)) == {int}:
        return bool(min(values) >= -MAX_SAFE_INTEGER and max(values) <= MAX_SAFE_INTEGER)
    return all(map(is_safe_integer, values))


def _run_payload(data: dict[str, Any], payload_key: str) -> list[str]:
    if not (is_number(data.get("turn")) and is_number(data.get("step")) and is_number(data.get("index"))):
        raise RowError("turn/step/index must be numbers")
    payload = data.get(payload_key)
    if not isinstance(payload, list) or not payload or set(map(type, payload)) != {str}:
        raise RowError(f"{payload_key} must be a non-empty string array")
    dt = data.get("dt")
    if not isinstance(dt, list) or not _safe_integers(dt):
        raise RowError("dt must be an array of safe integers")
    if len(dt) != len(payload) - 1:
        raise RowError("dt length does not match members")
    return payload


_TOOL_KEYS_NAMED: Final = ("turn", "step", "index", "id", "name", "dt", "args")
_TOOL_KEYS: Final = ("turn", "step", "index", "id", "dt", "args")
_TEXT_KEYS: Final = ("turn", "step", "index", "dt", "texts")


def packed_row(value: Any) -> tuple[int, list[Any]] | None:
    """Upstream's ``validateRow`` for a packed chunk row: the first seq and every member's time
    of the events ``expandRow`` would make (see :meth:`.logfile.EventSink.push_chunks`), or ``None``
    for a record that is one event as is. :class:`RowError` for a row upstream refuses.
    """
    tag = value.get("type") if isinstance(value, dict) else None
    if not (isinstance(tag, str) and tag in _ROW_TAGS):
        return None
    if not exact_keys(value, ("type", "seq0", "time0", "data")):
        raise RowError("envelope")
    seq0, time0, data = value["seq0"], value["time0"], value["data"]
    if not is_safe_integer(seq0) or seq0 < 0:
        raise RowError("seq0")
    if not is_safe_integer(time0):
        raise RowError("time0")
    if not isinstance(data, dict):
        raise RowError("data")  # an array has index keys, never the exact row keys
    if tag == "tool-call-chunks":
        named = exact_keys(data, _TOOL_KEYS_NAMED)
        if not named and not exact_keys(data, _TOOL_KEYS):
            raise RowError("data keys")
        if not isinstance(data["id"], str) or (named and not isinstance(data["name"], str)):
            raise RowError("id/name")
        members = _run_payload(data, "args")
    else:
        if not exact_keys(data, _TEXT_KEYS):
            raise RowError("data keys")
        members = _run_payload(data, "texts")
    if not is_safe_integer(seq0 + len(members) - 1):
        raise RowError("member seqs")
    times = list(accumulate(data["dt"], initial=time0))
    if not _safe_integers(times):
        raise RowError("member times")
    return seq0, times
