"""The index behind ``context``'s ranking: stemmed words by field, per document and section.

``search_sections`` keeps its own index (:mod:`._section_index`: exact folded words, AND, fixed
weights), pinned by its contract. ``context`` answers questions written the way people ask, so
it reads the bundle differently:

- words are folded as everywhere, then stemmed with the Snowball English stemmer
  (``threads`` and ``thread`` are one term);
- a concept is scored as a whole, BM25F-style, over four fields with their own weights and
  length normalisation: title, description, headings and the whole body
  (:func:`score`); each section is scored on its own, and a section made mostly of links,
  tables or code counts less (:attr:`SectionWords.junk`);
- copies count once: sections whose normalised text is the same share a digest, and pages at
  the same relative path under sibling folders that hold mostly the same relative paths
  (product versions, translations) share a copy group (:func:`copy_groups`).

Each document's stems are computed once and kept with the document (``CONTEXT_WORDS``, and in
the parse cache for the next process, per file and, for a loaded snapshot, every concept's at
once: :mod:`._context_words`); the bundle statistics, which concepts hold each stem (kept whole
for the next process too), each queried stem's part of the scores (:class:`TermScores`) and
the copy groups are kept with the snapshot (``CONTEXT_INDEX``), and so are every concept's
words end to end in numpy arrays (:func:`columns`), from which a stem many concepts hold has
its part made in one pass in C. The warm-up builds all but the stems' parts; the first question
with a stem builds its part, and a question adds up its stems' parts (:func:`score`) without
reading a document. The bundle statistics, the holders, the length norms and the columns are
kept whole for the next process: a restarted server answers a question with new stems from
them, reading no concept's words but those of the concepts it packs. An edit to
one file rebuilds only that file's words and the snapshot-level parts. Everything is a function
of the bundle: no clock, no randomness, orderings end in IDs and line numbers.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import importlib
import itertools
import json
import math
import operator
import re
import sys
from array import array
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard, TypeVar, cast, overload

from .._version import __version__
from ..cancel import CancelToken
from ..derived import (
    Codec,
    Slot,
    built_value,
    exactly,
    keep_of_concept,
    of_concept,
    of_document,
    of_snapshot,
)
from ..model import Concepts, Document, Snapshot, revision_value
from ..okf.names import concept_name
from ..okf.properties import text_field
from ..toolspec import PartStore
from . import _context_words
from ._context_words import (
    STORED_NAME,
    Card,
    DocumentWords,
    SectionTable,
    SectionWords,
    narrow_code,
    packed_words,
    unpacked_words,
)
from ._kept_parts import RecentParts, arrays_nbytes, kept_or_computed, packed, unpacked
from ._section_index import tokens, words_between
from ._stem_codes import (
    Coding,
    decoder,
    encoder,
    finds,
    holds,
    single_number,
)
from ._stem_codes import count as count_in

_T = TypeVar("_T")

# BM25F over a concept's fields: (weight, length normalisation b). A title and a description
# name and sum up the page; headings outline it; the body is the evidence. Tuned on the tune
# half of the question set (docs/decisions/context-ranking.md).

def _warm_words(snapshot: Snapshot, token: CancelToken) -> None:
    every_words(snapshot, token)


def _warm_index(snapshot: Snapshot, token: CancelToken) -> None:
    """The parts every question reads (a stem's part of the scores is kept as it is asked;
    the labels are decoded and counted from the columns), the stop words' stems, which a
    restarted warm-up makes nowhere else, and numpy, which a question's sums are added with
    (about 55 ms to import, once). After a restart on the same files every part is read
    back, and no concept's words are read."""
    # A check between the parts, each read back whole with few checks of its own: this is a
    # restarted server's first step, and a call that came meanwhile waited for up to 0.3 s of
    # it at 9,978 concepts (readiness.StepAside stands aside only at a check).
    for part in (totals, stem_holders, norms, copy_groups):
        token.check()
        part(snapshot, token)
    token.check()
    importlib.import_module("numpy")  # before the columns, which are read as its arrays
    token.check()
    columns(snapshot, token)
    token.check()
    stop_stems()
    token.check()
    # The labels' codes and counts (6 ms at 9,978 concepts), which a question's first call
    # made before.
    label_codes(snapshot, token)


def _encode_words(words: DocumentWords) -> list[Any]:
    """The kept form: the document's distinct stems, and its fields coded by their place in
    that list (from ``LOCAL_FIRST``), so the row does not depend on this process's numbers."""
    width = words.width
    # Every section's heading codes are a slice of ``headings`` (SectionTable holds to that).
    stems, local, recode = encoder(
        _context_words.CODES, (words.title, words.description, words.headings, words.body), width)
    return [local, stems,
            recode(words.title), recode(words.description), recode(words.headings),
            recode(words.body), list(words.lengths),
            [[s.heading, s.line_start, s.line_end, s.start // width, s.end // width, s.length,
              recode(s.heading_words), s.heading_length, s.junk, s.digest]
             for s in words.sections], words.card.row()]


def _decode_words(value: Any) -> DocumentWords:
    local, stems, title, description, headings, body, lengths, sections, card = value
    if local not in (1, 2):
        raise ValueError("not a kept form of a document's words")
    "".join(exactly(list, stems))  # TypeError unless every stem is a string (checked in C)
    # A code past the list raises KeyError (the row is then built anew).
    recode, width = decoder(_context_words.CODES, stems, local)
    first, second, third, fourth = (exactly(int, n) for n in lengths)
    headings_text = recode(exactly(str, headings))
    return DocumentWords(
        title=recode(exactly(str, title)), description=recode(exactly(str, description)),
        headings=headings_text, body=recode(exactly(str, body)),
        lengths=(first, second, third, fourth), width=width,
        sections=SectionTable.of([
            SectionWords(
                # Interned, as the Markdown facts' headings are when read back: one string
                # for both (60,000 sections in the bench bundle).
                heading=sys.intern(exactly(str, heading)), line_start=exactly(int, line_start),
                line_end=exactly(int, line_end), start=exactly(int, start) * width,
                end=exactly(int, end) * width, length=exactly(int, length),
                heading_words=recode(exactly(str, heading_words)),
                heading_length=exactly(int, heading_length), junk=exactly(float, junk),
                digest=exactly(str, digest),
            )
            for heading, line_start, line_end, start, end, length, heading_words,
            heading_length, junk, digest in sections
        ], headings_text, width),
        card=Card.from_row(card),
    )


# Both early in the warm-up (Slot.early): the server's instructions send an agent to context
# first for a question in plain words, and after a restart both are read back or made from what
# is read back, without a document (their warm-up took 0.35 s at 9,978 concepts).
CONTEXT_WORDS: Slot[DocumentWords] = Slot(
    "context_words", "document",
    "a document's stemmed words by field and section, for context's ranking; kept in the "
    "parse cache",
    _warm_words,
    Codec(3, _encode_words, _decode_words),
    # Not early: a restarted server's questions need the index (CONTEXT_INDEX, read back
    # whole), not every concept's words, which are read back after the documents.
)
# One slot, several parts (the variant names the part: totals, holders, norms, columns, copies,
# terms), each of its own type: the accessors below (totals, holders, norms, columns,
# copy_groups, term_scores) type each part.
CONTEXT_INDEX: Slot[Any] = Slot(
    "context_index", "snapshot",
    "context's bundle statistics, stem holders, length norms, word columns, queried stems' "
    "parts of the scores and copy groups, by part",
    _warm_index,
    early=True,
)
SLOTS = (CONTEXT_WORDS, CONTEXT_INDEX)

FIELDS = ("title", "description", "headings", "body")
FIELD_WEIGHT = {"title": 3.0, "description": 2.0, "headings": 1.5, "body": 1.0}
FIELD_B = {"title": 0.5, "description": 0.5, "headings": 0.6, "body": 0.75}
K1 = 1.2
LABEL_B = 0.75  # the title and description as one text: a page's own summary of itself
# A section's BM25: its heading's words count HEADING_WEIGHT times; a softer length
# normalisation than search_sections' (0.75), so short, dense sections win less often.
SECTION_K1 = 1.2
SECTION_B = 0.75
HEADING_WEIGHT = 2
# A section that is mostly links, table rows or code is discounted by up to this fraction.
JUNK_DISCOUNT = 0.5
# Sections shorter than this (in characters, normalised) never count as copies of each other:
# two "Example" headings with nothing below are not one answer.
MIN_COPY_CHARS = 40
# Sibling folders are copies of each other (versions, translations) when they share at least
# this many relative paths and that many make at least this share of the smaller folder.
COPY_MIN_SHARED = 3
COPY_MIN_SHARE = 0.5
# A relative path found under more folders than this is too common to say anything (index.md).
COPY_MAX_FOLDERS = 64
# The per-snapshot cache of queried stems' parts of the scores (RecentParts): the last 512,
# within 32 MiB (a stem most concepts hold: about 0.8 MB at 9,978 concepts).
TERMS_KEPT = 512
TERMS_KEPT_BYTES = 32 << 20
# A stem's part is made from the snapshot's columns (every holder at once: a comparison over
# every code of the bundle, about 9 ms at 9,978 concepts) when at least one concept in this
# many holds it, else holder by holder (about 10 us a holder; 0.1 ms for a rare stem).
COLUMNS_FROM_SHARE = 32
COLUMNS_GROUP = 1024  # concepts whose words are put in the columns between two checks
_PAST_PLANE = 0xD800  # a code past U+FFFF in the columns: a surrogate, which no code is
# The names the sections' layout and the bundle statistics are kept under in the parse cache
# (InboundHint.keep_json), for a restarted server on the same files.
LAYOUT_NAME = "context-layout/1"
HOLDERS_NAME = "context-holders/1"  # and the stems' holders (InboundHint.keep_bytes)
TOTALS_NAME = "context-totals/1"
# The length norms and the columns, kept whole (InboundHint.keep_bytes): with the holders and
# the totals, all a question's new stem needs, so a restarted server reads no concept's words
# to answer one (docs/decisions/restart-calls.md).
NORMS_NAME = "context-norms/1"
COLUMNS_NAME = "context-columns/1"
_COLUMNS_MAGIC = b"bmc1"
# The columns' arrays as kept, in order, each with its type (little-endian).
_COLUMN_ARRAYS = (("title", "<u2"), ("title_start", "<i8"), ("description", "<u2"),
                  ("description_start", "<i8"), ("headings", "<u2"), ("heading_start", "<i8"),
                  ("body", "<u2"), ("section_start", "<i8"))
