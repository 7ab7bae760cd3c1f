"""Support for the language-server tests: a real on-disk store, the client presets, and a client session.

The store is written with the project's own log writer (the real dsh format)
into a temporary directory; the server reads it as it would read ~/.dsh.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient, client_capabilities

from dsh_session_reference.lsp.completion import only_listing
from dsh_session_reference.lsp.positions import Encoding, LineIndex, encoding_of
from dsh_session_reference.store.layout import Compression, encode_segment
from dsh_session_reference.store.writer import SessionLog, write_session_log

REFERENCE = Path(__file__).parent / "data" / "vscode-1.139-initialize-params.json"
"""``InitializeParams`` of VS Code 1.139.1 with vscode-languageclient 11, captured in code-server."""
TARGET_ID = "target-session"
NOW_MS = int(time.time() * 1000)

NO_DSH_HOME = Path(tempfile.gettempdir()) / "dsh-session-reference-tests" / "no-dsh-home"
"""A dsh home that does not exist: the server under test reads no profile of the developer's own ``~/.dsh``
(whose budgets would change what the tests see); each test names its sessions root itself."""

CLIENTS = ["visual-studio-code@1.139", "neovim@v0.7", "emacs"]


def capabilities_for(client: str) -> types.ClientCapabilities:
    """The captured VS Code 1.139 capabilities, or a pytest-lsp preset."""
    if client == "visual-studio-code@1.139":
        params = default_converter().structure(json.loads(REFERENCE.read_text()), types.InitializeParams)
        return params.capabilities
    return client_capabilities(client)


def server_config(extra_env: dict[str, str] | None = None) -> ClientServerConfig:
    """The real server over stdio, as editors start it (``--stdio`` included)."""
    env = {**os.environ, "DSH_SESSION_ID": TARGET_ID, "DSH_HOME": str(NO_DSH_HOME), **(extra_env or {})}
    return ClientServerConfig(
        server_command=[sys.executable, "-m", "dsh_session_reference", "lsp", "--stdio"],
        server_env=env,
    )


@dataclass
class Spec:
    """One session to write: id, cwd, title, and (role, text) messages."""

    session_id: str
    cwd: str | None
    title: str | None = None
    messages: list[tuple[str, str]] = field(default_factory=list)
    age_minutes: int = 0


def write_store(root: Path, specs: list[Spec], compression: Compression = "zstd") -> Path:
    """Write ``specs`` as real dsh logs under ``root``."""
    for spec in specs:
        log = SessionLog(spec.session_id, NOW_MS - spec.age_minutes * 60_000, spec.cwd)
        for role, text in spec.messages:
            if role == "user":
                log.start_turn()
                log.user(text)
            else:
                log.start_step()
                log.assistant(text)
                log.end_step()
                log.end_turn()
        if spec.title is not None:
            log.title(spec.title)
        log.commit()
        write_session_log(root, log, compression)
    return root


def append_title(root: Path, session_id: str, title: str) -> None:
    """Append a ``session/title`` event to a plain log, as dsh does when a session is renamed."""
    log = next(root.glob(f"*/{encode_segment(session_id)}/session.jsonl"))
    seq = len(log.read_bytes().splitlines()) - 1
    data = {"title": title, "messageSeqs": [], "source": {"kind": "user"}}
    event = {"type": "session/title", "seq": seq, "time": NOW_MS + seq, "data": data}
    with log.open("ab") as handle:
        handle.write((json.dumps(event) + "\n").encode())


def append_turn(root: Path, session_id: str, question: str, answer: str) -> None:
    """Append one more turn (a question and its answer) to a plain log, as dsh appends a batch."""
    path = next(root.glob(f"*/{encode_segment(session_id)}/session.jsonl"))
    lines = path.read_bytes().splitlines()
    header = json.loads(lines[0])
    log = SessionLog(session_id, header["createdAt"], header.get("cwd"))
    log.events = [json.loads(line) for line in lines[1:]]
    log.turn = sum(1 for event in log.events if event["type"] == "turn/start")
    first = log.next_seq
    log.start_turn()
    log.user(question)
    log.start_step()
    log.assistant(answer)
    log.end_step()
    log.end_turn()
    appended = "".join(json.dumps(event) + "\n" for event in log.events[first:])
    with path.open("ab") as handle:
        handle.write(appended.encode())


def default_specs(workspace: str) -> list[Spec]:
    return [
        Spec(TARGET_ID, workspace, "The prompt being written", [("user", "hello")], age_minutes=1),
        Spec(
            "s-alpha",
            workspace,
            "Refactor the parser",
            [
                ("user", "How should we split uri.py?"),
                ("assistant", "Keep the scanner next to the parser."),
                ("user", "Go ahead and do it."),
                ("assistant", "Done: uri.py now has a lenient scanner."),
            ],
            age_minutes=5,
        ),
        Spec(
            "s-beta",
            None,
            "Notes\nsecond line \x1b[1mbold",
            [("user", "remember the deploy steps"), ("assistant", "noted")],
            age_minutes=60,
        ),
        Spec(
            "s-gamma", "/elsewhere", None, [("user", "x" * 3000), ("assistant", "y" * 3000)], age_minutes=120
        ),
        Spec("s-delta", "/elsewhere", "Deploy checklist", [("user", "list the steps")], age_minutes=240),
    ]


def initialize_params(client: str, workspace: Path, store: Path, **settings: Any) -> types.InitializeParams:
    return types.InitializeParams(
        capabilities=capabilities_for(client),
        root_uri=workspace.as_uri(),
        workspace_folders=[types.WorkspaceFolder(uri=workspace.as_uri(), name="workspace")],
        initialization_options={"dshSessionReference": {"sessionsRoot": str(store), **settings}},
    )


_names = itertools.count()


class Session:
    """One started client with what the tests need to know about it."""

    def __init__(self, client: LanguageClient, preset: str, result: types.InitializeResult) -> None:
        self.client = client
        self.preset = preset
        self.result = result
        self.registrations: list[types.Registration] = []
        self.refreshes: list[tuple[str, float]] = []
        """Refresh requests the server sent (inlay hints, code lenses), with when they arrived."""
        self.contents: list[list[str]] = []
        """The URIs of each ``dshSessionReference/contentChanged`` the server sent."""
        self.edits: list[types.WorkspaceEdit] = []
        """Edits the server asked the client to apply (all applied)."""
        self.texts: dict[str, str] = {}
        self.versions: dict[str, int] = {}

    @property
    def encoding(self) -> Encoding:
        return encoding_of(self.result.capabilities.position_encoding)

    @property
    def pull(self) -> bool:
        return (
            self.client.capabilities is not None
            and self.client.capabilities.text_document is not None
            and (self.client.capabilities.text_document.diagnostic is not None)
        )

    def open(self, workspace: Path, text: str, suffix: str = ".md") -> str:
        uri = (workspace / f"doc-{next(_names)}{suffix}").as_uri()
        self.texts[uri] = text
        self.versions[uri] = 1
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=uri, language_id="markdown", version=1, text=text)
            )
        )
        return uri

    def position(self, uri: str, offset: int) -> types.Position:
        return LineIndex(self.texts[uri]).position_at(offset, self.encoding)

    def end(self, uri: str) -> types.Position:
        return self.position(uri, len(self.texts[uri]))

    def replace(self, uri: str, start: int, end: int, new_text: str) -> None:
        """An incremental edit, as an editor sends it."""
        index = LineIndex(self.texts[uri])
        change = types.TextDocumentContentChangePartial(
            range=index.range_of(start, end, self.encoding), text=new_text
        )
        self.texts[uri] = self.texts[uri][:start] + new_text + self.texts[uri][end:]
        self.versions[uri] += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=self.versions[uri]),
                content_changes=[change],
            )
        )

    def type_text(self, uri: str, text: str) -> None:
        end = len(self.texts[uri])
        self.replace(uri, end, end, text)

    def apply(self, uri: str, edit: types.WorkspaceEdit) -> None:
        """Apply a server's workspace edit to the document, as the client would."""
        edits: Sequence[Any]
        if edit.document_changes is not None:
            edits = [
                e
                for change in edit.document_changes
                if isinstance(change, types.TextDocumentEdit) and change.text_document.uri == uri
                for e in change.edits
            ]
        else:
            edits = (edit.changes or {}).get(uri, [])
        index = LineIndex(self.texts[uri])
        spans = sorted(
            (
                (
                    index.offset_at(e.range.start, self.encoding),
                    index.offset_at(e.range.end, self.encoding),
                    e.new_text,
                )
                for e in edits
            ),
            reverse=True,
        )
        for start, end, new_text in spans:
            self.replace(uri, start, end, new_text)

    async def diagnostics(
        self,
        uri: str,
        until: Callable[[list[types.Diagnostic]], bool] = lambda _: True,
        within: float = 10.0,
    ) -> list[types.Diagnostic]:
        """The current diagnostics: pulled where the client pulls, else the latest push satisfying ``until``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            if self.pull:
                report = await self.client.text_document_diagnostic_async(
                    types.DocumentDiagnosticParams(text_document=types.TextDocumentIdentifier(uri=uri))
                )
                assert isinstance(report, types.RelatedFullDocumentDiagnosticReport)
                found = list(report.items)
            else:
                found = list(self.client.diagnostics.get(uri, ()))
                if uri not in self.client.diagnostics:
                    found = None  # type: ignore[assignment]
            if found is not None and until(found):
                return found
            if loop.time() > deadline:
                raise AssertionError(f"diagnostics for {uri} never matched; last: {found}")
            await asyncio.sleep(0.03)

    async def inlay_hints(self, uri: str) -> list[types.InlayHint]:
        """The document's inlay hints over its whole text."""
        whole = types.Range(start=types.Position(line=0, character=0), end=self.end(uri))
        hints = await self.client.text_document_inlay_hint_async(
            types.InlayHintParams(text_document=types.TextDocumentIdentifier(uri=uri), range=whole)
        )
        return list(hints or [])

    async def command(self, name: str, *arguments: Any) -> Any:
        return await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=name, arguments=list(arguments))
        )

    async def complete(
        self, uri: str, offset: int | None = None, *, listed: bool = True
    ) -> types.CompletionList:
        """A completion at ``offset`` (the end by default). ``listed``: asked again, as the VS Code
        extension does, while the server answers only "Listing dsh sessions…" (its listing takes
        over 100 ms: a cold or forged cache, a loaded machine), so the answer holds the sessions;
        ``listed=False`` gives the first answer, whatever it is."""
        position = self.end(uri) if offset is None else self.position(uri, offset)
        params = types.CompletionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            position=position,
            context=types.CompletionContext(
                trigger_kind=types.CompletionTriggerKind.TriggerCharacter, trigger_character="@"
            ),
        )
        deadline = time.monotonic() + 60
        while True:
            result = await self.client.text_document_completion_async(params)
            assert isinstance(result, types.CompletionList)
            if not listed or not only_listing(result) or time.monotonic() > deadline:
                return result
            await asyncio.sleep(0.02)

    async def actions(
        self, uri: str, offset: int, diagnostics: Sequence[types.Diagnostic] = (), end: int | None = None
    ) -> list[Any]:
        """Code actions for ``[offset, end]`` (a cursor at ``offset`` by default), structured the
        way editors read them.

        lsprotocol's ``CodeAction | Command`` hook turns every code action that
        carries a ``command`` into a ``Command`` (dropping its kind), so the raw
        result is read instead and split on ``typeof command === "string"``.
        """
        position = self.position(uri, offset)
        params = types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(start=position, end=position if end is None else self.position(uri, end)),
            context=types.CodeActionContext(diagnostics=list(diagnostics)),
        )
        msg_id = f"code-action-{next(_names)}"
        protocol = self.client.protocol
        future = protocol.send_request(types.TEXT_DOCUMENT_CODE_ACTION, params, msg_id=msg_id)
        protocol._result_types[msg_id] = None
        raw = await asyncio.wrap_future(future)
        converter = protocol._converter
        return [
            converter.structure(
                item, types.Command if isinstance(item.get("command"), str) else types.CodeAction
            )
            for item in raw or []
        ]


