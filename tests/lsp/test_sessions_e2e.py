"""Issue 19 over real LSP: transcripts (definition, links, ``textDocumentContent``, the command),
sessions as workspace symbols, the insert-mention command, inlay hints and code lenses, and the
server following a root that dsh writes to while the editor is open.

Expected values come from the library (``retain_items`` via the analysis, ``format_session_reference_mention``), and
every store is written in the real on-disk format.
"""

from __future__ import annotations

import asyncio
import re
import time
from pathlib import Path
from urllib.parse import unquote

import pytest
import pytest_lsp
from lsp_support import (
    TARGET_ID,
    Session,
    append_title,
    append_turn,
    default_specs,
    initialize_params,
    server_config,
    serving,
    wait_until,
    write_store,
)
from lsprotocol import types
from pytest_lsp import LanguageClient

from dsh_session_reference.display import display_inline_text
from dsh_session_reference.lsp.sessions import session_of_transcript, transcript_uri
from dsh_session_reference.uri import encode_session_reference_uri, format_session_reference_mention

pytestmark = pytest.mark.asyncio(loop_scope="module")

CLIENT = "visual-studio-code@1.139"


@pytest_lsp.fixture(config=server_config({"DSH_SESSION_ID": ""}), scope="module")
async def lsp(lsp_client: LanguageClient, workspace: Path, tmp_path_factory: pytest.TempPathFactory):
    store = write_store(tmp_path_factory.mktemp("sessions-store"), default_specs(str(workspace)), "none")
    async with serving(lsp_client, CLIENT, initialize_params(CLIENT, workspace, store), store):
        yield


def mention(session_id: str, label: str) -> str:
    return format_session_reference_mention(session_id, label)


async def test_definition_and_links_open_the_transcript(s: Session, workspace: Path) -> None:
    text = f"See {mention('s-alpha', 'Refactor the parser')} and {mention('nope', 'gone')}.\n"
    uri = s.open(workspace, text)
    at = s.position(uri, text.index("Refactor"))
    location = await s.client.text_document_definition_async(
        types.DefinitionParams(text_document=types.TextDocumentIdentifier(uri=uri), position=at)
    )
    assert isinstance(location, types.Location)
    assert location.uri == transcript_uri("s-alpha", "Refactor the parser")
    assert session_of_transcript(location.uri) == "s-alpha"
    unknown = await s.client.text_document_definition_async(
        types.DefinitionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=s.position(uri, text.index("gone"))
        )
    )
    assert unknown is None
    links = await s.client.text_document_document_link_async(
        types.DocumentLinkParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert [link.target for link in links] == [location.uri]  # the unknown session has no link
    content = await s.client.workspace_text_document_content_async(
        types.TextDocumentContentParams(uri=location.uri)
    )
    lines = content.text.splitlines()
    assert "title:     Refactor the parser" in lines
    assert "session:   s-alpha" in lines
    heading = next(line for line in lines if line.startswith("── 1 · user · ") and line.endswith(" UTC ──"))
    assert lines.index(heading) < lines.index("│ How should we split uri.py?")  # message text in the gutter
    assert lines[-1] == "│ Done: uri.py now has a lenient scanner."  # newest last
    assert "mention:   keeps 4 of 4 messages" in content.text


async def test_the_transcript_command_serves_editors_without_virtual_documents(s: Session) -> None:
    by_id = await s.command("dshSessionReference.transcript", "s-beta")
    by_uri = await s.command("dshSessionReference.transcript", by_id["uri"])
    assert by_id == by_uri
    assert by_id["sessionId"] == "s-beta"
    assert "remember the deploy steps" in by_id["text"]
    # The title's control characters are shown escaped, never raw.
    assert "\x1b" not in by_id["text"] and "\\x1b" in by_id["text"]
    with pytest.raises(Exception, match="lists no session"):
        await s.command("dshSessionReference.transcript", "../../etc/passwd")


async def test_a_followed_mention_uri_opens_its_sessions_transcript_or_says_why_not(s: Session) -> None:
    """What a Markdown link to ``dsh-session:`` opens in the editor (VS Code's mentionLinks): the
    session's transcript, or an error in plain words for a URI that is no session's."""
    by_uri = await s.command("dshSessionReference.transcript", encode_session_reference_uri("s-beta"))
    assert by_uri == await s.command("dshSessionReference.transcript", "s-beta")
    with pytest.raises(Exception, match="decodes to an empty session id, which no session has"):
        await s.command("dshSessionReference.transcript", "dsh-session:IiJ")
    with pytest.raises(Exception, match="s-nobody"):
        await s.command("dshSessionReference.transcript", encode_session_reference_uri("s-nobody"))


async def test_workspace_symbols_find_sessions_by_title(s: Session) -> None:
    symbols = await s.client.workspace_symbol_async(types.WorkspaceSymbolParams(query="deploy"))
    assert symbols is not None
    names = [symbol.name for symbol in symbols]
    assert "Deploy checklist" in names
    found = next(symbol for symbol in symbols if symbol.name == "Deploy checklist")
    assert isinstance(found, types.SymbolInformation)
    assert session_of_transcript(found.location.uri) == "s-delta"
    # Its age and project beside the title, as a completion row reads: a folder, not a path.
    assert found.container_name == "4 hours ago · elsewhere"


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("elsewhere", ["s-gamma", "s-delta"]),  # the project folder: neither title holds it
        ("s-del", ["s-delta"]),  # an id prefix
    ],
)
async def test_workspace_symbols_find_sessions_by_project_and_id_in_dshs_order(
    s: Session, query: str, expected: list[str]
) -> None:
    """A symbol query is dsh's ``@`` query: the rows are the ``candidates`` command's, in its order,
    each named by its title (its id when untitled) and opening its transcript."""
    symbols = await s.client.workspace_symbol_async(types.WorkspaceSymbolParams(query=query))
    rows = await s.command("dshSessionReference.candidates", {"query": query})
    assert symbols is not None
    assert [session_of_transcript(symbol.location.uri) for symbol in symbols] == expected
    assert [row["sessionId"] for row in rows] == expected
    assert [symbol.name for symbol in symbols] == [row["label"] for row in rows]
    assert all(symbol.container_name.endswith(" ago · elsewhere") for symbol in symbols), symbols