_COLUMN_PIECE = 1 << 20  # items of an array written in one piece (its bytes copied for it)
# Stem numbers whose narrow code is below U+10000 (the surrogates skipped): what a column's
# uint16 unit can hold.
_NARROW_NUMBERS = 0x10000 - 0x800

_SEP = "\x00"  # what a digest's text puts around each stem (_digest)
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)|<https?://[^>]*>|https?://\S+")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_WORD_RUN = re.compile(r"\w+")
# The name of a stem's part kept in the parse cache (term_scores). It changes with what a part
# is computed from: the number by hand with the formula, the digest with the constants and the
# release.
TERM_PART = "context-terms/1/" + hashlib.sha256(repr((
    __version__, FIELD_WEIGHT, FIELD_B, K1, LABEL_B, SECTION_K1, SECTION_B, HEADING_WEIGHT,
    JUNK_DISCOUNT)).encode()).hexdigest()[:16]


@functools.lru_cache(maxsize=1 << 18)
def stem(word: str) -> str:
    """The Snowball English stem of one folded word. Words with a digit (``c4700``, ``x64``)
    are names, kept as they are. A new stemmer per miss: the stemmer keeps state while it
    works, and the cache makes misses rare.

    The package is imported on the first miss, not with this module: it imports the stemmers
    of every language it has (about 50 ms, most of it Serbian), and every server imports this
    module before its first answer, which never stems."""
    if not word.isalpha():
        return word
    import snowballstemmer

    stemmed: str = snowballstemmer.stemmer("english").stemWord(word)
    return stemmed


def stems(text: str) -> list[str]:
    """The stems of ``text``'s folded words, in order."""
    return [stem(w) for w in tokens(text)]


# Words that say how a question is asked, not what it is about: dropped from the terms unless
# nothing else is left. Fixed and documented (docs/TOOLS.md), so a pack never depends on a
# language model or a corpus statistic. The second block is how people talk to an agent
# ("I want to keep something like X instead"), found in the question set's failures. Not
# `use`, `get` or `show`: headings say them ("Use Git CLI", "Show the dependency tree"), and
# keeping them found more answers on the tune half and more known items.
STOPWORDS = frozenset(
    """a about after all also an and any are as at be been before being between both but by can
    could did do does doing for from had has have having he her here hers him his how i if in
    into is it its itself just me more most my no nor not of off on once only or other our ours
    out over own same she should so some such than that the their theirs them then there these
    they this those through to too under until up very was we were what when where which while
    who whom why will with would you your yours know tell explain describe
    able actually already always anymore anything anyway around back currently each either else
    even ever every everything go goes going got happen happens instead keep
    keeps kind later let like lot lots make makes many maybe much need needs now one please
    possible really say see seem seems something somehow sometimes still stuff sure take
    thing things try trying via want wanted wants way ways without""".split()
)


@functools.cache
def stop_stems() -> frozenset[str]:
    """The stop words' stems, made once a process: by the warm-up (:func:`_warm_index`), which
    so imports the stemmer too, or else by the first question. After a restart nothing else
    in the warm-up stems a word (the words are read back), and the import and these stems
    were about 30 ms of the first question's 56."""
    return frozenset(stem(w) for w in STOPWORDS)


def document_words(doc: Document) -> DocumentWords:
    words: DocumentWords = of_document(doc, CONTEXT_WORDS, lambda: _build(doc))
    return words


def concept_path(snapshot: Snapshot, concept_id: str) -> str:
    """The path of a concept's file, without building its document when the snapshot has
    its files' cells (``KeyError`` for an ID that is no concept)."""
    concepts = snapshot.concepts
    if isinstance(concepts, Concepts) and concept_id in concepts:
        return concepts.paths[concept_id]
    return concepts[concept_id].path


def concept_words(snapshot: Snapshot, concept_id: str) -> DocumentWords:
    """:func:`document_words` of a concept, read back without building its document when an
    earlier process kept them and the document is not built (``derived.of_concept``)."""
    return of_concept(snapshot, concept_id, CONTEXT_WORDS, _build)


def _build(doc: Document) -> DocumentWords:
    title_words = tokens(concept_name(doc))
    description_words = tokens(text_field(doc.fm, "description"))
    lines = doc.lines
    ascii_body = doc.held.ascii or doc.body.isascii()
    body = doc.folded_body() if ascii_body else ""  # folded for this build only
    spans = []
    for section in doc.sections:
        first, last = section.line_start - 1, section.line_end
        raw = lines.span(first, last)
        if not raw.strip():
            continue
        if ascii_body:  # the folded body has the text's offsets: no second fold
            start, end = lines.bounds(first, last)
            words = words_between(body, start - doc.body_start, end - doc.body_start)
        else:
            words = tokens(raw)
        heading = section.heading or ""
        spans.append((section, raw, words, heading, tokens(heading)))
    # Each distinct word is stemmed once per document (most of a text is repeats).
    vocabulary = set(title_words).union(description_words)
    for _, _, words, _, heading_words in spans:
        vocabulary.update(words)
        vocabulary.update(heading_words)
    stemmed = {w: stem(w) for w in vocabulary}
    get = stemmed.__getitem__
    coding = Coding(_context_words.CODES, stemmed.values())
    encode, width = coding.encode, coding.width
    heading_stems: list[str] = []
    body_parts: list[str] = []
    offset = length = 0
    sections = []
    for section, raw, words, heading, heading_words in spans:
        section_stems = list(map(get, words))
        heading_section = list(map(get, heading_words))
        heading_stems.extend(heading_section)
        part = encode(section_stems)
        body_parts.append(part)
        sections.append(
            SectionWords(heading, section.line_start, section.line_end, offset,
                         offset + len(part), len(section_stems), encode(heading_section),
                         len(heading_section), _junk(raw), _digest(section_stems))
        )
        offset += len(part)
        length += len(section_stems)
    title = list(map(get, title_words))
    description = list(map(get, description_words))
    headings = encode(heading_stems)
    return DocumentWords(
        encode(title), encode(description), headings, "".join(body_parts),
        (len(title), len(description), len(heading_stems), length),
        SectionTable.of(sections, headings, width), width, Card.of(doc),
    )


def _junk(raw: str) -> float:
    """How much of a section is not prose: link lists, table rows (flag tables) and code
    blocks say little in answer to a question, however many of its words they repeat."""
    junk = prose = 0
    fenced = False
    for line in raw.splitlines():
        text = line.strip()
        if text.startswith(("```", "~~~")):
            fenced = not fenced
            junk += 1
            continue
        if not text or (not fenced and text.startswith("#")):
            continue
        if fenced or text.startswith("|"):
            junk += 1
            continue
        if ("](" in text or "http" in text) and _LINK.search(text):
            rest = _LIST_MARK.sub("", _LINK.sub(" ", text))
            if len(_WORD_RUN.findall(rest)) <= 3:  # a line that is a link and little else
                junk += 1
                continue
        prose += 1
    total = junk + prose
    return junk / total if total else 0.0


def _digest(stems: list[str]) -> str:
    """The digest of a section's normalised text (its stemmed words), or "" for a short one.
    The text is the stems each between NUL characters (the form the words were once kept
    in, so digests in kept rows and answers do not change)."""
    text = f"{_SEP}{(_SEP * 2).join(stems)}{_SEP}" if stems else ""
    if len(text) < MIN_COPY_CHARS:
        return ""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


# --------------------------------------------------------------------------------------------
# Bundle statistics and each queried stem's part of the scores


@dataclass(frozen=True, slots=True)
class _Totals:
    concepts: int
    sections: int
    field_avg: tuple[float, float, float, float]
    section_avg: float


@dataclass(frozen=True, slots=True)
class TermScores:
    """One stem's part of every score it adds to, computed once per snapshot and kept: the
    scores are sums over the question's stems of these parts, so a question only adds them up.

    Concepts are named by their position (:attr:`_Holders.concepts`) and sections by their
    number in the snapshot (:attr:`_Holders.first_section`). Compact arrays, aligned pairwise:
    about 20 bytes a holding concept and 12 a holding section, where a tuple of tuples per
    concept cost about 400."""

    holders: int  # concepts holding the stem in any field (its document frequency)
    positions: array[int]  # every holder ...
    concept: array[float]  # ... and its BM25F term
    label_positions: array[int]  # holders with it in the title or description ...
    label: array[float]  # ... and the BM25 term of those two as one text
    sections: array[int]  # sections holding it under a heading with text below ...
    section: array[float]  # ... and the BM25 term of each
    described: array[int]  # holders whose description holds it
    headed: array[int]  # sections whose heading holds it