async def wait_until(condition: Callable[[], object], within: float = 10.0) -> None:
    """Poll ``condition`` (for notifications and server-to-client requests that arrive on their own)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while not condition():
        if loop.time() > deadline:
            raise AssertionError("condition never became true")
        await asyncio.sleep(0.02)


async def start(client: LanguageClient, preset: str, params: types.InitializeParams) -> Session:
    """Initialize ``client`` the way the preset's editor would (it accepts registrations)."""
    session_ref: list[Session] = []

    @client.feature(types.CLIENT_REGISTER_CAPABILITY)
    def register(params: types.RegistrationParams) -> None:
        session_ref[0].registrations.extend(params.registrations)

    # The presets declare refresh support: a server following its root asks for these on its own.
    @client.feature(types.WORKSPACE_INLAY_HINT_REFRESH)
    def inlay_refresh(params: None) -> None:
        session_ref[0].refreshes.append(("inlay", time.monotonic()))

    @client.feature(types.WORKSPACE_CODE_LENS_REFRESH)
    def lens_refresh(params: None) -> None:
        session_ref[0].refreshes.append(("lens", time.monotonic()))

    @client.feature("dshSessionReference/contentChanged")
    def content_changed(*args: Any) -> None:  # pygls passes the client first for this one
        session_ref[0].contents.append(list(args[-1].uris))

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        session_ref[0].edits.append(params.edit)
        return types.ApplyWorkspaceEditResult(applied=True)

    result_future = client.initialize_session(params)
    session = Session(client, preset, types.InitializeResult(capabilities=types.ServerCapabilities()))
    session_ref.append(session)
    session.result = await result_future
    return session


def configure(s: Session, **settings: Any) -> None:
    """Change the ``dshSessionReference`` settings as a client does, by a configuration push."""
    s.client.workspace_did_change_configuration(
        types.DidChangeConfigurationParams(settings={"dshSessionReference": settings})
    )


@contextlib.asynccontextmanager
async def serving(
    client: LanguageClient, preset: str, params: types.InitializeParams, store: Path | None = None
) -> AsyncIterator[Session]:
    """A module's server for its tests: started as ``preset`` would, its session (and the store it
    serves) kept on the client for the shared ``s`` and ``store`` fixtures, shut down after."""
    session = await start(client, preset, params)
    client.session = session  # type: ignore[attr-defined]
    client.store = store  # type: ignore[attr-defined]
    yield session
    await client.shutdown_session()
