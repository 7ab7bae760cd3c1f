"""Findings as LSP diagnostics, and ``dsh-session-reference check`` for files.

The server and the CLI share :func:`analysis.analyze`, so a CI run reports
exactly what the editor squiggles.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any, Final, TextIO

from lsprotocol import types

from ..jsjson import read_text
from ..resolver import AgentRef, SessionReferenceResolver
from .analysis import DUPLICATE_REFERENCE, Analysis, Finding, Severity, analyze
from .display import display_inline_text
from .positions import Encoding, LineIndex

SOURCE: Final = "dsh-session-reference"

_SEVERITY: Final[dict[Severity, types.DiagnosticSeverity]] = {
    "error": types.DiagnosticSeverity.Error,
    "warning": types.DiagnosticSeverity.Warning,
    "information": types.DiagnosticSeverity.Information,
    "hint": types.DiagnosticSeverity.Hint,
}


def to_diagnostic(
    finding: Finding, index: LineIndex, encoding: Encoding = "utf-16", *, tags_supported: bool = False
) -> types.Diagnostic:
    """One finding as a ``Diagnostic``; duplicates are tagged unnecessary where the client can show it."""
    tags = (
        [types.DiagnosticTag.Unnecessary] if tags_supported and finding.code == DUPLICATE_REFERENCE else None
    )
    data = None if finding.session_id is None else {"sessionId": finding.session_id}
    return types.Diagnostic(
        range=index.range_of(finding.start, finding.end, encoding),
        message=finding.message,
        severity=_SEVERITY[finding.severity],
        code=finding.code,
        source=SOURCE,
        tags=tags,
        data=data,
    )


def to_diagnostics(
    analysis: Analysis, index: LineIndex, encoding: Encoding = "utf-16", *, tags_supported: bool = False
) -> list[types.Diagnostic]:
    return [to_diagnostic(f, index, encoding, tags_supported=tags_supported) for f in analysis.findings]


async def check_text(
    text: str, resolver: SessionReferenceResolver, agent: AgentRef
) -> list[types.Diagnostic]:
    """The diagnostics an editor would show for ``text`` (UTF-16 positions, as LSP sends them)."""
    analysis = await analyze(text, resolver, agent)
    return to_diagnostics(analysis, LineIndex(analysis.text))


def _finding_json(finding: Finding, index: LineIndex) -> dict[str, Any]:
    start = index.position_at(finding.start, "utf-32")
    end = index.position_at(finding.end, "utf-32")
    out: dict[str, Any] = {
        "line": start.line + 1,
        "column": start.character + 1,
        "endLine": end.line + 1,
        "endColumn": end.character + 1,
        "severity": finding.severity,
        "code": finding.code,
        "message": finding.message,
    }
    if finding.session_id is not None:
        out["sessionId"] = finding.session_id
    return out


async def check_files(
    paths: Sequence[str],
    resolver: SessionReferenceResolver,
    agent: AgentRef,
    *,
    as_json: bool = False,
    out: TextIO | None = None,
) -> int:
    """Check each file; print ``FILE:LINE:COL: severity: message [code]`` lines (or JSON).

    Lines and columns are 1-based and count characters (code points). Exit
    status 1 when any file has an error or cannot be read, else 0.
    """
    stream = sys.stdout if out is None else out
    report: list[dict[str, Any]] = []
    failed = False
    for path in paths:
        try:
            text = await asyncio.to_thread(read_text, path)
        except OSError as error:
            failed = True
            reason = error.strerror or str(error)
            report.append({"file": path, "error": reason, "diagnostics": []})
            if not as_json:
                stream.write(f"{path}: error: cannot read: {reason} [unreadable]\n")
            continue
        analysis = await analyze(text, resolver, agent)
        index = LineIndex(analysis.text)
        entries = [_finding_json(finding, index) for finding in analysis.findings]
        failed = failed or analysis.has_errors
        report.append(
            {
                "file": path,
                "mentions": analysis.mention_count,
                "sessions": len(analysis.references),
                "errors": analysis.error_count,
                "diagnostics": entries,
            }
        )
        if not as_json:
            for entry in entries:
                stream.write(
                    f"{path}:{entry['line']}:{entry['column']}: {entry['severity']}: "
                    f"{display_inline_text(entry['message'])} [{entry['code']}]\n"
                )
    if as_json:
        stream.write(json.dumps({"files": report, "ok": not failed}, ensure_ascii=False, indent=2) + "\n")
    else:
        errors = sum(entry.get("errors", 0) for entry in report)
        unreadable = sum(1 for entry in report if "error" in entry)
        summary = f"{len(paths)} file(s) checked, {errors} error(s)"
        if unreadable:
            summary += f", {unreadable} unreadable"
        stream.write(summary + "\n")
    return 1 if failed else 0
