"""A warm-up about to read every document's kept section words reads them in one query
(``InboundHint.read_ahead``): each document gets the value a query of its own gives, and the
rows are handed out once. Work counters and equality, no timing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

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
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    first, _ = warmed(bundle, cache)
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
    assert len(built) == len(pages())
    assert all(doc.parse_error is None for doc in built.values())
    assert queries == []  # every row read ahead, none on its own
    assert snapshot.inbound._ahead_entries == {}  # type: ignore[union-attr]
    assert {path: doc.markdown for path, doc in built.items()} == {
        path: first.documents[path].markdown for path in built}
