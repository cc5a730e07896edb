"""A revision's context words and stems' holders, kept whole for the next process.

A restarted server's first question needs every concept's words (the norms) and every stem's
holders. Decoded row by row they cost seconds at 10,000 concepts; kept as one packed value
each (``_context_words.packed_words``, ``_context_index._keep_stem_holders``) they are read
back in a fraction of that. These tests pin that what is read back is exactly what the rows
and the documents give, that anything else is refused and built, and that a question on a
restarted server decodes no row of words.
"""

from __future__ import annotations

import sqlite3
import zlib
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.loader.parse_cache import BYTES_PART, CachedRows
from bundle_mcp.model import Snapshot
from bundle_mcp.tools import _context_index, _context_words
from bundle_mcp.tools._context_index import (
    HOLDERS_NAME,
    _build,
    every_words,
    stem_holders,
)
from bundle_mcp.tools._context_words import (
    STORED_NAME,
    DocumentWords,
    packed_words,
    unpacked_words,
)
from bundle_mcp.tools._stem_codes import StemCodes
from test_stored_edges import pages, process

if TYPE_CHECKING:
    from conftest import BundleFactory


def built(snapshot: Snapshot) -> tuple[DocumentWords, ...]:
    """Every concept's words made from its document, in the snapshot's order."""
    return tuple(_build(doc) for doc in snapshot.concepts.values())


def stems_of(words: DocumentWords) -> tuple[object, ...]:
    """The words as stems, whatever the process numbers them: what two numberings share."""
    fields = (words.title, words.description, words.headings, words.body)
    sections = [(s.heading, s.line_start, s.line_end, s.start, s.end, s.length,
                 words.stems(s.heading_words), s.heading_length, s.junk, s.digest)
                for s in words.sections]
    return (*map(words.stems, fields), words.lengths, sections, words.card)


def kept_bytes(cache: Path, name: str) -> bytes:
    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:
        (value,), = db.execute("SELECT value FROM parts WHERE key = ?", (BYTES_PART + name,))
    return zlib.decompress(value)


def test_words_read_back_whole_are_the_documents_words(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, restarted = process(bundle, cache)
    data = kept_bytes(cache, STORED_NAME)
    ids = tuple(restarted.concepts)
    assert unpacked_words(data, ids) == built(restarted)
    assert every_words(restarted, CancelToken()) == built(restarted)
    # Another process numbering the stems otherwise reads the same stems.
    _, _, fresh = process(bundle, None)
    expected = [stems_of(w) for w in built(fresh)]
    renumbered = StemCodes()
    renumbered.numbers(["zebra", "page", "quagga", *reversed(list(_context_words.CODES.stems(
        range(len(_context_words.CODES)))))])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_context_words, "CODES", renumbered)
        read = unpacked_words(data, ids)
        assert read is not None
        assert [stems_of(w) for w in read] == expected


def test_packed_words_read_back_only_whole(tmp_bundle: BundleFactory, tmp_path: Path) -> None:
    bundle = tmp_bundle(pages(8))
    _, _, snapshot = process(bundle, None)
    ids = tuple(snapshot.concepts)
    every = built(snapshot)
    data = packed_words(ids, every)
    assert data is not None
    assert unpacked_words(data, ids) == every
    assert unpacked_words(packed_words((), ()), ()) == ()
    code_past_stems = data[:-2] + chr(0x2FFF).encode("utf-16-le")
    for broken in (None, b"", data[:-1], data + b"\x00", b"xxxx" + data[4:], code_past_stems):
        assert unpacked_words(broken, ids) is None
    assert unpacked_words(data, ids[::-1]) is None  # another snapshot's order
    assert unpacked_words(data, ids[:-1]) is None


def test_wide_documents_are_not_packed(
    tmp_bundle: BundleFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A document whose stems are numbered past single characters is read back row by row."""
    monkeypatch.setenv("BUNDLE_MCP_CACHE_DIR", "off")
    monkeypatch.setattr(_context_words, "CODES", StemCodes(single_limit=20))
    _, _, snapshot = process(tmp_bundle(pages(8)), None)
    every = built(snapshot)
    assert {w.width for w in every} == {1, 2}
    assert packed_words(tuple(snapshot.concepts), every) is None


def test_stem_holders_read_back_or_built(tmp_bundle: BundleFactory, tmp_path: Path) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, fresh = process(bundle, None)
    expected = stem_holders(fresh, CancelToken())
    data = kept_bytes(cache, HOLDERS_NAME)
    concepts = len(fresh.concepts)
    assert _context_index._unpacked_stem_holders(data, concepts) == expected
    for broken in (data[:-1], data + b"\x00"):
        assert _context_index._unpacked_stem_holders(broken, concepts) is None
    assert _context_index._unpacked_stem_holders(data, 3) is None  # a holder past the concepts
    _, _, restarted = process(bundle, cache)
    assert stem_holders(restarted, CancelToken()) == expected


def test_a_restarted_question_decodes_no_row_of_words(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    arguments = {"question": "which page depends on the next one"}
    process(bundle, cache, warm=True)
    served, _, restarted = process(bundle, cache)
    read: list[str] = []
    real = CachedRows.derived

    def counted(rows: CachedRows, path: str, sha256: str, key: str) -> object:
        read.append(key)
        return real(rows, path, sha256, key)

    monkeypatch.setattr(CachedRows, "derived", counted)
    answer = served.call("context", arguments)
    assert not answer.is_error, answer.structured
    assert not [key for key in read if key.startswith("context_words/")]
    # The documents built for the pack took the words read back whole.
    for doc in restarted.documents.built():
        if doc.concept_id is not None:
            assert _context_index.document_words(doc) is every_words(
                restarted, CancelToken())[list(restarted.concepts).index(doc.concept_id)]
    fresh, _, _ = process(bundle, None)
    assert answer.text == fresh.call("context", arguments).text


def test_only_a_loaded_snapshot_keeps_its_words(tmp_bundle: BundleFactory, tmp_path: Path
                                                ) -> None:
    """After a change this process updates its own words: the changed revision's are not
    packed and written again (a restart on those files keeps them once)."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    served, parse, first = process(bundle, cache, warm=True)
    assert first.loaded
    Path(bundle, "f0/p3.md").write_text("---\ntitle: Changed\n---\n# Changed\n\nNew words.\n")
    changed = served.served_snapshot(bundle, CancelToken())
    assert changed.revision != first.revision and not changed.loaded
    every_words(changed, CancelToken())
    parse.settle_parts()
    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:
        revisions = {r for (r,) in db.execute("SELECT revision FROM parts WHERE key = ?",
                                              (BYTES_PART + STORED_NAME,))}
    assert revisions == {first.revision}
