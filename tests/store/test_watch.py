"""Watching a root: the directories of dsh's layout and nothing else (never through a link), one
call per burst, a new session's directory watched once it appears, nothing created under the root."""

from __future__ import annotations

import itertools
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from dsh_session_reference.store import watch
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


def started(watcher: RootWatcher) -> RootWatcher:
    """``watcher`` once its directories are watched (it failed the test if it stopped instead)."""
    assert watcher.start() is None
    deadline = time.monotonic() + 5
    while not watcher.watching:
        assert time.monotonic() < deadline, "the watcher stopped"
        time.sleep(0.02)
    return watcher


def append_until_seen(log: Path, recorder: Recorder) -> None:
    """Appends to ``log`` until the watcher reports it: a new list of directories is watched
    from when the watch next wakes, not at once."""
    recorder.event.clear()
    deadline = time.monotonic() + 5
    while True:
        recorder.event.clear()
        with log.open("a") as handle:
            handle.write("{}\n")
        if recorder.event.wait(0.3) and any(str(log) in call for call in recorder.calls):
            return
        assert time.monotonic() < deadline, recorder.calls


@pytest.fixture
def watching(tmp_path: Path):
    root = tmp_path / "root"
    root.mkdir()
    make(root)
    recorder = Recorder()
    watcher = started(RootWatcher(str(root), recorder))
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
    (root / "proj" / "s2").mkdir()
    assert watched_directories(str(root), limit=1) == ([str(root), str(root / "proj")], True)
    interest = [
        str(root / "proj" / "s1"),
        str(root / "proj" / "linked"),
        str(root / "proj" / "s1" / "session.jsonl"),
        str(outside),
        str(outside / "deep"),
        str(root / "link" / "deep"),
        str(root / "proj" / "missing"),
        os.path.join(str(root / "proj" / "linked"), os.pardir, "s1"),  # lstat would go through the link
        os.fsdecode(os.path.join(os.fsencode(root / "proj"), b"bad\xff")),  # watchfiles refuses it
    ]
    os.makedirs(os.path.join(os.fsencode(root / "proj"), b"bad\xff"))
    assert watched_directories(str(root), limit=1, interest=interest) == (
        [str(root), str(root / "proj"), str(root / "proj" / "s1")],
        True,
    )
    # Past the limit in project directories: the root (new projects still seen) and the interest.
    assert watched_directories(str(root), limit=0, interest=interest) == (
        [str(root), str(root / "proj" / "s1")],
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
    watcher = started(RootWatcher(str(root), recorder))
    try:
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
    append_until_seen(root / "proj" / "s1" / "session.jsonl", recorder)


def test_a_name_that_is_not_utf8_is_left_out_and_the_rest_watched(tmp_path: Path) -> None:
    """watchfiles refuses such a path: one project named ``bad\\xff`` stopped all watching."""
    root = tmp_path / "root"
    make(root)
    odd = os.path.join(os.fsencode(root), b"bad\xff", b"s1")
    os.makedirs(odd)
    assert all("\udcff" not in path for path in watched_directories(str(root))[0])
    recorder = Recorder()
    watcher = started(RootWatcher(str(root), recorder))
    try:
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
    started(watcher)
    try:
        first, second = root / "proj" / "s1" / "session.jsonl", root / "proj" / "s2" / "session.jsonl"
        with second.open("a") as handle:
            handle.write("{}\n")
        assert not recorder.event.wait(0.8), recorder.calls  # not of interest: not watched
        with first.open("a") as handle:
            handle.write("{}\n")
        assert recorder.wait() == frozenset({str(first)})
        watcher.interest([str(root / "proj" / "s2")])
        append_until_seen(second, recorder)
    finally:
        watcher.close()


def test_interest_given_while_the_list_is_taken_is_watched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The editor names a session while the watcher is still listing a big root (its first walk
    of 10,000 directories takes a while): the list made without it must not stay."""
    root = tmp_path / "root"
    make(root)
    recorder = Recorder()
    watcher = RootWatcher(str(root), recorder)
    watcher.limit = 0
    listing = watch.watched_directories

    def named_meanwhile(*args: object) -> tuple[list[str], bool]:
        found = listing(*args)  # type: ignore[arg-type]
        watcher.interest([str(root / "proj" / "s1")])  # as the event loop would, from its thread
        return found

    monkeypatch.setattr(watch, "watched_directories", named_meanwhile)
    started(watcher)
    try:
        append_until_seen(root / "proj" / "s1" / "session.jsonl", recorder)
    finally:
        watcher.close()


def test_a_directory_made_a_link_before_it_is_watched_is_let_go(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """inotify follows a link it is given: a session directory swapped for a link to a folder
    outside between the listing and the watch would have had writes there reported. Once watched,
    the list is checked again and taken anew."""
    root = tmp_path / "root"
    make(root)
    outside = tmp_path / "outside"
    outside.mkdir()
    listing = watch.watched_directories
    swapped: list[bool] = []

    def swap_after_listing(*args: object) -> tuple[list[str], bool]:
        found = listing(*args)  # type: ignore[arg-type]
        if not swapped:
            swapped.append(True)
            shutil.rmtree(root / "proj" / "s1")
            (root / "proj" / "s1").symlink_to(outside, target_is_directory=True)
        return found

    monkeypatch.setattr(watch, "watched_directories", swap_after_listing)
    recorder = Recorder()
    watcher = started(RootWatcher(str(root), recorder))
    try:
        time.sleep(1.2)  # the check at the first wake, and the new list's watch
        recorder.calls.clear()
        recorder.event.clear()
        (outside / "session.jsonl").write_text("{}\n")
        assert not recorder.event.wait(0.8), recorder.calls
    finally:
        watcher.close()


def test_the_first_watch_waits_for_its_moment(tmp_path: Path) -> None:
    """Setting up a watch holds the interpreter (about 50 ms per thousand directories): the first
    one waits for ``settle`` (the catalog passes the editor's first pause), not for nothing."""
    root = tmp_path / "root"
    make(root)
    release = threading.Event()
    watcher = RootWatcher(str(root), Recorder(), settle=release.wait)
    assert watcher.start() is None
    try:
        time.sleep(0.7)  # past a watch's first wake (rust_timeout)
        assert not watcher.watching
        release.set()
        deadline = time.monotonic() + 5
        while not watcher.watching:
            assert time.monotonic() < deadline, "the watcher stopped"
            time.sleep(0.02)
    finally:
        release.set()
        watcher.close()


def test_a_root_that_is_no_directory_is_not_watched(tmp_path: Path) -> None:
    assert (
        RootWatcher(str(tmp_path / "missing"), Recorder()).start() == "the sessions root is not a directory"
    )
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert RootWatcher(str(fifo), Recorder()).start() == "the sessions root is not a directory"


def test_a_watch_that_fails_is_tried_again_and_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The user's inotify instances used up for a while (watchfiles then raises when it sets up a
    watch): the watcher waits, longer after each failure, tries again, says when it watches again
    and tells of every directory it watches, since changes made meanwhile went unseen. It used to
    log "not watching" and end for good."""
    import watchfiles

    root = tmp_path / "root"
    make(root)
    real_watch = watchfiles.watch
    attempts: list[float] = []

    def exhausted(*args: object, **kwargs: object) -> object:
        attempts.append(time.monotonic())
        if len(attempts) <= 3:
            raise RuntimeError("Error creating recommended watcher: Too many open files (os error 24)")
        return real_watch(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(watchfiles, "watch", exhausted)
    monkeypatch.setattr(watch, "RETRY_AFTER", 0.1)
    recorder = Recorder()
    caplog.set_level("INFO", logger=watch.LOG.name)
    watcher = started(RootWatcher(str(root), recorder))
    try:
        assert len(attempts) == 4
        waits = [later - earlier for earlier, later in itertools.pairwise(attempts)]
        assert waits[0] >= 0.1 and waits[1] >= 0.2 and waits[2] >= 0.4  # twice as long each time
        assert recorder.wait() == {str(root), str(root / "proj"), str(root / "proj" / "s1")}
        said = [(record.levelname, record.getMessage()) for record in caplog.records]
        assert said[0][0] == "WARNING" and said[0][1].startswith(f"not watching {root} (")
        assert [level for level, _ in said[1:3]] == ["INFO", "INFO"]  # a failure that goes on
        assert said[3] == ("WARNING", f"watching {root} again")
        append_until_seen(root / "proj" / "s1" / "session.jsonl", recorder)
    finally:
        watcher.close()
