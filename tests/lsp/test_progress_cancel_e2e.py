"""Cancelling the message-text indexing progress stops the indexing; turning body search on again
resumes it. (Listing and title verification are not cancellable: every answer needs them.)"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import pytest_lsp
from lsp_support import Session, initialize_params, server_config, serving, wait_until
from lsprotocol import types
from pytest_lsp import LanguageClient

from store.logbuild import many_sessions

pytestmark = pytest.mark.asyncio(loop_scope="module")

CACHE = Path(tempfile.mkdtemp(prefix="dsh-progress-cancel-cache-"))
ENV = {"XDG_CACHE_HOME": str(CACHE), "DSH_PROGRESS_AFTER": "0"}
INDEXING = "Indexing message text for search"


@pytest.fixture(scope="module", autouse=True)
def _remove_cache() -> Iterator[None]:
    yield
    shutil.rmtree(CACHE, ignore_errors=True)


@pytest_lsp.fixture(config=server_config(ENV), scope="module")
async def lsp(lsp_client: LanguageClient, workspace: Path, tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("big-store")
    many_sessions(store, 6000)
    params = initialize_params("visual-studio-code@1.139", workspace, store)
    async with serving(lsp_client, "visual-studio-code@1.139", params, store):
        yield


def indexing_runs(s: Session) -> list[tuple[object, list[object]]]:
    return [
        (token, values)
        for token, values in s.client.progress_reports.items()
        if values and getattr(values[0], "title", None) == INDEXING
    ]


def body_search(s: Session, on: bool) -> None:
    s.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"dshSessionReference": {"bodySearch": on}})
    )


async def test_cancel_stops_the_indexing_until_body_search_is_turned_on_again(
    s: Session, workspace: Path
) -> None:
    body_search(s, True)
    await s.complete(s.open(workspace, "@hello"))
    await wait_until(lambda: indexing_runs(s), within=60)
    [(token, values)] = indexing_runs(s)
    begin = values[0]
    assert isinstance(begin, types.WorkDoneProgressBegin) and begin.cancellable is True
    s.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    await wait_until(lambda: isinstance(values[-1], types.WorkDoneProgressEnd), within=30)
    end = values[-1]
    assert end.message == "stopped: body search answers from the logs indexed so far"  # type: ignore[union-attr]

    # Stopped means stopped: more body queries do not start it again.
    await s.complete(s.open(workspace, "@hello"))
    await asyncio.sleep(1.5)
    assert len(indexing_runs(s)) == 1

    body_search(s, False)
    body_search(s, True)
    await s.complete(s.open(workspace, "@hello"))
    await wait_until(lambda: len(indexing_runs(s)) == 2, within=60)
