"""``python -m bench.startup``: the language server's start, as an editor meets it, at 3,000 sessions.

What a user waits for after opening a prompt is the time from the server's spawn to the first
completion that holds sessions. Measured here over stdio from the spawn (Python's start and the
server's imports included), with the ``initialize`` params VS Code 1.139 sends (its capabilities
as captured, with the extension's own), answering ``workspace/configuration`` and the
registrations as it does, asked as soon as ``initialized`` is sent and again every 250 ms while
the answer is the "Listing dsh sessions…" row, as the VS Code extension asks (with the CPU time
the server had used by then, every thread, what an editor sharing its cores loses to it):

- over an empty index (the first start ever), with when the cold listing's work-done progress
  began (VS Code shows it in the status bar);
- over the index the previous server left (every later start).

With ``--busy N``, N processes spin in this benchmark's own session while the kept-index starts run,
as an editor's own processes (its renderer, its extension host) keep its cores busy while the
server it spawned starts: the server competes for a core with them, as it does in a real editor.

With ``--initialize-after SECONDS`` the client writes ``initialize`` that long after the spawn, as
VS Code does once it has activated the extension (the server is spawned as the extension's code
loads, 0.4-1.3 s before ``activate`` in the e2e runs): ``initialize`` is then timed from when it
was sent, and the server has used the wait to prepare for it.

The server runs from bytecode, as an installed package or the VS Code extension's bundle does (a
shell with ``PYTHONDONTWRITEBYTECODE`` would have it compile this package on every start): each run
keeps its own in a folder of its own (``PYTHONPYCACHEPREFIX``), made by a first start that is not
measured.

The real-VS-Code figure (the extension's activation to the first answer with sessions, code-server
and Chromium included) comes from ``tests/editors/vscode/test_vscode.py``'s first-`@` test; both
are quoted in docs/benchmarks.md. Not part of the test suite.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.lsp.client import LanguageClient
from pygls.protocol import default_converter

from dsh_session_reference.lsp.completion import LISTING_DATA

from .generate import StoreSpec, ensure_store

LISTING_RETRY = 0.25
VSCODE_PARAMS = Path(__file__).parents[1] / "tests" / "lsp" / "data" / "vscode-1.139-initialize-params.json"
"""``InitializeParams`` of VS Code 1.139.1 with vscode-languageclient 11, captured in code-server."""
EXTENSION_CAPABILITIES = {
    "dshSessionReference": {
        "triggerSuggestCommand": "editor.action.triggerSuggest",
        "previewCommand": "dshSessionReference.previewContext",
        "completionRowColumns": 46,
    }
}
"""What the VS Code extension adds to them (``experimental``, vscode-client/src/server.ts)."""


def vscode_params(settings: dict[str, Any]) -> dict[str, Any]:
    """The ``initialize`` params VS Code sends, with the extension's capabilities and ``settings``
    (the ``dshSessionReference`` section) as its initialization options."""
    params: dict[str, Any] = json.loads(VSCODE_PARAMS.read_text(encoding="utf-8"))
    params["capabilities"]["experimental"] = EXTENSION_CAPABILITIES
    params.update(processId=os.getpid(), rootUri=None, workspaceFolders=None)
    params["initializationOptions"] = {"dshSessionReference": settings}
    return params


async def start_once(
    root: str, cache: Path, target: str, bytecode: Path, initialize_after: float = 0.0
) -> dict[str, float]:
    """One server's start: seconds from the spawn to ``initialize`` answered (from when it was sent,
    ``initialize_after`` seconds after the spawn), to the first completion answer, to the first
    with sessions, and to the listing's progress (if shown)."""
    client = LanguageClient("dsh-startup-bench", "1")
    marks: dict[str, float] = {}
    settings = {"sessionsRoot": root}
    initialize = default_converter().structure(vscode_params(settings), types.InitializeParams)
    started = time.perf_counter()

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def _create(params: types.WorkDoneProgressCreateParams) -> None:
        return None

    @client.feature(types.PROGRESS)
    def _progress(params: types.ProgressParams) -> None:
        value: Any = params.value
        title = value.get("title") if isinstance(value, dict) else getattr(value, "title", None)
        if title == "Listing dsh sessions" and "progress" not in marks:
            marks["progress"] = time.perf_counter() - started

    @client.feature(types.WORKSPACE_CONFIGURATION)
    def _configuration(params: types.ConfigurationParams) -> list[Any]:
        return [settings for _ in params.items]

    for method in (
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
        types.WINDOW_LOG_MESSAGE,
        types.WINDOW_SHOW_MESSAGE,
        types.CLIENT_REGISTER_CAPABILITY,
        types.WORKSPACE_CODE_LENS_REFRESH,
        types.WORKSPACE_INLAY_HINT_REFRESH,
        types.WORKSPACE_DIAGNOSTIC_REFRESH,
        "dshSessionReference/contentChanged",
    ):
        client.feature(method)(lambda params: None)
    env = {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}
    env.update(XDG_CACHE_HOME=str(cache), DSH_SESSION_ID=target, PYTHONPYCACHEPREFIX=str(bytecode))
    await client.start_io(sys.executable, "-m", "dsh_session_reference", "lsp", "--stdio", env=env)
    await asyncio.sleep(initialize_after)
    sent = time.perf_counter()
    await client.initialize_async(initialize)
    marks["initialize"] = time.perf_counter() - sent
    client.initialized(types.InitializedParams())
    uri = "file:///bench/prompt.md"
    text = "see @"
    document = types.TextDocumentItem(uri=uri, language_id="markdown", version=0, text=text)
    client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=document))
    params = types.CompletionParams(
        text_document=types.TextDocumentIdentifier(uri=uri),
        position=types.Position(line=0, character=len(text)),
    )
    while True:
        result = await client.text_document_completion_async(params)
        marks.setdefault("first answer", time.perf_counter() - started)
        assert isinstance(result, types.CompletionList)
        if len(result.items) != 1 or result.items[0].data != LISTING_DATA:
            marks["sessions"] = time.perf_counter() - started
            cpu = _cpu_seconds(client)
            if cpu is not None:
                marks["server CPU"] = cpu
            break
        await asyncio.sleep(LISTING_RETRY)
    await client.shutdown_async(None)
    client.exit(None)
    await client.stop()  # type: ignore[no-untyped-call]
    return marks


