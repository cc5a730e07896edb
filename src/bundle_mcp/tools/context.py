"""context: a question in, a ranked and budgeted pack of passages and concepts out.

It composes what the other read tools find one at a time: BM25 over sections with any of the
question's content words (:mod:`._section_index`), a small boost for concepts many others link
to, the one-hop neighbours of the best concepts (links and typed relations), and, on request,
the embedding ranks fused in (reciprocal rank fusion). Trust and freshness lower a concept's
rank and are flagged on its items; they never hide it. The pack is cut to ``max_tokens`` with
the estimate every budgeted tool uses (ceil(len(canonical JSON)/4) per item): an item that does
not fit is left out, or its text shortened when enough room remains, and later, smaller items
are still tried. Same snapshot and arguments, same bytes: no clock, no randomness, and every
ordering ends in IDs and line numbers.
"""

from __future__ import annotations

import heapq
import math
import re
from array import array
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from ..model import Snapshot
from ..okf.graph import INCOMING, clip, preview
from ..okf.properties import UNVERIFIED, text_field, valid_stale_after
from ..okf.sections import locator, span_text
from ..okf.temporal import Reference, reference_from
from ..toolspec import CallContext, ToolSpec
from ._common import MIB, invalid_field
from ._context_index import (
    STOPWORDS,
    CopyGroups,
    LabelCodes,
    Scores,
    concept_path,
    concept_words,
    copy_groups,
    idfs,
    label_codes,
    phrases,
    score,
    stem,
    stop_stems,
    title_holds,
)
from ._context_rank import dated_pages
from ._context_words import Card, DocumentWords, narrow_code
from ._extraction import token_cost
from ._filters import admitted_concepts, concept_filter_from
from ._hybrid import fused, semantic_ranks
from ._section_index import query_terms
from ._walk_params import clamped

NAME = "context"
DESCRIPTION = (
    "What do we know about X: the best passages and concepts for a question, packed under "
    "max_tokens. Stemmed BM25 over pages and sections, copies once (also_in), links around "
    "the best hits; stale or unverified rank lower and are flagged, never hidden. Cite "
    "parent_id; if truncated, call suggested_next. Exact words: search_sections."
)

DEFAULT_MAX_TOKENS = 2000
MIN_MAX_TOKENS = 256
MAX_MAX_TOKENS = 8000
MAX_ITEMS = 40  # a pack is a starting set; more belongs to the widening verbs
MAX_CANDIDATE_CONCEPTS = 60  # best-scoring concepts looked at before packing
SECTIONS_PER_CONCEPT = 3  # ... and each one's best sections
SECTION_SHARE = 0.25  # a concept's score: its BM25F score + this x its best section's score
PHRASE_BONUS = 0.1  # x (1 + this x the question's adjacent word pairs found side by side)
LABEL_SHARE = 0.5  # ... + this x the BM25 score of its title and description as one text
SECTION_ALONE = 0.5  # a section's item scores at least this x its own section score
MAX_STRONG_SECTIONS = 60  # the best sections by their own score that may stand on it
COPY_SCORE_RATIO = 0.8  # a copy is kept as another page only if that one scores this close
MAX_ALSO_IN = 8  # copies listed with the item kept for them
TOP_CONCEPTS_FOR_LINKS = 3  # the best concepts whose neighbours join the pack
NEIGHBOURS_PER_CONCEPT = 2
LINKED_FACTOR = 0.5  # a neighbour ranks at half its best-matching neighbour's score
NEXT_SECTION_FACTOR = 0.5  # each further section of one concept counts half the one before
CENTRALITY_WEIGHT = 0.05  # x (1 + 0.05 log2(1 + inbound edges)): hubs rise a little
TRUST_FACTOR = {"human-reviewed": 1.0, "machine-confirmed": 0.9, "unverified": 0.8}
STALE_FACTOR = 0.6
STATUS_FACTOR = {"deprecated": 0.7, "draft": 0.9}
MIN_TEXT_CHARS = 120  # below this a shortened text says too little to be worth its item
CONCEPT_TEXT_CHARS = 320  # a whole-concept item's text: its description or its body's start
SECTION_TEXT_CHARS = 2400  # the first item's section text before the budget cuts it further
LATER_TEXT_CHARS = 900  # ... and every later item's: the budget buys more distinct answers
SEMANTIC_WEIGHT = 0.5  # the embedding rank's weight in the fusion (the BM25 rank's is 1)
SEMANTIC_ONLY = 5  # of those, the best that join the pack without a matching section
SCORE_PLACES = 6
# A heading that says what was asked: a section scores x (1 + HEADING_BONUS x its match), a
# page x (1 + DESCRIPTION_BONUS x its description's match); a match is (share of the question's
# idf held)^MATCH_POWER x (share of the heading's own content words that are the question's),
# so only a heading or description that is nearly the question's words gains much.
HEADING_BONUS = 4.0
DESCRIPTION_BONUS = 1.0
MATCH_POWER = 8.0
# A page under a copy folder that is not the fullest of its family (an older release, a
# partial translation) ranks at this share: its advice may be out of date.
BEHIND_FACTOR = 0.75
# A page in a folder of dated posts (release notes, blog entries: :mod:`._context_rank`) ranks
# at this share: it says what changed one day, where a question asks how things are now. A
# section of one whose heading says what was asked (a match m, as for HEADING_BONUS) ranks at
# DATED_FACTOR + (1 - DATED_FACTOR) x m: asked by its own heading, a post is still found.
DATED_FACTOR = 0.5

