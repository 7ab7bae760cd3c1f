"""``dsh-session-reference demo``: a scripted editor session against the real server, in a terminal.

It starts ``python -m dsh_session_reference lsp --stdio`` as a subprocess (the
way VS Code, Neovim and Emacs start it), writes a prompt, types ``@``, picks a
session, pastes a link dsh would reject, applies the quick fix, hovers the
mention and opens the preview, printing what an editor would show at each
step. Without ``--sessions`` it runs against the built-in sample store in a
temporary directory; with it, against that root (read only) and no target
session.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
import tempfile
import textwrap
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar

from lsprotocol import types
from pygls.lsp.client import LanguageClient

from ..display import display_inline_text
from ..sample import COMPACTED_ID, HANDBOOK_ID, SHOP, write_sample_store
from ..uri import encode_session_reference_uri, format_session_reference_mention, scan_session_references
from .completion import item_data, only_listing
from .positions import LineIndex
from .pygls_patches import client_process

T = TypeVar("T")

STEP_TIMEOUT: Final = 15.0
WIDTH: Final = 100
PROMPT_URI: Final = "untitled:/prompt.md"
PROMPT: Final = types.TextDocumentIdentifier(uri=PROMPT_URI)

CAPABILITIES: Final = types.ClientCapabilities(
    general=types.GeneralClientCapabilities(position_encodings=[types.PositionEncodingKind.Utf16]),
    text_document=types.TextDocumentClientCapabilities(
        synchronization=types.TextDocumentSyncClientCapabilities(),
        completion=types.CompletionClientCapabilities(
            completion_item=types.ClientCompletionItemOptions(
                label_details_support=True,
                documentation_format=[types.MarkupKind.PlainText],
            )
        ),
        hover=types.HoverClientCapabilities(content_format=[types.MarkupKind.PlainText]),
        publish_diagnostics=types.PublishDiagnosticsClientCapabilities(),
        code_action=types.CodeActionClientCapabilities(
            code_action_literal_support=types.ClientCodeActionLiteralOptions(
                code_action_kind=types.ClientCodeActionKindOptions(
                    value_set=[types.CodeActionKind.QuickFix, types.CodeActionKind.Source]
                )
            )
        ),
    ),
    window=types.WindowClientCapabilities(show_document=types.ShowDocumentClientCapabilities(support=False)),
)


class DemoFailed(Exception):
    """A step did not get the answer an editor needs."""


class _Editor:
    """The smallest editor that still behaves like one: a buffer, versions, and what the server pushed."""

    def __init__(self, client: LanguageClient) -> None:
        self.client = client
        self.text = ""
        self.version = 0
        self.diagnostics: list[types.Diagnostic] = []
        self.pushed = asyncio.Event()
        self.messages: list[str] = []

    def open(self, text: str) -> None:
        self.text, self.version = text, 1
        item = types.TextDocumentItem(uri=PROMPT_URI, language_id="markdown", version=1, text=text)
        self.client.text_document_did_open(types.DidOpenTextDocumentParams(text_document=item))

    def replace(self, start: int, end: int, new_text: str) -> None:
        change = types.TextDocumentContentChangePartial(
            range=LineIndex(self.text).range_of(start, end), text=new_text
        )
        self.text = self.text[:start] + new_text + self.text[end:]
        self.version += 1
        self.pushed.clear()
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=PROMPT_URI, version=self.version),
                content_changes=[change],
            )
        )

    def type(self, text: str) -> None:
        self.replace(len(self.text), len(self.text), text)

    def apply(self, edit: types.TextEdit) -> None:
        index = LineIndex(self.text)
        self.replace(index.offset_at(edit.range.start), index.offset_at(edit.range.end), edit.new_text)

    def position(self, offset: int) -> types.Position:
        return LineIndex(self.text).position_at(offset)


async def _within(work: Awaitable[T], what: str) -> T:
    try:
        return await asyncio.wait_for(work, STEP_TIMEOUT)
    except TimeoutError as error:
        raise DemoFailed(f"no answer to {what} within {STEP_TIMEOUT:.0f} s") from error


def _say(line: str = "", indent: int = 0) -> None:
    prefix = " " * indent
    for part in line.splitlines() or [""]:
        shown = part if len(part) <= WIDTH else part[: WIDTH - 1] + f"… (+{len(part) - WIDTH + 1} chars)"
        print(prefix + shown)


def _step(number: int, title: str) -> None:
    print()
    print(f"== {number}. {title} " + "=" * max(0, WIDTH - len(title) - 8))


def _show_document(editor: _Editor) -> None:
    _say("prompt.md:")
    for number, line in enumerate(editor.text.splitlines() or [""], start=1):
        _say(f"{number:3} | {line}", 2)


def _show_items(items: list[types.CompletionItem], limit: int = 6) -> None:
    for rank, item in enumerate(items[:limit], start=1):
        details = item.label_details
        where = details.description or "" if details is not None else ""
        _say(f"{rank}. {item.label:<38} {where}", 2)
    if len(items) > limit:
        _say(f"… and {len(items) - limit} more", 2)


def _show_diagnostics(editor: _Editor) -> None:
    if not editor.diagnostics:
        _say("(no problems)", 2)
    for diagnostic in editor.diagnostics:
        severity = types.DiagnosticSeverity(diagnostic.severity or 1).name.lower()
        start = diagnostic.range.start
        _say(f"{start.line + 1}:{start.character + 1} {severity} [{diagnostic.code}] {diagnostic.message}", 2)


def _noncanonical(session_id: str) -> str:
    """The same id written with a JSON escape: it decodes, but it is not the canonical form dsh accepts."""
    plain = json.dumps(session_id)
    escaped = plain.replace("-", "\\u002d", 1)
    if escaped == plain:
        escaped = json.dumps(session_id, ensure_ascii=not session_id.isascii()) + " "
    return "dsh-session:" + base64.urlsafe_b64encode(escaped.encode()).rstrip(b"=").decode()


def _other_session(items: list[types.CompletionItem], picked: types.CompletionItem) -> tuple[str, str]:
    """``(id, label)`` of a listed session other than the picked one (the same one if it is alone)."""
    rows = [row for row in (item_data(item) for item in items) if row is not None]
    chosen = item_data(picked)
    others = [row for row in rows if chosen is None or row[0] != chosen[0]]
    handbook = [row for row in others if row[0] == HANDBOOK_ID]
    return (handbook or others or rows)[0]


async def _wait_diagnostics(editor: _Editor, done: Callable[[list[types.Diagnostic]], bool]) -> None:
    while not done(editor.diagnostics):
        editor.pushed.clear()
        await _within(editor.pushed.wait(), "textDocument/publishDiagnostics")


async def _complete(editor: _Editor) -> list[types.CompletionItem]:
    """The completion at the end of the text. While the server answers only "Listing dsh
    sessions…" (its listing took over 100 ms: a loaded machine), it asks again, as the VS Code
    extension does, for up to :data:`STEP_TIMEOUT`."""
    deadline = asyncio.get_running_loop().time() + STEP_TIMEOUT
    params = types.CompletionParams(text_document=PROMPT, position=editor.position(len(editor.text)))
    while True:
        asked = editor.client.text_document_completion_async(params)
        result = await _within(asked, "textDocument/completion")
        if not isinstance(result, types.CompletionList):
            raise DemoFailed("the server answered completion without a list")
        if not only_listing(result):
            return list(result.items)
        if asyncio.get_running_loop().time() > deadline:
            raise DemoFailed(f"the sessions were still being listed after {STEP_TIMEOUT:.0f} s")
        await asyncio.sleep(0.25)


async def _play(editor: _Editor, sample: bool) -> None:
    client = editor.client
    _step(1, "Open a prompt")
    editor.open("Before we ship the checkout fix, compare it with ")
    _show_document(editor)

    _step(2, "Type @ : the server lists your other sessions, best match first")
    editor.type("@")
    items = await _complete(editor)
    _show_items(items)
    if not items:
        raise DemoFailed("the @ list is empty (is the sessions root empty?)")

    _step(3, "Keep typing to filter (the server searches every session)")
    query = "cart" if sample else items[0].label[:3]
    editor.type(query)
    _say(f"typed @{query}")
    filtered = await _complete(editor)
    _show_items(filtered)
    picked = (filtered or items)[0]

    _step(4, "Pick a candidate: the mention is inserted, the preview shows in the popup")
    resolved = await _within(client.completion_item_resolve_async(picked), "completionItem/resolve")
    documentation = resolved.documentation
    text = documentation.value if isinstance(documentation, types.MarkupContent) else documentation or ""
    _say(text, 2)
    edit = picked.text_edit
    if not isinstance(edit, types.TextEdit):
        raise DemoFailed("the completion item has no text edit")
    editor.apply(edit)
    editor.type(".\n")
    _show_document(editor)

    _step(5, "Paste a link dsh would reject: it is flagged as you type")
    other_id, other_label = _other_session(items, picked)
    good = format_session_reference_mention(other_id, display_inline_text(other_label))
    pasted = good.replace(encode_session_reference_uri(other_id), _noncanonical(other_id))
    editor.type(f"Also see {pasted} for the style rules.\n")
    _show_document(editor)
    await _wait_diagnostics(editor, lambda found: any(d.code == "noncanonical-uri" for d in found))
    _show_diagnostics(editor)

    _step(6, "Apply the quick fix")
    problem = next(d for d in editor.diagnostics if d.code == "noncanonical-uri")
    actions = await _within(
        client.text_document_code_action_async(
            types.CodeActionParams(
                text_document=PROMPT,
                range=problem.range,
                context=types.CodeActionContext(diagnostics=[problem]),
            )
        ),
        "textDocument/codeAction",
    )
    fixes = [a for a in actions or [] if isinstance(a, types.CodeAction) and a.edit is not None]
    for action in actions or []:
        _say(f"- {action.title}", 2)
    if not fixes:
        raise DemoFailed("no quick fix was offered")
    fix = fixes[0]
    _say(f"applying: {fix.title}")
    assert fix.edit is not None  # plain changes: the demo takes no versioned edits
    for edit in (fix.edit.changes or {}).get(PROMPT_URI, []):  # one edit, as every fix has
        editor.apply(edit)
    _show_document(editor)
    await _wait_diagnostics(
        editor, lambda found: not any(d.severity == types.DiagnosticSeverity.Error for d in found)
    )
    _show_diagnostics(editor)

    _step(7, "Hover a mention: what it is and what it costs")
    spans = scan_session_references(editor.text)
    hover = await _within(
        client.text_document_hover_async(
            types.HoverParams(text_document=PROMPT, position=editor.position(spans[0].start + 2))
        ),
        "textDocument/hover",
    )
    if hover is None or not isinstance(hover.contents, types.MarkupContent):
        raise DemoFailed("no hover on the mention")
    _say(hover.contents.value, 2)

    _step(8, "Preview referenced-session context: exactly what the model receives, and what it costs")
    preview = await _within(
        client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="dshSessionReference.preview", arguments=[PROMPT_URI])
        ),
        "workspace/executeCommand",
    )
    if not isinstance(preview, dict) or "text" not in preview:
        raise DemoFailed("the preview command returned no document")
    _say(f"({preview['uri']}, read-only)")
    _say(preview["text"], 2)
    _say(f"status: {preview['summary']}")
    for message in editor.messages:
        _say(f"editor message: {message}")
    if not preview.get("ok"):
        raise DemoFailed(f"prepare failed: {preview['summary']}")


async def _drain(stream: asyncio.StreamReader | None, into: list[bytes]) -> None:
    if stream is None:
        return
    while line := await stream.readline():
        into.append(line)


async def _run(root: str, sample: bool) -> int:
    client = LanguageClient("dsh-session-reference-demo", "0.1.0")
    editor = _Editor(client)

    def on_diagnostics(params: types.PublishDiagnosticsParams) -> None:
        if params.uri == PROMPT_URI:
            editor.diagnostics = list(params.diagnostics)
            editor.pushed.set()

    def on_message(params: types.ShowMessageParams) -> None:
        editor.messages.append(params.message)

    client.feature(types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS)(on_diagnostics)
    client.feature(types.WINDOW_SHOW_MESSAGE)(on_message)

    env = dict(os.environ)
    env.pop("DSH_SESSION_ID", None)
    settings: dict[str, Any] = {"sessionsRoot": root}
    if sample:
        settings["targetSessionId"] = COMPACTED_ID
    await client.start_io(sys.executable, "-m", "dsh_session_reference", "lsp", "--stdio", env=env)
    stderr: list[bytes] = []
    server = client_process(client)
    drain = asyncio.ensure_future(_drain(server.stderr if server else None, stderr))
    status = 0
    try:
        print(
            f"sessions root: {root}" + (" (the built-in sample, in a temporary directory)" if sample else "")
        )
        if sample:
            print(f'writing the next prompt of session {COMPACTED_ID} ("Stale price flash on checkout")')
        await _within(
            client.initialize_async(
                types.InitializeParams(
                    capabilities=CAPABILITIES,
                    process_id=os.getpid(),
                    root_uri=None,
                    workspace_folders=[types.WorkspaceFolder(uri=f"file://{SHOP}", name="shop")]
                    if sample
                    else None,
                    initialization_options={"dshSessionReference": settings},
                )
            ),
            "initialize",
        )
        client.initialized(types.InitializedParams())
        await _play(editor, sample)
        print()
        print("demo finished: every step got the answer an editor needs.")
    except DemoFailed as error:
        print(f"\ndemo failed: {error}", file=sys.stderr)
        status = 1
    finally:
        try:
            await asyncio.wait_for(client.shutdown_async(None), STEP_TIMEOUT)
            client.exit(None)
            await asyncio.wait_for(client.stop(), STEP_TIMEOUT)  # type: ignore[no-untyped-call]
        except (TimeoutError, RuntimeError) as error:
            print(f"the server did not stop cleanly: {error}", file=sys.stderr)
            if server is not None and server.returncode is None:
                server.kill()
            status = 1
        await asyncio.wait_for(drain, STEP_TIMEOUT)
    if status and stderr:
        sys.stderr.write(textwrap.indent(b"".join(stderr).decode("utf-8", "replace"), "server: "))
    return status


def run_demo(sessions: str | None = None) -> int:
    """Play the scripted session; 0 when every step worked, 1 otherwise."""
    if sessions is not None:
        return asyncio.run(_run(os.path.abspath(sessions), sample=False))
    with tempfile.TemporaryDirectory(prefix="dsh-demo-") as directory:
        root = write_sample_store(os.path.join(directory, "sessions"))
        return asyncio.run(_run(root, sample=True))
