"""The product against the real dsh 0.1.0-rc.8: the logs it writes, its web host's candidates, and
the request it sends the model for a message with mentions, byte for byte.

The store (``conftest.real_store``) is written by ``dsh --profile headless`` and ``dsh web`` against
the scripted loopback model (``model.py``). A message goes to dsh as its web composer sends it:
``session.prompt`` with the composer's text, ``draft.trim()``, computed here by the same Node's
``String.prototype.trim``; the product reads the same text from a prompt file that ends as files
end, with a newline.
"""

from __future__ import annotations

import base64
import contextlib
import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from dsh_session_reference.main import main
from dsh_session_reference.resolver import AgentRef, SessionReferenceResolver
from dsh_session_reference.store.jsonl_store import JsonlSessionStore
from dsh_session_reference.uri import (
    encode_session_reference_uri,
    format_session_reference_mention,
)
from editors.lsp_stdio import Client

from .conftest import ODD_TITLE, RealStore
from .model import RUNTIME_CONTEXT_START, SNAPSHOT_START, Recorded, message_text
from .sent import shown_messages

pytestmark = pytest.mark.dsh

COMPARED: dict[str, int] = {}
"""Cases compared with the real dsh, by kind (printed by the last test)."""


def _count(kind: str, n: int = 1) -> None:
    COMPARED[kind] = COMPARED.get(kind, 0) + n


def cli(
    store: RealStore, *args: str, check: bool = True, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """``dsh-session-reference --sessions ROOT --no-index ARGS`` (no index: the cache folder is the
    user's, and a one-shot read of every log is what is compared); in this process (``main``, a
    second a run saved), or as a user runs it with ``process``."""
    argv = ["--sessions", str(store.root), "--no-index", *args]
    if process:
        command = [sys.executable, "-P", "-m", "dsh_session_reference", *argv]
        done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    else:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        done = subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())
    if check:
        assert done.returncode == 0, done.stderr
    return done


def composer_text(store: RealStore, texts: list[str]) -> list[str]:
    """What dsh web's composer sends for each draft: ``draft.trim()`` (dsh-client-ui-conversation,
    ``sinkSerialized``), run by dsh's own Node."""
    done = subprocess.run(
        [
            str(store.home.install.node),
            "-e",
            'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>'
            "process.stdout.write(JSON.stringify(JSON.parse(s).map(t=>t.trim()))))",
        ],
        input=json.dumps(texts),
        capture_output=True,
        text=True,
        check=True,
    )
    result: list[str] = json.loads(done.stdout)
    return result


def sent_to_model(store: RealStore, session_id: str, text: str) -> list[Recorded]:
    """Send ``text`` as the composer does and return the main-loop requests it caused."""
    mark = store.model.mark()
    store.turn(session_id, text)
    return [r for r in store.model.since(mark) if r.kind not in ("title", "compaction")]


def user_messages_of_turn(request: Recorded) -> list[str]:
    """The user messages dsh sent for the newest turn: those after the last message of another
    role, up to dsh's runtime context (the readable message, then the snapshot when there is one)."""
    messages = request.messages
    start = max((i + 1 for i, m in enumerate(messages) if m.get("role") != "user"), default=0)
    turn = []
    for message in messages[start:]:
        text = message_text(message)
        if text.startswith(RUNTIME_CONTEXT_START):
            break
        turn.append(text)
    return turn


# --- every log ------------------------------------------------------------------------------------


