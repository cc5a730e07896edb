"""``bundle-mcp graph``: each format checked by the tool that consumes it.

- DOT: Graphviz ``dot -Tsvg`` renders it, and the SVG names every node by its ID (skipped, saying
  why, when ``dot`` is not installed: ``apt-get install graphviz``; .ci/run installs it);
- N-Triples and JSON-LD: rdflib parses both, and the two triple sets are equal;
- GraphML: ``networkx.read_graphml`` reads it with the export's node and edge counts;
- Mermaid: the real ``mermaid.parse`` under jsdom (tests/mermaid_harness.py; skipped when node,
  npm or the registry is missing).

On the example bundle, on a fixed bundle of awkward names (quotes, brackets, ``<&>``, '#', '%',
Unicode, RTL, a NUL in a title, tags that look like IDs), and on generated bundles (hypothesis,
bounded; the long run is marked slow). Also: the filters, seeds and depth, the budget (refused,
never cut), the parse policy, byte-identical output across runs, and that the default base IRI
names concepts as get_semantic_graph does.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from bundle_mcp import graph_cli
from bundle_mcp.cancel import CancelToken
from bundle_mcp.cli import main
from bundle_mcp.export import FORMATS, Rendering, mermaid, render
from bundle_mcp.export.dot import render as dot_render
from bundle_mcp.export.graph import (
    DEFAULT_MAX_NODES,
    ExportGraph,
    GraphEdge,
    GraphQuery,
    Node,
    OverBudget,
    SelectionError,
    select,
    tag_id,
)
from bundle_mcp.export.rdf import BUNDLE_BASE, OKF_VOCAB, RELATION_VOCAB, base_iri_problem
from bundle_mcp.loader import load_bundle
from bundle_mcp.model import Snapshot
from bundle_mcp.okf.graph import field_edges
from bundle_mcp.tools import get_semantic_graph
from mermaid_harness import parse_all
from toolcall import run_tool, snapshot_of

# rdflib's JSON-LD parser builds a ConjunctiveGraph internally, which rdflib 7 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:ConjunctiveGraph is deprecated:DeprecationWarning")

rdflib = pytest.importorskip("rdflib", reason="rdflib comes with the dev extra")
nx = pytest.importorskip("networkx", reason="networkx comes with the dev extra")

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = os.path.realpath(REPO / "examples" / "coffee-roastery")
DOT = shutil.which("dot")
needs_dot = pytest.mark.skipif(
    DOT is None, reason="Graphviz `dot` is not installed (apt-get install graphviz)"
)
BundleFactory = Callable[[Mapping[str, str | bytes]], str]


def _examples() -> int:
    try:
        return settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev")).max_examples
    except InvalidArgument:  # the profiles are registered by another test module
        return 50


EXAMPLES = _examples()

INDEX = '---\nokf_version: "0.2"\n---\n# Index\n'


def concept(fm: Mapping[str, Any], body: str) -> str:
    # JSON is YAML: every string is written as a double-quoted scalar, whatever it holds.
    lines = [f"{key}: {json.dumps(value, ensure_ascii=False)}" for key, value in fm.items()]
    return "---\n" + "\n".join(lines) + "\n---\n" + body


def link(path: str) -> str:
    """A bundle-rooted Markdown link destination for ``path``, percent-encoded."""
    return "/" + quote(path)


AWKWARD_TITLE = 'He said "hi" \\N <b>&amp;</b> {x} [y] |z| `t` #35; ;\nsecond\tline \0 nul'
AWKWARD_TAGS = ['a"b', "back\\slash", "100%", "café", "tag:x", "new\nline", "🚀", "<&>"]
QUOTED = 'odd/quote"d [v2] <&>'
AWKWARD: dict[str, str] = {
    "index.md": INDEX,
    f"{QUOTED}.md": concept(
        {"type": 'Ty|pe "x"', "title": AWKWARD_TITLE, "tags": AWKWARD_TAGS},
        f"# Heading one\n\nText [plain]({link('plain.md')}).\n\n## Second\n\nMore.\n",
    ),
    "plain.md": concept(
        {
            "type": "Note",
            "tags": ["café"],
            "relations": {
                "calls": [{"target": "odd/hash\\#name#part"}],
                "LINKS_TO": [{"target": "report"}],
            },
        },
        f"# Plain\n\n[self]({link('plain.md')}) [odd]({link(QUOTED + '.md')}) "
        f"[cafe]({link('odd/café 🚀.md')})\n",
    ),
    "odd/café 🚀.md": concept({"type": "Note", "title": "שלום \u202eoverride\u202c"}, "# Café\n"),
    "odd/hash#name.md": concept({"type": "Note"}, "# Hash\n"),
    "odd/100% sure.md": concept({"type": "note"}, "# Sure\n"),
    "report.md": concept({"type": "Report", "resource": "plain.md"}, "# Report\n"),
    # Locators that start with '%' (Graphviz's own prefix for anonymous names), and a concept ID.
    "日本語.md": concept({"type": "Note"}, "# 一\n\nA.\n\n## 二\n\nB.\n"),
    "%lead.md": concept({"type": "Note"}, f"# Lead\n\n[x]({link('日本語.md')})\n"),
}


# -- helpers ---------------------------------------------------------------------------------


def selected(snapshot: Snapshot, **query: Any) -> ExportGraph:
    return select(snapshot, GraphQuery(**query), CancelToken())


def every_format(graph: ExportGraph, base: str = BUNDLE_BASE) -> dict[str, str]:
    return {name: render(graph, Rendering(name, base)) for name in FORMATS}


def run_cli(*argv: str) -> tuple[int, bytes, str]:
    parser = argparse.ArgumentParser(prog="bundle-mcp graph")
    graph_cli.add_arguments(parser)
    out, err = io.BytesIO(), io.StringIO()
    code = graph_cli.run(parser.parse_args(list(argv)), out, err)
    return code, out.getvalue(), err.getvalue()


def exported(*argv: str) -> dict[str, Any]:
    code, out, err = run_cli(*argv, "--format", "json")
    assert code == 0, err
    result: dict[str, Any] = json.loads(out)
    return result


def expected_triples(graph: ExportGraph, base: str = BUNDLE_BASE) -> int:
    """How many triples the RDF formats must state, counted from the selection itself."""
    count = 0
    for node in graph.nodes:
        count += 2  # rdf:type, rdfs:label
        if node.kind == "concept":
            count += 2 + (1 if node.type else 0)  # conceptId, path, type
        elif node.kind == "section":
            count += 3  # path, lineStart, lineEnd
    predicates = {(e.source, e.kind == "relation", e.type, e.target) for e in graph.edges}
    return count + len(predicates)


def check_rdf(graph: ExportGraph, base: str = BUNDLE_BASE) -> set[Any]:
    """rdflib reads both RDF formats, and they state the same, expected, triples."""
    nt = render(graph, Rendering("ntriples", base))
    jsonld = render(graph, Rendering("json-ld", base))
    from_nt = rdflib.Graph().parse(data=nt, format="nt")
    from_jsonld = rdflib.Graph().parse(data=jsonld, format="json-ld")
    triples = set(from_nt)
    assert triples == set(from_jsonld)
    assert len(triples) == expected_triples(graph, base)
    # Every node is a subject under its class, and every title survives as its label.
    label = rdflib.RDFS.label
    labels = {str(o) for s, p, o in triples if p == label}
    assert labels == {n.title for n in graph.nodes}
    return triples


_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def check_graphml(graph: ExportGraph) -> None:
    text = render(graph, Rendering("graphml"))
    read = nx.read_graphml(io.BytesIO(text.encode("utf-8")))
    assert read.is_directed()
    assert read.number_of_nodes() == len(graph.nodes)
    assert read.number_of_edges() == len(graph.edges)
    for node in graph.nodes:
        data = read.nodes[node.id]
        assert data["kind"] == node.kind
        assert data["title"] == _NOT_XML.sub("\ufffd", node.title)
        if node.lines is not None:
            assert (data["line_start"], data["line_end"]) == node.lines
    got = sorted((u, v, d["kind"], d["type"]) for u, v, d in read.edges(data=True))
    assert got == sorted((e.source, e.target, e.kind, e.type) for e in graph.edges)


def check_dot(graph: ExportGraph) -> str:
    """``dot -Tsvg`` renders the DOT, and the SVG names each node by its ID."""
    assert DOT is not None
    done = subprocess.run(
        [DOT, "-Tsvg"], input=dot_render(graph).encode("utf-8"), capture_output=True,
        timeout=60, check=False,
    )
    assert done.returncode == 0, done.stderr.decode("utf-8", "replace")[-2000:]
    svg = done.stdout.decode("utf-8")
    # Each node is drawn once, under its name (its ID; '/' before a '%', which Graphviz
    # reserves), with the ID as its tooltip, and each edge once.
    names = {n.id: ("/" + n.id if n.id.startswith("%") else n.id) for n in graph.nodes}
    titles = _svg_titles(svg)
    assert set(names.values()) <= titles
    assert svg.count('class="node"') == len(graph.nodes)
    assert svg.count('class="edge"') == len(graph.edges)
    edge_titles = {f"{names[e.source]}->{names[e.target]}" for e in graph.edges}
    assert edge_titles <= titles
    return svg


def _svg_titles(svg: str) -> set[str]:
    import html

    return {html.unescape(t) for t in re.findall(r"<title>([^<]*)</title>", svg)}


def check_plain(graph: ExportGraph) -> None:
    data = json.loads(render(graph, Rendering("json")))
    assert [n["id"] for n in data["nodes"]] == [n.id for n in graph.nodes]
    ids = {n["id"] for n in data["nodes"]}
    assert len(ids) == len(data["nodes"])
    assert all(e["source"] in ids and e["target"] in ids for e in data["edges"])
    assert data["meta"]["node_count"] == len(graph.nodes)
    assert data["meta"]["edge_count"] == len(graph.edges)


def oracle_edges(snapshot: Snapshot) -> set[tuple[str, str, str, str]]:
    """The concept edges, read from the snapshot's own edges and field edges (not the walk)."""
    found = set()
    for edge in snapshot.edges:
        name = "LINKS_TO" if edge.kind == "navigation" else edge.relation_type or ""
        found.add((edge.source_id, edge.target_id, edge.kind, name))
    for edges in field_edges(snapshot).values():
        found.update((e.source_id, e.target_id, "field", e.relationship) for e in edges)
    return found


