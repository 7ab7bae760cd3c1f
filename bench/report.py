"""The results table (printed, and written to ``docs/benchmarks.md`` with the machine it ran on)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from .generate import Manifest
from .run import Measure


def _seconds(value: float | None) -> str:
    if value is None:
        return "—"
    if value < 1:
        return f"{value * 1000:.1f} ms"
    return f"{value:.2f} s"


def _mb(value: float | None) -> str:
    return "—" if value is None else f"{value:.0f} MB"


def machine() -> str:
    """CPU, cores, memory, OS and the runtimes, in one line."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal"):
                memory = f", {int(line.split()[1]) / 1024 / 1024:.0f} GiB RAM"
    except OSError:
        pass
    one, five, fifteen = os.getloadavg()
    load = f", load average {one:.1f}/{five:.1f}/{fifteen:.1f} at the end"
    return (
        f"{cpu}, {os.cpu_count()} cores{memory}; {platform.system()} {platform.release()}; "
        f"Python {sys.version.split()[0]}{load}"
    )


def node_version(node: Path) -> str:
    try:
        return subprocess.run(
            [str(node), "--version"], capture_output=True, text=True, check=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


HEADER = (
    "case",
    "ours (median)",
    "ours p95",
    "upstream (median)",
    "ours / upstream",
    "peak RSS ours / upstream",
    "target",
)


def rows(measures: Sequence[Measure]) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for m in measures:
        ratio = m.ratio
        out.append(
            (
                m.case,
                _seconds(m.median(m.ours)) + (f" (n={len(m.ours)})" if m.ours else ""),
                _seconds(m.p95(m.ours)),
                _seconds(m.median(m.theirs)) + (f" (n={len(m.theirs)})" if m.theirs else ""),
                "—" if ratio is None else (f"{ratio:.3f}" if ratio < 0.1 else f"{ratio:.2f}"),
                f"{_mb(m.ours_rss)} / {_mb(m.theirs_rss)}",
                m.target or "",
            )
        )
    return out


def text_table(measures: Sequence[Measure]) -> str:
    table = [HEADER, *rows(measures)]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) for row in table]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def markdown_table(measures: Sequence[Measure]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows(measures)]
    return "\n".join(lines)


def markdown(
    manifest: Manifest,
    setting: str,
    measures: Sequence[Measure],
    checks: Sequence[str],
    node: Path | None,
    notes: Sequence[str],
) -> str:
    spec = manifest.spec
    plain, disk = manifest.plain_bytes / 1e6, manifest.disk_bytes / 1e6
    store = (
        f"{spec['sessions']:,} sessions ({spec['compression']}), {plain:,.0f} MB of JSONL "
        f"({disk:,.0f} MB on disk), including {spec['huge']} logs of ~{spec['huge_mb']:g} MB "
        f"and {spec['medium']} of ~{spec['medium_kb'] / 1000:g} MB; query `{manifest.query}` "
        f"(about {manifest.query_hits} titles match)"
    )
    parts = [
        f"## Setting `{setting}` — {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        "",
        f"- Machine: {machine()}",
        (
            "- Upstream: not run (`--no-upstream`)"
            if node is None
            else f"- Upstream: `@deepseek-ai/dsh-session-reference@0.1.0-rc.8` on Node {node_version(node)}, "
            "its own `JsonlSessionPersistence` over the same root"
        ),
        f"- Store: {store}",
        "",
        markdown_table(measures),
        "",
    ]
    if checks:
        parts += ["Same answers on the same data:", "", *[f"- {check}" for check in checks], ""]
    if notes:
        parts += ["Notes:", "", *[f"- {note}" for note in notes], ""]
    return "\n".join(parts)
