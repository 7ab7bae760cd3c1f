"""docs/architecture.md's module map is what ``scripts/architecture.py`` makes of the code."""

from __future__ import annotations

import importlib.util
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "architecture.py"


def _architecture() -> object:
    spec = importlib.util.spec_from_file_location("architecture", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_map_names_every_module_as_its_docstring_does() -> None:
    architecture = _architecture()
    expected = architecture.render()  # type: ignore[attr-defined]
    assert architecture.current() == expected, "run: python scripts/architecture.py"  # type: ignore[attr-defined]


def test_every_module_is_on_the_map() -> None:
    """Said separately from the whole-map check, so a module added without regenerating the map is
    named in the failure."""
    architecture = _architecture()
    shown = architecture.current()  # type: ignore[attr-defined]
    package = architecture.PACKAGE  # type: ignore[attr-defined]
    missing = [
        str(path.relative_to(package))
        for path in package.rglob("*.py")
        if path.relative_to(package) != Path("__init__.py") and f"  {path.relative_to(package)} " not in shown
    ]
    assert missing == []
