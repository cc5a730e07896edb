"""The bundle as a graph: one entity and edge model, one adjacency, one walk (docs/DESIGN.md §3).

Entities. A *concept* (its ID is the concept ID) and a *section* of a concept (its ID is its
locator, :mod:`bundle_mcp.okf.sections`). An ID names one entity: a concept keeps its ID, so a
section whose locator is also some concept's ID is no entity of its own (it is still read
through its concept).

Edges. ``LINKS_TO`` (a resolved navigation link), a typed relation under its declared name,
a *field edge* (a path-valued frontmatter field naming a concept: :data:`FIELD_EDGE_OF`),
``PART_OF`` (a section → the concept it was cut from) and ``SHARES_COMMUNITY`` (two concepts
carrying a common tag; it has no direction). The first three are the one concept-edge model,
:class:`bundle_mcp.model.Edge`: its ``kind`` is get_neighbors' name for it (``navigation``,
``relation``, ``field``) and its ``relationship`` the name reported here (``LINKS_TO``, the
relation's type, the field edge's name), so no module maps one name to the other. Links and
relations are the snapshot's resolved edges (:attr:`Snapshot.edges_by_concept`); field edges
are derived beside them (:func:`field_edges`, kept in the slot :data:`FIELD_EDGES`), so the
snapshot's edges, and every tool that reports them (get_neighbors, get_semantic_graph), stay as
they were.

Adjacency. :meth:`BundleGraph.steps` lists the links, relations, field edges and ``PART_OF``
edges of one entity that a :class:`Selection` (edge kinds, direction, project) admits.
``SHARES_COMMUNITY`` is never listed per entity: a tag on n concepts is n² pairs, so :func:`walk`
expands each tag once per level from the tag index, and callers test a pair with
:meth:`BundleGraph.tags_of`.

Walk. :func:`walk` is the one breadth-first walk, in a fixed order, with a :class:`Budget` that
decides how much work it may do (arc by arc, or a level at once over the warm-up's numpy
columns of the same adjacency, :mod:`bundle_mcp.okf.walk_arrays`, with the same result):
expand_neighbors caps the edges it examines (:class:`EdgeBudget`); query_subgraph walks
:data:`UNBOUNDED`, because depth (at most 3) bounds its walk and its object and token budgets
apply to the ranked result, whose total must count everything within depth.

Caching. What depends on the snapshot alone (the concept entities, each concept's sections, each
concept's tags, the arcs of each concept a walk expanded (its edges with their ranking keys
built, :meth:`BundleGraph.arcs`), the tag index and the inbound-link counts per project, the
known types) lives in one :class:`BundleGraph` per snapshot, kept in the snapshot index (the
slot :data:`GRAPH`, :func:`graph_of`) and built part by part on first use. Every
call on that snapshot shares it and it goes with the snapshot: a new snapshot builds its own, so
no call ever sees another snapshot's graph. What depends on a call's arguments (the selection,
the budget, the visited set) lives in that call only.
"""

from __future__ import annotations

import itertools
import json
import operator
import re
import sys
import threading
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

from ..cancel import CancelToken
from ..derived import Slot, built_value, of_snapshot
from ..model import (
    FIELD,
    LINKS_TO,
    NAVIGATION,
    RELATION,
    Concepts,
    Document,
    Edge,
    Memo,
    Section,
    Snapshot,
    edge_kind,
    edge_order,
    edge_relationship,
    edge_source_ref,
    edge_target_ref,
    revision_edges,
    revision_value,
)
from .field_paths import (
    ATTESTER_RESOURCE,
    COMPUTATION,
    EXECUTOR_RESOURCE,
    RESOURCE,
    SOURCE_RESOURCE,
    path_fields_of,
)
from .ids import concept_id_for_path
from .kept_spans import SPANS_NAME, KeptSpans, packed_spans, span_order, unpacked_spans
from .names import name_of
from .properties import tags as concept_tags
from .properties import text_field
from .sections import locator, parse_locator, section_name, section_number_at

if TYPE_CHECKING:
    from .walk_arrays import BestArcs, WalkArrays

# Relationship names, as tools report and filter them (a typed relation goes by its own name;
# a link's, LINKS_TO, is the edge model's).
PART_OF = "PART_OF"
SHARES_COMMUNITY = "SHARES_COMMUNITY"

# Field edges (OKF v0.2 §6.2): a path-valued frontmatter field whose own reading names an
# existing concept is an edge from the concept that writes it to that concept, under these names.
SOURCED_FROM = "SOURCED_FROM"
EXECUTED_BY = "EXECUTED_BY"
ATTESTED_BY = "ATTESTED_BY"
COMPUTED_BY = "COMPUTED_BY"
DESCRIBES = "DESCRIBES"
FIELD_EDGE_OF: Mapping[str, str] = types.MappingProxyType(
    {
        SOURCE_RESOURCE: SOURCED_FROM,
        EXECUTOR_RESOURCE: EXECUTED_BY,
        ATTESTER_RESOURCE: ATTESTED_BY,
        COMPUTATION: COMPUTED_BY,
        RESOURCE: DESCRIBES,
    }
)
FIELD_EDGE_NAMES = frozenset(FIELD_EDGE_OF.values())

# Edge kinds, as query_subgraph's full rendering reports them: a concept edge's own kind
# (model.NAVIGATION, model.RELATION, model.FIELD), and these two, which are no concept edge.
PART_OF_KIND = "part_of"
FIELD_KIND = FIELD
COMMUNITY_KIND = "shares_community"

OUTGOING = "outgoing"
INCOMING = "incoming"

SECTION_TYPE = "section"  # the type of every section entity

# How strongly each kind of edge relates its ends; the walk keeps the strongest edge into a node.
# A declared relation is an author's explicit statement, a link is navigation the author chose,
# a section is part of what was already found, and a shared tag is the weakest evidence.
# A field edge is declared in frontmatter like a relation, so it weighs as much.
RELATION_WEIGHT = 1.0
FIELD_WEIGHT = RELATION_WEIGHT
LINKS_TO_WEIGHT = 0.8
PART_OF_WEIGHT = 0.6
COMMUNITY_WEIGHT = 0.4
EDGE_WEIGHT: Mapping[str, float] = types.MappingProxyType(
    {NAVIGATION: LINKS_TO_WEIGHT, RELATION: RELATION_WEIGHT, FIELD: FIELD_WEIGHT}
)


def _warm_graph(snapshot: Snapshot, token: CancelToken) -> None:
    """The whole-snapshot parts of the graph a walk, a summary or a subgraph reads first."""
    graph = graph_of(snapshot)
    graph.inbound_counts(None, token)
    graph.tag_members(None, token)
    graph.known_types(token)
    graph.keep_spans(token)


def _warm_field_edges(snapshot: Snapshot, token: CancelToken) -> None:
    field_edges(snapshot, token)


def _warm_walk_arrays(snapshot: Snapshot, token: CancelToken) -> None:
    # Imported here: numpy comes with it, and no call's path builds the arrays.
    from . import walk_arrays

    def build() -> WalkArrays:
        graph = graph_of(snapshot)
        # The graph's read of the kept arrays, shared with the calls (one read a snapshot).
        kept = graph.kept_walk_arrays()
        if kept is not None:
            return kept
        ids = tuple(sorted(snapshot.concepts))
        fields = _arrays_field_edges(snapshot, token)
        token.check()
        section_arcs, sections = graph.section_counts(ids, token)
        token.check()
        arrays = walk_arrays.build(walk_arrays.Adjacency(
            ids, snapshot.edges, fields, EDGE_WEIGHT, INCOMING < OUTGOING, section_arcs,
            sections), token)
        if snapshot.inbound is not None and snapshot.loaded:
            # Only a capture loaded from the files, which is what a restart finds: after a
            # change this process builds its own again, and each change would write the
            # columns (about 24 MB at 50,000 concepts).
            snapshot.inbound.keep_bytes(snapshot.revision, walk_arrays.STORED_NAME,
                                        walk_arrays.packed(arrays, len(snapshot.edges),
                                                           EDGE_WEIGHT, INCOMING < OUTGOING))
        return arrays

    of_snapshot(snapshot, WALK_ARRAYS, build, check=token.check)


def _arrays_field_edges(snapshot: Snapshot, token: CancelToken | None) -> tuple[Edge, ...]:
    """The field edges in the walk arrays' order (by source, relationship, target), each
    once."""
    return tuple(sorted((e for concept_id, found in field_edges(snapshot, token).items()
                         for e in found if e.source_id == concept_id), key=_field_order))


def _kept_walk_arrays(snapshot: Snapshot) -> WalkArrays | None:
    """The walk arrays an earlier process kept for the snapshot's revision, read back over
    the snapshot's edges (made when a walk reports them); ``None`` when none are kept or they
    do not read back whole (:func:`~bundle_mcp.okf.walk_arrays.unpacked`)."""
    from . import walk_arrays

    store = snapshot.inbound
    data = None if store is None else store.stored_bytes(snapshot.revision,
                                                         walk_arrays.STORED_NAME)
    if data is None:
        return None
    edges = walk_arrays.KeptEdges(snapshot, snapshot.edge_count(),
                                  _arrays_field_edges(snapshot, None))
    return walk_arrays.unpacked(data, tuple(sorted(snapshot.concepts)), edges, EDGE_WEIGHT,
                                INCOMING < OUTGOING)


GRAPH: Slot[BundleGraph] = Slot(
    "graph", "snapshot",
    "entities, adjacency and tag index of the traversal verbs (BundleGraph)",
    _warm_graph,
)
FIELD_EDGES: Slot[Mapping[str, tuple[Edge, ...]]] = Slot(
    "field_edges", "snapshot",
    "the walk's field edges (model.Edge of kind field) from path-valued frontmatter fields "
    "(sources[].resource, executor.resource, attester.resource, computation, resource) to the "
    "concepts they name, per concept; Snapshot.edges stays links and relations only",
    _warm_field_edges,
)
WALK_ARRAYS: Slot[WalkArrays] = Slot(
    "walk_arrays", "snapshot",
    "every concept's arcs (links, relations, field edges) as numpy columns with their keys' "
    "ranks, so a walk with every edge selected expands a level in a few array operations "
    "(okf/walk_arrays.py); built by the warm-up only, a walk before it goes arc by arc",
    _warm_walk_arrays,
)
SLOTS = (FIELD_EDGES, GRAPH, WALK_ARRAYS)

