"""Deferred full collections: none while messages keep coming, one once the editor is quiet.

The collector's clock is replaced, so the test decides what "quiet" means
instead of racing real time; the collections themselves are real. Every
message counts as activity for the index's revalidation walk too.
"""

from __future__ import annotations

import asyncio
import gc
import time
from pathlib import Path

import pytest
from lsprotocol import types

from dsh_session_reference.lsp import idle_gc
from dsh_session_reference.lsp.idle_gc import IdleCollector
from dsh_session_reference.lsp.server import DshLanguageServer


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


def busy_step(collector: IdleCollector, clock: Clock, seconds: float) -> None:
    """A message arrives, some objects age into the old generation, time passes, the timer fires."""
    collector.touch()
    gc.collect(1)
    clock.now += seconds
    collector._tick()


async def test_full_collections_wait_for_a_quiet_editor(clock: Clock) -> None:
    saved = gc.get_threshold()
    collector = IdleCollector(clock)
    collector.start(asyncio.get_running_loop())
    try:
        assert gc.get_threshold()[2] == idle_gc.DEFERRED_THRESHOLD
        for _ in range(10):
            busy_step(collector, clock, idle_gc.QUIET / 4)
        assert collector.collections == 0
        assert gc.get_count()[2] > 0  # a full collection is due, and waits
        clock.now += idle_gc.QUIET
        collector._tick()
        assert collector.collections == 1
        assert gc.get_count()[2] == 0
        collector._tick()  # nothing new: no second collection
        assert collector.collections == 1
    finally:
        collector.stop()
    assert gc.get_threshold() == saved


async def test_a_busy_editor_still_gets_a_collection_when_one_is_overdue(clock: Clock) -> None:
    collector = IdleCollector(clock)
    collector.start(asyncio.get_running_loop())
    try:
        steps = int(idle_gc.LONGEST / (idle_gc.QUIET / 4)) + 2
        for _ in range(steps):
            busy_step(collector, clock, idle_gc.QUIET / 4)
        assert collector.collections == 1
    finally:
        collector.stop()


def test_every_message_is_activity_for_the_collector_and_the_index(tmp_path: Path) -> None:
    server = DshLanguageServer(sessions=str(tmp_path))
    source = server.engine.store
    try:
        collector_saw, source_saw = server.idle_gc.last_message, source.catalog.scheduler.active
        time.sleep(0.01)
        server.protocol.handle_message(types.CancelNotification(params=types.CancelParams(id=5)))
        assert server.idle_gc.last_message > collector_saw
        assert source.catalog.scheduler.active > source_saw
    finally:
        source.close()
