"""The walk arrays kept by revision (``okf.walk_arrays.packed``): a restarted server's first walk
reads them back instead of walking arc by arc, makes only the edges it reports (not the
bundle's), and answers what a cold server answers; damaged or foreign bytes are never read.
Work counters and answers, no timing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.derived import built_value
from bundle_mcp.model import PARSED
from bundle_mcp.okf import graph as graph_module
from bundle_mcp.okf import walk_arrays
from bundle_mcp.okf.graph import EDGE_WEIGHT, INCOMING, OUTGOING, Selection, graph_of
from test_stored_edges import pages, process
from test_walk_agrees import _bundle, _warm_walk_arrays
from toolcall import snapshot_of

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory

CALLS: tuple[tuple[str, dict[str, Any]], ...] = (
    ("expand_neighbors", {"entity_ids": ["f0/p0"], "depth": 2, "limit": 10}),
    ("expand_neighbors", {"entity_ids": ["f1/p4", "f2/p8"], "depth": 3, "limit": 40,
                          "include_incoming": False}),
    ("query_subgraph", {"seed_ids": ["f0/p0"], "depth": 2}),
    ("query_subgraph", {"seed_ids": ["f2/p5"], "depth": 1}),
)


def answers(dispatcher: Any, bundle: str) -> list[dict[str, Any]]:
    out = []
    for tool, arguments in CALLS:
        found = dispatcher.call(tool, {"bundle_path": bundle, **arguments})
        assert not found.is_error, found.structured
        out.append(dict(found.structured))
    return out


def test_a_restarted_walk_reads_the_kept_arrays_and_makes_only_what_it_reports(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)  # builds the arrays and keeps them
    dispatcher, _, restarted = process(bundle, cache)
    walked = answers(dispatcher, bundle)
    arrays = built_value(restarted, graph_module.WALK_ARRAYS)
    assert arrays is not None and isinstance(arrays.held_edges, walk_arrays.KeptEdges)
    # Read back, not built: no document parsed, and the bundle's edge list never made (each
    # reported edge was made from the kept columns alone).
    assert restarted.documents.work()[PARSED] == 0
    assert not restarted.edges_made()
    cold_dispatcher, _, _ = process(bundle, None)
    assert walked == answers(cold_dispatcher, bundle)
    # Once the snapshot has made its edges, the arrays read them as one tuple.
    edges = restarted.edges
    assert arrays.edges == (*edges, *graph_module._arrays_field_edges(restarted, None))
    assert isinstance(arrays.edges, tuple)


@pytest.mark.parametrize("seed", range(3))
def test_restarted_walks_over_kept_arrays_answer_as_cold_ones(
    tmp_bundle: BundleFactory, tmp_path: Path, seed: int
) -> None:
    """The agreement tests' random bundles (loops, sections, shared tags, field edges, ties):
    every walk tool's answer from a restarted server, its edges not yet indexed (so
    query_subgraph reads its objects' relations from the arrays too), is a cold server's."""
    files = _bundle(seed)
    bundle, cache = tmp_bundle(files), tmp_path / "cache"
    process(bundle, cache, warm=True)
    ids = sorted(path[:-3] for path in files if path != "index.md")
    calls = [("query_subgraph", {"seed_ids": [ids[seed]], "depth": depth}) for depth in (1, 2, 3)]
    calls += [("query_subgraph", {"seed_ids": [ids[seed], ids[-1]], "depth": 2})]
    calls += [("expand_neighbors", {"entity_ids": [ids[seed]], "depth": depth, "limit": 50,
                                    "include_incoming": incoming})
              for depth in (1, 2, 3) for incoming in (True, False)]
    dispatcher, _, restarted = process(bundle, cache)
    found = [dispatcher.call(tool, {"bundle_path": bundle, **arguments}).structured
             for tool, arguments in calls]
    assert not restarted.edges_indexed()
    arrays = built_value(restarted, graph_module.WALK_ARRAYS)
    assert arrays is not None and isinstance(arrays.held_edges, walk_arrays.KeptEdges)
    cold, _, _ = process(bundle, None)
    assert found == [cold.call(tool, {"bundle_path": bundle, **arguments}).structured
                     for tool, arguments in calls]


def test_kept_arrays_read_back_as_they_were_built() -> None:
    for seed in range(4):
        snapshot = snapshot_of(_bundle(seed))
        _warm_walk_arrays(snapshot)
        built = built_value(snapshot, graph_module.WALK_ARRAYS)
        assert built is not None
        links = len(snapshot.edges)
        data = b"".join(walk_arrays.packed(built, links, EDGE_WEIGHT, INCOMING < OUTGOING))
        read = _unpacked(snapshot, data)
        assert read is not None
        for name in ("starts", "other", "edge", "backwards", "walkable", "rank", "sections",
                     "sliced", "weight_code", "negative_weights"):
            column, kept = getattr(built, name), getattr(read, name)
            assert column.dtype == kept.dtype and np.array_equal(column, kept), name
            assert not kept.flags.writeable
        assert read.ids == built.ids and read.index == built.index
        assert list(read.edges) == list(built.edges)


def _unpacked(snapshot: Any, data: bytes | None,
              weights: Any = EDGE_WEIGHT) -> walk_arrays.WalkArrays | None:
    fields = graph_module._arrays_field_edges(snapshot, None)
    edges = walk_arrays.KeptEdges(snapshot, len(snapshot.edges), fields)
    return walk_arrays.unpacked(data, tuple(sorted(snapshot.concepts)), edges, weights,
                                INCOMING < OUTGOING)


def _damaged(data: bytes, old: bytes, new: bytes) -> bytes:
    assert old in data
    return data.replace(old, new, 1)


def _column_start(data: bytes, name: str) -> int:
    """Where a kept column's bytes begin."""
    import json
    import struct

    head = data.index(b"{")
    (length,) = struct.unpack_from("<Q", data, head - 8)
    described = json.loads(data[head:head + length])
    at = head + length
    for entry in described["columns"]:
        if entry[0] == name:
            return at
        at += np.dtype(entry[1]).itemsize * entry[2]
    raise KeyError(name)