class _TermCache:
    """The parts of recently queried stems, per snapshot (:class:`RecentParts`): a pure
    function of the snapshot, so keeping them changes speed only."""

    def __init__(self) -> None:
        self._recent: RecentParts[TermScores] = RecentParts(
            TERMS_KEPT, TERMS_KEPT_BYTES,
            lambda t: arrays_nbytes((t.positions, t.concept, t.label_positions, t.label,
                                     t.sections, t.section, t.described, t.headed)))

    def get(self, key: str, compute: Callable[[], TermScores]) -> TermScores:
        found = self._recent.get(key)
        if found is None:
            found = compute()
            self._recent.put({key: found})
        return found


def _totals(snapshot: Snapshot, token: CancelToken) -> _Totals:
    sums = [0, 0, 0, 0]
    sections = 0
    for words in every_words(snapshot, token):
        token.check()
        for n, value in enumerate(words.lengths):
            sums[n] += value
        sections += len(words.sections)
    concepts = len(snapshot.concepts)
    avg = tuple((s / concepts if concepts else 0.0) or 1.0 for s in sums)
    section_avg = (sums[3] / sections if sections else 0.0) or 1.0
    return _Totals(concepts, sections, (avg[0], avg[1], avg[2], avg[3]), section_avg)


def every_words(snapshot: Snapshot, token: CancelToken) -> tuple[DocumentWords, ...]:
    """Every concept's words, in the snapshot's order: what the bundle's statistics, the
    sections' layout, the stems' holders and the norms are made from. Kept with the snapshot;
    read back in one piece when an earlier process kept them for this revision."""
    found: tuple[DocumentWords, ...] = _index_part(
        snapshot, "words", lambda: _every_words(snapshot, token), token)
    return found


def _every_words(snapshot: Snapshot, token: CancelToken) -> tuple[DocumentWords, ...]:
    """Read back whole (:func:`._context_words.unpacked_words`; each concept's words are then
    kept by its file's cell, so the document takes them when built), or each concept's
    (:func:`concept_words`). Words gathered one by one on a snapshot loaded from the files
    (not updated from a predecessor, whose words the next process could not use) are kept
    whole for the next process: the stems, and the words of each group of about a thousand
    concepts (:func:`._context_words.packed_words`), written in the background one part after
    the other (12 MB in all at 9,978 concepts)."""
    ids = tuple(snapshot.concepts)
    store = snapshot.inbound
    if store is not None:
        revision = snapshot.revision
        kept = unpacked_words(
            lambda part: store.stored_bytes(revision, f"{STORED_NAME}/{part}"), ids,
            token.check)
        if kept is not None:
            token.check()
            return tuple(keep_of_concept(snapshot, concept_id, CONTEXT_WORDS, words)
                         for concept_id, words in zip(ids, kept, strict=True))
    every = []
    for concept_id in ids:
        token.check()
        every.append(concept_words(snapshot, concept_id))
    if store is not None and snapshot.loaded:
        parts = packed_words(ids, every)
        for part, pieces in (parts or {}).items():
            store.keep_bytes(snapshot.revision, f"{STORED_NAME}/{part}", pieces)
    return tuple(every)


class _ConceptWords(Sequence[tuple[str, DocumentWords]]):
    """The snapshot's concepts in order, each with its words, made (or read back from the
    parse cache) when asked: a question reads those of the concepts it ranks, not all."""

    __slots__ = ("ids", "_snapshot")

    def __init__(self, ids: tuple[str, ...], snapshot: Snapshot) -> None:
        self.ids = ids
        self._snapshot = snapshot

    def __len__(self) -> int:
        return len(self.ids)

    @overload
    def __getitem__(self, position: int) -> tuple[str, DocumentWords]: ...

    @overload
    def __getitem__(self, position: slice) -> list[tuple[str, DocumentWords]]: ...

    def __getitem__(self, position: int | slice
                    ) -> tuple[str, DocumentWords] | list[tuple[str, DocumentWords]]:
        if isinstance(position, slice):
            return [self[n] for n in range(*position.indices(len(self.ids)))]
        concept_id = self.ids[position]
        every: tuple[DocumentWords, ...] | None = built_value(
            self._snapshot, CONTEXT_INDEX, "words")
        if every is not None:  # a tuple's item: no cell or memo to look in
            return concept_id, every[position]
        return concept_id, concept_words(self._snapshot, concept_id)


@dataclass(frozen=True, slots=True)
class _Holders:
    """Every concept's words in the snapshot's order, stem → the positions of the concepts
    holding it in any field, and where each concept's sections are numbered in the snapshot
    (concept at position p: sections first_section[p] up to first_section[p + 1]).

    ``by_stem`` is None when the layout was read back from the parse cache: then
    :func:`stem_holders` builds it the first time a stem's part must be computed."""

    concepts: _ConceptWords
    by_stem: Mapping[str, array[int]] | None  # 2 or 4 bytes a holder (holder_code)
    first_section: array[int]
    owner: array[int]  # section number in the snapshot → its concept's position

    def place(self, section: int) -> tuple[int, int]:
        """A snapshot section number as (concept position, section number in the concept)."""
        position = self.owner[section]
        return position, section - self.first_section[position]


def _holders(snapshot: Snapshot, token: CancelToken) -> _Holders:
    """Built from every concept's words, or, when an earlier process on the same files kept
    the sections' layout (``model.revision_value``), from that alone: then no document is
    built for it, and the stems' holders wait for :func:`stem_holders`."""
    ids = tuple(snapshot.concepts)

    def read(kept: Any) -> _Holders | None:
        if not _is_layout(kept, len(ids)):
            return None
        first_section = array("i", kept)
        owner = array("i")
        for n in range(len(ids)):
            owner.extend(itertools.repeat(n, first_section[n + 1] - first_section[n]))
        return _Holders(_ConceptWords(ids, snapshot), None, first_section, owner)

    def build() -> _Holders:
        found: dict[str, array[int]] = {}
        first_section = array("i", (0,))
        owner = array("i")
        code = holder_code(len(ids))
        for n, words in enumerate(every_words(snapshot, token)):
            token.check()
            owner.extend(itertools.repeat(n, len(words.sections)))
            first_section.append(len(owner))
            _hold(found, words, n, code)
        return _Holders(_ConceptWords(ids, snapshot), _packed_and_kept(snapshot, found, code),
                        first_section, owner)

    return revision_value(snapshot, LAYOUT_NAME, read, build,
                          lambda index: index.first_section.tolist())


def _hold(found: dict[str, array[int]], words: DocumentWords, n: int, code: str) -> None:
    for word in words.vocabulary():
        held = found.get(word)
        if held is None:
            found[word] = array(code, (n,))
        else:
            held.append(n)


def _is_layout(value: Any, concepts: int) -> TypeGuard[list[int]]:
    """Whether a kept value read back is a layout of ``concepts`` concepts' sections."""
    return (isinstance(value, list) and len(value) == concepts + 1 and value[0] == 0
            and all(type(n) is int for n in value)
            and all(a <= b for a, b in itertools.pairwise(value)))


def stem_holders(snapshot: Snapshot, token: CancelToken) -> Mapping[str, array[int]]:
    """Stem → the positions of the concepts holding it (:attr:`_Holders.by_stem`), built from
    every concept's words when the layout was read back without them."""
    index = holders(snapshot, token)
    if index.by_stem is not None:
        return index.by_stem

    def build() -> Mapping[str, array[int]]:
        store = snapshot.inbound
        if store is not None:
            kept = _unpacked_stem_holders(store.stored_bytes(snapshot.revision, HOLDERS_NAME),
                                          len(index.concepts))
            if kept is not None:
                return kept
        found: dict[str, array[int]] = {}
        code = holder_code(len(index.concepts))
        for n, words in enumerate(every_words(snapshot, token)):
            token.check()
            _hold(found, words, n, code)
        return _packed_and_kept(snapshot, found, code)

    by_stem: Mapping[str, array[int]] = _index_part(snapshot, "stems", build, token)
    return by_stem


def _packed_and_kept(snapshot: Snapshot, found: dict[str, array[int]],
                     code: str) -> _PackedHolders:
    """The holders built from every concept's words, packed and kept for the next process."""
    by_stem = _PackedHolders.of(found, code)
    _keep_stem_holders(snapshot, by_stem)
    return by_stem


def _keep_stem_holders(snapshot: Snapshot, by_stem: _PackedHolders) -> None:
    """Keep the stems' holders for the next process, when this snapshot was loaded from the
    files (:attr:`~bundle_mcp.model.Snapshot.loaded`): the stems as JSON, each one's number of
    holders, then every holder, in the stems' order (5.5 MB at 9,978 concepts)."""
    store = snapshot.inbound
    if store is None or not snapshot.loaded:
        return
    names = json.dumps(list(by_stem), ensure_ascii=False, separators=(",", ":"))
    starts = by_stem.starts
    lengths = array("I", map(operator.sub, itertools.islice(starts, 1, None), starts))
    store.keep_bytes(snapshot.revision, HOLDERS_NAME, packed(
        [len(by_stem)], [array("B", names.encode("utf-8")), lengths, by_stem.positions]))


