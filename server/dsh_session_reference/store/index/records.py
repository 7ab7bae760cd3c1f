"""What worker processes send back, as plain data, and listed records batched for them."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import NamedTuple

from ...model import SessionRecord
from .rows import Fingerprint


class Verified(NamedTuple):
    """What a worker found for one record's title."""

    fp: Fingerprint | None
    """The fingerprint the answer holds for; ``None`` if the log changed while it was read."""
    started_ns: int
    title: str | None
    error: str | None


class Scanned(NamedTuple):
    """What a worker's byte scan found for one log's title (:func:`..title_scan.scan_last_title`)."""

    path: str
    fp: Fingerprint | None
    """The fingerprint the answer holds for; ``None`` if the log changed while it was scanned."""
    title: str | None


class ListedEntry(NamedTuple):
    """A listing entry a worker read for the walk: the index row's listing, ready to keep."""

    path: str
    fp: Fingerprint
    started_ns: int
    text: str


class MessageText(NamedTuple):
    """A log's message text for body search, with the fingerprint it was read at (``None``: the
    log changed meanwhile, and the text is not kept)."""

    path: str
    fp: Fingerprint | None
    text: str


def batches(records: Sequence[SessionRecord], max_bytes: int, max_count: int) -> list[list[SessionRecord]]:
    """Records grouped so each batch reads about ``max_bytes`` of logs (sizes from the log files)."""
    grouped: list[list[SessionRecord]] = []
    current: list[SessionRecord] = []
    size = 0
    for record in records:
        try:
            weight = os.lstat(record.location or "").st_size
        except OSError:
            weight = 0
        if current and (size + weight > max_bytes or len(current) >= max_count):
            grouped.append(current)
            current, size = [], 0
        current.append(record)
        size += weight
    if current:
        grouped.append(current)
    return grouped