async def test_candidate_rows_carry_the_project_and_the_transcript(s: Session) -> None:
    """What VS Code's session picker shows beside a title (the cwd's last folder) and opens."""
    rows = {row["sessionId"]: row for row in await s.command("dshSessionReference.candidates", {"query": ""})}
    assert rows["s-delta"]["project"] == "elsewhere" and rows["s-delta"]["cwd"] == "/elsewhere"
    assert rows["s-delta"]["transcript"] == transcript_uri("s-delta", "Deploy checklist")
    assert rows["s-beta"]["project"] is None  # no cwd
    assert session_of_transcript(rows["s-beta"]["transcript"]) == "s-beta"
    # Its title's escape is shown escaped, in the row and in the tab name the URI gives.
    assert "\\x1b" in rows["s-beta"]["label"] and "\\x1b" in unquote(rows["s-beta"]["transcript"])


async def test_insert_mention_applies_the_completion_text(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, "Compare with \n")
    result = await s.command(
        "dshSessionReference.insertMention",
        {"documentUri": uri, "position": {"line": 0, "character": 13}, "sessionId": "s-delta"},
    )
    expected = mention("s-delta", "Deploy checklist")
    assert result == {"mention": expected, "applied": True}
    edit = s.edits[-1]
    [change] = edit.document_changes
    assert change.edits[0].new_text == expected
    assert change.text_document.version == 1


async def test_a_pick_past_the_limit_replaces_a_referenced_session(s: Session, workspace: Path) -> None:
    """The summary names the sessions within ``maxReferences`` (what the picker offers to replace), and
    ``insertMention`` with ``replace`` turns every mention of one into the picked session's, in one
    versioned edit, so the count of sessions stays at the limit."""
    alpha, gamma, beta = (
        mention("s-alpha", "Refactor the parser"),
        mention("s-gamma", "s-gamma"),
        mention("s-beta", "notes"),
    )
    text = f"{alpha} then {gamma}, {beta} and again {alpha}.\nSee \n"
    uri = s.open(workspace, text)
    summary = await s.command("dshSessionReference.documentSummary", uri)
    assert summary["maxReferences"] == 3 and summary["sessions"] == 3
    assert summary["references"] == [
        {"sessionId": "s-alpha", "label": "Refactor the parser", "mentions": 2},
        {"sessionId": "s-gamma", "label": "s-gamma", "mentions": 1},
        {
            "sessionId": "s-beta",
            "label": display_inline_text("Notes\nsecond line \x1b[1mbold"),
            "mentions": 1,
        },
    ]
    cursor = s.position(uri, len(text) - 1)
    result = await s.command(
        "dshSessionReference.insertMention",
        {"documentUri": uri, "position": cursor, "sessionId": "s-delta", "replace": "s-alpha"},
    )
    delta = mention("s-delta", "Deploy checklist")
    assert result == {"mention": delta, "applied": True, "replaced": 2}
    [change] = s.edits[-1].document_changes
    assert change.text_document.version == 1
    assert [edit.new_text for edit in change.edits] == [delta, delta]
    starts = [text.index(alpha), text.rindex(alpha)]
    assert [edit.range for edit in change.edits] == [
        types.Range(start=s.position(uri, at), end=s.position(uri, at + len(alpha))) for at in starts
    ]
    with pytest.raises(Exception, match="mentions no session 's-delta'"):
        await s.command(
            "dshSessionReference.insertMention",
            {"documentUri": uri, "position": cursor, "sessionId": "s-alpha", "replace": "s-delta"},
        )


