"""What worker processes send back, as plain data, and listed records batched for them."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from functools import partial
from typing import TypeVar

from ...model import SessionRecord, TitleObservation
from .rows import Fingerprint, ReadAt, fingerprint_at, stable_read

T = TypeVar("T")


Verified = tuple[TitleObservation, Fingerprint, int] | None
"""What a worker's title read of one record found: the observation, the fingerprint it holds for
and when the read began; ``None`` if the log changed while it was read (or was gone): nothing to keep."""


def kept_read(path: str, read: Callable[[], T]) -> tuple[T, Fingerprint, int] | None:
    """:func:`.rows.stable_read` of the log at ``path`` as it is now: ``(value, fingerprint, read
    at)``, or ``None`` (nothing to keep) when the log cannot be looked at (it is not read) or
    changed while it was read."""
    before = fingerprint_at(path)
    if before is None:
        return None
    value, fp, started = stable_read(path, read, before)
    return None if fp is None else (value, fp, started)


def read_texts(root: str, paths: Sequence[str], read: Callable[[str, str], T]) -> list[ReadAt[T]]:
    """``read(path, root_real)`` of each log that held still while it was read (:func:`kept_read`);
    a log that changed meanwhile, or cannot be looked at, is left out."""
    root_real = os.path.realpath(root)
    found = [(path, kept_read(path, partial(read, path, root_real))) for path in paths]
    return [ReadAt(path, kept[1], kept[0]) for path, kept in found if kept is not None]


def batches(records: Sequence[SessionRecord], batch_bytes: int, max_count: int) -> list[list[SessionRecord]]:
    """Records grouped so each batch reads about ``batch_bytes`` of logs (sizes from the log files)."""
    grouped: list[list[SessionRecord]] = []
    current: list[SessionRecord] = []
    size = 0
    for record in records:
        try:
            weight = os.lstat(record.location or "").st_size
        except OSError:
            weight = 0
        if current and (size + weight > batch_bytes or len(current) >= max_count):
            grouped.append(current)
            current, size = [], 0
        current.append(record)
        size += weight
    if current:
        grouped.append(current)
    return grouped
