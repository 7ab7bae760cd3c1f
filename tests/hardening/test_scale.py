"""A very big sessions root (issue 35, item 6): what a skipped log costs, how long ``exit`` takes, and
what a storm of cancelled requests does to the next ``@``.

The issue measured 200,000 sessions (``scripts/bench --setting 200k``, docs/benchmarks.md); these
tests hold the same costs at sizes CI can afford: each failed on the code before its fix.
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import math
import os
import pickle
import stat
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from lsp_harness import lsp_session
from lsprotocol import types

from dsh_session_reference.assembly import open_live
from dsh_session_reference.candidate_cache import _Kept, _relabelled
from dsh_session_reference.candidates import CandidateTable
from dsh_session_reference.model import SessionRecord, StoreChange, StoreError, TitleObservation
from dsh_session_reference.store import catalog, listing
from dsh_session_reference.store import titles as titles_module
from dsh_session_reference.store.changes import changed_sessions
from dsh_session_reference.store.index import database
from dsh_session_reference.store.index.headers import compact_header
from dsh_session_reference.store.index.kept import SharedWithRows, StoredListing, same_header
from dsh_session_reference.store.index.rows import (
    RACY_NS,
    SETTLED_NS,
    Fingerprint,
    IndexRow,
    ListingEntry,
    entry_text,
    fingerprint,
    fp_numbers,
    fp_parse,
    fp_text,
    header_text,
    parse_listing,
)
from dsh_session_reference.store.index.store import IndexedSessionStore
from dsh_session_reference.store.layout import log_path
from dsh_session_reference.store.listed import Listed
from dsh_session_reference.store.listing import Skips, Walk
from dsh_session_reference.store.root_state import root_state
from dsh_session_reference.store.scheduler import Scheduler
from dsh_session_reference.store.titles import TitleBoard
from dsh_session_reference.store.writer import SessionLog, encode_log

from .audit import audited_env, audited_server_command

SKIPPED_LOGS = 20_000
BYTES_PER_SKIPPED_LOG = 1_500
"""Before: 1,966-2,178 bytes a skipped log (its row, the listing entry's text and a formatted
message naming three paths); now about 1,040, most of it the row every log has (path, fingerprint)."""

BASE_MS = 1_735_000_000_000


def _session_id(number: int) -> str:
    return f"0198c2a4-7b1e-7c3d-9f00-{number:012d}"


def _log_bytes(session_id: str, cwd: str, title: str | None = None) -> bytes:
    log = SessionLog(session_id, BASE_MS, cwd=cwd)
    seq = log.user("hello")
    if title is not None:
        log.title(title, message_seqs=[seq])
    log.commit()
    return encode_log(log, "zstd")


def _misnamed_root(base: Path, count: int) -> tuple[Path, bytes]:
    """``count`` logs in dsh's format, each holding the header of one other session (0): none can
    be listed, each is skipped with upstream's identity failure."""
    root = base / "sessions"
    data = _log_bytes(_session_id(0), "/home/dev/shop")
    for number in range(1, count + 1):
        path = Path(log_path(str(root), "/home/dev/shop", _session_id(number), "zstd"))
        path.parent.mkdir(parents=True)
        path.write_bytes(data)
    return root, data


def _kept_by_listing(root: Path, index_dir: Path, expected: list[list[SessionRecord] | int]) -> int:
    """Bytes a live catalog over ``root`` keeps once it has listed it, once per ``expected`` entry
    (each the listing, or how many sessions it holds), measured with ``tracemalloc``. A small root
    is listed first, so the modules a listing imports when first needed are not counted (alone,
    they were 60 bytes a session of a test that passed only after others had imported them)."""
    warm = open_live(
        str(_titled_root(index_dir.parent / "warm", 3)), index_dir=index_dir.parent / "warm-index"
    )
    try:
        assert len(warm.list_sessions()) == 3
    finally:
        warm.close()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        source = open_live(str(root), index_dir=index_dir)
        try:
            for listing in expected:
                records = source.list_sessions()
                assert (len(records) if isinstance(listing, int) else records) == listing
            gc.collect()
            return tracemalloc.get_traced_memory()[0] - before
        finally:
            source.close()
    finally:
        tracemalloc.stop()


def test_a_skipped_log_costs_a_constant(tmp_path: Path) -> None:
    """Before: 150,000 logs whose header names another session kept 327 MB (1,966 bytes a log
    here): each row held its listing entry's text and the parsed entry, each with a message that
    spells out the log's path twice and the path its header names. Now a row keeps the header's id
    and cwd, and the message is made when said (what is said: the next test)."""
    root, _ = _misnamed_root(tmp_path, SKIPPED_LOGS)
    gc.collect()
    logging.disable(logging.WARNING)  # 20,000 warnings, each its own record, are not the store's
    try:
        # The second listing is the rows' turn: the same, from memory.
        kept = _kept_by_listing(root, tmp_path / "index", [[], []])
    finally:
        logging.disable(logging.NOTSET)
    assert kept / SKIPPED_LOGS < BYTES_PER_SKIPPED_LOG, f"{kept / SKIPPED_LOGS:.0f} bytes a skipped log"


