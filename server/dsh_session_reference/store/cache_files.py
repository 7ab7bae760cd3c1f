"""Files in the cache folder, opened as untrusted: never through a link, never a shared inode.

The index lives in the user's cache folder, which other programs (or a hostile
repository's scripts) can write to. A name planted there must not turn our own
writes into writes elsewhere: a symlink ``<index>.lock`` pointing into a sessions
root would make us create or lock a file there, and a hard link to a live log
would make us lock that log (dsh's writer would then wait on us) or hand it to
SQLite to open for writing. So every file here is opened with ``O_NOFOLLOW`` and
kept only if it is a regular file with one link. Anything else under one of our
names is unlinked and made anew when unlinking it changes nothing but the cache
folder (a symlink, a FIFO: the name has one link, so its inode is its own); a
name with other hard links is left alone, since removing it would change the
other file's link count and ctime, and that file is done without (the index
then lives in memory). Reads are bounded and never block on a FIFO.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
from typing import Final

_LOG = logging.getLogger("dsh_session_reference.index")

_NOFOLLOW: Final = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC: Final = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK: Final = getattr(os, "O_NONBLOCK", 0)
_NOCTTY: Final = getattr(os, "O_NOCTTY", 0)

DATABASE_SUFFIXES: Final = ("", "-wal", "-shm", "-journal")
"""The files SQLite keeps for a database ``path``: ``path`` plus each suffix."""


class PlantedFile(OSError):
    """A name of ours in the cache folder is not a private regular file (a link, a FIFO, ...)."""


def _private(info: os.stat_result) -> bool:
    return stat.S_ISREG(info.st_mode) and info.st_nlink == 1


def _planted(path: str, info: os.stat_result) -> PlantedFile:
    kind = "a file with other links" if stat.S_ISREG(info.st_mode) else "not a regular file"
    return PlantedFile(errno.EPERM, kind, path)


def open_private(path: str, flags: int) -> int:
    """``os.open`` of a file of ours: never through a symlink, never a non-regular file or a file
    with other hard links (it is looked at before it is opened, and checked again once open).

    With ``O_CREAT``, a planted entry is removed and the file is made afresh (``O_EXCL``, 0600), so
    what is returned is always our own file; without it, a planted entry is :class:`PlantedFile`.
    """
    base = flags | _NOFOLLOW | _CLOEXEC | _NONBLOCK | _NOCTTY
    for _ in range(3):
        try:
            seen: os.stat_result | None = os.lstat(path)
        except FileNotFoundError:
            seen = None
        if seen is not None and not _private(seen):
            if not (flags & os.O_CREAT and unlink_own(path)):
                raise _planted(path, seen)
            _LOG.warning("%s in the cache folder was not ours (%s); replaced it", path, _planted(path, seen))
            continue
        exclusive = os.O_EXCL if seen is None and flags & os.O_CREAT else 0
        try:
            fd = os.open(path, base | exclusive, 0o600)
        except FileExistsError:
            continue  # another process made it meanwhile: look again
        opened = os.fstat(fd)
        same = seen is None or (opened.st_dev, opened.st_ino) == (seen.st_dev, seen.st_ino)
        if _private(opened) and same:
            return fd
        os.close(fd)  # replaced between the look and the open: look again
    raise PlantedFile(errno.EAGAIN, "kept changing while it was opened", path)


def read_private(path: str, limit: int) -> str | None:
    """A small text file of ours (at most ``limit`` bytes), or ``None`` if it is missing, not ours,
    or larger."""
    try:
        fd = open_private(path, os.O_RDONLY)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        return None
    return data.decode("utf-8", "surrogateescape")


def write_private(path: str, text: str) -> None:
    """Replace ``path`` with a new file holding ``text``: written under a fresh name (``O_EXCL``
    never follows a link) and renamed over whatever ``path`` was."""
    with contextlib.suppress(FileNotFoundError):
        if os.lstat(path).st_nlink > 1:
            raise _planted(path, os.lstat(path))  # renaming over it would change the other file
    temporary = f"{path}.{os.getpid()}.tmp"
    unlink_own(temporary)
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | _CLOEXEC, 0o600)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8", "surrogateescape"))
        os.replace(temporary, path)
    except BaseException:
        unlink_own(temporary)
        raise


def vet_database(path: str) -> None:
    """Before SQLite opens ``path`` (which it does following links, for writing): remove each of
    its files that is not a private regular file (then the rest too: a database without its
    journal is not one to trust). :class:`PlantedFile` if one cannot be removed without touching
    another file (it has other hard links): the caller keeps its index in memory."""
    for suffix in DATABASE_SUFFIXES:
        name = path + suffix
        try:
            info = os.lstat(name)
        except OSError:
            continue
        if not _private(info):
            if not unlink_own(name):
                raise _planted(name, info)
            _LOG.warning("%s in the cache folder was not ours (%s); removed it", name, _planted(name, info))
            remove_database(path)


def remove_database(path: str) -> None:
    for suffix in DATABASE_SUFFIXES:
        unlink_own(path + suffix)


def unlink_own(path: str) -> bool:
    """Remove ``path`` if it is gone or its inode is its own (one link): removing a name with
    other links would change another file. ``True`` when ``path`` no longer exists."""
    with contextlib.suppress(FileNotFoundError):
        if os.lstat(path).st_nlink > 1:
            _LOG.warning("%s in the cache folder has other hard links; leaving it alone", path)
            return False
        os.unlink(path)
    return True
