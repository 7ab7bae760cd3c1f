"""Run the product in a subprocess under the audit hook and judge what it touched.

The audit log (see ``audit_site/sitecustomize.py``) lists every open with its flags, every
directory listing and every call that could change a file. From it these
helpers answer the questions the hardening tests ask: did anything open a path
under the root for writing or change it, did anything read outside the root,
and how much memory did the process use at its peak.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from .audit_site.sitecustomize import BY_DESCRIPTOR

HERE = Path(__file__).resolve().parent
AUDIT_SITE = str(HERE / "audit_site")
TESTS = str(HERE.parent)

WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND | os.O_EXCL
READ_EVENTS = frozenset({"open", "os.listdir", "os.scandir", "sqlite3.connect"})
HARMLESS = frozenset(
    {
        "os.listdir",
        "os.scandir",
        "os.exec",
        "os.posix_spawn",
        "os.fork",
        "os.putenv",
        "os.unsetenv",
        "os.kill",
    }
)
"""Events that read or run things; every other recorded event (``sqlite3.connect`` included) may change a file."""
SILENT_FCNTL = frozenset({"fcntl.fcntl", "fcntl.ioctl"})
"""Descriptor flag changes (non-blocking pipes), not file changes."""
DESCRIPTOR_CHANGES = BY_DESCRIPTOR
"""Changes that may name only a descriptor: the hook records the file it is open on (from
``/proc/self/fd``); one it could not tell is judged suspicious wherever it happens."""


def interpreter_read(path: str) -> bool:
    """Whether ``path`` is one the interpreter reads for itself: its installation, the venv, this
    checkout's sources and test helpers (imports), or the working directory it lists for ``-m``."""
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(TESTS).parent / "server"), TESTS}
    real = [os.path.realpath(root) for root in roots]
    return path == os.getcwd() or any(path == root or path.startswith(root + os.sep) for root in real)


def unprivileged() -> list[str]:
    """A command prefix under which file modes are enforced.

    Root reads through any mode bits (``CAP_DAC_OVERRIDE``), so a ``chmod 000``
    test run as root would prove nothing. Dropping the two DAC capabilities
    from the bounding set before exec makes root an ordinary owner: a mode-000
    file is unreadable to it. Not root: file modes already apply.
    """
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    assert setpriv is not None, "running as root needs util-linux's setpriv to test unreadable files honestly"
    return [setpriv, "--bounding-set", "-dac_override,-dac_read_search"]


@dataclass
class Audit:
    """The events one audited process recorded."""

    events: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def read(cls, path: Path) -> Audit:
        if not path.exists():
            return cls()
        text = path.read_text("utf-8", "surrogateescape")
        return cls([json.loads(line) for line in text.splitlines() if line])

    def paths(self, kinds: Iterable[str] = READ_EVENTS) -> list[str]:
        """Every path the given events named (opens and listings by default)."""
        wanted = set(kinds)
        found: list[str] = []
        for event in self.events:
            if event["event"] not in wanted:
                continue
            candidates = [event.get("path")] if event["event"] == "open" else event.get("paths", [])
            found += [path for path in candidates if isinstance(path, str)]
        return found

    def writes(self) -> list[dict[str, Any]]:
        """Opens for writing and calls that change files, anywhere (the root check narrows them)."""
        out = []
        for event in self.events:
            name = event["event"]
            if name == "open":
                mode = event.get("mode") or ""
                if (event.get("flags") or 0) & WRITE_FLAGS or any(c in mode for c in "wax+"):
                    out.append(event)
            elif name not in HARMLESS and name not in SILENT_FCNTL and name != "exit":
                out.append(event)
        return out

    def writes_under(self, root: Path) -> list[dict[str, Any]]:
        """Writes naming a path under ``root`` (as named, or as its links resolved when it was
        made), or landing on a file of ``root`` through a hard link elsewhere (its inode), plus
        locks and truncations made through a descriptor that named no file. Opening an already
        open descriptor (a pipe) is not a write."""
        inodes = inodes_under(root)
        out = []
        for event in self.writes():
            named = [event.get("path")] if event["event"] == "open" else event.get("paths", [])
            paths = [path for path in [*named, *event.get("real", [])] if isinstance(path, str)]
            if any(tuple(inode) in inodes for inode in event.get("inodes", [])):
                out.append(event)
            elif paths:
                if any(is_under(path, root) for path in paths):
                    out.append(event)
            elif event["event"] in DESCRIPTOR_CHANGES:
                out.append(event)
        return out

    def peak_kb(self) -> int:
        """The largest peak resident set size (``VmHWM``) any audited process recorded at exit."""
        peaks: list[int] = [event["vmhwm_kb"] for event in self.events if event["event"] == "exit"]
        assert peaks, "the audited process did not record its exit"
        return max(peaks)


