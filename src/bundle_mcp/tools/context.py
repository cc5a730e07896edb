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

import math
from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import Any

from ..model import Document, Snapshot
from ..okf.graph import INCOMING, LINKS_TO, NAVIGATION, clip, preview
from ..okf.names import concept_name
from ..okf.properties import stale_after, status_state, text_field, trust
from ..okf.sections import locator, span_text
from ..okf.temporal import Reference, reference_from
from ..toolspec import CallContext, ToolSpec
from ._common import MIB, invalid_field
from ._extraction import token_cost
from ._filters import admitted_concepts, concept_filter_from
from ._hybrid import fused, semantic_ranks
from ._section_index import query_terms, rank_descriptions, rank_sections
from ._walk_params import clamped

NAME = "context"
DESCRIPTION = (
    "What do we know about X: the best passages and concepts for a question, packed under "
    "max_tokens. BM25 over sections (any question word), links around the best hits, trust "
    "and freshness: stale or unverified rank lower and are flagged, never hidden. Cite "
    "parent_id; if truncated, call suggested_next. Exact words: search_sections."
)

DEFAULT_MAX_TOKENS = 2000
MIN_MAX_TOKENS = 256
MAX_MAX_TOKENS = 8000
MAX_ITEMS = 40  # a pack is a starting set; more belongs to the widening verbs
MAX_CANDIDATE_SECTIONS = 120  # best-scoring sections looked at before packing
MAX_CANDIDATE_DESCRIPTIONS = 40  # ... and concepts matched by their description
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
SECTION_TEXT_CHARS = 2400  # a section's text before the budget cuts it further
SEMANTIC_ONLY = 5  # of those, the best that join the pack without a matching section
SCORE_PLACES = 6

# Words that say how a question is asked, not what it is about: dropped from the terms unless
# nothing else is left. Fixed and documented (docs/TOOLS.md), so a pack never depends on a
# language model or a corpus statistic.
STOPWORDS = frozenset(
    """a about after all also an and any are as at be been before being between both but by can
    could did do does doing for from had has have having he her here hers him his how i if in
    into is it its itself just me more most my no nor not of off on once only or other our ours
    out over own same she should so some such than that the their theirs them then there these
    they this those through to too under until up very was we were what when where which while
    who whom why will with would you your yours know tell explain describe""".split()
)


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


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    question = params["question"]
    if not question.strip():
        raise invalid_field("$.question", "question must contain a non-whitespace character")
    ref = reference_from(params)
    budget = clamped(params, "max_tokens", DEFAULT_MAX_TOKENS, MIN_MAX_TOKENS, MAX_MAX_TOKENS)
    terms = content_terms(query_terms(question))
    concept_filter = concept_filter_from(snapshot, params, ref)
    admitted = (
        admitted_concepts(snapshot, concept_filter, ref, token)
        if concept_filter is not None
        else None
    )

    # BM25 matches: sections, and concepts whose description holds the words (a description is
    # frontmatter, which sections never see), in one list on one scale.
    matches: list[_Candidate] = []
    if terms:
        for section in rank_sections(snapshot, terms, token, admitted, require_all=False)[
            :MAX_CANDIDATE_SECTIONS
        ]:
            matches.append(_Candidate(section.score, section.concept_id, section.line_start,
                                      section.line_end, section.heading, "match", None))
        for score, cid in rank_descriptions(snapshot, terms, token, admitted)[
            :MAX_CANDIDATE_DESCRIPTIONS
        ]:
            matches.append(_Candidate(score, cid, 0, 0, None, "match", None))
    matches.sort(key=lambda c: (-c.score, c.concept_id, c.line_start))
    matched = {c.concept_id for c in matches}
    ranking, note = "bm25", None
    semantic_rank: dict[str, int] = {}
    if params.get("hybrid"):
        semantic_rank, note = semantic_ranks(call, question, admitted)
        if semantic_rank:
            ranking = "hybrid"

    # With embeddings, concepts are ranked by fusing their BM25 rank (their best match) with
    # their embedding rank; a match then scores its concept's fused score, scaled by its own
    # BM25 score so that one concept's matches keep their order.
    concept_rank: dict[str, int] = {}
    for match in matches:
        concept_rank.setdefault(match.concept_id, len(concept_rank) + 1)
    candidates: list[_Candidate] = []
    seen: dict[str, int] = {}
    for match in matches:
        token.check()
        cid = match.concept_id
        base = (
            fused((concept_rank[cid], semantic_rank.get(cid))) * (1.0 + math.log1p(match.score))
            if semantic_rank
            else match.score
        )
        nth = seen.get(cid, 0)
        seen[cid] = nth + 1
        candidates.append(replace(match, score=base * NEXT_SECTION_FACTOR**nth))
    for cid, rank in sorted(semantic_rank.items(), key=lambda kv: kv[1]):
        # Found by meaning alone: the whole concept, no passage.
        if rank <= SEMANTIC_ONLY and cid not in matched:
            candidates.append(
                _Candidate(fused((None, rank)), cid, 0, 0, None, "semantic", None)
            )
    candidates.extend(_linked(snapshot, candidates, admitted, token))
    weighted = [replace(c, score=round(c.score * _weight(snapshot, c.concept_id, ref),
                                       SCORE_PLACES))
                for c in candidates]
    weighted.sort(key=lambda c: (-c.score, c.concept_id, c.line_start))

    items, omitted, clipped_any, used = _pack(snapshot, weighted, budget, ref, token)
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
        "total": len({c.concept_id for c in candidates}),
        "omitted": omitted,
        "truncated": truncated,
        "suggested_next": _suggest_next(question, budget, weighted, items, truncated, params),
        "items": items,
    }
    if concept_filter is not None:
        answer["filters"] = concept_filter.echo()
    return answer


