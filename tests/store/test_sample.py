"""The built-in sample store: real format, deterministic, and covering what real roots hold."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_session_reference import AgentRef, JsonlSessionStore, SessionReferenceResolver
from dsh_session_reference.sample import (
    COMPACTED_ID,
    CRASHED_ID,
    HANDBOOK_ID,
    JULY_ID,
    REVIEW_ID,
    SAMPLE_SESSION_IDS,
    SCRATCH_ID,
    SUBAGENT_ID,
    write_sample_store,
)
from dsh_session_reference.store import writer
from zstd_backends import zstd

from .logbuild import snapshot_tree

pytestmark = zstd


@pytest.fixture(scope="module", params=["zstd", "none"])
def sample_root(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp(f"sample-{request.param}") / "sessions"
    write_sample_store(root, request.param)
    return root


def test_sample_is_deterministic(tmp_path: Path) -> None:
    for compression in ("zstd", "none"):
        first = write_sample_store(tmp_path / f"a-{compression}", compression)  # type: ignore[arg-type]
        second = write_sample_store(tmp_path / f"b-{compression}", compression)  # type: ignore[arg-type]
        a = {path: content for path, (content, _, _) in snapshot_tree(first).items()}
        b = {path: content for path, (content, _, _) in snapshot_tree(second).items()}
        assert a == b
        suffix = ".jsonl.zstd" if compression == "zstd" else ".jsonl"
        logs = [path for path in a if path.endswith("session" + suffix)]
        assert len(logs) == len(SAMPLE_SESSION_IDS)  # one encoding for the whole root, as dsh keeps it


def test_sample_lists_every_session_with_titles(sample_root: Path) -> None:
    store = JsonlSessionStore(sample_root)
    records = store.list_sessions()
    assert [r.id for r in records] == [
        CRASHED_ID,
        HANDBOOK_ID,
        COMPACTED_ID,
        SUBAGENT_ID,
        REVIEW_ID,
        SCRATCH_ID,
        JULY_ID,
    ]
    titles = {o.session_id: o.title for o in store.read_titles(records)}
    assert titles == {
        CRASHED_ID: None,
        HANDBOOK_ID: "Handbook drafting",
        COMPACTED_ID: "Stale price flash on checkout",
        SUBAGENT_ID: None,
        REVIEW_ID: "Cart rounding: integer cents",  # generated, then renamed twice
        SCRATCH_ID: "发布说明提醒",
        JULY_ID: "Port v1 client to v2",
    }
    cwds = {r.id: r.cwd for r in records}
    assert cwds[SCRATCH_ID] is None
    assert {cwds[REVIEW_ID], cwds[HANDBOOK_ID], cwds[JULY_ID]} == {
        "/home/dev/shop",
        "/home/dev/docs",
        "/home/dev/legacy",
    }
    assert (sample_root / "_no-cwd" / "scratch~007E~7B14~8BB0~0020~00231").is_dir()
    subagent = next(r for r in records if r.id == SUBAGENT_ID)
    assert subagent.header["origin"] == "subagent" and subagent.header["parentSession"] == REVIEW_ID


def test_sample_surfaces(sample_root: Path) -> None:
    store = JsonlSessionStore(sample_root)
    compacted = store.read_surface(COMPACTED_ID).events
    assert compacted[0]["data"]["source"]["plugin"] == "compact"
    assert [e["type"] for e in compacted] == ["user/message", "user/message", "assistant/message"]
    crashed = store.read_surface(CRASHED_ID)
    assert crashed.events[-1]["data"]["error"]["code"] == "TOOL_OUTCOME_UNKNOWN"
    assert crashed.captured_through_seq == crashed.events[-1]["seq"] + 2  # + step/end + turn/end closers
    july = store.read_surface(JULY_ID).events
    assert (
        july[0]["data"]["envelope"]["displayContent"][0]["text"] == "Port the v1 client to the v2 endpoints."
    )
    assert any(
        e["type"] == "user/message" and e["data"]["source"]["kind"] == "session-reference" for e in july
    )
    review = store.read_surface(REVIEW_ID).events
    assert {"user/message", "assistant/message", "tool/result"} == {e["type"] for e in review}
    assert any(
        b["type"] == "reasoning"
        for e in review
        if e["type"] == "assistant/message"
        for b in e["data"]["message"]["content"]
    )


async def test_long_session_needs_truncation_under_the_default_budget(sample_root: Path) -> None:
    resolver = SessionReferenceResolver(JsonlSessionStore(sample_root))
    prepared = await resolver.prepare(
        AgentRef("other"), [{"type": "text", "text": "see"}], [{"sessionId": HANDBOOK_ID}]
    )
    assert prepared.additional_context is not None
    (reference,) = prepared.additional_context.source["references"]
    assert reference["truncated"] is True and reference["omittedMessages"] > 0


def test_sample_refuses_to_overwrite(sample_root: Path) -> None:
    before = snapshot_tree(sample_root)
    with pytest.raises(FileExistsError):
        write_sample_store(sample_root)
    assert snapshot_tree(sample_root) == before
    assert os.path.isdir(sample_root)


def test_sample_refuses_a_directory_that_is_not_empty(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    before = snapshot_tree(tmp_path)
    with pytest.raises(FileExistsError, match="not empty"):
        write_sample_store(tmp_path)
    assert snapshot_tree(tmp_path) == before


def test_a_log_that_cannot_be_encoded_leaves_nothing_behind(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def fail(*args: object, **kwargs: object) -> bytes:
        raise ImportError("no zstandard here")  # as encoding a zstd log fails without the binding

    monkeypatch.setattr(writer, "encode_log", fail)
    with pytest.raises(ImportError):
        writer.write_session_log(tmp_path, writer.SessionLog("s-bad", 1, "/w"))
    assert list(tmp_path.iterdir()) == []  # no directory, no empty log that would block a retry
