"""What search_sections' term postings would cost from an SQLite FTS5 table (issue 29's next step).

A measurement, not a part of the server: it loads ``BUNDLE`` as ``serve`` does (with the parse
cache of ``BUNDLE_MCP_CACHE_DIR``, when set), writes every indexed section's words into a
contentless FTS5 table of its own (three columns: the section's text, its heading, the concept's
title; the ``ascii`` tokenizer over search_sections' own folded words, so FTS5 cuts exactly the
words the server counts), and prints how long that took and the file's size. Then, for each
term, it reads the term's postings back through an ``fts5vocab`` table (instances counted per
section and column, weighted 1, 3 and 2 as search_sections weighs the text, the heading and the
title) and times the server's own scan of every document for the same term
(``_section_index._postings``), and says whether the two give the same postings.

    PYTHONPATH=src .venv/bin/python bench/section_postings_fts.py /work/bench10k \\
        --terms retry policy the ledger zq09977
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher
from bundle_mcp.limits import DEFAULT_CAPS
from bundle_mcp.model import Snapshot
from bundle_mcp.readers import ALL_READER
from bundle_mcp.serve_config import ServeConfig
from bundle_mcp.tools import _section_index as sections

# A section's row in the table: its concept's place in the snapshot and its number there.
_NUMBER_BITS = 16
_WEIGHTS = {"raw": sections.RAW_WEIGHT, "head": sections.HEADING_WEIGHT,
            "title": sections.TITLE_WEIGHT}
_INSERT = "INSERT INTO s(rowid, raw, head, title) VALUES (?, ?, ?, ?)"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("bundle")
    parser.add_argument("--terms", nargs="+", default=["retry", "policy", "the", "zq09977"])
    args = parser.parse_args()
    token = CancelToken()
    dispatcher = Dispatcher(ServeConfig(bundles=(args.bundle,), caps=DEFAULT_CAPS))
    snapshot = dispatcher.served_snapshot(args.bundle, token, ALL_READER)
    with tempfile.TemporaryDirectory(prefix="fts-") as folder:
        path = Path(folder) / "sections.sqlite3"
        db = sqlite3.connect(path)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("CREATE VIRTUAL TABLE s USING fts5(raw, head, title, tokenize='ascii',"
                   " content='')")
        db.execute("CREATE VIRTUAL TABLE v USING fts5vocab(s, 'instance')")
        started = time.perf_counter()
        _write_sections(db, snapshot)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        print(f"FTS5 table of every section: {time.perf_counter() - started:.1f} s, "
              f"{os.path.getsize(path) / 2**20:.1f} MiB")
        for term in args.terms:
            started = time.perf_counter()
            found = _fts_postings(db, term)
            fts_s = time.perf_counter() - started
            started = time.perf_counter()
            scanned = sections._postings(snapshot, [term], token)[term]
            scan_s = time.perf_counter() - started
            same = found == sorted(zip(scanned.concepts, scanned.sections, scanned.tf,
                                       strict=True))
            print(f"{term}: {len(found)} sections; FTS5 {fts_s * 1000:.0f} ms, "
                  f"scan {scan_s * 1000:.0f} ms; the same postings: {same}")
        db.close()
    return 0


def _write_sections(db: sqlite3.Connection, snapshot: Snapshot) -> None:
    """Every indexed section as search_sections sees it: its words, its heading's, its title's
    (the title in every section's row, as every section's count holds it)."""
    sep = sections._SEP
    rows: list[tuple[int, str, str, str]] = []
    for place, doc in enumerate(snapshot.concepts.values()):
        index = sections._document_index(doc)
        title = index.title_words.replace(sep, " ")
        table, headings = index.table, index.heading_words
        # An ASCII body's words are counted in its folded body, between the section's offsets.
        body = doc.folded_body() if index.ascii_body else None
        heading_start = words_start = 0
        for number in range(index.size):
            at = number * sections._ROW
            heading_end = table[at + sections._HEADING_END]
            words_end = table[at + sections._WORDS_END]
            if body is not None:
                raw = body[table[at + sections._START]:table[at + sections._END]]
            else:
                assert index.words is not None
                raw = index.words[words_start:words_end].replace(sep, " ")
            rows.append(((place << _NUMBER_BITS) + number, raw,
                         headings[heading_start:heading_end].replace(sep, " "), title))
            heading_start, words_start = heading_end, words_end
        if len(rows) >= 5000:
            db.executemany(_INSERT, rows)
            rows.clear()
    db.executemany(_INSERT, rows)
    db.commit()


def _fts_postings(db: sqlite3.Connection, term: str) -> list[tuple[int, int, int]]:
    """(concept place, section number, weighted count) of each section holding ``term``."""
    counts: dict[int, int] = {}
    for row, column, n in db.execute(
            "SELECT doc, col, count(*) FROM v WHERE term = ? GROUP BY doc, col", (term,)):
        counts[row] = counts.get(row, 0) + _WEIGHTS[column] * n
    mask = (1 << _NUMBER_BITS) - 1
    return sorted((row >> _NUMBER_BITS, row & mask, n) for row, n in counts.items())


if __name__ == "__main__":
    sys.exit(main())
