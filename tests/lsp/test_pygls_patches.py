"""The pygls internals the server patches (``lsp/pygls_patches.py``) still exist in the installed pygls."""

from __future__ import annotations

from typing import Any

import pytest
from pygls.protocol import JsonRPCProtocol, LanguageServerProtocol

from dsh_session_reference.lsp.pygls_patches import DshProtocol, missing_internals


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