def test_damaged_or_foreign_kept_arrays_are_not_read() -> None:
    snapshot = snapshot_of(_bundle(1))
    _warm_walk_arrays(snapshot)
    built = built_value(snapshot, graph_module.WALK_ARRAYS)
    assert built is not None
    data = b"".join(walk_arrays.packed(built, len(snapshot.edges), EDGE_WEIGHT,
                                       INCOMING < OUTGOING))
    assert _unpacked(snapshot, data) is not None

    def poked(name: str, value: int) -> bytes:
        """``data`` with the first value of a column set to ``value``."""
        at = _column_start(data, name)
        column = getattr(built, name)
        raw = np.array([value], column.dtype).tobytes()
        return data[:at] + raw + data[at + len(raw):]

    damaged = [
        None, b"", data[:-1], data + b"\0", b"x" + data[1:],
        _damaged(data, b'"links":', b'"links":1'),  # another number of links
        _damaged(data, b'"incoming_first":true', b'"incoming_first":false')
        if b'"incoming_first":true' in data else
        _damaged(data, b'"incoming_first":false', b'"incoming_first":true'),
        _damaged(data, b'"int8"', b'"int16"'),  # a type build never makes
        _damaged(data, b'"columns":[["starts"', b'"columns":[["start"'),
        poked("other", len(built.ids)), poked("edge", -1), poked("rank", len(built.rank)),
        poked("starts", 1), poked("weight_code", 9), poked("sections", -1),
    ]
    for bad in damaged:
        assert _unpacked(snapshot, bad) is None, bad[:80] if bad else bad
    # Made with other weights: the ranks would be another order.
    other_weights = {**EDGE_WEIGHT, "field": 0.123}
    assert _unpacked(snapshot, data, other_weights) is None


