"""visualize_graph's Mermaid: structural checks always, and the real Mermaid parser when it can be
installed.

The real check (tests/mermaid_harness.py, shared with tests/test_graph_export.py) installs
``mermaid`` and ``jsdom`` from the npm registry into a temporary folder (about 30 s) and runs
``mermaid.parse`` under Node on every diagram the tests draw. It is skipped, saying why, when node
or npm is missing or the install fails (offline). Set ``BUNDLE_MCP_MERMAID_PREFIX`` to a folder
that already holds both packages to reuse an install.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_mcp.cancel import CancelToken
from bundle_mcp.export.mermaid import MAX_TEXT_SIZE, cut, escape, text_size
from bundle_mcp.loader import load_bundle
from bundle_mcp.model import Snapshot
from bundle_mcp.tools import visualize_graph
from bundle_mcp.tools._extraction import extract
from bundle_mcp.tools._walk_params import parse_query
from bundle_mcp.tools.visualize_graph import DiagramBudget, mermaid
from mermaid_harness import parse_all
from toolcall import run_tool, snapshot_of

REPO = Path(__file__).resolve().parent.parent
GRAPH = os.path.realpath(REPO / "testdata" / "bundles" / "subgraph-graph")
GOLDEN = REPO / "tests" / "golden" / "visualize_graph"

NASTY = [
    'Beta [v2] | "quoted"',
    "Leaf <html> & {braces} `tick` #hash; semi",
    "🚀 Launch\nשלום | end",
    "line\r\nbreak\u2028and\u2029more\x00nul\x85nel\ttab",
    "#quot; already an entity #35;",
    "end",
    "graph TD",
    "a --> b",
    "-->|x| n1",
    "%% not a comment",
    "click n0 callback",
    "style n0 fill:#f00",
    "((round)) [[sub]] {{hex}} >flag] ([stadium])",
    "back\\slash",
    "عربى RTL ‮override‬",
    "zero\u200bwidth",
    "",
    " ",
    "x" * 300,
]

_NODE = re.compile(r'^    n(\d+)\["([^"\n\r]*)"\]$')
_EDGE = re.compile(r'^    (n\d+) -->\|"([^"\n\r]*)"\| (n\d+)$')
_RISKY = set('"<>|[]{}`;&')
_ENTITY = re.compile(r"#(?:[a-z]+|[0-9]+);")


def compact_graph(titles: list[str], types: list[str] | None = None) -> dict[str, Any]:
    kinds = types or ["Note"] * len(titles)
    nodes = [
        {"id": f"id-{i}", "type": kind, "name": title, "props": {}}
        for i, (title, kind) in enumerate(zip(titles, kinds, strict=True))
    ]
    edges = [
        {"source": f"id-{i}", "target": f"id-{(i + 1) % len(titles)}", "type": kind or "LINKS_TO"}
        for i, kind in enumerate(kinds)
    ]
    return {"nodes": nodes, "edges": edges}


def check_structure(text: str) -> None:
    """The shape every diagram must have, whatever the titles."""
    lines = text.split("\n")
    assert lines[0] == "graph TD"
    aliases: list[str] = []
    seen_edge = False
    for line in lines[1:]:
        node = _NODE.match(line)
        if node:
            assert not seen_edge  # every node line comes before the edges
            assert int(node.group(1)) == len(aliases)  # n0, n1, ... in order
            aliases.append(f"n{node.group(1)}")
            check_label(node.group(2))
            continue
        edge = _EDGE.match(line)
        assert edge, f"not a node or edge line: {line!r}"
        seen_edge = True
        assert edge.group(1) in aliases and edge.group(3) in aliases
        check_label(edge.group(2))


def check_label(label: str) -> None:
    bare = _ENTITY.sub("", label)  # every '#' and ';' left must belong to an entity code
    assert not any(c in _RISKY or c == "#" for c in bare)
    assert not re.search(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]", label)


# -- always on -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def graph() -> Snapshot:
    snapshot, _ = load_bundle(GRAPH)
    return snapshot


def test_escape_uses_entity_codes_and_removes_breaks() -> None:
    assert escape('a "b" #c') == "a #quot;b#quot; #35;c"
    assert escape("<>&|[]{}`;") == "#lt;#gt;#amp;#124;#91;#93;#123;#125;#96;#59;"
    assert escape("x\ny\rz\tw\u2028v") == "x y z w v"
    assert escape("#quot;") == "#35;quot#59;"  # an entity in a title is shown, not decoded
    assert escape("🚀 שלום") == "🚀 שלום"


def test_cut_marks_what_it_cuts() -> None:
    assert cut("short", 80) == "short"
    long = "word " * 40
    cut_text = cut(long, 80)
    assert len(cut_text) <= 80 and cut_text.endswith("…")
    assert cut("x" * 100, 10) == "x" * 9 + "…"


def test_nasty_titles_keep_the_structure() -> None:
    text = mermaid(
        compact_graph(NASTY, [*["Note", "", "Run|book"] * 7][: len(NASTY)]), CancelToken()
    )
    check_structure(text)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.text(max_size=40), min_size=1, max_size=6),
    st.lists(st.text(max_size=10), min_size=6, max_size=6),
)
def test_any_title_keeps_the_structure(titles: list[str], kinds: list[str]) -> None:
    check_structure(mermaid(compact_graph(titles, kinds[: len(titles)]), CancelToken()))


def test_tool_output_is_structurally_valid(graph: Snapshot) -> None:
    for params in (
        {},
        {"seed_ids": ["hub"], "depth": 3},
        {"seed_ids": ["e/leaf", "b", "f"], "depth": 0},
        {"seed_ids": ["a"], "include_relation_types": ["PART_OF", "calls"]},
    ):
        check_structure(run_tool(visualize_graph, graph, params, CancelToken())["mermaid"])


def test_no_seeds_lists_first_concepts_by_id_at_depth_0(graph: Snapshot) -> None:
    result = run_tool(visualize_graph, graph, {"depth": 3, "max_objects": 2}, CancelToken())
    assert result["applied"]["depth"] == 0
    assert result["mermaid"].split("\n")[1:3] == [
        '    n0["Alpha (Service)"]',
        '    n1["Beta #91;v2#93; #124; #quot;quoted#quot; (Table)"]',
    ]
    assert (result["total_found_nodes"], result["returned_nodes"]) == (8, 2)
    assert result["truncation_reason"] == "max_objects"


def test_empty_diagram_is_just_the_header(graph: Snapshot) -> None:
    result = run_tool(visualize_graph, graph, {"seed_ids": ["missing"]}, CancelToken())
    assert result["mermaid"] == "graph TD"
    assert result["unresolved"] == ["missing"]


# -- the real parser (the mermaid_parser fixture: conftest.py, tests/mermaid_harness.py) ------


def test_mermaid_parses_every_diagram(mermaid_parser: Path, graph: Snapshot) -> None:
    texts = [
        json.loads(p.read_text("utf-8"))["expected"]["structured"].get("mermaid")
        for p in sorted(GOLDEN.glob("*.json"))
    ]
    texts = [t for t in texts if t is not None]
    texts.append(mermaid(compact_graph(NASTY), CancelToken()))
    texts += [mermaid(compact_graph([title], ["Ty|pe]"]), CancelToken()) for title in NASTY]
    for params in (
        {},
        {"seed_ids": ["hub"], "depth": 3},
        {"seed_ids": ["a"], "include_relation_types": ["PART_OF", "calls"]},
        {"seed_ids": ["island"], "include_relation_types": ["SHARES_COMMUNITY"]},
    ):
        texts.append(run_tool(visualize_graph, graph, params, CancelToken())["mermaid"])
    results = parse_all(mermaid_parser, texts)
    failures = [(t, r) for t, r in zip(texts, results, strict=True) if not r["ok"]]
    assert failures == []
    assert {r["type"] for r in results} == {"flowchart-v2"}


def test_the_parser_check_catches_a_broken_label(mermaid_parser: Path) -> None:
    """The check is not vacuous: an unescaped quote in a label fails to parse."""
    (result,) = parse_all(mermaid_parser, ['graph TD\n    n0["a " b"]'])
    assert not result["ok"]


# -- Mermaid's default limits (500 edges, 50,000 UTF-16 units) --------------------------------


def dense_bundle(count: int) -> Snapshot:
    """``count`` concepts, each linking every other one: count * (count - 1) relations."""
    names = [f"c{i:03d}" for i in range(count)]
    return snapshot_of({
        f"{name}.md": f"---\ntype: Note\ntitle: {name}\n---\n# {name}\n\n"
        + " ".join(f"[{other}]({other}.md)" for other in names if other != name) + "\n"
        for name in names
    })


def quoted_titles_bundle(count: int) -> Snapshot:
    """``count`` unlinked concepts whose 80-character titles escape to six times their length,
    one emoji each (two UTF-16 units)."""
    title = "🚀" + '\\"' * 79
    return snapshot_of({
        f"q{i:03d}.md": f'---\ntype: Note\ntitle: "{title}"\n---\n# Q\n' for i in range(count)
    })


def output_schema() -> dict[str, Any]:
    path = REPO / "contracts" / "visualize_graph.output.schema.json"
    return dict(json.loads(path.read_text("utf-8")))


def test_text_size_counts_utf16_units() -> None:
    assert text_size("graph TD") == 8
    assert text_size("🚀 שלום") == 7  # the rocket is a surrogate pair in JavaScript


def test_the_diagram_keeps_to_mermaids_edge_limit() -> None:
    snapshot = dense_bundle(40)  # 1,560 relations among the first 200 objects
    result = run_tool(visualize_graph, snapshot, {"max_objects": 200, "max_tokens": 100_000})
    lines = result["mermaid"].split("\n")
    nodes = [line for line in lines if _NODE.match(line)]
    edges = [line for line in lines if _EDGE.match(line)]
    # 22 mutually linked objects bring 462 edges; a 23rd would bring 44 more (506 > 500), and
    # so would every later one: none is drawn with some of its edges left out.
    assert (len(nodes), len(edges)) == (22, 22 * 21)
    assert result["returned_nodes"] == 22 and result["total_found_nodes"] == 40
    assert result["is_truncated"] and result["truncation_reason"] == "mermaid_limits"
    assert result["suggested_next_seed"] == "c022"
    jsonschema.validate(result, output_schema())


def test_the_diagram_keeps_to_mermaids_text_size() -> None:
    snapshot = quoted_titles_bundle(200)
    result = run_tool(visualize_graph, snapshot, {"max_objects": 200, "max_tokens": 100_000})
    text = result["mermaid"]
    assert text_size(text) <= MAX_TEXT_SIZE < text_size(text) + text_size(text.split("\n")[1]) + 1
    assert result["truncation_reason"] == "mermaid_limits"
    assert result["returned_nodes"] == len(text.split("\n")) - 1 < 200
    check_structure(text)
    jsonschema.validate(result, output_schema())


def test_a_smaller_budget_is_priced_exactly() -> None:
    """The budget prices each line as mermaid() writes it: its running figures are the
    diagram's own, to the unit, and the other budgets still come first."""
    snapshot = dense_bundle(12)
    query = parse_query({"max_objects": 200, "max_tokens": 100_000}, seeds=None,
                        default_depth=1, default_max_objects=20, compact=True)
    for max_edges, max_size in ((0, 10_000), (7, 10_000), (50, 10_000), (1_000, 300),
                                (1_000, 10_000)):
        budget = DiagramBudget(max_edges, max_size)
        found = extract(snapshot, query, CancelToken(), budget)
        text = mermaid(found.subgraph, CancelToken())
        assert budget.size == text_size(text) <= max_size
        assert budget.edges == len(found.subgraph["edges"]) <= max_edges
        limited = found.returned < 12
        assert found.truncation_reason == ("mermaid_limits" if limited else None)
    small = parse_query({"max_objects": 3}, seeds=None, default_depth=1, default_max_objects=20,
                        compact=True)
    found = extract(snapshot, small, CancelToken(), DiagramBudget(1_000, 10_000))
    assert found.truncation_reason == "max_objects"


def test_mermaid_parses_a_diagram_at_the_limits(mermaid_parser: Path) -> None:
    texts = [
        run_tool(visualize_graph, dense_bundle(40), {"max_objects": 200, "max_tokens": 100_000})[
            "mermaid"],
        run_tool(visualize_graph, quoted_titles_bundle(200),
                 {"max_objects": 200, "max_tokens": 100_000})["mermaid"],
    ]
    results = parse_all(mermaid_parser, texts)
    assert [r["ok"] for r in results] == [True, True], results
