"""visualize_graph: a Mermaid ``graph TD`` of a budgeted subgraph (seed 004, docs/DESIGN.md §7).

It runs the query_subgraph extraction in compact mode, so budgets, ranking and truncation fields
are the same; only the rendering differs. Node IDs never reach the diagram: nodes get synthetic
aliases (n0, n1, ... in node order) and every label is a quoted string whose risky characters
are Mermaid entity codes, so any title (brackets, quotes, pipes, newlines, emoji, RTL) yields a
diagram that parses. That label rule is shared with ``bundle-mcp graph --format mermaid``, so it
lives in :mod:`bundle_mcp.export.mermaid`.

The diagram is also kept within what a Mermaid renderer at its defaults accepts (500 edges,
50,000 characters; a diagram cannot raise them): :class:`DiagramBudget` is a third budget of
the extraction, priced with the very lines :func:`mermaid` writes, so an object whose lines
would pass either limit is left out like one over ``max_tokens`` (``truncation_reason``
``mermaid_limits``), never drawn with some of its edges missing.
"""

from __future__ import annotations

from collections import ChainMap
from collections.abc import Mapping, Sequence
from typing import Any

from ..cancel import CancelToken
from ..export.mermaid import MAX_EDGES, MAX_TEXT_SIZE, escape, label, text_size
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
    "graph. The diagram stays within Mermaid's default limits (500 edges, 50,000 characters): "
    "an object that would pass them is left out (truncation_reason mermaid_limits)."
)
HEADER = "graph TD"


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
    found = extract(snapshot, query, token, DiagramBudget())
    return {
        "mermaid": mermaid(found.subgraph, token),
        **found.budget_report(),
    }


def mermaid(subgraph: Mapping[str, Any], token: CancelToken) -> str:
    """``graph TD`` with one line per node, then one per edge, four-space indented."""
    alias: dict[str, str] = {}
    lines = [HEADER]
    for node in subgraph["nodes"]:
        token.check()
        alias[node["id"]] = f"n{len(alias)}"
        lines.append(node_line(alias[node["id"]], node))
    for edge in subgraph["edges"]:
        token.check()
        lines.append(edge_line(alias, edge))
    return "\n".join(lines)


def node_line(alias: str, node: Mapping[str, Any]) -> str:
    return f'    {alias}["{escape(label(node["name"], node["type"]))}"]'


def edge_line(alias: Mapping[str, str], edge: Mapping[str, Any]) -> str:
    source, target = alias[edge["source"]], alias[edge["target"]]
    return f'    {source} -->|"{escape(edge["type"])}"| {target}'


class DiagramBudget:
    """The extraction's third budget: what :func:`mermaid` would write stays within Mermaid's
    default ``maxEdges`` and ``maxTextSize``.

    Aliases follow the order objects are kept, which is the order :func:`mermaid` gives them,
    so each line is priced exactly as it will be written; the text size counts UTF-16 units,
    as Mermaid (JavaScript) measures a string. One instance per call.
    """

    reason = "mermaid_limits"

    def __init__(self, max_edges: int = MAX_EDGES, max_size: int = MAX_TEXT_SIZE) -> None:
        self._max_edges = max_edges
        self._max_size = max_size
        self._alias: dict[str, str] = {}
        self.edges = 0
        self.size = text_size(HEADER)

    def _size(self, node: Mapping[str, Any], fresh: Sequence[Mapping[str, Any]]) -> int:
        """The units the candidate's lines would add, each after a line break."""
        own = f"n{len(self._alias)}"
        alias = ChainMap({node["id"]: own}, self._alias)  # the kept ones', and its own
        lines = [node_line(own, node), *(edge_line(alias, edge) for edge in fresh)]
        return sum(1 + text_size(line) for line in lines)

    def admits(self, node: Mapping[str, Any], fresh: Sequence[Mapping[str, Any]]) -> bool:
        if self.edges + len(fresh) > self._max_edges:
            return False
        return self.size + self._size(node, fresh) <= self._max_size

    def take(self, node: Mapping[str, Any], fresh: Sequence[Mapping[str, Any]]) -> None:
        self.size += self._size(node, fresh)
        self.edges += len(fresh)
        self._alias[node["id"]] = f"n{len(self._alias)}"


SPEC = ToolSpec(
    name=NAME,
    title="Visualize graph",
    toolset="views",
    read_only=True,
    # max_tokens bounds the compact subgraph (400,000 characters); escaping can grow a label about
    # sixfold, and labels are cut to export.mermaid.LABEL_LIMIT characters before that.
    output_budget=8 * MIB,
    description=DESCRIPTION,
    run=run,
)