# Contractions, with a straight or a typographic apostrophe: a negated auxiliary (don't, won't,
# can't), and a word with a clitic (project's, I'm, we'll, they've, I'd, you're).
_NEGATED = re.compile(r"\b\w+n['\u2019]t\b", re.IGNORECASE)
_CLITIC = re.compile(r"\b(\w+)['\u2019](?:s|re|ll|ve|d|m)\b", re.IGNORECASE)
_K = TypeVar("_K")


@dataclass(frozen=True, slots=True)
class _Candidate:
    """One item before packing: what it points at and how it ranks."""

    score: float
    concept_id: str
    line_start: int  # 0 for a whole-concept item
    line_end: int
    heading: str | None
    why: str  # match | linked | semantic
    via: tuple[str, str, str] | None  # (from concept, relationship, direction)
    digest: str = ""  # a section's normalised text, for copies ("" when too short)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    question = params["question"]
    if not question.strip():
        raise invalid_field("$.question", "question must contain a non-whitespace character")
    ref = reference_from(params)
    budget = clamped(params, "max_tokens", DEFAULT_MAX_TOKENS, MIN_MAX_TOKENS, MAX_MAX_TOKENS)
    terms = content_terms(query_terms(without_contractions(question)))
    concept_filter = concept_filter_from(snapshot, params, ref)
    admitted = (
        admitted_concepts(snapshot, concept_filter, ref, token)
        if concept_filter is not None
        else None
    )

    # Each concept holding a question word (stemmed) scores as a whole (BM25F over title,
    # description, headings and body) plus a share of its best section; its matching sections
    # become items at that score, each further one counting half the one before. A concept
    # whose sections hold none of the words (title or description only) is one whole-concept
    # item.
    stemmed = list(dict.fromkeys(stem(t) for t in terms))
    scores = score(snapshot, stemmed, token, admitted, call.parts) if stemmed else None
    heading_match: dict[tuple[str, int], float] = {}  # (concept, line_start) -> its match
    dated = dated_pages(snapshot, token)
    if scores is not None:
        scores, heading_match = _with_label_matches(
            scores, stemmed, idfs(snapshot, stemmed, token, call.parts),
            label_codes(snapshot, token), dated)
    sections_of: dict[str, dict[int, float]] = {}
    concept_score: dict[str, float] = {}
    if scores is not None:
        best_section = scores.best_section()
        # c + SECTION_SHARE * best + LABEL_SHARE * label for every concept, in numpy (each
        # operation one IEEE operation an element, in this order, as floats make it); 0.0 for
        # a concept holding no stem (its three parts are 0.0), above 0.0 for every other.
        by_position = (_floats(scores.concept) + best_section * SECTION_SHARE
                       + _floats(scores.label) * LABEL_SHARE)
        # Only the best concepts (ties by ID) are looked at again: the others are never
        # sorted, and their sections are not gathered.
        top = _best_positions(by_position, MAX_CANDIDATE_CONCEPTS,
                              lambda p: (-float(by_position[p]), scores.concept_id(p)))
        for p in top:
            token.check()
            concept_score[scores.concept_id(p)] = float(by_position[p])
            sections_of[scores.concept_id(p)] = scores.sections_of(p)
    order = list(concept_score)
    # Two question words side by side in a page ("binary caching") say more than apart.
    pairs = [(a, b) for a, b in zip(stemmed, stemmed[1:], strict=False)]
    if pairs and PHRASE_BONUS:
        for cid in order:
            concept_score[cid] *= 1.0 + PHRASE_BONUS * phrases(snapshot, cid, pairs)
        order.sort(key=lambda cid: (-concept_score[cid], cid))
    ranking, note = "bm25", None
    semantic_rank: dict[str, int] = {}
    if params.get("hybrid"):
        semantic_rank, note = semantic_ranks(call, question, admitted)
        if semantic_rank:
            ranking = "hybrid"

    # With embeddings, concepts are ranked by fusing their BM25 rank with their embedding
    # rank; a concept's items then score its fused score, scaled by its own BM25 score so that
    # its items keep their order.
    candidates: list[_Candidate] = []
    for rank, cid in enumerate(order, start=1):
        token.check()
        base = (
            fused((rank, semantic_rank.get(cid)), (1.0, SEMANTIC_WEIGHT))
            * (1.0 + math.log1p(concept_score[cid]))
            if semantic_rank
            else concept_score[cid]
        )
        sections = sections_of[cid]
        if not sections:
            candidates.append(_Candidate(base, cid, 0, 0, None, "match", None))
            continue
        words = concept_words(snapshot, cid)
        best = sorted(sections, key=lambda n: (-sections[n], n))[:SECTIONS_PER_CONCEPT]
        for nth, number in enumerate(best):
            section = words.sections[number]
            candidates.append(_Candidate(
                base * NEXT_SECTION_FACTOR**nth, cid, section.line_start, section.line_end,
                section.heading, "match", None, section.digest))
    if not semantic_rank and scores is not None:
        candidates = _with_strong_sections(scores, best_section, candidates)
    matched = {c.concept_id for c in candidates}
    for cid, rank in sorted(semantic_rank.items(), key=lambda kv: kv[1]):
        # Found by meaning alone: the whole concept, no passage.
        if rank <= SEMANTIC_ONLY and cid not in matched:
            candidates.append(
                _Candidate(fused((None, rank), (1.0, SEMANTIC_WEIGHT)), cid, 0, 0, None,
                           "semantic", None)
            )
    candidates.extend(_linked(snapshot, candidates, admitted, token))
    copies = copy_groups(snapshot, token)
    # One weight a concept (a concept's sections and its linked item share it).
    weight = {cid: _weight(snapshot, cid, ref) for cid in {c.concept_id for c in candidates}}
    weighted = [replace(c, score=round(
                    c.score * weight[c.concept_id]
                    * (BEHIND_FACTOR if c.concept_id in copies.behind else 1.0)
                    * (_dated_factor(heading_match.get((c.concept_id, c.line_start), 0.0))
                       if c.concept_id in dated else 1.0), SCORE_PLACES))
                for c in candidates]
    weighted.sort(key=lambda c: (-c.score, c.concept_id, c.line_start))
    ranked, also_in = _collapse_copies(weighted, copies, token)

    items, omitted, clipped_any, used = _pack(snapshot, ranked, also_in, budget, ref, token)
    truncated = omitted > 0 or clipped_any
    answer: dict[str, Any] = {
        "question": question,
        "terms": terms,
        "snapshot_revision": snapshot.revision,
        "as_of": ref.as_of,
        "temporal_profile": ref.profile,
        "ranking": ranking,
        "ranking_note": note,
        "max_tokens": budget,
        "tokens": used,
        "total": len({c.concept_id for c in ranked}),
        "omitted": omitted,
        "truncated": truncated,
        "suggested_next": _suggest_next(question, budget, ranked, items, truncated, params),
        "items": items,
    }
    if concept_filter is not None:
        answer["filters"] = concept_filter.echo()
    return answer


