"""``dshSessionReference.send`` over real LSP, for what it refuses and the failures of the host
(a test double of dsh web, or nothing listening). That real dsh receives the prompt and sends the
model what the preview shows is tested against real dsh (``tests/dsh/``).

The server runs with ``$DSH_WEB_URL`` naming a port nothing listens on, so no test here can reach
a dsh the machine may be running on the default port.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsp_support import (
    Session,
    configure,
    default_specs,
    initialize_params,
    server_config,
    serving,
    wait_until,
    write_store,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcRequestCancelled
from pytest_lsp import LanguageClient

from dsh.web_double import refused_url, web_double
from dsh_session_reference.dsh_web import DEFAULT_URL
from dsh_session_reference.lsp.send import web_url
from dsh_session_reference.uri import format_session_reference_mention

pytestmark = pytest.mark.asyncio(loop_scope="module")

CLIENT = "visual-studio-code@1.139"
SEND = "dshSessionReference.send"
NOWHERE = refused_url()
IGNORED = refused_url()
"""What the server's ``initializationOptions`` name as ``dshWebUrl``: never to be used."""


@pytest_lsp.fixture(config=server_config({"DSH_SESSION_ID": "", "DSH_WEB_URL": NOWHERE}), scope="module")
async def lsp(lsp_client: LanguageClient, workspace: Path, tmp_path_factory: pytest.TempPathFactory):
    store = write_store(tmp_path_factory.mktemp("send-store"), default_specs(str(workspace)), "none")
    params = initialize_params(CLIENT, workspace, store, dshWebUrl=IGNORED)
    async with serving(lsp_client, CLIENT, params, store):
        yield


async def refusal(s: Session, *arguments: Any) -> JsonRpcException:
    with pytest.raises(JsonRpcException) as raised:
        await s.command(SEND, *arguments)
    return raised.value


async def test_a_prompt_with_errors_is_refused_with_the_reason_and_nothing_is_sent(
    s: Session, workspace: Path
) -> None:
    uri = s.open(workspace, f"compare {format_session_reference_mention('s-nobody', 'gone')}\n")
    with web_double(status=500) as double:
        error = await refusal(s, uri, {"dshWebUrl": double.url})
    assert error.code == types.LSPErrorCodes.RequestFailed
    assert error.data["reason"] == "errors" and error.data["errors"] == 1
    assert error.message.startswith("Not sent: dsh would refuse this prompt (1 error in it; prepare failed: ")
    assert "s-nobody" in error.message and "Fix the mentions flagged in the document" in error.message
    assert double.requests == []


async def test_an_empty_prompt_is_not_sent(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, " \n\t\n")
    with web_double(status=500) as double:
        error = await refusal(s, uri, {"dshWebUrl": double.url})
    assert error.data["reason"] == "empty" and double.requests == []


async def test_a_host_off_this_machine_is_refused(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, "hello\n")
    error = await refusal(s, uri, {"dshWebUrl": "http://192.168.1.20:3080"})
    assert error.data["reason"] == "address" and "not on this machine" in error.message


async def test_no_dsh_listening_says_how_to_start_it(s: Session, workspace: Path) -> None:
    """No address given: ``$DSH_WEB_URL`` (as dsh sets it in its sessions), where nothing listens."""
    uri = s.open(workspace, "hello\n")
    error = await refusal(s, uri)
    assert error.data == {"reason": "unreachable", "dshWebUrl": NOWHERE}
    assert f"no dsh web answers at {NOWHERE}" in error.message and "start it with `dsh web`" in error.message


async def test_no_settings_path_can_choose_the_host(s: Session, workspace: Path) -> None:
    """Pushed settings and ``initializationOptions`` (which editors fill from a project's files:
    Zed and Helix the latter too) carry ``dshWebUrl`` in vain: the send goes to
    ``$DSH_WEB_URL``."""
    uri = s.open(workspace, "my private prompt\n")
    with web_double(status=500) as trap:
        configure(s, dshWebUrl=trap.url)
        error = await refusal(s, uri)
        assert trap.requests == []
    assert error.data["dshWebUrl"] == NOWHERE


