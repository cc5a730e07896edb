"""expand_neighbors: widen known concepts or sections into their bounded graph neighbourhood."""

from __future__ import annotations

from itertools import compress, islice
from typing import Any

from ..cancel import CancelToken
from ..model import Snapshot
from ..okf.folding import fold
from ..okf.graph import (
    SHARES_COMMUNITY,
    EdgeBudget,
    Entity,
    Found,
    Selection,
    Walk,
    entity_name,
    entity_type,
    graph_of,
    preview,
    project_id,
    walk,
)
from ..okf.properties import tags as concept_tags
from ..okf.properties import text_field
from ..okf.sections import body_text, breadcrumb, is_sliced, section_text
from ..toolspec import CallContext, ToolSpec
from ._common import MIB
from ._walk_params import clamped, project_from

NAME = "expand_neighbors"
DESCRIPTION = (
    "Widen concepts or sections you hold, breadth-first, previewing each neighbour. "
    "Edges: LINKS_TO, typed relations, field edges, PART_OF (section-concept), "
    "SHARES_COMMUNITY (shared tag). The first 8 distinct seeds are walked; others and unknown "
    "IDs: unresolved. "
    "Score: typed 1.0, LINKS_TO 0.8, PART_OF 0.6, community 0.4, halved per hop."
)

MAX_ORIGINS = 8
DEFAULT_DEPTH, MAX_DEPTH = 1, 3
DEFAULT_LIMIT, MAX_LIMIT = 8, 24
DEFAULT_CONTENT_CHARS, MAX_CONTENT_CHARS = 500, 2000
# The walk looks at no more than this many edges per call. Depth alone does not bound work: a
# hub with 10,000 incoming links reached at hop 1 puts 10,000 nodes on the next frontier, and a
# tag shared by all of them would cost 10,000 x 10,000 lookups at hop 2 (each tag is now expanded
# once per hop, but links and sections still cost one step each). 20,000 edges cover every edge
# of a 10,000-link hub at hop 1 and keep a dense depth-3 walk near 150 ms on the benchmark
# machine; past the cap the walk stops, keeps what it found, and reports truncated (it may then
# say "truncated" when nothing new remained: the conservative direction, and `total` is then
# what was found within the cap).
MAX_WALK_EDGES = 20_000
MAX_METADATA_TAGS = 32


# Each further hop halves a neighbour's score (okf.graph weighs the edge kinds), so a relation
# two hops away (0.5) still outranks a shared tag next door (0.4).
DEPTH_DECAY = 0.5


def score(found: Found) -> float:
    return score_of(found.step.weight, found.distance)


