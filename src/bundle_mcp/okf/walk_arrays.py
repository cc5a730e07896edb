"""The walk's adjacency of a whole snapshot in arrays, and one level of a walk made over them.

:func:`bundle_mcp.okf.graph.walk` ranks each edge of each node it expands in Python, one arc at
a time (about 1.8 µs an arc). A depth-2 walk from a hub of the 10,000-concept bench bundle looks
at 20,000 arcs, most of its time. Here every concept's arcs (its links, relations and field
edges, in :meth:`~bundle_mcp.okf.graph.BundleGraph.arcs` then
:meth:`~bundle_mcp.okf.graph.BundleGraph.field_arcs` order) are kept as columns, each with the
rank of its :data:`~bundle_mcp.okf.graph.Key` among all the arcs' keys, so a level's arcs are
gathered, masked and reduced to each reached node's best edge and edge count in a few numpy
operations; only the nodes reached become Python objects.

Built by the warm-up (the slot :data:`~bundle_mcp.okf.graph.WALK_ARRAYS`), never by a call: a
walk uses the arrays when they are built and the selection admits every link, relation and field
edge (the default of expand_neighbors and query_subgraph), and otherwise walks arc by arc as
before. The two agree node for node, edge for edge and count for count
(``tests/test_walk_agrees.py`` runs every walk both ways).

The rank. A key orders by (-weight, relationship, direction, the expanded concept's ID, the
edge's two ends): weights, relationships and ends are coded by their places among the distinct
values sorted as Python sorts them (so codes compare as the strings do), concept IDs by their
place in ID order, and equal keys (a relation and a field edge of one name between the same two
concepts) by the arc's place in the concept's list, which a walk arc by arc keeps the first of.

Kept for the next process. The arrays are a pure function of the revision (its concepts, links,
relations, field edges and sections) and of the edge weights, so the warm-up keeps their
columns under the revision (``InboundHint.keep_bytes``, :func:`packed`) and a restarted server
reads them back (:func:`unpacked`, a few milliseconds) instead of making them again from every
edge: a call may read them back too, so a restarted server's first walk goes over the arrays,
not arc by arc. Read back, the arrays name their edges by place (:class:`KeptEdges`): an edge
is made from the snapshot's kept edge columns when a walk reports it, and the snapshot's own
tuple is used once the warm-up has built it. A walk ranks by the edges' weights alone, which
the arrays keep as a code an edge (``weight_code``), so it makes no edge it does not report.
"""

from __future__ import annotations

import json
import struct
import sys
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

import numpy as np
import numpy.typing as npt

from ..cancel import CancelToken
from ..model import (
    Edge,
    edge_kind,
    edge_relationship,
    edge_source_id,
    edge_source_ref,
    edge_target_id,
    edge_target_ref,
)

if TYPE_CHECKING:
    from ..model import Snapshot

__all__ = ["STORED_NAME", "Adjacency", "BestArcs", "KeptEdges", "WalkArrays", "best_arcs",
           "build", "mark", "packed", "run_starts", "seen_mask", "unpacked"]

Ints = npt.NDArray[np.integer[Any]]
Flags = npt.NDArray[np.bool_]
Floats = npt.NDArray[np.float64]


