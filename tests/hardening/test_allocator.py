"""The language server's C allocator settings (issue 35, 200,000 sessions): a big table freed does
not send the next big tables to the heap, where the ones they outgrow stay as holes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dsh_session_reference import main
from dsh_session_reference.lsp import allocator, features, transport

GLIBC = bool(os.confstr("CS_GNU_LIBC_VERSION")) if "CS_GNU_LIBC_VERSION" in os.confstr_names else False

_MAPPED_AFTER_A_BIG_FREE = r"""
import ctypes, sys
from dsh_session_reference.lsp.allocator import settle

if sys.argv[1] == "settled":
    assert settle()


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
        "keepcost")]


libc = ctypes.CDLL(None)
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = (ctypes.c_size_t,)
libc.free.argtypes = (ctypes.c_void_p,)
libc.mallinfo2.restype = MallInfo2
libc.free(libc.malloc(8 << 20))  # a dict's 8 MiB table, outgrown
before = libc.mallinfo2().hblkhd
block = libc.malloc(1 << 20)  # the next dict's 1 MiB table
print(libc.mallinfo2().hblkhd - before)
"""


def _mapped_after_a_big_free(mode: str) -> int:
    run = subprocess.run(
        [sys.executable, "-c", _MAPPED_AFTER_A_BIG_FREE, mode], capture_output=True, text=True, check=True
    )
    return int(run.stdout)


@pytest.mark.skipif(not GLIBC, reason="the settings are glibc's; elsewhere settle() changes nothing")
def test_a_big_table_freed_leaves_the_next_ones_in_mappings_of_their_own() -> None:
    # glibc's own behaviour first, so the test shows what it guards against: the freed 8 MiB
    # block raised the threshold, and the 1 MiB one came from the heap.
    assert _mapped_after_a_big_free("glibc") == 0
    assert _mapped_after_a_big_free("settled") >= 1 << 20


def test_the_server_settles_the_allocator_before_it_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[str] = []
    monkeypatch.setattr(allocator, "settle", lambda: calls.append("settle") or True)
    monkeypatch.setattr(features, "create_server", lambda sessions: calls.append("create") or sessions)
    monkeypatch.setattr(transport, "serve_stdio", lambda server: calls.append("serve") or 0)
    assert main._serve_stdio(None) == 0
    assert calls == ["settle", "create", "serve"]


def test_settle_does_nothing_without_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_such_name(name: str) -> str:
        raise ValueError("unrecognized configuration name")

    monkeypatch.setattr(os, "confstr", no_such_name)
    assert allocator.settle() is False
