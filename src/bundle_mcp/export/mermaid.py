"""Mermaid flowcharts: the label rule visualize_graph and ``bundle-mcp graph`` share, and the
export's writer.

Node IDs never reach a diagram: nodes get synthetic aliases (``n0``, ``n1``, … in node order)
and every label is a quoted string whose risky characters are Mermaid entity codes, so any title
(brackets, quotes, pipes, newlines, emoji, RTL) yields a diagram that parses.
"""

from __future__ import annotations

from types import MappingProxyType

from ..okf.graph import PART_OF_KIND
from .graph import CONCEPT, SECTION, TAG, TAG_KIND, ExportGraph

__all__ = [
    "LABEL_LIMIT", "MAX_EDGES", "MAX_TEXT_SIZE", "cut", "escape", "label", "render", "text_size",
    "warnings",
]

LABEL_LIMIT = 80

# Mermaid's own defaults (maxEdges, maxTextSize): a diagram past either is refused by a renderer
# left at them, and a diagram cannot raise them (both are "secure" keys). Worth a note, not a
# failure: a site may configure higher limits.
MAX_EDGES = 500
MAX_TEXT_SIZE = 50_000

# Mermaid entity codes, applied in one pass over the characters: '#' itself becomes '#35;', so an
# entity already written in a title ('#quot;') is shown literally, never decoded.
_ENTITIES = MappingProxyType({
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
})
# Line and paragraph breaks of every kind end a Mermaid statement; other control characters
# are invisible at best.
_BREAKS = frozenset(
    {chr(c) for c in range(0x20)} | {chr(c) for c in range(0x7F, 0xA0)} | {"\u2028", "\u2029"}
)

# The shape of each kind of node: a concept a box, a section rounded, a tag a stadium.
_SHAPES = MappingProxyType(
    {CONCEPT: ('["', '"]'), SECTION: ('("', '")'), TAG: ('(["', '"])')}
)
# Structure (a section's PART_OF, a tag) is drawn dotted, what an author linked or declared solid.
_DOTTED = frozenset({PART_OF_KIND, TAG_KIND})


def text_size(text: str) -> int:
    """The length Mermaid compares with ``maxTextSize``: JavaScript's, in UTF-16 code units
    (a character outside the Basic Multilingual Plane, an emoji, counts two)."""
    return len(text) + sum(1 for char in text if ord(char) > 0xFFFF)


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


def label(name: str, kind: str) -> str:
    """``name (kind)``, the name cut to :data:`LABEL_LIMIT`; the name alone without a kind."""
    name = cut(name, LABEL_LIMIT)
    return f"{name} ({kind})" if kind else name


def render(graph: ExportGraph) -> str:
    """``graph TD``, a comment with the counts, one line per node, then one per edge."""
    alias: dict[str, str] = {}
    lines = ["graph TD", f"    %% {graph.summary()}"]
    for node in graph.nodes:
        alias[node.id] = f"n{len(alias)}"
        start, end = _SHAPES[node.kind]
        lines.append(f"    {alias[node.id]}{start}{escape(label(node.title, node.type))}{end}")
    for edge in graph.edges:
        arrow = "-.->" if edge.kind in _DOTTED else "-->"
        lines.append(
            f'    {alias[edge.source]} {arrow}|"{escape(edge.type)}"| {alias[edge.target]}'
        )
    return "\n".join(lines) + "\n"


def warnings(graph: ExportGraph, text: str) -> list[str]:
    """What a renderer at Mermaid's default limits would refuse in ``text``."""
    found = []
    if len(graph.edges) > MAX_EDGES:
        found.append(
            f"{len(graph.edges)} edges: Mermaid renders at most {MAX_EDGES} unless its site "
            "configuration raises maxEdges"
        )
    size = text_size(text)
    if size > MAX_TEXT_SIZE:
        found.append(
            f"{size} characters: Mermaid renders at most {MAX_TEXT_SIZE} unless its site "
            "configuration raises maxTextSize"
        )
    return found