@dataclass(frozen=True, slots=True, eq=False)
class WalkArrays:
    """Every concept's arcs as columns, concept by concept in ID order.

    Concept ``c`` (``ids[c]``) owns arcs ``starts[c]:starts[c + 1]``; arc ``a`` leads to concept
    ``other[a]`` over ``edges[edge[a]]``, against that edge's stored direction when
    ``backwards[a]``; ``walkable[a]`` is false for a concept's edge to itself (a walk pays for
    it and never follows it); ``rank[a]`` is the place of its key among every arc's.
    ``sections[c]`` is how many ``PART_OF`` arcs the concept offers over incoming edges
    (:meth:`~bundle_mcp.okf.graph.BundleGraph.section_arcs`) and ``sliced[c]`` whether it is cut
    into two sections or more. Edge ``e``'s weight, negated, is
    ``negative_weights[weight_code[e]]``. The columns are read-only: every call on the snapshot
    shares them."""

    ids: tuple[str, ...]
    index: Mapping[str, int]
    # The snapshot's links and relations, then its field edges: a tuple when built, the
    # snapshot's edges by place when read back (``edges``).
    held_edges: tuple[Edge, ...] | KeptEdges
    starts: Ints
    other: Ints
    edge: Ints
    backwards: Flags
    walkable: Flags
    rank: Ints
    sections: Ints
    sliced: Flags
    weight_code: Ints
    negative_weights: Floats

    @property
    def edges(self) -> Sequence[Edge]:
        """Every edge an arc names (``edge``), by place."""
        held = self.held_edges
        return held if isinstance(held, tuple) else held.settled()

    def units(self, sections: bool, unsliced: bool) -> Ints:
        """What expanding each concept costs a walk's budget: an arc each, and a unit each of
        its sections when the walk offers them (``sections``; with ``unsliced``, a concept's
        single section too)."""
        arcs = np.diff(self.starts)
        if not sections:
            return arcs
        offered = self.sections if unsliced else np.where(self.sliced, self.sections, 0)
        result: Ints = arcs + offered
        return result


@dataclass(frozen=True, slots=True)
class Adjacency:
    """What the arrays are made of: the concept IDs in ID order, the snapshot's links and
    relations (in edge order) and field edges (by source, relationship, target), each kind's
    weight, whether ``incoming`` sorts before ``outgoing`` (the key's direction), and each
    concept's count of ``PART_OF`` arcs and of sections."""

    ids: tuple[str, ...]
    links: tuple[Edge, ...]
    fields: Sequence[Edge]
    weights: Mapping[str, float]
    incoming_first: bool
    section_arcs: Sequence[int]
    sections: Sequence[int]


def build(adjacency: Adjacency, token: CancelToken) -> WalkArrays:
    """The arrays of one snapshot's adjacency."""
    ids, links = adjacency.ids, adjacency.links
    index = {concept_id: n for n, concept_id in enumerate(ids)}
    edges = (*links, *adjacency.fields)
    token.check()
    count = len(edges)
    group = np.zeros(count, np.int8)
    group[len(links):] = 1
    source = _places(map(edge_source_id, edges), index, count)
    token.check()
    target = _places(map(edge_target_id, edges), index, count)
    token.check()
    kinds = list(map(edge_kind, edges))
    weight_of = adjacency.weights
    weight_places = _codes({-weight_of[kind] for kind in kinds})
    weights = _places(kinds, {kind: weight_places[-weight_of[kind]] for kind in set(kinds)},
                      count)
    token.check()
    relationships = list(map(edge_relationship, edges))
    relationship_places = _codes(set(relationships))
    relationships_at = _places(relationships, relationship_places, count)
    token.check()
    source_refs, target_refs = list(map(edge_source_ref, edges)), list(map(edge_target_ref, edges))
    token.check()
    ends = _codes({*source_refs, *target_refs})
    token.check()
    source_ref = _places(source_refs, ends, count)
    token.check()
    target_ref = _places(target_refs, ends, count)
    token.check()
    loop = source == target
    numbered = np.arange(count, dtype=np.int32)
    # Each edge gives its source an arc (a loop only that one) and its target one walked back.
    back = ~loop
    edge = np.concatenate((numbered, numbered[back]))
    owner = np.concatenate((source, target[back]))
    other = np.concatenate((target, source[back]))
    backwards = np.concatenate((np.zeros(count, np.bool_), np.ones(int(back.sum()), np.bool_)))
    # Codes compare as the strings do, and so does the direction.
    direction = ~backwards if adjacency.incoming_first else backwards
    token.check()
    # Key order: weight, relationship, direction, owner, source end, target end; then the arc's
    # place in its concept's list (links and relations in edge order, then field edges). The
    # codes are packed into three int64 keys (each part below the next one's multiplier).
    weight_first = (weights[edge].astype(np.int64) * len(relationship_places)
                    + relationships_at[edge]) * 2 + direction
    by_owner_key = weight_first * len(ids) + owner
    by_ends = source_ref[edge].astype(np.int64) * len(ends) + target_ref[edge]
    in_list = group[edge].astype(np.int64) * count + edge
    order = _order((in_list, by_ends, by_owner_key), token)
    rank = np.empty(len(order), np.int32)
    rank[order] = np.arange(len(order), dtype=np.int32)
    token.check()
    # Each concept's arcs together, in its list's order (the walk arc by arc reads them so).
    by_owner = _order((in_list, owner), token)
    token.check()
    starts = np.zeros(len(ids) + 1, np.int64)
    np.cumsum(np.bincount(owner, minlength=len(ids)), out=starts[1:])
    columns = (starts, other[by_owner], edge[by_owner], backwards[by_owner],
               ~loop[edge[by_owner]], rank[by_owner], np.array(adjacency.section_arcs, np.int64),
               np.array(adjacency.sections, np.int64) > 1, weights.astype(np.int8),
               np.array(sorted(weight_places), np.float64))
    for column in columns:
        column.flags.writeable = False  # shared by every call on the snapshot
    return WalkArrays(ids, index, edges, *columns)


