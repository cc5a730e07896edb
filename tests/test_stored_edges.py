"""A revision's whole-bundle values (links and relations, field edges, tag members, entity
types, section totals, context's sections layout and statistics) are kept in the parse cache by
an earlier process (``CachedRows.keep_edges``, ``keep_json``): a restarted server reads them
back and builds no document for them, and gets what building them gives. Work counters
(documents built), no timing.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from array import array
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bundle_mcp import zstd_frames
from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader import parse_cache
from bundle_mcp.loader.parse_cache import (
    BYTES_PART,
    EDGES_PART,
    JSON_PART,
    ParseCache,
    edge_columns,
    packed_edges,
    unpacked_edges,
)
from bundle_mcp.model import Edge, EdgeColumns, Snapshot
from bundle_mcp.okf.folding import fold
from bundle_mcp.okf.graph import field_edges, graph_of
from bundle_mcp.okf.kept_spans import span_order
from bundle_mcp.readers import ALL_READER
from bundle_mcp.readiness import Readiness
from bundle_mcp.snapshots import SnapshotCache
from bundle_mcp.tools._body_words import (
    STORED_NAME,
    build_index,
    kept_index,
    packed_index,
    unpacked_index,
)
from bundle_mcp.tools._context_index import CONTEXT_WORDS, concept_words, holders
from bundle_mcp.tools._context_index import totals as context_totals
from bundle_mcp.tools._section_index import section_totals
from bundle_mcp.tools.search_concepts import _fields as search_fields

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory


def pages(count: int = 30) -> dict[str, str]:
    files = {"index.md": '---\nokf_version: "0.2"\n---\n# Home\n\nSee [p0](/f0/p0.md).\n',
             "de/masse.md": "---\ntitle: Maße\n---\n# Größe\n\nDie STRASSE und die Größe.\n",
             "de/titel.md": "---\ntitle: Straße\n---\n# Titel\n\nNur ASCII hier, next.\n"}
    for n in range(count):
        nxt, other = (n + 1) % count, (n * 7 + 3) % count
        files[f"f{n % 3}/p{n}.md"] = (
            f"---\ntype: Guide\ntitle: Page {n}\ntags: [t{n % 4}, t{n % 5}]\n"
            f"sources:\n  - resource: /f{other % 3}/p{other}.md\n"
            f"relations:\n  - type: depends_on\n    target: /f{nxt % 3}/p{nxt}.md\n---\n"
            f"# Page {n}\n\nSee [the next](/f{nxt % 3}/p{nxt}.md) and [p{other}]"
            f"(/f{other % 3}/p{other}.md).\n")
    return files


def process(bundle: str, cache: Path | None, *, warm: bool = False
            ) -> tuple[Dispatcher, ParseCache, Snapshot]:
    """One server process on ``cache``: its dispatcher, parse cache and snapshot."""
    parse = ParseCache(cache)
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)),
                            cache=SnapshotCache(parse_cache=parse, watch=False))
    if warm:
        readiness = Readiness(dispatcher, follow=False)
        readiness.start()
        assert readiness.wait(120)
        readiness.stop(wait=10)
    parse.settle_parts()
    return dispatcher, parse, dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)


# search_concepts queries of every kind: a word the index answers alone, a rare part of a word,
# a needle the index cannot narrow (a scan of every body), a title, a tag, a non-ASCII body's.
QUERIES = ("next", "ext", "PAGE 1", " and [", "page 7", "t3", "größe", "straße")


def searched(snapshot: Snapshot) -> tuple[Any, ...]:
    """Each query's concepts and matches, by the search columns (with the index when kept)."""
    token = CancelToken()
    fields = search_fields(snapshot, token)
    index = kept_index(snapshot)
    found = []
    for query in QUERIES:
        needle = fold(query)
        holders = None if index is None else index.holders(needle)
        candidates = holders if holders is not None else (
            None if index is None else index.candidates(needle))
        found.append(fields.priorities(needle, token, candidates, holders=holders is not None))
    return fields.concept_ids, tuple(found)


