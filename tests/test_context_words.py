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
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy
import pytest

from bundle_mcp import zstd_frames
from bundle_mcp.cancel import CancelToken
from bundle_mcp.derived import built_value
from bundle_mcp.errors import BundleError
from bundle_mcp.loader.parse_cache import BYTES_PART, CachedRows
from bundle_mcp.model import Snapshot
from bundle_mcp.tools import _context_index, _context_words, context
from bundle_mcp.tools._context_index import (
    COLUMNS_NAME,
    CONTEXT_INDEX,
    HOLDERS_NAME,
    NORMS_NAME,
    _build,
    every_words,
    stem_holders,
)
from bundle_mcp.tools._context_words import (
    STEMS_PART,
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
    return zstd_frames.unpacked(value)


def kept_words(cache: Path) -> dict[str, bytes]:
    """The kept parts of a revision's words, by part name."""
    (database,) = (cache / "parse").glob("*.sqlite3")
    prefix = f"{BYTES_PART}{STORED_NAME}/"
    with sqlite3.connect(database) as db:
        return {key[len(prefix):]: zstd_frames.unpacked(value) for key, value in db.execute(
            "SELECT key, value FROM parts WHERE key LIKE ?", (prefix + "%",))}


def joined(parts: dict[str, Iterable[bytes]] | None) -> dict[str, bytes]:
    assert parts is not None
    return {name: b"".join(pieces) for name, pieces in parts.items()}


def test_words_read_back_whole_are_the_documents_words(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_context_words, "GROUP_CONCEPTS", 7)  # five groups of 33 concepts
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, restarted = process(bundle, cache)
    parts = kept_words(cache)
    assert sorted(parts) == ["0", "1", "2", "3", "4", STEMS_PART]
    ids = tuple(restarted.concepts)
    assert unpacked_words(parts.get, ids) == built(restarted)
    assert every_words(restarted, CancelToken()) == built(restarted)
    # Another process numbering the stems otherwise reads the same stems.
    _, _, fresh = process(bundle, None)
    expected = [stems_of(w) for w in built(fresh)]
    renumbered = StemCodes()
    renumbered.numbers(["zebra", "page", "quagga", *reversed(list(_context_words.CODES.stems(
        range(len(_context_words.CODES)))))])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_context_words, "CODES", renumbered)
        read = unpacked_words(parts.get, ids)
        assert read is not None
        assert [stems_of(w) for w in read] == expected


def test_packed_words_read_back_only_whole(
    tmp_bundle: BundleFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_context_words, "GROUP_CONCEPTS", 4)
    bundle = tmp_bundle(pages(8))
    _, _, snapshot = process(bundle, None)
    ids = tuple(snapshot.concepts)
    every = built(snapshot)
    parts = joined(packed_words(ids, every))
    assert sorted(parts) == ["0", "1", "2", STEMS_PART]  # 11 concepts, 4 a group
    assert unpacked_words(parts.get, ids) == every
    assert unpacked_words(joined(packed_words((), ())).get, ()) == ()
    for name, data in parts.items():
        broken = [b"", data[:-1], data + b"\x00", b"xxxx" + data[4:]]
        if name != STEMS_PART:  # a code no stem has
            broken.append(data[:-2] + chr(0x2FFF).encode("utf-16-le"))
        for damaged in broken:
            assert unpacked_words({**parts, name: damaged}.get, ids) is None, (name, damaged[:8])
        assert unpacked_words({k: v for k, v in parts.items() if k != name}.get, ids) is None
    assert unpacked_words(parts.get, ids[::-1]) is None  # another snapshot's order
    assert unpacked_words(parts.get, ids[:-1]) is None
    # A group of another writer, whose stems may be numbered otherwise, is refused.
    _context_words.CODES.numbers(["a-stem-no-page-has"])
    other = joined(packed_words(ids, every))
    assert other[STEMS_PART] != parts[STEMS_PART]
    assert unpacked_words({**parts, "1": other["1"]}.get, ids) is None


