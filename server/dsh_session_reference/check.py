"""``dsh-session-reference check``: the editor's findings for files, as lines or JSON.

It runs :func:`.analysis.analyze`, the function behind the server's diagnostics, so a CI run
reports exactly what the editor squiggles.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from .analysis import Finding, analyze
from .display import display_inline_text
from .jsjson import read_text
from .lines import Lines
from .resolver import AgentRef, SessionReferenceResolver


def _finding_json(finding: Finding, lines: Lines) -> dict[str, Any]:
    start_line, start_column = lines.line_and_units(finding.start, "utf-32")
    end_line, end_column = lines.line_and_units(finding.end, "utf-32")
    out: dict[str, Any] = {
        "line": start_line + 1,
        "column": start_column + 1,
        "endLine": end_line + 1,
        "endColumn": end_column + 1,
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
    for path in paths:
        try:
            text = await asyncio.to_thread(read_text, path)
        except OSError as error:
            reason = error.strerror or str(error)
            report.append({"file": path, "error": reason, "diagnostics": []})
            if not as_json:
                stream.write(f"{path}: error: cannot read: {reason} [unreadable]\n")
            continue
        analysis = await analyze(text, resolver, agent)
        lines = Lines(analysis.text)
        entries = [_finding_json(finding, lines) for finding in analysis.findings]
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
    errors = sum(entry.get("errors", 0) for entry in report)
    unreadable = sum(1 for entry in report if "error" in entry)
    if as_json:
        ok = not (errors or unreadable)
        stream.write(json.dumps({"files": report, "ok": ok}, ensure_ascii=False, indent=2) + "\n")
    else:
        summary = f"{len(paths)} file(s) checked, {errors} error(s)"
        if unreadable:
            summary += f", {unreadable} unreadable"
        stream.write(summary + "\n")
    return 1 if errors or unreadable else 0