async def run(sessions: int, kept_runs: int, initialize_after: float, busy: int) -> None:
    manifest = ensure_store(StoreSpec(sessions=sessions, huge=0, medium=0))
    with tempfile.TemporaryDirectory(prefix="dsh-startup-") as scratch:
        cache, bytecode = Path(scratch) / "cache", Path(scratch) / "bytecode"
        root, target = manifest.root, manifest.target_id
        await start_once(root, Path(scratch) / "compiling", target, bytecode)
        cold = await start_once(root, cache, target, bytecode)
        print(f"empty index: {_line(cold)}")
        with _spinning(busy):
            kept = [
                await start_once(root, cache, target, bytecode, initialize_after) for _ in range(kept_runs)
            ]
        for marks in kept:
            print(f"kept index:  {_line(marks)}")
        figures = [marks["sessions"] for marks in kept]
        print(
            f"kept index, spawn to sessions: median {statistics.median(figures) * 1000:.0f} ms, "
            f"max {max(figures) * 1000:.0f} ms (n={len(figures)}, {sessions:,} sessions)"
        )
        cpu = [marks["server CPU"] for marks in kept if "server CPU" in marks]
        if cpu:
            print(f"kept index, the server's CPU until then: median {statistics.median(cpu) * 1000:.0f} ms")


@contextlib.contextmanager
def _spinning(count: int) -> Iterator[None]:
    """``count`` processes busy on the CPU in this process's session while the block runs."""
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()


def _cpu_seconds(client: LanguageClient) -> float | None:
    """The CPU time (user and system, every thread) the server process has used so far: what an
    editor sharing its cores loses to it (Linux only; ``None`` elsewhere)."""
    process = client._server  # type: ignore[attr-defined]
    try:
        with open(f"/proc/{process.pid}/stat", encoding="ascii") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except (AttributeError, OSError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def _line(marks: dict[str, float]) -> str:
    return ", ".join(f"{name} {seconds * 1000:.0f} ms" for name, seconds in marks.items())


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.startup", description=__doc__)
    parser.add_argument("--sessions", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=5, help="starts over the kept index")
    parser.add_argument(
        "--initialize-after",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="over the kept index, send initialize this long after the spawn (VS Code: once activated)",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="over the kept index, N processes spinning in this session (an editor's own, busy)",
    )
    args = parser.parse_args()
    asyncio.run(run(args.sessions, args.runs, args.initialize_after, args.busy))


if __name__ == "__main__":
    main()
