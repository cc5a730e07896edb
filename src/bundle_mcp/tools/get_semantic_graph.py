"""get_semantic_graph: the whole bundle as one JSON-LD document.

The projection (``bundle-mcp/okf-v0.2``, ``bundle-mcp/okf-v0.2-instant`` under the instant
profile) is ours, not the Go toolkit's closed-class profile:

- ``@graph[0]`` is the bundle node (``@id`` ``bundle:``, ``@type`` ``okf:Bundle``) carrying
  ``projectionVersion``, ``declaredOKFVersion`` (only when the root index.md declares one),
  ``effectiveOKFVersion``, ``temporalProfile`` and ``asOf``.
- Then one node per concept, sorted by ID. ``@id`` is ``bundle:`` + the ID percent-encoded with
  '/' kept (``bundle:tables/orders``, ``bundle:hash%23name``), which the context expands to
  ``local:bundle:...``. ``@type`` is ``okf:Concept`` (JSON-LD types are IRIs, and an OKF type
  such as ``Attested Computation`` is free text); the OKF type is the ``type`` property.
  ``id`` is the plain concept ID, as every other tool spells it.
- ``references`` lists every in-bundle Markdown link target once, sorted by target ID, as
  ``{"target": <concept ID>, "exists": bool}`` (the context types them as okf:Reference):
  broken links stay visible with ``exists: false``. Links that climb above the root, name a
  directory, or name a reserved index.md/log.md are not concept references and are left out.
- ``relations`` lists the typed relations of the toolkit extension, resolved or not, sorted by
  (source, relation_type, target), as ``{"source": <escaped ref>, "relation_type": ...,
  "target": <escaped ref>, "exists": bool}`` plus ``target_id`` (the unescaped concept ID) when
  it differs from ``target``; ``source``/``target`` keep the escaped reference strings exactly
  as get_neighbors' ``from``/``to`` do. Per-item ``@type`` is left out: at the 10,000-concept cap
  the graph must stay under its 16 MiB renderer budget, and the context names both sets.
"""

from __future__ import annotations

from typing import Any

from ..cancel import CancelToken
from ..derived import Slot, of_snapshot, unrevised_name
from ..errors import resource_limit
from ..export.rdf import BUNDLE_BASE, OKF_VOCAB, concept_iri_path
from ..model import Document, Snapshot, shared_text
from ..okf.temporal import INSTANT_PROFILE, Reference, parse_value, reference_from
from ..okf.versions import resolve_version
from ..toolspec import CallContext, ToolSpec
from ._common import MIB, Cards
from ._kept_parts import concept_items, packed_lines

NAME = "get_semantic_graph"
DESCRIPTION = (
    "The whole bundle as one JSON-LD graph: one node per concept (by ID) with card fields, "
    "link targets (broken ones with exists: false) and typed relations. For a complete "
    "traversal beyond get_neighbors' limit. Over 16 MiB it fails with resource_limit: report "
    "that limit rather than claim completeness."
)

PROJECTION_DATE = "bundle-mcp/okf-v0.2"
PROJECTION_INSTANT = "bundle-mcp/okf-v0.2-instant"
MAX_NODES = 100_000
RESERVED_STEMS = ("index", "log")

# The vocabulary and the concept IRIs are those of `bundle-mcp graph --format json-ld|ntriples`
# (export/rdf.py), so both describe the same resources.
CONTEXT: dict[str, Any] = {
    "okf": OKF_VOCAB,
    "bundle": BUNDLE_BASE,
    "id": "okf:conceptId",
    "path": "okf:path",
    "type": "okf:type",
    "title": "okf:title",
    "description": "okf:description",
    "tags": {"@id": "okf:tags", "@container": "@list"},
    "status": "okf:status",
    "trust": "okf:trust",
    "stale_after": "okf:staleAfter",
    "stale": "okf:stale",
    "references": {"@id": "okf:references", "@container": "@set"},
    "relations": {"@id": "okf:relations", "@container": "@set"},
    "source": "okf:source",
    "target": "okf:target",
    "target_id": "okf:targetConceptId",
    "relation_type": "okf:relationType",
    "exists": "okf:exists",
    "projectionVersion": "okf:projectionVersion",
    "declaredOKFVersion": "okf:declaredOKFVersion",
    "effectiveOKFVersion": "okf:effectiveOKFVersion",
    "temporalProfile": "okf:temporalProfile",
    "asOf": "okf:asOf",
}


