"""The one network exchange the server makes: a call to a dsh web host on loopback, bounded in
time and size, on the event loop (nothing blocks a thread, and cancelling the command closes the
socket).

HTTP/1.1 with ``Connection: close``: the whole answer is read to the end (at most
:data:`MAX_REPLY_BYTES`) and parsed by the standard library's own response parser.
"""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import io
import json
import uuid
from typing import Any, Final

from ..dsh_web import START_HINT, WebError, WebHost, client_request, is_loopback_address, reply_value

CONNECT_TIMEOUT: Final = 3.0
"""Seconds to connect: a loopback port either answers at once or refuses."""
EXCHANGE_TIMEOUT: Final = 15.0
"""Seconds for one call once connected (dsh composes a new session's agent in ``session.create``)."""
MAX_REPLY_BYTES: Final = 1 << 20
"""The largest answer read: dsh's answers to these calls are a few hundred bytes."""


class Unreachable(Exception):
    """Nothing answers at the address (refused, unresolvable, or silent while connecting)."""


class NoAnswer(Exception):
    """The host took the request but did not answer in time: it may have acted on it."""


class _Received:
    """A socket stand-in over bytes already read, for :class:`http.client.HTTPResponse`."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    def makefile(self, *args: Any, **kwargs: Any) -> io.BytesIO:
        return io.BytesIO(self._data)


def parse_http_reply(data: bytes) -> tuple[int, bytes]:
    """Status and body of a complete HTTP/1.x answer (chunked or not); ``ValueError`` if it is
    none."""
    response = http.client.HTTPResponse(_Received(data))  # type: ignore[arg-type]
    try:
        response.begin()
        return response.status, response.read()
    except (http.client.HTTPException, OSError) as error:
        raise ValueError(f"not an HTTP answer: {error!r}") from None


async def call(host: WebHost, method: str, payload: dict[str, Any]) -> dict[str, Any]:
    """Post ``payload`` to ``/api/<method>`` as dsh's fetch client does and return the answer's
    value; :class:`Unreachable`, :class:`NoAnswer` or :class:`..dsh_web.WebError` otherwise."""
    rpc_id = str(uuid.uuid4())
    # ASCII JSON: a lone surrogate travels as \\udXXX, which JSON.parse turns back into it.
    body = json.dumps(client_request(method, payload, rpc_id), ensure_ascii=True).encode("ascii")
    head = (
        f"POST /api/{method} HTTP/1.1\r\nHost: {host.authority}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    )
    try:
        async with asyncio.timeout(CONNECT_TIMEOUT):
            reader, writer = await asyncio.open_connection(host.host, host.port)
    except TimeoutError:
        silent = f"nothing answered at {host.url} within {CONNECT_TIMEOUT:g} s"
        raise Unreachable(f"{silent}; {START_HINT}") from None
    except OSError as error:
        reason = error.strerror or str(error)
        raise Unreachable(f"no dsh web answers at {host.url} ({reason}); {START_HINT}") from None
    try:
        peer = writer.get_extra_info("peername")
        if not (isinstance(peer, tuple) and peer and is_loopback_address(str(peer[0]))):
            raise Unreachable(f"{host.url} resolved to {peer!r}, which is not this machine's loopback")
        try:
            async with asyncio.timeout(EXCHANGE_TIMEOUT):
                writer.write(head.encode("ascii") + body)
                await writer.drain()
                data = await _read_all(reader)
        except TimeoutError:
            raise NoAnswer(
                f"dsh web at {host.url} took {method} but did not answer within {EXCHANGE_TIMEOUT:g} s"
            ) from None
        except OSError as error:
            raise NoAnswer(f"dsh web at {host.url} dropped the connection during {method}: {error}") from None
    finally:
        writer.close()
        with contextlib.suppress(OSError, TimeoutError):
            async with asyncio.timeout(1.0):
                await writer.wait_closed()
    return _value(host, method, data, rpc_id)


async def _read_all(reader: asyncio.StreamReader) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := await reader.read(65536):
        size += len(chunk)
        if size > MAX_REPLY_BYTES:
            raise WebError("bad-reply", f"the answer is over {MAX_REPLY_BYTES >> 20} MiB")
        chunks.append(chunk)
    return b"".join(chunks)


def _value(host: WebHost, method: str, data: bytes, rpc_id: str) -> dict[str, Any]:
    try:
        status, body = parse_http_reply(data)
    except ValueError as error:
        raise WebError("bad-reply", f"{host.url} did not answer as dsh web does ({error})") from None
    if status != 200:
        excerpt = body[:200].decode("utf-8", "replace").strip()
        why = {
            403: "it refused the request (its /api accepts loopback hosts and same-origin requests only)",
            404: f"it has no /api/{method}: is this dsh web 0.1.0-rc.8 or later?",
        }.get(status, "")
        said = f"{host.url} answered HTTP {status} {excerpt!r}"
        raise WebError(f"http-{status}", f"{said}: {why}" if why else said)
    try:
        reply = json.loads(body)
    except (ValueError, RecursionError):
        raise WebError("bad-reply", f"{host.url} answered {method} with no JSON") from None
    return reply_value(reply, rpc_id)
