"""A first ``@`` is never silent: a completion that cannot list the sessions in time (a fresh
server over a big root lists for seconds) answers at once with one "Listing dsh sessions…" row,
incomplete, that inserts nothing; the next ask waits on that same listing rather than start
another, and gets the sessions once it is done.

The listing is held by the probed server's gate (:mod:`probed_server`), so what is asserted does
not depend on how fast this machine lists; how fast the real first answer is lives in the
benchmark (``docs/benchmarks.md``).
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest
from lsp_harness import lsp_session
from lsp_support import default_specs, write_store
from lsprotocol import types

from dsh_session_reference.lsp import demo
from dsh_session_reference.lsp.completion import LISTING_DATA, LISTING_LABEL, only_listing

from .audit import audited_env
from .probed_server import GATE, STATS
from .test_server_faults import COMMAND


@pytest.fixture(scope="module")
def store_root(tmp_path_factory: pytest.TempPathFactory, workspace: Path) -> Path:
    return write_store(tmp_path_factory.mktemp("first") / "sessions", default_specs(str(workspace)))


async def test_a_completion_that_cannot_list_in_time_shows_one_listing_row(
    tmp_path: Path, workspace: Path, store_root: Path
) -> None:
    async with lsp_session(COMMAND, audited_env(tmp_path / "a.log"), workspace, store_root) as s:
        uri = s.open(workspace, "see @dep")
        await s.command(GATE, True)
        first = await s.complete(uri, listed=False)
        assert first.is_incomplete
        assert [item.label for item in first.items] == [LISTING_LABEL]
        (row,) = first.items
        # It inserts nothing (its edit puts back what was typed), the client keeps it whatever
        # was typed, and it says how far the listing is.
        assert isinstance(row.text_edit, types.TextEdit) and row.text_edit.new_text == "@dep"
        assert row.text_edit.range == types.Range(
            start=types.Position(line=0, character=4), end=types.Position(line=0, character=8)
        )
        assert row.filter_text == "@dep" and row.data == LISTING_DATA
        assert row.detail is not None
        # Short, so VS Code's default popup shows it whole beside the label.
        assert re.fullmatch(r"[\d,]+ read|reading the folder", row.detail)
        begun = await s.command(GATE, True)
        assert begun == 1
        # Asked again while that listing runs: the same row, and no second listing beside it.
        again = await s.complete(uri, listed=False)
        assert [item.label for item in again.items] == [LISTING_LABEL] and again.is_incomplete
        assert await s.command(GATE, True) == begun
        # The listing done, the next ask has the sessions (and no listing row).
        await s.command(GATE, False)
        done = await s.complete(uri)
        assert [item.label for item in done.items] == ["Deploy checklist"]
        stats = await s.command(STATS)
        assert stats["completions"] == 0, stats


async def test_a_warm_completion_answers_with_its_rows(
    tmp_path: Path, workspace: Path, store_root: Path
) -> None:
    """The patience is for listings that take long: an open gate never shows the listing row."""
    async with lsp_session(COMMAND, audited_env(tmp_path / "a.log"), workspace, store_root) as s:
        uri = s.open(workspace, "see @")
        rows = await s.complete(uri)
        labels = [item.label for item in rows.items]
        assert LISTING_LABEL not in labels and len(labels) >= 3, labels


async def test_a_listing_under_the_old_settings_is_not_waited_on(
    tmp_path: Path, workspace: Path, store_root: Path
) -> None:
    """A listing still running when the settings change (a stalled old root, say) is not the one
    the next completion waits on: it lists anew, under the new settings."""
    async with lsp_session(COMMAND, audited_env(tmp_path / "a.log"), workspace, store_root) as s:
        uri = s.open(workspace, "see @")
        await s.command(GATE, True)
        assert [item.label for item in (await s.complete(uri, listed=False)).items] == [LISTING_LABEL]
        assert await s.command(GATE, True) == 1
        s.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"dshSessionReference": {"candidateLimit": 2}})
        )
        await s.complete(uri, listed=False)
        assert await s.command(GATE, True) == 2  # a listing of its own, not the old one's
        await s.command(GATE, False)
        labels = [item.label for item in (await s.complete(uri)).items]
        assert len(labels) == 2 and LISTING_LABEL not in labels, labels


async def test_the_demo_asks_again_while_only_the_listing_row_comes_back(
    tmp_path: Path, workspace: Path, store_root: Path
) -> None:
    """``dsh-session-reference demo`` on a loaded machine: its first ``@`` is answered with the
    listing row alone, and the demo asks again (as the VS Code extension does) until the sessions
    come, rather than fail on a list without them."""
    async with lsp_session(COMMAND, audited_env(tmp_path / "a.log"), workspace, store_root) as s:
        answers: list[types.CompletionList] = []
        ask = s.client.text_document_completion_async

        async def recorded(params: types.CompletionParams) -> Any:
            answer = await ask(params)
            answers.append(answer)
            return answer

        s.client.text_document_completion_async = recorded  # type: ignore[method-assign]
        editor = demo._Editor(s.client)
        editor.open("see @dep")
        await s.command(GATE, True)
        completing = asyncio.ensure_future(demo._complete(editor))
        while len(answers) < 2:  # the listing row, then asked again over the same held listing
            assert not completing.done(), completing
            await asyncio.sleep(0.05)
        await s.command(GATE, False)
        items = await asyncio.wait_for(completing, 30)
        assert [item.label for item in items] == ["Deploy checklist"]
        assert all(only_listing(answer) for answer in answers[:-1]) and len(answers) >= 3
