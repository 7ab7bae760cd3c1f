"""The server's commands (``workspace/executeCommand``): the preview and the model-facing text,
candidates, the document summary, transcripts and mention insertion, each translating between
its JSON arguments and the core.

The preview and transcript documents are served by ``workspace/textDocumentContent`` too
(:mod:`.features.content`), through :func:`preview_of` and :func:`transcript_of`.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import asdict
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, Final

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from ..analysis import analyze
from ..assembly import target_session
from ..display import display_label
from ..uri import SESSION_REFERENCE_SCHEME, scan_session_references
from .actions import PREVIEW_COMMAND, workspace_edit
from .completion import shown
from .contract import Command, Feature, Services, root_errors
from .documents import text_of
from .preview import (
    Preview,
    build_model_text,
    build_preview,
    document_of_preview,
    document_summary,
    referenced_sessions,
)
from .progress import CLIENT_REQUEST_TIMEOUT
from .sessions import (
    TRANSCRIPT_SCHEME,
    candidate_row,
    listed_candidate,
    transcript_target,
    transcript_uri,
)

if TYPE_CHECKING:
    from ..transcript import Transcript

LOG = logging.getLogger(__name__)

MODEL_TEXT_COMMAND: Final = "dshSessionReference.modelText"
CANDIDATES_COMMAND: Final = "dshSessionReference.candidates"
SUMMARY_COMMAND: Final = "dshSessionReference.documentSummary"
TRANSCRIPT_COMMAND: Final = "dshSessionReference.transcript"
INSERT_MENTION_COMMAND: Final = "dshSessionReference.insertMention"


def uri_argument(args: Sequence[Any], command: str, shape: str = "documentUri: string") -> str:
    """A command's first argument, a string, or ``InvalidParams`` naming the arguments' ``shape``."""
    if not args or not isinstance(args[0], str):
        raise JsonRpcInvalidParams(f"{command} expects [{shape}]")
    return args[0]


def _shown_preview(command: str, *, model_text: bool) -> Callable[..., Awaitable[dict[str, Any]]]:
    """The handler of ``command``: either preview document of its argument's document, shown where
    the client shows documents; a preview (not the model text, whose summary says nothing) is
    summarised where it cannot be."""

    async def handler(ls: Services, *args: Any) -> dict[str, Any]:
        asked = uri_argument(args, command)
        # A preview's own URI stands for its prompt (a client's button on the preview passes it).
        uri = document_of_preview(asked) or asked
        with ls.tracked_command():
            preview = await preview_of(ls, uri, model_text=model_text)
            if preview is None:
                raise JsonRpcInvalidParams(f"{command}: {uri} is not open and is no file")
            if ls.content_registered and ls.capability("window.show_document.support", False):
                ls.spawn(_show_document(ls, preview))
            elif not model_text:
                _say_summary(ls, preview)
            return asdict(preview)

    return handler


async def _show_document(ls: Services, preview: Preview) -> None:
    params = types.ShowDocumentParams(uri=preview.uri, take_focus=True)
    try:
        result = await asyncio.wait_for(ls.window_show_document_async(params), CLIENT_REQUEST_TIMEOUT)
    except (JsonRpcException, TimeoutError):
        result = None
    if result is None or not result.success:
        _say_summary(ls, preview)


def _say_summary(ls: Services, preview: Preview) -> None:
    """The preview's one-line summary as a message, where the preview itself cannot be shown."""
    kind = types.MessageType.Info if preview.ok else types.MessageType.Error
    ls.window_show_message(types.ShowMessageParams(type=kind, message=f"dsh: {preview.summary}"))


async def _candidates_command(ls: Services, *args: Any) -> list[dict[str, Any]]:
    options = args[0] if args and args[0] is not None else {}
    if not isinstance(options, dict):
        raise JsonRpcInvalidParams(f"{CANDIDATES_COMMAND} expects [{{documentUri?: string, query?: string}}]")
    uri = options.get("documentUri")
    query = options.get("query", "")
    if (uri is not None and not isinstance(uri, str)) or not isinstance(query, str):
        raise JsonRpcInvalidParams(f"{CANDIDATES_COMMAND}: documentUri and query must be strings")
    with ls.tracked_command():
        await ls.cancel_grace()
        agent = await ls.agent_for(uri)
        candidates = await ls.engine.resolver.list_candidates(agent, query)
        return [candidate_row(candidate) for candidate in candidates]


