"""query_subgraph and the shared extraction: budgets, ordering, filters, and their properties.

The property tests build snapshots in memory (no files) from random small graphs and random
arguments, and check that every answer respects every bound it reports, validates against the
output contract, and is byte-identical when asked twice.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from bundle_mcp.cancel import CancelToken
from bundle_mcp.contracts import ContractSet
from bundle_mcp.errors import BundleError
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.document import parse_document
from bundle_mcp.model import Snapshot, canonical_json, revision_of
from bundle_mcp.tools import query_subgraph, visualize_graph
from bundle_mcp.tools._extraction import field_matches, token_cost
from toolcall import run_tool

REPO = Path(__file__).resolve().parent.parent
GRAPH = os.path.realpath(REPO / "testdata" / "bundles" / "subgraph-graph")
CONTRACTS = ContractSet()


def snapshot_of(files: dict[str, str]) -> Snapshot:
    """An in-memory snapshot of ``{path: text}`` (the loader's parse, without a folder)."""
    documents = {path: parse_document(path, text.encode("utf-8")) for path, text in files.items()}
    concepts = {
        d.concept_id: d
        for d in documents.values()
        if d.concept_id is not None and d.parse_error is None
    }
    return Snapshot(
        revision=revision_of([d.record for d in documents.values()]),
        documents=types.MappingProxyType(documents),
        concepts=types.MappingProxyType(dict(sorted(concepts.items()))),
        assets=frozenset(),
        directories=frozenset(),
        skipped=(),
    )


def note(type_: str = "Note", title: str = "", extra: str = "", body: str = "") -> str:
    head = f"---\ntype: {type_}\n" + (f"title: {title}\n" if title else "") + extra + "---\n"
    return head + body


def run(snapshot: Snapshot, **params: Any) -> dict[str, Any]:
    result = run_tool(query_subgraph, snapshot, params, CancelToken())
    CONTRACTS.check_output("query_subgraph", result)
    return result


def ids(result: dict[str, Any]) -> list[str]:
    graph = result["subgraph"]
    return [n["id"] for n in graph.get("nodes", graph.get("objects", []))]


@pytest.fixture(scope="module")
def graph() -> Snapshot:
    snapshot, _ = load_bundle(GRAPH)
    return snapshot


# -- ordering and budgets ------------------------------------------------------------------


def star(count: int, type_of=lambda n: "Note") -> Snapshot:
    files = {"hub.md": note(title="Hub")}
    for n in range(count):
        files[f"n{n:03d}.md"] = note(type_of(n), body="[hub](hub.md)\n")
    return snapshot_of(files)


def test_ties_break_by_id_never_by_hash_order() -> None:
    """Contract: equal distance and weight fall back to ID ascending (a total order)."""
    result = run(star(30), seed_ids=["hub"], max_objects=6, compact_mode=True)
    assert ids(result) == ["hub", "n000", "n001", "n002", "n003", "n004"]
    assert result["suggested_next_seed"] == "n005"
    assert result["truncation_reason"] == "max_objects"


def test_type_weights_outrank_ids_and_unknown_types_are_reported() -> None:
    snapshot = star(10, lambda n: "Table" if n % 3 == 2 else "Note")
    result = run(
        snapshot,
        seed_ids=["hub"],
        max_objects=3,
        type_weights={"Table": 2.0, "Ghost": 9},
        compact_mode=True,
    )
    assert ids(result) == ["hub", "n002", "n005"]
    assert result["ignored_type_weights"] == ["Ghost"]


def test_seeds_count_against_max_objects_and_come_first() -> None:
    result = run(star(5), seed_ids=["n004", "n003", "hub"], max_objects=2)
    assert ids(result) == ["hub", "n003"]  # seeds ranked by weight then ID, like everything
    assert result["returned_nodes"] == 2
    assert result["is_truncated"] and result["truncation_reason"] == "max_objects"
    assert all(o["seed"] for o in result["subgraph"]["objects"])


def test_max_tokens_holds_and_is_the_sum_of_item_costs() -> None:
    for budget in (1, 40, 90, 150, 400, 4000):
        for compact in (True, False):
            result = run(star(40), seed_ids=["hub"], max_tokens=budget, compact_mode=compact)
            graph = result["subgraph"]
            items = [*graph.get("nodes", graph.get("objects", []))]
            items += graph.get("edges", graph.get("relations", []))
            assert result["estimated_tokens"] == sum(token_cost(i) for i in items)
            assert result["estimated_tokens"] <= result["applied"]["max_tokens"] == budget


def test_an_oversized_object_is_skipped_and_smaller_ones_still_fit() -> None:
    files = {
        "hub.md": note(title="Hub"),
        "big.md": note(extra=f"description: {'word ' * 400}\n", body="[h](hub.md)\n"),
        "small.md": note(body="[h](hub.md)\n"),
    }
    result = run(snapshot_of(files), seed_ids=["hub"], max_tokens=120, compact_mode=True)
    assert ids(result) == ["hub", "small"]
    assert result["truncation_reason"] == "max_tokens"
    assert result["suggested_next_seed"] == "big"


def test_budgets_are_clamped_and_echoed(graph: Snapshot) -> None:
    low = run(graph, seed_ids=["hub"], depth=-1, max_objects=-7, max_tokens=0)
    assert low["applied"] == {"depth": 0, "max_objects": 1, "max_tokens": 1}
    high = run(graph, seed_ids=["hub"], depth=10**6, max_objects=10**6, max_tokens=10**18)
    assert high["applied"] == {"depth": 3, "max_objects": 200, "max_tokens": 100_000}


def test_root_hash_is_sha256_of_the_canonical_subgraph(graph: Snapshot) -> None:
    result = run(graph, seed_ids=["a"], depth=2)
    digest = hashlib.sha256(canonical_json(result["subgraph"]).encode("utf-8")).hexdigest()
    assert result["subgraph_root_hash"] == f"sha256:{digest}"


# -- seeds, walk, relation types -----------------------------------------------------------


def test_unknown_seeds_are_unresolved_never_the_whole_graph(graph: Snapshot) -> None:
    result = run(graph, seed_ids=["missing", "missing", "other"])
    assert result["unresolved"] == ["missing", "other"]
    assert result["total_found_nodes"] == result["returned_nodes"] == 0
    assert ids(result) == []


def test_depth_limits_the_walk_and_cycles_are_visited_once(graph: Snapshot) -> None:
    distances = {
        o["id"]: o["distance"] for o in run(graph, seed_ids=["hub"], depth=3)["subgraph"]["objects"]
    }
    assert distances == {"hub": 0, "a": 1, "b": 1, "c": 2, "f": 2, "d": 3}


def test_full_relations_keep_fragments_compact_edges_collapse_them(graph: Snapshot) -> None:
    full = run(graph, seed_ids=["a"], depth=0, include_relation_types=["calls"])
    assert full["subgraph"]["relations"] == []  # b is not returned at depth 0
    full = run(graph, seed_ids=["a", "b"], depth=0, include_relation_types=["calls"])
    refs = [(r["source_ref"], r["target_ref"]) for r in full["subgraph"]["relations"]]
    assert refs == [("a", "b#admin"), ("a", "b#api")]
    compact = run(
        graph, seed_ids=["a", "b"], depth=0, include_relation_types=["calls"], compact_mode=True
    )
    assert compact["subgraph"]["edges"] == [{"source": "a", "target": "b", "type": "calls"}]


def test_unknown_relation_type_walks_nowhere(graph: Snapshot) -> None:
    result = run(graph, seed_ids=["hub"], depth=3, include_relation_types=["NOPE"])
    assert ids(result) == ["hub"]


def test_empty_include_lists_mean_the_default(graph: Snapshot) -> None:
    default = run(graph, seed_ids=["hub"], depth=2)
    empty = run(
        graph, seed_ids=["hub"], depth=2, include_relation_types=[], include_object_types=[]
    )
    assert empty == default


def test_part_of_makes_sections_objects_and_seedable(graph: Snapshot) -> None:
    without = run(graph, seed_ids=["a.md#L14-L17"])
    assert without["unresolved"] == ["a.md#L14-L17"]
    result = run(graph, seed_ids=["a.md#L14-L17"], include_relation_types=["PART_OF"])
    objects = {o["id"]: o for o in result["subgraph"]["objects"]}
    assert set(objects) == {"a.md#L14-L17", "a"}
    section = objects["a.md#L14-L17"]
    assert (section["kind"], section["type"], section["name"]) == ("section", "section", "Design")
    assert (section["line_start"], section["line_end"], section["concept_id"]) == (14, 17, "a")
    assert result["subgraph"]["relations"][0]["type"] == "PART_OF"


def test_shares_community_is_opt_in_and_bounded_in_big_tag_groups() -> None:
    """A tag on 3,000 concepts: the walk finds them all, and the answer holds five of them and
    the ten edges among those (speed is measured by `make bench`, not asserted here)."""
    files = {f"c{n:04d}.md": note(extra="tags: [everyone]\n") for n in range(3000)}
    snapshot = snapshot_of(files)
    assert ids(run(snapshot, seed_ids=["c0000"], depth=3)) == ["c0000"]
    result = run(
        snapshot,
        seed_ids=["c0000"],
        depth=3,
        max_objects=5,
        include_relation_types=["SHARES_COMMUNITY"],
        compact_mode=True,
    )
    assert result["total_found_nodes"] == 3000
    assert ids(result) == ["c0000", "c0001", "c0002", "c0003", "c0004"]
    assert len(result["subgraph"]["edges"]) == 10  # every pair of the five, once


def test_a_concept_named_like_a_locator_keeps_its_id() -> None:
    files = {"a.md": note(body="text\n"), "a.md#L4-L4.md": note(title="Odd")}
    result = run(
        snapshot_of(files), seed_ids=["a.md#L4-L4"], depth=0, include_relation_types=["PART_OF"]
    )
    assert result["subgraph"]["objects"][0]["kind"] == "concept"


# -- filters -------------------------------------------------------------------------------


def test_filters_keep_seeds_and_apply_before_budgets(graph: Snapshot) -> None:
    result = run(
        graph, seed_ids=["c"], depth=3, max_objects=2, structure_filters={"owner": "payments-team"}
    )
    assert ids(result) == ["c", "a"]  # a is 3 hops away but the only object that passes
    assert result["total_found_nodes"] == 2 and not result["is_truncated"]


def test_the_walk_passes_through_filtered_objects(graph: Snapshot) -> None:
    result = run(graph, seed_ids=["hub"], depth=3, include_object_types=["Note"])
    assert ids(result) == ["hub", "d"]  # d sits behind b and c, which are Tables


def test_suggested_seed_is_never_a_filtered_object(graph: Snapshot) -> None:
    result = run(graph, seed_ids=["hub"], depth=3, max_objects=2, include_object_types=["Table"])
    assert ids(result) == ["hub", "b"]
    assert result["suggested_next_seed"] == "c"


def test_a_relation_survives_only_if_both_ends_do(graph: Snapshot) -> None:
    result = run(graph, seed_ids=["hub"], depth=1, structure_filters={"status": "draft"})
    assert ids(result) == ["hub", "a"]
    ends = {(r["source"], r["target"]) for r in result["subgraph"]["relations"]}
    assert ends == {("a", "hub"), ("hub", "a")}


@pytest.mark.parametrize(
    ("fm", "field", "value", "matches"),
    [
        ({"tags": ("x", "y")}, "tags", "y", True),
        ({"tags": ("x", "y")}, "tags", ["x", "y"], True),
        ({"tags": ("x", "y")}, "tags", "z", False),
        ({}, "status", "stable", True),  # absent status means stable
        ({}, "status", "draft", False),
        ({}, "owner", None, False),  # absent never matches, not even null
        ({"owner": None}, "owner", None, True),
        ({"n": 1}, "n", 1.0, True),
        ({"n": 1}, "n", True, False),  # booleans are not numbers
        ({"flag": True}, "flag", 1, False),
        ({"n": "1"}, "n", 1, False),
        ({"m": types.MappingProxyType({"a": (1,)})}, "m", {"a": [1]}, True),
    ],
)
def test_field_matching(fm: dict, field: str, value: Any, matches: bool) -> None:
    assert field_matches(fm, field, value) is matches


# -- errors and cancellation ---------------------------------------------------------------


def test_blank_seed_is_invalid_request(graph: Snapshot) -> None:
    with pytest.raises(BundleError) as info:
        run_tool(query_subgraph, graph, {"seed_ids": ["  "]}, CancelToken())
    assert info.value.code == "invalid_request"


def test_non_finite_weight_is_invalid_request(graph: Snapshot) -> None:
    with pytest.raises(BundleError) as info:
        run_tool(query_subgraph,
            graph, {"seed_ids": ["a"], "type_weights": {"Note": float("nan")}}, CancelToken()
        )
    assert info.value.code == "invalid_request"


def test_cancelled_walk_returns_nothing() -> None:
    token = CancelToken()
    token.cancel()
    with pytest.raises(BundleError) as info:
        run_tool(query_subgraph, star(10), {"seed_ids": ["hub"]}, token)
    assert info.value.code == "operation_cancelled"


# -- determinism across processes ----------------------------------------------------------

_PROGRAM = """
import json, sys
from bundle_mcp.cancel import CancelToken
from bundle_mcp.loader import load_bundle
from bundle_mcp.tools import query_subgraph, visualize_graph
from bundle_mcp.toolspec import CallContext

snapshot, _ = load_bundle(sys.argv[1])
args = {"seed_ids": ["hub", "island"], "depth": 3, "max_objects": 5,
        "include_relation_types": ["LINKS_TO", "calls", "SHARES_COMMUNITY", "PART_OF"]}
out = [query_subgraph.SPEC.run(CallContext(snapshot, CancelToken(), ""), args),
       visualize_graph.SPEC.run(CallContext(snapshot, CancelToken(), ""), {"max_objects": 4})]
sys.stdout.write(json.dumps(out, ensure_ascii=False))
"""


def test_byte_identical_across_processes_with_different_hash_seeds() -> None:
    outputs = set()
    for seed in ("0", "1", "12345"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        done = subprocess.run(
            [sys.executable, "-c", _PROGRAM, GRAPH],
            env=env,
            capture_output=True,
            check=True,
            timeout=120,
        )
        outputs.add(done.stdout)
    assert len(outputs) == 1


# -- properties ----------------------------------------------------------------------------

TYPES = ("Note", "Table", "Service")


@st.composite
def bundles(draw: st.DrawFn) -> dict[str, str]:
    count = draw(st.integers(2, 10))
    names = [f"c{n}" for n in range(count)]
    files = {}
    for name in names:
        links = draw(st.lists(st.sampled_from(names), max_size=4))
        calls = draw(st.lists(st.sampled_from(names), max_size=2))
        frag = draw(st.sampled_from(["", "#x", "#y"]))
        tags = draw(st.lists(st.sampled_from(["t1", "t2", "t3"]), max_size=2, unique=True))
        status = draw(st.sampled_from(["", "draft", "deprecated", "stable"]))
        title = draw(st.sampled_from(["", "T", 'Q "x" [y]']))
        extra = f"tags: {json.dumps(tags)}\n"
        if status:
            extra += f"status: {status}\n"
        if calls:
            targets = "".join(f"    - target: {c}{frag}\n" for c in calls)
            extra += f"relations:\n  calls:\n{targets}"
        body = "".join(f"[l]({target}.md)\n" for target in links)
        body += draw(st.sampled_from(["", "# Head\n\ntext\n", "pre\n\n## Two\n\nmore\n"]))
        files[f"{name}.md"] = note(
            draw(st.sampled_from(TYPES)), json.dumps(title) if title else "", extra, body
        )
    return files


arguments = st.fixed_dictionaries(
    {
        "seed_ids": st.lists(
            st.sampled_from([f"c{n}" for n in range(10)] + ["zz"]), min_size=1, max_size=4
        ),
        "depth": st.integers(-3, 6),
        # Mostly small budgets, so that truncation by either of them is common.
        "max_objects": st.integers(-2, 6) | st.integers(7, 250),
    },
    optional={
        "max_tokens": st.integers(-10, 400) | st.integers(401, 3000),
        "compact_mode": st.booleans(),
        "type_weights": st.dictionaries(
            st.sampled_from([*TYPES, "Ghost", "section"]), st.floats(-5, 5), max_size=3
        ),
        "structure_filters": st.dictionaries(
            st.sampled_from(["status", "tags", "owner"]),
            st.sampled_from(["draft", "stable", "t1", "t2", None]),
            max_size=2,
        ),
        "include_relation_types": st.lists(
            st.sampled_from(["LINKS_TO", "calls", "PART_OF", "SHARES_COMMUNITY", "NOPE"]),
            max_size=3,
        ),
        "include_object_types": st.lists(st.sampled_from([*TYPES, "section"]), max_size=2),
    },
)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bundles(), arguments)
def test_every_answer_respects_every_bound_it_reports(
    files: dict[str, str], params: dict[str, Any]
) -> None:
    snapshot = snapshot_of(files)
    result = run(snapshot, **params)
    again = run(snapshot, **params)
    assert canonical_json(result) == canonical_json(again)

    event(f"truncation_reason={result['truncation_reason']}")
    applied = result["applied"]
    graph = result["subgraph"]
    objects = graph.get("nodes", graph.get("objects", []))
    relations = graph.get("edges", graph.get("relations", []))
    returned = [o["id"] for o in objects]
    assert len(returned) == len(set(returned)) == result["returned_nodes"]
    assert result["returned_nodes"] <= applied["max_objects"]
    assert result["returned_nodes"] <= result["total_found_nodes"]
    costs = sum(token_cost(item) for item in [*objects, *relations])
    assert result["estimated_tokens"] == costs <= applied["max_tokens"]
    assert all(r["source"] in returned and r["target"] in returned for r in relations)
    assert result["is_truncated"] == (result["returned_nodes"] < result["total_found_nodes"])
    assert (result["truncation_reason"] is None) == (not result["is_truncated"])
    assert (result["suggested_next_seed"] is None) == (not result["is_truncated"])
    assert result["suggested_next_seed"] not in returned
    seeds = set(params["seed_ids"])
    assert set(result["unresolved"]) == {s for s in seeds if s not in snapshot.concepts}
    if "objects" in graph:
        assert all(o["distance"] <= applied["depth"] for o in objects)
        assert all(o["seed"] == (o["id"] in seeds) for o in objects)
        assert [o["seed"] for o in objects] == sorted((o["seed"] for o in objects), reverse=True)
    for o in objects:
        if o["id"] in seeds:
            continue
        if params.get("include_object_types"):
            assert o["type"] in params["include_object_types"]
        concept = snapshot.concepts.get(o["id"].split(".md#")[0])
        assert concept is not None
        for field, value in (params.get("structure_filters") or {}).items():
            assert field_matches(concept.fm, field, value)

    # visualize_graph is the compact extraction drawn: same budgets, same truncation fields.
    same = {k: v for k, v in params.items() if k != "compact_mode"}
    same["max_objects"] = params.get("max_objects", 20)
    compact = run(snapshot, **same, compact_mode=True)
    drawn = run_tool(visualize_graph, snapshot, same, CancelToken())
    CONTRACTS.check_output("visualize_graph", drawn)
    for key in (
        "total_found_nodes",
        "returned_nodes",
        "is_truncated",
        "truncation_reason",
        "suggested_next_seed",
        "unresolved",
        "applied",
    ):
        assert drawn[key] == compact[key]
    assert drawn["mermaid"].count('["') == compact["returned_nodes"]


# -- input contracts -----------------------------------------------------------------------


def _valid(tool: str, arguments: dict[str, Any]) -> bool:
    try:
        CONTRACTS.check_input(tool, arguments)
    except BundleError:
        return False
    return True


@pytest.mark.parametrize("tool", ["query_subgraph", "visualize_graph"])
def test_input_contracts_clamp_numbers_but_reject_wrong_types(tool: str) -> None:
    base = {"bundle_path": "/srv/bundle", "seed_ids": ["a", "b#c", "a.md#L1-L2"]}
    assert _valid(tool, base)
    assert _valid(tool, {**base, "depth": -9, "max_objects": 0, "max_tokens": 10**12})
    assert _valid(tool, {**base, "type_weights": {"Note": -1.5, "Table": 3}})
    assert _valid(tool, {**base, "structure_filters": {"status": "draft", "tags": ["x"]}})
    assert _valid(tool, {**base, "include_relation_types": [], "include_object_types": []})
    for bad in (
        {"seed_ids": [" "]},
        {"seed_ids": [""]},
        {"seed_ids": []},
        {"seed_ids": "a"},
        {"depth": "1"},
        {"depth": 1.5},
        {"max_objects": True},
        {"type_weights": {"Note": "high"}},
        {"type_weights": {" ": 1}},
        {"structure_filters": {"": "x"}},
        {"include_relation_types": ["  "]},
        {"bogus": 1},
    ):
        assert not _valid(tool, {**base, **bad}), bad


def test_query_subgraph_needs_seeds_visualize_does_not() -> None:
    assert not _valid("query_subgraph", {})
    assert _valid("visualize_graph", {})


def test_search_semantic_input_contract() -> None:
    assert _valid("search_semantic", {"query": "x", "top_k": 99, "min_score": -3, "depth": 9})
    assert _valid("search_semantic", {"query": "x", "seed_ids": ["a"] * 20})
    for bad in (
        {},
        {"query": " "},
        {"query": "x" * 513},
        {"query": "x", "seed_ids": ["a"] * 21},
        {"query": "x", "top_k": "3"},
        {"query": "x", "min_score": "0.5"},
        {"query": "x", "type_weights": {}},
    ):
        assert not _valid("search_semantic", bad), bad
