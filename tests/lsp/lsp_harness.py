"""Start the real language server (usually under the audit hook) for one test, with any command and root.

pytest-lsp's fixtures fix the server command when a module is imported; the
hardening tests need a fresh audit log, a dropped-privilege prefix or a probe
per test, so they start the client themselves and reuse the LSP tests'
:class:`lsp_support.Session` for everything after ``initialize``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

from lsp_support import Session, initialize_params, start
from pytest_lsp import make_test_lsp_client

VSCODE = "visual-studio-code@1.139"


@contextlib.asynccontextmanager
async def lsp_session(
    command: Sequence[str],
    env: dict[str, str],
    workspace: Path,
    root: Path,
    *,
    preset: str = VSCODE,
    cwd: Path | None = None,
    **settings: Any,
) -> AsyncIterator[Session]:
    """An initialized session; on exit a clean ``shutdown``/``exit``, and the server must have ended."""
    client = make_test_lsp_client()
    await client.start_io(*command, env=env, cwd=cwd)
    try:
        session = await start(client, preset, initialize_params(preset, workspace, root, **settings))
        yield session
        assert client.error is None, client.error
        server = client._server
        if server is not None and server.returncode is None:  # else the test shut it down itself
            await asyncio.wait_for(client.shutdown_session(), 30)
        assert server is not None and server.returncode == 0, "the server did not exit cleanly"
    finally:
        server = client._server
        if server is not None and server.returncode is None:
            server.kill()
            await server.wait()
        await client.stop()  # type: ignore[no-untyped-call]


def server_pid(session: Session) -> int:
    server = session.client._server
    assert server is not None
    return server.pid
