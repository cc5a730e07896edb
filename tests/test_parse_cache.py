"""The persistent parse cache: used only when it matches the bytes, ignored when it does not."""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import threading
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.loader import document as document_module
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.facts_codec import facts_text, packed_facts
from bundle_mcp.loader.parse_cache import FORMAT, ParseCache, encode_facts, markdown_from_cache
from toolcall import every_document_built

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "coffee-roastery"


def _facts(snapshot):
    return {
        path: (doc.frontmatter, doc.relations, doc.markdown, doc.body_line, doc.line_count,
               doc.parse_error, doc.record)
        for path, doc in snapshot.documents.items()
    }


@pytest.fixture
def cache(tmp_path: Path) -> ParseCache:
    return ParseCache(tmp_path / "cache")


def test_a_saved_cache_replaces_parsing(cache: ParseCache, monkeypatch) -> None:
    bundle = str(EXAMPLE)
    first, _ = load_bundle(bundle)
    expected = _facts(first)  # touches doc.markdown, so the cache holds the facts too
    cache.save(bundle, every_document_built(first.documents))

    def no_parse(*_args, **_kwargs):
        raise AssertionError("a cached file was parsed again")

    monkeypatch.setattr("bundle_mcp.loader.parse_document", no_parse)
    monkeypatch.setattr(document_module, "parse_document", no_parse)
    second, _ = load_bundle(bundle, cached=cache.load(bundle))
    assert second.revision == first.revision
    assert all(markdown_from_cache(d) for d in second.documents.values())
    assert _facts(second) == expected


def test_read_back_the_link_targets_are_shared_and_the_yaml_is_cut_from_the_text(
    cache: ParseCache,
) -> None:
    """Issue 29: the links that name one file share one target string and concept ID, read
    back as parsed (a restarted server held a copy per link), and a document keeps no copy of
    its frontmatter's YAML beside its text, parsed or read back."""
    bundle = str(EXAMPLE)
    first, _ = load_bundle(bundle)
    _facts(first)
    cache.save(bundle, every_document_built(first.documents))
    second, _ = load_bundle(bundle, cached=cache.load(bundle))
    for snapshot in (first, second):
        links = [link for doc in snapshot.documents.values() for link in doc.markdown.links
                 if link.concept_id is not None]
        by_target: dict[str, Any] = {}
        for link in links:
            held = by_target.setdefault(link.target, link)
            assert link.target is held.target and link.concept_id is held.concept_id
        assert len(by_target) < len(links)  # some file is named by two links
        for doc in snapshot.documents.values():
            raw = doc.frontmatter_raw
            assert raw == first.documents[doc.path].frontmatter_raw
            assert raw is None or doc.text.find(raw) >= 0
            assert not [name for name, value in vars(doc).items()
                        if isinstance(value, str) and value == raw and name != "text"]


def test_a_document_read_back_keeps_the_captures_record(cache: ParseCache) -> None:
    """Issue 29: a document read back made a FileRecord of its own beside the capture's (one
    more per file, with its spelled JSON); it keeps the capture's."""
    bundle = str(EXAMPLE)
    first, _ = load_bundle(bundle)
    _facts(first)
    cache.save(bundle, every_document_built(first.documents))
    second, _ = load_bundle(bundle, cached=cache.load(bundle))
    assert markdown_from_cache(next(iter(second.documents.values())))
    for path, doc in second.documents.items():
        assert doc.record is second.documents.record(path)
        assert doc.record == first.documents[path].record


def test_an_entry_for_other_bytes_is_ignored(cache: ParseCache, tmp_path: Path) -> None:
    root = tmp_path / "b"
    root.mkdir()
    (root / "a.md").write_text("---\ntype: Note\ntitle: Old\n---\nBody.\n")
    old, _ = load_bundle(str(root))
    cache.save(str(root), every_document_built(old.documents))
    (root / "a.md").write_text("---\ntype: Note\ntitle: New\n---\nBody.\n")
    new, _ = load_bundle(str(root), cached=cache.load(str(root)))
    assert new.concepts["a"].fm["title"] == "New"