ELLIPSIS = "…"
_NON_SPACE = re.compile(r"\S+")
_SPACES = (" ", "\t", "\n", "\r", "\f", "\v")


# --------------------------------------------------------------------------------------------
# The model


@dataclass(frozen=True, slots=True)
class Entity:
    """A concept, or one section of a concept (``section_number`` set: the section's place in
    its document's ``sections``; ``id`` is then its locator).

    The concept's document is the snapshot's, built when first asked for (:attr:`doc`), and a
    section's :class:`Section` is decoded when first asked for (:attr:`section`): a walk that
    reaches thousands of concepts and their sections ranks them by ID and distance and renders
    a few, and a restarted server builds and decodes only those few."""

    id: str
    concept_id: str
    concepts: Mapping[str, Document] = field(repr=False, compare=False)  # the snapshot's
    section_number: int | None = None
    # The document once asked for (or given: a section's): a memo of ``concepts``' own, as
    # a walk's rendering reads it several times an entity.
    _doc: Document | None = field(default=None, repr=False, compare=False)
    # The section once asked for (or given), a memo of ``doc.sections[section_number]``.
    _section: Section | None = field(default=None, repr=False, compare=False)
    # The frontmatter once asked for without the document (:attr:`fields`), a memo too.
    _fields: Mapping[str, Any] | None = field(default=None, repr=False, compare=False)

    @property
    def doc(self) -> Document:
        doc = self._doc
        if doc is None:
            doc = self.concepts[self.concept_id]
            object.__setattr__(self, "_doc", doc)  # frozen: a memo of a pure lookup
        return doc

    @property
    def path(self) -> str:
        """The path of the concept's file (a section's: its concept's), without building it."""
        doc = self._doc
        if doc is not None:
            return doc.path
        concepts = self.concepts
        if isinstance(concepts, Concepts):
            return concepts.paths[self.concept_id]
        return self.doc.path

    @property
    def fields(self) -> Mapping[str, Any]:
        """The concept's frontmatter key by key (``Document.fields``; a section's is its
        concept's), without building the document when it is not built and its parse cache
        row has it (``Concepts.fields_of``): pricing and rendering a subgraph read the type,
        the name and the card fields of a thousand concepts."""
        doc = self._doc
        if doc is not None:
            return doc.fields
        found = self._fields
        if found is None:
            concepts = self.concepts
            if not isinstance(concepts, Concepts):
                return self.doc.fields
            found = concepts.fields_of(self.concept_id)
            object.__setattr__(self, "_fields", found)  # frozen: a memo of a pure lookup
        return found

    @property
    def section(self) -> Section | None:
        """The section this entity is, ``None`` for a concept (ask :attr:`is_section` to tell
        them apart without decoding the section)."""
        number = self.section_number
        if number is None:
            return None
        section = self._section
        if section is None:
            section = self.doc.sections[number]
            object.__setattr__(self, "_section", section)  # frozen: a memo of a pure lookup
        return section

    @property
    def is_section(self) -> bool:
        return self.section_number is not None


@dataclass(frozen=True, slots=True)
class Step:
    """One edge seen from the entity being expanded.

    ``direction`` is relative to that entity. ``edge_from``/``edge_to`` are the edge's own ends
    in its stored direction: for a typed relation the escaped references with their fragments
    (``source#intro`` → ``target#part``), so an edge between sub-resources never loses an end
    when it is reported between concepts; for a link or a field edge the two concept IDs. A
    ``SHARES_COMMUNITY`` step, having no direction, is reported as leaving the expanded concept.
    """

    target: Entity
    relationship: str
    direction: str
    weight: float
    edge_from: str
    edge_to: str
    kind: str


# How a walk ranks the edges into one node (see :class:`_Level`): the strongest, then by
# relationship, direction, predecessor ID and edge ends, a total order.
Key = tuple[float, str, str, str, str, str]  # (-weight, relationship, direction, from, ends)
# One edge of a concept as its walk sees it: (key, the other concept's ID, kind, whether it is
# walked against its stored direction, whether it is the concept's edge to itself). Built once
# per concept (:meth:`BundleGraph.arcs`): a walk then ranks an edge without building a Step.
Arc = tuple[Key, str, str, bool, bool]
# A concept's PART_OF edge from one of its sections: (key, the section's place in the
# document's ``sections``); the key's fifth item is the section's ID.
SectionArc = tuple[Key, int]


def _arcs(concept_id: str, edges: Iterable[Edge]) -> tuple[Arc, ...]:
    arcs: list[Arc] = []
    append, weights = arcs.append, EDGE_WEIGHT
    # Each edge unpacked once (a restarted server's first walk makes the arcs of hundreds of
    # concepts, tens of thousands of edges: unpacked, in 60% of the attribute reads' time).
    for kind, source, target, source_ref, target_ref, relationship in edges:
        if source == target:
            key: Key = (-weights[kind], relationship, OUTGOING, concept_id, source_ref,
                        target_ref)
            append((key, concept_id, kind, False, True))
        elif source == concept_id:
            key = (-weights[kind], relationship, OUTGOING, concept_id, source_ref, target_ref)
            append((key, target, kind, False, False))
        else:
            key = (-weights[kind], relationship, INCOMING, concept_id, source_ref, target_ref)
            append((key, source, kind, True, False))
    return tuple(arcs)


@dataclass(frozen=True, slots=True)
class Selection:
    """Which part of the graph one call walks: edge kinds, direction and project.

    ``typed`` holds the relation names allowed (``None``: every relation type); with
    ``fold_case`` a relation matches by its upper-cased name (expand_neighbors' names are
    case-insensitive; query_subgraph's are exact). ``fields`` holds the field edge names allowed
    (``None``: all of them, the default wherever every relation type is walked); they are the
    server's own names, so :meth:`named` matches them case-insensitively in every verb.
    ``incoming`` walks edges against their stored direction too, and with it a concept reaches
    its sections (``PART_OF`` points from a section to its concept). A concept of a single
    section offers it only with ``unsliced_sections``: in expand_neighbors such a concept is its
    own only span, in query_subgraph every section is an object. Outside ``project`` (a top
    folder) nothing is reached.
    """

    links: bool
    typed: frozenset[str] | None
    part_of: bool
    community: bool
    incoming: bool = True
    fold_case: bool = False
    unsliced_sections: bool = False
    project: str | None = None
    fields: frozenset[str] | None = None

    @classmethod
    def every(cls, *, incoming: bool = True, project: str | None = None) -> Selection:
        """Every kind of edge, every relation type and field edge."""
        return cls(True, None, True, True, incoming=incoming, project=project)

    @classmethod
    def named(
        cls,
        names: Iterable[str],
        *,
        fold_case: bool = False,
        incoming: bool = True,
        unsliced_sections: bool = False,
        project: str | None = None,
    ) -> Selection:
        """The kinds, relation types and field edges ``names`` mention; a name matches both a
        kind (or field edge) and a relation declared under that name."""
        names = list(names)
        chosen = frozenset(n.upper() for n in names) if fold_case else frozenset(names)
        return cls(
            links=LINKS_TO in chosen,
            typed=chosen,
            part_of=PART_OF in chosen,
            community=SHARES_COMMUNITY in chosen,
            incoming=incoming,
            fold_case=fold_case,
            unsliced_sections=unsliced_sections,
            project=project,
            fields=field_edge_names(names),
        )

    @property
    def every_edge(self) -> bool:
        """Whether every link, relation and field edge is followed, anywhere in the bundle
        (no per-edge test of its kind or project is needed)."""
        return (self.links and self.typed is None and self.fields is None
                and self.project is None)

    def allows(self, kind: str, name: str) -> bool:
        """Whether an edge of this kind and name is followed: links when asked for, relations
        of the selected types, the selected field edges."""
        if kind == NAVIGATION:
            return self.links
        if kind == RELATION:
            return self.allows_relation(name)
        return self.allows_field(name)

    def allows_relation(self, relation_type: str) -> bool:
        if self.typed is None:
            return True
        return (relation_type.upper() if self.fold_case else relation_type) in self.typed

    def allows_field(self, name: str) -> bool:
        return self.fields is None or name in self.fields


def field_edge_names(names: Iterable[str]) -> frozenset[str]:
    """The field edge names among ``names``, matched case-insensitively."""
    return frozenset(n.upper() for n in names) & FIELD_EDGE_NAMES


# --------------------------------------------------------------------------------------------
# Budgets


class Budget(Protocol):
    """How much work a walk may still do: one unit per edge it examines."""

    @property
    def exhausted(self) -> bool: ...

    def take(self) -> bool:
        """Spend one unit; ``False`` (spending nothing) once none is left."""
        ...

    def grant(self, wanted: int) -> int:
        """Spend up to ``wanted`` units at once; how many were spent (what ``wanted`` calls of
        :meth:`take` would have granted)."""
        ...


class EdgeBudget:
    """At most ``edges`` examined edges; the walk stops when they are spent.

    Mutable on purpose and owned by one call: it is the single counter every step of that call
    draws from, so the cap bounds the whole walk rather than each node.
    """

    __slots__ = ("remaining",)

    def __init__(self, edges: int) -> None:
        self.remaining = edges

    @property
    def exhausted(self) -> bool:
        return self.remaining <= 0

    def take(self) -> bool:
        if self.remaining <= 0:
            return False
        self.remaining -= 1
        return True

    def grant(self, wanted: int) -> int:
        granted = max(0, min(wanted, self.remaining))
        self.remaining -= granted
        return granted


class _Unbounded:
    """A budget that never runs out (it holds no state, so one instance serves every call)."""

    __slots__ = ()

    @property
    def exhausted(self) -> bool:
        return False

    def take(self) -> bool:
        return True

    def grant(self, wanted: int) -> int:
        return wanted


UNBOUNDED: Budget = _Unbounded()


# --------------------------------------------------------------------------------------------
# The graph of one snapshot


def graph_of(snapshot: Snapshot) -> BundleGraph:
    """The snapshot's graph, created on first use and kept with the snapshot."""
    graph: BundleGraph = of_snapshot(snapshot, GRAPH, lambda: BundleGraph(snapshot))
    return graph


