"""Every section's words in an SQLite FTS5 table of the parse cache's database, so that a term
no earlier query asked is counted in SQLite instead of by reading every document that may hold
it (search_sections' postings, ``tools/_section_index.py``).

What a section's words are is the section index's business: it hands each document's rows here
already as words (three texts a section: its own text, its heading and its concept's title,
each of folded words that FTS5's ``ascii`` tokenizer cuts exactly where the section index
does), and reads back, for a term, its count in each section holding it, each column's
occurrences weighted as the caller says. The tables:

- ``section_docs`` (in the parse cache's schema): one row per document whose sections are
  written, keyed by path and the SHA-256 of its bytes, numbered by SQLite with
  ``AUTOINCREMENT`` so that a number is never given twice: a section's row in the FTS5 table is
  ``number << 32 | its number in the document``. A reader reads the documents and the counts in
  one read transaction, and keeps the documents it read (:class:`KeptDocs`) to read only the
  rows past them next time.
- ``section_words`` (FTS5, contentless: the words are indexed, not stored) and
  ``section_terms`` (``fts5vocab``, ``instance``: each occurrence of each term, by row and
  column). Made when first written, and not at all where SQLite has no FTS5: then nothing is
  kept and every term is counted by reading the documents, as before.

Rows of bytes no longer current lose their ``section_docs`` row with the parse cache's save
(``ParseCache.save``), and their words stay in the FTS5 table (a contentless table deletes a
row only given its words back) where no reader maps them; once the rows written since the table
was last emptied pass twice the current ones (:data:`STALE_SLACK` more), it is emptied and
written again. ``meta``'s ``section-words`` names the rules the words were cut by (the section
index's, with its release): other rules, and the table is emptied first.
"""

from __future__ import annotations

import secrets
import sqlite3
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from ..model import SECTION_ROW_SHIFT, KeptSectionWords, SectionRows

__all__ = ["STALE_SLACK", "KeptDocs", "prepare", "read_counts", "write"]

# Rows written since the table was emptied, past twice the current documents' and this many
# more, and it is emptied again (the words of bytes no longer current are never read, only
# skipped by the reader's map).
STALE_SLACK = 1000
_VERSION_KEY = "section-words"
_WRITTEN_KEY = "section-words-written"
# A new one at each emptying (random: a database emptied and made again never repeats one), so
# that a reader knows the documents it read before still have their words.
_EPOCH_KEY = "section-words-epoch"
_TABLES = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS section_words USING fts5("
    "text, heading, title, tokenize = 'ascii', content = '', columnsize = 0)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS section_terms USING fts5vocab(section_words, 'instance')",
)


@dataclass(frozen=True, slots=True)
class KeptDocs:
    """The ``section_docs`` rows a connection read last, under the reset that made their words
    (``epoch``), up to the highest number read: a later read adds the rows past it only. A row
    the save deleted since (bytes no longer current) may stay here, harmless: a number is never
    given twice and its words are those bytes' until a reset, which makes a new epoch. One
    number for the same bytes (``numbers``): written again after the save deleted its row, the
    bytes' newer number replaces the older (both rows' words are in the table; counting both
    would count the document twice)."""

    epoch: str
    last: int
    docs: Mapping[int, tuple[str, str, int]]
    numbers: Mapping[tuple[str, str], int]