async def test_the_product_reads_every_log_real_dsh_wrote(
    real_store: RealStore, caplog: pytest.LogCaptureFixture
) -> None:
    on_disk = {path.name for path in real_store.root.glob("*/session-*") if path.is_dir()}
    assert set(real_store.ids.values()) <= on_disk
    caplog.set_level(logging.WARNING)
    resolver = SessionReferenceResolver(JsonlSessionStore(str(real_store.root)))
    listed = await resolver.list_candidates(AgentRef(None, cwd=str(real_store.projects["a"])), "", 1000)
    assert {c.session_id for c in listed} == on_disk
    snapshots = {}
    for name, session_id in real_store.ids.items():
        prepared = await resolver.prepare(
            AgentRef(real_store.ids["target"] if name != "target" else None),
            [{"type": "text", "text": "x"}],
            [{"sessionId": session_id}],
        )
        assert prepared.additional_context is not None
        (source,) = prepared.additional_context.sources
        snapshots[name] = (prepared.additional_context.text, source)
        _count("logs read")
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    # What each session is for shows in what prepare made of it.
    assert "tool-output" in snapshots["tool"][0] and "from-headless" in snapshots["headless-tool"][0]
    for compacted in ("compacted", "overflow"):
        assert "fixture checkpoint" in snapshots[compacted][0], compacted
    titles = {c.session_id: c.label for c in listed}
    assert titles[real_store.ids["renamed"]] == ODD_TITLE  # the title dsh's rename wrote
    for long in ("long", "headless-long"):
        assert snapshots[long][1].stats.truncated, snapshots[long][1].stats
    # The CLI lists the same sessions, and skips none.
    done = cli(real_store, "candidates", "--json", "--candidate-limit", "1000", "--target", "", process=True)
    assert {c["sessionId"] for c in json.loads(done.stdout)} == on_disk
    assert "skipping" not in done.stderr


# --- candidates -----------------------------------------------------------------------------------

QUERIES = [
    "",
    "fixture",
    "FIXTURE title",
    "odd",
    "proj b",
    "headless",
    "session-",
    "é",
    "中文",
    "nothing-matches",
]


def test_candidates_equal_the_web_hosts_endpoint(
    real_store: RealStore, capsys: pytest.CaptureFixture[str]
) -> None:
    """``candidates --json`` (run in this process: 33 runs) against what dsh web's ``@`` popup asks."""
    targets = ["target", "renamed", "headless-plain"]
    for name in targets:
        agent = real_store.ids[name]
        for query in [*QUERIES, agent[8:16]]:
            hosted = real_store.web.candidates(agent, query)
            argv = [
                "--sessions",
                str(real_store.root),
                "--no-index",
                "candidates",
                "--json",
                "--target",
                agent,
            ]
            assert main([*argv, query]) == 0
            out = capsys.readouterr().out
            ours = json.loads(out) if out.strip() else []
            assert ours == hosted, (name, query)
            _count("candidate lists")
    assert any(len(real_store.web.candidates(real_store.ids["target"], q)) > 5 for q in ("", "session-"))


# --- messages with mentions -----------------------------------------------------------------------


ODD_LABEL = "odd ] label \\ with [brackets]"
"""A label with the characters a mention escapes (``]`` and ``\\``)."""


def _cases(store: RealStore) -> list[tuple[str, str]]:
    """(name, prompt file text): one to three mentions of compacted, truncated, citing and
    odd-character sources, a bare URI, and files that end as files end."""
    i = store.ids

    def m(name: str, label: str | None = None) -> str:
        return format_session_reference_mention(i[name], label if label is not None else name)

    return [
        ("one compacted", f"What did we decide in {m('compacted')}?\n"),
        ("two compacted", f"\n  Compare {m('compacted', 'the first')} with {m('overflow')}.\n\n"),
        ("three: truncated, citing, compacted", f"{m('long')} {m('citing')} and {m('compacted')}\n"),
        ("truncated headless", f"Only {m('headless-long', 'a long one')}\n"),
        ("citing and odd label", m("citing") + " and " + m("odd", ODD_LABEL) + "\n"),
        ("bare uri", f"see {encode_session_reference_uri(i['renamed'])} please\n"),
        ("odd characters", f"\u3000é 中文 <x> & {m('renamed', ODD_TITLE)} {m('odd')}\t\n"),
        ("tool sessions", f"{m('headless-tool')} versus {m('tool')}\n"),
        ("a session twice", f"{m('tool')} and again {m('tool', 'again')}\n"),
        ("no mention", "just a question, no mention\n\n"),
    ]