def _match(stems: frozenset[str], query: list[str], idf: Mapping[str, float],
           context: frozenset[str] = frozenset()) -> float:
    """How well a heading or a description says what was asked: the share of the question's
    idf it holds (to MATCH_POWER) times the share of its own content words that are the
    question's (1 when it is the question's words and nothing else). Stop words and the
    ``context`` words (a heading is read under its page's title) are not content."""
    if not stems:
        return 0.0
    total = sum(idf[t] for t in query)
    if total <= 0:
        return 0.0
    covered = sum(idf[t] for t in query if t in stems)
    if not covered:
        return 0.0
    stop = stop_stems()
    content = stems - stop - context or stems - stop or stems
    precision = len(content & set(query)) / len(content)
    return float((covered / total) ** MATCH_POWER * precision)


class _Matcher:
    """:func:`_match` for one question, over a field as its document codes it: in a narrow
    document (one character a stem, every document but one holding a stem numbered past a
    million) the distinct characters of the field are its distinct stems, so the sets are
    compared as characters, without decoding each stem (a common stem's question reads
    thousands of descriptions). The same sums in the same order: the same floats."""

    def __init__(self, query: list[str], idf: Mapping[str, float]) -> None:
        self._query, self._idf = query, idf
        self._total = sum(idf[t] for t in query)
        # Each question stem's code and idf, in the question's order (None: no document has
        # the stem, so no field holds it).
        self._coded = [(narrow_code(t), idf[t]) for t in query]
        self._codes = {code for code, _ in self._coded if code is not None}
        self._stop = {code for code in map(narrow_code, stop_stems()) if code is not None}

    def match(self, words: DocumentWords, field: str, context: str = "") -> float:
        """How well ``field`` (a coded field of ``words``, or a heading's) says what was asked,
        read under ``context`` (its page's coded title, for a heading)."""
        if words.width != 1:
            return _match(words.field_stems(field), self._query, self._idf,
                          words.field_stems(context))
        return self.match_codes(field, context)

    def match_codes(self, field: str, context: str = "") -> float:
        """:meth:`match` of a narrow document's field, given as its codes alone."""
        chars = set(field)
        if not chars or self._total <= 0:
            return 0.0
        covered = sum(value for code, value in self._coded if code is not None and code in chars)
        if not covered:
            return 0.0
        content = chars - self._stop - set(context) or chars - self._stop or chars
        precision = len(content & self._codes) / len(content)
        return float((covered / self._total) ** MATCH_POWER * precision)

    def heading_matches(self, sections: list[int], headed_by: Sequence[array[int]],
                        labels: LabelCodes) -> dict[int, float]:
        """:meth:`match_codes` of the headings of ``sections`` (snapshot numbers), each read
        under its page's title, from counts as :meth:`description_matches` makes them:
        ``headed_by``, each question stem's sections whose heading holds it, and ``labels``
        how many distinct codes a heading holds, how many are not a stop word's, and how
        many of those its page's title does not hold. The content a heading is weighed over
        is the last of those when it has any, else the second, else all its codes; the
        question's codes in it are counted the same way. A section whose heading or page
        title holds a code past U+FFFF is left out."""
        import numpy  # the numeric path: the columns are already its arrays

        if not sections:
            return {}
        if self._total <= 0:
            return dict.fromkeys(sections, 0.0)
        at = numpy.array(sections, dtype=numpy.intp)
        owner = labels.section_owner[at].astype(numpy.int64)
        covered = numpy.zeros(len(at))
        # The question's codes each heading holds: all, not a stop word's, and of those not
        # its page title's.
        any_held, content_held, free_held = (numpy.zeros(len(at), dtype=numpy.int64)
                                             for _ in range(3))
        for code, value, here in self._holding(at, headed_by, len(labels.heading_distinct)):
            covered[here] += value
            any_held[here] += 1
            if code not in self._stop:
                content_held[here] += 1
                free_held[here & ~title_holds(labels, owner, code)] += 1
        free = labels.heading_free[at]
        content = labels.heading_content[at]
        shared = numpy.where(free > 0, free_held,
                             numpy.where(content > 0, content_held, any_held))
        size = numpy.where(free > 0, free,
                           numpy.where(content > 0, content, labels.heading_distinct[at]))
        return self._matches(sections, covered, shared, size, labels.heading_marked)

    def _holding(self, at: Any, by_stem: Sequence[array[int]], size: int
                 ) -> Iterator[tuple[str, float, Any]]:
        """For each question stem with a code, in the question's order: the code, its idf and
        which of ``at`` (numpy positions among ``size``) hold it, ``by_stem`` being each
        stem's holders."""
        import numpy

        holds = numpy.zeros(size, dtype=bool)
        for (code, value), holders in zip(self._coded, by_stem, strict=True):
            if code is None:
                continue
            holds[:] = False
            holds[numpy.frombuffer(holders, dtype=holders.typecode)] = True
            yield code, value, holds[at]

    def _matches(self, keys: list[int], covered: Any, shared: Any, size: Any,
                 marked: AbstractSet[int]) -> dict[int, float]:
        """Each key's match from its covered idf and its content's counts, as
        :meth:`match_codes` makes it from the same values (the marked keys left out)."""
        total = self._total
        return {
            key: float((value / total) ** MATCH_POWER * (common / of)) if value else 0.0
            for key, value, common, of in zip(keys, covered.tolist(), shared.tolist(),
                                              size.tolist(), strict=True)
            if key not in marked
        }

    def description_matches(self, positions: list[int], described_by: Sequence[array[int]],
                            labels: LabelCodes) -> dict[int, float]:
        """:meth:`match_codes` of the descriptions of the concepts at ``positions`` (with no
        context), from counts instead of each description's codes: ``described_by``, each
        question stem's concepts whose description holds it (in the question's order), says
        which stems a description holds, and ``labels`` how many distinct codes it holds and
        how many are not a stop word's. The same floats: the idfs added in the question's
        order (the first to 0.0), the same counts divided. A position whose description holds
        a code past U+FFFF is left out (its counts are not kept)."""
        import numpy  # the numeric path: the columns are already its arrays

        if not positions:
            return {}
        if self._total <= 0:
            return dict.fromkeys(positions, 0.0)
        at = numpy.array(positions, dtype=numpy.intp)
        covered = numpy.zeros(len(at))
        # The question's codes each description holds: all, and not a stop word's.
        any_held, content_held = (numpy.zeros(len(at), dtype=numpy.int64) for _ in range(2))
        for code, value, held in self._holding(at, described_by,
                                               len(labels.description_distinct)):
            covered[held] += value
            any_held[held] += 1
            if code not in self._stop:
                content_held[held] += 1
        content = labels.description_content[at]
        # The content is the description's codes less the stop words', or all of them when
        # only stop words are left.
        shared = numpy.where(content > 0, content_held, any_held)
        size = numpy.where(content > 0, content, labels.description_distinct[at])
        return self._matches(positions, covered, shared, size, labels.description_marked)