Nodes = tuple[tuple[dict[str, Any], Any], ...]  # each concept's node without `stale`, its limit


# Not built by the warm-up: the call with default arguments, the one most clients make, is a
# kept answer (``cache_results``) that the warm-up makes (which builds these nodes) or, after a
# restart, reads back (which does not). The nodes serve the other calls (an ``as_of``, the
# instant profile): the first such call reads them back or builds them, and they stay. Read
# back by every restart's warm-up, they were 42 MB and 0.3-0.4 s at 9,978 concepts.
SEMANTIC_GRAPH_NODES: Slot[Nodes] = Slot(
    "semantic_graph_nodes", "snapshot",
    "the JSON-LD concept nodes without `stale`, per temporal profile",
)
SLOTS = (SEMANTIC_GRAPH_NODES,)


def _kept_nodes(snapshot: Snapshot, profile: str, token: CancelToken) -> Nodes:
    # Every node but its `stale` is a pure function of the snapshot and the profile, so the
    # nodes are built once per snapshot; each call only fills in `stale` for its as_of.
    return of_snapshot(
        snapshot, SEMANTIC_GRAPH_NODES,
        lambda: _stored_or_built(snapshot, profile, token), profile,
    )


# The name the nodes of a profile are kept under for the next process on the same files
# (InboundHint.keep_bytes): JSON lines (``_kept_parts.packed_lines``), the header what decides
# them and their count.
STORED_NODES = "semantic-graph-nodes/2/"
_NODES_PER_LINE = 256


def _stored_or_built(snapshot: Snapshot, profile: str, token: CancelToken) -> Nodes:
    """The nodes an earlier process kept for this revision, when they read back whole (then
    no document is built for them: after a restart they took about 0.9 s of the warm-up at
    9,978 concepts), else built and kept. What else decides them (the release, the assets and
    folders, ``derived.unrevised_name``) is kept inside the value, so the name stays the same
    and a revision's nodes replace another's (keep_bytes)."""
    store = snapshot.inbound
    name = STORED_NODES + profile
    decided_by = unrevised_name(snapshot, "semantic-graph-nodes", profile)
    if store is not None:
        found = _read_nodes(store.stored_bytes(snapshot.revision, name), decided_by, snapshot,
                            profile, token)
        if found is not None:
            return found
    nodes = _nodes(snapshot, Reference(profile, None, None), token)
    if store is not None and snapshot.loaded:
        # Only a capture loaded from the files: a restart loads one, and a snapshot after an
        # edit is seldom the one a restart finds (each would write megabytes).
        store.keep_bytes(snapshot.revision, name, packed_lines(
            [decided_by, len(nodes)], [node for node, _ in nodes], _NODES_PER_LINE))
    return nodes


_NODE_KEYS = ("@id", "@type", "id", "path", "type", "title", "description", "tags", "status",
              "trust", "stale_after", "stale", "references", "relations")
_RELATION_KEYS = ("source", "relation_type", "target", "exists")
_SHORT_KEYS = ("type", "status", "trust", "stale_after")  # identifier-like: interned


def _read_nodes(data: bytes | None, decided_by: str, snapshot: Snapshot, profile: str,
                token: CancelToken) -> Nodes | None:
    """What :func:`_stored_or_built` kept, as :func:`_nodes` builds them (the same JSON, and
    the same sharing of key tables, reference items and strings), or ``None`` unless it reads
    back whole: one node a concept, in order, each of the shape built. A line of nodes at a
    time: decoded at once, they raised what a restart kept by about 50 MB."""
    items = concept_items(data, decided_by, snapshot, token)
    if items is None:
        return None
    shared: dict[tuple[str, bool], dict[str, Any]] = {}
    out: list[tuple[dict[str, Any], Any]] = []
    try:
        for _, node in items:
            if not (tuple(node) == _NODE_KEYS and node["stale"] is None
                    and _shared_fields(node, shared)):
                return None
            after = node["stale_after"]
            out.append((_Node(**node).__dict__,
                        None if after is None else parse_value(after, profile)))
    except ValueError:
        return None
    return tuple(out)


