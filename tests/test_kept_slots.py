"""Document structures kept in the parse cache (``derived.Codec``): a restarted server reads
them back instead of building them, and reads back exactly what a build gives.

``search_sections``' per-document words (``SECTION_WORDS``) and the validator's per-document
findings (``DOCUMENT_FINDINGS``) are kept so. Each test compares with a server that builds
everything itself.
"""

from __future__ import annotations

import importlib
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp import zstd_frames
from bundle_mcp.cancel import CancelToken
from bundle_mcp.derived import kept_values, of_document, stored_key
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.snapshots import SnapshotCache
from toolcall import every_document_built

section_index = importlib.import_module("bundle_mcp.tools._section_index")
validation = importlib.import_module("bundle_mcp.validation")
context_index = importlib.import_module("bundle_mcp.tools._context_index")
SECTION_WORDS = section_index.SECTION_WORDS

QUERY = {"query": "roast"}


def _write_bundle(root: Path) -> None:
    (root / "index.md").write_text('---\nokf_version: "0.2"\n---\n# Bundle\n', encoding="utf-8")
    for n in range(12):
        # Every third body is not ASCII: its sections keep their own folded words.
        accent = " Café crème, straße." if n % 3 == 0 else ""
        (root / f"c{n}.md").write_text(
            f"---\ntype: Guide\ntitle: Roast {n}\n---\n# Roast {n}\n\nLight roast notes.{accent}\n"
            f"\n## Cooling\n\nSpread the roast {n} beans to cool.\n",
            encoding="utf-8",
        )
    # Findings to keep: no type, and a link to nothing.
    (root / "untyped.md").write_text("---\ntitle: Untyped\n---\n# Untyped\n\n[x](gone.md)\n",
                                     encoding="utf-8")


@pytest.fixture()
def filled(tmp_path: Path) -> tuple[Path, Path]:
    """A bundle and a parse cache holding its documents and their section words."""
    root = tmp_path / "bundle"
    root.mkdir()
    _write_bundle(root)
    snapshots = SnapshotCache(parse_cache=ParseCache(None), watch=False)
    dispatcher = Dispatcher(ServeConfig(bundles=(str(root),)), cache=snapshots)
    assert not dispatcher.call("validate_bundle", {"check_links": True}).is_error
    snapshot = snapshots.get(str(root), CancelToken())
    for doc in snapshot.concepts.values():
        section_index._document_index(doc)
        context_index.document_words(doc)
        assert doc.markdown is not None
    ParseCache(tmp_path / "cache").save(str(root), every_document_built(snapshot.documents))
    return root, tmp_path / "cache"


def _stored(damage: str | None) -> bytes | str:
    """How a damaged value is written: compressed as the cache writes values, or (None) a
    value that is not compressed at all."""
    return "raw text" if damage is None else zstd_frames.packed(damage.encode("utf-8"))


def _damage(root: Path, cache: Path, path: str, slot: str, damage: str | None) -> int:
    """Overwrite the kept values of ``slot`` for ``path`` with ``damage``; how many there were."""
    database = ParseCache(cache).database(str(root))
    assert database is not None
    with sqlite3.connect(database) as db:
        return db.execute("UPDATE derived SET value = ? WHERE path = ? AND key LIKE ?",
                          (_stored(damage), path, f"{slot}/%")).rowcount


def _answer(root: Path, cache: Path | None, tool: str = "search_sections",
            arguments: dict[str, Any] = QUERY) -> Any:
    snapshots = SnapshotCache(parse_cache=ParseCache(cache), watch=False)
    dispatcher = Dispatcher(ServeConfig(bundles=(str(root),)), cache=snapshots)
    outcome = dispatcher.call(tool, arguments)
    assert not outcome.is_error, outcome.structured
    return outcome.structured


