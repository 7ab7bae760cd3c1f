"""What the catalog tells its listeners when dsh writes under the root, and when.

The watcher (:class:`.watch.RootWatcher`) reports paths; :func:`changed_sessions` says which
listed sessions they belong to and whether the listing itself may have changed. On a root
served from memory, what changed is held (:meth:`Listeners.hold`) until the walk it asks for has
caught up, then told (:meth:`Listeners.take`); on a small root it is told at once.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

from ..model import SessionRecord, StoreChange
from .watch import depth_below

LOG = logging.getLogger("dsh_session_reference.store.catalog")


def changed_sessions(
    root: str, paths: frozenset[str], in_directory: Callable[[str], SessionRecord | None] | None
) -> StoreChange:
    """The listed sessions (``in_directory``: the session listed from a directory, ``None`` before
    the first listing) that ``paths`` belong to, and whether the listing may have changed: a session
    directory came or went, or a log of a session not listed yet was written."""
    sessions: set[str] = set()
    listing = in_directory is None
    for path in paths:
        depth = depth_below(root, path)
        record = None
        if depth is not None and depth >= 2 and in_directory is not None:
            record = in_directory(path if depth == 2 else os.path.dirname(path))
        if record is None or depth == 2:
            listing = True
        if record is not None:
            sessions.add(record.id)
    return StoreChange(frozenset(sessions), listing)


class Listeners:
    """Who is told of changes, and what the watcher saw that they have not been told of yet."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: list[Callable[[StoreChange], None]] = []
        self._held: StoreChange | None = None

    def add(self, listener: Callable[[StoreChange], None]) -> None:
        with self._lock:
            self._listeners.append(listener)

    def tell(self, change: StoreChange) -> None:
        for listener in list(self._listeners):
            try:
                listener(change)
            except Exception:  # one listener's failure must not keep the change from the others
                LOG.exception("a listener for changes under the sessions root failed")

    def hold(self, change: StoreChange) -> None:
        """Keep a change to tell once the walk it asks for has listed the root."""
        with self._lock:
            held = self._held or StoreChange(frozenset(), False)
            self._held = StoreChange(held.sessions | change.sessions, held.listing or change.listing)

    def take(self) -> StoreChange | None:
        """What was held, taken before a walk: what the watcher sees during the walk stays for the
        next one (which it has asked for)."""
        with self._lock:
            held, self._held = self._held, None
        return held
