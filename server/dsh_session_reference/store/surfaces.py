"""The catalog's surface cache: recent ``prepare`` reads kept while their logs are unchanged.

Diagnostics, hover and previews ask for the same few sessions again and again; a surface or
bounded conversation is kept (at most :data:`MAX_SURFACES`, none of a whole log over
:data:`MAX_SURFACE_LOG_BYTES`) and returned only while its log has the fingerprint it was read at.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Final, TypeVar, cast

from ..model import ConversationSnapshot, SurfaceSnapshot
from .index.rows import ReadAt, fingerprint_at, fp_size

MAX_SURFACES: Final = 16
MAX_SURFACE_LOG_BYTES: Final = 8 << 20

Kept = SurfaceSnapshot | ConversationSnapshot
Read = TypeVar("Read", SurfaceSnapshot, ConversationSnapshot)


class SurfaceCache:
    """Reads keyed by what was asked (``("surface", id)``, ``("conversation", id, budget)``): each
    key's reads are of one kind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kept: OrderedDict[tuple[object, ...], ReadAt[Kept]] = OrderedDict()

    def read(self, key: tuple[object, ...], location: str | None, read: Callable[[], Read]) -> Read:
        """``read()`` of the log at ``location`` (where the latest listing has it), or what it
        returned before while the log is unchanged; kept for the next ask unless the log changed
        while it was read."""
        before = fingerprint_at(location) if location is not None else None
        with self._lock:
            entry = self._kept.get(key)
            if entry is not None and before is not None and entry.path == location and entry.fp == before:
                self._kept.move_to_end(key)
                return cast(Read, entry.value)  # what ``read`` returned for this key
        value = read()
        path = value.session.location
        if path is None or before is None:
            return value
        if isinstance(value, SurfaceSnapshot) and fp_size(before) > MAX_SURFACE_LOG_BYTES:
            return value  # a whole surface of a big log is not kept; a bounded conversation is
        if fingerprint_at(path) != before:
            return value  # written to while it was read
        with self._lock:
            self._kept[key] = ReadAt(path, before, value)
            self._kept.move_to_end(key)
            while len(self._kept) > MAX_SURFACES:
                self._kept.popitem(last=False)
        return value
