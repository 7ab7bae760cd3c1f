"""The server keeps working: cancellation, superseded requests, shutdown mid-flight, huge documents,
bad params and bad logs."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsp_support import (
    Session,
    Spec,
    append_title,
    default_specs,
    initialize_params,
    server_config,
    serving,
    start,
    write_store,
)
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams, JsonRpcRequestCancelled
from pytest_lsp import LanguageClient

from dsh_session_reference.lsp.completion import LISTING_LABEL
from dsh_session_reference.store.writer import SessionLog, write_session_log
from dsh_session_reference.uri import format_session_reference_mention

pytestmark = pytest.mark.asyncio(loop_scope="module")

VSCODE = "visual-studio-code@1.139"


def big_session(root: Path, session_id: str, megabytes: int) -> None:
    """A real log large enough that reading it takes a noticeable fraction of a second."""
    log = SessionLog(session_id, 1_700_000_000_000, "/big")
    for _ in range(megabytes * 1000):
        log.start_turn()
        log.user("u" * 500)
        log.start_step()
        log.assistant("a" * 500)
        log.end_step()
        log.end_turn()
    log.title("Very long session")
    write_session_log(root, log, "none")


def corrupt_store(root: Path, workspace: Path) -> None:
    write_store(
        root, [*default_specs(str(workspace)), Spec("s-corrupt", "/bad", "Broken", [("user", "x")])], "none"
    )
    log = next(root.glob("*/s-corrupt/session.jsonl"))
    seq = len(log.read_bytes().splitlines()) - 1
    with log.open("ab") as handle:  # the next seq, but a message without an id: fails validation
        handle.write(b'{"type":"user/message","seq":%d,"time":1,"data":{}}\n' % seq)
    junk = root / "--junk--" / "s-junk"
    junk.mkdir(parents=True)
    (junk / "session.jsonl").write_bytes(b"\x00\xffnot a header\n")


@pytest.fixture(scope="module")
def robust_store(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Path:
    root = tmp_path_factory.mktemp("robust-store")
    corrupt_store(root, workspace)
    big_session(root, "s-big", 4)
    return root


@pytest_lsp.fixture(config=server_config(), scope="module")
async def lsp(lsp_client: LanguageClient, workspace: Path, robust_store: Path):
    async with serving(lsp_client, VSCODE, initialize_params(VSCODE, workspace, robust_store), robust_store):
        yield


def raw_request(s: Session, msg_id: str, method: str, params: Any) -> Future[Any]:
    """Send a request exactly as given (even malformed), and return the future of its answer."""
    protocol = s.client.protocol
    future: Future[Any] = Future()
    protocol._request_futures[msg_id] = future
    protocol._send_data({"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params})
    return future


def completion_params(uri: str, position: types.Position) -> types.CompletionParams:
    return types.CompletionParams(text_document=types.TextDocumentIdentifier(uri=uri), position=position)


async def test_cancel_request_stops_a_slow_completion(
    s: Session, workspace: Path, robust_store: Path
) -> None:
    uri = s.open(workspace, "@very")  # a query reads every title, the 4 MB log's too
    for attempt in range(3):
        append_title(robust_store, "s-big", "Very long session")  # every cached read of it is stale
        msg_id = f"slow-completion-{attempt}"
        pending = s.client.protocol.send_request(
            types.TEXT_DOCUMENT_COMPLETION, completion_params(uri, s.end(uri)), msg_id=msg_id
        )
        await asyncio.sleep(0.01)  # the server is reading titles when the cancel comes
        s.client.cancel_request(types.CancelParams(id=msg_id))
        try:
            answer = await asyncio.wrap_future(pending)
        except JsonRpcRequestCancelled:
            break
        # A loaded machine can hold the cancel back past the server's patience: the answer is then
        # the "still listing" row, never sessions. Try again, with the log made stale again.
        assert answer.is_incomplete is True, answer
        assert [item.label for item in answer.items] == [LISTING_LABEL], answer
    else:
        pytest.fail("the cancel came after the server's patience three times")
    assert [item.label for item in (await s.complete(s.open(workspace, "@deploy"))).items] == [
        "Deploy checklist"
    ]


async def test_a_newer_completion_supersedes_the_older(
    s: Session, workspace: Path, robust_store: Path
) -> None:
    append_title(robust_store, "s-big", "Very long session")  # every cached read of it is stale
    uri = s.open(workspace, "@very")
    older = asyncio.ensure_future(s.client.text_document_completion_async(completion_params(uri, s.end(uri))))
    await asyncio.sleep(0.05)
    s.replace(uri, 1, 5, "deploy")  # the user kept typing; the editor asks again
    newer = await s.complete(uri)
    first = await older
    assert isinstance(first, types.CompletionList)
    # Stopped and told to ask again. On a loaded machine the older may instead have answered at
    # once, before the edit, with the "still listing" row (the changed log is listed again first):
    # told to ask again too. Never with sessions, which would be the older text's.
    assert first.is_incomplete is True, first
    assert [item.label for item in first.items] in ([], [LISTING_LABEL]), first
    assert [item.label for item in newer.items] == ["Deploy checklist"]


async def test_cancel_request_stops_a_command(s: Session, robust_store: Path) -> None:
    append_title(robust_store, "s-big", "Very long session")  # every cached read of it is stale
    pending = s.client.protocol.send_request(
        types.WORKSPACE_EXECUTE_COMMAND,
        types.ExecuteCommandParams(command="dshSessionReference.candidates", arguments=[{"query": "zzz"}]),
        msg_id="slow-command",
    )
    s.client.cancel_request(types.CancelParams(id="slow-command"))
    with pytest.raises(JsonRpcRequestCancelled):
        await asyncio.wrap_future(pending)
    assert await s.command("dshSessionReference.candidates", {"query": "deploy"}) != []


async def test_invalid_params_get_an_error_not_a_dead_server(s: Session, workspace: Path) -> None:
    future = raw_request(s, "bad-1", types.TEXT_DOCUMENT_COMPLETION, {"textDocument": 5, "position": "x"})
    with pytest.raises(JsonRpcInvalidParams):
        await asyncio.wrap_future(future)
    future = raw_request(
        s,
        "bad-2",
        types.WORKSPACE_EXECUTE_COMMAND,
        {"command": "dshSessionReference.preview", "arguments": [42]},
    )
    with pytest.raises(JsonRpcInvalidParams, match="expects \\[documentUri: string\\]"):
        await asyncio.wrap_future(future)
    s.client.protocol._send_data(
        {"jsonrpc": "2.0", "method": types.TEXT_DOCUMENT_DID_OPEN, "params": {"nope": 1}}
    )
    unknown = await s.client.text_document_completion_async(
        completion_params("file:///never/opened.md", types.Position(line=0, character=1))
    )
    assert isinstance(unknown, types.CompletionList) and list(unknown.items) == []
    uri = s.open(workspace, "@")
    far = await s.client.text_document_completion_async(
        completion_params(uri, types.Position(line=999, character=999))
    )
    assert isinstance(far, types.CompletionList) and len(far.items) > 0
    summary = raw_request(
        s,
        "bad-3",
        types.WORKSPACE_EXECUTE_COMMAND,
        {"command": "dshSessionReference.documentSummary", "arguments": ["file:///never/opened.md"]},
    )
    with pytest.raises(JsonRpcInvalidParams, match="not open"):
        await asyncio.wrap_future(summary)


async def test_corrupt_and_junk_logs_only_affect_themselves(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, "@")
    listed = [item.label for item in (await s.complete(uri)).items]
    assert "s-corrupt" in listed  # its header lists; its log fails validation, so the label is its id
    assert "Refactor the parser" in listed and not any("junk" in label for label in listed)
    doc = s.open(
        workspace,
        f"{format_session_reference_mention('s-corrupt')} {format_session_reference_mention('s-alpha', 'Refactor the parser')}",
    )
    [diagnostic] = await s.diagnostics(doc, lambda d: len(d) == 1)
    assert diagnostic.code == "read-failed" and "s-corrupt" in diagnostic.message


async def test_a_10_mb_document_works(s: Session, workspace: Path) -> None:
    filler = ("All work and no play makes a dull prompt. " * 24 + "\n") * 10_000
    text = f"{format_session_reference_mention('s-alpha', 'Refactor the parser')}\n{filler}dsh-session:MTIz @"
    assert len(text) > 10_000_000
    started = time.monotonic()
    uri = s.open(workspace, text)
    found = await s.diagnostics(uri, lambda d: len(d) == 1, within=60)
    assert found[0].code == "malformed-uri" and found[0].range.start.line == 10_001
    assert next(item.label for item in (await s.complete(uri)).items) == "Refactor the parser"
    s.type_text(uri, "deploy")
    assert [item.label for item in (await s.complete(uri)).items] == ["Deploy checklist"]
    hover = await s.client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(0, 3))
    )
    assert hover is not None
    assert time.monotonic() - started < 30


@pytest_lsp.fixture(config=server_config())
async def short_lived(lsp_client: LanguageClient, workspace: Path, robust_store: Path):
    session = await start(
        lsp_client, "neovim@v0.7", initialize_params("neovim@v0.7", workspace, robust_store)
    )
    lsp_client.session = session  # type: ignore[attr-defined]
    yield


@pytest.mark.asyncio(loop_scope="function")
async def test_shutdown_with_requests_in_flight_exits_cleanly(
    short_lived: LanguageClient, workspace: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    s: Session = short_lived.session  # type: ignore[attr-defined]
    uri = s.open(workspace, f"{format_session_reference_mention('s-big')} @v")
    in_flight = [
        s.client.protocol.send_request(types.TEXT_DOCUMENT_COMPLETION, completion_params(uri, s.end(uri)))
        for _ in range(5)
    ]
    in_flight.append(
        s.client.protocol.send_request(
            types.WORKSPACE_EXECUTE_COMMAND,
            types.ExecuteCommandParams(command="dshSessionReference.preview", arguments=[uri]),
        )
    )
    await s.client.shutdown_async(None)
    s.client.exit(None)
    server = s.client._server
    assert server is not None
    assert await asyncio.wait_for(server.wait(), 20) == 0
    for future in in_flight:
        assert future.done()
    await asyncio.sleep(0.1)
    stderr = capfd.readouterr().err
    assert "Traceback" not in stderr and "RuntimeError" not in stderr


@pytest.mark.asyncio(loop_scope="function")
async def test_a_cancel_that_arrives_after_the_answer_is_not_an_error(
    short_lived: LanguageClient, workspace: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Editors cancel as you type, and the answer often wins the race: pygls logged each such
    cancel as a warning, which VS Code's output channel shows as an error."""
    s: Session = short_lived.session  # type: ignore[attr-defined]
    uri = s.open(workspace, "@")
    params = completion_params(uri, s.end(uri))
    future = s.client.protocol.send_request(types.TEXT_DOCUMENT_COMPLETION, params, msg_id="answered")
    await asyncio.wait_for(asyncio.wrap_future(future), 20)
    for msg_id in ("answered", 987654):
        s.client.protocol.notify(types.CANCEL_REQUEST, types.CancelParams(id=msg_id))
    assert (await s.complete(uri)).items  # still serving
    stderr = await _stderr_after_a_clean_exit(s, capfd)
    assert "Cancel notification" not in stderr and "WARNING" not in stderr, stderr