def _unpacked_stem_holders(data: bytes | None, concepts: int) -> _PackedHolders | None:
    """What :func:`_keep_stem_holders` kept, or ``None`` unless it reads back whole: distinct
    stems, each with at least one holder, each holder a concept (a stem's holders are written
    in increasing order: its first and last are checked, in C, not the 2.8 million between).
    The stems are interned: the context words read back name the same ones (``_context_words.
    unpacked_words``), and each is then held once."""
    found = None if data is None else unpacked(data, "BI" + holder_code(concepts))
    if found is None:
        return None
    (count,), arrays = found
    names, lengths, positions = cast("list[array[int]]", arrays)  # the typecodes asked for
    try:
        stems = json.loads(names.tobytes())
    except (UnicodeDecodeError, ValueError):
        return None
    if not (isinstance(stems, list) and len(stems) == count == len(lengths)
            and sum(lengths) == len(positions) and all(type(s) is str for s in stems)
            and (not lengths or min(lengths) > 0)):
        return None
    starts = array("L", itertools.accumulate(lengths, initial=0))
    index = dict(zip(map(sys.intern, stems), range(count), strict=True))
    firsts = map(positions.__getitem__, starts[:-1])
    lasts = map(positions.__getitem__, map(operator.sub, starts[1:], itertools.repeat(1)))
    if len(index) != count or (count and (min(firsts) < 0 or max(lasts) >= concepts)):
        return None
    return _PackedHolders(index, starts, positions)


class _PackedHolders(Mapping[str, "array[int]"]):
    """Stem → the positions of the concepts holding it, every stem's holders one after the
    other in one array: a stem's slice is made when asked for (a question asks a few of
    50,000 stems). Built ones are packed the same way as those read back: an array object a
    stem (49,784 at 9,978 concepts, each with its own allocation and spare room) held 3.5 MiB
    more, and keeping them for the next process made a second copy of every holder."""

    __slots__ = ("_index", "starts", "positions")

    def __init__(self, index: dict[str, int], starts: array[int], positions: array[int]) -> None:
        self._index = index  # stem → its number: its holders are positions[starts[n]:starts[n + 1]]
        self.starts = starts
        self.positions = positions

    @classmethod
    def of(cls, found: dict[str, array[int]], code: str) -> _PackedHolders:
        """``found``'s holders packed, in its stems' order (``code``: their array type)."""
        positions = array(code)
        starts = array("L", [0])
        for held in found.values():
            positions.extend(held)
            starts.append(len(positions))
        return cls(dict(zip(found, range(len(found)), strict=True)), starts, positions)

    def __getitem__(self, stem_: str) -> array[int]:
        n = self._index[stem_]
        return self.positions[self.starts[n]:self.starts[n + 1]]

    def __contains__(self, stem_: object) -> bool:
        return stem_ in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)


def holder_code(concepts: int) -> str:
    """The array type of a stem's holders: two bytes a holder while the positions fit (up to
    65,536 concepts; 2.9 million holders at 9,978 concepts), four past that."""
    return "H" if concepts <= 1 << 16 else "i"


def holders(snapshot: Snapshot, token: CancelToken) -> _Holders:
    found: _Holders = _index_part(snapshot, "holders", lambda: _holders(snapshot, token), token)
    return found


_WEIGHTS = tuple(FIELD_WEIGHT[field] for field in FIELDS)
_B = tuple(FIELD_B[field] for field in FIELDS)


@dataclass(frozen=True, slots=True)
class _Norms:
    """What a stem's scores need of each concept and section besides its counts, computed once
    per snapshot: each concept's length normalisation per field and of its title and
    description as one text, and each section's offset in its concept's body, its length
    normalisation and its junk factor (by snapshot section number)."""

    field: array[float]  # 4 a concept, in FIELDS order
    label: array[float]
    section_start: array[int]
    section: array[float]  # 0.0 for a heading with nothing under it (it never scores)
    junk: array[float]


def _norms(snapshot: Snapshot, token: CancelToken) -> _Norms:
    stats = totals(snapshot, token)
    field_avg = stats.field_avg
    label_avg = field_avg[0] + field_avg[1]
    section_avg = stats.section_avg
    field, label = array("d"), array("d")
    section_start, section, junk = array("i"), array("d"), array("d")
    for words in every_words(snapshot, token):
        token.check()
        lengths = words.lengths
        field.extend(1 - _B[f] + _B[f] * (lengths[f] / field_avg[f]) for f in range(4))
        label.append(K1 * (1 - LABEL_B + LABEL_B * (lengths[0] + lengths[1]) / label_avg))
        for start, length, heading_length, share in words.sections.scoring():
            section_start.append(start)
            section.append(
                SECTION_K1 * (1 - SECTION_B + SECTION_B * length / section_avg)
                if length > heading_length else 0.0)
            junk.append(1.0 - JUNK_DISCOUNT * share)
    return _Norms(field, label, section_start, section, junk)


def norms(snapshot: Snapshot, token: CancelToken) -> _Norms:
    found: _Norms = _index_part(snapshot, "norms", lambda: _kept_norms(snapshot, token), token)
    return found


def _kept_whole(snapshot: Snapshot, name: str, read: Callable[[bytes | None], _T | None],
                make: Callable[[], _T | None],
                pack: Callable[[_T], bytes | Iterable[bytes]]) -> _T | None:
    """What an earlier process on the same files kept under ``name`` (``read`` of its bytes,
    ``None`` when there are none or they do not fit), else ``make()``, kept for the next
    process when this snapshot was loaded from the files (``model.revision_value`` for
    bytes: a changed snapshot's whole values are not written again)."""
    store = snapshot.inbound
    if store is not None:
        kept = read(store.stored_bytes(snapshot.revision, name))
        if kept is not None:
            return kept
    made = make()
    if made is not None and store is not None and snapshot.loaded:
        store.keep_bytes(snapshot.revision, name, pack(made))
    return made


def _kept_norms(snapshot: Snapshot, token: CancelToken) -> _Norms:
    """:func:`_norms`, or what an earlier process on the same files kept of them (read back,
    no concept's words are read for them); kept for the next process when made."""
    index = holders(snapshot, token)
    found = _kept_whole(
        snapshot, NORMS_NAME,
        lambda data: _unpacked_norms(data, len(index.concepts), len(index.owner)),
        lambda: _norms(snapshot, token),
        lambda made: packed([], [made.field, made.label, made.section_start, made.section,
                                 made.junk]))
    assert found is not None  # _norms always makes them
    return found


def _unpacked_norms(data: bytes | None, concepts: int, sections: int) -> _Norms | None:
    """What :func:`_kept_norms` kept, when its arrays have this snapshot's sizes."""
    found = None if data is None else unpacked(data, "ddidd")
    if found is None:
        return None
    field, label, section_start, section, junk = cast("list[Any]", found[1])
    if not (len(field) == 4 * concepts and len(label) == concepts
            and len(section_start) == len(section) == len(junk) == sections):
        return None
    return _Norms(field, label, section_start, section, junk)


def _term_scores(snapshot: Snapshot, term: str, token: CancelToken) -> TermScores:
    """The stem's part of each score (:func:`score` sums them), from the snapshot's columns
    (:func:`_column_term_scores`) when it has them, else holder by holder."""
    held = stem_holders(snapshot, token).get(term, ())
    # A rare stem is looped over its holders' words while every concept's are held; before
    # that (a restart read the columns back, and no concept's words) the columns serve it too,
    # a few milliseconds where the loop would read every concept's words first.
    words_held = built_value(snapshot, CONTEXT_INDEX, "words") is not None
    if not words_held or len(held) * COLUMNS_FROM_SHARE >= len(snapshot.concepts):
        found = columns(snapshot, token)
        # After the columns: read back, they number the stems they hold in this process.
        code = narrow_code(term)
        part = None if found is None or code is None else _column_term_scores(
            snapshot, term, token, found, code)
        if part is not None:
            return part
    return _looped_term_scores(snapshot, term, token)


