"""Titles of a cold index read in worker processes: every core replays logs, biggest first.

A title read replays a whole log (:meth:`~..jsonl_store.ReadsOnDemand.read_title`), so a query
over a cold index is CPU work proportional to the store. The logs go out in small batches, biggest
first, to whichever worker is free: a static split left one core idle for a second or more while
the other finished a batch of huge logs.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, wait
from typing import Final

from ...cancellation import AbortSignal, check
from ...model import SessionRecord
from ..workers import WorkerProcess
from .records import Verified, batches

LOG = logging.getLogger("dsh_session_reference.index")

WORKER_BATCH_BYTES: Final = 2 << 20
"""Bytes of log files (as stored) per batch: small enough that the last batches finish together,
big enough that a batch's round trip is noise."""
WORKER_IN_FLIGHT: Final = 2
"""Batches queued at each worker, so it starts the next while its last answer travels back."""


class TitleWorkers:
    """Up to ``count`` worker processes for one cold title read at a time, started by the read or
    ahead of it (:meth:`start`, by a caller that knows a read of every title is coming)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._lock = threading.Lock()
        self._early: list[WorkerProcess] = []

    def start(self) -> None:
        """Start the workers now: their start-up (0.1-0.2 s each) overlaps the caller's."""
        with self._lock:
            if self.count < 2 or self._early:
                return
            try:
                for _ in range(self.count):
                    self._early.append(WorkerProcess())
            except OSError as error:
                LOG.info("no title workers ahead of time: %s", error)
                for worker in self._early:
                    worker.close()
                self._early = []

    def close(self) -> None:
        """Stop the workers started ahead and not used (idempotent)."""
        with self._lock:
            early, self._early = self._early, []
        for worker in early:
            worker.close()

    def verify(
        self,
        root: str,
        misses: list[tuple[int, SessionRecord]],
        remember: Callable[[SessionRecord, Verified], object],
        stop: AbortSignal | None,
    ) -> None:
        """Read the title of each ``(size, record)`` and ``remember`` each answer as it comes; the
        workers are closed at the end, finished or not."""
        wanted = min(self.count, len(misses))
        with self._lock:
            early, self._early = self._early[:wanted], self._early[wanted:]
        workers = early + [WorkerProcess() for _ in range(wanted - len(early))]
        misses = sorted(misses, key=lambda miss: -miss[0])
        queue = collections.deque(batches([record for _, record in misses], WORKER_BATCH_BYTES, 64))
        futures: dict[Future[list[Verified]], tuple[WorkerProcess, list[SessionRecord]]] = {}

        def feed(worker: WorkerProcess) -> None:
            if queue:
                group = queue.popleft()
                task = worker.submit("verify_titles", root, group)
                futures[task] = (worker, group)

        try:
            for worker in workers:
                for _ in range(WORKER_IN_FLIGHT):
                    feed(worker)
            while futures:
                check(stop)
                done, _ = wait(list(futures), timeout=0.1, return_when=FIRST_COMPLETED)
                for future in done:
                    worker, group = futures.pop(future)
                    feed(worker)
                    for record, found in zip(group, future.result(), strict=True):
                        remember(record, found)
        finally:
            for worker in workers:
                worker.close()