def edge_tuples(graph: ExportGraph, *kinds: str) -> set[tuple[str, str, str, str]]:
    return {(e.source, e.target, e.kind, e.type) for e in graph.edges if e.kind in kinds}


# -- the example bundle ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def example() -> Snapshot:
    snapshot, _ = load_bundle(EXAMPLE)
    return snapshot


@pytest.fixture(scope="module")
def awkward(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = Path(os.path.realpath(tmp_path_factory.mktemp("awkward")))
    for relative, text in AWKWARD.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="utf-8")
    return str(root)


def test_the_example_is_the_graph_the_tools_walk(example: Snapshot) -> None:
    graph = selected(example)
    assert [n.id for n in graph.nodes] == sorted(example.concepts)
    assert edge_tuples(graph, "navigation", "relation", "field") == oracle_edges(example)
    assert {e.kind for e in graph.edges} == {"navigation", "relation", "field"}
    assert graph.counts() == {"concept": len(example.concepts), "section": 0, "tag": 0}


def test_the_example_in_every_consumer(example: Snapshot) -> None:
    graph = selected(example, with_tags=True, with_sections=True)
    assert graph.counts()["section"] > 0 and graph.counts()["tag"] > 0
    check_rdf(graph)
    check_graphml(graph)
    check_plain(graph)


