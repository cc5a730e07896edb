"""The one graph core (okf/graph.py, okf/sections.py): where it lives, what it keeps, its rules.

The walking tools' behaviour is pinned by their goldens and by tests/test_traversal.py and
tests/test_subgraph.py; this module checks the core itself. Its layering (the core imports no
tool, write or transport module; a tool never imports another) is tests/test_architecture.py's.
"""

from __future__ import annotations

from bundle_mcp.cancel import CancelToken
from bundle_mcp.derived import of_snapshot
from bundle_mcp.okf.graph import (
    GRAPH,
    UNBOUNDED,
    BundleGraph,
    EdgeBudget,
    Selection,
    graph_of,
    walk,
)
from bundle_mcp.okf.sections import locator, parse_locator
from bundle_mcp.tools import expand_neighbors, query_subgraph
from toolcall import run_tool, snapshot_of


def note(body: str = "", extra: str = "") -> str:
    return f"---\ntype: Note\n{extra}---\n{body}"


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
