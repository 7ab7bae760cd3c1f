"""Bounded reads: retention over a budget-bounded conversation equals retention over the whole surface.

``read_conversation`` keeps only what retention can use of a log; these tests
fold random surfaces (appends, compaction checkpoints, replacements that bring
old messages back into reach, texts far over the budget, non-ASCII and lone
surrogates) and require the retained data, stats and the prepared prompt to be
byte-identical to the unbounded path, while the texts held stay bounded.
"""

from __future__ import annotations

import asyncio
import os
import random
from pathlib import Path
from typing import Any

import pytest

from dsh_session_reference.assembly import open_live, open_source
from dsh_session_reference.conversation import BoundedRead
from dsh_session_reference.jsjson import js_stringify
from dsh_session_reference.model import ConversationSnapshot, StoreError
from dsh_session_reference.projection import LongText
from dsh_session_reference.resolver import AgentRef, SessionReferenceResolver
from dsh_session_reference.retention import bounded_text, retain_referenced_session, truncate_with_notice
from dsh_session_reference.store import JsonlSessionStore
from dsh_session_reference.store.index import store as index_module
from dsh_session_reference.store.index.store import APART_READ_BYTES, IndexedSessionStore
from dsh_session_reference.store.workers import run_apart
from index.spies import CountingStore
from store.logbuild import as_zstd, assistant, event, header, lines, put, title, tool_result

ALPHABET = 'abcdefghij <>&"\\\n  ü界😀'


def text(rng: random.Random, size: int) -> str:
    chars = [rng.choice(ALPHABET) for _ in range(size)]
    if rng.random() < 0.1 and chars:
        chars[rng.randrange(len(chars))] = "\ud800"  # a lone surrogate, as a JSON escape can spell
    return "".join(chars)


def user_event(
    seq: int, body: str, *, op: Any = "append", sources: list[int] | None = None, compact: bool = False
) -> dict[str, Any]:
    source: dict[str, Any] = {"kind": "plugin", "plugin": "compact"} if compact else {"kind": "user"}
    data = {"content": [{"type": "text", "text": body}], "source": source, "role": "user", "id": f"m{seq}"}
    extra: dict[str, Any] = {"surfaceOp": op}
    if sources is not None:
        extra = {"sourceEventSeqs": sources, "surfaceOp": op}
    return event("user/message", seq, data, **extra)


def random_log(rng: random.Random, size: int) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    surface: list[int] = []
    for _ in range(size):
        seq = len(events)
        roll = rng.random()
        length = int(rng.expovariate(1 / 200)) if rng.random() < 0.9 else rng.randint(2000, 9000)
        if roll < 0.4:
            events.append(user_event(seq, text(rng, length)))
            surface.append(seq)
        elif roll < 0.75:
            events.append(assistant(seq, text(rng, length)))
            surface.append(seq)
        elif roll < 0.82:
            events.append(tool_result(seq, f"c{seq}", text(rng, length)))
            surface.append(seq)
        elif roll < 0.85:
            events.append(title(seq, text(rng, 8)))
        elif surface:
            start = rng.randrange(len(surface))
            end = rng.randrange(start, min(len(surface), start + 1 + rng.choice((1, 3, len(surface)))))
            shadowed = surface[start : end + 1]
            op = {"op": "replace", "start": shadowed[0], "end": shadowed[-1]}
            compact = rng.random() < 0.7
            events.append(user_event(seq, text(rng, length), op=op, sources=list(shadowed), compact=compact))
            surface[start : end + 1] = [seq]
    return events


def write(root: Path, session_id: str, events: list[dict[str, Any]], compression: str) -> None:
    data = lines(header(session_id), *events)
    put(root, session_id, as_zstd(data) if compression == "zstd" else data, compression)  # type: ignore[arg-type]


def held_bytes(snapshot: ConversationSnapshot) -> int:
    total = 0
    for item in snapshot.items:
        kept = item.original_text
        total += (
            len(kept.head) + len(kept.tail)
            if isinstance(kept, LongText)
            else len(kept.encode("utf-8", "surrogatepass"))
        )
    return total


def assert_same(root: Path, session_id: str, max_bytes: int, label: str = "L") -> ConversationSnapshot:
    surface = JsonlSessionStore(root).read_surface(session_id)
    conversation = IndexedSessionStore(root, persistent=False).read_conversation(
        session_id, BoundedRead(max_bytes)
    )
    assert conversation.session == surface.session
    assert conversation.captured_through_seq == surface.captured_through_seq
    expected = retain_referenced_session(surface, label, max_bytes)
    got = retain_referenced_session(conversation, label, max_bytes)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert js_stringify(got.data) == js_stringify(expected.data)
        assert got.stats == expected.stats
    return conversation