@needs_dot
def test_dot_renders_the_example(example: Snapshot) -> None:
    # Tags too would be a 7 s layout here; the awkward and the generated bundles draw them.
    check_dot(selected(example))
    check_dot(selected(example, with_sections=True))


def test_the_awkward_bundle_in_every_consumer(awkward: str) -> None:
    snapshot, _ = load_bundle(awkward)
    graph = selected(snapshot, with_tags=True, with_sections=True)
    ids = {n.id for n in graph.nodes}
    assert {QUOTED, "odd/café 🚀", "odd/hash#name", "plain", "report"} <= ids
    assert {tag_id(t) for t in AWKWARD_TAGS} <= ids
    assert (QUOTED, "plain", "navigation", "LINKS_TO") in edge_tuples(graph, "navigation")
    assert ("plain", "plain", "navigation", "LINKS_TO") in edge_tuples(graph, "navigation")
    # A relation to a sub-resource is an edge to its concept; a relation named LINKS_TO stays
    # a relation, distinct from a link.
    assert ("plain", "odd/hash#name", "relation", "calls") in edge_tuples(graph, "relation")
    assert ("plain", "report", "relation", "LINKS_TO") in edge_tuples(graph, "relation")
    assert ("report", "plain", "field", "DESCRIBES") in edge_tuples(graph, "field")
    titles = {n.id: n.title for n in graph.nodes}
    assert titles[QUOTED] == AWKWARD_TITLE
    triples = check_rdf(graph)
    label = rdflib.RDFS.label
    assert rdflib.Literal(AWKWARD_TITLE) in {o for _, p, o in triples if p == label}
    check_graphml(graph)
    check_plain(graph)


