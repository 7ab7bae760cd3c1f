"""The ``dshSessionReference`` settings section: parsing, merging, and what it resolves to.

Settings reach the server three ways (``initializationOptions``,
``workspace/didChangeConfiguration``, ``workspace/configuration``) and from
editors that differ in how they wrap them, so every path goes through
:func:`apply_settings`, which accepts the section itself or an object holding it
under ``dshSessionReference``. A bad value never stops the server: it keeps the
previous value and comes back as a warning for the user.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
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


class _Rejected(Exception):
    """A value the setting does not take; the message (possibly empty) says why."""


_Accept = Callable[[str, object], object]
"""``(attribute, value) -> the value to store``, or raises :class:`_Rejected`."""


def _of_type(kind: type) -> _Accept:
    def accept(attribute: str, value: object) -> object:
        if isinstance(value, kind):
            return value
        raise _Rejected

    return accept


def _limit(attribute: str, value: object) -> object:
    # The resolver's own validation, so a rejected limit reads as it does in dsh.
    try:
        checked = resolver_config(**{attribute: value})
    except SessionReferenceError as error:
        raise _Rejected(error.message) from error
    return getattr(checked, attribute)


@dataclass(frozen=True)
class _Key:
    """One key of the section: the attribute it sets, how a value is checked, and the warning
    for a rejected one (``str.format`` with ``key``, ``reason`` and the ``current`` value)."""

    attribute: str
    accept: _Accept
    rejected: str


_MUST_BE_STRING: Final = "{key} must be a string; keeping {current!r}"
_KEYS: Final = {
    "sessionsRoot": _Key("sessions_root", _of_type(str), _MUST_BE_STRING),
    "targetSessionId": _Key("target_session_id", _of_type(str), _MUST_BE_STRING),
    **{
        key: _Key(attribute, _of_type(bool), "{key} must be true or false; keeping {current}")
        for key, attribute in (
            ("bodySearch", "body_search"),
            ("inlayHints", "inlay_hints"),
            ("codeLens", "code_lens"),
        )
    },
    **{
        key: _Key(attribute, _limit, "{key}: {reason}; keeping {current}")
        for key, attribute in (
            ("maxReferences", "max_references"),
            ("candidateLimit", "candidate_limit"),
            ("maxReferenceBytes", "max_reference_bytes"),
        )
    },
}
"""Every setting, in the order their warnings are reported."""


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
    for key, setting in _KEYS.items():
        if key not in section:
            continue
        attribute = setting.attribute
        value = section[key]
        if value is None:
            changes[attribute] = getattr(defaults, attribute)
            continue
        try:
            changes[attribute] = setting.accept(attribute, value)
        except _Rejected as rejected:
            warnings.append(
                setting.rejected.format(
                    key=f"{SECTION}.{key}", reason=rejected, current=getattr(current, attribute)
                )
            )
    return replace(current, **changes), warnings