def _saved(cache: ParseCache, bundle: str) -> tuple[dict, Path]:
    """The bundle's facts as parsed, and the database a save of them wrote."""
    reference, _ = load_bundle(bundle)
    expected = _facts(reference)  # touches doc.markdown, so the facts are saved too
    cache.save(bundle, every_document_built(reference.documents))
    database = cache.database(bundle)
    assert database is not None
    return expected, database


def _rows(database: Path, table: str) -> list[tuple[Any, ...]]:
    with sqlite3.connect(database) as db:
        return db.execute(f"SELECT * FROM {table} ORDER BY path").fetchall()


def _damage_rows(database: Path, table: str, column: str, damage) -> None:
    db = sqlite3.connect(database)
    try:
        rows = db.execute(f"SELECT path, sha256, {column} FROM {table}").fetchall()
        changed = 0
        for path, sha, text in rows:
            damaged = damage(text)
            if damaged != text:
                changed += 1
                db.execute(f"UPDATE {table} SET {column} = ? WHERE path = ? AND sha256 = ?",
                           (damaged, path, sha))
        db.commit()
    finally:
        db.close()
    assert changed  # each case really damages a row


@pytest.mark.parametrize(
    ("table", "column", "damage"),
    [
        ("documents", "entry", lambda text: "not json at all"),
        ("documents", "entry", lambda text: text.replace('"frontmatter":{', '"frontmatter":[{', 1)),
        ("documents", "entry",
         lambda text: text.replace('"relations":[', '"relations":[[1,2],', 1)),
        ("documents", "entry", lambda text: text.replace('"sha256":"', '"sha256":"0', 1)),
        ("documents", "entry", lambda text: re.sub(
            r'"layout":\[(\d+),(\d+),(\d+),(\d+)\]',
            lambda m: f'"layout":[{m[1]},{m[2]},{m[3]},{int(m[4]) + 1}]', text)),
        ("documents", "entry", lambda text: re.sub(
            r'"layout":\[(\d+),', lambda m: f'"layout":[{int(m[1]) + 1},', text)),
        ("facts", "facts", lambda row: packed_facts(
            facts_text(row).replace('"links":[', '"links":[["x"],', 1))),
        ("facts", "facts", lambda row: "[not json"),
        # A compressed row cut short, and one whose frame is not Zstandard's.
        ("facts", "facts", lambda row: row[:-3] if isinstance(row, bytes) else row),
        ("facts", "facts", lambda row: row[:8] + b"x" * 40 if isinstance(row, bytes) else row),
    ],
    ids=["garbage", "wrong-shape", "bad-relation", "other-hash", "body-line", "raw-start",
         "bad-facts", "garbage-facts", "cut-frame", "not-a-frame"],
)
def test_a_damaged_row_is_never_trusted(cache: ParseCache, table, column, damage) -> None:
    bundle = str(EXAMPLE)
    expected, database = _saved(cache, bundle)
    _damage_rows(database, table, column, damage)
    reloaded, _ = load_bundle(bundle, cached=cache.load(bundle))
    assert _facts(reloaded) == expected


