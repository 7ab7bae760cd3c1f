"""A listed header as a server keeps it: one dict a log, as small as a dict can be.

A server keeps the header of every listed log, shared by the log's index row and every record
listed from it (:func:`header_dict`); a big root keeps 200,000 of them. The header nearly every log
has is kept as its three values that differ (:class:`UsualHeader`); any other flat header's repeated
values are interned and its keys shared with every other header's (:func:`compact_header`);
:mod:`.rows` keeps them in its listing entries, :mod:`.kept` in the listing a server leaves.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from typing import Any, Final


class UsualHeader(Mapping[str, Any]):
    """The listed header of a top-level session as dsh writes it,
    ``{"version": 0, "id": …, "createdAt": …, "cwd": …, "delegationDepth": 0}`` (``cwd`` may be
    absent), kept as the three values that differ from log to log: 64 bytes where the smallest
    dict of its five keys is 148 (30 MB at 200,000 sessions). Read-only like every kept header; it
    reads as the dict it stands for (the same keys in the same order, the same values), and
    :func:`header_json` writes it as that dict."""

    __slots__ = ("created_at", "cwd", "id")

    def __init__(self, session_id: str, created_at: int, cwd: str | None) -> None:
        self.id = session_id
        self.created_at = created_at
        self.cwd = cwd

    def __getitem__(self, key: str) -> Any:
        if key == "version" or key == "delegationDepth":
            return 0
        if key == "id":
            return self.id
        if key == "createdAt":
            return self.created_at
        if key == "cwd" and self.cwd is not None:
            return self.cwd
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(_USUAL_KEYS if self.cwd is not None else _USUAL_KEYS_NO_CWD)

    def __len__(self) -> int:
        return 5 if self.cwd is not None else 4

    def __repr__(self) -> str:
        return repr(dict(self))


_USUAL_KEYS: Final = ("version", "id", "createdAt", "cwd", "delegationDepth")
_USUAL_KEYS_NO_CWD: Final = ("version", "id", "createdAt", "delegationDepth")


def _usual(header: Mapping[str, Any]) -> UsualHeader | None:
    """``header`` as a :class:`UsualHeader`, if it is one: exactly its keys in its order, each value
    of its type (``0`` an ``int``, not ``0.0`` or ``False``)."""
    keys = tuple(header)
    if keys != _USUAL_KEYS and keys != _USUAL_KEYS_NO_CWD:
        return None
    version, session_id, created_at, depth = (header[key] for key in _USUAL_KEYS_NO_CWD)
    cwd = header.get("cwd")
    if not (
        type(version) is int
        and version == 0
        and type(depth) is int
        and depth == 0
        and type(session_id) is str
        and type(created_at) is int
        and (cwd is None if len(keys) == 4 else type(cwd) is str)
    ):
        return None
    return UsualHeader(session_id, created_at, None if cwd is None else sys.intern(cwd))


def header_json(value: object) -> dict[str, Any]:
    """``json.dumps``'s ``default`` wherever a kept header is written: a :class:`UsualHeader` as
    the dict it stands for (anything else JSON cannot spell is refused, as without it)."""
    if isinstance(value, UsualHeader):
        return dict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


KeptHeader = dict[str, Any] | UsualHeader
"""A listed header as kept in memory, shared by the row and every record listed from it
(:func:`header_dict`): the usual one as a :class:`UsualHeader`, any other flat one a dict whose
repeated values are interned and whose keys are shared with every other header's
(:func:`compact_header`), since a big root keeps one per log. Keeping the row's as a flat tuple
beside each record's dict cost 120 bytes a session."""


def _nested(header: Mapping[str, Any]) -> bool:
    return type(header) is not UsualHeader and any(type(value) in (dict, list) for value in header.values())


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


def compact_header(header: Mapping[str, Any]) -> KeptHeader:
    """``header`` as a row keeps it: the usual one as a :class:`UsualHeader`; another flat one with
    the values of :data:`_SHARED_VALUES` interned (one string each for the whole root, not one a
    log: a parsed ``"subagent"`` alone is 57 bytes); one with nested values as it is.

    Another flat one is an instance dict (:func:`_holder`), a dict like any other (its key order
    and values are the header's) whose keys are kept once for all of them (CPython's key-sharing
    dictionaries): 145 bytes for a header of five keys where an ordinary dict is 280. Only a header
    of upstream's keys takes one: a key outside the shared table would be added to it for every
    later header, and once it is full (30 keys: one hand-made header can fill it) no dict shares
    it. Any other header is an ordinary dict, as before."""
    if (usual := _usual(header)) is not None:
        return usual
    if _nested(header):
        return header if isinstance(header, dict) else dict(header)
    kept: dict[str, Any] = _HOLDERS[len(header)]().__dict__ if _HEADER_KEY_SET.issuperset(header) else {}
    for key, value in header.items():
        kept[key] = sys.intern(value) if key in _SHARED_VALUES and type(value) is str else value
    return kept


def header_dict(header: KeptHeader) -> KeptHeader:
    """The header a record listed from a row takes: the row's own dict when it is flat (shared:
    nothing changes a listed header, and a big root keeps one per log), a copy when it holds
    nested values (so no two records share those)."""
    if _nested(header):
        copied: dict[str, Any] = json.loads(json.dumps(header))
        return copied
    return header