def field_edges(
    snapshot: Snapshot, token: CancelToken | None = None
) -> Mapping[str, tuple[Edge, ...]]:
    """Every field edge (an :class:`~bundle_mcp.model.Edge` of kind ``field``) touching a
    concept (as source or target), sorted by (source, relationship, target); one edge per triple
    however many fields state it.

    A field counts only when its own reading (:func:`~bundle_mcp.okf.field_paths.path_fields`)
    names an existing concept. Its ``root_reading`` never does: that spelling is for the
    validator to flag, and picking it here would make the graph disagree with what the file
    says.
    """

    def build() -> Mapping[str, tuple[Edge, ...]]:
        # Kept by an earlier process on the same files, they need no concept's frontmatter.
        ordered = revision_edges(snapshot, STORED_FIELD, _in_field_order, lambda: tuple(
            sorted(_found_field_edges(snapshot, token), key=_field_order)))
        index: dict[str, list[Edge]] = {}
        for edge in ordered:
            index.setdefault(edge.source_id, []).append(edge)
            if edge.target_id != edge.source_id:
                index.setdefault(edge.target_id, []).append(edge)
        return types.MappingProxyType({k: tuple(v) for k, v in index.items()})

    return of_snapshot(
        snapshot, FIELD_EDGES, build, check=token.check if token is not None else None
    )


# The memo key of every concept's tag members (BundleGraph.tag_members with no project).
_EVERY_TAG = ("tag-members", None)


def _tag_members_name(project: str | None) -> str:
    """The name a project's tag members are kept under (``InboundHint.keep_json``)."""
    return f"tag-members/{json.dumps(project)}"


def _tag_members_read(value: Any) -> Mapping[str, tuple[str, ...]] | None:
    """Kept tag members read back: a tag → sorted member IDs mapping, or ``None``."""
    if not isinstance(value, dict) or not all(
            type(tag) is str and type(ids) is list and all(type(i) is str for i in ids)
            and all(a < b for a, b in itertools.pairwise(ids)) for tag, ids in value.items()):
        return None
    return types.MappingProxyType(
        {sys.intern(k): tuple(map(sys.intern, v)) for k, v in value.items()})


def _strings_read(value: Any) -> frozenset[str] | None:
    """Kept entity types read back, or ``None``."""
    if not isinstance(value, list) or not all(type(t) is str for t in value):
        return None
    return frozenset(map(sys.intern, value))


# The name field edges are kept under (InboundHint.keep_edges), and the entity types
# (InboundHint.keep_json).
STORED_FIELD = "field"
STORED_TYPES = "known-types"


def _found_field_edges(snapshot: Snapshot, token: CancelToken | None) -> set[Edge]:
    concepts = snapshot.concepts
    found: set[Edge] = set()
    # Each concept's frontmatter as read, not its document: on a cold start the check loaded
    # it already, and a first walk would otherwise build every document for its few fields.
    for n, concept_id in enumerate(concepts):
        if token is not None and n % 256 == 0:
            token.check()
        for occurrence in path_fields_of(snapshot, snapshot.concept_path(concept_id),
                                         snapshot.fields_of(concept_id)):
            target = occurrence.value.concept_id
            if target is not None and target in concepts:
                found.add(Edge(FIELD, concept_id, target, concept_id, target,
                               FIELD_EDGE_OF[occurrence.field]))
    return found


def _field_order(edge: Edge) -> tuple[str, str, str]:
    return (edge.source_id, edge.relationship, edge.target_id)


def _in_field_order(edges: tuple[Edge, ...]) -> bool:
    """Whether kept edges read back are field edges, each once, in :func:`field_edges` order."""
    return all(edge.kind == FIELD for edge in edges) and all(
        _field_order(a) < _field_order(b) for a, b in itertools.pairwise(edges))


# The most concepts whose walk tables (arcs, field arcs, section arcs, section entities) a graph
# keeps, each table on its own: past it, a table is emptied and fills again with what the next
# walks reach. Kept for every concept a long-serving graph's walks have expanded, they grew to
# about 70 MiB at 9,978 concepts; a depth-2 walk from the bench's 1,000-link hub expands 534
# concepts, and the bench's walks 1,333 together.
WALK_TABLES_KEPT = 2048

_V = TypeVar("_V")


def _kept(table: dict[str, _V], key: str, build: Callable[[], _V]) -> _V:
    """``table[key]``, built and stored when missing; a table at :data:`WALK_TABLES_KEPT`
    entries is emptied first. Every value is a pure function of the snapshot and the key, so a
    value built again equals the one let go, and a race keeps one of two equal values."""
    found = table.get(key)
    if found is None:
        if len(table) >= WALK_TABLES_KEPT:
            table.clear()
        found = table.setdefault(key, build())
    return found


