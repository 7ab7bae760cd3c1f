"""A root with more session directories than the watcher takes
(:data:`~dsh_session_reference.store.watch.MAX_SESSION_DIRECTORIES`): only the root, its project
directories and the sessions the open documents mention are watched. A mentioned log dsh appends
to still refreshes the document's hints within a second, with no request in between; before the
server told the watcher which sessions matter, such a root's logs were only checked when asked.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
import pytest_lsp
from lsp_support import (
    Session,
    append_turn,
    default_specs,
    initialize_params,
    server_config,
    serving,
    wait_until,
    write_store,
)
from pytest_lsp import LanguageClient

from dsh_session_reference.store.watch import MAX_SESSION_DIRECTORIES
from dsh_session_reference.uri import format_session_reference_mention

pytestmark = pytest.mark.asyncio(loop_scope="module")

CLIENT = "visual-studio-code@1.139"


@pytest_lsp.fixture(config=server_config({"DSH_SESSION_ID": ""}), scope="module")
async def lsp(lsp_client: LanguageClient, workspace: Path, tmp_path_factory: pytest.TempPathFactory):
    store = write_store(tmp_path_factory.mktemp("huge-store"), default_specs(str(workspace)), "none")
    # Session directories dsh made before their first write: each one the watcher would watch.
    pending = store / "--empty--"
    pending.mkdir()
    for number in range(MAX_SESSION_DIRECTORIES + 1):
        (pending / f"pending-{number:05d}").mkdir()
    async with serving(lsp_client, CLIENT, initialize_params(CLIENT, workspace, store), store):
        yield


async def test_a_mentioned_log_is_watched_on_a_root_too_big_to_watch_every_log(
    s: Session, store: Path, workspace: Path
) -> None:
    uri = s.open(workspace, f"{format_session_reference_mention('s-delta', 'Deploy checklist')}\n")
    before = await s.inlay_hints(uri)
    assert before[0].label.startswith("1 msg · ")
    await asyncio.sleep(1.5)  # the watcher takes the mentioned session's directory when it next wakes
    s.refreshes.clear()
    written = time.monotonic()
    append_turn(store, "s-delta", "and then?", "1. build 2. ship")
    await wait_until(lambda: any(kind == "inlay" for kind, _ in s.refreshes), within=5)
    asked = next(at for kind, at in s.refreshes if kind == "inlay")
    assert asked - written < 1.0
    after = await s.inlay_hints(uri)
    assert after[0].label.startswith("3 msgs · ")
