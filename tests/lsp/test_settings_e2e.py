"""Settings from every channel, applied without a restart, and a store that changes under the server."""

from __future__ import annotations

from pathlib import Path

import pytest
import pytest_lsp
from lsp_support import (
    CLIENTS,
    Session,
    Spec,
    append_title,
    default_specs,
    initialize_params,
    server_config,
    serving,
    wait_until,
    write_store,
)
from lsprotocol import types
from pytest_lsp import LanguageClient

from dsh_session_reference.uri import format_session_reference_mention

pytestmark = pytest.mark.asyncio(loop_scope="module")

SECTION = "dshSessionReference"


@pytest_lsp.fixture(config=server_config(), params=CLIENTS, scope="module")
async def lsp(
    lsp_client: LanguageClient,
    request: pytest.FixtureRequest,
    workspace: Path,
    tmp_path_factory: pytest.TempPathFactory,
):
    store = write_store(tmp_path_factory.mktemp("settings-store"), default_specs(str(workspace)), "none")
    params = initialize_params(request.param, workspace, store, maxReferences=1)
    async with serving(lsp_client, request.param, params, store):
        yield


def configure(s: Session, settings: object) -> None:
    s.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=settings))


def errors(diagnostics: list[types.Diagnostic]) -> list[str]:
    return sorted(str(d.code) for d in diagnostics if d.severity == types.DiagnosticSeverity.Error)


async def labels(s: Session, uri: str) -> list[str]:
    return [item.label for item in (await s.complete(uri)).items]


async def test_limits_come_from_initialization_options_and_change_live(s: Session, workspace: Path) -> None:
    text = " ".join(format_session_reference_mention(i) for i in ("s-alpha", "s-delta"))
    uri = s.open(workspace, text)
    assert errors(await s.diagnostics(uri, lambda d: bool(d))) == ["too-many-references"]
    refreshes = s.client.diagnostic_refresh_count
    configure(s, {SECTION: {"maxReferences": 3}})
    assert await s.diagnostics(uri, lambda d: not errors(d)) is not None
    if s.preset == "visual-studio-code@1.139":
        await wait_until(lambda: s.client.diagnostic_refresh_count > refreshes)
    configure(s, {SECTION: {"maxReferenceBytes": 50}})
    assert errors(await s.diagnostics(uri, lambda d: bool(errors(d)))) == [
        "budget-exceeded",
        "budget-exceeded",
    ]
    configure(s, {SECTION: {"maxReferenceBytes": None}})  # null: back to the default
    assert await s.diagnostics(uri, lambda d: not errors(d)) is not None


async def test_workspace_configuration_is_asked_only_of_clients_that_declare_it(
    s: Session, workspace: Path
) -> None:
    uri = s.open(workspace, " ".join(format_session_reference_mention(i) for i in ("s-alpha", "s-delta")))
    s.client.set_configuration({"maxReferences": 1}, section=SECTION)
    configure(s, None)  # VS Code's way: "something changed, ask me"
    if s.preset == "neovim@v0.7":
        # Never asked (asking would be an LspSpecificationWarning, an error here): nothing changes.
        assert not errors(await s.diagnostics(uri))
    else:
        assert errors(await s.diagnostics(uri, lambda d: bool(errors(d)))) == ["too-many-references"]
        s.client.set_configuration({"maxReferences": 3}, section=SECTION)
        configure(s, None)
        assert await s.diagnostics(uri, lambda d: not errors(d)) is not None


async def test_target_session_setting_overrides_the_environment(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, f"{format_session_reference_mention('s-alpha')} @")
    assert "Refactor the parser" in await labels(s, uri)
    configure(s, {SECTION: {"targetSessionId": "s-alpha"}})
    found = await s.diagnostics(uri, lambda d: bool(errors(d)))
    assert errors(found) == ["self-reference"]
    listed = await labels(s, uri)
    assert "Refactor the parser" not in listed and "The prompt being written" in listed
    configure(s, {SECTION: {"targetSessionId": ""}})  # empty: $DSH_SESSION_ID again
    assert await s.diagnostics(uri, lambda d: not errors(d)) is not None
    assert "The prompt being written" not in await labels(s, uri)


