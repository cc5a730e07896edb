"""The import rules of docs/ARCHITECTURE.md, checked by reading the source.

Every module of ``src/bundle_mcp`` belongs to one layer; a layer may import only the layers listed
for it in :data:`ALLOWED`, the layers form no cycle, no module-level import cycle exists between
modules, and a tool module never imports another tool module. Imports under
``if TYPE_CHECKING:`` are annotations, not dependencies, and are not counted; an import inside a
function is a dependency like any other.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Iterator
from pathlib import Path

import pytest

from bundle_mcp.tools import TOOL_MODULES

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "bundle_mcp"

# Which layer each module is in: the longest matching prefix wins.
LAYER_OF_PREFIX: dict[str, str] = {
    "bundle_mcp._version": "foundation",
    "bundle_mcp.limits": "foundation",
    "bundle_mcp.errors": "foundation",
    "bundle_mcp.cancel": "foundation",
    "bundle_mcp.observe": "foundation",
    "bundle_mcp.model": "model",
    "bundle_mcp.okf": "okf",
    "bundle_mcp.storage": "storage",
    "bundle_mcp.loader": "loader",
    "bundle_mcp.validation": "validation",
    "bundle_mcp.semantic": "semantic",
    "bundle_mcp.export": "export",
    "bundle_mcp.derived": "derived",
    "bundle_mcp.writes": "writes",
    "bundle_mcp.toolspec": "toolspec",
    "bundle_mcp.tools": "tools",
    "bundle_mcp.contracts": "core",
    "bundle_mcp.snapshots": "core",
    "bundle_mcp.dispatch": "core",
    "bundle_mcp.readiness": "core",
    "bundle_mcp.readers": "core",
    "bundle_mcp.resources": "surfaces",
    "bundle_mcp.prompts": "surfaces",
    "bundle_mcp.completion": "surfaces",
    "bundle_mcp.surfaces": "surfaces",
    "bundle_mcp.stdio": "surfaces",
    "bundle_mcp.server": "surfaces",
    "bundle_mcp.rest": "surfaces",
    "bundle_mcp.workers": "surfaces",
    "bundle_mcp.viewer": "viewer",
    "bundle_mcp.cli": "commands",
    "bundle_mcp.validate_cli": "commands",
    "bundle_mcp.graph_cli": "commands",
    "bundle_mcp": "commands",  # the package itself re-exports the public API
}

_BELOW_TOOLS = {
    "foundation", "model", "derived", "okf", "validation", "semantic", "writes", "export",
}

# The layers each layer may import (besides itself), lowest first.
ALLOWED: dict[str, set[str]] = {
    "foundation": set(),
    "model": {"foundation"},
    "derived": {"foundation", "model"},
    "okf": {"foundation", "model", "derived"},
    "storage": {"foundation"},
    "loader": {"foundation", "model", "derived", "okf", "storage"},
    "validation": {"foundation", "model", "derived", "okf", "loader"},
    "semantic": {"foundation", "model", "okf"},
    "export": {"foundation", "model", "derived", "okf"},
    "writes": {"foundation", "model", "derived", "okf", "storage", "loader", "validation"},
    "toolspec": {"foundation", "model", "okf", "semantic"},
    "tools": _BELOW_TOOLS | {"toolspec"},
    "core": _BELOW_TOOLS | {"toolspec", "tools", "storage", "loader"},
    "surfaces": _BELOW_TOOLS | {"toolspec", "tools", "storage", "loader", "core"},
    # The viewer reads: never the write modules, the tools or the MCP surfaces.
    "viewer": {"foundation", "model", "derived", "okf", "loader", "validation", "core"},
    "commands": _BELOW_TOOLS | {"toolspec", "tools", "storage", "loader", "core", "surfaces",
                                "viewer"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    best = max((p for p in LAYER_OF_PREFIX if module == p or module.startswith(p + ".")), key=len)
    return LAYER_OF_PREFIX[best]


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk(node: ast.AST, top: bool) -> Iterator[tuple[ast.Import | ast.ImportFrom, bool]]:
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            yield from _walk(ast.Module(body=child.orelse, type_ignores=[]), top)
            continue
        if isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child, top
            continue
        inner = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        yield from _walk(child, inner)


@functools.cache
def known_modules() -> frozenset[str]:
    return frozenset(module_name(p) for p in SRC.rglob("*.py"))


def imports_of(path: Path) -> Iterator[tuple[str, bool]]:
    """(imported bundle_mcp module, at module level?) for each import of the file."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    known = known_modules()
    for node, top in _walk(ast.parse(path.read_text(encoding="utf-8")), True):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        else:
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                stem = ".".join(base + ([node.module] if node.module else []))
            else:
                stem = node.module or ""
            # `from . import x` imports the submodule x when there is one.
            targets = [
                f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in known else stem
                for alias in node.names
            ]
        for target in targets:
            if target == PACKAGE or target.startswith(PACKAGE + "."):
                yield target, top


def graph(top_only: bool) -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        source = module_name(path)
        edges[source] = {t for t, top in imports_of(path) if top or not top_only} - {source}
    return edges


def test_every_module_has_a_layer() -> None:
    for module in graph(top_only=False):
        assert layer_of(module) in ALLOWED, module


def test_each_layer_imports_only_the_layers_below_it() -> None:
    broken = []
    for source, targets in graph(top_only=False).items():
        for target in targets:
            src_layer, dst_layer = layer_of(source), layer_of(target)
            if dst_layer != src_layer and dst_layer not in ALLOWED[src_layer]:
                broken.append(f"{source} ({src_layer}) imports {target} ({dst_layer})")
    assert broken == []


def test_the_layer_rules_themselves_have_no_cycle() -> None:
    seen: dict[str, int] = {}

    def visit(layer: str) -> None:
        if seen.get(layer) == 1:
            pytest.fail(f"the layer rules have a cycle through {layer}")
        if seen.get(layer) == 2:
            return
        seen[layer] = 1
        for below in ALLOWED[layer]:
            visit(below)
        seen[layer] = 2

    for layer in ALLOWED:
        visit(layer)


def test_no_module_level_import_cycle() -> None:
    edges = graph(top_only=True)
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(edges.get(module, ())):
            if state.get(target) == 1:
                cycle = stack[stack.index(target):] + [target]
                pytest.fail("import cycle: " + " → ".join(cycle))
            if state.get(target) is None:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in sorted(edges):
        if module not in state:
            visit(module)


def test_a_tool_never_imports_another_tool() -> None:
    tool_modules = {f"{PACKAGE}.tools.{name}" for name in TOOL_MODULES}
    broken = []
    for source, targets in graph(top_only=False).items():
        if source in tool_modules:
            broken += [f"{source} imports {t}" for t in targets & tool_modules]
    assert broken == []


def test_the_model_imports_nothing_but_the_foundation() -> None:
    targets = graph(top_only=False)[f"{PACKAGE}.model"]
    assert {layer_of(t) for t in targets} <= {"foundation"}, sorted(targets)


def test_the_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The rules can fail: a tool importing the loader is reported."""
    sample = SRC / PACKAGE / "tools" / "read_concept.py"
    found = {t for t, _ in imports_of(sample)}
    assert f"{PACKAGE}.okf.properties" in found or f"{PACKAGE}.model" in found
    assert "loader" not in ALLOWED["tools"] and "storage" not in ALLOWED["okf"]
    assert layer_of(f"{PACKAGE}.loader.capture") == "loader"
    assert layer_of(f"{PACKAGE}.tools.read_concept") == "tools"