def test_stem_holders_are_one_array_built_or_read_back(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Built or read back, the holders are every stem's one after the other in one array (an
    array object a stem held 3.5 MiB more at 9,978 concepts), and what is kept for the next
    process is that array. Read back into a process whose stem table is new (a restart), each
    stem of the holders is the very string the table keeps for it: the context words read back
    and the holders name it once."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, fresh = process(bundle, None)
    built_holders = stem_holders(fresh, CancelToken())
    assert isinstance(built_holders, _context_index._PackedHolders)
    assert len(built_holders.positions) == sum(map(len, built_holders.values()))
    assert built_holders.positions.typecode == "H"
    data = kept_bytes(cache, HOLDERS_NAME)
    read_back = _context_index._unpacked_stem_holders(data, len(fresh.concepts))
    assert read_back is not None
    assert read_back.positions == built_holders.positions
    assert list(read_back) == list(built_holders) and read_back == built_holders
    monkeypatch.setattr(_context_words, "CODES", StemCodes())  # a new process's table
    _, _, restarted = process(bundle, cache)
    every_words(restarted, CancelToken())  # the context words read back first, as a warm-up
    holders = stem_holders(restarted, CancelToken())
    assert holders == built_holders
    table = _context_words.CODES
    assert all(table.stem(number) is stem for stem, number in table.numbers(holders).items())


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


def test_a_restarted_question_reads_the_words_of_its_candidates_only(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The index is read back whole (statistics, holders, norms, columns): a restarted
    server's question with new stems reads every concept's words neither whole nor one by one,
    only the rows of the concepts it ranks (at most MAX_CANDIDATE_CONCEPTS for phrases, as
    many for sections: test_context_scores.py's warm question)."""
    # A table of its own: past 0xF800 stems numbered by earlier tests in this process, the
    # columns would hold none of this bundle's stems.
    monkeypatch.setattr(_context_words, "CODES", StemCodes())
    bundle, cache = tmp_bundle(pages(150)), tmp_path / "cache"
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
    assert built_value(restarted, CONTEXT_INDEX, "words") is None
    rows = [key for key in read if key.startswith("context_words/")]
    assert 0 < len(rows) <= 2 * context.MAX_CANDIDATE_CONCEPTS < len(restarted.concepts)
    # Every concept's words read back whole later share the objects the question read.
    every = every_words(restarted, CancelToken())
    for doc in restarted.documents.built():
        if doc.concept_id is not None:
            assert _context_index.document_words(doc) is every[
                list(restarted.concepts).index(doc.concept_id)]
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
                                              (f"{BYTES_PART}{STORED_NAME}/0",))}
    assert revisions == {first.revision}


