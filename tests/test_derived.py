"""The snapshot index (``bundle_mcp.derived``): the slot mechanism, and the register of the slots
its owners declare (each in its own module, issue 27)."""

from __future__ import annotations

import importlib
import re
from pathlib import Path
from types import ModuleType

import pytest

from bundle_mcp import derived
from bundle_mcp.cancel import CancelToken
from bundle_mcp.completion import COMPLETION_IDS
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.model import Snapshot
from bundle_mcp.okf.graph import GRAPH
from bundle_mcp.snapshots import SnapshotCache
from bundle_mcp.tools.list_concepts import LIST_ENTRY

SRC = Path(__file__).resolve().parent.parent / "src" / "bundle_mcp"
EXAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "coffee-roastery")

_MEMO_USE = re.compile(r"\.memo\b")


def test_only_the_index_and_the_model_touch_a_memo() -> None:
    users = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if _MEMO_USE.search(path.read_text(encoding="utf-8"))
    )
    # The model defines the memo; since the frontmatter holder keeps its frozen mapping itself
    # (model.Unfrozen) it stores nothing in one, and may again.
    assert "derived.py" in users and set(users) <= {"derived.py", "model.py"}


def _package_modules() -> list[str]:
    names = []
    for path in sorted(SRC.rglob("*.py")):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        names.append(".".join(parts))
    return names


def test_every_slot_is_declared_by_its_owner_and_registered_once() -> None:
    """Each module that defines a slot lists exactly its own in ``SLOTS`` and is one of
    ``derived.OWNERS``; no slot is registered twice or under a name another slot has."""
    registered = derived.slots()
    assert len({slot.name for slot in registered}) == len(registered)
    assert len(set(derived.OWNERS)) == len(derived.OWNERS)
    owners = set()
    for name in _package_modules():
        module = importlib.import_module(name)
        defined = {id(v) for k, v in vars(module).items()
                   if isinstance(v, derived.Slot) and _defined_in(module, k)}
        if defined:
            owners.add(name)
            assert {id(s) for s in module.SLOTS} == defined, name
    assert owners == set(derived.OWNERS)
    assert {id(s) for s in registered} == {
        id(s) for name in derived.OWNERS for s in importlib.import_module(name).SLOTS}


def _defined_in(module: ModuleType, constant: str) -> bool:
    """Whether ``constant`` is assigned in the module's own source (not imported into it)."""
    source = Path(module.__file__ or "").read_text(encoding="utf-8")
    return re.search(rf"^{constant}: Slot\[", source, re.MULTILINE) is not None


def test_derived_names_no_slot_of_its_own() -> None:
    """The mechanism holds no catalogue of structures: each owner declares its slots."""
    assert not [k for k, v in vars(derived).items() if isinstance(v, derived.Slot)]


def test_a_slot_is_built_once_per_variant() -> None:
    snapshot, _ = load_bundle(EXAMPLE, CancelToken())
    calls: list[str] = []

    def build(tag: str) -> str:
        calls.append(tag)
        return tag

    assert derived.of_snapshot(snapshot, COMPLETION_IDS, lambda: build("a")) == "a"
    assert derived.of_snapshot(snapshot, COMPLETION_IDS, lambda: build("b")) == "a"
    assert derived.of_snapshot(snapshot, GRAPH, lambda: build("c"), "v") == "c"
    assert calls == ["a", "c"]
    with pytest.raises(ValueError, match="per document"):
        derived.of_snapshot(snapshot, LIST_ENTRY, lambda: None)
    doc = next(iter(snapshot.concepts.values()))
    with pytest.raises(ValueError, match="per snapshot"):
        derived.of_document(doc, GRAPH, lambda: None)


def test_the_tools_fill_the_catalogue() -> None:
    """After the read tools ran, ``built`` reports their structures (and nothing unlisted).
    Without a parse cache: one that an earlier test filled gives whole-bundle values back."""
    dispatcher = Dispatcher(ServeConfig(bundles=(EXAMPLE,)),
                            cache=SnapshotCache(parse_cache=ParseCache(None)))
    for name, args in [
        ("list_concepts", {}),
        ("get_semantic_graph", {}),
        ("search_sections", {"query": "espresso"}),
        ("validate_bundle", {"check_links": True, "check_orphans": True}),
        ("expand_neighbors", {"entity_ids": ["beans/kenya-nyeri"]}),
        ("bundle_summary", {}),
    ]:
        outcome = dispatcher.call(name, args)
        assert not outcome.is_error, (name, outcome.structured)
    # A miss builds the suggestion index.
    outcome = dispatcher.call("read_concept", {"concept_id": "beans/kenya-nyery"})
    assert outcome.structured["code"] == "concept_not_found"
    snapshot = dispatcher.served_snapshot(EXAMPLE, CancelToken())
    counts = derived.built(snapshot)
    assert set(counts) == {slot.name for slot in derived.slots()}
    for name in ("list_entry", "semantic_graph_nodes", "section_words", "document_findings",
                 "bundle_findings", "graph", "field_edges", "summary_counts",
                 "concept_suggestions"):
        assert counts[name] > 0, name


def test_a_released_snapshot_keeps_only_what_a_successor_reads() -> None:
    """Issue 29: the warm-up empties a replaced snapshot's memo, so that its structures and
    the successor's are not held at once. The carried slots (whose builders update the
    predecessor's value) stay until ``carried=True``; the documents, shared with the successor,
    keep theirs; a value asked for again is built again, the same."""
    from bundle_mcp.okf import suggest
    from bundle_mcp.okf.graph import graph_of

    snapshot, _ = load_bundle(EXAMPLE, CancelToken())
    graph_of(snapshot)
    suggest.index_of(snapshot)
    edges = snapshot.edges_by_concept
    documents = {doc.path: doc.memo.keys() for doc in snapshot.documents.built()}
    assert "graph" in _slot_names(snapshot) and documents

    derived.release(snapshot, carried=False)
    assert _slot_names(snapshot) <= {"concept_suggestions", "body_words"}
    assert "concept_suggestions" in _slot_names(snapshot)
    assert "edges" not in vars(snapshot) and "edges_by_concept" not in vars(snapshot)
    assert {doc.path: doc.memo.keys() for doc in snapshot.documents.built()} == documents
    derived.release(snapshot, carried=True)
    assert _slot_names(snapshot) == set()
    assert derived.kept(snapshot, suggest.CONCEPT_SUGGESTIONS) is None
    assert snapshot.edges_by_concept == edges


def test_only_a_carried_slot_is_read_from_a_predecessor() -> None:
    """``kept`` is how a builder reads its predecessor's value; a slot that is not carried
    would already be gone from a replaced snapshot, so asking for it is a mistake."""
    snapshot, _ = load_bundle(EXAMPLE, CancelToken())
    with pytest.raises(ValueError, match="not carried"):
        derived.kept(snapshot, GRAPH)
    assert {slot.name for slot in derived.slots() if slot.carried} == {
        "concept_suggestions", "body_words", "link_findings"}


def _slot_names(snapshot: Snapshot) -> set[str]:
    """The whole-snapshot structures held by this very snapshot (not its documents')."""
    return {key[0].name for key in snapshot.memo.keys()
            if isinstance(key, tuple) and key and isinstance(key[0], derived.Slot)}
