"""The LSP features: one handler per method, each translating between LSP and the core.

Handlers are plain functions of the server (:class:`.server.DshLanguageServer`) and the request's
params, registered by :func:`create_server` (with the commands of :mod:`.commands`); what they
compute lives in the feature modules (:mod:`.completion`, :mod:`.diagnostics`, :mod:`.hover`,
:mod:`.actions`, :mod:`.preview`, :mod:`.sessions`).
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, Final

from lsprotocol import types
from pygls.capabilities import ServerCapabilitiesBuilder
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from ..assembly import dsh_profile_budgets as profile_budgets
from ..cancellation import AbortSignal
from ..errors import CANCELLED, SessionReferenceError
from ..model import MAX_TITLE_CHARS
from ..resolver import Candidate
from . import commands, send
from .actions import PREVIEW_COMMAND, code_actions
from .commands import preview_of, root_errors, transcript_of
from .completion import completion_items, find_trigger, item_data, listing_item
from .hover import documentation, hover_text, read_session_facts, session_summary
from .inline import code_lenses, inlay_hints
from .positions import encoding_of
from .preview import (
    PREVIEW_SCHEME,
    document_of_preview,
    document_summary,
    is_model_text,
)
from .progress import CLIENT_REQUEST_TIMEOUT, follow_background
from .server import NAME, DshLanguageServer, cancel_grace
from .sessions import (
    TOP,
    TRANSCRIPT_SCHEME,
    definition,
    document_links,
    link_to_resolve,
    resolve_link,
    session_of_transcript,
    workspace_symbols,
)

LOG = logging.getLogger(__name__)

MAX_SYMBOL_QUERY: Final = MAX_TITLE_CHARS
"""A longer ``workspace/symbol`` query is answered at once with nothing: titles are kept to this
length and ids are file names, so only a cwd that long could match, and a 2 MB query was matched
against every session's fields."""
COMPLETION_PATIENCE: Final = 0.1
"""Seconds a completion waits for the session list before it answers with a single "Listing dsh
sessions…" row (:func:`.completion.listing_item`): a fresh server over a big root lists for a
second or more, and a popup that stays shut meanwhile reads as nothing happening. The listing goes
on; the next ask waits on it rather than start another. Warm answers take a few milliseconds."""
DIAGNOSTIC_DELAY: Final = 0.12
"""Seconds of quiet after a change before pushed diagnostics are recomputed."""


def _now_ms() -> int:
    return int(time.time() * 1000)


# --- handlers ------------------------------------------------------------------------------------


def _initialize(ls: DshLanguageServer, params: types.InitializeParams) -> None:
    ls.live.loop = asyncio.get_running_loop()
    ls.idle_gc.start(asyncio.get_running_loop())
    ls.encoding = encoding_of(ServerCapabilitiesBuilder.choose_position_encoding(params.capabilities))
    ls.apply(params.initialization_options)
    # Before any request is served (two small bounded reads): the first preview is at dsh's budgets.
    ls.adopt_profile(profile_budgets(ls.settings.profile))


async def _initialized(ls: DshLanguageServer, params: types.InitializedParams) -> None:
    if ls.capability("workspace.text_document_content.dynamic_registration", False):
        registration = types.Registration(
            id=str(uuid.uuid4()),
            method=types.WORKSPACE_TEXT_DOCUMENT_CONTENT,
            register_options=types.TextDocumentContentRegistrationOptions(
                schemes=[PREVIEW_SCHEME, TRANSCRIPT_SCHEME]
            ),
        )
        try:
            await asyncio.wait_for(
                ls.client_register_capability_async(types.RegistrationParams(registrations=[registration])),
                CLIENT_REQUEST_TIMEOUT,
            )
            ls.content_registered = True
        except (JsonRpcException, TimeoutError) as error:
            LOG.warning("could not register %s: %s", types.WORKSPACE_TEXT_DOCUMENT_CONTENT, error)
    if await ls.reconfigure():
        await ls.settings_changed()
    else:
        ls.report_root()
        ls.spawn(ls.warm_up())
    ls.spawn(follow_background(ls))