async def _summary_command(ls: Services, *args: Any) -> dict[str, Any]:
    uri = uri_argument(args, SUMMARY_COMMAND)
    with ls.tracked_command():
        result = await ls.analysis(uri)
        if result is None:
            raise JsonRpcInvalidParams(f"{SUMMARY_COMMAND}: {uri} is not open")
        summary = await asyncio.to_thread(document_summary, result.analysis)
        return {
            **summary,
            "target": await target_json(ls),
            "maxReferences": result.analysis.max_references,
            "references": referenced_sessions(result.analysis),
        }


async def target_json(ls: Services) -> dict[str, Any] | None:
    """``documentSummary``'s ``target``: ``{sessionId, label, found}``, ``None`` without a target.

    The label is what ``list_candidates`` shows for a session
    (:func:`..candidates.label_for`: its current title, else its id), as a row shows it
    (escaped, at most :data:`~..display.SHOWN_CHARS` characters). A
    target the store does not list (a typo in the setting, another root,
    an unreadable root) has ``found: false`` and its id as the label, so
    the status bar can flag it. ``sessionId`` is the configured id, which
    a client matches to its own setting.
    """
    target = target_session(ls.settings.target_session_id)
    if target is None:
        return None
    try:
        candidate = await listed_candidate(ls.engine.store, target)
    except Exception as error:  # an unreadable root: the status bar still names the target
        LOG.info("reading the target session's title failed: %s", error)
        candidate = None
    label = target if candidate is None else display_label(candidate.label)
    return {"sessionId": target, "label": label, "found": candidate is not None}


def _no_session(session_id: str) -> JsonRpcInvalidParams:
    return JsonRpcInvalidParams(f"the sessions root lists no session {display_label(session_id)!r}")


async def transcript_of(ls: Services, asked: str) -> tuple[str, Transcript]:
    """The transcript a ``dsh-transcript:`` URI, a mention's ``dsh-session:`` URI (a Markdown link
    followed in the editor) or a bare session id names, and its URI, remembered as served (the
    URI asked for) so that a change to its log tells the client. A URI that is no session's is
    ``InvalidParams`` saying why, as its diagnostic does."""
    # The transcript reader when a transcript is asked for, not at the server's start.
    from ..transcript import NoSuchSession, read_transcript

    target = transcript_target(asked)
    if target is None and asked.startswith(SESSION_REFERENCE_SCHEME):
        spans = scan_session_references(asked)
        whole = spans[0] if len(spans) == 1 and (spans[0].start, spans[0].end) == (0, len(asked)) else None
        if whole is None or whole.session_id is None:
            if whole is None:
                reason = "it is not one URI"
            elif whole.recovered_id == "":
                reason = "it decodes to an empty session id, which no session has"
            else:
                reason = whole.reason
            raise JsonRpcInvalidParams(f"{display_label(asked)} is not a session URI: {reason}")
        asked = whole.session_id  # a bare id from here on
    session_id, label = (asked, None) if target is None else target
    try:
        transcript = await read_transcript(ls.engine.resolver, session_id, label)
    except NoSuchSession:
        raise _no_session(session_id) from None
    uri = asked if target is not None else transcript_uri(session_id, transcript.title)
    ls.live.served(uri, transcript.session_id)
    return uri, transcript


async def _transcript_command(ls: Services, *args: Any) -> dict[str, Any]:
    asked = uri_argument(args, TRANSCRIPT_COMMAND, f"sessionId or {TRANSCRIPT_SCHEME}: URI")
    with ls.tracked_command():
        uri, transcript = await transcript_of(ls, asked)
    return {
        "uri": uri,
        "text": transcript.text,
        "title": transcript.title,
        "sessionId": transcript.session_id,
    }


MAX_UINTEGER: Final = 2**31 - 1
"""LSP's ``uinteger``: a position beyond it is no position."""


def _insertion(args: Sequence[Any]) -> tuple[str, types.Position, str, str | None]:
    """``insertMention``'s argument: ``(document URI, position, session id, the session whose
    mentions it replaces)``."""
    shape = (
        f"{INSERT_MENTION_COMMAND} expects "
        "[{documentUri, position: {line, character}, sessionId, replace?: sessionId}]"
    )
    options = args[0] if args else None
    if not isinstance(options, dict):
        raise JsonRpcInvalidParams(shape)
    uri, position, session_id = options.get("documentUri"), options.get("position"), options.get("sessionId")
    replace = options.get("replace")
    if not (
        isinstance(uri, str)
        and isinstance(session_id, str)
        and isinstance(position, dict)
        and (replace is None or isinstance(replace, str))
    ):
        raise JsonRpcInvalidParams(shape)
    line, character = position.get("line"), position.get("character")
    if not (
        isinstance(line, int)
        and isinstance(character, int)
        and 0 <= line <= MAX_UINTEGER
        and 0 <= character <= MAX_UINTEGER
    ):
        raise JsonRpcInvalidParams(f"{shape}; line and character are integers 0..{MAX_UINTEGER}")
    return uri, types.Position(line=line, character=character), session_id, replace


