"""The index behind ``context``'s ranking: stemmed words by field, per document and section.

``search_sections`` keeps its own index (:mod:`._section_index`: exact folded words, AND, fixed
weights), pinned by its contract. ``context`` answers questions written the way people ask, so
it reads the bundle differently:

- words are folded as everywhere, then stemmed with the Snowball English stemmer
  (``threads`` and ``thread`` are one term);
- a concept is scored as a whole, BM25F-style, over four fields with their own weights and
  length normalisation: title, description, headings and the whole body
  (:func:`score_concepts`); each section is scored on its own (:func:`score_sections`), and a
  section made mostly of links, tables or code counts less (:attr:`SectionWords.junk`);
- copies count once: sections whose normalised text is the same share a digest, and pages at
  the same relative path under sibling folders that hold mostly the same relative paths
  (product versions, translations) share a copy group (:func:`copy_groups`).

Each document's stems are computed once and kept with the document (``CONTEXT_WORDS``, and in
the parse cache for the next process); the
bundle statistics, each queried stem's postings and the copy groups are kept with the snapshot
(``CONTEXT_INDEX``). The first call builds what it needs, later calls reuse it, and an edit to
one file rebuilds only that file's words and the snapshot-level parts. Everything is a function
of the bundle: no clock, no randomness, orderings end in IDs and line numbers.
"""

from __future__ import annotations

import bisect
import functools
import hashlib
import math
import re
import threading
from array import array
from collections import OrderedDict
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import snowballstemmer

from ..cancel import CancelToken
from ..derived import Codec, Slot, exactly, of_document, of_snapshot
from ..model import Document, Snapshot
from ..okf.names import concept_name
from ..okf.properties import text_field
from ._section_index import tokens, words_between

# BM25F over a concept's fields: (weight, length normalisation b). A title and a description
# name and sum up the page; headings outline it; the body is the evidence. Tuned on the tune
# half of the question set (docs/decisions/context-ranking.md).

def _warm_words(snapshot: Snapshot, token: CancelToken) -> None:
    for doc in snapshot.concepts.values():
        token.check()
        document_words(doc)


def _warm_index(snapshot: Snapshot, token: CancelToken) -> None:
    """The parts every question reads (postings are kept per queried stem, as asked)."""
    totals(snapshot, token)
    holders(snapshot, token)
    copy_groups(snapshot, token)


def _encode_words(words: DocumentWords) -> list[Any]:
    return [words.title, words.description, words.headings, words.body, list(words.lengths),
            [[s.heading, s.line_start, s.line_end, s.start, s.end, s.length, s.heading_words,
              s.heading_length, s.junk, s.digest] for s in words.sections]]


def _decode_words(value: Any) -> DocumentWords:
    title, description, headings, body, lengths, sections = value
    first, second, third, fourth = (exactly(int, n) for n in lengths)
    return DocumentWords(
        title=exactly(str, title), description=exactly(str, description),
        headings=exactly(str, headings), body=exactly(str, body),
        lengths=(first, second, third, fourth),
        sections=tuple(
            SectionWords(
                heading=exactly(str, heading), line_start=exactly(int, line_start),
                line_end=exactly(int, line_end), start=exactly(int, start),
                end=exactly(int, end), length=exactly(int, length),
                heading_words=exactly(str, heading_words),
                heading_length=exactly(int, heading_length), junk=exactly(float, junk),
                digest=exactly(str, digest),
            )
            for heading, line_start, line_end, start, end, length, heading_words,
            heading_length, junk, digest in sections
        ),
    )


CONTEXT_WORDS: Slot[DocumentWords] = Slot(
    "context_words", "document",
    "a document's stemmed words by field and section, for context's ranking; kept in the "
    "parse cache",
    _warm_words,
    Codec(1, _encode_words, _decode_words),
)
# One slot, several parts (the variant names the part: totals, holders, copies, postings), each
# of its own type: the accessors below (totals, holders, copy_groups, postings) type each part.
CONTEXT_INDEX: Slot[Any] = Slot(
    "context_index", "snapshot",
    "context's bundle statistics, queried stems' postings and copy groups, by part",
    _warm_index,
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
POSTINGS_KEPT = 512  # the per-snapshot cache of queried stems' postings (an LRU)

_SEP = "\x00"
_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)|<https?://[^>]*>|https?://\S+")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+")
_WORD_RUN = re.compile(r"\w+")


