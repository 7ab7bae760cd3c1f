"""The ``dshSessionReference`` settings section: parsing, merging, and what it resolves to.

Settings reach the server three ways (``initializationOptions``,
``workspace/didChangeConfiguration``, ``workspace/configuration``) and from
editors that differ in how they wrap them, so every path goes through
:func:`apply_settings`, which accepts the section itself or an object holding it
under ``dshSessionReference``. A bad value never stops the server: it keeps the
previous value and comes back as a warning for the user; a budget above the server's bound
(:data:`.config.BUDGET_BOUNDS`) is clamped to it, with a warning, whichever client sent it.

The three budgets are ``None`` until the editor sets them: then dsh's own profile decides
(:func:`resolve_limits`), so the accounting is dsh's. An editor that lets a project set them
(VS Code does not: they are machine settings) still cannot go past the bounds.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from ..config import ResolverConfig, clamp_budget
from ..dsh_profile import ProfileBudgets, combine_limits, profile_name_problem

SECTION = "dshSessionReference"


@dataclass(frozen=True)
class Settings:
    """The section's values; empty strings mean "use the default" as in the editor UIs."""

    sessions_root: str = ""
    target_session_id: str = ""
    max_references: int | None = None
    candidate_limit: int | None = None
    max_reference_bytes: int | None = None
    """The budgets the editor sets (``None``: not set, so dsh's profile or default decides)."""
    profile: str = ""
    """The dsh profile whose budgets apply (empty: ``web``, what ``dsh web`` boots)."""
    body_search: bool = False
    """Beyond upstream: ``@`` queries also match message text (off: ids, cwds and titles only)."""
    inlay_hints: bool = True
    """Each mention's cost after it (``textDocument/inlayHint``)."""
    code_lens: bool = True
    """The message's total and "Preview" over the first mention (``textDocument/codeLens``)."""


_BUDGETS: Final = (
    ("maxReferences", "max_references"),
    ("candidateLimit", "candidate_limit"),
    ("maxReferenceBytes", "max_reference_bytes"),
)


def resolve_limits(settings: Settings, profile: ProfileBudgets) -> tuple[ResolverConfig, list[str]]:
    """Each budget from the editor's setting, else dsh's profile (clamped to the server's bound),
    else dsh's default, with where it came from; and a warning per clamped profile value."""
    own = {
        key: (value, f"the editor's setting {SECTION}.{key}")
        for key, attribute in _BUDGETS
        if (value := getattr(settings, attribute)) is not None
    }
    return combine_limits(own, profile, bounded=True)


_KEYS: Final[dict[str, tuple[str, type]]] = {
    "sessionsRoot": ("sessions_root", str),
    "profile": ("profile", str),
    "targetSessionId": ("target_session_id", str),
    "bodySearch": ("body_search", bool),
    "inlayHints": ("inlay_hints", bool),
    "codeLens": ("code_lens", bool),
    "maxReferences": ("max_references", int),
    "candidateLimit": ("candidate_limit", int),
    "maxReferenceBytes": ("max_reference_bytes", int),
}
"""Every setting, its attribute and kind, in the order their warnings are reported."""


class OnceWarnings:
    """Settings warnings to show, each once per server: settings are pulled again on every change,
    and a clamped value would be reported each time. Bounded against a client that sends endless
    distinct bad values."""

    LIMIT: Final = 256

    def __init__(self) -> None:
        self._seen: set[str] = set()
        self._pending: list[str] = []

    def add(self, warnings: Iterable[str]) -> None:
        for warning in warnings:
            if warning not in self._seen:
                if len(self._seen) >= self.LIMIT:
                    self._seen.clear()
                self._seen.add(warning)
                self._pending.append(warning)

    def __bool__(self) -> bool:
        return bool(self._pending)

    def take(self) -> list[str]:
        """The warnings not shown yet; they count as shown from now on."""
        pending, self._pending = self._pending, []
        return pending


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


def _is_path_text(text: str) -> bool:
    """Whether the OS can take ``text`` (the file system's encoding, with the surrogate escapes
    Python decodes undecodable bytes to: a root under ``caf\xe9`` comes as ``caf\udce9``)."""
    try:
        os.fsencode(text)
    except UnicodeEncodeError:
        return False
    return True


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
            # Upstream's messages, so a rejected limit reads as it does in dsh; above the bound,
            # the bound (a repository's settings may have sent it).
            clamped, why = clamp_budget(key, value)
            if clamped is None:
                keeping = f"{kept:,}" if kept is not None else "dsh's profile or default"
                warnings.append(f"{name}: {why}; keeping {keeping}")
            else:
                changes[attribute] = clamped
                if why is not None:
                    warnings.append(f"{name}: {why}; using {clamped:,}")
        elif isinstance(value, str) and not _is_path_text(value):
            # JSON's "\ud800" is a lone surrogate no file name decodes to (os calls raise on it).
            warnings.append(f"{name} {value[:80]!r} is not Unicode text; keeping {kept!r}")
        elif key == "profile" and isinstance(value, str) and value and profile_name_problem(value):
            warnings.append(f"{name}: {profile_name_problem(value)}; keeping {kept!r}")
        elif isinstance(value, kind):
            changes[attribute] = value
        else:
            must = "a string" if kind is str else "true or false"
            warnings.append(f"{name} must be {must}; keeping {kept!r}")
    return replace(current, **changes), warnings
