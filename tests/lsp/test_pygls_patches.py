"""The pygls internals the server patches (``lsp/pygls_patches.py``) still exist in the installed pygls."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.protocol import JsonRPCProtocol, LanguageServerProtocol

from dsh_session_reference.lsp import transport
from dsh_session_reference.lsp.features import create_server
from dsh_session_reference.lsp.pygls_patches import DshProtocol, missing_internals, own_stop_event


def test_every_patched_internal_is_there_in_this_pygls() -> None:
    assert missing_internals() == []


def test_a_renamed_or_reshaped_internal_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(JsonRPCProtocol, "_send_data")  # where pygls defines it

    def reshaped(self: Any, msg_id: Any, request: Any) -> None:
        pass

    monkeypatch.setattr(LanguageServerProtocol, "_handle_cancel_notification", reshaped)
    assert missing_internals() == [
        "LanguageServerProtocol._handle_cancel_notification takes ('self', 'msg_id', 'request'), "
        "not ('self', 'msg_id')",
        "LanguageServerProtocol._send_data is gone",
    ]


def test_the_overrides_keep_pygls_signatures() -> None:
    """An override that drifted from its base would be called wrongly by pygls."""
    import inspect

    names = ("_execute_handler", "_handle_cancel_notification", "_send_handler_result", "structure_message")
    for name in (*names, "handle_message"):
        ours = tuple(inspect.signature(getattr(DshProtocol, name)).parameters)
        theirs = tuple(inspect.signature(getattr(LanguageServerProtocol, name)).parameters)
        assert ours == theirs, name


def test_a_built_in_document_handler_pygls_moved_is_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    """The server leaves out pygls' own didOpen/didChange/didClose so its features keep the
    documents; a pygls that registers them elsewhere would keep a second copy unseen."""
    monkeypatch.delattr(LanguageServerProtocol, "lsp_text_document__did_close")
    assert missing_internals() == ["pygls has no built-in textDocument/didClose handler to leave out"]


VSCODE_INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": json.loads(
        (Path(__file__).parent / "data" / "vscode-1.139-initialize-params.json").read_text()
    ),
}
"""The ``initialize`` request VS Code 1.139 sends (its capabilities as captured)."""


def cattrs_compiles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the functions cattrs writes from now on (each compiled from source)."""
    written: list[str] = []

    def compiling(source: Any, filename: str, *args: Any, **kwargs: Any) -> Any:
        written.append(filename)
        return compile(source, filename, *args, **kwargs)

    for name, module in list(sys.modules.items()):
        if (
            name.startswith("cattrs")
            and module is not None
            and "compile" in vars(module).get("__builtins__", {})
        ):
            monkeypatch.setattr(module, "compile", compiling, raising=False)
    return written


def test_initialize_is_prepared_while_no_message_waits_and_not_once_one_does(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 36: cattrs writes a function per class the first time it reads one, and ``initialize``'s
    params are about 85 classes of client capabilities (60 ms of the server's CPU before it could
    answer, with its answer's). A server spawned as the extension's code loads waits for its
    client: it writes them then, while no message is waiting, and stops as soon as one is."""
    written = cattrs_compiles(monkeypatch)
    idle = create_server()
    idle.protocol.prepare_initialize(lambda: False)
    assert len(written) > 80
    written.clear()
    message = idle.protocol.structure_message(VSCODE_INITIALIZE)
    assert isinstance(message, types.InitializeRequest) and written == []
    busy = create_server()
    written.clear()
    busy.protocol.prepare_initialize(lambda: True)  # a message is waiting: nothing written first
    assert written == []
    busy.protocol.structure_message(VSCODE_INITIALIZE)
    assert len(written) > 80


async def test_the_transport_prepares_initialize_while_its_first_read_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = create_server()
    read_end, write_end = os.pipe()
    stop = own_stop_event(server)
    serving = asyncio.ensure_future(transport._loop(server, transport.FrameReader(read_end), stop))
    try:
        await asyncio.sleep(0.05)  # nothing sent yet
        written = cattrs_compiles(monkeypatch)
        server.protocol.structure_message(VSCODE_INITIALIZE)
        assert written == []
    finally:
        os.close(write_end)  # the stream ends: the loop returns
        await asyncio.wait_for(serving, 10)
        os.close(read_end)