def test_a_skipped_log_says_the_same_from_its_log_and_from_its_row(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The report names the log, the id its header holds and the path that id names, as before,
    whether the log was read or its row answered (a reopened index); so does a read of its id."""
    root, _ = _misnamed_root(tmp_path, 3)
    session = _session_id(2)
    path = log_path(str(root), "/home/dev/shop", session, "zstd")
    named = log_path(str(root), "/home/dev/shop", _session_id(0), "zstd")
    message = f'corrupt session log "{path}": header id "{_session_id(0)}" and cwd identify "{named}"'
    for _ in range(2):
        caplog.clear()
        store = IndexedSessionStore(str(root), index_dir=tmp_path / "index")
        try:
            with caplog.at_level(logging.WARNING, logger="dsh_session_reference.store"):
                assert store.list_sessions() == []
            with pytest.raises(StoreError) as failure:
                store.locate(session, None)
        finally:
            store.close()
        assert str(failure.value) == f"session persistence listing failed: {message}"
        said = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"skipping {path}:")]
        assert said == [f"skipping {path}: {message}"]


def test_a_forged_skipped_row_is_said_never_raised(tmp_path: Path) -> None:
    """A row the cache folder's writer forged may name an id no path can hold: its message says so
    (a walk never makes one), rather than failing the walk that says it."""
    path = log_path(str(tmp_path), "/w", "s", "zstd")
    entry = parse_listing('{"a":[],"b":[],"m":["",null]}', path)
    assert entry is not None and len(entry.blocks) == 1
    assert str(entry.blocks[0]) == f'corrupt session log "{path}": header id cannot name a storage path'
    assert parse_listing(entry_text(entry, path), path) == entry


EXIT_ROWS = 200_000
CLOSE_BOUND = 3.0
"""The issue's bound for ``exit`` is 1 s at any size (before: 2.6-3.7 s at 200,000 sessions; 14.9 s
for this test's catalog). Closing writes for at most 0.5 s, then drops the rest; the margin is for a
loaded CI machine (1.04 s was seen at a load average of 15), the figure itself is the benchmark's."""


def test_closing_while_the_rows_are_being_loaded_does_not_wait_for_the_load(tmp_path: Path) -> None:
    """A server over the index a previous one left, closed while its first walk loads the rows
    (200,000 of them, each looked at: seconds with the rows' lock held): ``exit`` took 4.1-4.5 s,
    waiting for the load to end. Here another thread holds the lock as that load does, for longer
    than the bound; closing writes nothing it cannot take the lock for and leaves the file as it is."""
    root = tmp_path / "sessions"
    root.mkdir()
    index = IndexedSessionStore(str(root), index_dir=tmp_path / "index")
    index.table()  # the index file made
    loading, release = threading.Event(), threading.Event()

    def load() -> None:
        with index._lock:
            loading.set()
            release.wait(4 * CLOSE_BOUND)

    loader = threading.Thread(target=load)
    loader.start()
    try:
        assert loading.wait(10)
        started = time.monotonic()
        index.close()
        took = time.monotonic() - started
    finally:
        release.set()
        loader.join()
    assert took < CLOSE_BOUND, f"closing took {took:.2f} s"


def test_a_change_dsh_writes_costs_no_table_of_every_session_directory() -> None:
    """The first change the watcher saw under a listed root made a table of every listed
    session's directory, a new string each (46 MB at 200,000 sessions, kept with the listing).
    Now a changed path is matched by its session's log: the same sessions and listing change are
    told, and matching them takes a few kilobytes at 20,000 sessions."""
    root = "/home/dev/.dsh/sessions"
    records, walked = [], {}
    for number in range(20_000):
        session_id = _session_id(number)
        location = log_path(root, "/home/dev/shop", session_id, "zstd" if number % 2 else "none")
        header = {"id": session_id, "createdAt": BASE_MS - number, "cwd": "/home/dev/shop"}
        records.append(SessionRecord(session_id, BASE_MS - number, "/home/dev/shop", header, location))
        walked[location] = fingerprint(1, number, 100, BASE_MS * 1_000_000, BASE_MS * 1_000_000)
    listed = Listed.of(records, walked, -math.inf, len(records))
    zstd, plain = str(records[1].location), str(records[2].location)
    project = os.path.dirname(os.path.dirname(zstd))
    tracemalloc.start()
    try:
        for paths, sessions, listing in (
            ({zstd}, {records[1].id}, False),
            ({plain, os.path.dirname(zstd)}, {records[1].id, records[2].id}, True),
            ({os.path.join(project, "new-session", "session.jsonl")}, set(), True),
            ({os.path.join(os.path.dirname(plain), "notes", "x")}, set(), True),
        ):
            change = changed_sessions(root, frozenset(paths), listed.in_directory)
            assert change == StoreChange(frozenset(sessions), listing), paths
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 10, peak  # a table of 20,000 directories: about 4 MB


def test_rows_waiting_to_be_written_cost_a_pointer_each(tmp_path: Path) -> None:
    """Every row a first walk makes waits to be written to the index file: they waited in a table
    of path to row, 7.7 MB at the end of a 200,000-session root's first walk (its peak), 20 bytes
    a row here. Now in a list of their paths, each written as its row is when its turn comes: 8.
    A row replaced meanwhile is written as it is then, one removed is removed."""
    root = tmp_path / "sessions"
    root.mkdir()
    index = IndexedSessionStore(str(root), index_dir=tmp_path / "index", autoflush=False)
    count = 20_000
    locations = [log_path(str(root), "/home/dev/shop", _session_id(n), "zstd") for n in range(count)]
    fp = fingerprint(1, 2, 100, BASE_MS * 1_000_000, BASE_MS * 1_000_000)
    try:
        index.keep_listing(locations[0], fp, BASE_MS * 1_000_000, '{"a":[],"b":[]}')
        index.flush()  # the index file made, SQLite warmed up
        gc.collect()
        tracemalloc.start()
        try:
            for location in locations:
                index.keep_listing(location, fp, BASE_MS * 1_000_000, '{"a":[],"b":[]}')
            index.keep_listing(locations[7], fp, BASE_MS * 1_000_000, '{"a":[],"b":[["x","y","z"]]}')
            waiting = tracemalloc.get_traced_memory()[0]
            index.flush()
            gc.collect()
            each = (waiting - tracemalloc.get_traced_memory()[0]) / count
        finally:
            tracemalloc.stop()
    finally:
        index.close()
    assert each < 12, f"{each:.0f} bytes a waiting row"
    again = IndexedSessionStore(str(root), index_dir=tmp_path / "index", autoflush=False)
    try:
        written = again._database().load_row(locations[7])
        assert written is not None and written.listing_text(locations[7]) == '{"a":[],"b":[["x","y","z"]]}'
        assert again._database().load_row(locations[-1]) is not None
    finally:
        again.close()


def test_the_root_s_state_takes_a_project_s_entries_one_at_a_time(tmp_path: Path) -> None:
    """The background's check whether a big root changed listed each project's entries first:
    18,000 sessions in a project (the 200,000-session benchmark's) made 7 MB at once, a jump of a
    server's peak every time it looked. Now each entry is taken as it comes: the same digest, and
    at 5,000 session directories a peak of a few kilobytes (about 350 bytes an entry before)."""
    root = tmp_path / "sessions"
    project = root / "--home-dev-shop--"
    for number in range(5_000):
        (project / _session_id(number)).mkdir(parents=True)
    log = Path(log_path(str(root), "/home/dev/shop", _session_id(3), "zstd"))
    log.write_bytes(b"x")
    (project / "stray.txt").write_bytes(b"")
    before = root_state(str(root))
    tracemalloc.start()
    try:
        assert root_state(str(root)) == before
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 100_000, f"a peak of {peak:,} bytes"
    log.write_bytes(b"xy")
    assert root_state(str(root)) != before  # a log that changed changes it


def test_a_root_s_state_tells_apart_logs_whose_packed_fingerprints_hash_alike(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A packed fingerprint is one ``int``, whose hash is the number modulo a prime: a log one byte
    shorter and a power of two nanoseconds newer hashes alike. The root's state hashed it so, and a
    background check would have kept the listing of a log rewritten so."""
    root = tmp_path / "sessions"
    log = Path(log_path(str(root), "/home/dev/shop", _session_id(1), "zstd"))
    log.parent.mkdir(parents=True)
    log.write_bytes(b"x" * 50_000)
    real = os.lstat(log)

    def moved(size: int, later: int) -> os.stat_result:
        fields = list(real)
        fields[stat.ST_SIZE] = real.st_size + size
        return os.stat_result(
            fields, {"st_mtime_ns": real.st_mtime_ns + later, "st_ctime_ns": real.st_ctime_ns + later}
        )

    def packed(info: os.stat_result) -> int:
        return fingerprint(info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)

    later = next(1 << k for k in range(60) if hash(packed(moved(-1, 1 << k))) == hash(packed(real)))
    states = []
    for status in (real, moved(-1, later)):
        monkeypatch.setattr(
            os, "lstat", lambda path, status=status: status if path == str(log) else _LSTAT(path)
        )
        states.append(root_state(str(root)))
    assert states[0] != states[1]


_LSTAT = os.lstat


def test_a_walk_holds_a_project_s_names_not_its_directory_entries(tmp_path: Path) -> None:
    """A walk sorts each project's entries by their bytes, as libuv does. It held ``scandir``'s
    entries, each with its path, and a bytes key each while sorting: 7 MB at once for a project
    of 18,000 sessions, at every walk of a big root (352 bytes an entry at the peak here). Now
    names and kinds: under 200. The order is the bytes' still, names that are not UTF-8 included."""
    project = tmp_path / "--home-dev-shop--"
    names = [_session_id(number) for number in range(5_000)]
    for name in names:
        (project / name).mkdir(parents=True)
    (project / "note.jsonl").write_bytes(b"")
    os.symlink(project / names[0], project / "a-link")
    tracemalloc.start()
    try:
        entries = listing.sorted_entries(str(project))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak / len(entries) < 200, f"{peak / len(entries):.0f} bytes an entry"
    assert [name for name, _ in entries] == sorted(os.listdir(project))
    kinds = dict(entries)
    assert kinds[names[7]] == listing.DIRECTORY and kinds["note.jsonl"] == listing.FILE
    assert kinds["a-link"] == listing.OTHER
    for odd in ("é-dir", "\u00e9", "z", "\uffff", "\U0001f600", os.fsdecode(b"\xff-not-utf8")):
        os.mkdir(os.path.join(project, odd))
        expected = sorted(os.listdir(project), key=os.fsencode)
        assert [name for name, _ in listing.sorted_entries(str(project))] == expected, odd


def test_the_board_s_queues_shrink_as_they_drain() -> None:
    """The logs queued for verification and those left to hint kept the table they grew to until
    the last was taken (a dict keeps its table as it empties): at 200,000 sessions 7.7 MB each,
    held while every title verified meanwhile was held too (the peak of a cold root's
    server). They are copied smaller as they drain, in their order."""
    board = TitleBoard()
    fp = fingerprint(1, 2, 3, 4, 5)
    records = [
        SessionRecord(_session_id(n), BASE_MS, "/p", {}, f"/r/--p--/{_session_id(n)}/session.jsonl.zstd")
        for n in range(20_000)
    ]
    board.enqueue({str(record.location): record for record in records})
    grown = sys.getsizeof(board.queued)
    while len(board.queued) > 3_500:
        batch = board.waiting(64)
        board.take(batch)
        board.done(batch)
    # Copied once fewer than its table's share are left, not only once four fifths are gone.
    assert sys.getsizeof(board.queued) < grown / 2, (sys.getsizeof(board.queued), grown)
    while len(board.queued) > 1_000:
        batch = board.waiting(64)
        board.take(batch)
        board.done(batch)
    assert sys.getsizeof(board.queued) < grown / 3, (sys.getsizeof(board.queued), grown)
    assert board.waiting(3) == records[-len(board.queued) :][:3]  # still in their order
    board.hint_in_order(records, range(len(records)), lambda location: fp, "/", None, rows=0)
    scanned = 0

    def go_on() -> bool:
        return scanned < 19_000

    def listed_at(location: str) -> Fingerprint:
        nonlocal scanned
        scanned += 1
        return fp

    titles_module.scan_last_title, real = (lambda location, root, stop: None), titles_module.scan_last_title
    try:
        board.scan_hints("/", go_on, listed_at)
    finally:
        titles_module.scan_last_title = real
    assert len(board.to_scan) == 1_000 and sys.getsizeof(board.to_scan) < grown / 3


def test_closing_a_catalog_with_a_big_listing_and_many_rows_pending_is_prompt(tmp_path: Path) -> None:
    """Before: a closing catalog wrote its whole listing (one JSON entry per session) and every
    row not yet written: ``exit`` took 2.6-3.7 s at 200,000 sessions. Here 200,000 listed sessions
    and as many pending rows (no logs are needed: what closing does with them is the question).
    Now the rows are written for at most half a second, the rest dropped (a cache: read again next
    time), and a listing over 10,000 sessions is left as the background last kept it."""
    root = tmp_path / "sessions"
    root.mkdir()
    index = IndexedSessionStore(str(root), index_dir=tmp_path / "index", autoflush=False).start_catalog()
    assert index.catalog is not None
    records, walked = [], {}
    for number in range(EXIT_ROWS):
        session_id = _session_id(number)
        location = log_path(str(root), "/home/dev/shop", session_id, "zstd")
        fp = fingerprint(1, number, 100, BASE_MS * 1_000_000, BASE_MS * 1_000_000)
        header = {"id": session_id, "createdAt": BASE_MS - number, "cwd": "/home/dev/shop"}
        records.append(SessionRecord(session_id, BASE_MS - number, "/home/dev/shop", header, location))
        walked[location] = fp
        index.keep_listing(location, fp, BASE_MS * 1_000_000, '{"a":[],"b":[]}')
    index.catalog.snapshot = Listed.of(records, walked, -math.inf, EXIT_ROWS)
    started = time.monotonic()
    index.close()
    took = time.monotonic() - started
    assert took < CLOSE_BOUND, f"closing took {took:.2f} s"
    # What was written is whole: the index opens again and answers from the rows it holds.
    again = IndexedSessionStore(str(root), index_dir=tmp_path / "index")
    try:
        assert again.stored_listing().records == []  # no log is there: every row is refused
    finally:
        again.close()


STORM_SESSIONS = 20_000
STORM_BOUND = 0.5
"""The issue's bound for the ``@`` after a storm of cancelled requests (the issue's: 300
``workspace/symbol`` requests, 100 candidates commands; before, at 200,000 sessions, 2.4 s and
3.4 s on the issue's host)."""


@pytest.fixture(scope="module")
def big_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Twenty thousand small sessions in dsh's format, titled."""
    root = tmp_path_factory.mktemp("big") / "sessions"
    for number in range(STORM_SESSIONS):
        session_id = _session_id(number)
        cwd = f"/home/dev/project-{number % 40}"
        path = Path(log_path(str(root), cwd, session_id, "zstd"))
        path.parent.mkdir(parents=True)
        path.write_bytes(_log_bytes(session_id, cwd, f"Session {number}"))
    return root


async def test_a_storm_of_cancelled_requests_does_not_hold_up_the_next_at(
    big_root: Path, workspace: Path
) -> None:
    """Each cancelled ``workspace/symbol`` or candidates request did its work on the pool completion
    shares (copying the listing and comparing the copy record by record with the one the candidate
    table was built for; while titles were verified, relabelling the table, each request its own
    copy) before it looked at its cancellation. Now the listing is shared, one request relabels
    and the others take its table, and a listing request waits 2 ms for the cancel a typing client
    sends right behind it. Right after a cold listing, with titles still being verified."""
    async with lsp_session(
        audited_server_command(), audited_env(workspace / "storm.log"), workspace, big_root
    ) as s:
        uri = s.open(workspace, "@1999")
        deadline = time.monotonic() + 120
        while not any(item.label == "Session 1999" for item in (await s.complete(uri)).items):
            assert time.monotonic() < deadline, "the root was never listed with its titles"
            await asyncio.sleep(0.25)  # a cold root's first listing, then its titles
        for method, params, count in (
            (types.WORKSPACE_SYMBOL, types.WorkspaceSymbolParams(query=""), 300),
            (
                types.WORKSPACE_EXECUTE_COMMAND,
                types.ExecuteCommandParams(
                    command="dshSessionReference.candidates", arguments=[{"query": ""}]
                ),
                100,
            ),
        ):
            futures = []
            for number in range(count):
                msg_id = f"storm-{method}-{number}"
                futures.append(s.client.protocol.send_request(method, params, msg_id=msg_id))
                s.client.cancel_request(types.CancelParams(id=msg_id))
            started = time.monotonic()
            answer = await s.complete(uri)
            took = time.monotonic() - started
            assert any(item.label == "Session 1999" for item in answer.items)
            assert took < STORM_BOUND, f"the @ after {count} cancelled {method}: {took:.2f} s"
            await asyncio.gather(*(asyncio.wrap_future(f) for f in futures), return_exceptions=True)


KEPT_LISTING_SESSIONS = 20_000


def _listed(
    root: Path, count: int, cwd: Callable[[int], str]
) -> tuple[list[SessionRecord], dict[str, Fingerprint]]:
    """``count`` records of sessions under ``root`` (session ``n`` in folder ``cwd(n)``, newest
    first) and their logs' fingerprints, as a walk lists them; no log is written."""
    records, walked = [], {}
    for number in range(count):
        session_id, folder = _session_id(number), cwd(number)
        location = log_path(str(root), folder, session_id, "zstd")
        header = {"id": session_id, "createdAt": BASE_MS - number, "cwd": folder}
        records.append(SessionRecord(session_id, BASE_MS - number, folder, header, location))
        walked[location] = fingerprint(1, number, 100, BASE_MS * 1_000_000, BASE_MS * 1_000_000)
    return records, walked


def _traced_peak(call: Callable[[], object]) -> int:
    """The most bytes ``call()`` held at once beyond what was held before it (``tracemalloc``)."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        call()
        return tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_keeping_a_big_listing_holds_its_document_once(tmp_path: Path) -> None:
    """The listing a server leaves for the next one (one JSON line a session) was made as its lines,
    their join, a copy of the join with the last line break and an encoded copy, all at once: a
    peak of 3.3 times the document here (at 200,000 sessions, a jump of a cold root's server once
    its titles were verified). Then it was encoded in pieces and written to the index as a blob
    piece by piece, the document held about once (1.1 times); then its pieces were held compressed
    until they were written (0.28 times: 11 MB at 200,000 sessions, at the peak of a cold root's
    server); now they are held in a file without a name beside the index (a piece or two)."""
    root = tmp_path / "sessions"
    root.mkdir()
    index = IndexedSessionStore(str(root), index_dir=tmp_path / "index", autoflush=False)
    records, walked = _listed(root, KEPT_LISTING_SESSIONS, lambda number: f"/home/dev/project-{number % 40}")
    try:
        index.keep_whole_listing(records, walked, KEPT_LISTING_SESSIONS)  # the index file made
        files = sorted(os.listdir(tmp_path / "index"))
        peak = _traced_peak(lambda: index.keep_whole_listing(records, walked, KEPT_LISTING_SESSIONS))
        assert sorted(os.listdir(tmp_path / "index")) == files  # the file that held it is gone
        with index._database().kept_listing() as pieces:
            assert pieces is not None
            document = sum(len(piece) for piece in pieces)
    finally:
        index.close()
    assert peak < 0.1 * document, f"peak {peak / document:.2f} times the {document:,}-byte document"
    again = IndexedSessionStore(str(root), index_dir=tmp_path / "index")
    try:
        assert again.stored_listing().records == []  # whole (no log is there: every entry refused)
    finally:
        again.close()


def test_an_index_kept_in_memory_holds_a_listing_it_writes_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A listing being kept is held in a file without a name beside the index; an index kept in
    memory (its folder inside the root, or one that cannot be written) has no folder of its own,
    and the system's temporary folder may be the root itself: nothing is made there, the listing
    is held in memory and kept whole."""
    root = tmp_path / "sessions"
    root.mkdir()

    def refused(*args: object, **kwargs: object) -> None:
        raise AssertionError("a file made for an index kept in memory")

    monkeypatch.setattr(database.tempfile, "TemporaryFile", refused)
    index = IndexedSessionStore(str(root), index_dir=root / "index", autoflush=False)
    records, walked = _listed(root, 100, lambda number: "/home/dev/shop")
    try:
        assert index.index_path is None
        index.keep_whole_listing(records, walked, 100)
        with index._database().kept_listing() as pieces:
            assert pieces is not None and b"".join(pieces).count(b"\n") == 101  # its head and 100
    finally:
        index.close()
    assert not (root / "index").exists()


def _shop_root(tmp_path: Path, count: int) -> Path:
    """``count`` logs of one project, last written an hour ago (so the index trusts its reads)."""
    root = tmp_path / "sessions"
    for number in range(count):
        path = Path(log_path(str(root), "/home/dev/shop", _session_id(number), "zstd"))
        path.parent.mkdir(parents=True)
        path.write_bytes(_log_bytes(_session_id(number), "/home/dev/shop", f"Session {number}"))
        os.utime(path, (time.time() - 3600,) * 2)
    return root


def _kept_by_a_first_store(root: Path, index: Path) -> list[SessionRecord]:
    """What a first server leaves in ``index``: every row, title and its whole listing."""
    first = IndexedSessionStore(str(root), index_dir=index)
    try:
        records = first.walk_listing()
        first.read_titles_exact(records)
        first.keep_whole_listing(records, first.walked, first.directories)
    finally:
        first.close()
    return records


def _share_as_the_catalog_does(store: IndexedSessionStore, kept: StoredListing) -> None:
    """Have the rows ``store`` loads share ``kept``'s objects, as the catalog that serves it does
    (with its own table of records and its title board)."""
    by_location = {str(record.location): record for record in kept.records}
    store.share_with(SharedWithRows(by_location, kept.walked, lambda path, _fp: kept.titles.get(path)))


def test_rows_loaded_after_a_kept_listing_share_its_headers_ids_titles_and_fingerprints(
    tmp_path: Path,
) -> None:
    """A server over a warm index holds the kept listing's records (its first answers, kept by the
    walk) and the rows the walk reads. Each had parsed its own header, id, title and fingerprint,
    all equal: about 560 bytes a session, 110 MB at 200,000. A row that says the same about its log
    now holds the listing's own objects; one that differs keeps what it read."""
    root = _shop_root(tmp_path, 12)
    records = _kept_by_a_first_store(root, tmp_path / "index")
    changed = Path(str(records[0].location))  # a log appended to since: its row is not used
    changed.write_bytes(_log_bytes(records[0].id, "/home/dev/shop", "Renamed"))
    again = IndexedSessionStore(str(root), index_dir=tmp_path / "index")
    try:
        kept = again.stored_listing()
        assert kept.whole and len(kept.records) == 12
        _share_as_the_catalog_does(again, kept)
        again.walk_listing()
        for record in kept.records[1:]:
            location = str(record.location)
            row = again.row(location)
            assert row is not None and row.parsed_listing is record.header  # the usual entry, folded
            entry = row.entry(location)
            assert entry is not None and entry.artifacts[0][2] is record.header
            assert row.fp is kept.walked[location]
            assert row.parsed_title is kept.titles[location]
        changed_row = again.row(str(changed))  # read again by the walk: its own objects
        assert changed_row is not None and changed_row.fp != kept.walked[str(changed)]
        assert changed_row.parsed_title is not kept.titles[str(changed)]
    finally:
        again.close()


def test_a_first_answer_from_a_kept_listing_holds_no_table_of_its_own_beside_the_catalog_s(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh server answers its first ``@`` from the listing a server left, claims its titles and
    has the rows the first walk loads share its objects. That made, at once, a table of every
    claim (a tuple each), and kept until the rows were loaded a table of the records by log and
    the listing's own table of titles by log, beside the catalog's table of records and its title
    board: 15 MB at 200,000 sessions held into the peak of a server over a kept index (1,014 ->
    934 bytes a session held after the first answer here, 901 -> 849 at 2,000 sessions). Now the
    claims are made as the board takes them and the rows share what the catalog holds, found
    where it holds it."""
    monkeypatch.setattr(catalog, "SYNC_MAX_SESSIONS", 1)  # answered from the kept listing
    count = 400
    root = _shop_root(tmp_path, count)
    _kept_by_a_first_store(root, tmp_path / "index")
    paused = Scheduler(idle_grace=60.0, max_defer=60.0)  # no walk behind the first answer
    source = IndexedSessionStore(str(root), index_dir=tmp_path / "index").start_catalog(scheduler=paused)
    try:
        assert source.catalog is not None
        records = source.list_sessions()
        gc.collect()
        assert len(records) == count
        board = source.catalog.titles
        assert len(board.observed) == count and all(entry.claimed for entry in board.observed.values())
        tables_of_titles = [
            held_table
            for held_table in gc.get_objects()
            if type(held_table) is dict
            and len(held_table) == count
            and all(type(value) is TitleObservation for value in held_table.values())
        ]
        assert tables_of_titles == []  # the listing's own titles went with the claims made
        snapshot = source.catalog.snapshot
        assert snapshot is not None
        shared = source._shared
        assert shared is not None and shared._records is snapshot.by_location
        row = source.row(str(records[0].location))  # loaded now: shares the catalog's objects
        assert row is not None and row.parsed_title is board.current(str(records[0].location), row.fp)
    finally:
        source.close()


def test_a_log_path_is_one_string_for_the_kept_listing_the_rows_and_the_walk(tmp_path: Path) -> None:
    """A log's path is a key of the kept listing's maps, of the index rows and of the walk's
    fingerprints, and the listing's records hold it. Each source made its own copy (the kept
    listing's document, the index file's rows, the walk's directory names): three strings a
    log over a warm index, 76 MB more than one at 200,000 sessions. Now all hold one object, and
    so does every later walk's."""
    root = _shop_root(tmp_path, 6)
    _kept_by_a_first_store(root, tmp_path / "index")
    again = IndexedSessionStore(str(root), index_dir=tmp_path / "index")
    try:
        kept = again.stored_listing()
        _share_as_the_catalog_does(again, kept)
        for walk in ("the first walk", "a walk after it"):
            walked = again.walk_listing()
            assert sorted(str(record.location) for record in walked) == sorted(
                str(record.location) for record in kept.records
            )
            keys = {
                "the rows": list(again.table()),
                "the walk's fingerprints": list(again.walked),
                "the walk's records": [record.location for record in walked],
            }
            for record in kept.records:
                for source, held in keys.items():
                    same = [key for key in held if key == record.location]
                    assert len(same) == 1 and same[0] is record.location, (walk, source)
    finally:
        again.close()


def test_the_rows_hold_their_log_paths_and_no_table_of_paths_beside_them(tmp_path: Path) -> None:
    """The one string a log's path is kept as was found in a table of every path to itself, held
    beside the rows, which are keyed by the same strings: 7.7 MB at 200,000 sessions for as long
    as a server ran, and made from a kept listing's paths before its rows were loaded (the peak
    over a kept index). A row now holds its path, rows loaded after a kept listing take its
    records' strings, and that table keeps only paths no row holds: none here."""
    root = _shop_root(tmp_path, 8)
    cold = IndexedSessionStore(str(root), index_dir=tmp_path / "cold")
    try:
        records = cold.walk_listing()
        assert cold._paths == {}
        for record in records:
            row = cold.row(str(record.location))
            assert row is not None and row.path is record.location
        assert cold.walk_listing() == records and cold._paths == {}  # a walk after it adds none
    finally:
        cold.close()
    _kept_by_a_first_store(root, tmp_path / "index")
    again = IndexedSessionStore(str(root), index_dir=tmp_path / "index")
    try:
        kept = again.stored_listing()
        _share_as_the_catalog_does(again, kept)
        assert again._paths == {}  # the kept listing's strings are its records'
        again.table()
        assert again._paths == {}  # and the rows loaded after it took them
        for record in kept.records:
            row = again.row(str(record.location))
            assert row is not None and row.path is record.location
    finally:
        again.close()


def test_a_trusted_read_keeps_one_shared_time_for_every_row(tmp_path: Path) -> None:
    """A row keeps when each of its two reads began, to trust it only for a log that had not been
    modified for two seconds by then: two ``int`` objects a row, 13 MB at 200,000 logs. A trusted
    time is now one shared object, as made, as read back from the file and once written again;
    a racy read keeps its own and stays untrusted."""
    root = _shop_root(tmp_path, 3)
    for attempt in range(2):  # made by the first store, read back from the file by the second
        store = IndexedSessionStore(str(root), index_dir=tmp_path / "index")
        try:
            records = store.walk_listing()
            store.read_titles_exact(records)
            for record in records:
                row = store.row(str(record.location))
                assert row is not None and row.listing_ns is SETTLED_NS and row.title_ns is SETTLED_NS, (
                    attempt
                )
                assert row.listing_outcome(row.fp, str(record.location)) is not None
        finally:
            store.close()
    fp = fingerprint(1, 2, 3, 10**18, 10**18)
    racy = IndexRow(fp, "{}", 10**18 + RACY_NS - 1, None, 10**18 + RACY_NS)
    assert racy.listing_ns == 10**18 + RACY_NS - 1 and not racy.fresh(fp, racy.listing_ns)
    assert racy.title_ns is SETTLED_NS and racy.fresh(fp, racy.title_ns)


def _header_bytes(header: dict[str, object], count: int = 2000) -> float:
    """What each of ``count`` listed copies of ``header`` holds, in bytes (its dict alone: the
    values are the header's own objects)."""
    tracemalloc.start()
    try:
        kept = [compact_header(header) for _ in range(count)]
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert len(kept) == count
    return size / count


def test_a_listed_header_keeps_its_keys_once_for_every_log() -> None:
    """A server keeps every listed header, one dict a log: 280 bytes for a usual header of six
    keys, 56 MB at 200,000 sessions. A header of upstream's keys now shares one table of keys
    with every other (CPython's key-sharing dicts), whatever came before it: about 145 bytes.
    It is still a plain dict with the header's keys, order and values, so nothing reads it
    differently; a header with other keys is an ordinary dict and spoils nothing for the rest."""
    usual = {"type": "session", "version": 0, "id": "s-1", "createdAt": 1, "cwd": "/w", "delegationDepth": 0}
    subagent = {**usual, "parentSession": "s-0", "origin": "subagent"}
    odd = {"__class__": 1, "__dict__": 2, **{f"k{number}": number for number in range(40)}}
    for header in (
        usual,
        subagent,
        {key: usual[key] for key in reversed(list(usual))},
        {**usual, "version": -0.0},
        odd,
        {},
    ):
        kept = compact_header(header)
        assert type(kept) is dict and kept == header and list(kept) == list(header), header
        assert header_text(kept) == header_text(header)
    assert _header_bytes(odd) > 600  # an ordinary dict of 42 keys
    for header in (usual, subagent, usual, {key: usual[key] for key in reversed(list(usual))}):
        assert _header_bytes(header) < 200, header  # 280 as an ordinary dict


def test_the_header_nearly_every_log_has_is_kept_in_a_third_of_a_dict() -> None:
    """A top-level session's listed header, ``{"version": 0, "id", "createdAt", "cwd",
    "delegationDepth": 0}``, was a key-sharing dict of 148 bytes a log (30 MB at 200,000
    sessions); kept as its id, time and folder it is 64. It still reads, compares and is written
    exactly as the dict it stands for, and anything that differs from it in a key, an order, a
    value or a value's type (``0.0``, ``False``, ``-0.0``) stays a dict."""
    usual = {"version": 0, "id": "s-1", "createdAt": 1_735_000_000_000, "cwd": "/w", "delegationDepth": 0}
    no_cwd = {key: value for key, value in usual.items() if key != "cwd"}
    for header in (usual, no_cwd):
        kept = compact_header(header)
        assert type(kept) is not dict
        assert kept == header and header == kept and list(kept) == list(header) and len(kept) == len(header)
        assert dict(kept) == header and list(dict(kept).items()) == list(header.items())
        assert header_text(kept) == header_text(header) and same_header(kept, compact_header(dict(header)))
        assert kept.get("cwd") == header.get("cwd") and "parentSession" not in kept
        entry = ListingEntry(((None, "zstd", kept),), ())
        assert entry_text(entry, "/r/p/s-1/session.jsonl.zstd") == entry_text(
            ListingEntry(((None, "zstd", header),), ()), "/r/p/s-1/session.jsonl.zstd"
        )
        assert _header_bytes(header) < 80  # 64, three slots; 148 as a key-sharing dict
    for other in (
        {**usual, "version": 0.0},
        {**usual, "delegationDepth": False},
        {**usual, "delegationDepth": 1},
        {**usual, "createdAt": 1.5},
        {**usual, "cwd": 7},
        {**usual, "origin": "subagent"},
        {key: usual[key] for key in reversed(list(usual))},
        {"type": "session", **usual},
    ):
        kept = compact_header(other)
        assert type(kept) is dict and list(kept.items()) == list(other.items()), other
        assert header_text(kept) == header_text(other)


def test_a_header_is_shared_only_where_its_text_would_be_the_same() -> None:
    """Sharing must not change what a row says: ``-0.0`` and ``0.0``, ``1`` and ``True``, ``1``
    and ``1.0``, or the same keys in another order, are different headers (different JSON)."""
    header = {"id": "s", "createdAt": 1, "cwd": "/w", "x": 0.0}
    assert same_header(header, dict(header))
    for other in (
        {**header, "x": -0.0},
        {**header, "createdAt": True},
        {**header, "createdAt": 1.0},
        {"createdAt": 1, "id": "s", "cwd": "/w", "x": 0.0},
        {**header, "x": [0.0]},
    ):
        assert not same_header(header, other), other
    nested = {"id": "s", "createdAt": 1, "x": {"a": 1}}
    assert not same_header(nested, dict(nested))


_KEEP_IN_A_PROCESS = """
import os, sys
from dsh_session_reference.model import SessionRecord
from dsh_session_reference.store.index.rows import fingerprint
from dsh_session_reference.store.index.store import IndexedSessionStore
from dsh_session_reference.store.layout import log_path

root, index_dir, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
records, walked = [], {}
for number in range(count):
    session_id, folder = f"019b{number:04x}-0000-7000-8000-{number:012x}", f"/home/dev/project-{number % 40}"
    location = log_path(root, folder, session_id, "zstd")
    header = {"id": session_id, "createdAt": 1_735_000_000_000 - number, "cwd": folder}
    records.append(SessionRecord(session_id, 1_735_000_000_000 - number, folder, header, location))
    walked[location] = fingerprint(1, number, 100, 1_735_000_000_000_000_000, 1_735_000_000_000_000_000)
index = IndexedSessionStore(root, index_dir=index_dir, autoflush=False)
index.keep_whole_listing(records[:10], walked, 10)  # the index file made, SQLite warmed up

def resident_peak():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024

before = resident_peak()
index.keep_whole_listing(records, walked, count)
grown = resident_peak() - before
with index._database().kept_listing() as pieces:
    print(grown, sum(len(piece) for piece in pieces))
index.close()
"""


def test_keeping_a_big_listing_does_not_hold_it_in_the_index_file_s_memory(tmp_path: Path) -> None:
    """The measure above sees only Python's objects. SQLite, asked for the document's blob with a
    column after it in the row, built the whole row in memory, zeros then a copy: at 200,000
    sessions the server's resident peak jumped 130 MB (742 MB) when it left its listing, once every
    title was verified. The blob is the row's last column now, written in place. Measured as the
    resident peak of a process of its own: 2.1 times the document before, now a small part."""
    root = tmp_path / "sessions"
    root.mkdir()
    result = subprocess.run(
        [sys.executable, "-c", _KEEP_IN_A_PROCESS, str(root), str(tmp_path / "index"), "100000"],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    grown, document = map(int, result.stdout.split())
    assert document > 20_000_000, document
    assert grown < 0.5 * document, f"the resident peak grew {grown / document:.2f} times the document"


def test_a_listing_too_big_to_be_read_back_is_not_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kept listing past ``MAX_LISTING_BYTES`` is never read back (the rows answer instead): at
    200,000 sessions with their titles it is about 75 MB, made and held only to be refused. It is
    no longer made past that size, and the one kept before it, stale now, goes."""
    root = tmp_path / "sessions"
    root.mkdir()
    index = IndexedSessionStore(str(root), index_dir=tmp_path / "index", autoflush=False)
    records, walked = _listed(root, KEPT_LISTING_SESSIONS, lambda number: "/home/dev/shop")
    try:
        index.keep_whole_listing(records[:10], walked, 10)
        with index._database().kept_listing() as pieces:
            assert pieces is not None and len(b"".join(pieces)) < 4_000
        monkeypatch.setattr(database, "MAX_LISTING_BYTES", 64_000)  # the whole: about 3 MB
        peak = _traced_peak(lambda: index.keep_whole_listing(records, walked, KEPT_LISTING_SESSIONS))
        with index._database().kept_listing() as pieces:
            assert pieces is None
    finally:
        index.close()
    assert peak < 1_000_000, f"a peak of {peak:,} bytes"  # a piece or two of the document


def test_a_verified_title_keeps_the_fingerprint_its_log_is_listed_at() -> None:
    """A worker's verification sends back the log's fingerprint and the session's id, equal to the
    listed ones but copies; kept for every title, they were about 250 bytes a session (50 MB at
    200,000). The board keeps the fingerprint it already holds, the feed the listed record's id."""
    board = TitleBoard()
    location, fp = "/r/p/s/session.jsonl.zstd", fingerprint(1, 2, 3, BASE_MS * 1_000_000, BASE_MS * 1_000_000)
    board.provisional(location, fp, TitleObservation("s"))  # the hint, at the listed fingerprint
    sent_back = pickle.loads(pickle.dumps(fp))
    board.observe(location, sent_back, TitleObservation("s", title="Verified"))
    kept = board.observed[location]
    assert kept.observation.title == "Verified" and kept.fp is fp


def test_titles_observed_between_two_reads_of_the_board_share_one_version() -> None:
    """A hint scanned behind a request, or a title verified, bumped the board's version: a new
    ``int`` (32 bytes) kept with each of a big root's titles. What no reader told apart shares one
    now, and a reader still sees every change after its read as newer than what it read."""
    board = TitleBoard()
    fp = fingerprint(1, 2, 3, BASE_MS * 1_000_000, BASE_MS * 1_000_000)
    for number in range(300):  # past the integers Python keeps one of each
        board.provisional(f"log{number}", fp, TitleObservation(f"s{number}"))
    seen = board.version
    stamps = {id(entry.version) for entry in board.observed.values()}
    assert len(stamps) == 1 and board.changed_since(0) == (seen, [f"log{n}" for n in range(300)])
    board.observe("log0", fp, TitleObservation("s0", title="Verified"))
    board.observe("log1", fp, TitleObservation("s1", title="Verified too"))
    after, changed = board.changed_since(seen)
    assert after > seen and changed == ["log0", "log1"]
    assert board.observed["log0"].version is board.observed["log1"].version
    board.observe("log2", fp, TitleObservation("s2", title="Later"))  # after that read: newer still
    assert board.changed_since(after)[1] == ["log2"] and board.version > after
    claimed = SessionRecord("c", 1, None, {}, "claimed")
    board.claim({"claimed": (claimed, fp, TitleObservation("c", title="Claimed"))})
    version = board.version
    board.scanned(["claimed"], unproved=["claimed"])  # a withdrawn claim is a change too
    assert board.version > version and "claimed" not in board.observed


def test_the_claims_left_to_scan_let_their_table_go_once_all_are_taken() -> None:
    """A server over the listing a server left claims every title it holds and hands them to the
    scans in batches, each log once, in the order claimed; a log claimed again while it waits is
    scanned once, for its latest claim. A dict keeps its table as it empties: the claims' was 8 MB
    at 200,000 logs, held for as long as the server ran."""
    board = TitleBoard()
    fp = fingerprint(1, 2, 3, BASE_MS * 1_000_000, BASE_MS * 1_000_000)
    records = {
        f"log{number}": SessionRecord(f"c{number}", 1, None, {}, f"log{number}") for number in range(5000)
    }
    board.claim(
        {location: (record, fp, TitleObservation("c", title="T")) for location, record in records.items()}
    )
    again = {
        f"log{number}": SessionRecord(f"c{number}", 2, None, {}, f"log{number}")
        for number in range(0, 5000, 7)
    }
    board.claim(
        {location: (record, fp, TitleObservation("c", title="U")) for location, record in again.items()}
    )
    assert board.pending() >= 5000
    empty = sys.getsizeof({})
    assert sys.getsizeof(board.to_prove) > 10 * empty
    taken: list[SessionRecord] = []
    while batch := board.to_scan_claims(256):
        taken += [record for record, _ in batch]
    assert sorted(str(record.location) for record in taken) == sorted(records)  # each log once
    assert {str(r.location): r for r in taken} == {**records, **again}  # the latest claim's record
    assert [r.location for r in taken if r.created_at == 1] == [log for log in records if log not in again]
    assert sys.getsizeof(board.to_prove) == empty and not board.claims_waiting()


def test_a_claim_waiting_to_be_scanned_costs_its_board_entries_alone() -> None:
    """A server over the listing a server left claims its 200,000 titles at once; each waited to be
    scanned as a pair of its record and fingerprint beside the board's entry, which has both
    (13 MB until the last was scanned). The scans still get each claim's fingerprint."""
    board = TitleBoard()
    fps = [fingerprint(1, number, 3, BASE_MS * 1_000_000, BASE_MS * 1_000_000) for number in range(CLAIMS)]
    records = [SessionRecord(f"c{number}", 1, None, {}, f"log{number}") for number in range(CLAIMS)]
    observation = TitleObservation("c", title="T")
    claims = {f"log{n}": (records[n], fps[n], observation) for n in range(CLAIMS)}
    gc.collect()
    tracemalloc.start()
    try:
        board.claim(claims)
        held = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    assert held / CLAIMS < BYTES_PER_CLAIM, f"{held / CLAIMS:.0f} bytes a claim"
    scans = board.to_scan_claims(CLAIMS)
    assert scans == [(records[n], fps[n]) for n in range(CLAIMS)]
    assert all(scan[1] is fps[n] for n, scan in enumerate(scans))


CLAIMS = 5_000
BYTES_PER_CLAIM = 100
"""The board's entry for the claim, its entry in the board's table and a pointer in the queue: 93
bytes a claim (a pair beside them made it 162; a table of the waiting claims, 106; at 200,000 such
a table takes 38 bytes an entry, the queue 8)."""


RELABELLED_SESSIONS = 20_000


def test_the_rows_a_relabelled_table_finds_by_location_cost_a_few_bytes_a_session() -> None:
    """The first title verified under a kept candidate table makes it look rows up by location for
    as long as it is kept: a dict of location to row was 48-66 bytes a session (its entry and an
    ``int`` object a row); now one array of row numbers, 8 to 16. Measured here with the relabelled
    table's own list of labels (8 bytes a row): 56 bytes a session before, 22 now."""
    records = [
        SessionRecord(_session_id(n), BASE_MS - n, "/p", {}, f"/r/--p--/{_session_id(n)}/session.jsonl.zstd")
        for n in range(RELABELLED_SESSIONS)
    ]
    records.append(SessionRecord("twice", 0, "/p", {}, records[7].location))  # its last row, as before
    records.append(SessionRecord("nowhere", 0, "/p", {}, None))
    labels = [record.id for record in records]
    kept = _Kept(records, 0, CandidateTable.labelled(records, labels))
    changed = {
        str(records[n].location): TitleObservation(records[n].id, title=f"T{n}") for n in (0, 7, 19_999)
    }
    changed["/r/--p--/gone/session.jsonl.zstd"] = TitleObservation("gone", title="Not listed")
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        relabelled = _relabelled(kept, 1, changed)
        gc.collect()
        each = (tracemalloc.get_traced_memory()[0] - before) / len(records)
    finally:
        tracemalloc.stop()
    assert each < 32, f"{each:.0f} bytes a session"
    shown = [row.label for row in relabelled.table.rows]
    assert shown[0] == "T0" and shown[19_999] == "T19999" and shown[-2] == "T7" and shown[7] == records[7].id
    assert shown[1:7] == labels[1:7] and shown[-1] == "nowhere"


def test_what_a_query_tests_a_row_against_costs_a_lowered_label_a_session() -> None:
    """A candidate table's first query lowered each row's id, label and cwd into one joined
    string, kept for as long as the table: 163 bytes a session here (two rows in three titled).
    Now the label alone is lowered (kept as it is when that leaves it so, as it does an id), the
    ids are the records' own and each distinct cwd is lowered once: under 110. The answers are
    the same (test_candidates.py checks them against upstream's rule)."""
    records = [
        SessionRecord(_session_id(n), BASE_MS - n, f"/home/dev/client-{n % 40:02d}", {})
        for n in range(RELABELLED_SESSIONS)
    ]
    labels = [
        f"Fix the Migration of table {n} for client" if n % 3 else records[n].id for n in range(len(records))
    ]
    table = CandidateTable.labelled(records, labels)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        assert table.select("zzz", None, None, 50) == []
        each = (tracemalloc.get_traced_memory()[0] - before) / len(records)
    finally:
        tracemalloc.stop()
    assert each < 110, f"{each:.0f} bytes a session"
    for needle in ("migration of table 1", "client-07", records[9].id[-12:], "0198c2a4", "zzz"):
        plain = [
            record.id
            for record, label in zip(records, labels, strict=True)
            if needle in label.lower() or needle in record.id or needle in str(record.cwd)
        ]
        assert [row.record.id for row in table.select(needle, None, None, len(records))] == plain, needle


LISTED_SESSIONS = 3_000
BYTES_PER_LISTED_SESSION = 1_250
"""What a cold root's first listing keeps per session in a live catalog (records, index rows,
fingerprints, the walk's dicts). Before: 1,738 bytes here (2.4 KB of RSS a session at 200,000 on
the benchmark's host); now about 1,260: the fingerprint packed (about 250 bytes as five ``int``
objects in a tuple, 94 now), the header one dict shared by the row and the record (the row kept
its own tuple of it), the usual listing entry two slots (its tuples were 136 bytes); then about
1,170: the header's keys shared with every other header's and a trusted read's two times one
shared ``int`` (1,260 before; 1,783 when log paths were interned, as the interpreter's table of
interned strings doubled)."""


def _titled_root(base: Path, count: int) -> Path:
    """``count`` logs over seven projects, each with its title, still for long (trusted from the
    index: ``RACY_NS``)."""
    root = base / "sessions"
    for number in range(1, count + 1):
        cwd = f"/home/dev/project-{number % 7}"
        path = Path(log_path(str(root), cwd, _session_id(number), "zstd"))
        path.parent.mkdir(parents=True)
        path.write_bytes(_log_bytes(_session_id(number), cwd, f"Title number {number} of the store"))
        os.utime(path, ns=(BASE_MS * 1_000_000, BASE_MS * 1_000_000))
    return root


def test_a_listed_session_costs_a_bounded_amount(tmp_path: Path) -> None:
    root = _titled_root(tmp_path, LISTED_SESSIONS)
    per_session = _kept_by_listing(root, tmp_path / "index", [LISTED_SESSIONS]) / LISTED_SESSIONS
    assert per_session < BYTES_PER_LISTED_SESSION, f"{per_session:.0f} bytes a listed session"


VERIFIED_SESSIONS = 2_000
BYTES_PER_VERIFIED_TITLE = 360
"""What a big root's title adds once a hint has shown it and a worker process has verified it: its
board entry, the title itself and the index row's title. Before: 422 bytes here (the board's entry
a named tuple, every hint and title a new version ``int``, the row a title entry of its own beside
the board's observation); now 314 (an ``int``, the time the verifying read began, is the row's)."""


def test_a_verified_title_costs_a_bounded_amount(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog, "SYNC_VERIFY_BYTES", 0)  # served as a big root: hints, verified behind
    # Not the listing left for the next server once the titles are verified: a passing document
    # (test_keeping_a_big_listing_holds_its_document_once), not what each title keeps.
    monkeypatch.setattr(catalog.SessionCatalog, "_keep_listing", lambda self, final=False: None)
    root = _titled_root(tmp_path, VERIFIED_SESSIONS)
    gc.collect()
    tracemalloc.start()
    source = IndexedSessionStore(str(root), index_dir=tmp_path / "index").start_catalog()
    try:
        records = source.list_sessions()
        locations = [str(record.location) for record in records]
        assert source.catalog is not None and len(records) == VERIFIED_SESSIONS
        board = source.catalog.titles
        gc.collect()
        listed = tracemalloc.get_traced_memory()[0]
        source.read_titles(records)  # the first ``@``: hints, each title then verified behind it

        def verified() -> bool:
            if board.pending() or board.busy() or board.to_scan:
                return False
            return all((row := source.row(location)) is not None and row.title_here for location in locations)

        deadline = time.monotonic() + 120
        while not verified():
            assert time.monotonic() < deadline, "the titles were never verified"
            time.sleep(0.1)
        gc.collect()
        per_title = (tracemalloc.get_traced_memory()[0] - listed) / VERIFIED_SESSIONS
        for record in records:
            number = int(record.id[-12:])
            shown = board.observed[str(record.location)].observation
            assert shown.title == f"Title number {number} of the store"
            row = source.row(str(record.location))
            assert row is not None and row.parsed_title is shown  # one observation, not two
    finally:
        source.close()
        tracemalloc.stop()
    assert per_title < BYTES_PER_VERIFIED_TITLE, f"{per_title:.0f} bytes a verified title"


def test_a_first_at_that_leaves_every_title_to_hint_holds_little_beside_its_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first ``@`` over a big cold root has no time to hint most titles: they are labelled by
    their ids and scanned behind it. Each such log was a triple of its position, record and
    fingerprint, kept on the board until scanned, and a pair of its position and an untitled
    observation, made for the answer: with the observation the answer returns, 287 bytes a log at
    the request's peak here (about 57 MB at 200,000 sessions, at a cold server's peak). Now a log
    waits as its record alone and the answer is labelled where it is made: 143."""
    monkeypatch.setattr(catalog, "SYNC_VERIFY_BYTES", 0)  # served as a big root: hints, verified behind
    monkeypatch.setattr(titles_module, "HINT_BUDGET", 0.0)  # none hinted in time
    root = _titled_root(tmp_path, VERIFIED_SESSIONS)
    paused = Scheduler(idle_grace=60.0, max_defer=60.0)  # nothing scanned or verified behind it
    source = IndexedSessionStore(str(root), index_dir=tmp_path / "index").start_catalog(scheduler=paused)
    try:
        records = source.list_sessions()
        assert source.catalog is not None and len(records) == VERIFIED_SESSIONS
        gc.collect()
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            shown = source.read_titles(records)
            per_log = (tracemalloc.get_traced_memory()[1] - before) / VERIFIED_SESSIONS
        finally:
            tracemalloc.stop()
        assert [observation.session_id for observation in shown] == [record.id for record in records]
        assert all(observation.title is None and observation.error is None for observation in shown)
        assert len(source.catalog.titles.to_scan) == VERIFIED_SESSIONS
    finally:
        source.close()
    assert per_log < 170, f"{per_log:.0f} bytes a log at the first @'s peak"


def test_a_listed_header_keeps_its_repeated_values_once(tmp_path: Path) -> None:
    """A project's logs share a cwd, every subagent's ``origin`` is ``"subagent"``: one string each
    for the root, whether the walk read the log, a worker read it (its entry's text parsed into the
    row), the row came from the index file or the record from the listing a server left. Parsed
    from each entry, a ``"subagent"`` was 57 bytes a listed log, and a kept listing's cwd one a log."""
    root = tmp_path / "sessions"
    for number in range(1, 4):
        path = Path(log_path(str(root), "/home/dev/shop", _session_id(number), "zstd"))
        path.parent.mkdir(parents=True)
        path.write_bytes(_log_bytes(_session_id(number), "/home/dev/shop"))
        os.utime(path, ns=(BASE_MS * 1_000_000, BASE_MS * 1_000_000))  # trusted from the index
    store = IndexedSessionStore(str(root), index_dir=tmp_path / "index")
    try:
        listings = [store.list_sessions()]
        store.keep_whole_listing(listings[0], store.walked, 6)
    finally:
        store.close()
    store = IndexedSessionStore(str(root), index_dir=tmp_path / "index")
    try:
        listings += [store.stored_listing().records, store.list_sessions()]  # left, then from rows
    finally:
        store.close()
    for records in listings:
        assert len(records) == 3
        assert len({id(record.header["cwd"]) for record in records}) == 1
    path = log_path(str(root), "/home/dev/shop", _session_id(9), "zstd")
    header = {"version": 0, "id": _session_id(9), "createdAt": 1, "cwd": "/c", "origin": "subagent"}
    texts = [json.dumps({"a": [[path, "zstd", {**header, "delegationDepth": 1}]], "b": []}) for _ in range(2)]
    entries = [parse_listing(text, path) for text in texts]  # as a worker's text becomes a row
    first, second = (entry.artifacts[0][2] for entry in entries if entry is not None)
    assert first == second and first["origin"] == "subagent"
    for key in ("cwd", "origin"):
        assert first[key] is second[key], key


def test_a_fingerprint_is_one_small_object_of_five_numbers() -> None:
    """Equal exactly when its five numbers are, hashed as one, through pickling (worker processes
    send them back) and the index's text; 48 bytes for a log's usual numbers and not tracked by the
    cyclic collector (a ``bytes`` subclass of nine bytes a number was 96, a tuple of five about 250)."""
    fp = fingerprint(2049, 1 << 40, 3_000, BASE_MS * 1_000_000, -1)
    assert fp_numbers(fp) == (2049, 1 << 40, 3_000, BASE_MS * 1_000_000, -1)
    assert pickle.loads(pickle.dumps(fp)) == fp and fp_parse(fp_text(fp)) == fp
    assert {fp: 1}[fingerprint(*fp_numbers(fp))] == 1
    for number in range(5):  # one number off, anywhere, is another fingerprint
        numbers = list(fp_numbers(fp))
        for other in (numbers[number] + 1, numbers[number] - 1, -numbers[number] - 1):
            numbers[number] = other
            assert fingerprint(*numbers) != fp and fp_numbers(fingerprint(*numbers)) == tuple(numbers)
    for numbers in (
        [0] * 5,
        [-1, -2, 3, -(1 << 64) + 1, (1 << 64) - 1],
        [(1 << 64) - 1] * 5,
        [-(10**20)] * 5,
    ):
        assert list(fp_numbers(fingerprint(*numbers))) == numbers  # any 64-bit st_* value, any stored text
    assert fingerprint(1, 2, 3, 4, 5) != fingerprint(1, 2, 3, 5, 4)
    usual = fingerprint(2049, 9_000_000, 3_000, BASE_MS * 1_000_000 + 123, BASE_MS * 1_000_000 + 123)
    assert sys.getsizeof(usual) <= 48 and not gc.is_tracked(usual)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        kept = [
            fingerprint(2049, (1 << 40) + n, 3_000 + n, BASE_MS * 1_000_000 + n, BASE_MS * 1_000_000 + n)
            for n in range(1000)
        ]
        each = (tracemalloc.get_traced_memory()[0] - before) / len(kept)
    finally:
        tracemalloc.stop()
    assert each < 60, f"{each:.0f} bytes a fingerprint"


WALKED_LOGS = 3_000


def test_a_row_keeps_the_usual_listing_entry_as_its_header_alone() -> None:
    """An entry object beside every listed log's header was 64 bytes a row, 13 MB at 200,000."""
    path = "/root/p/0198c2a4-7b1e-7c3d-9f00-000000000001/session.jsonl.zstd"
    header = compact_header({"version": 1, "id": _session_id(1), "createdAt": BASE_MS, "cwd": "/w"})
    fp = fingerprint(1, 2, 3, BASE_MS * 1_000_000, BASE_MS * 1_000_000)
    text = entry_text(ListingEntry(((None, "zstd", header),), ()), path)
    row = IndexRow(fp, text, SETTLED_NS).parse(path)
    assert type(row.parsed_listing) is dict and row.parsed_listing == header
    assert row.listing_outcome(fp, path) == ListingEntry(((None, "zstd", row.parsed_listing),), ())
    assert row.listing_text(path) == text
    # Anything else keeps its entry whole: another encoding than the name says, another log, a block.
    for other in (
        ListingEntry(((None, "none", header),), ()),
        ListingEntry(((path + ".other", "zstd", header),), ()),
        ListingEntry(((None, "zstd", header),), (("s", path, "a reason"),)),
    ):
        kept = IndexRow(fp, entry_text(other, path), SETTLED_NS).parse(path)
        assert kept.parsed_listing == other and kept.listing_outcome(fp, path) == other
        assert kept.listing_text(path) == entry_text(other, path)


def test_a_walk_lists_the_records_it_made_and_counts_ids_without_a_table() -> None:
    """A walk of 200,000 logs made an artifact for each beside its record, and counted ids in a
    table of their own beside the one it kept: 13 MB and 7.7 MB that lived only until the walk
    ended, on top of the listing (the peak of a server over a kept index). Then it kept the one
    table, 7.7 MB; now it counts ids in a sorted list of them (a pointer each) and keeps none,
    and there is a duplicate id to find among them."""
    walk = Walk(Skips(report=False))
    for number in range(WALKED_LOGS):
        session_id = _session_id(number)
        header = {"version": 1, "id": session_id, "createdAt": BASE_MS + number, "cwd": "/w"}
        walk.add(f"/root/p/{session_id}/session.jsonl.zstd", header)
    twice = {"version": 1, "id": _session_id(5), "createdAt": BASE_MS, "cwd": "/w"}
    walk.add(f"/root/q/{_session_id(5)}/session.jsonl.zstd", twice)
    gc.collect()
    tracemalloc.start()
    try:
        walk.settle("/root")
        listed = walk.listing()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [record.id for record in listed] == [
        _session_id(n) for n in reversed(range(WALKED_LOGS)) if n != 5
    ]
    assert {id(record) for record in listed} == {id(r) for r in walk.found if r.id != _session_id(5)}
    assert walk.duplicates == {_session_id(5)} and _session_id(5) in walk.blocked
    # The sorted ids, the list the listing sorts, and a little: no table (four times that list).
    assert peak < 3 * sys.getsizeof(listed) + 50_000, f"{peak} bytes at the walk's end"


def test_a_listing_finds_its_records_by_id_without_a_table_of_ids() -> None:
    """A table of every id beside the listing's table of logs was 7.7 MB at 200,000 sessions, held
    for as long as the listing was served; the records sorted by id are a pointer each. The record
    found is the one a table would give: the last listed with that id."""
    count = 20_000
    records = [
        SessionRecord(_session_id(n), BASE_MS + n, None, {}, f"/r/p/{_session_id(n)}/session.jsonl.zstd")
        for n in reversed(range(count))
    ]
    twin = SessionRecord(_session_id(3), BASE_MS, None, {}, "/r/q/twin/session.jsonl.zstd")
    listing = [*records, twin]
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        listed = Listed.of(listing, {}, 0.0, count + 1)
        found = [listed.record_of(record.id) for record in records]
        held = tracemalloc.get_traced_memory()[0] - before - sys.getsizeof(found)
    finally:
        tracemalloc.stop()
    assert found == [twin if record.id == twin.id else record for record in records]
    assert listed.record_of(_session_id(count)) is None and listed.record_of("") is None
    beside = held - sys.getsizeof(listed.by_location)  # the table of logs every lookup by path uses
    assert beside < 10 * count, f"{beside / count:.1f} bytes a session beside the table of logs"


def test_a_walk_that_finds_the_same_sessions_keeps_the_listing_s_lookups(tmp_path: Path) -> None:
    """Two new lookups of 200,000 sessions (by path and by id) were made beside the old ones at the
    end of every walk, 15 MB of the peak of a server over a kept index; a walk that found nothing
    new now keeps them, and one that found a change makes new ones."""
    root = _titled_root(tmp_path, 40)
    source = IndexedSessionStore(str(root), index_dir=tmp_path / "index").start_catalog()
    try:
        catalog_ = source.catalog
        assert catalog_ is not None
        first = catalog_._refresh(None)
        again = catalog_._refresh(None)
        assert again is not first and again.records is first.records
        assert again.by_id is first.by_id and again.by_location is first.by_location
        assert not first.by_id and first.record_of(first.records[7].id) is first.records[7]
        assert len(again.by_id) == len(first.records)  # sorted by id once, for both
        changed = Path(str(first.records[0].location))
        changed.write_bytes(_log_bytes(first.records[0].id, str(first.records[0].cwd), "Renamed"))
        third = catalog_._refresh(None)
        assert third.by_id is not first.by_id and third.by_location is not first.by_location
        assert all(third.record_of(record.id) is record for record in third.records)
        assert [r.id for r in third.by_id] == sorted(r.id for r in first.records)
        assert third.record_of("no such id") is None and third.record_of("") is None
        assert third.records[1:] == first.records[1:] and third.records[0] is not first.records[0]
    finally:
        source.close()


def test_a_walk_that_sees_every_log_as_the_one_before_gives_its_fingerprints_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every full walk made a table of each log's fingerprint, equal to the one it replaced when
    nothing changed: 7.7 MB beside it at 200,000 sessions at the end of every walk, the first over
    a kept listing among them (the peak of a server over a kept index). A walk that sees the same
    now gives back the table of the walk before it (the kept listing's, before the first); one
    that sees a change makes its own, with every log in it."""
    monkeypatch.setattr(catalog, "SYNC_MAX_SESSIONS", 1)  # answered from the kept listing
    monkeypatch.setattr(catalog, "REFRESH_AFTER", 0.0)  # each refresh below walks
    root = _shop_root(tmp_path, 30)
    _kept_by_a_first_store(root, tmp_path / "index")
    paused = Scheduler(idle_grace=60.0, max_defer=60.0)  # the walks are this test's
    source = IndexedSessionStore(str(root), index_dir=tmp_path / "index").start_catalog(scheduler=paused)
    try:
        catalog_ = source.catalog
        assert catalog_ is not None
        source.list_sessions()
        kept = catalog_.snapshot
        assert kept is not None and kept.taken == -math.inf  # served from the kept listing
        first = catalog_._refresh(None)
        assert first is not kept and first.walked is kept.walked  # it saw what the kept listing lists
        again = catalog_._refresh(None)
        assert again is not first and again.walked is first.walked and source.walked is first.walked
        changed = Path(str(first.records[0].location))
        changed.write_bytes(_log_bytes(first.records[0].id, "/home/dev/shop", "Renamed"))
        third = catalog_._refresh(None)
        assert third.walked is not first.walked and third.walked.keys() == first.walked.keys()
        assert third.walked[str(changed)] != first.walked[str(changed)]
        assert all(third.walked[path] is fp for path, fp in first.walked.items() if path != str(changed))
        gone = Path(str(first.records[1].location))
        gone.unlink()
        fourth = catalog_._refresh(None)
        assert fourth.walked.keys() == third.walked.keys() - {str(gone)}
    finally:
        source.close()


def test_a_walk_keeps_the_records_of_the_listing_before_it_for_logs_its_rows_hold(tmp_path: Path) -> None:
    """A walk made a record for every log, equal to the one the listing before it held, and the
    listing then dropped it for the old one: 16 MB made and dropped at the end of every walk of
    200,000 logs. The walk now keeps the old record where a row tells it the log is unchanged,
    and makes one only for a log that changed."""
    root = _titled_root(tmp_path, 40)
    source = IndexedSessionStore(str(root), index_dir=tmp_path / "index").start_catalog()
    made: list[SessionRecord] = []
    real_record_at = listing.record_at

    def counted(path: str, header: dict[str, Any]) -> SessionRecord:
        record = real_record_at(path, header)
        made.append(record)
        return record

    try:
        catalog_ = source.catalog
        assert catalog_ is not None
        first = catalog_._refresh(None)
        changed = Path(str(first.records[0].location))
        changed.write_bytes(_log_bytes(first.records[0].id, str(first.records[0].cwd), "Renamed"))
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(listing, "record_at", counted)
            again = catalog_._refresh(None)
        assert [record.location for record in made] == [first.records[0].location]
        assert again.records[0] is made[0]
        assert all(new is old for new, old in zip(again.records[1:], first.records[1:], strict=True))
    finally:
        source.close()
