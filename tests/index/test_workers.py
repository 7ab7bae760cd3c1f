"""The worker-process pipe: tasks and replies both larger than a pipe's buffer, many in flight;
reads run apart raise what they raised in the child, and stop when asked."""

from __future__ import annotations

import concurrent.futures
import subprocess
from pathlib import Path

import pytest

from dsh_session_reference.cancellation import AbortSignal, Cancelled
from dsh_session_reference.conversation import BoundedRead
from dsh_session_reference.model import StoreError
from dsh_session_reference.store.listing import NOT_FOUND
from dsh_session_reference.store.workers import (
    WorkerProcess,
    _send,
    run_apart,
    worker_command,
    worker_environment,
)
from store.logbuild import header, lines, one_turn, put


def test_many_big_tasks_and_big_replies_in_flight_do_not_wedge_the_pipe(tmp_path: Path) -> None:
    """While the child writes a reply the parent is not yet reading, it stops reading its tasks;
    the parent's reader must still take that reply while a submit is blocked writing the next
    task (it used to wait for the lock that submit held: all three waited for each other)."""
    root = tmp_path / "sessions"
    text = "word " * 30_000  # 150 KB of message text: each reply is several pipe buffers
    log = put(root, "big", lines(header("big"), *one_turn(0, text, "ok")))
    padding = [str(tmp_path / "absent" / f"{index:06d}-{'x' * 80}") for index in range(2_000)]
    worker = WorkerProcess()
    # Submitted from a thread of its own, so a wedged pipe fails the test instead of hanging it.
    submitter = concurrent.futures.ThreadPoolExecutor(1)
    try:
        submitted = submitter.submit(
            lambda: [worker.submit("message_texts", str(root), [log, *padding]) for _ in range(12)]
        )
        for future in submitted.result(timeout=60):
            [(path, fingerprint, found)] = future.result(timeout=60)
            assert path == log and fingerprint is not None and text.strip() in found
    except concurrent.futures.TimeoutError:
        raise AssertionError("the worker pipe wedged") from None
    finally:
        worker._process.kill()  # a wedged child would never read the close
        worker.close()
        submitter.shutdown(wait=False)


def test_a_read_apart_raises_the_childs_error_with_its_code(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    put(root, "here", lines(header("here"), *one_turn(0)))
    assert run_apart("read_conversation", str(root), "here", BoundedRead(1000)).session.id == "here"
    with pytest.raises(StoreError) as caught:
        run_apart("read_conversation", str(root), "gone", BoundedRead(1000))
    assert (caught.value.code, caught.value.message) == (NOT_FOUND, 'session "gone" not found')


def test_a_stopped_read_apart_ends_its_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    closed: list[int | None] = []
    close = WorkerProcess.close

    def watched(worker: WorkerProcess) -> None:
        close(worker)
        closed.append(worker._process.poll())

    monkeypatch.setattr(WorkerProcess, "close", watched)
    stop = AbortSignal()
    stop.abort()
    with pytest.raises(Cancelled):
        run_apart("read_conversation", str(tmp_path), "any", BoundedRead(1000), stop=stop)
    assert len(closed) == 1 and closed[0] is not None  # the child has exited


def test_a_worker_whose_parent_stopped_listening_exits_quietly(tmp_path: Path) -> None:
    """A server that exits while its worker is mid-task closes the reply pipe first: the worker
    must end without a traceback in the editor's log."""
    child = subprocess.Popen(
        worker_command(),
        env=worker_environment(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    child.stdout.close()
    _send(child.stdin, (0, "message_texts", (str(tmp_path), [])))
    child.stdin.close()
    assert child.wait(timeout=30) == 0
    assert child.stderr.read() == b""
    child.stderr.close()
