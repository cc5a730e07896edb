"""The persistent parse cache: used only when it matches the bytes, ignored when it does not."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bundle_mcp.loader import document as document_module
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.parse_cache import FORMAT, ParseCache, markdown_from_cache

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


def test_a_saved_pack_replaces_parsing(cache: ParseCache, monkeypatch) -> None:
    bundle = str(EXAMPLE)
    first, _ = load_bundle(bundle)
    expected = _facts(first)  # touches doc.markdown, so the pack holds bodies too
    cache.save(bundle, first.documents)

    def no_parse(*_args, **_kwargs):
        raise AssertionError("a cached file was parsed again")

    monkeypatch.setattr("bundle_mcp.loader.parse_document", no_parse)
    monkeypatch.setattr(document_module, "parse_document", no_parse)
    second, _ = load_bundle(bundle, cached=cache.load(bundle))
    assert second.revision == first.revision
    assert all(markdown_from_cache(d) for d in second.documents.values())
    assert _facts(second) == expected


def test_an_entry_for_other_bytes_is_ignored(cache: ParseCache, tmp_path: Path) -> None:
    root = tmp_path / "b"
    root.mkdir()
    (root / "a.md").write_text("---\ntype: Note\ntitle: Old\n---\nBody.\n")
    old, _ = load_bundle(str(root))
    cache.save(str(root), old.documents)
    (root / "a.md").write_text("---\ntype: Note\ntitle: New\n---\nBody.\n")
    new, _ = load_bundle(str(root), cached=cache.load(str(root)))
    assert new.concepts["a"].fm["title"] == "New"


@pytest.mark.parametrize(
    "damage",
    [
        lambda text: "not json at all",
        lambda text: text.replace(f'"format":"{FORMAT}"', '"format":"other/9"'),
        lambda text: text.replace('"frontmatter":{', '"frontmatter":[{', 1),
        lambda text: text.replace('"relations":[', '"relations":[[1,2],', 1),
        lambda text: text.replace('"sha256":"', '"sha256":"0', 1),
        lambda text: re.sub(r'"layout":\[(\d+),(\d+),(\d+),(\d+)\]',
                            lambda m: f'"layout":[{m[1]},{m[2]},{m[3]},{int(m[4]) + 1}]', text),
        lambda text: re.sub(r'"layout":\[(\d+),', lambda m: f'"layout":[{int(m[1]) + 1},', text),
    ],
    ids=["garbage", "foreign-format", "wrong-shape", "bad-relation", "other-hash", "body-line",
         "raw-start"],
)
def test_a_corrupt_or_foreign_pack_is_never_trusted(cache: ParseCache, damage) -> None:
    bundle = str(EXAMPLE)
    reference, _ = load_bundle(bundle)
    expected = _facts(reference)
    cache.save(bundle, reference.documents)
    (pack,) = (Path(cache._directory)).glob("*.json")  # noqa: SLF001 - the test owns the folder
    original = pack.read_text(encoding="utf-8")
    damaged = damage(original)
    assert damaged != original  # each case really damages the pack
    pack.write_text(damaged, encoding="utf-8")
    reloaded, _ = load_bundle(bundle, cached=cache.load(bundle))
    assert _facts(reloaded) == expected


def test_a_disabled_cache_reads_and_writes_nothing(tmp_path: Path) -> None:
    cache = ParseCache(None)
    snapshot, _ = load_bundle(str(EXAMPLE))
    cache.save(str(EXAMPLE), snapshot.documents)
    assert cache.load(str(EXAMPLE)) == {}
    assert not cache.enabled


def test_the_pack_is_plain_json(cache: ParseCache) -> None:
    snapshot, _ = load_bundle(str(EXAMPLE))
    cache.save(str(EXAMPLE), snapshot.documents)
    (pack,) = Path(cache._directory).glob("*.json")  # noqa: SLF001
    data = json.loads(pack.read_text(encoding="utf-8"))
    assert data["bundle"] == str(EXAMPLE)
    assert set(data["entries"]) == set(snapshot.documents)


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
    """Workers share the cache folder and prune it too: a pack listed, then gone before its
    stat, is skipped (it used to fail the save with a false 'cannot be written' warning)."""
    bundle = str(EXAMPLE)
    snapshot, _ = load_bundle(bundle)
    folder = cache._directory  # the folder the packs live in
    assert folder is not None
    folder.mkdir(parents=True, exist_ok=True)
    real_glob = Path.glob

    def glob_with_a_ghost(self: Path, pattern: str):
        yield from real_glob(self, pattern)
        yield folder / "pruned-meanwhile.json"

    monkeypatch.setattr(Path, "glob", glob_with_a_ghost)
    with caplog.at_level("WARNING"):
        cache.save(bundle, snapshot.documents)
    assert "cannot be written" not in caplog.text
    assert cache.load(bundle) != {}
