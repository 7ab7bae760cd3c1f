"""Reading one log: crash tails, damaged lines, headers, replay validation, recovery closers.

Every expectation here was produced by upstream's own persistence and
session-query (``0.1.0-rc.8`` on Node 24) reading the very same bytes; the
store must give the same surface, ``capturedThroughSeq``, title and error text.
Each case is checked as a plain ``.jsonl`` log and, framed the way dsh frames
it (header frame + one batch frame), as ``.jsonl.zstd`` where upstream agrees.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from dsh_session_reference.model import SessionRecord, StoreError
from dsh_session_reference.store import JsonlSessionStore
from zstd_backends import by_compression, zstd

from .logbuild import (
    DROP,
    as_zstd,
    assistant,
    event,
    header,
    lines,
    one_turn,
    put,
    step_end,
    step_start,
    title,
    tool_result,
    turn_end,
    turn_start,
    user,
)

Outcome = tuple[Any, ...]


def outcome(root: Path, session_id: str) -> Outcome:
    """``("ok", capturedThroughSeq, surface seqs, title)`` or ``("error", message)``."""
    store = JsonlSessionStore(root)
    try:
        snapshot = store.read_surface(session_id)
    except StoreError as error:
        return ("error", error.message.replace(str(root), "<root>"))
    record = SessionRecord(session_id, 0, None, dict(snapshot.session.header), snapshot.session.location)
    observation = store.read_titles([record])[0]
    shown_title = "<error>" if observation.error is not None else observation.title
    return ("ok", snapshot.captured_through_seq, [e["seq"] for e in snapshot.events], shown_title)


TURN = one_turn()
TOOL_CALLS = [
    {"type": "tool-call", "id": "c1", "name": "read", "arguments": "{}"},
    {"type": "tool-call", "id": "c2", "name": "ls", "arguments": "{}"},
]


def _call(seq: int, call: str) -> dict[str, Any]:
    return event("tool/call", seq, {"turn": 1, "step": 1, "callId": call, "name": "read", "arguments": "{}"})


def corrupt_after(bad: str) -> Callable[[str], bytes]:
    return lambda sid: lines(header(sid), *TURN, bad, user(6, "later"))


def corrupt_before(bad: str) -> Callable[[str], bytes]:
    return lambda sid: lines(header(sid), *TURN[:3], bad, *TURN[3:])


OK = ("ok", 5, [1, 3], None)
UNPARSABLE_4 = (
    "error",
    'failed to inspect session "{sid}": corrupt session log: unparsable committed event at line 4',
)
GAP_4 = (
    "error",
    'failed to inspect session "{sid}": corrupt session log: seq gap in committed region at line 4 '
    "(expected 3, got undefined)",
)

CASES: dict[str, tuple[Callable[[str], bytes], Outcome]] = {
    "complete": (lambda sid: lines(header(sid), *TURN), OK),
    "torn-after-end": (lambda sid: lines(header(sid), *TURN) + b'{"type":"turn/start","seq":6', OK),
    "torn-open-turn": (
        lambda sid: (
            lines(header(sid), *TURN, turn_start(6, 2), user(7, "q2"), step_start(8, 2)) + b'{"type":"ass'
        ),
        ("ok", 10, [1, 3, 7], None),
    ),
    "garbage-after": (corrupt_after("xx garbage"), OK),
    "garbage-before": (corrupt_before("xx garbage"), UNPARSABLE_4),
    "blank-after": (corrupt_after(""), OK),
    "blank-before": (corrupt_before(""), UNPARSABLE_4),
    "empty-object-after": (corrupt_after("{}"), OK),
    "empty-object-before": (corrupt_before("{}"), GAP_4),
    "number-before": (corrupt_before("42"), GAP_4),
    "array-after": (corrupt_after("[1]"), OK),
    "string-before": (corrupt_before('"s"'), GAP_4),
    "null-after": (
        corrupt_after("null"),
        ("error", "failed to inspect session \"{sid}\": Cannot read properties of null (reading 'seq')"),
    ),
    "bad-row-after": (corrupt_after('{"type":"text-chunks","seq0":6,"time0":1,"data":{}}'), OK),
    "bad-row-before": (corrupt_before('{"type":"text-chunks","seq0":3,"time0":1,"data":{}}'), UNPARSABLE_4),
    "gap-after": (lambda sid: lines(header(sid), *TURN, user(9, "gap"), user(7, "later")), OK),
    "gap-before": (
        corrupt_before('{"type":"user/message","seq":9,"time":1,"data":{}}'),
        (
            "error",
            'failed to inspect session "{sid}": corrupt session log: seq gap in committed region at line 4 '
            "(expected 3, got 9)",
        ),
    ),
    "seq-as-string": (
        lambda sid: lines(
            header(sid), *TURN, '{"type":"todo/write","seq":"6","time":1,"data":{}}', turn_end(7)
        ),
        (
            "error",
            'failed to inspect session "{sid}": corrupt session log: seq gap in committed region at line 7 '
            "(expected 6, got 6)",
        ),
    ),
    "seq-written-as-float-and-negative-zero": (
        lambda sid: (
            lines(header(sid))
            + b'{"type":"turn/start","seq":-0,"time":1,"data":{"turn":1}}\n'
            + lines(user(1, "x")).replace(b'"seq":1', b'"seq":1e0')
            + lines(turn_end(2))
        ),
        ("ok", 2, [1], None),
    ),
    "crlf": (lambda sid: lines(header(sid), *TURN).replace(b"\n", b"\r\n"), OK),
    "header-only": (lambda sid: lines(header(sid)), ("ok", None, [], None)),
    "version-1-is-listed-but-unreadable": (
        lambda sid: lines(header(sid, version=1), *TURN),
        (
            "error",
            'failed to inspect session "{sid}": session "{sid}" uses log format v1, but this harness reads only '
            "v0: the log was written by a newer harness — upgrade the harness to open it "
            "(raw log: {path})",
        ),
    ),
    "version-negative": (
        lambda sid: lines(header(sid, version=-1), *TURN),
        (
            "error",
            'failed to inspect session "{sid}": session "{sid}" uses log format v-1, older than the supported '
            "v0, and this build ships no upgrade path for it (raw log: {path})",
        ),
    ),
    "header-extras": (
        lambda sid: lines(
            header(sid, origin="subagent", parentSession="p", seedLength=3, agentPreset="x"), *TURN
        ),
        OK,
    ),
    "header-bad-seed-length": (
        lambda sid: lines(header(sid, seedLength=-1), *TURN),
        ("corrupt", "Error: session header seedLength must be a non-negative safe integer"),
    ),
    "header-relative-cwd": (
        lambda sid: lines(header(sid, cwd="rel/dir"), *TURN),
        ("corrupt", 'Error: session header cwd must be an absolute path, got "rel/dir"'),
    ),
    "unknown-event": (
        lambda sid: lines(header(sid), *TURN, event("future/x", 6, {})),
        (
            "error",
            'failed to inspect session "{sid}": session "{sid}" contains event type "future/x" (seq 6) unknown '
            "to this harness and not marked ignorable; refusing to interpret the log — it was likely written by "
            "a newer harness (raw log: {path})",
        ),
    ),
    "unknown-ignorable-event": (
        lambda sid: lines(header(sid), *TURN, event("future/x", 6, {}, ignorable=True)),
        ("ok", 6, [1, 3], None),
    ),
    "envelope-extra-key": (
        lambda sid: lines(header(sid), *TURN, event("todo/write", 6, {"todos": []}, extra=1)),
        ("corrupt", "Error: seed event at index 6 has an invalid event envelope"),
    ),
    "envelope-ignorable-false": (
        lambda sid: lines(header(sid), *TURN, event("todo/write", 6, {}, ignorable=False)),
        ("corrupt", "Error: seed event at index 6 has an invalid event envelope"),
    ),
    "envelope-without-data": (
        lambda sid: lines(header(sid), *TURN, {"type": "todo/write", "seq": 6, "time": 1}),
        ("corrupt", "Error: seed event at index 6 has an invalid event envelope"),
    ),
    "legacy-request-header-delta": (
        lambda sid: lines(header(sid), *TURN, event("mode/set", 6, {}), event("request/header-delta", 7, {})),
        ("corrupt", 'Error: session "{sid}" contains unsupported legacy request/header-delta event at seq 7'),
    ),
    "request-header-null-data": (
        lambda sid: lines(header(sid), *TURN, event("request/header", 6, None)),
        ("corrupt", "TypeError: Cannot read properties of null (reading 'reason')"),
    ),
    "request-header-without-model": (
        lambda sid: lines(
            header(sid),
            *TURN,
            event("request/header", 6, {"reason": "initial", "header": {"config": {"provider": "p"}}}),
        ),
        ("corrupt", "Error: seed request/header at index 6 lacks provider/model"),
    ),
    "pre-identity-user-message": (
        lambda sid: lines(
            header(sid),
            turn_start(0),
            event(
                "user/message",
                1,
                {"content": [{"type": "text", "text": "old"}], "source": {"kind": "user"}},
                surfaceOp="append",
            ),
            turn_end(2),
        ),
        ("ok", 2, [1], None),
    ),
    "steering-message": (
        lambda sid: lines(
            header(sid),
            turn_start(0),
            event(
                "steering/message",
                1,
                {"turn": 1, "content": [{"type": "text", "text": "s"}], "source": {"kind": "user"}},
                surfaceOp="append",
            ),
            turn_end(2),
        ),
        ("ok", 2, [1], None),
    ),
    "legacy-turn-end-zero": (
        lambda sid: lines(
            header(sid),
            turn_start(0),
            user(1, "q"),
            event("turn/end", 2, {"turn": 0, "reason": {"kind": "completed"}}),
        ),
        ("corrupt", 'Error: session "{sid}" contains malformed pre-react-loop turn/end at seq 2'),
    ),
    "missing-surface-op": (
        lambda sid: lines(
            header(sid),
            turn_start(0),
            {k: v for k, v in user(1, "x").items() if k != "surfaceOp"},
            turn_end(2),
        ),
        (
            "corrupt",
            'Error: invalid seed event at index 1: session event "user/message" is surface-eligible and requires a '
            "surfaceOp marker",
        ),
    ),
    "replace-reorders-the-surface": (
        lambda sid: lines(
            header(sid),
            turn_start(0),
            user(1, "a"),
            user(2, "b"),
            user(3, "c"),
            event(
                "user/message",
                4,
                user(4, "sum")["data"],
                surfaceOp={"op": "replace", "start": 1, "end": 2},
                sourceEventSeqs=[1, 2],
            ),
            user(5, "d"),
            turn_end(6),
        ),
        ("ok", 6, [4, 3, 5], None),
    ),
    "replace-missing-shadowed-source": (
        lambda sid: lines(
            header(sid),
            turn_start(0),
            user(1, "a"),
            user(2, "b"),
            event(
                "user/message",
                3,
                user(3, "sum")["data"],
                surfaceOp={"op": "replace", "start": 1, "end": 2},
                sourceEventSeqs=[1],
            ),
            turn_end(4),
        ),
        (
            "corrupt",
            "Error: invalid seed event at index 3: surface replace: sourceEventSeqs must include every shadowed "
            "surface node; missing 2",
        ),
    ),
    "tool-result-rewrite": (
        lambda sid: lines(
            header(sid),
            turn_start(0),
            user(1, "q"),
            tool_result(2, "c", "long output"),
            {
                **tool_result(2, "c", "short"),
                "seq": 3,
                "time": 3,
                "surfaceOp": {"op": "replace", "start": 2, "end": 2},
                "sourceEventSeqs": [2],
            },
            turn_end(4),
        ),
        ("ok", 4, [1, 3], None),
    ),
    "tool-result-rewrite-changes-more": (
        lambda sid: lines(
            header(sid),
            turn_start(0),
            user(1, "q"),
            tool_result(2, "c", "long"),
            tool_result(
                3,
                "c",
                "short",
                step=2,
                surfaceOp={"op": "replace", "start": 2, "end": 2},
                sourceEventSeqs=[2],
            ),
            turn_end(4),
        ),
        (
            "corrupt",
            "Error: invalid seed event at index 3: tool/result surface replacement may change only content",
        ),
    ),
    "user-message-without-id": (
        lambda sid: lines(
            header(sid),
            turn_start(0),
            event(
                "user/message",
                1,
                {"content": [], "source": {"kind": "user"}, "role": "user"},
                surfaceOp="append",
            ),
            turn_end(2),
        ),
        ("corrupt", "Error: session event at seq 1 lacks an identified message"),
    ),
    "closers-for-recorded-and-unstarted-tool-calls": (
        lambda sid: lines(
            header(sid),
            turn_start(0),
            user(1, "q"),
            step_start(2),
            assistant(3, "", blocks=TOOL_CALLS),
            _call(4, "c1"),
        ),
        ("ok", 8, [1, 3, 5, 6], None),
    ),
    "closers-for-an-open-step": (
        lambda sid: lines(header(sid), *TURN, turn_start(6, 2), user(7, "q2"), step_start(8, 2)),
        ("ok", 10, [1, 3, 7], None),
    ),
    "closers-for-an-open-turn": (
        lambda sid: lines(header(sid), *TURN, turn_start(6, 2), user(7, "q2")),
        ("ok", 8, [1, 3, 7], None),
    ),
    "closers-crash-on-null-turn-start": (
        lambda sid: lines(header(sid), event("turn/start", 0, None), user(1, "q"), turn_end(2)),
        ("corrupt", "TypeError: Cannot read properties of null (reading 'turn')"),
    ),
    "closer-for-a-numeric-call-id": (
        lambda sid: lines(
            header(sid),
            turn_start(0),
            step_start(1),
            assistant(2, "", blocks=[{"type": "tool-call", "id": 5, "name": "x", "arguments": ""}]),
        ),
        ("corrupt", "Error: session event at seq 3 message must have tool source"),
    ),
    "title-renamed-twice": (
        lambda sid: lines(header(sid), *TURN, title(6, "First"), title(7, "Second")),
        ("ok", 7, [1, 3], "Second"),
    ),
    "title-in-dropped-tail": (
        lambda sid: lines(header(sid), *TURN, title(6, "Kept"), "garbage", title(8, "Dropped")),
        ("ok", 6, [1, 3], "Kept"),
    ),
    "title-with-unknown-source": (
        lambda sid: lines(header(sid), *TURN, title(6, "T", kind="weird")),
        ("ok", 6, [1, 3], "<error>"),
    ),
    "title-empty": (lambda sid: lines(header(sid), *TURN, title(6, "")), ("ok", 6, [1, 3], "")),
    "title-without-title": (
        lambda sid: lines(
            header(sid), *TURN, event("session/title", 6, {"messageSeqs": [], "source": {"kind": "user"}})
        ),
        ("ok", 6, [1, 3], None),
    ),
    "interrupted-answer-after-crash-repair": (
        lambda sid: lines(
            header(sid),
            turn_start(0),
            user(1, "q"),
            step_start(2),
            {**assistant(3, "partial"), "data": {**assistant(3, "partial")["data"], "interrupted": True}},
            step_end(4),
            event("turn/end", 5, {"turn": 1, "reason": {"kind": "interrupted"}}),
        ),
        ("ok", 5, [1, 3], None),
    ),
}

# Upstream's zstd read agrees except where a case's damage is a line-level crash
# tail: inside a complete frame the same bytes reject the log instead.
ZSTD_TORN = (
    "error",
    'failed to inspect session "{sid}": corrupt Zstandard session log: complete frame contains a torn JSONL record',
)
ZSTD_DIFFERENT: dict[str, Outcome] = {
    "torn-after-end": ZSTD_TORN,
    "torn-open-turn": ZSTD_TORN,
    "garbage-after": ZSTD_TORN,
    "blank-after": ZSTD_TORN,
    "empty-object-after": ZSTD_TORN,
    "array-after": ZSTD_TORN,
    "bad-row-after": ZSTD_TORN,
    "gap-after": ZSTD_TORN,
    "title-in-dropped-tail": ZSTD_TORN,
}


def _expected(expected: Outcome, sid: str, path: str) -> Outcome:
    if expected[0] == "corrupt":
        message = (
            f'stored session "{sid}" is corrupt: stored session "{sid}" failed validation: {expected[1]}'
        )
        return ("error", message.replace("{sid}", sid))
    if expected[0] == "error":
        return ("error", expected[1].replace("{sid}", sid).replace("{path}", path))
    return expected


@by_compression
def test_each_case_reads_as_upstream(tmp_path: Path, compression: str) -> None:
    root = tmp_path / "sessions"
    failures = []
    for name, (build, expected) in CASES.items():
        data = build(name)
        if compression == "zstd":
            data = as_zstd(data)
            expected = ZSTD_DIFFERENT.get(name, expected)
        path = put(root, name, data, compression, cwd="rel/dir" if name == "header-relative-cwd" else "/w")
        want = _expected(expected, name, path.replace(str(root), "<root>"))
        got = outcome(root, name)
        if got != want:
            failures.append((name, got, want))
    assert failures == []


@pytest.mark.parametrize(
    ("first_line", "reason"),
    [
        (b"", "empty file"),
        (b'{"type":"session","version":0,"id":"h","createdAt":1,"delegationDepth":0}', "torn header"),
        (b"{nope\n", "header not JSON"),
        (b'\xef\xbb\xbf{"type":"session","version":0,"id":"h","createdAt":1,"delegationDepth":0}\n', "BOM"),
        (b'{"type":"session","version":"0","id":"h","createdAt":1,"delegationDepth":0}\n', "string version"),
        (b'{"type":"session","version":0,"id":"h","createdAt":1}\n', "no delegationDepth"),
        (b'{"type":"session","version":0,"id":"h","createdAt":-0,"delegationDepth":0}\n', "createdAt -0"),
        (
            b'{"type":"session","version":0,"id":"h","createdAt":1.5,"delegationDepth":0}\n',
            "fractional createdAt",
        ),
        (
            b'{"type":"session","version":0,"id":"h","createdAt":1,"delegationDepth":0,"origin":"x"}\n',
            "origin",
        ),
        (
            b'{"type":"session","version":0,"id":"h","createdAt":1,"delegationDepth":0,"agentPreset":5}\n',
            "preset",
        ),
    ],
)
def test_bad_headers_hide_the_session(tmp_path: Path, first_line: bytes, reason: str) -> None:
    root = tmp_path / "sessions"
    put(root, "h", first_line + lines(*TURN), "none")
    store = JsonlSessionStore(root)
    assert store.list_sessions() == [], reason
    with pytest.raises(StoreError) as raised:
        store.read_surface("h")
    assert raised.value.message == 'session "h" not found'
    assert raised.value.code == "SESSION_QUERY_SESSION_NOT_FOUND"


@zstd
def test_zstd_bytes_under_a_plain_name_hide_the_session(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    put(root, "z", as_zstd(lines(header("z"), *TURN)), "none")
    assert JsonlSessionStore(root).list_sessions() == []


def test_invalid_utf8_becomes_replacement_characters(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    text_line = lines(user(1, "X")).replace(b'"X"', b'"a\xff\xfe\xed\xa0\x80b\xf0\x9f\x98"')
    put(root, "u", lines(header("u"), turn_start(0)) + text_line + lines(turn_end(2)), "none")
    snapshot = JsonlSessionStore(root).read_surface("u")
    assert snapshot.events[0]["data"]["content"][0]["text"] == "a\ufffd\ufffd\ufffd\ufffd\ufffdb\ufffd"


def test_surface_events_are_upstreams_in_memory_events(tmp_path: Path) -> None:
    """Packed rows are expanded, legacy messages migrated, closers synthesized, key order kept."""
    root = tmp_path / "sessions"
    legacy = event(
        "user/message",
        1,
        {
            "content": [{"type": "text", "text": "old"}],
            "source": {"kind": "user"},
            "envelope": {"displayContent": []},
        },
        surfaceOp="append",
    )
    put(
        root,
        "legacy",
        lines(
            header("legacy"), turn_start(0), legacy, step_start(2), assistant(3, "", blocks=TOOL_CALLS[:1])
        ),
        "none",
    )
    events = JsonlSessionStore(root).read_surface("legacy").events
    assert events[0]["data"] == {
        "content": [{"type": "text", "text": "old"}],
        "source": {"kind": "user"},
        "envelope": {"displayContent": []},
        "id": "legacy-message:legacy:1",
        "role": "user",
    }
    assert list(events[0]["data"]) == ["content", "source", "envelope", "id", "role"]
    closer = events[2]
    assert closer == {
        "type": "tool/result",
        "seq": 4,
        "time": 3 + 1_700_000_000_000,
        "data": {
            "turn": 1,
            "step": 1,
            "message": {
                "id": "interrupted-tool-result-c1-4",
                "role": "user",
                "source": {"kind": "tool", "callId": "c1"},
                "content": [
                    {
                        "type": "tool-result",
                        "toolCallId": "c1",
                        "isError": True,
                        "content": [
                            {
                                "type": "text",
                                "text": "The tool call was interrupted before the Harness recorded it as started. "
                                "Retry it if it is still needed.",
                            }
                        ],
                    }
                ],
            },
            "error": {"name": "ToolNotStartedError", "code": "TOOL_NOT_STARTED"},
        },
        "surfaceOp": "append",
    }


def test_header_is_cloned_in_upstream_key_order(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    raw = header("k", agentPreset="p", origin="subagent", parentSession="x", seedLength=2, cwd=DROP)
    put(root, "k", lines(raw, *TURN), "none", cwd=None)
    snapshot = JsonlSessionStore(root).read_surface("k")
    assert list(snapshot.session.header) == [
        "version",
        "id",
        "createdAt",
        "parentSession",
        "seedLength",
        "origin",
        "delegationDepth",
        "agentPreset",
    ]
    assert snapshot.session.cwd is None
