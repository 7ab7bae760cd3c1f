"""Watching a root: the directories of dsh's layout and nothing else (never through a link), one
call per burst, a new session's directory watched once it appears, nothing created under the root."""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from dsh_session_reference.store.watch import RootWatcher, depth_below, watched_directories


def make(root: Path) -> None:
    (root / "proj" / "s1").mkdir(parents=True)
    (root / "proj" / "s1" / "session.jsonl").write_text("{}\n")


def snapshot(root: Path) -> list[tuple[str, int, float]]:
    return sorted((str(p.relative_to(root)), p.lstat().st_size, p.lstat().st_mtime) for p in root.rglob("*"))


class Recorder:
    def __init__(self) -> None:
        self.calls: list[frozenset[str]] = []
        self.event = threading.Event()

    def __call__(self, paths: frozenset[str]) -> None:
        self.calls.append(paths)
        self.event.set()

    def wait(self, within: float = 3.0) -> frozenset[str]:
        assert self.event.wait(within), "no change reported"
        self.event.clear()
        return self.calls[-1]


@pytest.fixture
def watching(tmp_path: Path):
    root = tmp_path / "root"
    root.mkdir()
    make(root)
    recorder = Recorder()
    watcher = RootWatcher(str(root), recorder)
    assert watcher.start() is None
    deadline = time.monotonic() + 5
    while not watcher.watching and time.monotonic() < deadline:
        time.sleep(0.02)
    assert watcher.watching
    yield root, recorder
    watcher.close()


def test_the_layout_directories_and_never_a_link(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make(root)
    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (root / "link").symlink_to(outside, target_is_directory=True)
    (root / "proj" / "linked").symlink_to(outside, target_is_directory=True)
    found = watched_directories(str(root))
    assert found == ([str(root), str(root / "proj"), str(root / "proj" / "s1")], False)
    # Past the limit of session directories, the root and its projects only (new sessions still seen),
    # and the sessions of interest: a link, a log, a directory outside or too deep never count.
    assert watched_directories(str(root), limit=0) == ([str(root), str(root / "proj")], True)
    interest = [
        str(root / "proj" / "s1"),
        str(root / "proj" / "linked"),
        str(root / "proj" / "s1" / "session.jsonl"),
        str(outside),
        str(outside / "deep"),
        str(root / "link" / "deep"),
        str(root / "proj" / "missing"),
    ]
    assert watched_directories(str(root), limit=0, interest=interest) == (
        [str(root), str(root / "proj"), str(root / "proj" / "s1")],
        True,
    )
    assert depth_below(str(root), str(root / "proj" / "s1" / "session.jsonl")) == 3
    assert depth_below(str(root), str(tmp_path)) is None


def test_an_append_is_one_call_and_a_burst_is_coalesced(watching: tuple[Path, Recorder]) -> None:
    root, recorder = watching
    log = root / "proj" / "s1" / "session.jsonl"
    with log.open("a") as handle:
        for chunk in range(20):  # dsh streams a reply in many small appends
            handle.write(f'{{"chunk": {chunk}}}\n')
            handle.flush()
            time.sleep(0.002)  # chunks closer together than a quiet spell (STEP_MS)
    assert recorder.wait() == frozenset({str(log)})
    time.sleep(0.4)
    assert 1 <= len(recorder.calls) <= 3, recorder.calls  # one per chunk (20) without coalescing


def test_a_new_session_directory_is_watched_then(watching: tuple[Path, Recorder]) -> None:
    root, recorder = watching
    (root / "proj" / "s2").mkdir()
    assert str(root / "proj" / "s2") in recorder.wait()
    time.sleep(0.6)  # the watcher lists its directories again
    (root / "proj" / "s2" / "session.jsonl").write_text("{}\n")
    deadline = time.monotonic() + 3
    while not any(str(root / "proj" / "s2" / "session.jsonl") in call for call in recorder.calls):
        assert time.monotonic() < deadline, recorder.calls
        time.sleep(0.02)


def test_writes_behind_a_link_are_not_seen_and_nothing_is_created(tmp_path: Path) -> None:
    root = tmp_path / "root"
    make(root)
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "proj" / "away").symlink_to(outside, target_is_directory=True)
    before = snapshot(root)
    recorder = Recorder()
    watcher = RootWatcher(str(root), recorder)
    assert watcher.start() is None
    try:
        deadline = time.monotonic() + 5
        while not watcher.watching and time.monotonic() < deadline:
            time.sleep(0.02)
        (outside / "session.jsonl").write_text("{}\n")
        assert not recorder.event.wait(0.8)
    finally:
        watcher.close()
    assert snapshot(root) == before


