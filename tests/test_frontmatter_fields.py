"""``Document.fields``: a frontmatter the parse cache gave, read key by key without freezing the
whole of it (a card, a name, a type, the tags of each of hundreds of documents), equal to
``Document.fm`` key by key."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from bundle_mcp.model import Unfrozen
from bundle_mcp.okf.names import concept_name
from bundle_mcp.okf.properties import card
from bundle_mcp.okf.temporal import reference_from
from test_stored_edges import process

if TYPE_CHECKING:  # fixtures' types only; pytest provides the objects
    from conftest import BundleFactory

FILES = {
    "index.md": '---\nokf_version: "0.2"\n---\n# Home\n',
    "a.md": "---\ntitle: A\ntags: [x, y, x]\nstatus: draft\nverified:\n  - by: human:ann\n"
            "    at: 2025-01-01\nsources:\n  - id: s1\n    resource: /b.md\n---\n# A\n",
    "b.md": "---\ntitle: '  '\nstatus: null\nverified: {by: 'tool:x'}\ndescription: 7\n"
            "stale_after: 2020-01-01\n---\n# Heading B\n",
    "c.md": "---\nstatus: [odd]\ntags: not-a-list\nnested: {a: {b: [1, {c: 2}]}}\n---\n"
            "No heading.\n",
    "d.md": "# No frontmatter\n",
}


def test_fields_equal_fm_and_freeze_nothing(tmp_bundle: BundleFactory, tmp_path: Path) -> None:
    bundle, cache = tmp_bundle(FILES), tmp_path / "cache"
    process(bundle, cache, warm=True)
    _, _, restarted = process(bundle, cache)
    _, _, cold = process(bundle, None)
    ref = reference_from({"as_of": "2024-06-01"})
    for concept_id in ("a", "b", "c", "d"):
        doc = restarted.concepts[concept_id]
        held = doc.frontmatter_value
        fields = doc.fields
        named = concept_name(doc)
        carded = card(doc, ref)
        if isinstance(held, Unfrozen):
            assert not held.is_frozen()  # a name and a card froze nothing
        assert list(fields) == list(doc.fm) and len(fields) == len(doc.fm)
        for key in [*doc.fm, "absent"]:
            assert (key in fields) == (key in doc.fm)
            assert fields.get(key) == doc.fm.get(key)
        assert named == concept_name(cold.concepts[concept_id])
        assert carded == card(cold.concepts[concept_id], ref)
        # Once frozen, fields is the frozen mapping itself.
        assert doc.fields is doc.fm or not doc.fm
