"""A concept's frontmatter read on a cold start without building its document: the check loaded
it already (``Deferred.fields``), so a field of every concept (a walk's path-valued field edges)
or a card costs no build, and reads exactly what the built document holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.snapshots import SnapshotCache

ROOT = Path(__file__).resolve().parent.parent
BUNDLES = [ROOT / "examples" / "coffee-roastery",
           *sorted(p for p in (ROOT / "testdata" / "bundles").iterdir() if p.is_dir())]


@pytest.mark.parametrize("bundle", BUNDLES, ids=lambda p: p.name)
def test_a_cold_concepts_fields_are_its_built_documents(bundle: Path) -> None:
    cold, _ = load_bundle(str(bundle))
    ids = list(cold.concepts)
    built = {doc.path for doc in cold.documents.built()}  # the load's own (attachments)
    read = {concept_id: cold.fields_of(concept_id) for concept_id in ids}
    assert {doc.path for doc in cold.documents.built()} == built, "a field read built one"
    for concept_id, fields in read.items():
        fm = cold.concepts[concept_id].fm
        assert list(fields) == list(fm), concept_id
        assert all(fields[key] == fm[key] and type(fields[key]) is type(fm[key])
                   for key in fm), concept_id


def test_a_cold_walk_reads_path_fields_without_building_every_document(
        tmp_path: Path) -> None:
    """Thirty concepts, two computations naming another by their path-valued fields: a cold
    expand_neighbors over field edges answers as a server that built everything, and builds
    the documents it renders, not the bundle's."""
    root = tmp_path / "b"
    root.mkdir()
    (root / "index.md").write_text('---\nokf_version: "0.2"\n---\n# B\n', encoding="utf-8")
    for n in range(30):
        (root / f"c{n:02d}.md").write_text(f"---\ntype: Note\n---\n# C {n}\n", encoding="utf-8")
    (root / "c00.md").write_text(
        "---\ntype: Note\nresource: c01.md\nsources:\n  - resource: /c02.md\n---\n# C 0\n",
        encoding="utf-8")
    (root / "calc.md").write_text(
        "---\ntype: Attested Computation\ncomputation: c00.md\nexecutor:\n  resource: c03.md\n"
        "---\n# Calc\n", encoding="utf-8")
    arguments = {"entity_ids": ["c00"], "depth": 2}
    cache = SnapshotCache(parse_cache=ParseCache(None), watch=False)
    cold = Dispatcher(ServeConfig(bundles=(str(root),)), cache=cache)
    answer = cold.call("expand_neighbors", arguments)
    assert not answer.is_error, answer.text
    reached = {n["id"]: n["relationship"] for n in answer.structured["neighbors"]}
    assert {"c01", "c02", "calc"} <= set(reached), reached  # by field edges alone
    warm = Dispatcher(ServeConfig(bundles=(str(root),)))
    warm.call("list_concepts", {})  # every document built
    assert warm.call("expand_neighbors", arguments).structured == answer.structured
    built = {doc.path for doc in cache.get(str(root), CancelToken()).documents.built()}
    assert len(built) < 10, built