@needs_dot
def test_dot_renders_the_awkward_bundle(awkward: str) -> None:
    snapshot, _ = load_bundle(awkward)
    svg = check_dot(selected(snapshot, with_tags=True, with_sections=True))
    # The label is shown as written: backslash, quotes, entities and all.
    assert "He said &quot;hi&quot; \\N &lt;b&gt;&amp;amp;&lt;/b&gt;" in svg


def test_tag_ids_are_unique_and_plain() -> None:
    tags = ["a", "a%", "a%25", "back\\slash", "new\nline", "tab\t", "x\u2028", "ü", "tag:x"]
    ids = [tag_id(t) for t in tags]
    assert len(set(ids)) == len(ids)
    assert ids[1:3] == ["tag:a%25", "tag:a%2525"]
    assert tag_id("ü") == "tag:ü"  # readable: only what a syntax cannot quote is encoded
    assert not any(re.search(r"[\\\x00-\x1f\x7f-\x9f\u2028\u2029]", i) for i in ids)


# -- formats one by one ------------------------------------------------------------------------


def tiny(title: str, tags: tuple[str, ...] = ()) -> ExportGraph:
    nodes = (Node("a", "concept", title, "T", "a.md", tags=tags), Node("b", "concept", "B", ""))
    return ExportGraph(
        nodes, (GraphEdge("a", "b", "navigation", "LINKS_TO"),), GraphQuery(), "rev", 2
    )


def test_dot_escapes_labels_and_ids() -> None:
    text = dot_render(tiny('x "q" \\l & y\r\nz\x00'))
    assert '"a" [label="x \\"q\\" \\\\l &amp; y\\nz \\n(T)", tooltip="a"];' in text
    assert '"a" -> "b" [label="LINKS_TO"];' in text
    assert text.startswith("// bundle-mcp graph: 2 nodes, 1 edge\ndigraph")


def test_ntriples_escapes_literals() -> None:
    text = render(tiny('q"\\\n\r\t\x01\x7f é'), Rendering("ntriples"))
    assert '"q\\"\\\\\\n\\r\\t\\u0001\\u007F é" .' in text
    for line in text.splitlines()[1:]:
        assert line.endswith(" .") and line.startswith("<local:bundle:")


def test_graphml_replaces_what_xml_cannot_hold() -> None:
    text = render(tiny("a\x00b\x0bc\rd<&>\uffff"), Rendering("graphml"))
    assert "<data key=\"d1\">a\ufffdb\ufffdc&#13;d&lt;&amp;&gt;\ufffd</data>" in text
    read = nx.read_graphml(io.BytesIO(text.encode("utf-8")))
    assert read.nodes["a"]["title"] == "a\ufffdb\ufffdc\rd<&>\ufffd"


def test_json_shape() -> None:
    data = json.loads(render(tiny("A", ("t",)), Rendering("json")))
    assert set(data) == {"meta", "nodes", "edges"}
    assert data["nodes"][0] == {
        "id": "a", "kind": "concept", "title": "A", "type": "T", "path": "a.md",
        "concept": None, "lines": None, "tags": ["t"],
    }
    assert data["edges"] == [
        {"source": "a", "target": "b", "kind": "navigation", "type": "LINKS_TO"}
    ]
    assert data["meta"]["format"] == "bundle-mcp/graph-1"
    assert data["meta"]["counts"] == {"concept": 2, "section": 0, "tag": 0}
    assert data["meta"]["selection"]["max_nodes"] == DEFAULT_MAX_NODES


def test_base_iri_rules() -> None:
    assert base_iri_problem("urn:okf:") is None
    assert base_iri_problem("https://example.org/kb/") is None
    assert base_iri_problem("no-scheme/") is not None
    assert base_iri_problem("urn:with space:") is not None
    assert base_iri_problem("https://example.org/kb#") is not None  # sections use the fragment
    assert base_iri_problem("urn:<x>:") is not None


