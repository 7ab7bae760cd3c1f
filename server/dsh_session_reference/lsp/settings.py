"""The ``dshSessionReference`` settings section: parsing, merging, and what it resolves to.

Settings reach the server three ways (``initializationOptions``,
``workspace/didChangeConfiguration``, ``workspace/configuration``) and from
editors that differ in how they wrap them, so every path goes through
:func:`apply_settings`, which accepts the section itself or an object holding it
under ``dshSessionReference``. A bad value never stops the server: it keeps the
previous value and comes back as a warning for the user.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from ..config import (
    DEFAULT_CANDIDATE_LIMIT,
    DEFAULT_MAX_REFERENCE_BYTES,
    MAX_REFERENCES,
    ResolverConfig,
    resolver_config,
)
from ..errors import SessionReferenceError

SECTION = "dshSessionReference"


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
    inlay_hints: bool = True
    """Each mention's cost after it (``textDocument/inlayHint``)."""
    code_lens: bool = True
    """The message's total and "Preview" over the first mention (``textDocument/codeLens``)."""

    @property
    def limits(self) -> ResolverConfig:
        return ResolverConfig(self.max_references, self.candidate_limit, self.max_reference_bytes)


_KEYS: Final[dict[str, tuple[str, type]]] = {
    "sessionsRoot": ("sessions_root", str),
    "targetSessionId": ("target_session_id", str),
    "bodySearch": ("body_search", bool),
    "inlayHints": ("inlay_hints", bool),
    "codeLens": ("code_lens", bool),
    "maxReferences": ("max_references", int),
    "candidateLimit": ("candidate_limit", int),
    "maxReferenceBytes": ("max_reference_bytes", int),
}
"""Every setting, its attribute and kind, in the order their warnings are reported."""


def section_of(raw: object) -> Mapping[str, Any] | None:
    """The settings section inside ``raw`` (``{dshSessionReference: {...}}`` or the section itself)."""
    if not isinstance(raw, Mapping):
        return None
    inner = raw.get(SECTION)
    if isinstance(inner, Mapping):
        return inner
    if any(key in raw for key in _KEYS):
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
    for key, (attribute, kind) in _KEYS.items():
        if key not in section:
            continue
        value = section[key]
        name = f"{SECTION}.{key}"
        kept = getattr(current, attribute)
        if value is None:
            changes[attribute] = getattr(defaults, attribute)
        elif kind is int:
            # The resolver's own validation, so a rejected limit reads as it does in dsh.
            try:
                changes[attribute] = getattr(resolver_config(**{attribute: value}), attribute)
            except SessionReferenceError as error:
                warnings.append(f"{name}: {error.message}; keeping {kept}")
        elif isinstance(value, kind):
            changes[attribute] = value
        else:
            must = "a string" if kind is str else "true or false"
            warnings.append(f"{name} must be {must}; keeping {kept!r}")
    return replace(current, **changes), warnings
