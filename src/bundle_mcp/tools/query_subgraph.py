"""query_subgraph: the budgeted k-hop neighbourhood of one or more seed objects.

From seed 004 (docs/DESIGN.md §7); the extraction itself is :mod:`._extraction`.
"""

from __future__ import annotations

from typing import Any

from ..model import Snapshot
from ..toolspec import CallContext, ToolSpec
from ._common import MIB, invalid_field
from ._extraction import Extraction, extract
from ._walk_params import parse_query, seed_list

NAME = "query_subgraph"
DEFAULT_DEPTH = 1
DEFAULT_MAX_OBJECTS = 50
DESCRIPTION = (
    "The neighbourhood of seed objects within depth hops, cut to max_objects and "
    "max_tokens; relations walked both ways; filters drop non-seed objects before budgets. "
    "Truncation keeps seeds, then fewer hops, higher weight, then ID; truncation_reason "
    "names the budget, suggested_next_seed the best dropped object. Unknown seeds: "
    "unresolved."
)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    seeds = seed_list(params)
    if not seeds:
        raise invalid_field("$.seed_ids", "seed_ids must name at least one object")
    compact = params.get("compact_mode", False)
    if not isinstance(compact, bool):
        raise invalid_field("$.compact_mode", "compact_mode must be true or false")
    query = parse_query(
        params,
        seeds=seeds,
        default_depth=DEFAULT_DEPTH,
        default_max_objects=DEFAULT_MAX_OBJECTS,
        compact=compact,
    )
    return result(snapshot, extract(snapshot, query, token))


def result(snapshot: Snapshot, found: Extraction) -> dict[str, Any]:
    return {
        "snapshot_revision": snapshot.revision,
        "subgraph": found.subgraph,
        "subgraph_root_hash": found.root_hash,
        **found.budget_report(),
    }


SPEC = ToolSpec(
    name=NAME,
    title="Query subgraph",
    toolset="walk",
    read_only=True,
    # The subgraph is bounded by max_tokens (at most 100,000 x 4 characters); the echoed
    # unresolved seeds (at most 200 IDs of 4096 characters) are the rest.
    output_budget=8 * MIB,
    description=DESCRIPTION,
    run=run,
)
