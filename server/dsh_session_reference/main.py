"""The program: ``dsh-session-reference`` and ``python -m dsh_session_reference``.

The one place that knows both front ends. The CLI (:mod:`.cli`) and the language server
(:mod:`.lsp`) each sit on the core; this module hands the CLI the server and the demo to run for
``lsp`` and ``demo``, imported only when asked for (the LSP stack's imports take 0.7 s that the
store commands do not pay).
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator, Sequence

from . import cli


@contextlib.contextmanager
def _uncollected() -> Iterator[None]:
    """The LSP stack's imports with the cyclic collector off, what they made frozen after.

    Those imports make about 90,000 objects (lsprotocol's 560 attrs classes, the methods attrs
    writes for them), and CPython's automatic collections traverse them again and again while they
    are made: some 120 young, 11 middle and one full collection, 35-45 ms of the 0.3 s of imports
    before ``initialize``, on cores an editor's start shares. Nearly all of them live as long as
    the process; the rest are cycles attrs leaves behind (about 35,000 objects). So the collector
    is off while they are made, and they are frozen (``gc.freeze``) after: collections skip them
    until the server's first idle full collection (:mod:`.lsp.idle_gc`) takes them back and frees
    those cycles.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


def _serve_stdio(sessions: str | None) -> int:
    with _uncollected():
        # Under the block from the first import of the package on: its own import brings
        # lsprotocol and pygls (lsp/__init__.py), the bulk of what the block is for.
        from .lsp.allocator import settle

        settle()  # before any thread starts: a server may keep a listing of 200,000 sessions
        from .lsp.features import create_server
        from .lsp.transport import serve_stdio

    return serve_stdio(create_server(sessions))


def _run_demo(sessions: str | None) -> int:
    from .lsp.demo import run_demo

    return run_demo(sessions)


def main(argv: Sequence[str] | None = None) -> int:
    return cli.main(argv, serve_stdio=_serve_stdio, run_demo=_run_demo)
