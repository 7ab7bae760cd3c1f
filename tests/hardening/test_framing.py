"""LSP's message framing under a broken or hostile client, and the exit status the spec asks for.

pygls 2.1's own reader allocates any ``Content-Length`` (3e10 killed the server
with ``MemoryError``) and waits forever for a body a few bytes longer than what
was sent. The server reads frames itself (``lsp/transport.py``); a frame it
cannot trust ends the session with a clear message and status 1, at once or
after :data:`BODY_STALL_SECONDS` of silence inside a message.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import select
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest

from dsh_session_reference.lsp.transport import (
    BODY_STALL_SECONDS,
    MAX_HEADER_LINE,
    MAX_HEADER_LINES,
    FrameReader,
    FramingError,
    _handle,
)


def frame(message: dict[str, object] | bytes, length: int | None = None) -> bytes:
    body = message if isinstance(message, bytes) else json.dumps(message).encode()
    return f"Content-Length: {len(body) if length is None else length}\r\n\r\n".encode() + body


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    read, write = os.pipe()
    yield read, write
    for fd in (read, write):
        with contextlib.suppress(OSError):
            os.close(fd)


def reader_of(pipe: tuple[int, int], data: bytes, *, close: bool = True, stall: float = 0.3) -> FrameReader:
    os.write(pipe[1], data)
    if close:
        os.close(pipe[1])
    return FrameReader(pipe[0], stall_seconds=stall)


def test_good_frames_back_to_back_with_any_header_order(pipe: tuple[int, int]) -> None:
    data = (
        frame({"a": 1})
        + b'Content-Type: application/vscode-jsonrpc; charset=utf-8\r\ncontent-length: 7\r\n\r\n{"b":2}'
        + b'Content-Length: 7\n\n{"c":3}'
    )
    reader = reader_of(pipe, data)
    assert [reader.read(), reader.read(), reader.read(), reader.read()] == [
        b'{"a": 1}',
        b'{"b":2}',
        b'{"c":3}',
        None,
    ]


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"Content-Length: 30000000000\r\n\r\n{}", "Content-Length 30000000000 is over the 256 MiB"),
        (b"Content-Length: 1000000000000000\r\n\r\n{}", "is over the 256 MiB"),
        # int() raises ValueError past 4,300 digits (issue 35): refused as too long, not a crash
        (b"Content-Length: " + b"9" * 5000 + b"\r\n\r\n{}", "Content-Length 9{80} is over the 256 MiB"),
        (b"Content-Length: -5\r\n\r\n{}", "Content-Length is not a number: -5"),
        (b"Content-Type: x\r\n\r\n{}", "a message header without Content-Length"),
        (b"Nonsense\r\n\r\n{}", "a header line without a colon"),
        (b"X" * (MAX_HEADER_LINE + 2), "a header line of over"),
        (b"Content-Length: 10\r\n\r\n{}", "the stream ended 8 bytes short of a 10-byte message"),
        (b"Content-Length: 2\r\n", "the stream ended inside a message's header"),
    ],
)
def test_a_frame_that_cannot_be_trusted_is_refused_before_anything_is_allocated(
    pipe: tuple[int, int], data: bytes, reason: str
) -> None:
    reader = reader_of(pipe, data)
    with pytest.raises(FramingError, match=reason):
        reader.read()


def test_a_body_that_stops_arriving_is_refused_after_the_stall(pipe: tuple[int, int]) -> None:
    reader = reader_of(pipe, frame({"a": 1}, length=12), close=False, stall=0.3)
    started = time.monotonic()
    with pytest.raises(FramingError, match=re.escape("no byte for 0.3 s inside a message")):
        reader.read()
    assert 0.25 < time.monotonic() - started < 5


def test_silence_between_messages_is_no_error(pipe: tuple[int, int]) -> None:
    reader = FrameReader(pipe[0], stall_seconds=0.2)
    threading.Timer(0.6, lambda: os.write(pipe[1], frame({"late": True}))).start()
    assert reader.read() == b'{"late": true}'


def test_a_message_is_waiting_from_its_first_byte_until_it_is_handled(pipe: tuple[int, int]) -> None:
    """What a listing request's cancel grace asks (``DshLanguageServer.cancel_grace``): whether a
    message has come behind it, in the pipe, in the reader's buffer or read and not yet handled."""
    reader = FrameReader(pipe[0])
    assert not reader.waiting()
    os.write(pipe[1], frame({"a": 1}) + frame({"b": 2}))
    assert reader.waiting()  # in the pipe
    assert reader.read() == b'{"a": 1}'
    reader.handled = reader.messages
    assert reader.waiting()  # the second in the buffer
    assert reader.read() == b'{"b": 2}'
    assert reader.waiting()  # read, not yet handled
    reader.handled = reader.messages
    assert not reader.waiting()
    os.write(pipe[1], b"C")
    assert reader.waiting()  # a message's first byte