def test_a_custom_base_iri_starts_every_node(example: Snapshot) -> None:
    graph = selected(example, with_tags=True, with_sections=True)
    base = "https://example.org/kb/"
    triples = check_rdf(graph, base)
    subjects = {str(s) for s, _, _ in triples}
    assert subjects and all(s.startswith(base) for s in subjects)


def test_the_default_base_names_concepts_as_get_semantic_graph_does(example: Snapshot) -> None:
    semantic = run_tool(get_semantic_graph, example, {}, CancelToken())
    theirs = rdflib.Graph().parse(data=json.dumps(semantic), format="json-ld")
    concept_class = rdflib.URIRef(OKF_VOCAB + "Concept")
    their_concepts = {str(s) for s in theirs.subjects(rdflib.RDF.type, concept_class)}
    ours = rdflib.Graph().parse(
        data=render(selected(example), Rendering("json-ld")), format="json-ld"
    )
    assert {str(s) for s in ours.subjects(rdflib.RDF.type, concept_class)} == their_concepts
    assert len(their_concepts) == len(example.concepts)


def test_relation_predicates_are_their_own_namespace(example: Snapshot) -> None:
    triples = check_rdf(selected(example))
    predicates = {str(p) for _, p, _ in triples}
    relation_types = {e.relation_type for e in example.edges if e.kind == "relation"}
    assert {RELATION_VOCAB + t for t in relation_types if t} <= predicates
    assert OKF_VOCAB + "LINKS_TO" in predicates


# -- Mermaid under the real parser -----------------------------------------------------------


def test_mermaid_parses(mermaid_parser: Path, example: Snapshot, awkward: str) -> None:
    snapshot, _ = load_bundle(awkward)
    graphs = [
        selected(snapshot, with_tags=True, with_sections=True),
        selected(snapshot),
        selected(example),
        selected(example, with_tags=True),
        selected(example, project="beans", with_sections=True),
        tiny(AWKWARD_TITLE, tuple(AWKWARD_TAGS)),
    ]
    assert all(len(g.edges) <= mermaid.MAX_EDGES for g in graphs)
    results = parse_all(mermaid_parser, [render(g, Rendering("mermaid")) for g in graphs])
    assert [r for r in results if not r["ok"]] == []
    assert {r["type"] for r in results} == {"flowchart-v2"}


def hub(leaves: int) -> ExportGraph:
    nodes = tuple(Node(f"c{i:04d}", "concept", f"C{i}", "T") for i in range(leaves + 1))
    edges = tuple(GraphEdge("c0000", n.id, "navigation", "LINKS_TO") for n in nodes[1:])
    return ExportGraph(nodes, edges, GraphQuery(), "rev", len(nodes))


def test_mermaid_limits_are_reported_truthfully(mermaid_parser: Path) -> None:
    """Past Mermaid's default edge limit there is a warning, and the parser at its defaults does
    refuse the diagram; at the limit, neither."""
    at, past = hub(mermaid.MAX_EDGES), hub(mermaid.MAX_EDGES + 1)
    texts = [render(g, Rendering("mermaid")) for g in (at, past)]
    assert mermaid.warnings(at, texts[0]) == []
    (warning,) = mermaid.warnings(past, texts[1])
    assert "maxEdges" in warning
    ok, refused = parse_all(mermaid_parser, texts)
    assert ok["ok"] and not refused["ok"] and "Edge limit" in refused["error"]


def test_the_command_warns_past_the_mermaid_limits(tmp_bundle: BundleFactory) -> None:
    leaves = {f"l/n{i:03d}.md": concept({"type": "T"}, "x\n") for i in range(501)}
    body = " ".join(f"[x]({link(p)})" for p in leaves)
    bundle = tmp_bundle({"index.md": INDEX, "hub.md": concept({"type": "T"}, body), **leaves})
    code, out, err = run_cli(bundle, "--format", "mermaid")
    assert code == 0 and out.startswith(b"graph TD\n")
    assert "warning: 501 edges: Mermaid renders at most 500" in err
    code, _, err = run_cli(bundle, "--format", "dot")
    assert code == 0 and "warning" not in err


# -- filters, seeds, depth -------------------------------------------------------------------


