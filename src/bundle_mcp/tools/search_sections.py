"""search_sections: BM25 over the sections of every concept, AND of case-folded terms."""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from typing import Any

from ..model import Snapshot
from ..okf.filters import ConceptFilter
from ..okf.sections import locator, span_text
from ..okf.temporal import Reference, reference_from
from ..toolspec import CallContext, ToolSpec
from ._common import limit_from
from ._filters import admitted_concepts, concept_filter_from
from ._hybrid import fused, semantic_ranks
from ._section_index import ScoredSection, query_terms, rank_sections, snippet

NAME = "search_sections"
DESCRIPTION = (
    "Passages: BM25 over sections. Every query word must occur in the section, its heading "
    "or the concept title (AND; no stemming; at most 32). Returns citable locators "
    "(path#Lstart-Lend), heading, snippet, snapshot_revision. No cursor: raise limit or add "
    "a word. Then fetch_slice or read_concept; a plain-words question: context."
)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    query = params["query"]
    terms = query_terms(query)
    limit = limit_from(params)
    ref = reference_from(params)
    concept_filter = concept_filter_from(snapshot, params, ref)
    if not terms:
        empty = _answer(query, [], snapshot, [], limit, [], concept_filter, ref)
        if params.get("hybrid"):
            empty["ranking"], empty["ranking_note"] = "bm25", None
        return empty
    # Sections of other concepts are dropped before scoring; BM25's statistics stay those of
    # the whole bundle, so a filter never changes how two admitted sections compare.
    admitted = (
        admitted_concepts(snapshot, concept_filter, ref, token)
        if concept_filter is not None
        else None
    )
    wanted = set(terms)
    scored = rank_sections(snapshot, terms, token, admitted, parts=call.parts)
    ranking: tuple[str, str | None] | None = None
    if params.get("hybrid"):
        scored, ranking = _hybrid_order(call, query, scored, admitted)
    hits = []
    for s in scored[:limit]:
        token.check()
        doc = snapshot.concepts[s.concept_id]
        raw = span_text(doc, s.line_start, s.line_end)
        hits.append(
            {
                "concept_id": s.concept_id,
                "path": s.path,
                "heading": s.heading,
                "locator": locator(s.path, s.line_start, s.line_end),
                "line_start": s.line_start,
                "line_end": s.line_end,
                "content_sha256": s.digest,
                "snippet": snippet(raw, wanted),
                "score": s.score,
                "matched_terms": list(terms),
            }
        )
    answer = _answer(query, terms, snapshot, scored, limit, hits, concept_filter, ref)
    if ranking is not None:
        answer["ranking"], answer["ranking_note"] = ranking
    return answer


def _hybrid_order(
    call: CallContext,
    query: str,
    scored: list[ScoredSection],
    admitted: AbstractSet[str] | None,
) -> tuple[list[ScoredSection], tuple[str, str | None]]:
    """The BM25 hits reordered by reciprocal rank fusion of their own rank and their concept's
    embedding rank; the hits stay the same (every query word must still occur), only their
    order moves, and each keeps its BM25 score."""
    ranks, note = semantic_ranks(call, query, admitted)
    if not ranks:
        return scored, ("bm25", note)
    order = sorted(
        range(len(scored)),
        key=lambda i: (-fused((i + 1, ranks.get(scored[i].concept_id))), i),
    )
    return [scored[i] for i in order], ("hybrid", note)


def _answer(
    query: str,
    terms: list[str],
    snapshot: Snapshot,
    scored: list[ScoredSection],
    limit: int,
    hits: list[dict[str, Any]],
    concept_filter: ConceptFilter | None,
    ref: Reference,
) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "query": query,
        "terms": terms,
        "snapshot_revision": snapshot.revision,
        "total": len(scored),
        "truncated": len(scored) > limit,
        "hits": hits,
    }
    if concept_filter is not None:
        # Only a filtered call reports its reference time: nothing else here depends on it,
        # and an unfiltered answer keeps its old bytes.
        answer["as_of"] = ref.as_of
        answer["temporal_profile"] = ref.profile
        answer["filters"] = concept_filter.echo()
    return answer


SPEC = ToolSpec(
    name=NAME,
    title="Search sections",
    toolset="read",
    read_only=True,
    output_budget=1024 * 1024,
    description=DESCRIPTION,
    run=run,
)