class BundleGraph:
    """Entities, tags and adjacency of one snapshot, each part built on first use.

    Shared by every call on the snapshot, from any thread. Each part is a pure function of the
    snapshot, so a race can only build a part twice: the per-entity tables store with
    ``dict.setdefault`` and the whole-snapshot indexes go through a :class:`Memo`, and either
    way one of two equal values is kept.
    """

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._concepts: dict[str, Entity] = {}
        self._sections: dict[str, tuple[Entity, ...]] = {}
        self._tags: dict[str, tuple[str, ...]] = {}
        # The walk's per-concept adjacency (:meth:`arcs`), built when a walk first expands the
        # concept: nothing here is built for a concept no walk reached, and at most
        # WALK_TABLES_KEPT concepts' are kept (:func:`_kept`).
        self._arcs: dict[str, tuple[Arc, ...]] = {}
        self._field_arcs: dict[str, tuple[Arc, ...]] = {}
        self._section_arcs: dict[str, tuple[SectionArc, ...]] = {}
        self._field_edges: Mapping[str, tuple[Edge, ...]] | None = None
        # Each (project, tag)'s members as the walk arrays' concept places (tag_places).
        self._tag_places: dict[tuple[str | None, str], Any] = {}
        self._memo = Memo()
        # Before the index of every edge (a cold start): the edges out of the concepts an
        # extraction has kept, by target (:meth:`_edges_among`), grown under the lock as more
        # concepts are kept; each source's edges are in it once.
        self._into: dict[str, list[Edge]] = {}
        self._into_sources: set[str] = set()
        self._into_lock = threading.Lock()

    # entities

    def concept(self, concept_id: str) -> Entity:
        """The entity of a concept of this snapshot (``KeyError`` for an unknown ID)."""
        entity = self._concepts.get(concept_id)
        if entity is None:
            concepts = self.snapshot.concepts
            if concept_id not in concepts:
                raise KeyError(concept_id)
            entity = self._concepts.setdefault(concept_id,
                                               Entity(concept_id, concept_id, concepts))
        return entity

    def sections_of(self, concept_id: str) -> tuple[Entity, ...]:
        """A concept's section entities in document order (a locator that is a concept ID
        names that concept, so such a section is left out). Made from the sections' line
        spans: no section is decoded until an entity's is asked for."""
        def build() -> tuple[Entity, ...]:
            concept = self.concept(concept_id)
            return tuple(self.section_of(concept, number, key[4])
                         for key, number in self.section_arcs(concept_id))

        return _kept(self._sections, concept_id, build)

    def section_of(self, concept: Entity, number: int, section_id: str) -> Entity:
        """The entity of the section at ``number`` in ``concept``'s document, whose ID (a
        :meth:`section_arcs` key's) is ``section_id``."""
        return Entity(section_id, concept.id, self.snapshot.concepts, number, concept.doc)

    def ids_with_hash(self) -> bool:
        """Whether some concept ID holds a '#' (of the lazy concepts, any file's that would be
        a concept if it parses: no document is built to answer)."""
        concepts = self.snapshot.concepts
        ids = concepts.paths if isinstance(concepts, Concepts) else concepts
        return self._memo.get("ids with #", lambda: any("#" in c for c in ids))

    def _section_entity(self, doc: Document, number: int, line_start: int, line_end: int
                        ) -> Entity | None:
        section_id = locator(doc.path, line_start, line_end)
        concepts = self.snapshot.concepts
        if section_id in concepts:
            return None
        concept_id = doc.concept_id
        assert concept_id is not None  # only concepts and their sections are entities
        return Entity(section_id, concept_id, concepts, number, doc)

    def resolve(self, value: str, project: str | None) -> Entity | None:
        """The entity an ID names in this snapshot, or ``None``.

        A concept ID wins over a locator reading of the same text (``a.md#L1-L2`` can be both).
        A locator resolves only when its line range is exactly one section of this snapshot: a
        stale range after an edit names nothing. The path part may be percent-encoded (as
        :func:`~bundle_mcp.okf.sections.locator` writes it) or plain; the entity's ID is always
        the encoded spelling. Outside ``project`` nothing resolves, so a scoped caller cannot
        tell "elsewhere" from "absent".
        """
        doc = self.snapshot.concepts.get(value)
        if doc is not None:
            return self.concept(value) if in_project(doc.path, project) else None
        parts = parse_locator(value)
        if parts is None:
            return None
        for path in parts.path_readings():
            doc = self._concept_at(path)
            if doc is None or not in_project(doc.path, project):
                continue
            number = section_number_at(doc, parts.line_start, parts.line_end)
            if number is not None:
                entity = self._section_entity(doc, number, parts.line_start, parts.line_end)
                if entity is not None:
                    return entity
        return None

    def _concept_at(self, path: str) -> Document | None:
        if not path.endswith(".md"):
            return None
        doc = self.snapshot.concepts.get(concept_id_for_path(path))
        return doc if doc is not None and doc.path == path else None

    # tags and types

    def tags_of(self, entity: Entity) -> tuple[str, ...]:
        """A concept's distinct tags, sorted; a section carries none."""
        if entity.is_section:
            return ()
        found = self._tags.get(entity.id)
        if found is None:
            kept = None if self._built(entity.id) else self._kept_tags()
            if kept is not None:
                found = kept.get(entity.id, ())
            else:
                found = tuple(sorted(set(concept_tags(entity.doc.fields))))
            found = self._tags.setdefault(entity.id, found)
        return found

    def _built(self, concept_id: str) -> bool:
        """Whether the concept's document is built (a plain mapping's always are)."""
        concepts = self.snapshot.concepts
        if not isinstance(concepts, Concepts):
            return True
        return concepts.is_built(concept_id)

    def _kept_tags(self) -> Mapping[str, tuple[str, ...]] | None:
        """Each concept's :meth:`tags_of`, from the tag members an earlier process kept for
        this revision (``None`` when it kept none): a restarted server's walk offers the
        concepts sharing a tag with each node it expands, and reading the node's tags from its
        document built hundreds of documents for them."""
        def read() -> Mapping[str, tuple[str, ...]] | None:
            found, members = self._memo.peek(_EVERY_TAG)
            if not found:
                store = self.snapshot.inbound
                kept = None if store is None else _tag_members_read(
                    store.stored_json(self.snapshot.revision, _tag_members_name(None)))
                if kept is None:
                    return None
                members = self._memo.put(_EVERY_TAG, kept)
            by_concept: dict[str, list[str]] = {}
            for tag in sorted(members):  # so each concept's tags come sorted
                for concept_id in members[tag]:
                    by_concept.setdefault(concept_id, []).append(tag)
            return {concept_id: tuple(tags) for concept_id, tags in by_concept.items()}

        return self._memo.get("kept tags", read)

    def shared_tags(self, a: Entity, b: Entity) -> list[str]:
        """The tags two concepts have in common, sorted."""
        return sorted(set(self.tags_of(a)) & set(self.tags_of(b)))

    def tag_members(self, project: str | None, token: CancelToken) -> Mapping[str, tuple[str, ...]]:
        """Each tag → the IDs of the concepts in ``project`` carrying it, sorted.

        The pairs themselves are never materialised (a tag on 10,000 concepts would be 50
        million of them).
        """

        def build() -> Mapping[str, tuple[str, ...]]:
            members: dict[str, list[str]] = {}
            for concept_id, doc in self.snapshot.concepts.items():  # sorted by ID
                token.check()
                if in_project(doc.path, project):
                    for tag in self.tags_of(self.concept(concept_id)):
                        members.setdefault(tag, []).append(concept_id)
            return types.MappingProxyType({k: tuple(v) for k, v in members.items()})

        # Kept by an earlier process on the same files, they need no concept's frontmatter.
        return self._memo.get(("tag-members", project), lambda: revision_value(
            self.snapshot, _tag_members_name(project), _tag_members_read, build,
            lambda members: {k: list(v) for k, v in members.items()}))

    def tag_places(self, project: str | None, tag: str, arrays: WalkArrays,
                   token: CancelToken) -> Any:
        """:meth:`tag_members` of one tag as the walk arrays' concept places (a numpy array,
        ascending), made the first time a walk over the arrays offers the tag."""
        key = (project, tag)
        places = self._tag_places.get(key)
        if places is None:
            import numpy as np

            members = self.tag_members(project, token).get(tag, ())
            places = np.fromiter(map(arrays.index.__getitem__, members), np.int64,
                                 len(members))
            places.flags.writeable = False  # shared by every walk on the snapshot
            places = self._tag_places.setdefault(key, places)
        return places

    def inbound_counts(self, project: str | None, token: CancelToken) -> Mapping[str, int]:
        """Each concept in ``project`` that other concepts in it reach → how many do.

        A source counts once however many links and typed relations it has to the concept
        (the snapshot's resolved edges, :attr:`Snapshot.edges`); a concept's edges to itself
        do not count, and neither do edges with an end outside ``project`` (a scoped walk never
        follows them). Concepts nothing reaches are absent.
        """

        def build() -> Mapping[str, int]:
            concepts = self.snapshot.concepts
            sources: dict[str, set[str]] = {}
            for n, edge in enumerate(self.snapshot.edges):
                if n % 1024 == 0:
                    token.check()
                if edge.source_id == edge.target_id:
                    continue
                if project is not None and not (
                    in_project(concepts[edge.source_id].path, project)
                    and in_project(concepts[edge.target_id].path, project)
                ):
                    continue
                sources.setdefault(edge.target_id, set()).add(edge.source_id)
            return types.MappingProxyType({k: len(v) for k, v in sorted(sources.items())})

        return self._memo.get(("inbound-counts", project), build)

    def known_types(self, token: CancelToken) -> frozenset[str]:
        """Every entity type of the snapshot: ``section`` and each concept's ``type``."""

        def build() -> frozenset[str]:
            found = {SECTION_TYPE}
            for doc in self.snapshot.concepts.values():
                token.check()
                found.add(text_field(doc.fm, "type"))
            return frozenset(found)

        # Kept by an earlier process on the same files, they need no concept's frontmatter.
        return self._memo.get("known-types", lambda: revision_value(
            self.snapshot, STORED_TYPES, _strings_read, build,
            lambda found: sorted(found) if all(type(t) is str for t in found) else None))

    # adjacency

    def arcs(self, concept_id: str) -> tuple[Arc, ...]:
        """The walk's view of a concept's links and relations (:meth:`Snapshot.concept_edges`,
        in their order), each with its ranking key already built (see :data:`Arc`)."""
        return _kept(self._arcs, concept_id, lambda: _arcs(
            concept_id, self.snapshot.concept_edges(concept_id)))

    def _arcs_among(self, concept_id: str, among: AbstractSet[str]) -> tuple[Arc, ...]:
        """:meth:`arcs`, or on a cold start (no index of every edge, nothing kept or fetched for
        the concept) only its arcs whose other end is in ``among`` or itself, in the same
        order, made from the edges out of the concept and out of the members of ``among``
        (:meth:`_edges_among`): an extraction prices hundreds of candidates against the
        objects it kept, and each candidate's whole edges would need the edges into it from
        every file of the bundle."""
        if concept_id in self._arcs or self.snapshot.edges_at_hand(concept_id):
            if self._into and self.snapshot.edges_indexed():
                with self._into_lock:  # the index of every edge answers from now on
                    self._into.clear()
                    self._into_sources.clear()
            return self.arcs(concept_id)
        return _arcs(concept_id, self._edges_among(concept_id, among))

    def _edges_among(self, concept_id: str, among: AbstractSet[str]) -> list[Edge]:
        """The concept's links and relations whose other end is in ``among`` (or the concept
        itself), in edge order: an edge between two concepts is an edge out of one of them."""
        snapshot = self.snapshot
        with self._into_lock:
            into, indexed = self._into, self._into_sources
            for source in among - indexed:
                indexed.add(source)
                for edge in snapshot.outgoing_edges(source):
                    if edge.target_id != source:
                        into.setdefault(edge.target_id, []).append(edge)
            edges = [e for e in into.get(concept_id, ()) if e.source_id in among]
        edges.extend(e for e in snapshot.outgoing_edges(concept_id)
                     if e.target_id == concept_id or e.target_id in among)
        edges.sort(key=edge_order)
        return edges

    def field_arcs(self, concept_id: str, token: CancelToken) -> tuple[Arc, ...]:
        """:meth:`arcs` for the concept's field edges (:meth:`field_edges_of`)."""
        return _kept(self._field_arcs, concept_id,
                     lambda: _arcs(concept_id, self.field_edges_of(concept_id, token)))

    def section_arcs(self, concept_id: str) -> tuple[SectionArc, ...]:
        """The ``PART_OF`` edges from a concept's sections, as the concept's walk sees them
        (incoming), in document order (:meth:`sections_of`'s). Made from the sections' line
        spans: a walk passes every section of hundreds of concepts and renders a few, so no
        section is decoded and no entity made here."""
        def build() -> tuple[SectionArc, ...]:
            concepts = self.snapshot.concepts
            spans = self.spans(concept_id)
            # locator() of each span, the path encoded once.
            prefix = locator(self.snapshot.concept_path(concept_id), 1, 1).removesuffix("L1-L1")
            # Only an ID with '#' can be a locator; most bundles have none, and their sections
            # are then never looked up among the concepts.
            check = self.ids_with_hash()
            arcs: list[SectionArc] = []
            for number in range(len(spans) // 2):
                section_id = f"{prefix}L{spans[2 * number]}-L{spans[2 * number + 1]}"
                if not (check and section_id in concepts):
                    key: Key = (-PART_OF_WEIGHT, PART_OF, INCOMING, concept_id, section_id,
                                concept_id)
                    arcs.append((key, number))
            return tuple(arcs)

        return _kept(self._section_arcs, concept_id, build)

    def spans(self, concept_id: str) -> tuple[int, ...]:
        """The concept's ``Document.section_spans``: its document's when it is built, else
        what an earlier process on the same files kept of every concept's (``okf.kept_spans``),
        else from its document, built now."""
        if not self._built(concept_id):
            kept = self.kept_spans()
            found = None if kept is None else kept.of(concept_id)
            if found is not None:
                return found
        return self.snapshot.concepts[concept_id].section_spans

    def sliced(self, concept_id: str) -> bool:
        """``Document.sliced`` of the concept (cut into two sections or more), from
        :meth:`spans`: a walk asks it of every concept it expands."""
        return len(self.spans(concept_id)) > 2

    def section_counts(self, ids: Sequence[str], token: CancelToken
                       ) -> tuple[list[int], list[int]]:
        """For each concept of ``ids``, how many :meth:`section_arcs` it has and how many
        sections: from the spans an earlier process kept (a restart), else concept by
        concept."""
        kept = self.kept_spans()
        exact = self.ids_with_hash()  # a section whose locator is a concept ID is no entity
        if kept is not None and not exact and all(c in kept.places for c in ids):
            starts, places = kept.starts, kept.places
            counts = [(starts[places[c] + 1] - starts[places[c]]) // 2 for c in ids]
            return counts, counts
        arcs: list[int] = []
        sections: list[int] = []
        for n, concept_id in enumerate(ids):
            if n % 1024 == 0:
                token.check()
            sections.append(len(self.spans(concept_id)) // 2)
            arcs.append(len(self.section_arcs(concept_id)) if exact else sections[-1])
        return arcs, sections

    def kept_spans(self) -> KeptSpans | None:
        """Every concept's spans as an earlier process kept them for this revision, read
        once; ``None`` when none were kept (or they do not fit)."""
        def read() -> KeptSpans | None:
            snapshot = self.snapshot
            store = snapshot.inbound
            if store is None:
                return None
            return unpacked_spans(store.stored_bytes(snapshot.revision, SPANS_NAME),
                                  span_order(snapshot.concepts))

        return self._memo.get("kept spans", read)

    def keep_spans(self, token: CancelToken) -> None:
        """Keep every concept's spans for the next process on the same files, unless they are
        kept already or this snapshot was not loaded from the files (after a change this
        process updates its own values; it never reads these back)."""
        snapshot = self.snapshot
        if snapshot.inbound is None or not snapshot.loaded or self.kept_spans() is not None:
            return
        snapshot.inbound.keep_bytes(snapshot.revision, SPANS_NAME,
                                    packed_spans(snapshot.concepts, token))

    def kept_walk_arrays(self) -> WalkArrays | None:
        """The walk arrays an earlier process kept for this revision, read back once (then
        held by the snapshot's slot: :func:`_arrays_for`); ``None`` when none read back, which
        is remembered too, so a call before the warm-up asks the parse cache once."""
        return self._memo.get("kept walk arrays", lambda: _kept_walk_arrays(self.snapshot))

    def field_edges_of(self, concept_id: str, token: CancelToken) -> tuple[Edge, ...]:
        """The field edges touching a concept, in :func:`field_edges` order."""
        index = self._field_edges
        if index is None:
            # Two threads may both fetch it: the slot hands both the same value.
            index = self._field_edges = field_edges(self.snapshot, token)
        return index.get(concept_id, ())

    def _edges_of(
        self, concept_id: str, selection: Selection, token: CancelToken
    ) -> Iterator[Edge]:
        """The concept edges touching a concept, in :meth:`steps` order: its links and relations,
        then its field edges, which are fetched only after those and only when the selection
        admits some of them."""
        yield from self.snapshot.concept_edges(concept_id)
        if selection.fields is None or selection.fields:
            yield from self.field_edges_of(concept_id, token)

    def steps_among(
        self,
        entity: Entity,
        selection: Selection,
        among: AbstractSet[str],
        token: CancelToken,
        *,
        loops: bool = False,
    ) -> Iterator[Step]:
        """:meth:`steps` (unbudgeted) to the entities in ``among`` only, in the same order:
        read from the concept's :meth:`arcs`, so the edges to any other entity cost a set lookup
        and no Step (an extraction asks this of every candidate it prices, hub or not)."""
        if entity.is_section:
            # A section's only edge is PART_OF to its concept.
            if entity.concept_id in among:
                yield from self.steps(entity, selection, UNBOUNDED, token, loops=loops)
            return
        concept_id = entity.id
        incoming, project = selection.incoming, selection.project
        concepts = self.snapshot.concepts
        # Over the arrays only while the concepts' edges are made from the kept columns (a
        # restarted server before its warm-up's edges): then an edge is made only for an arc
        # to another object. Once indexed, the concepts' kept arcs are read faster.
        arrays = None if self.snapshot.edges_indexed() else _arrays_for(self, selection)
        groups = 0 if arrays is not None else (
            2 if selection.fields is None or selection.fields else 1)
        if arrays is not None:
            yield from self._steps_among_arrays(arrays, concept_id, incoming, among, loops)
        for group in range(groups):
            token.check()
            arcs = (self._arcs_among(concept_id, among) if group == 0
                    else self.field_arcs(concept_id, token))
            for key, other, kind, backwards, loop in arcs:
                if loop:
                    if not loops:
                        continue
                elif other not in among or (backwards and not incoming):
                    continue
                name = key[1]
                if not selection.allows(kind, name):
                    continue
                if project is not None and not in_project(concepts[other].path, project):
                    continue
                yield Step(self.concept(other), name, key[2], -key[0], key[4], key[5], kind)
        if not (incoming and selection.part_of):
            return
        parts = self.section_arcs(concept_id)
        if not (selection.unsliced_sections or self.sliced(concept_id)):
            return
        for key, number in parts:
            if key[4] in among:
                yield Step(self.section_of(entity, number, key[4]), PART_OF, INCOMING,
                           PART_OF_WEIGHT, key[4], concept_id, PART_OF_KIND)

    def _steps_among_arrays(self, arrays: WalkArrays, concept_id: str, incoming: bool,
                            among: AbstractSet[str], loops: bool) -> Iterator[Step]:
        """:meth:`steps_among`'s links, relations and field edges for a selection of every
        edge, read from the walk arrays: a concept's arcs are there in the order of its
        :meth:`arcs` then its :meth:`field_arcs`, and an edge is made (or read) only for an
        arc to an entity in ``among`` (a restarted server's first subgraph made every edge of
        a thousand concepts from the kept columns to find the few among its objects)."""
        place = arrays.index[concept_id]
        start, end = int(arrays.starts[place]), int(arrays.starts[place + 1])
        ids, edges = arrays.ids, arrays.edges
        for other, edge, backwards, walkable in zip(
                arrays.other[start:end].tolist(), arrays.edge[start:end].tolist(),
                arrays.backwards[start:end].tolist(), arrays.walkable[start:end].tolist(),
                strict=True):
            if not walkable:  # the concept's edge to itself
                if not loops:
                    continue
            elif (backwards and not incoming) or ids[other] not in among:
                continue
            kind, _, _, source_ref, target_ref, relationship = edges[edge]
            yield Step(self.concept(ids[other]), relationship,
                       INCOMING if backwards else OUTGOING, EDGE_WEIGHT[kind], source_ref,
                       target_ref, kind)

    def steps(
        self,
        entity: Entity,
        selection: Selection,
        budget: Budget,
        token: CancelToken,
        visited: AbstractSet[str] = frozenset(),
        *,
        loops: bool = False,
    ) -> Iterator[Step]:
        """The links, relations, field edges and ``PART_OF`` edges of ``entity`` the selection
        admits.

        In a fixed order (the snapshot's edges of the concept, then its field edges, then its
        sections), one budget unit per edge looked at, admitted or not; field edges are not
        looked at when the selection admits none of them. Edges to concepts in ``visited`` are
        paid for but not yielded (building a step for a node the walk already holds is most of
        the cost in a dense graph). A concept's edge to itself is yielded only with ``loops``.
        Stops early, without error, when the budget runs out; the caller reads
        ``budget.exhausted``.
        """
        if entity.is_section:
            # A section's only edge is PART_OF to the concept it was cut from.
            token.check()
            if budget.take() and selection.part_of:
                yield Step(
                    self.concept(entity.concept_id), PART_OF, OUTGOING, PART_OF_WEIGHT,
                    entity.id, entity.concept_id, PART_OF_KIND,
                )
            return
        # One loop over the concept's edges, its links and relations first, then (only when the
        # selection admits some) its field edges: an extraction builds one generator per
        # candidate it prices.
        concept_id = entity.id
        concepts = self.snapshot.concepts
        incoming, project = selection.incoming, selection.project
        for edge in self._edges_of(concept_id, selection, token):
            token.check()
            if not budget.take():
                return
            if edge.source_id == edge.target_id:
                if not loops:
                    continue  # a concept is not its own neighbour
                other, direction = concept_id, OUTGOING
            elif edge.source_id == concept_id:
                other, direction = edge.target_id, OUTGOING
            elif incoming:
                other, direction = edge.source_id, INCOMING
            else:
                continue
            if other in visited:
                continue
            kind, name = edge.kind, edge.relationship
            if not selection.allows(kind, name):
                continue
            if project is not None and not in_project(concepts[other].path, project):
                continue
            yield Step(self.concept(other), name, direction, EDGE_WEIGHT[kind], edge.source_ref,
                       edge.target_ref, kind)
        # PART_OF points from a section to its concept, so a concept reaches its sections only
        # over incoming edges.
        if not (incoming and selection.part_of):
            return
        sections = self.sections_of(concept_id)
        if not (selection.unsliced_sections or self.sliced(concept_id)):
            return
        for target in sections:
            token.check()
            if not budget.take():
                return
            yield Step(target, PART_OF, INCOMING, PART_OF_WEIGHT, target.id, concept_id,
                       PART_OF_KIND)


# --------------------------------------------------------------------------------------------
# The walk


@dataclass(frozen=True, slots=True)
class Found:
    """An entity reached first at ``distance`` hops, over its best edge from ``predecessor``;
    ``edge_count`` counts every admitted edge from the previous level that reaches it."""

    entity: Entity
    distance: int
    step: Step
    predecessor: Entity
    edge_count: int


# What a walk keeps of each node it reached, at these positions: its ID, the key of its best
# edge, that edge's kind, the predecessor, the section's place in its document when the node
# is a section (None: the concept of that ID; a section is reached from its concept alone, the
# predecessor) and how many admitted edges from the previous level reach it. A list, not a
# tuple: while its level is walked, another edge into the node counts one more and may become
# the best (a tuple would be built again per edge); it is not changed once its level is done.
TARGET, KEY, KIND, PREDECESSOR, SECTION, EDGES = range(6)
Reach = list[Any]


@dataclass(frozen=True, slots=True)
class Walk:
    """What a walk reached, level by level (``levels[d - 1]``: the nodes first reached at ``d``
    hops, by ID). Kept compact: a walk reaches thousands of nodes where a caller reports a few,
    so a :class:`Found` is built only for a node a caller asks about (:meth:`finding`);
    :attr:`found` builds them all.

    A level walked over the walk arrays holds its nodes as places (``int``) in its
    :class:`_Pending` (``pending[d - 1]``; ``None`` for a level of :data:`Reach` lists, as a
    walk arc by arc makes): :meth:`reach`, :meth:`target`, :meth:`entity`,
    :meth:`negative_weights` and :meth:`finding` read a node of either kind, given its
    distance."""

    graph: BundleGraph
    levels: tuple[tuple[Reach | int, ...], ...]
    cut: bool  # the budget ran out before the walk finished
    pending: tuple[_Pending | None, ...] = ()  # each level's places, if it holds places

    @property
    def total(self) -> int:
        """How many nodes the walk reached (seeds are never found)."""
        return sum(map(len, self.levels))

    @property
    def found(self) -> tuple[Found, ...]:
        """Every node reached, by distance, then ID."""
        return tuple(
            self.finding(node, distance)
            for distance, level in enumerate(self.levels, 1)
            for node in level
        )

    def _places(self, distance: int) -> _Pending:
        pending = self.pending[distance - 1] if distance <= len(self.pending) else None
        assert pending is not None  # a node is a place only in a level that holds places
        return pending

    def reach(self, node: Reach | int, distance: int) -> Reach:
        """The node as a :data:`Reach` (made now when it is a place)."""
        return self._places(distance).reach(node) if isinstance(node, int) else node

    def target(self, node: Reach | int, distance: int) -> str:
        """The node's ID."""
        if isinstance(node, int):
            return self._places(distance).target(node)
        return cast(str, node[TARGET])

    def entity(self, node: Reach | int, distance: int) -> Entity:
        if isinstance(node, int):
            return self._places(distance).entity(node)
        return _entity(self.graph, node)

    def targets(self, level: Sequence[Reach | int], distance: int) -> list[str]:
        """:meth:`target` of each node of ``level`` (the level at ``distance`` or some of its
        nodes), in order: a level of places reads them from its table in C."""
        if level and isinstance(level[0], int):  # a level holds places only, or none
            return self._places(distance).targets(cast(Sequence[int], level))
        return [reach[TARGET] for reach in cast(Sequence[Reach], level)]

    def negative_weights(self, level: Sequence[Reach | int], distance: int) -> list[float]:
        """The negated weight of each node's best edge (its key's first item), in order, for
        the level at ``distance`` or some of its nodes: a level of places reads them in C."""
        if level and isinstance(level[0], int):  # a level holds places only, or none
            return self._places(distance).negative_weights(cast(Sequence[int], level))
        return [reach[KEY][0] for reach in cast(Sequence[Reach], level)]

    def finding(self, node: Reach | int, distance: int) -> Found:
        """The node of level ``distance`` with its best edge as a :class:`Step`."""
        reach = self.reach(node, distance)
        key: Key = reach[KEY]
        entity = _entity(self.graph, reach)
        step = Step(entity, key[1], key[2], -key[0], key[4], key[5], reach[KIND])
        return Found(entity, distance, step, reach[PREDECESSOR], reach[EDGES])


class _Level:
    """Each entity reached at one distance (its :data:`Reach`), by ID.

    The best edge into it is the one of smallest :data:`Key` (the strongest, then by
    relationship, direction, predecessor ID and edge ends: a total order, so the choice never
    depends on iteration order).
    """

    __slots__ = ("best", "pending")

    def __init__(self) -> None:
        # A node reached over the walk arrays is its place in ``pending`` until an offer to
        # it or a reader needs its Reach (:meth:`made`).
        self.best: dict[str, Reach | int] = {}
        self.pending: _Pending | None = None

    def made(self, target: str, place: int) -> Reach:
        """The node ``target`` at ``place`` made into its Reach, held as such from now on (an
        offer reaches it again)."""
        pending = self.pending
        assert pending is not None  # a level holds places only beside their record
        reach = self.best[target] = pending.reach(place)
        return reach


class _Pending:
    """The nodes of one level walked over the walk arrays, kept as places instead of
    :data:`Reach` lists.

    A depth-2 walk from the bench bundle's hub reaches about 10,000 concepts at its last level;
    at 50,000 concepts the hub's three tags put 12,600 concepts in its first level, where the
    budget runs out; expand_neighbors reports 20 of them. Making each node's list and key
    (about 0.4 µs each) was a third of the warm walk. Here a node the walk arrays reach
    (:func:`~bundle_mcp.okf.walk_arrays.best_arcs`) is its place in their columns
    (``0 <= place < arcs``), a node only shared tags reach is a record of the member, its
    carrier and its edges (``place < 0``, :meth:`share`), and a node an offer reaches again
    is made into its Reach then, as before. When the level closes (:meth:`close`) every node
    becomes a place (those made are kept at the places after the arrays': ``arcs <= place``);
    each place's ID, weight and concept (its place in the arrays) are tabled when first read,
    so a caller, or the next level's expansion, reads them for every node in C. A node's
    Reach is made when asked for (:meth:`reach`): the one the level would have held."""

    __slots__ = ("_graph", "_arrays", "_found", "_nodes", "_made", "_shared", "_carriers",
                 "_carried_by", "_shared_edges", "_weights", "_targets", "_concepts")

    def __init__(self, graph: BundleGraph, arrays: WalkArrays, found: BestArcs) -> None:
        self._graph = graph
        self._arrays = arrays
        self._found = found
        self._nodes: dict[str, Entity] = {}  # the expanded concepts' entities, made once each
        self._made: list[Reach] = []  # the nodes made into a Reach, from place ``arcs`` on
        # The records of the nodes only shared tags reach (:meth:`share`), record k at place
        # -1 - k: its concept's place in the arrays, its carrier (an index into
        # ``_carriers``: of the tags that reach it, the first frontier node with the smallest
        # ID) and its edges.
        self._shared: list[int] = []
        self._carriers: list[Entity] = []
        self._carried_by: list[int] = []
        self._shared_edges: list[int] = []
        # Each place's negated weight, ID and concept (its place in the arrays; -1: a
        # section), by place: the shared records' in reverse after the rest, so that a
        # negative place indexes its own. Made when first read, once the level is closed
        # (empty until then: a closed level has a node).
        self._weights: list[float] = []
        self._targets: list[str] = []
        self._concepts: list[int] = []

    def arc_places(self) -> Iterable[tuple[str, int]]:
        """Each node the arrays reach, with its place (by ID: the arrays' concepts are)."""
        found = self._found
        return zip(map(self._arrays.ids.__getitem__, found.targets), range(len(found.targets)),
                   strict=True)

    def share(self, members: list[int], carriers: list[Entity], carried_by: list[int],
              edges: list[int]) -> Iterable[tuple[str, int]]:
        """Record the nodes first reached through shared tags (the level holds none yet):
        each member's concept place, its carrier (an index into ``carriers``) and edges.
        Returns each one's ID and place, for the level to hold."""
        assert not self._shared  # one offer of shared tags a level
        self._shared, self._carriers = members, carriers
        self._carried_by, self._shared_edges = carried_by, edges
        return zip(map(self._arrays.ids.__getitem__, members),
                   range(-1, -1 - len(members), -1), strict=True)

    def heavier_arc(self, place: int) -> bool:
        """Whether the arc that reaches the node at ``place`` (an arrays' node) outweighs a
        shared tag (whose key can then never be its best)."""
        return self._found.negative_weights[place] < _COMMUNITY_KEY_WEIGHT

    def count_more(self, place: int, edges: int) -> None:
        """``edges`` more admitted edges reach the arrays' node at ``place``."""
        self._found.counts[place] += edges

    def close(self, nodes: list[Reach | int]) -> tuple[int, ...]:
        """The level's nodes (by ID) as places: a Reach is kept at the next place after the
        arrays'. The places' tables are made when first read (a level the budget ends in is
        never a frontier, so its concepts are never read)."""
        arcs = len(self._found.targets)
        made = self._made
        for n in itertools.compress(range(len(nodes)), map(operator.is_not, map(type, nodes),
                                                           itertools.repeat(int))):
            made.append(cast(Reach, nodes[n]))
            nodes[n] = arcs + len(made) - 1
        return cast(tuple[int, ...], tuple(nodes))

    def _members(self) -> list[str]:
        """The shared records' IDs in reverse, as the tables end: place ``-1 - k`` is record
        ``k``."""
        return list(map(self._arrays.ids.__getitem__, reversed(self._shared)))

    def _weight_table(self) -> list[float]:
        weights = self._weights
        if not weights:
            weights = self._weights = [
                *self._found.negative_weights,
                *(reach[KEY][0] for reach in self._made),
                *itertools.repeat(_COMMUNITY_KEY_WEIGHT, len(self._shared))]
        return weights

    def _target_table(self) -> list[str]:
        targets = self._targets
        if not targets:
            targets = self._targets = [
                *map(self._arrays.ids.__getitem__, self._found.targets),
                *(reach[TARGET] for reach in self._made), *self._members()]
        return targets

    def concepts(self, places: Iterable[int]) -> Iterator[int]:
        """Each place's concept, as its place in the arrays (``-1`` for a section)."""
        concepts = self._concepts
        if not concepts:
            index = self._arrays.index
            concepts = self._concepts = [
                *self._found.targets,
                *(-1 if reach[SECTION] is not None else index[reach[TARGET]]
                  for reach in self._made),
                *reversed(self._shared)]
        return map(concepts.__getitem__, places)

    def target(self, place: int) -> str:
        return self._target_table()[place]

    def targets(self, places: Iterable[int]) -> list[str]:
        return list(map(self._target_table().__getitem__, places))

    def entity(self, place: int) -> Entity:
        """The node at ``place``: a concept, unless it was made (a section's Reach may be)."""
        arcs = len(self._found.targets)
        if place >= arcs:
            return _entity(self._graph, self._made[place - arcs])
        return self._graph.concept(self.target(place))

    def negative_weights(self, places: Iterable[int]) -> list[float]:
        return list(map(self._weight_table().__getitem__, places))

    def reach(self, place: int) -> Reach:
        """The node at ``place`` as its Reach: made now (each time) unless it was made."""
        if place < 0:
            record = -1 - place
            member = self._arrays.ids[self._shared[record]]
            carrier = self._carriers[self._carried_by[record]]
            carrier_id = carrier.id
            return [member, (_COMMUNITY_KEY_WEIGHT, SHARES_COMMUNITY, OUTGOING, carrier_id,
                             carrier_id, member), COMMUNITY_KIND, carrier, None,
                    self._shared_edges[record]]
        found, arrays = self._found, self._arrays
        arcs = len(found.targets)
        if place >= arcs:
            return self._made[place - arcs]
        edge = arrays.edges[found.edges[place]]
        owner = arrays.ids[found.owners[place]]
        node = self._nodes.get(owner)
        if node is None:
            node = self._nodes[owner] = self._graph.concept(owner)
        kind = edge_kind(edge)
        key: Key = (_NEGATIVE_WEIGHT[kind], edge_relationship(edge),
                    _DIRECTION[found.backwards[place]], owner, edge_source_ref(edge),
                    edge_target_ref(edge))
        return [arrays.ids[found.targets[place]], key, kind, node, None, found.counts[place]]


def walk(
    graph: BundleGraph,
    seeds: Sequence[Entity],
    selection: Selection,
    depth: int,
    budget: Budget,
    token: CancelToken,
) -> Walk:
    """Breadth-first over the selected edges, at most ``depth`` hops from the nearest seed.

    Each level expands its frontier in ID order. A node joins at the first distance any edge
    reaches it (the visited set also breaks cycles, and seeds are never found); among the edges
    from the previous level that reach it, the best is kept (see :class:`_Level`). The walk
    ends at ``depth``, when a level reaches nothing new, or when the budget runs out; it then
    keeps what it found and reports ``cut`` (also when nothing new remained: the conservative
    direction).

    A node's edges are those :meth:`BundleGraph.steps` lists (without loops), in its order and
    for the same budget, but read from the concept's :meth:`~BundleGraph.arcs`: a walk of a
    dense neighbourhood looks at tens of thousands of edges and keeps a few thousand nodes, so
    it builds no object per edge (``tests/test_walk_agrees.py`` holds it to ``steps``). Once
    the warm-up has built the walk arrays (:data:`WALK_ARRAYS`), a selection of every edge
    expands each level over them instead (:func:`_walk_arrays`), with the same result.
    """
    visited = {seed.id for seed in seeds}
    ordered = sorted(seeds, key=lambda e: e.id)
    frontier: Iterable[Entity] = ordered
    levels: list[tuple[Reach | int, ...]] = []
    arrays = _arrays_for(graph, selection)
    if arrays is not None:
        return _walk_arrays(graph, arrays, ordered, selection, depth, budget, token)
    # Before the index of every edge exists (a cold start), each level's concepts have their
    # edges made in one pass over the files that may name them (Snapshot.prefetch_edges).
    frontier_ids = [seed.id for seed in ordered if seed.section_number is None]
    for distance in range(1, depth + 1):
        graph.snapshot.prefetch_edges(frontier_ids)
        level = _Level()
        expanded: list[Entity] = []
        for node in frontier:
            token.check()
            expanded.append(node)
            _expand(graph, node, selection, budget, token, visited, level)
            if budget.exhausted:
                break
        if selection.community and not budget.exhausted:
            # The budget lasted: every node of the frontier was expanded.
            _offer_communities(graph, selection, expanded, visited, budget, token, level)
        reached = _close(level, levels, visited, token)
        if budget.exhausted or not reached or distance == depth:
            break
        # Each node's entity made as the next level comes to it: a level the budget cuts
        # short makes none for the nodes it never expands (thousands past a hub). No level
        # walked arc by arc holds a pending node.
        frontier = (_entity(graph, cast(Reach, r)) for r in reached)
        frontier_ids = [cast(Reach, r)[TARGET] for r in reached
                        if cast(Reach, r)[SECTION] is None]
    return Walk(graph, tuple(levels), budget.exhausted)


def _close(level: _Level, levels: list[tuple[Reach | int, ...]], visited: set[str],
           token: CancelToken) -> tuple[Reach | int, ...]:
    """The nodes ``level`` reached, by ID: added to ``levels`` and to ``visited``; a level of
    places as places only (:meth:`_Pending.close`)."""
    token.check()
    best, pending = level.best, level.pending
    reached: tuple[Reach | int, ...]
    if pending is not None:
        reached = pending.close(list(map(best.__getitem__, sorted(best))))
    else:
        reached = tuple(map(best.__getitem__, sorted(best)))
    levels.append(reached)
    visited.update(best)
    return reached


def _arrays_for(graph: BundleGraph, selection: Selection) -> WalkArrays | None:
    """The snapshot's walk arrays when the selection follows every edge they hold and the
    warm-up has built them, or an earlier process kept them for this revision (read back now,
    and kept by the snapshot: a restarted server's first walk goes over them, importing numpy
    when the warm-up has not yet, about 40 ms once: at 50,000 concepts a first subgraph took
    0.6-0.7 s arc by arc against 0.15 s over them)."""
    if not selection.every_edge:
        return None
    snapshot = graph.snapshot
    arrays = built_value(snapshot, WALK_ARRAYS)
    if arrays is not None or snapshot.inbound is None:
        return arrays
    kept = graph.kept_walk_arrays()
    return None if kept is None else of_snapshot(snapshot, WALK_ARRAYS, lambda: kept)


def _walk_arrays(
    graph: BundleGraph,
    arrays: WalkArrays,
    seeds: list[Entity],
    selection: Selection,
    depth: int,
    budget: Budget,
    token: CancelToken,
) -> Walk:
    """:func:`walk` over the arrays: each level's concepts wholly within the budget expanded
    at once (:func:`~bundle_mcp.okf.walk_arrays.best_arcs`), their sections, the frontier's
    sections and the node the budget runs out in as :func:`_expand` offers them. Each level's
    nodes are places in its :class:`_Pending`, made into Reaches only when read."""
    from .walk_arrays import mark, seen_mask

    visited = {seed.id for seed in seeds}
    seen = seen_mask(arrays, visited)
    frontier: Frontier = seeds
    levels: list[tuple[Reach | int, ...]] = []
    pending: list[_Pending | None] = []
    for distance in range(1, depth + 1):
        level = _Level()
        expanded = _expand_level(graph, arrays, frontier, selection, budget, token, visited,
                                 seen, level)
        if selection.community and expanded is not None:
            _offer_shared_tags(graph, arrays, selection, expanded, seen, budget, token, level)
        reached = _close(level, levels, visited, token)
        places = level.pending
        assert places is not None  # _expand_level made the level's
        pending.append(places)
        if budget.exhausted or not reached or distance == depth:
            break
        mark(arrays, seen, level.best)
        frontier = _Places(cast(tuple[int, ...], reached), places)
    return Walk(graph, tuple(levels), budget.exhausted, tuple(pending))


@dataclass(frozen=True, slots=True)
class _Places:
    """A level of places as the next one's frontier: the places, and the record they are in."""

    places: tuple[int, ...]
    pending: _Pending

    def entity(self, n: int) -> Entity:
        return self.pending.entity(self.places[n])

    def entities(self) -> list[Entity]:
        return list(map(self.pending.entity, self.places))


Frontier = Sequence[Entity] | _Places


def _expand_level(
    graph: BundleGraph,
    arrays: WalkArrays,
    frontier: Frontier,
    selection: Selection,
    budget: Budget,
    token: CancelToken,
    visited: AbstractSet[str],
    seen: Any,
    level: _Level,
) -> list[Entity] | None:
    """Offer ``level`` what expanding ``frontier`` (in ID order) node by node with
    :func:`_expand` would, for the same budget: the budget is granted once, the nodes wholly
    within it are expanded together, and the one it runs out in arc by arc with what is left.
    Returns the frontier's entities when the budget lasted (the walk then offers their shared
    tags), else ``None``. The nodes the arrays reach are kept as their places in the level's
    :class:`_Pending` (``level.pending``, made here), not made."""
    import numpy as np

    from .walk_arrays import best_arcs

    if isinstance(frontier, _Places):
        count = len(frontier.places)
        at = np.fromiter(frontier.pending.concepts(frontier.places), np.int64, count)
        node_at: Callable[[int], Entity] = frontier.entity
    else:
        count = len(frontier)
        place = arrays.index
        at = np.fromiter((place[e.id] if e.section_number is None else -1 for e in frontier),
                         np.int64, count)
        node_at = frontier.__getitem__
    is_concept = at >= 0
    units = arrays.units(selection.incoming and selection.part_of, selection.unsliced_sections)
    units = np.where(is_concept, units[np.where(is_concept, at, 0)], 1)
    reached = np.cumsum(units)
    total = int(reached[-1]) if count else 0
    granted = budget.grant(total)
    whole = int(np.searchsorted(reached, granted, side="right"))  # nodes wholly granted
    left = granted - (int(reached[whole - 1]) if whole else 0)
    found = best_arcs(arrays, at[:whole][is_concept[:whole]], selection.incoming, seen, token)
    kept = level.pending = _Pending(graph, arrays, found)
    level.best.update(kept.arc_places())
    sectioned = selection.incoming and selection.part_of
    for n in range(whole):
        token.check()
        concept_at = int(at[n])
        if concept_at < 0:
            # A section: its one unit is granted with the rest, as _expand grants it.
            _expand(graph, node_at(n), selection, UNBOUNDED, token, visited, level)
        elif sectioned and arrays.sections[concept_at] and (
                selection.unsliced_sections or arrays.sliced[concept_at]):
            node = node_at(n)
            _offer_sections(level, node, graph.section_arcs(node.id), visited)
    if whole < count and left:
        _expand(graph, node_at(whole), selection, EdgeBudget(left), token, visited, level)
    if granted < total or budget.exhausted:
        return None
    return frontier.entities() if isinstance(frontier, _Places) else list(frontier)


# What _expand_level reads of an arc's kind and direction, in C.
_NEGATIVE_WEIGHT = {kind: -weight for kind, weight in EDGE_WEIGHT.items()}
_DIRECTION = (OUTGOING, INCOMING)  # by whether the arc is walked backwards


def _entity(graph: BundleGraph, reach: Reach) -> Entity:
    """The entity a walk reached (:data:`Reach`), made when asked for."""
    number: int | None = reach[SECTION]
    if number is None:
        return graph.concept(reach[TARGET])
    return graph.section_of(reach[PREDECESSOR], number, reach[TARGET])


def _expand(
    graph: BundleGraph,
    node: Entity,
    selection: Selection,
    budget: Budget,
    token: CancelToken,
    visited: AbstractSet[str],
    level: _Level,
) -> None:
    """Offer ``level`` every edge of ``node`` the selection admits to a node not ``visited``."""
    best = level.best
    if node.section_number is not None:
        # A section's only edge is PART_OF to the concept it was cut from.
        if budget.grant(1) and selection.part_of:
            target = node.concept_id
            if target not in visited:
                key: Key = (-PART_OF_WEIGHT, PART_OF, OUTGOING, node.id, node.id, target)
                _offer(level, target, key, PART_OF_KIND, node, None, 1)
        return
    concept_id = node.id
    incoming, project = selection.incoming, selection.project
    every_edge = selection.every_edge
    concepts = graph.snapshot.concepts
    best_of = best.get
    groups = 2 if selection.fields is None or selection.fields else 1
    for group in range(groups):
        # Field edges come after links and relations, and are fetched only when reached.
        arcs = graph.arcs(concept_id) if group == 0 else graph.field_arcs(concept_id, token)
        granted = budget.grant(len(arcs))
        for key, other, kind, backwards, loop in arcs[:granted] if granted < len(arcs) else arcs:
            if loop or other in visited or (backwards and not incoming):
                continue
            if not every_edge:
                if kind == NAVIGATION:
                    if not selection.links:
                        continue
                elif kind == RELATION:
                    if not selection.allows_relation(key[1]):
                        continue
                elif not selection.allows_field(key[1]):
                    continue
                if project is not None and not in_project(concepts[other].path, project):
                    continue
            current = best_of(other)
            if current is None:
                best[other] = [other, key, kind, node, None, 1]
            else:
                if isinstance(current, int):
                    current = level.made(other, current)
                current[EDGES] += 1
                if key < current[KEY]:
                    current[KEY:SECTION + 1] = key, kind, node, None
        if granted < len(arcs):
            return
    # PART_OF points from a section to its concept, so a concept reaches its sections only
    # over incoming edges.
    if not (incoming and selection.part_of):
        return
    # The arcs and the count both come from the sections' line spans, no section decoded.
    sections = graph.section_arcs(concept_id)
    if not (selection.unsliced_sections or graph.sliced(concept_id)):
        return
    granted = budget.grant(len(sections))
    _offer_sections(level, node, sections[:granted], visited)


def _offer_sections(level: _Level, node: Entity, sections: Iterable[SectionArc],
                    visited: AbstractSet[str]) -> None:
    """The concept ``node``'s ``PART_OF`` arcs from ``sections`` (its :meth:`section_arcs`),
    each to a section not ``visited``: :func:`_offer` inlined (a walk past a hub offers
    thousands of sections)."""
    best = level.best
    best_of = best.get
    for key, number in sections:
        target = key[4]
        if target in visited:
            continue
        current = best_of(target)
        if current is None:
            best[target] = [target, key, PART_OF_KIND, node, number, 1]
        else:
            if isinstance(current, int):  # a section's ID is no concept's: never, in fact
                current = level.made(target, current)
            current[EDGES] += 1
            if key < current[KEY]:
                current[KEY:SECTION + 1] = key, PART_OF_KIND, node, number


def _offer(
    level: _Level,
    target: str,
    key: Key,
    kind: str,
    node: Entity,
    section: int | None,
    edges: int,
) -> None:
    """``edges`` edges of ``key`` from ``node`` reach ``target`` (``section``: its place in
    ``node``'s document when it is one of ``node``'s sections). ``_expand`` inlines this for a
    concept's own edges, the bulk of a walk, and so do :func:`_offer_sections` and
    :func:`_offer_communities` (a depth-2 walk from the 50,000-concept bench bundle's hub
    offers 15,000 members of shared tags: 10.0 → 8.5 ms of CPU inlined)."""
    best = level.best
    current = best.get(target)
    if current is None:
        best[target] = [target, key, kind, node, section, edges]
    else:
        if isinstance(current, int):
            current = level.made(target, current)
        current[EDGES] += edges
        if key < current[KEY]:
            current[KEY:SECTION + 1] = key, kind, node, section


def _carriers(graph: BundleGraph, frontier: list[Entity]) -> dict[str, tuple[Entity, int]]:
    """Each tag of the frontier → its first node in ID order and how many nodes carry it."""
    carriers: dict[str, tuple[Entity, int]] = {}
    for node in frontier:  # already in ID order
        for tag in graph.tags_of(node):
            first, count = carriers.get(tag, (node, 0))
            carriers[tag] = (first, count + 1)
    return carriers


def _offer_communities(
    graph: BundleGraph,
    selection: Selection,
    frontier: list[Entity],
    visited: set[str],
    budget: Budget,
    token: CancelToken,
    level: _Level,
) -> None:
    """SHARES_COMMUNITY edges of one level walked arc by arc, each tag's members examined once
    (a level walked over the arrays: :func:`_offer_shared_tags`).

    Every frontier node carrying a tag reaches the same members, so the tag is expanded once,
    from the first such node in ID order: its key (predecessor ID) is the smallest any of them
    would give, so the kept edge is the one a node-by-node expansion would keep. Each member
    still counts one edge per frontier node sharing the tag (``edge_count``).
    """
    carriers = _carriers(graph, frontier)
    members = graph.tag_members(selection.project, token) if carriers else {}
    best = level.best
    best_of = best.get
    for tag in sorted(carriers):
        token.check()
        node, carriers_count = carriers[tag]
        node_id = node.id
        tagged = members.get(tag, ())
        granted = budget.grant(len(tagged))
        # _offer inlined: a level past a hub offers its tags' members by the ten thousand.
        # A member already reached keeps its key unless that key's first item (the negated
        # weight) is not below a shared tag's, so the tuple is made only when it may be kept.
        for other in tagged[:granted] if granted < len(tagged) else tagged:
            if other in visited:
                continue
            current = best_of(other)
            if current is None:
                best[other] = [other, (_COMMUNITY_KEY_WEIGHT, SHARES_COMMUNITY, OUTGOING,
                                       node_id, node_id, other),
                               COMMUNITY_KIND, node, None, carriers_count]
                continue
            assert not isinstance(current, int)  # a level walked arc by arc holds no place
            _offer_shared(current, other, node, carriers_count)
        if granted < len(tagged):
            return


def _offer_shared(current: Reach, other: str, carrier: Entity, edges: int) -> None:
    """``edges`` more SHARES_COMMUNITY edges from ``carrier`` reach the node ``current``."""
    current[EDGES] += edges
    # Its key is kept unless its first item (the negated weight) is not below a shared tag's,
    # so the tuple is made only when it may be kept.
    if current[KEY][0] >= _COMMUNITY_KEY_WEIGHT:
        carrier_id = carrier.id
        key: Key = (_COMMUNITY_KEY_WEIGHT, SHARES_COMMUNITY, OUTGOING, carrier_id, carrier_id,
                    other)
        if key < current[KEY]:
            current[KEY:SECTION + 1] = key, COMMUNITY_KIND, carrier, None


def _offer_shared_tags(
    graph: BundleGraph,
    arrays: WalkArrays,
    selection: Selection,
    frontier: list[Entity],
    seen: Any,
    budget: Budget,
    token: CancelToken,
    level: _Level,
) -> None:
    """:func:`_offer_communities` for a level of places, its members as the arrays' concept
    places: the same budget granted tag by tag, then each member not visited offered once
    with every shared tag that reaches it, its edges summed and its key the smallest carrier's
    (the key a tag-by-tag offer keeps: a shared tag's keys differ by their carrier's ID alone).
    A member the level holds already takes that offer as :func:`_offer_communities` would
    (one by one, a few thousand past the 50,000-concept hub); each new one is a record of the
    level's (:meth:`_Pending.share`), made in numpy. At 50,000 concepts the hub's three tags
    offer 23,180 members, 12,600 of them new, which took 3.9 ms node by node."""
    import numpy as np

    from .walk_arrays import run_starts

    carriers = _carriers(graph, frontier)
    if not carriers:
        return
    pending = level.pending
    assert pending is not None  # a level walked over the arrays holds places
    nodes = sorted({node.id: node for node, _ in carriers.values()}.items())
    rank = {node_id: n for n, (node_id, _) in enumerate(nodes)}
    parts, ranks, counts = [], [], []
    for tag in sorted(carriers):
        token.check()
        node, carriers_count = carriers[tag]
        tagged = graph.tag_places(selection.project, tag, arrays, token)
        granted = budget.grant(len(tagged))
        parts.append(tagged[:granted])
        ranks.append(rank[node.id])
        counts.append(carriers_count)
        if granted < len(tagged):
            break
    lengths = [len(part) for part in parts]
    offered = np.concatenate(parts)
    carrier = np.repeat(np.array(ranks, np.int64), lengths)
    edges = np.repeat(np.array(counts, np.int64), lengths)
    unseen = ~seen[offered]
    offered, carrier, edges = offered[unseen], carrier[unseen], edges[unseen]
    if not len(offered):
        return
    token.check()
    # By member, then carrier: each member's run begins with its smallest carrier.
    order = np.lexsort((carrier, offered))
    offered, carrier, edges = offered[order], carrier[order], edges[order]
    firsts = run_starts(offered)
    members, carrier, edges = offered[firsts], carrier[firsts], np.add.reduceat(edges, firsts)
    best = level.best
    held = np.zeros(len(arrays.ids), np.bool_)  # the concepts the level holds already
    index = arrays.index
    places = np.fromiter(map(index.get, best, itertools.repeat(-1)), np.int64, len(best))
    held[places[places >= 0]] = True
    again = held[members]
    ids = arrays.ids
    for member, carrier_rank, count in zip(members[again].tolist(), carrier[again].tolist(),
                                          edges[again].tolist(), strict=True):
        other = ids[member]
        current = best[other]
        if isinstance(current, int):
            if current >= 0 and pending.heavier_arc(current):
                # Reached over a heavier edge: the shared tags only count, and the node stays
                # a place (its key could not become a shared tag's).
                pending.count_more(current, count)
                continue
            current = level.made(other, current)
        _offer_shared(current, other, nodes[carrier_rank][1], count)
    new = ~again
    best.update(pending.share(members[new].tolist(), [node for _, node in nodes],
                              carrier[new].tolist(), edges[new].tolist()))


# A SHARES_COMMUNITY key's first item (keys sort by negated weight, heaviest first).
_COMMUNITY_KEY_WEIGHT = -COMMUNITY_WEIGHT


# --------------------------------------------------------------------------------------------
# Names, types, projects


def resolve(snapshot: Snapshot, value: str, project: str | None) -> Entity | None:
    """:meth:`BundleGraph.resolve` on the snapshot's graph."""
    return graph_of(snapshot).resolve(value, project)


def entity_name(entity: Entity) -> str:
    """A concept's name (:func:`~bundle_mcp.okf.names.concept_name`) or a section's
    (:func:`~bundle_mcp.okf.sections.section_name`)."""
    section = entity.section
    if section is not None:
        return section_name(section)
    return name_of(entity.fields, lambda: entity.doc)


def entity_type(entity: Entity) -> str:
    """``section``, or a concept's OKF ``type`` (empty when it has none)."""
    return SECTION_TYPE if entity.is_section else text_field(entity.fields, "type")


def project_id(path: str) -> str | None:
    """The top folder of a bundle path; ``None`` for a file at the root."""
    head, sep, _rest = path.partition("/")
    return head if sep else None


def in_project(path: str, project: str | None) -> bool:
    return project is None or path.startswith(project + "/")


# --------------------------------------------------------------------------------------------
# Previews of an entity's text


def clip(text: str, max_chars: int) -> tuple[str, bool]:
    """``text`` cut to at most ``max_chars`` characters, marker included, and whether it cut.

    The cut falls on the last whitespace that keeps at least half of the room, and the result
    ends with ``…``; a text with no such boundary (one long word or URL) is cut hard rather
    than dropped. With no room at all the result is empty.
    """
    if len(text) <= max_chars:
        return text, False
    if max_chars <= 0:
        return "", True
    room = max_chars - len(ELLIPSIS)
    cut = max(text.rfind(ch, 0, room + 1) for ch in _SPACES)
    if cut < room // 2:
        cut = room
    return text[:cut].rstrip() + ELLIPSIS, True


def preview(text: str, max_chars: int) -> tuple[str, bool]:
    """A whitespace-collapsed preview of ``text`` within ``max_chars`` (see :func:`clip`).

    Words are read lazily, so a 16 MiB body costs as much as its first ``max_chars`` characters.
    """
    words: list[str] = []
    length = 0
    for match in _NON_SPACE.finditer(text):
        word = match.group()
        length += len(word) + (1 if words else 0)
        words.append(word)
        if length > max_chars:
            return clip(" ".join(words), max_chars)
    return " ".join(words), False