@pytest.mark.parametrize(
    "damage",
    [
        lambda path: path.write_bytes(b"not a database at all" * 100),
        lambda path: path.write_bytes(path.read_bytes()[: len(path.read_bytes()) // 3]),
        lambda path: _set_meta(path, "format", "bundle-mcp-parse-cache/999"),
        lambda path: _set_meta(path, "bundle", "/some/other/bundle"),
        lambda path: _drop(path, "facts"),
    ],
    ids=["garbage", "truncated", "foreign-format", "foreign-bundle", "missing-table"],
)
def test_a_corrupt_or_foreign_database_is_ignored_then_replaced(cache: ParseCache, damage) -> None:
    bundle = str(EXAMPLE)
    expected, database = _saved(cache, bundle)
    _checkpoint(database)  # every row in the main file, so damaging it damages them
    damage(database)
    reloaded, _ = load_bundle(bundle, cached=cache.load(bundle))
    assert _facts(reloaded) == expected
    # The next save starts the database again.
    cache.save(bundle, every_document_built(reloaded.documents))
    assert set(cache.load(bundle)) == set(reloaded.documents)


def _checkpoint(database: Path) -> None:
    with sqlite3.connect(database) as db:
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.execute("PRAGMA journal_mode=DELETE")
    for suffix in ("-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)


def _set_meta(database: Path, key: str, value: str) -> None:
    with sqlite3.connect(database) as db:
        db.execute("UPDATE meta SET value = ? WHERE key = ?", (value, key))


def _drop(database: Path, table: str) -> None:
    with sqlite3.connect(database) as db:
        db.execute(f"DROP TABLE {table}")


def test_a_disabled_cache_reads_and_writes_nothing(tmp_path: Path) -> None:
    cache = ParseCache(None)
    snapshot, _ = load_bundle(str(EXAMPLE))
    cache.save(str(EXAMPLE), every_document_built(snapshot.documents))
    assert cache.load(str(EXAMPLE)) is None
    assert not cache.enabled


def test_rows_are_json_keyed_by_path_and_content(cache: ParseCache) -> None:
    snapshot, _ = load_bundle(str(EXAMPLE))
    for doc in snapshot.documents.values():
        assert doc.markdown is not None
    cache.save(str(EXAMPLE), every_document_built(snapshot.documents))
    database = cache.database(str(EXAMPLE))
    assert database is not None
    documents = _rows(database, "documents")
    assert [(path, sha, size) for path, sha, size, _, _ in documents] == sorted(
        (path, doc.record.sha256, doc.record.size) for path, doc in snapshot.documents.items()
    )
    # The error column says whether the file parses without decoding the entry.
    assert [error for *_, error, _ in documents] == [
        None if snapshot.documents[path].parse_error is None else error
        for path, *_, error, _ in documents]
    assert all(isinstance(json.loads(entry), dict) for *_, entry in documents)
    assert len(_rows(database, "facts")) == len(documents)
    with sqlite3.connect(database) as db:
        assert dict(db.execute("SELECT key, value FROM meta")) == {
            "format": FORMAT, "bundle": str(EXAMPLE)}


def test_a_save_writes_only_what_changed(cache: ParseCache, tmp_path: Path) -> None:
    """Rows never change once written: an edit adds the new bytes' row and drops the old one,
    and every other row stays as it was."""
    root = tmp_path / "b"
    root.mkdir()
    for n in range(5):
        (root / f"c{n}.md").write_text(f"---\ntype: Note\ntitle: C{n}\n---\nBody {n}.\n")
    first, _ = load_bundle(str(root))
    cache.save(str(root), every_document_built(first.documents))
    database = cache.database(str(root))
    assert database is not None
    before = _rows(database, "documents")
    (root / "c2.md").write_text("---\ntype: Note\ntitle: Changed\n---\nBody.\n")
    (root / "c4.md").unlink()
    second, _ = load_bundle(str(root), cached=cache.load(str(root)))
    cache.save(str(root), every_document_built(second.documents))
    after = _rows(database, "documents")
    kept = [row for row in before if row[0] in {"c0.md", "c1.md", "c3.md"}]
    assert [row for row in after if row[0] != "c2.md"] == kept
    (new_row,) = [row for row in after if row[0] == "c2.md"]
    assert new_row[1] == second.documents["c2.md"].record.sha256
    assert cache.load(str(root))["c2.md"]["frontmatter"]["title"] == "Changed"


def test_facts_computed_later_are_added(cache: ParseCache) -> None:
    bundle = str(EXAMPLE)
    snapshot, _ = load_bundle(bundle)
    cache.save(bundle, every_document_built(snapshot.documents))  # nothing parsed yet: no facts
    database = cache.database(bundle)
    assert database is not None
    assert _rows(database, "facts") == []
    for doc in snapshot.documents.values():
        assert doc.markdown is not None
    cache.save(bundle, every_document_built(snapshot.documents))
    assert len(_rows(database, "facts")) == len(snapshot.documents)


def test_two_writers_share_one_database(tmp_path: Path) -> None:
    """Two processes' saves (here two caches on one folder, in two threads) never warn or
    leave a database the next load cannot use (a save that meets the other writer's lock past
    the busy timeout is skipped: the other writer saves the same rows)."""
    bundle = str(EXAMPLE)
    snapshot, _ = load_bundle(bundle)
    for doc in snapshot.documents.values():
        assert doc.markdown is not None
    caches = [ParseCache(tmp_path / "cache"), ParseCache(tmp_path / "cache")]
    errors: list[BaseException] = []

    def save_often(cache: ParseCache) -> None:
        try:
            for _ in range(20):
                cache.save(bundle, every_document_built(snapshot.documents))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=save_often, args=(c,)) for c in caches]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert not caches[0]._warned and not caches[1]._warned  # noqa: SLF001
    assert set(caches[0].load(bundle)) == set(snapshot.documents)


def test_an_unwritable_cache_warns_once_and_serves(tmp_path: Path, caplog) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    (folder / "parse").write_text("a file where the folder should be")
    cache = ParseCache(folder)
    snapshot, _ = load_bundle(str(EXAMPLE))
    with caplog.at_level("WARNING"):
        cache.save(str(EXAMPLE), every_document_built(snapshot.documents))
        cache.save(str(EXAMPLE), every_document_built(snapshot.documents))
    assert caplog.text.count("cannot be written") == 1
    assert cache.load(str(EXAMPLE)) is None


def test_the_revision_is_the_canonical_json_hash() -> None:
    import hashlib

    from bundle_mcp.model import FileRecord, canonical_json, revision_of

    records = [FileRecord("b/é x.md", 3, "a" * 64), FileRecord('a/"q".md', 10, "b" * 64)]
    payload = [{"path": r.path, "size": r.size, "sha256": r.sha256}
               for r in sorted(records, key=lambda r: r.path)]
    expected = hashlib.sha256(canonical_json(payload).encode("utf-8")).hexdigest()
    assert revision_of(records) == expected
    assert revision_of(tuple(sorted(records, key=lambda r: r.path))) == expected


def test_a_pack_pruned_by_another_process_is_no_failed_save(
    cache: ParseCache, monkeypatch, caplog
) -> None:
    """Workers share the cache folder and prune it too: a database listed, then gone before its
    stat, is skipped (it used to fail the save with a false 'cannot be written' warning)."""
    bundle = str(EXAMPLE)
    snapshot, _ = load_bundle(bundle)
    folder = cache._directory  # the folder the databases live in
    assert folder is not None
    folder.mkdir(parents=True, exist_ok=True)
    real_glob = Path.glob

    def glob_with_a_ghost(self: Path, pattern: str):
        yield from real_glob(self, pattern)
        yield folder / "pruned-meanwhile.sqlite3"

    monkeypatch.setattr(Path, "glob", glob_with_a_ghost)
    with caplog.at_level("WARNING"):
        cache.save(bundle, every_document_built(snapshot.documents))
    assert "cannot be written" not in caplog.text
    assert cache.load(bundle)


def _broken_bundle(root: Path) -> None:
    root.mkdir()
    (root / "good.md").write_text("---\ntype: Note\ntitle: Good\n---\nBody.\n")
    (root / "bad.md").write_text("---\ntitle: [unclosed\n---\nBody.\n")


def test_a_restart_knows_which_files_parse_without_decoding_them(
    cache: ParseCache, tmp_path: Path
) -> None:
    """The error column answers the parse check: the broken file is found again, with the same
    diagnostic, and the file that parses is neither decoded nor parsed."""
    root = tmp_path / "b"
    _broken_bundle(root)
    first, _ = load_bundle(str(root))
    cache.save(str(root), every_document_built(first.documents))
    again, _ = load_bundle(str(root), cached=cache.load(str(root)))
    assert again.broken == first.broken
    assert [d.path for d in again.broken] == ["bad.md"]
    assert "good" in again.concepts
    assert again.documents.work() == {
        "checked": 1, "parsed": 0, "decoded": 1, "given": 0, "pending": 0}


def test_a_damaged_error_column_is_parsed_again(cache: ParseCache, tmp_path: Path) -> None:
    root = tmp_path / "b"
    _broken_bundle(root)
    first, _ = load_bundle(str(root))
    cache.save(str(root), every_document_built(first.documents))
    database = cache.database(str(root))
    assert database is not None
    _damage_rows(database, "documents", "error", lambda text: text and "not json")
    again, _ = load_bundle(str(root), cached=cache.load(str(root)))
    assert again.broken == first.broken
    assert again.documents.cells["bad.md"].how == "parsed"


def test_a_full_disk_fails_the_save_whole_and_serving_goes_on(
    cache: ParseCache, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # SQLite's page limit stands in for a full disk: it fails a write with SQLITE_FULL, the
    # error a full file system gives ("database or disk is full").
    bundle = tmp_path / "bundle"
    shutil.copytree(EXAMPLE, bundle)
    snapshot, _ = load_bundle(str(bundle))
    cache.save(str(bundle), every_document_built(snapshot.documents))
    before = cache.load(str(bundle))
    assert before is not None
    edited = sorted(p for p in snapshot.documents if p.startswith("beans/"))
    for path in edited:
        with (bundle / path).open("a", encoding="utf-8") as file:
            file.write("\nOne more line.\n")
    changed, _ = load_bundle(str(bundle))

    connect = sqlite3.connect

    def full_disk(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db = connect(*args, **kwargs)
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        db.execute(f"PRAGMA max_page_count = {max(pages, 1)}")
        return db

    monkeypatch.setattr(sqlite3, "connect", full_disk)
    with caplog.at_level("WARNING"):
        cache.save(str(bundle), every_document_built(changed.documents))  # no exception
    assert "cannot be written (database or disk is full)" in caplog.text
    monkeypatch.setattr(sqlite3, "connect", connect)
    # Nothing of the failed save is in the database: every row is the first save's.
    after = cache.load(str(bundle))
    assert after is not None and set(after) == set(before)
    for path in before:
        assert after.stored(path) == before.stored(path)
    # A restart on it parses the edited files and answers as a fresh parse does.
    restarted, _ = load_bundle(str(bundle), cached=after)
    fresh, _ = load_bundle(str(bundle))
    assert _facts(restarted) == _facts(fresh)


def test_a_save_encodes_each_documents_facts_as_it_writes_them(
    cache: ParseCache, tmp_path: Path
) -> None:
    """Issue 29: a cold save held every document's facts, encoded, in one list before writing
    them (22 MiB at 10,000 concepts), and the process stayed that much larger afterwards. Now
    each is encoded as SQLite takes its row: what Python holds at the highest point of a save
    is a small share of all the facts' text."""
    bundle = tmp_path / "linked"
    bundle.mkdir()
    for n in range(200):
        links = " ".join(f"See [note {m}](note-{m:03d}.md#part-{m})." for m in range(n, n + 40))
        (bundle / f"note-{n:03d}.md").write_text(
            f"---\ntype: Note\ntitle: Note {n}\n---\n# Note {n}\n\n## Part {n}\n\n{links}\n",
            encoding="utf-8")
    snapshot, _ = load_bundle(str(bundle))
    documents = every_document_built(snapshot.documents)
    facts = [encode_facts(doc) for doc in documents.values() if doc.markdown is not None]
    total = sum(len(text) for text in facts if text is not None)
    assert total > 500_000
    del facts
    # The save decodes each document's facts, which interns their link targets: held here,
    # those strings are in the interpreter's table already. Otherwise the table (one for the
    # whole process, grown by every bundle an earlier test loaded) may be resized within the
    # save, a new table of megabytes that the measure would count (make test-all, 3.9 MB).
    held = [doc.markdown for doc in documents.values()]
    tracemalloc.start()
    try:
        cache.save(str(bundle), documents)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del held
    assert peak < total // 4
    again, _ = load_bundle(str(bundle), cached=cache.load(str(bundle)))
    assert all(markdown_from_cache(doc) for doc in again.documents.values())
