"""The C library's allocator, set for a server that keeps a big listing for as long as it runs.

glibc's ``malloc`` serves a block of at least its mmap threshold (128 KiB to begin with) from a
mapping of its own, given back to the system when it is freed, but it raises the threshold to the
size of every such block freed, up to 32 MiB. Python asks ``malloc`` only for blocks over 512
bytes: at 200,000 sessions, chiefly the tables of seven dicts of 7.7 MB each, every one grown by
doubling and freeing the table it outgrew. Once the first freed table had raised the threshold,
the rest came from the heap, and the tables they outgrew stayed there as holes: a server over a
200,000-session root kept 40 MB more than it used (docs/benchmarks.md, the seventh pass).
:func:`settle` fixes the threshold where it starts, so a big table is always a mapping of its own,
and keeps one arena for every thread, so the threads that list and verify do not each keep a heap
with holes of its own (Python's own small objects are not in these heaps; they never waited on
this lock).

Nothing else changes: elsewhere than glibc (macOS, musl, Windows) :func:`settle` does nothing.
"""

from __future__ import annotations

import os
from typing import Final

MMAP_THRESHOLD: Final = 128 * 1024
"""glibc's own first threshold, kept: a block of this size or more is a mapping of its own."""
ARENA_MAX: Final = 1

_M_MMAP_THRESHOLD: Final = -3
_M_ARENA_MAX: Final = -8


def _glibc() -> bool:
    try:
        return bool(os.confstr("CS_GNU_LIBC_VERSION"))
    except (AttributeError, ValueError, OSError):  # no confstr, or not a name this C library knows
        return False


def settle() -> bool:
    """Fix glibc's mmap threshold and arena count for this process (call it before the server's
    threads start); whether it was done."""
    if not _glibc():
        return False
    import ctypes  # only here: 2 ms of the start otherwise

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(mallopt(_M_ARENA_MAX, ARENA_MAX))
