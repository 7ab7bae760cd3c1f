"""A digest of everything a listing of a root depends on that a bare walk can see.

The catalog's background check compares it with the digest taken before its last listing and
keeps that listing when nothing changed (a bare walk costs a third of a full listing).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable

from .index.rows import stat_numbers
from .layout import PLAIN_NAME, ZSTD_NAME


def root_state(root: str, pause: Callable[[], object] | None = None) -> int:
    """A digest of everything a listing of ``root`` depends on that a bare walk can see: each
    project's entries, and for every session directory the status of both log names (a
    symlinked log by its target too). Equal digests mean the listing would be the same (up to
    a 64-bit hash collision); a digest rather than the statuses themselves, since a 50,000-log
    root would keep ~20 MB of them. Mostly ``lstat`` calls, which release the GIL; ``pause``
    is called every few hundred entries (the background passes one that waits while a request
    is being answered: a 50,000-log walk takes a third of a second). A project's entries are
    taken one at a time, not listed first: a list of 18,000 of them (each with its path) was
    7 MB at once."""
    state = 0
    seen = 0
    try:
        projects = list(os.scandir(root))
    except OSError as error:
        return hash(("", error.errno))
    for project in projects:
        if not project.is_dir(follow_symlinks=False):
            continue
        seen += 1  # a project directory is listed too: 100,000 empty ones must pause as well
        if pause is not None and seen % 256 == 0:
            pause()
        try:
            with os.scandir(project.path) as entries:
                for entry in entries:
                    seen += 1
                    if pause is not None and seen % 256 == 0:
                        pause()
                    state = _entry_state(state, entry)
        except OSError as error:
            state = hash((state, project.path, error.errno))
    return state


def _entry_state(state: int, entry: os.DirEntry[str]) -> int:
    """``state`` with a project's entry: a session directory by both its log names' statuses."""
    if not entry.is_dir(follow_symlinks=False):
        return hash((state, entry.path, _status(entry.path)))
    for name in (ZSTD_NAME, PLAIN_NAME):
        path = entry.path + name
        try:
            info = os.lstat(path)
        except (FileNotFoundError, NotADirectoryError):
            continue
        except OSError as error:
            state = hash((state, path, error.errno))
            continue
        if stat.S_ISREG(info.st_mode):
            # Its numbers apart, not its packed fingerprint: a tuple's hash mixes its items, where an
            # ``int``'s is the number modulo a prime (a log a byte shorter and 256 ns newer hashed alike).
            state = hash((state, path, *stat_numbers(info)))
        else:
            state = hash((state, path, _status(path)))
    return state


def _status(path: str) -> object:
    try:
        info = os.lstat(path)
        link = os.stat(path) if stat.S_ISLNK(info.st_mode) else None
    except OSError as error:
        return error.errno
    return (info.st_mode, *stat_numbers(info), None if link is None else stat_numbers(link))
