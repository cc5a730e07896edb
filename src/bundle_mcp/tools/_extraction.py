"""The budgeted k-hop extraction behind query_subgraph, visualize_graph and search_semantic.

The graph (entities, edges, the walk) is :mod:`bundle_mcp.okf.graph`; this module ranks what the
walk found, takes it under the object and token budgets and renders it. An *object* is a concept
(type = its OKF ``type``, name = :func:`~bundle_mcp.okf.names.concept_name`) or, only when
``PART_OF`` is requested, a section (type ``section``, ID = its locator, named by its heading or
else after its concept).

The algorithm, and the faults of the graph systems seed 004 describes that it fixes (ties in hash
order, filters applied after the budget, seeds not counted; docs/DESIGN.md §3 and §7):

1. Walk: breadth-first from the seeds over the selected relation types, in both directions, to
   ``depth`` hops (clamped 0-3). Filters do not block the walk: an object behind a filtered
   hop stays reachable, as in the seeds' own systems.
2. Filter *before* any budget is spent: ``include_object_types``, ``structure_filters`` and
   search_semantic's concept filter (``Query.admitted``) drop non-seed objects, so the budget
   is never spent on something a filter removes and ``suggested_next_seed`` never names an
   excluded object.
3. Rank by one total order: seeds first, then distance ascending, then type weight descending,
   then ID ascending (never hash order).
4. Take greedily: ``max_objects`` counts seeds too and stops the selection; a candidate whose
   token cost would overflow ``max_tokens`` is skipped and smaller later ones are still tried.
   An object's cost includes the relations it brings to what is already kept, so the sum over
   the returned items never exceeds the budget, in either mode. A caller may add a budget of
   its own (:class:`Budget`: visualize_graph keeps its diagram within what a Mermaid renderer
   accepts); it is asked last, the same way, and named in ``truncation_reason`` when it first
   leaves an object out.

Nothing is kept between calls here; the snapshot's graph keeps its own derived data.
"""

from __future__ import annotations

import hashlib
import types
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any, NamedTuple, Protocol, cast

from ..cancel import CancelToken
from ..model import Concepts, Snapshot, canonical_json, thaw
from ..okf.graph import (
    COMMUNITY_KIND,
    OUTGOING,
    SHARES_COMMUNITY,
    UNBOUNDED,
    BundleGraph,
    Entity,
    Reach,
    Selection,
    Walk,
    entity_type,
    graph_of,
    walk,
)
from ..okf.names import name_of
from ..okf.properties import status_state, tags, trust
from ..okf.sections import section_name
from ._walk_params import Query

DEFAULT_TYPE_WEIGHT = 1.0
CHARS_PER_TOKEN = 4


@dataclass(frozen=True, slots=True)
class Rel:
    """One relation between two objects, in both renderings' terms: its ends in stored order."""

    source: str
    target: str
    type: str
    kind: str  # navigation | relation | part_of | shares_community
    source_ref: str
    target_ref: str
    shared_tags: tuple[str, ...] = ()


class Kept:
    """The growing selection: IDs, and kept concepts by tag for SHARES_COMMUNITY lookups."""

    def __init__(self, graph: BundleGraph, selection: Selection) -> None:
        self._graph = graph
        self._community = selection.community
        self.order: list[str] = []
        self.ids: set[str] = set()
        self.by_tag: dict[str, list[Entity]] = {}

    def add(self, entity: Entity) -> None:
        self.order.append(entity.id)
        self.ids.add(entity.id)
        if self._community:
            for tag in self._graph.tags_of(entity):
                self.by_tag.setdefault(tag, []).append(entity)


def relations(
    graph: BundleGraph,
    entity: Entity,
    selection: Selection,
    kept: Kept,
    token: CancelToken,
    *,
    loops: bool = True,
) -> Iterator[Rel]:
    """Every selected relation between ``entity`` and a kept object.

    With ``loops``, a relation from the object to itself counts too (it is returned once the
    object is kept); adjacency checks leave it out.
    """
    for step in graph.steps_among(entity, selection, kept.ids, token, loops=loops):
        other = step.target.id
        if other in kept.ids or other == entity.id:
            if step.direction == OUTGOING:
                source, target = entity.id, other
            else:
                source, target = other, entity.id
            yield Rel(source, target, step.relationship, step.kind, step.edge_from,
                      step.edge_to)
    if not selection.community or entity.is_section:
        return
    mine = set(graph.tags_of(entity))
    others: dict[str, Entity] = {}
    for tag in mine:
        for member in kept.by_tag.get(tag, ()):
            others[member.id] = member
    others.pop(entity.id, None)
    for other_id in sorted(others):
        shared = tuple(sorted(mine.intersection(graph.tags_of(others[other_id]))))
        low, high = sorted((entity.id, other_id))
        # A shared tag has no direction: the pair is reported lowest ID first.
        yield Rel(low, high, SHARES_COMMUNITY, COMMUNITY_KIND, low, high, shared)


