"""Edges into a concept from the index: a one-concept call after a restart builds its
neighbourhood, never the bundle, and its edges are the ones the whole bundle gives.

The parse cache's ``targets`` table names, per file's bytes, the concepts its links and
relations point at (``model.InboundHint``). ``Snapshot.edges_of`` builds the concept and the
files the index names or does not know; every test here compares it with
``edges_by_concept``, which builds every document.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.loader.views import reader_view
from bundle_mcp.model import Snapshot
from bundle_mcp.okf.scopes import FolderScope
from bundle_mcp.snapshots import SnapshotCache
from toolcall import every_document_built

CONCEPTS = 40


def _write_bundle(root: Path) -> None:
    """A chain of links in four folders, a typed relation from every fifth concept back to the
    first, a link to an absent concept and a link from the root index."""
    (root / "index.md").write_text(
        '---\nokf_version: "0.2"\n---\n# Bundle\n\n- [first](f0/c0.md)\n', encoding="utf-8")
    for n in range(CONCEPTS):
        folder = root / f"f{n % 4}"
        folder.mkdir(exist_ok=True)
        nxt = n + 1
        relations = ""
        if n % 5 == 0 and n:
            relations = "relations:\n  derived_from:\n    - target: f0/c0\n"
        (folder / f"c{n}.md").write_text(
            f"---\ntype: Metric\ntitle: Concept {n}\n{relations}---\n# Concept {n}\n\n"
            f"See [next](/f{nxt % 4}/c{nxt}.md) and [gone](/nowhere/x.md).\n",
            encoding="utf-8",
        )


@pytest.fixture()
def filled(tmp_path: Path) -> tuple[Path, Path]:
    """A bundle and a parse cache holding every document with its Markdown facts."""
    root = tmp_path / "bundle"
    root.mkdir()
    _write_bundle(root)
    snapshot, _ = load_bundle(str(root))
    for doc in snapshot.documents.values():
        assert doc.markdown is not None
    ParseCache(tmp_path / "cache").save(str(root), every_document_built(snapshot.documents))
    return root, tmp_path / "cache"


def _restarted(root: Path, cache: Path) -> Snapshot:
    rows = ParseCache(cache).load(str(root))
    assert rows is not None
    snapshot, _ = load_bundle(str(root), cached=rows)
    assert snapshot.inbound is not None
    return snapshot


def _whole(root: Path) -> Snapshot:
    snapshot, _ = load_bundle(str(root))
    assert snapshot.inbound is None
    return snapshot


def test_the_edges_of_every_concept_are_the_whole_bundles(filled: tuple[Path, Path]) -> None:
    root, cache = filled
    whole = _whole(root)
    for concept_id in whole.concepts:
        assert _restarted(root, cache).edges_of(concept_id) == \
            whole.edges_by_concept.get(concept_id, ()), concept_id


def test_the_edges_into_a_concept_build_only_its_sources(filled: tuple[Path, Path]) -> None:
    root, cache = filled
    snapshot = _restarted(root, cache)
    edges = snapshot.edges_of("f0/c0")
    # Into c0: the relations of c5, c10, … c35; out of c0: its link to c1.
    assert {e.source_id for e in edges} == {"f0/c0"} | {
        f"f{n % 4}/c{n}" for n in range(5, CONCEPTS, 5)}
    built = {doc.path for doc in snapshot.documents.built()}
    # The root index links to c0 too (no concept, so no edge); c0's link target is only
    # looked up, never built.
    assert built == {"index.md", "f0/c0.md"} | {
        f"f{n % 4}/c{n}.md" for n in range(5, CONCEPTS, 5)}
    assert snapshot.documents.work()["parsed"] == 0


def test_a_changed_file_is_looked_at_whatever_the_index_says(
    filled: tuple[Path, Path]
) -> None:
    """A file whose bytes the index has no row for may hold any edge: it is built."""
    root, cache = filled
    (root / "f3" / "c7.md").write_text(
        "---\ntype: Metric\ntitle: Concept 7\n---\n# Seven\n\n[to twenty](/f0/c20.md)\n",
        encoding="utf-8")
    snapshot = _restarted(root, cache)
    edges = snapshot.edges_of("f0/c20")
    assert "f3/c7" in {e.source_id for e in edges}
    assert edges == _whole(root).edges_by_concept.get("f0/c20", ())
    assert "f3/c7.md" in {doc.path for doc in snapshot.documents.built()}


def test_rows_pruned_by_another_process_count_as_unknown(filled: tuple[Path, Path]) -> None:
    root, cache = filled
    snapshot = _restarted(root, cache)
    assert snapshot.edges_of("f1/c1")  # reads the index once
    database = ParseCache(cache).database(str(root))
    assert database is not None
    with sqlite3.connect(database) as db:  # another process's save dropped these rows
        db.execute("DELETE FROM targets WHERE path = 'f0/c0.md'")
        db.execute("DELETE FROM facts WHERE path = 'f0/c0.md'")
    assert snapshot.edges_of("f1/c1") == _whole(root).edges_by_concept.get("f1/c1", ())
    assert any(e.source_id == "f0/c0" for e in snapshot.edges_of("f1/c1"))


def test_an_unreadable_index_falls_back_to_every_document(filled: tuple[Path, Path]) -> None:
    root, cache = filled
    snapshot = _restarted(root, cache)
    database = ParseCache(cache).database(str(root))
    assert database is not None
    with sqlite3.connect(database) as db:
        db.execute("DROP TABLE targets")
    assert snapshot.edges_of("f0/c0") == _whole(root).edges_by_concept.get("f0/c0", ())
    assert len(list(snapshot.documents.built())) == CONCEPTS  # every concept


def test_a_readers_view_keeps_to_its_files(filled: tuple[Path, Path]) -> None:
    root, cache = filled
    scope = FolderScope.of(("f0", "f1"))
    view = reader_view(_restarted(root, cache), scope)
    whole = reader_view(_whole(root), scope)
    for concept_id in whole.concepts:
        assert view.edges_of(concept_id) == whole.edges_by_concept.get(concept_id, ())


def test_after_a_restart_get_neighbors_builds_its_neighbourhood(
    filled: tuple[Path, Path]
) -> None:
    root, cache = filled
    snapshots = SnapshotCache(parse_cache=ParseCache(cache), watch=False)
    dispatcher = Dispatcher(ServeConfig(bundles=(str(root),)), cache=snapshots)
    outcome = dispatcher.call("get_neighbors", {"concept_id": "f1/c9"})
    assert not outcome.is_error, outcome.structured
    assert [(e["from"], e["to"]) for e in outcome.structured["edges"]] == [
        ("f0/c8", "f1/c9"), ("f1/c9", "f2/c10")]
    snapshot = snapshots.get(str(root), CancelToken())
    # The concept and the one the index names as linking to it, for their edges; the cards
    # (f2/c10's too) come from the rows.
    assert {doc.path for doc in snapshot.documents.built()} == {"f0/c8.md", "f1/c9.md"}
    assert snapshot.documents.work()["parsed"] == 0
