"""Retention and head/tail vectors from upstream's specs and from running the published package."""

from __future__ import annotations

from typing import Any

import pytest

from dsh_session_reference.jsjson import js_byte_length, stringify_tag_safe_json
from dsh_session_reference.model import SessionRecord, SurfaceSnapshot
from dsh_session_reference.projection import ConversationItem
from dsh_session_reference.retention import (
    drop_order,
    reachable,
    retain_head_tail,
    retain_referenced_session,
    truncate_with_notice,
)


@pytest.mark.parametrize(
    ("text", "head", "tail", "kept", "omitted"),
    [
        ("abcdefghij", 3, 3, "abchij", 4),
        ("abcdef", 3, 3, "abcdef", 0),
        ("éab", 1, 3, "éab", 0),
        ("a€€b", 2, 2, "ab", 6),
        ("a€b", 2, 0, "a", 4),
    ],
)
def test_head_tail(text: str, head: int, tail: int, kept: str, omitted: int) -> None:
    result = retain_head_tail(text, head, tail)
    assert (result.text, result.omitted_bytes) == (kept, omitted)


def user(text: str, kind: str = "user", **extra: Any) -> dict[str, Any]:
    source: dict[str, Any] = {"kind": kind, **extra}
    return {
        "type": "user/message",
        "data": {"content": [{"type": "text", "text": text}], "source": source, "role": "user", "id": "m"},
    }


def checkpoint(text: str) -> dict[str, Any]:
    return user(text, "plugin", plugin="compact", compactionId="c")


def assistant(text: str) -> dict[str, Any]:
    return {
        "type": "assistant/message",
        "data": {
            "turn": 0,
            "step": 0,
            "message": {
                "role": "assistant",
                "content": [{"type": "text", "text": text}],
                "source": {"kind": "model"},
                "id": "a",
            },
        },
    }


def snap(events: list[dict[str, Any]], cwd: str | None = "/w", seq: int | None = None) -> SurfaceSnapshot:
    header = {"type": "session", "version": 0, "id": "s", "createdAt": 1, "delegationDepth": 0}
    record = SessionRecord(id="s", created_at=1, cwd=cwd, header=header)
    return SurfaceSnapshot(record, len(events) - 1 if seq is None and events else seq, events)


def test_v1_fits_unchanged() -> None:
    out = retain_referenced_session(snap([user("hello"), assistant("hi there")]), "L", 1000)
    assert out is not None
    assert stringify_tag_safe_json(out.data) == (
        '{"sessionId":"s","label":"L","cwd":"/w","capturedThroughSeq":1,'
        '"conversation":[{"role":"user","text":"hello"},{"role":"assistant","text":"hi there"}]}'
    )
    assert out.stats.to_json() == {
        "compacted": False,
        "originalMessages": 2,
        "retainedMessages": 2,
        "omittedMessages": 0,
        "omittedBytes": 0,
        "truncated": False,
    }


def test_v2_empty_log() -> None:
    out = retain_referenced_session(snap([], cwd=None, seq=None), "s", 1000)
    assert out is not None
    assert stringify_tag_safe_json(out.data) == (
        '{"sessionId":"s","label":"s","cwd":null,"capturedThroughSeq":null,"conversation":[]}'
    )
    assert retain_referenced_session(snap([], cwd=None, seq=None), "s", 16) is None


V3 = [
    checkpoint("<summary>"),
    user("first question"),
    assistant("first answer"),
    user("second question"),
    assistant("second answer"),
]


def test_v3_drops_then_truncates() -> None:
    out = retain_referenced_session(snap(V3), "L", 200)
    assert out is not None
    assert out.data["conversation"] == [
        {"role": "user", "text": "<summary>"},
        {"role": "assistant", "text": "second answer"},
    ]
    assert (
        out.stats.omitted_messages,
        out.stats.omitted_bytes,
        out.stats.compacted,
        out.stats.truncated,
    ) == (3, 41, True, True)
    out150 = retain_referenced_session(snap(V3), "L", 150)
    assert out150 is not None
    assert [m["text"] for m in out150.data["conversation"]] == ["", ""]
    assert out150.stats.omitted_bytes == 63
    assert retain_referenced_session(snap(V3), "L", 120) is None


