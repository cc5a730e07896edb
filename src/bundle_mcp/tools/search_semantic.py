"""search_semantic: concepts found by meaning, expanded with the query_subgraph extraction.

Vectors come from the server's :class:`~bundle_mcp.semantic.SemanticIndex`, which the dispatcher
passes in as ``semantic`` (tool modules keep no state of their own). A server whose index has
no model installed (no ``semantic`` extra) does not offer this tool (``Dispatcher``); without an
index at all (the Python API), or while the model fails to load, it still answers calls that
bring ``seed_ids``.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import OPERATION_REJECTED, BundleError, recovery_step
from ..okf.temporal import reference_from
from ..semantic import NOT_READY, UNAVAILABLE
from ..semantic.embedder import INSTALL_HINT
from ..toolspec import CallContext, ToolSpec
from ._common import MIB, invalid_field
from ._extraction import extract
from ._filters import admitted_concepts, concept_filter_from
from ._walk_params import clamped, parse_query, seed_list

NAME = "search_semantic"
DEFAULT_TOP_K = 3
MAX_TOP_K = 20
DEFAULT_DEPTH = 1
DEFAULT_MAX_OBJECTS = 20
DESCRIPTION = (
    "Find concepts by meaning: the query is embedded with a local model (all-MiniLM-L6-v2, "
    "offline; extra bundle-mcp[semantic]) and the top_k closest concepts (cosine, at least "
    "min_score) seed a compact query_subgraph walk with its budgets. embedding_status: ready, "
    "partial, not_ready or unavailable. Before vectors exist (built in the background after "
    "the first call) or without the extra, a call without seed_ids is operation_rejected: "
    "retry later, or pass seed_ids to expand from them (scores then empty). Filter arguments "
    "narrow the seeds and the returned objects (seed_ids are kept)."
)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token, semantic = call.snapshot, call.token, call.semantic
    query = params.get("query")
    if not isinstance(query, str) or not query.strip():
        raise invalid_field("$.query", "query must be a non-blank string")
    top_k = clamped(params, "top_k", DEFAULT_TOP_K, 1, MAX_TOP_K)
    min_score = _min_score(params)
    ref = reference_from(params)
    concept_filter = concept_filter_from(snapshot, params, ref)
    # One pass over the concepts per call: the vector search scores only these, and the
    # extraction drops every other object before its budgets are spent.
    admitted = (
        admitted_concepts(snapshot, concept_filter, ref, token)
        if concept_filter is not None
        else None
    )

    scores: dict[str, float] = {}
    if "seed_ids" in params:
        seeds = seed_list(params)
        # Explicit seeds need no vectors, but the call still warms the index for later ones.
        status = semantic.ensure(snapshot) if semantic is not None else UNAVAILABLE
    else:
        if semantic is None:
            raise _unavailable("semantic search is not enabled in this server")
        matches = semantic.search(snapshot, query, top_k, min_score, token, admitted)
        status = matches.status
        if status == UNAVAILABLE:
            raise _unavailable("the embedding model is not installed or failed to load")
        if status == NOT_READY:
            raise BundleError(
                OPERATION_REJECTED,
                "embeddings for this version of the bundle are not ready yet",
                (recovery_step("retry in a few seconds or pass seed_ids"),),
            )
        seeds = tuple(concept_id for concept_id, _score in matches.hits)
        scores = dict(matches.hits)

    subquery = parse_query(
        params,
        seeds=seeds,
        default_depth=DEFAULT_DEPTH,
        default_max_objects=DEFAULT_MAX_OBJECTS,
        compact=True,
        admitted=admitted,
    )
    found = extract(snapshot, subquery, token)
    unresolved = set(found.unresolved)
    resolved = [s for s in seeds if s not in unresolved]
    answer: dict[str, Any] = {
        "status": "success",
        "matched_seeds": resolved,
        "subgraph": found.subgraph,
        "meta": {
            "total_found_nodes": found.total_found,
            "returned_nodes": found.returned,
            "is_truncated": found.is_truncated,
            "truncation_reason": found.truncation_reason,
            "suggested_next_seed": found.suggested_next_seed,
            "unresolved": list(found.unresolved),
            "applied": {"top_k": top_k, **found.applied},
        },
        "min_score": min_score,
        "scores": scores,
        "embedding_status": status,
    }
    if concept_filter is not None:  # without filters the answer keeps its old bytes
        answer["as_of"] = ref.as_of
        answer["temporal_profile"] = ref.profile
        answer["filters"] = concept_filter.echo()
    return answer


def _min_score(params: dict[str, Any]) -> float:
    value = params.get("min_score", 0.0)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise invalid_field("$.min_score", "min_score must be a number")
    return min(1.0, max(0.0, float(value)))


def _unavailable(message: str) -> BundleError:
    return BundleError(
        OPERATION_REJECTED,
        message,
        (
            recovery_step(
                f"pass seed_ids to expand known concepts without vectors, or ask the operator "
                f"to install the extra ({INSTALL_HINT}) and restart the server"
            ),
        ),
    )


SPEC = ToolSpec(
    name=NAME,
    title="Semantic search",
    toolset="semantic",
    read_only=True,
    output_budget=8 * MIB,
    description=DESCRIPTION,
    run=run,
)
