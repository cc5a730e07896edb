"""The snapshot index: every structure derived from a snapshot or one of its documents, listed here.

A :class:`~bundle_mcp.model.Snapshot` and its :class:`~bundle_mcp.model.Document` objects are
frozen, so anything computed from them can be kept with them and reused: it changes speed, never
an answer. This module is the one catalogue of what is kept. Each structure is a typed
:class:`Slot`; code that builds one asks for it with :func:`of_snapshot` or :func:`of_document`,
which build it on first use and return the stored value afterwards. Nothing outside this module
(and the model's own frozen frontmatter) reads or writes the memo a frozen object carries, so
:data:`SLOTS` is the whole answer to "what does a snapshot know?", and :func:`built` says which of
it has been built for a given snapshot (the warm-up and the performance work read it).

Document-level slots live with the document, which the loader reuses across snapshots while its
bytes stay the same: an edit to one file rebuilds only that file's structures and the
snapshot-level ones.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

from .model import Document, Snapshot

__all__ = [
    "ANSWERS",
    "BUNDLE_FINDINGS",
    "COMPLETION_IDS",
    "CONCEPT_IDS_BY_CASEFOLD",
    "CONCEPT_SUGGESTIONS",
    "CONTEXT_INDEX",
    "CONTEXT_WORDS",
    "DOCUMENT_FINDINGS",
    "FIELD_EDGES",
    "FIELD_FINDINGS",
    "GRAPH",
    "INDEX_FINDINGS",
    "INDEX_OUTLINE",
    "LINK_FINDINGS",
    "LIST_ENTRY",
    "ORPHAN_FINDINGS",
    "READER_VIEWS",
    "RESOURCE_ENTRIES",
    "SECTION_POSTINGS",
    "SECTION_WORDS",
    "SECTION_WORD_TOTALS",
    "SEMANTIC_GRAPH_NODES",
    "SLOTS",
    "SUMMARY_COUNTS",
    "Slot",
    "built",
    "of_document",
    "of_snapshot",
]

T = TypeVar("T")


@dataclass(frozen=True, eq=False)
class Slot(Generic[T]):
    """One kind of derived structure. ``eq=False``: a slot is its own identity (the memo key)."""

    name: str
    owner: Literal["snapshot", "document"]
    built_by: str  # the module whose code builds it
    what: str


# --------------------------------------------------------------------------------------------
# The catalogue. The value types are written in words where naming them here would import the
# module that builds them (this module sits just above the model, below everything that uses it).

GRAPH: Slot[Any] = Slot(
    "graph", "snapshot", "bundle_mcp.okf.graph",
    "entities, adjacency and tag index of the traversal verbs (okf.graph.BundleGraph)",
)
FIELD_EDGES: Slot[Any] = Slot(
    "field_edges", "snapshot", "bundle_mcp.okf.graph",
    "the walk's typed edges from path-valued frontmatter fields (sources[].resource, "
    "executor.resource, attester.resource, computation, resource) to the concepts they name, "
    "per concept (okf.graph.FieldEdge); Snapshot.edges stays links and relations only",
)
SECTION_WORDS: Slot[Any] = Slot(
    "section_words", "document", "bundle_mcp.tools._section_index",
    "each section of one document for search_sections: its folded words, or (ASCII body) its "
    "offsets in the folded body",
)
SECTION_WORD_TOTALS: Slot[Any] = Slot(
    "section_word_totals", "snapshot", "bundle_mcp.tools._section_index",
    "section count and document frequencies over the whole bundle (BM25 statistics)",
)
SECTION_POSTINGS: Slot[Any] = Slot(
    "section_postings", "snapshot", "bundle_mcp.tools._section_index",
    "per-term postings, filled as queries use terms",
)
CONTEXT_WORDS: Slot[Any] = Slot(
    "context_words", "document", "bundle_mcp.tools._context_index",
    "a document's stemmed words by field and section, for context's ranking",
)
CONTEXT_INDEX: Slot[Any] = Slot(
    "context_index", "snapshot", "bundle_mcp.tools._context_index",
    "context's bundle statistics, queried stems' postings and copy groups, by part",
)
LIST_ENTRY: Slot[Any] = Slot(
    "list_entry", "document", "bundle_mcp.tools.list_concepts",
    "a concept's list_concepts entry without `stale`, per temporal profile and OKF version",
)
SEMANTIC_GRAPH_NODES: Slot[Any] = Slot(
    "semantic_graph_nodes", "snapshot", "bundle_mcp.tools.get_semantic_graph",
    "the JSON-LD concept nodes without `stale`, per temporal profile",
)
CONCEPT_IDS_BY_CASEFOLD: Slot[Mapping[str, tuple[str, ...]]] = Slot(
    "concept_ids_by_casefold", "snapshot", "bundle_mcp.validation.links",
    "concept IDs by their case-folded spelling, for 'did you mean' on a broken link",
)
CONCEPT_SUGGESTIONS: Slot[Any] = Slot(
    "concept_suggestions", "snapshot", "bundle_mcp.okf.suggest",
    "loose IDs, stems and titles of every concept, for 'did you mean' on concept_not_found "
    "(okf.suggest.SuggestionIndex); built on the first miss",
)
DOCUMENT_FINDINGS: Slot[Any] = Slot(
    "document_findings", "document", "bundle_mcp.validation",
    "the findings of the rules that read one document, per strictness and OKF version",
)
FIELD_FINDINGS: Slot[Any] = Slot(
    "field_findings", "snapshot", "bundle_mcp.validation",
    "path-valued field and Attested Computation findings, per concept and --check-links (they "
    "read other files of the snapshot, so they cannot be kept with the document)",
)
INDEX_OUTLINE: Slot[Any] = Slot(
    "index_outline", "document", "bundle_mcp.validation.reserved",
    "an index.md file's headings and top-level list entries (validation.reserved.IndexOutline)",
)
INDEX_FINDINGS: Slot[Any] = Slot(
    "index_findings", "snapshot", "bundle_mcp.validation",
    "strict-mode index.md description mismatches, per index file",
)
LINK_FINDINGS: Slot[Any] = Slot(
    "link_findings", "snapshot", "bundle_mcp.validation",
    "broken-link findings, per document",
)
ORPHAN_FINDINGS: Slot[Any] = Slot(
    "orphan_findings", "snapshot", "bundle_mcp.validation",
    "concepts their folder's index.md does not link, and folders without an index.md",
)
BUNDLE_FINDINGS: Slot[Any] = Slot(
    "bundle_findings", "snapshot", "bundle_mcp.validation",
    "the findings of the rules over the whole bundle (collisions, the root index, log.md)",
)
SUMMARY_COUNTS: Slot[Any] = Slot(
    "summary_counts", "snapshot", "bundle_mcp.tools.bundle_summary",
    "bundle_summary's counts and full rankings per project, all but staleness "
    "(tools.bundle_summary.Counts)",
)
COMPLETION_IDS: Slot[tuple[tuple[str, str], ...]] = Slot(
    "completion_ids", "snapshot", "bundle_mcp.completion",
    "(folded ID, ID) pairs in ranking order, for argument completion",
)
RESOURCE_ENTRIES: Slot[Any] = Slot(
    "resource_entries", "snapshot", "bundle_mcp.resources",
    "the okf:// resources of the snapshot, per bundle label",
)

ANSWERS: Slot[Any] = Slot(
    "answers", "snapshot", "bundle_mcp.dispatch",
    "finished answers of the tools that keep them (ToolSpec.cache_results), by arguments",
)
READER_VIEWS: Slot[Snapshot] = Slot(
    "reader_views", "snapshot", "bundle_mcp.loader.views",
    "the snapshot as each reader scope sees it (a Snapshot of its own), by scope",
)

SLOTS: tuple[Slot[Any], ...] = (
    GRAPH,
    FIELD_EDGES,
    SECTION_WORDS,
    SECTION_WORD_TOTALS,
    SECTION_POSTINGS,
    CONTEXT_WORDS,
    CONTEXT_INDEX,
    LIST_ENTRY,
    SEMANTIC_GRAPH_NODES,
    CONCEPT_IDS_BY_CASEFOLD,
    CONCEPT_SUGGESTIONS,
    DOCUMENT_FINDINGS,
    FIELD_FINDINGS,
    INDEX_OUTLINE,
    INDEX_FINDINGS,
    LINK_FINDINGS,
    ORPHAN_FINDINGS,
    BUNDLE_FINDINGS,
    SUMMARY_COUNTS,
    COMPLETION_IDS,
    RESOURCE_ENTRIES,
    ANSWERS,
    READER_VIEWS,
)


def of_snapshot(
    snapshot: Snapshot,
    slot: Slot[T],
    build: Callable[[], T],
    variant: Hashable = None,
    check: Callable[[], None] | None = None,
) -> T:
    """The snapshot's structure ``slot`` (for ``variant``: a profile, a file, a label), built by
    ``build`` on first use. ``build`` must be a pure function of the snapshot and the variant.

    When another thread is building it (the background warm-up, say), this waits for that build;
    ``check`` (a call's ``CancelToken.check``) runs meanwhile, so a cancelled call stops waiting.
    """
    if slot.owner != "snapshot":
        raise ValueError(f"{slot.name} is kept per document")
    return snapshot.memo.get((slot, variant), build, check)


def of_document(
    doc: Document,
    slot: Slot[T],
    build: Callable[[], T],
    variant: Hashable = None,
    check: Callable[[], None] | None = None,
) -> T:
    """The document's structure ``slot`` for ``variant``, built by ``build`` on first use;
    ``build`` must be a pure function of the document and the variant; ``check`` as in
    :func:`of_snapshot`."""
    if slot.owner != "document":
        raise ValueError(f"{slot.name} is kept per snapshot")
    return doc.memo.get((slot, variant), build, check)


def built(snapshot: Snapshot) -> dict[str, int]:
    """How many values of each slot are built for this snapshot (documents' slots summed)."""
    counts = {slot.name: 0 for slot in SLOTS}
    owners: list[Any] = [snapshot.memo, *(doc.memo for doc in snapshot.documents.built())]
    for memo in owners:
        for key in memo.keys():
            if isinstance(key, tuple) and key and isinstance(key[0], Slot):
                counts[key[0].name] += 1
    return counts