def test_the_messages_already_whole_in_the_buffer_are_read_at_once(pipe: tuple[int, int]) -> None:
    """A burst (requests and their cancels) reaches the event loop in one piece; a message not
    yet whole is waited for only when nothing comes before it, and a header the reader refuses
    is refused after the messages before it."""
    reader = FrameReader(pipe[0])
    os.write(pipe[1], frame({"a": 1}) + frame({"b": 2}) + b'Content-Length: 7\r\n\r\n{"c"')
    assert reader.read_batch() == [b'{"a": 1}', b'{"b": 2}']
    os.write(pipe[1], b":3}" + frame({"d": 4}) + b"Nonsense\r\n\r\n")
    assert reader.read_batch() == [b'{"c":3}', b'{"d": 4}']
    assert reader.messages == 4
    with pytest.raises(FramingError, match="a header line without a colon"):
        reader.read_batch()


def test_a_header_has_at_most_its_lines_and_a_line_its_bytes_whole_or_not(pipe: tuple[int, int]) -> None:
    """The bounds hold wherever a header is looked at: read, or checked for being whole behind a
    message already read (the same scan does both)."""
    extra = b"".join(f"X-{number}: y\r\n".encode() for number in range(MAX_HEADER_LINES - 2))
    fits = b"Content-Length: 2\r\n" + extra + b"\r\n{}"  # the blank line is the 16th
    too_many = b"Content-Length: 2\r\nX-last: y\r\n" + extra + b"\r\n{}"
    reader = FrameReader(pipe[0])
    os.write(pipe[1], frame({"a": 1}) + fits + too_many)
    assert reader.read_batch() == [b'{"a": 1}', b"{}"]
    with pytest.raises(FramingError, match=f"a header of over {MAX_HEADER_LINES} lines"):
        reader.read_batch()
    reader = FrameReader(pipe[0])
    os.write(pipe[1], frame({"b": 2}) + b"X" * (MAX_HEADER_LINE + 1))
    assert reader.read_batch() == [b'{"b": 2}']
    with pytest.raises(FramingError, match=f"a header line of over {MAX_HEADER_LINE} bytes"):
        reader.read_batch()


