"""LSP's base protocol over stdio, read with bounds: the server's replacement for pygls' reader.

pygls 2.1's reader (``pygls.io_.run_async``) believes every ``Content-Length``:
a length of 3e10 is allocated (the server dies with ``MemoryError``), and a
length a few bytes too long waits for bytes that never come, so neither side
answers again and the process never exits. The client is the editor, but
"any client" includes a broken or hostile one, so here a frame is checked
before anything is allocated for it: header lines of at most
:data:`MAX_HEADER_LINE` bytes, a ``Content-Length`` of at most
:data:`MAX_MESSAGE_BYTES`, a body that keeps arriving (no
:data:`BODY_STALL_SECONDS` without a byte once it has begun) and that is JSON.
A frame that breaks any of these cannot be resynchronised (where the next
message starts is unknown), so the server says why on stderr, answers a parse
error where the body was at least framed, and exits with status 1; the editor
restarts it.

The messages one read brings whole are handed to pygls together, in order: a burst of requests
each followed by its ``$/cancelRequest`` (a client's as the user types on) costs one wake of the
event loop, and a request cancelled within it is answered cancelled without ever starting
(but for ``initialize`` and ``shutdown``, see :data:`RUN_WHEN_CANCELLED`).
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import logging
import os
import select
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, BinaryIO, Final, NoReturn

from lsprotocol import types

from .pygls_patches import own_stop_event
from .server import DshLanguageServer

LOG = logging.getLogger(__name__)

MAX_MESSAGE_BYTES: Final = 256 << 20
"""The largest message body accepted: a 50 MB document, JSON-escaped, with room to spare."""
MAX_HEADER_LINE: Final = 8 << 10
MAX_HEADER_LINES: Final = 16
BODY_STALL_SECONDS: Final = 10.0
"""Once a message has begun, the longest wait for its next byte."""
EXIT_GRACE_SECONDS: Final = 1.0
"""After ``exit``, how long the worker threads have to stop: every piece of work checks its stop
signal, but a read blocked on a stalled disk cannot, and the editor waits for the process."""
WORKER_PREFIX: Final = "dsh-lsp-worker"
RUN_WHEN_CANCELLED: Final = frozenset({types.INITIALIZE, types.SHUTDOWN})
"""Requests run even when a cancel for them comes later in the same read: the session's state and
the exit status hang on them, and being answered on arrival, a cancel a read later never stops
them (an ``initialize`` answered cancelled left a server that failed every request after it)."""
_CHUNK: Final = 1 << 16


class FramingError(Exception):
    """The stream broke the base protocol; where the next message starts cannot be known."""


class FrameReader:
    """Reads ``Content-Length`` frames from a file descriptor, with the bounds above.

    Blocking: run :meth:`read` in a thread of its own. Between messages it waits as long
    as the client is silent; inside one, at most :data:`BODY_STALL_SECONDS` per byte
    (where the platform can wait on a pipe: not on Windows).
    """

    def __init__(self, fd: int, *, stall_seconds: float = BODY_STALL_SECONDS) -> None:
        self._fd = fd
        self._buffer = bytearray()
        self._stall = stall_seconds
        self._can_wait = sys.platform != "win32"
        self.messages = 0
        self.handled = 0
        """Messages the caller has handled of those read (it counts them, see :meth:`waiting`)."""

    def read(self) -> bytes | None:
        """The next message body, or ``None`` when the stream ends between messages."""
        while (header := self._header()) is None:
            if not self._fill(started=bool(self._buffer)):
                if self._buffer:
                    raise FramingError("the stream ended inside a message's header")
                return None
        return self._take(header)

    def read_batch(self) -> list[bytes] | None:
        """The next message body and every other one already whole in the buffer (reading them
        costs no wait), or ``None`` when the stream ends between messages. A burst of requests
        and their cancels is then handed over in one piece: one wake of the event loop, not one
        a message, and a request can be seen cancelled before it starts."""
        first = self.read()
        if first is None:
            return None
        bodies = [first]
        while (header := self._whole_in_buffer()) is not None:
            bodies.append(self._take(header))
        return bodies

    def _whole_in_buffer(self) -> tuple[int, int] | None:
        """The header (:meth:`_header`) of a whole message in the buffer, if one is there (taking
        it waits for nothing). A header :meth:`read` refuses is left for it: the messages before
        it are handled first."""
        try:
            header = self._header()
        except FramingError:
            return None
        return header if header is not None and len(self._buffer) - header[0] >= header[1] else None

    def _take(self, header: tuple[int, int]) -> bytes:
        """The body of the message at the buffer's start, whose header is ``header``."""
        start, length = header
        del self._buffer[:start]
        body = self._exactly(length)
        self.messages += 1
        return body

    def _header(self) -> tuple[int, int] | None:
        """Where the body of the message at the buffer's start begins and how long it is, once its
        header is whole in the buffer; ``None`` until then. A header is refused as soon as the
        line that breaks it has arrived; header lines end in ``\\r\\n`` or ``\\n`` alone."""
        buffer, start, length = self._buffer, 0, None
        for _ in range(MAX_HEADER_LINES):
            end = buffer.find(b"\n", start)
            if end < 0:
                if len(buffer) - start > MAX_HEADER_LINE:
                    raise FramingError(f"a header line of over {MAX_HEADER_LINE} bytes")
                return None
            line = bytes(buffer[start:end]).removesuffix(b"\r")
            start = end + 1
            if not line:
                if length is None:
                    raise FramingError("a message header without Content-Length")
                return start, length
            length = _header_length(line, length)
        raise FramingError(f"a header of over {MAX_HEADER_LINES} lines")

    def waiting(self) -> bool:
        """Whether a message has arrived that is not handled yet: read and not yet handled, in the
        buffer, or in the pipe. Asked from the event loop's thread while :meth:`read` may wait in
        its own; where a pipe cannot be looked into (Windows), one may always be waiting."""
        if self.messages > self.handled or self._buffer or not self._can_wait:
            return True
        ready, _, _ = select.select([self._fd], [], [], 0)
        return bool(ready)

    def _exactly(self, length: int) -> bytes:
        while len(self._buffer) < length:
            if not self._fill(started=True, want=length - len(self._buffer)):
                raise FramingError(
                    f"the stream ended {length - len(self._buffer)} bytes short of a {length}-byte message"
                )
        body = bytes(self._buffer[:length])
        del self._buffer[:length]
        return body

    def _fill(self, *, started: bool, want: int = _CHUNK) -> bool:
        """Read more; ``False`` at the end of the stream. Inside a message, a stall is an error."""
        if started and self._can_wait:
            ready, _, _ = select.select([self._fd], [], [], self._stall)
            if not ready:
                raise FramingError(
                    f"no byte for {self._stall:g} s inside a message ({len(self._buffer)} bytes of it "
                    "arrived): its Content-Length is longer than what was sent"
                )
        data = os.read(self._fd, max(_CHUNK, min(want, 1 << 20)))
        self._buffer += data
        return bool(data)


