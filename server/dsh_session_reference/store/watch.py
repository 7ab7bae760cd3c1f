"""Watching a sessions root for dsh's writes, read-only and never through a link.

dsh appends to a session's log as it streams a reply, and makes a directory per new session.
:class:`RootWatcher` watches exactly the directories of that layout (the root, each project
directory, each session directory; see :mod:`.layout`), each without recursion, through
``watchfiles`` (inotify on Linux, FSEvents on macOS, ReadDirectoryChangesW on Windows). A
recursive watch would follow a symbolic link out of the root (a link to ``/`` would have it
watch the whole file system), so the directories are listed here with ``lstat`` semantics and
the list is taken again when one is added or removed. Watching opens no file and creates
nothing; a burst of changes is coalesced into one call of ``on_change``.

Setting up a watch holds the interpreter for all of it (``watchfiles`` adds its inotify watches
without letting go: about 50 ms per thousand directories here, 527 ms at 10,000, during which the
server answers nothing). So the first watch waits for the editor's first pause (``settle``), and on
a root with more session directories than :data:`MAX_SESSION_DIRECTORIES` only the root, its
project directories and the session directories the editor is interested in (those its open
documents mention, :meth:`RootWatcher.interest`) are watched: a referenced log still refreshes
what shows it at once, and other logs are checked as before.

Where watching is not available (no ``watchfiles``, a root that is no directory) :meth:`RootWatcher.start`
says so. Where it fails later (the user's inotify instances or watches used up for a while, a file
system without notifications) the thread logs why and tries again, waiting :data:`RETRY_AFTER`
seconds and twice as long after each failure in a row (at most :data:`RETRY_AT_MOST`); once it
watches again it says so, and tells of every watched directory, since anything may have changed
meanwhile. Either way the catalog keeps checking the root as it always has, when a request asks
and at the editor's pauses. On Windows each watched directory is held open, which can keep it
from being renamed while the editor runs.
"""

from __future__ import annotations

import logging
import os
import stat
import threading
from collections.abc import Callable, Iterable
from functools import partial
from typing import Final

from ..cancellation import AbortSignal
from .layout import is_real

LOG = logging.getLogger(__name__)

DEBOUNCE_MS: Final = 150
"""Changes are gathered this long at most before ``on_change`` (dsh streams a reply in chunks)."""
STEP_MS: Final = 30
"""A quiet spell this long ends a burst early."""
MAX_SESSION_DIRECTORIES: Final = 1_000
"""Session directories watched at most (project directories too). The watch is set up anew when a
directory comes or goes (dsh starts a session), holding the interpreter about 50 ms per thousand;
past this, only the root, its project directories (new sessions are still seen at once) and the
sessions of interest are watched, and other logs are checked as before, when a request asks and at
the editor's pauses. Past it in project directories, the root and the sessions of interest."""
MAX_INTEREST: Final = 256
"""Session directories of interest watched at most on a big root (the first given)."""
RETRY_AFTER: Final = 1.0
"""Seconds between looks for a root that went away (it is watched again once it is back), and
before the first new attempt after watching failed."""
RETRY_AT_MOST: Final = 60.0
"""Seconds at most between attempts to watch again while watching keeps failing."""


def watched_directories(
    root: str, limit: int = MAX_SESSION_DIRECTORIES, interest: Iterable[str] = ()
) -> tuple[list[str], bool]:
    """The root, its project directories and their session directories: real directories only
    (a link is never followed). Past ``limit`` session directories, only those of ``interest``
    that are session directories of this root; the flag says whether the list was so limited."""
    projects = list(_subdirectories(root))
    if len(projects) > limit:
        return [root, *_of_interest(root, interest)], True
    sessions: list[str] = []
    for project in projects:
        sessions.extend(_subdirectories(project))
        if len(sessions) > limit:
            return [root, *projects, *_of_interest(root, interest)], True
    return [root, *projects, *sessions], False


def _of_interest(root: str, interest: Iterable[str]) -> list[str]:
    """The session directories of ``interest`` that may be watched (checked only for a limited
    list: under the limit every session directory is watched already)."""
    return sorted(filter(partial(_session_directory, root), set(interest)))


def _session_directory(root: str, path: str) -> bool:
    """Whether ``path`` is a real directory two names below ``root`` whose path can be watched
    (spelled plainly: ``lstat`` would take ``proj/link/../s1`` through the link)."""
    if depth_below(root, path) != 2 or os.path.normpath(path) != path or not _utf8(path):
        return False
    # A directory, not a link to one: inotify follows a link it is given to watch.
    return is_real(path, stat.S_ISDIR) and is_real(os.path.dirname(path), stat.S_ISDIR)


