"""Every feature through the real server over stdio, once per client: VS Code 1.139, Neovim 0.7, Emacs.

One server per client preset for the whole module; every test opens its own
documents. ``LspSpecificationWarning`` is an error (pyproject), so answering a
client with something it did not declare fails the test.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
import pytest_lsp
from lsp_support import CLIENTS, TARGET_ID, Session, initialize_params, server_config, serving, wait_until
from lsprotocol import types
from pytest_lsp import LanguageClient

from dsh_session_reference.lsp.actions import PREVIEW_KIND, PREVIEW_TITLE
from dsh_session_reference.lsp.diagnostics import SOURCE
from dsh_session_reference.uri import format_session_reference_mention, parse_session_reference_text

pytestmark = pytest.mark.asyncio(loop_scope="module")

ALPHA = format_session_reference_mention("s-alpha", "Refactor the parser")
DELTA = format_session_reference_mention("s-delta", "Deploy checklist")


def noncanonical(session_id: str) -> str:
    escaped = json.dumps(session_id).replace("-", "\\u002d")
    return "dsh-session:" + base64.urlsafe_b64encode(escaped.encode()).rstrip(b"=").decode()


@pytest_lsp.fixture(config=server_config(), params=CLIENTS, scope="module")
async def lsp(lsp_client: LanguageClient, request: pytest.FixtureRequest, workspace: Path, store_root: Path):
    async with serving(lsp_client, request.param, initialize_params(request.param, workspace, store_root)):
        yield


def codes(diagnostics: list[types.Diagnostic]) -> list[str]:
    return sorted(str(d.code) for d in diagnostics)


async def test_server_advertises_what_editors_need(s: Session) -> None:
    capabilities = s.result.capabilities
    assert capabilities.completion_provider is not None
    assert list(capabilities.completion_provider.trigger_characters or []) == ["@"]
    assert capabilities.completion_provider.resolve_provider is True
    assert capabilities.hover_provider and capabilities.code_action_provider
    assert capabilities.execute_command_provider is not None
    assert set(capabilities.execute_command_provider.commands) == {
        "dshSessionReference.preview",
        "dshSessionReference.candidates",
        "dshSessionReference.documentSummary",
        "dshSessionReference.transcript",
        "dshSessionReference.modelText",
        "dshSessionReference.insertMention",
        "dshSessionReference.send",
    }
    assert capabilities.definition_provider and capabilities.document_link_provider
    assert capabilities.workspace_symbol_provider and capabilities.inlay_hint_provider
    assert capabilities.code_lens_provider
    if s.preset == "visual-studio-code@1.139":
        await wait_until(lambda: s.registrations)
        assert [r.method for r in s.registrations] == [types.WORKSPACE_TEXT_DOCUMENT_CONTENT]
        assert s.registrations[0].register_options == {"schemes": ["dsh-preview", "dsh-transcript"]}
    else:
        assert s.registrations == []  # neither declares workspace.textDocumentContent


async def test_at_completion_lists_ranked_sessions_with_an_edit_from_the_at(
    s: Session, workspace: Path
) -> None:
    uri = s.open(workspace, "Compare with 😀 @")
    result = await s.complete(uri)
    assert result.is_incomplete is True
    # Same cwd as the target, then no cwd, then other cwds newest first; the target itself is excluded.
    assert [item.label for item in result.items] == [
        "Refactor the parser",
        "Notes\\x0asecond line \\x1b[1mbold",
        "s-gamma",
        "Deploy checklist",
    ]
    assert [item.sort_text for item in result.items] == ["0000", "0001", "0002", "0003"]
    at = s.texts[uri].index("@")
    # VS Code filters on filter_text (it must start with the @ the edit replaces); Neovim 0.7 would
    # insert at the cursor instead of the edit's start if it got one, so only insertReplace clients do.
    wants_filter_text = s.preset == "visual-studio-code@1.139"
    for item in result.items:
        if wants_filter_text:
            assert item.filter_text is not None and item.filter_text.startswith("@")
        else:
            assert item.filter_text is None
        assert isinstance(item.text_edit, types.TextEdit)
        assert item.text_edit.range == types.Range(start=s.position(uri, at), end=s.end(uri))
    first = result.items[0].text_edit
    assert isinstance(first, types.TextEdit) and first.new_text == ALPHA
    beta = result.items[1]
    assert parse_session_reference_text(beta.text_edit.new_text).references[0].session_id == "s-beta"  # type: ignore[union-attr]
    if s.preset == "visual-studio-code@1.139":
        assert beta.label_details == types.CompletionItemLabelDetails(description="1 h")
        assert all(item.detail is None for item in result.items)  # the id ends the documentation
        assert all(item.filter_text.startswith("@ ") for item in result.items)  # type: ignore[union-attr]
    else:
        assert beta.label_details is None and beta.detail == "1 h · s-beta"


async def test_typing_after_the_at_filters_on_the_server(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, "see @")
    s.type_text(uri, "deploy")
    result = await s.complete(uri)
    assert [item.label for item in result.items] == ["Deploy checklist"]
    assert result.is_incomplete is True
    s.replace(uri, 5, len(s.texts[uri]), "ELSEWHERE")
    assert [item.label for item in (await s.complete(uri)).items] == ["s-gamma", "Deploy checklist"]
    s.type_text(uri, "-nothing")
    assert list((await s.complete(uri)).items) == []
    s.type_text(uri, " plain")
    nothing = await s.complete(uri)
    assert list(nothing.items) == [] and nothing.is_incomplete is False


async def test_resolve_adds_a_preview_in_a_format_the_client_reads(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, "@refactor")
    [item] = (await s.complete(uri)).items
    resolved = await s.client.completion_item_resolve_async(item)
    documentation = resolved.documentation
    if s.preset == "emacs":  # eglot declares no documentation formats: plain text
        assert isinstance(documentation, str)
        text = documentation
    else:
        assert isinstance(documentation, types.MarkupContent)
        assert documentation.kind == types.MarkupKind.Markdown
        text = documentation.value.replace("\\", "")
    assert "2 messages from the user, 2 replies" in text
    assert text.rstrip().endswith("s-alpha`" if s.preset != "emacs" else "s-alpha")  # the id, last
    assert "Go ahead and do it." in text
    assert "mentioning it costs" in text and "of 65,536 bytes" in text


async def test_diagnostics_flag_every_problem_with_stable_codes(s: Session, workspace: Path) -> None:
    bad = noncanonical("s-alpha")
    text = "\n".join(
        [
            f"😀 @[Refactor the parser]({bad})",
            format_session_reference_mention(TARGET_ID),
            format_session_reference_mention("s-unknown"),
            f"{DELTA} and again {DELTA}",
            format_session_reference_mention("s-alpha", "old name"),
            "dsh-session:MTIz",
            format_session_reference_mention("s-gamma"),
        ]
    )
    uri = s.open(workspace, text)
    found = await s.diagnostics(uri, lambda d: len(d) == 7)
    assert codes(found) == [
        "duplicate-reference",
        "malformed-uri",
        "noncanonical-uri",
        "self-reference",
        "stale-label",
        "too-many-references",
        "unknown-session",
    ]
    assert all(d.source == SOURCE for d in found)
    by_code = {d.code: d for d in found}
    noncanonical_range = by_code["noncanonical-uri"].range
    start = text.index(bad)
    assert noncanonical_range == types.Range(
        start=s.position(uri, start), end=s.position(uri, start + len(bad))
    )
    assert by_code["noncanonical-uri"].severity == types.DiagnosticSeverity.Error
    assert by_code["duplicate-reference"].severity == types.DiagnosticSeverity.Hint
    assert by_code["stale-label"].severity == types.DiagnosticSeverity.Warning
    assert by_code["too-many-references"].range.start.line == 6  # the fourth distinct session


async def test_quick_fix_canonicalises_and_the_error_goes(s: Session, workspace: Path) -> None:
    bad = noncanonical("s-delta")
    uri = s.open(workspace, f"Use 😀 @[Deploy checklist]({bad}) today")
    [diagnostic] = await s.diagnostics(uri, lambda d: len(d) == 1)
    assert diagnostic.code == "noncanonical-uri"
    actions = await s.actions(uri, s.texts[uri].index(bad) + 3, [diagnostic])
    fix = actions[0]
    assert isinstance(fix, types.CodeAction) and fix.kind == types.CodeActionKind.QuickFix
    assert fix.title == 'Use session "Deploy checklist"'
    assert list(fix.diagnostics or []) == [diagnostic] and fix.edit is not None
    assert [a.title for a in actions][-1] == PREVIEW_TITLE
    s.apply(uri, fix.edit)
    assert s.texts[uri] == f"Use 😀 {DELTA} today"
    assert await s.diagnostics(uri, lambda d: d == []) == []


async def test_bare_uri_and_stale_label_fixes(s: Session, workspace: Path) -> None:
    stale = format_session_reference_mention("s-alpha", "old")
    uri = s.open(workspace, f"a dsh-session:InMtZGVsdGEi b {stale}")
    actions = await s.actions(uri, 4)
    assert actions[0].title == "Turn into a labelled mention @[Deploy checklist]"
    s.apply(uri, actions[0].edit)
    assert s.texts[uri] == f"a {DELTA} b {stale}"
    actions = await s.actions(uri, s.texts[uri].index(stale) + 1)
    assert actions[0].title == 'Refresh the label to the current title "Refactor the parser"'
    s.apply(uri, actions[0].edit)
    removal = next(a for a in await s.actions(uri, 3) if a.title == "Remove this mention")
    s.apply(uri, removal.edit)
    assert s.texts[uri] == f"a  b {ALPHA}"
    assert await s.diagnostics(uri, lambda d: d == []) == []


async def test_hover_shows_the_session_and_its_cost(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, f"x {ALPHA}")
    hover = await s.client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=s.position(uri, 5))
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.range == types.Range(start=s.position(uri, 2), end=s.end(uri))
    text = hover.contents.value.replace("\\", "")
    assert "Refactor the parser" in text and "s-alpha" in text and str(workspace) in text
    assert "created " in text and " ago (" in text and "UTC)" in text and "mentioning it costs" in text
    nothing = await s.client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=s.position(uri, 0))
    )
    assert nothing is None


async def test_hover_on_an_invalid_uri_does_not_repeat_its_diagnostic(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, f"see {noncanonical('s-delta')}")
    [diagnostic] = await s.diagnostics(uri, lambda d: len(d) == 1)
    hover = await s.client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=s.position(uri, 6))
    )
    assert hover is not None and isinstance(hover.contents, types.MarkupContent)
    assert hover.range == types.Range(start=s.position(uri, 4), end=s.end(uri))
    text = hover.contents.value.replace("\\", "")
    markdown = hover.contents.kind == types.MarkupKind.Markdown
    assert (
        diagnostic.message == 'not the canonical URI of session "Deploy checklist"; a quick fix rewrites it'
    )
    assert "s-delta" not in diagnostic.message  # named by its title; the hover gives the id
    assert (
        "dsh-session:" not in diagnostic.message
    )  # the squiggle shows the URI; the message names the session
    assert text == (
        "meant: Deploy checklist (id `s-delta`)\n\nits canonical URI: `dsh-session:InMtZGVsdGEi`"
        if markdown
        else "meant: Deploy checklist (id s-delta)\nits canonical URI: dsh-session:InMtZGVsdGEi"
    )


async def test_preview_command_shows_what_the_model_receives(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, f"Please compare {ALPHA} with {DELTA}.")
    source_action = next(a for a in await s.actions(uri, 0) if a.title == PREVIEW_TITLE)
    assert source_action.kind == PREVIEW_KIND and list(source_action.command.arguments) == [uri]
    result = await s.command(source_action.command.command, *source_action.command.arguments)
    assert result["ok"] is True and result["uri"].startswith("dsh-preview:")
    text = result["text"]
    assert "Please compare @Refactor the parser with @Deploy checklist." in text
    assert "[1] Refactor the parser" in text and "[2] Deploy checklist" in text
    assert "What the model reads of it:" in text and "How should we split uri.py?" in text
    assert result["summary"].startswith("2 sessions referenced;")
    if s.preset == "visual-studio-code@1.139":
        await wait_until(lambda: s.client.shown_documents)
        assert [d.uri for d in s.client.shown_documents] == [result["uri"]]
        content = await s.client.workspace_text_document_content_async(
            types.TextDocumentContentParams(uri=result["uri"])
        )
        assert content.text == text
    else:
        assert s.client.shown_documents == []
        assert any(m.message == f"dsh: {result['summary']}" for m in s.client.messages)
    exact = await s.command("dshSessionReference.modelText", uri)
    assert exact["ok"] is True and exact["uri"] != result["uri"] and exact["uri"].startswith("dsh-preview:")
    assert "## Referenced sessions" in exact["text"] and "<referenced-sessions>" in exact["text"]


async def test_a_preview_uri_stands_for_its_prompt_and_a_new_setting_is_told(
    s: Session, workspace: Path
) -> None:
    """A button on a preview (VS Code's title bar) passes the preview's own URI: the commands take
    it for its prompt (it answered "… is not open and is no file"). A new budget changes every
    preview: a client that shows them is told, once the server has the setting."""
    uri = s.open(workspace, f"Compare {ALPHA}.")
    preview = await s.command("dshSessionReference.preview", uri)
    exact = await s.command("dshSessionReference.modelText", preview["uri"])
    assert exact == await s.command("dshSessionReference.modelText", uri)
    again = await s.command("dshSessionReference.preview", exact["uri"])
    assert again["uri"] == preview["uri"] and again["text"] == preview["text"]
    if s.preset != "visual-studio-code@1.139":
        return  # told only to a client that shows the documents (or asked to be)
    s.contents.clear()
    budget = {"dshSessionReference": {"maxReferenceBytes": 4096}}
    s.client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=budget))
    try:
        await wait_until(
            lambda: any(preview["uri"] in uris and exact["uri"] in uris for uris in s.contents), 5
        )
        smaller = await s.command("dshSessionReference.preview", uri)
        assert "4 KB" in smaller["text"] and smaller["text"] != preview["text"]
    finally:
        s.client.workspace_did_change_configuration(
            types.DidChangeConfigurationParams(settings={"dshSessionReference": {"maxReferenceBytes": 65536}})
        )


async def test_preview_of_a_failing_message_shows_the_error(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, format_session_reference_mention("s-unknown"))
    result = await s.command("dshSessionReference.preview", uri)
    assert result["ok"] is False
    assert result["summary"] == (
        "prepare failed: SESSION_REFERENCE_READ_FAILED: failed to read referenced session: "
        'session "s-unknown" not found'
    )


async def test_summary_and_candidates_commands(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, f"{ALPHA} {ALPHA} {DELTA}")
    summary = await s.command("dshSessionReference.documentSummary", uri)
    assert summary["mentions"] == 3 and summary["sessions"] == 2 and summary["errors"] == 0
    # The target comes from $DSH_SESSION_ID here; the status bar shows its title.
    assert summary["target"] == {"sessionId": TARGET_ID, "label": "The prompt being written", "found": True}
    # An estimate until the tokenizer has loaded in the background (the `tokens` extra is a dev
    # dependency), DeepSeek's own count after: within a few bytes per token either way.
    assert summary["bytes"] > 500 and summary["bytes"] / 8 < summary["tokens"] < summary["bytes"] / 2
    if not summary["tokensExact"]:
        # Each of the two messages is estimated on its own, a quarter of its bytes rounded up.
        assert 0 <= summary["tokens"] - summary["bytes"] // 4 <= 2
    rows = await s.command("dshSessionReference.candidates", {"documentUri": uri, "query": "deploy"})
    assert rows == [
        {
            "sessionId": "s-delta",
            "label": "Deploy checklist",
            "cwd": "/elsewhere",
            "createdAt": rows[0]["createdAt"],
            "mention": DELTA,
            "project": "elsewhere",
            "transcript": "dsh-transcript:/Deploy%20checklist.txt?s-delta",
        }
    ]
    everyone = await s.command("dshSessionReference.candidates")
    assert [row["sessionId"] for row in everyone] == ["s-alpha", "s-beta", "s-gamma", "s-delta"]


async def test_closing_clears_pushed_diagnostics(s: Session, workspace: Path) -> None:
    uri = s.open(workspace, "dsh-session:MTIz")
    assert codes(await s.diagnostics(uri, lambda d: len(d) == 1)) == ["malformed-uri"]
    s.client.text_document_did_close(
        types.DidCloseTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri))
    )
    if s.pull:
        assert uri not in s.client.diagnostics  # a pulling client is never pushed to
        report = await s.client.text_document_diagnostic_async(
            types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
        )
        assert list(report.items) == []
    else:
        assert await s.diagnostics(uri, lambda d: d == []) == []
