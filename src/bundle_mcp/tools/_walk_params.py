"""The arguments of the walking tools: clamped numbers, seeds, projects and extraction requests.

The seed-000 and seed-004 verbs clamp out-of-range budgets instead of rejecting them (a tool
signature cannot state a range, docs/DESIGN.md §3); a value of the wrong type is still malformed
input and raises ``invalid_request`` naming the argument. The input contracts already reject
most malformed values; these checks guard direct callers.
"""

from __future__ import annotations

import math
import types
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..model import Snapshot
from ..okf.graph import Selection
from ..okf.ids import concept_id_problem
from ._common import invalid_field

MAX_DEPTH = 3
MAX_OBJECTS = 200
MAX_TOKENS = 100_000
DEFAULT_MAX_TOKENS = 4000


def clamped(params: Mapping[str, Any], name: str, default: int, low: int, high: int) -> int:
    """An integer argument clamped into ``[low, high]``; absent means ``default``."""
    value = params.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid_field(f"$.{name}", f"{name} must be an integer")
    return max(low, min(value, high))


def project_from(snapshot: Snapshot, params: Mapping[str, Any]) -> str | None:
    """The ``project`` argument: a folder of the bundle, or ``None`` when not given.

    Raises:
        BundleError: ``invalid_request`` when it is not a clean bundle-relative folder path
            that exists in this snapshot.
    """
    value = params.get("project")
    if value is None:
        return None
    if not isinstance(value, str) or concept_id_problem(value, allow_reserved_names=True):
        raise invalid_field(
            "$.project", "project must be a clean bundle-relative folder path such as 'tables'"
        )
    if value not in snapshot.directories:
        raise invalid_field("$.project", "project does not name a folder of this bundle")
    return value


def name_list(params: Mapping[str, Any], name: str) -> list[str] | None:
    """A list of non-blank strings, or ``None`` when the argument is absent."""
    value = params.get(name)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise invalid_field(f"$.{name}", f"{name} must be a list of non-blank strings")
    return list(value)


def seed_list(params: Mapping[str, Any], name: str = "seed_ids") -> tuple[str, ...]:
    """The seeds in request order, repeats dropped; a blank ID is ``invalid_request``."""
    value = name_list(params, name)
    return tuple(dict.fromkeys(value or ()))


# -- query_subgraph, visualize_graph and search_semantic -----------------------------------


@dataclass(frozen=True)
class Query:
    """One validated, clamped extraction request (see :mod:`bundle_mcp.tools._extraction`)."""

    seeds: tuple[str, ...] | None  # None: no seeds, list concepts by ID (visualize_graph only)
    depth: int
    selection: Selection
    object_types: frozenset[str] | None
    filters: tuple[tuple[str, Any], ...]
    type_weights: Mapping[str, float]
    max_objects: int
    max_tokens: int
    compact: bool
    # The concept IDs a search filter admits (search_semantic); None: no such filter. An
    # object of another concept (a section: its concept's) is dropped like a filtered one.
    admitted: frozenset[str] | None = None


def subgraph_selection(names: list[str] | None) -> Selection:
    """The edges ``include_relation_types`` selects: names match exactly, and every section
    is an object. An empty list means the same as no list (links and typed relations):
    clients that always send the field with nothing chosen expect the default, and depth 0
    already says "seeds only"."""
    if not names:
        return Selection(links=True, typed=None, part_of=False, community=False,
                         unsliced_sections=True)
    return Selection.named(names, unsliced_sections=True)


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
    admitted: frozenset[str] | None = None,
) -> Query:
    depth = clamped(params, "depth", default_depth, 0, MAX_DEPTH)
    object_types = name_list(params, "include_object_types")
    return Query(
        seeds=seeds,
        depth=0 if seeds is None else depth,
        selection=subgraph_selection(name_list(params, "include_relation_types")),
        object_types=frozenset(object_types) if object_types else None,
        filters=_filters(params),
        type_weights=_weights(params),
        max_objects=clamped(params, "max_objects", default_max_objects, 1, MAX_OBJECTS),
        max_tokens=clamped(params, "max_tokens", DEFAULT_MAX_TOKENS, 1, MAX_TOKENS),
        compact=compact,
        admitted=admitted,
    )
