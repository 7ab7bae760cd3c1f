"""A test double of a dsh web host, for the failures real dsh cannot be made to show on demand:
an answer that is an HTTP error, one that never comes, a host that is a trap (a request reaching
it is the failure). It speaks only the transport (``POST /api/<method>``); a test that claims dsh
received a prompt runs against real dsh instead.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Double:
    """What the double answers (``status`` with ``body``; ``hang``: nothing, until it stops) and
    the requests it got: ``(path, headers, parsed body)``."""

    status: int = 500
    body: bytes = b"handler failure: boom"
    hang: bool = False
    error: dict[str, Any] | None = None
    """Answer 200 with this ``ok: false`` result, to the request's own rpcId, instead."""
    requests: list[tuple[str, dict[str, str], Any]] = field(default_factory=list)
    url: str = ""
    _stop: threading.Event = field(default_factory=threading.Event)


@contextlib.contextmanager
def web_double(**behaviour: Any) -> Iterator[Double]:
    double = Double(**behaviour)

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            raw = self.rfile.read(length)
            request = json.loads(raw)
            double.requests.append((self.path, dict(self.headers.items()), request))
            if double.hang:
                double._stop.wait(60)
                return
            status, body = double.status, double.body
            if double.error is not None:
                result = {"ok": False, "error": double.error}
                reply = {"type": "server-response", "rpcId": request["rpcId"], "result": result}
                status, body = 200, json.dumps(reply).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    double.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield double
    finally:
        double._stop.set()
        server.shutdown()
        server.server_close()


_HELD: list[socket.socket] = []


def refused_url() -> str:
    """A loopback URL nothing listens on, nor will while the tests run: its port stays bound by
    this process without listening, so a connection is refused and no other server (a dsh web
    another test starts on port 0) can take it."""
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    _HELD.append(probe)
    return f"http://127.0.0.1:{probe.getsockname()[1]}"