def test_a_restart_reads_the_section_words_back(
    filled: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, cache = filled
    expected = _answer(root, None)

    def never(doc: Any) -> Any:
        raise AssertionError(f"{doc.path}: section words built, not read back")

    monkeypatch.setattr(section_index, "_index", never)
    assert _answer(root, cache) == expected


def test_a_restart_reads_the_document_findings_back(
    filled: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    arguments = {"check_links": True}
    expected = _answer(root := filled[0], None, "validate_bundle", arguments)
    assert {d["code"] for d in expected["diagnostics"]} >= {"missing_type", "broken_link"}

    def never(doc: Any, *args: Any) -> Any:
        raise AssertionError(f"{doc.path}: findings built, not read back")

    monkeypatch.setattr(validation, "_document_findings", never)
    assert _answer(root, filled[1], "validate_bundle", arguments) == expected


def test_a_restart_reads_the_context_words_back(
    filled: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, cache = filled
    question = {"question": "how long should roasted beans cool"}
    expected = _answer(root, None, "context", question)

    def never(doc: Any) -> Any:
        raise AssertionError(f"{doc.path}: context words built, not read back")

    monkeypatch.setattr(context_index, "_build", never)
    assert _answer(root, cache, "context", question) == expected
    rows = ParseCache(cache).load(str(root))
    restarted, _ = load_bundle(str(root), cached=rows)
    fresh, _ = load_bundle(str(root))
    monkeypatch.undo()
    for concept_id, doc in restarted.concepts.items():
        assert context_index.document_words(doc) == \
            context_index._build(fresh.concepts[concept_id]), concept_id


def test_what_is_read_back_equals_what_is_built(filled: tuple[Path, Path]) -> None:
    root, cache = filled
    rows = ParseCache(cache).load(str(root))
    restarted, _ = load_bundle(str(root), cached=rows)
    fresh, _ = load_bundle(str(root))
    for concept_id, doc in restarted.concepts.items():
        assert doc.stored is not None
        read_back = section_index._document_index(doc)
        built = section_index._index(fresh.concepts[concept_id])
        assert read_back == built, concept_id
        # One string for a heading, whichever index holds it (the context index's words
        # are read back interned too).
        words = context_index.document_words(doc)
        theirs = {s.heading: s.heading for s in words.sections}  # its non-blank sections
        shared = [h for h in read_back.headings if h in theirs]
        assert shared and all(h is theirs[h] for h in shared), concept_id
    assert any(not section_index._document_index(d).ascii_body
               for d in restarted.concepts.values())


@pytest.mark.parametrize("damage", [
    "[]",                                       # not the shape
    '["t", "1", 0, false, []]',                 # a count that is a string
    '["t", 1, 0, 1, []]',                       # a flag that is a number
    '["t", 1, 0, false, [["h", 1, 2, null, "", 3, 0, true]]]',  # an offset that is a bool
    "not json",
    None,                                       # not even compressed
])
def test_a_damaged_value_is_built_instead(
    filled: tuple[Path, Path], damage: str | None
) -> None:
    root, cache = filled
    assert _damage(root, cache, "c1.md", "section_words", damage) == 1
    assert _answer(root, cache) == _answer(root, None)
    rows = ParseCache(cache).load(str(root))
    restarted, _ = load_bundle(str(root), cached=rows)
    fresh, _ = load_bundle(str(root))
    assert section_index._document_index(restarted.concepts["c1"]) == \
        section_index._index(fresh.concepts["c1"])


def test_only_slots_with_a_codec_are_kept(filled: tuple[Path, Path]) -> None:
    root, _ = filled
    snapshot, _ = load_bundle(str(root))
    doc = snapshot.concepts["c2"]
    section_index._document_index(doc)
    of_document(doc, section_index.SECTION_WORDS, lambda: section_index._index(doc))
    keys = [key for key, _ in kept_values(doc)]
    assert keys == [stored_key(SECTION_WORDS, None)] == ["section_words/2/null"]
    rules = validation.VersionRules("0.2", True)
    assert stored_key(validation.DOCUMENT_FINDINGS, (False, rules)) == \
        'document_findings/1/[false,["VersionRules",{"chosen":true,"effective":"0.2"}]]'
    assert stored_key(validation.DOCUMENT_FINDINGS, (False, object())) is None


def test_a_snapshot_without_the_cache_keeps_nothing_to_read(tmp_path: Path) -> None:
    root = tmp_path / "bundle"
    root.mkdir()
    _write_bundle(root)
    snapshots = SnapshotCache(parse_cache=ParseCache(None), watch=False)
    snapshot = snapshots.get(str(root), CancelToken())
    assert all(doc.stored is None for doc in snapshot.documents.values())


@pytest.mark.parametrize("damage", [
    '[["missing_type", "WARN", "m", "untyped.md", "3", null, null, null]]',  # a line as text
    '[["missing_type", "WARN", "m", "untyped.md", 3, null, null]]',          # a field short
    '[["missing_type", "WARN", 7, "untyped.md", 3, null, null, null]]',      # a number message
    '{"code": "missing_type"}',
])
def test_a_damaged_finding_is_found_again(filled: tuple[Path, Path], damage: str) -> None:
    root, cache = filled
    assert _damage(root, cache, "untyped.md", "document_findings", damage) >= 1
    arguments = {"check_links": True}
    assert _answer(root, cache, "validate_bundle", arguments) == \
        _answer(root, None, "validate_bundle", arguments)


@pytest.mark.parametrize("damage", [
    "[]",                                                           # not the shape
    '[3, ["roast"], "", "", "", " ", [0, 0, 0, 1], []]',            # no such width
    '[1, ["roast"], "", "", "", "!", [0, 0, 0, 1], []]',            # a code past its stems
    '[2, ["roast"], "", "", "", "  ", [0, 0, 0, 1], []]',           # a wide code past them
    '[2, ["roast"], "", "", "", " ", [0, 0, 0, 1], []]',            # half a wide code
    '[1, [7], "", "", "", " ", [0, 0, 0, 1], []]',                  # a stem that is a number
    '[1, ["roast"], "", "", "", " ", ["0", 0, 0, 1], []]',          # a count that is a string
])
def test_damaged_context_words_are_built_instead(
    filled: tuple[Path, Path], damage: str
) -> None:
    root, cache = filled
    question = {"question": "how long should roasted beans cool"}
    assert _damage(root, cache, "c1.md", "context_words", damage) == 1
    assert _answer(root, cache, "context", question) == _answer(root, None, "context", question)
    rows = ParseCache(cache).load(str(root))
    restarted, _ = load_bundle(str(root), cached=rows)
    fresh, _ = load_bundle(str(root))
    assert context_index.document_words(restarted.concepts["c1"]) == \
        context_index._build(fresh.concepts["c1"])