def test_project_keeps_the_folder_and_the_edges_inside_it(example: Snapshot) -> None:
    data = exported(EXAMPLE, "--project", "beans", "--with-sections")
    concepts = [n for n in data["nodes"] if n["kind"] == "concept"]
    assert {n["id"] for n in concepts} == {c for c in example.concepts if c.startswith("beans/")}
    for node in data["nodes"]:
        assert node["path"].startswith("beans/")
    ids = {n["id"] for n in data["nodes"]}
    assert all(e["source"] in ids and e["target"] in ids for e in data["edges"])
    assert exported(EXAMPLE, "--project", "./beans/")["nodes"] == [
        n for n in data["nodes"] if n["kind"] == "concept"
    ]


def test_type_compares_folded_and_accepts_any_of(example: Snapshot) -> None:
    lots = exported(EXAMPLE, "--type", "green coffee LOT")
    assert lots["nodes"] and {n["type"] for n in lots["nodes"]} == {"Green Coffee Lot"}
    both = exported(EXAMPLE, "--type", "Green Coffee Lot", "--type", "Equipment")
    assert {n["type"] for n in both["nodes"]} == {"Green Coffee Lot", "Equipment"}
    assert both["meta"]["selection"]["types"] == ["Equipment", "Green Coffee Lot"]


def bfs(data: Mapping[str, Any], seeds: list[str], depth: int) -> set[str]:
    around: dict[str, set[str]] = {}
    for e in data["edges"]:
        around.setdefault(e["source"], set()).add(e["target"])
        around.setdefault(e["target"], set()).add(e["source"])
    kept, frontier = set(seeds), set(seeds)
    for _ in range(depth):
        frontier = {m for n in frontier for m in around.get(n, ())} - kept
        kept |= frontier
    return kept


@pytest.mark.parametrize("depth", [0, 1, 2])
def test_seeds_and_depth_select_the_neighbourhood(depth: int) -> None:
    seed = "beans/ethiopia-guji"
    whole = exported(EXAMPLE, "--with-tags")
    part = exported(EXAMPLE, "--with-tags", "--seeds", seed, "--depth", str(depth))
    ids = {n["id"] for n in part["nodes"]}
    assert ids == bfs(whole, [seed], depth)
    # Every edge of the whole graph between two selected nodes is kept, and no other.
    assert part["edges"] == [
        e for e in whole["edges"] if e["source"] in ids and e["target"] in ids
    ]
    assert part["meta"]["selection"]["depth"] == depth


def test_seeds_may_be_sections_and_tags() -> None:
    whole = exported(EXAMPLE, "--with-tags", "--with-sections")
    section = next(n for n in whole["nodes"] if n["kind"] == "section")
    part = exported(EXAMPLE, "--with-tags", "--with-sections", "--seeds", section["id"],
                    "tag:espresso", "--depth", "1")
    ids = {n["id"] for n in part["nodes"]}
    assert ids == bfs(whole, [section["id"], "tag:espresso"], 1)
    assert section["concept"] in ids


def test_seeds_may_be_written_plainly(awkward: str) -> None:
    """A section by its unencoded path (as every locator may be), a tag as written."""
    whole = exported(awkward, "--with-sections")
    section = next(n for n in whole["nodes"] if n["kind"] == "section")
    path, _, lines = section["id"].partition("#")
    assert unquote(path) == QUOTED + ".md"
    again = exported(awkward, "--with-sections", "--seeds", f"{QUOTED}.md#{lines}",
                     "--depth", "0")
    assert [n["id"] for n in again["nodes"]] == [section["id"]]
    part = exported(awkward, "--with-tags", "--seeds", "tag:100%", "--depth", "0")
    assert [n["id"] for n in part["nodes"]] == ["tag:100%25"]


def test_an_unknown_seed_is_refused_with_suggestions() -> None:
    code, out, err = run_cli(EXAMPLE, "--seeds", "beans/ethiopia-guj")
    assert (code, out) == (2, b"")
    assert "'beans/ethiopia-guj'" in err and "did you mean 'beans/ethiopia-guji'" in err


@pytest.mark.parametrize(
    ("extra", "seed", "hint"),
    [
        (["--type", "Equipment"], "beans/ethiopia-guji", "left out by the --project or --type"),
        (["--project", "equipment"], "beans/ethiopia-guji", "left out by the --project or --type"),
        ([], "tag:espresso", "tag nodes are exported with --with-tags"),
    ],
)
def test_a_seed_outside_the_selection_says_why(extra: list[str], seed: str, hint: str) -> None:
    code, out, err = run_cli(EXAMPLE, *extra, "--seeds", seed)
    assert (code, out) == (2, b"") and hint in err


