"""get_semantic_graph's nodes are kept by revision in the parse cache: a restarted server reads
them back, builds no document for them, and answers every call (any as_of, either profile) with
the bytes a server that built them gives. Work counters and equality, no timing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bundle_mcp import derived
from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.model import Snapshot
from bundle_mcp.okf.temporal import DATE_PROFILE, INSTANT_PROFILE
from bundle_mcp.tools.get_semantic_graph import SEMANTIC_GRAPH_NODES, _kept_nodes
from restarts import answers, kept_by, kept_rows, replace_row, restart

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory

CALLS: list[dict[str, Any]] = [
    {}, {"as_of": "2027-01-01"}, {"temporal_profile": INSTANT_PROFILE},
    {"temporal_profile": INSTANT_PROFILE, "as_of": "2027-01-01T00:00:00Z"},
]


def pages() -> dict[str, str]:
    files = {"index.md": '---\nokf_version: "0.2"\n---\n# Home\n\nSee [a](/a/p0.md).\n'}
    for n in range(6):
        files[f"a/p{n}.md"] = (
            f"---\ntype: Guide\ntitle: Page {n}\ntags: [t{n % 2}, shared]\n"
            + ("stale_after: '2026-01-01'\n" if n % 3 == 0 else "")
            + ("trust: 0.5\n" if n % 2 else "")
            + "relations:\n  depends_on:\n    - target: a/p0\n"
            + f"  cites:\n    - target: a/p{n + 1}#part\n    - target: gone\n"
            + f"---\n# Page {n} \u00e9t\u00e9\n\nSee [next](p{n + 1}.md), [home](/a/p0.md)"
            " and [gone](/nowhere.md).\n")
    return files


def warmed(snapshot: Snapshot) -> Any:
    """The date profile's nodes, as a call with an ``as_of`` first asks for them."""
    _kept_nodes(snapshot, DATE_PROFILE, CancelToken())
    return derived.built_value(snapshot, SEMANTIC_GRAPH_NODES, DATE_PROFILE)


def graphs(dispatcher: Dispatcher) -> list[str]:
    return answers(dispatcher, "get_semantic_graph", CALLS)


def kept(bundle: str, cache: Path) -> list[str]:
    """A first process's answers, its nodes kept as it builds them."""
    return kept_by(bundle, cache, lambda first, _: graphs(first))


def test_a_restart_reads_the_nodes_back_without_a_document(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    made = kept(bundle, cache)

    restarted, snapshot = restart(bundle, cache)
    nodes = warmed(snapshot)
    assert list(snapshot.documents.built()) == []  # read back: no document built for them
    # One reference item for each (target, exists), shared by every node naming it, as built.
    items = [item for node, _ in nodes for item in node["references"]]
    assert len({id(item) for item in items}) == len(
        {(item["target"], item["exists"]) for item in items}) < len(items)
    assert graphs(restarted) == made
    assert list(snapshot.documents.built()) == []  # the other profile's too
    uncached = Dispatcher(ServeConfig(bundles=(bundle,)))
    assert graphs(uncached) == made


def test_nodes_kept_for_other_assets_or_folders_are_not_read(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    kept(bundle, cache)
    Path(bundle, "c").mkdir()  # the revision stays the same; what decides the nodes does not

    restarted, snapshot = restart(bundle, cache)
    warmed(snapshot)
    assert list(snapshot.documents.built())  # built again


@pytest.mark.parametrize("damage", [
    "garbage", "another count", "another order", "a reference of another shape",
    "a relation of another shape", "a line cut short",
])
def test_damaged_kept_nodes_are_built_again(
    tmp_bundle: BundleFactory, tmp_path: Path, damage: str
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    made = kept(bundle, cache)
    rows = kept_rows(cache, "%semantic-graph-nodes/2/%")
    assert len(rows) == 2  # each profile's
    for rowid, value in rows:
        header, *lines = value.decode().splitlines()
        nodes = [node for line in lines for node in json.loads(line)]
        if damage == "another count":
            nodes.pop()
        elif damage == "another order":
            nodes.reverse()
        elif damage == "a reference of another shape":
            nodes[1]["references"][0]["exists"] = "yes"
        elif damage == "a relation of another shape":
            nodes[1]["relations"][0]["extra"] = 1
        text = f"{header}\n{json.dumps(nodes)}\n"  # one line of every node reads back
        if damage == "garbage":
            text = "[1,"
        elif damage == "a line cut short":
            text = text[:-2]
        replace_row(cache, rowid, text.encode())

    restarted, snapshot = restart(bundle, cache)
    warmed(snapshot)
    assert list(snapshot.documents.built())  # built again
    assert graphs(restarted) == made
