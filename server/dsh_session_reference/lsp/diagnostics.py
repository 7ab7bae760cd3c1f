"""Findings as LSP diagnostics.

The server and ``dsh-session-reference check`` (:mod:`..check`) share :func:`..analysis.analyze`,
so a CI run reports exactly what the editor squiggles.
"""

from __future__ import annotations

from typing import Final

from lsprotocol import types

from ..analysis import DUPLICATE_REFERENCE, Analysis, Severity, analyze
from ..lines import Encoding
from ..resolver import AgentRef, SessionReferenceResolver
from .positions import LineIndex

SOURCE: Final = "dsh-session-reference"

_SEVERITY: Final[dict[Severity, types.DiagnosticSeverity]] = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


def to_diagnostics(
    analysis: Analysis, index: LineIndex, encoding: Encoding = "utf-16", *, tags_supported: bool = False
) -> list[types.Diagnostic]:
    """The findings as ``Diagnostic``s; duplicates are tagged unnecessary where the client can show it."""
    return [
        types.Diagnostic(
            range=index.range_of(finding.start, finding.end, encoding),
            message=finding.message,
            severity=_SEVERITY[finding.severity],
            code=finding.code,
            source=SOURCE,
            tags=[types.DiagnosticTag.Unnecessary]
            if tags_supported and finding.code == DUPLICATE_REFERENCE
            else None,
            data=None if finding.session_id is None else {"sessionId": finding.session_id},
        )
        for finding in analysis.findings
    ]


async def check_text(
    text: str, resolver: SessionReferenceResolver, agent: AgentRef
) -> list[types.Diagnostic]:
    """The diagnostics an editor would show for ``text`` (UTF-16 positions, as LSP sends them)."""
    analysis = await analyze(text, resolver, agent)
    return to_diagnostics(analysis, LineIndex(analysis.text))