def _looped_term_scores(snapshot: Snapshot, term: str, token: CancelToken) -> TermScores:
    """The stem's part of each score (:func:`score` sums them): a concept's BM25F over its
    four fields, the BM25 of its title and description as one text, and each section's BM25
    (less for a section of links, tables or code). Each holder is read once, in C as far as
    can be: its short fields counted, its body searched once, each find placed in its section
    by bisection over the sections' offsets."""
    index = holders(snapshot, token)
    stats = totals(snapshot, token)
    norm = norms(snapshot, token)
    field_norm, label_norm = norm.field, norm.label
    starts, section_norm, junk = norm.section_start, norm.section, norm.junk
    held = stem_holders(snapshot, token).get(term, array("i"))
    # The norms were made from them. A stem no concept holds (a question's word the bundle
    # never uses) reads none: its part is empty.
    every = every_words(snapshot, token) if held else ()
    doc_idf = _idf(stats.concepts, len(held))
    first_section = index.first_section
    w0, w1, w2, w3 = _WEIGHTS
    concept = array("d")
    label_positions, label = array("i"), array("d")
    described, headed = array("i"), array("i")
    # Sections that count: their snapshot numbers and tf (their idf needs them all first).
    counted, counted_tf = array("i"), array("i")
    holding = 0  # sections whose text holds the stem, heading-only ones included
    narrow = narrow_code(term)  # the stem's code in every narrow document (nearly all)
    bisect_right = bisect.bisect_right
    for n in held:
        token.check()
        words = every[n]
        width = words.width
        code = narrow if width == 1 else words.code(term)
        if code is None:  # a holder has the stem: never so, but no find can be made up
            raise RuntimeError(f"a holder of {term!r} has no code for it")
        first = first_section[n]
        last = first_section[n + 1]
        hits = []  # the section of each find in the body, in order
        if width == 1:  # one character a stem: every find counts (the wide loop, inlined)
            title, description, headings = (words.title.count(code),
                                            words.description.count(code),
                                            words.headings.count(code))
            find = words.body.find
            at = find(code)
            while at >= 0:
                hits.append(bisect_right(starts, at, first, last) - 1)
                at = find(code, at + 1)
        else:
            title, description, headings = (count_in(words.title, code, width),
                                            count_in(words.description, code, width),
                                            count_in(words.headings, code, width))
            for at in finds(words.body, code, width):
                hits.append(bisect_right(starts, at, first, last) - 1)
        if hits:
            sections = words.sections
            for g in dict.fromkeys(hits):
                holding += 1
                if section_norm[g]:
                    counted.append(g)
                    tf = hits.count(g)
                    if headings:  # else no heading holds it: ``headings`` is every heading
                        # The heading line is in the text: its words count HEADING_WEIGHT times.
                        tf += (HEADING_WEIGHT - 1) * count_in(
                            sections.heading_words(g - first), code, width)
                    counted_tf.append(tf)
        body = len(hits)
        # The same sums, in the same order, as the BM25F formula field by field.
        pseudo = 0.0
        at = 4 * n
        if title:
            pseudo += w0 * title / field_norm[at]
        if description:
            pseudo += w1 * description / field_norm[at + 1]
        if headings:
            pseudo += w2 * headings / field_norm[at + 2]
        if body:
            pseudo += w3 * body / field_norm[at + 3]
        concept.append(doc_idf * pseudo / (K1 + pseudo))
        label_tf = title + description
        if label_tf:
            label_positions.append(n)
            label.append(doc_idf * label_tf * (K1 + 1) / (label_tf + label_norm[n]))
        if description:
            described.append(n)
        if headings:
            table = words.sections
            headed.extend(first + k for k in range(len(table))
                          if holds(table.heading_words(k), code, width))
    section_idf = _idf(stats.sections, holding)
    return TermScores(
        len(held), array("i", held), concept, label_positions, label, counted,
        array("d", [section_idf * tf * (SECTION_K1 + 1) / (tf + section_norm[g]) * junk[g]
                    for g, tf in zip(counted, counted_tf, strict=True)]),
        described, headed,
    )


@dataclass(frozen=True, slots=True)
class _Columns:
    """Every concept's coded fields end to end, one numpy ``uint16`` array a field, a unit a
    character (a narrow document's stem is one), with where each concept's title and
    description and each section's heading and words start in them: what lets
    :func:`_column_term_scores` find a stem in every holder at once, in C, instead of a
    holder at a time. A code past U+FFFF (a stem numbered from 63,488) is :data:`_PAST_PLANE`
    there, a surrogate no code is: such a stem is looped (:func:`_looped_term_scores`).

    Made only when every document is narrow: else ``None``, and every stem is looped."""

    title: Any  # numpy.ndarray of uint16: every concept's title codes, in order
    title_start: Any  # int64, one a concept: where its title starts in ``title``
    description: Any
    description_start: Any
    headings: Any
    heading_start: Any  # int64, one a section (snapshot number): where its heading starts
    body: Any
    section_start: Any  # int64, one a section: where its words start in ``body``
    owner: Any  # int32 view of _Holders.owner: a section's concept
    # Read back: which of this process's stem numbers the columns code (a bool array by
    # number; the writer's stems coded below U+10000). None when made here: every stem the
    # process numbers below 0xF800 (a code below U+10000) is in them.
    coded: Any = None

    def value(self, code: str) -> int | None:
        """The unit that stands for the stem of ``code`` (its narrow code) in the columns, or
        ``None`` when they cannot tell it (coded past U+FFFF, or unknown to the process that
        kept them): its part is then looped."""
        point = ord(code)
        if point >= 0x10000:
            return None
        if self.coded is not None:
            number = single_number(code)
            if number >= len(self.coded) or not self.coded[number]:
                return None
        return point


def _columns(snapshot: Snapshot, token: CancelToken) -> _Columns | None:
    """:class:`_Columns` of the snapshot, or ``None`` (a wide document): read back when an
    earlier process on the same files kept them (views of the bytes read: no copy, and no
    concept's words read), else made from every concept's words and kept for the next
    process."""
    index = holders(snapshot, token)
    return _kept_whole(
        snapshot, COLUMNS_NAME,
        lambda data: _unpacked_columns(data, len(index.concepts), index.owner),
        lambda: _made_columns(snapshot, token), _packed_columns)


@dataclass(frozen=True, slots=True)
class LabelCodes:
    """Every concept's coded title and description and every section's coded heading, from
    the columns (:class:`_Columns`) as text: what context weighs a heading or a description
    that says what was asked by, without reading the concept's words (a restarted server holds
    none until its warm-up reads them, and a stem common in headings read a thousand
    concepts'). The same characters the concepts' words hold; ``None`` for a field holding a
    code past U+FFFF (the columns' marker), whose words are read instead."""

    titles: str
    title_start: array[int]
    descriptions: str
    description_start: array[int]
    headings: str
    heading_start: array[int]  # by snapshot section number
    # By concept position (numpy int64 arrays): how many distinct codes its description
    # holds, and how many of them are not a stop word's; and the positions whose description
    # holds a code past U+FFFF (the columns' marker), which these do not count.
    description_distinct: Any
    description_content: Any
    description_marked: frozenset[int]
    # The same by snapshot section number for its heading, with ``heading_free``: how many
    # of its non-stop codes its page's title does not hold (what a heading is weighed over,
    # read under its title). ``title_pairs``: every title's distinct (position << 16 | code),
    # sorted; ``section_owner``: each section's concept position (the columns' int32 view
    # of it). A section whose heading or page title holds the marker is in ``heading_marked``.
    heading_distinct: Any
    heading_content: Any
    heading_free: Any
    heading_marked: frozenset[int]
    title_pairs: Any
    section_owner: Any

    def title(self, position: int) -> str | None:
        return _field_codes(self.titles, self.title_start, position)

    def description(self, position: int) -> str | None:
        return _field_codes(self.descriptions, self.description_start, position)

    def heading(self, section: int) -> str | None:
        """The heading's codes of snapshot section ``section``: the headings field holds every
        section's heading codes end to end, in order (``SectionTable``)."""
        return _field_codes(self.headings, self.heading_start, section)


_MARKER = chr(_PAST_PLANE)


def _field_codes(text: str, starts: array[int], n: int) -> str | None:
    end = starts[n + 1] if n + 1 < len(starts) else len(text)
    codes = text[starts[n]:end]
    return None if _MARKER in codes else codes


def label_codes(snapshot: Snapshot, token: CancelToken) -> LabelCodes | None:
    """:class:`LabelCodes` of the snapshot (made once), ``None`` without columns (a wide
    document)."""
    found: LabelCodes | None = _index_part(snapshot, "labels",
                                           lambda: _label_codes(snapshot, token), token)
    return found


def _label_codes(snapshot: Snapshot, token: CancelToken) -> LabelCodes | None:
    found = columns(snapshot, token)
    if found is None:
        return None

    def text(units: Any) -> str:
        # No unit is a surrogate but the marker (codes skip them), so none pairs with another.
        decoded: str = units.astype("<u2", copy=False).tobytes().decode("utf-16-le",
                                                                          "surrogatepass")
        return decoded

    def starts(values: Any) -> array[int]:
        kept = array("q")
        kept.frombytes(values.astype("=i8", copy=False).tobytes())
        return kept

    import numpy

    stop = numpy.array(sorted(ord(c) for c in map(narrow_code, stop_stems()) if c is not None),
                       dtype=numpy.int64)
    concepts, sections = len(found.title_start), len(found.heading_start)
    # Descriptions: their distinct codes, those that are not a stop word's.
    owners, codes = _distinct_pairs(found.description, found.description_start)
    content = ~numpy.isin(codes, stop)
    description_marked = frozenset(numpy.unique(owners[codes == _PAST_PLANE]).tolist())
    # Headings, and which of their codes their page's title holds.
    title_pairs = _keys(*_distinct_pairs(found.title, found.title_start))
    titles_marked = numpy.bincount(
        title_pairs[(title_pairs & 0xFFFF) == _PAST_PLANE] >> 16, minlength=concepts) > 0
    numbers, heading_codes = _distinct_pairs(found.headings, found.heading_start)
    heading_content = ~numpy.isin(heading_codes, stop)
    free = heading_content & ~_among(
        title_pairs, _keys(found.owner[numbers].astype(numpy.int64), heading_codes))
    heading_marked = numpy.bincount(numbers[heading_codes == _PAST_PLANE], minlength=sections) > 0
    heading_marked |= titles_marked[found.owner]
    return LabelCodes(text(found.title), starts(found.title_start),
                      text(found.description), starts(found.description_start),
                      text(found.headings), starts(found.heading_start),
                      _counts(owners, concepts), _counts(owners[content], concepts),
                      description_marked,
                      _counts(numbers, sections), _counts(numbers[heading_content], sections),
                      _counts(numbers[free], sections),
                      frozenset(numpy.flatnonzero(heading_marked).tolist()), title_pairs,
                      found.owner)


