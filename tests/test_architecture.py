"""The import rules of docs/ARCHITECTURE.md, checked by reading the source.

Every module of ``src/bundle_mcp`` belongs to one layer; a layer may import only the layers listed
for it in :data:`ALLOWED`, the layers form no cycle, no import cycle exists between modules, a
tool module never imports another tool module, storage needs nothing outside the package but the
standard library, and the value objects import only the error types. Imports under
``if TYPE_CHECKING:`` are annotations, not dependencies, and are not counted; an import inside a
function is a dependency like any other, so a lazy import that would bend a layer or close a
cycle is caught before anything runs it.
"""

from __future__ import annotations

import ast
import functools
import sys
from collections.abc import Iterator
from pathlib import Path

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
    "bundle_mcp.pieces": "foundation",
    "bundle_mcp.frozen_map": "foundation",
    "bundle_mcp.packed_text": "foundation",
    "bundle_mcp.zstd_frames": "foundation",
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
    "bundle_mcp.stored_answers": "core",
    "bundle_mcp.readiness": "core",
    "bundle_mcp.readers": "core",
    "bundle_mcp.serve_config": "core",
    "bundle_mcp.resources": "surfaces",
    "bundle_mcp.prompts": "surfaces",
    "bundle_mcp.completion": "surfaces",
    "bundle_mcp.surfaces": "surfaces",
    "bundle_mcp.stdio": "surfaces",
    "bundle_mcp.answer_lines": "surfaces",
    "bundle_mcp.handshake": "surfaces",
    "bundle_mcp.wire_lines": "surfaces",
    "bundle_mcp.first_call": "surfaces",
    "bundle_mcp.server": "surfaces",
    "bundle_mcp.rest": "surfaces",
    "bundle_mcp.workers": "surfaces",
    "bundle_mcp.viewer": "viewer",
    "bundle_mcp.cli": "commands",
    "bundle_mcp.validate_cli": "commands",
    "bundle_mcp.cap_options": "commands",
    "bundle_mcp.graph_cli": "commands",
    "bundle_mcp": "commands",  # the package itself re-exports the public API
    "bundle_mcp.vcs": "vcs",
    "bundle_mcp.remote": "remote",
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
    "tools": _BELOW_TOOLS | {"toolspec", "vcs"},
    "core": _BELOW_TOOLS | {"toolspec", "tools", "storage", "loader", "vcs", "remote"},
    "surfaces": _BELOW_TOOLS | {"toolspec", "tools", "storage", "loader", "core", "vcs",
                                "remote"},
    # The viewer reads: never the write modules, the tools or the MCP surfaces.
    "viewer": {"foundation", "model", "derived", "okf", "loader", "validation", "core"},
    "commands": _BELOW_TOOLS | {"toolspec", "tools", "storage", "loader", "core", "surfaces",
                                "viewer", "vcs", "remote"},
    # git, run safely (vcs), and bundles fetched from a git URL or an archive (remote): below
    # the tools, beside storage.
    "vcs": {"foundation"},
    "remote": {"foundation", "storage", "vcs"},
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