@functools.lru_cache(maxsize=1 << 18)
def stem(word: str) -> str:
    """The Snowball English stem of one folded word. Words with a digit (``c4700``, ``x64``)
    are names, kept as they are. A new stemmer per miss: the stemmer keeps state while it
    works, and the cache makes misses rare."""
    if not word.isalpha():
        return word
    stemmed: str = snowballstemmer.stemmer("english").stemWord(word)
    return stemmed


def stems(text: str) -> list[str]:
    """The stems of ``text``'s folded words, in order."""
    return [stem(w) for w in tokens(text)]


def _delimited(words: list[str]) -> str:
    return f"{_SEP}{(_SEP * 2).join(words)}{_SEP}" if words else ""


@dataclass(frozen=True, slots=True)
class SectionWords:
    """One non-blank section: where it is, its stems' offsets in the body string, and how much
    of it is prose."""

    heading: str
    line_start: int
    line_end: int
    start: int  # offsets of its stems in DocumentWords.body
    end: int
    length: int  # stems, heading line included
    heading_words: str  # SEP-delimited stems of the heading
    heading_length: int  # its stems
    junk: float  # the share of its lines that are links, table rows or code
    digest: str  # of the normalised text; "" when too short to be a copy of anything


@dataclass(frozen=True, slots=True)
class DocumentWords:
    title: str  # SEP-delimited stems of each field
    description: str
    headings: str
    body: str
    lengths: tuple[int, int, int, int]  # stems per field, in FIELDS order
    sections: tuple[SectionWords, ...]

    def vocabulary(self) -> set[str]:
        """Its distinct stems. Read from the fields when the snapshot's holders are built,
        not kept: a tuple per document cost about 22 MiB on a 9,978-concept bundle."""
        found: set[str] = set()
        for field in (self.title, self.description, self.headings, self.body):
            found.update(field.split(_SEP))
        found.discard("")
        return found


def document_words(doc: Document) -> DocumentWords:
    words: DocumentWords = of_document(doc, CONTEXT_WORDS, lambda: _build(doc))
    return words


