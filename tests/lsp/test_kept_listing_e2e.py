"""A fresh server's first ``@`` over the index the last server left holds the sessions (issue 36),
even when that server closed right after its own first answer.

Such a server had scanned title hints only for the logs its first request had time for, so the
listing it left holds the others without a title. The next server's first request looked each of
those up in the index rows, then read or scanned them all before it answered: its first answer
was the "Listing dsh sessions…" row and the sessions came with the client's retry (in
``bench.startup`` at 3,000 sessions, spawn to sessions 0.98-1.07 s, of which the retry's 0.25 s).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from lsp_harness import lsp_session
from lsp_support import Spec, server_config, write_store

from dsh_session_reference.lsp.completion import only_listing
from dsh_session_reference.store import catalog
from dsh_session_reference.store import titles as titles_module
from dsh_session_reference.store.index.database import default_index_dir
from dsh_session_reference.store.index.store import IndexedSessionStore
from dsh_session_reference.store.scheduler import Scheduler

SESSIONS = 700
"""Over the 500 directories up to which every request walks the root: served from memory."""


def left_by_a_server_closed_at_once(root: Path, cache: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index a language server leaves when it closes right after its first answer, before it
    scanned a log for a title hint or verified one: the store, catalog and exit the server runs,
    with no time for hints (its logs more than it reads at once) and nothing running behind."""
    with monkeypatch.context() as patched:
        patched.setattr(titles_module, "HINT_BUDGET", 0.0)
        patched.setattr(catalog, "SYNC_VERIFY_BYTES", 0)
        paused = Scheduler(idle_grace=60.0, max_defer=60.0)
        index_dir = default_index_dir({"XDG_CACHE_HOME": str(cache)})
        store = IndexedSessionStore(root, index_dir=index_dir, autoflush=False).start_catalog(
            scheduler=paused
        )
        try:
            records = store.list_sessions()
            assert {title.title for title in store.read_titles(records)} == {None}  # ids: none scanned
        finally:
            store.close()
    left = IndexedSessionStore(root, index_dir=index_dir)
    try:
        kept = left.stored_listing()
        assert kept.whole and len(kept.records) == SESSIONS and kept.titles == {}
    finally:
        left.close()


async def test_the_first_completion_over_a_listing_left_without_titles_holds_the_sessions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    specs = [
        Spec(f"s{n:04d}", str(workspace), f"Session title {n}", [("user", "hi")], age_minutes=60 + n)
        for n in range(SESSIONS)
    ]
    root = write_store(tmp_path / "sessions", specs)
    an_hour_ago = time.time() - 3600
    for log in root.rglob("session.jsonl*"):
        os.utime(log, (an_hour_ago, an_hour_ago))
    cache = tmp_path / "cache"
    left_by_a_server_closed_at_once(root, cache, monkeypatch)

    config = server_config({"XDG_CACHE_HOME": str(cache)})
    async with lsp_session(config.server_command, config.server_env, workspace, root) as s:
        first = await s.complete(s.open(workspace, "@"), listed=False)
        assert not only_listing(first), "the first answer was the listing row"
        # The newest 50, newest first, each labelled with its title: a title scanned from its log
        # (a hint, verified behind), never a stale or forged one.
        assert [item.label for item in first.items] == [f"Session title {n}" for n in range(50)]