def test_a_root_removed_and_made_again_is_watched_again(watching: tuple[Path, Recorder]) -> None:
    root, recorder = watching
    shutil.rmtree(root)
    time.sleep(0.3)
    make(root)  # restored: the watcher says the whole root may be new, then watches it again
    deadline = time.monotonic() + 5
    while str(root) not in recorder.calls[-1] if recorder.calls else True:
        assert time.monotonic() < deadline, recorder.calls
        time.sleep(0.05)
    time.sleep(0.3)
    log = root / "proj" / "s1" / "session.jsonl"
    recorder.event.clear()
    deadline = time.monotonic() + 5
    while True:  # appended to until seen: the new watch may take a moment to be in place
        with log.open("a") as handle:
            handle.write("{}\n")
        if recorder.event.wait(0.3) and any(str(log) in call for call in recorder.calls):
            break
        assert time.monotonic() < deadline, recorder.calls


def test_a_name_that_is_not_utf8_is_left_out_and_the_rest_watched(tmp_path: Path) -> None:
    """watchfiles refuses such a path: one project named ``bad\\xff`` stopped all watching."""
    root = tmp_path / "root"
    make(root)
    odd = os.path.join(os.fsencode(root), b"bad\xff", b"s1")
    os.makedirs(odd)
    assert all("\udcff" not in path for path in watched_directories(str(root))[0])
    recorder = Recorder()
    watcher = RootWatcher(str(root), recorder)
    assert watcher.start() is None
    try:
        deadline = time.monotonic() + 5
        while not watcher.watching:
            assert time.monotonic() < deadline, "the watcher stopped"
            time.sleep(0.02)
        log = root / "proj" / "s1" / "session.jsonl"
        with log.open("a") as handle:
            handle.write("{}\n")
        assert str(log) in recorder.wait()
    finally:
        watcher.close()
    latin = os.path.join(os.fsencode(tmp_path), b"caf\xe9")
    os.makedirs(latin)
    assert RootWatcher(os.fsdecode(latin), Recorder()).start() == "the sessions root's path is not UTF-8"


def test_past_the_limit_only_the_sessions_of_interest_are_watched(tmp_path: Path) -> None:
    """A root with more session directories than the watcher takes: a log of a session of
    interest is seen at once; interest changed while watching is watched within the watch's wake-up;
    other logs are left to the catalog's checks."""
    root = tmp_path / "root"
    make(root)
    (root / "proj" / "s2").mkdir()
    (root / "proj" / "s2" / "session.jsonl").write_text("{}\n")
    recorder = Recorder()
    watcher = RootWatcher(str(root), recorder)
    watcher.limit = 1
    watcher.interest([str(root / "proj" / "s1")])
    assert watcher.start() is None
    try:
        deadline = time.monotonic() + 5
        while not watcher.watching:
            assert time.monotonic() < deadline, "the watcher stopped"
            time.sleep(0.02)
        first, second = root / "proj" / "s1" / "session.jsonl", root / "proj" / "s2" / "session.jsonl"
        with second.open("a") as handle:
            handle.write("{}\n")
        assert not recorder.event.wait(0.8), recorder.calls  # not of interest: not watched
        with first.open("a") as handle:
            handle.write("{}\n")
        assert recorder.wait() == frozenset({str(first)})
        watcher.interest([str(root / "proj" / "s2")])
        deadline = time.monotonic() + 5
        while True:  # appended to until seen: the new list is taken when the watch next wakes
            with second.open("a") as handle:
                handle.write("{}\n")
            if recorder.event.wait(0.3) and any(str(second) in call for call in recorder.calls):
                break
            assert time.monotonic() < deadline, recorder.calls
    finally:
        watcher.close()


def test_a_root_that_is_no_directory_is_not_watched(tmp_path: Path) -> None:
    assert (
        RootWatcher(str(tmp_path / "missing"), Recorder()).start() == "the sessions root is not a directory"
    )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert RootWatcher(str(fifo), Recorder()).start() == "the sessions root is not a directory"
