"""The language server's source: exact for small stores, hints then verified titles for big ones,
and the opt-in body search."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import subprocess
import sys
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types

from dsh_session_reference.assembly import open_live, open_source, start_over
from dsh_session_reference.cancellation import AbortSignal
from dsh_session_reference.candidate_cache import CandidateCache
from dsh_session_reference.candidates import CandidateTable, candidate_rank
from dsh_session_reference.conversation import BoundedRead
from dsh_session_reference.lsp.completion import BODY_MARK, completion_items
from dsh_session_reference.lsp.sessions import candidate_row
from dsh_session_reference.lsp.settings import Settings, apply_settings
from dsh_session_reference.model import SessionRecord, StoreChange, TitleObservation
from dsh_session_reference.resolver import AgentRef, BodyCandidate, SessionReferenceResolver
from dsh_session_reference.store import JsonlSessionStore, catalog
from dsh_session_reference.store import scheduler as scheduler_module
from dsh_session_reference.store import titles as titles_module
from dsh_session_reference.store.catalog import SessionCatalog
from dsh_session_reference.store.index.rows import fingerprint, fingerprint_at
from dsh_session_reference.store.index.store import IndexedSessionStore
from dsh_session_reference.store.listing import Reuse
from dsh_session_reference.store.root_state import root_state
from dsh_session_reference.store.scheduler import Scheduler
from dsh_session_reference.store.titles import TitleBoard
from store.logbuild import header, lines, one_turn, put, title

from .test_index import age

_CACHES: weakref.WeakKeyDictionary[IndexedSessionStore, CandidateCache] = weakref.WeakKeyDictionary()


def kept_table(source: IndexedSessionStore, target_cwd: str | None = None) -> CandidateTable:
    """The candidate table a resolver over ``source`` keeps (one cache per source, as one resolver
    has one)."""
    cache = _CACHES.setdefault(source, CandidateCache())
    table = cache.table(source, AbortSignal(), target_cwd)
    assert table is not None  # the catalog keeps its listing warm
    return table


def store(root: Path) -> None:
    put(
        root,
        "good",
        lines(header("good", createdAt=3), *one_turn(0, "about the alembic setup"), title(6, "Good")),
    )
    # Damaged: the title is there, but a garbage line before a completed turn rejects the whole log.
    put(
        root,
        "bad",
        lines(header("bad", createdAt=2), title(0, "Looks fine"), b"garbage\n", *one_turn(1)[-1:]),
    )
    put(root, "plain", lines(header("plain", createdAt=1), *one_turn(0, "nothing here")))


def served_as_big(monkeypatch: pytest.MonkeyPatch) -> None:
    """Serve even a tiny root as a big one is served: from memory, every unknown title a hint first."""
    monkeypatch.setattr(catalog, "SYNC_MAX_SESSIONS", 1)
    monkeypatch.setattr(catalog, "SYNC_VERIFY_BYTES", 0)


def wait_for(condition: object, seconds: float = 20.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():  # type: ignore[operator]
            return
        time.sleep(0.05)
    raise AssertionError("timed out")


def test_a_big_cold_store_shows_hints_then_the_exact_titles(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served_as_big(monkeypatch)
    root = tmp_path / "sessions"
    store(root)
    age(root)
    exact = JsonlSessionStore(root)
    expected = exact.read_titles(exact.list_sessions())
    source = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog()
    try:
        records = source.list_sessions()
        hinted = source.read_titles(records)
        assert [o.title for o in hinted] == ["Good", "Looks fine", None]  # the damaged log's hint
        wait_for(lambda: source.read_titles(source.list_sessions()) == expected)
        assert expected[1].error is not None  # verified: the damaged log is labelled by its id
    finally:
        source.close()
    # The verified titles are in the index file: a new server starts warm.
    again = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog()
    try:
        assert again.read_titles(again.list_sessions()) == expected
        assert again.catalog.titles.queued == {}
    finally:
        again.close()


def test_a_big_store_is_served_from_memory_and_revalidated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, source = revalidated(tmp_path, monkeypatch, grace=0.0, max_defer=scheduler_module.MAX_DEFER)
    try:
        assert [r.id for r in source.list_sessions()] == ["good", "bad", "plain"]
        put(root, "new", lines(header("new", createdAt=9), *one_turn(0)))
        with source.catalog.scheduler.serving():  # a request in progress: background work waits for it to end
            assert [r.id for r in source.list_sessions()] == ["good", "bad", "plain"]  # stale, refreshing
            time.sleep(0.5)
            assert "new" not in listed(source)
        wait_for(lambda: next(r.id for r in source.list_sessions()) == "new")
    finally:
        source.close()


def revalidated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, grace: float, max_defer: float
) -> tuple[Path, IndexedSessionStore]:
    """A root served as a big one is, its listing revalidated as soon as a request finds it
    old, under the given idle rules."""
    monkeypatch.setattr(catalog, "SYNC_MAX_SESSIONS", 1)
    monkeypatch.setattr(catalog, "REFRESH_AFTER", 0.0)
    root = tmp_path / "sessions"
    store(root)
    rules = Scheduler(idle_grace=grace, max_defer=max_defer)
    return root, IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(scheduler=rules)


def listed(source: IndexedSessionStore) -> set[str]:
    """The ids of the listing requests are answered from (looked at without making a request)."""
    snapshot = source.catalog.snapshot
    assert snapshot is not None
    return {record.id for record in snapshot.records}


def typing(source: IndexedSessionStore, seconds: float) -> None:
    """Requests back to back, as an ``@`` popup sends them while a query is typed."""
    until = time.monotonic() + seconds
    while time.monotonic() < until:
        kept_table(source)
        time.sleep(0.02)


def test_revalidation_waits_until_the_editor_pauses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The revalidation walk runs in the server's interpreter: it waits for a pause in typing
    (IDLE_GRACE without a request) rather than run between keystrokes."""
    root, source = revalidated(tmp_path, monkeypatch, grace=1.0, max_defer=60.0)
    walks: list[str] = []
    real_root_state = catalog.root_state

    def counted(*args: Any) -> int:
        walks.append("walk")
        return real_root_state(*args)

    monkeypatch.setattr(catalog, "root_state", counted)
    try:
        source.list_sessions()
        first = len(walks)
        put(root, "new", lines(header("new", createdAt=9), *one_turn(0)))
        typing(source, 0.6)
        assert len(walks) == first and "new" not in listed(source)  # deferred while typing
        time.sleep(0.6)
        source.touch()  # an editor message that is not a request counts as activity too
        time.sleep(0.6)  # 1.2 s after the last request, 0.6 s after the last message
        assert len(walks) == first
        wait_for(lambda: "new" in listed(source))  # the pause came: walked, listed
        assert len(walks) > first
    finally:
        source.close()


