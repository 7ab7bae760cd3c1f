"""The header record of a dsh session log: its first line, read as upstream reads it.

A log starts with one ``{"type":"session",...}`` line. A listing reads only that line
(``readFirstLine``, ``parseHeaderMeta``); a whole read requires it to be a valid header of this
format version before any event is read (``parseHeaderRecord``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import IO, Any, Final

from ..cancellation import AbortSignal, check
from .jsvalue import UNDEFINED, is_negative_zero, is_number, is_safe_integer, js_parse, js_string
from .logbase import MAX_LINE_BYTES, LogError, header_too_long

SESSION_FORMAT_VERSION: Final = 0


def version_refusal(session_id: object, version: int | float) -> str:
    """Upstream's ``sessionFormatVersionRefusal`` text."""
    name, shown = js_string(session_id), js_string(version)
    if version > SESSION_FORMAT_VERSION:
        return (
            f'session "{name}" uses log format v{shown}, but this harness reads only '
            f"v{SESSION_FORMAT_VERSION}: the log was written by a newer harness — "
            "upgrade the harness to open it"
        )
    return (
        f'session "{name}" uses log format v{shown}, older than the supported '
        f"v{SESSION_FORMAT_VERSION}, and this build ships no upgrade path for it"
    )


def _non_negative_safe(value: object) -> bool:
    return is_safe_integer(value) and value >= 0 and not is_negative_zero(value)  # type: ignore[operator]


def is_header_line(value: object) -> bool:
    """Upstream's ``isHeaderLine`` guard."""
    if not isinstance(value, dict):
        return False
    origin = value.get("origin", UNDEFINED)
    preset = value.get("agentPreset", UNDEFINED)
    return (
        value.get("type") == "session"
        and is_number(value.get("version", UNDEFINED))
        and isinstance(value.get("id"), str)
        and _non_negative_safe(value.get("createdAt", UNDEFINED))
        and _non_negative_safe(value.get("delegationDepth", UNDEFINED))
        and (origin is UNDEFINED or origin == "subagent")
        and (preset is UNDEFINED or isinstance(preset, str))
    )


_OPTIONAL_BEFORE_DEPTH: Final = ("cwd", "parentSession", "seedLength", "origin")


def from_header_line(line: dict[str, Any]) -> dict[str, Any]:
    """Upstream's ``fromHeaderLine``: the header in its fixed key order (absent fields omitted)."""
    if "sandboxMode" in line or "approvalPolicy" in line:
        raise LogError("session header uses retired policy baseline fields")
    header: dict[str, Any] = {"version": line["version"], "id": line["id"], "createdAt": line["createdAt"]}
    for key in _OPTIONAL_BEFORE_DEPTH:
        if key in line:
            header[key] = line[key]
    header["delegationDepth"] = line["delegationDepth"]
    if "agentPreset" in line:
        header["agentPreset"] = line["agentPreset"]
    return header


def parse_header_meta(first_line: str) -> dict[str, Any] | None:
    """Upstream's ``parseHeaderMeta`` (listing): the header, or ``None`` when the line is not one.

    Raises :class:`LogError` for a header with retired fields, which upstream
    lets fail the whole listing.
    """
    try:
        parsed = js_parse(first_line, keep_negative_zero=True)
    except ValueError:
        return None
    return from_header_line(parsed) if is_header_line(parsed) else None


def parse_header_record(record: bytes) -> dict[str, Any]:
    """Upstream's ``parseHeaderRecord``: one newline-terminated header record, or a :class:`LogError`."""
    if not record.endswith(b"\n") or record.find(b"\n") != len(record) - 1:
        raise LogError("empty or header-less session log")
    try:
        parsed = js_parse(record[:-1].decode("utf-8", "replace"), keep_negative_zero=True)
    except ValueError:
        raise LogError("corrupt session log: header line is not valid JSON") from None
    if isinstance(parsed, dict):
        version = parsed.get("version", UNDEFINED)
        if is_number(version) and version != SESSION_FORMAT_VERSION:
            raise LogError(version_refusal(parsed.get("id", UNDEFINED), version), unsupported=True)
    if not is_header_line(parsed):
        raise LogError("corrupt session log: first line is not a session header")
    return from_header_line(parsed)


def first_line(read: Callable[[], bytes], stop: AbortSignal | None) -> tuple[bytes, bytes] | None:
    """The first line of the bytes ``read`` returns piece by piece (``b""``: no more), without its
    newline, and what was read past it; ``None`` when the bytes end first."""
    parts: list[bytes] = []
    total = 0
    while True:
        check(stop)
        chunk = read()
        if not chunk:
            return None
        newline = chunk.find(b"\n")
        if newline != -1:
            parts.append(chunk[:newline])
            return b"".join(parts), chunk[newline + 1 :]
        parts.append(chunk)
        total += len(chunk)
        if total > MAX_LINE_BYTES:
            raise header_too_long()


def read_first_line(handle: IO[bytes], stop: AbortSignal | None = None) -> str | None:
    """Upstream's ``readFirstLine`` (plain listing): the first line, or ``None`` without one."""
    line = first_line(lambda: handle.read(8192), stop)
    return None if line is None else line[0].decode("utf-8", "replace")