def _dated_factor(match: float) -> float:
    return DATED_FACTOR + (1.0 - DATED_FACTOR) * match


def _with_label_matches(scores: Scores, query: list[str], idf: Mapping[str, float],
                        labels: LabelCodes | None, dated: Collection[str]
                        ) -> tuple[Scores, dict[tuple[str, int], float]]:
    """The scores, each section's raised by how well its heading says what was asked and each
    page's by how well its description does: a reader who asks with a heading's own words
    (a known item) wants that section, whatever the wider pages around it hold. Only a heading
    or a description holding a question word can say it (any other's match is 0, its factor
    1), so only those are read, from the columns' codes (``labels``) where they have them,
    else from the concept's words. Also the match of each such section of a ``dated`` page,
    by (concept, line_start): what only those pages' items weigh."""
    section = scores.section
    raised = array("d", section)
    matches: dict[tuple[str, int], float] = {}
    matcher = _Matcher(query, idf)
    headed = [g for g in scores.headed if section[g]]  # a heading whose section scores
    counted = ({} if labels is None
               else matcher.heading_matches(headed, scores.headed_by, labels))
    for g in headed:
        match = counted.get(g)
        if match is None:  # no columns, or a code past U+FFFF: read from its words
            position, n = scores.index.place(g)
            words = scores.words(position)
            match = matcher.match(words, words.sections.heading_words(n), words.title)
        raised[g] = section[g] * (1.0 + HEADING_BONUS * match)
        if match and dated:
            position, n = scores.index.place(g)
            concept_id = scores.concept_id(position)
            if concept_id in dated:
                matches[(concept_id, scores.words(position).sections[n].line_start)] = match
    concept = scores.concept
    described = array("d", concept)
    positions = [p for p in scores.described if concept[p]]  # all: each holds a stem
    counted = ({} if labels is None
               else matcher.description_matches(positions, scores.described_by, labels))
    for position in positions:
        found = counted.get(position)
        if found is None:  # no columns, or a code past U+FFFF: read from its words
            words = scores.words(position)
            found = matcher.match(words, words.description)
        described[position] = concept[position] * (1.0 + DESCRIPTION_BONUS * found)
    return replace(scores, concept=described, section=raised), matches


