"""get_neighbors takes a concept's edges as the snapshot keeps them, filtered in C
(``select_edges``): the snapshot's edge order (``model.edge_order``) is the one get_neighbors'
contract states, (kind, from, to, relation type), a link's missing type ordering as the empty
string, ties included."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from hypothesis import given
from hypothesis import strategies as st

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.model import LINKS_TO, NAVIGATION, RELATION, Edge, Snapshot, edge_order
from bundle_mcp.tools.get_neighbors import DIRECTIONS, select_edges

BundleFactory = Callable[[Mapping[str, str | bytes]], str]

_IDS = st.sampled_from(["a", "b", "c"])
_REFS = st.sampled_from(["a", "b", "c", "a#x", "b#y"])
_EDGES = st.lists(
    st.one_of(
        st.builds(lambda s, t, sr, tr: Edge(NAVIGATION, s, t, sr, tr, LINKS_TO),
                  _IDS, _IDS, _REFS, _REFS),
        st.builds(lambda s, t, sr, tr, name: Edge(RELATION, s, t, sr, tr, name),
                  _IDS, _IDS, _REFS, _REFS, st.sampled_from(["", "FEEDS", "OWNS"])),
    ),
    max_size=40,
)


def _stated_order(edge: Edge) -> tuple[str, str, str, str]:
    return (edge.kind, edge.source_ref, edge.target_ref, edge.relation_type or "")


@given(_EDGES)
def test_the_snapshots_edge_order_is_the_stated_order_ties_included(edges: list[Edge]) -> None:
    # Equal keys keep their places in both sorts (stable): the same list, object for object.
    ordered = sorted(edges, key=edge_order)
    stated = sorted(edges, key=_stated_order)
    assert [id(e) for e in ordered] == [id(e) for e in stated]


def _plain_selection(snapshot: Snapshot, concept_id: str, direction: str,
                     kinds: list[str]) -> list[Edge]:
    selected = [
        edge for edge in snapshot.edges_of(concept_id)
        if edge.kind in kinds
        and (direction != "in" or edge.target_id == concept_id)
        and (direction != "out" or edge.source_id == concept_id)
    ]
    return sorted(selected, key=_stated_order)


def test_each_direction_and_kind_selects_as_the_plain_filter(tmp_bundle: BundleFactory) -> None:
    bundle = tmp_bundle({
        "hub.md": ("---\ntype: Hub\ntitle: Hub\nrelations:\n  FEEDS:\n    - target: b\n"
                   "  OWNS:\n    - target: a\n---\n# Hub\n\n[a](a.md) [b](b.md) [me](hub.md)\n"),
        "a.md": ("---\ntype: T\ntitle: A\nrelations:\n  FEEDS:\n    - target: hub\n---\n"
                 "# A\n\n[hub](hub.md) [hub again](hub.md#hub)\n"),
        "b.md": "---\ntype: T\ntitle: B\n---\n# B\n\n[hub](hub.md)\n",
    })
    snapshot = Dispatcher(ServeConfig(bundles=(bundle,))).served_snapshot(bundle, CancelToken())
    assert {e.kind for e in snapshot.edges_of("hub")} == {NAVIGATION, RELATION}
    for direction in DIRECTIONS:
        for kinds in ([NAVIGATION], [RELATION], [NAVIGATION, RELATION], ["source"]):
            chosen = select_edges(snapshot, "hub", direction, kinds, CancelToken())
            assert chosen == _plain_selection(snapshot, "hub", direction, kinds), (
                direction, kinds)


def test_a_concepts_edges_come_in_the_order_get_neighbors_lists(
        tmp_bundle: BundleFactory) -> None:
    # select_edges only filters: it relies on edges_of's edge order being its own.
    # edges_of after a restart and after a change equal this index, order included
    # (tests/test_inbound_index.py, tests/test_capture_after_change.py).
    files = {f"c{n}.md": (f"---\ntype: T\ntitle: C{n}\nrelations:\n  FEEDS:\n"
                          f"    - target: c{(n * 7) % 12}\n  OWNS:\n    - target: c{n % 3}\n"
                          f"---\n# C{n}\n\n[x](c{(n + 5) % 12}.md) [y](c{(n * 5) % 12}.md#c{n})"
                          f" [z](c{n}.md)\n")
             for n in range(12)}
    bundle = tmp_bundle(files)
    snapshot = Dispatcher(ServeConfig(bundles=(bundle,))).served_snapshot(bundle, CancelToken())
    assert snapshot.edges_by_concept
    for concept_id, edges in snapshot.edges_by_concept.items():
        assert list(edges) == sorted(edges, key=_stated_order), concept_id