async def test_an_invalid_value_is_reported_and_ignored(s: Session, workspace: Path) -> None:
    configure(s, {SECTION: {"maxReferences": 9, "candidateLimit": 2}})
    await wait_until(lambda: any("maxReferences" in m.message for m in s.client.messages))
    warning = next(m for m in s.client.messages if "maxReferences" in m.message)
    assert warning.type == types.MessageType.Warning
    assert "maxReferences must not exceed 3" in warning.message
    uri = s.open(workspace, "@")
    assert len(await labels(s, uri)) == 2  # candidateLimit applied, maxReferences kept
    configure(s, {SECTION: {"candidateLimit": None}})
    assert len(await labels(s, uri)) == 4


async def test_sessions_written_while_running_show_at_the_next_completion(
    s: Session, workspace: Path, store: Path
) -> None:
    uri = s.open(workspace, "@")
    before = await labels(s, uri)
    write_store(
        store,
        [Spec(f"s-new-{s.preset}", str(workspace), "Brand new", [("user", "hi")], age_minutes=-1)],
        "none",
    )
    after = await labels(s, uri)
    assert after == ["Brand new", *before]
    append_title(store, "s-delta", "Renamed checklist")
    renamed = await labels(s, uri)
    assert "Renamed checklist" in renamed and "Deploy checklist" not in renamed


async def test_the_sessions_root_can_be_switched(
    s: Session, workspace: Path, tmp_path_factory: pytest.TempPathFactory, store: Path
) -> None:
    other = write_store(tmp_path_factory.mktemp("other-store"), [Spec("elsewhere", None, "Other store", [])])
    uri = s.open(workspace, "@")
    configure(s, {SECTION: {"sessionsRoot": str(other)}})  # applied before the next request is read
    assert await labels(s, uri) == ["Other store"]
    configure(s, {SECTION: {"sessionsRoot": str(store)}})
    assert "Refactor the parser" in await labels(s, uri)


async def test_a_missing_or_file_root_is_said_once_with_its_path_and_origin(
    s: Session, workspace: Path, tmp_path_factory: pytest.TempPathFactory, store: Path
) -> None:
    """Upstream lists a missing root as empty; the editor says the path is wrong, once per problem."""
    missing = tmp_path_factory.mktemp("roots") / "not-there"
    uri = s.open(workspace, "@")
    before = len(s.client.messages)
    configure(s, {SECTION: {"sessionsRoot": str(missing)}})
    assert await labels(s, uri) == []
    await wait_until(lambda: len(s.client.messages) > before)
    said = [m for m in s.client.messages[before:] if str(missing) in m.message]
    assert [m.type for m in said] == [types.MessageType.Warning]
    assert said[0].message == (
        f'dsh: the sessions root "{missing}" (from the {SECTION}.sessionsRoot setting) does not exist, so no '
        f"sessions can be listed or mentioned. Set {SECTION}.sessionsRoot to your dsh sessions folder."
    )
    # Another setting change with the same root says nothing again; a file instead of a folder does.
    configure(s, {SECTION: {"sessionsRoot": str(missing), "candidateLimit": 7}})
    assert await labels(s, uri) == []
    assert len([m for m in s.client.messages if str(missing) in m.message]) == 1
    a_file = missing.parent / "a-file"
    a_file.write_text("not a folder")
    configure(s, {SECTION: {"sessionsRoot": str(a_file), "candidateLimit": 50}})
    await wait_until(lambda: any(f'"{a_file}"' in m.message for m in s.client.messages))
    assert any("is not a directory" in m.message for m in s.client.messages if str(a_file) in m.message)
    configure(s, {SECTION: {"sessionsRoot": str(store)}})
    assert "Refactor the parser" in await labels(s, uri)