def _best(values: Mapping[_K, float], count: int,
          key: Callable[[_K], tuple[Any, ...]]) -> list[_K]:
    """``sorted(values, key=key)[:count]`` for a ``key`` that orders by value, highest first:
    only the keys whose value reaches the ``count``-th highest are sorted."""
    if len(values) > count:
        cut = heapq.nlargest(count, values.values())[-1]
        pool = [k for k, value in values.items() if value >= cut]
    else:
        pool = list(values)
    return sorted(pool, key=key)[:count]


def _floats(values: array[float]) -> Any:
    """A numpy view of an ``array('d')``'s own memory."""
    import numpy

    return numpy.frombuffer(values, dtype=numpy.float64)


def _best_positions(values: Any, count: int,
                    key: Callable[[int], tuple[Any, ...]]) -> list[int]:
    """:func:`_best` over the positions whose value is above 0.0 (``values`` dense, none
    negative)."""
    return sorted(_positive_at_least(values, count), key=key)[:count]


def _positive_at_least(values: Any, count: int) -> list[int]:
    """The positions of the ``count`` highest positive values, and of every value tied with
    the last of them (all the positive ones when there are no more than ``count``)."""
    import numpy  # the numeric path: the scores are already its arrays

    found = numpy.asarray(values, dtype=numpy.float64)
    if not len(found):
        return []
    last = len(found) - min(count, len(found))  # the count-th highest, or the lowest
    cut = float(numpy.partition(found, last)[last])
    kept = found >= cut if cut > 0.0 else found != 0.0
    positions: list[int] = numpy.flatnonzero(kept).tolist()
    return positions


