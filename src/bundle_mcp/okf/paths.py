"""Shortest paths between two concepts, over the edges the walk verbs walk (:mod:`.graph`).

The search is breadth-first from the start concept, one level per hop, over
:meth:`~bundle_mcp.okf.graph.BundleGraph.steps` with the caller's :class:`Selection` and
:class:`Budget`: the same edges, directions and project scope as expand_neighbors. Nodes are
concepts only: a section's one edge (``PART_OF``) leads back to its own concept, so no shortest
path between two concepts goes through one. ``SHARES_COMMUNITY`` is not walked: a tag on n
concepts would put every pair of them one hop apart, and "both carry tag t" is no chain of
statements an agent can follow (the caller does not select it).

Every edge from a level to a concept first reached at the next level is kept (as one step per
pair of nodes, the preferred one of :func:`edge_key`), so the kept edges form the DAG of all
shortest paths from the start. The search stops at the level that reaches the target, at
``max_hops``, when a level reaches nothing new, or when the budget runs out. From the target the
DAG is then pruned to the nodes that lead to it, its paths counted (saturating at
:data:`COUNT_CAP`) and the first ``max_paths`` listed in lexicographic order of their node IDs.
Work is bounded by the budget (each examined edge costs one unit, and every concept but the
start is reached over one), and what is kept by the edges examined.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import pairwise

from ..cancel import CancelToken
from ..model import LINKS_TO
from .graph import (
    OUTGOING,
    PART_OF,
    SHARES_COMMUNITY,
    Budget,
    BundleGraph,
    Entity,
    Selection,
    Step,
    field_edge_names,
    in_project,
)

# Counting shortest paths saturates here: in a dense graph their number grows exponentially with
# the length, and an agent needs "many", not the exact figure.
COUNT_CAP = 1_000_000

# Edge kinds a path never walks (see the module docstring).
NOT_PATH_EDGES = frozenset({PART_OF, SHARES_COMMUNITY})

# Why a search returned what it did.
FOUND = "found"  # the shortest paths (at least one)
NONE_WITHIN = "none_within"  # no path of at most max_hops hops; longer ones may exist
UNREACHABLE = "unreachable"  # every concept the start reaches was visited: no path at all
CUT = "cut"  # the budget ran out first (with paths: others of that length may exist)
OUTSIDE_PROJECT = "outside_project"  # an end lies outside the project: nothing is walked


@dataclass(frozen=True, slots=True)
class Hop:
    """One hop of a path: from ``source`` to ``target`` (concept IDs, in path order) over
    ``step``, the edge as seen from ``source`` (``step.direction`` is ``incoming`` when the hop
    walks the stored edge backwards)."""

    source: str
    target: str
    step: Step


@dataclass(frozen=True, slots=True)
class Path:
    nodes: tuple[Entity, ...]  # from the start to the target; one node for a zero-hop path
    hops: tuple[Hop, ...]  # len(nodes) - 1


@dataclass(frozen=True, slots=True)
class PathSearch:
    outcome: str  # FOUND, NONE_WITHIN, UNREACHABLE, CUT or OUTSIDE_PROJECT
    paths: tuple[Path, ...]  # lexicographic by node IDs, at most max_paths
    distance: int | None  # hops of every returned path; None without one
    total: int  # shortest paths that exist in what was searched, at most COUNT_CAP
    visited: int  # concepts the search reached, the start included
    hops_searched: int  # levels completed or begun
    outside: tuple[str, ...] = ()  # for OUTSIDE_PROJECT: "from" and/or "to"

    @property
    def cut(self) -> bool:
        """The budget ran out: with paths, others of the same length may be missing."""
        return self.outcome == CUT


def path_selection(
    names: Iterable[str], *, incoming: bool, project: str | None
) -> Selection:
    """The edges a path walks: ``LINKS_TO``, the typed relations and the field edges ``names``
    mention (case-insensitive, as expand_neighbors matches them), or all three kinds with every
    relation type and field edge when ``names`` is empty. Never ``PART_OF`` or
    ``SHARES_COMMUNITY``. A field edge is a statement of the concept's own frontmatter ("this
    was computed by that skill"), a chain an agent can follow like a relation, so it is a path
    edge."""
    chosen = frozenset(n.upper() for n in names)
    if not chosen:
        return Selection(True, None, False, False, incoming=incoming, project=project)
    return Selection(
        links=LINKS_TO in chosen, typed=chosen, part_of=False, community=False,
        incoming=incoming, fold_case=True, project=project, fields=field_edge_names(chosen),
    )


def edge_key(step: Step) -> tuple[bool, float, str, str, str]:
    """Which of several edges between two consecutive nodes a path shows: one read forwards
    first (a hop that follows the edge's own direction states what the author wrote), then
    the strongest (a typed relation before a link), then by name and stored ends. A total
    order, so the choice never depends on the order edges are examined in."""
    return (step.direction != OUTGOING, -step.weight, step.relationship, step.edge_from,
            step.edge_to)


def shortest_paths(
    graph: BundleGraph,
    start: Entity,
    target: Entity,
    selection: Selection,
    max_hops: int,
    max_paths: int,
    budget: Budget,
    token: CancelToken,
) -> PathSearch:
    """All shortest paths from ``start`` to ``target`` (both concepts) within ``max_hops``,
    the first ``max_paths`` of them listed.

    ``selection`` is one :func:`path_selection` built (a ``SHARES_COMMUNITY`` it selected would
    not be walked; sections it admitted are skipped). Outside ``selection.project`` nothing is
    reached, so an end outside it gives ``OUTSIDE_PROJECT`` without a search.
    """
    project = selection.project
    outside = tuple(
        end for end, entity in (("from", start), ("to", target))
        if not in_project(entity.doc.path, project)
    )
    if outside:
        return PathSearch(OUTSIDE_PROJECT, (), None, 0, 0, 0, outside)
    if start.id == target.id:
        return PathSearch(FOUND, (Path((start,), ()),), 0, 1, 1, 0)

    # into[v][u]: the preferred edge from u (one level closer to the start) to v.
    into: dict[str, dict[str, Step]] = {}
    settled = {start.id}  # reached at an earlier level, or the level being expanded
    frontier = [start]
    reached: dict[str, Entity] = {}
    hops = 0
    for level in range(1, max_hops + 1):
        hops = level
        reached = {}
        # Before the index of every edge exists (a cold start), the level's edges are made in
        # one pass over the files that may name its concepts, as a walk's are.
        graph.snapshot.prefetch_edges(node.id for node in frontier if not node.is_section)
        for node in frontier:
            for step in graph.steps(node, selection, budget, token, settled):
                other = step.target
                if other.is_section:
                    continue  # a concept's own section: never on a path between concepts
                edges = into.setdefault(other.id, {})
                kept = edges.get(node.id)
                if kept is None or edge_key(step) < edge_key(kept):
                    edges[node.id] = step
                reached.setdefault(other.id, other)
            if budget.exhausted:
                break
        if target.id in reached or budget.exhausted or not reached:
            break
        settled.update(reached)
        frontier = sorted(reached.values(), key=lambda e: e.id)
    visited = len(settled) + sum(1 for r in reached if r not in settled)

    if target.id not in reached:
        if budget.exhausted:
            outcome = CUT
        else:
            outcome = NONE_WITHIN if reached else UNREACHABLE
        return PathSearch(outcome, (), None, 0, visited, hops)
    outcome = CUT if budget.exhausted else FOUND
    paths, total = _listed(graph, start, target, into, hops, max_paths, token)
    return PathSearch(outcome, paths, hops, total, visited, hops)


def _listed(
    graph: BundleGraph,
    start: Entity,
    target: Entity,
    into: Mapping[str, Mapping[str, Step]],
    distance: int,
    max_paths: int,
    token: CancelToken,
) -> tuple[tuple[Path, ...], int]:
    """The first ``max_paths`` shortest paths in lexicographic order, and how many there are.

    ``into`` holds, for each node, its edges from the level before, so walking it back from the
    target level by level finds exactly the nodes on some shortest path; forwards from the start
    over those, every branch ends at the target, so listing k paths costs k walks of
    ``distance`` hops.
    """
    # Levels from the target back to the start: layers[0] is {target}, layers[-1] is {start}.
    layers: list[set[str]] = [{target.id}]
    for _ in range(distance):
        token.check()
        layers.append({u for v in layers[-1] for u in into.get(v, {})})
    successors: dict[str, list[str]] = {}
    for layer in layers[:-1]:
        for v in layer:
            for u in into[v]:
                successors.setdefault(u, []).append(v)
    for nexts in successors.values():
        nexts.sort()
    # Paths from each node to the target, layer by layer towards the start.
    counts: dict[str, int] = {target.id: 1}
    for layer in layers[1:]:
        token.check()
        for u in layer:
            counts[u] = min(COUNT_CAP, sum(counts[v] for v in successors[u]))

    found: list[Path] = []
    trail = [start.id]

    def extend() -> None:
        node = trail[-1]
        if node == target.id:
            found.append(_path(graph, trail, into))
            return
        for nxt in successors[node]:
            if len(found) >= max_paths:
                return
            token.check()
            trail.append(nxt)
            extend()  # at most ``distance`` (8) deep
            trail.pop()

    extend()
    return tuple(found), counts[start.id]


def _path(graph: BundleGraph, trail: list[str], into: Mapping[str, Mapping[str, Step]]) -> Path:
    hops = tuple(Hop(u, v, into[v][u]) for u, v in pairwise(trail))
    return Path(tuple(graph.concept(node) for node in trail), hops)
