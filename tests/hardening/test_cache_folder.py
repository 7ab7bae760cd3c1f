"""The cache folder is untrusted: names planted there never carry a write, a create or a lock into a root.

The index, its SQLite companions, its lock file and its root note live in the
user's cache folder, which anything running as the user can write to. Each of
those names is planted in turn as a dangling symlink into the root, a symlink to
a live log, a hard link to a live log and a FIFO. The CLI must answer as usual,
in bounded time, while the test itself holds an exclusive lock on the log (as a
writer would); afterwards the root is byte-for-byte, inode-for-inode the same,
nothing appeared in it, and the audit (which judges each change by where its
path resolved when made and by the inode it landed on) saw no change there. A
symlink or FIFO is replaced by a file of our own; a hard link is left alone
(removing it would change the log's link count and ctime) and not used.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import sqlite3
import time
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from lsp_harness import lsp_session, server_pid
from lsp_support import Session, Spec, default_specs, write_store

from dsh_session_reference.sample import SAMPLE_SESSION_IDS, write_sample_store
from dsh_session_reference.store.index.database import LOCK_SUFFIX, ROOT_SUFFIX, default_index_dir, index_file
from dsh_session_reference.store.index.rows import key_path, row_crc

from .audit import CACHE_NAMES, audited_server_command, cache_dir, run_audited, vm_kb
from .test_read_only import tree_state

NAMES = CACHE_NAMES
assert NAMES[-2:] == (LOCK_SUFFIX, ROOT_SUFFIX)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "sessions"
    write_sample_store(root)
    return root


def a_log(root: Path) -> Path:
    return next(path for path in sorted(root.rglob("session.jsonl*")) if path.is_file())


def index_of(root: Path, log: Path) -> str:
    """Where the audited process's index of ``root`` lives."""
    folder = default_index_dir({"XDG_CACHE_HOME": str(cache_dir(log))})
    os.makedirs(folder, exist_ok=True)
    return index_file(folder, os.path.realpath(root))