def _with_strong_sections(scores: Scores, best_section: Any,
                          candidates: list[_Candidate]) -> list[_Candidate]:
    """The candidates, where a section whose own score is high stands on it: its item scores
    at least SECTION_ALONE x its section score, and joins the candidates if its concept did
    not (a heading that says exactly what was asked, on a page about something wider).

    The best sections are looked for only in the concepts whose best section is among the
    best: each of the MAX_STRONG_SECTIONS best concepts by best section holds a section scoring
    at least the last of them, so every section that can be among the best sections scores at
    least that too, and lies in one of those concepts (``best_section``: each concept's)."""
    section = scores.section
    place = scores.index.place
    first = scores.index.first_section

    def rank(g: int) -> tuple[float, str, int]:
        position, n = place(g)
        return -section[g], scores.concept_id(position), n

    scoring: dict[int, float] = {}
    for position in _positive_at_least(best_section, MAX_STRONG_SECTIONS):
        for g in range(first[position], first[position + 1]):
            if section[g]:
                scoring[g] = section[g]
    strong = _best(scoring, MAX_STRONG_SECTIONS, rank)
    at = {(c.concept_id, c.line_start): i for i, c in enumerate(candidates)}
    out = list(candidates)
    for g in strong:
        position, n = place(g)
        cid = scores.concept_id(position)
        words = scores.words(position).sections[n]
        value = SECTION_ALONE * section[g]
        i = at.get((cid, words.line_start))
        if i is None:
            out.append(_Candidate(value, cid, words.line_start, words.line_end,
                                  words.heading, "match", None, words.digest))
        elif out[i].score < value:
            out[i] = replace(out[i], score=value)
    return out


def without_contractions(question: str) -> str:
    """The question with its contractions undone the way a search needs: a negated auxiliary
    (don't, won't, isn't) says nothing about the topic and goes; a clitic (project's, I'm,
    we'll) leaves its word. Otherwise the tokenizer would split "won't" into "won" and "t"."""
    return _CLITIC.sub(r"\1", _NEGATED.sub(" ", question))


def content_terms(terms: list[str]) -> list[str]:
    """The terms that say what the question is about; all of them when every one is a
    stopword (a question of only 'what is it' still searches for something)."""
    kept = [t for t in terms if t not in STOPWORDS]
    return kept or terms


def _collapse_copies(
    ranked: list[_Candidate], copies: CopyGroups, token: Any
) -> tuple[list[_Candidate], dict[tuple[str, int], list[str]]]:
    """The candidates with copies counted once, and what each kept item stands for.

    Pages in a copy group (the same relative path under sibling version or language folders)
    are kept once, where the group's best candidate ranks: as the page of the fullest copy
    folder among those that matched the same way (the most complete version is most likely
    the current one), then the shallowest path, then the smallest ID. A section whose
    normalised text is that of a better-ranked one is kept in that one. The others are listed
    in the kept item's ``also_in`` (concept IDs, in rank order, at most MAX_ALSO_IN) and
    leave the list."""
    by_concept: dict[str, list[_Candidate]] = {}
    for c in ranked:
        by_concept.setdefault(c.concept_id, []).append(c)
    members: dict[str, list[str]] = {}
    for cid in by_concept:
        if cid in copies.group:
            members.setdefault(copies.group[cid], []).append(cid)
    kept_page: dict[str, tuple[str, int]] = {}  # copy group -> the item kept for it
    kept_text: dict[str, tuple[str, int]] = {}  # section digest -> the item kept for it
    done: set[tuple[str, int]] = set()
    also_in: dict[tuple[str, int], list[str]] = {}
    out: list[_Candidate] = []

    def keep(c: _Candidate) -> None:
        done.add((c.concept_id, c.line_start))
        if c.digest:
            kept_text.setdefault(c.digest, (c.concept_id, c.line_start))
        out.append(c)

    for c in ranked:
        token.check()
        if (c.concept_id, c.line_start) in done:
            continue
        group = copies.group.get(c.concept_id)
        into = None
        if group is not None and group not in kept_page:
            same_way = [m for m in members[group]
                        if any(o.why == c.why and o.score >= COPY_SCORE_RATIO * c.score
                               for o in by_concept[m])]
            best = min(same_way, key=lambda m: (-copies.fullness[m], m.count("/"), m))
            first = next(o for o in by_concept[best] if o.why == c.why)
            kept_page[group] = (best, first.line_start)
            if best != c.concept_id:
                keep(replace(first, score=c.score))
                into = kept_page[group]
        elif group is not None and kept_page[group][0] != c.concept_id:
            into = kept_page[group]
        elif c.digest and c.digest in kept_text and kept_text[c.digest][0] != c.concept_id:
            into = kept_text[c.digest]
        if into is not None:
            others = also_in.setdefault(into, [])
            if c.concept_id not in others and len(others) < MAX_ALSO_IN:
                others.append(c.concept_id)
            continue
        keep(c)
    return out, also_in


