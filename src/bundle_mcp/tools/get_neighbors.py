"""get_neighbors: resolved navigation and relation edges of one concept, and its sources."""

from __future__ import annotations

from typing import Any

from ..cancel import CancelToken
from ..errors import resource_limit
from ..model import NAVIGATION, RELATION, Edge, Snapshot
from ..okf.temporal import reference_from
from ..toolspec import CallContext, ToolSpec
from ._common import Cards, frontmatter_sources, invalid_field, limit_from, require_concept

NAME = "get_neighbors"
DESCRIPTION = (
    "One concept's resolved edges: navigation (Markdown links) and relation (typed "
    "relations), in, out or both, plus its sources; broken links left out. If truncated, "
    "narrow direction or kinds or raise limit (no cursor); the whole graph: "
    "get_semantic_graph. Over 100 sources or 100,000 edges: resource_limit."
)

KINDS = (NAVIGATION, RELATION, "source")
DIRECTIONS = ("in", "out", "both")
MAX_SOURCES = 100
MAX_CANDIDATE_EDGES = 100_000


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    doc = require_concept(snapshot, params["concept_id"], token=token)
    concept_id = doc.concept_id
    assert concept_id is not None
    direction = params.get("direction", "both")
    if direction not in DIRECTIONS:
        raise invalid_field("$.direction", "direction must be in, out or both")
    kinds = normalise_kinds(params.get("kinds", list(KINDS)))
    limit = limit_from(params)
    ref = reference_from(params)

    sources: list[dict[str, str]] = []
    if "source" in kinds and direction != "in":
        sources = provenance_sources(doc.fm, token)

    edges = select_edges(snapshot, concept_id, direction, kinds, token)
    cards = Cards(snapshot, ref)
    out = []
    for edge in edges[:limit]:
        token.check()
        out.append(
            {
                "from": edge.source_ref,
                "to": edge.target_ref,
                "kind": edge.kind,
                "relation_type": edge.relation_type,
                "source": cards.get(edge.source_id),
                "target": cards.get(edge.target_id),
            }
        )
    return {
        "concept": cards.get(concept_id),
        "as_of": ref.as_of,
        "temporal_profile": ref.profile,
        "direction": direction,
        "kinds": kinds,
        "total": len(edges),
        "truncated": len(edges) > limit,
        "edges": out,
        "sources": sources,
    }


def normalise_kinds(requested: Any) -> list[str]:
    """The requested kinds in canonical order; empty, unknown or repeated kinds are rejected."""
    if not isinstance(requested, list) or not requested:
        raise invalid_field("$.kinds", "kinds must list one to three of navigation, relation, "
                            "source")
    for kind in requested:
        if kind not in KINDS:
            raise invalid_field("$.kinds", "kinds may only contain navigation, relation, source")
    if len(set(requested)) != len(requested):
        raise invalid_field("$.kinds", "kinds must not repeat a kind")
    return [k for k in KINDS if k in requested]


def select_edges(
    snapshot: Snapshot, concept_id: str, direction: str, kinds: list[str], token: CancelToken
) -> list[Edge]:
    """Edges touching the concept, filtered by direction and kind, in (kind, from, to, type) order.

    ``in`` keeps edges whose target concept is the concept, ``out`` those whose source concept
    is, ``both`` either (a self-link once). ``Snapshot.edges_of`` gives them in edge order
    (``model.edge_order``: kind, from, to, relationship), which is this order, a link's
    relationship being always LINKS_TO where the wire says no relation type; so the filter
    keeps it and nothing is sorted: a hub's thousands of edges were a Python step each and
    then sorted, most of a warm call at 50,000 concepts.
    """
    token.check()
    wanted = frozenset(kinds)
    edges = snapshot.edges_of(concept_id)
    if direction == "in":
        selected = [e for e in edges if e.target_id == concept_id and e.kind in wanted]
    elif direction == "out":
        selected = [e for e in edges if e.source_id == concept_id and e.kind in wanted]
    else:
        selected = [e for e in edges if e.kind in wanted]
    token.check()
    if len(selected) > MAX_CANDIDATE_EDGES:
        raise resource_limit(
            f"the neighbourhood has more than {MAX_CANDIDATE_EDGES} candidate edges",
            "narrow direction (in or out) and kinds (navigation or relation), or use "
            "get_semantic_graph if its output fits; v1 has no cursor, so report this limit "
            "rather than claiming a complete neighbourhood",
        )
    return selected


def provenance_sources(fm: Any, token: CancelToken) -> list[dict[str, str]]:
    """``sources[]`` entries with a string resource as {id, resource, title}, '' when missing."""
    out = []
    for entry in frontmatter_sources(fm):
        token.check()
        out.append(
            {
                "id": _text(entry.get("id")),
                "resource": entry["resource"],
                "title": _text(entry.get("title")),
            }
        )
    if len(out) > MAX_SOURCES:
        raise resource_limit(
            f"the concept has {len(out)} provenance sources, more than the {MAX_SOURCES} "
            "that can be returned",
            "call again without 'source' in kinds (for example kinds [navigation, relation]) "
            "and read the sources with read_concept",
        )
    out.sort(key=lambda s: (s["id"], s["resource"], s["title"]))
    return out


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


SPEC = ToolSpec(
    name=NAME,
    title="Get neighbors",
    toolset="read",
    read_only=True,
    description=DESCRIPTION,
    run=run,
)