def content_terms(terms: list[str]) -> list[str]:
    """The terms that say what the question is about; all of them when every one is a
    stopword (a question of only 'what is it' still searches for something)."""
    kept = [t for t in terms if t not in STOPWORDS]
    return kept or terms


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
        for edge in snapshot.edges_by_concept.get(cid, ()):
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
            relationship = LINKS_TO if edge.kind == NAVIGATION else (edge.relation_type or "")
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
    return sum(1 for e in snapshot.edges_by_concept.get(concept_id, ())
               if e.target_id == concept_id and e.source_id != concept_id)


def _weight(snapshot: Snapshot, concept_id: str, ref: Reference) -> float:
    """Centrality raises a concept a little; low trust, staleness and status lower it."""
    doc = snapshot.concepts[concept_id]
    factor = 1.0 + CENTRALITY_WEIGHT * math.log2(1 + _inbound(snapshot, concept_id))
    factor *= TRUST_FACTOR[trust(doc.fm)]
    if ref.stale(stale_after(doc.fm, ref.profile)):
        factor *= STALE_FACTOR
    factor *= STATUS_FACTOR.get(status_state(doc.fm)["effective"] or "", 1.0)
    return factor


def flags(doc: Document, ref: Reference) -> list[str]:
    """What a reader should know before trusting an item, in a fixed order."""
    out = []
    if ref.stale(stale_after(doc.fm, ref.profile)):
        out.append("stale")
    if trust(doc.fm) == "unverified":
        out.append("unverified")
    effective = status_state(doc.fm)["effective"]
    if effective in ("deprecated", "draft"):
        out.append(effective)
    elif effective is None:
        out.append("invalid_status")
    return out


def _item(snapshot: Snapshot, c: _Candidate, rank: int, ref: Reference, text: str,
          clipped: bool) -> dict[str, Any]:
    doc = snapshot.concepts[c.concept_id]
    section = c.line_start > 0
    return {
        "rank": rank,
        "kind": "section" if section else "concept",
        "parent_id": c.concept_id,
        "title": concept_name(doc),
        "type": text_field(doc.fm, "type"),
        "locator": locator(doc.path, c.line_start, c.line_end) if section else None,
        "heading": c.heading if section else None,
        "line_start": c.line_start if section else None,
        "line_end": c.line_end if section else None,
        "why": c.why,
        "via": (
            {"from": c.via[0], "relationship": c.via[1], "direction": c.via[2]}
            if c.via is not None else None
        ),
        "score": c.score,
        "trust": trust(doc.fm),
        "flags": flags(doc, ref),
        "text": text,
        "clipped": clipped,
    }


def _full_text(snapshot: Snapshot, c: _Candidate) -> tuple[str, bool]:
    doc = snapshot.concepts[c.concept_id]
    if c.line_start > 0:
        return clip(span_text(doc, c.line_start, c.line_end).strip(), SECTION_TEXT_CHARS)
    description = text_field(doc.fm, "description")
    if description.strip():
        return clip(description.strip(), CONCEPT_TEXT_CHARS)
    return preview(doc.body, CONCEPT_TEXT_CHARS)


def _pack(
    snapshot: Snapshot, ranked: list[_Candidate], budget: int, ref: Reference, token: Any
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
        text, clipped = _full_text(snapshot, c)
        item = _item(snapshot, c, len(items) + 1, ref, text, clipped)
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