class LanguageServer:
    """The product's language server over stdio, as an editor starts it, for ``modelText``."""

    def __init__(self, store: RealStore, workspace: Path) -> None:
        settings = {"sessionsRoot": str(store.root), "targetSessionId": store.ids["target"]}
        argv = [sys.executable, "-P", "-m", "dsh_session_reference", "lsp", "--stdio"]
        env = {k: v for k, v in os.environ.items() if k not in ("DSH_HOME", "DSH_SESSION_ID")}
        self.client = Client(argv, env, workspace, {"dshSessionReference": settings}, workspace / "lsp.log")
        self.client.request(
            "initialize",
            {
                "processId": None,
                "rootUri": workspace.as_uri(),
                "capabilities": {"workspace": {"configuration": True}},
                "initializationOptions": {"dshSessionReference": settings},
            },
        )
        self.client.send({"method": "initialized", "params": {}})

    def model_text(self, path: Path) -> dict[str, Any]:
        result: dict[str, Any] = self.client.request(
            "workspace/executeCommand",
            {"command": "dshSessionReference.modelText", "arguments": [path.as_uri()]},
        )
        return result

    def close(self) -> None:
        assert self.client.close() == 0


def test_the_request_dsh_sends_equals_prepare_and_the_model_text(
    real_store: RealStore, tmp_path: Path
) -> None:
    cases = _cases(real_store)
    sent = composer_text(real_store, [text for _, text in cases])
    server = LanguageServer(real_store, tmp_path)
    try:
        for (name, text), composed in zip(cases, sent, strict=True):
            prompt = tmp_path / f"{name.replace(' ', '-').replace(':', '').replace(',', '')}.md"
            prompt.write_text(text, encoding="utf-8")
            prepared = json.loads(
                cli(real_store, "prepare", "--json", "--target", real_store.ids["target"], str(prompt)).stdout
            )
            ours = [prepared["content"][0]["text"]]
            if prepared["additionalContext"] is not None:
                ours.append(prepared["additionalContext"]["content"][0]["text"])
            requests = sent_to_model(real_store, real_store.ids["target"], composed)
            assert requests, f"{name}: dsh sent nothing to the model"
            theirs = user_messages_of_turn(requests[0])
            assert [t.encode() for t in ours] == [t.encode() for t in theirs], name
            _count("messages: prepare == model request")
            # The human report and the server's model text show the same two messages.
            report = cli(real_store, "prepare", "--target", real_store.ids["target"], str(prompt)).stdout
            assert shown_messages(report) == theirs, name
            exact = server.model_text(prompt)
            assert exact["ok"] is True and exact["text"] == report, name
            assert shown_messages(exact["text"]) == theirs, name
            _count("messages: model text == model request")
            if len(ours) == 2:
                assert theirs[1].startswith(SNAPSHOT_START)
    finally:
        server.close()


def test_the_host_sends_the_text_as_it_gets_it(real_store: RealStore) -> None:
    """The trim is the composer's: ``session.prompt`` of a text ending in newlines reaches the
    model with them (so the product trims where the composer does, not the host)."""
    (request,) = sent_to_model(real_store, real_store.ids["target"], "  ends in two newlines\n\n")
    assert "  ends in two newlines\n\n" in [
        message_text(m) for m in request.messages if m.get("role") == "user"
    ]


# --- bad mentions ---------------------------------------------------------------------------------


def _noncanonical(session_id: str) -> str:
    """A URI that decodes to the id but is not its canonical spelling (the JSON escapes the first
    character: ``"\\u0073ession-…"``)."""
    spelled = json.dumps(session_id).replace(session_id[0], f"\\u{ord(session_id[0]):04x}", 1)
    assert json.loads(spelled) == session_id
    payload = base64.urlsafe_b64encode(spelled.encode()).decode().rstrip("=")
    return f"@[respelled](dsh-session:{payload})"


