"""Each LSP feature's declared contract is what its code does (``lsp/contract.py``).

A feature declares the services it reads (``uses``); these tests read each feature's module and
fail when it touches a member it did not declare, declares one it does not touch, reaches past
the services into the server module, or is missing from docs/architecture.md's table of feature
contracts. What a feature registers is declared by its ``handlers`` and ``commands`` themselves:
the server built from them answers exactly those, each once.
"""

from __future__ import annotations

import ast
import inspect
import re
import sys
from pathlib import Path

import pytest

from dsh_session_reference.lsp.contract import Feature, Services
from dsh_session_reference.lsp.features import FEATURES, create_server
from dsh_session_reference.lsp.server import DshLanguageServer

DOC = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"
SERVICES = {
    name
    for klass in Services.__mro__
    if klass.__module__.startswith("dsh_session_reference")
    for name in [*getattr(klass, "__annotations__", {}), *vars(klass)]
    if not name.startswith("_")
}


def _module_source(kind: type[Feature]) -> ast.Module:
    return ast.parse(Path(inspect.getfile(sys.modules[kind.__module__])).read_text(encoding="utf-8"))


def _services_read(tree: ast.Module) -> set[str]:
    """Members read of the services: ``self.ls.X``, and ``ls.X`` where ``ls`` is the services
    (a handler's parameter, or ``ls = self.ls``)."""
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Attribute):
            continue
        owner = node.value
        named_ls = isinstance(owner, ast.Name) and owner.id == "ls"
        self_ls = (
            isinstance(owner, ast.Attribute)
            and owner.attr == "ls"
            and isinstance(owner.value, ast.Name)
            and owner.value.id == "self"
        )
        if named_ls or self_ls:
            found.add(node.attr)
    return found


def _one_feature_per_module() -> None:
    modules = [kind.__module__ for kind in FEATURES]
    assert len(modules) == len(set(modules)), modules


@pytest.mark.parametrize("kind", FEATURES, ids=lambda kind: kind.__name__)
def test_a_feature_reads_exactly_the_services_it_declares(kind: type[Feature]) -> None:
    _one_feature_per_module()
    assert _services_read(_module_source(kind)) == set(kind.uses)
    assert set(kind.uses) <= SERVICES, set(kind.uses) - SERVICES


@pytest.mark.parametrize("kind", FEATURES, ids=lambda kind: kind.__name__)
def test_a_feature_sees_the_server_only_through_its_services(kind: type[Feature]) -> None:
    """No feature module imports the server's module: what it may use is :class:`Services`."""
    imported = set()
    for node in ast.walk(_module_source(kind)):
        if isinstance(node, ast.ImportFrom):
            imported.add((node.level, node.module))
    package_level = kind.__module__.count(".") - 1  # dots from the feature's package up to lsp/
    assert (package_level, "server") not in imported, kind.__module__


def test_the_checks_see_an_undeclared_read() -> None:
    """The reader is not blind: it finds ``ls.X`` and ``self.ls.X`` in code."""
    tree = ast.parse(
        "def f(ls):\n    ls.documents\nclass A:\n    def g(self):\n        self.ls.engine.resolver\n"
    )
    assert _services_read(tree) == {"documents", "engine"}


def test_every_method_and_command_is_registered_once_by_its_feature() -> None:
    server = create_server()
    assert [type(feature) for feature in server.features] == list(FEATURES)
    methods = [handler.method for feature in server.features for handler in feature.handlers()]
    commands = [name for feature in server.features for name in feature.commands()]
    assert len(methods) == len(set(methods)) and len(commands) == len(set(commands))
    registered = server.protocol.fm
    assert set(methods) <= set(registered.features)
    assert set(commands) == set(registered.commands)


def test_the_server_keeps_no_state_of_a_feature() -> None:
    """What a completion or a diagnostics push keeps lives on its feature, not the server."""
    server = create_server()
    names = set(vars(server))
    assert not names & {"pending_listing", "_completions", "_pending"}
    assert not any(
        name.startswith(("begin_completion", "schedule_publish")) for name in dir(DshLanguageServer)
    )


def test_the_architecture_doc_lists_each_feature_with_what_it_registers() -> None:
    text = DOC.read_text(encoding="utf-8")
    section = text[text.index("## Feature contracts") :]
    section = section[: section.index("\n## ", 1)]
    rows = {
        match.group(1): line
        for line in section.splitlines()
        if (match := re.match(r"\| `(\w+)` ", line)) is not None
    }
    server = create_server()
    assert set(rows) == {type(feature).__name__ for feature in server.features}
    for feature in server.features:
        row = rows[type(feature).__name__]
        named = (
            [handler.method for handler in feature.handlers()]
            + list(feature.commands())
            + sorted(feature.uses)
        )
        assert [name for name in named if f"`{name}`" not in row] == [], type(feature).__name__
