"""The graph as Graphviz DOT: a ``digraph`` whose node names are the export's node IDs.

One exception: Graphviz reads a name that starts with '%' as one of its own anonymous IDs (two
such nodes can merge, an edge between them become a loop), and a section of a file whose name
starts with a character its locator percent-encodes (``日本語.md#L1-L4`` is
``%E6%97%A5….md#L1-L4``) has such an ID. Those names get a leading '/', which starts no node ID
(concept IDs and locators are relative, tag IDs start with ``tag:``), so names stay unique;
every node's ``tooltip`` is its exact ID.

DOT quoting. In a quoted ID the only escape is ``\\"``; every node ID of an export is free of
backslashes and control characters (:mod:`bundle_mcp.export.graph`), so quoting its ``"`` is
enough. Labels and tooltips are *escString*s, where a backslash starts an escape (``\\n``,
``\\N`` for the node's name…) and Graphviz decodes HTML entities (``&amp;`` is shown as
``&``): each backslash is doubled, each quote escaped, each ``&`` written ``&amp;``, a line
break becomes ``\\n`` and any other control character a space, so a title is shown as
written.
"""

from __future__ import annotations

import re
from types import MappingProxyType

from ..okf.graph import FIELD_KIND, PART_OF_KIND
from .graph import CONCEPT, SECTION, TAG, TAG_KIND, ExportGraph

__all__ = ["render"]

_SHAPES = MappingProxyType({CONCEPT: "box", SECTION: "note", TAG: "ellipse"})
# As in the Mermaid drawing: structure dotted, a declared field edge dashed, the rest solid.
_STYLES = MappingProxyType({PART_OF_KIND: "dotted", TAG_KIND: "dotted", FIELD_KIND: "dashed"})
_LABEL_UNSAFE = re.compile(r'[\\"&\x00-\x1f\x7f-\x9f\u2028\u2029]')
_BREAKS = frozenset({"\n", "\u2028", "\u2029", "\x85"})


def render(graph: ExportGraph) -> str:
    summary = graph.summary()
    lines = [
        f"// {summary}",
        'digraph "okf" {',
        f"  graph [comment={_label(summary)}, rankdir=LR];",
        "  node [shape=box];",
    ]
    for node in graph.nodes:
        text = f"{node.title}\n({node.type})" if node.type else node.title
        attrs = [f"label={_label(text)}", f"tooltip={_label(node.id)}"]
        if _SHAPES[node.kind] != "box":
            attrs.append(f"shape={_SHAPES[node.kind]}")
        lines.append(f"  {_id(node.id)} [{', '.join(attrs)}];")
    for edge in graph.edges:
        attrs = [f"label={_label(edge.type)}"]
        style = _STYLES.get(edge.kind)
        if style is not None:
            attrs.append(f"style={style}")
        lines.append(f"  {_id(edge.source)} -> {_id(edge.target)} [{', '.join(attrs)}];")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _id(node_id: str) -> str:
    name = "/" + node_id if node_id.startswith("%") else node_id
    return '"' + name.replace('"', '\\"') + '"'


def _label(text: str) -> str:
    return '"' + _LABEL_UNSAFE.sub(_label_escape, text) + '"'


def _label_escape(match: re.Match[str]) -> str:
    char = match.group()
    if char in ("\\", '"'):
        return "\\" + char
    if char == "&":
        return "&amp;"
    if char in _BREAKS:
        return "\\n"
    return "" if char == "\r" else " "
