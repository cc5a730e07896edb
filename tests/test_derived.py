"""The snapshot index (``bundle_mcp.derived``) is the one catalogue of derived structures."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bundle_mcp import derived
from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader import load_bundle

SRC = Path(__file__).resolve().parent.parent / "src" / "bundle_mcp"
EXAMPLE = str(Path(__file__).resolve().parent.parent / "examples" / "coffee-roastery")

_MEMO_USE = re.compile(r"\.memo\b")


def test_only_the_index_and_the_model_touch_a_memo() -> None:
    users = sorted(
        str(path.relative_to(SRC))
        for path in SRC.rglob("*.py")
        if _MEMO_USE.search(path.read_text(encoding="utf-8"))
    )
    assert users == ["derived.py", "model.py"]


def test_every_slot_is_built_by_the_module_it_names() -> None:
    names = {slot.name for slot in derived.SLOTS}
    assert len(names) == len(derived.SLOTS)
    constants = {
        value: name for name, value in vars(derived).items() if isinstance(value, derived.Slot)
    }
    for slot in derived.SLOTS:
        module = slot.built_by.removeprefix("bundle_mcp.").replace(".", "/")
        path = SRC / f"{module}.py"
        if not path.exists():
            path = SRC / module / "__init__.py"
        assert re.search(rf"\b{constants[slot]}\b", path.read_text(encoding="utf-8")), slot.name


def test_a_slot_is_built_once_per_variant() -> None:
    snapshot, _ = load_bundle(EXAMPLE, CancelToken())
    calls: list[str] = []

    def build(tag: str) -> str:
        calls.append(tag)
        return tag

    assert derived.of_snapshot(snapshot, derived.COMPLETION_IDS, lambda: build("a")) == "a"
    assert derived.of_snapshot(snapshot, derived.COMPLETION_IDS, lambda: build("b")) == "a"
    assert derived.of_snapshot(snapshot, derived.GRAPH, lambda: build("c"), "v") == "c"
    assert calls == ["a", "c"]
    with pytest.raises(ValueError, match="per document"):
        derived.of_snapshot(snapshot, derived.LIST_ENTRY, lambda: None)
    doc = next(iter(snapshot.concepts.values()))
    with pytest.raises(ValueError, match="per snapshot"):
        derived.of_document(doc, derived.GRAPH, lambda: None)


def test_the_tools_fill_the_catalogue() -> None:
    """After the read tools ran, ``built`` reports their structures (and nothing unlisted)."""
    dispatcher = Dispatcher(ServeConfig(bundles=(EXAMPLE,)))
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
    assert set(counts) == {slot.name for slot in derived.SLOTS}
    for name in ("list_entry", "semantic_graph_nodes", "section_words", "document_findings",
                 "bundle_findings", "graph", "field_edges", "summary_counts",
                 "concept_suggestions"):
        assert counts[name] > 0, name
