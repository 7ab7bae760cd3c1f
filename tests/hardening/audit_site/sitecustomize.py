"""Record every file-system audit event of this Python process when ``DSH_SR_AUDIT_LOG`` is set.

The read-only and containment tests cannot trust the code under test to say
what it opened, so every interpreter they start (the CLI, the language server,
and any worker process those spawn, since the environment is inherited) finds
this module on ``PYTHONPATH`` and installs a :func:`sys.addaudithook` hook
before any product code runs. One JSON line per event is appended to the log:
every ``open`` (path, mode and ``O_*`` flags), directory listing, and every
call that could change a file (rename, remove, mkdir, chmod, utime, truncate,
link, lock...) and every SQLite database opened; at exit the process's peak resident memory. Lines are written
with ``os.write`` on a descriptor opened before the hook exists, so recording
raises no events of its own.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import sys
from typing import Any

_PREFIXES = ("os.", "fcntl.", "shutil.", "mmap.")
_QUIET = frozenset({"os.getxattr", "os.listxattr"})
BY_DESCRIPTOR = frozenset({"fcntl.flock", "fcntl.lockf", "os.lockf", "os.truncate"})
"""Changes that may name only a descriptor: recorded with the file it is open on, where Linux
says (``tests/hardening/audit.py`` judges one it could not tell as suspicious anywhere)."""


def _path(value: Any) -> str | int | None:
    if isinstance(value, int):
        return value
    try:
        raw = os.fsdecode(os.fspath(value))
    except TypeError:
        return None
    return os.path.abspath(raw)


_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_EXCL
_LISTINGS = frozenset({"os.listdir", "os.scandir"})


_ON_NAMES = frozenset({"os.remove", "os.rename", "os.rmdir", "os.mkdir"})
"""Events that act on a name itself: removing or renaming a symlink leaves what it points to alone."""


def _target(entry: dict[str, Any], named: list[Any], *, on_name: bool = False) -> dict[str, Any]:
    """Add where a possible change really lands, seen at the moment it is made: each path resolved
    through its links (``real``) and the ``[st_dev, st_ino]`` of each file that exists (``inodes``),
    so a symlink or a hard link in another folder cannot hide a change to a file in a root. An
    open with ``O_NOFOLLOW`` (``on_name``) does not go through a final symlink."""
    real: list[str] = []
    inodes: list[list[int]] = []
    on_name = on_name or entry["event"] in _ON_NAMES
    for item in named:
        with contextlib.suppress(OSError, TypeError, ValueError):
            info = os.fstat(item) if isinstance(item, int) else os.lstat(item) if on_name else os.stat(item)
            inodes.append([info.st_dev, info.st_ino])
        if not isinstance(item, int):
            with contextlib.suppress(OSError, TypeError, ValueError):
                path = os.path.abspath(os.fsdecode(os.fspath(item)))
                if on_name:
                    path = os.path.join(os.path.realpath(os.path.dirname(path)), os.path.basename(path))
                real.append(os.path.realpath(path) if not on_name else path)
    entry["real"] = real
    entry["inodes"] = inodes
    return entry


def _install(log: str) -> None:
    log_fd = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC)
    pid = os.getpid()

    def record(entry: dict[str, Any]) -> None:
        entry["pid"] = pid
        os.write(log_fd, (json.dumps(entry) + "\n").encode("utf-8", "surrogateescape"))

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = args
            entry = {"event": "open", "path": _path(path), "mode": mode, "flags": flags}
            if (flags or 0) & _WRITE_FLAGS or any(c in (mode or "") for c in "wax+"):
                _target(entry, [path], on_name=bool((flags or 0) & getattr(os, "O_NOFOLLOW", 0)))
            record(entry)
        elif event == "sqlite3.connect":  # SQLite opens its files in C, past the ``open`` hook
            record(_target({"event": event, "paths": [_path(args[0])]}, [args[0]]))
        elif event.startswith(_PREFIXES) and event not in _QUIET:
            named = [arg for arg in args if isinstance(arg, str | bytes | os.PathLike)]
            paths = [_path(arg) for arg in named]
            if not paths and event in BY_DESCRIPTOR and args and isinstance(args[0], int):
                with contextlib.suppress(OSError):  # else judged as naming no file: suspicious anywhere
                    paths = [os.readlink(f"/proc/self/fd/{args[0]}")]
                named = [args[0]]
            entry = {"event": event, "paths": paths}
            record(entry if event in _LISTINGS else _target(entry, named))

    def peak() -> None:
        with open("/proc/self/status", encoding="ascii") as status:
            fields = dict(line.split(":", 1) for line in status if ":" in line)
        record({"event": "exit", "vmhwm_kb": int(fields["VmHWM"].split()[0])})

    sys.addaudithook(hook)
    atexit.register(peak)


if os.environ.get("DSH_SR_AUDIT_LOG"):
    _install(os.environ["DSH_SR_AUDIT_LOG"])
