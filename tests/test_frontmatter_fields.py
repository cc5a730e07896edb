"""``Document.fields``: a frontmatter the parse cache gave, read key by key without freezing the
whole of it (a card, a name, a type, the tags of each of hundreds of documents), equal to
``Document.fm`` key by key; ``Concepts.fields_of``: the same read from a concept's row without
building its document, as a restarted server's cards and subgraph objects are. Work counters
(documents built), no timing."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.model import Concepts, Unfrozen
from bundle_mcp.okf.names import concept_name
from bundle_mcp.okf.properties import card
from bundle_mcp.okf.temporal import reference_from
from test_stored_edges import pages, process

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory

FILES = {
    "index.md": '---\nokf_version: "0.2"\n---\n# Home\n',
    "a.md": "---\ntitle: A\ntags: [x, y, x]\nstatus: draft\nverified:\n  - by: human:ann\n"
            "    at: 2025-01-01\nsources:\n  - id: s1\n    resource: /b.md\n---\n# A\n",
    "b.md": "---\ntitle: '  '\nstatus: null\nverified: {by: 'tool:x'}\ndescription: 7\n"
            "stale_after: 2020-01-01\n---\n# Heading B\n",
    "c.md": "---\nstatus: [odd]\ntags: not-a-list\nnested: {a: {b: [1, {c: 2}]}}\n---\n"
            "No heading.\n",
    "d.md": "# No frontmatter\n",
}


def test_fields_equal_fm_and_freeze_nothing(tmp_bundle: BundleFactory, tmp_path: Path) -> None:
    bundle, cache = tmp_bundle(FILES), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, restarted = process(bundle, cache)
    _, _, cold = process(bundle, None)
    ref = reference_from({"as_of": "2024-06-01"})
    for concept_id in ("a", "b", "c", "d"):
        doc = restarted.concepts[concept_id]
        held = doc.frontmatter_value
        fields = doc.fields
        named = concept_name(doc)
        carded = card(doc, ref)
        if isinstance(held, Unfrozen):
            assert not held.is_frozen()  # a name and a card froze nothing
        assert list(fields) == list(doc.fm) and len(fields) == len(doc.fm)
        for key in [*doc.fm, "absent"]:
            assert (key in fields) == (key in doc.fm)
            assert fields.get(key) == doc.fm.get(key)
        assert named == concept_name(cold.concepts[concept_id])
        assert carded == card(cold.concepts[concept_id], ref)
        # Once frozen, fields is the frozen mapping itself.
        assert doc.fields is doc.fm or not doc.fm


def test_a_restart_reads_fields_from_the_rows_building_no_document(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(FILES), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, restarted = process(bundle, cache)
    _, _, cold = process(bundle, None)
    concepts = restarted.concepts
    assert isinstance(concepts, Concepts)
    read = {c: dict(restarted.fields_of(c)) for c in concepts.paths if c in concepts}
    assert list(restarted.documents.built()) == []
    assert read == {c: dict(cold.concepts[c].fields) for c in read}
    assert {restarted.concept_path(c) for c in read} == {cold.concepts[c].path for c in read}


@pytest.mark.parametrize("damage", [
    "not json", '{"sha256": "0", "frontmatter": {"title": "Wrong"}, "parse_error": null}',
    '{"frontmatter": ["a list"]}',
], ids=["garbage", "other-bytes", "shape"])
def test_a_row_that_does_not_fit_is_not_read(tmp_bundle: BundleFactory, tmp_path: Path,
                                            damage: str) -> None:
    bundle, cache = tmp_bundle(FILES), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, cold = process(bundle, None)
    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:
        db.execute("UPDATE documents SET entry = ? WHERE path = 'a.md'", (damage,))
    _, _, restarted = process(bundle, cache)
    assert dict(restarted.fields_of("a")) == dict(cold.concepts["a"].fields)


def test_a_restarted_neighbour_list_and_subgraph_build_no_card_document(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    dispatcher, _, restarted = process(bundle, cache)
    _, _, cold = process(bundle, None)
    neighbours = dispatcher.call("get_neighbors", {"bundle_path": bundle, "concept_id": "f0/p0"})
    assert not neighbours.is_error and len(neighbours.structured["edges"]) > 2
    assert {doc.path for doc in restarted.documents.built()} == {"f0/p0.md"}
    subgraph = dispatcher.call("query_subgraph", {"bundle_path": bundle, "seed_ids": ["f0/p0"],
                                                  "depth": 2})
    assert not subgraph.is_error
    objects = subgraph.structured["subgraph"]["objects"]
    assert len(objects) > 10
    # Only the documents of the sections it renders (their headings): every concept is titled.
    sections = {o["path"] for o in objects if o["kind"] == "section"}
    assert {doc.path for doc in restarted.documents.built()} <= {"f0/p0.md", *sections}
    cold_dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    for name, arguments in [("get_neighbors", {"concept_id": "f0/p0"}),
                            ("query_subgraph", {"seed_ids": ["f0/p0"], "depth": 2})]:
        again = cold_dispatcher.call(name, {"bundle_path": bundle, **arguments})
        first = neighbours if name == "get_neighbors" else subgraph
        assert again.structured == first.structured
    assert cold.revision == restarted.revision
