#!/usr/bin/env python3
"""Regenerate the module map in docs/architecture.md from the code: each module's docstring's first
sentence, grouped by layer. ``python scripts/architecture.py`` rewrites the section between the
``<!-- map -->`` markers; tests/unit/test_architecture_doc.py fails while the doc differs from what
this would write (a module added, removed, moved or redescribed).
"""

from __future__ import annotations

import ast
import re
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "server" / "dsh_session_reference"
DOC = REPO / "docs" / "architecture.md"
BEGIN, END = "<!-- map -->", "<!-- /map -->"
WIDTH = 110
NAME_COLUMN = 30

LAYERS = (
    (
        "program",
        "the entry points: the one place that knows both front ends",
        lambda m: m in {"main", "__main__"},
    ),
    (
        "front ends",
        "each translates between its users and the core; neither imports the other",
        lambda m: m == "cli" or m.startswith("lsp"),
    ),
    (
        "assembly",
        "builds a store, resolver and target for a front end",
        lambda m: m in {"assembly", "sample"},
    ),
    (
        "store",
        "the sessions root, read-only; the index and the catalog in the cache folder",
        lambda m: m.startswith("store"),
    ),
    ("core", "plain functions and the data they pass: upstream's concepts, one module each", lambda m: True),
)


def summary(path: Path) -> str:
    """The first sentence of a module's docstring, on one line."""
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    paragraph = " ".join(doc.split("\n\n")[0].split())
    match = re.match(r"(.+?[.])(\s|$)", paragraph)
    return (match.group(1) if match else paragraph).rstrip(".")


def modules() -> list[tuple[str, Path]]:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        name = ".".join(relative.with_suffix("").parts)
        found.append((name.removesuffix(".__init__").removesuffix("__init__") or "__init__", path))
    return found


def render() -> str:
    """The map: every module of ``server/dsh_session_reference/`` under its layer."""
    lines = ["```"]
    for title, purpose, member in LAYERS:
        rows = []
        for name, path in modules():
            if name == "__init__" or not member(name) or any(m(name) for _, _, m in LAYERS[: _at(title)]):
                continue
            shown = str(path.relative_to(PACKAGE))
            wrapped = textwrap.wrap(summary(path), WIDTH - NAME_COLUMN - 2) or [""]
            rows.append(f"  {shown:<{NAME_COLUMN - 2}}{wrapped[0]}".rstrip())
            rows.extend(" " * NAME_COLUMN + line for line in wrapped[1:])
        lines.append(f"{title}: {purpose}")
        lines.extend(rows)
        lines.append("")
    lines[-1] = "```"
    return "\n".join(lines)


def _at(title: str) -> int:
    return [name for name, _, _ in LAYERS].index(title)


def current() -> str:
    text = DOC.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    return text[start:end].strip("\n")


def main() -> int:
    text = DOC.read_text(encoding="utf-8")
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    DOC.write_text(text[:start] + "\n" + render() + "\n" + text[end:], encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