def _linked(
    snapshot: Snapshot,
    candidates: list[_Candidate],
    admitted: AbstractSet[str] | None,
    token: Any,
) -> list[_Candidate]:
    """The neighbours of the best concepts that the question did not match themselves (only
    concepts the call's filter admits)."""
    best: dict[str, float] = {}
    for c in candidates:
        best[c.concept_id] = max(best.get(c.concept_id, 0.0), c.score)
    top = sorted(best, key=lambda cid: (-best[cid], cid))[:TOP_CONCEPTS_FOR_LINKS]
    taken: set[str] = set(best)
    out: list[_Candidate] = []
    for cid in top:
        neighbours: dict[str, tuple[str, str]] = {}
        for edge in snapshot.concept_edges(cid):
            token.check()
            if edge.source_id == edge.target_id:
                continue
            other, direction = (
                (edge.target_id, "outgoing") if edge.source_id == cid
                else (edge.source_id, INCOMING)
            )
            if other in taken or other not in snapshot.concepts:
                continue
            if admitted is not None and other not in admitted:
                continue
            relationship = edge.relationship
            current = neighbours.get(other)
            if current is None or (relationship, direction) < current:
                neighbours[other] = (relationship, direction)
        order = sorted(neighbours, key=lambda o: (-_inbound(snapshot, o), o))
        for other in order[:NEIGHBOURS_PER_CONCEPT]:
            relationship, direction = neighbours[other]
            taken.add(other)
            out.append(
                _Candidate(best[cid] * LINKED_FACTOR, other, 0, 0, None, "linked",
                           (cid, relationship, direction))
            )
    return out


def _inbound(snapshot: Snapshot, concept_id: str) -> int:
    return sum(1 for e in snapshot.concept_edges(concept_id)
               if e.target_id == concept_id and e.source_id != concept_id)


def _weight(snapshot: Snapshot, concept_id: str, ref: Reference) -> float:
    """Centrality raises a concept a little; low trust, staleness and status lower it (its
    card, read with its words: no document is built to rank it)."""
    card = concept_words(snapshot, concept_id).card
    factor = 1.0 + CENTRALITY_WEIGHT * math.log2(1 + _inbound(snapshot, concept_id))
    factor *= TRUST_FACTOR[card.trust]
    if ref.stale(valid_stale_after(card.stale_after, ref.profile)):
        factor *= STALE_FACTOR
    factor *= STATUS_FACTOR.get(card.status or "", 1.0)
    return factor


def flags(card: Card, ref: Reference) -> list[str]:
    """What a reader should know before trusting an item, in a fixed order."""
    out = []
    if ref.stale(valid_stale_after(card.stale_after, ref.profile)):
        out.append("stale")
    if card.trust == UNVERIFIED:
        out.append("unverified")
    effective = card.status
    if effective in ("deprecated", "draft"):
        out.append(effective)
    elif effective is None:
        out.append("invalid_status")
    return out


