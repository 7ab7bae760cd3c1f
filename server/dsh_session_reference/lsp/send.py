"""``dshSessionReference.send``: the prompt sent to a running dsh web, as its composer would send
it, after the same check the diagnostics make.

The address is the user's, never a project's: the command's own ``dshWebUrl`` argument (the VS
Code extension passes its user-level setting; the Neovim and Emacs snippets, the user's own
configuration, may name one), else ``$DSH_WEB_URL`` (dsh web sets it in the sessions it runs), else
``http://127.0.0.1:3080``. No settings path carries it: ``workspace/configuration`` and
``didChangeConfiguration`` are filled from a project's files by most editors, and some (Zed's
``.zed/settings.json``, Helix's ``.helix/languages.toml``) fill ``initializationOptions`` from them
too; a project that chose the address would receive the user's prompt. Only loopback is accepted
(:func:`..dsh_web.web_host`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any, ClassVar, Final

from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.uris import to_fs_path

from ..analysis import analyze
from ..display import display_label
from ..jsjson import js_byte_length
from ..uri import composer_text
from .commands import target_json, uri_argument
from .contract import Command, Feature, Services
from .documents import text_of
from .preview import build_preview

LOG = logging.getLogger(__name__)

SEND_COMMAND: Final = "dshSessionReference.send"
URL_KEY: Final = "dshWebUrl"


class NotSent(JsonRpcException):
    """Why the prompt was not sent, as LSP's ``RequestFailed`` with ``data.reason``: ``address``,
    ``empty``, ``errors``, ``no-folder``, ``unreachable``, ``no-answer`` or ``dsh``."""

    def __init__(self, reason: str, message: str, **data: Any) -> None:
        data = {"reason": reason, **data}
        super().__init__(f"Not sent: {message}", types.LSPErrorCodes.RequestFailed, data)


def _arguments(args: Sequence[Any]) -> tuple[str, dict[str, Any]]:
    shape = "documentUri, {dshWebUrl?, clientTimeZone?, notify?}"
    uri = uri_argument(args, SEND_COMMAND, shape)
    options = args[1] if len(args) > 1 and args[1] is not None else {}
    if not isinstance(options, dict) or any(
        options.get(key) is not None and not isinstance(options[key], kind)
        for key, kind in ((URL_KEY, str), ("clientTimeZone", str), ("notify", bool))
    ):
        raise JsonRpcInvalidParams(f"{SEND_COMMAND} expects [{shape}]")
    return uri, options


def web_url(given: str | None) -> str:
    """The address to send to: the command's argument, else the environment dsh web sets, else
    the default; an empty string counts as not given."""
    from ..dsh_web import DEFAULT_URL, URL_ENV  # imported on a send, not at the server's start

    return given or os.environ.get(URL_ENV) or DEFAULT_URL


def _new_session_folder(ls: Services, uri: str) -> str | None:
    """Where a new session is made: the document's workspace folder, else its own folder."""
    folder = ls.folder_path(uri)
    if folder is None and uri.startswith("file:"):
        path = to_fs_path(uri)
        folder = os.path.dirname(path) if path else None
    return folder


