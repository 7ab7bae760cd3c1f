"""A :class:`~dsh_session_reference.model.SessionSource` that remembers what has not changed on disk.

``JsonlSessionStore`` reads the disk afresh on every call, which is what
``prepare`` wants but too slow for completion on every keystroke: a listing
opens every log's header and a title read replays a whole log. This wrapper
answers from memory while the files look the same as when they were read:

* the listing is keyed by a walk of the root's directories and the identity,
  size and mtime of every log in them (a new session, a deleted one or any
  append changes the key, so dsh's writes show at the next request);
* a title or a surface is keyed by its log file's identity, size and mtime.
  Title keys come from the latest listing walk (every flow that reads titles
  lists first, as ``list_candidates`` does), so a warm ``@`` over a thousand
  sessions costs one walk of the root and no reads.

An entry is stored only when the key taken before the read equals the key
after it, so a log appended to *during* a read is never cached in a state it
did not have. Nothing here writes to the root.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Final

from ..model import SessionRecord, SurfaceSnapshot, TitleObservation
from ..store.jsonl_store import JsonlSessionStore
from ..store.layout import LOG_NAMES

FileKey = tuple[int, int, int, int] | None
"""``(st_dev, st_ino, st_size, st_mtime_ns)`` of a path, ``None`` when it cannot be stat'ed."""
Fingerprint = tuple[bool, tuple[tuple[str, FileKey], ...]]

MAX_SURFACES: Final = 16
MAX_TITLES: Final = 100_000


def file_key(path: str) -> FileKey:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns


def _entries(path: str) -> list[os.DirEntry[str]]:
    try:
        with os.scandir(path) as iterator:
            return list(iterator)
    except OSError:
        return []


def root_fingerprint(root: str) -> Fingerprint:
    """Whether the root is a directory, and every log path the store's listing looks at with its key.

    Runs on every completion, so it is written for speed: one ``stat`` per
    candidate log name, no ``os.path.join``. Entries come in directory order;
    if that order ever changed, the only cost would be one extra listing.
    """
    parts: list[tuple[str, FileKey]] = []
    names = [os.sep + name for name in LOG_NAMES.values()]
    stat = os.stat
    for project in _entries(root):
        if not project.is_dir(follow_symlinks=False):
            continue
        for entry in _entries(project.path):
            if entry.is_dir(follow_symlinks=False):
                for name in names:
                    log = entry.path + name
                    try:
                        info = stat(log)
                    except OSError:
                        parts.append((log, None))
                    else:
                        parts.append((log, (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)))
            elif entry.is_file(follow_symlinks=False):
                parts.append((entry.path, file_key(entry.path)))
    return os.path.isdir(root), tuple(parts)


def _key_of(location: str | None, walked: dict[str, FileKey]) -> FileKey:
    if location is None:
        return None
    key = walked.get(location)
    return key if key is not None else file_key(location)


class CachedSessionSource:
    """``JsonlSessionStore`` behind stat-keyed caches; thread-safe like the store itself."""

    def __init__(self, inner: JsonlSessionStore) -> None:
        self.inner = inner
        self.root = inner.root
        self._lock = threading.Lock()
        self._listing: tuple[Fingerprint, list[SessionRecord]] | None = None
        self._walked: dict[str, FileKey] = {}
        self._titles: OrderedDict[tuple[str, str], tuple[FileKey, TitleObservation]] = OrderedDict()
        self._surfaces: OrderedDict[str, tuple[str, FileKey, SurfaceSnapshot]] = OrderedDict()

    def list_sessions(self, stop: threading.Event | None = None) -> list[SessionRecord]:
        before = root_fingerprint(self.root)
        with self._lock:
            self._walked = dict(before[1])
            cached = self._listing
        if cached is not None and cached[0] == before:
            return list(cached[1])
        records = self.inner.list_sessions(stop)
        if root_fingerprint(self.root) == before:
            with self._lock:
                self._listing = (before, list(records))
        return records

    def read_titles(
        self, records: Sequence[SessionRecord], stop: threading.Event | None = None
    ) -> list[TitleObservation]:
        with self._lock:
            walked = self._walked
        keys = [_key_of(record.location, walked) for record in records]
        found: dict[int, TitleObservation] = {}
        with self._lock:
            for index, (record, key) in enumerate(zip(records, keys, strict=True)):
                entry = None if key is None else self._titles.get((record.id, record.location or ""))
                if entry is not None and entry[0] == key:
                    found[index] = entry[1]
        missing = [index for index in range(len(records)) if index not in found]
        if missing:
            observations = self.inner.read_titles([records[index] for index in missing], stop)
            with self._lock:
                for index, observation in zip(missing, observations, strict=True):
                    found[index] = observation
                    record, key = records[index], keys[index]
                    if key is None or observation.error is not None or record.location is None:
                        continue
                    if file_key(record.location) == key:
                        self._titles[(record.id, record.location)] = (key, observation)
                        self._titles.move_to_end((record.id, record.location))
                while len(self._titles) > MAX_TITLES:
                    self._titles.popitem(last=False)
        return [found[index] for index in range(len(records))]

    def read_surface(self, session_id: str, stop: threading.Event | None = None) -> SurfaceSnapshot:
        with self._lock:
            entry = self._surfaces.get(session_id)
            location = entry[0] if entry is not None else self._listed_location(session_id)
        before = None if location is None else file_key(location)
        if entry is not None and before is not None and before == entry[1]:
            with self._lock:
                self._surfaces.move_to_end(session_id)
            return entry[2]
        snapshot = self.inner.read_surface(session_id, stop)
        path = snapshot.session.location
        if path is None or path != location or before is None or file_key(path) != before:
            return snapshot  # not seen before, moved, or written to while it was read
        with self._lock:
            self._surfaces[session_id] = (path, before, snapshot)
            self._surfaces.move_to_end(session_id)
            while len(self._surfaces) > MAX_SURFACES:
                self._surfaces.popitem(last=False)
        return snapshot

    def _listed_location(self, session_id: str) -> str | None:
        """Where the last listing found ``session_id`` (callers hold the lock)."""
        if self._listing is None:
            return None
        for record in self._listing[1]:
            if record.id == session_id:
                return record.location
        return None
