"""visualize_graph: a Mermaid ``graph TD`` of a budgeted subgraph (seed 004).

It runs the query_subgraph extraction in compact mode, so budgets, ranking and truncation fields
are the same; only the rendering differs. Node IDs never reach the diagram: nodes get synthetic
aliases (n0, n1, ... in node order) and every label is a quoted string whose risky characters
are Mermaid entity codes, so any title (brackets, quotes, pipes, newlines, emoji, RTL) yields a
diagram that parses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cancel import CancelToken
from ..toolspec import CallContext, ToolSpec
from ._common import MIB
from ._extraction import extract
from ._walk_params import parse_query, seed_list

NAME = "visualize_graph"
DEFAULT_DEPTH = 1
DEFAULT_MAX_OBJECTS = 20
LABEL_LIMIT = 80
DESCRIPTION = (
    "The query_subgraph neighbourhood as a Mermaid graph TD, with the same budgets: nodes "
    "'name (type)', edges by relation type, labels cut at 80 characters. Without seed_ids: "
    "the first max_objects concepts by ID and the relations among them, never the whole "
    "graph."
)

# Mermaid entity codes, applied in one pass over the characters: '#' itself becomes '#35;', so an
# entity already written in a title ('#quot;') is shown literally, never decoded.
_ENTITIES = {
    '"': "#quot;",
    "#": "#35;",
    "&": "#amp;",
    "<": "#lt;",
    ">": "#gt;",
    "|": "#124;",
    "[": "#91;",
    "]": "#93;",
    "{": "#123;",
    "}": "#125;",
    "`": "#96;",
    ";": "#59;",
}
# Line and paragraph breaks of every kind end a Mermaid statement; other control characters
# are invisible at best.
_BREAKS = {chr(c) for c in range(0x20)} | {chr(c) for c in range(0x7F, 0xA0)}
_BREAKS |= {"\u2028", "\u2029"}


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
        name = cut(node["name"], LABEL_LIMIT)
        label = f"{name} ({node['type']})" if node["type"] else name
        lines.append(f'    {alias[node["id"]]}["{escape(label)}"]')
    for edge in subgraph["edges"]:
        token.check()
        source, target = alias[edge["source"]], alias[edge["target"]]
        lines.append(f'    {source} -->|"{escape(edge["type"])}"| {target}')
    return "\n".join(lines)


def escape(text: str) -> str:
    """Text safe inside a quoted Mermaid label: entity codes, breaks turned into spaces."""
    out = []
    for char in text:
        if char in _BREAKS:
            out.append(" ")
        else:
            out.append(_ENTITIES.get(char, char))
    return "".join(out)


def cut(text: str, limit: int) -> str:
    """At most ``limit`` characters, cut at the last space before it and marked with '…'."""
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    space = head.rfind(" ")
    if space > limit // 2:
        head = head[:space]
    return head.rstrip() + "…"


SPEC = ToolSpec(
    name=NAME,
    title="Visualize graph",
    toolset="views",
    read_only=True,
    needs_parseable=True,
    # max_tokens bounds the compact subgraph (400,000 characters); escaping can grow a label about
    # sixfold, and labels are cut to LABEL_LIMIT characters before that.
    output_budget=8 * MIB,
    description=DESCRIPTION,
    run=run,
)
