"""The LSP exchange an editor's configuration decides, for the editors with no binary to drive here.

Zed, Helix and JetBrains (LSP4IJ) cannot be installed from the registries this project reaches,
so their tests run what their configuration controls: the command line they start, the
``initializationOptions`` they send, and their answers to ``workspace/configuration`` (each editor
looks a section up in the settings the user wrote). This client speaks JSON-RPC over the server's
stdio like them, types ``@`` in a Markdown prompt and returns the completion the server gives.
"""

from __future__ import annotations

import json
import queue
import subprocess
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

from lsprotocol import types
from lsprotocol.converters import get_converter

from dsh_session_reference.lsp.completion import only_listing
from dsh_session_reference.uri import parse_session_reference_text

TIMEOUT_S = 30.0


def _lookup(settings: Any, section: str | None) -> Any:
    """How Zed, Helix and LSP4IJ answer a ``workspace/configuration`` item: the dotted section
    inside the settings the user configured, or null."""
    for part in section.split(".") if section else []:
        if not isinstance(settings, dict) or part not in settings:
            return None
        settings = settings[part]
    return settings


def _reader(stream: IO[bytes], inbox: queue.Queue[dict[str, Any] | None]) -> None:
    while True:
        length = None
        while True:
            line = stream.readline()
            if not line:
                inbox.put(None)
                return
            if line in (b"\r\n", b"\n"):
                break
            name, _, value = line.decode("ascii").partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        assert length is not None
        inbox.put(json.loads(stream.read(length)))


class Client:
    """One server process and its messages; server-to-client requests are answered as the
    configured editor would."""

    def __init__(self, argv: Sequence[str], env: dict[str, str], cwd: Path, settings: Any, log: Path) -> None:
        self.settings = settings
        self._log = log.open("wb")
        self.process = subprocess.Popen(
            list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._log, env=env, cwd=cwd
        )
        assert self.process.stdout is not None
        self.inbox: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=_reader, args=(self.process.stdout, self.inbox), daemon=True).start()
        self.notifications: list[dict[str, Any]] = []
        self._next_id = 0

    def send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        assert self.process.stdin is not None
        self.process.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        self.process.stdin.flush()

    def request(self, method: str, params: Any) -> Any:
        self._next_id += 1
        request_id = self._next_id
        self.send({"id": request_id, "method": method, "params": params})
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            message = self.inbox.get(timeout=max(0.1, deadline - time.monotonic()))
            assert message is not None, f"the server ended while {method} was pending"
            if message.get("id") == request_id and "method" not in message:
                assert "error" not in message, message["error"]
                return message.get("result")
            if "method" in message and "id" in message:
                self._answer(message)
            elif "method" in message:
                self.notifications.append(message)

    def _answer(self, message: dict[str, Any]) -> None:
        result: Any = None
        if message["method"] == "workspace/configuration":
            result = [_lookup(self.settings, item.get("section")) for item in message["params"]["items"]]
        self.send({"id": message["id"], "result": result})

    def close(self) -> int:
        """A clean ``shutdown``/``exit``; the server's exit status."""
        try:
            self.request("shutdown", None)
            self.send({"method": "exit"})
            return self.process.wait(timeout=TIMEOUT_S)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._log.close()


CONVERTER = get_converter()


def mention_completion(
    argv: Sequence[str],
    env: dict[str, str],
    workspace: Path,
    prompt: Path,
    initialization_options: Any,
    settings: Any,
    log: Path,
) -> list[str]:
    """Start the server as the editor would, type ``@`` at the end of ``prompt`` and return the
    session ids of the completion rows, in the server's order (its ``sortText``)."""
    client = Client(argv, env, workspace, settings, log)
    try:
        client.request(
            "initialize",
            {
                "processId": None,
                "rootUri": workspace.as_uri(),
                "workspaceFolders": [{"uri": workspace.as_uri(), "name": workspace.name}],
                "capabilities": {
                    "workspace": {"configuration": True, "workspaceFolders": True},
                    "textDocument": {
                        "completion": {"completionItem": {"snippetSupport": False}},
                        "publishDiagnostics": {},
                    },
                },
                "initializationOptions": initialization_options,
            },
        )
        client.send({"method": "initialized", "params": {}})
        text = prompt.read_text(encoding="utf-8") + "Ask @"
        uri = prompt.as_uri()
        client.send(
            {
                "method": "textDocument/didOpen",
                "params": {
                    "textDocument": {"uri": uri, "languageId": "markdown", "version": 1, "text": text}
                },
            }
        )
        lines = text.split("\n")
        position = {"line": len(lines) - 1, "character": len(lines[-1])}
        params = {"textDocument": {"uri": uri}, "position": position}
        result = client.request(
            "textDocument/completion", {**params, "context": {"triggerKind": 2, "triggerCharacter": "@"}}
        )
        # Asked again, as editors ask for an incomplete list, while the server answers only
        # "Listing dsh sessions…" (its listing took over 100 ms: a loaded machine).
        deadline = time.monotonic() + TIMEOUT_S
        while (
            isinstance(result, dict)
            and only_listing(CONVERTER.structure(result, types.CompletionList))
            and time.monotonic() < deadline
        ):
            time.sleep(0.25)
            result = client.request("textDocument/completion", {**params, "context": {"triggerKind": 3}})
        items = result["items"] if isinstance(result, dict) else result
        ordered = sorted(items, key=lambda item: item.get("sortText", item["label"]))
        ids = []
        for item in ordered:
            (reference,) = parse_session_reference_text(item["textEdit"]["newText"]).references
            ids.append(reference.session_id)
    finally:
        returncode = client.close()
    assert returncode == 0, log.read_text(errors="replace")[-3000:]
    return ids
