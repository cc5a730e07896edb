"""expand_neighbors: widen known concepts or sections into their bounded graph neighbourhood."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..cancel import CancelToken
from ..model import Snapshot
from ..okf.folding import fold
from ..okf.properties import tags as concept_tags
from ..okf.properties import text_field
from ._common import MIB
from ._graph import (
    COMMUNITY_WEIGHT,
    DEPTH_DECAY,
    OUTGOING,
    SHARES_COMMUNITY,
    Entity,
    GraphView,
    Step,
    WalkBudget,
    body_text,
    breadcrumb,
    clamped,
    concept_entity,
    entity_name,
    entity_type,
    is_sliced,
    preview,
    project_from,
    project_id,
    resolve,
    section_text,
    shared_tags,
)

NAME = "expand_neighbors"
TITLE = "Expand neighbors"
TOOLSET = "walk"
READ_ONLY = True
NEEDS_PARSEABLE = True
# 24 rows of bounded previews are small; the budget covers pathological IDs, names and tags.
OUTPUT_BUDGET = 16 * MIB
DESCRIPTION = (
    "Widen concepts or sections you already hold, breadth-first, with a preview per "
    "neighbour. Edges: LINKS_TO (links), typed relations, PART_OF (a section and its "
    "concept), SHARES_COMMUNITY (a shared tag). The first 8 distinct seeds are walked; the "
    "rest and unknown IDs come back in unresolved. Score: typed 1.0, LINKS_TO 0.8, PART_OF "
    "0.6, community 0.4, halved per extra hop; ties by ID. Read a section neighbour with "
    "fetch_slice and cite its parent."
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


@dataclass(frozen=True, slots=True)
class Found:
    """A neighbour, reached first at ``distance`` over its best edge from ``predecessor``."""

    entity: Entity
    distance: int
    step: Step
    predecessor: Entity
    edge_count: int

    @property
    def score(self) -> float:
        return round(self.step.weight * DEPTH_DECAY ** (self.distance - 1), 6)


@dataclass(frozen=True, slots=True)
class Walk:
    found: tuple[Found, ...]
    cut: bool  # the edge budget ran out before the walk finished


def run(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
    depth = clamped(params, "depth", DEFAULT_DEPTH, 1, MAX_DEPTH)
    limit = clamped(params, "limit", DEFAULT_LIMIT, 1, MAX_LIMIT)
    content_max = clamped(params, "content_max_chars", DEFAULT_CONTENT_CHARS, 0, MAX_CONTENT_CHARS)
    include_incoming = bool(params.get("include_incoming", True))
    project = project_from(snapshot, params)
    relationship_types = sorted({str(r).upper() for r in params.get("relationship_types", [])})
    wanted_types = sorted(set(params.get("types", [])))

    seeds, origins, unresolved = _seeds(snapshot, params["entity_ids"], project, token)
    graph = GraphView.build(
        snapshot, project, frozenset(relationship_types) or None, include_incoming, token
    )
    walk = bfs(graph, seeds, depth, token)

    folded = {fold(t) for t in wanted_types}
    matches = []
    for found in walk.found:
        token.check()
        if not folded or fold(entity_type(found.entity)) in folded:
            matches.append(found)
    matches.sort(key=lambda f: (-f.score, f.distance, f.entity.id))
    neighbors = []
    for found in matches[:limit]:
        token.check()
        neighbors.append(_neighbor(found, content_max))
    return {
        "origins": origins,
        "unresolved": unresolved,
        "neighbors": neighbors,
        "total": len(matches),
        "depth": depth,
        "limit": limit,
        "truncated": len(matches) > limit or walk.cut,
        "filters": {
            "relationship_types": relationship_types,
            "types": wanted_types,
            "include_incoming": include_incoming,
            "project": project,
            "content_max_chars": content_max,
        },
    }


def _seeds(
    snapshot: Snapshot, entity_ids: list[str], project: str | None, token: CancelToken
) -> tuple[list[Entity], list[str], list[str]]:
    """(seed entities, their canonical IDs, the IDs not walked), all in request order.

    Repeated IDs count once. IDs past the first eight are never resolved, so "too many" and
    "absent" are reported alike and the walk never silently drops a seed it looked at.
    """
    distinct = list(dict.fromkeys(entity_ids))
    seeds: dict[str, Entity] = {}
    unresolved: list[str] = []
    for value in distinct[:MAX_ORIGINS]:
        token.check()
        entity = resolve(snapshot, value, project)
        if entity is None:
            unresolved.append(value)
        else:
            # Two spellings of one locator (encoded and plain) are one seed.
            seeds.setdefault(entity.id, entity)
    unresolved.extend(distinct[MAX_ORIGINS:])
    return list(seeds.values()), list(seeds), unresolved


def bfs(graph: GraphView, seeds: list[Entity], depth: int, token: CancelToken) -> Walk:
    """Breadth-first over the allowed edges, at most ``depth`` hops from the nearest seed.

    Each level expands its frontier in ID order. A node joins at the first distance any edge
    reaches it (the visited set also breaks cycles, and seeds are never neighbours); among the
    edges from the previous level that reach it, the best is kept: highest weight, then
    relationship, direction, predecessor ID and edge ends, so the choice never depends on
    iteration order.
    """
    budget = WalkBudget(MAX_WALK_EDGES)
    visited = {seed.id for seed in seeds}
    frontier = sorted(seeds, key=lambda e: e.id)
    found: list[Found] = []
    walk_community = graph.allows(SHARES_COMMUNITY)
    for distance in range(1, depth + 1):
        best: dict[str, tuple[tuple[Any, ...], Step, Entity]] = {}
        counts: dict[str, int] = {}

        def offer(
            step: Step,
            node: Entity,
            edges: int = 1,
            best: dict[str, tuple[tuple[Any, ...], Step, Entity]] = best,
            counts: dict[str, int] = counts,
        ) -> None:
            target = step.target.id
            key = (-step.weight, step.relationship, step.direction, node.id,
                   step.edge_from, step.edge_to)
            counts[target] = counts.get(target, 0) + edges
            current = best.get(target)
            if current is None or key < current[0]:
                best[target] = (key, step, node)

        for node in frontier:
            for step in graph.steps(node, budget, token, visited, community=False):
                if step.target.id not in visited:
                    offer(step, node)
            if budget.exhausted:
                break
        if walk_community and not budget.exhausted:
            _offer_communities(graph, frontier, visited, budget, token, offer)
        level = []
        for target, (_key, step, node) in sorted(best.items()):
            token.check()
            level.append(Found(step.target, distance, step, node, counts[target]))
        found.extend(level)
        visited.update(best)
        frontier = [f.entity for f in level]
        if budget.exhausted or not frontier:
            break
    return Walk(tuple(found), budget.exhausted)


def _offer_communities(
    graph: GraphView,
    frontier: list[Entity],
    visited: set[str],
    budget: WalkBudget,
    token: CancelToken,
    offer: Any,
) -> None:
    """SHARES_COMMUNITY edges of one level, each tag's members examined once.

    Every frontier node carrying a tag reaches the same members, so the tag is expanded once,
    from the first such node in ID order: its key (predecessor ID) is the smallest any of them
    would give, so the kept edge is the one a node-by-node expansion would keep. Each member
    still counts one edge per frontier node sharing the tag (``edge_count``).
    """
    carriers: dict[str, tuple[Entity, int]] = {}  # tag -> (first frontier node, nodes with it)
    for node in frontier:  # already in ID order
        if node.section is not None:
            continue
        for tag in sorted(set(concept_tags(node.doc.fm))):
            first, count = carriers.get(tag, (node, 0))
            carriers[tag] = (first, count + 1)
    concepts = graph.snapshot.concepts
    for tag in sorted(carriers):
        node, carriers_count = carriers[tag]
        for other in graph.tag_members.get(tag, ()):
            token.check()
            if not budget.take():
                return
            if other in visited:
                continue
            # Sharing a tag has no direction; it is reported as leaving the expanded node.
            step = Step(concept_entity(concepts[other]), SHARES_COMMUNITY, OUTGOING,
                        COMMUNITY_WEIGHT, node.concept_id, other)
            offer(step, node, carriers_count)


def _neighbor(found: Found, content_max: int) -> dict[str, Any]:
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
        community = shared_tags(found.predecessor.doc, doc)[:MAX_METADATA_TAGS]
    return {
        "id": entity.id,
        "type": entity_type(entity),
        "name": entity_name(entity),
        "relationship": step.relationship,
        "direction": step.direction,
        "distance": found.distance,
        "score": found.score,
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
            "passage_total": len(doc.markdown.sections) if section is not None else None,
            "parent_entity_id": entity.concept_id if section is not None else None,
            "breadcrumb": breadcrumb(section) if section is not None else None,
            "widen_with": "fetch_slice" if section is not None else None,
        },
    }
