"""visualize_graph: a Mermaid ``graph TD`` of a budgeted subgraph (seed 004).

It runs the query_subgraph extraction in compact mode, so budgets, ranking and truncation fields
are the same; only the rendering differs. Node IDs never reach the diagram: nodes get synthetic
aliases (n0, n1, ... in node order) and every label is a quoted string whose risky characters
are Mermaid entity codes, so any title (brackets, quotes, pipes, newlines, emoji, RTL) yields a
diagram that parses. That label rule is shared with ``bundle-mcp graph --format mermaid``, so it
lives in :mod:`bundle_mcp.export.mermaid`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cancel import CancelToken
from ..export.mermaid import escape, label
from ..toolspec import CallContext, ToolSpec
from ._common import MIB
from ._extraction import extract
from ._walk_params import parse_query, seed_list

NAME = "visualize_graph"
DEFAULT_DEPTH = 1
DEFAULT_MAX_OBJECTS = 20
DESCRIPTION = (
    "The query_subgraph neighbourhood as a Mermaid graph TD, with the same budgets: nodes "
    "'name (type)', edges by relation type, labels cut at 80 characters. Without seed_ids: "
    "the first max_objects concepts by ID and the relations among them, never the whole "
    "graph."
)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    seeds = seed_list(params) if "seed_ids" in params else None
    query = parse_query(
        params,
        seeds=seeds,
        default_depth=DEFAULT_DEPTH,
        default_max_objects=DEFAULT_MAX_OBJECTS,
        compact=True,
    )
    found = extract(snapshot, query, token)
    return {
        "mermaid": mermaid(found.subgraph, token),
        **found.budget_report(),
    }


def mermaid(subgraph: Mapping[str, Any], token: CancelToken) -> str:
    """``graph TD`` with one line per node, then one per edge, four-space indented."""
    alias: dict[str, str] = {}
    lines = ["graph TD"]
    for node in subgraph["nodes"]:
        token.check()
        alias[node["id"]] = f"n{len(alias)}"
        lines.append(f'    {alias[node["id"]]}["{escape(label(node["name"], node["type"]))}"]')
    for edge in subgraph["edges"]:
        token.check()
        source, target = alias[edge["source"]], alias[edge["target"]]
        lines.append(f'    {source} -->|"{escape(edge["type"])}"| {target}')
    return "\n".join(lines)


SPEC = ToolSpec(
    name=NAME,
    title="Visualize graph",
    toolset="views",
    read_only=True,
    needs_parseable=True,
    # max_tokens bounds the compact subgraph (400,000 characters); escaping can grow a label about
    # sixfold, and labels are cut to export.mermaid.LABEL_LIMIT characters before that.
    output_budget=8 * MIB,
    description=DESCRIPTION,
    run=run,
)
