"""The one cancellation token every layer uses: an ``AbortSignal``, as upstream names it.

A request's handler, a completion superseded by the next keystroke, a store read in a worker
thread, a background round and a child process's read all stop on the same kind of object:
:meth:`AbortSignal.abort` from any thread; store code calls :meth:`AbortSignal.check` between
chunks (it raises :class:`Cancelled`); a thread waits on it; the resolver races asyncio work
against it (``resolver._race``); ``workers.run_apart`` ends its child process when it is aborted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable


class Cancelled(Exception):
    """Raised by work whose :class:`AbortSignal` was aborted: it stopped at its next check."""


class AbortSignal:
    """A thread-safe ``AbortController``/``AbortSignal`` pair in one object.

    ``abort()`` may be called from any thread; awaiting code is woken on its own loop
    (:meth:`subscribe`), and blocking code sees :attr:`aborted` at its next :meth:`check`.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: object = None
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], object]] = []

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    def is_set(self) -> bool:
        """:attr:`aborted` under ``threading.Event``'s name, for code that stops on one
        (``watchfiles.watch``'s ``stop_event``)."""
        return self._event.is_set()

    def abort(self, reason: object = None) -> None:
        with self._lock:
            if self._event.is_set():
                return
            self.reason = reason
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for callback in callbacks:
            callback()

    def check(self) -> None:
        """Raise :class:`Cancelled` once aborted (called between chunks of blocking work)."""
        if self._event.is_set():
            raise Cancelled("stopped: the caller gave up")

    def wait(self, timeout: float | None = None) -> bool:
        """Block until aborted or ``timeout`` passes; whether it was aborted."""
        return self._event.wait(timeout)

    def subscribe(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback`` once aborted (at once if it already is); returns the unsubscribe."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(callback)

                def unsubscribe() -> None:
                    with self._lock:
                        if callback in self._callbacks:
                            self._callbacks.remove(callback)

                return unsubscribe
        callback()
        return lambda: None


def check(signal: AbortSignal | None) -> None:
    """:meth:`AbortSignal.check` for work that may have no signal."""
    if signal is not None:
        signal.check()
