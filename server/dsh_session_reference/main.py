"""The program: ``dsh-session-reference`` and ``python -m dsh_session_reference``.

The one place that knows both front ends. The CLI (:mod:`.cli`) and the language server
(:mod:`.lsp`) each sit on the core; this module hands the CLI the server and the demo to run for
``lsp`` and ``demo``, imported only when asked for (the LSP stack's imports take 0.7 s that the
store commands do not pay).
"""

from __future__ import annotations

from collections.abc import Sequence

from . import cli


def _serve_stdio(sessions: str | None) -> int:
    from .lsp.allocator import settle
    from .lsp.features import create_server
    from .lsp.transport import serve_stdio

    settle()  # before any thread starts: a server may keep a listing of 200,000 sessions
    return serve_stdio(create_server(sessions))


def _run_demo(sessions: str | None) -> int:
    from .lsp.demo import run_demo

    return run_demo(sessions)


def main(argv: Sequence[str] | None = None) -> int:
    return cli.main(argv, serve_stdio=_serve_stdio, run_demo=_run_demo)