def _shared_fields(node: dict[str, Any], shared: dict[tuple[str, bool], dict[str, Any]]
                   ) -> bool:
    """Put into ``node`` read back what a build shares: its short strings interned, one
    reference item for each (target, exists), its relations as key-sharing items. False when
    a field is not of the shape built."""
    for key in _SHORT_KEYS:
        value = node[key]
        if type(value) is str:
            node[key] = shared_text(value)
    tags = node["tags"]
    references = node["references"]
    relations = node["relations"]
    if not (type(tags) is list and type(references) is list and type(relations) is list):
        return False
    node["tags"] = [shared_text(t) if type(t) is str else t for t in tags]
    items = []
    for item in references:
        # Each distinct item's fields are checked once, as its shared item is made.
        if type(item) is not dict or len(item) != 2:
            return False
        pair: tuple[Any, Any] = (item.get("target"), item.get("exists"))
        found = shared.get(pair)  # checked before it is kept
        if found is None:
            target, exists = pair
            if type(target) is not str or type(exists) is not bool:
                return False
            found = _reference(shared, shared_text(target), exists)
        items.append(found)
    node["references"] = items
    for n, item in enumerate(relations):
        if not (type(item) is dict and tuple(item)[:4] == _RELATION_KEYS and len(item) <= 5
                and all(type(item[key]) is str for key in _RELATION_KEYS if key != "exists")
                and type(item["exists"]) is bool):
            return False
        relation = _RelationItem(shared_text(item["source"]), shared_text(item["relation_type"]),
                                 shared_text(item["target"]), item["exists"])
        if len(item) == 5:
            target_id = item.get("target_id")
            if type(target_id) is not str:
                return False
            relation.target_id = shared_text(target_id)
        relations[n] = relation.__dict__
    return True


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    ref = reference_from(params)
    if len(snapshot.concepts) + 1 > MAX_NODES:
        raise resource_limit(
            f"the graph would have more than {MAX_NODES} nodes",
            "serve a smaller bundle; use search_concepts and get_neighbors for bounded reads",
        )
    graph: list[dict[str, Any]] = [bundle_node(snapshot, ref)]
    nodes = _kept_nodes(snapshot, ref.profile, token)
    for node, limit in nodes:
        stale = None if ref.moment is None or limit is None else ref.moment >= limit
        if stale is node["stale"]:
            # The kept node itself (its `stale` is None): a copy per node was 10,000 dicts
            # more in a kept answer at the bench size. Nothing changes a result once built.
            graph.append(node)
            continue
        item = dict(node)
        item["stale"] = stale
        graph.append(item)
    return {"@context": dict(CONTEXT), "@graph": graph}


def _nodes(snapshot: Snapshot, ref: Reference, token: CancelToken) -> Nodes:
    cards = Cards(snapshot, ref)
    out = []
    # One reference item per (target, exists), shared by every node naming it: the kept nodes
    # hold one per link otherwise (a tenth of a bundle may name its hub). Nothing changes an
    # item once built (run copies a node whose `stale` it changes), and JSON repeats a shared
    # one.
    references: dict[tuple[str, bool], dict[str, Any]] = {}
    for concept_id, doc in snapshot.concepts.items():
        token.check()
        node = concept_node(snapshot, doc, cards.get(concept_id), token, references)
        after = node["stale_after"]
        out.append((node, None if after is None else parse_value(after, ref.profile)))
    return tuple(out)


def iri(concept_id: str) -> str:
    """The compact IRI of a concept: ``bundle:`` + its ID percent-encoded, '/' kept."""
    return "bundle:" + concept_iri_path(concept_id)