def _header_length(line: bytes, length: int | None) -> int | None:
    """The ``Content-Length`` a header line gives, else ``length`` (the one before it); a line
    that is no header, or a length that is not a number or over the bound, is refused."""
    name, colon, value = line.partition(b":")
    if not colon:
        raise FramingError(f"a header line without a colon: {_shown(line)}")
    if name.strip().lower() != b"content-length":
        return length
    text = value.strip()
    if not text.isdigit():
        raise FramingError(f"Content-Length is not a number: {_shown(text)}")
    # int() refuses over 4,300 digits (ValueError); no length that long is under the bound.
    length = int(text) if len(text) <= 20 else MAX_MESSAGE_BYTES + 1
    if length > MAX_MESSAGE_BYTES:
        raise FramingError(
            f"Content-Length {_shown(text)} is over the {MAX_MESSAGE_BYTES >> 20} MiB a message may have"
        )
    return length


def _shown(data: bytes) -> str:
    return repr(data[:80])[2:-1]


class Output:
    """pygls' writer over stdout, except that what is sent once ``exit`` has closed it is dropped.
    An answer can finish after that (a request ``shutdown`` cancelled, read with ``exit`` in one
    piece): pygls' own writer raised, pygls reported the failed write to the client through the
    same closed stream, and that report failed in turn, without end."""

    def __init__(self, stream: BinaryIO) -> None:
        self._stream = stream

    def close(self) -> None:
        self._stream.close()

    def write(self, data: bytes) -> None:
        if self._stream.closed:
            LOG.debug("dropped %d bytes sent after exit", len(data))
            return
        self._stream.write(data)
        self._stream.flush()


