"""find_path and the path search of okf/paths.py: unit tests and a property test against a
brute-force reference.

The goldens (tests/golden/find_path/) pin whole answers on small and generated bundles; this
module checks what they cannot: that on random graphs every path is a walk over edges that
exist, that its length is the true distance and every shortest path is counted, the edge cap,
and the saturation of the count.
"""

from __future__ import annotations

import os
import posixpath
import types
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from bundle_mcp.cancel import CancelToken
from bundle_mcp.contracts import ContractSet
from bundle_mcp.dispatch import to_json
from bundle_mcp.errors import BundleError
from bundle_mcp.loader.document import parse_document
from bundle_mcp.model import Snapshot, revision_of
from bundle_mcp.okf.graph import EdgeBudget, graph_of
from bundle_mcp.okf.paths import COUNT_CAP, CUT, FOUND, path_selection, shortest_paths
from bundle_mcp.tools import find_path
from toolcall import run_tool

CONTRACTS = ContractSet()
RELATIONS = ("rel_a", "rel_b")


def _examples() -> int:
    try:
        return settings.get_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev")).max_examples
    except InvalidArgument:  # the profiles are registered by another test module
        return 50


def snapshot_of(files: Mapping[str, str]) -> Snapshot:
    """An in-memory snapshot of ``{path: text}``, its folders included (for ``project``)."""
    documents = {path: parse_document(path, text.encode("utf-8")) for path, text in files.items()}
    concepts = {d.concept_id: d for d in documents.values() if d.concept_id is not None}
    directories = {""}
    for path in files:
        parts = path.split("/")[:-1]
        directories.update("/".join(parts[: n + 1]) for n in range(len(parts)))
    return Snapshot(
        revision=revision_of([d.record for d in documents.values()]),
        documents=types.MappingProxyType(documents),
        concepts=types.MappingProxyType(dict(sorted(concepts.items()))),
        assets=frozenset(),
        directories=frozenset(directories),
        skipped=(),
    )


def call(snapshot: Snapshot, **params: Any) -> dict[str, Any]:
    """find_path on a snapshot, its arguments and result checked against the contracts."""
    CONTRACTS.check_input("find_path", params)
    result = run_tool(find_path, snapshot, params, CancelToken())
    CONTRACTS.check_output("find_path", result)
    return result


Edge = tuple[str, str, str]  # (source concept, target concept, LINKS_TO or relation name)


def bundle_files(ids: list[str], edges: list[Edge]) -> dict[str, str]:
    """One concept per ID; each link a relative Markdown link, each relation in frontmatter."""
    files = {}
    for concept in ids:
        links = [t for s, t, k in edges if s == concept and k == "LINKS_TO"]
        relations: dict[str, list[str]] = {}
        for s, t, k in edges:
            if s == concept and k != "LINKS_TO":
                relations.setdefault(k, []).append(t)
        fm = f"type: Note\ntitle: T {concept}\n"
        if relations:
            fm += "relations:\n" + "".join(
                f"  {name}:\n" + "".join(f"    - target: {t}\n" for t in targets)
                for name, targets in sorted(relations.items())
            )
        here = posixpath.dirname(concept)
        body = "".join(
            f"[x]({posixpath.relpath(t + '.md', here or '.')})\n" for t in links
        ) or "No links.\n"
        files[concept + ".md"] = f"---\n{fm}---\n{body}"
    return files


def reference_paths(
    edges: list[Edge],
    start: str,
    target: str,
    *,
    kinds: set[str] | None,
    incoming: bool,
    project: str | None,
    max_hops: int,
) -> list[tuple[str, ...]] | None:
    """Every shortest path as a node sequence, by brute force; None when there is none within
    ``max_hops``. Self-loops are no hops; outside ``project`` nothing is walked."""

    def inside(concept: str) -> bool:
        return project is None or concept.startswith(project + "/")

    neighbours: dict[str, set[str]] = {}
    for s, t, k in edges:
        if s == t or (kinds is not None and k.upper() not in kinds):
            continue
        if not (inside(s) and inside(t)):
            continue
        neighbours.setdefault(s, set()).add(t)
        if incoming:
            neighbours.setdefault(t, set()).add(s)
    if not (inside(start) and inside(target)):
        return None
    walks: list[tuple[str, ...]] = [(start,)]
    for _ in range(max_hops + 1):
        done = [w for w in walks if w[-1] == target]
        if done:
            return sorted(done)
        walks = [w + (n,) for w in walks for n in sorted(neighbours.get(w[-1], ())) if n not in w]
        if not walks:
            return None
    return None


