"""The graph as GraphML (the XML format networkx, yEd, Gephi and Cytoscape read).

One ``<key>`` per attribute, declared before the graph; the graph is directed and may hold
parallel edges (a link and a relation between the same two concepts), each edge with its own
ID. Text is XML-escaped; the characters XML 1.0 cannot carry at all (most C0 controls, U+FFFE,
U+FFFF) become U+FFFD, and a carriage return is written ``&#13;`` so that a parser's line-end
normalisation keeps it. A node's tags are one string, their JSON array (GraphML has no lists).

Node IDs are the export's own IDs, so a reader's node keys are concept IDs, locators and
``tag:`` IDs. The GraphML schema types an ID as an XML NMTOKEN, which a '/' or a space already
breaks; readers (networkx, which writes any string there itself, yEd, Gephi) take any string,
and an ID that names the concept is worth more to them than schema validity.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from types import MappingProxyType

from .graph import ExportGraph, Node

__all__ = ["render"]

NAMESPACE = "http://graphml.graphdrawing.org/xmlns"
SCHEMA = "http://graphml.graphdrawing.org/xmlns/1.0/graphml.xsd"

# (key id, for, attr.name, attr.type)
_KEYS = (
    ("d0", "node", "kind", "string"),
    ("d1", "node", "title", "string"),
    ("d2", "node", "type", "string"),
    ("d3", "node", "path", "string"),
    ("d4", "node", "concept", "string"),
    ("d5", "node", "line_start", "int"),
    ("d6", "node", "line_end", "int"),
    ("d7", "node", "tags", "string"),
    ("e0", "edge", "kind", "string"),
    ("e1", "edge", "type", "string"),
    ("g0", "graph", "node_count", "int"),
    ("g1", "graph", "edge_count", "int"),
    ("g2", "graph", "concepts_in_bundle", "int"),
    ("g3", "graph", "revision", "string"),
    ("g4", "graph", "selection", "string"),
)
_NOT_XML = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
_ESCAPES = MappingProxyType({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\r": "&#13;"})
_TO_ESCAPE = re.compile(r'[&<>"\r]')


def render(graph: ExportGraph) -> str:
    lines = [
        '<?xml version="1.0" encoding="UTF-8"?>',
        f'<graphml xmlns="{NAMESPACE}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"',
        f'         xsi:schemaLocation="{NAMESPACE} {SCHEMA}">',
    ]
    for key, domain, name, kind in _KEYS:
        lines.append(
            f'  <key id="{key}" for="{domain}" attr.name="{name}" attr.type="{kind}"/>'
        )
    lines.append('  <graph id="okf" edgedefault="directed">')
    selection = json.dumps(graph.query.echo(), ensure_ascii=False, sort_keys=True)
    lines += _data("    ", (
        ("g0", str(len(graph.nodes))),
        ("g1", str(len(graph.edges))),
        ("g2", str(graph.concepts_in_bundle)),
        ("g3", graph.revision),
        ("g4", selection),
    ))
    for node in graph.nodes:
        lines.append(f'    <node id="{_text(node.id)}">')
        lines += _data("      ", _node_data(node))
        lines.append("    </node>")
    for n, edge in enumerate(graph.edges):
        lines.append(
            f'    <edge id="e{n}" source="{_text(edge.source)}" target="{_text(edge.target)}">'
        )
        lines += _data("      ", (("e0", edge.kind), ("e1", edge.type)))
        lines.append("    </edge>")
    lines += ["  </graph>", "</graphml>"]
    return "\n".join(lines) + "\n"


def _node_data(node: Node) -> list[tuple[str, str]]:
    found = [("d0", node.kind), ("d1", node.title), ("d2", node.type)]
    if node.path is not None:
        found.append(("d3", node.path))
    if node.concept is not None:
        found.append(("d4", node.concept))
    if node.lines is not None:
        found += [("d5", str(node.lines[0])), ("d6", str(node.lines[1]))]
    if node.tags:
        found.append(("d7", json.dumps(list(node.tags), ensure_ascii=False)))
    return found


def _data(indent: str, items: Iterable[tuple[str, str]]) -> list[str]:
    return [f'{indent}<data key="{key}">{_text(value)}</data>' for key, value in items]


def _text(value: str) -> str:
    value = _NOT_XML.sub("\ufffd", value)
    return _TO_ESCAPE.sub(lambda m: _ESCAPES[m.group()], value)