async def _send_command(ls: Services, *args: Any) -> dict[str, Any]:
    # Only a send needs dsh web's API and the HTTP client (http.client, email...): the server's
    # start, which every editor waits for, does not import them.
    from ..dsh_web import (
        CREATE,
        PROMPT,
        NotAHost,
        WebError,
        create_payload,
        created_session,
        prompt_payload,
        web_host,
    )
    from .dsh_web_client import NoAnswer, Unreachable, call

    uri, options = _arguments(args)
    with ls.tracked_command():
        try:
            host = web_host(web_url(options.get(URL_KEY)))
        except NotAHost as error:
            raise NotSent("address", str(error)) from None
        text = await text_of(ls.documents, uri)
        if text is None:
            raise JsonRpcInvalidParams(f"{SEND_COMMAND}: {uri} is not open and is no file")
        sent = composer_text(text)
        if not sent:
            raise NotSent("empty", "the prompt is empty (dsh's composer sends nothing for it)")
        # The text dsh will judge is the trimmed one: check that, as prepare will.
        agent = await ls.agent_for(uri)
        analysis = await analyze(sent, ls.engine.resolver, agent)
        target = await target_json(ls) if agent.id is not None else None
        label = None if target is None else target["label"]
        preview = await build_preview(uri, analysis, ls.engine.resolver, agent, label)
        if not preview.ok:
            count = analysis.error_count
            raise NotSent(
                "errors",
                f"dsh would refuse this prompt ({count} error{'s' if count != 1 else ''} in it; "
                f"{preview.summary}). Fix the mentions flagged in the document.",
                errors=count,
            )
        session_id: str | None = agent.id
        created = session_id is None
        try:
            if session_id is None:
                folder = _new_session_folder(ls, uri)
                if folder is None:
                    raise NotSent(
                        "no-folder",
                        "no target session and no folder to start a new one in; set "
                        "dshSessionReference.targetSessionId, or open the prompt in a workspace folder",
                    )
                session_id = created_session(await call(host, CREATE, create_payload(folder)))
                where = f"a new session ({display_label(session_id)}) in {display_label(folder)}"
            else:
                titled = label is not None and label != display_label(session_id)
                where = f"{label} ({display_label(session_id)})" if titled else display_label(session_id)
            await call(host, PROMPT, prompt_payload(session_id, sent, options.get("clientTimeZone")))
        except (Unreachable, NoAnswer, WebError) as error:
            raise _not_sent(host.url, error, agent.id, None if agent.id else session_id) from None
    # What was sent first (a collapsed notification shows the start), then where it went.
    message = f"Sent to dsh: {preview.summary}. Session: {where}, at {host.url}."
    LOG.info("%s", message)
    if options.get("notify", True):
        shown = types.ShowMessageParams(type=types.MessageType.Info, message=message)
        ls.window_show_message(shown)
    return {
        "sent": True,
        "dshWebUrl": host.url,
        "sessionId": session_id,
        "created": created,
        "where": where,
        "summary": preview.summary,
        "bytes": js_byte_length(sent),
        "message": message,
    }


def _not_sent(url: str, error: Exception, target: str | None, created: str | None) -> NotSent:
    """The failure of a call to dsh web, in words; ``created``: the new session dsh web made
    before the prompt failed (it stays, empty, in dsh)."""
    from ..dsh_web import WebError  # as in _send_command: only a send imports the client
    from .dsh_web_client import NoAnswer, Unreachable

    after = "" if created is None else f" (after it made a new session, {display_label(created)})"
    if isinstance(error, Unreachable):
        return NotSent("unreachable", str(error), dshWebUrl=url)
    if isinstance(error, NoAnswer):
        return NotSent("no-answer", f"{error}{after}; look in dsh before sending again", dshWebUrl=url)
    assert isinstance(error, WebError)
    # dsh's words, shown as any text from outside is: controls escaped, bounded.
    code, words = display_label(error.code), display_label(error.message, 1000)
    said = f"dsh web at {url} answered {code}: {words}{after}"
    if error.code == "session-not-found" and target is not None:
        said += (
            f". It does not know the target session {display_label(target)!r}: is it another dsh's, "
            "or another sessions root's? Clear dshSessionReference.targetSessionId to send to a new session."
        )
    return NotSent("dsh", said, dshWebUrl=url, code=error.code)


class Send(Feature):
    """The send command; owns nothing."""

    uses: ClassVar = frozenset(
        {"tracked_command", "documents", "agent_for", "engine", "folder_path", "window_show_message"}
    )
    reads: ClassVar = "a fresh analysis of the trimmed text, as prepare reads it (not the document's)"

    def commands(self) -> Mapping[str, Command]:
        return {SEND_COMMAND: partial(_send_command, self.ls)}