def inodes_under(root: Path) -> set[tuple[int, int]]:
    """``(st_dev, st_ino)`` of every entry under ``root`` (not following links), the root included."""
    found: set[tuple[int, int]] = set()
    for directory, dirs, files in os.walk(root):
        for name in [".", *dirs, *files]:
            with contextlib.suppress(OSError):
                info = os.lstat(os.path.join(directory, name))
                found.add((info.st_dev, info.st_ino))
    return found


def is_under(path: str, root: Path) -> bool:
    """Whether ``path`` (as named, or as it resolves now) lies in ``root``."""
    root_text = str(root)
    real_root = os.path.realpath(root)
    candidates = {path, os.path.realpath(path)}
    return any(
        candidate == base or candidate.startswith(base.rstrip(os.sep) + os.sep)
        for candidate in candidates
        for base in (root_text, real_root)
    )


@dataclass
class Run:
    """One finished audited command."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    audit: Audit


def run_audited(
    args: Sequence[str],
    log: Path,
    *,
    module: str = "dsh_session_reference",
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    prefix: Sequence[str] = (),
    timeout: float = 120,
    program: Sequence[str] | None = None,
    cwd: Path | None = None,
) -> Run:
    """``python -m module args`` (or ``program args``) under the audit hook, in ``cwd``; the log
    file is fresh for every run."""
    log.unlink(missing_ok=True)
    command = [*prefix, *(program or [sys.executable, "-m", module]), *args]
    started = time.monotonic()
    result = subprocess.run(
        command,
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=audited_env(log, env),
        check=False,
    )
    return Run(result.returncode, result.stdout, result.stderr, time.monotonic() - started, Audit.read(log))


def cache_dir(log: Path) -> Path:
    """The user cache folder an audited process gets (the title index lives there, never in a root)."""
    return log.parent / f"{log.stem}-cache"


def audited_env(log: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of an audited process and its children: the hook and the test helpers on
    ``PYTHONPATH``, its own cache folder, no user sessions root or target."""
    env = {**os.environ, "DSH_SR_AUDIT_LOG": str(log), "XDG_CACHE_HOME": str(cache_dir(log)), **(extra or {})}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [AUDIT_SITE, TESTS, env.get("PYTHONPATH")]))
    env.pop("DSH_HOME", None)
    env.pop("DSH_SESSION_ID", None)
    return env


def audited_server_command(prefix: Sequence[str] = ()) -> list[str]:
    """The language server as editors start it (run it with :func:`audited_env`)."""
    return [*prefix, sys.executable, "-m", "dsh_session_reference", "lsp", "--stdio"]


def vm_kb(pid: int, field_name: str = "VmRSS") -> int:
    """A live process's ``VmRSS`` or ``VmHWM`` in KiB."""
    with open(f"/proc/{pid}/status", encoding="ascii") as status:
        for line in status:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise AssertionError(f"no {field_name} for process {pid}")


# --- hostile surroundings: a workspace that plants modules, a cache folder that plants links ------


STDLIB_PLANTS = ("pickle", "struct", "json", "sqlite3", "argparse", "zstandard", "sitecustomize")
"""Modules a worker or the CLI imports after start-up (and ``sitecustomize``, read at start-up)."""


def plant(folder: Path, names: tuple[str, ...], marker: Path, *, package: bool = False) -> Path:
    """A workspace whose modules append their name to ``marker`` when imported."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / f"{name}.py").write_text(f"open({str(marker)!r}, 'a').write({name!r} + '\\n')\n")
    if package:
        fake = folder / "dsh_session_reference"
        (fake / "store").mkdir(parents=True, exist_ok=True)
        for module in ("__init__.py", "store/__init__.py", "store/workers.py"):
            (fake / module).write_text(f"open({str(marker)!r}, 'a').write('package {module}\\n')\n")
    return folder


def console_script() -> list[str]:
    """The installed ``dsh-session-reference`` command (not ``python -m``, whose import of the
    package itself comes from the working directory by design of ``-m``)."""
    script = Path(sys.executable).parent / "dsh-session-reference"
    assert script.exists(), script
    return [str(script)]


CACHE_NAMES: Final = ("", "-wal", "-shm", "-journal", ".lock", ".root")
"""Suffixes of an index file's name: the database, SQLite's companions, the lock, the root note."""


def plant_cache(log: Path, root: Path) -> None:
    """Make the audited process's cache folder hostile before it runs: every name of the index of
    ``root`` is a symlink into ``root`` (dangling, or to a live log)."""
    from dsh_session_reference.store.index.database import default_index_dir, index_file

    folder = default_index_dir({"XDG_CACHE_HOME": str(cache_dir(log))})
    os.makedirs(folder, exist_ok=True)
    index = index_file(folder, os.path.realpath(root))
    live = next(
        path for path in sorted(root.rglob("session.jsonl*")) if path.is_file() and not path.is_symlink()
    )
    for number, suffix in enumerate(CACHE_NAMES):
        with contextlib.suppress(FileNotFoundError):
            os.unlink(index + suffix)
        target = live if number % 2 else root / f"planted{number}"
        os.symlink(target, index + suffix)
