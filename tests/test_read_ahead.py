"""A warm-up about to read every document's kept section words reads them in one query
(``InboundHint.read_ahead``): each document gets the value a query of its own gives, and the
rows are handed out once. Work counters and equality, no timing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bundle_mcp import model
from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader import parse_cache
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.readers import ALL_READER
from bundle_mcp.readiness import warm_steps
from bundle_mcp.snapshots import SnapshotCache
from bundle_mcp.tools import _section_index

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory


def pages() -> dict[str, str]:
    files = {"index.md": "# Home\n"}
    for n in range(12):
        files[f"f{n % 3}/p{n}.md"] = (
            f"---\ntitle: Page {n}\n---\n# Page {n}\n\nThe cache {n}.\n\n## Part\n\nMore {n}.\n")
    return files


def warmed(bundle: str, cache: Path) -> tuple[Any, list[Any]]:
    snapshots = SnapshotCache(parse_cache=ParseCache(cache), watch=False)
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)), cache=snapshots)
    snapshot = dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)
    warm = _section_index.SECTION_WORDS.warm
    assert warm is not None
    warm(snapshot, CancelToken())
    indexes = [_section_index._document_index(doc) for doc in snapshot.concepts.values()]
    snapshots.persist(bundle, snapshot, now=True)
    return snapshot, indexes


def test_a_restart_reads_every_documents_section_words_in_one_query(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    _, built = warmed(bundle, cache)
    queries: list[str] = []
    real = parse_cache.CachedRows._row

    def counted(self: Any, sql: str, parameters: tuple[str, ...]) -> Any:
        if "FROM derived" in sql:
            queries.append(sql)
        return real(self, sql, parameters)

    monkeypatch.setattr(parse_cache.CachedRows, "_row", counted)
    snapshot, again = warmed(bundle, cache)
    assert again == built
    assert queries == []  # every document's row was read ahead, none on its own
    assert snapshot.inbound._ahead == {}  # type: ignore[union-attr]  # each handed out once


def test_rows_of_other_bytes_are_not_read_ahead(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    warmed(bundle, cache)
    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:  # a row of bytes the file no longer has
        db.execute("INSERT INTO derived SELECT path, 'other', key, value FROM derived LIMIT 1")
    snapshots = SnapshotCache(parse_cache=ParseCache(cache), watch=False)
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)), cache=snapshots)
    snapshot = dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)
    key = "section_words/2/null"
    snapshot.inbound.read_ahead(key)  # type: ignore[union-attr]
    ahead = snapshot.inbound._ahead[key]  # type: ignore[union-attr]
    assert len(ahead) == 12 and all(sha256 != "other" for _, sha256 in ahead)


def test_the_documents_step_reads_each_groups_rows_in_one_query(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a cache that keeps rows for fewer than half the files (here 13 of 27: files were
    added since), the warm-up builds the documents, reading the rows it has a group at a time;
    over one that keeps most, it builds none (``test_after_a_restart_the_warm_up_builds_no_
    document``)."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    first, _ = warmed(bundle, cache)
    for n in range(14):
        Path(bundle, "new", f"q{n}.md").parent.mkdir(exist_ok=True)
        Path(bundle, "new", f"q{n}.md").write_text(f"# New {n}\n\nText {n}.\n",
                                                   encoding="utf-8")
    queries: list[str] = []
    real = parse_cache.CachedRows._row

    def counted(self: Any, sql: str, parameters: tuple[str, ...]) -> Any:
        if "FROM documents" in sql:
            queries.append(sql)
        return real(self, sql, parameters)

    monkeypatch.setattr(parse_cache.CachedRows, "_row", counted)
    snapshots = SnapshotCache(parse_cache=ParseCache(cache), watch=False)
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)), cache=snapshots)
    snapshot = dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)
    for step in warm_steps(dispatcher, bundle, ALL_READER, snapshot):
        if step.name.startswith("documents"):
            step.build(CancelToken())
    built = {doc.path: doc for doc in snapshot.documents.built()}
    assert len(built) == len(pages()) + 14
    assert all(doc.parse_error is None for doc in built.values())
    # The twelve concepts' rows (the first process never built the index's document).
    assert snapshot.documents.work()["decoded"] == len(pages()) - 1
    assert queries == []  # every row read ahead, none on its own
    assert snapshot.inbound._ahead_entries == {}  # type: ignore[union-attr]
    assert {path: doc.markdown for path, doc in built.items() if path in pages()} == {
        path: first.documents[path].markdown for path in pages()}


def many_pages() -> dict[str, str]:
    """More concepts than a pass reads one by one (``model.MIN_READ_AHEAD``)."""
    files = {"index.md": "# Home\n"}
    for n in range(3 * model.MIN_READ_AHEAD):
        files[f"f{n % 4}/p{n}.md"] = (
            f"---\ntitle: Page {n}\n---\n# Page {n}\n\nThe cache {n} fills.\n\n"
            f"## Part\n\nMore cache words {n}.\n")
    return files


def restarted(bundle: str, cache: Path) -> tuple[Dispatcher, Any]:
    """A dispatcher on the kept rows, no warm-up, and its snapshot (nothing built)."""
    snapshots = SnapshotCache(parse_cache=ParseCache(cache), watch=False)
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)), cache=snapshots)
    return dispatcher, dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)


def counted_rows(monkeypatch: pytest.MonkeyPatch, table: str) -> list[str]:
    """The one-row queries of ``table`` from here on."""
    queries: list[str] = []
    real = parse_cache.CachedRows._row

    def counted(self: Any, sql: str, parameters: tuple[str, ...]) -> Any:
        if f"FROM {table}" in sql:
            queries.append(sql)
        return real(self, sql, parameters)

    monkeypatch.setattr(parse_cache.CachedRows, "_row", counted)
    return queries


def test_a_pass_over_every_concept_reads_the_documents_rows_a_group_at_a_time(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, cache = tmp_bundle(many_pages()), tmp_path / "cache"
    warmed(bundle, cache)
    queries = counted_rows(monkeypatch, "documents")
    monkeypatch.setattr(model, "READ_AHEAD_GROUP", 2 * model.MIN_READ_AHEAD)  # two groups
    _, snapshot = restarted(bundle, cache)
    titles = [doc.fm["title"] for doc in snapshot.concepts.values()]
    assert len(titles) == len(many_pages()) - 1  # index.md is no concept
    assert queries == []  # each group's rows in one query, none on its own
    assert snapshot.inbound._ahead_entries == {}  # type: ignore[union-attr]  # each handed out


def test_a_few_documents_are_read_one_by_one(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"  # fewer than MIN_READ_AHEAD
    warmed(bundle, cache)
    queries = counted_rows(monkeypatch, "documents")
    _, snapshot = restarted(bundle, cache)
    assert len(list(snapshot.concepts.values())) == len(pages()) - 1  # index.md is no concept
    assert len(queries) == len(pages()) - 1


def test_a_new_section_search_before_the_warm_up_reads_rows_a_group_at_a_time(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, cache = tmp_bundle(many_pages()), tmp_path / "cache"
    first, _ = restarted(bundle, tmp_path / "other")  # no kept rows: everything parsed
    question = {"bundle_path": bundle, "query": "cache words"}
    expected = first.call("search_sections", question).text
    warmed(bundle, cache)
    entries = counted_rows(monkeypatch, "documents")
    words = counted_rows(monkeypatch, "derived")
    dispatcher, snapshot = restarted(bundle, cache)
    assert dispatcher.call("search_sections", question).text == expected
    assert entries == [] and words == []
    rows = snapshot.inbound
    assert rows._ahead_entries == {} and rows._ahead == {}  # type: ignore[union-attr]


def test_a_new_section_search_keeps_no_search_folds_and_finds_words_in_titles_alone(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """A term's title words are read from the section words the pass reads anyway, not from
    the concept's folded search fields, which a restarted server has not made (its warm-up
    reads search_concepts' columns back): held by every concept after one question, they
    were 8 MB at 9,978 concepts."""
    files = many_pages() | {
        "f0/solo.md": "---\ntitle: Solitaire Page\n---\n# Intro\n\nNothing else here.\n"}
    bundle, cache = tmp_bundle(files), tmp_path / "cache"
    first, _ = restarted(bundle, tmp_path / "other")
    questions = [{"bundle_path": bundle, "query": q}
                 for q in ("solitaire", "page intro", "cache fills", "solit")]
    expected = [first.call("search_sections", q).text for q in questions]
    assert '"f0/solo"' in expected[0] and '"f0/solo"' in expected[1]
    warmed(bundle, cache)
    dispatcher, snapshot = restarted(bundle, cache)
    assert [dispatcher.call("search_sections", q).text for q in questions] == expected
    assert not any("folded" in vars(doc) for doc in snapshot.documents.built())