@pytest.mark.asyncio(loop_scope="function")
async def test_an_ordinary_mistake_is_one_line_at_info_not_a_traceback(
    short_lived: LanguageClient, workspace: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """Following a broken mention (``dsh-session:IiJ``) or asking for a document that is not open
    is answered with InvalidParams; pygls logged each such answer as a 20-line traceback at ERROR,
    which VS Code's output channel shows as the server failing."""
    s: Session = short_lived.session  # type: ignore[attr-defined]
    asks = [
        ("dshSessionReference.transcript", "dsh-session:IiJ"),
        ("dshSessionReference.documentSummary", "file:///nowhere/not-open.md"),
    ]
    for command, argument in asks:
        with pytest.raises(JsonRpcInvalidParams):
            await s.command(command, argument)
    stderr = await _stderr_after_a_clean_exit(s, capfd)
    assert "Traceback" not in stderr and "ERROR" not in stderr, stderr


async def _stderr_after_a_clean_exit(s: Session, capfd: pytest.CaptureFixture[str]) -> str:
    """Shut the server down, check it exits 0, and return everything it wrote to stderr."""
    await s.client.shutdown_async(None)
    s.client.exit(None)
    server = s.client._server
    assert server is not None
    assert await asyncio.wait_for(server.wait(), 20) == 0
    await asyncio.sleep(0.1)
    return capfd.readouterr().err
