"""The server's one network exchange (``lsp/dsh_web_client``), against a test double of dsh web for
the failures: refused, an HTTP error, an answer that never comes, too big or no HTTP at all. Each
is bounded and says what happened; none blocks the event loop."""

from __future__ import annotations

import asyncio
import socket
import threading
import time

import pytest
from lsp_support import wait_until

from dsh.web_double import refused_url, web_double
from dsh_session_reference.dsh_web import WebError, prompt_payload, web_host
from dsh_session_reference.lsp import dsh_web_client
from dsh_session_reference.lsp.dsh_web_client import NoAnswer, Unreachable, call, parse_http_reply

pytestmark = pytest.mark.asyncio


async def test_nothing_listening_says_how_to_start_dsh() -> None:
    url = refused_url()
    with pytest.raises(Unreachable, match=f"no dsh web answers at {url} .*start it with `dsh web`"):
        await call(web_host(url), "session.prompt", prompt_payload("s1", "hi"))


async def test_the_request_is_the_fetch_clients() -> None:
    """``POST /api/<method>``, JSON, the loopback ``Host`` dsh's fence wants, the envelope."""
    with web_double(status=500) as double, pytest.raises(WebError):
        await call(web_host(double.url), "session.prompt", prompt_payload("s1", "a \ud800 b"))
    ((path, headers, body),) = double.requests
    assert path == "/api/session.prompt"
    assert headers["Host"] == double.url.removeprefix("http://")
    assert headers["Content-Type"] == "application/json"
    assert body["type"] == "client-request" and body["method"] == "session.prompt"
    assert isinstance(body["rpcId"], str) and body["rpcId"]
    # A lone surrogate travels as JSON.parse reads it back: the same UTF-16 string.
    assert body["payload"] == {
        "sessionId": "s1",
        "mode": "queue",
        "content": [{"type": "text", "text": "a \ud800 b"}],
    }


@pytest.mark.parametrize(
    ("status", "body", "says"),
    [
        (500, b"handler failure: Error: boom", r"answered HTTP 500 'handler failure: Error: boom'"),
        (403, b"forbidden", "accepts loopback hosts and same-origin requests only"),
        (404, b"not found", "no /api/session.create: is this dsh web"),
        (200, b"<html>", "with no JSON"),
        (200, b'{"type": "server-response", "rpcId": "other", "result": {"ok": true}}', "another request"),
    ],
)
async def test_an_answer_that_is_no_success_says_what_it_was(status: int, body: bytes, says: str) -> None:
    with web_double(status=status, body=body) as double, pytest.raises(WebError, match=says):
        await call(web_host(double.url), "session.create", {"cwd": "/x"})


async def test_a_host_that_never_answers_is_given_up_in_bounded_time(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dsh_web_client, "EXCHANGE_TIMEOUT", 0.5)
    ticks = 0

    async def ticking() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.05)
            ticks += 1

    ticker = asyncio.create_task(ticking())
    with web_double(hang=True) as double:
        started = time.monotonic()
        with pytest.raises(NoAnswer, match=r"did not answer within 0\.5 s"):
            await call(web_host(double.url), "session.prompt", prompt_payload("s1", "hi"))
        waited = time.monotonic() - started
    ticker.cancel()
    assert 0.4 < waited < 5
    assert ticks >= 4  # the loop ran meanwhile


async def test_cancelling_a_call_closes_the_connection() -> None:
    with web_double(hang=True) as double:
        task = asyncio.create_task(call(web_host(double.url), "session.prompt", prompt_payload("s1", "hi")))
        await wait_until(lambda: double.requests)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task


def _raw_server(reply: bytes) -> tuple[str, threading.Thread]:
    """A loopback listener that answers one connection with ``reply`` (bytes, not HTTP) and closes."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve() -> None:
        connection, _ = listener.accept()
        with connection:
            connection.recv(65536)
            connection.sendall(reply)
        listener.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{listener.getsockname()[1]}", thread


async def test_an_answer_over_the_cap_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dsh_web_client, "MAX_REPLY_BYTES", 1000)
    url, thread = _raw_server(b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 5000)
    with pytest.raises(WebError, match="over"):
        await call(web_host(url), "session.prompt", prompt_payload("s1", "hi"))
    thread.join(5)


async def test_a_closed_connection_is_no_answer() -> None:
    url, thread = _raw_server(b"")
    with pytest.raises(WebError, match="did not answer as dsh web does"):
        await call(web_host(url), "session.prompt", prompt_payload("s1", "hi"))
    thread.join(5)


async def test_a_chunked_answer_is_read_whole() -> None:
    """Node answers with chunked transfer encoding when it does not close the connection."""
    data = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
    assert parse_http_reply(data) == (200, b"hello world")
