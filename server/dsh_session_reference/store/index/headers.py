"""A listed header as a server keeps it: one dict a log, as small as a dict can be.

A server keeps the header of every listed log, shared by the log's index row and every record
listed from it (:func:`header_dict`); a big root keeps 200,000 of them. A flat header's repeated
values are interned and its keys shared with every other header's (:func:`compact_header`);
:mod:`.rows` keeps them in its listing entries, :mod:`.kept` in the listing a server leaves.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Final

KeptHeader = dict[str, Any]
"""A listed header as kept in memory: one dict, shared by the row and every record listed from it
(:func:`header_dict`), a flat one's repeated values interned and its keys shared with every other
header's (:func:`compact_header`), since a big root keeps one per log. Keeping the row's as a flat
tuple beside each record's dict cost 120 bytes a session."""


def _nested(header: KeptHeader) -> bool:
    return any(type(value) in (dict, list) for value in header.values())


_SHARED_VALUES: Final = frozenset({"cwd", "origin", "agentPreset"})
"""Header keys whose string values repeat across a root's logs (a project's logs share a cwd,
every subagent's ``origin`` is ``"subagent"``, a preset is one of a few): kept once for the whole
root. An id or a parent's id is one a log, and interning it would only add a table entry."""


HEADER_KEYS: Final = (
    "type",
    "version",
    "id",
    "createdAt",
    "cwd",
    "parentSession",
    "seedLength",
    "origin",
    "delegationDepth",
    "agentPreset",
)
"""A session header's keys in upstream's order: the keys :func:`compact_header`'s dicts share."""
_HEADER_KEY_SET: Final = frozenset(HEADER_KEYS)


def _holder(keys: int) -> type:
    """A class whose instances are made only for their ``__dict__``: a header of ``keys`` keys.
    Its shared key table is filled with :data:`HEADER_KEYS` before any header's (it holds at
    most 30 keys), and a class serves one length only: CPython sizes an instance's values by the
    instances made before it, and an 8-key header after 6-key ones took 471 bytes, not 160."""
    holder = type(f"_Header{keys}", (), {})
    holder().__dict__.update(dict.fromkeys(HEADER_KEYS))
    return holder


_HOLDERS: Final = tuple(_holder(keys) for keys in range(len(HEADER_KEYS) + 1))


def compact_header(header: dict[str, Any]) -> KeptHeader:
    """``header`` as a row keeps it: a flat one with the values of :data:`_SHARED_VALUES` interned
    (one string each for the whole root, not one a log: a parsed ``"subagent"`` alone is 57
    bytes), one with nested values as it is.

    A flat one is an instance dict (:func:`_holder`), a dict like any other (its key order
    and values are the header's) whose keys are kept once for all of them (CPython's key-sharing
    dictionaries): 145 bytes for a usual header where an ordinary dict is 280, 27 MB at 200,000
    sessions. Only a header of upstream's keys takes one: a key outside the shared table would
    be added to it for every later header, and once it is full (30 keys: one hand-made header can
    fill it) no dict shares it. Any other header is an ordinary dict, as before."""
    if _nested(header):
        return header
    kept: dict[str, Any] = _HOLDERS[len(header)]().__dict__ if _HEADER_KEY_SET.issuperset(header) else {}
    for key, value in header.items():
        kept[key] = sys.intern(value) if key in _SHARED_VALUES and type(value) is str else value
    return kept


def header_dict(header: KeptHeader) -> dict[str, Any]:
    """The header a record listed from a row takes: the row's own dict when it is flat (shared:
    nothing changes a listed header, and a big root keeps one per log), a copy when it holds
    nested values (so no two records share those)."""
    if _nested(header):
        copied: dict[str, Any] = json.loads(json.dumps(header))
        return copied
    return header
