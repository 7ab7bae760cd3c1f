"""The title index answers exactly as the uncached store, however the root changes under it.

Every comparison runs the plain ``JsonlSessionStore`` and an
``IndexedSessionStore`` over the same root and requires identical listings
(headers compared as exact JSON), identical title observations (errors
included), and an unchanged root.
"""

from __future__ import annotations

import os
import random
import shutil
import sqlite3
import threading
import time
import tracemalloc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from dsh_session_reference.assembly import start_spare_worker
from dsh_session_reference.conversation import BoundedRead
from dsh_session_reference.jsjson import js_stringify
from dsh_session_reference.model import SessionRecord, StoreError, TitleObservation
from dsh_session_reference.store import JsonlSessionStore
from dsh_session_reference.store import workers as workers_module
from dsh_session_reference.store.index import database as database_module
from dsh_session_reference.store.index import table as table_module
from dsh_session_reference.store.index import walk as walk_module
from dsh_session_reference.store.index.database import default_index_dir, tidy_index_dir
from dsh_session_reference.store.index.rows import RACY_NS, header_text, key_path, row_crc
from dsh_session_reference.store.index.store import IndexedSessionStore
from dsh_session_reference.store.index.title_scan import scan_last_title
from dsh_session_reference.store.layout import encode_segment, log_path
from index.spies import CountingStore, slow_probes
from store.logbuild import (
    as_zstd,
    event,
    header,
    lines,
    one_turn,
    put,
    snapshot_tree,
    title,
    turn_end,
    user,
)

PAST = time.time() - 3600


def age(root: Path) -> None:
    """Make every log look untouched for an hour, so index entries made now are trusted."""
    for directory, _, files in os.walk(root):
        for name in files:
            os.utime(os.path.join(directory, name), (PAST, PAST), follow_symlinks=False)


Observation = (
    tuple[
        list[tuple[str, int, str | None, str, str | None]],
        list[TitleObservation],
        list[tuple[str, object]],
    ]
    | str
)


def observe(store: JsonlSessionStore, ids: Sequence[str] = ()) -> Observation:
    """The listing, every title, and what reading each of ``ids`` gives (blocked ids included)."""
    try:
        records = store.list_sessions()
    except StoreError as error:
        return error.message
    listed = [(r.id, r.created_at, r.cwd, header_text(r.header), r.location) for r in records]
    reads: list[tuple[str, object]] = []
    for session_id in ids:
        try:
            snapshot = store.read_surface(session_id)
        except StoreError as error:
            reads.append((session_id, error.message))
        else:
            reads.append((session_id, (snapshot.captured_through_seq, len(snapshot.events))))
    return listed, store.read_titles(records), reads


def same(root: Path, index: IndexedSessionStore, ids: Sequence[str] = ()) -> Observation:
    expected = observe(JsonlSessionStore(root), ids)
    assert observe(index, ids) == expected
    return expected


# --- random roots ---------------------------------------------------------------------------------


def healthy(session_id: str, rng: random.Random, created: int, cwd: str | None) -> bytes:
    events: list[dict[str, Any]] = []
    for turn in range(rng.randint(0, 3)):
        events += one_turn(len(events), f"q{turn} {session_id}", f"a{turn}")
        if rng.random() < 0.5:
            events.append(title(len(events), f"Title {session_id} {turn}"))
    fields: dict[str, Any] = {"createdAt": created, "cwd": cwd}
    if cwd is None:
        fields["cwd"] = None
        line = header(session_id, createdAt=created)
        del line["cwd"]
        return lines(line, *events)
    return lines(header(session_id, **fields), *events)


def damaged(session_id: str, rng: random.Random, created: int) -> bytes:
    good = lines(header(session_id, createdAt=created), *one_turn(0), title(6, "Before damage"))
    choice = rng.randrange(7)
    if choice == 0:  # a torn tail: dropped, the session reads
        return good + b'{"type":"session/title","seq":7,"time":1,"data":{"title":"Torn'
    if choice == 1:  # garbage followed by a completed turn: rejected
        return good + b"garbage\n" + lines(turn_end(8))
    if choice == 2:  # a seq gap after the last turn/end: cut there, the later title is ignored
        return good + lines(title(9, "After gap"))
    if choice == 3:  # an unknown event type: the read fails, the label falls back to the id
        return good + lines(event("made/up", 7, {}))
    if choice == 4:  # a header that is not JSON: the session is hidden
        return b"{not json\n" + good.split(b"\n", 1)[1]
    if choice == 5:  # a header only
        return lines(header(session_id, createdAt=created))
    return b""  # an empty file: hidden


