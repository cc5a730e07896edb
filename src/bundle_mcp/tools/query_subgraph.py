"""query_subgraph: the budgeted k-hop neighbourhood of one or more seed objects (seed 004)."""

from __future__ import annotations

from typing import Any

from ..cancel import CancelToken
from ..model import Snapshot
from ._common import MIB, invalid_field
from ._subgraph import BUDGET_RULES, Extraction, extract, parse_query, seed_list

NAME = "query_subgraph"
READ_ONLY = True
NEEDS_PARSEABLE = True
# The subgraph is bounded by max_tokens (at most 100,000 x 4 characters); the echoed
# unresolved seeds (at most 200 IDs of 4096 characters) are the rest.
OUTPUT_BUDGET = 8 * MIB
DEFAULT_DEPTH = 1
DEFAULT_MAX_OBJECTS = 50
DESCRIPTION = (
    "The neighbourhood of seed objects within depth hops, cut to a budget. seed_ids (required, "
    "1-200) are canonical concept IDs (or section locators when PART_OF is requested); IDs not "
    "in the bundle come back in 'unresolved' and are never replaced by the whole graph. "
    "depth defaults to 1, max_objects to 50, max_tokens to 4000. compact_mode returns "
    "{nodes: [{id, type, name, props}], edges: [{source, target, type}]} (typed relations that "
    "differ only in a #fragment collapse to one edge); the full form returns {objects, "
    "relations} with kind, path, distance, seed flag and line range per object, and "
    "source_ref/target_ref (fragments kept) per relation. Objects come seeds first in priority "
    "order; relations sort by source, target, type. subgraph_root_hash is sha256 over the "
    "canonical JSON of the returned subgraph. " + BUDGET_RULES
)


def run(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
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
