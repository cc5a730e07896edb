"""Which part of a bundle's graph an export holds: nodes, edges, filters and the node budget.

The graph is the one the traversal verbs walk (:mod:`bundle_mcp.okf.graph`): the concepts, and
:meth:`BundleGraph.steps` for their edges (resolved navigation links, typed relations, field
edges, and ``PART_OF`` from a section to its concept), so an export never disagrees with what
expand_neighbors or query_subgraph would reach. Two things differ, both because an export is a
whole picture rather than a neighbourhood:

- A concept's edge to itself is kept: a walk ignores it (a concept is not its own neighbour),
  a drawing of the bundle should show it.
- Shared tags (``SHARES_COMMUNITY``, n² pairs for a tag on n concepts) become one *tag node* per
  tag and one ``HAS_TAG`` edge per concept carrying it: the same relation (two concepts share a
  community exactly when they reach a common tag node), in linear size.

Edges are between entities (concepts, sections, tags): a typed relation between sub-resources
(``a#intro`` → ``b#part``) is the edge ``a`` → ``b``, once per (source, target, kind, type).

Selection, in order: the concepts ``project`` and ``types`` admit (the search filters' own rule,
:class:`~bundle_mcp.okf.filters.ConceptFilter`), their sections and tags when asked for, the
edges among all of those; then, with ``seeds``, the nodes within ``depth`` hops of a seed over
those edges in either direction (a hop is one edge of the exported graph, so a concept reaches
a tag at 1 and the concepts sharing it at 2), with every selected edge between the nodes kept.
Last, the budget: more nodes than ``max_nodes`` is :class:`OverBudget`, never a quiet cut.

Order: concepts by ID, then sections by concept and first line, then tags by ID; edges by
(source, target, kind, type).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import quote

from ..cancel import CancelToken
from ..errors import BundleMcpError
from ..model import Snapshot
from ..okf.filters import ConceptFilter
from ..okf.folding import fold
from ..okf.graph import (
    INCOMING,
    PART_OF,
    PART_OF_KIND,
    SECTION_TYPE,
    UNBOUNDED,
    BundleGraph,
    Entity,
    Selection,
    graph_of,
)
from ..okf.ids import concept_id_problem
from ..okf.names import concept_name
from ..okf.properties import text_field
from ..okf.sections import section_name
from ..okf.suggest import suggest
from ..okf.temporal import DATE_PROFILE, Reference

__all__ = [
    "CONCEPT",
    "DEFAULT_MAX_NODES",
    "HAS_TAG",
    "KINDS",
    "SECTION",
    "TAG",
    "TAG_KIND",
    "TAG_PREFIX",
    "ExportGraph",
    "GraphEdge",
    "GraphQuery",
    "Node",
    "OverBudget",
    "SelectionError",
    "select",
    "tag_id",
]

# Node kinds, in the order nodes are listed.
CONCEPT = "concept"
SECTION = "section"
TAG = "tag"
KINDS = (CONCEPT, SECTION, TAG)

# A tag node and its edges. Concept IDs never contain ':' (okf/ids.py) and a section's locator
# percent-encodes its path, so no concept or section ID can start with this prefix.
TAG_PREFIX = "tag:"
HAS_TAG = "HAS_TAG"
TAG_KIND = "tag"

# Large enough for every bundle a drawing can still show; a bigger export is asked for by name.
DEFAULT_MAX_NODES = 2000

# What a tag node's ID percent-encodes: '%' (so the encoding can be undone), and the characters
# no ID of another kind contains either (backslash, controls, line separators), so every writer
# can put any node ID into its syntax with plain quoting.
_TAG_UNSAFE = re.compile(r"[%\\\x00-\x1f\x7f-\x9f\u2028\u2029]")

# Edges of a concept, as the walk lists them, outgoing only: every edge is listed once, by the
# concept it leaves. Sections are reached over the PART_OF edges that point into a concept.
_CONCEPT_EDGES = Selection(links=True, typed=None, part_of=False, community=False,
                           incoming=False)
_SECTION_EDGES = Selection(links=False, typed=frozenset(), part_of=True, community=False,
                           incoming=True, fields=frozenset())


@dataclass(frozen=True, slots=True)
class Node:
    """One node. ``type`` is a concept's frontmatter type (possibly empty), ``section`` or
    ``tag``; ``path`` the file of a concept or section; ``concept`` a section's concept;
    ``lines`` a section's first and last line; ``tags`` a concept's distinct tags, sorted."""

    id: str
    kind: str
    title: str
    type: str
    path: str | None = None
    concept: str | None = None
    lines: tuple[int, int] | None = None
    tags: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, order=True)
class GraphEdge:
    """One directed edge. ``kind``: ``navigation``, ``relation``, ``field``, ``part_of`` or
    ``tag``; ``type``: ``LINKS_TO``, the relation's type, the field edge's name, ``PART_OF`` or
    ``HAS_TAG``."""

    source: str
    target: str
    kind: str
    type: str


@dataclass(frozen=True, slots=True)
class GraphQuery:
    """What to export. ``types`` as given (matched folded); ``depth`` only with ``seeds``."""

    project: str | None = None
    types: tuple[str, ...] = ()
    seeds: tuple[str, ...] = ()
    depth: int = 1
    with_tags: bool = False
    with_sections: bool = False
    max_nodes: int = DEFAULT_MAX_NODES

    def echo(self) -> dict[str, object]:
        """The selection as an export reports it (lists sorted, so the echo is stable)."""
        return {
            "project": self.project,
            "types": sorted(set(self.types)),
            "seeds": list(self.seeds),
            "depth": self.depth if self.seeds else None,
            "with_tags": self.with_tags,
            "with_sections": self.with_sections,
            "max_nodes": self.max_nodes,
        }


@dataclass(frozen=True, slots=True)
class ExportGraph:
    nodes: tuple[Node, ...]
    edges: tuple[GraphEdge, ...]
    query: GraphQuery
    revision: str
    concepts_in_bundle: int

    def summary(self) -> str:
        """The one line every format states about itself (as a comment, where it has them)."""
        nodes, edges = _plural(len(self.nodes), "node"), _plural(len(self.edges), "edge")
        return f"bundle-mcp graph: {nodes}, {edges}"

    def counts(self) -> dict[str, int]:
        """Nodes by kind, every kind listed."""
        found = dict.fromkeys(KINDS, 0)
        for node in self.nodes:
            found[node.kind] += 1
        return found


class SelectionError(BundleMcpError, ValueError):
    """A query this bundle cannot answer: a folder that is not one, a seed that names nothing
    in the selected graph. ``hints`` are lines a caller may show under the message."""

    def __init__(self, message: str, hints: Iterable[str] = ()) -> None:
        super().__init__(message)
        self.hints = tuple(hints)


class OverBudget(BundleMcpError):
    """The selection has more nodes than the budget allows; nothing is exported."""

    def __init__(self, nodes: int, edges: int, max_nodes: int) -> None:
        super().__init__(f"{nodes} nodes exceed the budget of {max_nodes}")
        self.nodes = nodes
        self.edges = edges
        self.max_nodes = max_nodes


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def tag_id(tag: str) -> str:
    """The node ID of a tag: ``tag:`` + the tag, with :data:`_TAG_UNSAFE` percent-encoded."""
    return TAG_PREFIX + _TAG_UNSAFE.sub(lambda m: quote(m.group(), safe=""), tag)


def select(snapshot: Snapshot, query: GraphQuery, token: CancelToken) -> ExportGraph:
    """The export ``query`` asks for (module docstring).

    Raises:
        SelectionError: ``project`` is not a folder of the bundle, or a seed names no node of
            the selected graph.
        OverBudget: more nodes than ``query.max_nodes``.
    """
    _check_project(snapshot, query.project)
    graph = graph_of(snapshot)
    admitted = _admitted(snapshot, query)
    concepts = frozenset(admitted)
    nodes: dict[str, Node] = {}
    edges: set[GraphEdge] = set()
    for concept_id in admitted:
        token.check()
        entity = graph.concept(concept_id)
        nodes[concept_id] = Node(
            concept_id, CONCEPT, concept_name(entity.doc), text_field(entity.doc.fm, "type"),
            entity.doc.path, tags=graph.tags_of(entity),
        )
        _concept_edges(graph, entity, concepts, query, token, nodes, edges)
    if query.seeds:
        kept = _within(query, _resolve_seeds(snapshot, graph, query, nodes), edges, token)
        nodes = {k: v for k, v in nodes.items() if k in kept}
        edges = {e for e in edges if e.source in kept and e.target in kept}
    if len(nodes) > query.max_nodes:
        raise OverBudget(len(nodes), len(edges), query.max_nodes)
    return ExportGraph(
        nodes=tuple(sorted(nodes.values(), key=_node_order)),
        edges=tuple(sorted(edges)),
        query=query,
        revision=snapshot.revision,
        concepts_in_bundle=len(snapshot.concepts),
    )


def _node_order(node: Node) -> tuple[int, str, int, str]:
    if node.kind == SECTION and node.concept is not None and node.lines is not None:
        return (1, node.concept, node.lines[0], node.id)
    return (KINDS.index(node.kind), node.id, 0, node.id)


def _check_project(snapshot: Snapshot, project: str | None) -> None:
    if project is None:
        return
    if concept_id_problem(project, allow_reserved_names=True):
        raise SelectionError(
            f"{project!r} is not a clean bundle-relative folder path such as 'tables'"
        )
    if project not in snapshot.directories:
        raise SelectionError(f"{project!r} is not a folder of this bundle")


def _admitted(snapshot: Snapshot, query: GraphQuery) -> tuple[str, ...]:
    """The concepts the folder and type filters admit, by the search filters' rule, by ID."""
    rule = ConceptFilter(types=frozenset(fold(t) for t in query.types), project=query.project)
    # The filter reads no staleness here, so any reference will do.
    reference = Reference(DATE_PROFILE, None, None)
    return tuple(
        concept_id for concept_id, doc in snapshot.concepts.items()
        if rule.admits(doc, reference)
    )


