"""Upstream's typed failure, with its seven stable codes and exact messages.

Hosts route on ``code``; the message text is part of the contract because dsh
shows it verbatim (``Session reference failed: <message>``), so every message
here is byte-for-byte upstream's.
"""

from __future__ import annotations

from typing import Final, Literal

from .jsjson import js_stringify

ErrorCode = Literal[
    "SESSION_REFERENCE_INVALID_CONFIG",
    "SESSION_REFERENCE_INVALID_REFERENCE",
    "SESSION_REFERENCE_SELF_REFERENCE",
    "SESSION_REFERENCE_TOO_MANY",
    "SESSION_REFERENCE_READ_FAILED",
    "SESSION_REFERENCE_BUDGET_EXCEEDED",
    "SESSION_REFERENCE_CANCELLED",
]

INVALID_CONFIG: Final = "SESSION_REFERENCE_INVALID_CONFIG"
INVALID_REFERENCE: Final = "SESSION_REFERENCE_INVALID_REFERENCE"
SELF_REFERENCE: Final = "SESSION_REFERENCE_SELF_REFERENCE"
TOO_MANY: Final = "SESSION_REFERENCE_TOO_MANY"
READ_FAILED: Final = "SESSION_REFERENCE_READ_FAILED"
BUDGET_EXCEEDED: Final = "SESSION_REFERENCE_BUDGET_EXCEEDED"
CANCELLED: Final = "SESSION_REFERENCE_CANCELLED"


class SessionReferenceError(Exception):
    """A failure with upstream's ``code`` and message (``name`` mirrors the JS class)."""

    name = "SessionReferenceError"

    def __init__(self, message: str, code: ErrorCode, cause: BaseException | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code: ErrorCode = code
        self.cause = cause
        if cause is not None:
            self.__cause__ = cause

    def __repr__(self) -> str:
        return f"SessionReferenceError({self.code}: {self.message!r})"


def invalid_uri(uri: str, cause: BaseException | None = None) -> SessionReferenceError:
    return SessionReferenceError(
        f"invalid session reference URI {js_stringify(uri)}", INVALID_REFERENCE, cause
    )


def cancelled(cause: BaseException | None = None) -> SessionReferenceError:
    return SessionReferenceError("session reference preparation was cancelled", CANCELLED, cause)
