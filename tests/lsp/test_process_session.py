"""The language server leads a process session of its own on Linux (``assembly.lead_own_process_session``).

Linux's scheduler shares the CPU between process sessions first (autogroups): in the editor's
session the server's start was one thread among the editor's many. These run the real ``lsp``
command as an editor spawns it: a plain child over pipes, in the editor's session and process group.
"""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from processes import children, proc_stat, running

pytestmark = pytest.mark.skipif(
    sys.platform != "linux", reason="process sessions as scheduling groups are Linux's"
)


def _frame(message: dict[str, Any]) -> bytes:
    body = json.dumps(message).encode()
    return b"Content-Length: %d\r\n\r\n" % len(body) + body


def _wait_for(condition: Callable[[], object], what: str) -> None:
    deadline = time.monotonic() + 20
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.01)


def _server(tmp_path: Path, stdin: int = subprocess.PIPE, **popen: Any) -> subprocess.Popen[bytes]:
    env = {key: value for key, value in os.environ.items() if key != "DSH_SESSION_ID"}
    env["XDG_CACHE_HOME"] = str(tmp_path / "cache")  # no index kept: the spare worker starts
    (tmp_path / "sessions").mkdir()
    command = [
        sys.executable,
        "-m",
        "dsh_session_reference",
        "lsp",
        "--stdio",
        "--sessions",
        str(tmp_path / "sessions"),
    ]
    return subprocess.Popen(
        command,
        stdin=stdin,
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


def test_the_server_and_its_worker_leave_the_editor_s_session_and_end_with_its_pipe(tmp_path: Path) -> None:
    server = _server(tmp_path)
    try:
        # The spare worker a cold index's walk takes starts before `initialize` (the walk may stop
        # it once it finds nothing to do): it starts after the server left, in the server's session.
        if (os.cpu_count() or 1) > 1:
            _wait_for(lambda: children(server.pid), "the spare worker did not start")
            workers = children(server.pid)
            sessions = [(proc_stat(pid) or ["?"] * 4)[3] for pid in workers]
            assert sessions == [str(server.pid)] * len(workers), (workers, sessions)
        else:
            workers = []
        stat = proc_stat(server.pid)
        assert stat is not None and int(stat[3]) == server.pid != os.getsid(0)
        # No terminal and no process group ties it to the editor: its stdin closing ends it, and
        # its worker with it.
        assert server.stdin is not None
        server.stdin.close()
        assert server.wait(timeout=20) == 0
        _wait_for(lambda: not any(running(pid) for pid in workers), "a worker outlived the server")
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
        stat = proc_stat(server.pid)
        assert stat is not None and int(stat[2]) == server.pid  # its own group, as it was started
        assert int(stat[3]) == os.getsid(0)  # still ours: setsid refused, and nothing broke
    finally:
        server.kill()
        server.wait()


def test_a_server_run_in_a_terminal_stays_in_its_session(tmp_path: Path) -> None:
    """Run by hand (through a wrapper that forks it, so ``setsid`` would succeed), the server keeps
    its terminal and the terminal's job: Ctrl+C still reaches it."""
    primary, secondary = pty.openpty()
    try:
        server = _server(tmp_path, stdin=secondary)
        # The spare worker starts right after the call that would have left the session.
        if (os.cpu_count() or 1) > 1:
            _wait_for(lambda: children(server.pid), "the spare worker did not start")
        else:
            time.sleep(1)
        stat = proc_stat(server.pid)
        assert stat is not None and int(stat[3]) == os.getsid(0)
        server.kill()
        server.wait()
    finally:
        os.close(primary)
        os.close(secondary)


READS = {
    "a document": "from dsh_session_reference.jsjson import read_untrusted as read\nread(TERMINAL, 1024)",
    "a log": "from dsh_session_reference.store.logbase import open_artifact\n"
    "open_artifact(TERMINAL, os.path.dirname(TERMINAL), resolved=TERMINAL)",
}


@pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
def test_a_session_leader_reading_a_terminal_does_not_take_it(read: str) -> None:
    """A document path or a log may name a terminal: opened without ``O_NOCTTY`` it would become the
    server's controlling terminal (and its hang-up would end the server)."""
    primary, secondary = pty.openpty()
    try:
        probe = "\n".join(
            [
                "import os",
                f"TERMINAL = {os.ttyname(secondary)!r}",
                "os.setsid()",
                "try:",
                textwrap.indent(read, "    "),
                "except Exception:",
                "    pass",
                "try:",
                "    os.close(os.open('/dev/tty', os.O_RDONLY))",
                "except OSError:",
                "    print('no controlling terminal')",
                "else:",
                "    print('took the terminal')",
            ]
        )
        done = subprocess.run(
            [sys.executable, "-c", probe],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert done.stdout.strip() == "no controlling terminal", done
    finally:
        os.close(primary)
        os.close(secondary)
