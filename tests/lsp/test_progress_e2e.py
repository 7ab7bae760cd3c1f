"""A long first listing is shown as work-done progress: begin, reports, end, in that order.

A cold root of thousands of logs takes seconds to list; without progress the editor shows
nothing and the user takes it for a hang. Work shorter than half a second shows none.
"""

from __future__ import annotations

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

CACHE = Path(tempfile.mkdtemp(prefix="dsh-progress-cache-"))
SESSIONS = 6000
"""Enough tiny logs for a listing of a second or so: reports come between begin and end."""


@pytest.fixture(scope="module", autouse=True)
def _remove_cache() -> Iterator[None]:
    yield
    shutil.rmtree(CACHE, ignore_errors=True)


# Progress from the first moment (not after half a second), so the test does not hang on how
# fast this machine lists the root.
ENV = {"XDG_CACHE_HOME": str(CACHE), "DSH_PROGRESS_AFTER": "0"}


@pytest_lsp.fixture(config=server_config(ENV), scope="module")
async def lsp(lsp_client: LanguageClient, workspace: Path, tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("big-store")
    many_sessions(store, SESSIONS)
    async with serving(
        lsp_client,
        "visual-studio-code@1.139",
        initialize_params("visual-studio-code@1.139", workspace, store),
        store,
    ):
        yield


async def test_a_cold_listing_reports_begin_reports_and_end_in_order(s: Session, workspace: Path) -> None:
    reports = s.client.progress_reports
    import asyncio

    await asyncio.sleep(8)
    print(
        {
            k: [
                type(v).__name__ + ":" + str(getattr(v, "title", "")) + ":" + str(getattr(v, "message", ""))
                for v in vals
            ][:6]
            for k, vals in reports.items()
        }
    )
    await wait_until(
        lambda: any(
            values and isinstance(values[-1], types.WorkDoneProgressEnd) for values in reports.values()
        ),
        within=60,
    )
    [values] = [values for token, values in reports.items() if str(token).startswith("dsh-")]
    begin, *middle, end = values
    assert isinstance(begin, types.WorkDoneProgressBegin) and begin.title == "Listing dsh sessions"
    assert all(isinstance(value, types.WorkDoneProgressReport) for value in middle)
    assert isinstance(end, types.WorkDoneProgressEnd)
    counts = [int(value.message.split()[0].replace(",", "")) for value in (begin, *middle, end)]  # type: ignore[union-attr]
    assert counts == sorted(counts), counts  # the count only grows
    assert end.message == f"{SESSIONS:,} sessions read"
    # The listing it reported on is the one the first `@` is answered from.
    completion = await s.complete(s.open(workspace, "@"))
    assert len(completion.items) == 50


async def test_message_text_indexing_in_the_background_is_shown_until_done(
    s: Session, workspace: Path
) -> None:
    """Body search indexes every log's message text in a worker process: that shows as its own
    progress, counting the logs left, until it ends (and body matches then come)."""
    reports = s.client.progress_reports
    s.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"dshSessionReference": {"bodySearch": True}})
    )
    await s.complete(s.open(workspace, "@hello"))  # the first body query starts the indexing

    def indexing() -> list[object] | None:
        for values in reports.values():
            if values and getattr(values[0], "title", None) == "Indexing message text for search":
                return values
        return None

    def ended() -> bool:
        found = indexing()
        return found is not None and isinstance(found[-1], types.WorkDoneProgressEnd)

    await wait_until(ended, within=120)
    values = indexing()
    assert values is not None
    begin, *middle, end = values
    assert isinstance(begin, types.WorkDoneProgressBegin) and isinstance(end, types.WorkDoneProgressEnd)
    assert all(isinstance(value, types.WorkDoneProgressReport) for value in middle)
    left = [int(value.message.split()[0].replace(",", "")) for value in (begin, *middle)]  # type: ignore[union-attr]
    assert left == sorted(left, reverse=True) and left[0] <= SESSIONS, left  # counts down
    found = await s.complete(s.open(workspace, "@hello"))
    assert found.items  # the index it reported on answers body queries
