"""``python -m hardening.probed_server``: the real language server plus two test-only commands.

Leaked tasks and growing state are invisible over LSP, so the fault tests run
the very server ``dsh-session-reference lsp`` runs (same ``create_server``,
same stdio loop) with a test-only ``dshHardening.stats`` command registered
beside the product's commands. It reports the server's live asyncio tasks, the
work it tracks per document and request, its threads and its resident memory (after a ``malloc_trim``).
``dshHardening.block`` occupies a worker thread with work that heeds no stop
signal (as a read blocked on a stalled disk would), for the exit tests.
``dshHardening.gateListings`` holds every ``listCandidates`` at its start while
closed (as a cold listing of a big root does), for the first-completion tests.
The stats count the waits of a listing request's cancel grace (``graceWaits``) and the
requests answered cancelled without starting, their cancel read with them
(``cancelledUnstarted``), for the cancel-grace tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import gc
import logging
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from dsh_session_reference.lsp.contract import Feature
from dsh_session_reference.lsp.features import create_server
from dsh_session_reference.lsp.features.completion import Completion
from dsh_session_reference.lsp.features.diagnostics import Diagnostics
from dsh_session_reference.lsp.server import DshLanguageServer
from dsh_session_reference.lsp.transport import serve_stdio
from dsh_session_reference.resolver import SessionReferenceResolver

COMMAND = [sys.executable, "-m", "hardening.probed_server"]
"""How a test starts this server (with ``tests`` on the path, as pytest runs them)."""
STATS = "dshHardening.stats"
BLOCK = "dshHardening.block"
GATE = "dshHardening.gateListings"
F = TypeVar("F", bound=Feature)


def _libc_trim() -> Callable[[int], int] | None:
    with contextlib.suppress(OSError, AttributeError):
        return ctypes.CDLL("libc.so.6").malloc_trim  # type: ignore[no-any-return]
    return None


_MALLOC_TRIM = _libc_trim() if sys.platform == "linux" else None


def _rss_kb() -> int:
    """Resident memory once the allocator has handed back what it holds free: glibc keeps freed
    blocks of big strings (it raises its mmap threshold after the first is freed), so a bare
    ``VmRSS`` swings by tens of MB with what was freed, not with what is kept."""
    if _MALLOC_TRIM is not None:
        _MALLOC_TRIM(0)
    with open("/proc/self/status", encoding="ascii") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def _feature(ls: DshLanguageServer, kind: type[F]) -> F:
    return next(feature for feature in ls.features if isinstance(feature, kind))


async def _stats(ls: DshLanguageServer, *args: Any) -> dict[str, Any]:
    for _ in range(3):  # let tasks that have just finished run their done callbacks
        await asyncio.sleep(0)
    gc.collect()
    documents = {document.uri: document.text for document in ls.documents}
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    return {
        "tasks": len(tasks),
        "taskNames": sorted(task.get_coro().__qualname__ for task in tasks),  # type: ignore[union-attr]
        "background": len(ls._background),
        "analyses": len(ls._analyses),
        "pending": len(_feature(ls, Diagnostics).pending),
        "completions": len(_feature(ls, Completion).running),
        "commands": len(ls._commands),
        "documents": len(documents),
        "texts": {uri: documents.get(uri) for uri in args if isinstance(uri, str)},
        # Work pygls still files as in flight: finished entries are leaks; running ones include this call.
        "finished": sorted(
            str(msg_id) for msg_id, future in ls.protocol._request_futures.items() if future.done()
        ),
        "running": sum(1 for future in ls.protocol._request_futures.values() if not future.done()),
        "threads": threading.active_count(),
        "rssKb": _rss_kb(),
        "pid": os.getpid(),
    }


async def _block(ls: DshLanguageServer, seconds: float) -> None:
    await asyncio.to_thread(time.sleep, seconds)


class _Gate:
    """Holds ``SessionReferenceResolver.list_candidates`` while closed; counts the calls."""

    def __init__(self) -> None:
        self.open = asyncio.Event()
        self.open.set()
        self.listings = 0
        listed = SessionReferenceResolver.list_candidates

        async def gated(resolver: SessionReferenceResolver, *args: Any, **kwargs: Any) -> Any:
            self.listings += 1
            await self.open.wait()
            return await listed(resolver, *args, **kwargs)

        SessionReferenceResolver.list_candidates = gated  # type: ignore[method-assign]

    async def command(self, ls: DshLanguageServer, closed: bool) -> int:
        """``[true]`` closes the gate, ``[false]`` opens it; answers the listings begun so far."""
        if closed:
            self.open.clear()
        else:
            self.open.set()
        return self.listings


class _Graces:
    """Counts the timers a listing request waited for a ``$/cancelRequest`` behind it: the sleeps
    called from a ``cancel_grace`` (found by the caller's name, whichever module holds it)."""

    def __init__(self) -> None:
        self.waited = 0
        sleep = asyncio.sleep

        async def counted(delay: float, result: Any = None) -> Any:
            if sys._getframe(1).f_code.co_name == "cancel_grace":
                self.waited += 1
            return await sleep(delay, result)

        asyncio.sleep = counted  # type: ignore[assignment]


def main() -> None:
    logging.basicConfig(level="WARNING", format="%(levelname)s %(name)s: %(message)s")
    server = create_server()
    graces = _Graces()
    unstarted = [0]
    answer_cancelled = server.protocol.answer_cancelled

    def counted_answer(msg_id: int | str) -> None:
        unstarted[0] += 1
        answer_cancelled(msg_id)

    server.protocol.answer_cancelled = counted_answer  # type: ignore[method-assign]

    async def stats_command(ls: DshLanguageServer, *args: Any) -> dict[str, Any]:
        stats = await _stats(ls, *args)
        return {**stats, "graceWaits": graces.waited, "cancelledUnstarted": unstarted[0]}

    server.command(STATS)(stats_command)
    server.command(BLOCK)(_block)
    gate = _Gate()

    async def gate_command(ls: DshLanguageServer, closed: bool) -> int:
        return await gate.command(ls, closed)

    server.command(GATE)(gate_command)
    sys.exit(serve_stdio(server))


if __name__ == "__main__":
    main()
