"""When the catalog's background work may run: never beside a request, and for the expensive part
only once the editor pauses. The scheduler owns the background thread and the worker process.

A request marks itself (:meth:`Scheduler.serving`) and background work waits until none is in
progress, and at the start until the first is answered, or for a language server's until its
start is over (:meth:`Scheduler.start_over`), at most :data:`START_GRACE`; any message from
the editor (:meth:`Scheduler.touch`) pushes the walk that revalidates a big root's listing back
until the editor has been quiet for ``idle_grace`` (at most ``max_defer``). The clock and the
delays are parameters, so a test can drive them.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final, ParamSpec, TypeVar

from .workers import WorkerProcess

IDLE_GRACE: Final = 0.25
"""Seconds without a request (or an editor message) before in-process background work runs:
a keystroke every few hundred milliseconds keeps the walk of a big root out of its way."""
MAX_DEFER: Final = 5.0
"""Seconds background work waits for that idle moment at most; it then runs between requests,
so an editor that never goes quiet still sees new sessions."""
START_GRACE: Final = 2.0
"""Seconds after the start background work waits for the first request to be answered: a language
server starts beside its editor, on the same cores, and nothing the first answer gives needs the
background (a kept index's claims scanned in a new worker process, a walk): in real VS Code it took
about half a second of the two cores while the editor was still starting."""
IDLE_ROUND: Final = 5.0
"""Seconds between background rounds nobody asked for (they only pick up stray work)."""

P = ParamSpec("P")
R = TypeVar("R")
Round = Callable[[], "float | None"]
"""One round of background work: the seconds until the next is due unasked, ``None`` to stop
(a round made by :func:`weakly` stops once its owner is gone)."""


class Scheduler:
    """Requests first, the editor's pauses next, background work in between."""

    def __init__(
        self,
        *,
        idle_grace: float = IDLE_GRACE,
        max_defer: float = MAX_DEFER,
        start_grace: float = START_GRACE,
        held: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.idle_grace = idle_grace
        self.held = held
        """Whether the start's grace ends only at :meth:`start_over` (a language server's), not at
        the first request answered: the server reads its listing ahead of the first ``@`` and
        answers the prompt's diagnostics and links first, each a request here, while the editor is
        still starting on the same cores."""
        self.max_defer = max_defer
        self.clock = clock
        self._lock = threading.Lock()
        self._foreground = 0
        self._quiet = threading.Event()
        """Set while no request is being answered: background work waits for it."""
        self._quiet.set()
        self._answered = threading.Event()
        """Set once the start is over: the first request answered, or :meth:`start_over` when
        ``held`` (or the scheduler closed)."""
        self._start_until = time.monotonic() + start_grace
        self.active = clock()
        """When the editor last asked for something (see :meth:`touch`)."""
        self._wake = threading.Event()
        self._refresh_asked: float | None = None
        """When the pending refresh was first asked for (it waits at most ``max_defer``); ``None``
        while none is."""
        self.thread: threading.Thread | None = None
        self.closed = False
        self._worker: WorkerProcess | None = None

    # --- requests and the editor ------------------------------------------------------------------

    def touch(self) -> None:
        """The editor is active (a message arrived): background work waits for it to pause."""
        self.active = self.clock()

    @contextmanager
    def serving(self) -> Iterator[None]:
        """Marks a request in progress: background work pauses until none is."""
        with self._lock:
            self._foreground += 1
            self._quiet.clear()
        try:
            yield
        finally:
            with self._lock:
                self._foreground -= 1
                self.active = self.clock()
                if self._foreground == 0:
                    self._quiet.set()
                    if not self.held:
                        self._answered.set()

    @property
    def quiet(self) -> bool:
        """Whether no request is being answered."""
        return self._quiet.is_set()

    def wait_quiet(self) -> bool:
        """Wait until no request is being answered (a pause the index writer and walks take);
        ``False`` once closed: the background work is to stop."""
        self._quiet.wait()
        return not self.closed

    def start_over(self) -> None:
        """The start is over: the answer the user waits for has gone out (a language server's
        first completion). Background work held for it (``held``) may run."""
        self._answered.set()

    def wait_started(self) -> bool:
        """Wait until the start is over (the first request answered, or :meth:`start_over` when
        ``held``), or :data:`START_GRACE` has passed since the start (real time); ``False`` once
        closed."""
        self._answered.wait(max(0.0, self._start_until - time.monotonic()))
        return not self.closed

    def until_idle(self, deadline: float) -> float:
        """Seconds until the editor will have been quiet for ``idle_grace`` (0 once it has, or
        once ``deadline`` has passed)."""
        return max(0.0, min(self.active + self.idle_grace, deadline) - self.clock())

    def idle(self, deadline: float | None = None) -> None:
        """Wait until no request is being answered and the editor is idle (see :meth:`until_idle`;
        ``deadline`` by default ``max_defer`` from now). The clock measures; the waiting is real
        time (a test moving its clock does not call this)."""
        if deadline is None:
            deadline = self.clock() + self.max_defer
        while True:
            self._quiet.wait()
            wait = self.until_idle(deadline)
            if wait <= 0 or self.closed:
                return
            time.sleep(wait)

    # --- the background thread --------------------------------------------------------------------

    def ask(self, work: Round, *, refresh: bool = False, urgent: bool = False) -> None:
        """Wake the background thread (starting it on first use) to run a round, ``work()``
        (the owner's round made by :func:`weakly`: a dropped owner ends the thread). ``refresh``:
        the owner wants its listing walked again once the editor pauses; ``urgent``: as soon as
        no request is being answered (the root was seen to change), without waiting for a pause."""
        with self._lock:
            if self.closed:
                return
            if refresh and urgent:
                self._refresh_asked = self.clock() - self.max_defer
            elif refresh:
                if self._refresh_asked is not None and self.thread is not None:
                    # Already asked and waiting for a pause: waking the thread on every keystroke
                    # would only take the interpreter from the keystrokes to say so again.
                    return
                self._refresh_asked = self.clock()
            if self.thread is None:
                self.thread = threading.Thread(
                    target=_background, args=(work, self._wake), name="dsh-session-index", daemon=True
                )
                self.thread.start()
        self._wake.set()

    def wake(self) -> None:
        self._wake.set()

    def refresh_deadline(self) -> float | None:
        """When a pending refresh must run at the latest (``None``: none is asked for). It stays
        asked until :meth:`refresh_taken`: a request asking again must not move the deadline."""
        with self._lock:
            return None if self._refresh_asked is None else self._refresh_asked + self.max_defer

    def refresh_taken(self) -> None:
        with self._lock:
            self._refresh_asked = None

    # --- the worker process -----------------------------------------------------------------------

    def worker(self) -> WorkerProcess | None:
        """The one worker process background work sends its reads to (``None`` once closed)."""
        with self._lock:
            if self.closed:
                return None
            if self._worker is None:
                self._worker = WorkerProcess()
            return self._worker

    def close(self) -> bool:
        """Stop the thread and the worker process; ``False`` if already closed."""
        with self._lock:
            if self.closed:
                return False
            self.closed = True
            worker, self._worker = self._worker, None
        self._wake.set()
        self._quiet.set()
        self._answered.set()
        if worker is not None:
            worker.close()
        return True


def _background(work: Round, wake: threading.Event) -> None:
    """The background thread: holds its owner only while working, so a dropped owner ends it."""
    timeout = IDLE_ROUND
    while True:
        wake.wait(timeout=timeout)
        wake.clear()
        due = work()
        if due is None:
            return
        timeout = due


def weakly(method: Callable[P, R]) -> Callable[P, R | None]:
    """``method``, called only while its object lives (a thread holding this keeps it no longer);
    ``None`` once the object is gone."""
    reference = weakref.WeakMethod(method)

    def call(*args: P.args, **kwargs: P.kwargs) -> R | None:
        bound = reference()
        return None if bound is None else bound(*args, **kwargs)

    return call