def _distinct_pairs(units: Any, starts: Any) -> tuple[Any, Any]:
    """For :class:`LabelCodes`: the distinct (field, code) pairs of a column whose fields
    start at ``starts`` (one a concept, or a section), sorted, as two int64 arrays. One sort
    of every pair: a question then reads counts, where it made a set of each field holding
    one of its stems (thousands at 50,000 concepts). ``numpy.unique`` took 12-20 ms here for
    the descriptions at 9,978 concepts, the sort and a mask of changes 0.6 ms."""
    import numpy

    lengths = numpy.diff(numpy.append(starts, len(units)))
    fields = numpy.repeat(numpy.arange(len(starts), dtype=numpy.int64), lengths)
    pairs = numpy.sort(_keys(fields, units.astype(numpy.int64)))
    if len(pairs):
        pairs = pairs[numpy.concatenate(([True], pairs[1:] != pairs[:-1]))]
    return pairs >> 16, pairs & 0xFFFF


def _keys(fields: Any, codes: Any) -> Any:
    """(field << 16 | code): a pair as one int64 (a code is a UTF-16 unit)."""
    return (fields << 16) | codes


def _among(ordered: Any, values: Any) -> Any:
    """Whether each of ``values`` is in ``ordered`` (sorted int64 keys)."""
    import numpy

    if not len(ordered):
        return numpy.zeros(len(values), dtype=bool)
    at = numpy.minimum(numpy.searchsorted(ordered, values), len(ordered) - 1)
    found: Any = ordered[at] == values
    return found


def _counts(fields: Any, size: int) -> Any:
    """How many pairs each field has, for ``size`` fields (int32: a field's distinct codes)."""
    import numpy

    return numpy.bincount(fields, minlength=size).astype(numpy.int32)


def title_holds(labels: LabelCodes, positions: Any, code: str) -> Any:
    """Whether the title of each concept at ``positions`` (numpy int64) holds ``code``."""
    return _among(labels.title_pairs, _keys(positions, ord(code)))


def _packed_columns(found: _Columns) -> Iterator[bytes]:
    """The columns as kept: a header (the magic, each array's length, the length of the stems
    list), then each array's little-endian bytes, a piece of at most :data:`_COLUMN_PIECE`
    items at a time (made by the thread that writes them: the whole is never copied at once),
    then this process's stems by number, as JSON, as far as a code below U+10000 goes: the
    units are codes of this process's numbering, which the reader's may not be."""
    arrays = [getattr(found, name).astype(kind, copy=False) for name, kind in _COLUMN_ARRAYS]
    stems = json.dumps(list(_context_words.CODES.stems(range(
        min(len(_context_words.CODES), _NARROW_NUMBERS)))), ensure_ascii=False,
        separators=(",", ":")).encode("utf-8")
    yield _COLUMNS_MAGIC + b"".join(
        len(values).to_bytes(8, "little") for values in (*arrays, stems))
    for values in arrays:
        for start in range(0, len(values), _COLUMN_PIECE):
            yield values[start:start + _COLUMN_PIECE].tobytes()
    yield stems


def _unpacked_columns(data: bytes | None, concepts: int, owner: array[int]) -> _Columns | None:
    """What :func:`_packed_columns` kept, as read-only views of ``data``; ``None`` unless the
    sizes are this snapshot's and every start lies in its field, in order (a damaged part is
    made again)."""
    if data is None or not data.startswith(_COLUMNS_MAGIC):
        return None
    import numpy

    head = len(_COLUMNS_MAGIC)
    at = head + 8 * (len(_COLUMN_ARRAYS) + 1)
    if len(data) < at:
        return None
    counts = [int.from_bytes(data[head + 8 * n:head + 8 * n + 8], "little")
              for n in range(len(_COLUMN_ARRAYS) + 1)]
    views: list[Any] = []
    for count, (_, kind) in zip(counts, _COLUMN_ARRAYS, strict=False):
        size = numpy.dtype(kind).itemsize * count
        if at + size > len(data):
            return None
        views.append(numpy.frombuffer(data, dtype=kind, count=count, offset=at))
        at += size
    if at + counts[-1] != len(data):
        return None
    try:
        stems = json.loads(data[at:])
    except (UnicodeDecodeError, ValueError):
        return None
    if not (isinstance(stems, list) and len(stems) <= _NARROW_NUMBERS
            and all(type(s) is str for s in stems)):
        return None
    numbered = _renumbered(views, stems)
    if numbered is None:
        return None
    views, coded = numbered
    title, title_start, description, description_start, headings, heading_start, body, \
        section_start = views
    sections = len(owner)
    for starts, field, count in ((title_start, title, concepts),
                                 (description_start, description, concepts),
                                 (heading_start, headings, sections),
                                 (section_start, body, sections)):
        if len(starts) != count:
            return None
        if count and (starts[0] < 0 or starts[-1] > len(field)
                      or bool(numpy.any(starts[1:] < starts[:-1]))):
            return None
    return _Columns(title, title_start, description, description_start, headings,
                    heading_start, body, section_start,
                    numpy.frombuffer(owner, dtype=numpy.int32), coded)


def _renumbered(views: list[Any], stems: list[str]) -> tuple[list[Any], Any] | None:
    """The kept columns' units (``views``, in the writer's numbering of ``stems``) in this
    process's, and which of this process's numbers they code; ``None`` for a list that names
    a stem twice. The stems are numbered here first (:meth:`StemCodes.numbers`): a restarted
    process numbers them as the writer did, unless it met other stems first, and then the
    columns stay views of the bytes read; otherwise each code field is mapped through a
    table, in C (a copy of each)."""
    import numpy

    numbers = _context_words.CODES.numbers(stems)
    if len(numbers) != len(stems):
        return None
    mine = numpy.fromiter(numbers.values(), dtype=numpy.int64, count=len(stems))
    coded = numpy.zeros(max(len(_context_words.CODES), 1), dtype=bool)
    # A stem is in the columns when the writer coded it below U+10000 (every one listed) and
    # this process does too: else its units are the marker, or another stem's code.
    coded[mine[mine < _NARROW_NUMBERS]] = True
    if numpy.array_equal(mine, numpy.arange(len(stems))):
        return views, coded
    table = numpy.full(0x10000, _PAST_PLANE, dtype=numpy.uint16)
    theirs = numpy.arange(len(stems), dtype=numpy.int64)
    table[_narrow_points(theirs)] = numpy.where(mine < _NARROW_NUMBERS, _narrow_points(mine),
                                                _PAST_PLANE)
    mapped = list(views)
    for n, (name, _) in enumerate(_COLUMN_ARRAYS):
        if not name.endswith("_start"):
            mapped[n] = table[views[n]]
    return mapped, coded


def _narrow_points(numbers: Any) -> Any:
    """The code points of stem numbers below :data:`_NARROW_NUMBERS` (numpy)."""
    import numpy

    return numpy.where(numbers < 0xD800, numbers, numbers + 0x800)


def _made_columns(snapshot: Snapshot, token: CancelToken) -> _Columns | None:
    """:class:`_Columns` made from every concept's words, or ``None`` (a wide document).
    15.3 MiB at 9,978 concepts of the bench bundle, made in about 60 ms."""
    import numpy  # the numeric path: imported by its first question

    every = every_words(snapshot, token)
    index = holders(snapshot, token)
    if any(words.width != 1 for words in every):
        return None
    fields: list[Any] = []
    starts: list[Any] = []
    for name in ("title", "description", "headings", "body"):
        texts = [getattr(words, name) for words in every]
        at = numpy.cumsum([0, *map(len, texts)], dtype=numpy.int64)
        fields.append(_joined(texts, at, token))
        starts.append(at)
    token.check()
    owner = numpy.frombuffer(index.owner, dtype=numpy.int32)
    offsets = [words.sections.offsets() for words in every]
    body_at = numpy.frombuffer(b"".join(o[0].tobytes() for o in offsets), dtype=numpy.int32)
    heading_at = numpy.frombuffer(b"".join(o[1].tobytes() for o in offsets), dtype=numpy.int32)
    if len(body_at) != len(owner):  # the layout is of these words: never so
        raise RuntimeError("the sections' layout does not match the words")
    # Each section's offsets in its document, moved by where its document starts.
    return _Columns(fields[0], starts[0][:-1], fields[1], starts[1][:-1], fields[2],
                    heading_at + starts[2][:-1][owner], fields[3],
                    body_at + starts[3][:-1][owner], owner)