def test_a_request_cancelled_in_the_same_read_is_answered_cancelled_and_never_started() -> None:
    """A client that types on sends each cancel right behind its request: such a request is
    answered ``RequestCancelled`` without being structured or handled; the others, in order."""
    calls: list[tuple[str, object]] = []
    protocol = SimpleNamespace(
        answer_cancelled=lambda msg_id: calls.append(("cancelled", msg_id)),
        structure_message=lambda data: data,
        handle_message=lambda message: calls.append(("handled", message.get("id", message.get("method")))),
    )
    reader = SimpleNamespace(handled=0)
    request = {"jsonrpc": "2.0", "method": "workspace/symbol", "params": {"query": ""}}

    def cancel(msg_id: object) -> dict[str, object]:
        return {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": msg_id}}

    messages = [
        cancel(1),  # a cancel for an earlier request of the same id: this one still runs
        {**request, "id": 1},
        {**request, "id": 2},
        cancel(2),
        {**request, "id": "3"},
        cancel(3),  # another id: 3 is not "3"
        {**request, "id": 4},
        cancel(True),  # JSON's true is no id
        {**request, "id": 5},
        {**request, "id": 6},
        cancel(6),
        cancel(5),
        {"jsonrpc": "2.0", "id": 7, "method": "shutdown"},
        cancel(7),  # the exit status hangs on it: it runs
    ]
    asyncio.run(_handle(SimpleNamespace(protocol=protocol), reader, messages))  # type: ignore[arg-type]
    assert calls == [
        ("handled", "$/cancelRequest"),
        ("handled", 1),
        ("cancelled", 2),
        ("handled", "$/cancelRequest"),
        ("handled", "3"),
        ("handled", "$/cancelRequest"),
        ("handled", 4),
        ("handled", "$/cancelRequest"),
        ("cancelled", 5),
        ("cancelled", 6),
        ("handled", "$/cancelRequest"),
        ("handled", "$/cancelRequest"),
        ("handled", 7),
        ("handled", "$/cancelRequest"),
    ]
    assert reader.handled == len(messages)


# --- the real server --------------------------------------------------------------------------


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"capabilities": {}, "processId": None},
}


def server(tmp_path: Path) -> subprocess.Popen[bytes]:
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "DSH_HOME": str(tmp_path / "dsh")}
    return subprocess.Popen(
        [sys.executable, "-m", "dsh_session_reference", "lsp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )


def run_server(
    tmp_path: Path, data: bytes, *, keep_open: bool, within: float
) -> tuple[int, bytes, str, float]:
    process = server(tmp_path)
    assert process.stdin is not None
    process.stdin.write(frame(INITIALIZE) + data)
    process.stdin.flush()
    if not keep_open:
        process.stdin.close()
    started = time.monotonic()
    try:
        out, err = process.communicate(timeout=within) if not keep_open else _wait(process, within)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    return process.returncode, out, err.decode(), time.monotonic() - started


def _wait(process: subprocess.Popen[bytes], within: float) -> tuple[bytes, bytes]:
    """Wait for the process to end on its own while its stdin stays open (as an editor's does)."""
    process.wait(timeout=within)
    assert process.stdout is not None and process.stderr is not None
    return process.stdout.read(), process.stderr.read()


@pytest.mark.parametrize("length", ["30000000000", "1000000000000000"])
def test_a_huge_content_length_ends_the_server_with_a_clear_error(tmp_path: Path, length: str) -> None:
    status, _, err, _ = run_server(
        tmp_path, f"Content-Length: {length}\r\n\r\n{{}}".encode(), keep_open=True, within=30
    )
    assert status == 1
    assert f"the client broke LSP's message framing: Content-Length {length} is over the 256 MiB" in err
    assert "MemoryError" not in err and "Traceback" not in err


def test_a_length_a_few_bytes_short_answers_a_parse_error_and_exits(tmp_path: Path) -> None:
    hover = {"jsonrpc": "2.0", "id": 2, "method": "shutdown"}
    status, out, err, _ = run_server(tmp_path, frame(hover, length=20), keep_open=True, within=30)
    assert status == 1
    assert b'"code": -32700' in out and b'"id": null' in out
    assert "message 2 (20 bytes) is not JSON" in err


def test_a_length_a_few_bytes_long_ends_the_server_after_the_stall(tmp_path: Path) -> None:
    shutdown = {"jsonrpc": "2.0", "id": 2, "method": "shutdown"}
    body = json.dumps(shutdown).encode()
    status, _, err, seconds = run_server(
        tmp_path, frame(body, length=len(body) + 4), keep_open=True, within=60
    )
    assert status == 1
    assert f"no byte for {BODY_STALL_SECONDS:g} s inside a message" in err
    assert seconds < BODY_STALL_SECONDS + 20


@pytest.mark.parametrize(("shut_down_first", "status"), [(True, 0), (False, 1)])
def test_exit_ends_with_the_status_the_specification_asks(
    tmp_path: Path, shut_down_first: bool, status: int
) -> None:
    messages = frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
    if shut_down_first:
        messages += frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
    messages += frame({"jsonrpc": "2.0", "method": "exit"})
    returned, _, err, _ = run_server(tmp_path, messages, keep_open=True, within=30)
    assert returned == status, err


def test_a_request_and_its_cancel_in_one_write_are_answered_cancelled_by_the_real_server(
    tmp_path: Path,
) -> None:
    symbols = {"jsonrpc": "2.0", "method": "workspace/symbol", "params": {"query": ""}}
    process = server(tmp_path)
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(
            frame(INITIALIZE)
            + frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
            + frame({**symbols, "id": 2})
            + frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}})
            + frame({**symbols, "id": 3})
        )
        process.stdin.flush()
        answers = _answers(process, {2, 3})
        assert answers[2]["error"] == {"code": -32800, "message": 'Request with id "2" is canceled'}
        assert answers[3]["result"] == []
    finally:
        process.kill()
        process.communicate()


