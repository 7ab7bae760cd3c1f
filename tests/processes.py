"""Processes as Linux's ``/proc`` shows them, for the tests that look at the server's own
(its process session, its worker processes, its CPU time): one reader of ``/proc/PID/stat``."""

from __future__ import annotations

import os
from pathlib import Path


def proc_stat(pid: int) -> list[str] | None:
    """``/proc/PID/stat``'s fields after the command name: state, ppid, pgrp, session, ... (utime
    and stime at 11 and 12); ``None`` once the process is gone. Any command name, not only ASCII."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    return text.rsplit(")", 1)[1].split()


def running(pid: int) -> bool:
    """Whether the process exists and is not a zombie waiting to be reaped."""
    fields = proc_stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def children(pid: int) -> list[int]:
    """The processes ``pid``'s main thread started that are still there."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def cpu_seconds(pid: int) -> float:
    """User and system CPU time a live process has used."""
    fields = proc_stat(pid)
    assert fields is not None, f"process {pid} is gone"
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
