"""The graph as plain JSON: the export's own shape, every field always present.

::

    {"meta":  {"format": "bundle-mcp/graph-1", "revision", "concepts_in_bundle",
               "node_count", "edge_count", "counts": {"concept", "section", "tag"},
               "selection": {"project", "types", "seeds", "depth", "with_tags",
                             "with_sections", "max_nodes"}},
     "nodes": [{"id", "kind", "title", "type", "path", "concept", "lines", "tags"}],
     "edges": [{"source", "target", "kind", "type"}]}

``path``, ``concept`` and ``lines`` (``[first, last]``) are ``null`` where a kind has none;
``tags`` is ``[]`` for sections and tags. The revision is the snapshot's (a hash of the files'
bytes), so two exports of the same files are byte-identical and say so.
"""

from __future__ import annotations

import json
from typing import Any

from .graph import ExportGraph

__all__ = ["FORMAT_ID", "render", "to_dict"]

FORMAT_ID = "bundle-mcp/graph-1"


def to_dict(graph: ExportGraph) -> dict[str, Any]:
    return {
        "meta": {
            "format": FORMAT_ID,
            "revision": graph.revision,
            "concepts_in_bundle": graph.concepts_in_bundle,
            "node_count": len(graph.nodes),
            "edge_count": len(graph.edges),
            "counts": graph.counts(),
            "selection": graph.query.echo(),
        },
        "nodes": [
            {
                "id": node.id,
                "kind": node.kind,
                "title": node.title,
                "type": node.type,
                "path": node.path,
                "concept": node.concept,
                "lines": list(node.lines) if node.lines is not None else None,
                "tags": list(node.tags),
            }
            for node in graph.nodes
        ],
        "edges": [
            {"source": e.source, "target": e.target, "kind": e.kind, "type": e.type}
            for e in graph.edges
        ],
    }


def render(graph: ExportGraph) -> str:
    return json.dumps(to_dict(graph), ensure_ascii=False, indent=2) + "\n"