@contextmanager
def writer_lock(path: Path) -> Iterator[None]:
    """An exclusive lock on a log for as long as the check runs, as a writer would hold one."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


PLANTS: dict[str, Callable[[Path, Path, str], None]] = {
    "dangling symlink into the root": lambda root, log, name: os.symlink(
        root / f"planted{Path(name).suffix}", name
    ),
    "symlink to a live log": lambda root, log, name: os.symlink(log, name),
    "hard link to a live log": lambda root, log, name: os.link(log, name),
    "fifo": lambda root, log, name: os.mkfifo(name),
}


@pytest.mark.parametrize("suffix", NAMES, ids=lambda s: s or "database")
@pytest.mark.parametrize("kind", PLANTS)
def test_a_planted_cache_name_never_reaches_the_root(
    root: Path, tmp_path: Path, suffix: str, kind: str
) -> None:
    log = tmp_path / "cli.log"
    live = a_log(root)
    planted = index_of(root, log) + suffix
    PLANTS[kind](root, live, planted)
    before = tree_state(root)
    with writer_lock(live):
        run = run_audited(["--sessions", str(root), "--json", "candidates"], log, timeout=60)
    assert run.returncode == 0, run.stderr
    assert len(json.loads(run.stdout)) == len(SAMPLE_SESSION_IDS)
    writes = run.audit.writes_under(root)
    assert writes == [], writes
    assert tree_state(root) == before
    if kind == "hard link to a live log":
        # Removing it would change the log's link count and ctime: it is left, and not used.
        assert os.path.samefile(planted, live)
        return
    if suffix in ("", LOCK_SUFFIX, ROOT_SUFFIX):
        made = os.lstat(planted)
        assert (made.st_nlink, made.st_ino != live.stat().st_ino) == (1, True)
        assert not os.path.islink(planted)


def test_a_second_run_uses_the_index_the_first_made_in_place_of_the_plants(
    root: Path, tmp_path: Path
) -> None:
    log = tmp_path / "cli.log"
    live = a_log(root)
    index = index_of(root, log)
    for suffix in NAMES:
        os.symlink(live, index + suffix)
    first = run_audited(["--sessions", str(root), "--json", "candidates", "cart"], log, timeout=60)
    second = run_audited(["--sessions", str(root), "--json", "candidates", "cart"], log, timeout=60)
    assert first.returncode == second.returncode == 0, (first.stderr, second.stderr)
    assert json.loads(first.stdout) == json.loads(second.stdout) != []
    assert not any(event["event"] == "os.remove" for event in second.audit.events if index in str(event))


# --- forged documents with checksums that hold ------------------------------------------------------
#
# A checksum says a row was not damaged, not who wrote it: anything that can write the cache folder
# can forge a row, or the listing a server leaves, with a CRC-32 that holds. The language server
# must neither spend what such a document asks for nor keep showing titles it says.


def server_env(cache: Path) -> dict[str, str]:
    env = {**os.environ, "XDG_CACHE_HOME": str(cache)}
    env.pop("DSH_HOME", None)
    env.pop("DSH_SESSION_ID", None)
    return env


def index_database(cache: Path, root: Path) -> sqlite3.Connection:
    """The index a language server run with ``cache`` as its cache folder keeps for ``root``."""
    path = index_file(default_index_dir({"XDG_CACHE_HOME": str(cache)}), os.path.realpath(root))
    assert os.path.exists(path)
    return sqlite3.connect(path, isolation_level=None)


def forge_listing(cache: Path, root: Path, body: bytes) -> None:
    with contextlib.closing(index_database(cache, root)) as database:
        database.execute(
            "INSERT OR REPLACE INTO listing(id, body, crc) VALUES (0, ?, ?)", (body, zlib.crc32(body))
        )


def an_hour_old(root: Path) -> Path:
    """``root`` with its logs dated an hour back: the index keeps no title of a log written just now."""
    an_hour_ago = time.time() - 3600
    for log in root.rglob("session.jsonl*"):
        os.utime(log, (an_hour_ago, an_hour_ago))
    return root


async def served_once(root: Path, cache: Path, workspace: Path) -> None:
    """A language server that answers one ``@`` and exits, leaving its index (and listing) behind."""
    async with lsp_session(audited_server_command(), server_env(cache), workspace, root) as s:
        assert (await s.complete(s.open(workspace, "@"))).items


async def first_completion_costs_what_the_root_costs(
    root: Path, cache: Path, workspace: Path, until: Callable[[], bool] | None = None
) -> None:
    """A fresh server over ``cache`` (forged) lists the one-session ``root`` for its first ``@``
    within a second (asked again while it answers "Listing dsh sessions…"), in under 300 MB;
    ``until``: what the server's background must have done before it is closed (an ``exit`` is
    not waited on past a second, so what is left then is left for the next server)."""
    async with lsp_session(audited_server_command(), server_env(cache), workspace, root) as s:
        asked = time.monotonic()
        completion = await s.complete(s.open(workspace, "@"))
        assert time.monotonic() - asked < 1.0
        assert [item.label for item in completion.items] == ["The prompt being written"]
        assert vm_kb(server_pid(s), "VmHWM") < 300 * 1024
        deadline = time.monotonic() + BACKGROUND_WAIT
        while until is not None and not until():
            assert time.monotonic() < deadline, "the server's background did not get there"
            await asyncio.sleep(0.2)
        assert vm_kb(server_pid(s), "VmHWM") < 300 * 1024


BACKGROUND_WAIT = 60.0
"""Seconds a server's background is given to clean the index behind its first answer."""


async def test_a_forged_listing_is_not_parsed_whole_before_its_first_entry_is_refused(
    tmp_path: Path, workspace: Path
) -> None:
    """A 60 MB listing of empty entries (valid JSON, a CRC-32 that holds, under the old 256 MiB
    bound) in front of a root of one session: it was parsed whole, then refused at its first
    entry (a 96 MB one: 6.2 s and a 2.5 GB peak for a fresh server's first completion). It is read
    a line at a time now, and refused at the first."""
    root = write_store(tmp_path / "sessions", default_specs(str(workspace))[:1], "none")
    cache = tmp_path / "cache"
    await served_once(root, cache, workspace)
    forge_listing(cache, root, b'{"l":[' + b",".join([b"[]"] * (20 << 20)) + b"]}")
    await first_completion_costs_what_the_root_costs(root, cache, workspace)


async def forged_labels(s: Session, workspace: Path, *, within: float) -> list[int]:
    """Completions asked one after another for ``within`` seconds (each answered within a second):
    how many rows each showed with a forged title, until one showed none."""
    uri = s.open(workspace, "@")
    counts: list[int] = []
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        asked = time.monotonic()
        completion = await s.complete(uri)
        assert time.monotonic() - asked < 1.0
        counts.append(sum(item.label.startswith("FORGED") for item in completion.items))
        if counts[-1] == 0:
            break
        await asyncio.sleep(0.1)
    return counts