def _subdirectories(path: str) -> Iterable[str]:
    """Real subdirectories whose path the watcher can take: ``watchfiles`` refuses a name that is
    not UTF-8 (``bad\\xff``), and one such name would otherwise stop the watching of the whole root;
    its logs are checked as before."""
    try:
        with os.scandir(path) as entries:
            found = [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []
    return [directory for directory in found if _utf8(directory)]


def _utf8(path: str) -> bool:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def depth_below(root: str, path: str) -> int | None:
    """How many names ``path`` has below ``root`` (``None``: not under it)."""
    try:
        relative = os.path.relpath(path, root)
    except ValueError:  # another drive (Windows)
        return None
    if relative == os.curdir:
        return 0
    if relative.startswith(os.pardir):
        return None
    return len(relative.split(os.sep))


class RootWatcher:
    """A thread watching ``root`` (see the module docstring); ``on_change`` gets the changed
    paths of each burst, from the watcher's thread."""

    def __init__(
        self,
        root: str,
        on_change: Callable[[frozenset[str]], None],
        settle: Callable[[], object] | None = None,
    ) -> None:
        self.root = root
        self.on_change = on_change
        self.settle = settle
        """Waits, in the watcher's thread, for a moment to set up the first watch in (the editor's
        first pause: the first answers must not wait for it). Until then the root is checked."""
        self._stop = AbortSignal()
        self._thread: threading.Thread | None = None
        self.watching = False
        """Whether the directories are watched yet (a test waits for it before writing)."""
        self.limit = MAX_SESSION_DIRECTORIES
        """Session directories watched at most (a test lowers it rather than make 10,000)."""
        self._interest: frozenset[str] = frozenset()
        """Session directories to watch past the limit; replaced whole, so the watcher's thread
        compares the set its list was made with against the newest without a lock."""

    def interest(self, directories: Iterable[str]) -> None:
        """The session directories to watch even where the root has too many to watch them all
        (the :data:`MAX_INTEREST` first given are kept). Callable from any thread; a limited watch
        takes a new list when it next wakes (within ``rust_timeout``)."""
        self._interest = frozenset(list(directories)[:MAX_INTEREST])

    def start(self) -> str | None:
        """Start watching; ``None`` once started, else why it cannot (the caller keeps checking)."""
        try:
            import watchfiles  # noqa: F401  (an optional dependency: its absence is a reason)
        except ImportError:
            return "watchfiles is not installed"
        if not os.path.isdir(self.root):
            return "the sessions root is not a directory"
        if not _utf8(self.root):
            return "the sessions root's path is not UTF-8"
        self._thread = threading.Thread(target=self._run, name="dsh-session-watch", daemon=True)
        self._thread.start()
        return None

    def close(self, *, wait: bool = True) -> None:
        """Stop watching; ``wait``: until the thread has ended (not from a finalizer)."""
        self._stop.abort()
        thread = self._thread
        if wait and thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2)

    def _run(self) -> None:
        from watchfiles import watch

        if self.settle is not None:
            self.settle()
        real = os.path.realpath(self.root)
        failures = 0  # attempts to watch that failed in a row (each waits twice as long as the last)
        missed = False  # changes may have gone unseen (the root was gone, or not watched)
        while not self._stop.aborted:
            if not os.path.isdir(self.root):  # removed (a restore, a move): watched again once back,
                missed = True  # and all of it may be new then
                self._stop.wait(RETRY_AFTER)
                continue
            interest = self._interest
            directories, limited = watched_directories(self.root, self.limit, interest)
            relist = False
            checked = False
            try:
                for changes in watch(
                    *directories,
                    recursive=False,
                    stop_event=self._stop,
                    debounce=DEBOUNCE_MS,
                    step=STEP_MS,
                    rust_timeout=500,
                    yield_on_timeout=True,
                    ignore_permission_denied=True,
                    raise_interrupt=False,
                ):
                    self.watching = True
                    if failures:
                        LOG.warning("watching %s again", self.root)
                        failures = 0
                    if missed:  # the watch is in place: what changed before it may have been missed
                        missed = False
                        self._tell(frozenset(directories))
                    if changes:
                        paths = frozenset(self._under_root(path, real) for _, path in changes)
                        depths = [depth_below(self.root, path) for path in paths]
                        relist = any(depth is not None and depth <= 2 for depth in depths)
                        self._tell(paths)
                    if not checked:  # the watch is in place: was a directory made a link meanwhile?
                        checked = True
                        relist = relist or not all(is_real(path, stat.S_ISDIR) for path in directories)
                    # A directory came or went, or other sessions are of interest on a limited
                    # watch (the interest may have changed while the list was taken): watch the new list.
                    if relist or (limited and self._interest != interest):
                        break
                else:
                    return  # stopped
            except Exception as error:  # the user's inotify instances used up, a watch limit
                if not os.path.isdir(self.root):
                    continue  # the root went away while being watched
                self.watching = False
                missed = True
                wait = min(RETRY_AFTER * 2**failures, RETRY_AT_MOST)
                failures += 1
                # Said as a warning the first time; a failure that goes on is said at info level.
                LOG.log(
                    logging.WARNING if failures == 1 else logging.INFO,
                    "not watching %s (%s); checking it instead, and trying again in %g s",
                    self.root,
                    error,
                    wait,
                )
                self._stop.wait(wait)

    def _tell(self, paths: frozenset[str]) -> None:
        try:
            self.on_change(paths)
        except Exception:  # a listener's failure must not end watching
            LOG.exception("handling a change under the sessions root failed")

    def _under_root(self, path: str, real: str) -> str:
        """``path`` spelled under the root as it was given: FSEvents reports canonical paths
        (``/private/var/...`` for ``/var/...``), which the catalog would not recognise."""
        if real != self.root and (path == real or path.startswith(real + os.sep)):
            return self.root + path[len(real) :]
        return path