def _order(keys: Sequence[Ints], token: CancelToken) -> Ints:
    """The rows in the order of ``keys``, the last one first (``numpy.lexsort``'s), made as
    one stable sort a key from the first, so the warm-up's token is checked between them (at
    50,000 concepts one sort of the 1.3 million arcs by all three keys held it about half a
    second)."""
    order: Ints = np.argsort(keys[0], kind="stable")
    for key in keys[1:]:
        token.check()
        order = order[np.argsort(key[order], kind="stable")]
    return order


def _codes(values: Iterable[Any]) -> dict[Any, int]:
    """Each distinct value's place among them, sorted as Python sorts them."""
    return {value: n for n, value in enumerate(sorted(values))}


def _places(values: Iterable[Any], places: Mapping[Any, int], count: int) -> Ints:
    return np.fromiter(map(places.__getitem__, values), np.int32, count)


# --------------------------------------------------------------------------------------------
# One level


def seen_mask(arrays: WalkArrays, visited: Iterable[str]) -> Flags:
    """Which concepts ``visited`` holds (its sections are no concepts)."""
    seen = np.zeros(len(arrays.ids), np.bool_)
    mark(arrays, seen, visited)
    return seen


def mark(arrays: WalkArrays, seen: Flags, visited: Iterable[str]) -> None:
    """Add the concepts among ``visited`` to ``seen``."""
    place = arrays.index.get
    found = [n for n in map(place, visited) if n is not None]
    seen[np.array(found, np.int64)] = True


def run_starts(ordered: Ints) -> Ints:
    """Where each run of equal values of ``ordered`` (sorted) begins."""
    return np.flatnonzero(np.concatenate(([True], ordered[1:] != ordered[:-1])))


@dataclass(frozen=True, slots=True)
class BestArcs:
    """What a level's arcs reach, target by target in index order: the best arc's edge (its
    place in ``WalkArrays.edges``) and that edge's weight negated, whether it is walked
    backwards, the concept expanded over it, and how many walkable arcs reach the target."""

    targets: list[int]
    edges: list[int]
    negative_weights: list[float]
    backwards: list[bool]
    owners: list[int]
    counts: list[int]


def best_arcs(arrays: WalkArrays, concepts: Ints, incoming: bool, seen: Flags,
              token: CancelToken) -> BestArcs:
    """Every arc of ``concepts`` (concept places) to a concept not ``seen`` (walked against its
    edge's direction only when ``incoming``), reduced to each target's best arc and count."""
    starts = arrays.starts[concepts]
    lengths = arrays.starts[concepts + 1] - starts
    total = int(lengths.sum())
    if not total:
        return BestArcs([], [], [], [], [], [])
    # Arc n of the run is starts[concept] + (n - where that concept's part of the run begins).
    begins = np.cumsum(lengths) - lengths
    arcs = np.repeat(starts - begins, lengths) + np.arange(total, dtype=np.int64)
    owners = np.repeat(concepts, lengths)
    token.check()
    other = arrays.other[arcs]
    keep = arrays.walkable[arcs] & ~seen[other]
    if not incoming:
        keep &= ~arrays.backwards[arcs]
    arcs, owners, other = arcs[keep], owners[keep], other[keep]
    if not len(arcs):
        return BestArcs([], [], [], [], [], [])
    token.check()
    # By target, the best rank first: each target's run begins with its best arc.
    order = np.lexsort((arrays.rank[arcs], other))
    other = other[order]
    firsts = run_starts(other)
    chosen = arcs[order[firsts]]
    edges = arrays.edge[chosen]
    return BestArcs(
        targets=other[firsts].tolist(),
        edges=edges.tolist(),
        negative_weights=arrays.negative_weights[arrays.weight_code[edges]].tolist(),
        backwards=arrays.backwards[chosen].tolist(),
        owners=owners[order[firsts]].tolist(),
        counts=np.diff(np.append(firsts, len(other))).tolist(),
    )