async def test_the_summary_lists_no_more_than_the_limit_and_no_self_reference(
    s: Session, workspace: Path
) -> None:
    """Sessions past ``maxReferences`` are errors already; a title is shortened for a picker's row."""
    long_title = "x" * 300
    text = " ".join(mention(sid, "l") for sid in ("s-alpha", "s-beta", "s-gamma", "s-delta", "nope"))
    uri = s.open(workspace, text)
    summary = await s.command("dshSessionReference.documentSummary", uri)
    assert [row["sessionId"] for row in summary["references"]] == ["s-alpha", "s-beta", "s-gamma"]
    assert summary["errors"] > 0
    assert len(long_title) > 200  # the label cap, checked on a title below
    own = s.open(workspace, f"{mention(TARGET_ID, 'me')} {mention('nope', long_title)}")
    s.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"dshSessionReference": {"targetSessionId": TARGET_ID}})
    )
    try:
        rows = (await s.command("dshSessionReference.documentSummary", own))["references"]
    finally:
        s.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"dshSessionReference": {"targetSessionId": ""}})
        )
    assert rows == [{"sessionId": "nope", "label": "x" * 199 + "…", "mentions": 1}]


async def test_inlay_hints_and_code_lens_show_each_mention_cost(s: Session, workspace: Path) -> None:
    text = (
        "intro\n"
        f"{mention('s-alpha', 'Refactor the parser')} {mention('s-gamma', 's-gamma')} "
        f"{mention('s-alpha', 'again')}\n"
    )
    uri = s.open(workspace, text)
    hints = await s.inlay_hints(uri)
    labels = [hint.label for hint in hints]
    assert labels[0].startswith("4 msgs · ") and labels[0].endswith(" / 64 KB")
    assert labels[1].startswith("2 msgs · ")
    # "again" is not the session's title: the hint says which session that mention sends.
    assert labels[2] == "sends “Refactor the parser” · counted once"
    assert hints[0].position == s.position(uri, text.index(" @[s-gamma]"))
    lenses = await s.client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    assert [lens.range.start.line for lens in lenses] == [1, 1]
    # DeepSeek's count once its tokenizer has loaded (in the background), an estimate saying so before.
    assert re.fullmatch(
        r"2 sessions · [\d.]+ KB in all \((~\d{1,3}(,\d{3})* tokens, estimated|\d{1,3}(,\d{3})* tokens)\)",
        lenses[0].command.title,
    )
    assert lenses[1].command.title == "Preview"
    assert lenses[1].command.command == "dshSessionReference.preview"
    assert list(lenses[1].command.arguments) == [uri]


async def test_hints_follow_a_log_dsh_appends_to(s: Session, store: Path, workspace: Path) -> None:
    """The watcher sees the log grow: the server asks the editor to refresh its hints within a
    second, with no request from the editor in between, and the hints then count the new message."""
    text = f"{mention('s-delta', 'Deploy checklist')}\n"
    uri = s.open(workspace, text)
    before = await s.inlay_hints(uri)
    assert before[0].label.startswith("1 msg · ")
    await asyncio.sleep(0.5)  # the watcher is up well before this
    s.refreshes.clear()
    written = time.monotonic()
    append_turn(store, "s-delta", "and then?", "1. build 2. ship")
    await wait_until(lambda: any(kind == "inlay" for kind, _ in s.refreshes), within=5)
    asked = next(at for kind, at in s.refreshes if kind == "inlay")
    assert asked - written < 1.0
    after = await s.inlay_hints(uri)
    assert after[0].label.startswith("3 msgs · ")


