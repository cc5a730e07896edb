"""The sections' line spans kept beside a document's Markdown facts (parse cache format 11):
a restarted server names a document's sections and counts them from the spans alone, and a
spans row that does not fit its file or its facts is never what an answer is made from."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from bundle_mcp.loader import facts_codec, load_bundle
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.model import Document, Snapshot
from toolcall import every_document_built

_PAGE = (
    "---\ntype: Runbook\ntitle: Page {n}\n---\n"
    "Preamble line.\n\n# One\n\nText.\n\n## Two\n\nMore text.\n\n## Three\n\nLast.\n"
)


def _bundle(root: Path) -> str:
    root.mkdir()
    (root / "index.md").write_text('---\nokf_version: "0.2"\n---\n# Bundle\n', encoding="utf-8")
    for n in range(3):
        (root / f"p{n}.md").write_text(_PAGE.format(n=n), encoding="utf-8")
    return str(root)


def _saved(tmp_path: Path) -> tuple[str, ParseCache, Snapshot]:
    bundle = _bundle(tmp_path / "b")
    cache = ParseCache(tmp_path / "cache")
    first, _ = load_bundle(bundle)
    for doc in first.documents.values():
        doc.markdown  # noqa: B018 (so the cache holds the facts and their spans)
    cache.save(bundle, every_document_built(first.documents))
    return bundle, cache, first


def _spans_set(tmp_path: Path, path: str, value: object) -> None:
    (db_file,) = (tmp_path / "cache").rglob("*.sqlite3")
    with sqlite3.connect(db_file) as db:
        changed = db.execute("UPDATE facts SET spans = ? WHERE path = ?", (value, path))
        assert changed.rowcount == 1


def _read_back_with_spans(tmp_path: Path, spans: object) -> tuple[str, Snapshot, Snapshot]:
    """The bundle, its parse, and its read back from a cache whose ``p1.md`` row holds
    ``spans``."""
    bundle, cache, first = _saved(tmp_path)
    _spans_set(tmp_path, "p1.md", spans)
    return bundle, first, load_bundle(bundle, cached=cache.load(bundle))[0]


def _page(snapshot: Snapshot, path: str = "p1.md") -> Document:
    return snapshot.documents[path]


def _answers_as_parsed(doc: Document, parsed: Document, *, sections_first: bool) -> None:
    """``doc`` (read back) gives the parse's sections, spans, count and facts; asked for its
    sections first (which decodes them), or for its spans and count first."""
    if sections_first:
        assert doc.sections == parsed.sections
    assert doc.section_spans == _flat(parsed)
    assert doc.section_count == len(parsed.sections) == 4
    assert doc.sections == parsed.sections
    assert doc.markdown == parsed.markdown


def _flat(doc: Document) -> tuple[int, ...]:
    return tuple(n for s in doc.sections for n in (s.line_start, s.line_end))


def test_spans_are_stored_with_the_facts_and_read_back_without_decoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, cache, first = _saved(tmp_path)
    second, _ = load_bundle(bundle, cached=cache.load(bundle))
    expected = {path: _flat(doc) for path, doc in first.documents.items() if doc.is_concept}
    decoded: list[str] = []
    real = facts_codec.sections_of_json
    monkeypatch.setattr(facts_codec, "sections_of_json",
                        lambda text, known_good=False: decoded.append(text) or real(
                            text, known_good))
    for path, spans in expected.items():
        doc = second.documents[path]
        assert doc.section_spans == spans
        assert doc.section_count == len(spans) // 2 == 4
    assert decoded == []


@pytest.mark.parametrize("damage", [
    b"\x01\x00\x00",  # not whole spans
    facts_codec.spans_bytes(()) + b"\x00" * 8,  # a span starting at line 0
    b"\x09\x00\x00\x00\x0a\x00\x00\x00\x05\x00\x00\x00\x06\x00\x00\x00",  # out of order
    b"\x05\x00\x00\x00\xe8\x03\x00\x00",  # past the file's last line
    "text, not bytes",
])
def test_spans_that_cannot_be_the_files_are_not_used(tmp_path: Path, damage: object) -> None:
    _, first, second = _read_back_with_spans(tmp_path, damage)
    _answers_as_parsed(_page(second), _page(first), sections_first=False)


def test_spans_that_disagree_with_their_facts_send_the_file_to_the_parser(
    tmp_path: Path,
) -> None:
    """Spans that fit the file but not the facts text beside them: one of the two is damaged,
    so the body is parsed once the text is decoded, and the parse's spans replace them."""
    two = facts_codec.spans_bytes(load_bundle(_bundle(tmp_path / "x"))[0].documents[
        "p1.md"].sections[:2])
    _, first, second = _read_back_with_spans(tmp_path, two)
    _answers_as_parsed(_page(second), _page(first), sections_first=True)


def test_a_save_writes_the_spans_of_facts_read_back_whose_row_had_none(
    tmp_path: Path,
) -> None:
    """Spans a row did not hold (damaged) are made from its facts, and the next save of a new
    database stores them."""
    bundle, first, second = _read_back_with_spans(tmp_path, b"\x01")
    other = ParseCache(tmp_path / "other")
    other.save(bundle, every_document_built(second.documents))
    third, _ = load_bundle(bundle, cached=other.load(bundle))
    assert _page(third).section_spans == _flat(_page(first))