def _build(doc: Document) -> DocumentWords:
    title_words = tokens(concept_name(doc))
    description_words = tokens(text_field(doc.fm, "description"))
    lines = doc.lines
    ascii_body = doc.body.isascii()
    body = doc.folded.body
    spans = []
    for section in doc.markdown.sections:
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
    heading_stems: list[str] = []
    body_parts: list[str] = []
    offset = length = 0
    sections = []
    for section, raw, words, heading, heading_words in spans:
        section_stems = list(map(get, words))
        heading_section = list(map(get, heading_words))
        heading_stems.extend(heading_section)
        part = _delimited(section_stems)
        body_parts.append(part)
        sections.append(
            SectionWords(heading, section.line_start, section.line_end, offset,
                         offset + len(part), len(section_stems), _delimited(heading_section),
                         len(heading_section), _junk(raw), _digest(part))
        )
        offset += len(part)
        length += len(section_stems)
    title = list(map(get, title_words))
    description = list(map(get, description_words))
    return DocumentWords(
        _delimited(title), _delimited(description), _delimited(heading_stems),
        "".join(body_parts), (len(title), len(description), len(heading_stems), length),
        tuple(sections),
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


def _digest(stems: str) -> str:
    """The digest of a section's normalised text (its stemmed words), or "" for a short one."""
    if len(stems) < MIN_COPY_CHARS:
        return ""
    return hashlib.sha256(stems.encode("utf-8")).hexdigest()[:32]


# --------------------------------------------------------------------------------------------
# Bundle statistics and postings


@dataclass(frozen=True, slots=True)
class _Totals:
    concepts: int
    sections: int
    field_avg: tuple[float, float, float, float]
    section_avg: float


@dataclass(frozen=True, slots=True)
class Posting:
    """One stem in one concept: its count in each field, and in each section that holds it
    ((section number, count in the text, count in the heading))."""

    concept_id: str
    position: int  # in the snapshot's concept order (_Holders.concepts)
    fields: tuple[int, int, int, int]
    sections: tuple[tuple[int, int, int], ...]


class _PostingCache:
    """The postings of recently queried stems, per snapshot (a bounded LRU): a pure function
    of the snapshot, so keeping them changes speed only."""

    def __init__(self, size: int = POSTINGS_KEPT) -> None:
        self._size = size
        self._entries: OrderedDict[str, tuple[Posting, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str, compute: Callable[[], tuple[Posting, ...]]) -> tuple[Posting, ...]:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
        value = compute()
        with self._lock:
            self._entries[key] = value
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        return value


def _totals(snapshot: Snapshot, token: CancelToken) -> _Totals:
    sums = [0, 0, 0, 0]
    sections = 0
    for doc in snapshot.concepts.values():
        token.check()
        words = document_words(doc)
        for n, value in enumerate(words.lengths):
            sums[n] += value
        sections += len(words.sections)
    concepts = len(snapshot.concepts)
    avg = tuple((s / concepts if concepts else 0.0) or 1.0 for s in sums)
    section_avg = (sums[3] / sections if sections else 0.0) or 1.0
    return _Totals(concepts, sections, (avg[0], avg[1], avg[2], avg[3]), section_avg)


@dataclass(frozen=True, slots=True)
class _Holders:
    """Every concept's words in the snapshot's order, and stem → the positions of the
    concepts holding it in any field."""

    concepts: tuple[tuple[str, DocumentWords], ...]
    by_stem: dict[str, array[int]]  # 4 bytes a holder, not a tuple's 8-byte pointer


def _holders(snapshot: Snapshot, token: CancelToken) -> _Holders:
    concepts = []
    found: dict[str, array[int]] = {}
    for n, (concept_id, doc) in enumerate(snapshot.concepts.items()):
        token.check()
        words = document_words(doc)
        concepts.append((concept_id, words))
        for word in words.vocabulary():
            held = found.get(word)
            if held is None:
                found[word] = array("i", (n,))
            else:
                held.append(n)
    return _Holders(tuple(concepts), found)


def holders(snapshot: Snapshot, token: CancelToken) -> _Holders:
    found: _Holders = _index_part(snapshot, "holders", lambda: _holders(snapshot, token), token)
    return found


def _postings(snapshot: Snapshot, term: str, token: CancelToken) -> tuple[Posting, ...]:
    needle = f"{_SEP}{term}{_SEP}"
    index = holders(snapshot, token)
    out = []
    for n in index.by_stem.get(term, ()):
        token.check()
        concept_id, words = index.concepts[n]
        counts = (words.title.count(needle), words.description.count(needle),
                  words.headings.count(needle), words.body.count(needle))
        found: list[tuple[int, int, int]] = []
        if counts[3]:
            starts = [s.start for s in words.sections]
            per: dict[int, int] = {}
            at = words.body.find(needle)
            while at >= 0:
                k = bisect.bisect_right(starts, at) - 1
                per[k] = per.get(k, 0) + 1
                at = words.body.find(needle, at + len(needle) - 1)
            for k in sorted(per):
                found.append((k, per[k], words.sections[k].heading_words.count(needle)))
        out.append(Posting(concept_id, n, counts, tuple(found)))
    return tuple(out)


def _index_part(snapshot: Snapshot, part: str, build: Callable[[], Any],
                token: CancelToken) -> Any:
    return of_snapshot(snapshot, CONTEXT_INDEX, build, part, check=token.check)


def postings(snapshot: Snapshot, term: str, token: CancelToken) -> tuple[Posting, ...]:
    cache: _PostingCache = _index_part(snapshot, "postings", _PostingCache, token)
    return cache.get(term, functools.partial(_postings, snapshot, term, token))


def totals(snapshot: Snapshot, token: CancelToken) -> _Totals:
    found: _Totals = _index_part(snapshot, "totals", lambda: _totals(snapshot, token), token)
    return found


def _idf(n: int, df: int) -> float:
    return math.log(1 + (n - df + 0.5) / (df + 0.5))


@dataclass(frozen=True, slots=True)
class Scored:
    """A concept's BM25F score and its matching sections' scores (section number → score)."""

    concept: float
    sections: dict[int, float]
    label: float  # BM25 of the title and description read as one short text


def score(
    snapshot: Snapshot,
    terms: list[str],
    token: CancelToken,
    admitted: Collection[str] | None = None,
) -> dict[str, Scored]:
    """Every concept holding any of the stems ``terms`` in any field: its BM25F score over
    title, description, headings and body, and the BM25 score of each section holding one
    (less for a section of links, tables or code). Statistics are those of the whole bundle,
    whatever ``admitted`` keeps."""
    stats = totals(snapshot, token)
    concepts = holders(snapshot, token).concepts
    out: dict[str, tuple[float, dict[int, float]]] = {}
    labels: dict[str, float] = {}
    label_avg = stats.field_avg[0] + stats.field_avg[1]
    for term in terms:
        found = postings(snapshot, term, token)
        doc_idf = _idf(stats.concepts, len(found))
        section_df = sum(len(p.sections) for p in found)
        section_idf = _idf(stats.sections, section_df)
        for p in found:
            token.check()
            if admitted is not None and p.concept_id not in admitted:
                continue
            words = concepts[p.position][1]
            pseudo = 0.0
            for n, tf in enumerate(p.fields):
                if tf:
                    field = FIELDS[n]
                    norm = 1 - FIELD_B[field] + FIELD_B[field] * (
                        words.lengths[n] / stats.field_avg[n])
                    pseudo += FIELD_WEIGHT[field] * tf / norm
            concept_score, section_scores = out.setdefault(p.concept_id, (0.0, {}))
            concept_score += doc_idf * pseudo / (K1 + pseudo)
            label_tf = p.fields[0] + p.fields[1]
            if label_tf:
                norm = K1 * (1 - LABEL_B + LABEL_B * (words.lengths[0] + words.lengths[1])
                             / label_avg)
                labels[p.concept_id] = (labels.get(p.concept_id, 0.0)
                                        + doc_idf * label_tf * (K1 + 1) / (label_tf + norm))
            for n, raw, heading in p.sections:
                section = words.sections[n]
                if section.length <= section.heading_length:
                    continue  # a heading with nothing under it: the concept speaks for it
                tf = raw + (HEADING_WEIGHT - 1) * heading  # the heading line is in the raw text
                norm = SECTION_K1 * (1 - SECTION_B + SECTION_B * section.length
                                     / stats.section_avg)
                value = (section_idf * tf * (SECTION_K1 + 1) / (tf + norm)
                         * (1.0 - JUNK_DISCOUNT * section.junk))
                section_scores[n] = section_scores.get(n, 0.0) + value
            out[p.concept_id] = (concept_score, section_scores)
    return {cid: Scored(c, s, labels.get(cid, 0.0)) for cid, (c, s) in out.items()}


def idfs(snapshot: Snapshot, terms: list[str], token: CancelToken) -> dict[str, float]:
    """Each stem's idf over concepts (the BM25F one)."""
    n = totals(snapshot, token).concepts
    return {t: _idf(n, len(postings(snapshot, t, token))) for t in terms}


def field_stems(field: str) -> frozenset[str]:
    """The distinct stems of a SEP-delimited field (a title, a heading)."""
    return frozenset(field.split(_SEP)) - {""}


def phrases(snapshot: Snapshot, concept_id: str, pairs: list[tuple[str, str]]) -> int:
    """How many of the question's adjacent stem pairs occur side by side in the concept's
    title, description, headings or body."""
    words = document_words(snapshot.concepts[concept_id])
    text = (words.title, words.description, words.headings, words.body)
    return sum(1 for a, b in pairs
               if any(f"{_SEP}{a}{_SEP}{_SEP}{b}{_SEP}" in field for field in text))


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