def _answers(
    process: subprocess.Popen[bytes], ids: set[object], every: list[dict[str, object]] | None = None
) -> dict[object, dict[str, object]]:
    """The server's messages by id, read until each of ``ids`` is answered (``every``: each
    message read, in order, notifications too)."""
    assert process.stdout is not None
    answers: dict[object, dict[str, object]] = {}
    reader = FrameReader(process.stdout.fileno())
    while not ids <= answers.keys():
        ready, _, _ = select.select([process.stdout], [], [], 30)
        assert ready, f"no answer to {ids} within 30 s: {answers}"
        body = reader.read()
        assert body is not None, answers
        answer = json.loads(body)
        answers[answer.get("id")] = answer
        if every is not None:
            every.append(answer)
    return answers


def test_before_initialize_a_request_is_answered_not_initialized_and_a_notification_dropped(
    tmp_path: Path,
) -> None:
    """What the LSP asks of a server a client talks to before ``initialize``: requests error with
    ServerNotInitialized, notifications are dropped. pygls ran them: a ``didOpen`` showed the
    user "Error in server: AttributeError" (no client capabilities yet)."""
    process = server(tmp_path)
    assert process.stdin is not None
    symbols = {"jsonrpc": "2.0", "method": "workspace/symbol", "params": {"query": ""}}
    document = {"uri": "file:///work/notes.md", "languageId": "markdown", "version": 1, "text": "hi"}
    try:
        process.stdin.write(
            frame({**symbols, "id": 1})
            + frame(
                {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": document}}
            )
            + frame({**INITIALIZE, "id": 2})
            + frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
            + frame({**symbols, "id": 3})
        )
        process.stdin.flush()
        every: list[dict[str, object]] = []
        answers = _answers(process, {1, 2, 3}, every)
        assert answers[1]["error"] == {
            "code": -32002,
            "message": "workspace/symbol: the server is not initialized (initialize comes first)",
        }
        assert "capabilities" in answers[2]["result"]  # type: ignore[operator]
        assert answers[3]["result"] == []
        assert not [message for message in every if "Error in server" in json.dumps(message)], every
    finally:
        process.kill()
        process.communicate()


def test_exit_without_shutdown_while_a_handler_runs_ends_with_1_and_no_traceback(tmp_path: Path) -> None:
    """The end cancels ``initialized``'s handler mid-step; pygls reads that step's result, and the
    loop wrote its CancelledError to stderr as a traceback (an editor's log shows it as an error)."""
    messages = frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}) + frame(
        {"jsonrpc": "2.0", "method": "exit"}
    )
    status, _, err, _ = run_server(tmp_path, messages, keep_open=True, within=30)
    assert status == 1
    assert "Traceback" not in err and "CancelledError" not in err, err