def score_of(weight: float, distance: int) -> float:
    return round(weight * DEPTH_DECAY ** (distance - 1), 6)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    depth = clamped(params, "depth", DEFAULT_DEPTH, 1, MAX_DEPTH)
    limit = clamped(params, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    content_max = clamped(params, "content_max_chars", DEFAULT_CONTENT_CHARS, 0, MAX_CONTENT_CHARS)
    include_incoming = bool(params.get("include_incoming", True))
    project = project_from(snapshot, params)
    relationship_types = sorted({str(r).upper() for r in params.get("relationship_types", [])})
    wanted_types = sorted(set(params.get("types", [])))

    seeds, origins, unresolved = _seeds(snapshot, params["entity_ids"], project, token)
    if relationship_types:
        selection = Selection.named(
            relationship_types, fold_case=True, incoming=include_incoming, project=project
        )
    else:
        selection = Selection.every(incoming=include_incoming, project=project)
    found = walk(graph_of(snapshot), seeds, selection, depth, EdgeBudget(MAX_WALK_EDGES), token)

    folded = {fold(t) for t in wanted_types}
    best, total = _best(found, folded, limit, token)
    neighbors = []
    for reached in best:
        token.check()
        neighbors.append(_neighbor(snapshot, reached, content_max))
    return {
        "origins": origins,
        "unresolved": unresolved,
        "neighbors": neighbors,
        "total": total,
        "depth": depth,
        "limit": limit,
        "truncated": total > limit or found.cut,
        "filters": {
            "relationship_types": relationship_types,
            "types": wanted_types,
            "include_incoming": include_incoming,
            "project": project,
            "content_max_chars": content_max,
        },
    }


def _best(
    found: Walk, folded: set[str], limit: int, token: CancelToken
) -> tuple[list[Found], int]:
    """The ``limit`` best nodes of the walk whose type is in ``folded`` (all when empty),
    ordered by score, distance and ID, and how many nodes there are of those types.

    Only the returned nodes become :class:`Found`. A node's score is its edge's weight decayed
    by its distance, and a level lists its nodes by ID, so the nodes of one distance and score
    are already in order: the few (distance, weight) runs are ranked, not the nodes, and a
    level is read again only until the answer is full.
    """
    levels = found.levels
    if folded:
        levels = tuple(
            tuple(r for r in level if fold(entity_type(found.entity(r, distance))) in folded)
            for distance, level in enumerate(levels, 1)
        )
    total = sum(map(len, levels))
    runs: dict[tuple[float, int], set[float]] = {}  # (-score, distance) -> its -weights
    # Each level's nodes' weights, in order: a level walked over the walk arrays holds places
    # (ints), whose weights Walk.negative_weights reads from their tables.
    level_weights = [found.negative_weights(level, distance)
                     for distance, level in enumerate(levels, 1)]
    for distance, weights in enumerate(level_weights, 1):
        token.check()
        for negative_weight in set(weights):
            run = (-score_of(-negative_weight, distance), distance)
            runs.setdefault(run, set()).add(negative_weight)
    best: list[Found] = []
    for run in sorted(runs):
        if len(best) >= limit:
            break
        wanted, distance = runs[run], run[1]
        members = compress(levels[distance - 1],
                           map(wanted.__contains__, level_weights[distance - 1]))
        for node in islice(members, limit - len(best)):
            best.append(found.finding(node, distance))
    return best, total


def _seeds(
    snapshot: Snapshot, entity_ids: list[str], project: str | None, token: CancelToken
) -> tuple[list[Entity], list[str], list[str]]:
    """(seed entities, their canonical IDs, the IDs not walked), all in request order.

    Repeated IDs count once. IDs past the first eight are never resolved, so "too many" and
    "absent" are reported alike and the walk never silently drops a seed it looked at.
    """
    graph = graph_of(snapshot)
    distinct = list(dict.fromkeys(entity_ids))
    seeds: dict[str, Entity] = {}
    unresolved: list[str] = []
    for value in distinct[:MAX_ORIGINS]:
        token.check()
        entity = graph.resolve(value, project)
        if entity is None:
            unresolved.append(value)
        else:
            # Two spellings of one locator (encoded and plain) are one seed.
            seeds.setdefault(entity.id, entity)
    unresolved.extend(distinct[MAX_ORIGINS:])
    return list(seeds.values()), list(seeds), unresolved


def _neighbor(snapshot: Snapshot, found: Found, content_max: int) -> dict[str, Any]:
    entity, step = found.entity, found.step
    doc, section = entity.doc, entity.section
    if section is not None:
        content, cut = preview(section_text(doc, section), content_max)
    else:
        text = body_text(doc)
        if not text.strip():
            text = text_field(doc.fm, "description")
        content, cut = preview(text, content_max)
    community: list[str] = []
    if step.relationship == SHARES_COMMUNITY and section is None:
        shared = graph_of(snapshot).shared_tags(found.predecessor, entity)
        community = shared[:MAX_METADATA_TAGS]
    return {
        "id": entity.id,
        "type": entity_type(entity),
        "name": entity_name(entity),
        "relationship": step.relationship,
        "direction": step.direction,
        "distance": found.distance,
        "score": score(found),
        "content": content,
        "project_id": project_id(doc.path),
        "metadata": {
            "kind": "section" if section is not None else "concept",
            "path": doc.path,
            "locator": entity.id if section is not None else None,
            "predecessor": found.predecessor.id,
            "edge": {"from": step.edge_from, "to": step.edge_to},
            "edge_count": found.edge_count,
            "tags": [] if section is not None else concept_tags(doc.fm)[:MAX_METADATA_TAGS],
            "community": community,
            "truncated": cut,
            "sliced": is_sliced(doc),
            "passage_index": section.index if section is not None else None,
            "passage_total": doc.section_count if section is not None else None,
            "parent_entity_id": entity.concept_id if section is not None else None,
            "breadcrumb": breadcrumb(section) if section is not None else None,
            "widen_with": "fetch_slice" if section is not None else None,
        },
    }


SPEC = ToolSpec(
    name=NAME,
    title="Expand neighbors",
    toolset="walk",
    read_only=True,
    # 24 rows of bounded previews are small; the budget covers pathological IDs, names and tags.
    output_budget=16 * MIB,
    description=DESCRIPTION,
    run=run,
)