@pytest.mark.parametrize("seed", range(40))
def test_random_surfaces_retain_identically(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    events = random_log(rng, rng.randint(0, 60))
    write(tmp_path, "s", events, rng.choice(["none", "zstd"]))
    for max_bytes in (40, 150, 400, 1200, 5000, 65536):
        assert_same(tmp_path, "s", max_bytes)


def test_a_long_conversation_is_held_within_the_budget(tmp_path: Path) -> None:
    rng = random.Random(1)
    events = [user_event(0, "x" * 300_000)]  # the first message alone is far over the budget
    for seq in range(1, 3000):
        maker = user_event if seq % 2 else assistant
        events.append(maker(seq, text(rng, rng.randint(100, 3000))))
    write(tmp_path, "big", events, "none")
    conversation = assert_same(tmp_path, "big", 4096)
    assert len(conversation.items) == 3000
    assert held_bytes(conversation) < 3 * 4096 + 4 * 3000  # the window, and at most a few bytes per item


def test_a_replacement_that_brings_old_messages_back_reads_them_again(tmp_path: Path) -> None:
    events = [user_event(seq, f"message {seq} " + "m" * 400) for seq in range(10)]
    # A replacement of the newest five by a short message: the older ones are in reach again.
    events.append(
        user_event(10, "short", op={"op": "replace", "start": 5, "end": 9}, sources=[5, 6, 7, 8, 9])
    )
    write(tmp_path, "back", events, "none")
    store = CountingStore(tmp_path, persistent=False)
    conversation = store.read_conversation("back", BoundedRead(1000))
    assert store.replays == 2
    assert [item.original_text for item in conversation.items][-2:] == ["message 4 " + "m" * 400, "short"]
    assert_same(tmp_path, "back", 1000)
    store.read_surface("back")  # the whole surface: one more replay, counted at the same seam
    assert store.replays == 3


def test_errors_are_the_surface_reads_errors(tmp_path: Path) -> None:
    write(tmp_path, "bad", [user_event(0, "hi"), event("made/up", 1, {})], "none")
    for read in (
        lambda: JsonlSessionStore(tmp_path).read_surface("bad"),
        lambda: IndexedSessionStore(tmp_path, persistent=False).read_conversation("bad", BoundedRead(100)),
    ):
        with pytest.raises(StoreError) as caught:
            read()
        assert "unknown to this harness" in caught.value.message
    with pytest.raises(StoreError, match='session "nope" not found'):
        IndexedSessionStore(tmp_path, persistent=False).read_conversation("nope", BoundedRead(100))


def prepared(store: Any, session_ids: list[str], max_bytes: int) -> tuple[str, Any] | str:
    """The prepared prompt and source for ``session_ids`` through ``store``, or the error."""
    references = [{"sessionId": session_id, "label": f"L{session_id}"} for session_id in session_ids]
    resolver = SessionReferenceResolver(store, max_reference_bytes=max_bytes)
    try:
        message = asyncio.run(resolver.prepare(AgentRef(None), [{"type": "text", "text": "x"}], references))
    except Exception as error:
        return f"{type(error).__name__}: {error}"
    assert message.additional_context is not None
    return message.additional_context.text, message.additional_context.source


@pytest.mark.parametrize("max_bytes", [120, 700, 65536])
def test_prepare_is_identical_through_either_store(tmp_path: Path, max_bytes: int) -> None:
    rng = random.Random(max_bytes)
    for number in range(3):
        write(tmp_path, f"s{number}", random_log(rng, 40), "zstd")
    ids = ["s0", "s1", "s2"]
    plain = prepared(JsonlSessionStore(tmp_path), ids, max_bytes)
    assert prepared(IndexedSessionStore(tmp_path, persistent=False), ids, max_bytes) == plain


@pytest.mark.parametrize("through_server_source", [False, True], ids=["index", "server-source"])
@pytest.mark.parametrize("max_bytes", [120, 65536])
def test_reads_in_a_process_of_their_own_prepare_identically(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, max_bytes: int, through_server_source: bool
) -> None:
    apart: list[str] = []

    def counted(task: str, *args: Any, stop: Any = None) -> Any:
        apart.append(args[1])
        return run_apart(task, *args, stop=stop)

    monkeypatch.setattr(index_module, "run_apart", counted)
    rng = random.Random(max_bytes)
    for number in range(3):
        write(tmp_path, f"s{number}", random_log(rng, 40), "zstd")
    write(tmp_path, "bad", [user_event(0, "hi"), event("made/up", 1, {})], "none")
    # Every log is over a budget of 0 bytes: every read goes apart (the CLI with cores to spare,
    # or the language server's source, for logs over 8 MB).
    index = IndexedSessionStore(tmp_path, index_dir=tmp_path.parent / "cache", apart_bytes=0)
    source: Any = index.start_catalog(background=False) if through_server_source else index
    try:
        for ids in (["s0", "s1", "s2"], ["s2", "bad"], ["nope"]):
            expected = prepared(JsonlSessionStore(tmp_path), ids, max_bytes)
            assert prepared(source, ids, max_bytes) == expected
    finally:
        source.close()
    assert sorted(set(apart)) == ["bad", "s0", "s1", "s2"]  # an unlisted id is never sent apart


def test_the_cli_and_the_server_read_huge_logs_apart(tmp_path: Path) -> None:
    source = open_live(str(tmp_path), index_dir=tmp_path / "cache")
    assert source.apart_bytes == APART_READ_BYTES
    source.close()
    cli_store = open_source(str(tmp_path), index_dir=tmp_path / "cache")
    assert isinstance(cli_store, IndexedSessionStore)
    expected = APART_READ_BYTES if (os.cpu_count() or 1) > 1 else None
    assert cli_store.apart_bytes == expected


@pytest.mark.parametrize("seed", range(8))
def test_a_long_text_cuts_exactly_as_its_whole_text(seed: int) -> None:
    rng = random.Random(seed)
    whole = text(rng, rng.randint(50, 400))
    budget = rng.randint(10, max(10, len(whole.encode("utf-8", "surrogatepass")) - 1))
    kept = bounded_text("user", whole, budget)
    if not isinstance(kept, LongText):
        return
    for target in range(budget + 1):
        assert truncate_with_notice(kept, target) == truncate_with_notice(whole, target)
    with pytest.raises(ValueError):
        truncate_with_notice(LongText(kept.head[:-1], kept.tail, kept.utf8_bytes, kept.item_bytes), budget)


def test_a_zstd_log_counts_as_the_json_it_holds_when_choosing_to_read_it_apart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    apart: list[str] = []
    monkeypatch.setattr(
        index_module, "run_apart", lambda task, root, sid, *rest, stop=None: apart.append(sid)
    )
    write(tmp_path, "packed", random_log(random.Random(3), 40), "zstd")
    write(tmp_path, "plain", random_log(random.Random(3), 40), "none")
    [packed] = list(tmp_path.glob("*/packed/session.jsonl.zstd"))
    [plain] = list(tmp_path.glob("*/plain/session.jsonl"))
    on_disk = packed.stat().st_size
    assert plain.stat().st_size > on_disk * 2  # the same log, unpacked
    store = IndexedSessionStore(tmp_path, persistent=False, apart_bytes=on_disk * 2)
    store.read_conversation("packed", BoundedRead(1000))
    store.read_conversation("plain", BoundedRead(1000))
    assert apart == ["packed", "plain"]  # both hold more JSON than the limit, though one is smaller on disk


@pytest.mark.parametrize("seed", range(12))
def test_a_head_kept_for_a_transcript_changes_no_retention(tmp_path: Path, seed: int) -> None:
    """``head_bytes`` keeps the first messages' texts as well (a transcript shows how a session
    began), and retention over that read is still byte-identical to retention over the surface."""
    rng = random.Random(seed)
    events = random_log(rng, rng.randint(10, 60))
    write(tmp_path, "h", events, "none")
    surface = JsonlSessionStore(tmp_path).read_surface("h")
    for max_bytes in (150, 1200, 65536):
        headed = IndexedSessionStore(tmp_path, persistent=False).read_conversation(
            "h", BoundedRead(max_bytes, 2000)
        )
        expected = retain_referenced_session(surface, "L", max_bytes)
        got = retain_referenced_session(headed, "L", max_bytes)
        assert (got is None) == (expected is None)
        if got is not None and expected is not None:
            assert js_stringify(got.data) == js_stringify(expected.data)
            assert got.stats == expected.stats


def test_a_head_keeps_the_first_messages_whole(tmp_path: Path) -> None:
    events = [user_event(seq, f"message {seq} " + "m" * 400) for seq in range(40)]
    write(tmp_path, "long", events, "none")
    store = IndexedSessionStore(tmp_path, persistent=False)
    plain = store.read_conversation("long", BoundedRead(1000))
    headed = store.read_conversation("long", BoundedRead(1000, 1000))
    evicted = [
        isinstance(item.original_text, LongText) and item.original_text.evicted for item in plain.items
    ]
    assert evicted[:3] == [True, True, True]  # without a head, the oldest are let go
    kept = [item.original_text for item in headed.items[:3]]
    assert kept == [f"message {seq} " + "m" * 400 for seq in range(3)]
    assert isinstance(headed.items[10].original_text, LongText)  # between head and tail: sizes only
