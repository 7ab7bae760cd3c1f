"""A started server lists its sessions root before the first request asks (a big root over a cold
index takes seconds to list, which would otherwise be spent while the user waits for a popup)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import pytest_lsp
from lsp_harness import lsp_session
from lsp_support import (
    Session,
    default_specs,
    initialize_params,
    server_config,
    serving,
    wait_until,
    write_store,
)
from pytest_lsp import LanguageClient

from processes import children

pytestmark = pytest.mark.asyncio(loop_scope="module")

CACHE = Path(tempfile.mkdtemp(prefix="dsh-warm-up-cache-"))


@pytest_lsp.fixture(config=server_config({"XDG_CACHE_HOME": str(CACHE)}), scope="module")
async def lsp(lsp_client: LanguageClient, workspace: Path, tmp_path_factory: pytest.TempPathFactory):
    store = write_store(tmp_path_factory.mktemp("warm-up-store"), default_specs(str(workspace)))
    async with serving(
        lsp_client, "visual-studio-code@1.139", initialize_params("emacs", workspace, store), store
    ):
        yield


@pytest.fixture(scope="module", autouse=True)
def _remove_cache() -> Iterator[None]:
    yield
    shutil.rmtree(CACHE, ignore_errors=True)


def listed_rows(cache: Path = CACHE) -> int:
    """Listing entries in the index file the server keeps under ``cache``."""
    found = 0
    for path in cache.glob("dsh-session-reference/index/*.sqlite3"):
        # A file still being made has no table yet: it counts as none.
        with (
            sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db,
            contextlib.suppress(sqlite3.OperationalError),
        ):
            found += db.execute("SELECT count(*) FROM logs WHERE listing IS NOT NULL").fetchone()[0]
    return found


async def test_the_root_is_listed_and_indexed_before_any_request(s: Session) -> None:
    logs = len(list(s.client.store.glob("*/*/session.jsonl*")))  # type: ignore[attr-defined]
    assert logs == len(default_specs("/w"))
    await wait_until(lambda: listed_rows() == logs)


async def test_the_spare_worker_started_with_the_server_does_not_outlive_a_small_first_walk(
    s: Session,
) -> None:
    """``lsp`` starts a header worker before it imports the LSP stack, for a cold index's first
    walk; a root too small to share its headers leaves it unclaimed, and the walk stops it."""
    server = s.client._server
    assert server is not None
    logs = len(list(s.client.store.glob("*/*/session.jsonl*")))  # type: ignore[attr-defined]
    await wait_until(lambda: listed_rows() == logs)
    await wait_until(lambda: children(server.pid) == [])


async def test_the_index_is_written_behind_once_the_first_completion_is_answered(tmp_path: Path) -> None:
    """Issue 36: the server's background work (here writing the index behind its listing) waits
    for its first completion's answer, not for the first request answered: the listing read ahead
    at ``initialize`` and the prompt's diagnostics came first and started it while the editor was
    still starting on the same cores (at most ``START_GRACE``, 2 s, when no completion comes)."""
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    root = write_store(tmp_path / "sessions", default_specs(str(workspace)))
    cache = tmp_path / "cache"
    config = server_config({"XDG_CACHE_HOME": str(cache)})
    async with lsp_session(config.server_command, config.server_env, workspace, root) as s:
        uri = s.open(workspace, "see @")
        await s.diagnostics(uri)  # answered after the listing read ahead at initialize
        await asyncio.sleep(0.3)  # on the old code the rows were written within milliseconds of it
        assert listed_rows(cache) == 0
        assert "Refactor the parser" in [item.label for item in (await s.complete(uri)).items]
        await wait_until(lambda: listed_rows(cache) == len(default_specs("/w")))
