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
from .run import Floor, Measure


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
    "ours / floor",
    "peak RSS ours / upstream",
    "target",
)


def _ratio(value: float | None) -> str:
    return "—" if value is None else (f"{value:.3f}" if value < 0.1 else f"{value:.2f}")


def rows(measures: Sequence[Measure], floor: Floor | None) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for m in measures:
        ratio = m.ratio
        ours = m.median(m.ours)
        over_floor = ours / floor.seconds if floor and m.reads_every_log and ours is not None else None
        out.append(
            (
                m.case,
                _seconds(m.median(m.ours)) + (f" (n={len(m.ours)})" if m.ours else ""),
                _seconds(m.p95(m.ours)),
                _seconds(m.median(m.theirs)) + (f" (n={len(m.theirs)})" if m.theirs else ""),
                _ratio(ratio),
                _ratio(over_floor),
                f"{_mb(m.ours_rss)} / {_mb(m.theirs_rss)}",
                m.target or "",
            )
        )
    return out


def floor_line(floor: Floor | None) -> str:
    if floor is None:
        return "not measured"
    return (
        f"{_seconds(floor.seconds)} (decompressing every log {_seconds(floor.decompress)}, parsing its "
        f"{floor.lines:,} lines with the standard library's `json` {_seconds(floor.parse)}; one process, "
        'one core, nothing validated or kept); "ours / floor" is given for the cases that read every log'
    )


def text_table(measures: Sequence[Measure], floor: Floor | None) -> str:
    table = [HEADER, *rows(measures, floor)]
    widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
    lines = ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) for row in table]
    lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def markdown_table(measures: Sequence[Measure], floor: Floor | None) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += [
        "| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |" for row in rows(measures, floor)
    ]
    return "\n".join(lines)


def markdown(
    manifest: Manifest,
    setting: str,
    measures: Sequence[Measure],
    checks: Sequence[str],
    node: Path | None,
    notes: Sequence[str],
    floor: Floor | None = None,
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
        f"- Floor: {floor_line(floor)}",
        "",
        markdown_table(measures, floor),
        "",
    ]
    if checks:
        parts += ["Same answers on the same data:", "", *[f"- {check}" for check in checks], ""]
    if notes:
        parts += ["Notes:", "", *[f"- {note}" for note in notes], ""]
    return "\n".join(parts)
