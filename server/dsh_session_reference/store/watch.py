"""Watching a sessions root for dsh's writes, read-only and never through a link.

dsh appends to a session's log as it streams a reply, and makes a directory per new session.
:class:`RootWatcher` watches exactly the directories of that layout (the root, each project
directory, each session directory; see :mod:`.layout`), each without recursion, through
``watchfiles`` (inotify on Linux, FSEvents on macOS, ReadDirectoryChangesW on Windows). A
recursive watch would follow a symbolic link out of the root (a link to ``/`` would have it
watch the whole file system), so the directories are listed here with ``lstat`` semantics and
the list is taken again when one is added or removed. Watching opens no file and creates
nothing; a burst of changes is coalesced into one call of ``on_change``.

Where watching is not available (no ``watchfiles``, a file system without notifications, a
root too big to watch) :meth:`RootWatcher.start` says so and the catalog keeps checking the
root as it always has, when a request asks and at the editor's pauses.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterable
from typing import Final

from ..cancellation import AbortSignal

LOG = logging.getLogger(__name__)

DEBOUNCE_MS: Final = 150
"""Changes are gathered this long at most before ``on_change`` (dsh streams a reply in chunks)."""
STEP_MS: Final = 30
"""A quiet spell this long ends a burst early."""
MAX_WATCHED: Final = 250_000
"""Directories watched at most: past this, the root is checked as before instead."""


def watched_directories(root: str, limit: int = MAX_WATCHED) -> list[str] | None:
    """The root, its project directories and their session directories: real directories only
    (a link is never followed), at most ``limit`` (``None`` past it)."""
    found = [root]
    for project in _subdirectories(root):
        found.append(project)
        found.extend(_subdirectories(project))
        if len(found) > limit:
            return None
    return found


def _subdirectories(path: str) -> Iterable[str]:
    try:
        with os.scandir(path) as entries:
            return [entry.path for entry in entries if entry.is_dir(follow_symlinks=False)]
    except OSError:
        return []


def depth_below(root: str, path: str) -> int | None:
    """How many names ``path`` has below ``root`` (``None``: not under it)."""
    relative = os.path.relpath(path, root)
    if relative == os.curdir:
        return 0
    if relative.startswith(os.pardir):
        return None
    return len(relative.split(os.sep))


class RootWatcher:
    """A thread watching ``root`` (see the module docstring); ``on_change`` gets the changed
    paths of each burst, from the watcher's thread."""

    def __init__(self, root: str, on_change: Callable[[frozenset[str]], None]) -> None:
        self.root = root
        self.on_change = on_change
        self._stop = AbortSignal()
        self._thread: threading.Thread | None = None
        self.watching = False
        """Whether the directories are watched yet (a test waits for it before writing)."""

    def start(self) -> str | None:
        """Start watching; ``None`` once started, else why it cannot (the caller keeps checking)."""
        try:
            import watchfiles  # noqa: F401  (an optional dependency: its absence is a reason)
        except ImportError:
            return "watchfiles is not installed"
        if not os.path.isdir(self.root):
            return "the sessions root is not a directory"
        self._thread = threading.Thread(target=self._run, name="dsh-session-watch", daemon=True)
        self._thread.start()
        return None

    def close(self) -> None:
        self._stop.abort()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=2)

    def _run(self) -> None:
        from watchfiles import watch

        limit = MAX_WATCHED
        while not self._stop.aborted:
            directories = watched_directories(self.root, limit)
            if directories is None:
                LOG.warning("not watching %s: over %d directories; checking it instead", self.root, limit)
                return
            relist = False
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
                    if not changes:
                        continue
                    paths = frozenset(path for _, path in changes)
                    relist = any((depth_below(self.root, path) or 0) <= 2 for path in paths)
                    try:
                        self.on_change(paths)
                    except Exception:  # a listener's failure must not end watching
                        LOG.exception("handling a change under the sessions root failed")
                    if relist:
                        break  # a directory came or went: watch the new list
            except Exception as error:  # a file system without notifications, a watch limit
                LOG.warning("not watching %s (%s); checking it instead", self.root, error)
                return
            if not relist:
                return
