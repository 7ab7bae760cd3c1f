"""Resolver limits, validated with upstream's constructor messages."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, TypeGuard

from .errors import INVALID_CONFIG, SessionReferenceError
from .jsjson import MAX_SAFE_INTEGER

MAX_REFERENCES: Final = 3
DEFAULT_CANDIDATE_LIMIT: Final = 50
DEFAULT_MAX_REFERENCE_BYTES: Final = 65_536


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


def _positive(name: str, value: object, default: int) -> int:
    chosen = default if value is None else value
    if not is_positive_safe_integer(chosen):
        raise SessionReferenceError(
            f"session-reference: {name} must be a positive safe integer", INVALID_CONFIG
        )
    return int(chosen)