def whole_bundle(snapshot: Snapshot) -> tuple[Any, ...]:
    token = CancelToken()
    graph = graph_of(snapshot)
    # First, while a restart has built no document: each concept's spans and tags, read from
    # what was kept when it was (okf.kept_spans, the tag members).
    ids = [c for c in span_order(snapshot.concepts) if c in snapshot.concepts]
    spans_and_tags = [(graph.spans(c), graph.tags_of(graph.concept(c))) for c in ids]
    return (spans_and_tags, snapshot.edges, dict(field_edges(snapshot, token)),
            dict(graph_of(snapshot).tag_members(None, token)),
            dict(graph_of(snapshot).tag_members("f1", token)),
            section_totals(snapshot, token), context_totals(snapshot, token),
            holders(snapshot, token).first_section, holders(snapshot, token).owner,
            graph_of(snapshot).known_types(token))


def test_a_restart_reads_the_edges_and_tag_members_back_and_builds_no_document(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)  # cold: keeps what its warm-up built once it saves
    _, parse, restarted = process(bundle, cache)  # keeps the rest (a walk's tag members)
    expected = whole_bundle(restarted)
    parse.settle_parts()

    served, _, again = process(bundle, cache)
    assert whole_bundle(again) == expected
    assert list(again.documents.built()) == []  # read back: no document built
    fresh, _, uncached = process(bundle, None)
    assert whole_bundle(uncached) == expected
    for question in ("what does page 3 depend on", "pages tagged t2"):
        assert (served.call("context", {"question": question}).text
                == fresh.call("context", {"question": question}).text)
    assert expected[0] and expected[1] and expected[2]  # the bundle has each kind