def _concept_edges(
    graph: BundleGraph,
    entity: Entity,
    concepts: frozenset[str],
    query: GraphQuery,
    token: CancelToken,
    nodes: dict[str, Node],
    edges: set[GraphEdge],
) -> None:
    """Add a concept's outgoing edges, and its sections and tags when the query asks."""
    selection = dataclasses.replace(_CONCEPT_EDGES, project=query.project)
    for step in graph.steps(entity, selection, UNBOUNDED, token, loops=True):
        if step.target.id in concepts:  # the type filter; steps() applied the folder
            edges.add(GraphEdge(entity.id, step.target.id, step.kind, step.relationship))
    if query.with_sections:
        for step in graph.steps(entity, _SECTION_EDGES, UNBOUNDED, token):
            section = step.target.section
            if step.direction != INCOMING or section is None:
                continue
            nodes[step.target.id] = Node(
                step.target.id, SECTION, section_name(section), SECTION_TYPE,
                entity.doc.path, entity.id, (section.line_start, section.line_end),
            )
            edges.add(GraphEdge(step.target.id, entity.id, PART_OF_KIND, PART_OF))
    if query.with_tags:
        for tag in graph.tags_of(entity):
            node_id = tag_id(tag)
            nodes.setdefault(node_id, Node(node_id, TAG, tag, TAG))
            edges.add(GraphEdge(entity.id, node_id, TAG_KIND, HAS_TAG))