def test_typing_while_a_revalidation_waits_does_not_wake_the_background_each_keystroke(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The background thread shares the interpreter with requests: once a revalidation is
    waiting for a pause, a keystroke asking for it again has nothing new to tell it."""
    root, source = revalidated(tmp_path, monkeypatch, grace=1.0, max_defer=60.0)
    rounds: list[float] = []
    work = SessionCatalog._work

    def counted(self: SessionCatalog) -> float | None:
        rounds.append(time.monotonic())
        return work(self)

    monkeypatch.setattr(SessionCatalog, "_work", counted)
    try:
        source.list_sessions()
        time.sleep(0.3)  # the first listing's write-behind round
        put(root, "new", lines(header("new", createdAt=9), *one_turn(0)))
        before = len(rounds)
        typing(source, 0.6)  # about 25 requests, each finding the listing old
        assert len(rounds) - before <= 3  # was one per request
        wait_for(lambda: "new" in listed(source))  # and the pause still brings the walk
    finally:
        source.close()


def test_revalidation_is_deferred_at_most_max_defer(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An editor that never pauses still sees new sessions: the walk then runs between requests."""
    root, source = revalidated(tmp_path, monkeypatch, grace=600.0, max_defer=0.3)
    try:
        source.list_sessions()
        put(root, "new", lines(header("new", createdAt=9), *one_turn(0)))
        deadline = time.monotonic() + 20
        while "new" not in listed(source):
            assert time.monotonic() < deadline, "the walk waited for a pause that never came"
            typing(source, 0.1)
    finally:
        source.close()


def test_reads_for_prepare_hold_background_work_back(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "sessions"
    store(root)
    source = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog()
    quiet_during: list[bool] = []
    replay = source.replay

    def watched(*args: Any) -> Any:  # every read of a log, the surface's and the bounded one
        quiet_during.append(source.catalog.scheduler.quiet)
        return replay(*args)

    monkeypatch.setattr(source, "replay", watched)
    try:
        assert source.catalog.scheduler.quiet
        source.list_sessions()
        source.read_surface("good")
        source.read_conversation("good", BoundedRead(4096))
        assert quiet_during == [False, False]  # background work waits while a log is read
        assert source.catalog.scheduler.quiet
    finally:
        source.close()


def test_empty_session_directories_make_a_big_root_too(tmp_path: Path) -> None:
    """What a walk costs is the directories it looks in: a root of three sessions and thousands of
    empty session directories (100,000 took every popup 1.6-2.7 s) is served from memory."""
    root = tmp_path / "sessions"
    store(root)
    for n in range(catalog.SYNC_MAX_SESSIONS):
        (root / "--w--" / f"empty-{n}").mkdir()
    source = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog()
    try:
        assert [r.id for r in source.list_sessions()] == ["good", "bad", "plain"]
        put(root, "new", lines(header("new", createdAt=9), *one_turn(0)))
        with (
            source.catalog.scheduler.serving()
        ):  # a request in progress: no walk of its own, none behind it yet
            assert [r.id for r in source.list_sessions()] == ["good", "bad", "plain"]
    finally:
        source.close()


def test_small_stores_stay_exact_on_every_request(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    store(root)
    source = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(background=False)
    exact = JsonlSessionStore(root)
    assert source.read_titles(source.list_sessions()) == exact.read_titles(exact.list_sessions())
    put(root, "new", lines(header("new", createdAt=9), *one_turn(0), title(6, "New one")))
    records = source.list_sessions()
    assert records[0].id == "new"
    assert source.read_titles(records)[0].title == "New one"
    source.close()


async def test_the_kept_candidate_table_follows_new_titles(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    store(root)
    source = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(background=False)
    exact = SessionReferenceResolver(JsonlSessionStore(root))
    cached = SessionReferenceResolver(source)
    agent = AgentRef("good", "/elsewhere")
    try:
        for query in ("", "o", "oo", "looks", "BAD", "zzz"):
            assert await cached.list_candidates(agent, query) == await exact.list_candidates(agent, query)
        table = kept_table(source)
        assert kept_table(source) is table  # nothing changed: the same table answers
        put(root, "plain", lines(header("plain", createdAt=1), *one_turn(0, "x"), title(6, "Renamed")))
        assert [c.label for c in await cached.list_candidates(agent, "renamed")] == ["Renamed"]
        assert kept_table(source) is not table
    finally:
        source.close()


def big_cold_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[IndexedSessionStore, SessionReferenceResolver, SessionReferenceResolver]:
    """The store above, served as a big root would be, with every unknown title a hint first:
    the source, a resolver over it, and upstream's resolver over the same root."""
    served_as_big(monkeypatch)
    root = tmp_path / "sessions"
    store(root)
    age(root)
    source = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog()
    return source, SessionReferenceResolver(source), SessionReferenceResolver(JsonlSessionStore(root))


async def test_a_big_store_ranks_hints_then_verified_titles_as_upstream_would(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, cached, exact = big_cold_store(tmp_path, monkeypatch)
    agent = AgentRef(None)
    try:
        hinted = await cached.list_candidates(agent, "looks")
        assert [c.label for c in hinted] == ["Looks fine"]  # the damaged log's hint, for now
        for _ in range(400):
            if await cached.list_candidates(agent, "looks") == await exact.list_candidates(agent, "looks"):
                break
            await asyncio.sleep(0.05)
        assert await cached.list_candidates(agent, "looks") == []  # verified: labelled by its id
        assert await cached.list_candidates(agent, "") == await exact.list_candidates(agent, "")
    finally:
        source.close()


def test_the_server_source_writes_the_index_file_behind_its_requests(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    store(root)
    age(root)
    cache = tmp_path / "cache"
    source = open_live(str(root), index_dir=cache)
    try:
        assert not source.autoflush
        records = source.list_sessions()
        source.read_titles(records)
        wait_for(lambda: not source._dirty)  # written by the background thread
        on_disk = IndexedSessionStore(root, index_dir=cache).table()
        assert sorted(on_disk) == sorted(record.location for record in records)
        assert all(row.listing is not None and row.title is not None for row in on_disk.values())
    finally:
        source.close()


def test_a_held_server_source_works_behind_only_once_its_start_is_over(tmp_path: Path) -> None:
    """The language server's store (``held``): the requests it answers first (the listing read
    ahead at ``initialize``, the prompt's diagnostics) do not start its background work; the
    first completion's answer does (:func:`start_over`), or ``START_GRACE`` (issue 36: in real
    VS Code that work took about half a second of CPU before the first ``@`` was answered)."""
    root = tmp_path / "sessions"
    store(root)
    age(root)
    source = open_live(str(root), index_dir=tmp_path / "cache", held=True)
    try:
        source.read_titles(source.list_sessions())
        time.sleep(0.3)
        assert source._dirty  # type: ignore[attr-defined]  # nothing written behind yet
        start_over(source)
        wait_for(lambda: not source._dirty)  # type: ignore[attr-defined]
    finally:
        source.close()


def test_a_cold_first_popup_hints_titles_in_rank_order_for_its_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served_as_big(monkeypatch)
    root = tmp_path / "sessions"
    cwds = ["/a", "/b", None, "/a", None, "/b", "/c", "/b"]
    for number, cwd in enumerate(cwds):
        line = header(f"s{number}", createdAt=number, cwd=cwd)
        if cwd is None:
            del line["cwd"]
        put(root, f"s{number}", lines(line, title(0, f"T{number}")), cwd=cwd)
    age(root)
    source = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog()
    hinted: list[str] = []
    hint = source.catalog.titles.hint

    def spied(location: str, *args: Any) -> str | None:
        hinted.append(location)
        return hint(location, *args)

    monkeypatch.setattr(source.catalog.titles, "hint", spied)
    try:
        records = source.list_sessions()
        table = kept_table(source, "/b")
        by_location = {record.location: record for record in records}
        ranks = [candidate_rank(by_location[location].cwd, "/b") for location in hinted]
        assert len(hinted) == len(cwds) and ranks == sorted(ranks)  # /b, then no cwd, then the rest
        in_rank = sorted(records, key=lambda record: candidate_rank(record.cwd, "/b"))
        assert hinted == [record.location for record in in_rank]  # listing order within a rank
        assert [row.label for row in table.select("t", None, "/b", 3)] == ["T7", "T5", "T1"]  # newest first
    finally:
        source.close()


async def test_body_search_adds_marked_rows_after_the_exact_candidates(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    store(root)
    put(root, "alembic", lines(header("alembic", createdAt=5), *one_turn(0), title(6, "Alembic notes")))
    source = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(background=False)
    agent = AgentRef(None, "/w")
    plain = await SessionReferenceResolver(source).list_candidates(agent, "alemb")
    assert [c.session_id for c in plain] == ["alembic"]
    found = await SessionReferenceResolver(source, body_search=True).list_candidates(agent, "alemb")
    assert [c.session_id for c in found] == ["alembic", "good"]
    body = found[1]
    assert isinstance(body, BodyCandidate) and not isinstance(found[0], BodyCandidate)
    assert "alembic" in body.snippet and body.label == "Good"
    assert candidate_row(body)["match"] == "body"
    assert "match" not in candidate_row(found[0])
    edit = types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=6))
    items = completion_items(found, edit, now_ms=10_000, label_details=True, typed="@alemb")
    assert items[1].label_details is not None and BODY_MARK in (items[1].label_details.description or "")
    # What was typed first (VS Code keeps the server's order), then the word the body matched.
    assert items[1].filter_text is not None and items[1].filter_text.startswith("@alemb alemb")
    assert BODY_MARK not in (items[0].label_details.description or "")  # type: ignore[union-attr]
    searching = SessionReferenceResolver(source, body_search=True)
    assert await searching.list_candidates(agent, "alemb", 1) == plain  # no room left
    source.close()


async def test_body_search_over_a_store_without_a_body_index_adds_nothing(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    store(root)
    put(root, "alembic", lines(header("alembic", createdAt=5), *one_turn(0), title(6, "Alembic notes")))
    source = JsonlSessionStore(root)
    agent = AgentRef(None, "/w")
    plain = await SessionReferenceResolver(source).list_candidates(agent, "alemb")
    assert [c.session_id for c in plain] == ["alembic"]
    searching = SessionReferenceResolver(source, body_search=True)
    assert await searching.list_candidates(agent, "alemb") == plain


def test_body_search_is_a_boolean_setting_off_by_default() -> None:
    assert Settings().body_search is False
    updated, warnings = apply_settings(Settings(), {"dshSessionReference": {"bodySearch": True}})
    assert updated.body_search is True and warnings == []
    kept, warnings = apply_settings(updated, {"bodySearch": "yes"})
    assert kept.body_search is True and "bodySearch must be true or false" in warnings[0]
    reset, _ = apply_settings(updated, {"bodySearch": None})
    assert reset.body_search is False


def test_a_dropped_source_stops_its_thread(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    served_as_big(monkeypatch)
    root = tmp_path / "sessions"
    store(root)
    source = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog()
    source.read_titles(source.list_sessions())
    thread = source.catalog.scheduler.thread
    assert thread is not None
    del source
    gc.collect()
    thread.join(timeout=10)
    assert not thread.is_alive()


def test_cold_titles_verified_in_worker_processes_are_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dsh_session_reference.store.index import store as index

    monkeypatch.setattr(index, "PARALLEL_MIN_BYTES", 0)
    root = tmp_path / "sessions"
    store(root)
    age(root)
    exact = JsonlSessionStore(root)
    expected = exact.read_titles(exact.list_sessions())
    parallel = IndexedSessionStore(root, index_dir=tmp_path / "cache", workers=2)
    assert parallel.read_titles(parallel.list_sessions()) == expected
    counted = IndexedSessionStore(root, index_dir=tmp_path / "cache")  # the workers' answers were kept
    records = counted.list_sessions()
    found = [counted.cached_title(r, fingerprint_at(str(r.location)), None) for r in records]
    assert found == expected


def test_a_query_over_a_cold_index_starts_its_workers_before_it_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``candidates QUERY`` reads every title: over a cold index its worker processes start while
    the root is listed, and the title read uses them; over a warm index none start."""
    from dsh_session_reference.store.index import store as index
    from dsh_session_reference.store.index import verify

    started: list[object] = []

    asked: set[int] = set()

    class Counted(verify.WorkerProcess):
        def __init__(self) -> None:
            super().__init__()
            started.append(self)

        def submit(self, task: str, *args: Any) -> Any:
            asked.add(id(self))
            return super().submit(task, *args)

    monkeypatch.setattr(verify, "WorkerProcess", Counted)
    monkeypatch.setattr(index, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    root = tmp_path / "sessions"
    store(root)
    age(root)
    exact = JsonlSessionStore(root)
    expected = exact.read_titles(exact.list_sessions())

    cold = open_source(str(root), index_dir=tmp_path / "cache", every_title=True)
    assert len(started) == 2  # before any listing
    assert cold.read_titles(cold.list_sessions()) == expected
    # The title read used those started ahead (one batch here: tiny logs), none of its own.
    assert len(started) == 2 and asked and asked <= {id(worker) for worker in started}
    assert isinstance(cold, IndexedSessionStore)
    cold.close()

    warm = open_source(str(root), index_dir=tmp_path / "cache", every_title=True)
    assert warm.read_titles(warm.list_sessions()) == expected
    assert len(started) == 2  # the index file was there: nothing to start
    assert isinstance(warm, IndexedSessionStore)
    warm.close()


def test_the_cli_uses_the_index_and_searches_bodies_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from dsh_session_reference.main import main

    root = tmp_path / "sessions"
    store(root)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert main(["candidates", "alemb", "--sessions", str(root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert list((tmp_path / "xdg" / "dsh-session-reference" / "index").glob("*.sqlite3"))
    assert main(["candidates", "alemb", "--sessions", str(root), "--json", "--body-search"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(row["sessionId"], row["match"]) for row in rows] == [("good", "body")]
    assert main(["candidates", "alemb", "--sessions", str(root), "--body-search"]) == 0
    assert "matched in messages" in capsys.readouterr().out
    assert main(["candidates", "--sessions", str(root), "--json", "--no-index"]) == 0
    assert [row["sessionId"] for row in json.loads(capsys.readouterr().out)] == ["good", "bad", "plain"]


def walks_for_four_requests_during_a_first_walk(source: IndexedSessionStore) -> list[int]:
    """Starts a request whose walk is held open, sends three more meanwhile, then lets it go;
    checks every answer and returns one entry per walk the index made."""
    listings: list[int] = []
    real_listing = source.walk_listing
    gate = threading.Event()

    def slow_listing(stop: AbortSignal | None = None, reuse: Reuse | None = None) -> list[SessionRecord]:
        listings.append(1)
        gate.wait(5)  # the first listing is still running when the others ask
        return real_listing(stop, reuse)

    source.walk_listing = slow_listing  # type: ignore[method-assign]
    with ThreadPoolExecutor(4) as pool:
        first = pool.submit(source.list_sessions)
        while not listings:
            time.sleep(0.01)
        later = [pool.submit(source.list_sessions) for _ in range(3)]
        time.sleep(0.3)
        gate.set()
        answers = [[record.id for record in future.result()] for future in [first, *later]]
    assert answers == [["good", "bad", "plain"]] * 4
    return listings


def test_requests_queued_behind_a_cold_listing_share_it(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    store(root)
    source = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(background=False)
    try:
        # The three later requests asked after that walk began, so (a small root being exact
        # on every request) they wait for it, and then one fresh walk answers all three.
        listings = walks_for_four_requests_during_a_first_walk(source)
        assert len(listings) == 2
        source.list_sessions()
        assert len(listings) == 3  # a later request of a small root still walks again
    finally:
        source.close()


def test_a_big_root_lists_once_for_requests_that_arrive_during_its_cold_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A root served from memory may be up to REFRESH_AFTER stale anyway, so a request that
    arrives while the first walk runs takes that walk (the editor's first completion and its
    diagnostics both ask at startup: walking a 10,000-session root twice cost a second)."""
    monkeypatch.setattr(catalog, "SYNC_MAX_SESSIONS", 1)
    root = tmp_path / "sessions"
    store(root)
    source = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog()
    try:
        assert len(walks_for_four_requests_during_a_first_walk(source)) == 1
    finally:
        source.close()


async def test_titles_verified_under_a_kept_table_relabel_only_their_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source, cached, exact = big_cold_store(tmp_path, monkeypatch)
    agent = AgentRef(None)
    try:
        first = kept_table(source)
        assert [row.label for row in first.rows] == ["Good", "Looks fine", "plain"]  # hints
        wait_for(
            lambda: (
                kept_table(source) is not first
                and source.catalog.titles.queued == {}
                and not source.catalog.titles.in_flight
            )
        )
        table = kept_table(source)
        kept = _CACHES[source]._kept
        assert kept is not None and kept.positions is not None  # relabelled, not rebuilt
        assert [row.label for row in table.rows] == ["Good", "bad", "plain"]  # the damaged log: its id
        for query in ("", "o", "looks", "bad"):
            assert await cached.list_candidates(agent, query) == await exact.list_candidates(agent, query)
    finally:
        source.close()


def test_the_root_state_digest_moves_with_everything_a_listing_reads(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    store(root)
    states = [root_state(str(root))]

    def changed() -> bool:
        states.append(root_state(str(root)))
        return states[-1] != states[-2]

    assert not changed()  # nothing happened
    good = next(root.glob("*/good/session.jsonl"))
    with good.open("ab") as handle:
        handle.write(lines(title(7, "Good 2")))
    assert changed()  # a log grew
    put(root, "new", lines(header("new"), *one_turn(0)))
    assert changed()  # a session appeared
    (root / "--w--" / "stray.jsonl").write_bytes(b"")
    assert changed()  # a flat file in a project
    target = root / "store-area" / "linked.txt"
    target.parent.mkdir()
    target.write_bytes(lines(header("linked"), *one_turn(0)))
    link = root / "--w--" / "linked" / "session.jsonl"
    link.parent.mkdir()
    os.symlink("../../store-area/linked.txt", link)
    assert changed()  # a symlinked log
    with target.open("ab") as handle:
        handle.write(lines(title(6, "Linked")))
    assert changed()  # only its target changed
    os.remove(next(root.glob("*/plain/session.jsonl")))
    assert changed()  # a log went away
    assert not changed()


def test_the_root_state_walk_pauses_every_few_hundred_entries(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    for index in range(600):
        (root / "--w--" / f"s{index}").mkdir(parents=True)
    pauses: list[int] = []
    assert root_state(str(root), lambda: pauses.append(1)) == root_state(str(root))
    assert len(pauses) == 600 // 256


def test_rows_a_server_had_not_written_are_written_when_it_exits(tmp_path: Path) -> None:
    """The server's index writes behind; a server that exits without closing its catalog (an
    editor that kills it) still leaves the rows it made (the exit hook closes every catalog)."""
    root = tmp_path / "sessions"
    store(root)
    age(root)
    cache = tmp_path / "cache"
    code = (
        "import sys\n"
        "from dsh_session_reference.assembly import open_live\n"
        "source = open_live(sys.argv[1], index_dir=sys.argv[2])\n"
        "assert len(source.list_sessions()) == 3\n"
    )
    subprocess.run([sys.executable, "-c", code, str(root), str(cache)], check=True, timeout=60)
    assert len(IndexedSessionStore(root, index_dir=cache).table()) == 3


def test_a_dropped_store_is_freed_at_once_not_at_the_next_full_collection(tmp_path: Path) -> None:
    """The server puts full collections off while the editor is busy; a store it drops (another
    root) must not wait for one to let go of its rows and its SQLite connection."""
    root = tmp_path / "sessions"
    store(root)

    def used(made: JsonlSessionStore | IndexedSessionStore) -> weakref.ref[Any]:
        made.read_titles(made.list_sessions())
        return weakref.ref(made)

    gc.collect()
    gc.disable()
    try:
        plain = used(JsonlSessionStore(root))
        indexed = used(IndexedSessionStore(root, persistent=False))
        assert plain() is None and indexed() is None  # by reference counting alone: no cycle holds them
    finally:
        gc.enable()


def test_a_hint_never_replaces_a_verified_title() -> None:
    board = TitleBoard()
    fp = fingerprint(1, 2, 3, 4, 5)
    board.observe("log", fp, TitleObservation("s", error="the log is damaged"))
    board.provisional("log", fp, TitleObservation("s", title="Looks fine"))
    assert board.current("log", fp) == TitleObservation("s", error="the log is damaged")
    board.provisional("log", fingerprint(1, 2, 9, 9, 9), TitleObservation("s", title="Grown"))
    assert board.current("log", fingerprint(1, 2, 9, 9, 9)) == TitleObservation("s", title="Grown")


def test_a_claimed_title_counts_only_once_a_scan_of_its_log_agrees() -> None:
    """Titles from the cache folder are claims: shown, queued to be scanned, and proved or replaced."""
    board = TitleBoard()
    fp = fingerprint(1, 2, 3, 4, 5)
    record = SessionRecord("s", 1, None, {"id": "s", "createdAt": 1}, "log")
    claimed = TitleObservation("s", title="Claimed")
    board.claim({"log": (record, fp, claimed)})
    assert board.current("log", fp) == claimed  # shown meanwhile
    assert board.to_scan_claims(10) == [(record, fp)] and board.busy()
    version = board.version
    assert not board.prove("log", fp, "Claimed")  # the scan agrees: it counts, and no label changed
    assert board.current("log", fp) == claimed and board.version == version
    board.scanned(["log"])
    assert not board.busy()
    board.claim({"log": (record, fp, TitleObservation("s", title="Other"))})  # read here: kept
    assert board.current("log", fp) == claimed and board.to_prove == {}

    other = SessionRecord("t", 1, None, {"id": "t", "createdAt": 1}, "other")
    board.claim({"other": (other, fp, TitleObservation("t", title="Forged"))})
    assert board.prove("other", fp, "Real")  # disagrees: the log's own title, and a verification
    assert board.current("other", fp) == TitleObservation("t", title="Real")
    board.claim({"bad": (other, fp, TitleObservation("t", error="damaged"))})
    assert board.prove("bad", fp, "A title")  # a claimed error (the id shown) stays until verified
    assert board.current("bad", fp) == TitleObservation("t", error="damaged")
    board.observe("bad", fp, TitleObservation("t", title="A title"))
    assert board.current("bad", fp) == TitleObservation("t", title="A title")
    board.claim({"hinted": (other, fp, TitleObservation("t", title="Forged"))})
    board.provisional("hinted", fp, TitleObservation("t", title="Scanned"))  # a hint beats a claim
    assert board.current("hinted", fp) == TitleObservation("t", title="Scanned")
    assert not board.prove("hinted", fp, "Forged")  # no claim left to prove
    board.claim({"changing": (other, fp, TitleObservation("t", title="Forged"))})
    assert board.to_scan_claims(10)[-1] == (other, fp)
    board.scanned(["other", "bad", "hinted", "changing"], ["changing"])  # changed under its scan
    assert board.current("changing", fp) is None and not board.busy()  # withdrawn, to be asked again


def test_claimed_titles_not_scanned_yet_count_as_background_work() -> None:
    """Over the index a server left, every title is a claim to scan (a claim may be a forged title
    on show): that is work a person waits on, so the progress shows it and the listing is kept
    only once it is done, as for titles being verified."""
    board = TitleBoard()
    fp = fingerprint(1, 2, 3, 4, 5)
    record = SessionRecord("s", 1, None, {"id": "s", "createdAt": 1}, "log")
    board.claim({"log": (record, fp, TitleObservation("s", title="Claimed"))})
    assert board.pending() == 1
    assert board.to_scan_claims(10) == [(record, fp)]
    assert board.pending() == 1  # in a worker's hands
    assert not board.prove("log", fp, "Claimed")
    board.scanned(["log"])
    assert board.pending() == 0


def test_hints_left_to_scan_are_scanned_in_the_order_they_came_skipping_forgotten_logs(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The logs a request had no time to hint are scanned behind it in its order (taken from the
    front of a queue, not by looking past every key deleted from a dict: 12 s at 200,000); a log a
    new listing no longer lists is skipped, and one listed again is scanned once."""
    scanned: list[str] = []

    def scan(location: str, root_real: str, stop: object) -> str:
        scanned.append(location)
        return f"T {location}"

    monkeypatch.setattr(titles_module, "scan_last_title", scan)
    monkeypatch.setattr(titles_module, "HINT_BUDGET", 0.0)  # the requests scan none themselves
    monkeypatch.setattr(titles_module, "LATER_HINT_BUDGET", 0.0)
    fp = fingerprint(1, 2, 3, 4, 5)
    records = [SessionRecord(f"s{n}", 1, None, {"id": f"s{n}", "createdAt": 1}, f"log{n}") for n in range(6)]
    board = TitleBoard()
    listed_at = {str(record.location): fp for record in records}.get
    hints = board.hint_in_order(records, range(len(records)), listed_at, "/", None)
    assert hints == []  # none scanned now: the caller labels them by their ids until they are
    board.keep_only({"log0", "log2", "log3", "log4", "log5"})  # log1 deleted
    board.hint_in_order(records, [3, 1], listed_at, "/", None)  # log1 back, log3 again
    board.scan_hints("/", lambda: len(scanned) < 99, listed_at)
    assert scanned == ["log0", "log2", "log3", "log4", "log5", "log1"]
    assert board.current("log1", fp) == TitleObservation("s1", title="T log1")
    assert board.to_scan == {}


def test_the_title_board_forgets_logs_a_new_listing_no_longer_lists(tmp_path: Path) -> None:
    """What the board holds is bounded by the root, not by every log a long-running server saw."""
    root = tmp_path / "sessions"
    store(root)
    age(root)
    paused = Scheduler(idle_grace=60.0, max_defer=60.0)
    source = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(scheduler=paused)
    try:
        records = source.list_sessions()
        source.read_titles(records)  # read, and kept as rows
        source.read_titles(records)  # from the rows this server wrote: observed
        plain = next(record for record in records if record.id == "plain")
        assert set(source.catalog.titles.observed) == {record.location for record in records}
        os.unlink(str(plain.location))
        assert plain not in source.list_sessions()
        assert plain.location not in source.catalog.titles.observed
    finally:
        source.close()


def left_by_a_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[Path, list[SessionRecord], list[TitleObservation]]:
    """A big root whose index a server filled and closed (leaving its listing): the root, and the
    exact listing and titles."""
    served_as_big(monkeypatch)
    root = tmp_path / "sessions"
    store(root)
    age(root)
    exact = JsonlSessionStore(root)
    expected = exact.list_sessions()
    titles = exact.read_titles(expected)
    warm = open_live(root, index_dir=tmp_path / "cache")
    wait_for(lambda: warm.read_titles(warm.list_sessions()) == titles)
    warm.close()
    return root, expected, titles


def test_a_fresh_server_answers_from_the_index_before_it_walks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Opening the editor again: the first ``@`` is answered from the listing and titles the index
    holds, before any walk of the root; the walk that revalidates it comes when the editor pauses."""
    root, expected, _ = left_by_a_server(tmp_path, monkeypatch)

    paused = Scheduler(idle_grace=60.0, max_defer=60.0)  # no pause comes: the walk never runs here
    fresh = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(scheduler=paused)
    try:
        table = kept_table(fresh)
        assert fresh.walked == {}  # answered without a walk of the root
        assert [row.record for row in table.rows] == expected
        assert [row.label for row in table.rows] == ["Good", "bad", "plain"]  # "bad" is damaged
        assert fresh.catalog.titles.queued == {}  # nothing to verify: the titles are the index's
    finally:
        fresh.close()


def test_a_session_deleted_before_the_editor_opens_goes_at_the_first_walk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, _, _ = left_by_a_server(tmp_path, monkeypatch)
    put(root, "new", lines(header("new", createdAt=9), *one_turn(0)))
    plain = next(record for record in JsonlSessionStore(root).list_sessions() if record.id == "plain")
    assert plain.location is not None
    os.unlink(plain.location)
    os.rmdir(os.path.dirname(plain.location))

    rules = Scheduler(idle_grace=0.0, max_defer=scheduler_module.MAX_DEFER)
    fresh = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(scheduler=rules)
    try:
        first = [row.record.id for row in kept_table(fresh).rows]
        # What the index held, served at once, but for the log that is gone: each entry of the
        # listing a server left must name a log that is there (the cache folder is not trusted).
        assert first == ["good", "bad"]
        # The popup after the walk is the walk's listing (waited for as the listing requests see).
        wait_for(lambda: [row.record.id for row in kept_table(fresh).rows] == ["new", "good", "bad"])
        assert fresh.walked != {}
    finally:
        fresh.close()


def test_the_stored_listing_ignores_rows_a_walk_of_the_root_would_never_make(tmp_path: Path) -> None:
    """The index folder is not trusted: a row for a path outside the root, or not at a session
    directory's log name, lists nothing."""
    root = tmp_path / "sessions"
    store(root)
    age(root)
    index = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    index.list_sessions()
    outside = put(tmp_path / "elsewhere", "evil", lines(header("evil", createdAt=99)))
    project = os.path.dirname(os.path.dirname(put(root, "x", b"")))
    fp = fingerprint(0, 0, 0, 0, 0)
    forged = [
        outside,
        os.path.join(root, "..", "elsewhere", "session.jsonl"),
        os.path.join(project, "session.jsonl"),
        os.path.join(project, "x", "evil.jsonl"),
    ]
    for path in forged:
        listing = json.dumps({"a": [[path, "none", {"id": "evil", "createdAt": 99}]], "b": []})
        index.keep_listing(path, fp, time.time_ns(), listing)
    stored = index.stored_listing()
    assert not stored.whole
    assert [record.id for record in stored.records] == ["good", "bad", "plain"]
    assert not set(stored.walked) & set(forged)
    index.close()


def test_a_server_leaves_its_listing_whole_with_its_titles_for_the_next(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The next server reads the listing and its titles as one document, not row by row."""
    root, expected, titles = left_by_a_server(tmp_path, monkeypatch)

    index = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    records, walked, kept, whole, directories, hints = index.stored_listing()
    assert whole and directories == 4  # a project directory and three session directories
    assert hints == frozenset()  # every title verified
    assert records == expected
    assert [kept[str(record.location)] for record in records] == titles  # the damaged log's error too
    assert index.walked == {} and walked == {
        str(r.location): fingerprint_at(str(r.location)) for r in records
    }
    index.close()


def test_a_kept_listing_is_read_back_only_if_a_walk_of_the_root_could_have_made_it(tmp_path: Path) -> None:
    from dsh_session_reference.store.index.kept import MAX_ENTRY_BYTES, kept_listing, listing_pieces
    from dsh_session_reference.store.index.rows import MAX_MISSING

    root = tmp_path / "sessions"
    store(root)
    exact = JsonlSessionStore(root)
    records = exact.list_sessions()
    walked = {str(r.location): fingerprint_at(str(r.location)) for r in records}
    titles = [TitleObservation(r.id, title=f"T {r.id}") for r in records[:2]] + [None]
    # The second title a hint the server that left it had not verified yet.
    marked = [(titles[0], False), (titles[1], True), None]
    text = b"".join(listing_pieces(str(root), records, walked, marked, 7)).decode()

    def read(document: str, pieces: int = 1) -> Any:
        data = document.encode()
        size = max(1, len(data) // pieces)
        return kept_listing([data[at : at + size] for at in range(0, len(data), size)], str(root))

    for pieces in (1, 3, len(text)):  # however it arrives
        kept = read(text, pieces)
        assert kept is not None
        assert kept.records == records and kept.walked == walked and kept.directories == 7
        assert list(kept.titles.values()) == titles[:2]
        assert kept.hints == {str(records[1].location)}
    head, *entries = text.splitlines()

    def with_entry(number: int, change: Any) -> str:
        entry = json.loads(entries[number])
        change(entry)
        changed = [*entries[:number], json.dumps(entry), *entries[number + 1 :]]
        return "\n".join([head, *changed]) + "\n"

    forgeries = [
        with_entry(
            0, lambda e: e.__setitem__(0, str(tmp_path / "elsewhere" / "-w" / "good" / "session.jsonl"))
        ),
        with_entry(0, lambda e: e.__setitem__(0, os.path.join("..", "x", "session.jsonl"))),
        with_entry(0, lambda e: e.__setitem__(0, os.path.join("-w", "good", "x", "session.jsonl"))),
        with_entry(1, lambda e: e.__setitem__(0, json.loads(entries[0])[0])),  # one path twice
        with_entry(0, lambda e: e.__setitem__(1, [1, 2, 3, 4, "5"])),
        with_entry(0, lambda e: e.__setitem__(0, os.path.join("-w\0", "good", "session.jsonl"))),
        with_entry(0, lambda e: e.__setitem__(0, os.path.join("-w\ud800", "good", "session.jsonl"))),
        with_entry(0, lambda e: e.__setitem__(3, ["a title", 5])),
        with_entry(0, lambda e: e.__setitem__(3, ["a title", None, False])),  # only a hint is marked
        with_entry(0, lambda e: e.__setitem__(3, ["a title", None, True, True])),
        "\n".join([head, '["not", "an", "entry"]']) + "\n",
        text.replace('"v":3', '"v":2'),  # the document a server of another format left
        text[:-1],  # cut short
        json.dumps({"l": [json.loads(entry) for entry in entries]}),  # the whole document at once
        "not json\n",
        "",
    ]
    for forged in forgeries:
        assert read(forged) is None, forged
    # A line longer than any entry a server writes is refused without being parsed.
    long = with_entry(0, lambda e: e[2].__setitem__("padding", "x" * MAX_ENTRY_BYTES))
    assert read(long, 50) is None
    # Entries naming logs that are not there (sessions deleted meanwhile) are left out, a few of
    # them; a document naming more is not a listing of this root.
    gone = [
        f'["-w/gone-{n}/session.jsonl",[1,2,3,4,5],{{"id":"gone-{n}","createdAt":1}},null]' for n in range(99)
    ]
    few = read("\n".join([head, *entries, *gone[:MAX_MISSING]]) + "\n")
    assert few is not None and few.records == records
    assert read("\n".join([head, *entries, *gone[: MAX_MISSING + 1]]) + "\n") is None


def test_the_listing_is_left_in_the_background_once_its_titles_are_verified(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only at exit (an editor may kill its server): once the titles are verified and the
    editor pauses, the background leaves the listing for the next server."""
    served_as_big(monkeypatch)
    root = tmp_path / "sessions"
    store(root)
    age(root)
    rules = Scheduler(idle_grace=0.0, max_defer=scheduler_module.MAX_DEFER)
    live = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(scheduler=rules)
    try:
        kept_table(live)

        def left() -> bool:
            reader = IndexedSessionStore(root, index_dir=tmp_path / "cache")
            try:
                return len(reader.stored_listing().titles) == 3
            finally:
                reader.close()

        wait_for(left)
    finally:
        live.close()


def test_a_listing_is_from_memory_only_with_the_titles_a_server_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A completion waits up to a second for an answer from memory (``MEMORY_PATIENCE``). Over an
    index that kept no listing, this server's own walk leaves every title to hint from its log
    first: not from memory, so the first ``@`` gets the "Listing" row at once (it waited the whole
    second in a starting editor). The next server takes the listing and its titles as claims."""
    served_as_big(monkeypatch)
    root = tmp_path / "sessions"
    store(root)
    age(root)
    first = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog()
    try:
        assert not first.from_memory()
        assert len(kept_table(first).rows) == 3  # walked
        assert not first.from_memory()
    finally:
        first.close()
    second = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog()
    try:
        assert len(kept_table(second).rows) == 3  # the listing the first left
        assert second.from_memory()
    finally:
        second.close()


def test_a_server_that_never_walked_still_leaves_its_listing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A short-lived server over an index the CLI filled answers from the rows and closes before its
    walk comes: the listing it served is left whole for the next (it is what the rows say)."""
    served_as_big(monkeypatch)
    root = tmp_path / "sessions"
    store(root)
    age(root)
    filled = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    titles = filled.read_titles(filled.list_sessions())
    filled.close()
    paused = Scheduler(idle_grace=60.0, max_defer=60.0)
    short = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(scheduler=paused)
    kept_table(short)
    assert short.walked == {}
    short.close()
    after = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    records, _, kept, whole, _, hints = after.stored_listing()
    assert whole and [kept[str(record.location)] for record in records] == titles and not hints
    after.close()


def test_a_server_that_closes_before_verifying_leaves_its_hints_for_the_next_to_verify(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server closed seconds after its first ``@`` (a window reloaded) had only hinted its titles:
    it leaves them marked as hints, so the next server's first ``@`` shows them without scanning a
    log, then scans and verifies each. A hint is not a verified title: "bad"'s last title line
    reads "Looks fine", but the log is damaged, and where a scan agrees with a hint it proves
    nothing (both read the same bytes), so the verified label (its id) replaces it."""
    served_as_big(monkeypatch)
    root = tmp_path / "sessions"
    store(root)
    age(root)
    paused = Scheduler(idle_grace=60.0, max_defer=60.0)  # nothing runs behind: nothing verified
    short = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(scheduler=paused)
    hinted = {row.record.id: row.label for row in kept_table(short).rows}
    assert hinted == {"good": "Good", "bad": "Looks fine", "plain": "plain"}
    short.close()

    after = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    records, _, kept, whole, _, hints = after.stored_listing()
    after.close()
    assert whole and hints == {str(record.location) for record in records}
    assert {record.id: kept[str(record.location)].title for record in records} == {
        "good": "Good",
        "bad": "Looks fine",
        "plain": None,  # no title line: labelled by its id
    }

    def no_scan(*args: object) -> None:
        raise AssertionError("the first answer scanned a log")

    monkeypatch.setattr(titles_module, "scan_last_title", no_scan)
    rules = Scheduler(idle_grace=0.0, max_defer=scheduler_module.MAX_DEFER)
    fresh = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(scheduler=rules)
    try:
        assert {row.record.id: row.label for row in kept_table(fresh).rows} == hinted
        wait_for(lambda: {row.record.id: row.label for row in kept_table(fresh).rows}["bad"] == "bad")
        assert {row.record.id: row.label for row in kept_table(fresh).rows}["good"] == "Good"
    finally:
        fresh.close()


def test_a_server_closed_before_its_hints_leaves_a_listing_the_next_answers_at_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server closed right after its first answer had scanned hints for only the logs its time
    allowed (none here): the listing it leaves holds the rest without titles. The next server's
    first table over it looked each of those up in the rows, one query a log, then scanned them
    all (or read them whole) before it answered: 0.3 s at 3,000 sessions, so its first ``@``
    was the "Listing dsh sessions…" row. Now it scans only the first rows it is asked for (rank
    order), labels the rest by their id, and scans those behind it."""
    served_as_big(monkeypatch)
    root = tmp_path / "sessions"
    for n in range(6):
        put(root, f"s{n}", lines(header(f"s{n}", createdAt=10 - n), *one_turn(0, "hi"), title(3, f"T{n}")))
    age(root)
    monkeypatch.setattr(titles_module, "HINT_BUDGET", 0.0)  # closed before it scanned a log
    paused = Scheduler(idle_grace=60.0, max_defer=60.0)
    short = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(scheduler=paused)
    assert {row.label for row in kept_table(short).rows} == {f"s{n}" for n in range(6)}
    short.close()
    left = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    assert left.stored_listing().titles == {}
    left.close()

    monkeypatch.setattr(titles_module, "HINT_BUDGET", 60.0)
    monkeypatch.setattr(catalog, "STORED_HINT_ROWS", 2)
    scanned: list[str] = []
    scan = titles_module.scan_last_title

    def counted(location: str, *args: Any) -> str | None:
        scanned.append(os.path.basename(os.path.dirname(location)))
        return scan(location, *args)

    looked_up: list[str] = []
    row = IndexedSessionStore.row

    def counted_row(self: IndexedSessionStore, path: str) -> Any:
        looked_up.append(path)
        return row(self, path)

    monkeypatch.setattr(titles_module, "scan_last_title", counted)
    monkeypatch.setattr(IndexedSessionStore, "row", counted_row)
    fresh = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(scheduler=paused)
    try:
        rows = kept_table(fresh).select("", None, None, 10)  # in rank order
        order = [row.record.id for row in rows]
        assert scanned == order[:2] and looked_up == []
        assert [row.label for row in rows] == [f"T{id[1:]}" for id in order[:2]] + order[2:]
        assert len(rows) == 6
    finally:
        fresh.close()


def test_the_first_walk_replaces_what_a_forged_stored_listing_said(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stored listing is the index's word only until the first walk: a record whose header the
    walk read differently is the walk's, even where the log itself did not change."""
    from dsh_session_reference.store.index.kept import kept_listing, listing_pieces

    root, expected, titles = left_by_a_server(tmp_path, monkeypatch)
    index = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    stored = index.stored_listing()
    forged = [
        SessionRecord(r.id, 999, "/evil", {**r.header, "createdAt": 999, "cwd": "/evil"}, r.location)
        if r.id == "good"
        else r
        for r in stored.records
    ]
    kept_titles = [(title, False) for title in titles]
    index._database().write_listing(listing_pieces(str(root), forged, stored.walked, kept_titles, 3))
    with index._database().kept_listing() as pieces:
        assert pieces is not None and kept_listing(pieces, str(root)) is not None
    index.close()

    rules = Scheduler(idle_grace=0.0, max_defer=scheduler_module.MAX_DEFER)
    fresh = IndexedSessionStore(root, index_dir=tmp_path / "cache").start_catalog(scheduler=rules)
    try:
        assert kept_table(fresh).rows[0].record.cwd == "/evil"  # the stored word, at first
        wait_for(lambda: [row.record for row in kept_table(fresh).rows] == expected)
        assert fresh.walked != {}
    finally:
        fresh.close()


def test_title_workers_started_ahead_are_all_stopped_when_one_cannot_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from dsh_session_reference.store.index import verify

    started: list[Any] = []

    class Failing(verify.WorkerProcess):
        def __init__(self) -> None:
            if len(started) == 2:
                raise OSError("no more processes")
            super().__init__()
            started.append(self)

    monkeypatch.setattr(verify, "WorkerProcess", Failing)
    workers = verify.TitleWorkers(4)
    workers.start()
    assert len(started) == 2
    assert all(worker._process.poll() is not None for worker in started)  # none left running
    workers.close()


def test_a_kept_listing_too_big_to_be_ours_is_not_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cache folder is not trusted: a document past the bound is never read into memory."""
    from dsh_session_reference.store.index import database

    root, _, _ = left_by_a_server(tmp_path, monkeypatch)
    index = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    with index._database().kept_listing() as pieces:
        assert pieces is not None
        size = sum(map(len, pieces))
    monkeypatch.setattr(database, "MAX_LISTING_BYTES", size - 1)
    with index._database().kept_listing() as pieces:
        assert pieces is None
    assert not index.stored_listing().whole  # the rows answer instead
    index.close()


def test_a_watched_big_root_says_what_changed_and_walks_for_new_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a root served from memory, a log that changed is said at once (readers check each log's
    fingerprint); a new session is said after the walk it asks for, which runs without waiting
    for the editor to pause."""
    monkeypatch.setattr(catalog, "SYNC_MAX_SESSIONS", 1)
    log = Path(put(tmp_path, "s-a", lines(header("s-a"), *one_turn(), title(6, "A"))))
    put(tmp_path, "s-b", lines(header("s-b"), *one_turn()))
    source = open_live(str(tmp_path))
    try:
        source.list_sessions()
        told: list[StoreChange] = []
        source.catalog.listeners.add(told.append)
        with log.open("ab") as handle:
            handle.write(lines(title(7, "A, renamed")))
        source.catalog._watched(frozenset({str(log)}))  # type: ignore[attr-defined]
        assert told[0] == StoreChange(frozenset({"s-a"}), False)
        new = Path(put(tmp_path, "s-c", lines(header("s-c"), *one_turn()))).parent
        source.catalog._watched(frozenset({str(new)}))  # type: ignore[attr-defined]
        deadline = time.monotonic() + 5
        while len(told) < 2:
            assert time.monotonic() < deadline, told
            time.sleep(0.02)
        assert told[1].listing is True and "s-a" in told[1].sessions
        assert "s-c" in {record.id for record in source.list_sessions()}
    finally:
        source.close()


def test_a_session_seen_during_a_walk_is_walked_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A new session the watcher sees while the walk it asked for runs is not told as listed by
    that walk (which did not see it): it asks for a walk of its own, which lists it."""
    monkeypatch.setattr(catalog, "SYNC_MAX_SESSIONS", 1)
    put(tmp_path, "s-a", lines(header("s-a"), *one_turn()))
    put(tmp_path, "s-b", lines(header("s-b"), *one_turn()))
    source = open_live(str(tmp_path))
    try:
        source.list_sessions()
        real = source.catalog._refresh  # type: ignore[attr-defined]
        walks: list[int] = []

        def walk(*args: Any, **kwargs: Any) -> Any:
            result = real(*args, **kwargs)
            walks.append(1)
            if len(walks) == 1:  # s-d appears once this walk has listed the root
                new = Path(put(tmp_path, "s-d", lines(header("s-d"), *one_turn()))).parent
                source.catalog._watched(frozenset({str(new)}))  # type: ignore[attr-defined]
            return result

        monkeypatch.setattr(source.catalog, "_refresh", walk)
        new = Path(put(tmp_path, "s-c", lines(header("s-c"), *one_turn()))).parent
        source.catalog._watched(frozenset({str(new)}))  # type: ignore[attr-defined]
        deadline = time.monotonic() + 0.9  # under REFRESH_AFTER: no request-driven walk helps
        while "s-d" not in {record.id for record in source.catalog.snapshot.records}:  # type: ignore[union-attr]
            assert time.monotonic() < deadline, f"s-d never listed after {len(walks)} walks"
            time.sleep(0.02)
    finally:
        source.close()


def test_a_dropped_watched_catalog_is_collected_and_stops_watching(tmp_path: Path) -> None:
    """The server drops a root's catalog when the root setting changes: watching must not keep it
    (or its threads) alive."""
    put(tmp_path, "s-a", lines(header("s-a"), *one_turn()))
    source = open_live(str(tmp_path))
    source.list_sessions()
    assert source.watch(lambda change: None) is None
    dropped = weakref.ref(source)
    del source
    gc.collect()
    deadline = time.monotonic() + 5
    while dropped() is not None or any(t.name == "dsh-session-watch" for t in threading.enumerate()):
        assert time.monotonic() < deadline, [t.name for t in threading.enumerate()]
        gc.collect()
        time.sleep(0.05)


def test_a_store_dropped_during_a_background_round_ends_it_quietly(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The catalog holds its store weakly: a store dropped while a round runs (the root setting
    changed) made the round fail on the store's proxy, logged with its traceback, which held the
    round's frame and so the catalog and its threads for as long as the record was kept (a test
    saw them alive 5 s later). The round now ends as a closed source's does, and says nothing."""
    put(tmp_path, "s-a", lines(header("s-a"), *one_turn()))
    source = open_live(str(tmp_path))
    source.list_sessions()
    held = source.catalog  # type: ignore[attr-defined]
    assert held is not None
    del source
    gc.collect()
    with caplog.at_level(logging.INFO, logger="dsh_session_reference"):
        assert held._work() is None
    assert not [record for record in caplog.records if record.levelno >= logging.WARNING], caplog.text
    dropped = weakref.ref(held)
    del held
    gc.collect()
    assert dropped() is None


def test_a_new_session_is_walked_for_while_the_editor_is_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sessions that came or went are walked for as soon as no request is being answered, not at
    the editor's next pause: here the editor never pauses (it is touched every 20 ms, and a pause
    would have to last 30 s), yet the new session is listed."""
    monkeypatch.setattr(catalog, "SYNC_MAX_SESSIONS", 1)
    put(tmp_path, "s-a", lines(header("s-a"), *one_turn()))
    put(tmp_path, "s-b", lines(header("s-b"), *one_turn()))
    scheduler = Scheduler(idle_grace=30.0, max_defer=30.0)
    source = IndexedSessionStore(str(tmp_path), persistent=False).start_catalog(scheduler=scheduler)
    try:
        source.list_sessions()
        new = Path(put(tmp_path, "s-c", lines(header("s-c"), *one_turn()))).parent
        source.touch()
        source.catalog._watched(frozenset({str(new)}))  # type: ignore[attr-defined]
        deadline = time.monotonic() + 5
        while "s-c" not in {record.id for record in source.catalog.snapshot.records}:  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the walk waited for a pause"
            source.touch()
            time.sleep(0.02)
    finally:
        source.close()
