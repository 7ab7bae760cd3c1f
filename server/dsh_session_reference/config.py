"""Resolver limits, validated with upstream's constructor messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, TypeGuard

from .errors import INVALID_CONFIG, SessionReferenceError
from .jsjson import MAX_SAFE_INTEGER

MAX_REFERENCES: Final = 3
DEFAULT_CANDIDATE_LIMIT: Final = 50
DEFAULT_MAX_REFERENCE_BYTES: Final = 65_536

BUDGET_BOUNDS: Final[dict[str, int]] = {
    "maxReferences": MAX_REFERENCES,
    "candidateLimit": 1_000,
    "maxReferenceBytes": 1 << 20,
}
"""The most the language server takes for each budget, whoever asks (every editor's settings, dsh's
profile). Upstream allows any positive safe integer for the last two; a value an editor's settings
(which a repository may ship) can reach must be harmless at its worst, so the server clamps there.
At the bounds a completion reply on a 200,000-session root and a preview of three 60 MB sessions
stay a few MB (docs/limits.md has the figures). The CLI keeps upstream's range: its flags are
typed by the person who runs it, for one run."""

DSH_DEFAULT: Final = "dsh's default"
"""Where a budget came from when nothing set it."""


def is_positive_safe_integer(value: object) -> TypeGuard[int | float]:
    """``Number.isSafeInteger(value) && value > 0`` for a value that came from Python or JSON.

    JS has one number type, so an integral float counts; ``bool`` is not a
    number there even though it is an ``int`` here.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(value, float) and not value.is_integer():
        return False
    return 0 < value <= MAX_SAFE_INTEGER


@dataclass(frozen=True)
class ResolverConfig:
    """The three limits; construct through :func:`resolver_config` to validate."""

    max_references: int = MAX_REFERENCES
    candidate_limit: int = DEFAULT_CANDIDATE_LIMIT
    max_reference_bytes: int = DEFAULT_MAX_REFERENCE_BYTES
    origins: tuple[str, str, str] = field(default=(DSH_DEFAULT,) * 3, compare=False)
    """Where each limit came from, in the order above (a setting, a flag, dsh's profile or
    :data:`DSH_DEFAULT`), for the accounting a person reads; no part of the limits' identity."""


def resolver_config(
    max_references: object = None, candidate_limit: object = None, max_reference_bytes: object = None
) -> ResolverConfig:
    """Defaults for ``None`` (upstream's ``??``), then validation in upstream's order."""
    config = ResolverConfig(
        _positive("maxReferences", max_references, MAX_REFERENCES),
        _positive("candidateLimit", candidate_limit, DEFAULT_CANDIDATE_LIMIT),
        _positive("maxReferenceBytes", max_reference_bytes, DEFAULT_MAX_REFERENCE_BYTES),
    )
    if config.max_references > MAX_REFERENCES:
        raise SessionReferenceError(
            f"session-reference: maxReferences must not exceed {MAX_REFERENCES}", INVALID_CONFIG
        )
    return config


def clamp_budget(name: str, value: object) -> tuple[int | None, str | None]:
    """``value`` for budget ``name`` within ``[1, BUDGET_BOUNDS[name]]``, and why it was changed.

    ``(None, why)``: not a positive integer at all (upstream's message), so there is nothing to
    clamp; ``(bound, why)``: an integral number above the bound (``1e308`` and ``2**60`` too);
    ``(value, None)``: within the range.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None, f"session-reference: {name} must be a positive safe integer"
    if isinstance(value, float) and not value.is_integer():
        return None, f"session-reference: {name} must be a positive safe integer"
    if value <= 0:
        return None, f"session-reference: {name} must be a positive safe integer"
    bound = BUDGET_BOUNDS[name]
    if value > bound:
        if name == "maxReferences":
            return bound, f"session-reference: maxReferences must not exceed {MAX_REFERENCES}"
        return bound, f"{name} {_number(value)} is above this server's bound of {bound:,}"
    return int(value), None


def _number(value: int | float) -> str:
    """A number for a message, shortened when huge (``1e308`` has 309 digits)."""
    if isinstance(value, float):
        return f"{int(value):,}" if value < 1e21 else f"{value:.3g}"
    return f"{value:,}" if value.bit_length() <= 70 else f"a {value.bit_length():,}-bit integer"


def _positive(name: str, value: object, default: int) -> int:
    chosen = default if value is None else value
    if not is_positive_safe_integer(chosen):
        raise SessionReferenceError(
            f"session-reference: {name} must be a positive safe integer", INVALID_CONFIG
        )
    return int(chosen)