async def _insert_mention_command(ls: Services, *args: Any) -> dict[str, Any]:
    uri, cursor, session_id, replace = _insertion(args)
    document = ls.documents.get(uri)
    if document is None:
        raise JsonRpcInvalidParams(f"{INSERT_MENTION_COMMAND}: {uri} is not open")
    with ls.tracked_command():
        candidate = await listed_candidate(ls.engine.store, session_id)
        if candidate is None:
            raise _no_session(session_id)
        version, ranges = document.version, [types.Range(start=cursor, end=cursor)]
        if replace is not None:
            # The picker's answer to a pick past maxReferences: that session's mentions become
            # mentions of the picked one, so the count of sessions stays where it was.
            result = await ls.analysis(uri)
            reference = None if result is None else result.analysis.reference_for(replace)
            if result is None or reference is None or not reference.spans:
                raise JsonRpcInvalidParams(
                    f"{INSERT_MENTION_COMMAND}: the document mentions no session {display_label(replace)!r}"
                )
            version = result.version
            ranges = [result.index.range_of(span.start, span.end, ls.encoding) for span in reference.spans]
        mention = shown(candidate).mention  # the text an ``@`` completion inserts
        edits = [types.TextEdit(range=where, new_text=mention) for where in ranges]
        document_changes = bool(ls.capability("workspace.workspace_edit.document_changes", False))
        edit = workspace_edit(uri, version, edits, document_changes=document_changes)
        try:
            applied = await asyncio.wait_for(
                ls.workspace_apply_edit_async(
                    types.ApplyWorkspaceEditParams(edit=edit, label="Insert mention")
                ),
                CLIENT_REQUEST_TIMEOUT,
            )
        except (JsonRpcException, TimeoutError) as error:
            raise JsonRpcInvalidParams(
                f"{INSERT_MENTION_COMMAND}: the editor did not apply it: {error}"
            ) from None
        reply: dict[str, Any] = {"mention": mention, "applied": applied.applied}
        if replace is not None:
            reply["replaced"] = len(ranges)
        return reply


async def preview_of(ls: Services, uri: str, *, model_text: bool = False) -> Preview | None:
    """The preview of a document (``model_text``: its exact model-facing text), open or a file on
    disk, kept for a client that asks for it again; ``None`` for one that is neither."""
    agent = await ls.agent_for(uri)
    if ls.documents.get(uri) is not None:
        result = await ls.analysis(uri)
        analysis = None if result is None else result.analysis
    else:
        text = await text_of(ls.documents, uri)
        analysis = None if text is None else await analyze(text, ls.engine.resolver, agent)
    if analysis is None:
        return None
    if model_text:
        preview = await build_model_text(uri, analysis, ls.engine.resolver, agent)
    else:
        target = await target_json(ls)
        label = None if target is None else target["label"]
        preview = await build_preview(uri, analysis, ls.engine.resolver, agent, label)
    ls.previews.keep(preview)
    return preview


class Commands(Feature):
    """The commands, each a function of the services and its arguments; owns nothing (a preview
    it makes is kept in ``previews``, a transcript it serves is followed by ``live``)."""

    uses: ClassVar = frozenset(
        {
            "tracked_command",
            "cancel_grace",
            "content_registered",
            "capability",
            "spawn",
            "window_show_document_async",
            "window_show_message",
            "agent_for",
            "engine",
            "analysis",
            "settings",
            "live",
            "documents",
            "encoding",
            "workspace_apply_edit_async",
            "previews",
        }
    )
    reads: ClassVar = (
        "the whole analysis (previews, the summary), and the spans of one session's mentions (insertMention)"
    )

    def commands(self) -> Mapping[str, Command]:
        """Each answered with the root's problem when it fails on a root that is no directory
        (:func:`.contract.root_errors`)."""
        return {
            name: root_errors(self.ls, partial(command, self.ls))
            for name, command in (
                (PREVIEW_COMMAND, _shown_preview(PREVIEW_COMMAND, model_text=False)),
                (MODEL_TEXT_COMMAND, _shown_preview(MODEL_TEXT_COMMAND, model_text=True)),
                (CANDIDATES_COMMAND, _candidates_command),
                (SUMMARY_COMMAND, _summary_command),
                (TRANSCRIPT_COMMAND, _transcript_command),
                (INSERT_MENTION_COMMAND, _insert_mention_command),
            )
        }
