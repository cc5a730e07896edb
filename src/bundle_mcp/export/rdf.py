"""The graph as RDF: one vocabulary and one IRI rule, written as N-Triples or as JSON-LD.

Both syntaxes state the same triples, so a consumer may pick either:

- each node: ``rdf:type`` ``okf:Concept``, ``okf:Section`` or ``okf:Tag``; ``rdfs:label`` its
  title; a concept's ``okf:conceptId``, ``okf:path`` and (when it has one) ``okf:type``; a
  section's ``okf:path``, ``okf:lineStart`` and ``okf:lineEnd`` (``xsd:integer``);
- each edge: subject, predicate, object. A typed relation's predicate is in the relation
  namespace (:data:`RELATION_VOCAB` + its type, which the relation grammar keeps to
  ``[A-Za-z][A-Za-z0-9_]*``), every other edge's is ``okf:`` + its name (``okf:LINKS_TO``,
  ``okf:PART_OF``, ``okf:HAS_TAG``, ``okf:SOURCED_FROM``…): a relation declared as ``LINKS_TO``
  stays distinct from a link.

IRIs. A concept is the base IRI + its ID percent-encoded with '/' kept: with the default base,
exactly what get_semantic_graph's ``bundle:`` IRIs expand to, so the two exports describe the
same resources. A section is the base + its locator (already percent-encoded; its ``#L1-L9``
is the IRI's fragment, so a base may not hold a '#'); a tag is the base + its node ID (``tag:``
+ the tag) fully percent-encoded. Concept IRIs hold no ':' or '#' after the base and section
IRIs no ':', so the three never collide.

JSON-LD is written without prefixes or terms, only ``@vocab``: a compact IRI whose prefix
happened to match the scheme of a chosen base IRI would otherwise be expanded by the context.
Keys outside the vocabulary (``rdfs:label``, relation predicates) are absolute IRIs.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from types import MappingProxyType
from typing import Any
from urllib.parse import quote

from ..model import RELATION
from .graph import CONCEPT, SECTION, TAG, TAG_PREFIX, ExportGraph, Node

__all__ = [
    "BUNDLE_BASE",
    "OKF_VOCAB",
    "RELATION_VOCAB",
    "base_iri_problem",
    "concept_iri_path",
    "jsonld",
    "node_iri",
    "ntriples",
]

OKF_VOCAB = "https://okf.io/ontology/v0.2#"
RELATION_VOCAB = "https://okf.io/ontology/v0.2/relation#"
# get_semantic_graph's `bundle:` prefix, and so the export's default base IRI.
BUNDLE_BASE = "local:bundle:"

RDF_TYPE = "http://www.w3.org/1999/02/22-rdf-syntax-ns#type"
RDFS_LABEL = "http://www.w3.org/2000/01/rdf-schema#label"
XSD_INTEGER = "http://www.w3.org/2001/XMLSchema#integer"
_CLASSES = MappingProxyType({CONCEPT: "Concept", SECTION: "Section", TAG: "Tag"})

# An absolute IRI (RFC 3987: a scheme, then anything an N-Triples IRIREF may hold).
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")
_NOT_IN_IRI = re.compile(r'[\x00-\x20<>"{}|^`\\\x7f-\x9f]')
# N-Triples string escapes; other C0 controls and DEL as \uXXXX, so a line is one line.
_ECHAR = MappingProxyType({
    "\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f",
})
_LITERAL_UNSAFE = re.compile(r'[\\"\x00-\x1f\x7f]')


def base_iri_problem(base: str) -> str | None:
    """Why ``base`` cannot start the IRIs of an export, or ``None``."""
    if not _SCHEME.match(base):
        return "it must be an absolute IRI, starting with a scheme such as 'urn:' or 'https:'"
    bad = _NOT_IN_IRI.search(base)
    if bad:
        return f"it must not contain {bad.group()!r} (spaces, controls and <>\"{{}}|^`\\)"
    if "#" in base:
        return "it must not contain '#': a section's IRI is its concept file's, with a fragment"
    return None


def concept_iri_path(concept_id: str) -> str:
    """A concept ID as the tail of its IRI: percent-encoded, '/' kept."""
    return quote(concept_id, safe="/")


def node_iri(base: str, node: Node) -> str:
    if node.kind == CONCEPT:
        return base + concept_iri_path(node.id)
    if node.kind == SECTION:
        return base + node.id
    # A tag's node ID already encodes '%' (and so every '%' left starts an escape): encoding
    # the rest gives an IRI as unique as the ID.
    return base + TAG_PREFIX + quote(node.id[len(TAG_PREFIX):], safe="%")


def _predicate(kind: str, name: str) -> str:
    return (RELATION_VOCAB if kind == RELATION else OKF_VOCAB) + name


# A triple's object: ("iri", text), ("string", text) or ("integer", digits).
_Term = tuple[str, str]


def _triples(graph: ExportGraph, base: str) -> Iterator[tuple[str, str, _Term]]:
    iris = {node.id: node_iri(base, node) for node in graph.nodes}
    for node in graph.nodes:
        subject = iris[node.id]
        yield subject, RDF_TYPE, ("iri", OKF_VOCAB + _CLASSES[node.kind])
        yield subject, RDFS_LABEL, ("string", node.title)
        if node.kind == CONCEPT:
            yield subject, OKF_VOCAB + "conceptId", ("string", node.id)
            if node.type:
                yield subject, OKF_VOCAB + "type", ("string", node.type)
        if node.path is not None:
            yield subject, OKF_VOCAB + "path", ("string", node.path)
        if node.lines is not None:
            yield subject, OKF_VOCAB + "lineStart", ("integer", str(node.lines[0]))
            yield subject, OKF_VOCAB + "lineEnd", ("integer", str(node.lines[1]))
    for edge in graph.edges:
        yield iris[edge.source], _predicate(edge.kind, edge.type), ("iri", iris[edge.target])


# --------------------------------------------------------------------------------------------
# N-Triples


def ntriples(graph: ExportGraph, base: str) -> str:
    """One triple a line, the lines sorted (so the output is canonical), after a comment."""
    lines = sorted(
        {f"<{s}> <{p}> {_nt_term(o)} ." for s, p, o in _triples(graph, base)}
    )
    header = f"# {graph.summary()}, {len(lines)} triples\n"
    return header + "".join(line + "\n" for line in lines)


def _nt_term(term: _Term) -> str:
    kind, text = term
    if kind == "iri":
        return f"<{text}>"
    literal = '"' + _LITERAL_UNSAFE.sub(_nt_escape, text) + '"'
    return literal + f"^^<{XSD_INTEGER}>" if kind == "integer" else literal


def _nt_escape(match: re.Match[str]) -> str:
    char = match.group()
    return _ECHAR.get(char) or f"\\u{ord(char):04X}"


# --------------------------------------------------------------------------------------------
# JSON-LD


def jsonld(graph: ExportGraph, base: str) -> str:
    """``{"@context": {"@vocab": okf}, "@graph": [one node object per node]}``.

    A node object holds its own triples: ``@id``, ``@type``, its literals, and one key per
    predicate of its outgoing edges, listing the targets' ``@id`` in edge order.
    """
    objects: dict[str, dict[str, Any]] = {}
    vocab_len = len(OKF_VOCAB)
    for subject, predicate, (kind, text) in _triples(graph, base):
        item = objects.setdefault(subject, {"@id": subject})
        if predicate == RDF_TYPE:
            item["@type"] = text[vocab_len:]  # vocabulary-relative: every class is okf's
            continue
        key = predicate[vocab_len:] if predicate.startswith(OKF_VOCAB) else predicate
        if kind == "iri":
            item.setdefault(key, []).append({"@id": text})
        else:
            item[key] = int(text) if kind == "integer" else text
    document = {"@context": {"@vocab": OKF_VOCAB}, "@graph": list(objects.values())}
    return json.dumps(document, ensure_ascii=False, indent=2) + "\n"