def serve_stdio(server: DshLanguageServer) -> NoReturn:
    """Serve one client over stdio until it exits, then end the process with its exit status.

    ``0`` after ``shutdown`` and ``exit``, ``1`` for ``exit`` without ``shutdown`` (the LSP
    specification; pygls' own loop loses the status) or a stream that broke the framing.
    """
    reader = FrameReader(sys.stdin.buffer.fileno())
    server.message_waiting = reader.waiting
    stop = own_stop_event(server)
    server.protocol.set_writer(Output(sys.stdout.buffer))
    status = 0
    loop = asyncio.new_event_loop()
    workers = ThreadPoolExecutor(thread_name_prefix=WORKER_PREFIX)
    loop.set_default_executor(workers)  # asyncio.to_thread's: the threads waited for at exit
    asyncio.set_event_loop(loop)
    try:
        loop.run_until_complete(_loop(server, reader, stop))
    except SystemExit as request:  # pygls' ``exit`` handler: 1 unless ``shutdown`` came first
        status = request.code if isinstance(request.code, int) else 1
    except FramingError as error:
        sys.stderr.write(f"dsh-session-reference: the client broke LSP's message framing: {error}\n")
        status = 1
    except BrokenPipeError:
        LOG.error("the connection to the client is lost")
        status = 1
    except KeyboardInterrupt:
        status = 130
    finally:
        server.shutdown()  # type: ignore[no-untyped-call]
        _close(loop, workers)
    if not _workers_ended(EXIT_GRACE_SECONDS):
        # Python would wait for them before it exits, for as long as they run.
        LOG.warning("exiting with work still running in worker threads")
    _end(status)


def _end(status: int) -> NoReturn:
    """End the process with ``status``: the exit handlers run (a catalog leaves its index, in
    bounded time), then the process ends without the interpreter taking its heap apart object by
    object, which took 10-13 s after ``exit`` at 200,000 sessions (millions of objects freed and
    collected one by one, for memory the process is about to give back whole)."""
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed with the connection
            stream.flush()
    os._exit(status)


def _close(loop: asyncio.AbstractEventLoop, workers: ThreadPoolExecutor) -> None:
    """What ``asyncio.run`` does at the end, but for the default executor: its threads are told
    to stop (their work's stop signals were set by ``shutdown``) and not waited for here."""
    try:
        loop.set_exception_handler(_ended_quietly)
        tasks = asyncio.all_tasks(loop)
        for task in tasks:
            task.cancel()
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
    finally:
        workers.shutdown(wait=False, cancel_futures=True)
        asyncio.set_event_loop(None)
        loop.close()


