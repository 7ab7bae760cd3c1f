"""dsh web's HTTP API as data: where a host may be, what its composer sends for a prompt, and what
its replies mean.

Read from dsh web 0.1.0-rc.8's own client (``@deepseek-ai/dsh-host-apiproxy``'s fetch client,
``dsh-client-runtime``'s session and ``dsh-client-ui-conversation``'s composer): every call is
``POST /api/<method>`` with a JSON ``client-request`` envelope; the composer sends
``draft.trim()`` (:func:`.uri.composer_text`) as one text block with ``mode: "queue"`` and the
browser's time zone, into a session ``session.create`` made in a workspace folder. The exchange
itself is the language server's edge (``lsp/dsh_web_client.py``); this module only builds and
reads the data.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

from .display import shortened

DEFAULT_URL: Final = "http://127.0.0.1:3080"
"""Where ``dsh web`` listens unless told otherwise."""

URL_ENV: Final = "DSH_WEB_URL"
"""dsh web sets it in the sessions it runs (as it sets ``$DSH_SESSION_ID``): its own address."""

START_HINT: Final = "start it with `dsh web` (or `dsh --profile web --port PORT`)"


class NotAHost(ValueError):
    """An address the editor will not send a prompt to, with the reason in words."""


@dataclass(frozen=True)
class WebHost:
    """A dsh web host on this machine: what to connect to and the ``Host`` header its ``/api``
    fence checks (loopback, or a request is refused with 403)."""

    host: str
    port: int

    @property
    def authority(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    @property
    def url(self) -> str:
        """The address as messages name it, with its port always written."""
        return f"http://{self.authority}"


_IPV4: Final = re.compile(r"\d{1,3}(\.\d{1,3}){3}")


def is_loopback_host(hostname: str) -> bool:
    """dsh's own ``isLoopbackHostname``: ``localhost``, ``::1``, or a dotted IPv4 address in
    127/8. (``localhost`` is resolved when connecting; the peer is checked again then.)"""
    if hostname in ("localhost", "::1"):
        return True
    return (
        bool(_IPV4.fullmatch(hostname))
        and hostname.startswith("127.")
        and all(int(part) <= 255 for part in hostname.split("."))
    )


def is_loopback_address(address: str) -> bool:
    """Whether a connected peer's IP address is this machine's loopback."""
    try:
        return ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
    except ValueError:
        return False


def web_host(url: str) -> WebHost:
    """The host ``url`` (``http://127.0.0.1:3080``) names, or :class:`NotAHost` saying why not.

    Only plain ``http`` on loopback: dsh web serves nothing else (it refuses ``--host 0.0.0.0``,
    and its ``/api`` answers 403 to any other ``Host``), and the preview reads this machine's
    sessions root, so a dsh elsewhere would read other sessions than the preview shows. A dsh
    on another machine is reached through a port forward (``ssh -L 3080:127.0.0.1:3080 host``).
    """
    shown = shortened(url, 200)  # the user's argument, of any length
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as error:  # its words may quote the whole port ("Port could not be cast...")
        raise NotAHost(f"{shown!r} is no URL: {shortened(str(error), 200)}") from None
    if parts.scheme != "http" or not parts.hostname:
        raise NotAHost(f"{shown!r} is not an http:// URL such as {DEFAULT_URL}")
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise NotAHost(f"{shown!r} holds more than a host and port, such as {DEFAULT_URL}")
    if parts.path not in ("", "/"):
        raise NotAHost(f"{shown!r} has a path; dsh web's API is at its root, such as {DEFAULT_URL}")
    hostname = parts.hostname
    if not is_loopback_host(hostname):
        raise NotAHost(
            f"{shown!r} is not on this machine: the prompt is sent only to a dsh web on loopback "
            "(127.0.0.1, ::1, localhost), where it reads the sessions the preview read; reach "
            "another machine's through a port forward (ssh -L 3080:127.0.0.1:3080 HOST)"
        )
    port = 80 if port is None else port
    if port == 0:
        raise NotAHost(f"{shown!r} has port 0, which nothing listens on")
    return WebHost(hostname, port)


def client_request(method: str, payload: dict[str, Any], rpc_id: str) -> dict[str, Any]:
    """The envelope dsh's fetch client posts to ``/api/<method>``."""
    return {"type": "client-request", "rpcId": rpc_id, "method": method, "payload": payload}


CREATE: Final = "session.create"
PROMPT: Final = "session.prompt"

_TIME_ZONE: Final = re.compile(r"UTC|[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)+")
"""dsh accepts ``UTC`` or an IANA ``Area/Location`` name (anything else fails the prompt)."""


def create_payload(cwd: str) -> dict[str, Any]:
    """``session.create``: a new session in a folder, as the composer makes one for a workspace."""
    return {"cwd": cwd}


def prompt_payload(session_id: str, text: str, time_zone: str | None = None) -> dict[str, Any]:
    """``session.prompt`` as the composer sends a typed message: one text block, queued after a
    running turn, with the client's time zone when it is one dsh accepts."""
    content = [{"type": "text", "text": text}]
    payload: dict[str, Any] = {"sessionId": session_id, "mode": "queue", "content": content}
    if time_zone is not None and len(time_zone) <= 64 and _TIME_ZONE.fullmatch(time_zone):
        payload["clientTimeZone"] = time_zone
    return payload


class WebError(Exception):
    """dsh web answered, but not with success: its error code and message (``rpc`` codes such as
    ``session-not-found``), or what was wrong with the answer."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message


def reply_value(reply: object, rpc_id: str) -> dict[str, Any]:
    """The value of a ``server-response`` to the request ``rpc_id``, or :class:`WebError`."""
    if not isinstance(reply, dict) or reply.get("type") != "server-response":
        raise WebError("bad-reply", "the answer is no dsh server-response")
    if reply.get("rpcId") != rpc_id:
        raise WebError("bad-reply", "the answer is to another request (its rpcId differs)")
    result = reply.get("result")
    if not isinstance(result, dict):
        raise WebError("bad-reply", "the answer has no result")
    if result.get("ok") is True:
        value = result.get("value")
        return value if isinstance(value, dict) else {}
    error = result.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    raise WebError(
        code[:64] if isinstance(code, str) else "error",
        message[:2000] if isinstance(message, str) else "no message",
    )


def created_session(value: dict[str, Any]) -> str:
    """The session id ``session.create`` answered with."""
    session_id = value.get("sessionId")
    if not isinstance(session_id, str) or not session_id:
        raise WebError("bad-reply", "session.create answered without a sessionId")
    return session_id
