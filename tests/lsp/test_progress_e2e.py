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
"""Enough small logs for a listing of a second or so: reports come between begin and end."""
PADDING = 2000
"""Bytes added to each log: 6,000 of them are more than one request reads titles from (8 MiB),
so a title query answers from hints and the background verifies them."""


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
    many_sessions(store, SESSIONS, padding=PADDING)
    async with serving(
        lsp_client,
        "visual-studio-code@1.139",
        initialize_params("visual-studio-code@1.139", workspace, store),
        store,
    ):
        yield


async def test_a_cold_listing_reports_begin_reports_and_end_in_order(s: Session, workspace: Path) -> None:
    reports = s.client.progress_reports
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


def progress_titled(s: Session, title: str) -> list[object] | None:
    for values in s.client.progress_reports.values():
        if values and getattr(values[0], "title", None) == title:
            return values
    return None


async def ended_progress(s: Session, title: str) -> list[object]:
    """The values of the progress titled ``title``, once it has ended."""

    def ended() -> bool:
        values = progress_titled(s, title)
        return values is not None and isinstance(values[-1], types.WorkDoneProgressEnd)

    await wait_until(ended, within=120)
    values = progress_titled(s, title)
    assert values is not None
    return values


def counted_down(values: list[object]) -> None:
    """Begin, reports, end; the logs left only go down."""
    begin, *middle, end = values
    assert isinstance(begin, types.WorkDoneProgressBegin) and isinstance(end, types.WorkDoneProgressEnd)
    assert all(isinstance(value, types.WorkDoneProgressReport) for value in middle)
    left = [int(value.message.split()[0].replace(",", "")) for value in (begin, *middle)]  # type: ignore[union-attr]
    assert left == sorted(left, reverse=True) and left[0] <= SESSIONS, left


async def test_title_verification_in_the_background_is_shown_until_done(s: Session, workspace: Path) -> None:
    """A title query over the cold root answers from hints; the worker that verifies every title
    shows as its own (uncancellable) progress until it is done."""
    completion = await s.complete(s.open(workspace, "@Task"))
    assert completion.items

    values = await ended_progress(s, "Verifying session titles")
    counted_down(values)
    assert values[0].cancellable is not True  # type: ignore[attr-defined]


async def test_message_text_indexing_in_the_background_is_shown_until_done(
    s: Session, workspace: Path
) -> None:
    """Body search indexes every log's message text in a worker process: that shows as its own
    progress, counting the logs left, until it ends (and body matches then come)."""
    s.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"dshSessionReference": {"bodySearch": True}})
    )
    await s.complete(s.open(workspace, "@hello"))  # the first body query starts the indexing

    counted_down(await ended_progress(s, "Indexing message text for search"))
    found = await s.complete(s.open(workspace, "@hello"))
    assert found.items  # the index it reported on answers body queries
