"""find_path: the shortest chains of links, typed relations and field edges between two concepts."""

from __future__ import annotations

from typing import Any

from ..cancel import CancelToken
from ..errors import BundleError
from ..model import Snapshot
from ..okf.graph import OUTGOING, EdgeBudget, entity_name, entity_type, graph_of
from ..okf.ids import concept_id_problem
from ..okf.paths import (
    CUT,
    NONE_WITHIN,
    NOT_PATH_EDGES,
    OUTSIDE_PROJECT,
    UNREACHABLE,
    Hop,
    Path,
    PathSearch,
    path_selection,
    shortest_paths,
)
from ..toolspec import CallContext, ToolSpec
from ._common import MIB, invalid_field, require_concept
from ._walk_params import clamped, project_from

NAME = "find_path"
DESCRIPTION = (
    "How two concepts relate: the shortest chains of links, typed relations and field edges "
    "from from_id to to_id, ordered by node IDs (tags not walked). None within max_hops: "
    "paths [] and a reason, no error."
)

DEFAULT_MAX_HOPS, MAX_HOPS = 4, 8
DEFAULT_MAX_PATHS, MAX_PATHS = 3, 10
# The search examines at most this many edges per call, like expand_neighbors: max_hops alone
# does not bound work (a hub with 10,000 incoming links puts 10,000 concepts on the next level).
# Every concept but the start is reached over an examined edge, so this also caps the concepts
# visited and the edges kept. 2.5 times expand_neighbors' cap, because a path may be 8 hops long:
# on a random 10,000-concept bundle with 5 links each, a search that spends it all took about
# 60 ms, and one that stays within 4 hops (every edge walked both ways) about 25 ms.
MAX_PATH_EDGES = 50_000


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    from_id = _concept_id(snapshot, params, "from_id", call.token)
    to_id = _concept_id(snapshot, params, "to_id", call.token)
    max_hops = clamped(params, "max_hops", DEFAULT_MAX_HOPS, 1, MAX_HOPS)
    max_paths = clamped(params, "max_paths", DEFAULT_MAX_PATHS, 1, MAX_PATHS)
    include_incoming = bool(params.get("include_incoming", True))
    project = project_from(snapshot, params)
    relationship_types = sorted({str(r).upper() for r in params.get("relationship_types", [])})
    refused = NOT_PATH_EDGES.intersection(relationship_types)
    if refused:
        raise invalid_field(
            "$.relationship_types",
            f"find_path does not walk {', '.join(sorted(refused))}: paths follow LINKS_TO and "
            "typed relations (compare tags with read_concept, sections with fetch_slice)",
        )

    graph = graph_of(snapshot)
    selection = path_selection(relationship_types, incoming=include_incoming, project=project)
    found = shortest_paths(
        graph, graph.concept(from_id), graph.concept(to_id), selection, max_hops, max_paths,
        EdgeBudget(MAX_PATH_EDGES), token,
    )
    return {
        "from_id": from_id,
        "to_id": to_id,
        "paths": [_path(p) for p in found.paths],
        "distance": found.distance,
        "total": found.total,
        "truncated": found.cut or found.total > len(found.paths),
        "reason": _reason(found, max_hops, project),
        "visited": found.visited,
        "max_hops": max_hops,
        "max_paths": max_paths,
        "filters": {
            "relationship_types": relationship_types,
            "include_incoming": include_incoming,
            "project": project,
        },
        "snapshot_revision": snapshot.revision,
    }


def _concept_id(
    snapshot: Snapshot, params: dict[str, Any], name: str, token: CancelToken
) -> str:
    """A canonical ID of an existing concept; the error names the argument (there are two)."""
    value = params.get(name)
    if not isinstance(value, str):
        raise invalid_field(f"$.{name}", f"{name} must be a concept ID")
    problem = concept_id_problem(value)
    if problem is not None:
        raise invalid_field(f"$.{name}", f"{name} is not a canonical concept ID: {problem}")
    try:
        require_concept(snapshot, value, f"$.{name}", token)
    except BundleError as error:
        raise BundleError(error.code, f"{name}: {error.message}", error.diagnostics) from None
    return value


def _path(path: Path) -> dict[str, Any]:
    return {
        "nodes": [
            {"id": node.id, "name": entity_name(node), "type": entity_type(node)}
            for node in path.nodes
        ],
        "edges": [_edge(hop) for hop in path.hops],
    }


def _edge(hop: Hop) -> dict[str, Any]:
    # from/to are the edge's own ends, in its stored direction: against an incoming edge the
    # hop goes from `to` to `from`.
    step = hop.step
    forwards = step.direction == OUTGOING
    return {
        "from": hop.source if forwards else hop.target,
        "to": hop.target if forwards else hop.source,
        "kind": step.relationship,
        "direction": step.direction,
    }


def _reason(found: PathSearch, max_hops: int, project: str | None) -> str | None:
    """Why ``paths`` is empty or may be incomplete; None when it is neither."""
    if found.outcome == OUTSIDE_PROJECT:
        ends = " and ".join(f"{end}_id" for end in found.outside)
        verb = "are" if len(found.outside) > 1 else "is"
        return f"{ends} {verb} outside project {project}: nothing outside it is walked"
    if found.outcome == NONE_WITHIN:
        return f"none within {max_hops} hop{'s' if max_hops > 1 else ''}"
    if found.outcome == UNREACHABLE:
        reach = f"{found.visited} concept{'s' if found.visited > 1 else ''}"
        return (
            f"none at any length: from_id reaches {reach} over these edges (itself "
            "included) and to_id is not one of them"
        )
    if found.outcome == CUT:
        cap = f"the search stopped at its cap of {MAX_PATH_EDGES:,} examined edges"
        if found.paths:
            return f"{cap} at hop {found.hops_searched}: other paths of this length may exist"
        return (
            f"{cap} at hop {found.hops_searched}, before reaching to_id: a path may still "
            "exist; narrow relationship_types, turn include_incoming off or set project"
        )
    return None


SPEC = ToolSpec(
    name=NAME,
    title="Find path",
    toolset="walk",
    read_only=True,
    # At most 10 paths of 8 hops: the budget covers pathological IDs and names.
    output_budget=16 * MIB,
    description=DESCRIPTION,
    run=run,
)
