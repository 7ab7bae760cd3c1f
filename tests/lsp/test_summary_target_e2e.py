"""``documentSummary``'s ``target``: what the status bar names, from the setting or the environment.

A server started without ``$DSH_SESSION_ID``, so "no target" is reachable; the
target is then set, changed and cleared through ``didChangeConfiguration`` as
the VS Code client does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import pytest_lsp
from lsp_support import (
    Session,
    append_title,
    default_specs,
    initialize_params,
    server_config,
    serving,
    write_store,
)
from lsprotocol import types
from pytest_lsp import LanguageClient

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECTION = "dshSessionReference"
CLIENT = "visual-studio-code@1.139"


@pytest_lsp.fixture(config=server_config({"DSH_SESSION_ID": ""}), scope="module")
async def lsp(lsp_client: LanguageClient, workspace: Path, tmp_path_factory: pytest.TempPathFactory):
    store = write_store(tmp_path_factory.mktemp("target-store"), default_specs(str(workspace)), "none")
    async with serving(lsp_client, CLIENT, initialize_params(CLIENT, workspace, store), store):
        yield


def target(s: Session, session_id: str) -> None:
    s.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={SECTION: {"targetSessionId": session_id}})
    )


async def target_of(s: Session, uri: str) -> Any:
    summary = await s.command("dshSessionReference.documentSummary", uri)
    return summary["target"]


async def test_no_target_is_null_and_a_set_target_carries_its_title(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, "a prompt")
    assert await target_of(s, uri) is None
    target(s, "s-alpha")
    assert await target_of(s, uri) == {"sessionId": "s-alpha", "label": "Refactor the parser", "found": True}
    target(s, "")
    assert await target_of(s, uri) is None


async def test_the_label_is_the_candidate_lists_label(s: Session, workspace: Path) -> None:
    """Exactly what ``candidates`` shows for the session: the title as a row shows it (escaped),
    else the id."""
    uri = s.open(workspace, "a prompt")
    rows = {row["sessionId"]: row["label"] for row in await s.command("dshSessionReference.candidates")}
    assert rows["s-beta"] == "Notes\\x0asecond line \\x1b[1mbold" and rows["s-gamma"] == "s-gamma"  # untitled
    for session_id in ("s-beta", "s-gamma"):
        target(s, session_id)
        assert await target_of(s, uri) == {"sessionId": session_id, "label": rows[session_id], "found": True}
    target(s, "")


async def test_a_renamed_target_shows_its_new_title(s: Session, workspace: Path, lsp: LanguageClient) -> None:
    uri = s.open(workspace, "a prompt")
    target(s, "s-delta")
    assert (await target_of(s, uri))["label"] == "Deploy checklist"
    append_title(lsp.store, "s-delta", "Release checklist")  # type: ignore[attr-defined]
    assert (await target_of(s, uri))["label"] == "Release checklist"
    target(s, "")


async def test_a_target_the_store_does_not_list_is_named_by_its_id(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, "a prompt")
    target(s, "no-such-session")
    assert await target_of(s, uri) == {
        "sessionId": "no-such-session",
        "label": "no-such-session",
        "found": False,
    }
    target(s, "")