def _joined(texts: list[str], at: Any, token: CancelToken) -> Any:
    """``texts`` end to end, a ``uint16`` a character (``at``: where each starts), a code past
    U+FFFF made :data:`_PAST_PLANE`. A group of texts at a time, checking between (a call may
    be waiting on the warm-up), into one array: no second copy of the whole field, even for a
    moment (UTF-32 for a group only: four bytes a character, each one code point)."""
    import numpy

    units = numpy.empty(int(at[-1]), dtype=numpy.uint16)
    for first in range(0, len(texts), COLUMNS_GROUP):
        token.check()
        last = min(first + COLUMNS_GROUP, len(texts))
        points = numpy.frombuffer(
            "".join(texts[first:last]).encode("utf-32-le"), dtype=numpy.uint32)
        units[at[first]:at[last]] = numpy.where(points < 0x10000, points, _PAST_PLANE)
    return units


def columns(snapshot: Snapshot, token: CancelToken) -> _Columns | None:
    found: _Columns | None = _index_part(snapshot, "columns",
                                         lambda: _columns(snapshot, token), token)
    return found


def _column_term_scores(snapshot: Snapshot, term: str, token: CancelToken,
                        found: _Columns, code: str) -> TermScores | None:
    """:func:`_looped_term_scores`, every holder at once: the stem's finds in each field of
    every concept in one comparison, placed in their concepts and sections by
    ``searchsorted`` over where each starts, counted by ``bincount``. The same floats (each
    formula's operations in the same order on the same doubles: a field that does not hold
    the stem adds an exact 0.0 where the loop skipped it), the same arrays in the same order.
    ``None`` for a stem whose code is past U+FFFF (numbered from 63,488), and when the
    finds name a concept the stem's holders do not (never so: the holders were made from these
    words); the loop then decides."""
    import numpy  # the numeric path: imported by its first question

    index = holders(snapshot, token)
    stats = totals(snapshot, token)
    norm = norms(snapshot, token)
    held_array = stem_holders(snapshot, token).get(term, array("i"))
    held = numpy.frombuffer(held_array, dtype=held_array.typecode).astype(numpy.intp)
    concepts, value = len(index.concepts), found.value(code)
    if value is None:  # not in the columns (_PAST_PLANE, or unknown to them): looped
        return None

    def concept_counts(field: Any, starts: Any) -> Any:
        at = numpy.flatnonzero(field == value)
        return numpy.bincount(numpy.searchsorted(starts, at, "right") - 1,
                              minlength=concepts)

    def sections_of(field: Any, starts: Any) -> Any:
        return numpy.searchsorted(starts, numpy.flatnonzero(field == value), "right") - 1

    token.check()
    title = concept_counts(found.title, found.title_start)
    description = concept_counts(found.description, found.description_start)
    token.check()
    heading_sections = sections_of(found.headings, found.heading_start)
    headings = numpy.bincount(found.owner[heading_sections], minlength=concepts)
    token.check()
    body_sections = sections_of(found.body, found.section_start)
    body = numpy.bincount(found.owner[body_sections], minlength=concepts)
    token.check()
    holding = (title + description + headings + body) > 0
    if int(numpy.count_nonzero(holding)) != len(held) or not holding[held].all():
        return None
    field_norm = numpy.frombuffer(norm.field, dtype=numpy.float64).reshape(-1, 4)[held]
    t, d = title[held].astype(numpy.float64), description[held].astype(numpy.float64)
    h, b = headings[held].astype(numpy.float64), body[held].astype(numpy.float64)
    w0, w1, w2, w3 = _WEIGHTS
    doc_idf = _idf(stats.concepts, len(held))
    # Left to right as the loop adds (0.0 plus the first field that holds it is that field).
    pseudo = (w0 * t / field_norm[:, 0] + w1 * d / field_norm[:, 1]
              + w2 * h / field_norm[:, 2] + w3 * b / field_norm[:, 3])
    concept = doc_idf * pseudo / (K1 + pseudo)
    label_tf = t + d
    labelled = label_tf > 0
    label_norm = numpy.frombuffer(norm.label, dtype=numpy.float64)[held[labelled]]
    label = doc_idf * label_tf[labelled] * (K1 + 1) / (label_tf[labelled] + label_norm)
    # Finds are in order, so each section's are side by side: its tf is the run's length.
    sections, tf = _runs(body_sections)
    section_norm = numpy.frombuffer(norm.section, dtype=numpy.float64)
    scoring = section_norm[sections] != 0.0  # a heading with nothing under it never scores
    counted = sections[scoring]
    heading_tf = numpy.bincount(heading_sections, minlength=len(section_norm))[counted]
    tf = tf[scoring] + (HEADING_WEIGHT - 1) * heading_tf
    tf = tf.astype(numpy.float64)
    section_idf = _idf(stats.sections, len(sections))
    junk = numpy.frombuffer(norm.junk, dtype=numpy.float64)[counted]
    section = section_idf * tf * (SECTION_K1 + 1) / (tf + section_norm[counted]) * junk
    return TermScores(
        len(held), array("i", held_array), _doubles(concept), _ints(held[labelled]),
        _doubles(label), _ints(counted), _doubles(section), _ints(held[d > 0]),
        _ints(_runs(heading_sections)[0]))


def _runs(ordered: Any) -> tuple[Any, Any]:
    """The distinct values of ``ordered`` (a numpy array, never decreasing) and how many times
    each is there: ``numpy.unique(ordered, return_counts=True)`` without its sort or its hash
    table, which cost more than the finds themselves (a section's finds are side by side)."""
    import numpy

    if not len(ordered):
        return ordered, numpy.zeros(0, dtype=numpy.intp)
    starts = numpy.flatnonzero(numpy.concatenate(([True], ordered[1:] != ordered[:-1])))
    return ordered[starts], numpy.diff(numpy.append(starts, len(ordered)))


def _ints(values: Any) -> array[int]:
    import numpy

    return array("i", numpy.ascontiguousarray(values, dtype=numpy.intc).tobytes())


def _doubles(values: Any) -> array[float]:
    import numpy

    return array("d", numpy.ascontiguousarray(values, dtype=numpy.float64).tobytes())


def _index_part(snapshot: Snapshot, part: str, build: Callable[[], Any],
                token: CancelToken) -> Any:
    return of_snapshot(snapshot, CONTEXT_INDEX, build, part, check=token.check)


def term_scores(snapshot: Snapshot, term: str, token: CancelToken,
                parts: PartStore | None = None) -> TermScores:
    """The stem's part of the scores: kept with the snapshot once built, and with ``parts``
    kept in the parse cache under the snapshot's revision, so that a restarted server on the
    same files reads it back instead of searching every holder again."""
    cache: _TermCache = _index_part(snapshot, "terms", _TermCache, token)
    return cache.get(term, functools.partial(
        kept_or_computed, parts, snapshot.revision, f"{TERM_PART}/{term}",
        functools.partial(_term_scores, snapshot, term, token), _packed_term,
        functools.partial(_unpacked_term, snapshot, token)))


def _packed_term(part: TermScores) -> bytes:
    return packed((part.holders,), (part.positions, part.concept, part.label_positions,
                                    part.label, part.sections, part.section, part.described,
                                    part.headed))


def _unpacked_term(snapshot: Snapshot, token: CancelToken, data: bytes) -> TermScores | None:
    """A kept part, when its arrays are aligned and name concepts and sections this snapshot
    has (the row's revision says they are this snapshot's: this only refuses a damaged row)."""
    found = unpacked(data, "idididii")
    if found is None or len(found[0]) != 1:
        return None
    (count,), arrays = found
    positions, concept, label_positions, label, sections, section, described, headed = arrays
    index = holders(snapshot, token)
    concepts, section_count = len(index.concepts), len(index.owner)
    aligned = (count == len(positions) == len(concept)
               and len(label_positions) == len(label) and len(sections) == len(section))
    if not aligned or not all(
        _within(values, limit) for values, limit in (
            (positions, concepts), (label_positions, concepts), (described, concepts),
            (sections, section_count), (headed, section_count))):
        return None
    return TermScores(count, *arrays)  # type: ignore[arg-type]


def _within(values: array[int] | array[float], limit: int) -> bool:
    return not values or (min(values) >= 0 and max(values) < limit)


def totals(snapshot: Snapshot, token: CancelToken) -> _Totals:
    found: _Totals = _index_part(snapshot, "totals", lambda: _kept_totals(snapshot, token),
                                 token)
    return found


