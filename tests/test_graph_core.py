"""The one graph core (okf/graph.py, okf/sections.py): where it lives, what it keeps, its rules.

The walking tools' behaviour is pinned by their goldens and by tests/test_traversal.py and
tests/test_subgraph.py; this module checks the core itself and the layering around it.
"""

from __future__ import annotations

import ast
from pathlib import Path

from bundle_mcp.cancel import CancelToken
from bundle_mcp.derived import GRAPH, of_snapshot
from bundle_mcp.okf.graph import (
    UNBOUNDED,
    BundleGraph,
    EdgeBudget,
    Selection,
    graph_of,
    walk,
)
from bundle_mcp.okf.sections import locator, parse_locator
from bundle_mcp.tools import TOOL_MODULES, expand_neighbors, query_subgraph
from toolcall import run_tool, snapshot_of

SRC = Path(__file__).resolve().parent.parent / "src" / "bundle_mcp"
# The tools the graph core serves (locator: search_sections); they share it, not each other.
GRAPH_TOOLS = ("expand_neighbors", "fetch_slice", "query_subgraph", "search_sections",
               "search_semantic", "visualize_graph")
OUTSIDE_THE_CORE = ("tools", "writes", "dispatch", "server", "surfaces", "stdio", "cli")


def note(body: str = "", extra: str = "") -> str:
    return f"---\ntype: Note\n{extra}---\n{body}"


def _imports(path: Path) -> list[str]:
    """The modules a file imports, relative imports resolved against ``bundle_mcp``."""
    package = path.relative_to(SRC.parent).with_suffix("").parts[:-1]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = list(package[: len(package) - node.level + 1]) if node.level else []
            module = ".".join([*base, *(node.module.split(".") if node.module else [])])
            out.append(module)
            out.extend(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            out.extend(alias.name for alias in node.names)
    return out


def test_the_core_imports_no_tool_write_or_transport_module() -> None:
    for path in sorted((SRC / "okf").glob("*.py")):
        for module in _imports(path):
            parts = module.split(".")
            assert not (parts[0] == "bundle_mcp" and len(parts) > 1
                        and parts[1] in OUTSIDE_THE_CORE), (path.name, module)


def test_no_graph_tool_imports_another_tool() -> None:
    tools = set(TOOL_MODULES)
    for name in GRAPH_TOOLS:
        for module in _imports(SRC / "tools" / f"{name}.py"):
            parts = module.split(".")
            if parts[:2] == ["bundle_mcp", "tools"] and len(parts) > 2:
                assert parts[2] not in tools, (name, module)


def test_one_graph_per_snapshot_under_one_key() -> None:
    snapshot = snapshot_of({"a.md": note("[b](b.md)\n", "tags: [t]\n"), "b.md": note()})
    graph = graph_of(snapshot)
    assert isinstance(graph, BundleGraph) and graph_of(snapshot) is graph
    assert of_snapshot(snapshot, GRAPH, lambda: None) is graph
    run_tool(expand_neighbors, snapshot, {"entity_ids": ["a"]}, CancelToken())
    run_tool(query_subgraph, snapshot, {"seed_ids": ["a"]}, CancelToken())
    assert graph_of(snapshot) is graph  # both tools used the same graph
    # A new snapshot of the same files has its own graph: nothing leaks between snapshots.
    assert graph_of(snapshot_of({"a.md": note(), "b.md": note()})) is not graph


def test_locators_round_trip() -> None:
    for path in ("a.md", "a b.md", "%41.md", "d/é#x.md"):
        written = locator(path, 3, 9)
        parts = parse_locator(written)
        assert parts is not None and (parts.line_start, parts.line_end) == (3, 9)
        assert parts.path_readings()[0] == path
    assert parse_locator("a.md#L0-L1") is None
    assert parse_locator("a.md") is None


def test_a_section_named_like_a_concept_is_no_entity_in_either_walk() -> None:
    files = {
        "a.md": note("pre\n\n# H\n\nx\n"),
        "a.md#L4-L5.md": note("odd\n"),  # a concept ID equal to a's first section's locator
    }
    snapshot = snapshot_of(files)
    graph = graph_of(snapshot)
    assert [s.id for s in graph.sections_of("a")] == ["a.md#L6-L8"]
    assert graph.resolve("a.md#L4-L5", None).section is None  # the concept
    found = run_tool(expand_neighbors, snapshot, {"entity_ids": ["a"]}, CancelToken())
    neighbours = found["neighbors"]
    assert [(n["id"], n["type"]) for n in neighbours] == [("a.md#L6-L8", "section")]
    found = run_tool(query_subgraph,
        snapshot, {"seed_ids": ["a"], "include_relation_types": ["PART_OF"]}, CancelToken()
    )
    assert [o["id"] for o in found["subgraph"]["objects"]] == ["a", "a.md#L6-L8"]


def test_the_budget_policy_is_the_callers() -> None:
    files = {f"n{n}.md": note("".join(f"[x](n{m}.md)\n" for m in range(6))) for n in range(6)}
    snapshot = snapshot_of(files)
    graph = graph_of(snapshot)
    seeds = [graph.concept("n0")]
    selection = Selection.every()
    whole = walk(graph, seeds, selection, 3, UNBOUNDED, CancelToken())
    assert not whole.cut and {f.entity.id for f in whole.found} == {f"n{n}" for n in range(1, 6)}
    capped = walk(graph, seeds, selection, 3, EdgeBudget(3), CancelToken())
    assert capped.cut and len(capped.found) < len(whole.found)
