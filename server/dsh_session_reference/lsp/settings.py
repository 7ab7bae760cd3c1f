"""The ``dshSessionReference`` settings section: parsing, merging, and what it resolves to.

Settings reach the server three ways (``initializationOptions``,
``workspace/didChangeConfiguration``, ``workspace/configuration``) and from
editors that differ in how they wrap them, so every path goes through
:func:`apply_settings`, which accepts the section itself or an object holding it
under ``dshSessionReference``. A bad value never stops the server: it keeps the
previous value and comes back as a warning for the user.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from ..config import (
    DEFAULT_CANDIDATE_LIMIT,
    DEFAULT_MAX_REFERENCE_BYTES,
    MAX_REFERENCES,
    ResolverConfig,
    resolver_config,
)
from ..errors import SessionReferenceError
from ..store.layout import resolve_root

SECTION = "dshSessionReference"
TARGET_ENV = "DSH_SESSION_ID"


@dataclass(frozen=True)
class Settings:
    """The section's values; empty strings mean "use the default" as in the editor UIs."""

    sessions_root: str = ""
    target_session_id: str = ""
    max_references: int = MAX_REFERENCES
    candidate_limit: int = DEFAULT_CANDIDATE_LIMIT
    max_reference_bytes: int = DEFAULT_MAX_REFERENCE_BYTES
    body_search: bool = False
    """Beyond upstream: ``@`` queries also match message text (off: ids, cwds and titles only)."""

    @property
    def limits(self) -> ResolverConfig:
        return ResolverConfig(self.max_references, self.candidate_limit, self.max_reference_bytes)


_STRING_KEYS = {"sessionsRoot": "sessions_root", "targetSessionId": "target_session_id"}
_BOOL_KEYS = {"bodySearch": "body_search"}
_LIMIT_KEYS = {
    "maxReferences": "max_references",
    "candidateLimit": "candidate_limit",
    "maxReferenceBytes": "max_reference_bytes",
}


def section_of(raw: object) -> Mapping[str, Any] | None:
    """The settings section inside ``raw`` (``{dshSessionReference: {...}}`` or the section itself)."""
    if not isinstance(raw, Mapping):
        return None
    inner = raw.get(SECTION)
    if isinstance(inner, Mapping):
        return inner
    if any(key in raw for key in (*_STRING_KEYS, *_LIMIT_KEYS, *_BOOL_KEYS)):
        return raw
    return None


def apply_settings(current: Settings, raw: object) -> tuple[Settings, list[str]]:
    """``current`` updated by the keys present in ``raw``; ``null`` resets a key to its default.

    Returns the new settings and one warning per rejected value (the limit
    messages are the resolver's own, so they read the same as in dsh).
    """
    section = section_of(raw)
    if section is None:
        return current, []
    defaults = Settings()
    changes: dict[str, Any] = {}
    warnings: list[str] = []
    for key, attribute in _STRING_KEYS.items():
        if key not in section:
            continue
        value = section[key]
        if value is None:
            changes[attribute] = getattr(defaults, attribute)
        elif isinstance(value, str):
            changes[attribute] = value
        else:
            warnings.append(f"{SECTION}.{key} must be a string; keeping {getattr(current, attribute)!r}")
    for key, attribute in _BOOL_KEYS.items():
        if key not in section:
            continue
        value = section[key]
        if value is None:
            changes[attribute] = getattr(defaults, attribute)
        elif isinstance(value, bool):
            changes[attribute] = value
        else:
            warnings.append(f"{SECTION}.{key} must be true or false; keeping {getattr(current, attribute)}")
    for key, attribute in _LIMIT_KEYS.items():
        if key not in section:
            continue
        value = section[key]
        if value is None:
            changes[attribute] = getattr(defaults, attribute)
            continue
        try:
            checked = resolver_config(**{attribute: value})
        except SessionReferenceError as error:
            warnings.append(f"{SECTION}.{key}: {error.message}; keeping {getattr(current, attribute)}")
            continue
        changes[attribute] = getattr(checked, attribute)
    updated = replace(current, **changes)
    return updated, warnings


def sessions_root(settings: Settings, fallback: str | None) -> str:
    """The setting when given, else the server's ``--sessions``, else dsh's default root."""
    return resolve_root(settings.sessions_root or fallback or None)


def target_session_id(settings: Settings, environ: Mapping[str, str] | None = None) -> str | None:
    """``targetSessionId``, else ``$DSH_SESSION_ID``, else no target (nothing is excluded as self)."""
    if settings.target_session_id:
        return settings.target_session_id
    env = os.environ if environ is None else environ
    return env.get(TARGET_ENV) or None
