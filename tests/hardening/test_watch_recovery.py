"""Watching survives the user's inotify instances running out for a while.

Each watch ``watchfiles`` sets up is an inotify instance, and the user's instances are shared by
every program they run (128 by default). When they were all taken at the moment dsh started a
session (the watcher then sets up a new watch for the new directory), the watcher logged
"not watching" and ended for good: dsh's appends to a mentioned log never refreshed the editor
again for the life of the server. It now tries again, waiting longer after each failure, and says
in the log when it watches again.

The failure is the real one: the server runs in a user namespace of its own (``unshare``), whose
inotify instance limit (``/proc/sys/user/max_inotify_instances``, per user namespace since Linux
5.11) the test sets to 0 for about two seconds and then back, so no other program on the machine
loses an instance. ``watchfiles`` then fails exactly as when the instances are used up
("Too many open files (os error 24)").
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from lsp_harness import lsp_session, server_pid
from lsp_support import Session, Spec, append_turn, default_specs, wait_until, write_store

from dsh_session_reference.uri import format_session_reference_mention

from .audit import vm_kb


def in_own_user_namespace(command: list[str]) -> list[str]:
    unshare = shutil.which("unshare")
    assert unshare is not None, "util-linux's unshare runs the server in a user namespace of its own"
    return [unshare, "--user", "--map-root-user", "--", *command]


def set_instance_limit(pid: int, limit: int) -> None:
    """The inotify instance limit of the user namespace process ``pid`` runs in."""
    nsenter = shutil.which("nsenter")
    assert nsenter is not None, "util-linux's nsenter sets the limit inside the server's namespace"
    subprocess.run(
        [
            nsenter,
            "--user",
            f"--target={pid}",
            "--preserve-credentials",
            "sh",
            "-c",
            f"echo {limit} > /proc/sys/user/max_inotify_instances",
        ],
        check=True,
    )


async def appended_and_refreshed(s: Session, root: Path, within: float = 10.0) -> None:
    """Append turns to s-delta until the server, unasked, asks the editor to refresh its hints
    (the first watch waits for the editor's first pause, so an early append may come before it)."""
    deadline = time.monotonic() + within
    while True:
        s.refreshes.clear()
        append_turn(root, "s-delta", "and then?", "next step")
        try:
            await wait_until(lambda: any(kind == "inlay" for kind, _ in s.refreshes), within=1.0)
            return
        except AssertionError:
            assert time.monotonic() < deadline, "dsh's appends never refreshed the editor: nothing watches"


async def test_watching_comes_back_after_the_inotify_instances_ran_out(
    tmp_path: Path, workspace: Path
) -> None:
    root = write_store(tmp_path / "sessions", default_specs(str(workspace)), "none")
    log = tmp_path / "server.log"
    command = in_own_user_namespace(
        [sys.executable, "-m", "dsh_session_reference", "lsp", "--log-level", "info", "--log-file", str(log)]
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    env.pop("DSH_HOME", None)
    env.pop("DSH_SESSION_ID", None)

    def said(text: str) -> bool:
        return log.exists() and text in log.read_text()

    async with lsp_session(command, env, workspace, root) as s:
        pid = server_pid(s)
        uri = s.open(workspace, format_session_reference_mention("s-delta", "Deploy checklist") + "\n")
        assert (await s.inlay_hints(uri))[0].label.startswith("1 msg · ")
        await appended_and_refreshed(s, root)  # watching

        set_instance_limit(pid, 0)  # every instance the user may have is taken
        try:
            # dsh starts a session: the watcher sets up a watch with the new directory, and fails.
            write_store(root, [Spec("s-new", str(workspace), "Fresh release notes", [("user", "x")])], "none")
            await wait_until(lambda: said(f"not watching {root} ("), within=10)
            # Meanwhile the root is checked as before: the new session is in the next popup, at once.
            asked = time.monotonic()
            completion = await s.complete(s.open(workspace, "@"))
            assert time.monotonic() - asked < 1.0
            assert "Fresh release notes" in [item.label for item in completion.items]
            await asyncio.sleep(2.0)
        finally:
            set_instance_limit(pid, 128)

        before = (await s.inlay_hints(uri))[0].label
        await appended_and_refreshed(s, root, within=15.0)  # it used to never come back
        assert (await s.inlay_hints(uri))[0].label != before  # the appended turn is counted
        assert said(f"watching {root} again")
        assert vm_kb(pid, "VmHWM") < 300 * 1024
