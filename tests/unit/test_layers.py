"""The house's layers, read from the code's own imports (``docs/architecture.md`` draws them).

core   plain functions and the data they pass (``uri``, ``resolver``, ``analysis``...): imports only core
store  the on-disk reader, the index, the catalog (``store/``): core and store
glue   ``assembly`` (builds store, resolver and target for a front end), ``sample``: core and store
front  ``cli`` (core, glue) and ``lsp/`` (core, glue, lsprotocol, pygls): never each other
main   ``main``, ``__main__``: the program, which alone knows every front end
api    the package itself (``__init__``: the public API and ``__version__``), which anything may import

A module function that imports lazily counts like one at the top; ``if TYPE_CHECKING:`` blocks
do not count for the layers (they are types, not code that runs), but they do for import loops:
two modules that need each other's names, if only to type them, are one module in two files.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import dsh_session_reference

PACKAGE = Path(dsh_session_reference.__file__).parent
NAME = "dsh_session_reference"
GLUE = {"assembly", "sample"}
MAIN = {"main", "__main__"}


def _module(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def _imports(module: str, *, typing: bool = False) -> set[str]:
    """The package's modules ``module`` imports (a name imported from a package counts as the
    module it names when there is one, else as the package); ``typing``: with those it imports
    only under ``if TYPE_CHECKING:``."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: set[str] = set()

    class Visitor(ast.NodeVisitor):
        def visit_If(self, node: ast.If) -> None:
            if not typing and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
                for child in node.orelse:
                    self.visit(child)
                return
            self.generic_visit(node)

        def visit_Import(self, node: ast.Import) -> None:
            for alias in node.names:
                if alias.name.startswith(NAME + "."):
                    found.add(alias.name.removeprefix(NAME + "."))

        def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
            if node.level:
                parts = package.split(".") if package else []
                base = parts[: len(parts) - node.level + 1]
                target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            elif node.module is not None and node.module.startswith(NAME):
                target = node.module.removeprefix(NAME).lstrip(".")
            else:
                return
            for alias in node.names:
                named = f"{target}.{alias.name}" if target else alias.name
                found.add(named if named in MODULES else target)

    Visitor().visit(ast.parse(path.read_text(encoding="utf-8")))
    found.discard(module)
    return {name for name in found if name in MODULES}


GRAPH = {module: _imports(module) for module in MODULES}
TYPED_GRAPH = {module: _imports(module, typing=True) for module in MODULES}


def layer(module: str) -> str:
    head = module.split(".")[0]
    if module == "":
        return "api"
    if module in MAIN:
        return "main"
    if head == "store":
        return "store"
    if head == "lsp":
        return "lsp"
    if module == "cli":
        return "cli"
    if module in GLUE:
        return "glue"
    return "core"


ALLOWED = {
    "core": {"core", "api"},
    "store": {"core", "store", "api"},
    "glue": {"core", "store", "glue", "api"},
    "cli": {"core", "glue", "api"},
    "lsp": {"core", "glue", "lsp", "api"},
    "main": {"core", "store", "glue", "cli", "lsp", "main", "api"},
    "api": {"core", "store", "api"},
}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_each_module_imports_only_its_layer_and_below(module: str) -> None:
    wrong = sorted(name for name in GRAPH[module] if layer(name) not in ALLOWED[layer(module)])
    assert wrong == [], f"{module} ({layer(module)}) imports {wrong}"


def test_there_is_no_import_loop() -> None:
    """Tarjan's strongly connected components of the import graph, ``if TYPE_CHECKING:`` imports
    included: every one a single module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    loops: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for name in sorted(TYPED_GRAPH[module]):
            if name not in index:
                visit(name)
                low[module] = min(low[module], low[name])
            elif name in stack:
                low[module] = min(low[module], index[name])
        if low[module] == index[module]:
            component = []
            while True:
                name = stack.pop()
                component.append(name)
                if name == module:
                    break
            if len(component) > 1:
                loops.append(sorted(component))

    for module in sorted(TYPED_GRAPH):
        if module not in index:
            visit(module)
    assert loops == []


def test_lsp_imports_no_third_party_package_but_lsprotocol_and_pygls() -> None:
    import sys

    for module, path in MODULES.items():
        if layer(module) != "lsp":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            for name in names:
                top = name.split(".")[0]
                # attrs (lsprotocol's own): the one module that keeps the code it compiles for lsprotocol.
                attrs = top == "attr" and module == "lsp.attrs_code"
                assert top in sys.stdlib_module_names or top in {"lsprotocol", "pygls", NAME} or attrs, (
                    module,
                    name,
                )


def test_the_checks_see_a_wrong_import() -> None:
    """The graph is read, not assumed: the CLI's own imports are found."""
    assert "assembly" in GRAPH["cli"] and "lsp.server" in GRAPH["lsp.features"]
    assert "store.jsonl_store" in GRAPH["assembly"]  # imported inside open_source: function bodies count
    assert layer("lsp.server") == "lsp" and "cli" not in ALLOWED["lsp"] and "store" not in ALLOWED["lsp"]


def test_a_module_over_500_lines_says_why_at_its_top() -> None:
    """The house rule: a module past about 500 lines explains itself in its docstring."""
    unexplained = []
    for module, path in MODULES.items():
        text = path.read_text(encoding="utf-8")
        doc = ast.get_docstring(ast.parse(text)) or ""
        if text.count("\n") > 520 and "Over 500 lines because" not in doc:
            unexplained.append(module)
    assert unexplained == []


def test_work_stops_on_one_kind_of_token() -> None:
    """``cancellation.AbortSignal`` is what every layer stops on; a ``threading.Event`` is left only
    where it is no cancellation (the scheduler's quiet/wake conditions, pygls' own stop event)."""
    allowed = {"cancellation", "store.scheduler", "lsp.pygls_patches", "lsp.transport"}
    found = sorted(
        module
        for module, path in MODULES.items()
        if module not in allowed and "threading.Event" in path.read_text(encoding="utf-8")
    )
    assert found == []