def test_a_project_that_is_no_folder_is_refused(example: Snapshot) -> None:
    with pytest.raises(SelectionError, match="not a folder"):
        selected(example, project="nowhere")
    code, _, err = run_cli(EXAMPLE, "--project", "nowhere")
    assert code == 2 and "not a folder of this bundle" in err


# -- the budget ------------------------------------------------------------------------------


def test_the_budget_is_refused_not_cut(example: Snapshot) -> None:
    total = len(selected(example).nodes)
    with pytest.raises(OverBudget) as raised:
        selected(example, max_nodes=total - 1)
    assert (raised.value.nodes, raised.value.max_nodes) == (total, total - 1)
    code, out, err = run_cli(EXAMPLE, "--max-nodes", str(total - 1), "--format", "dot")
    assert (code, out) == (1, b"")
    assert f"has {total} nodes" in err and f"--max-nodes {total - 1}" in err
    assert "nothing was written" in err and "--seeds" in err
    code, out, err = run_cli(EXAMPLE, "--max-nodes", str(total))
    assert code == 0 and f"{total} nodes" in err
    assert json.loads(out)["meta"]["selection"]["max_nodes"] == total


def test_the_budget_counts_the_selection_not_the_bundle(example: Snapshot) -> None:
    graph = selected(example, seeds=("beans/ethiopia-guji",), depth=0, max_nodes=1)
    assert [n.id for n in graph.nodes] == ["beans/ethiopia-guji"]


def test_the_default_budget_refuses_a_large_bundle(tmp_bundle: BundleFactory) -> None:
    files = {"index.md": INDEX}
    files.update({f"c/n{i:04d}.md": concept({"type": "T"}, "x\n")
                  for i in range(DEFAULT_MAX_NODES + 1)})
    code, out, err = run_cli(tmp_bundle(files))
    assert (code, out) == (1, b"")
    assert f"has {DEFAULT_MAX_NODES + 1} nodes" in err


# -- the command -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_output_is_byte_identical_across_runs(name: str) -> None:
    argv = (EXAMPLE, "--format", name, "--with-tags", "--with-sections")
    first, second = run_cli(*argv), run_cli(*argv)
    assert first[0] == 0 and first[1] == second[1] and first[1].endswith(b"\n")


def test_the_console_command_prints_the_same_bytes_twice(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "LC_ALL": "C", "PYTHONIOENCODING": ""}
    argv = [sys.executable, "-m", "bundle_mcp.cli", "graph", EXAMPLE, "--format", "ntriples"]
    runs = [subprocess.run(argv, capture_output=True, timeout=120, env=env, check=False)
            for _ in range(2)]
    assert [r.returncode for r in runs] == [0, 0], runs[0].stderr
    assert runs[0].stdout == runs[1].stdout and runs[0].stdout.startswith(b"# bundle-mcp graph")
    target = tmp_path / "graph.nt"
    done = subprocess.run([*argv, "-o", str(target)], capture_output=True, timeout=120, env=env,
                          check=False)
    assert done.returncode == 0 and done.stdout == b""
    assert target.read_bytes() == runs[0].stdout


def test_main_routes_graph_and_its_usage_errors(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["graph", EXAMPLE, "--depth", "2"]) == 2
    assert "--depth needs --seeds" in capsys.readouterr().err
    with pytest.raises(SystemExit) as usage:
        main(["graph", EXAMPLE, "--format", "svg"])
    assert usage.value.code == 2
    assert main(["graph", EXAMPLE, "--format", "ntriples", "--base-iri", "relative/"]) == 2
    assert "--base-iri" in capsys.readouterr().err
    assert main(["graph", EXAMPLE, "--max-nodes", "0"]) == 2


def test_a_bad_path_is_a_clear_error(tmp_path: Path) -> None:
    code, out, err = run_cli(str(tmp_path / "missing"))
    assert (code, out) == (2, b"")
    assert err.startswith("bundle-mcp graph: ") and "Traceback" not in err