async def test_a_retitle_reaches_an_open_transcript(s: Session, store: Path) -> None:
    transcript = await s.command("dshSessionReference.transcript", "s-alpha")
    s.contents.clear()
    append_title(store, "s-alpha", "Refactor the parser, done")
    await wait_until(lambda: s.contents, within=5)
    assert transcript["uri"] in s.contents[-1]
    again = await s.command("dshSessionReference.transcript", "s-alpha")
    assert "title:     Refactor the parser, done" in again["text"]


async def test_a_transcript_counts_as_the_mention_it_was_opened_from(s: Session, workspace: Path) -> None:
    """Retention's sizes depend on the label: a transcript opened from a mention labelled otherwise
    than the title counts with that label, so it agrees with the hint to the byte."""
    text = f"{mention('s-gamma', 'the x and y session')}\n"
    uri = s.open(workspace, text)
    location = await s.client.text_document_definition_async(
        types.DefinitionParams(
            text_document=types.TextDocumentIdentifier(uri=uri), position=s.position(uri, 3)
        )
    )
    assert isinstance(location, types.Location)
    assert location.uri == transcript_uri("s-gamma", None, "the x and y session")
    assert location.uri.endswith("#the%20x%20and%20y%20session")
    content = await s.client.workspace_text_document_content_async(
        types.TextDocumentContentParams(uri=location.uri)
    )
    [hint] = await s.inlay_hints(uri)
    served = re.search(
        r"mention:   keeps (\d+) of \d+ messages\n +([\d.,]+ KB of [\d,]+ KB \(([\d,]+) of)", content.text
    )
    assert served is not None and 'for a mention labelled "the x and y session"' in content.text
    # s-gamma is untitled: a label other than its id says which session it sends.
    assert hint.label.startswith(f"sends “s-gamma” · {served.group(1)} msgs · ")
    assert f"mentioning it costs {served.group(2)} 65,536 bytes" in str(hint.tooltip)
    by_title = await s.command("dshSessionReference.transcript", "s-gamma")
    titled = re.search(
        r"keeps \d+ of \d+ messages\n +[\d.,]+ KB of [\d,]+ KB \(([\d,]+) of", by_title["text"]
    )
    assert titled is not None and titled.group(1) != served.group(3)  # another label, another size


async def test_hints_and_lenses_follow_the_settings(s: Session, workspace: Path) -> None:
    """Turned off, neither is sent; a budget change asks the editor for new hints, which show it."""
    uri = s.open(workspace, f"{mention('s-delta', 'Deploy checklist')}\n")
    assert (await s.inlay_hints(uri))[0].label.endswith(" / 64 KB")
    document = types.TextDocumentIdentifier(uri=uri)

    async def configure(**settings: object) -> None:
        s.refreshes.clear()
        s.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"dshSessionReference": settings})
        )
        await wait_until(lambda: {kind for kind, _ in s.refreshes} == {"inlay", "lens"}, within=5)

    await configure(maxReferenceBytes=4096)
    assert (await s.inlay_hints(uri))[0].label.endswith(" / 4 KB")
    await configure(inlayHints=False, codeLens=False, maxReferenceBytes=65536)
    assert not await s.inlay_hints(uri)
    assert not await s.client.text_document_code_lens_async(types.CodeLensParams(text_document=document))
    await configure(inlayHints=True, codeLens=True)
    assert (await s.inlay_hints(uri))[0].label.endswith(" / 64 KB")
    assert await s.client.text_document_code_lens_async(types.CodeLensParams(text_document=document))


async def test_an_open_preview_is_told_when_a_mentioned_log_grows(
    s: Session, store: Path, workspace: Path
) -> None:
    """The preview of a document mentioning a session is among the documents the client is told
    to fetch again when dsh appends to that session's log, and it then shows the new turn."""
    uri = s.open(workspace, f"{mention('s-beta', 'notes')}\n")
    preview = await s.command("dshSessionReference.preview", uri)
    s.contents.clear()
    append_turn(store, "s-beta", "and the rollback?", "noted as well")
    await wait_until(lambda: any(preview["uri"] in uris for uris in s.contents), within=5)
    again = await s.client.workspace_text_document_content_async(
        types.TextDocumentContentParams(uri=preview["uri"])
    )
    assert "noted as well" in again.text and "noted as well" not in preview["text"]