@st.composite
def graphs(draw: st.DrawFn) -> tuple[list[str], list[Edge]]:
    count = draw(st.integers(1, 7))
    ids = [("p/" if draw(st.booleans()) else "") + f"n{i}" for i in range(count)]
    kinds = st.sampled_from(("LINKS_TO", "LINKS_TO", *RELATIONS))
    # Dense enough that most pairs are joined; some edges get a twin the other way, so a hop
    # often has both an edge read forwards and one read backwards to choose from.
    edges = draw(st.lists(st.tuples(st.sampled_from(ids), st.sampled_from(ids), kinds),
                          min_size=1, max_size=2 * count))
    twins = draw(st.lists(st.booleans(), min_size=len(edges), max_size=len(edges)))
    edges += [(t, s, k) for (s, t, k), twin in zip(edges, twins, strict=True) if twin]
    return ids, edges


# An example costs a few milliseconds: more of them than the profile's, for the rarer shapes
# (mutual edges on a path, branching at two levels).
@settings(max_examples=max(4 * _examples(), 300), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(graph=graphs(), data=st.data())
def test_every_path_is_a_shortest_walk_over_existing_edges(
    graph: tuple[list[str], list[Edge]], data: st.DataObject
) -> None:
    ids, edges = graph
    files = bundle_files(ids, edges)
    snapshot = snapshot_of(files)
    start = data.draw(st.sampled_from(ids))
    goal = data.draw(st.sampled_from(ids))
    names = data.draw(st.lists(st.sampled_from(("LINKS_TO", "links_to", *RELATIONS)),
                               max_size=2))
    params: dict[str, Any] = {
        "from_id": start,
        "to_id": goal,
        "max_hops": data.draw(st.integers(-1, 10)),
        "max_paths": data.draw(st.integers(0, 12)),
        "include_incoming": data.draw(st.booleans()),
        "relationship_types": names,
    }
    project = data.draw(st.sampled_from((None, "p")))
    if project is not None and "p" in snapshot.directories:
        params["project"] = project
    else:
        project = None
    result = call(snapshot, **params)

    max_hops = max(1, min(params["max_hops"], 8))
    max_paths = max(1, min(params["max_paths"], 10))
    assert (result["max_hops"], result["max_paths"]) == (max_hops, max_paths)
    kinds = {n.upper() for n in names} or None
    expected = reference_paths(edges, start, goal, kinds=kinds, project=project,
                               incoming=params["include_incoming"], max_hops=max_hops)
    existing = {(s, t, k) for s, t, k in edges if s != t}
    if expected is None:
        assert result["paths"] == [] and result["distance"] is None and result["total"] == 0
        assert result["reason"] and not result["truncated"]
    else:
        got = [tuple(n["id"] for n in p["nodes"]) for p in result["paths"]]
        # The true distance, every shortest path counted, the first ones in ID order.
        assert result["distance"] == len(expected[0]) - 1
        assert result["total"] == len(expected)
        assert got == expected[:max_paths]
        assert result["truncated"] == (len(expected) > max_paths)
        assert result["reason"] is None
        target(float(result["total"]), label="shortest paths")
        target(float(result["distance"]), label="distance")
    for path in result["paths"]:
        nodes = [n["id"] for n in path["nodes"]]
        assert len(path["edges"]) == len(nodes) - 1 == result["distance"]
        for (before, after), edge in zip(zip(nodes, nodes[1:], strict=False), path["edges"],
                                         strict=True):
            stored = (edge["from"], edge["to"], edge["kind"])
            assert stored in existing
            if edge["direction"] == "outgoing":
                assert (edge["from"], edge["to"]) == (before, after)
            else:
                assert params["include_incoming"]
                assert (edge["from"], edge["to"]) == (after, before)
                # An edge read forwards is preferred whenever one joins the two nodes.
                assert not any(s == before and t == after and (kinds is None or k.upper() in kinds)
                               for s, t, k in existing)
    assert result["visited"] <= len(ids)

    again = call(snapshot_of(files), **params)
    assert to_json(again) == to_json(result)


def note(body: str, extra: str = "") -> str:
    return f"---\ntype: Note\n{extra}---\n{body}"


def test_the_count_saturates_and_listing_stays_cheap() -> None:
    """Eight levels of eight concepts, each linking to all of the next: 8^7 shortest paths."""
    files = {"start.md": note("".join(f"[x](l0-{j}.md)\n" for j in range(8)))}
    for level in range(7):
        for i in range(8):
            nexts = (f"l{level + 1}-{j}.md" for j in range(8)) if level < 6 else ("goal.md",)
            files[f"l{level}-{i}.md"] = note("".join(f"[x]({n})\n" for n in nexts))
    files["goal.md"] = note("End.\n")
    result = call(snapshot_of(files), from_id="start", to_id="goal", max_hops=8, max_paths=10,
                  include_incoming=False)
    assert result["distance"] == 8
    assert result["total"] == COUNT_CAP < 8**7
    assert result["truncated"] and result["reason"] is None
    listed = [[n["id"] for n in p["nodes"]] for p in result["paths"]]
    assert listed == sorted(listed) and len(listed) == 10
    assert listed[0] == ["start", *(f"l{k}-0" for k in range(7)), "goal"]


def test_a_cut_after_the_target_was_reached_keeps_the_shortest_paths_found() -> None:
    files = {"start.md": note("".join(f"[x](m{i}.md)\n" for i in range(5)))}
    files.update({f"m{i}.md": note("[x](goal.md)\n") for i in range(5)})
    files["goal.md"] = note("End.\n")
    graph = graph_of(snapshot_of(files))
    selection = path_selection((), incoming=True, project=None)
    start, goal = graph.concept("start"), graph.concept("goal")
    whole = shortest_paths(graph, start, goal, selection, 4, 10, EdgeBudget(10**6), CancelToken())
    assert whole.outcome == FOUND and whole.total == 5
    # Five edges for start's level, then m0's two (from start, to goal): the budget is spent.
    cut = shortest_paths(graph, start, goal, selection, 4, 10, EdgeBudget(7), CancelToken())
    assert cut.outcome == CUT and cut.distance == 2
    assert [[n.id for n in p.nodes] for p in cut.paths] == [["start", "m0", "goal"]]


def test_the_cap_is_reported_in_the_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {"start.md": note("".join(f"[x](m{i}.md)\n" for i in range(5)))}
    files.update({f"m{i}.md": note("[x](goal.md)\n") for i in range(5)})
    files["goal.md"] = note("End.\n")
    monkeypatch.setattr(find_path, "MAX_PATH_EDGES", 7)
    result = call(snapshot_of(files), from_id="start", to_id="goal")
    assert result["truncated"] and result["total"] == 1 and len(result["paths"]) == 1
    assert "other paths of this length may exist" in result["reason"]


def test_a_relation_is_shown_before_a_link_between_the_same_concepts() -> None:
    files = {"a.md": note("[b](b.md)\n", "relations:\n  uses:\n    - target: b\n"),
             "b.md": note("[a](a.md)\n")}
    result = call(snapshot_of(files), from_id="a", to_id="b")
    assert result["paths"][0]["edges"] == [
        {"from": "a", "to": "b", "kind": "uses", "direction": "outgoing"}
    ]
    back = call(snapshot_of(files), from_id="b", to_id="a")
    assert back["paths"][0]["edges"] == [
        {"from": "b", "to": "a", "kind": "LINKS_TO", "direction": "outgoing"}
    ]


def test_a_hop_reads_an_edge_forwards_when_one_joins_the_two() -> None:
    files = {"a.md": note("[b](b.md)\n"), "b.md": note("[a](a.md)\n"), "c.md": note("[a](a.md)\n")}
    result = call(snapshot_of(files), from_id="a", to_id="b")
    assert result["paths"][0]["edges"] == [
        {"from": "a", "to": "b", "kind": "LINKS_TO", "direction": "outgoing"}
    ]
    backwards = call(snapshot_of(files), from_id="a", to_id="c")
    assert backwards["paths"][0]["edges"] == [
        {"from": "c", "to": "a", "kind": "LINKS_TO", "direction": "incoming"}
    ]


def test_paths_are_counted_through_every_branch() -> None:
    """Two diamonds in a row: 2 x 3 shortest paths, though no node has six successors."""
    files = {
        "s.md": note("[x](a1.md) [x](a2.md)\n"),
        "a1.md": note("[x](m.md)\n"),
        "a2.md": note("[x](m.md)\n"),
        "m.md": note("[x](b1.md) [x](b2.md) [x](b3.md)\n"),
        **{f"b{i}.md": note("[x](t.md)\n") for i in (1, 2, 3)},
        "t.md": note("End.\n"),
    }
    result = call(snapshot_of(files), from_id="s", to_id="t", max_paths=4)
    assert (result["distance"], result["total"], len(result["paths"])) == (4, 6, 4)
    assert [[n["id"] for n in p["nodes"]][1::2] for p in result["paths"]] == [
        ["a1", "b1"], ["a1", "b2"], ["a1", "b3"], ["a2", "b1"]
    ]


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"from_id": 3, "to_id": "a"}, "$.from_id"),
        ({"from_id": "a", "to_id": "a.md"}, "$.to_id"),
        ({"from_id": "a", "to_id": "a", "max_hops": "4"}, "$.max_hops"),
        ({"from_id": "a", "to_id": "a", "relationship_types": ["part_of"]},
         "$.relationship_types"),
    ],
)
def test_direct_callers_get_the_field_named(params: dict[str, Any], field: str) -> None:
    snapshot = snapshot_of({"a.md": note("A.\n")})
    with pytest.raises(BundleError) as info:
        run_tool(find_path, snapshot, params, CancelToken())
    envelope = info.value.envelope()
    assert envelope["code"] == "invalid_request"
    assert [d["field"] for d in envelope["diagnostics"]] == [field]