async def test_without_a_target_a_new_session_is_made_in_the_workspace_folder(
    s: Session, workspace: Path
) -> None:
    uri = s.open(workspace, "hello\n")
    with web_double(status=500, body=b"handler failure: Error: boom") as double:
        error = await refusal(s, uri, {"dshWebUrl": double.url})
    assert error.data["reason"] == "dsh" and error.data["code"] == "http-500"
    assert f"{double.url} answered HTTP 500 'handler failure: Error: boom'" in error.message
    ((path, _, body),) = double.requests
    assert path == "/api/session.create" and body["payload"] == {"cwd": str(workspace)}


async def test_with_a_target_the_composers_text_goes_to_it(s: Session, workspace: Path) -> None:
    mention = format_session_reference_mention("s-alpha", "Refactor the parser")
    uri = s.open(workspace, f"\nsee {mention}\n\n")
    configure(s, targetSessionId="s-beta")
    try:
        with web_double(status=500) as double:
            await refusal(s, uri, {"dshWebUrl": double.url, "clientTimeZone": "Europe/Paris"})
    finally:
        configure(s, targetSessionId="")
    ((path, _, body),) = double.requests
    assert path == "/api/session.prompt"
    assert body["payload"] == {
        "sessionId": "s-beta",
        "mode": "queue",
        "content": [{"type": "text", "text": f"see {mention}"}],
        "clientTimeZone": "Europe/Paris",
    }


async def test_dshs_own_refusal_is_shown_escaped(s: Session, workspace: Path) -> None:
    """dsh's error code and message, as any text from outside is shown: controls escaped."""
    uri = s.open(workspace, "hello\n")
    error = {"code": "agent-busy", "message": "prompt rejected \x1b[2J\x07 now", "details": {"reason": "x"}}
    configure(s, targetSessionId="s-alpha")
    try:
        with web_double(error=error) as double:
            refused = await refusal(s, uri, {"dshWebUrl": double.url})
    finally:
        configure(s, targetSessionId="")
    assert refused.data == {"reason": "dsh", "dshWebUrl": double.url, "code": "agent-busy"}
    assert refused.message == (
        f"Not sent: dsh web at {double.url} answered agent-busy: prompt rejected \\x1b[2J\\x07 now"
    )


async def test_a_silent_host_holds_up_nothing_and_the_send_can_be_cancelled(
    s: Session, workspace: Path
) -> None:
    uri = s.open(workspace, "hello\n")
    configure(s, targetSessionId="s-alpha")
    try:
        with web_double(hang=True) as double:
            params = types.ExecuteCommandParams(command=SEND, arguments=[uri, {"dshWebUrl": double.url}])
            sending = s.client.protocol.send_request(types.WORKSPACE_EXECUTE_COMMAND, params, msg_id="send-1")
            await wait_until(lambda: double.requests)
            summary = await asyncio.wait_for(s.command("dshSessionReference.documentSummary", uri), 5)
            assert summary["errors"] == 0  # answered while the send waits on the host
            s.client.cancel_request(types.CancelParams(id="send-1"))
            with pytest.raises(JsonRpcRequestCancelled):
                await asyncio.wait_for(asyncio.wrap_future(sending), 5)
    finally:
        configure(s, targetSessionId="")
    assert (await s.command("dshSessionReference.documentSummary", uri))["errors"] == 0


async def test_bad_arguments_are_invalid_params(s: Session, workspace: Path) -> None:
    for arguments in ([], [42], ["file:///x.md", {"dshWebUrl": 3}], ["file:///x.md", {"notify": "yes"}]):
        error = await refusal(s, *arguments)
        assert error.code == types.ErrorCodes.InvalidParams and "expects [documentUri" in error.message


async def test_the_address_is_the_argument_else_the_environment_else_the_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("DSH_WEB_URL", raising=False)
    assert web_url(None) == web_url("") == DEFAULT_URL
    monkeypatch.setenv("DSH_WEB_URL", "http://127.0.0.1:4001")
    assert web_url(None) == "http://127.0.0.1:4001"
    assert web_url("http://127.0.0.1:4003") == "http://127.0.0.1:4003"