def test_a_restarted_call_reads_kept_arrays_for_a_selection_of_every_edge(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """Before the warm-up has run, a walk of every edge reads the kept arrays back; a walk of
    named relationship types walks arc by arc whatever is kept."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, restarted = process(bundle, cache)
    graph = graph_of(restarted)
    assert graph_module._arrays_for(graph, Selection.named(["LINKS_TO"])) is None
    assert built_value(restarted, graph_module.WALK_ARRAYS) is None
    arrays = graph_module._arrays_for(graph, Selection.every())
    assert arrays is not None and isinstance(arrays.held_edges, walk_arrays.KeptEdges)
    assert built_value(restarted, graph_module.WALK_ARRAYS) is arrays


def test_a_cold_walk_asks_the_parse_cache_for_kept_arrays_once(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the warm-up has kept them, every walk of a served bundle would look in the
    parse cache: the graph remembers that none are kept."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    _, _, snapshot = process(bundle, cache)
    store = snapshot.inbound
    assert store is not None
    asked: list[str] = []
    stored_bytes = type(store).stored_bytes

    def counted(self: Any, revision: str, name: str) -> Any:
        asked.append(name)
        return stored_bytes(self, revision, name)

    monkeypatch.setattr(type(store), "stored_bytes", counted)
    graph = graph_of(snapshot)
    for _ in range(3):
        assert graph_module._arrays_for(graph, Selection.every()) is None
    assert asked.count(walk_arrays.STORED_NAME) == 1
    graph_module.walk(graph, [graph.concept("f0/p0")], Selection.every(), 2,
                      graph_module.UNBOUNDED, CancelToken())
    assert asked.count(walk_arrays.STORED_NAME) == 1


def test_a_restarted_subgraph_reads_its_objects_fields_ahead(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fields of the objects a restarted server's first subgraph prices are read from the
    parse cache a group at a time, not with a query each; the answer is a cold server's."""
    from bundle_mcp.loader.parse_cache import CachedRows

    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    dispatcher, _, restarted = process(bundle, cache)
    one_by_one: list[str] = []
    grouped: list[int] = []
    row, ahead = CachedRows._row, CachedRows.read_ahead_frontmatter

    def counted_row(self: Any, sql: str, parameters: tuple[str, ...]) -> Any:
        if sql.startswith("SELECT entry FROM documents"):
            one_by_one.append(parameters[0])
        return row(self, sql, parameters)

    def counted_ahead(self: Any, paths: Any) -> None:
        grouped.append(len(paths))
        ahead(self, paths)

    monkeypatch.setattr(CachedRows, "_row", counted_row)
    monkeypatch.setattr(CachedRows, "read_ahead_frontmatter", counted_ahead)
    arguments = {"bundle_path": bundle, "seed_ids": ["f0/p0"], "depth": 2}
    answer = dispatcher.call("query_subgraph", arguments).structured
    assert answer["returned_nodes"] > 10 and restarted.documents.work()[PARSED] == 0
    assert grouped and one_by_one == []
    cold, _, _ = process(bundle, None)
    assert answer == cold.call("query_subgraph", arguments).structured


def test_arrays_are_kept_for_a_capture_loaded_from_the_files_only(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """A capture after a change builds its own arrays and does not write them: a restart
    finds the files' capture, and each change would write the columns again."""
    import sqlite3

    from bundle_mcp.readers import ALL_READER

    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    dispatcher, parse, loaded = process(bundle, cache, warm=True)
    assert loaded.loaded

    def kept() -> list[str]:
        parse.settle_parts()
        (database,) = (cache / "parse").glob("*.sqlite3")
        with sqlite3.connect(database) as db:
            return [revision for (revision,) in db.execute(
                "SELECT revision FROM parts WHERE key LIKE ?", (f"%{walk_arrays.STORED_NAME}",))]

    assert kept() == [loaded.revision]
    page = Path(bundle, "f1/p4.md")
    page.write_text(page.read_text(encoding="utf-8") + "\nMore.\n", encoding="utf-8")
    changed = dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)
    assert changed.revision != loaded.revision and not changed.loaded
    _warm_walk_arrays(changed)
    assert built_value(changed, graph_module.WALK_ARRAYS) is not None
    assert kept() == [loaded.revision]
