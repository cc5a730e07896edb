"""Every section's words kept in the parse cache's FTS5 table (``loader/section_rows.py``): a
term no earlier query asked is counted there instead of by reading every document, and the
postings are exactly those of the scan, for every word of a bundle of every kind of text;
the documents whose words are not kept (changed since) are read as before; anything doubtful
is not used. Work counters (documents built), no timing.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.loader import parse_cache, section_rows
from bundle_mcp.model import SECTION_ROW_SHIFT, KeptSectionWords, Snapshot
from bundle_mcp.tools import _section_index
from bundle_mcp.tools._section_index import _postings, query_terms, tokens
from test_stored_edges import pages, process, restarted_search_builds_only_what_it_shows

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory


def _has_fts5() -> bool:
    try:
        sqlite3.connect(":memory:").execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    except sqlite3.OperationalError:
        return False
    return True


# What needs the table: skipped, saying why, where this Python's SQLite has no FTS5 (then no
# words are kept, and the last tests here hold that search reads the documents instead).
needs_fts5 = pytest.mark.skipif(
    not _has_fts5(), reason="this Python's SQLite has no FTS5: no section words are kept")


def mixed() -> dict[str, str]:
    """Pages of every kind the section index cuts differently: ASCII bodies (counted by offset)
    and others (their words kept), titles that hold words the body lacks, snake_case and digits,
    CJK and Hangul runs, combining marks, a ligature that folds to two letters, CRLF lines,
    sections with only a heading, and a blank one that is not indexed."""
    files = pages(12)
    files |= {
        "a/ascii.md": "---\ntitle: Retry Policy\n---\n# Retry policy\n\nRetries back off: "
                      "retry_after=42s, x2y, RETRY twice.\n\n## Empty\n## Next step\n\n"
                      "```\nretry(policy)\n```\n\n### Tail\n\nretry retry retry.\n",
        "a/titled.md": "---\ntitle: Café Ledger\n---\n# Book\n\nOnly ASCII words: ledger page.\n",
        "b/unicode.md": "---\ntitle: Größe Straße\n---\n# Überblick\n\nDie STRASSE, e\u0301te, "
                        "ﬁle und Größe.\n\n## 安装依赖\n\n安装依赖 并且 장지훈 page.\n",
        "b/crlf.md": "---\r\ntitle: Line Ends\r\n---\r\n# Crlf\r\n\r\nretry on CRLF lines\r\n"
                     "\r\n## Second\r\n\r\npolicy page\r\n",
        "c/blank.md": "---\ntitle: Blank\n---\n\n   \n",
    }
    return files


def vocabulary(files: dict[str, str]) -> list[str]:
    return sorted({term for text in files.values() for term in tokens(text)})


def scanned(snapshot: Snapshot, terms: list[str], monkeypatch: pytest.MonkeyPatch
            ) -> dict[str, tuple[list[int], ...]]:
    """The postings of a pass that reads every document (no kept words)."""
    with monkeypatch.context() as patch:
        patch.setattr(_section_index, "_kept_counts", lambda *_: None)
        return flat(_postings(snapshot, terms, CancelToken()))


def flat(postings: dict[str, _section_index._Postings]) -> dict[str, tuple[list[int], ...]]:
    return {term: (list(p.concepts), list(p.sections), list(p.tf))
            for term, p in postings.items()}


def kept_words(snapshot: Snapshot) -> frozenset[str]:
    """The paths whose words the parse cache keeps for the snapshot's bytes."""
    found = _section_index._kept_counts(snapshot, [], CancelToken())
    if found is None:
        return frozenset()
    paths = _section_index._places(snapshot, CancelToken()).paths
    return frozenset(paths[place] for place in found[0].places)


def database(cache: Path) -> Path:
    (found,) = (cache / "parse").glob("*.sqlite3")
    return found


