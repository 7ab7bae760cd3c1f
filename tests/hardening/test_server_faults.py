"""The language server under fault: invalid params, unknown methods, cancellation storms, a shutdown
during requests, and 10k random edits in one session.

The server is the real one, started as editors start it, with a test-only
``dshHardening.stats`` command (:mod:`probed_server`) that reports its live
tasks, tracked work and memory, so "no leaked tasks" and "memory stable" are
measured, not assumed. Every storm ends with the server answering a normal
request correctly.
"""

from __future__ import annotations

import asyncio
import random
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from lsp_harness import lsp_session
from lsp_support import Session, Spec, default_specs, write_store
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcMethodNotFound

from dsh_session_reference.lsp.diagnostics import check_text
from dsh_session_reference.resolver import AgentRef, SessionReferenceResolver
from dsh_session_reference.store import JsonlSessionStore
from dsh_session_reference.uri import (
    encode_session_reference_uri,
    format_session_reference_mention,
    scan_session_references,
)

from .audit import audited_env
from .conftest import LONG, scaled
from .probed_server import COMMAND, STATS

SETTLED_TASKS = 5
"""Tasks a quiet server may have beyond its baseline (pygls' reader and writer, a late publish)."""


@pytest.fixture(scope="module")
def store_root(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Path:
    specs = [
        *default_specs(str(workspace)),
        Spec("s-many", str(workspace), "Many turns", [("user", "x")] * 50),
    ]
    return write_store(tmp_path_factory.mktemp("faults") / "sessions", specs)


async def stats(s: Session) -> dict[str, Any]:
    result: dict[str, Any] = await s.command(STATS)
    return result


async def baseline_stats(s: Session) -> dict[str, Any]:
    """Stats of the server at rest before a test's load: past its first pause, when it sets up its
    first watch of the root (the watch's threads belong to the baseline, not to the load)."""
    await asyncio.sleep(1.0)
    return await stats(s)


async def quiet_stats(s: Session, baseline: dict[str, Any]) -> dict[str, Any]:
    """Stats once the server has finished what it was asked (publishes are debounced)."""
    deadline = time.monotonic() + 15
    while True:
        current = await stats(s)
        if _quiet(current, baseline) or time.monotonic() > deadline:
            return current
        await asyncio.sleep(0.1)


def _quiet(current: dict[str, Any], baseline: dict[str, Any]) -> bool:
    """Nothing left in flight: no tracked work, no background task, no request but the stats call
    (and at most one late client request).

    A settings change spawns a diagnostics refresh that waits on the client's
    answer, so "quiet" must include background tasks and outgoing requests, or
    a slow machine samples the server mid-refresh and reports a leak that is not one.
    """
    return (
        current["tasks"] <= baseline["tasks"] + SETTLED_TASKS
        and current["pending"] == 0
        and current["completions"] == 0
        and current["commands"] == 0
        and current["background"] == 0
        and current["finished"] == []
        and current["running"] <= 2  # the stats call and at most one late client request
    )


def assert_no_leaks(current: dict[str, Any], baseline: dict[str, Any]) -> None:
    assert current["tasks"] <= baseline["tasks"] + SETTLED_TASKS, current["taskNames"]
    assert current["pending"] == 0 and current["completions"] == 0 and current["commands"] == 0, current
    assert current["background"] <= SETTLED_TASKS, current
    assert current["finished"] == [] and current["running"] <= 2, current  # 2: the stats call itself
    assert current["analyses"] <= current["documents"], current
    assert current["threads"] <= baseline["threads"] + 8, current  # the default executor's workers, bounded


def send(s: Session, msg_id: str | None, method: str, params: Any) -> Future[Any] | None:
    """A raw JSON-RPC message exactly as given (a request when ``msg_id`` is set)."""
    protocol = s.client.protocol
    message: dict[str, Any] = {"jsonrpc": "2.0", "method": method, "params": params}
    future: Future[Any] | None = None
    if msg_id is not None:
        future = Future()
        protocol._request_futures[msg_id] = future
        message["id"] = msg_id
    protocol._send_data(message)
    return future


async def settle(future: Future[Any] | None) -> str:
    """``ok`` or the JSON-RPC error class the request ended with (never a hang)."""
    assert future is not None
    try:
        await asyncio.wait_for(asyncio.wrap_future(future), 30)
    except JsonRpcException as error:
        return type(error).__name__
    return "ok"


def td(uri: str) -> dict[str, Any]:
    return {"textDocument": {"uri": uri}}


async def test_invalid_params_and_unknown_methods_get_answers(
    store_root: Path, workspace: Path, tmp_path: Path
) -> None:
    async with lsp_session(COMMAND, audited_env(tmp_path / "a.log"), workspace, store_root) as s:
        baseline = await baseline_stats(s)
        uri = s.open(workspace, "see @")
        position = {"line": 0, "character": 5}
        bad_requests: list[tuple[str, Any]] = [
            (types.TEXT_DOCUMENT_COMPLETION, None),
            (types.TEXT_DOCUMENT_COMPLETION, []),
            (types.TEXT_DOCUMENT_COMPLETION, "params"),
            (types.TEXT_DOCUMENT_COMPLETION, {"textDocument": 5, "position": position}),
            (types.TEXT_DOCUMENT_COMPLETION, {**td(uri), "position": {"line": -1, "character": -5}}),
            (types.TEXT_DOCUMENT_COMPLETION, {**td(uri), "position": {"line": 2**40, "character": 2**40}}),
            (types.TEXT_DOCUMENT_COMPLETION, {**td("not a uri"), "position": position}),
            (types.TEXT_DOCUMENT_HOVER, {**td(uri), "position": {"line": "0", "character": 1}}),
            (types.TEXT_DOCUMENT_HOVER, {**td(uri), "position": {"line": 2**31, "character": 2**31}}),
            (types.TEXT_DOCUMENT_DIAGNOSTIC, {"textDocument": {}}),
            (types.TEXT_DOCUMENT_DIAGNOSTIC, td("file:///never/opened.md")),
            (types.TEXT_DOCUMENT_CODE_ACTION, {**td(uri), "range": None, "context": {"diagnostics": "x"}}),
            (types.COMPLETION_ITEM_RESOLVE, {"label": "x", "data": {"sessionId": 5}}),
            (types.COMPLETION_ITEM_RESOLVE, {"label": "x", "data": {"sessionId": "no-such", "label": "y"}}),
            (types.COMPLETION_ITEM_RESOLVE, {"nolabel": True}),
            (types.WORKSPACE_EXECUTE_COMMAND, {"command": "no.such.command", "arguments": []}),
            (types.WORKSPACE_EXECUTE_COMMAND, {"command": "dshSessionReference.preview"}),
            (
                types.WORKSPACE_EXECUTE_COMMAND,
                {"command": "dshSessionReference.preview", "arguments": [None]},
            ),
            (
                types.WORKSPACE_EXECUTE_COMMAND,
                {"command": "dshSessionReference.candidates", "arguments": [7]},
            ),
            (
                types.WORKSPACE_EXECUTE_COMMAND,
                {"command": "dshSessionReference.candidates", "arguments": [{"query": 3}]},
            ),
            (
                types.WORKSPACE_EXECUTE_COMMAND,
                {"command": "dshSessionReference.documentSummary", "arguments": ["x:"]},
            ),
            (types.WORKSPACE_TEXT_DOCUMENT_CONTENT, {"uri": "dsh-preview:/nothing"}),
            (types.WORKSPACE_TEXT_DOCUMENT_CONTENT, {"uri": 17}),
            ("no/suchMethod", {}),
            ("$/no-such-request", None),
        ]
        futures = [send(s, f"bad-{n}", method, params) for n, (method, params) in enumerate(bad_requests)]
        outcomes = [await settle(future) for future in futures]
        assert "JsonRpcInternalError" not in outcomes, list(zip(bad_requests, outcomes, strict=True))
        assert outcomes[-2] == JsonRpcMethodNotFound.__name__
        bad_notifications: list[tuple[str, Any]] = [
            (types.TEXT_DOCUMENT_DID_OPEN, {}),
            (types.TEXT_DOCUMENT_DID_OPEN, {"textDocument": {"uri": 1, "text": None}}),
            (
                types.TEXT_DOCUMENT_DID_CHANGE,
                {"textDocument": {"uri": uri, "version": "x"}, "contentChanges": 5},
            ),
            (
                types.TEXT_DOCUMENT_DID_CHANGE,
                {
                    "textDocument": {"uri": uri, "version": 9},
                    "contentChanges": [
                        {
                            "range": {
                                "start": {"line": 99, "character": 0},
                                "end": {"line": 0, "character": 0},
                            },
                            "text": "?",
                        }
                    ],
                },
            ),
            (
                types.TEXT_DOCUMENT_DID_CHANGE,
                {"textDocument": {"uri": "file:///never.md", "version": 1}, "contentChanges": []},
            ),
            (types.TEXT_DOCUMENT_DID_CLOSE, td("file:///never.md")),
            (
                types.WORKSPACE_DID_CHANGE_CONFIGURATION,
                {"settings": {"dshSessionReference": {"maxReferences": "x", "sessionsRoot": 5}}},
            ),
            (types.WORKSPACE_DID_CHANGE_CONFIGURATION, {"settings": [1, 2]}),
            (types.CANCEL_REQUEST, {"id": {"not": "an id"}}),
            (types.CANCEL_REQUEST, {"id": "never-sent"}),
            ("no/suchNotification", {"x": 1}),
            ("$/setTrace", {"value": "verbose"}),
            ("$/progress", {"token": 1, "value": {}}),
        ]
        for method, params in bad_notifications:
            send(s, None, method, params)
        labels = [item.label for item in (await s.complete(s.open(workspace, "@"))).items]
        assert "Refactor the parser" in labels  # the settings garbage was refused, the server works
        assert_no_leaks(await quiet_stats(s, baseline), baseline)
        assert not [m for m in s.client.log_messages if "Traceback" in m.message]


async def test_cancellation_storms_leave_nothing_behind(
    store_root: Path, workspace: Path, tmp_path: Path
) -> None:
    async with lsp_session(COMMAND, audited_env(tmp_path / "a.log"), workspace, store_root) as s:
        baseline = await baseline_stats(s)
        text = f"{format_session_reference_mention('s-alpha')} {format_session_reference_mention('s-many')} @"
        uri = s.open(workspace, text)
        end = s.end(uri)
        storm: list[Future[Any] | None] = []
        rounds = scaled(200)
        for n in range(rounds):
            kind = n % 5
            if kind == 0:
                params: Any = {**td(uri), "position": {"line": end.line, "character": end.character}}
                storm.append(send(s, f"c-{n}", types.TEXT_DOCUMENT_COMPLETION, params))
            elif kind == 1:
                storm.append(send(s, f"c-{n}", types.TEXT_DOCUMENT_DIAGNOSTIC, td(uri)))
            elif kind == 2:
                params = {"command": "dshSessionReference.preview", "arguments": [uri]}
                storm.append(send(s, f"c-{n}", types.WORKSPACE_EXECUTE_COMMAND, params))
            elif kind == 3:
                params = {**td(uri), "position": {"line": 0, "character": 3}}
                storm.append(send(s, f"c-{n}", types.TEXT_DOCUMENT_HOVER, params))
            else:
                params = {"command": "dshSessionReference.candidates", "arguments": [{"query": "s"}]}
                storm.append(send(s, f"c-{n}", types.WORKSPACE_EXECUTE_COMMAND, params))
            if n % 3 == 0:
                s.type_text(uri, "x")  # edits supersede the analyses in flight
            send(s, None, types.CANCEL_REQUEST, {"id": f"c-{n}"})
            send(s, None, types.CANCEL_REQUEST, {"id": f"c-{n}"})  # a second cancel of the same request
            send(s, None, types.CANCEL_REQUEST, {"id": f"never-{n}"})
        outcomes = [await settle(future) for future in storm]
        assert set(outcomes) <= {"ok", "JsonRpcRequestCancelled"}, set(outcomes)
        assert outcomes.count("JsonRpcRequestCancelled") > 0
        s.type_text(uri, " @deploy")
        assert [item.label for item in (await s.complete(uri)).items] == ["Deploy checklist"]
        assert_no_leaks(await quiet_stats(s, baseline), baseline)


async def test_shutdown_during_a_storm_exits_cleanly(
    store_root: Path, workspace: Path, tmp_path: Path
) -> None:
    async with lsp_session(COMMAND, audited_env(tmp_path / "a.log"), workspace, store_root) as s:
        uri = s.open(workspace, f"{format_session_reference_mention('s-many')} @")
        end = s.end(uri)
        in_flight = []
        for n in range(100):
            params = {**td(uri), "position": {"line": end.line, "character": end.character}}
            in_flight.append(send(s, f"f-{n}", types.TEXT_DOCUMENT_COMPLETION, params))
            in_flight.append(
                send(
                    s,
                    f"p-{n}",
                    types.WORKSPACE_EXECUTE_COMMAND,
                    {"command": "dshSessionReference.preview", "arguments": [uri]},
                )
            )
            s.type_text(uri, "y")
        await s.client.shutdown_async(None)
        outcomes = [await settle(future) for future in in_flight]
        assert set(outcomes) <= {"ok", "JsonRpcRequestCancelled"}, set(outcomes)
        after = await settle(
            send(
                s,
                "after-shutdown",
                types.TEXT_DOCUMENT_HOVER,
                {**td(uri), "position": {"line": 0, "character": 1}},
            )
        )
        assert after == "JsonRpcInvalidRequest"  # LSP: requests after shutdown are refused
        s.client.exit(None)
        server = s.client._server
        assert server is not None
        assert await asyncio.wait_for(server.wait(), 20) == 0
        s.client.capabilities = None  # already shut down: the harness must not do it again


PIECES = [
    "a", "é", "😀", " ", "\n", "\r\n", "\u2028", "@", "@[", "](", ")", "]", "\\", "dsh-session:", "%%",
    "dsh-session:IiJ", "@s", "@dep", "界",
]  # fmt: skip


def random_edit(rng: random.Random, text: str, mentions: list[str]) -> tuple[int, int, str]:
    """A random splice of ``text``: an insertion, a deletion or a replacement (offsets in code points)."""
    start = rng.randint(0, len(text))
    end = min(len(text), start + rng.choice([0, 0, 1, 2, 5, 20]))
    choice = rng.random()
    if choice < 0.15:
        insert = rng.choice(mentions)
    elif choice < 0.25:
        insert = ""
    else:
        insert = "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 4)))
    if len(text) > 4000:  # keep the document in a realistic size band
        end = min(len(text), start + 200)
        insert = ""
    # An LSP position cannot fall between the \r and \n of a line break (editors never split one).
    start -= text.startswith("\r\n", start - 1) if start > 0 else 0
    end += text.startswith("\r\n", end - 1) if end > 0 else 0
    return start, end, insert


async def test_ten_thousand_random_edits_keep_the_document_and_memory_in_shape(
    store_root: Path, workspace: Path, tmp_path: Path
) -> None:
    """Push diagnostics (Neovim's preset): every edit cancels a pending publish and schedules one."""
    rng = random.Random(6)
    mentions = [
        format_session_reference_mention("s-alpha", "Refactor the parser"),
        format_session_reference_mention("s-beta"),
        format_session_reference_mention("target-session"),
        format_session_reference_mention("no-such-session"),
        encode_session_reference_uri("s-delta") + " ",
    ]
    edits = scaled(10_000)
    samples: dict[int, int] = {}
    async with lsp_session(
        COMMAND, audited_env(tmp_path / "a.log"), workspace, store_root, preset="neovim@v0.7"
    ) as s:
        baseline = await baseline_stats(s)
        uri = s.open(workspace, "start " + mentions[0])
        for n in range(1, edits + 1):
            text = s.texts[uri]
            start, end, insert = random_edit(rng, text, mentions)
            s.replace(uri, start, end, insert)
            if n % 500 == 0:
                await asyncio.sleep(0)  # let the server read; ask for something now and then
                summary = await s.command("dshSessionReference.documentSummary", uri)
                assert summary["mentions"] >= 0
            if n in (edits // 10, edits):
                samples[n] = (await quiet_stats(s, baseline))["rssKb"]
        final = s.texts[uri]
        resolver = SessionReferenceResolver(JsonlSessionStore(store_root))
        expected = await check_text(final, resolver, AgentRef(None, str(workspace)))

        def key(found: list[types.Diagnostic]) -> list[tuple[object, ...]]:
            return [
                (
                    d.range.start.line,
                    d.range.start.character,
                    d.range.end.line,
                    d.range.end.character,
                    d.code,
                    d.message,
                )
                for d in found
            ]

        try:
            found = await s.diagnostics(uri, lambda found: key(found) == key(expected), within=20)
        except AssertionError:
            found = list(s.client.diagnostics.get(uri, ()))
        missing = [k for k in key(expected) if k not in key(found)]
        extra = [k for k in key(found) if k not in key(expected)]
        assert (missing, extra) == ([], []), (missing, extra)
        summary = await s.command("dshSessionReference.documentSummary", uri)
        assert summary["mentions"] == len(scan_session_references(final))
        current = await quiet_stats(s, baseline)
        assert_no_leaks(current, baseline)
    growth = samples[edits] - samples[edits // 10]
    print(
        f"\n10k edits: RSS {samples[edits // 10] / 1024:.1f} MiB after {edits // 10}, "
        f"{samples[edits] / 1024:.1f} MiB after {edits} edits"
    )
    assert growth < (40 if LONG else 20) * 1024, samples
