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

import fcntl
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from dsh_session_reference.sample import SAMPLE_SESSION_IDS, write_sample_store
from dsh_session_reference.store.index.database import LOCK_SUFFIX, ROOT_SUFFIX, default_index_dir, index_file

from .audit import CACHE_NAMES, cache_dir, run_audited
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