@needs_fts5
def test_kept_words_give_the_scans_postings_for_every_word(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The warm-up writes every concept's section words after its save; a restarted server
    counts every word of the bundle from them alone, each term's postings equal to the scan's
    (terms asked together, as one question's are)."""
    files = mixed()
    bundle, cache = tmp_bundle(files), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, restarted = process(bundle, cache)
    assert kept_words(restarted) == {doc.path for doc in restarted.concepts.values()}
    terms = vocabulary(files)
    assert {"retry", "42s", "x2y", "file", "éte", "grösse", "安装依赖", "장지훈"} <= set(terms)
    with monkeypatch.context() as patch:
        # Every count from the table: a document read would be a bug here.
        patch.setattr(_section_index, "_post", pytest.fail)
        kept = flat(_postings(restarted, terms, CancelToken()))
    assert kept == scanned(restarted, terms, monkeypatch)
    assert kept["retry"][0]  # not all empty: the words are there


@needs_fts5
def test_a_restarted_new_word_search_builds_only_the_documents_it_shows(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """A restart's first search_sections of words no earlier process asked (no postings kept
    for them) builds the documents of the hits it shows and no other: the kept words answer
    for every document, where the scan built each one."""
    bundle, cache = tmp_bundle(pages(40)), tmp_path / "cache"
    process(bundle, cache, warm=True)  # no search: no term's postings kept
    restarted_search_builds_only_what_it_shows(bundle, cache, {"query": "page the", "limit": 3})


@needs_fts5
def test_a_changed_file_is_read_and_the_rest_counted_from_the_kept_words(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an edit, the changed file's bytes have no kept words: it is read, the others'
    counts come from the table, the postings are the scan's; the next warm-up writes its
    words too."""
    files = mixed()
    bundle, cache = tmp_bundle(files), tmp_path / "cache"
    process(bundle, cache, warm=True)
    edited = Path(bundle, "a/ascii.md")
    edited.write_text(edited.read_text() + "\nretry ledger again, 장지훈.\n")
    _, _, restarted = process(bundle, cache)
    assert "a/ascii.md" not in kept_words(restarted)
    assert len(kept_words(restarted)) == len(restarted.concepts) - 1
    terms = ["retry", "ledger", "장지훈", "page"]
    assert flat(_postings(restarted, terms, CancelToken())) == scanned(
        restarted, terms, monkeypatch)
    assert {doc.path for doc in restarted.documents.built()} >= {"a/ascii.md"}
    process(bundle, cache, warm=True)
    _, _, again = process(bundle, cache)
    assert kept_words(again) == {doc.path for doc in again.concepts.values()}


@needs_fts5
def test_kept_words_that_cannot_be_the_snapshots_are_not_used(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A count for a section the document does not have (a damaged table), a table gone, or
    words cut by other rules: nothing kept is used, every document is read, and the answer is
    the scan's."""
    files = mixed()
    bundle, cache = tmp_bundle(files), tmp_path / "cache"
    process(bundle, cache, warm=True)
    terms = ["retry", "page"]
    with sqlite3.connect(database(cache)) as db:
        (number,) = db.execute(
            "SELECT doc FROM section_docs WHERE path = 'a/ascii.md'").fetchone()
        db.execute("INSERT INTO section_words(rowid, text, heading, title) VALUES (?, ?, '', '')",
                   (number << SECTION_ROW_SHIFT | 999, "retry"))
    _, _, restarted = process(bundle, cache)
    merged: list[object] = []
    real = _section_index._with_kept

    def recorded(*args: Any) -> object:
        merged.append(real(*args))
        return merged[-1]

    with monkeypatch.context() as patch:
        patch.setattr(_section_index, "_with_kept", recorded)
        found = flat(_postings(restarted, terms, CancelToken()))
    assert None in merged  # the damaged count seen, and nothing kept used
    assert found == scanned(restarted, terms, monkeypatch)
    with sqlite3.connect(database(cache)) as db:
        db.execute("DROP TABLE section_terms")
    _, _, restarted = process(bundle, cache)
    assert _section_index._kept_counts(restarted, terms, CancelToken()) is None
    assert flat(_postings(restarted, terms, CancelToken())) == scanned(
        restarted, terms, monkeypatch)
    monkeypatch.setattr(_section_index, "KEPT_WORDS_RULES", "section-words/other")
    _, _, restarted = process(bundle, cache)
    assert kept_words(restarted) == frozenset()


@needs_fts5
def test_the_table_is_emptied_for_other_rules_and_when_mostly_stale(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Words cut by other rules are emptied before any is written by these; so are the rows,
    once those written since the table was last emptied pass twice the current documents'
    (STALE_SLACK more): each edit leaves its earlier bytes' words behind, never read."""
    bundle, cache = tmp_bundle(mixed()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    rows = "SELECT count(*) FROM section_docs"
    with sqlite3.connect(database(cache)) as db:
        current = db.execute(rows).fetchone()[0]
    monkeypatch.setattr(_section_index, "KEPT_WORDS_RULES", "section-words/other")
    process(bundle, cache, warm=True)
    with sqlite3.connect(database(cache)) as db:
        assert db.execute(rows).fetchone()[0] == current  # written anew, by the other rules
        assert db.execute("SELECT value FROM meta WHERE key = 'section-words'").fetchone() == (
            "section-words/other",)
    monkeypatch.setattr(section_rows, "STALE_SLACK", 0)
    edited = Path(bundle, "a/ascii.md")
    for n in range(2 * current + 1):
        edited.write_text(f"---\ntitle: Edit {n}\n---\n# Edit\n\nretry {n}\n")
        process(bundle, cache, warm=True)
    with sqlite3.connect(database(cache)) as db:
        assert db.execute(rows).fetchone()[0] == current
        written = int(db.execute(
            "SELECT value FROM meta WHERE key = 'section-words-written'").fetchone()[0])
        assert written <= 2 * current  # emptied once on the way, not grown by every edit


@needs_fts5
def test_writing_the_same_bytes_twice_keeps_one_copy(
    tmp_bundle: BundleFactory, tmp_path: Path
) -> None:
    """Two processes on one database: the second finds every document's words kept (by path
    and digest) and writes none again."""
    bundle, cache = tmp_bundle(mixed()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    with sqlite3.connect(database(cache)) as db:
        before = db.execute("SELECT doc, path, sha256 FROM section_docs ORDER BY doc").fetchall()
    _, _, restarted = process(bundle, cache)
    docs = list(restarted.concepts.values())
    assert restarted.inbound is not None
    assert restarted.inbound.keep_section_words(_section_index.KEPT_WORDS_RULES, [
        (doc.path, doc.record.sha256, _section_index.section_rows(doc)) for doc in docs])
    with sqlite3.connect(database(cache)) as db:
        after = db.execute("SELECT doc, path, sha256 FROM section_docs ORDER BY doc").fetchall()
    assert after == before


def test_without_fts5_nothing_is_kept_and_search_reads_the_documents(
    tmp_bundle: BundleFactory, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An SQLite built without FTS5 ("no such module"): the warm-up keeps no words, the parse
    cache works as before, and a search reads the documents."""
    monkeypatch.setattr(section_rows, "_TABLES", (
        "CREATE VIRTUAL TABLE IF NOT EXISTS section_words USING no_such_module(text)",))
    bundle, cache = tmp_bundle(mixed()), tmp_path / "cache"
    process(bundle, cache, warm=True)
    served, _, restarted = process(bundle, cache)
    assert kept_words(restarted) == frozenset()
    assert restarted.inbound is not None and restarted.inbound.kept_rows() > 0
    answer = served.call("search_sections", {"query": "retry"})
    fresh, _, _ = process(bundle, None)
    assert answer.text == fresh.call("search_sections", {"query": "retry"}).text


def test_query_terms_are_single_words_of_the_table() -> None:
    """A query's terms are the tokenizer's words, which FTS5's ascii tokenizer never cuts: a
    run of ASCII letters and digits, or of letters of other scripts (with their marks)."""
    assert query_terms("Retry_after x2y 安装依赖, Größe e\u0301te") == [
        "retry", "after", "x2y", "安装依赖", "grösse", "éte"]


@needs_fts5
def test_bytes_written_again_are_counted_once(tmp_path: Path) -> None:
    """Bytes whose row the save deleted (the file changed) and that were written again later
    (the file changed back) have two numbers' words in the table; a reader that kept the
    documents it read before counts the newer number only."""
    db = sqlite3.connect(tmp_path / "words.sqlite3", isolation_level=None)
    for statement in parse_cache._SCHEMA:
        db.execute(statement)
    rules, weights = "section-words/test", (1, 3, 2)
    rows = [("retry twice retry", "retry", "policy")]

    def written(*documents: tuple[str, str]) -> None:
        db.execute("BEGIN IMMEDIATE")
        assert section_rows.prepare(db, rules)
        section_rows.write(db, rules, [(path, sha, rows) for path, sha in documents])
        db.execute("COMMIT")

    written(("a.md", "x"))
    known, first = read(db, rules, weights, None)
    assert [tf for _, tf in first.counts["retry"]] == [2 + 3]
    db.execute("DELETE FROM section_docs WHERE path = 'a.md'")  # the save, after an edit
    written(("a.md", "y"))
    db.execute("DELETE FROM section_docs WHERE sha256 = 'y'")  # and the edit undone
    written(("a.md", "x"))
    known, again = read(db, rules, weights, known)
    assert len(again.counts["retry"]) == 3  # every number's words are still in the table
    (number,) = again.docs  # the first number it had read for these bytes is gone from it
    assert again.docs[number] == ("a.md", "x", 1)
    assert number > max(row >> SECTION_ROW_SHIFT for row, _ in first.counts["retry"])
    assert list(read(db, rules, weights, None)[1].docs) == [number]  # as a new reader finds


def read(db: sqlite3.Connection, rules: str, weights: tuple[int, int, int],
         known: section_rows.KeptDocs | None
         ) -> tuple[section_rows.KeptDocs, KeptSectionWords]:
    found = section_rows.read_counts(db, rules, ["retry"], weights, known)
    assert found is not None
    return found