def read_counts(db: sqlite3.Connection, version: str, terms: Sequence[str],
                weights: tuple[int, int, int], known: KeptDocs | None
                ) -> tuple[KeptDocs, KeptSectionWords] | None:
    """The kept documents and each term's weighted count in each section holding it, in one
    read transaction (``known``: the documents an earlier read found, read again only past
    them); ``None`` when the words were cut by other rules or the tables are missing (never
    written, or no FTS5 here)."""
    db.execute("BEGIN")
    try:
        if _meta(db, _VERSION_KEY) != version:
            return None
        epoch = _meta(db, _EPOCH_KEY) or ""
        if known is None or known.epoch != epoch:
            known = KeptDocs(epoch, 0, {}, {})
        last = db.execute("SELECT max(doc) FROM section_docs").fetchone()[0] or 0
        if last > known.last:
            docs, numbers = dict(known.docs), dict(known.numbers)
            for number, path, sha256, sections in db.execute(
                    "SELECT doc, path, sha256, sections FROM section_docs WHERE doc > ?"
                    " ORDER BY doc", (known.last,)):
                older = numbers.get((path, sha256))
                if older is not None:
                    del docs[older]
                docs[number] = (path, sha256, sections)
                numbers[(path, sha256)] = number
            known = KeptDocs(epoch, last, docs, numbers)
        counts = {term: db.execute(_COUNTS, (*weights, term)).fetchall() for term in terms}
        return known, KeptSectionWords(known.docs, counts)
    except sqlite3.OperationalError as exc:
        if "no such table" in str(exc):
            return None
        raise
    finally:
        if db.in_transaction:  # not when BEGIN itself failed
            db.execute("COMMIT")


# Each section holding the term: its row and the term's occurrences weighted by column, in row
# order (fts5vocab's ``instance`` rows: one an occurrence, by term, row and column).
_COUNTS = ("SELECT doc, sum(CASE col WHEN 'text' THEN ? WHEN 'heading' THEN ? WHEN 'title'"
           " THEN ? END) FROM section_terms WHERE term = ? GROUP BY doc ORDER BY doc")


def prepare(db: sqlite3.Connection, version: str) -> bool:
    """In the caller's write transaction: make the tables, and empty them when the words were
    cut by other rules or the rows no longer current outnumber the current ones. ``False``
    where SQLite has no FTS5 (nothing is ever written then)."""
    try:
        for statement in _TABLES:
            db.execute(statement)
    except sqlite3.OperationalError as exc:
        if "no such module" in str(exc):
            return False
        raise
    written = _meta(db, _WRITTEN_KEY) or ""
    current = db.execute("SELECT count(*) FROM section_docs").fetchone()[0]
    stale = not written.isdigit() or int(written) > 2 * current + STALE_SLACK
    if _meta(db, _VERSION_KEY) != version or stale:
        db.execute("INSERT INTO section_words(section_words) VALUES ('delete-all')")
        db.execute("DELETE FROM section_docs")
        _set_meta(db, _VERSION_KEY, version)
        _set_meta(db, _WRITTEN_KEY, "0")
        _set_meta(db, _EPOCH_KEY, secrets.token_hex(8))
    return True


def write(db: sqlite3.Connection, version: str,
          documents: Iterable[tuple[str, str, SectionRows]]) -> int:
    """In the caller's write transaction, after :func:`prepare`: each document's sections
    (path, SHA-256, rows) unless kept for those bytes already (another process wrote them).
    The number of documents written; 0 when the tables hold other rules' words (a process of
    another release emptied them meanwhile)."""
    if _meta(db, _VERSION_KEY) != version:
        return 0
    written = 0
    for path, sha256, rows in documents:
        if db.execute("SELECT 1 FROM section_docs WHERE path = ? AND sha256 = ?",
                      (path, sha256)).fetchone() is not None:
            continue
        number = db.execute(
            "INSERT INTO section_docs(path, sha256, sections) VALUES (?, ?, ?)",
            (path, sha256, len(rows))).lastrowid
        assert number is not None  # an INSERT's row
        db.executemany(
            "INSERT INTO section_words(rowid, text, heading, title) VALUES (?, ?, ?, ?)",
            ((number << SECTION_ROW_SHIFT | n, *row) for n, row in enumerate(rows)))
        written += 1
    total = int(_meta(db, _WRITTEN_KEY) or 0) + written
    _set_meta(db, _WRITTEN_KEY, str(total))
    return written


def _meta(db: sqlite3.Connection, key: str) -> str | None:
    row = db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
    return None if row is None else str(row[0])


def _set_meta(db: sqlite3.Connection, key: str, value: str) -> None:
    db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))