async def test_titles_forged_in_the_listing_a_server_left_do_not_outlive_a_scan_of_the_logs(
    tmp_path: Path, workspace: Path
) -> None:
    """A big root's listing, left by the last server, with every title forged for logs that did not
    change (path and fingerprint as they are): a fresh server answers its first popup from it, and
    the walk that revalidates it kept the titles (50 of 50 rows still showed the forged title). A
    title from the cache folder is a claim now: shown until the log is scanned, which starts at
    once in a worker process."""
    sessions = [Spec(f"s{n:03d}", str(workspace), f"Real title {n}", [("user", "hi")]) for n in range(510)]
    root = an_hour_old(write_store(tmp_path / "sessions", sessions, "none"))  # over 500: served from memory
    cache = tmp_path / "cache"
    await served_once(root, cache, workspace)
    with contextlib.closing(index_database(cache, root)) as database:
        [(body,)] = database.execute("SELECT body FROM listing").fetchall()
    assert body.count(b'"Real title ') == 510
    forge_listing(cache, root, body.replace(b'"Real title ', b'"FORGED title '))
    async with lsp_session(audited_server_command(), server_env(cache), workspace, root) as s:
        counts = await forged_labels(s, workspace, within=15.0)
        assert counts[-1] == 0, f"{counts[-1]} of 50 rows still show a forged title after 15 s"
        assert vm_kb(server_pid(s), "VmHWM") < 300 * 1024


async def test_titles_forged_in_index_rows_do_not_outlive_a_scan_of_the_logs(
    tmp_path: Path, workspace: Path
) -> None:
    """The same with the index's rows themselves (the listing left out, so the rows answer): a row's
    title counted for as long as its log did not change. Only the language server scans; the CLI,
    with nothing to scan in behind an answer, takes a row's title as it is (docs/limits.md)."""
    root = an_hour_old(write_store(tmp_path / "sessions", default_specs(str(workspace)), "none"))
    cache = tmp_path / "cache"
    await served_once(root, cache, workspace)
    with contextlib.closing(index_database(cache, root)) as database:
        rows = database.execute("SELECT path, fp, listing, listing_ns, title, title_ns FROM logs").fetchall()
        forged = 0
        for key, fp, listing, listing_ns, title, title_ns in rows:
            if title is None or json.loads(title)["t"] is None:
                continue
            title = json.dumps({**json.loads(title), "t": "FORGED title"})
            crc = row_crc(key_path(key), fp, listing, listing_ns, title, title_ns)
            database.execute("UPDATE logs SET title = ?, crc = ? WHERE path = ?", (title, crc, key))
            forged += 1
        database.execute("DELETE FROM listing")
    assert forged == 4
    async with lsp_session(audited_server_command(), server_env(cache), workspace, root) as s:
        counts = await forged_labels(s, workspace, within=15.0)
        assert counts[-1] == 0, f"{counts[-1]} rows still show a forged title after 15 s"


async def test_forged_index_rows_cost_what_the_root_costs(tmp_path: Path, workspace: Path) -> None:
    """400,000 rows (CRC-32s that hold) for session directories that are not there, in front of a
    root of one session: every row was loaded before the first walk (1,000,000 took a fresh
    server's first completion 6.0 s and 773 MB). A row counts only for a log that is there, and
    loading stops once more rows name logs that are not there than deleted sessions explain; the
    rest are looked up one by one and removed from the file behind the answer."""
    root = an_hour_old(write_store(tmp_path / "sessions", default_specs(str(workspace))[:1], "none"))
    cache = tmp_path / "cache"
    await served_once(root, cache, workspace)
    project = next(root.iterdir())
    listing = json.dumps({"a": [["x", "none", {"id": "forged", "createdAt": 1}]], "b": []})
    with contextlib.closing(index_database(cache, root)) as database:
        forged = []
        for number in range(400_000):
            path = str(project / f"forged-{number:06d}" / "session.jsonl")
            crc = row_crc(path, "1:2:3:4:5", listing, 1, None, 0)
            forged.append((path.encode(), "1:2:3:4:5", listing, 1, None, 0, crc))
        database.execute("BEGIN")
        database.executemany("INSERT INTO logs VALUES (?, ?, ?, ?, ?, ?, ?)", forged)
        database.execute("COMMIT")
    await first_completion_costs_what_the_root_costs(
        root, cache, workspace, until=lambda: forged_left(cache, root) == 0
    )
    assert forged_left(cache, root) == 0


def forged_left(cache: Path, root: Path) -> int:
    """Rows the index file still holds besides the root's one session's."""
    with contextlib.closing(index_database(cache, root)) as database:
        return int(database.execute("SELECT count(*) FROM logs").fetchone()[0]) - 1