def test_v4_head_tail_with_notice() -> None:
    events = [user("A" * 200)]
    out = retain_referenced_session(snap(events, cwd=None), "L", 150)
    assert out is not None
    assert out.data["conversation"][0]["text"] == "AAAAAAAAA\n[… omitted 191 UTF-8 bytes …]"
    assert js_byte_length(stringify_tag_safe_json(out.data)) <= 150
    assert (out.stats.omitted_messages, out.stats.omitted_bytes, out.stats.truncated) == (0, 191, True)
    assert retain_referenced_session(snap(events, cwd=None), "L", 100) is None


def test_v5_escapes_make_json_larger_than_text() -> None:
    out = retain_referenced_session(snap([user('x<y "q"\n' * 20)]), "L", 120)
    assert out is not None
    assert out.data["conversation"][0]["text"] == ""
    assert out.stats.omitted_bytes == 160


def test_v6_v7_projection() -> None:
    out = retain_referenced_session(snap([user("ab"), assistant("")]), "L", 1000)
    assert out is not None and out.stats.original_messages == 1
    mixed = user("p1")
    mixed["data"]["content"] = [
        {"type": "text", "text": "p1"},
        {"type": "image", "attachment": {}},
        {"type": "text", "text": "p2"},
    ]
    out2 = retain_referenced_session(snap([mixed]), "L", 1000)
    assert out2 is not None and out2.data["conversation"][0]["text"] == "p1\np2"


def test_projection_excludes_everything_but_direct_text() -> None:
    events = [
        user("direct"),
        user("workspace secret", "plugin", plugin="workspace"),
        user("nested", "session-reference"),
        {"type": "tool/result", "data": {"message": {"content": [{"type": "text", "text": "tool"}]}}},
        assistant("visible"),
    ]
    out = retain_referenced_session(snap(events), "L", 10_000)
    assert out is not None
    assert [m["text"] for m in out.data["conversation"]] == ["direct", "visible"]


def test_july_era_display_content_is_projected() -> None:
    baked = user("## Referenced sessions ... baked snapshot ... the question")
    baked["data"]["envelope"] = {"displayContent": [{"type": "text", "text": "the question"}]}
    out = retain_referenced_session(snap([baked]), "L", 10_000)
    assert out is not None
    assert out.data["conversation"] == [{"role": "user", "text": "the question"}]


def test_notice_falls_back_to_empty_text_without_notice() -> None:
    result = truncate_with_notice("x" * 100, 10)
    assert (result.text, result.omitted_bytes) == ("", 100)


def test_truncation_replaces_lone_surrogates_only_when_cut() -> None:
    whole = retain_referenced_session(snap([user("a\ud800b")]), "L", 1000)
    assert whole is not None and whole.data["conversation"][0]["text"] == "a\ud800b"
    cut = truncate_with_notice("\ud800" + "x" * 200 + "\ud800", 60)
    assert cut.text.startswith("\ufffd") and cut.text.count("\ufffd") == 2


def test_drop_order_and_reach_follow_one_rule() -> None:
    """Retention drops the oldest messages first and never a checkpoint or the newest, so of the
    droppable ones it can keep only the newest that fit together: what a bounded reader keeps."""
    items = [
        ConversationItem("user", "c", True, "c"),
        ConversationItem("user", "one", False, "one"),
        ConversationItem("assistant", "two", False, "two"),
        ConversationItem("user", "three", False, "three"),
        ConversationItem("assistant", "newest", False, "newest"),
    ]
    assert drop_order(items) == [1, 2, 3]
    assert reachable(items, [10, 10, 10, 10, 10], 25) == [0, 2, 3, 4]
    assert reachable(items, [10, 10, 10, 30, 10], 25) == [0, 4]  # the newest droppable alone is too big
    assert reachable(items, [10] * 5, 1000) == [0, 1, 2, 3, 4]
    assert drop_order([ConversationItem("user", "only", False, "only")]) == [] and reachable([], [], 10) == []
