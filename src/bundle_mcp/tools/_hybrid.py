"""Hybrid ranking: embedding ranks of concepts, fused with BM25 ranks by reciprocal rank fusion.

Shared by ``search_sections`` and ``context`` (``hybrid: true``). Fusion works on ranks, not
scores: BM25 scores and cosine similarities live on different scales, and a rank-only fusion
needs no tuning per bundle. Each list a key appears in adds 1/(RRF_K + its rank), the constant
of Cormack, Clarke and Büttcher (2009). When the semantic extra is missing or its index is not
ready, there are no embedding ranks and the answer says why; a call never waits for vectors.
"""

from __future__ import annotations

from collections.abc import Iterable
from collections.abc import Set as AbstractSet

from ..semantic import PARTIAL, READY
from ..toolspec import CallContext

RRF_K = 60
SEMANTIC_CANDIDATES = 50  # the best concepts by embedding whose ranks are fused


def semantic_ranks(
    call: CallContext, text: str, admitted: AbstractSet[str] | None
) -> tuple[dict[str, int], str | None]:
    """Concept ID → rank from 1 by embedding similarity to ``text`` (only admitted concepts),
    and a note when hybrid ranking was asked for but cannot be (fully) applied."""
    semantic = call.semantic
    if semantic is None:
        return {}, "hybrid asked for, but semantic search is not enabled: ranked by BM25 alone"
    matches = semantic.search(call.snapshot, text, SEMANTIC_CANDIDATES, 0.0, call.token, admitted)
    if matches.status not in (READY, PARTIAL) or not matches.hits:
        return {}, (f"hybrid asked for, but the embedding index is {matches.status}: "
                    "ranked by BM25 alone")
    ranks = {cid: n for n, (cid, _score) in enumerate(matches.hits, start=1)}
    note = None if matches.status == READY else "embeddings are partial: fused what exists"
    return ranks, note


def fused(ranks: Iterable[int | None], weights: Iterable[float] | None = None) -> float:
    """The reciprocal rank fusion score of one item from its rank in each list (``None``:
    the list does not hold it), each list's term times its weight (1 without ``weights``)."""
    ranks = list(ranks)
    factors = list(weights) if weights is not None else [1.0] * len(ranks)
    return sum(w / (RRF_K + rank) for rank, w in zip(ranks, factors, strict=True)
               if rank is not None)