def bundle_node(snapshot: Snapshot, ref: Reference) -> dict[str, Any]:
    version = resolve_version(snapshot)
    node: dict[str, Any] = {
        "@id": "bundle:",
        "@type": "okf:Bundle",
        "projectionVersion": PROJECTION_INSTANT if ref.profile == INSTANT_PROFILE
        else PROJECTION_DATE,
    }
    if version["declared"] is not None:
        node["declaredOKFVersion"] = version["declared"]
    node["effectiveOKFVersion"] = version["effective"]
    node["temporalProfile"] = ref.profile
    node["asOf"] = ref.as_of
    return node


def concept_node(
    snapshot: Snapshot,
    doc: Document,
    card: dict[str, Any],
    token: CancelToken,
    shared: dict[tuple[str, bool], dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """One concept's JSON-LD node; ``shared`` keeps the reference items of one build, each
    ``{"target", "exists"}`` built once and reused by every node that names it."""
    if shared is None:
        shared = {}
    concept_id = card["id"]
    references: dict[str, bool] = {}
    for link in doc.markdown.links:
        token.check()
        target = link.concept_id
        if target is None or link.is_directory or target.rsplit("/", 1)[-1] in RESERVED_STEMS:
            continue
        references[target] = target in snapshot.concepts
    relations = []
    for rel in doc.relations:  # already unique and sorted by (source, type, target)
        token.check()
        item = _RelationItem(
            rel.source, rel.relation_type, rel.target, rel.target_id in snapshot.concepts
        )
        if rel.target != rel.target_id:  # escaped '#' or a fragment: name the concept too
            item.target_id = rel.target_id
        relations.append(item.__dict__)
    return _Node(**{
        "@id": iri(concept_id),
        "@type": "okf:Concept",
        "id": concept_id,
        "path": card["path"],
        "type": card["type"],
        "title": card["title"],
        "description": card["description"],
        "tags": card["tags"],
        "status": card["status"],
        "trust": card["trust"],
        "stale_after": card["stale_after"],
        "stale": card["stale"],
        "references": [_reference(shared, t, references[t]) for t in sorted(references)],
        "relations": relations,
    }).__dict__


def _reference(
    shared: dict[tuple[str, bool], dict[str, Any]], target: str, exists: bool
) -> dict[str, Any]:
    item = shared.get((target, exists))
    if item is None:
        item = shared[(target, exists)] = _ReferenceItem(target, exists).__dict__
    return item


class _KeySharing:
    """Plain JSON objects as attribute dicts: a kept node is one instance's ``__dict__``.

    An instance's dict shares one key table with every other instance of its class (CPython's
    split dict), where a dict literal carries its own: at the bench size (9,978 concepts, 30k
    relations) the kept nodes took 5 MiB less (docs/decisions/memory.md). The dict is an
    ordinary ``dict`` (``json`` writes it in insertion order, so the bytes are the literal's);
    the instance itself is dropped. Each shape is its own subclass: every instance of one sets
    the same keys in the same order, which is what keeps the table shared (so does each
    item class below).
    """

    def __init__(self, **fields: Any) -> None:
        for name, value in fields.items():
            setattr(self, name, value)


class _Node(_KeySharing):
    pass


class _RelationItem:
    """A ``relations`` item, as :class:`_KeySharing` (30k at the bench size: plain attribute
    stores, not keyword arguments)."""

    # Set after the four fields when the target is no plain concept ID (escaped or a fragment).
    target_id: str

    def __init__(self, source: str, relation_type: str, target: str, exists: bool) -> None:
        self.source = source
        self.relation_type = relation_type
        self.target = target
        self.exists = exists


class _ReferenceItem:
    """A ``references`` item, as :class:`_KeySharing`."""

    def __init__(self, target: str, exists: bool) -> None:
        self.target = target
        self.exists = exists


SPEC = ToolSpec(
    name=NAME,
    title="Get semantic graph",
    toolset="views",
    read_only=True,
    output_budget=16 * MIB,
    description=DESCRIPTION,
    run=run,
    cache_results=True,
)

