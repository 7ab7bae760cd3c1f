"""The server follows a big root as dsh writes to it, with no request from the editor in between.

Over :data:`~dsh_session_reference.store.catalog.SYNC_MAX_SESSIONS` session directories the
catalog answers ``@`` from its last listing and, before watching, walked again only when a
request found that listing a second old (and the editor then paused). So a retitle or a new
session made while the editor sat idle showed only in the popup after next. With the root
watched, the listing catches up on its own: a popup asked for one second after dsh wrote shows it.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
import pytest_lsp
from lsp_support import (
    Session,
    Spec,
    append_title,
    default_specs,
    initialize_params,
    server_config,
    serving,
    write_store,
)
from lsprotocol import types
from pytest_lsp import LanguageClient

from dsh_session_reference.store.catalog import SYNC_MAX_SESSIONS

pytestmark = pytest.mark.asyncio(loop_scope="module")

CLIENT = "neovim@v0.7"


@pytest_lsp.fixture(config=server_config({"DSH_SESSION_ID": ""}), scope="module")
async def lsp(lsp_client: LanguageClient, workspace: Path, tmp_path_factory: pytest.TempPathFactory):
    store = write_store(tmp_path_factory.mktemp("big-store"), default_specs(str(workspace)), "none")
    # Session directories without a log yet (dsh makes the directory first): they count as the
    # directories a walk must look in, which is what makes a root big.
    for number in range(SYNC_MAX_SESSIONS + 1):
        (store / "--empty--" / f"pending-{number:04d}").mkdir(parents=True)
    lsp_client.initial = tree(store)  # type: ignore[attr-defined]  # before any server ran
    async with serving(lsp_client, CLIENT, initialize_params(CLIENT, workspace, store), store):
        yield


async def labels(s: Session, workspace: Path, query: str) -> list[str]:
    uri = s.open(workspace, f"@{query}")
    result = await s.complete(uri)
    return [item.label for item in result.items]


async def test_a_retitle_and_a_new_session_reach_the_next_popup(
    s: Session, store: Path, workspace: Path
) -> None:
    assert "Deploy checklist" in await labels(s, workspace, "deploy")
    await asyncio.sleep(1.5)  # the listing is now older than a request would accept as fresh
    append_title(store, "s-delta", "Deploy runbook")
    write_store(
        store, [Spec("s-new", str(workspace), "Fresh release notes", [("user", "draft them")])], "none"
    )
    await asyncio.sleep(1.0)  # no request in between: only the watcher can have told the server
    assert "Deploy runbook" in await labels(s, workspace, "deploy")
    assert "Fresh release notes" in await labels(s, workspace, "release")


def tree(store: Path) -> list[tuple[str, int]]:
    return sorted((str(path.relative_to(store)), path.lstat().st_mtime_ns) for path in store.rglob("*"))


async def test_nothing_under_the_root_changes_by_watching(s: Session, store: Path) -> None:
    """Against the tree as written before the server started: only what the tests wrote (a title
    appended to s-delta, the new session s-new and its project folder's entry) differs."""
    await s.client.workspace_symbol_async(types.WorkspaceSymbolParams(query=""))
    await asyncio.sleep(0.3)
    added, changed, written = differences(store, dict(s.client.initial))  # type: ignore[attr-defined]
    assert added == written[0] and changed == written[1]


def differences(store: Path, initial: dict[str, int]) -> tuple[set[str], set[str], tuple[set[str], set[str]]]:
    """Paths new since ``initial`` and paths whose mtime changed, and what the tests wrote: the
    paths of s-new, and s-delta's log with the folder s-new was made in."""
    now = dict(tree(store))
    s_new = next(store.glob("*/s-new"))
    created = {str(path.relative_to(store)) for path in [s_new, *s_new.rglob("*")]}
    touched = {
        str(next(store.glob("*/s-delta/session.jsonl")).relative_to(store)),
        str(s_new.parent.relative_to(store)),
    }
    added = {path for path in now if path not in initial}
    changed = {path for path, mtime in initial.items() if now.get(path) != mtime}
    return added, changed, (created, touched)
