"""Focused tests of the read tools' tricky parts: folding, BM25, snippets, locators, escaping."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.errors import BundleError
from bundle_mcp.loader import load_bundle
from bundle_mcp.okf.folding import fold
from bundle_mcp.okf.sections import locator
from bundle_mcp.tools import (
    bundle_summary,
    get_neighbors,
    get_semantic_graph,
    list_concepts,
    read_concept,
    search_concepts,
    search_sections,
)
from bundle_mcp.tools._common import citation_sources
from bundle_mcp.tools._section_index import query_terms, snippet, tokens
from bundle_mcp.tools.read_concept import normalise_label
from toolcall import run_tool

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = str(REPO / "examples" / "coffee-roastery")

READ_TOOLS = {
    "list_concepts": {},
    "read_concept": {"concept_id": "beans/ethiopia-guji"},
    "search_concepts": {"query": "guji", "limit": 100},
    "get_neighbors": {"concept_id": "beans/ethiopia-guji", "limit": 100},
    "search_sections": {"query": "moisture density", "limit": 100},
    "get_semantic_graph": {"as_of": "2026-06-01"},
    "bundle_summary": {"as_of": "2026-06-01", "top": 50},
}


def note(title: str = "", body: str = "", extra: str = "") -> str:
    head = "---\ntype: Note\n" + (f"title: {title}\n" if title else "") + extra + "---\n"
    return head + body


# -- fold ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "folded"),
    [
        ("Café", "café"),
        ("CAFE\u0301", "café"),  # decomposed input composes after folding
        ("Straße", "strasse"),
        ("ΣΊΣΥΦΟΣ", "σίσυφοσ"),  # final sigma folds like any sigma
        ("ǅ", "ǆ"),
    ],
)
def test_fold_is_nfc_of_casefold(text: str, folded: str) -> None:
    """Contract: literal matching compares case-folded NFC text."""
    assert fold(text) == folded


def test_a_text_that_is_its_own_fold_is_given_back_not_copied() -> None:
    """Search keeps the folds of every concept's ID, tags and description: for the ones that
    are already folded (lowercase ASCII), the fold is the string itself, not a second copy."""
    already = "".join(["jobs/", "nightly-export"])  # made at run time: not a shared constant
    assert fold(already) is already
    assert fold("Nightly Export") == "nightly export"


def test_search_concepts_matches_decomposed_and_composed_forms(tmp_bundle) -> None:
    root = tmp_bundle({"a.md": note("Caf\u00e9"), "b.md": note("x", "CAFE\u0301 sign")})
    snapshot, _ = load_bundle(root)
    result = run_tool(search_concepts, snapshot, {"query": "cafe\u0301"}, CancelToken())
    assert [(h["concept"]["id"], h["match"]) for h in result["hits"]] == [
        ("a", "title"), ("b", "body")]


# -- search_sections: terms, BM25, snippet, locator ------------------------------------------


def test_query_terms_fold_split_and_dedupe_in_query_order() -> None:
    assert query_terms("Beta, alpha; BETA gamma-alpha") == ["beta", "alpha", "gamma"]


def test_query_terms_keep_combining_marks_inside_words() -> None:
    assert tokens("naïve cafe\u0301 x_y") == ["naïve", "café", "x", "y"]


@pytest.mark.parametrize("query", ["!!!", "-- ** --", ">", "\u00b6"])
def test_query_without_words_has_no_terms(query: str) -> None:
    assert query_terms(query) == []


def test_a_mark_only_word_is_a_term() -> None:
    assert query_terms("\u0301") == ["\u0301"]


def test_more_than_32_terms_is_a_resource_limit() -> None:
    with pytest.raises(BundleError) as info:
        query_terms(" ".join(f"t{n}" for n in range(33)))
    assert info.value.code == "resource_limit"
    assert query_terms(" ".join(f"t{n}" for n in range(32)))[-1] == "t31"


def test_bm25_score_of_a_single_section_is_its_idf(tmp_bundle) -> None:
    """One section of average length, tf 1: score = idf = ln(1 + 0.5/1.5)."""
    root = tmp_bundle({"only.md": "---\ntype: Note\n---\nalpha beta\n"})
    snapshot, _ = load_bundle(root)
    result = run_tool(search_sections, snapshot, {"query": "alpha"}, CancelToken())
    assert result["hits"][0]["score"] == round(math.log(1 + 0.5 / 1.5), 6)


def test_bm25_weights_heading_over_body_and_short_over_long(tmp_bundle) -> None:
    root = tmp_bundle(
        {
            "heading.md": note("", "# Espresso\n\nshort text here\n"),
            "body.md": note("", "# Other\n\nsome espresso text\n"),
            "long.md": note("", "# Other\n\nespresso " + "filler " * 40 + "\n"),
            "none.md": note("", "# Other\n\nnothing relevant\n"),
        }
    )
    snapshot, _ = load_bundle(root)
    result = run_tool(search_sections, snapshot, {"query": "espresso"}, CancelToken())
    assert [h["concept_id"] for h in result["hits"]] == ["heading", "body", "long"]
    scores = [h["score"] for h in result["hits"]]
    assert scores == sorted(scores, reverse=True) and len(set(scores)) == 3


def test_bm25_requires_every_term_and_counts_the_title(tmp_bundle) -> None:
    root = tmp_bundle(
        {
            "titled.md": note("Grinder manual", "# Burrs\n\nreplace the burrs yearly\n"),
            "plain.md": note("Other", "# Burrs\n\nreplace the burrs yearly\n"),
        }
    )
    snapshot, _ = load_bundle(root)
    result = run_tool(search_sections, snapshot, {"query": "grinder burrs"}, CancelToken())
    assert [(h["concept_id"], h["heading"]) for h in result["hits"]] == [("titled", "Burrs")]


def test_equal_scores_sort_by_concept_id_then_line(tmp_bundle) -> None:
    body = "# One\n\nkettle\n\n# Two\n\nkettle\n"
    root = tmp_bundle({"b.md": note("", body), "a.md": note("", body)})
    snapshot, _ = load_bundle(root)
    hits = run_tool(search_sections, snapshot, {"query": "kettle"}, CancelToken())["hits"]
    assert [(h["concept_id"], h["line_start"]) for h in hits] == [
        ("a", 4), ("a", 8), ("b", 4), ("b", 8)]


def test_snippet_starts_80_characters_before_the_first_match() -> None:
    raw = "word " * 100 + "needle " + "tail " * 200
    start = raw.index("needle") - 80
    assert snippet(raw, {"needle"}) == raw[start : start + 512]


def test_snippet_offsets_are_in_the_original_text_when_folding_changes_length() -> None:
    raw = "ß" * 100 + " Target rest"
    start = raw.index("Target") - 80
    assert snippet(raw, {"target"}) == raw[start : start + 512]


def test_snippet_without_a_body_match_is_the_section_start() -> None:
    raw = "x" * 600
    assert snippet(raw, {"title"}) == raw[:512]


@pytest.mark.parametrize(
    ("path", "encoded"),
    [
        ("plain/file.md", "plain/file.md"),
        ("my notes/a b.md", "my%20notes/a%20b.md"),
        ("hash#name.md", "hash%23name.md"),
        ("café/Straße.md", "caf%C3%A9/Stra%C3%9Fe.md"),
        ("odd?%.md", "odd%3F%25.md"),
    ],
)
def test_locator_percent_encodes_everything_but_slashes(path: str, encoded: str) -> None:
    assert locator(path, 3, 9) == f"{encoded}#L3-L9"


# -- get_neighbors: reference escaping ------------------------------------------------------


def test_relation_edges_keep_escaped_references_and_cards_hold_plain_ids(tmp_bundle) -> None:
    root = tmp_bundle(
        {
            "src#1.md": note("Source", "", "relations:\n  uses:\n    - target: 'x\\#y#frag'\n"),
            "x#y.md": note("Target"),
            "nested.md": note(
                "Nested", "", "columns:\n  - anchor: col-a\n    relations:\n      feeds:\n"
                "        - target: 'x\\#y'\n"
            ),
        }
    )
    snapshot, _ = load_bundle(root)
    params = {"concept_id": "x#y", "direction": "in"}
    result = run_tool(get_neighbors, snapshot, params, CancelToken())
    edges = [(e["from"], e["to"], e["relation_type"], e["source"]["id"], e["target"]["id"])
             for e in result["edges"]]
    assert edges == [
        ("nested#col-a", "x\\#y", "feeds", "nested", "x#y"),
        ("src\\#1", "x\\#y#frag", "uses", "src#1", "x#y"),
    ]


def test_self_link_is_one_edge_in_every_direction(tmp_bundle) -> None:
    root = tmp_bundle({"loop.md": note("Loop", "[me](loop.md) and [again](./loop.md#x)\n")})
    snapshot, _ = load_bundle(root)
    for direction in ("in", "out", "both"):
        result = run_tool(get_neighbors,
            snapshot, {"concept_id": "loop", "direction": direction}, CancelToken())
        assert [(e["from"], e["to"]) for e in result["edges"]] == [("loop", "loop")]


def test_sources_are_outbound_and_sorted_with_empty_strings_for_missing(tmp_bundle) -> None:
    extra = (
        "sources:\n  - resource: https://z.example\n  - id: b\n    resource: https://b.example\n"
        "  - id: a\n    resource: https://a.example\n    title: A\n  - id: no-resource\n"
    )
    root = tmp_bundle({"c.md": note("C", "", extra)})
    snapshot, _ = load_bundle(root)
    out = run_tool(get_neighbors, snapshot, {"concept_id": "c"}, CancelToken())
    assert out["sources"] == [
        {"id": "", "resource": "https://z.example", "title": ""},
        {"id": "a", "resource": "https://a.example", "title": "A"},
        {"id": "b", "resource": "https://b.example", "title": ""},
    ]
    params = {"concept_id": "c", "direction": "in"}
    inbound = run_tool(get_neighbors, snapshot, params, CancelToken())
    assert inbound["sources"] == []


def test_non_canonical_and_missing_ids(tmp_bundle) -> None:
    snapshot, _ = load_bundle(tmp_bundle({"a.md": note("A")}))
    for concept_id, code in (("../a", "invalid_request"), ("a.md", "invalid_request"),
                             ("b", "concept_not_found")):
        with pytest.raises(BundleError) as info:
            run_tool(read_concept, snapshot, {"concept_id": concept_id}, CancelToken())
        assert info.value.code == code
    with pytest.raises(BundleError) as info:
        run_tool(get_neighbors, snapshot, {"concept_id": "a", "kinds": ["relation", "relation"]},
                          CancelToken())
    assert info.value.code == "invalid_request"


# -- read_concept ---------------------------------------------------------------------------


def test_footnote_labels_normalise_like_commonmark_reference_labels() -> None:
    assert normalise_label("  Price   Sheet ") == "price sheet"
    assert normalise_label("STRASSE") == normalise_label("straße")


def test_citations_section_items(tmp_bundle) -> None:
    body = (
        "# Topic\n\ntext\n\n# Citations\n\n- [Doc](https://d.example \"t\")\n"
        "  continuation line\n* [^k]: Keyed entry\n3) plain text source\n\n```\n- fenced\n```\n"
    )
    snapshot, _ = load_bundle(tmp_bundle({"t.md": note("T", body)}))
    assert citation_sources(snapshot.concepts["t"]) == [
        {"id": "", "resource": "https://d.example", "title": "Doc"},
        {"id": "k", "resource": "Keyed entry", "title": ""},
        {"id": "", "resource": "plain text source", "title": ""},
    ]


def test_read_concept_text_block_is_the_raw_file() -> None:
    outcome = Dispatcher(ServeConfig(bundles=(EXAMPLE,))).call(
        "read_concept", {"concept_id": "beans/ethiopia-guji"})
    assert not outcome.is_error
    raw = (Path(EXAMPLE) / "beans" / "ethiopia-guji.md").read_text(encoding="utf-8")
    assert outcome.text == raw


def test_unknown_keys_are_preserved_as_json(tmp_bundle) -> None:
    extra = "owner: {team: data, size: 3}\nflags: [true, null, 1.5]\n"
    snapshot, _ = load_bundle(tmp_bundle({"u.md": note("U", "", extra)}))
    result = run_tool(read_concept, snapshot, {"concept_id": "u"}, CancelToken())
    assert result["projection"]["unknown"] == {
        "owner": {"team": "data", "size": 3}, "flags": [True, None, 1.5]}


def test_a_projected_list_over_the_contract_size_fails_instead_of_being_cut(tmp_bundle) -> None:
    tags = "tags: [" + ", ".join(f"t{n}" for n in range(10_001)) + "]\n"
    snapshot, _ = load_bundle(tmp_bundle({"many.md": note("Many", "", tags)}))
    with pytest.raises(BundleError) as info:
        run_tool(read_concept, snapshot, {"concept_id": "many"}, CancelToken())
    assert info.value.code == "resource_limit"


# -- every tool -----------------------------------------------------------------------------


@pytest.mark.parametrize("tool", sorted(READ_TOOLS))
def test_output_is_byte_identical_across_fresh_dispatchers(tool: str) -> None:
    """Contract (determinism): same bundle and arguments give the same bytes."""
    first = Dispatcher(ServeConfig(bundles=(EXAMPLE,))).call(tool, READ_TOOLS[tool])
    second = Dispatcher(ServeConfig(bundles=(EXAMPLE,))).call(tool, READ_TOOLS[tool])
    assert not first.is_error, first.structured
    assert first.text == second.text


@pytest.mark.parametrize(
    "module",
    [list_concepts, read_concept, search_concepts, get_neighbors, search_sections,
     get_semantic_graph, bundle_summary],
)
def test_a_cancelled_call_raises_instead_of_returning_partial_data(module) -> None:
    snapshot, _ = load_bundle(EXAMPLE)
    token = CancelToken()
    token.cancel()
    with pytest.raises(BundleError) as info:
        run_tool(module, snapshot, dict(READ_TOOLS[module.NAME]), token)
    assert info.value.code == "operation_cancelled"
    assert info.value.retryable


def test_cancelled_dispatch_is_a_retryable_envelope() -> None:
    token = CancelToken()
    token.cancel()
    outcome = Dispatcher(ServeConfig(bundles=(EXAMPLE,))).call(
        "search_concepts", {"query": "guji"}, token)
    assert outcome.is_error
    assert outcome.structured["code"] == "operation_cancelled"
    assert outcome.structured["retryable"] is True


def test_search_guidance_is_advertised() -> None:
    """Seed 003's agent guidance lives in the tool descriptions."""
    text = search_concepts.DESCRIPTION
    for phrase in ("not an AND", "limit", "up to 100", "read_concept", "list_concepts",
                   "omitted", "no cursor"):
        assert phrase in text
    assert "get_semantic_graph" in get_neighbors.DESCRIPTION
    assert "no cursor" in get_neighbors.DESCRIPTION
    assert "not a page" in list_concepts.DESCRIPTION