def test_a_request_is_answered_for_the_text_it_was_asked_of_when_an_edit_follows_in_one_write(
    tmp_path: Path,
) -> None:
    """A completion asked at ``see @|``, the edit that empties the line read with it: the request
    is worked on the text it was asked of (its trigger found, so the answer is incomplete), as
    when each message had a read of its own, not on the newer text its position does not fit
    (no trigger there: a complete, empty answer)."""
    uri = "file:///work/notes.md"
    process = server(tmp_path)
    assert process.stdin is not None
    try:
        process.stdin.write(
            frame(INITIALIZE)
            + frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
            + frame(
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/didOpen",
                    "params": {
                        "textDocument": {
                            "uri": uri,
                            "languageId": "markdown",
                            "version": 1,
                            "text": "see @\n",
                        }
                    },
                }
            )
        )
        process.stdin.flush()
        assert "result" in _answers(process, {1})[1]
        process.stdin.write(
            frame(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "textDocument/completion",
                    "params": {"textDocument": {"uri": uri}, "position": {"line": 0, "character": 5}},
                }
            )
            + frame(
                {
                    "jsonrpc": "2.0",
                    "method": "textDocument/didChange",
                    "params": {
                        "textDocument": {"uri": uri, "version": 2},
                        "contentChanges": [{"text": "\n"}],
                    },
                }
            )
        )
        process.stdin.flush()
        answer = _answers(process, {2})[2]
        assert answer.get("result", {}).get("isIncomplete") is True, answer
    finally:
        process.kill()
        process.communicate()


def test_an_initialize_cancelled_in_the_same_write_still_initializes_the_server(tmp_path: Path) -> None:
    """The session hangs on ``initialize``: answered cancelled unstarted, it left a server that
    told the user ``Error in server: AttributeError`` at ``initialized`` and failed every request
    after (a cancel a read later never stopped it: it is answered on arrival)."""
    process = server(tmp_path)
    assert process.stdin is not None
    try:
        process.stdin.write(
            frame(INITIALIZE)
            + frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 1}})
            + frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
            + frame({"jsonrpc": "2.0", "id": 2, "method": "workspace/symbol", "params": {"query": ""}})
        )
        process.stdin.flush()
        answers = _answers(process, {1, 2})
        assert "capabilities" in answers[1].get("result", {}), answers[1]
        assert answers[2].get("result") == [], answers[2]
        assert not any("Error in server" in json.dumps(answer) for answer in answers.values()), answers
    finally:
        process.kill()
        process.communicate()


def test_a_shutdown_cancelled_in_the_same_write_still_shuts_down_and_exit_ends_with_0(tmp_path: Path) -> None:
    """Whether the client's ``shutdown``, ``$/cancelRequest`` and ``exit`` end the server with 0
    or 1 must not hang on how the pipe splits them: a cancel a read later never stopped it."""
    messages = (
        frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        + frame({"jsonrpc": "2.0", "id": 2, "method": "shutdown"})
        + frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}})
        + frame({"jsonrpc": "2.0", "method": "exit"})
    )
    status, out, err, _ = run_server(tmp_path, messages, keep_open=True, within=30)
    assert b'"id": 2, "jsonrpc": "2.0", "result": null' in out, out
    assert status == 0, err


def test_an_answer_that_finishes_after_exit_is_dropped_and_the_server_ends(tmp_path: Path) -> None:
    """``shutdown`` cancels a request in flight and ``exit`` closes the output, read in one piece:
    the cancelled request's answer comes after, and pygls' writer raised on the closed stream,
    reported the failure through it and raised again, without end (the process never ended)."""
    messages = (
        frame({"jsonrpc": "2.0", "method": "initialized", "params": {}})
        + frame({"jsonrpc": "2.0", "id": 2, "method": "workspace/symbol", "params": {"query": ""}})
        + frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"})
        + frame({"jsonrpc": "2.0", "method": "exit"})
    )
    status, out, err, _ = run_server(tmp_path, messages, keep_open=True, within=30)
    assert status == 0, err
    assert b'"id": 3, "jsonrpc": "2.0", "result": null' in out
    assert "Traceback" not in err and "closed file" not in err, err