async def _did_change_configuration(
    ls: DshLanguageServer, params: types.DidChangeConfigurationParams
) -> None:
    if await ls.reconfigure(params.settings):
        await ls.settings_changed()


def _did_open(ls: DshLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.documents.open(params.text_document)
    if not ls.pull_diagnostics:
        ls.schedule_publish(params.text_document.uri, 0)


def _did_change(ls: DshLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.documents.change(uri, params.text_document.version, params.content_changes, ls.encoding)
    ls.drop_analysis(uri)
    if not ls.pull_diagnostics:
        ls.schedule_publish(uri, DIAGNOSTIC_DELAY)


def _did_close(ls: DshLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
    uri = params.text_document.uri
    ls.closed(uri)
    if not ls.pull_diagnostics:
        ls.publish(uri, [])


async def _diagnostic(
    ls: DshLanguageServer, params: types.DocumentDiagnosticParams
) -> types.RelatedFullDocumentDiagnosticReport:
    result = await ls.analysis(params.text_document.uri)
    items = [] if result is None else ls.diagnostics_for(result, push=False)
    return types.RelatedFullDocumentDiagnosticReport(items=items)


async def _completion(ls: DshLanguageServer, params: types.CompletionParams) -> types.CompletionList:
    uri = params.text_document.uri
    document = ls.documents.get(uri)
    empty = types.CompletionList(is_incomplete=False, items=[])
    if document is None:
        return empty
    cursor = document.index.offset_at(params.position, ls.encoding)
    continuing = (
        params.context is not None
        and params.context.trigger_kind == types.CompletionTriggerKind.TriggerForIncompleteCompletions
    )
    trigger = find_trigger(document.index, cursor, continuing=continuing)
    if trigger is None:
        return empty
    edit_range = document.index.range_of(trigger.at, trigger.cursor, ls.encoding)
    typed = document.index[trigger.at : trigger.cursor]

    def listing() -> types.CompletionList:
        ls.listing_awaited.set()
        row = listing_item(edit_range, typed, ls.store.walked_sessions)
        return types.CompletionList(is_incomplete=True, items=[row])

    # An earlier answer's listing still running (a cold root): wait on it, not beside it.
    pending = ls.pending_listing
    if pending is not None and not pending.done():
        done, _ = await asyncio.wait({pending}, timeout=COMPLETION_PATIENCE)
        if not done:
            return listing()
    signal = ls.begin_completion(uri)
    running = asyncio.ensure_future(_candidates(ls, uri, trigger.query, signal))
    done, _ = await asyncio.wait({running}, timeout=COMPLETION_PATIENCE)
    if not done:
        ls.pending_listing = running
        return listing()
    items = completion_items(
        running.result() or [],  # none when it failed or was superseded
        edit_range,
        now_ms=_now_ms(),
        label_details=bool(ls.capability("text_document.completion.completion_item.label_details_support")),
        typed=typed,
        filter_text=bool(ls.capability("text_document.completion.completion_item.insert_replace_support")),
        row_columns=ls.completion_columns(),
    )
    return types.CompletionList(is_incomplete=True, items=items)


async def _candidates(
    ls: DshLanguageServer, uri: str, query: str, signal: AbortSignal
) -> list[Candidate] | None:
    """``listCandidates`` for a completion in ``uri``; ``None`` when it failed (said in the log) or
    a newer completion superseded it. Never raises: its answer may be nobody's (see
    :data:`COMPLETION_PATIENCE`)."""
    try:
        agent = await ls.agent_for(uri)
        return await ls.engine.resolver.list_candidates(agent, query, signal=signal)
    except Exception as error:  # an unreadable root: no rows, and say why in the log
        if not (isinstance(error, SessionReferenceError) and error.code == CANCELLED):
            ls.window_log_message(
                types.LogMessageParams(type=types.MessageType.Warning, message=f"completion: {error}")
            )
        return None
    finally:
        ls.end_completion(uri, signal)


async def _completion_resolve(ls: DshLanguageServer, item: types.CompletionItem) -> types.CompletionItem:
    data = item_data(item)
    if data is None:
        return item
    facts = await read_session_facts(ls.engine.resolver, *data)
    markdown = ls.markdown("text_document.completion.completion_item.documentation_format")
    summary = session_summary(facts, markdown=markdown, now_ms=_now_ms(), id_last=True)
    item.documentation = documentation(summary, markdown)
    return item


async def _hover(ls: DshLanguageServer, params: types.HoverParams) -> types.Hover | None:
    result = await ls.analysis(params.text_document.uri)
    if result is None:
        return None
    offset = result.index.offset_at(params.position, ls.encoding)
    markdown = ls.markdown("text_document.hover.content_format")
    found = hover_text(result.analysis, offset, markdown=markdown, now_ms=_now_ms())
    if found is None:
        return None
    text, span = found
    kind = types.MarkupKind.Markdown if markdown else types.MarkupKind.PlainText
    return types.Hover(
        contents=types.MarkupContent(kind=kind, value=text),
        range=result.index.range_of(span.start, span.end, ls.encoding),
    )


async def _code_action(
    ls: DshLanguageServer, params: types.CodeActionParams
) -> list[types.CodeAction | types.Command] | None:
    result = await ls.analysis(params.text_document.uri)
    if result is None:
        return None
    return code_actions(
        result.analysis,
        result.index,
        ls.encoding,
        params,
        version=result.version,
        literal_support=ls.capability("text_document.code_action.code_action_literal_support") is not None,
        document_changes=bool(ls.capability("workspace.workspace_edit.document_changes", False)),
        suggest_command=ls.client_command("triggerSuggestCommand"),
    )


async def _text_document_content(
    ls: DshLanguageServer, params: types.TextDocumentContentParams
) -> types.TextDocumentContentResult:
    if session_of_transcript(params.uri) is not None:
        return types.TextDocumentContentResult(text=(await transcript_of(ls, params.uri))[1].text)
    document_uri = document_of_preview(params.uri)
    if document_uri is not None:
        preview = await preview_of(ls, document_uri, model_text=is_model_text(params.uri))
        if preview is not None:
            return types.TextDocumentContentResult(text=preview.text)
    stored = ls.previews.text(params.uri)
    if stored is not None:
        return types.TextDocumentContentResult(text=stored)
    raise JsonRpcInvalidParams(f"no preview for {params.uri}")


async def _definition(ls: DshLanguageServer, params: types.DefinitionParams) -> types.Location | None:
    result = await ls.analysis(params.text_document.uri)
    if result is None:
        return None
    uri = definition(result.analysis, result.index.offset_at(params.position, ls.encoding))
    return None if uri is None else types.Location(uri=uri, range=TOP)


async def _document_link(ls: DshLanguageServer, params: types.DocumentLinkParams) -> list[types.DocumentLink]:
    uri = params.text_document.uri
    result = await ls.analysis(uri)
    return [] if result is None else document_links(result.analysis, result.index, ls.encoding, uri)


async def _document_link_resolve(ls: DshLanguageServer, link: types.DocumentLink) -> types.DocumentLink:
    wanted = link_to_resolve(link)
    if wanted is None:
        return link
    uri, session_id = wanted
    result = await ls.analysis(uri)
    return resolve_link(None if result is None else result.analysis, session_id, link)


async def _workspace_symbol(
    ls: DshLanguageServer, params: types.WorkspaceSymbolParams
) -> list[types.SymbolInformation]:
    if len(params.query) > MAX_SYMBOL_QUERY:
        return []
    await cancel_grace()
    agent = await ls.agent_for(None)
    candidates = await ls.engine.resolver.list_candidates(agent, params.query)
    return workspace_symbols(candidates, _now_ms())


async def _inlay_hint(ls: DshLanguageServer, params: types.InlayHintParams) -> list[types.InlayHint]:
    if not ls.settings.inlay_hints:
        return []
    result = await ls.analysis(params.text_document.uri)
    if result is None or not result.current:
        return []
    start = result.index.offset_at(params.range.start, ls.encoding)
    end = result.index.offset_at(params.range.end, ls.encoding)
    return inlay_hints(result.analysis, result.index, ls.encoding, start, end)


async def _code_lens(ls: DshLanguageServer, params: types.CodeLensParams) -> list[types.CodeLens]:
    if not ls.settings.code_lens:
        return []
    uri = params.text_document.uri
    result = await ls.analysis(uri)
    if result is None or not result.current:
        return []
    summary = await asyncio.to_thread(document_summary, result.analysis)
    preview = types.Command(
        "Preview", ls.client_command("previewCommand") or PREVIEW_COMMAND, arguments=[uri]
    )
    return code_lenses(result.analysis, result.index, ls.encoding, summary, preview)


def _shutdown(ls: DshLanguageServer, params: None) -> None:
    ls.idle_gc.stop()
    ls.stop_everything()


_REQUESTS: Final = frozenset(
    {
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.TEXT_DOCUMENT_COMPLETION,
        types.COMPLETION_ITEM_RESOLVE,
        types.TEXT_DOCUMENT_HOVER,
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.WORKSPACE_TEXT_DOCUMENT_CONTENT,
        types.TEXT_DOCUMENT_DEFINITION,
        types.TEXT_DOCUMENT_DOCUMENT_LINK,
        types.DOCUMENT_LINK_RESOLVE,
        types.WORKSPACE_SYMBOL,
        types.TEXT_DOCUMENT_INLAY_HINT,
        types.TEXT_DOCUMENT_CODE_LENS,
    }
)
"""The requests that read the store (``initialize`` and ``shutdown`` do not)."""


def create_server(sessions: str | None = None) -> DshLanguageServer:
    """A server with every feature registered (not started)."""
    server = DshLanguageServer(sessions)

    def feature(method: str, options: Any = None) -> Callable[[Any], Any]:
        """Register a handler; a request's is answered with the root's problem when it fails on
        a root that is no directory (:func:`.commands.root_errors`)."""

        def register(handler: Any) -> Any:
            if method in _REQUESTS:
                handler = root_errors(handler)
            return server.feature(method, options)(handler)

        return register

    feature(types.INITIALIZE)(_initialize)
    feature(types.INITIALIZED)(_initialized)
    feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(_did_change_configuration)
    feature(types.TEXT_DOCUMENT_DID_OPEN)(_did_open)
    feature(types.TEXT_DOCUMENT_DID_CHANGE)(_did_change)
    feature(types.TEXT_DOCUMENT_DID_CLOSE)(_did_close)
    feature(
        types.TEXT_DOCUMENT_DIAGNOSTIC,
        types.DiagnosticOptions(identifier=NAME, inter_file_dependencies=False, workspace_diagnostics=False),
    )(_diagnostic)
    feature(
        types.TEXT_DOCUMENT_COMPLETION,
        types.CompletionOptions(trigger_characters=["@"], resolve_provider=True),
    )(_completion)
    feature(types.COMPLETION_ITEM_RESOLVE)(_completion_resolve)
    feature(types.TEXT_DOCUMENT_HOVER)(_hover)
    feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.Source],
        ),
    )(_code_action)
    feature(types.WORKSPACE_TEXT_DOCUMENT_CONTENT)(_text_document_content)
    feature(types.TEXT_DOCUMENT_DEFINITION)(_definition)
    feature(types.TEXT_DOCUMENT_DOCUMENT_LINK, types.DocumentLinkOptions(resolve_provider=True))(
        _document_link
    )
    feature(types.DOCUMENT_LINK_RESOLVE)(_document_link_resolve)
    feature(types.WORKSPACE_SYMBOL)(_workspace_symbol)
    feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))(_inlay_hint)
    feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))(_code_lens)
    feature(types.SHUTDOWN)(_shutdown)
    commands.register(server)
    send.register(server)
    return server
