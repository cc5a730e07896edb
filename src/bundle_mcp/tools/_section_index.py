"""BM25 over sections: search_sections' index (context has its own, :mod:`._context_index`,
and shares the tokenizer and the query's word limits).

Each document's sections are tokenized once and kept with the document (``SECTION_WORDS``); the
bundle's BM25 statistics and each queried term's postings are kept with the snapshot. A tool
asks :func:`rank_sections` for the scored sections of some terms, optionally only those of the
concepts a filter admits: the corpus statistics (idf, average length) stay those of the whole
bundle, so a filter never changes how two sections that both pass it compare.

A term no query asked before is counted, for the documents whose sections' words the parse
cache keeps for their current bytes (an FTS5 table the warm-up writes after its save,
:mod:`bundle_mcp.loader.section_rows`), from that table; the other documents are read. Both give
the same postings (``tests/test_kept_section_words.py``).
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import itertools
import math
import re
import sys
import unicodedata
from array import array
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import accumulate
from typing import Any, cast

from .._version import __version__
from ..cancel import CancelToken
from ..derived import (
    Codec,
    Slot,
    document_holds,
    exactly,
    of_concept,
    of_document,
    of_snapshot,
    stored_key,
)
from ..errors import BundleError, resource_limit
from ..model import (
    MIN_READ_AHEAD,
    READ_AHEAD_GROUP,
    SECTION_ROW_SHIFT,
    Concepts,
    Document,
    KeptSectionWords,
    Snapshot,
    revision_value,
)
from ..okf.folding import fold
from ..okf.properties import text_field
from ..toolspec import PartStore
from ._body_words import kept_index
from ._kept_parts import RecentParts, arrays_nbytes, kept_or_computed_each, packed, unpacked


def _warm_words(snapshot: Snapshot, token: CancelToken) -> None:
    if isinstance(_totals_or_over(snapshot, token), _OverCap):
        return  # search_sections refuses this bundle: no document's words are asked for
    store, key = snapshot.inbound, stored_key(SECTION_WORDS, None)
    if store is not None and key is not None:
        store.read_ahead(key)  # every concept's is about to be read back
    # By concept, not by document: a restarted server reads each concept's words back into
    # its file's cell, building no document (of_concept); a cold start builds each.
    for concept_id in snapshot.concepts:
        token.check()
        of_concept(snapshot, concept_id, SECTION_WORDS, _index)


def _warm_totals(snapshot: Snapshot, token: CancelToken) -> None:
    _totals_or_over(snapshot, token)  # past a cap: kept as such, no error for the warm-up


def _encode_index(index: _DocumentIndex) -> list[Any]:
    return [index.title_words, index.token_count, index.total_length, index.ascii_body,
            list(index.headings), index.table.tolist(), index.heading_words, index.words]


def _decode_index(value: Any) -> _DocumentIndex:
    (title_words, token_count, total_length, ascii_body, headings, table, heading_words,
     words) = value
    # Interned, as a parse interns them: the context index's sections hold the same headings
    # (one string for both, 60,000 sections in the bench bundle).
    headings = tuple([sys.intern(exactly(str, h)) for h in headings])
    if not set(map(type, exactly(list, table))) <= {int}:  # each exactly an int, in C
        raise TypeError("a section table of numbers only")
    try:
        numbers = array("i", table)
    except OverflowError as error:  # a damaged row: a number no C int holds
        raise ValueError("a section number out of range") from error
    if len(numbers) != _ROW * len(headings):
        raise ValueError("a section table not of its sections' length")
    return _DocumentIndex(
        title_words=exactly(str, title_words),
        headings=headings,
        table=numbers,
        heading_words=exactly(str, heading_words),
        words=None if words is None else exactly(str, words),
        token_count=exactly(int, token_count),
        total_length=exactly(int, total_length),
        ascii_body=exactly(bool, ascii_body),
    )


SECTION_WORDS: Slot[_DocumentIndex] = Slot(
    "section_words", "document",
    "each section of one document for search_sections: its folded words, or (ASCII body) its "
    "offsets in the folded body; kept in the parse cache",
    _warm_words,
    Codec(2, _encode_index, _decode_index),
)
SECTION_WORD_TOTALS: Slot[_Totals | _OverCap] = Slot(
    "section_word_totals", "snapshot",
    "section count and document frequencies over the whole bundle (BM25 statistics), or "
    "the cap the bundle passes",
    _warm_totals,
)
SECTION_POSTINGS: Slot[_PostingCache] = Slot(
    "section_postings", "snapshot", "per-term postings, filled as queries use terms",
)
SECTION_PLACES: Slot[_Places] = Slot(
    "section_places", "snapshot",
    "each concept's path → its place in the snapshot's order, and the SHA-256 of its bytes: "
    "how the section words kept in the parse cache are matched to the snapshot",
)


SECTION_KEPT_DOCS: Slot[_LastUsable] = Slot(
    "section_kept_docs", "snapshot",
    "which documents' section words the parse cache keeps for this snapshot's bytes, as last "
    "read (matched again when the kept documents change)",
)


def _warm_kept_words(snapshot: Snapshot, token: CancelToken) -> None:
    _keep_section_words(snapshot, token)


SECTION_WORDS_KEPT: Slot[None] = Slot(
    "section_words_kept", "snapshot",
    "every section's words written into the parse cache's FTS5 table (loader.section_rows) "
    "for the documents whose bytes have none there; after the warm-up's save",
    _warm_kept_words,
    after_save=True,
)
SLOTS = (SECTION_WORDS, SECTION_WORD_TOTALS, SECTION_POSTINGS, SECTION_PLACES, SECTION_KEPT_DOCS,
         SECTION_WORDS_KEPT)

K1 = 1.2
B = 0.75
RAW_WEIGHT, HEADING_WEIGHT, TITLE_WEIGHT = 1, 3, 2
MAX_TERMS = 32
MAX_TERM_LENGTH = 4096
# The reference's 100,000 sections bounded per-call indexing too; real documentation folders
# exceed it (9,746 C++ reference pages hold more). Sections are indexed once and kept.
MAX_SECTIONS = 1_000_000
# The reference caps one call's indexing at 1,000,000 tokens; here each document's words are
# indexed once and kept, so the cap bounds memory, not per-call work (a bundle at the 64 MiB
# cap holds at most ~16M words).
MAX_TOKENS = 20_000_000
MAX_LABEL_BYTES = 1024  # a heading or a concept title
SNIPPET_LENGTH = 512
SNIPPET_LEAD = 80  # characters of context kept before the first match
# The name of a term's postings kept in the parse cache (collect_sections). It changes with
# what postings are computed from: the number by hand with the tokenizer or the counting, the
# digest with the weights and the release.
POSTINGS_PART = "section-postings/1/" + hashlib.sha256(repr((
    __version__, RAW_WEIGHT, HEADING_WEIGHT, TITLE_WEIGHT)).encode()).hexdigest()[:16]
# The name the bundle's section totals are kept under (InboundHint.keep_json).
TOTALS_NAME = POSTINGS_PART.replace("section-postings/1/", "section-totals/2/", 1)
# The rules the section words kept in the parse cache were cut by (InboundHint.section_words):
# the number by hand with what a section's words are (the tokenizer, which sections are
# indexed), the digest with the release.
KEPT_WORDS_RULES = POSTINGS_PART.replace("section-postings/1/", "section-words/1/", 1)
# Documents whose sections' words are written in one transaction (the warm-up's step).
KEPT_WORDS_GROUP = 256
# How the kept words' columns count (InboundHint.section_words: text, heading, title): as the
# postings weigh them.
_COLUMN_WEIGHTS = (RAW_WEIGHT, HEADING_WEIGHT, TITLE_WEIGHT)


@functools.lru_cache(maxsize=1)
def word_pattern() -> re.Pattern[str]:
    """Runs of letters, numbers and marks (Unicode categories L*, N*, M*), built once."""
    ranges: list[tuple[int, int]] = []
    for cp in range(sys.maxunicode + 1):
        if unicodedata.category(chr(cp))[0] in "LNM":
            if ranges and ranges[-1][1] == cp - 1:
                ranges[-1] = (ranges[-1][0], cp)
            else:
                ranges.append((cp, cp))
    body = "".join(
        re.escape(chr(a)) if a == b else f"{re.escape(chr(a))}-{re.escape(chr(b))}"
        for a, b in ranges
    )
    return re.compile(f"[{body}]+")


# In ASCII the letters and digits are the only code points in categories L, N and M, so this
# small class finds exactly the words the full pattern finds, several times faster.
_ASCII_WORD = re.compile(r"[0-9a-z]+")
# The same in ASCII text that is not folded (a snippet is cut from the original text).
_ASCII_WORD_ANY_CASE = re.compile(r"[0-9A-Za-z]+")


def tokens(text: str) -> list[str]:
    """The folded words of ``text``."""
    folded = fold(text)
    if folded.isascii():
        return _ASCII_WORD.findall(folded)
    return word_pattern().findall(folded)


def words_between(folded: str, start: int, end: int) -> list[str]:
    """The words of an ASCII folded text between two offsets (the same words :func:`tokens`
    finds in that part of the text)."""
    return _ASCII_WORD.findall(folded, start, end)


def query_terms(query: str) -> list[str]:
    """Distinct folded words of the query in first-occurrence order; empty when it has none.

    A query without words (``">"``, ``"¶"``) is not an error: the input contract accepts any
    non-blank query, and no JSON Schema pattern can say "contains a letter" in exactly the
    tokenizer's sense (``jsonschema`` runs patterns through Python's ``re``, which has no
    ``\\p{L}``; ``jsonschema-rs`` knows ``\\p{L}`` but from a newer Unicode than
    ``unicodedata``). So the contract alone judges validity, and a query with no words
    matches nothing.

    Raises:
        BundleError: ``resource_limit`` beyond 32 terms or a term longer than 4096 characters.
    """
    terms = list(dict.fromkeys(tokens(query)))
    if len(terms) > MAX_TERMS:
        raise resource_limit(
            f"the query has {len(terms)} distinct terms, more than {MAX_TERMS}",
            f"use at most {MAX_TERMS} distinctive words",
        )
    if any(len(t) > MAX_TERM_LENGTH for t in terms):
        raise resource_limit(
            f"a query term is longer than {MAX_TERM_LENGTH} characters",
            "use shorter words",
        )
    return terms


_SEP = "\x00"  # never inside a word: each token is stored as SEP word SEP


# A section's row in _DocumentIndex.table: its first and last line, weighted length, the raw
# text's offsets in the document's folded body (ASCII bodies only), and where its words end in
# heading_words and in words (each starts where the previous section's end).
_LINE_START, _LINE_END, _LENGTH, _START, _END, _HEADING_END, _WORDS_END = range(7)
_MAX_LENGTH = 1 << 31  # past the tables' numbers ("i")
_ROW = 7


@dataclass(frozen=True, slots=True)
class _DocumentIndex:
    """One document's sections as search sees them: their words (folded, delimited) and
    weighted lengths.

    Kept as one array of numbers and two strings per document, not an object per section:
    8 MiB less after the warm-up at 60,000 sections (an object, large ints, string headers).
    A section's words are a slice of the joined ``heading_words`` (or ``words``), so a term's
    count in it is ``str.count`` between the slice's bounds: every word is delimited on both
    sides, so no match spans two sections.

    ``words`` is ``None`` for a document whose body is ASCII: its folded body (its lowercase,
    folded when a term is counted) has the same offsets as the text, so a term is counted
    there, between a section's ``start`` and ``end``, and the sections' words are not kept.
    """

    title_words: str
    headings: tuple[str, ...]
    table: array[int]  # _ROW numbers per section
    heading_words: str  # each section's SEP-delimited folded heading words, joined
    words: str | None  # each section's SEP-delimited folded words (heading line included)
    token_count: int
    total_length: int
    ascii_body: bool  # sections are counted in the folded body, by offsets

    @property
    def size(self) -> int:  # a property, not __len__: an index without sections is not falsy
        return len(self.headings)

    def counts(self, number: int, needle: str) -> tuple[int, int]:
        """How often ``needle`` occurs in the section's heading words, and in its words (0
        for an ASCII body)."""
        table, at = self.table, number * _ROW
        head = self.heading_words.count(
            needle, table[at - _ROW + _HEADING_END] if number else 0, table[at + _HEADING_END])
        words = self.words
        if words is None:
            return head, 0
        return head, words.count(
            needle, table[at - _ROW + _WORDS_END] if number else 0, table[at + _WORDS_END])


@dataclass(frozen=True, slots=True)
class _Section:
    """A candidate: its concept's place in the snapshot's order, its number among that
    concept's indexed sections, its weighted length, and the query terms' counts in it."""

    place: int
    number: int
    length: int
    tf: dict[str, int]


@dataclass(frozen=True, slots=True)
class ScoredSection:
    """One section holding the query terms (all, or any), with its BM25 score (6 places).

    Where it lies (path, heading, lines, the file's digest) is read from its document when
    asked: a query scores every section that holds its terms, and only the hits a caller shows
    need their documents built (a restarted server's first query, thousands of candidates)."""

    score: float
    concept_id: str
    number: int  # among the concept's indexed sections, in document order
    snapshot: Snapshot = field(repr=False, compare=False)

    @property
    def path(self) -> str:
        return self.snapshot.concepts[self.concept_id].path

    @property
    def heading(self) -> str:
        return self._index().headings[self.number]

    @property
    def line_start(self) -> int:
        return self._index().table[self.number * _ROW + _LINE_START]

    @property
    def line_end(self) -> int:
        return self._index().table[self.number * _ROW + _LINE_END]

    @property
    def digest(self) -> str:
        """The concept file's SHA-256."""
        return self.snapshot.concepts[self.concept_id].record.sha256

    def _index(self) -> _DocumentIndex:
        return _document_index(self.snapshot.concepts[self.concept_id])


def rank_sections(
    snapshot: Snapshot,
    terms: list[str],
    token: CancelToken,
    admitted: Collection[str] | None = None,
    *,
    require_all: bool = True,
    parts: PartStore | None = None,
) -> list[ScoredSection]:
    """Every section holding all ``terms`` (AND; any of them without ``require_all``, each
    term it lacks adding nothing), best first: score, then ID, then line.

    ``admitted``, when given, keeps only sections of those concept IDs; BM25's statistics are
    still those of the whole bundle. Rounded scores order the hits, so equal visible scores
    always fall back to ID, then line. ``parts``: where each term's postings are kept across
    restarts.
    """
    df = dict.fromkeys(terms, 0)
    ids = section_totals(snapshot, token).concept_ids
    sections, n, total_length = collect_sections(
        snapshot, terms, df, token, admitted, require_all=require_all, parts=parts
    )
    avgdl = (total_length / n) if n else 0.0
    if avgdl == 0:
        avgdl = 1.0
    idf = {t: _idf(n, df[t]) for t in terms}
    scored: list[ScoredSection] = []
    for s in sections:
        token.check()
        if require_all and len(s.tf) != len(terms):  # AND: every term must occur
            continue
        score = 0.0
        norm = K1 * (1 - B + B * s.length / avgdl)
        for term in terms:  # in query order, so a sum never depends on the postings' order
            tf = s.tf.get(term, 0)
            if tf:
                score += idf[term] * tf * (K1 + 1) / (tf + norm)
        scored.append(ScoredSection(round(score, 6), ids[s.place], s.number, snapshot))
    # A concept's sections are numbered in document order: by number is by first line.
    scored.sort(key=lambda x: (-x.score, x.concept_id, x.number))
    return scored


def _idf(sections: int, df: int) -> float:
    """BM25's inverse document frequency (the +1 keeps it positive for common terms)."""
    return math.log(1 + (sections - df + 0.5) / (df + 0.5))


@dataclass(frozen=True, slots=True)
class _Totals:
    sections: int
    length: int
    concept_ids: tuple[str, ...]  # in the snapshot's order: a posting names its concept's place
    # Every indexed section's weighted length, concept after concept in that order, a concept's
    # first at ``starts[place]`` (one more start: the end): all BM25 needs of a section to
    # score it, so a query's candidates are scored without building their documents.
    lengths: array[int]
    starts: array[int]

    def length_of(self, place: int, number: int) -> int:
        at = self.starts[place] + number
        if not at < self.starts[place + 1]:
            # Postings are read back checked against the concepts, not their sections.
            raise IndexError(f"section {number} of concept {place}: not indexed")
        return self.lengths[at]


@dataclass(frozen=True, slots=True)
class _Postings:
    """A term's weighted count in each section holding it (raw text, heading and concept
    title): aligned arrays, the concept by its place in the snapshot's order (12 bytes a
    section, where an object per section and its pointer cost 64)."""

    concepts: array[int]
    sections: array[int]  # the section's number in its concept
    tf: array[int]

    def __len__(self) -> int:
        return len(self.tf)

    def __iter__(self) -> Iterator[tuple[int, int, int]]:
        return zip(self.concepts, self.sections, self.tf, strict=True)


# The queried terms' postings kept with a snapshot (RecentParts): the last 256 terms, within
# 16 MiB (a word nine pages in ten hold has about 50,000 postings at 9,978 concepts, 600 KB).
POSTINGS_KEPT = 256
POSTINGS_KEPT_BYTES = 16 << 20


class _PostingCache:
    """Per-snapshot postings of recently queried terms (:class:`RecentParts`).

    Each term's postings are a pure function of the snapshot; keeping the last few means a
    follow-up query that reuses a word costs a dictionary lookup instead of a scan.
    """

    def __init__(self) -> None:
        self._recent: RecentParts[_Postings] = RecentParts(
            POSTINGS_KEPT, POSTINGS_KEPT_BYTES,
            lambda p: arrays_nbytes((p.concepts, p.sections, p.tf)))

    def get_each(self, terms: list[str],
                 compute: Callable[[list[str]], Mapping[str, _Postings]]) -> dict[str, _Postings]:
        """Each term's postings; the terms not kept here are computed by one call of
        ``compute``."""
        found: dict[str, _Postings] = {}
        for term in terms:
            kept = self._recent.get(term)
            if kept is not None:
                found[term] = kept
        missing = [term for term in terms if term not in found]
        if missing:
            computed = compute(missing)
            for term in missing:
                found[term] = computed[term]
        self._recent.put(found)
        return found


def collect_sections(
    snapshot: Snapshot,
    terms: list[str],
    df: dict[str, int],
    token: CancelToken,
    admitted: Collection[str] | None = None,
    *,
    require_all: bool = True,
    parts: PartStore | None = None,
) -> tuple[list[_Section], int, int]:
    """The sections holding every query term (any of them, without ``require_all``), with
    weighted term counts; plus the number of
    non-empty sections in the bundle and their total weighted length (for BM25's average).
    ``df`` is filled with each term's document frequency (sections containing it).

    With ``admitted``, sections of other concepts are dropped before they become candidates
    (nothing is scored for them), but ``df`` and the totals still count the whole bundle, so
    no score depends on a filter.

    A section's raw text is its physical lines (heading line included). Its length is the
    weighted token count: raw tokens + 3 x heading tokens + 2 x title tokens; ``tf`` counts
    the query terms with the same weights. Each document's words are indexed once and kept
    with the document; a term's postings are kept with the snapshot for later queries, and
    with ``parts`` in the parse cache under the snapshot's revision, so that a restarted server
    on the same files reads them back instead of searching every document again.
    """
    totals = section_totals(snapshot, token)
    ids = totals.concept_ids
    cache: _PostingCache = of_snapshot(snapshot, SECTION_POSTINGS, _PostingCache)
    postings = cache.get_each(terms, lambda missing: kept_or_computed_each(
        parts, snapshot.revision, {t: f"{POSTINGS_PART}/{t}" for t in missing},
        functools.partial(_postings, snapshot, token=token), _packed_postings,
        functools.partial(_unpacked_postings, len(ids))))
    for term, found in postings.items():
        df[term] = len(found)
    counts: dict[tuple[int, int], dict[str, int]]
    if require_all:
        # AND: only sections in every term's postings can be hits; start from the rarest term.
        rarest = min(terms, key=lambda t: len(postings[t]))
        counts = {
            (place, number): {rarest: count}
            for place, number, count in postings[rarest]
            if admitted is None or ids[place] in admitted
        }
        for term in terms:
            if term == rarest:
                continue
            for place, number, count in postings[term]:
                entry = counts.get((place, number))
                if entry is not None:
                    entry[term] = count
    else:
        counts = {}
        for term in terms:
            for place, number, count in postings[term]:
                if admitted is None or ids[place] in admitted:
                    counts.setdefault((place, number), {})[term] = count
    out: list[_Section] = []
    for (place, number), tf in counts.items():
        token.check()
        if require_all and len(tf) != len(terms):
            continue
        out.append(_Section(place, number, totals.length_of(place, number), tf))
    return out, totals.sections, totals.length


def section_totals(snapshot: Snapshot, token: CancelToken) -> _Totals:
    """The bundle's section count and total weighted length, kept with the snapshot.

    Raises:
        BundleError: ``resource_limit`` when the bundle passes :data:`MAX_TOKENS` or
            :data:`MAX_SECTIONS` (section search cannot narrow what it indexes).
    """
    found = _totals_or_over(snapshot, token)
    if isinstance(found, _OverCap):
        raise found.error()
    return found


@dataclass(frozen=True, slots=True)
class _OverCap:
    """A bundle's section statistics past a cap: search_sections' refusal, a pure function of
    the files like the totals. Kept in their place (in the snapshot and by revision), since
    finding it out builds documents until the cap is passed: 9 s at 50,000 concepts, at every
    call and after every restart before it was kept."""

    what: str  # "tokens" or "sections"

    def cap(self) -> int:
        return MAX_TOKENS if self.what == "tokens" else MAX_SECTIONS

    def error(self) -> BundleError:
        noun = "searchable tokens" if self.what == "tokens" else "sections"
        return resource_limit(
            f"the bundle has more than {self.cap()} {noun}",
            "serve a smaller bundle; section search cannot narrow what it indexes",
        )


def _totals_or_over(snapshot: Snapshot, token: CancelToken) -> _Totals | _OverCap:
    return of_snapshot(
        snapshot, SECTION_WORD_TOTALS, lambda: _kept_totals(snapshot, token), check=token.check
    )


def _kept_totals(snapshot: Snapshot, token: CancelToken) -> _Totals | _OverCap:
    """:func:`_totals`, or the two numbers (or the cap passed) an earlier process on the same
    files kept for this revision (``model.revision_value``): then no document is built for
    them (every concept's section index otherwise)."""
    concept_ids = tuple(snapshot.concepts)

    def read(kept: Any) -> _Totals | _OverCap | None:
        if isinstance(kept, list) and len(kept) == 3 and kept[0] == "over":
            # The cap is kept with it: a release with another cap finds out again.
            over = _OverCap(kept[1]) if kept[1] in ("tokens", "sections") else None
            return over if over is not None and kept[2] == over.cap() else None
        if not (isinstance(kept, list) and len(kept) == 4 and type(kept[0]) is int
                and type(kept[1]) is int and isinstance(kept[2], list)
                and isinstance(kept[3], list)):
            return None
        sections, length, counts, lengths = kept
        if not (len(counts) == len(concept_ids) and len(lengths) == sections
                and all(type(n) is int and n >= 0 for n in counts)
                and all(type(n) is int and 0 <= n < _MAX_LENGTH for n in lengths)
                and sum(counts) == sections and sum(lengths) == length):
            return None
        return _Totals(sections, length, concept_ids, array("i", lengths),
                       array("q", accumulate(counts, initial=0)))

    def kept_form(totals: _Totals | _OverCap) -> list[Any]:
        if isinstance(totals, _OverCap):
            return ["over", totals.what, totals.cap()]
        starts = totals.starts
        return [totals.sections, totals.length,
                [b - a for a, b in itertools.pairwise(starts)], totals.lengths.tolist()]

    return revision_value(snapshot, TOTALS_NAME, read, lambda: _totals(snapshot, token),
                          kept_form)


def _document_index(doc: Document) -> _DocumentIndex:
    index: _DocumentIndex = of_document(doc, SECTION_WORDS, lambda: _index(doc))
    return index


def _totals(snapshot: Snapshot, token: CancelToken) -> _Totals | _OverCap:
    sections = length = words = 0
    concept_ids = []
    lengths, starts = array("i"), array("q", (0,))  # lengths: as the tables hold them
    for concept_id, doc in snapshot.concepts.items():
        concept_ids.append(concept_id)
        token.check()
        index = _document_index(doc)
        words += index.token_count
        if words > MAX_TOKENS:
            return _OverCap("tokens")
        sections += index.size
        if sections > MAX_SECTIONS:
            return _OverCap("sections")
        length += index.total_length
        lengths.extend(index.table[_LENGTH::_ROW])
        starts.append(len(lengths))
    return _Totals(sections, length, tuple(concept_ids), lengths, starts)


def _packed_postings(postings: _Postings) -> bytes:
    return packed((), (postings.concepts, postings.sections, postings.tf))


def _unpacked_postings(concepts: int, data: bytes) -> _Postings | None:
    """Kept postings, when aligned and naming concepts this snapshot has (the row's revision
    says they are this snapshot's: this only refuses a damaged row)."""
    found = unpacked(data, "iii")
    if found is None or found[0]:
        return None
    places, numbers, tf = found[1]
    if not len(places) == len(numbers) == len(tf):
        return None
    if places and (min(places) < 0 or max(places) >= concepts or min(numbers) < 0):
        return None
    return _Postings(places, numbers, tf)  # type: ignore[arg-type]


def _postings(snapshot: Snapshot, terms: list[str], token: CancelToken, *,
              use_kept: bool = True) -> dict[str, _Postings]:
    """Each term's postings, made in one pass over the concepts: a body is read and folded once
    for all the terms that may be in it (a restarted server's new question of three words read
    every body three times), and each term's postings are what a pass for it alone makes.

    The documents whose sections' words the parse cache keeps (:func:`_kept_counts`) are not
    read at all: their counts come from its FTS5 table, in one read with the others'."""
    kept = _kept_counts(snapshot, terms, token) if use_kept else None
    # search_concepts' body word index, when the warm-up built it, names the concepts whose
    # folded body holds a term as a substring (exactly, for a term that is one run of \w:
    # ``holders``; else a superset): only those bodies are folded (bodies are not kept folded)
    # and searched for it. None: every body is.
    words = kept_index(snapshot)
    asked = []
    for term in terms:
        exact = words.holders(term) if words is not None else None
        holding = exact if exact is not None or words is None else words.candidates(
            term, every=True)
        asked.append(_Asked(term, f"{_SEP}{term}{_SEP}",
                            _ascii_whole_word(term) if term.isascii() else None,
                            exact is not None, holding))
    pairs: Iterator[tuple[int, tuple[str, Document]]]
    if kept is None:
        pairs = enumerate(snapshot.concepts.items())
    else:
        concepts, covered = snapshot.concepts, kept[0].places
        pairs = ((place, (concept_id, concepts[concept_id]))
                 for place, concept_id in enumerate(section_totals(snapshot, token).concept_ids)
                 if place not in covered)
    while group := list(itertools.islice(pairs, READ_AHEAD_GROUP)):
        _read_ahead_words(snapshot, [doc for _, (_, doc) in group])
        for place, (concept_id, doc) in group:
            token.check()
            index = _document_index(doc)
            body: str | None = None
            for ask in asked:
                # Folded text is a superset of the words: a term absent from it is in no
                # section's words or heading (each section's fold is a part of the body's:
                # folding never joins across a line break), so only the title can hold it,
                # as a whole word.
                may_hold = ask.holding
                if may_hold is None or concept_id in may_hold:
                    if body is None:
                        body = doc.folded_body()
                    if ask.exact or ask.text in body:
                        _post(ask, place, index, body, True)
                        continue
                if ask.needle in index.title_words:
                    _post(ask, place, index, "", False)
    if kept is None:
        return {ask.text: _Postings(ask.places, ask.numbers, ask.counts) for ask in asked}
    usable, found = kept
    merged = {ask.text: _with_kept(ask, found.counts.get(ask.text), usable) for ask in asked}
    if any(postings is None for postings in merged.values()):
        # A kept count that cannot be the snapshot's: a damaged table, never used.
        return _postings(snapshot, terms, token, use_kept=False)
    return cast(dict[str, _Postings], merged)


@dataclass(frozen=True, slots=True)
class _Places:
    """Each concept's path by its place in the snapshot's order, the place of each path, and
    the SHA-256 of each path's bytes (what the kept section words are keyed by)."""

    paths: tuple[str, ...]
    place_of: Mapping[str, int]
    records: Mapping[str, str]


def _places(snapshot: Snapshot, token: CancelToken) -> _Places:
    """Made from the concept IDs and the file records, no document built."""
    def build() -> _Places:
        ids = section_totals(snapshot, token).concept_ids
        concepts = snapshot.concepts
        if isinstance(concepts, Concepts):
            named = concepts.paths
            paths = tuple(named[concept_id] for concept_id in ids)
        else:
            paths = tuple(concepts[concept_id].path for concept_id in ids)
        shas = {record.path: record.sha256 for record in snapshot.records}
        return _Places(paths, {path: n for n, path in enumerate(paths)},
                       {path: shas[path] for path in paths})

    found: _Places = of_snapshot(snapshot, SECTION_PLACES, build, check=token.check)
    return found


@dataclass(frozen=True, slots=True)
class _Usable:
    """The kept documents that are this snapshot's concepts, as they are now (the same bytes,
    as many indexed sections): number → (place, sections); and their places."""

    docs: Mapping[int, tuple[str, str, int]]  # what they were found in (the loader's object)
    by_number: Mapping[int, tuple[int, int]]
    places: frozenset[int]


def _usable(snapshot: Snapshot, docs: Mapping[int, tuple[str, str, int]], token: CancelToken
            ) -> _Usable:
    """Kept with the snapshot while the kept documents stay the same object (no document
    written meanwhile): the match is a pass over every concept."""
    holder: _LastUsable = of_snapshot(snapshot, SECTION_KEPT_DOCS, _LastUsable)
    kept = holder.last
    if kept is not None and kept.docs is docs:
        return kept
    places = _places(snapshot, token)
    starts, place_of, records = section_totals(snapshot, token).starts, places.place_of, \
        places.records
    by_number = {}
    for number, (path, sha256, sections) in docs.items():
        place = place_of.get(path)
        if (place is not None and records[path] == sha256
                and starts[place + 1] - starts[place] == sections):
            by_number[number] = (place, sections)
    usable = holder.last = _Usable(docs, by_number,
                                   frozenset(place for place, _ in by_number.values()))
    return usable


class _LastUsable:
    """The last :class:`_Usable` of a snapshot (one reference, replaced whole)."""

    __slots__ = ("last",)

    def __init__(self) -> None:
        self.last: _Usable | None = None


def _kept_counts(snapshot: Snapshot, terms: list[str], token: CancelToken
                 ) -> tuple[_Usable, KeptSectionWords] | None:
    """The terms' counts in the sections of the documents whose words the parse cache keeps
    for these bytes (``None`` when it keeps none of them)."""
    store = snapshot.inbound
    if store is None:
        return None
    found = store.section_words(KEPT_WORDS_RULES, terms, _COLUMN_WEIGHTS)
    if found is None:
        return None
    usable = _usable(snapshot, found.docs, token)
    return (usable, found) if usable.places else None


_ROW_MASK = (1 << SECTION_ROW_SHIFT) - 1


def _with_kept(ask: _Asked, counts: list[tuple[int, int]] | None, usable: _Usable
               ) -> _Postings | None:
    """The postings a pass over every document makes: those of the documents read (``ask``'s)
    with the kept counts of the others, in place order; ``None`` when a kept count cannot be
    the snapshot's (a section past its document's, a count that is not positive)."""
    if counts is None:
        return None
    rows: list[tuple[int, int, int]] = []
    by_number = usable.by_number
    for row, tf in counts:
        doc = by_number.get(row >> SECTION_ROW_SHIFT)
        if doc is None:
            continue  # the words of bytes that are not this snapshot's
        number = row & _ROW_MASK
        if number >= doc[1] or type(tf) is not int or tf <= 0:
            return None
        rows.append((doc[0], number, tf))
    if ask.places:
        rows.extend(zip(ask.places, ask.numbers, ask.counts, strict=True))
        rows.sort()
    return _Postings(array("i", [row[0] for row in rows]), array("i", [row[1] for row in rows]),
                     array("i", [row[2] for row in rows]))


def _keep_section_words(snapshot: Snapshot, token: CancelToken) -> None:
    """Write the section words of every concept whose bytes have none kept (the warm-up's step
    after its save: on a cold start the save makes the database), a group a transaction."""
    store = snapshot.inbound
    if store is None or isinstance(_totals_or_over(snapshot, token), _OverCap):
        return
    ids = section_totals(snapshot, token).concept_ids

    def missing() -> list[str] | None:
        found = store.section_words(KEPT_WORDS_RULES, (), _COLUMN_WEIGHTS)
        if found is None:
            return None
        covered = _usable(snapshot, found.docs, token).places
        return [concept_id for place, concept_id in enumerate(ids) if place not in covered]

    # Before any is written, the tables are made, or emptied (other rules' words, or mostly
    # stale ones), and what is kept is read again; a restart whose words are all kept opens no
    # write transaction.
    unkept = missing()
    if unkept != []:
        if not store.keep_section_words(KEPT_WORDS_RULES, ()):
            return
        unkept = missing()
    if not unkept:
        return
    concepts = snapshot.concepts
    for start in range(0, len(unkept), KEPT_WORDS_GROUP):
        token.check()
        group = [concepts[concept_id] for concept_id in unkept[start:start + KEPT_WORDS_GROUP]]
        _read_ahead_words(snapshot, group)
        if not store.keep_section_words(KEPT_WORDS_RULES, [
                (doc.path, doc.record.sha256, section_rows(doc)) for doc in group]):
            return


def section_rows(doc: Document) -> list[tuple[str, str, str]]:
    """Each indexed section of a concept as the parse cache keeps its words: its text (the
    folded body between its offsets, for an ASCII body; else its words), its heading's words
    and its title's, each as text that FTS5's ``ascii`` tokenizer cuts into exactly the words
    :func:`tokens` finds (only a run of ASCII letters and digits, or of other characters, is a
    word to it, and words are separated by spaces or ASCII punctuation)."""
    index = _document_index(doc)
    title = index.title_words.replace(_SEP, " ")
    body = doc.folded_body() if index.ascii_body else None
    table, headings, words = index.table, index.heading_words, index.words
    rows = []
    heading_start = words_start = 0
    for number in range(index.size):
        at = number * _ROW
        heading_end, words_end = table[at + _HEADING_END], table[at + _WORDS_END]
        if body is not None:
            text = body[table[at + _START]:table[at + _END]]
        else:
            assert words is not None  # kept for every body that is not ASCII
            text = words[words_start:words_end].replace(_SEP, " ")
        rows.append((text, headings[heading_start:heading_end].replace(_SEP, " "), title))
        heading_start, words_start = heading_end, words_end
    return rows


def _read_ahead_words(snapshot: Snapshot, group: list[Document]) -> None:
    """Read back the section words of a group of documents that have not read them yet at
    once (a restarted server's first new question, before its warm-up read them: one query a
    group, not one a document)."""
    store, key = snapshot.inbound, stored_key(SECTION_WORDS, None)
    if store is not None and key is not None:
        unread = [doc.path for doc in group
                  if doc.stored is not None and not document_holds(doc, SECTION_WORDS)]
        if len(unread) >= MIN_READ_AHEAD:
            store.read_ahead(key, unread)


@dataclass(frozen=True, slots=True)
class _Asked:
    """One term of a :func:`_postings` pass, and the postings it has made so far."""

    text: str
    needle: str  # the term between separators, as the joined words hold it
    whole_word: re.Pattern[str] | None  # for an ASCII term: not followed by a word character
    exact: bool  # ``holding`` holds exactly the concepts whose folded body holds the term
    holding: Collection[str] | None  # the concepts whose bodies may hold it; None: any
    places: array[int] = field(default_factory=lambda: array("i"))
    numbers: array[int] = field(default_factory=lambda: array("i"))
    counts: array[int] = field(default_factory=lambda: array("i"))


def _post(term: _Asked, place: int, index: _DocumentIndex, body: str, in_body: bool) -> None:
    """The term's weighted count in each section of the concept at ``place`` that holds it."""
    needle = term.needle
    in_title = index.title_words.count(needle)
    raw_counts = (
        _counts_by_offset(body, index, term.whole_word)
        if index.ascii_body and in_body
        else None
    )
    # The joined words are looked through once: most documents a term reaches hold it in
    # no heading (and, ASCII, have no words kept), so no section's slice is counted.
    sliced = needle in index.heading_words or (
        index.words is not None and needle in index.words)
    places, numbers, counts = term.places, term.numbers, term.counts
    for number in range(index.size):
        raw = raw_counts[number] if raw_counts is not None else 0
        in_heading = 0
        if sliced:
            in_heading, in_words = index.counts(number, needle)
            if not index.ascii_body:
                raw = in_words
        tf = (
            RAW_WEIGHT * raw
            + HEADING_WEIGHT * in_heading
            + TITLE_WEIGHT * in_title
        )
        if tf:
            places.append(place)
            numbers.append(number)
            counts.append(tf)


def counts_in_folded_body(doc: Document) -> bool:
    """Whether the document's terms are counted in its folded body by offsets (an ASCII body
    folds to its lowercase: same length, same offsets as the text). Otherwise each section's
    words are kept; ``tests/test_search_sections_queries.py`` checks both give one answer."""
    return doc.held.ascii or doc.body.isascii()


def _ascii_whole_word(term: str) -> re.Pattern[str]:
    """The term not followed by a letter or digit of folded ASCII text. The character before
    is checked by the caller: a leading look-behind would stop ``re`` from searching for the
    literal first, which is several times slower."""
    return re.compile(f"{re.escape(term)}(?![0-9a-z])")


_ASCII_WORD_CHARS = frozenset("0123456789abcdefghijklmnopqrstuvwxyz")


def _counts_by_offset(
    body: str, index: _DocumentIndex, whole_word: re.Pattern[str] | None
) -> list[int]:
    """How often the term occurs as a word in each section of an ASCII body."""
    counts = [0] * index.size
    if whole_word is None or not counts:
        return counts  # a term with non-ASCII letters cannot occur in an ASCII body
    table = index.table
    starts = table[_START::_ROW].tolist()
    ends = table[_END::_ROW].tolist()
    for match in whole_word.finditer(body, starts[0], ends[-1]):
        at = match.start()
        if at and body[at - 1] in _ASCII_WORD_CHARS:
            continue  # inside a longer word
        n = bisect.bisect_right(starts, at) - 1
        if n >= 0 and match.end() <= ends[n]:
            counts[n] += 1
    return counts


def _delimited(words: list[str]) -> str:
    """``SEP w1 SEP SEP w2 SEP ...``: every word between two separators."""
    return f"{_SEP}{(_SEP * 2).join(words)}{_SEP}" if words else ""


def _index(doc: Any) -> _DocumentIndex:
    title = text_field(doc.fm, "title")
    _check_label(title, "a concept title")
    title_tokens = tokens(title)
    ascii_body = counts_in_folded_body(doc)
    body = doc.folded_body() if ascii_body else ""  # folded for this build only
    headings: list[str] = []
    table = array("i")
    heading_words: list[str] = []
    words: list[str] = []
    heading_end = words_end = token_count = total_length = 0
    lines = doc.lines  # once: each read decompresses the text (Document.lines)
    for section in doc.sections:
        first, last = section.line_start - 1, section.line_end
        if ascii_body:
            start, end = lines.bounds(first, last)
            start, end = start - doc.body_start, end - doc.body_start
            raw_tokens = _ASCII_WORD.findall(body, start, end)
            if not raw_tokens and not body[start:end].strip():
                continue
        else:
            raw = lines.span(first, last)
            if not raw.strip():
                continue
            raw_tokens = tokens(raw)
            start = end = 0
        heading = section.heading or ""
        _check_label(heading, "a heading")
        heading_tokens = tokens(heading)
        token_count += len(raw_tokens) + len(heading_tokens) + len(title_tokens)
        length = (
            RAW_WEIGHT * len(raw_tokens)
            + HEADING_WEIGHT * len(heading_tokens)
            + TITLE_WEIGHT * len(title_tokens)
        )
        heading_words.append(_delimited(heading_tokens))
        heading_end += len(heading_words[-1])
        if not ascii_body:
            words.append(_delimited(raw_tokens))
            words_end += len(words[-1])
        headings.append(heading)
        table.extend((section.line_start, section.line_end, length, start, end, heading_end,
                      words_end))
        total_length += length
    return _DocumentIndex(_delimited(title_tokens), tuple(headings), table,
                          "".join(heading_words), None if ascii_body else "".join(words),
                          token_count, total_length, ascii_body)


def _check_label(text: str, what: str) -> None:
    if len(text.encode("utf-8")) > MAX_LABEL_BYTES:
        raise resource_limit(
            f"{what} in the bundle is longer than {MAX_LABEL_BYTES} bytes",
            "shorten the heading or title, or use search_concepts",
        )


def snippet(raw: str, wanted: set[str]) -> str:
    """At most 512 characters of the section's original text around its first matching word.

    Words are found in the original text and folded one by one, so the window's offsets are
    offsets of the original (folding may change lengths: 'ß' folds to 'ss'). The window starts
    80 characters before the first word whose fold is a query term; without one (the terms
    matched only the title), it is the section's start.
    """
    start = 0
    # In ASCII the letters and digits are the only word characters: the small class finds the
    # same words, and an ASCII bundle never builds the full pattern (~0.3 s a process, which the
    # first section search after every restart paid).
    words = _ASCII_WORD_ANY_CASE if raw.isascii() else word_pattern()
    for match in words.finditer(raw):
        if any(word in wanted for word in tokens(match.group())):
            start = max(0, match.start() - SNIPPET_LEAD)
            break
    return raw[start : start + SNIPPET_LENGTH]
