"""The dsh session-reference service in Python, exact to upstream ``@deepseek-ai/dsh-session-reference``.

Mention other dsh sessions as ``@[label](dsh-session:<base64url>)``; before a
message is sent, :meth:`SessionReferenceResolver.prepare` turns them into one
bounded, read-only, untrusted snapshot for the model.
"""

import sys as _sys

if _sys.argv[:1] == ["-m"] and not _sys.flags.safe_path and _sys.path:
    # ``python -m dsh_session_reference`` put the working directory (often a workspace someone
    # else wrote) first on ``sys.path``: no module we import later may come from there.
    del _sys.path[0]

from typing import TYPE_CHECKING, Any

from .cancellation import AbortSignal
from .config import DEFAULT_CANDIDATE_LIMIT, DEFAULT_MAX_REFERENCE_BYTES, MAX_REFERENCES
from .errors import SessionReferenceError
from .resolver import AgentRef, Candidate, PreparedMessage, SessionReferenceResolver
from .snapshot import AdditionalContext
from .uri import (
    SESSION_REFERENCE_SCHEME,
    MentionSpan,
    ParsedText,
    SessionReference,
    decode_session_reference_uri,
    encode_session_reference_uri,
    format_session_reference_mention,
    parse_prompt_text,
    parse_session_reference_text,
    scan_session_references,
)

if TYPE_CHECKING:
    from .store.jsonl_store import JsonlSessionStore

__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """Import the store (and its zstd binding) only when it is asked for, so the pure
    URI and retention API stays importable where no binary wheel is installed."""
    if name == "JsonlSessionStore":
        from .store.jsonl_store import JsonlSessionStore

        return JsonlSessionStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "DEFAULT_CANDIDATE_LIMIT",
    "DEFAULT_MAX_REFERENCE_BYTES",
    "MAX_REFERENCES",
    "SESSION_REFERENCE_SCHEME",
    "AbortSignal",
    "AdditionalContext",
    "AgentRef",
    "Candidate",
    "JsonlSessionStore",
    "MentionSpan",
    "ParsedText",
    "PreparedMessage",
    "SessionReference",
    "SessionReferenceError",
    "SessionReferenceResolver",
    "decode_session_reference_uri",
    "encode_session_reference_uri",
    "format_session_reference_mention",
    "parse_prompt_text",
    "parse_session_reference_text",
    "scan_session_references",
]