def _resolve_seeds(
    snapshot: Snapshot, graph: BundleGraph, query: GraphQuery, nodes: Mapping[str, Node]
) -> list[str]:
    """The node ID of each seed; a section may be named by its plain path, as everywhere."""
    found: list[str] = []
    missing: list[str] = []
    hints: list[str] = []
    for seed in query.seeds:
        entity = graph.resolve(seed, query.project)
        node_id = entity.id if entity is not None else seed
        if node_id not in nodes and seed.startswith(TAG_PREFIX):
            node_id = tag_id(seed[len(TAG_PREFIX):])  # the tag as written, not yet encoded
        if node_id in nodes:
            found.append(node_id)
            continue
        missing.append(seed)
        hints.extend(_why_not(snapshot, query, seed, entity, nodes))
    if missing:
        names = ", ".join(repr(s) for s in missing)
        raise SelectionError(f"no node of the selected graph is {names}", hints)
    return found


def _why_not(
    snapshot: Snapshot,
    query: GraphQuery,
    seed: str,
    entity: Entity | None,
    nodes: Mapping[str, Node],
) -> list[str]:
    if seed.startswith(TAG_PREFIX) and not query.with_tags:
        return [f"{seed!r}: tag nodes are exported with --with-tags"]
    if entity is not None and entity.is_section:
        if not query.with_sections:
            return [f"{seed!r}: sections are exported with --with-sections"]
        if entity.concept_id in nodes:
            return [f"{seed!r}: a concept of one section is not cut into sections; "
                    f"name the concept {entity.concept_id!r}"]
    if entity is not None or seed in snapshot.concepts:
        return [f"{seed!r}: this concept is left out by the --project or --type filter"]
    guesses = suggest(snapshot, seed, project=query.project)
    if not guesses:
        return [f"{seed!r}: no such concept"]
    return [f"{seed!r}: did you mean {', '.join(repr(g.concept_id) for g in guesses)}?"]


def _within(
    query: GraphQuery, seeds: list[str], edges: set[GraphEdge], token: CancelToken
) -> set[str]:
    """The nodes at most ``query.depth`` edges from a seed, edges taken in either direction."""
    around: dict[str, set[str]] = {}
    for edge in edges:
        around.setdefault(edge.source, set()).add(edge.target)
        around.setdefault(edge.target, set()).add(edge.source)
    kept = set(seeds)
    frontier = sorted(kept)
    for _ in range(query.depth):
        reached: set[str] = set()
        for node_id in frontier:
            token.check()
            reached.update(around.get(node_id, ()))
        frontier = sorted(reached - kept)
        if not frontier:
            break
        kept.update(frontier)
    return kept
