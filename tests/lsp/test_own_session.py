"""The language server leads a session of its own on Linux (``assembly.leave_editor_session``).

Linux's scheduler shares the CPU between sessions first (autogroups): in the editor's session the
server's start was one thread among the editor's many. These run the real ``lsp`` command as an
editor spawns it, a plain child in the editor's session and process group.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="sessions as scheduling groups are Linux's")


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _stat(pid: int) -> list[str]:
    """``/proc/PID/stat``'s fields after the command name: state, ppid, pgrp, session, ..."""
    return Path(f"/proc/{pid}/stat").read_text(encoding="ascii").rsplit(")", 1)[1].split()


def _session(pid: int) -> int:
    return int(_stat(pid)[3])


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if int(_stat(int(entry.name))[1]) == pid:
                    found.append(int(entry.name))
            except (OSError, IndexError):
                continue
    return found


def _server(tmp_path: Path, **popen: Any) -> subprocess.Popen[bytes]:
    env = {key: value for key, value in os.environ.items() if key != "DSH_SESSION_ID"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # no index kept: the spare worker starts too
    (tmp_path / "sessions").mkdir()
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "dsh_session_reference",
            "lsp",
            "--stdio",
            "--sessions",
            str(tmp_path / "sessions"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=tmp_path,
        **popen,
    )


def _initialize(server: subprocess.Popen[bytes]) -> dict[str, Any]:
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write(
        _frame({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}})
    )
    server.stdin.flush()
    length = 0
    while (line := server.stdout.readline()) not in (b"\r\n", b""):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    reply: dict[str, Any] = json.loads(server.stdout.read(length))
    return reply


def _wait_for(condition: Any, what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_the_server_and_its_workers_leave_the_editor_s_session_and_exit_with_its_pipe(tmp_path: Path) -> None:
    server = _server(tmp_path)
    try:
        reply = _initialize(server)
        assert reply["id"] == 1 and "capabilities" in reply["result"], reply
        assert _session(server.pid) == server.pid != os.getsid(0)
        # The spare worker a cold index's walk takes is started after the server left: it shares
        # the server's session, so the two never get more than one session's share together.
        _wait_for(lambda: _children(server.pid), "the spare worker did not start")
        assert [_session(child) for child in _children(server.pid)] == [server.pid] * len(
            _children(server.pid)
        )
        workers = _children(server.pid)
        # No terminal and no process group ties it to the editor: its stdin closing ends it, and
        # its workers with it.
        assert server.stdin is not None
        server.stdin.close()
        assert server.wait(timeout=20) is not None
        _wait_for(
            lambda: not any(Path(f"/proc/{pid}").exists() for pid in workers), "a worker outlived the server"
        )
    finally:
        server.kill()
        server.wait()


def test_a_server_that_leads_its_process_group_already_runs_as_it_is(tmp_path: Path) -> None:
    """A terminal's job, or an editor that starts its servers detached (Neovim): ``setsid`` fails
    for a group leader, and the server starts regardless."""
    server = _server(tmp_path, process_group=0)
    try:
        reply = _initialize(server)
        assert reply["id"] == 1 and "capabilities" in reply["result"], reply
        assert int(_stat(server.pid)[2]) == server.pid  # its own group, as it was started
        assert _session(server.pid) == os.getsid(0)  # still ours: setsid refused, and nothing broke
    finally:
        server.kill()
        server.wait()
