"""``dshSessionReference.send`` to the real dsh web (0.1.0-rc.8, ``scripts/install-dsh``) with the
scripted loopback model: the prompt reaches the session it was sent to, and the request dsh then
sends the model holds exactly the messages the preview's model-facing text showed just before.

The language server reads the sessions root the real dsh writes; the host's address is the
command's argument, as the editors pass it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsp_support import Session, configure, initialize_params, server_config, serving
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from dsh.model import Recorded
from dsh.realdsh import SendScene, send_scene
from dsh.sent import sent_messages, shown_messages
from dsh.web_double import refused_url
from dsh_session_reference.uri import format_session_reference_mention

pytestmark = [pytest.mark.asyncio(loop_scope="module"), pytest.mark.dsh]

CLIENT = "visual-studio-code@1.139"
SEND = "dshSessionReference.send"


@pytest.fixture(scope="module")
def real_dsh(workspace: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SendScene]:
    with send_scene(workspace, tmp_path_factory.mktemp("dsh-home"), long=3000) as scene:
        yield scene


@pytest_lsp.fixture(
    config=server_config({"DSH_SESSION_ID": "", "DSH_WEB_URL": refused_url()}), scope="module"
)
async def lsp(lsp_client: LanguageClient, workspace: Path, real_dsh: SendScene):
    store = real_dsh.home.sessions
    params = initialize_params(CLIENT, workspace, store)
    async with serving(lsp_client, CLIENT, params, store):
        yield


async def preview_then_send(
    s: Session, real_dsh: SendScene, uri: str
) -> tuple[list[str], dict[str, Any], Recorded]:
    model_text = (await s.command("dshSessionReference.modelText", uri))["text"]
    mark = real_dsh.model.mark()
    result = await s.command(SEND, uri, {"dshWebUrl": real_dsh.web.url})
    request = real_dsh.model.wait_for(mark, kind="text")
    return shown_messages(model_text), result, request


async def test_without_a_target_the_prompt_starts_a_dsh_session_and_the_model_gets_the_preview(
    s: Session, workspace: Path, real_dsh: SendScene
) -> None:
    parser, deploy = real_dsh.mentions("the parser", "deploy")
    uri = s.open(workspace, f"\nCompare {parser} with {deploy}: which is done?\n")
    before = {item["sessionId"] for item in real_dsh.web.sessions()}
    shown, result, request = await preview_then_send(s, real_dsh, uri)
    assert result["created"] is True and result["sessionId"] not in before
    assert result["summary"].startswith("2 sessions referenced; ")
    where = f"a new session ({result['sessionId']}) in {workspace}"
    assert result["where"] == where
    assert result["message"] == f"Sent to dsh: {result['summary']}. Session: {where}, at {real_dsh.web.url}."
    new = next(item for item in real_dsh.web.sessions() if item["sessionId"] == result["sessionId"])
    assert new["cwd"] == str(workspace)
    assert len(shown) == 2 and shown[0] == "Compare @the parser with @deploy: which is done?"
    assert sent_messages(request) == shown
    real_dsh.web.wait_idle(result["sessionId"])


async def test_with_a_target_the_prompt_goes_to_it_as_the_preview_shows(
    s: Session, workspace: Path, real_dsh: SendScene
) -> None:
    target = real_dsh.sources[1]
    (parser,) = real_dsh.mentions("parser notes")
    uri = s.open(workspace, f"Go on from {parser}")
    configure(s, targetSessionId=target)
    try:
        shown, result, request = await preview_then_send(s, real_dsh, uri)
    finally:
        configure(s, targetSessionId="")
    assert result["created"] is False and result["sessionId"] == target
    assert result["where"].endswith(f"({target})")
    assert sent_messages(request) == shown
    real_dsh.web.wait_idle(target)


async def test_a_prompt_dsh_would_refuse_is_not_sent(
    s: Session, workspace: Path, real_dsh: SendScene
) -> None:
    uri = s.open(workspace, f"see {format_session_reference_mention('session-nobody', 'gone')}")
    mark = real_dsh.model.mark()
    sessions = len(real_dsh.web.sessions())
    with pytest.raises(JsonRpcException) as raised:
        await s.command(SEND, uri, {"dshWebUrl": real_dsh.web.url})
    assert raised.value.data["reason"] == "errors"
    await asyncio.sleep(0.5)
    assert real_dsh.model.since(mark) == [] and len(real_dsh.web.sessions()) == sessions


async def test_a_target_dsh_does_not_know_is_its_refusal(
    s: Session, workspace: Path, real_dsh: SendScene
) -> None:
    uri = s.open(workspace, "hello")
    configure(s, targetSessionId="session-not-in-this-dsh")
    try:
        with pytest.raises(JsonRpcException) as raised:
            await s.command(SEND, uri, {"dshWebUrl": real_dsh.web.url})
    finally:
        configure(s, targetSessionId="")
    assert raised.value.data["reason"] == "dsh", raised.value.message
    assert raised.value.data["code"] == "session-not-found", raised.value.message