# --------------------------------------------------------------------------------------------
# Kept for the next process

# The name the arrays are kept under in a revision's parts (InboundHint.keep_bytes).
STORED_NAME = "walk-arrays/1"
_MAGIC = b"okf-walk-arrays/1" + (b"L" if sys.byteorder == "little" else b"B")
_HEADER = struct.Struct("<Q")  # the description's JSON length
# Each kept column: its name, and the dtypes it may be read back as (what build makes).
_COLUMNS: tuple[tuple[str, frozenset[str]], ...] = (
    ("starts", frozenset({"int64"})),
    ("other", frozenset({"int32", "int64"})),
    ("edge", frozenset({"int32", "int64"})),
    ("backwards", frozenset({"bool"})),
    ("walkable", frozenset({"bool"})),
    ("rank", frozenset({"int32", "int64"})),
    ("sections", frozenset({"int64"})),
    ("sliced", frozenset({"bool"})),
    ("weight_code", frozenset({"int8"})),
    ("negative_weights", frozenset({"float64"})),
)


def packed(arrays: WalkArrays, links: int, weights: Mapping[str, float],
           incoming_first: bool) -> Iterator[bytes]:
    """The arrays' columns as bytes, with what they were made with: the number of links and
    relations (the field edges follow them in ``edges``), the weights and the direction order.
    Not the IDs (the snapshot's concepts in ID order) nor the edges (the snapshot's). In
    pieces, a column each, made as they are written (``InboundHint.keep_bytes``): joined, the
    columns' copy was held whole beside them (about 24 MB at 50,000 concepts)."""
    columns = [getattr(arrays, name) for name, _ in _COLUMNS]
    description = json.dumps({
        "concepts": len(arrays.ids), "links": links, "fields": len(arrays.edges) - links,
        "weights": sorted(weights.items()), "incoming_first": incoming_first,
        "columns": [[name, str(column.dtype), len(column)]
                    for (name, _), column in zip(_COLUMNS, columns, strict=True)],
    }, separators=(",", ":")).encode("ascii")
    yield _MAGIC + _HEADER.pack(len(description)) + description
    for column in columns:
        yield np.ascontiguousarray(column).tobytes()