# -- rendering -----------------------------------------------------------------------------


def props(fm: Mapping[str, Any]) -> dict[str, Any]:
    """The card-like frontmatter fields every object carries (sections: their concept's), from
    the concept's ``fields``."""
    description = fm.get("description")
    after = fm.get("stale_after")
    return {
        "status": status_state(fm)["effective"],
        "trust": trust(fm),
        "tags": tags(fm),
        "description": description if isinstance(description, str) else None,
        # As written: these tools take no temporal profile, so the value is not interpreted.
        "stale_after": after if isinstance(after, str) else None,
    }


def render_object(entity: Entity, distance: int, seed: bool, compact: bool) -> dict[str, Any]:
    # A concept's object is rendered from its frontmatter: its document is built only when no
    # title names it (a restarted server's subgraph renders a thousand, from their rows).
    fields = entity.fields
    section = entity.section
    name = name_of(fields, lambda: entity.doc)
    if section is not None:
        name = section_name(section, untitled=name)
    node: dict[str, Any] = {
        "id": entity.id,
        "type": entity_type(entity),
        "name": name,
        "props": props(fields),
    }
    if compact:
        return node
    return {
        **node,
        "kind": "concept" if section is None else "section",
        "path": entity.path,
        "concept_id": entity.concept_id,
        "line_start": section.line_start if section else None,
        "line_end": section.line_end if section else None,
        "distance": distance,
        "seed": seed,
    }


def render_relation(rel: Rel, compact: bool) -> dict[str, Any]:
    # Compact edges keep the object ends only; fragments and kinds live in the full rendering.
    edge: dict[str, Any] = {"source": rel.source, "target": rel.target, "type": rel.type}
    if compact:
        return edge
    return {
        **edge,
        "kind": rel.kind,
        "source_ref": rel.source_ref,
        "target_ref": rel.target_ref,
        "shared_tags": list(rel.shared_tags),
    }