def test_words_past_the_basic_plane_pack_and_read_back(
    tmp_bundle: BundleFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Stems numbered from 0xF800 have codes that UTF-16 spells in four bytes (a bundle with
    more than 63,488 distinct stems): packed and read back all the same."""
    monkeypatch.setenv("BUNDLE_MCP_CACHE_DIR", "off")
    crowded = StemCodes()
    crowded.numbers([f"filler{n}" for n in range(0xF800)])
    monkeypatch.setattr(_context_words, "CODES", crowded)
    _, _, snapshot = process(tmp_bundle(pages(8)), None)
    ids = tuple(snapshot.concepts)
    every = built(snapshot)
    assert {w.width for w in every} == {1}
    assert max(max(w.body) for w in every if w.body) > "\uffff"
    assert unpacked_words(joined(packed_words(ids, every)).get, ids) == every


def test_reading_the_words_back_checks_between_groups_and_documents(
    tmp_bundle: BundleFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A cancelled call, or the warm-up standing aside for a call, is heard while every
    group is read: the check runs before each group and every CHECK_EVERY documents, and a
    cancellation is raised, not taken for a part that does not read back."""
    monkeypatch.setattr(_context_words, "GROUP_CONCEPTS", 4)
    monkeypatch.setattr(_context_words, "CHECK_EVERY", 2)
    _, _, snapshot = process(tmp_bundle(pages(8)), None)
    ids = tuple(snapshot.concepts)
    parts = joined(packed_words(ids, built(snapshot)))
    checks: list[None] = []
    assert unpacked_words(parts.get, ids, lambda: checks.append(None)) is not None
    sizes = [len(ids[at:at + 4]) for at in range(0, len(ids), 4)]
    assert len(sizes) >= 3
    assert len(checks) == len(sizes) + sum((size + 1) // 2 for size in sizes)
    token = CancelToken()
    token.cancel()
    with pytest.raises(BundleError):
        unpacked_words(parts.get, ids, token.check)


def _same_columns(kept: object, made: object) -> bool:
    return all(numpy.array_equal(getattr(kept, name), getattr(made, name))
               for name, _ in _context_index._COLUMN_ARRAYS)


def test_the_norms_and_columns_read_back_are_the_ones_made(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, fresh = process(bundle, None)
    token = CancelToken()
    made_norms, made = _context_index.norms(fresh, token), _context_index.columns(fresh, token)
    _, _, restarted = process(bundle, cache)
    kept = _context_index.columns(restarted, token)
    assert _context_index.norms(restarted, token) == made_norms
    assert kept is not None and made is not None and _same_columns(kept, made)
    assert kept.coded is not None and made.coded is None
    # Read back, no concept's words: views of the bytes kept, numbered as the writer did.
    assert built_value(restarted, CONTEXT_INDEX, "words") is None
    assert not kept.body.flags.writeable


def test_damaged_norms_or_columns_are_made_again(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A table of its own: past 0xF800 stems numbered by earlier tests in this process, the
    # columns would hold none of this bundle's stems.
    monkeypatch.setattr(_context_words, "CODES", StemCodes())
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, fresh = process(bundle, None)
    token = CancelToken()
    layout = _context_index.holders(fresh, token)
    concepts, owner = len(fresh.concepts), layout.owner
    data, norms = kept_bytes(cache, COLUMNS_NAME), kept_bytes(cache, NORMS_NAME)
    assert _context_index._unpacked_columns(data, concepts, owner) is not None
    assert _context_index._unpacked_norms(norms, concepts, len(owner)) is not None
    # The second title starts past the titles' end: a start out of its field.
    head = len(_context_index._COLUMNS_MAGIC)
    title_units = int.from_bytes(data[head:head + 8], "little")
    at = head + 8 * (len(_context_index._COLUMN_ARRAYS) + 1) + 2 * title_units + 8
    out_of_field = data[:at] + (title_units + 1).to_bytes(8, "little") + data[at + 8:]
    for broken in (data[:-1], data + b"\x00", b"nope" + data[4:], out_of_field,
                   data[:-2] + b"[1", data.replace(b'"next"', b'"page"')):
        assert _context_index._unpacked_columns(broken, concepts, owner) is None
    assert _context_index._unpacked_columns(data, concepts + 1, owner) is None
    for broken in (norms[:-1], norms + b"\x00"):
        assert _context_index._unpacked_norms(broken, concepts, len(owner)) is None
    assert _context_index._unpacked_norms(norms, concepts + 1, len(owner)) is None
    # A restart over damaged parts makes them again, the same.
    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:
        for name, broken in ((COLUMNS_NAME, out_of_field), (NORMS_NAME, norms[:-8])):
            db.execute("UPDATE parts SET value = ? WHERE key = ?",
                       (zstd_frames.packed(broken), BYTES_PART + name))
    _, _, restarted = process(bundle, cache)
    again = _context_index.columns(restarted, token)
    assert again is not None and again.coded is None  # made from the words
    assert _same_columns(again, _context_index.columns(fresh, token))
    assert _context_index.norms(restarted, token) == _context_index.norms(fresh, token)


@pytest.mark.parametrize("others", [7, 0xF800 - 12])
def test_columns_kept_under_another_numbering_give_the_same_parts(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, others: int
) -> None:
    """The kept units are the writer's codes: a reader that numbered other stems first maps
    them to its own (and with most stems numbered past U+FFFF by then, loops those)."""
    bundle, cache = tmp_bundle(pages()), tmp_path / "cache"
    # The writer numbers the bundle's stems first, whatever earlier tests numbered in this
    # process's table (past 0xF800 of them, none of the bundle's would be in its columns).
    monkeypatch.setattr(_context_words, "CODES", StemCodes())
    process(bundle, cache, warm=True)
    questions = ["which page depends on the next one", "straße größe", "page 7 next"]
    fresh, _, _ = process(bundle, None)
    expected = [fresh.call("context", {"question": q}).text for q in questions]
    codes = StemCodes()
    codes.numbers(f"other{n}" for n in range(others))
    monkeypatch.setattr(_context_words, "CODES", codes)
    served, _, restarted = process(bundle, cache)
    token = CancelToken()
    found = _context_index.columns(restarted, token)
    assert found is not None and found.coded is not None
    assert built_value(restarted, CONTEXT_INDEX, "words") is None
    assert [served.call("context", {"question": q}).text for q in questions] == expected
    looped = columned = 0
    for term in stem_holders(restarted, token):
        code = _context_words.narrow_code(term)
        assert code is not None
        part = _context_index._column_term_scores(restarted, term, token, found, code)
        if found.value(code) is None:
            assert part is None
            looped += 1
        else:
            assert part == _context_index._looped_term_scores(restarted, term, token), term
            columned += 1
    assert columned > 0 and (looped > 0) == (others > 7)