def _item(snapshot: Snapshot, c: _Candidate, rank: int, ref: Reference, text: str,
          clipped: bool, copies: list[str]) -> dict[str, Any]:
    """The item of ``c``: from its card and path, without its document (the pack prices an
    item of every candidate it meets; only the text it then takes reads the page)."""
    card = concept_words(snapshot, c.concept_id).card
    section = c.line_start > 0
    item = {
        "rank": rank,
        "kind": "section" if section else "concept",
        "parent_id": c.concept_id,
        "title": card.title,
        "type": card.type,
        "locator": (locator(concept_path(snapshot, c.concept_id), c.line_start, c.line_end)
                    if section else None),
        "heading": c.heading if section else None,
        "line_start": c.line_start if section else None,
        "line_end": c.line_end if section else None,
        "why": c.why,
        "via": (
            {"from": c.via[0], "relationship": c.via[1], "direction": c.via[2]}
            if c.via is not None else None
        ),
        "score": c.score,
        "trust": card.trust,
        "flags": flags(card, ref),
        "text": text,
        "clipped": clipped,
    }
    if copies:  # only when there are: most items have none, and every byte costs budget
        item["also_in"] = list(copies)
    return item


def _full_text(snapshot: Snapshot, c: _Candidate, first: bool) -> tuple[str, bool]:
    doc = snapshot.concepts[c.concept_id]
    if c.line_start > 0:
        limit = SECTION_TEXT_CHARS if first else LATER_TEXT_CHARS
        return clip(span_text(doc, c.line_start, c.line_end).strip(), limit)
    description = text_field(doc.fm, "description")
    if description.strip():
        return clip(description.strip(), CONCEPT_TEXT_CHARS)
    return preview(doc.body, CONCEPT_TEXT_CHARS)


def _pack(
    snapshot: Snapshot,
    ranked: list[_Candidate],
    also_in: Mapping[tuple[str, int], list[str]],
    budget: int,
    ref: Reference,
    token: Any,
) -> tuple[list[dict[str, Any]], int, bool, int]:
    """Items in rank order within the budget; how many were left out; whether a text was cut;
    the tokens used."""
    items: list[dict[str, Any]] = []
    used = omitted = 0
    clipped_any = False
    for c in ranked:
        token.check()
        if len(items) >= MAX_ITEMS:
            omitted += 1
            continue
        copies = also_in.get((c.concept_id, c.line_start), [])
        # No text makes an item cheaper than an empty one marked clipped: when even that does
        # not fit, the item is left out without cutting its text (a section's text is cut
        # from its document's text, decompressed for it).
        if used + token_cost(_item(snapshot, c, len(items) + 1, ref, "", True, copies)) > budget:
            omitted += 1
            continue
        text, clipped = _full_text(snapshot, c, not items)
        item = _item(snapshot, c, len(items) + 1, ref, text, clipped, copies)
        cost = token_cost(item)
        if used + cost > budget:
            # Shorten the text to the room left, if what remains is still worth reading.
            frame = token_cost({**item, "text": ""})
            room = (budget - used - frame) * 4 - 8  # the estimate counts 4 characters a token
            if room < MIN_TEXT_CHARS:
                omitted += 1
                continue
            text, _ = clip(text, room)
            item = {**item, "text": text, "clipped": True}
            cost = token_cost(item)
            while cost + used > budget and len(text) > MIN_TEXT_CHARS:  # escapes grow JSON
                text, _ = clip(text, len(text) - 32)
                item = {**item, "text": text}
                cost = token_cost(item)
            if used + cost > budget:
                omitted += 1
                continue
            clipped = True
        clipped_any = clipped_any or clipped
        items.append(item)
        used += cost
    return items, omitted, clipped_any, used


def _suggest_next(
    question: str,
    budget: int,
    ranked: list[_Candidate],
    items: list[dict[str, Any]],
    truncated: bool,
    params: Mapping[str, Any],
) -> dict[str, Any] | None:
    """What to call when more exists: a bigger pack while the clamp allows, else the best
    concept the pack left out (read it whole)."""
    if not truncated:
        return None
    if budget < MAX_MAX_TOKENS:
        arguments = {k: v for k, v in params.items() if k != "max_tokens"}
        arguments["max_tokens"] = min(MAX_MAX_TOKENS, budget * 2)
        return {"tool": NAME, "arguments": arguments}
    packed = {(i["parent_id"], i["line_start"] or 0) for i in items}
    for c in ranked:
        if (c.concept_id, c.line_start) not in packed:
            return {"tool": "read_concept", "arguments": {"concept_id": c.concept_id}}
    # Only shortened texts: the first one, whole.
    first = next(i for i in items if i["clipped"])
    if first["locator"] is not None:
        return {"tool": "fetch_slice", "arguments": {"entity_id": first["locator"]}}
    return {"tool": "read_concept", "arguments": {"concept_id": first["parent_id"]}}


SPEC = ToolSpec(
    name=NAME,
    title="Context pack",
    toolset="read",
    read_only=True,
    output_budget=1 * MIB,
    description=DESCRIPTION,
    run=run,
)
