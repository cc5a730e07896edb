"""Field edges (OKF v0.2 §6.2): path-valued frontmatter fields that name a concept, walked by the
traversal verbs as SOURCED_FROM, EXECUTED_BY, ATTESTED_BY, COMPUTED_BY and DESCRIBES.

Every call goes through the dispatcher, so each answer is also checked against its output
contract (query_subgraph's ``kind: field`` included).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.okf.graph import (
    ATTESTED_BY,
    COMPUTED_BY,
    DESCRIBES,
    EXECUTED_BY,
    FIELD_EDGE_NAMES,
    SOURCED_FROM,
    field_edges,
)

BundleFactory = Callable[[Mapping[str, str | bytes]], str]

INDEX = "---\nokf_version: \"0.2\"\n---\n# Index\n"


def concept(type_: str, extra: str = "", body: str = "Text.\n") -> str:
    return f"---\ntype: {type_}\n{extra}---\n{body}"


# Every field once, each naming an existing concept by a different spelling: relative to the
# file, bundle-rooted, and ./-relative.
FILES: dict[str, str] = {
    "index.md": INDEX,
    "report.md": concept(
        "Report",
        "resource: data/orders.md\n"
        "sources:\n"
        "  - resource: /data/orders.md\n"
        "  - resource: ./data/orders.md\n"  # the same edge again: deduplicated
        "  - resource: data/customers.md\n",
    ),
    "data/orders.md": concept("Table"),
    "data/customers.md": concept("Table"),
    "computations/revenue.md": concept(
        "Attested Computation",
        "computation: ../skills/run.md\n"
        "executor:\n  resource: /agents/runner.md\n"
        "attester:\n  resource: ../agents/reviewer.md\n",
    ),
    "skills/run.md": concept("Skill"),
    "agents/runner.md": concept("Agent"),
    "agents/reviewer.md": concept("Agent"),
}


def call(bundle: str, tool: str, **arguments: Any) -> dict[str, Any]:
    # skip_unparseable: one test names a broken file, which the walk verbs otherwise refuse.
    config = ServeConfig(bundles=(bundle,), skip_unparseable=True)
    outcome = Dispatcher(config).call(tool, arguments)
    assert not outcome.is_error, outcome.structured
    result: dict[str, Any] = outcome.structured
    return result


def neighbours(bundle: str, *seeds: str, **arguments: Any) -> dict[str, tuple[str, str]]:
    """expand_neighbors: neighbour ID -> (relationship, direction)."""
    result = call(bundle, "expand_neighbors", entity_ids=list(seeds), limit=24, **arguments)
    return {n["id"]: (n["relationship"], n["direction"]) for n in result["neighbors"]}


def relations(bundle: str, *seeds: str, **arguments: Any) -> set[tuple[str, str, str]]:
    """query_subgraph (full rendering): (source, type, target) of every field relation."""
    result = call(bundle, "query_subgraph", seed_ids=list(seeds), **arguments)
    rels = result["subgraph"]["relations"]
    for rel in rels:
        assert (rel["kind"] == "field") == (rel["type"] in FIELD_EDGE_NAMES), rel
    return {(r["source"], r["type"], r["target"]) for r in rels if r["kind"] == "field"}


@pytest.fixture
def bundle(tmp_bundle: BundleFactory) -> str:
    return tmp_bundle(FILES)


def test_each_field_edge_is_walked_by_expand_neighbors(bundle: str) -> None:
    assert neighbours(bundle, "report") == {
        # Two edges reach data/orders: the walk keeps the stronger-then-first by name.
        "data/orders": (DESCRIBES, "outgoing"),
        "data/customers": (SOURCED_FROM, "outgoing"),
    }
    assert neighbours(bundle, "computations/revenue") == {
        "skills/run": (COMPUTED_BY, "outgoing"),
        "agents/runner": (EXECUTED_BY, "outgoing"),
        "agents/reviewer": (ATTESTED_BY, "outgoing"),
    }
    result = call(bundle, "expand_neighbors", entity_ids=["report"])
    orders = next(n for n in result["neighbors"] if n["id"] == "data/orders")
    # Weighed like a typed relation; the ends are the two concept IDs; DESCRIBES and one
    # SOURCED_FROM (three fields state two distinct edges).
    assert orders["score"] == 1.0
    assert orders["metadata"]["edge"] == {"from": "report", "to": "data/orders"}
    assert orders["metadata"]["edge_count"] == 2


def test_field_edges_are_walked_backwards_when_incoming_is(bundle: str) -> None:
    assert neighbours(bundle, "skills/run") == {"computations/revenue": (COMPUTED_BY, "incoming")}
    assert neighbours(bundle, "skills/run", include_incoming=False) == {}


def test_each_field_edge_is_a_query_subgraph_relation(bundle: str) -> None:
    assert relations(bundle, "report", "computations/revenue") == {
        ("report", DESCRIBES, "data/orders"),
        ("report", SOURCED_FROM, "data/orders"),
        ("report", SOURCED_FROM, "data/customers"),
        ("computations/revenue", COMPUTED_BY, "skills/run"),
        ("computations/revenue", EXECUTED_BY, "agents/runner"),
        ("computations/revenue", ATTESTED_BY, "agents/reviewer"),
    }
    compact = call(bundle, "query_subgraph", seed_ids=["report"], compact_mode=True)
    assert {"source": "report", "target": "data/customers", "type": SOURCED_FROM} in (
        compact["subgraph"]["edges"]
    )
    # One edge per (source, name, target), however many fields state it.
    full = call(bundle, "query_subgraph", seed_ids=["report"])
    pairs = [(r["source"], r["type"], r["target"]) for r in full["subgraph"]["relations"]]
    assert pairs.count(("report", SOURCED_FROM, "data/orders")) == 1


def test_each_field_edge_is_drawn_by_visualize_graph(bundle: str) -> None:
    drawn = call(bundle, "visualize_graph", seed_ids=["report", "computations/revenue"])
    mermaid = drawn["mermaid"]
    for name in (SOURCED_FROM, EXECUTED_BY, ATTESTED_BY, COMPUTED_BY, DESCRIBES):
        assert f'-->|"{name}"|' in mermaid, name


def test_find_path_follows_field_edges(bundle: str) -> None:
    result = call(bundle, "find_path", from_id="report", to_id="data/customers")
    assert result["paths"][0]["edges"] == [
        {"from": "report", "to": "data/customers", "kind": SOURCED_FROM, "direction": "outgoing"}
    ]
    named = call(bundle, "find_path", from_id="agents/runner", to_id="skills/run",
                 relationship_types=["executed_by", "Computed_By"])
    assert [e["kind"] for e in named["paths"][0]["edges"]] == [EXECUTED_BY, COMPUTED_BY]
    assert named["filters"]["relationship_types"] == [COMPUTED_BY, EXECUTED_BY]


def test_names_select_field_edges_case_insensitively(bundle: str) -> None:
    assert neighbours(bundle, "report", relationship_types=["sourced_from"]) == {
        "data/orders": (SOURCED_FROM, "outgoing"),
        "data/customers": (SOURCED_FROM, "outgoing"),
    }
    assert neighbours(bundle, "computations/revenue", relationship_types=["Attested_By"]) == {
        "agents/reviewer": (ATTESTED_BY, "outgoing"),
    }
    # query_subgraph matches relation names exactly, but the field edges are the server's
    # own names and match in any case there too.
    assert relations(bundle, "computations/revenue", include_relation_types=["executed_by"]) == {
        ("computations/revenue", EXECUTED_BY, "agents/runner"),
    }
    assert relations(bundle, "report", include_relation_types=["describes"]) == {
        ("report", DESCRIBES, "data/orders"),
    }
    # Naming another kind only leaves the field edges out.
    assert neighbours(bundle, "report", relationship_types=["LINKS_TO"]) == {}
    assert relations(bundle, "report", include_relation_types=["LINKS_TO"]) == set()


def test_no_edge_unless_the_field_names_an_existing_concept(tmp_bundle: BundleFactory) -> None:
    bundle = tmp_bundle(
        {
            "index.md": INDEX,
            "calc.md": concept(
                "Attested Computation",
                "computation: skills/run.py\n"  # an asset, not a concept
                "executor:\n  resource: agents/missing.md\n"  # nothing there
                "attester:\n  resource: agents\n"  # a folder
                "resource: https://example.com/calc.md\n"  # a URL is never looked up
                "sources:\n  - resource: all queries in project x\n",  # a scope
            ),
            "skills/run.py": "print('run')\n",
            "agents/runner.md": concept("Agent"),
            "broken.md": "---\ntype: [unclosed\n---\n",  # a document, but no concept
            "other.md": concept("Note", "resource: broken.md\nsources:\n  - resource: index.md\n"),
        }
    )
    assert neighbours(bundle, "calc") == {}
    assert neighbours(bundle, "other") == {}
    assert relations(bundle, "calc", "other") == set()


def test_a_root_only_reading_gives_no_edge(tmp_bundle: BundleFactory) -> None:
    """``skills/run.md`` written in computations/ names computations/skills/run.md; that it
    would name /skills/run.md read from the root is a validator warning, never an edge."""
    bundle = tmp_bundle(
        {
            "index.md": INDEX,
            "computations/revenue.md": concept(
                "Attested Computation",
                "computation: skills/run.md\nexecutor:\n  resource: agents/runner.md\n",
            ),
            "skills/run.md": concept("Skill"),
            "agents/runner.md": concept("Agent"),
        }
    )
    assert neighbours(bundle, "computations/revenue") == {}
    assert relations(bundle, "computations/revenue") == set()


def test_executor_and_attester_count_only_on_an_attested_computation(
    tmp_bundle: BundleFactory,
) -> None:
    bundle = tmp_bundle(
        {
            "index.md": INDEX,
            "plain.md": concept(
                "Note",
                "computation: /skills/run.md\n"
                "executor:\n  resource: /agents/runner.md\n"
                "attester:\n  resource: /agents/runner.md\n",
            ),
            "skills/run.md": concept("Skill"),
            "agents/runner.md": concept("Agent"),
        }
    )
    assert neighbours(bundle, "plain") == {}
    assert neighbours(bundle, "agents/runner") == {}
    assert relations(bundle, "plain", depth=2) == set()


def test_a_concept_naming_itself_is_no_neighbour(tmp_bundle: BundleFactory) -> None:
    bundle = tmp_bundle(
        {
            "index.md": INDEX,
            "self.md": concept("Note", "resource: self.md\n", "See [me](self.md).\n"),
        }
    )
    assert neighbours(bundle, "self") == {}
    # query_subgraph already returns a concept's link to itself; its field edge goes the same
    # way.
    assert relations(bundle, "self") == {("self", DESCRIBES, "self")}
    links = call(bundle, "query_subgraph", seed_ids=["self"])["subgraph"]["relations"]
    assert {r["type"] for r in links} == {"LINKS_TO", DESCRIBES}


def test_a_field_edge_out_of_the_project_is_not_walked(bundle: str) -> None:
    assert neighbours(bundle, "computations/revenue", project="computations") == {}
    assert neighbours(bundle, "agents/runner", project="agents") == {}


def test_get_neighbors_and_the_snapshot_edges_do_not_see_field_edges(
    tmp_bundle: BundleFactory,
) -> None:
    with_link = dict(FILES)
    with_link["report.md"] = FILES["report.md"].replace(
        "Text.\n", "See [customers](data/customers.md).\n"
    )
    bundle = tmp_bundle(with_link)
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    before = dispatcher.call("get_neighbors", {"concept_id": "report"}).structured
    # Walking builds the field edges; get_neighbors answers as before, from Snapshot.edges.
    assert not dispatcher.call("expand_neighbors", {"entity_ids": ["report"]}).is_error
    after = dispatcher.call("get_neighbors", {"concept_id": "report"}).structured
    assert after == before
    assert [(e["kind"], e["from"], e["to"]) for e in after["edges"]] == [
        ("navigation", "report", "data/customers")
    ]
    orders = dispatcher.call("get_neighbors", {"concept_id": "data/orders"}).structured
    assert orders["edges"] == [] and orders["total"] == 0
    snapshot = dispatcher.served_snapshot(bundle, CancelToken())
    assert {e.kind for e in snapshot.edges} == {"navigation"}
    # ... while the derived structure holds them, both ends indexed.
    index = field_edges(snapshot)
    assert {(e.relationship, e.target_id) for e in index["report"]} == {
        (DESCRIBES, "data/orders"), (SOURCED_FROM, "data/orders"),
        (SOURCED_FROM, "data/customers"),
    }
    assert [e.source_id for e in index["data/customers"]] == ["report"]