def build(root: Path, rng: random.Random, count: int) -> list[str]:
    ids = []
    for number in range(count):
        session_id = rng.choice([f"s{number}", f"S-{number}", f"sess {number}", f"id~{number}ü"])
        created = 1_700_000_000_000 + rng.randrange(5) * 1000  # ties exercise the collation
        cwd = rng.choice(["/w", "/w", "/other", None])
        compression = rng.choice(["none", "zstd"])
        data = (
            damaged(session_id, rng, created)
            if rng.random() < 0.3
            else healthy(session_id, rng, created, cwd)
        )
        if cwd is None or data.startswith(b"{not") or data == b"":
            cwd = "/w" if data.startswith(b"{not") or data == b"" else cwd
        if compression == "zstd":
            data = as_zstd(data)
        put(root, session_id, data, compression, cwd)
        ids.append(session_id)
    return ids


def logs(root: Path) -> list[Path]:
    return sorted(path for path in root.glob("*/*/session.jsonl*") if path.is_file())


def mutate(root: Path, rng: random.Random, ids: list[str]) -> str:
    files = logs(root)
    choice = rng.randrange(9)
    if not files or choice == 0:
        session_id = f"new{rng.randrange(10**6)}"
        put(root, session_id, healthy(session_id, rng, 1_700_000_100_000, "/w"), "none")
        ids.append(session_id)
        return "add"
    path = rng.choice(files)
    plain = path.name == "session.jsonl"
    if choice == 1 and plain:
        with path.open("ab") as handle:
            seq = len(path.read_bytes().splitlines()) - 1
            handle.write(lines(title(seq, f"Renamed {rng.randrange(100)}")))
        return "append title"
    if choice == 2:
        with path.open("ab") as handle:
            handle.write(b"junk line\n" if plain else b"\x28\xb5\x2f\xfd\x00")
        return "append junk"
    if choice == 3:
        path.unlink()
        return "delete"
    if choice == 4:
        target = root / "--moved--" / path.parent.name
        if not target.exists():
            target.parent.mkdir(exist_ok=True)
            path.parent.rename(target)  # the header no longer matches the path: skipped
        return "move"
    if choice == 5:
        data = path.read_bytes()
        path.write_bytes(data[: max(1, len(data) // 2)])  # a repair truncated it
        return "truncate"
    if choice == 6:
        other = path.with_name("session.jsonl" if not plain else "session.jsonl.zstd")
        other.write_bytes(path.read_bytes() if plain else b"")
        return "both encodings"
    if choice == 7:
        copy = root / "--dup--" / path.parent.name / path.name
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, copy)  # a duplicate id (and a header/path mismatch)
        return "duplicate"
    data = path.read_bytes()
    path.write_bytes(data)  # rewritten in place, same bytes, new mtime
    return "rewrite"


def random_root(tmp_path: Path, seed: int, most: int) -> tuple[random.Random, Path, list[str]]:
    """A root of 3 to ``most`` random sessions (see :func:`build`), and the generator that made it."""
    rng = random.Random(seed)
    root = tmp_path / "sessions"
    root.mkdir()
    return rng, root, build(root, rng, rng.randint(3, most))


@pytest.mark.parametrize("seed", range(24))
def test_random_roots_and_changes_give_the_uncached_answers(tmp_path: Path, seed: int) -> None:
    rng, root, ids = random_root(tmp_path, seed, 14)
    aged = rng.random() < 0.7
    if aged:
        age(root)
    index = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    same(root, index, ids)
    before = snapshot_tree(root)
    same(root, index, ids)  # warm: answered from the index
    assert snapshot_tree(root) == before, "the index touched the sessions root"
    for _ in range(6):
        mutate(root, rng, ids)
        if aged and rng.random() < 0.5:
            age(root)
        same(root, index, ids)
        # A new process: the index file on disk is reloaded, and must agree too.
        same(root, IndexedSessionStore(root, index_dir=tmp_path / "cache"), ids)
        same(root, index, ids)
    index.close()


def found_records(
    store: JsonlSessionStore, ids: Sequence[str]
) -> list[tuple[str, SessionRecord | None, SessionRecord | None]]:
    """What ``find_record`` finds for each id, and what the full listing (made after) has for it."""
    found = [store.find_record(session_id) for session_id in ids]
    listed = {record.id: record for record in store.list_sessions()}
    return [
        (session_id, record, listed.get(session_id)) for session_id, record in zip(ids, found, strict=True)
    ]


@pytest.mark.parametrize("seed", range(8))
def test_finding_one_record_agrees_with_the_listing(tmp_path: Path, seed: int) -> None:
    rng, root, ids = random_root(tmp_path, seed, 12)
    for cwd in ("/a", "/b"):  # one id in two projects, each log naming its own path: neither is listed
        put(root, "twin", lines(header("twin", cwd=cwd)), cwd=cwd)
    age(root)
    index = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    for _ in range(6):
        wanted = [*ids, "twin", "absent", ""]
        # A new process over the same index file finds its rows one by one before it lists.
        fresh = IndexedSessionStore(root, index_dir=tmp_path / "cache")
        for store in (JsonlSessionStore(root), index, fresh):
            for session_id, found, listed in found_records(store, wanted):
                assert found == listed, (session_id, found, listed)
        fresh.close()
        mutate(root, rng, ids)  # duplicates, moved logs, both encodings, deletions
        if rng.random() < 0.5:
            age(root)
    index.close()


def test_a_targeted_lookup_reads_only_the_index_rows_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``prepare`` of a few sessions in a big root must not load every row (a second at 50,000)."""
    root, _, _ = warm(tmp_path)
    expected = IndexedSessionStore(root, persistent=False).read_conversation("b", BoundedRead(10_000))
    probes = slow_probes(monkeypatch, delay=0)

    def whole_table(self: database_module.IndexDatabase) -> dict[str, Any]:
        raise AssertionError("the whole index was loaded")

    monkeypatch.setattr(database_module.IndexDatabase, "load", whole_table)
    store = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    plain = JsonlSessionStore(root)
    for session_id in ("b", "a", "absent"):
        assert store.find_record(session_id) == plain.find_record(session_id)
    assert store.read_conversation("b", BoundedRead(10_000)) == expected
    assert probes == []  # both headers came from the index
    store.close()


def test_a_full_listing_loads_the_table_at_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Row by row, a walk of 10,000 logs would make 10,000 queries (a tenth of a second more)."""
    root, _, expected = warm(tmp_path)
    store = IndexedSessionStore(root, index_dir=tmp_path / "cache")

    def one_row(self: database_module.IndexDatabase, path: str) -> None:
        raise AssertionError(f"{path} was read alone")

    monkeypatch.setattr(database_module.IndexDatabase, "load_row", one_row)
    assert observe(store) == expected
    store.close()


def test_rows_changed_before_the_whole_table_is_loaded_win_over_the_file(tmp_path: Path) -> None:
    root, path, _ = warm(tmp_path)
    log = next(root.glob("*/a/session.jsonl"))
    log.write_bytes(lines(header("a", createdAt=5)))  # the indexed row of "a" is stale now
    os.utime(log, (PAST, PAST))
    store = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    assert store.find_record("a") == JsonlSessionStore(root).find_record("a")  # one row, re-read
    assert observe(store) == observe(JsonlSessionStore(root))  # the whole table, with that row
    store.close()
    rows = dict(sqlite3.connect(path).execute("SELECT path, listing FROM logs").fetchall())
    assert '"createdAt":5' in rows[os.fsencode(log)]


def test_a_tampered_row_read_alone_is_detected_and_the_index_rebuilt(tmp_path: Path) -> None:
    root, path, _ = warm(tmp_path)
    conn = sqlite3.connect(path)
    changed = conn.execute("UPDATE logs SET listing = replace(listing, '/x', '/y') WHERE listing LIKE '%/x%'")
    assert changed.rowcount == 1
    conn.commit()
    conn.close()
    store = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    assert store.find_record("b") == JsonlSessionStore(root).find_record("b")
    store.close()
    listings = [row[0] for row in sqlite3.connect(path).execute("SELECT listing FROM logs").fetchall()]
    assert len(listings) == 1 and '"/x"' in listings[0]  # rebuilt: only the row just read again


def test_a_forged_row_whose_fingerprint_int_cannot_read_is_untrusted_not_a_crash(tmp_path: Path) -> None:
    """A row read alone whose fingerprint has a digit ``str.isdigit`` accepts and ``int`` does not
    (``①``), with a checksum that holds, rebuilds the index instead of failing the lookup."""
    root, path, _ = warm(tmp_path)
    conn = sqlite3.connect(path)
    rows = conn.execute("SELECT path, fp, listing, listing_ns, title, title_ns FROM logs").fetchall()
    for key, fp, listing, listing_ns, entry, title_ns in rows:
        forged = "\u2460" + fp[1:]
        crc = row_crc(key_path(key), forged, listing, listing_ns, entry, title_ns)
        conn.execute("UPDATE logs SET fp = ?, crc = ? WHERE path = ?", (forged, crc, key))
    conn.commit()
    conn.close()
    store = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    assert store.find_record("b") == JsonlSessionStore(root).find_record("b")
    store.close()


# --- a cold index's headers, read by worker processes as well ------------------------------------


@pytest.mark.parametrize("seed", range(4))
def test_headers_read_by_workers_give_the_uncached_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    monkeypatch.setattr(walk_module, "PARALLEL_MIN_LOGS", 1)
    monkeypatch.setattr(walk_module, "HEADER_BATCH", 2)
    rng = random.Random(seed)
    root = tmp_path / "sessions"
    root.mkdir()
    ids = build(root, rng, 40)
    for _ in range(4):
        mutate(root, rng, ids)  # both encodings, moved and duplicated logs, junk
    age(root)
    # Slow enough that a worker started on a loaded machine (seconds to import) still reads some.
    probed = slow_probes(monkeypatch, delay=0.1)
    index = IndexedSessionStore(root, index_dir=tmp_path / "cache", workers=2)
    same(root, index, ids)
    read_by_walk = len(probed)
    assert 0 < read_by_walk < len(logs(root)) - 4, "the walk and the worker should each read some"
    # The logs the worker read count as walked, at the fingerprints a walk alone sees.
    alone = IndexedSessionStore(root, index_dir=tmp_path / "alone", workers=1)
    alone.list_sessions()
    assert index.walked == alone.walked
    alone.close()
    del probed[:]  # the lone walk read every log itself
    same(root, index, ids)  # and the entries the worker made answer the next walk
    assert probed == []
    index.close()


def test_a_walk_without_worker_processes_reads_every_header_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(walk_module, "PARALLEL_MIN_LOGS", 1)

    def no_process() -> None:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(walk_module, "WorkerProcess", no_process)
    root = tmp_path / "sessions"
    ids = build(root, random.Random(5), 12)
    age(root)
    probed = slow_probes(monkeypatch)
    index = IndexedSessionStore(root, index_dir=tmp_path / "cache", workers=4)
    same(root, index, ids)
    assert len(probed) == len(logs(root))
    index.close()


def test_only_a_first_walk_over_many_unseen_logs_starts_header_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(walk_module, "PARALLEL_MIN_LOGS", 4)
    started: list[int] = []
    start = walk_module.HeaderReaders.__init__

    def counted(self: Any, store: Any, unseen: list[tuple[str, str]], count: int) -> None:
        started.append(len(unseen))
        start(self, store, unseen, count)

    monkeypatch.setattr(walk_module.HeaderReaders, "__init__", counted)
    root = tmp_path / "sessions"
    for name in ("a", "b"):
        put(root, name, lines(header(name)))
    age(root)
    cache = tmp_path / "cache"
    IndexedSessionStore(root, index_dir=cache, workers=2).list_sessions()
    assert started == []  # two unseen logs: not worth a process
    put(root, "c", lines(header("c")))
    IndexedSessionStore(root, index_dir=cache, workers=1).list_sessions()
    assert started == []  # no core to spare
    for name in ("d", "e", "f"):
        put(root, name, lines(header(name)))
    store = IndexedSessionStore(root, index_dir=cache, workers=2)
    store.list_sessions()
    assert started == []  # c is indexed: three unseen logs, one too few
    for name in ("h", "i", "j"):
        put(root, name, lines(header(name)))
    store.list_sessions()
    assert started == []  # still not a first walk
    for name in ("k", "l", "m", "n"):
        put(root, name, lines(header(name)))
    IndexedSessionStore(root, index_dir=cache, workers=2).list_sessions()
    assert started == [4]  # k to n (h, i and j were indexed by the walk before)


def test_a_spare_worker_is_taken_by_a_cold_walk_and_dropped_by_a_warm_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(walk_module, "PARALLEL_MIN_LOGS", 1)
    monkeypatch.setattr(walk_module, "HEADER_BATCH", 2)
    root = tmp_path / "sessions"
    ids = build(root, random.Random(3), 12)
    age(root)
    workers_module.start_spare()
    spare = workers_module._spare
    assert spare is not None
    assert spare.submit("read_headers", str(root), []).result(timeout=60) == []  # warm, as in the server
    taken: list[object] = []
    take = workers_module.take_spare

    def recorded() -> Any:
        taken.append(take())
        return taken[-1]

    monkeypatch.setattr(walk_module, "take_spare", recorded)
    probed = slow_probes(monkeypatch)
    index = IndexedSessionStore(root, index_dir=tmp_path / "cache", workers=2)
    same(root, index, ids)
    assert taken[0] is spare and workers_module._spare is None  # the cold walk read with it
    assert len(probed) < len(logs(root))
    index.close()
    workers_module.start_spare()
    unused = workers_module._spare
    assert unused is not None
    warm_index = IndexedSessionStore(root, index_dir=tmp_path / "cache", workers=2)
    same(root, warm_index, ids)  # nothing unseen: no readers, and the spare is stopped
    assert workers_module._spare is None and unused._process.wait(timeout=5) is not None
    warm_index.close()


def test_the_server_starts_a_spare_worker_only_while_no_index_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every start after the first answers from the index it finds and takes no spare: one started
    anyway only competed with the server's own start for the CPU."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    started: list[bool] = []
    monkeypatch.setattr(workers_module, "start_spare", lambda: started.append(True))
    start_spare_worker()  # no cache folder at all
    index_dir = Path(default_index_dir())
    index_dir.mkdir(parents=True)
    (index_dir / "notes.txt").write_text("not an index")
    start_spare_worker()
    assert started == [True, True]
    (index_dir / "0123456789abcdef0123456789abcdef.sqlite3").write_bytes(b"")
    start_spare_worker()
    assert started == [True, True]


def test_pending_rows_are_written_in_pausable_transactions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(table_module, "FLUSH_ROWS", 2)
    root = tmp_path / "sessions"
    for name in "abcde":
        put(root, name, lines(header(name)))
    age(root)
    store = IndexedSessionStore(root, index_dir=tmp_path / "cache", autoflush=False)
    store.list_sessions()
    assert len(IndexedSessionStore(root, index_dir=tmp_path / "cache").table()) == 0  # nothing written yet
    pauses: list[int] = []

    def pause() -> None:
        pauses.append(len(store.table()))  # the rows stay readable while the file is written

    store.flush(pause)
    assert pauses == [5, 5]  # three transactions, a pause before each but the first
    assert len(IndexedSessionStore(root, index_dir=tmp_path / "cache").table()) == 5
    store.close()


# --- what the index saves ---------------------------------------------------------------------------


def two_sessions(root: Path) -> None:
    put(root, "a", lines(header("a"), *one_turn(0), title(6, "Alpha")))
    put(
        root,
        "b",
        as_zstd(lines(header("b", createdAt=2, cwd="/x"), *one_turn(0), title(6, "Beta"))),
        "zstd",
        "/x",
    )


def test_unchanged_logs_are_not_read_again_and_changed_ones_are(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    two_sessions(root)
    age(root)
    store = CountingStore(root, index_dir=tmp_path / "cache")
    records = store.list_sessions()
    assert [o.title for o in store.read_titles(records)] == ["Alpha", "Beta"]
    assert store.replays == 2
    fresh = CountingStore(root, index_dir=tmp_path / "cache")  # another process, same index file
    assert [o.title for o in fresh.read_titles(fresh.list_sessions())] == ["Alpha", "Beta"]
    assert fresh.replays == 0
    path = next(root.glob("*/a/session.jsonl"))
    with path.open("ab") as handle:
        handle.write(lines(title(7, "Alpha 2")))
    os.utime(path, (PAST, PAST))  # only this log changes (utime changes its ctime too)
    assert [o.title for o in fresh.read_titles(fresh.list_sessions())] == ["Alpha 2", "Beta"]
    assert fresh.replays == 1


def test_a_log_changed_just_before_it_was_read_is_read_again(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    two_sessions(root)  # written just now: a same-tick rewrite could hide behind its key
    store = CountingStore(root, index_dir=tmp_path / "cache")
    for expected in (2, 4):
        store.read_titles(store.list_sessions())
        assert store.replays == expected
    now = time.time_ns()
    assert all(os.stat(path).st_mtime_ns + RACY_NS > now for path in logs(root))


def test_titles_need_the_same_record_id_and_header(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    two_sessions(root)
    age(root)
    store = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    plain = JsonlSessionStore(root)
    records = store.list_sessions()
    b = records[1]
    forged = [
        SessionRecord("b", 2, "/x", {**b.header, "createdAt": 3}, b.location),
        SessionRecord("zzz", 2, "/x", b.header, b.location),
    ]
    for record in forged:
        assert store.read_titles(records) == plain.read_titles(records)  # "b" is indexed now
        assert store.read_titles([record]) == plain.read_titles([record])
    assert plain.read_titles(forged)[0].error == 'session source headers conflict for session "b"'


# --- an index that cannot be trusted ------------------------------------------------------------------


def index_file(store: IndexedSessionStore) -> Path:
    path = store.index_path
    assert path is not None
    return Path(path)


def warm(tmp_path: Path) -> tuple[Path, Path, Observation]:
    root = tmp_path / "sessions"
    two_sessions(root)
    age(root)
    store = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    expected = same(root, store)
    store.close()
    return root, index_file(store), expected


def test_a_file_that_is_not_an_index_is_replaced(tmp_path: Path) -> None:
    root, path, expected = warm(tmp_path)
    path.write_bytes(b"this is not a database" * 100)
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    store = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    assert observe(store) == expected
    store.close()
    assert path.read_bytes().startswith(b"SQLite format 3")


def test_a_foreign_database_is_replaced(tmp_path: Path) -> None:
    root, path, expected = warm(tmp_path)
    path.unlink()
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    foreign = sqlite3.connect(path)
    foreign.execute("CREATE TABLE logs(path TEXT, fp TEXT)")
    foreign.execute("INSERT INTO logs VALUES ('x', 'y')")
    foreign.commit()
    foreign.close()
    store = CountingStore(root, index_dir=tmp_path / "cache")
    assert observe(store) == expected
    assert store.replays == 2


def test_an_index_being_made_by_another_process_is_waited_for_not_replaced(tmp_path: Path) -> None:
    """Another process (a second editor window) checking or making the file holds its lock: a
    half-made file would look foreign, and replacing it would throw the other's work away."""
    root, path, expected = warm(tmp_path)
    store = CountingStore(root, index_dir=tmp_path / "cache")
    opened: list[bool] = []

    def first_use() -> None:
        store._database()  # the file is opened (and checked) on first use
        opened.append(True)

    with database_module._making(str(path)):
        opener = threading.Thread(target=first_use, daemon=True)
        opener.start()
        opener.join(0.5)
        assert opener.is_alive() and not opened  # waiting for the lock
    opener.join(20)
    assert opened
    assert observe(store) == expected
    assert store.replays == 0  # the file the other process made was used, not rebuilt
    store.close()


def test_a_tampered_row_is_detected_and_the_index_rebuilt(tmp_path: Path) -> None:
    root, path, expected = warm(tmp_path)
    conn = sqlite3.connect(path)
    changed = conn.execute(
        "UPDATE logs SET title = replace(title, 'Alpha', 'Evil') WHERE title LIKE '%Alpha%'"
    )
    assert changed.rowcount == 1
    conn.commit()
    conn.close()
    store = CountingStore(root, index_dir=tmp_path / "cache")
    assert observe(store) == expected
    assert store.replays == 2  # nothing from the tampered file was used


def test_the_index_of_another_root_is_not_used(tmp_path: Path) -> None:
    root, path, expected = warm(tmp_path)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value = '/somewhere/else' WHERE key = 'root'")
    conn.commit()
    conn.close()
    store = CountingStore(root, index_dir=tmp_path / "cache")
    assert observe(store) == expected
    assert store.replays == 2


def test_an_index_folder_inside_the_root_is_never_created(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    two_sessions(root)
    before = snapshot_tree(root)
    store = IndexedSessionStore(root, index_dir=root / ".cache")
    same(root, store)
    assert store.index_path is None
    assert snapshot_tree(root) == before


def test_an_unwritable_cache_folder_keeps_the_index_in_memory(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    two_sessions(root)
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    store = IndexedSessionStore(root, index_dir=blocker / "index")
    same(root, store)
    same(root, store)
    assert store.index_path is None


def test_default_index_dir_follows_xdg_cache_home() -> None:
    assert default_index_dir({"XDG_CACHE_HOME": "/c"}) == "/c/dsh-session-reference/index"
    assert default_index_dir({}).endswith(os.path.join(".cache", "dsh-session-reference", "index"))


def test_concurrent_calls_agree(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    build(root, random.Random(7), 12)
    age(root)
    expected = observe(JsonlSessionStore(root))
    store = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    results: list[Observation] = []

    def run() -> None:
        for _ in range(5):
            results.append(observe(store))

    threads = [threading.Thread(target=run) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [expected] * 20


# --- title hints --------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_title_hints_find_the_last_title_line(tmp_path: Path, compression: str) -> None:
    root = tmp_path / "sessions"
    body = lines(header("a"), *one_turn(0), title(6, "First"), user(7, 'says {"type":"session/title"}'))
    body += (
        lines(title(8, "Second ✓"), *one_turn(9)) + b'{"type":"session/title","seq":15,"data":{"title":"Torn'
    )
    path = put(root, "a", as_zstd(body) if compression == "zstd" else body, compression)
    real = os.path.realpath(root)
    assert scan_last_title(path, real) == "Second ✓"
    untitled = put(root, "b", lines(header("b"), *one_turn(0)), "none")
    assert scan_last_title(untitled, real) is None


@pytest.mark.parametrize("compression", ["none", "zstd"])
def test_title_hints_hold_nothing_of_a_long_line_that_is_no_title(tmp_path: Path, compression: str) -> None:
    """The language server scans hints in its own process, behind requests that may be holding a
    line of up to 32 MiB themselves: a scan of a log with a line past that (a 200 MB message, a
    decompression bomb's endless line) held up to 32 MiB of it too, over and over to its end, and
    the two peaks met (the corrupt-store test's server then went past its bound). A line that does
    not start as a title line is never held."""
    root = tmp_path / "sessions"
    long_line = js_stringify(user(7, "x" * (40 << 20))).encode()
    body = lines(header("a"), *one_turn(0), title(6, "Before")) + long_line + b"\n" + lines(title(8, "After"))
    path = put(root, "a", as_zstd(body) if compression == "zstd" else body, compression)
    del long_line, body
    real = os.path.realpath(root)
    tracemalloc.start()
    try:
        found = scan_last_title(path, real)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found == "After"
    assert peak < 8 << 20, peak  # a chunk or two of 1 MiB; 32 MiB and more before


def test_title_hints_match_the_titles_of_healthy_logs(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    rng = random.Random(3)
    for number in range(10):
        put(root, f"h{number}", healthy(f"h{number}", rng, 1, "/w"), "none")
    store = JsonlSessionStore(root)
    records = store.list_sessions()
    real = os.path.realpath(root)
    for record, observation in zip(records, store.read_titles(records), strict=True):
        assert record.location is not None
        assert scan_last_title(record.location, real) == observation.title


# --- body search ---------------------------------------------------------------------------------------


def test_body_search_finds_message_text_and_follows_changes(tmp_path: Path) -> None:
    root = tmp_path / "sessions"
    put(root, "a", lines(header("a"), *one_turn(0, "how do we run the migration?", "with alembic upgrade")))
    put(root, "b", lines(header("b", createdAt=2), *one_turn(0, "fix the cart", "rounded once")))
    store = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    records = store.list_sessions()
    assert store.index_bodies(records) == 2
    assert store.index_bodies(records) == 0  # nothing changed
    found = store.search_bodies("alemb", records, 10)
    assert [match.record.id for match in found] == ["a"]
    assert "alembic" in found[0].snippet
    assert store.search_bodies("zzz", records, 10) == []
    assert store.search_bodies("...", records, 10) == []
    path = log_path(str(root), "/w", "b", "none")
    with open(path, "ab") as handle:
        handle.write(lines(*one_turn(6, "now the alembic config", "done")))
    assert store.index_bodies(store.list_sessions()) == 1
    assert sorted(match.record.id for match in store.search_bodies("alembic", records, 10)) == ["a", "b"]
    shutil.rmtree(os.path.dirname(path))
    records = store.list_sessions()
    store.index_bodies(records)
    assert [match.record.id for match in store.search_bodies("alembic", records, 10)] == ["a"]
    assert encode_segment("a") == "a"


def test_indexes_of_roots_that_are_gone_are_tidied_away(tmp_path: Path) -> None:
    kept, gone = tmp_path / "kept", tmp_path / "gone"
    for root in (kept, gone):
        two_sessions(root)
        store = IndexedSessionStore(root, index_dir=tmp_path / "cache")
        store.list_sessions()
        store.close()
    shutil.rmtree(gone)
    assert tidy_index_dir(str(tmp_path / "cache")) == 1
    left = sorted(path.name for path in (tmp_path / "cache").iterdir())
    assert len([name for name in left if name.endswith(".sqlite3")]) == 1
    assert len([name for name in left if name.endswith(".sqlite3.lock")]) == 1  # the kept one's
    assert tidy_index_dir(str(tmp_path / "cache")) == 0


def test_headers_json_spells_awkwardly_survive_the_kept_index_rows(tmp_path: Path) -> None:
    """Index rows keep headers compactly (a flat one as one dict its records share, a nested one
    copied for each record); a hit, in this process or the next, must give back exactly the
    header the log holds."""
    root = tmp_path / "sessions"

    def raw(session_id: str, escaped_id: str, fields: str) -> bytes:
        line = f'{{"type":"session","version":{fields},"id":"{escaped_id}","createdAt":1700000000000,"cwd":"/w","delegationDepth":0}}'
        return line.encode() + b"\n" + lines(*one_turn(0))

    put(root, "flat", raw("flat", "flat", '-0.0,"seedLength":1180591620717411303424'))
    put(root, "nested", raw("nested", "nested", '0,"parentSession":{"k":[1,{"x":null}]}'))
    put(root, "odd\ud800", raw("odd\ud800", "odd\\ud800", "0"))
    # JSON.parse reads 1e400 as Infinity, which JSON cannot write back: listed, not indexed.
    put(root, "inf", raw("inf", "inf", "1e400"))
    age(root)
    ids = ["flat", "nested", "odd\ud800", "inf"]
    first = IndexedSessionStore(root, index_dir=tmp_path / "cache")
    expected = same(root, first, ids)
    assert isinstance(expected, tuple)
    headers = {row[0]: row[3] for row in expected[0]}
    assert set(headers) == set(ids)
    assert '"version":-0.0' in headers["flat"] and "1.1805916207174113e+21" in headers["flat"]  # a JS number
    assert '"parentSession":{"k":[1,{"x":null}]}' in headers["nested"]
    assert same(root, first, ids) == expected  # hits in this process
    # A listed header is read-only (``SessionRecord.header`` is a Mapping): a flat one is the very
    # dict its row keeps, shared by every listing made from that row; a nested one is copied, and
    # one JSON cannot write (Infinity) has no row: read again by each walk.
    again = {record.id: record.header for record in first.list_sessions()}
    shared = {record.id for record in first.list_sessions() if record.header is again[record.id]}
    assert shared == {"flat", "odd\ud800"}
    assert same(root, IndexedSessionStore(root, index_dir=tmp_path / "cache"), ids) == expected
