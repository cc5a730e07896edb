"""Exports of a bundle's graph for the tools that consume graphs (``bundle-mcp graph``).

:mod:`.graph` selects the nodes and edges (the graph the traversal verbs walk, filtered, with a
node budget); one module per family of formats writes them: :mod:`.dot` (Graphviz),
:mod:`.mermaid`, :mod:`.rdf` (N-Triples and JSON-LD, one set of triples), :mod:`.graphml`
(networkx, yEd, Gephi) and :mod:`.plain` (JSON). Every writer is a pure function of the
selection: sorted, no clock, no host path, so two runs on the same files print the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from . import dot, graphml, mermaid, plain, rdf
from .graph import ExportGraph

__all__ = ["FORMATS", "Rendering", "render"]


@dataclass(frozen=True, slots=True)
class Rendering:
    """How to write a selection: the format, and the base IRI the RDF formats start IRIs with."""

    format: str
    base_iri: str = rdf.BUNDLE_BASE


FORMATS: Mapping[str, Callable[[ExportGraph, Rendering], str]] = MappingProxyType({
    "dot": lambda graph, _: dot.render(graph),
    "mermaid": lambda graph, _: mermaid.render(graph),
    "json-ld": lambda graph, how: rdf.jsonld(graph, how.base_iri),
    "ntriples": lambda graph, how: rdf.ntriples(graph, how.base_iri),
    "graphml": lambda graph, _: graphml.render(graph),
    "json": lambda graph, _: plain.render(graph),
})


def render(graph: ExportGraph, how: Rendering) -> str:
    """The selection in ``how.format`` (a key of :data:`FORMATS`)."""
    return FORMATS[how.format](graph, how)