def test_unparseable_files_are_refused_unless_skipped(tmp_bundle: BundleFactory) -> None:
    bundle = tmp_bundle({
        "index.md": INDEX,
        "good.md": concept({"type": "T"}, "[bad](/bad.md)\n"),
        "bad.md": "---\ntype: [unclosed\n---\n# Bad\n",
    })
    code, out, err = run_cli(bundle)
    assert (code, out) == (2, b"")
    assert "1 file(s) of the bundle cannot be parsed" in err and "bad.md" in err
    code, out, err = run_cli(bundle, "--skip-unparseable")
    assert code == 0 and "exporting without 1 unparseable file(s): bad.md" in err
    assert [n["id"] for n in json.loads(out)["nodes"]] == ["good"]


# -- generated bundles -----------------------------------------------------------------------

NAMES = [
    "plain", "with space", 'quote"d', "apo'strophe", "[brackets]", "<angle>&amp", "café",
    "日本語", "emoji🚀", "hash#tag", "per%cent", "semi;colon", "pipe|bar", "back`tick",
    "curly{}", "dash-and_under", "dot.name", "שלום", "tag", "%lead",
]
FOLDERS = ["", "sub/", "Sub Folder/", "ünï/"]
TEXT = st.text(max_size=24)  # any code point but a surrogate, which no file can hold
RELATION_TYPES = ["calls", "LINKS_TO", "PART_OF", "depends_on", "HAS_TAG"]


@st.composite
def bundles(draw: st.DrawFn) -> dict[str, str]:
    ids = draw(st.lists(
        st.tuples(st.sampled_from(FOLDERS), st.sampled_from(NAMES)).map("".join),
        min_size=1, max_size=7, unique=True,
    ))
    files = {"index.md": INDEX}
    for concept_id in ids:
        fm: dict[str, Any] = {"type": draw(st.sampled_from(["Note", "note", "Table", ""]))}
        if draw(st.booleans()):
            fm["title"] = draw(TEXT)
        fm["tags"] = draw(st.lists(TEXT, max_size=3))
        targets = draw(st.lists(st.sampled_from(ids), max_size=3))
        relations: dict[str, list[dict[str, str]]] = {}
        for target in draw(st.lists(st.sampled_from(ids), max_size=2)):
            relation = draw(st.sampled_from(RELATION_TYPES))
            ref = target.replace("#", "\\#") + draw(st.sampled_from(["", "#part"]))
            relations.setdefault(relation, []).append({"target": ref})
        if relations:
            fm["relations"] = relations
        if draw(st.booleans()):
            fm["resource"] = "/" + draw(st.sampled_from(ids)) + ".md"
        headings = draw(st.lists(TEXT.map(lambda t: " ".join(t.split())), max_size=3))
        body = "".join(f"## {h or 'x'}\n\nText.\n\n" for h in headings)
        body += " ".join(f"[l]({link(t + '.md')})" for t in targets) + "\n"
        files[concept_id + ".md"] = concept(fm, body)
    return files


def check_everything(files: dict[str, str]) -> None:
    snapshot = snapshot_of(files)
    graph = selected(snapshot, with_tags=True, with_sections=True)
    plain = selected(snapshot)
    assert edge_tuples(plain, "navigation", "relation", "field") == oracle_edges(snapshot)
    assert [n.id for n in plain.nodes] == sorted(snapshot.concepts)
    assert every_format(graph) == every_format(selected(snapshot, with_tags=True,
                                                        with_sections=True))
    check_rdf(graph)
    check_graphml(graph)
    check_plain(graph)


@settings(max_examples=min(EXAMPLES, 25), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(bundles())
def test_generated_bundles_in_every_consumer(files: dict[str, str]) -> None:
    check_everything(files)


@pytest.mark.slow
@settings(max_examples=EXAMPLES * 2, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(bundles())
def test_generated_bundles_in_every_consumer_long_run(files: dict[str, str]) -> None:
    check_everything(files)


@needs_dot
@settings(max_examples=min(EXAMPLES, 25), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(bundles())
def test_dot_renders_generated_bundles(files: dict[str, str]) -> None:
    check_dot(selected(snapshot_of(files), with_tags=True, with_sections=True))


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(bundles(), min_size=1, max_size=6))
def test_mermaid_parses_generated_bundles(
    mermaid_parser: Path, batch: list[dict[str, str]]
) -> None:
    # One parser run per batch of bundles: starting Node and Mermaid is most of the cost.
    graphs = [selected(snapshot_of(files), with_tags=True, with_sections=True) for files in batch]
    results = parse_all(mermaid_parser, [render(g, Rendering("mermaid")) for g in graphs])
    assert [r for r in results if not r["ok"]] == []