def _kept_totals(snapshot: Snapshot, token: CancelToken) -> _Totals:
    """:func:`_totals`, or the figures an earlier process on the same files kept for this
    revision (``model.revision_value``): then no document is built for them."""

    def read(kept: Any) -> _Totals | None:
        if (isinstance(kept, list) and len(kept) == 7 and kept[0] == len(snapshot.concepts)
                and all(type(n) is int for n in kept[:2])
                and all(type(x) is float for x in kept[2:])):
            return _Totals(kept[0], kept[1], (kept[2], kept[3], kept[4], kept[5]), kept[6])
        return None

    return revision_value(snapshot, TOTALS_NAME, read, lambda: _totals(snapshot, token),
                          lambda t: [t.concepts, t.sections, *t.field_avg, t.section_avg])


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True, slots=True)
class Scores:
    """A question's scores, summed over its stems (:class:`TermScores`): each concept's BM25F
    score, the BM25 of its title and description as one text, and each section's BM25 (a
    section scores when its text below the heading holds a stem). Dense, one entry a concept
    (by position) and a section (by snapshot number), 0.0 where no stem adds: every part a
    stem adds is positive (an idf, a term frequency and a junk factor of at least a half, all
    above zero), so 0.0 is exactly "holds none of the stems". :attr:`index` names them.

    Dense arrays, not dicts: a common stem's part names most of the bundle (45,000 of 50,000
    concepts and 95,000 of 300,000 sections for each stem of the bench's question), and adding
    it into an array costs a third of the time a dict took, its memory a fifth."""

    concept: array[float]
    label: array[float]
    section: array[float]
    described: frozenset[int]  # concepts whose description holds a question stem
    headed: frozenset[int]  # sections whose heading holds one (scoring or not)
    index: _Holders
    # Each stem's concepts whose description holds it, and its sections whose heading does,
    # in the order of the stems scored.
    described_by: tuple[array[int], ...] = ()
    headed_by: tuple[array[int], ...] = ()

    def concept_id(self, position: int) -> str:
        return self.index.concepts.ids[position]

    def words(self, position: int) -> DocumentWords:
        return self.index.concepts[position][1]

    def sections_of(self, position: int) -> dict[int, float]:
        """The concept's scoring sections: number in the concept → score."""
        first = self.index.first_section[position]
        last = self.index.first_section[position + 1]
        return {n: value for n, value in enumerate(self.section[first:last]) if value}

    def best_section(self) -> Any:
        """Each concept's best section score, by position (0.0 without a scoring section), a
        numpy float64 array.

        One ``maximum.reduceat`` over the concepts' runs of sections: the same values as the
        maximum of each run (a maximum is one of its floats, whatever the order), in C where a
        slice and a ``max`` a concept took 27 ms a question at 50,000 concepts."""
        import numpy  # the numeric path: imported by its first question

        layout = self.index.first_section
        first = numpy.frombuffer(layout, dtype=layout.typecode)
        if len(first) < 2:
            return numpy.zeros(0)
        # A sentinel past the last section: a start at the end (a last concept without a
        # section) stays in range, and no score is below 0.0, so the last run's maximum holds.
        sections = numpy.append(numpy.frombuffer(self.section, dtype=numpy.float64), 0.0)
        best = numpy.maximum.reduceat(sections, first[:-1])
        # For an empty run reduceat gives the value at its start, its neighbour's first score.
        best[first[1:] == first[:-1]] = 0.0
        return best


def _added(total: array[float], keys: array[int], values: array[float]) -> None:
    """Adds a stem's part to the running sums, in the question's order of stems (the sums of
    floats are exactly those of adding each stem's part in turn: the first adds to 0.0).

    In numpy, on views of the arrays' own memory: a part names each key once (a concept or a
    section holds a stem once in it), so the scattered add makes one IEEE addition a key, as
    the loop over the pairs did, in C: that loop was about 45 ms of a 130 ms question at
    50,000 concepts."""
    if len(keys) != len(values):
        raise ValueError("a part's keys and values are not aligned")
    if not keys:
        return
    import numpy  # the numeric path: imported by its first question

    sums = numpy.frombuffer(total, dtype=numpy.float64)
    sums[numpy.frombuffer(keys, dtype=keys.typecode)] += numpy.frombuffer(values,
                                                                        dtype=numpy.float64)


def score(
    snapshot: Snapshot,
    terms: list[str],
    token: CancelToken,
    admitted: Collection[str] | None = None,
    parts: PartStore | None = None,
) -> Scores:
    """The scores of every concept holding any of the stems ``terms`` (distinct) in any field
    (only concepts ``admitted`` keeps, when given: the others score 0.0). Statistics are those
    of the whole bundle, whatever ``admitted`` keeps. ``parts``: where each stem's part is kept
    across restarts."""
    index = holders(snapshot, token)
    concept = _zeros(len(index.concepts))
    label = _zeros(len(index.concepts))
    section = _zeros(len(index.owner))
    described: set[int] = set()
    headed: set[int] = set()
    described_by: list[array[int]] = []
    headed_by: list[array[int]] = []
    for term in terms:
        token.check()
        part = term_scores(snapshot, term, token, parts)
        _added(concept, part.positions, part.concept)
        _added(label, part.label_positions, part.label)
        _added(section, part.sections, part.section)
        described.update(part.described)
        headed.update(part.headed)
        described_by.append(part.described)
        headed_by.append(part.headed)
    if admitted is not None:
        # 1.0 for a concept kept, 0.0 for the others: a score times 1.0 is itself, times 0.0
        # is 0.0 (no score is negative), and the products are made in C.
        kept = list(map(float, map(admitted.__contains__,
                                   index.concepts.ids)))
        concept = array("d", map(operator.mul, concept, kept))
        label = array("d", map(operator.mul, label, kept))
        section = array("d", map(operator.mul, section, map(kept.__getitem__, index.owner)))
        owner = index.owner
        described = {p for p in described if concept[p]}
        headed = {g for g in headed if concept[owner[g]]}
    return Scores(concept, label, section, frozenset(described), frozenset(headed), index,
                  tuple(described_by), tuple(headed_by))


def _zeros(count: int) -> array[float]:
    return array("d", bytes(8 * count))


def idfs(snapshot: Snapshot, terms: list[str], token: CancelToken,
         parts: PartStore | None = None) -> dict[str, float]:
    """Each stem's idf over concepts (the BM25F one)."""
    n = totals(snapshot, token).concepts
    return {t: _idf(n, term_scores(snapshot, t, token, parts).holders) for t in terms}


def phrases(snapshot: Snapshot, concept_id: str, pairs: list[tuple[str, str]]) -> int:
    """How many of the question's adjacent stem pairs occur side by side in the concept's
    title, description, headings or body."""
    words = concept_words(snapshot, concept_id)
    text = (words.title, words.description, words.headings, words.body)
    width = words.width
    found = 0
    for a, b in pairs:
        first, second = words.code(a), words.code(b)
        if first is not None and second is not None:
            run = first + second
            found += any(holds(field, run, width) for field in text)
    return found


# --------------------------------------------------------------------------------------------
# Copies


@dataclass(frozen=True, slots=True)
class CopyGroups:
    """Concept ID → the group of pages it is a copy of (the group's smallest ID), for concepts
    that have copies at all; and for each of them, how many pages the largest of its copy
    folders holds (the fullest copy of a set of versions is most likely the current one)."""

    group: dict[str, str]
    fullness: dict[str, int]
    # Concepts under a copy folder that is not the fullest of its family (an older release,
    # a partial translation), whether or not the page itself has a copy elsewhere.
    behind: frozenset[str] = frozenset()


def copy_groups(snapshot: Snapshot, token: CancelToken) -> CopyGroups:
    found: CopyGroups = _index_part(
        snapshot, "copies", lambda: _copy_groups(list(snapshot.concepts), token), token)
    return found


def _copy_groups(concept_ids: list[str], token: CancelToken) -> CopyGroups:
    """Pages at the same relative path under two folders that hold mostly the same relative
    paths: ``docs/cli/add`` and ``versioned_docs/version-9.x/cli/add`` when ``docs`` and
    ``versioned_docs/version-9.x`` share most of what lies below them. Found from the paths
    alone, so no list of version or language names is needed."""
    below: dict[str, set[str]] = {}  # folder → relative paths under it
    holders: dict[str, list[str]] = {}  # relative path → folders that hold it
    for cid in concept_ids:
        parts = cid.split("/")
        for cut in range(1, len(parts)):
            folder, rest = "/".join(parts[:cut]), "/".join(parts[cut:])
            below.setdefault(folder, set()).add(rest)
            holders.setdefault(rest, []).append(folder)
    shared: dict[tuple[str, str], int] = {}
    for folders in holders.values():
        token.check()
        if len(folders) < 2 or len(folders) > COPY_MAX_FOLDERS:
            continue
        ordered = sorted(folders)
        for i, a in enumerate(ordered):
            for b in ordered[i + 1:]:
                shared[(a, b)] = shared.get((a, b), 0) + 1
    parent: dict[str, str] = {}
    fullness: dict[str, int] = {}

    def root(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    family: dict[str, str] = {}  # copy folder -> its family (union-find over folders)

    def top(x: str) -> str:
        while family.get(x, x) != x:
            x = family[x]
        return x

    for (a, b), count in sorted(shared.items()):
        token.check()
        if count < COPY_MIN_SHARED or b.startswith(a + "/") or a.startswith(b + "/"):
            continue
        if count < COPY_MIN_SHARE * min(len(below[a]), len(below[b])):
            continue
        family.setdefault(a, a)
        family.setdefault(b, b)
        fa, fb = top(a), top(b)
        if fa != fb:
            family[max(fa, fb)] = min(fa, fb)
        for rest in below[a] & below[b]:
            first, second = f"{a}/{rest}", f"{b}/{rest}"
            fullness[first] = max(fullness.get(first, 0), len(below[a]))
            fullness[second] = max(fullness.get(second, 0), len(below[b]))
            x, y = root(first), root(second)
            if x != y:
                parent[max(x, y)] = min(x, y)
    largest: dict[str, int] = {}
    for folder in family:
        f = top(folder)
        largest[f] = max(largest.get(f, 0), len(below[folder]))
    behind = set()
    for cid in concept_ids:
        parts = cid.split("/")
        for cut in range(1, len(parts)):
            folder = "/".join(parts[:cut])
            if folder in family and len(below[folder]) < largest[top(folder)]:
                behind.add(cid)
                break
    return CopyGroups({cid: root(cid) for cid in sorted(fullness)}, fullness,
                      frozenset(behind))