def unpacked(data: bytes | None, ids: tuple[str, ...], edges: KeptEdges,
             weights: Mapping[str, float], incoming_first: bool) -> WalkArrays | None:
    """What :func:`packed` wrote, as the arrays of the concepts ``ids`` (in ID order) over
    ``edges``; ``None`` unless it was made with these weights and direction order for as many
    concepts, links and relations and field edges, and every column has its length and a
    type :func:`build` makes, the arcs' runs and references within bounds."""
    head = len(_MAGIC) + _HEADER.size
    if data is None or len(data) < head or not data.startswith(_MAGIC):
        return None
    (length,) = _HEADER.unpack_from(data, len(_MAGIC))
    try:
        described = json.loads(data[head:head + length])
    except (UnicodeDecodeError, ValueError):
        return None
    concepts = len(ids)
    if not isinstance(described, dict) or described.get("concepts") != concepts or (
            described.get("links"), described.get("fields")) != (edges.links, edges.fields) or (
            described.get("weights") != [list(item) for item in sorted(weights.items())]) or (
            described.get("incoming_first") is not incoming_first):
        return None
    listed = described.get("columns")
    if not isinstance(listed, list) or len(listed) != len(_COLUMNS):
        return None
    columns: list[Any] = []
    at = head + length
    for (name, dtypes), entry in zip(_COLUMNS, listed, strict=True):
        if not (isinstance(entry, list) and len(entry) == 3 and entry[0] == name
                and entry[1] in dtypes and type(entry[2]) is int and entry[2] >= 0):
            return None
        dtype = np.dtype(entry[1])
        end = at + dtype.itemsize * entry[2]
        if end > len(data):
            return None
        column = np.frombuffer(data, dtype, entry[2], at)  # read-only: a view of bytes
        columns.append(column)
        at = end
    if at != len(data):
        return None
    starts, other, edge, backwards, walkable, rank, sections, sliced, codes, negated = columns
    arcs = len(other)
    if not (len(starts) == concepts + 1 and len(sections) == len(sliced) == concepts
            and len(edge) == len(backwards) == len(walkable) == len(rank) == arcs
            and len(codes) == len(edges) and len(negated) <= len(weights)):
        return None
    if not (starts[0] == 0 and starts[-1] == arcs and bool(np.all(starts[1:] >= starts[:-1]))
            and _within(other, concepts) and _within(edge, len(edges))
            and _within(rank, arcs) and _within(codes, len(negated))
            and (not concepts or int(sections.min()) >= 0)
            and set(negated.tolist()) <= {-weight for weight in weights.values()}):
        return None
    return WalkArrays(ids, {concept_id: n for n, concept_id in enumerate(ids)}, edges, *columns)


def _within(column: Ints, bound: int) -> bool:
    """Whether every value of ``column`` is a place in a sequence of ``bound`` items."""
    return not len(column) or (int(column.min()) >= 0 and int(column.max()) < bound)


class KeptEdges(Sequence[Edge]):
    """A snapshot's links and relations, then its field edges, for arrays read back: a link or
    relation is the snapshot's when it has made its edges, else made from the edges an
    earlier process kept (:meth:`~bundle_mcp.model.Snapshot.edge_at`) when a walk reports it.
    :meth:`settled` is the snapshot's edges and the field edges as one tuple once the snapshot
    holds its own, so a walk on a warm server reads a tuple. Holds the snapshot weakly (the
    arrays are kept by the snapshot)."""

    __slots__ = ("_snapshot", "links", "_fields", "_settled")

    def __init__(self, snapshot: Snapshot, links: int, fields: tuple[Edge, ...]) -> None:
        self._snapshot: Callable[[], Snapshot | None] = weakref.ref(snapshot)
        self.links = links
        self._fields = fields
        self._settled: tuple[Edge, ...] | None = None

    @property
    def fields(self) -> int:
        return len(self._fields)

    def settled(self) -> Sequence[Edge]:
        """The edges as one tuple once the snapshot has made its own, else this sequence."""
        settled = self._settled
        if settled is not None:
            return settled
        snapshot = self._live()
        if not snapshot.edges_made():
            return self
        settled = self._settled = (*snapshot.edges, *self._fields)
        return settled

    def _live(self) -> Snapshot:
        snapshot = self._snapshot()
        if snapshot is None:  # a walk holds its snapshot, which holds the arrays
            raise RuntimeError("the arrays' snapshot is gone")
        return snapshot

    def __len__(self) -> int:
        return self.links + len(self._fields)

    @overload
    def __getitem__(self, place: int) -> Edge: ...
    @overload
    def __getitem__(self, place: slice) -> Sequence[Edge]: ...

    def __getitem__(self, place: int | slice) -> Edge | Sequence[Edge]:
        if isinstance(place, slice):
            return tuple(self[n] for n in range(*place.indices(len(self))))
        if place < 0:
            place += len(self)
        if not 0 <= place < len(self):
            raise IndexError(place)
        if place >= self.links:
            return self._fields[place - self.links]
        return self._live().edge_at(place)

    def __iter__(self) -> Iterator[Edge]:
        return map(self.__getitem__, range(len(self)))