def _ended_quietly(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """The loop's exception handler while the session ends: pygls reads the result of each step
    of a handler it runs (``initialized``'s, say), and a step the end cancelled is no error (it
    wrote a traceback to stderr, which editors show in their log). Anything else is reported."""
    if isinstance(context.get("exception"), asyncio.CancelledError):
        return
    loop.default_exception_handler(context)


def _workers_ended(within: float) -> bool:
    """Whether every worker thread has ended, waiting at most ``within`` seconds."""
    deadline = time.monotonic() + within
    for thread in threading.enumerate():
        if thread.name.startswith(WORKER_PREFIX):
            thread.join(max(0.0, deadline - time.monotonic()))
    return not any(thread.name.startswith(WORKER_PREFIX) for thread in threading.enumerate())


def _json_int(text: str) -> int | float:
    """A JSON integer; past Python's int-string limit (4,300 digits, else ``ValueError`` and the
    request went unanswered: an ``initialize`` left the client waiting) a double, as JavaScript's
    ``JSON.parse`` reads every number. No setting takes a value that large anyway."""
    return int(text) if len(text) <= 4_000 else float(text)


async def _loop(server: DshLanguageServer, reader: FrameReader, stop: threading.Event) -> None:
    loop = asyncio.get_running_loop()
    with ThreadPoolExecutor(1, thread_name_prefix="dsh-lsp-reader") as reading:
        # The first read waits in its thread while this one prepares for `initialize`, until a
        # message arrives (the client has not written yet: the editor is still activating us).
        read: asyncio.Future[list[bytes] | None] | None = loop.run_in_executor(reading, reader.read_batch)
        server.protocol.prepare_initialize(reader.waiting)
        while not stop.is_set():
            if read is None:
                read = loop.run_in_executor(reading, reader.read_batch)
            bodies, read = await read, None
            if bodies is None:
                return
            messages: list[Any] = []
            for body in bodies:
                try:
                    messages.append(json.loads(body, parse_int=_json_int))
                except (json.JSONDecodeError, UnicodeDecodeError) as error:  # the length did not fit
                    await _handle(server, reader, messages)
                    parse_error = {"code": -32700, "message": f"Parse error: {error}"}
                    server.protocol.send_raw({"jsonrpc": "2.0", "id": None, "error": parse_error})
                    raise FramingError(
                        f"message {reader.handled + 1} ({len(body)} bytes) is not JSON: {error}"
                    ) from None
            await _handle(server, reader, messages)


async def _handle(server: DshLanguageServer, reader: FrameReader, messages: list[Any]) -> None:
    """Hand ``messages`` (one read's, parsed) to pygls in order; a request a later one of them
    cancels is answered as cancelled without its handler starting. What each handler does before
    its first wait is done before the next message is handled, as when each message had a read of
    its own: a completion reads the text it was asked of, not the edit sent behind it."""
    cancelled = _cancelled_behind(messages)
    for position, data in enumerate(messages):
        # Counted before anything else runs: no request can see it as still waiting.
        reader.handled += 1
        if position in cancelled:
            server.protocol.answer_cancelled(data["id"])
            continue
        try:
            message = server.protocol.structure_message(data) if isinstance(data, dict) else data
        except Exception:  # JSON that is no message: pygls' own reader logs it and goes on
            LOG.exception("unable to read message %d", reader.handled)
            continue
        try:
            server.protocol.handle_message(message)
        except Exception:
            LOG.exception("unable to handle message %d", reader.handled)
        await asyncio.sleep(0)  # the tasks it started take their first step


def _cancelled_behind(messages: list[Any]) -> set[int]:
    """The positions of the requests a ``$/cancelRequest`` later in ``messages`` names, but for
    :data:`RUN_WHEN_CANCELLED`: a client that types on sends each cancel right behind its request
    (300 cancelled ``workspace/symbol`` requests had each been started, then stopped)."""
    cancels: dict[object, int] = {}
    for position, data in enumerate(messages):
        if isinstance(data, dict) and data.get("method") == types.CANCEL_REQUEST:
            params = data.get("params")
            msg_id = params.get("id") if isinstance(params, dict) else None
            if type(msg_id) in (int, str):  # not a bool, which would stand for 0 or 1
                cancels[msg_id] = position
    return {
        position
        for position, data in enumerate(messages)
        if isinstance(data, dict)
        and isinstance(data.get("method"), str)
        and data["method"] not in RUN_WHEN_CANCELLED
        and type(data.get("id")) in (int, str)
        and cancels.get(data["id"], -1) > position
    }
