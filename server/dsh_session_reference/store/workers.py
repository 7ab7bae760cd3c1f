"""Worker processes for CPU-bound log reads: headers and titles for a cold index, huge reads for ``prepare``.

A title read replays a whole log in Python, so filling a cold index is CPU
work the server must not do on its own event-loop process (it would hold the
GIL while someone types). The same holds for ``prepare`` of a log of a hundred
megabytes: :func:`run_apart` gives such a read a process of its own, so several
run on several cores and the heap they grow is returned when it exits.
Workers are plain child processes of the same interpreter (:func:`worker_command`),
fed length-prefixed pickles over a pipe. ``multiprocessing`` is not used on
purpose: its ``spawn`` start method re-imports the parent's ``__main__`` (the
CLI, which would run again), and ``fork`` is unsafe in a process with threads.

A worker starts in the caller's working directory, which is usually a workspace
someone else wrote: ``python -m`` would put that folder first on ``sys.path``,
and a planted ``pickle.py`` or ``dsh_session_reference/`` there would run in
our process. So a worker runs with ``-P`` (nothing prepended) and ``-s`` (no
user site), drops relative and empty ``PYTHONPATH`` entries (an empty one means
the working directory), and imports from exactly the parent's module path.

Only the functions in the ``TASKS`` table of :mod:`.index.tasks` can be called, with plain data; a worker
reads logs and never writes anything. It exits when its pipe closes, so it
never outlives the process that started it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import logging
import os
import pickle
import struct
import subprocess
import sys
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future
from typing import IO, Any, Final

from ..cancellation import AbortSignal, check

_LOG = logging.getLogger("dsh_session_reference.workers")
_HEADER: Final = struct.Struct("!I")


def _send(stream: IO[bytes], value: object) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _receive(stream: IO[bytes]) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError
    return pickle.loads(data)


_BOOT: Final = (
    "import json, sys; sys.path[:] = json.loads(sys.argv[1]); "
    "from dsh_session_reference.store.index.tasks import main; main()"
)
"""A child's program: the tasks module's :func:`~.index.tasks.main`. A command line for another
process, not an import of this one: this transport knows nothing of what it carries, so the index
(which starts workers) and its tasks (which read with the index's store) import this module and
never the other way round."""


def _safe_entries(entries: list[str]) -> list[str]:
    """``entries`` without the ones that name the working directory: empty or relative ones
    (resolved against it) and the directory itself (``python -m`` and ``-c`` put it first)."""
    here = os.path.realpath(os.getcwd())
    kept: list[str] = []
    for entry in entries:
        if entry and os.path.isabs(entry) and os.path.realpath(entry) != here and entry not in kept:
            kept.append(entry)
    return kept


def worker_command() -> list[str]:
    """The command line of a worker: this interpreter, isolated from the working directory."""
    package_parent = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    path = _safe_entries([package_parent, *sys.path])
    return [sys.executable, "-P", "-s", "-c", _BOOT, json.dumps(path)]


def worker_environment(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The caller's environment with only absolute ``PYTHONPATH`` entries (read before ``-c`` runs)."""
    env = dict(os.environ if environ is None else environ)
    entries = _safe_entries(env.get("PYTHONPATH", "").split(os.pathsep))
    if entries:
        env["PYTHONPATH"] = os.pathsep.join(entries)
    else:
        env.pop("PYTHONPATH", None)
    return env


class WorkerProcess:
    """One child process answering tasks in order; :meth:`submit` returns a future."""

    def __init__(self) -> None:
        self._process = subprocess.Popen(
            worker_command(),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=worker_environment(),
            close_fds=True,
        )
        self._lock = threading.Lock()
        """Guards ``_pending`` only: never held while writing to the child (see :meth:`submit`)."""
        self._write_lock = threading.Lock()
        self._pending: dict[int, Future[Any]] = {}
        self._ids = itertools.count()
        self._reader = threading.Thread(target=self._read, name="dsh-index-worker-reader", daemon=True)
        self._reader.start()

    @property
    def busy(self) -> int:
        with self._lock:
            return len(self._pending)

    def submit(self, task: str, *args: Any) -> Future[Any]:
        future: Future[Any] = Future()
        with self._lock:
            request = next(self._ids)
            self._pending[request] = future
        # A write blocks while the child's stdin pipe is full, and the child stops reading while
        # its reply pipe is full: the reader thread must be able to take replies (which needs
        # ``_lock``) meanwhile, or all three wait for each other.
        try:
            with self._write_lock:
                assert self._process.stdin is not None
                _send(self._process.stdin, (request, task, args))
        except OSError as error:
            with self._lock:
                mine = self._pending.pop(request, None) is not None
            if mine:  # else the reader has already failed it (the child exited)
                future.set_exception(error)
        return future

    def _read(self) -> None:
        assert self._process.stdout is not None
        # Until the child exits (EOFError, OSError) or the pipe is closed meanwhile (ValueError):
        with contextlib.suppress(EOFError, OSError, ValueError, pickle.UnpicklingError):
            while True:
                request, ok, value = _receive(self._process.stdout)
                with self._lock:
                    future = self._pending.pop(request, None)
                if future is None or not future.set_running_or_notify_cancel():
                    continue
                if ok:
                    future.set_result(value)
                else:
                    future.set_exception(value)
        with self._lock:
            pending, self._pending = self._pending, {}
        for future in pending.values():
            if future.set_running_or_notify_cancel():
                future.set_exception(RuntimeError("the index worker process exited"))

    def close(self) -> None:
        """Stop the child (a task in progress is abandoned)."""
        with contextlib.suppress(OSError):
            if self._process.stdin is not None:
                self._process.stdin.close()
        if self._process.poll() is None:
            self._process.terminate()
        try:
            self._process.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        if self._process.stdout is not None:
            self._process.stdout.close()


_spare: WorkerProcess | None = None
_spare_lock = threading.Lock()


def start_spare() -> None:
    """Start one worker now for the first walk of a cold index to take (:func:`take_spare`).

    A worker spends about a quarter of a second importing its code before it reads a
    header; the language server starts one while it is itself starting up, so on a cold
    index both cores read headers from the first moment of the walk.
    """
    global _spare
    with _spare_lock:
        if _spare is None:
            try:
                _spare = WorkerProcess()
            except OSError as error:
                _LOG.info("no spare worker process: %s", error)


def take_spare() -> WorkerProcess | None:
    """The worker :func:`start_spare` started, if it is still unclaimed (then it is the caller's)."""
    global _spare
    with _spare_lock:
        spare, _spare = _spare, None
    return spare


def drop_spare() -> None:
    """Stop the spare worker if nothing claimed it (the first walk found a warm index)."""
    spare = take_spare()
    if spare is not None:
        spare.close()


def run_apart(task: str, *args: Any, stop: AbortSignal | None = None) -> Any:
    """``task(*args)`` in a child process of its own, which ends with it.

    Its exceptions are raised here as they were raised there (a store error keeps
    its code and message); ``stop`` ends the child mid-task (:class:`Cancelled`).
    """
    worker = WorkerProcess()
    try:
        future = worker.submit(task, *args)
        while True:
            check(stop)
            try:
                return future.result(timeout=0.05)
            except TimeoutError:
                continue
    finally:
        worker.close()


def _portable(error: Exception) -> Exception:
    """``error`` itself when it survives pickling (so the parent raises the same type, code and
    message), else a ``RuntimeError`` naming it."""
    try:
        pickle.loads(pickle.dumps(error, protocol=pickle.HIGHEST_PROTOCOL))
    except Exception:
        return RuntimeError(f"{type(error).__name__}: {error}")
    return error


def serve_process(tasks: Mapping[str, Callable[..., Any]]) -> None:
    """A worker's program (:data:`_BOOT`): one task of ``tasks`` at a time from stdin until the pipe
    closes, replies on a private stdout."""
    level = os.environ.get("DSH_LSP_LOG", "WARNING").upper()
    logging.basicConfig(level=level if level in logging.getLevelNamesMapping() else "WARNING")
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # a stray print must not corrupt the replies
    while True:
        try:
            request, task, args = _receive(sys.stdin.buffer)
        except EOFError:
            return
        try:
            if task not in tasks:
                raise ValueError(f"unknown worker task {task!r}")
            reply = (request, True, tasks[task](*args))
        except Exception as error:  # reported to the parent, whose future fails with it
            reply = (request, False, _portable(error))
        try:
            _send(replies, reply)
        except BrokenPipeError:
            return  # the parent is gone (or stopped listening): nobody wants the reply