def test_a_restarted_walk_makes_the_edges_of_the_concepts_it_visits_only(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """Before the edge index is built, a restarted snapshot answers one concept's edges from
    the kept edges' columns: the same edges, in the same order, as the index; no document
    built for them, and no edge of the bundle's made but those asked for."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    served, _, restarted = process(bundle, cache)
    _, _, uncached = process(bundle, None)
    ids = list(restarted.concepts)
    for concept_id in ids:
        assert restarted.concept_edges(concept_id) == uncached.edges_by_concept.get(
            concept_id, ())
        assert restarted.edges_of(concept_id) == uncached.edges_of(concept_id)
    assert "edges_by_concept" not in restarted.__dict__ and "edges" not in restarted.__dict__
    assert list(restarted.documents.built()) == []
    arguments = {"concept_id": "f0/p3", "limit": 100}
    assert served.call("get_neighbors", arguments).text == Dispatcher(
        ServeConfig(bundles=(bundle,))).call("get_neighbors", arguments).text
    # Once the index is built it answers, and the columns are let go.
    assert restarted.edges_by_concept.get("f0/p3") == restarted.concept_edges("f0/p3")
    assert "_edge_columns" not in restarted.__dict__


def test_kept_edge_columns_that_do_not_read_as_a_concepts_edges_are_not_used() -> None:
    edges = (Edge("navigation", "a", "b", "a", "b", "LINKS_TO"),
             Edge("relation", "a", "c", "a", "c", "uses"),
             Edge("relation", "c", "c", "c", "c#part", "uses"))
    kept = edge_columns(packed_edges(edges))
    assert kept is not None
    columns = EdgeColumns.read(kept)
    assert columns is not None
    assert columns.of("a") == edges[:2] and columns.of("b") == edges[:1]
    assert columns.of("c") == edges[1:]  # its edge to itself once
    assert columns.of("zz") == ()
    of_a, of_b = columns.of("a"), columns.of("b")
    assert of_a is not None and of_b is not None and of_b[0] is of_a[0]  # one object an edge
    # Checked concept by concept as its edges are made: the others still answer.
    numbers = kept.numbers
    swapped = array("I", numbers[6:12] + numbers[:6] + numbers[12:])  # out of edge order
    columns = EdgeColumns.read(dataclasses.replace(kept, numbers=swapped))
    assert columns is not None and columns.of("a") is None
    kind = array("I", numbers)
    kind[0] = kept.table.index("uses")  # not a link or a relation
    columns = EdgeColumns.read(dataclasses.replace(kept, numbers=kind))
    assert columns is not None and columns.of("a") is None and columns.of("b") is None
    assert columns.of("c") == edges[1:]
    past = array("I", numbers)
    past[12 + 4] = len(kept.table)  # a number past the strings (c's self edge's target ref)
    columns = EdgeColumns.read(dataclasses.replace(kept, numbers=past))
    assert columns is not None and columns.of("c") is None and columns.of("a") == edges[:2]
    assert unpacked_edges(packed_edges(edges)) == edges
    assert EdgeColumns.read(dataclasses.replace(kept, numbers=numbers[:-1])) is None


def test_a_kept_edge_index_that_names_other_edges_is_not_used() -> None:
    """The index of the edges touching each string is checked as a concept's edges are made:
    an edge that does not touch the concept, or edges out of order, and the caller builds
    them instead; one that does not fit the numbers is not read at all."""
    edges = (Edge("navigation", "a", "b", "a", "b", "LINKS_TO"),
             Edge("navigation", "b", "c", "b", "c", "LINKS_TO"),
             Edge("relation", "a", "c", "a", "c", "uses"))
    data = packed_edges(edges)
    kept = edge_columns(data)
    assert kept is not None
    b = kept.table.index("b")
    other = array("I", kept.positions)
    other[kept.starts[b]] = 2  # b's first edge named as a-uses-c
    columns = EdgeColumns.read(dataclasses.replace(kept, positions=other))
    assert columns is not None and columns.of("b") is None and columns.of("c") == edges[1:]
    backwards = array("I", kept.positions)
    start = kept.starts[b]
    backwards[start], backwards[start + 1] = backwards[start + 1], backwards[start]
    columns = EdgeColumns.read(dataclasses.replace(kept, positions=backwards))
    assert columns is not None and columns.of("b") is None
    assert edge_columns(data[:-4]) is None  # a position short
    past = bytearray(data)
    past[-4:] = array("I", [len(edges)]).tobytes()  # a position past the edges: c's last
    read = edge_columns(bytes(past))
    columns = None if read is None else EdgeColumns.read(read)
    assert columns is not None and columns.of("c") is None and columns.of("a") == edges[::2]
    assert unpacked_edges(data) == edges


def test_a_restarted_snapshot_builds_the_edges_a_damaged_index_would_give_wrong(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, uncached = process(bundle, None)
    real = parse_cache.edge_columns

    def misnamed(data: bytes) -> Any:
        kept = real(data)
        assert kept is not None
        return dataclasses.replace(kept, positions=array("I", reversed(kept.positions)))

    monkeypatch.setattr(parse_cache, "edge_columns", misnamed)
    _, _, restarted = process(bundle, cache)
    hub = max(restarted.concepts, key=lambda c: len(uncached.edges_by_concept.get(c, ())))
    assert len(uncached.edges_by_concept[hub]) > 1
    assert restarted.concept_edges(hub) == uncached.edges_by_concept[hub]
    assert restarted.edges_of(hub) == uncached.edges_of(hub)


def test_a_cold_servers_values_wait_for_its_first_save(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """A cold start has no database to keep its values in: what its warm-up builds waits for
    the save that makes it, and the first restart reads them back."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, restarted = process(bundle, cache)
    token = CancelToken()
    got = (restarted.edges, dict(field_edges(restarted, token)),
           section_totals(restarted, token), context_totals(restarted, token),
           holders(restarted, token).first_section)
    assert list(restarted.documents.built()) == []
    _, _, uncached = process(bundle, None)
    assert got == (uncached.edges, dict(field_edges(uncached, token)),
                   section_totals(uncached, token), context_totals(uncached, token),
                   holders(uncached, token).first_section)


def test_damaged_kept_edges_are_built_again(tmp_bundle: BundleFactory, tmp_path: Path) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, parse, restarted = process(bundle, cache)
    expected = whole_bundle(restarted)
    parse.settle_parts()
    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:
        rows = list(db.execute(
            "SELECT rowid, key, value FROM parts WHERE key LIKE ? OR key LIKE ? OR key LIKE ?",
            (f"{EDGES_PART}%", f"{JSON_PART}%", f"{BYTES_PART}%")))
        # findings (two walks, orphans, the bundle's), summary counts, the graph's nodes, the
        # list's entries, the 'did you mean' index, context's norms and columns, the sections'
        # spans, the walk arrays
        assert len(rows) == 25
        for rowid, key, value in rows:
            data = zstd_frames.unpacked(value)
            # Out of order, or not the shape it is read as: each caller checks.
            wrong = (packed_edges(tuple(reversed(unpacked_edges(data) or ())))
                     if key.startswith(EDGES_PART) else data[:-1] if key.startswith(BYTES_PART)
                     else b'{"t0": ["z", "a"]}')
            db.execute("UPDATE parts SET value = ? WHERE rowid = ?",
                       (zstd_frames.packed(wrong), rowid))

    _, _, again = process(bundle, cache)
    assert whole_bundle(again) == expected
    assert searched(again) == searched(restarted)


def test_kept_edges_are_not_read_for_another_revision(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, parse, restarted = process(bundle, cache)
    whole_bundle(restarted)
    parse.settle_parts()
    Path(bundle, "f0/p3.md").unlink()

    _, _, changed = process(bundle, cache)
    _, _, uncached = process(bundle, None)
    assert whole_bundle(changed) == whole_bundle(uncached)


def test_packed_edges_read_back_exactly_and_only_whole() -> None:
    edges = tuple(Edge("navigation", f"c{n}", f"c{n + 1}", f"c{n}", f"c{n + 1}", "LINKS_TO")
                  for n in range(50)) + (Edge("relation", "c1", "ü/é", "c1", "ü/é#x", "uses"),)
    data = packed_edges(edges)
    assert unpacked_edges(data) == edges
    assert unpacked_edges(packed_edges(())) == ()
    for broken in (b"", data[:-1], data + b"\x00", b"xxxx" + data[4:],
                   data[:5] + b"\xff" * 16 + data[21:]):
        assert unpacked_edges(broken) is None


def test_edge_order_is_kind_from_to_relationship_and_checks_kept_edges() -> None:
    """``edge_order`` picks Edge's fields by position (in C): it must be the key its name
    says, and a kept list of edges is used only in that order, links and relations only."""
    from bundle_mcp.model import _in_edge_order, edge_order

    edge = Edge("relation", "a", "b", "a#x", "b#y", "uses")
    assert edge_order(edge) == (edge.kind, edge.source_ref, edge.target_ref,
                                edge.relationship)
    edges = sorted((Edge("navigation", f"c{n % 7}", f"c{n}", f"c{n % 7}", f"c{n}", "LINKS_TO")
                    for n in range(40)), key=edge_order)
    edges.append(Edge("relation", "c1", "c2", "c1", "c2", "uses"))
    assert _in_edge_order(tuple(edges))
    assert _in_edge_order((edges[0], edges[0]))  # equal keys side by side are in order
    assert _in_edge_order(())
    assert not _in_edge_order((edges[1], edges[0]))
    assert not _in_edge_order(tuple(edges[::-1]))
    assert not _in_edge_order((Edge("field", "a", "b", "a", "b", "SOURCED_FROM"),))


def test_a_restarted_search_reads_its_columns_and_index_back(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """search_concepts' columns and body word index read back: a restart's first query finds
    what an uncached server finds, and builds no document: not every concept's for the
    columns (the index answers a word alone), and not the matched concepts' for their cards
    (read from their rows, ``Concepts.fields_of``)."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    served, _, restarted = process(bundle, cache)
    assert kept_index(restarted) is not None  # read back by the first look, not built
    answer = served.call("search_concepts", {"query": "Next", "limit": 100})
    hits = [hit["concept"]["id"] for hit in answer.structured["hits"]]
    assert hits and answer.structured["total"] == len(hits)
    assert list(restarted.documents.built()) == []
    expected = searched(restarted)
    fresh, _, uncached = process(bundle, None)
    assert kept_index(uncached) is None
    assert searched(uncached) == expected
    for query in QUERIES:
        assert (served.call("search_concepts", {"query": query}).text
                == fresh.call("search_concepts", {"query": query}).text)


def test_a_packed_index_reads_back_exactly_and_only_whole(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    _, _, snapshot = process(tmp_bundle(pages()), None)
    index = build_index(snapshot, CancelToken())
    data = packed_index(index)
    again = unpacked_index(data, snapshot.concepts)
    assert again is not None
    assert (again.concepts, dict(again.numbers), again.words, again.vocabulary) == (
        index.concepts, dict(index.numbers), index.words, index.vocabulary)
    assert {w: list(n) for w, n in again.postings.items()} == {
        w: list(n) for w, n in index.postings.items()}
    assert unpacked_index(data, (*snapshot.concepts, "another")) is None
    assert unpacked_index(data, tuple(snapshot.concepts)[1:]) is None
    for broken in (b"", data[:-1], data + b"\x00", b"xxxx" + data[4:], data[:5] + b"Q" + data[6:],
                   data.replace(b'"next"', b'"page"', 1)):
        assert unpacked_index(broken, snapshot.concepts) is None
    past = bytearray(data)  # the last posting's last number names no concept
    past[-array(index.typecode).itemsize:] = array(
        index.typecode, [len(index.concepts)]).tobytes()
    assert unpacked_index(bytes(past), snapshot.concepts) is None
    assert again.postings.get("no such word") is None and "next" in again.postings
    assert STORED_NAME  # the row's name, under the parts' bytes prefix


def test_a_restarted_section_search_builds_only_the_documents_it_shows(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """With a term's postings and every section's length read back, a restart's first
    search_sections scores every section holding its terms and builds the documents of the
    hits it shows only."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    arguments = {"query": "page next", "limit": 3}
    cold, parse, _ = process(bundle, cache, warm=True)
    cold.call("search_sections", arguments)  # keeps the terms' postings
    parse.settle_parts()
    restarted_search_builds_only_what_it_shows(bundle, cache, arguments)


def restarted_search_builds_only_what_it_shows(bundle: str, cache: Path,
                                               arguments: dict[str, Any]) -> None:
    """A restarted server's search_sections builds the documents of the hits it shows and no
    other, and answers as a server with no cache does."""
    served, _, restarted = process(bundle, cache)
    answer = served.call("search_sections", arguments)
    shown = {hit["path"] for hit in answer.structured["hits"]}
    assert answer.structured["total"] > len(shown) == 3
    assert {doc.path for doc in restarted.documents.built()} == shown
    fresh, _, _ = process(bundle, None)
    assert answer.text == fresh.call("search_sections", arguments).text


def test_a_restarted_subgraph_builds_only_the_documents_it_renders(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """An unfiltered query_subgraph ranks what its walk reaches by distance and ID: with the
    edges, spans and tags read back, a restart builds no document for its walk, and renders
    its objects from their rows (``Concepts.fields_of``): it builds at most the documents of
    sections it renders, none of a titled concept."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    arguments = {"seed_ids": ["f0/p0"], "depth": 3, "max_objects": 4}
    process(bundle, cache, warm=True)
    served, _, restarted = process(bundle, cache)
    answer = served.call("query_subgraph", arguments)
    assert not answer.is_error, answer.structured
    structured = answer.structured
    rendered = {node["id"] for node in structured["subgraph"]["objects"]}
    assert structured["total_found_nodes"] > 2 * len(rendered) > 0
    built = {doc.concept_id for doc in restarted.documents.built()}
    sections = {node["concept_id"] for node in structured["subgraph"]["objects"]
                if node["kind"] == "section"}
    assert built <= {"f0/p0", *sections}
    fresh, _, _ = process(bundle, None)
    assert answer.text == fresh.call("query_subgraph", arguments).text


def test_a_restarted_question_builds_only_the_documents_it_packs(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """context reads the words and the card of every concept it ranks and prices: a restart
    reads them from the parse cache's rows without building those documents
    (``derived.of_concept``), and builds the documents whose text it takes."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    arguments = {"question": "which page comes next", "max_tokens": 400}
    process(bundle, cache, warm=True)
    served, _, restarted = process(bundle, cache)
    answer = served.call("context", arguments)
    assert not answer.is_error, answer.structured
    built = {doc.concept_id for doc in restarted.documents.built()}
    packed = {item["parent_id"] for item in answer.structured["items"]}
    assert packed and packed <= built  # and the texts it tried that did not fit, no more
    assert answer.structured["omitted"] > len(built) - len(packed)
    # Read back before their documents were built, the words are kept by the files' cells,
    # and a document built later takes them: neither read nor decoded again.
    unbuilt = next(c for c in restarted.concepts.paths if c not in built)
    words = concept_words(restarted, unbuilt)
    assert concept_words(restarted, unbuilt) is words
    assert restarted.concepts[unbuilt].memo.peek((CONTEXT_WORDS, None)) == (True, words)
    fresh, _, _ = process(bundle, None)
    assert answer.text == fresh.call("context", arguments).text
