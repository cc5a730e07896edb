"""search_concepts scans its fields as columns (``SearchFields.priorities``); the answers must be
the one-concept rule's (``match_priority``) for every concept and every needle."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_mcp.cancel import CancelToken
from bundle_mcp.loader import load_bundle
from bundle_mcp.model import Snapshot
from bundle_mcp.okf.folding import fold
from bundle_mcp.tools import search_concepts
from bundle_mcp.tools.search_concepts import _fields, match_priority

CONCEPTS = (
    ("a/alpha", "title: Alpha Roast\ndescription: A light roast\ntags: [coffee, light]\n",
     "Beans from Ethiopia."),
    ("a/beta", "title: Beta\ntags: [roast]\n", "Nothing about alpha here, only beta."),
    ("b/gamma", "description: Straße und Café\n", "The ǅungla ﬁle: Kelvin sign K."),
    ("b/delta", "title: Δέλτα\ntags: []\n", "Greek σίγμα and final ς."),
    ("c/empty", "type: Note\n", ""),
)
WORDS = sorted({w for _, fm, body in CONCEPTS for w in (fm + " " + body).split()})


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory: pytest.TempPathFactory) -> Snapshot:
    root: Path = tmp_path_factory.mktemp("bundle")
    (root / "index.md").write_text('---\nokf_version: "0.2"\n---\n# B\n', encoding="utf-8")
    for concept_id, frontmatter, body in CONCEPTS:
        path = root / f"{concept_id}.md"
        path.parent.mkdir(parents=True, exist_ok=True)
        fm = frontmatter if "type:" in frontmatter else "type: Note\n" + frontmatter
        path.write_text(f"---\n{fm}---\n# Heading\n\n{body}\n", encoding="utf-8")
    loaded, _ = load_bundle(str(root))
    return loaded


def _expected(snapshot: Snapshot, needle: str) -> list[int]:
    return [match_priority(needle, cid, doc) for cid, doc in snapshot.concepts.items()]


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_the_columns_give_the_rules_priorities(snapshot: Snapshot, data: st.DataObject) -> None:
    word = data.draw(st.sampled_from(WORDS))
    start = data.draw(st.integers(0, max(0, len(word) - 1)))
    piece = word[start:start + data.draw(st.integers(1, 6))]
    query = data.draw(st.one_of(st.just(piece), st.just(word), st.text(min_size=1, max_size=4)))
    needle = fold(query)
    columns = _fields(snapshot, CancelToken())
    assert columns.concept_ids == tuple(snapshot.concepts)
    assert columns.priorities(needle, CancelToken()) == _expected(snapshot, needle)


@pytest.mark.parametrize(
    "query", ["roast", "alpha", "light", "STRASSE", "k", "σ", "ς", " ", "coffee"])
def test_known_needles(snapshot: Snapshot, query: str) -> None:
    needle = fold(query)
    assert _fields(snapshot, CancelToken()).priorities(needle, CancelToken()) == \
        _expected(snapshot, needle)


@settings(max_examples=300, deadline=None)
@given(strings=st.lists(st.text(alphabet="ab\x00 ", max_size=5), max_size=8),
       needle=st.text(alphabet="ab\x00 ", max_size=3), few=st.integers(0, 3))
def test_a_joined_column_finds_what_a_scan_finds(
    strings: list[str], needle: str, few: int
) -> None:
    """Counted joined, mapped back hit by hit (up to ``few`` hits) or scanned: the same strings,
    whatever the strings hold (the joining ``\\x00`` too) and for the empty needle."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(search_concepts, "_FEW_HITS", few)
        column = search_concepts.JoinedColumn.of(tuple(strings))
        assert list(column.holding(needle)) == [n for n, s in enumerate(strings) if needle in s]
