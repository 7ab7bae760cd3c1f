"""Deferred full collections: none while messages keep coming, one once the editor is quiet.

The collector's clock is replaced, so the test decides what "quiet" means
instead of racing real time; the collections themselves are real. Every
message counts as activity for the index's revalidation walk too.
"""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import time
import weakref
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


class Node:
    """An object in a cycle with itself: only the cyclic collector frees it."""

    def __init__(self) -> None:
        self.me = self


async def test_the_first_idle_collection_takes_back_what_the_start_froze(clock: Clock) -> None:
    node = Node()
    gone = weakref.ref(node)
    del node
    gc.freeze()  # as the server's start leaves its imports (main._uncollected)
    collector = IdleCollector(clock)
    collector.start(asyncio.get_running_loop())
    try:
        gc.collect()
        assert gone() is not None  # frozen: collections skip it
        clock.now += idle_gc.QUIET
        collector._tick()
        assert gone() is None and gc.get_freeze_count() == 0 and collector.collections == 1
    finally:
        collector.stop()
        gc.unfreeze()


def test_the_server_imports_its_stack_without_collections_and_freezes_it() -> None:
    """Collections while lsprotocol's classes are made traverse them again and again (35-45 ms of
    the start, docs/benchmarks.md): none run while the LSP stack is imported for ``lsp``, and what
    it made is frozen, with the collector on again after."""
    script = (
        "import gc\n"
        "from dsh_session_reference import main\n"
        "seen = []\n"
        "gc.callbacks.append(lambda phase, info: seen.append(info['generation']))\n"
        "with main._uncollected():\n"
        "    import dsh_session_reference.lsp.features\n"
        "print(len(seen), gc.isenabled(), gc.get_freeze_count())\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    collections, enabled, frozen = done.stdout.split()
    assert (collections, enabled) == ("0", "True"), done.stdout
    assert int(frozen) > 20_000, done.stdout


def test_the_lsp_command_turns_the_collector_off_before_it_imports_lsprotocol(tmp_path: Path) -> None:
    """The ``lsp`` command itself, not the block alone: its first import of the LSP package (for the
    allocator's settings) brought lsprotocol and pygls in with the collector still on, so some 120
    young, 11 middle and one full collection ran while their classes were made, every start."""
    record = tmp_path / "events.json"
    script = (
        "import atexit, gc, json, sys\n"
        "events = []\n"
        "disable, freeze = gc.disable, gc.freeze\n"
        "def off():\n"
        "    events.append(['off', 'lsprotocol.types' in sys.modules])\n"
        "    disable()\n"
        "def frozen():\n"
        "    events.append(['frozen', 'lsprotocol.types' in sys.modules])\n"
        "    freeze()\n"
        "gc.disable, gc.freeze = off, frozen\n"
        "gc.callbacks.append(lambda phase, info: phase == 'start' and events.append(['collected', info['generation']]))\n"
        f"atexit.register(lambda: open({str(record)!r}, 'w').write(json.dumps(events)))\n"
        "from dsh_session_reference.main import main\n"
        "sys.exit(main(['lsp', '--stdio']))\n"  # stdin is empty: the server ends at once
    )
    subprocess.run(
        [sys.executable, "-P", "-c", script],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    events = json.loads(record.read_text())
    assert ["off", False] in events, events  # off before lsprotocol was imported
    off = events.index(["off", False])
    assert ["frozen", True] in events[off:], events
    start = events[off:].index(["frozen", True]) + off
    assert not [event for event in events[off:start] if event[0] == "collected"], events


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