def _walk(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, at any depth (inside functions too), but not TYPE_CHECKING's."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.If) and _is_type_checking(child):
            yield from _walk(ast.Module(body=child.orelse, type_ignores=[]))
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            yield child
        else:
            yield from _walk(child)


@functools.cache
def known_modules() -> frozenset[str]:
    return frozenset(module_name(p) for p in SRC.rglob("*.py"))


def imports_in(source: str, module: str, is_package: bool) -> Iterator[str]:
    """Every module the source of ``module`` imports, absolute, ours or not."""
    package = module if is_package else module.rsplit(".", 1)[0]
    known = known_modules()
    for node in _walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
            continue
        if node.level:
            base = package.split(".")[: len(package.split(".")) - node.level + 1]
            stem = ".".join(base + ([node.module] if node.module else []))
        else:
            stem = node.module or ""
        # `from . import x` imports the submodule x when there is one.
        for alias in node.names:
            yield f"{stem}.{alias.name}" if f"{stem}.{alias.name}" in known else stem


def _ours(module: str) -> bool:
    return module == PACKAGE or module.startswith(PACKAGE + ".")


def all_imports_of(path: Path) -> set[str]:
    source = path.read_text(encoding="utf-8")
    return set(imports_in(source, module_name(path), path.name == "__init__.py"))


def imports_of(path: Path) -> set[str]:
    """The bundle_mcp modules the file imports."""
    return {m for m in all_imports_of(path) if _ours(m)}


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for path in sorted((SRC / PACKAGE).rglob("*.py")):
        source = module_name(path)
        edges[source] = imports_of(path) - {source}
    return edges


def find_cycle(edges: dict[str, set[str]]) -> list[str] | None:
    """One import cycle (its modules, the first repeated at the end), or ``None``."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    stack: list[str] = []

    def visit(module: str) -> list[str] | None:
        state[module] = 1
        stack.append(module)
        for target in sorted(edges.get(module, ())):
            if state.get(target) == 1:
                return stack[stack.index(target):] + [target]
            if state.get(target) is None:
                cycle = visit(target)
                if cycle is not None:
                    return cycle
        stack.pop()
        state[module] = 2
        return None

    for module in sorted(edges):
        if module not in state:
            cycle = visit(module)
            if cycle is not None:
                return cycle
    return None


def test_every_module_has_a_layer() -> None:
    for module in graph():
        assert layer_of(module) in ALLOWED, module


def test_each_layer_imports_only_the_layers_below_it() -> None:
    broken = []
    for source, targets in graph().items():
        for target in targets:
            src_layer, dst_layer = layer_of(source), layer_of(target)
            if dst_layer != src_layer and dst_layer not in ALLOWED[src_layer]:
                broken.append(f"{source} ({src_layer}) imports {target} ({dst_layer})")
    assert broken == []


def test_the_layer_rules_themselves_have_no_cycle() -> None:
    layers = {layer: set(below) for layer, below in ALLOWED.items()}
    cycle = find_cycle(layers)
    assert cycle is None, "the layer rules have a cycle: " + " → ".join(cycle or ())


def test_no_import_cycle_between_modules() -> None:
    cycle = find_cycle(graph())
    assert cycle is None, "import cycle: " + " → ".join(cycle or ())


def test_the_reference_parser_imports_neither_fast_path_nor_the_choice() -> None:
    """okf/markdown.py and okf/markdown_fast.py imported each other (one of the imports inside a
    function); the fast path may import the shared rules, never the other way round."""
    imported = graph()[f"{PACKAGE}.okf.markdown"]
    assert {f"{PACKAGE}.okf.markdown_fast", f"{PACKAGE}.okf.markdown_facts"} & imported == set()


def test_a_tool_never_imports_another_tool() -> None:
    tool_modules = {f"{PACKAGE}.tools.{name}" for name in TOOL_MODULES}
    broken = []
    for source, targets in graph().items():
        if source in tool_modules:
            broken += [f"{source} imports {t}" for t in targets & tool_modules]
    assert broken == []


def test_storage_needs_only_the_standard_library_outside_the_package() -> None:
    allowed = set(sys.stdlib_module_names) | {"__future__"}
    broken = []
    for path in sorted((SRC / PACKAGE / "storage").rglob("*.py")):
        foreign = {m.split(".")[0] for m in all_imports_of(path) if not _ours(m)}
        broken += [f"{module_name(path)} imports {m}" for m in sorted(foreign - allowed)]
    assert broken == []


def test_the_value_objects_import_only_the_error_types_and_the_frozen_mapping() -> None:
    """model.py holds no parser: the loader injects how a document's facts are computed. It
    imports the error types, the frozen mapping and the compressed text its documents hold."""
    assert graph()[f"{PACKAGE}.model"] <= {
        f"{PACKAGE}.errors", f"{PACKAGE}.frozen_map", f"{PACKAGE}.packed_text"}


def test_the_checker_sees_a_forbidden_import() -> None:
    """The rules can fail: a tool importing the loader is reported."""
    sample = SRC / PACKAGE / "tools" / "read_concept.py"
    found = imports_of(sample)
    assert f"{PACKAGE}.okf.properties" in found or f"{PACKAGE}.model" in found
    assert "loader" not in ALLOWED["tools"] and "storage" not in ALLOWED["okf"]
    # Storage below loading and writing, the loader below the write path.
    assert ALLOWED["storage"] == {"foundation"} and "writes" not in ALLOWED["loader"]
    assert layer_of(f"{PACKAGE}.loader.capture") == "loader"
    assert layer_of(f"{PACKAGE}.tools.read_concept") == "tools"


def test_the_checker_sees_a_cycle_closed_inside_a_function() -> None:
    """A lazy import is an edge: two modules importing each other, one of them from inside a
    function, are a cycle; an import under TYPE_CHECKING is not an edge."""
    lazy = "def parse():\n    from .fast import parse_fast\n    return parse_fast\n"
    eager = "from .reference import rules\n"
    annotation = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .fast import T\n"
    reference, fast = f"{PACKAGE}.okf.reference", f"{PACKAGE}.okf.fast"
    assert set(imports_in(lazy, reference, False)) == {fast}
    assert set(imports_in(annotation, reference, False)) == {"typing"}
    cycle = find_cycle({reference: set(imports_in(lazy, reference, False)),
                        fast: set(imports_in(eager, fast, False))})
    assert cycle is not None and set(cycle) == {reference, fast}
    assert find_cycle({reference: set(imports_in(annotation, reference, False)) - {"typing"},
                       fast: set(imports_in(eager, fast, False))}) is None
