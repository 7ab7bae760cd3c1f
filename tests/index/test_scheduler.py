"""The catalog's scheduler on its own, driven by a clock the test moves (no sleeping, no threads;
the start's grace alone is real time)."""

from __future__ import annotations

import threading
import time

from dsh_session_reference.store.scheduler import Scheduler


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_background_work_waits_for_the_editor_to_pause_at_most_max_defer() -> None:
    clock = Clock()
    rules = Scheduler(idle_grace=0.25, max_defer=5.0, clock=clock)
    deadline = clock.now + rules.max_defer
    assert rules.until_idle(deadline) == 0.25  # the editor was just active (made now)
    clock.now += 0.1
    rules.touch()  # a keystroke: the pause starts again
    assert rules.until_idle(deadline) == 0.25
    clock.now += 0.25
    assert rules.until_idle(deadline) == 0.0  # quiet long enough
    for _ in range(100):  # an editor that never pauses...
        clock.now += 0.1
        rules.touch()
    assert rules.until_idle(deadline) == 0.0  # ...still lets the work run once the deadline passed


def test_a_request_in_progress_holds_background_work_and_counts_as_activity() -> None:
    clock = Clock()
    rules = Scheduler(clock=clock)
    assert rules.quiet
    with rules.serving():
        assert not rules.quiet
        with rules.serving():  # requests overlap: quiet only once both are answered
            pass
        assert not rules.quiet
        clock.now += 3.0
    assert rules.quiet and rules.active == clock.now


def test_a_refresh_keeps_its_first_deadline_until_taken() -> None:
    clock = Clock()
    rules = Scheduler(max_defer=5.0, clock=clock)
    assert rules.refresh_deadline() is None
    ran: list[int] = []

    def round_of() -> None:
        ran.append(1)
        return None

    try:
        rules.ask(round_of, refresh=True)
        first = rules.refresh_deadline()
        assert first == 105.0
        clock.now += 1.0
        rules.ask(round_of, refresh=True)  # asked again while waiting: same deadline
        assert rules.refresh_deadline() == first
        rules.refresh_taken()
        assert rules.refresh_deadline() is None
    finally:
        assert rules.close() and not rules.close()  # closing twice is a no-op the second time
        if rules.thread is not None:
            rules.thread.join(5)
    assert rules.worker() is None  # no process once closed


def test_background_work_waits_at_the_start_for_the_first_answer_at_most_the_start_grace() -> None:
    """A language server starts beside its editor: its background work (a kept index's claims
    scanned in a new worker process, a walk) waits until the first request is answered, so it does
    not take the cores the editor's own start needs, and for at most ``start_grace`` (real time)."""
    waiting = Scheduler(start_grace=60.0)
    started = threading.Thread(target=waiting.wait_started)
    started.start()
    started.join(0.3)
    assert started.is_alive()  # nothing answered yet
    with waiting.serving():
        time.sleep(0.05)
        assert started.is_alive()  # still being answered
    started.join(5)
    assert not started.is_alive()
    began = time.monotonic()
    assert Scheduler(start_grace=0.2).wait_started()  # no request comes: it runs after the grace
    assert 0.15 <= time.monotonic() - began < 5
    closed = Scheduler(start_grace=60.0)
    closed.close()
    assert not closed.wait_started()  # closed: the work is to stop


def test_a_language_servers_start_ends_at_its_first_completion_not_at_the_first_request() -> None:
    """A language server's scheduler (``held``) waits for :meth:`Scheduler.start_over` (the first
    completion's answer), not for the first request answered: the server's own listing read
    ahead at ``initialize`` and the prompt's diagnostics are requests too, and ended the wait
    before the editor had its first answer (in real VS Code the worker process then spent about a
    third of a second of CPU on the cores the editor's start needed)."""
    held = Scheduler(start_grace=60.0, held=True)
    started = threading.Thread(target=held.wait_started)
    started.start()
    with held.serving():
        pass
    started.join(0.3)
    assert started.is_alive()  # a request answered: still waiting
    held.start_over()
    started.join(5)
    assert not started.is_alive()
    assert held.wait_started()  # over: no wait
    began = time.monotonic()
    assert Scheduler(start_grace=0.2, held=True).wait_started()  # never over: the grace bounds it
    assert 0.15 <= time.monotonic() - began < 5