def _bad_cases(store: RealStore) -> list[tuple[str, str, str]]:
    """(name, prompt file text, the diagnostic code the product flags it with)."""
    i = store.ids

    def m(name: str) -> str:
        return format_session_reference_mention(i[name], name)

    unknown = "session-00000000-0000-4000-8000-000000000000"
    return [
        ("malformed", "see @[x](dsh-session:!!notbase64) now\n", "malformed-uri"),
        ("noncanonical", f"see {_noncanonical(i['tool'])}\n", "noncanonical-uri"),
        ("unknown", f"see {format_session_reference_mention(unknown, 'gone')}\n", "unknown-session"),
        ("self", f"see {m('target')} and {m('tool')}\n", "self-reference"),
        ("too many", f"{m('tool')} {m('odd')} {m('renamed')} {m('citing')}\n", "too-many-references"),
    ]


def test_dsh_sends_nothing_for_a_bad_mention_and_the_product_flags_it(
    real_store: RealStore, tmp_path: Path
) -> None:
    cases = _bad_cases(real_store)
    sent = composer_text(real_store, [text for _, text, _ in cases])
    for (name, text, code), composed in zip(cases, sent, strict=True):
        prompt = tmp_path / f"{name.replace(' ', '-')}.md"
        prompt.write_text(text, encoding="utf-8")
        requests = sent_to_model(real_store, real_store.ids["target"], composed)
        assert requests == [], f"{name}: dsh sent it to the model"
        done = cli(
            real_store, "check", "--json", "--target", real_store.ids["target"], str(prompt), check=False
        )
        assert done.returncode == 1, done.stderr
        (report,) = json.loads(done.stdout)["files"]
        assert code in [d["code"] for d in report["diagnostics"] if d["severity"] == "error"], (name, report)
        prepared = cli(real_store, "prepare", "--target", real_store.ids["target"], str(prompt), check=False)
        assert prepared.returncode == 1 and prepared.stdout == "", (name, prepared.stdout)
        _count("bad mentions: dsh sends nothing, product flags it")


