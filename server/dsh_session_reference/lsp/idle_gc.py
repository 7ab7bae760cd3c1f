"""Full garbage collections while the editor is idle, not in the middle of a keystroke.

A warm server keeps a listing, a title map and a candidate table with a few
objects per session; at 10,000 sessions that is over 100,000 objects the
cyclic collector must traverse, and CPython's automatic full collection
(triggered by allocation counts, i.e. by whatever request happens to be
running) then stalls that request for 50-100 ms, and proportionally more at
50,000. Reference counting frees almost everything the server makes; the
cyclic collector only reclaims cycles, which can wait a few seconds. So the
server defers automatic full collections and runs them itself once no message
has arrived for :data:`QUIET` seconds, or at the latest every :data:`LONGEST`
seconds under continuous traffic. Young collections (cheap, proportional to
new objects) are left as they are. The objects the server's imports made are
frozen as it starts (``main``); the first full collection takes them back.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable
from typing import Final

QUIET: Final = 2.0
"""Seconds without a message after which a pending full collection runs."""
LONGEST: Final = 300.0
"""A full collection runs at least this often, however busy the editor is."""
DEFERRED_THRESHOLD: Final = 1_000_000
"""gen-2 threshold that keeps CPython from starting full collections on its own."""


class IdleCollector:
    """Runs deferred full collections from the event loop (timers only: no task to leak)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._saved: tuple[int, int, int] | None = None
        self.last_message = clock()
        self.last_collection = self.last_message
        self.collections = 0

    def start(self, loop: asyncio.AbstractEventLoop) -> None:
        """Take over full collections (idempotent)."""
        if self._loop is not None:
            return
        self._loop = loop
        self._saved = gc.get_threshold()
        young, middle, _ = self._saved
        gc.set_threshold(young, middle, DEFERRED_THRESHOLD)
        self._schedule()

    def stop(self) -> None:
        """Give collections back to CPython (the server is exiting)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._saved is not None:
            gc.set_threshold(*self._saved)
            self._saved = None
        self._loop = None

    def touch(self) -> None:
        """A message arrived: the editor is busy."""
        self.last_message = self._clock()

    def _schedule(self) -> None:
        if self._loop is not None and not self._loop.is_closed():
            self._timer = self._loop.call_later(QUIET, self._tick)

    def _tick(self) -> None:
        now = self._clock()
        idle = now - self.last_message >= QUIET
        overdue = now - self.last_collection >= LONGEST
        # gc.get_count()[2] counts middle-generation collections since the last full one:
        # zero means nothing new has aged into the old generation worth traversing. Frozen
        # objects (the start's imports) are taken back, with the cycles among them.
        if (idle or overdue) and (gc.get_count()[2] > 0 or gc.get_freeze_count() > 0):
            gc.unfreeze()
            gc.collect()
            self.collections += 1
            self.last_collection = self._clock()
        self._schedule()