def token_cost(item: Any) -> int:
    """ceil(len(canonical JSON)/4): the estimate the tool descriptions promise."""
    return -(-len(canonical_json(item)) // CHARS_PER_TOKEN)


# -- filters -------------------------------------------------------------------------------


def _same(actual: Any, expected: Any) -> bool:
    """JSON equality: booleans are not numbers, 1 equals 1.0, containers compare deeply."""
    if isinstance(actual, bool) or isinstance(expected, bool):
        return type(actual) is type(expected) and actual == expected
    if isinstance(actual, (int, float)) and isinstance(expected, (int, float)):
        return actual == expected
    if isinstance(actual, list) and isinstance(expected, list):
        return len(actual) == len(expected) and all(map(_same, actual, expected))
    if isinstance(actual, dict) and isinstance(expected, dict):
        return actual.keys() == expected.keys() and all(
            _same(actual[k], expected[k]) for k in actual
        )
    return type(actual) is type(expected) and actual == expected


def field_matches(fm: Mapping[str, Any], field: str, expected: Any) -> bool:
    if field not in fm:
        # OKF: an absent status means stable; every other absent field matches nothing.
        return field == "status" and _same("stable", expected)
    actual = thaw(fm[field])
    if isinstance(actual, list) and any(_same(item, expected) for item in actual):
        return True
    return _same(actual, expected)


def passes(entity: Entity, query: Query) -> bool:
    if query.object_types is not None and entity_type(entity) not in query.object_types:
        return False
    if query.admitted is not None and entity.doc.concept_id not in query.admitted:
        return False
    fm = entity.doc.fm
    return all(field_matches(fm, field, value) for field, value in query.filters)


# -- extraction ----------------------------------------------------------------------------


class Budget(Protocol):
    """A caller's own budget over the rendered items, asked after the object and token budgets.

    ``admits`` sees a candidate object and the relations it would bring (both rendered), and
    ``take`` is called once it is kept; one instance serves one extraction.
    """

    @property
    def reason(self) -> str:
        """The ``truncation_reason`` reported when this budget first leaves an object out."""
        ...

    def admits(self, node: Mapping[str, Any], fresh: Sequence[Mapping[str, Any]]) -> bool: ...

    def take(self, node: Mapping[str, Any], fresh: Sequence[Mapping[str, Any]]) -> None: ...


@dataclass(frozen=True)
class Extraction:
    subgraph: Mapping[str, Any]
    root_hash: str
    total_found: int
    returned: int
    truncation_reason: str | None
    suggested_next_seed: str | None
    unresolved: tuple[str, ...]
    ignored_type_weights: tuple[str, ...]
    estimated_tokens: int
    applied: Mapping[str, int]

    @property
    def is_truncated(self) -> bool:
        return self.returned < self.total_found

    def budget_report(self) -> dict[str, Any]:
        """The truncation and budget fields query_subgraph and visualize_graph both report."""
        return {
            "total_found_nodes": self.total_found,
            "returned_nodes": self.returned,
            "is_truncated": self.is_truncated,
            "truncation_reason": self.truncation_reason,
            "suggested_next_seed": self.suggested_next_seed,
            "estimated_tokens": self.estimated_tokens,
            "unresolved": list(self.unresolved),
            "ignored_type_weights": list(self.ignored_type_weights),
            "applied": dict(self.applied),
        }


class _Candidate(NamedTuple):
    """An object the walk reached (or a seed), ranked before its entity is asked for: a
    depth-2 walk from the bench bundle's hub reaches 10,000 objects and the budget renders
    about 1,000, and a restarted server's first subgraph made an entity for each (about
    3.5 µs, 35 ms in all). ``node`` is the entity itself, or the walk's node at ``distance``
    (a place or a Reach), read through ``walked``. A tuple whose order is the ranking (a seed
    first, then by distance, type weight and ID: IDs differ, so the node is never compared),
    sorted in C."""

    later: int  # 0 for a seed
    distance: int
    negative_weight: float
    object_id: str
    node: Entity | Reach | int
    walked: Walk | None = None

    @property
    def seed(self) -> bool:
        return not self.later

    @property
    def entity(self) -> Entity:
        if self.walked is None:
            return cast(Entity, self.node)
        return self.walked.entity(cast("Reach | int", self.node), self.distance)


def seed_entity(graph: BundleGraph, seed: str, selection: Selection) -> Entity | None:
    """The object a seed names, taken as written: a concept ID, or a section's locator in the
    encoded spelling it is reported under, and a section only when ``PART_OF`` is selected."""
    entity = graph.resolve(seed, None)
    if entity is None or entity.id != seed:
        return None
    if entity.is_section and not selection.part_of:
        return None
    return entity


def extract(
    snapshot: Snapshot, query: Query, token: CancelToken, budget: Budget | None = None
) -> Extraction:
    graph = graph_of(snapshot)
    weights = query.type_weights
    # Every concept's type, asked only to name the weights of types no concept has: on a cold
    # start it builds every document.
    known = graph.known_types(token) if weights else frozenset()
    ignored = tuple(sorted(t for t in weights if t not in known))

    # Each object once: the seeds, then the walk's nodes level by level (a node is reached
    # once, never a seed), read as entities only when a filter, a type weight or the
    # rendering asks. Without filters every object passes, and without weights each weighs
    # the default: the usual request reads no object's frontmatter here.
    filtered = query.object_types is not None or query.admitted is not None or query.filters
    candidates: list[_Candidate] = []
    if query.seeds is None:
        seeds: tuple[Entity, ...] = ()
        unresolved: tuple[str, ...] = ()
        for concept_id in snapshot.concepts:
            candidates.append(_Candidate(1, 0, -DEFAULT_TYPE_WEIGHT, concept_id,
                                         graph.concept(concept_id)))
    else:
        named = {s: seed_entity(graph, s, query.selection) for s in query.seeds}
        seeds = tuple(e for e in named.values() if e is not None)
        unresolved = tuple(s for s, e in named.items() if e is None)
        # The walk is bounded by depth alone: total_found_nodes counts everything within it.
        found = walk(graph, seeds, query.selection, query.depth, UNBOUNDED, token)
        candidates.extend(_Candidate(0, 0, -DEFAULT_TYPE_WEIGHT, e.id, e) for e in seeds)
        for distance, level in enumerate(found.levels, 1):
            token.check()
            # In C: a level of places reads its IDs from its table.
            candidates.extend(map(_Candidate, repeat(1), repeat(distance),
                                  repeat(-DEFAULT_TYPE_WEIGHT), found.targets(level, distance),
                                  level, repeat(found)))
    if filtered or weights:
        candidates = _filtered(candidates, query, bool(filtered), token)
    candidates.sort()

    chosen = _select(graph, candidates, query, token, budget)
    subgraph = chosen.subgraph(query.compact)
    digest = hashlib.sha256(canonical_json(subgraph).encode("utf-8")).hexdigest()
    return Extraction(
        subgraph=subgraph,
        root_hash=f"sha256:{digest}",
        total_found=len(candidates),
        returned=len(chosen.objects),
        truncation_reason=chosen.reason,
        suggested_next_seed=_suggest(graph, candidates, query.selection, chosen.kept, token),
        unresolved=unresolved,
        ignored_type_weights=ignored,
        estimated_tokens=chosen.used,
        applied=types.MappingProxyType(
            {"depth": query.depth, "max_objects": query.max_objects, "max_tokens": query.max_tokens}
        ),
    )


class _Chosen:
    """The objects and relations taken so far, and the tokens they cost."""

    def __init__(self, kept: Kept) -> None:
        self.kept = kept
        self.objects: list[dict[str, Any]] = []
        self.relations: dict[str, dict[str, Any]] = {}  # canonical JSON → relation (dedup)
        self.used = 0
        self.reason: str | None = None

    def note(self, reason: str) -> None:
        if self.reason is None:  # the budget that first left an object out
            self.reason = reason

    def subgraph(self, compact: bool) -> dict[str, Any]:
        ordered = sorted(
            self.relations.items(),
            key=lambda kv: (kv[1]["source"], kv[1]["target"], kv[1]["type"], kv[0]),
        )
        listed = [value for _key, value in ordered]
        if compact:
            return {"nodes": self.objects, "edges": listed}
        return {"objects": self.objects, "relations": listed}


def _filtered(candidates: list[_Candidate], query: Query, filtered: bool, token: CancelToken
              ) -> list[_Candidate]:
    """The candidates the query's filters admit (``filtered``: it has some; a seed always
    passes), each with its type's weight."""
    weights = query.type_weights
    out = []
    for candidate in candidates:
        token.check()
        entity = candidate.entity
        if candidate.seed or not filtered or passes(entity, query):
            weight = weights.get(entity_type(entity), DEFAULT_TYPE_WEIGHT) if weights else \
                DEFAULT_TYPE_WEIGHT
            out.append(candidate._replace(negative_weight=-weight))
    return out


def _select(
    graph: BundleGraph,
    candidates: list[_Candidate],
    query: Query,
    token: CancelToken,
    budget: Budget | None,
) -> _Chosen:
    chosen = _Chosen(Kept(graph, query.selection))
    # No object renders in fewer characters than one with an empty ID, type and name; once
    # the remaining budget is below that, every later candidate would be skipped anyway.
    floor = token_cost(_EMPTY_NODE)
    concepts = graph.snapshot.concepts
    read_ahead = concepts.read_fields_ahead if isinstance(concepts, Concepts) else None
    for n, candidate in enumerate(candidates):
        token.check()
        if read_ahead is not None and not n % _FIELDS_AHEAD:
            # The fields of the next group's concepts, read at once where their documents are
            # not built (a section's concept is read with its own candidate, or alone).
            read_ahead(c.object_id for c in candidates[n:n + _FIELDS_AHEAD])
        if len(chosen.objects) >= query.max_objects:
            chosen.note("max_objects")
            break
        if query.max_tokens - chosen.used < floor:
            chosen.note("max_tokens")
            break
        node = render_object(candidate.entity, candidate.distance, candidate.seed, query.compact)
        cost = token_cost(node)
        if chosen.used + cost > query.max_tokens:
            chosen.note("max_tokens")  # too big on its own: its relations need not be priced
            continue
        fresh: dict[str, dict[str, Any]] = {}
        for rel in relations(graph, candidate.entity, query.selection, chosen.kept, token):
            token.check()
            rendered = render_relation(rel, query.compact)
            key = canonical_json(rendered)
            if key not in chosen.relations and key not in fresh:
                fresh[key] = rendered
                cost += token_cost(rendered)
        if chosen.used + cost > query.max_tokens:
            chosen.note("max_tokens")
            continue
        brought = list(fresh.values())
        if budget is not None:
            if not budget.admits(node, brought):
                chosen.note(budget.reason)
                continue
            budget.take(node, brought)
        chosen.kept.add(candidate.entity)
        chosen.objects.append(node)
        chosen.relations.update(fresh)
        chosen.used += cost
    return chosen


# How many candidates' fields _select reads ahead at once (at most a query's worth).
_FIELDS_AHEAD = 256


# The smallest possible compact node: what the early stop in _select compares against.
_EMPTY_NODE = {
    "id": "",
    "type": "",
    "name": "",
    "props": {"status": None, "trust": "", "tags": [], "description": None, "stale_after": None},
}


def _suggest(
    graph: BundleGraph,
    candidates: list[_Candidate],
    selection: Selection,
    kept: Kept,
    token: CancelToken,
) -> str | None:
    """The best left-out object adjacent to the kept ones, else the best left-out object."""
    first: str | None = None
    for candidate in candidates:
        token.check()
        if candidate.object_id in kept.ids:
            continue
        if first is None:
            first = candidate.object_id
            if not kept.ids:
                return first
        adjacent = relations(graph, candidate.entity, selection, kept, token, loops=False)
        if next(adjacent, None) is not None:
            return candidate.object_id
    return first