def test_over_budget_dsh_sends_nothing_and_the_product_flags_it(
    real_store: RealStore, tmp_path: Path
) -> None:
    """A budget too small for a source's framing: dsh headless with the session-reference plugin
    added by ``--patch`` (headless hosts none by itself) at 100 bytes, and the product at the same."""
    patch = tmp_path / "budget.yml"
    patch.write_text(
        "- insert:\n"
        "    - id: session-reference\n"
        "      name: '@deepseek-ai/dsh-session-reference'\n"
        "      config:\n"
        "        maxReferenceBytes: 100\n"
    )
    text = f"see {format_session_reference_mention(real_store.ids['renamed'], 'renamed')}\n"
    mark = real_store.model.mark()
    done = subprocess.run(
        real_store.home.install.command("--profile", "headless", "--patch", str(patch), text.strip()),
        cwd=real_store.projects["a"],
        env=real_store.home.env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert [r.kind for r in real_store.model.since(mark)] == [], (done.stdout, done.stderr)
    # dsh 0.1.0-rc.8 names no code here: "dsh: UNKNOWN: referenced session snapshot cannot fit ..."
    assert done.returncode == 1 and "snapshot cannot fit the configured byte budget" in done.stderr, (
        done.stderr
    )
    prompt = tmp_path / "over-budget.md"
    prompt.write_text(text, encoding="utf-8")
    check = cli(real_store, "check", "--json", "--max-reference-bytes", "100", str(prompt), check=False)
    (report,) = json.loads(check.stdout)["files"]
    assert "budget-exceeded" in [d["code"] for d in report["diagnostics"]], report
    prepared = cli(real_store, "prepare", "--max-reference-bytes", "100", str(prompt), check=False)
    assert (
        "SESSION_REFERENCE_BUDGET_EXCEEDED: referenced session snapshot cannot fit the configured byte budget"
        in (prepared.stderr)
    )
    _count("bad mentions: dsh sends nothing, product flags it")


def test_headless_alone_hosts_no_session_references(real_store: RealStore) -> None:
    """Without the plugin, headless sends a mention to the model as the text it is."""
    text = f"see {format_session_reference_mention(real_store.ids['tool'], 'tool')}"
    mark = real_store.model.mark()
    real_store.home.headless(text, real_store.projects["a"])
    (request,) = [r for r in real_store.model.since(mark) if r.kind not in ("title",)]
    humans = [message_text(m) for m in request.messages if m.get("role") == "user"]
    assert text in humans and not any(h.startswith(SNAPSHOT_START) for h in humans)


# --- what the host reads live ---------------------------------------------------------------------


def _snapshot_sources(context_text: str) -> list[dict[str, Any]]:
    """The JSON array inside ``<referenced-sessions>`` (``<`` is escaped inside, so it parses)."""
    inner = context_text.split("<referenced-sessions>\n", 1)[1].rsplit("\n</referenced-sessions>", 1)[0]
    sources: list[dict[str, Any]] = json.loads(inner)
    return sources


def test_a_source_mid_turn_is_read_by_dsh_from_memory_and_by_the_product_from_its_log(
    real_store: RealStore, tmp_path: Path
) -> None:
    """While a source's turn runs in the same dsh, dsh snapshots it from memory (the open turn
    as it is); the product reads the log and closes what is open, as upstream's persistence does
    on load: here the open step and turn, two events, so its capture seq is two higher and the
    conversation the same. Once the turn has ended both read the same."""
    web, model, target = real_store.web, real_store.model, real_store.ids["target"]
    live = web.create(real_store.projects["a"])
    real_store.turn(live, "a first turn, so the title is written")
    mention = format_session_reference_mention(live, "live")
    prompt = tmp_path / "live.md"
    prompt.write_text(f"what is {mention} doing?\n", encoding="utf-8")
    try:
        mark = model.mark()
        web.prompt(live, "a second turn #hold")
        model.wait_for(mark, "text")
        assert web.running(live)
        ours = json.loads(cli(real_store, "prepare", "--json", "--target", target, str(prompt)).stdout)
        mark = model.mark()
        web.prompt(target, f"what is {mention} doing?")
        request = model.wait_for(mark, "text")
        assert web.running(live)
    finally:
        model.release()
    web.wait_idle(live)
    web.wait_idle(target)
    (theirs,) = _snapshot_sources(user_messages_of_turn(request)[1])
    (mine,) = _snapshot_sources(ours["additionalContext"]["content"][0]["text"])
    assert mine["capturedThroughSeq"] == theirs["capturedThroughSeq"] + 2
    assert {**mine, "capturedThroughSeq": 0} == {**theirs, "capturedThroughSeq": 0}
    _count("live source: the documented difference")
    # Idle again: the same snapshot, byte for byte.
    ours = json.loads(cli(real_store, "prepare", "--json", "--target", target, str(prompt)).stdout)
    requests = sent_to_model(real_store, target, f"what is {mention} doing?")
    assert user_messages_of_turn(requests[0]) == [
        ours["content"][0]["text"],
        ours["additionalContext"]["content"][0]["text"],
    ]
    _count("messages: prepare == model request")


def test_zz_report(real_store: RealStore, capsys: pytest.CaptureFixture[str]) -> None:
    """Says how many cases were compared with the real dsh and what building the store cost."""
    assert COMPARED.get("messages: prepare == model request", 0) >= 10
    with capsys.disabled():
        counts = ", ".join(f"{n} {kind}" for kind, n in COMPARED.items())
        print(f"\nreal dsh: {counts}; store built by dsh in {real_store.seconds:.1f} s")
