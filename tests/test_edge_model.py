"""One edge model (issue 27): a link, a typed relation and a field edge are each one
:class:`bundle_mcp.model.Edge`, and both of its wire names are read off that one object.

get_neighbors reports an edge's ``kind`` (``navigation``, ``relation``); the graph verbs report
its ``relationship`` (``LINKS_TO``, the relation's type, the field edge's name). Before, the graph
mapped one name to the other in three places of its own (the walk, context, the viewer) and kept
field edges as a second type; now no module outside the model spells either wire name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from pathlib import Path

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.model import FIELD, LINKS_TO, NAVIGATION, RELATION, Edge
from bundle_mcp.okf.graph import UNBOUNDED, Selection, field_edges, graph_of

BundleFactory = Callable[[Mapping[str, str | bytes]], str]
SRC = Path(__file__).resolve().parent.parent / "src" / "bundle_mcp"

FILES = {
    "index.md": "# Index\n\n- [Orders](orders.md)\n",
    "orders.md": (
        "---\ntype: Table\ntitle: Orders\nrelations:\n  FEEDS:\n    - target: report\n"
        "---\n# Orders\n\nSee [the report](report.md).\n"
    ),
    "report.md": "---\ntype: Report\ntitle: Report\nresource: orders.md\n---\n# Report\n",
}


def test_every_concept_edge_is_one_edge_with_both_names(tmp_bundle: BundleFactory) -> None:
    bundle = tmp_bundle(FILES)
    snapshot = Dispatcher(ServeConfig(bundles=(bundle,))).served_snapshot(bundle, CancelToken())
    fields = [e for per in field_edges(snapshot).values() for e in per]
    assert fields and all(isinstance(e, Edge) and e.kind == FIELD for e in fields)
    by_kind = {e.kind: e for e in (*snapshot.edges, *fields)}
    assert set(by_kind) == {NAVIGATION, RELATION, FIELD}
    assert by_kind[NAVIGATION].relationship == LINKS_TO
    assert by_kind[NAVIGATION].relation_type is None  # get_neighbors' wire field
    assert by_kind[RELATION].relationship == by_kind[RELATION].relation_type == "FEEDS"
    assert by_kind[FIELD].relationship == "DESCRIBES"

    # The walk reports each edge under the edge's own names: no second mapping.
    graph = graph_of(snapshot)
    steps = [s for cid in ("orders", "report") for s in graph.steps(
        graph.concept(cid), Selection.every(), UNBOUNDED, CancelToken())]
    seen = {(s.kind, s.relationship) for s in steps if s.kind in (NAVIGATION, RELATION, FIELD)}
    assert seen == {(e.kind, e.relationship) for e in by_kind.values()}


def test_only_the_model_spells_the_edge_wire_names() -> None:
    spelled = re.compile(r"""["'](LINKS_TO|navigation)["']""")
    homes = sorted(
        str(path.relative_to(SRC)) for path in SRC.rglob("*.py")
        if spelled.search(path.read_text(encoding="utf-8"))
    )
    assert homes == ["model.py"]
