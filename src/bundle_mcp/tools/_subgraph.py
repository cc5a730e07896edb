"""The budgeted k-hop extraction behind query_subgraph, visualize_graph and search_semantic.

DESIGN.md §3 maps the seed-004 graph onto a bundle. An *object* is a concept (type = the OKF
``type``; name = title, else the first heading, else the last ID segment) or, only when
``PART_OF`` is requested, a section (type ``section``, ID = its locator). A *relation* is a
resolved navigation link (``LINKS_TO``), a typed relation (its declared type), ``PART_OF``
(section → concept) or ``SHARES_COMMUNITY`` (two concepts sharing a tag).

The algorithm, and the faults of the reference it fixes (research/peers.md §1.2):

1. Walk: breadth-first from the seeds over the selected relation types, in both directions, to
   ``depth`` hops (clamped 0-3). Filters do not block the walk: an object behind a filtered
   hop stays reachable, as in the seeds' own systems.
2. Filter *before* any budget is spent: ``include_object_types`` and ``structure_filters`` drop
   non-seed objects, so the budget is never spent on something a filter removes and
   ``suggested_next_seed`` never names an excluded object.
3. Rank by one total order: seeds first, then distance ascending, then type weight descending,
   then ID ascending (never hash order).
4. Take greedily: ``max_objects`` counts seeds too and stops the selection; a candidate whose
   token cost would overflow ``max_tokens`` is skipped and smaller later ones are still tried.
   An object's cost includes the relations it brings to what is already kept, so the sum over
   the returned items never exceeds the budget, in either mode.
"""

from __future__ import annotations

import hashlib
import math
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from ..cancel import CancelToken
from ..model import Document, Edge, Snapshot, canonical_json, thaw
from ..okf.names import concept_name
from ..okf.properties import status_state, tags, text_field, trust
from ._common import invalid_field

LINKS_TO = "LINKS_TO"
PART_OF = "PART_OF"
SHARES_COMMUNITY = "SHARES_COMMUNITY"
SECTION_TYPE = "section"

MAX_DEPTH = 3
MAX_OBJECTS = 200
MAX_TOKENS = 100_000
DEFAULT_MAX_TOKENS = 4000
DEFAULT_TYPE_WEIGHT = 1.0
CHARS_PER_TOKEN = 4


# -- the request ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Selection:
    """Which relation types a call walks and returns."""

    links: bool
    typed: frozenset[str] | None  # None: every declared relation type
    part_of: bool
    community: bool

    @classmethod
    def from_names(cls, names: list[str] | None) -> Selection:
        # An empty list means the same as no list: clients that always send the field with
        # nothing chosen expect the default, and depth 0 already says "seeds only".
        if not names:
            return cls(links=True, typed=None, part_of=False, community=False)
        chosen = frozenset(names)
        return cls(
            links=LINKS_TO in chosen,
            typed=chosen,
            part_of=PART_OF in chosen,
            community=SHARES_COMMUNITY in chosen,
        )

    def takes(self, edge: Edge) -> bool:
        if edge.kind == "navigation":
            return self.links
        return self.typed is None or edge.relation_type in self.typed


@dataclass(frozen=True)
class Query:
    """One validated, clamped extraction request."""

    seeds: tuple[str, ...] | None  # None: no seeds, list concepts by ID (visualize_graph only)
    depth: int
    selection: Selection
    object_types: frozenset[str] | None
    filters: tuple[tuple[str, Any], ...]
    type_weights: Mapping[str, float]
    max_objects: int
    max_tokens: int
    compact: bool


def clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def int_param(params: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    """An integer argument with its default, clamped into ``[low, high]``.

    The input contract already rejects non-integers; this guards direct callers.
    """
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_field(f"$.{name}", f"{name} must be an integer")
    return clamp(value, low, high)


def _names(params: Mapping[str, Any], name: str) -> list[str] | None:
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise invalid_field(f"$.{name}", f"{name} must be a list of non-blank strings")
    return list(value)


def seed_list(params: Mapping[str, Any], name: str = "seed_ids") -> tuple[str, ...]:
    """The seeds in request order, repeats dropped; a blank ID is ``invalid_request``."""
    value = _names(params, name)
    return tuple(dict.fromkeys(value or ()))


def _weights(params: Mapping[str, Any]) -> Mapping[str, float]:
    value = params.get("type_weights") or {}
    if not isinstance(value, Mapping):
        raise invalid_field("$.type_weights", "type_weights must map object types to numbers")
    out: dict[str, float] = {}
    for key, weight in value.items():
        if isinstance(weight, bool) or not isinstance(weight, (int, float)):
            raise invalid_field("$.type_weights", "every type weight must be a number")
        if not math.isfinite(weight):
            raise invalid_field("$.type_weights", "type weights must be finite numbers")
        out[key] = float(weight)
    return types.MappingProxyType(out)


def _filters(params: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    value = params.get("structure_filters") or {}
    if not isinstance(value, Mapping):
        raise invalid_field("$.structure_filters", "structure_filters must be an object")
    return tuple(sorted(value.items()))


def parse_query(
    params: Mapping[str, Any],
    *,
    seeds: tuple[str, ...] | None,
    default_depth: int,
    default_max_objects: int,
    compact: bool,
) -> Query:
    depth = int_param(params, "depth", default_depth, 0, MAX_DEPTH)
    object_types = _names(params, "include_object_types")
    return Query(
        seeds=seeds,
        depth=0 if seeds is None else depth,
        selection=Selection.from_names(_names(params, "include_relation_types")),
        object_types=frozenset(object_types) if object_types else None,
        filters=_filters(params),
        type_weights=_weights(params),
        max_objects=int_param(params, "max_objects", default_max_objects, 1, MAX_OBJECTS),
        max_tokens=int_param(params, "max_tokens", DEFAULT_MAX_TOKENS, 1, MAX_TOKENS),
        compact=compact,
    )


# -- the graph of one call -----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SectionObject:
    id: str
    concept_id: str
    heading: str | None
    line_start: int
    line_end: int


@dataclass(frozen=True, slots=True)
class Rel:
    """One relation between two objects, in both renderings' terms."""

    source: str
    target: str
    type: str
    kind: str  # navigation | relation | part_of | shares_community
    source_ref: str
    target_ref: str
    shared_tags: tuple[str, ...] = ()


def locator(path: str, line_start: int, line_end: int) -> str:
    """A section's ID: the same citable locator search_sections returns."""
    return f"{quote(path, safe='/')}#L{line_start}-L{line_end}"


class Graph:
    """The objects and relations a snapshot offers under one relation selection.

    Built per call and never shared. Sections are indexed per concept on first use (only the
    concepts a walk reaches are parsed), and tags only when SHARES_COMMUNITY is asked for, so
    the default walk costs nothing for either.
    """

    def __init__(self, snapshot: Snapshot, selection: Selection, token: CancelToken) -> None:
        self.snapshot = snapshot
        self.selection = selection
        self.sections: dict[str, SectionObject] = {}
        self._sections_of: dict[str, tuple[str, ...]] = {}
        self.tags_of: dict[str, frozenset[str]] = {}
        self.members: dict[str, tuple[str, ...]] = {}
        if selection.community:
            self._index_tags(token)

    def sections_of(self, concept_id: str) -> tuple[str, ...]:
        """The section IDs of a concept (none unless PART_OF is selected), indexing them once."""
        if not self.selection.part_of:
            return ()
        known = self._sections_of.get(concept_id)
        if known is not None:
            return known
        doc = self.snapshot.concepts[concept_id]
        ids = []
        for section in doc.markdown.sections:
            lines = doc.lines[section.line_start - 1 : section.line_end]
            if not "".join(lines).strip():
                continue  # blank spans are not passages (as in search_sections)
            sid = locator(doc.path, section.line_start, section.line_end)
            if sid in self.snapshot.concepts:
                continue  # a concept literally named like a locator keeps its ID
            self.sections[sid] = SectionObject(
                sid, concept_id, section.heading, section.line_start, section.line_end
            )
            ids.append(sid)
        self._sections_of[concept_id] = tuple(ids)
        return self._sections_of[concept_id]

    def _index_tags(self, token: CancelToken) -> None:
        members: dict[str, list[str]] = {}
        for concept_id, doc in self.snapshot.concepts.items():
            token.check()
            own = frozenset(tags(doc.fm))
            self.tags_of[concept_id] = own
            for tag in sorted(own):
                members.setdefault(tag, []).append(concept_id)
        self.members = {tag: tuple(ids) for tag, ids in members.items()}

    # objects

    def has(self, object_id: str) -> bool:
        if object_id in self.snapshot.concepts:
            return True
        if not self.selection.part_of or "#L" not in object_id:
            return False
        # A locator names its file: index that concept's sections, then look the ID up.
        path = unquote(object_id.rsplit("#L", 1)[0])
        doc = self.snapshot.documents.get(path)
        if doc is None or doc.concept_id is None or doc.concept_id not in self.snapshot.concepts:
            return False
        return object_id in self.sections_of(doc.concept_id)

    def concept_of(self, object_id: str) -> Document:
        section = self.sections.get(object_id)
        return self.snapshot.concepts[section.concept_id if section else object_id]

    def type_of(self, object_id: str) -> str:
        if object_id in self.sections:
            return SECTION_TYPE
        return text_field(self.snapshot.concepts[object_id].fm, "type")

    def known_types(self, token: CancelToken) -> frozenset[str]:
        def collect() -> frozenset[str]:
            found = {SECTION_TYPE}
            for doc in self.snapshot.concepts.values():
                token.check()
                found.add(text_field(doc.fm, "type"))
            return frozenset(found)

        # A pure function of the snapshot: computed once, kept with it.
        return self.snapshot.memo.get("subgraph-known-types", collect)

    # walking

    def neighbours(self, object_id: str, seen_tags: set[str]) -> Iterator[str]:
        """Objects one hop away, either direction. ``seen_tags`` makes each tag expand once."""
        section = self.sections.get(object_id)
        if section is not None:
            yield section.concept_id
            return
        for edge in self.snapshot.edges_by_concept.get(object_id, ()):
            if self.selection.takes(edge):
                yield edge.target_id if edge.source_id == object_id else edge.source_id
        yield from self.sections_of(object_id)
        # A tag group is expanded once, by the first (so nearest) object that has it: later
        # expansions could only reach the same members at a larger distance. This keeps the walk
        # linear in the group sizes instead of quadratic in them.
        for tag in sorted(self.tags_of.get(object_id, ())):
            if tag not in seen_tags:
                seen_tags.add(tag)
                yield from self.members[tag]

    def relations(self, object_id: str, kept: Kept, *, loops: bool = True) -> Iterator[Rel]:
        """Every selected relation between ``object_id`` and a kept object.

        With ``loops``, a relation from the object to itself counts too (it is returned once the
        object is kept); adjacency checks leave it out.
        """
        section = self.sections.get(object_id)
        if section is not None:
            if section.concept_id in kept.ids:
                yield _part_of(section)
            return
        for edge in self.snapshot.edges_by_concept.get(object_id, ()):
            if not self.selection.takes(edge):
                continue
            other = edge.target_id if edge.source_id == object_id else edge.source_id
            if other in kept.ids or (loops and other == object_id):
                yield _edge_rel(edge)
        for sid in self.sections_of(object_id):
            if sid in kept.ids:
                yield _part_of(self.sections[sid])
        mine = self.tags_of.get(object_id, frozenset())
        others: set[str] = set()
        for tag in mine:
            others.update(kept.by_tag.get(tag, ()))
        for other in sorted(others - {object_id}):
            shared = tuple(sorted(mine & self.tags_of[other]))
            low, high = sorted((object_id, other))
            yield Rel(low, high, SHARES_COMMUNITY, "shares_community", low, high, shared)


def _edge_rel(edge: Edge) -> Rel:
    if edge.kind == "navigation":
        return Rel(
            edge.source_id, edge.target_id, LINKS_TO, "navigation", edge.source_ref, edge.target_ref
        )
    assert edge.relation_type is not None
    # The refs keep their fragments (b#part): two relations that differ only there stay two.
    return Rel(
        edge.source_id,
        edge.target_id,
        edge.relation_type,
        "relation",
        edge.source_ref,
        edge.target_ref,
    )


def _part_of(section: SectionObject) -> Rel:
    return Rel(section.id, section.concept_id, PART_OF, "part_of", section.id, section.concept_id)


class Kept:
    """The growing selection: IDs, and kept concepts by tag for SHARES_COMMUNITY lookups."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.ids: set[str] = set()
        self.by_tag: dict[str, list[str]] = {}

    def add(self, object_id: str, graph: Graph) -> None:
        self.order.append(object_id)
        self.ids.add(object_id)
        for tag in graph.tags_of.get(object_id, ()):
            self.by_tag.setdefault(tag, []).append(object_id)


# -- rendering -----------------------------------------------------------------------------


def props(doc: Document) -> dict[str, Any]:
    """The card-like frontmatter fields every object carries (sections: their concept's)."""
    fm = doc.fm
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


def render_object(
    graph: Graph, object_id: str, distance: int, seed: bool, compact: bool
) -> dict[str, Any]:
    doc = graph.concept_of(object_id)
    section = graph.sections.get(object_id)
    if section is None:
        name = concept_name(doc)
    else:
        heading = (section.heading or "").strip()
        name = heading or concept_name(doc)  # the preamble is named after its concept
    node: dict[str, Any] = {
        "id": object_id,
        "type": graph.type_of(object_id),
        "name": name,
        "props": props(doc),
    }
    if compact:
        return node
    return {
        **node,
        "kind": "concept" if section is None else "section",
        "path": doc.path,
        "concept_id": doc.concept_id,
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


def passes(graph: Graph, object_id: str, query: Query) -> bool:
    if query.object_types is not None and graph.type_of(object_id) not in query.object_types:
        return False
    fm = graph.concept_of(object_id).fm
    return all(field_matches(fm, field, value) for field, value in query.filters)


# -- extraction ----------------------------------------------------------------------------


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


@dataclass(frozen=True, slots=True)
class _Candidate:
    id: str
    distance: int
    seed: bool
    weight: float

    def rank(self) -> tuple[int, int, float, str]:
        return (0 if self.seed else 1, self.distance, -self.weight, self.id)


def walk(graph: Graph, seeds: tuple[str, ...], depth: int, token: CancelToken) -> dict[str, int]:
    """Hop distance from the nearest seed for every object within ``depth``."""
    distance = dict.fromkeys(seeds, 0)
    frontier = list(seeds)
    seen_tags: set[str] = set()
    for hop in range(1, depth + 1):
        reached: list[str] = []
        for object_id in frontier:
            token.check()
            for other in graph.neighbours(object_id, seen_tags):
                token.check()
                if other not in distance:
                    distance[other] = hop
                    reached.append(other)
        frontier = reached
    return distance


def extract(snapshot: Snapshot, query: Query, token: CancelToken) -> Extraction:
    graph = Graph(snapshot, query.selection, token)
    known = graph.known_types(token)
    weights = query.type_weights
    ignored = tuple(sorted(t for t in weights if t not in known))

    if query.seeds is None:
        seeds: tuple[str, ...] = ()
        unresolved: tuple[str, ...] = ()
        distance = dict.fromkeys(snapshot.concepts, 0)
    else:
        seeds = tuple(s for s in query.seeds if graph.has(s))
        unresolved = tuple(s for s in query.seeds if not graph.has(s))
        distance = walk(graph, seeds, query.depth, token)

    seed_set = set(seeds)
    candidates: list[_Candidate] = []
    for object_id, hops in distance.items():
        token.check()
        if object_id in seed_set or passes(graph, object_id, query):
            weight = weights.get(graph.type_of(object_id), DEFAULT_TYPE_WEIGHT)
            candidates.append(_Candidate(object_id, hops, object_id in seed_set, weight))
    candidates.sort(key=_Candidate.rank)

    selection = _select(graph, candidates, query, token)
    subgraph = selection.subgraph(query.compact)
    digest = hashlib.sha256(canonical_json(subgraph).encode("utf-8")).hexdigest()
    return Extraction(
        subgraph=subgraph,
        root_hash=f"sha256:{digest}",
        total_found=len(candidates),
        returned=len(selection.objects),
        truncation_reason=selection.reason,
        suggested_next_seed=_suggest(graph, candidates, selection.kept, token),
        unresolved=unresolved,
        ignored_type_weights=ignored,
        estimated_tokens=selection.used,
        applied=types.MappingProxyType(
            {"depth": query.depth, "max_objects": query.max_objects, "max_tokens": query.max_tokens}
        ),
    )


class _Selection:
    """The objects and relations taken so far, and the tokens they cost."""

    def __init__(self) -> None:
        self.kept = Kept()
        self.objects: list[dict[str, Any]] = []
        self.relations: dict[str, dict[str, Any]] = {}  # canonical JSON → relation (dedup)
        self.used = 0
        self.reason: str | None = None

    def note(self, reason: str) -> None:
        if self.reason is None:  # the budget that first left an object out
            self.reason = reason

    def subgraph(self, compact: bool) -> dict[str, Any]:
        relations = sorted(
            self.relations.items(),
            key=lambda kv: (kv[1]["source"], kv[1]["target"], kv[1]["type"], kv[0]),
        )
        listed = [value for _key, value in relations]
        if compact:
            return {"nodes": self.objects, "edges": listed}
        return {"objects": self.objects, "relations": listed}


def _select(
    graph: Graph, candidates: list[_Candidate], query: Query, token: CancelToken
) -> _Selection:
    chosen = _Selection()
    # No object renders in fewer characters than one with an empty ID, type and name; once
    # the remaining budget is below that, every later candidate would be skipped anyway.
    floor = token_cost(_EMPTY_NODE)
    for candidate in candidates:
        token.check()
        if len(chosen.objects) >= query.max_objects:
            chosen.note("max_objects")
            break
        if query.max_tokens - chosen.used < floor:
            chosen.note("max_tokens")
            break
        node = render_object(graph, candidate.id, candidate.distance, candidate.seed, query.compact)
        cost = token_cost(node)
        if chosen.used + cost > query.max_tokens:
            chosen.note("max_tokens")  # too big on its own: its relations need not be priced
            continue
        fresh: dict[str, dict[str, Any]] = {}
        for rel in graph.relations(candidate.id, chosen.kept):
            token.check()
            rendered = render_relation(rel, query.compact)
            key = canonical_json(rendered)
            if key not in chosen.relations and key not in fresh:
                fresh[key] = rendered
                cost += token_cost(rendered)
        if chosen.used + cost > query.max_tokens:
            chosen.note("max_tokens")
            continue
        chosen.kept.add(candidate.id, graph)
        chosen.objects.append(node)
        chosen.relations.update(fresh)
        chosen.used += cost
    return chosen


# The smallest possible compact node: what the early stop in _select compares against.
_EMPTY_NODE = {
    "id": "",
    "type": "",
    "name": "",
    "props": {"status": None, "trust": "", "tags": [], "description": None, "stale_after": None},
}


def _suggest(
    graph: Graph, candidates: list[_Candidate], kept: Kept, token: CancelToken
) -> str | None:
    """The best left-out object adjacent to the kept ones, else the best left-out object."""
    first: str | None = None
    for candidate in candidates:
        token.check()
        if candidate.id in kept.ids:
            continue
        if first is None:
            first = candidate.id
            if not kept.ids:
                return first
        if next(graph.relations(candidate.id, kept, loops=False), None) is not None:
            return candidate.id
    return first
