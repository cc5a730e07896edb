"""context: the pack is ranked, budgeted, flagged and deterministic; hybrid fuses embeddings."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.semantic import EmbedderSource, SemanticIndex
from bundle_mcp.semantic.vectors import Vector, unit
from bundle_mcp.tools._extraction import token_cost
from bundle_mcp.tools.context import MAX_ITEMS, STOPWORDS, content_terms

REPO = Path(__file__).resolve().parent.parent
CONTEXT_BUNDLE = str(REPO / "testdata" / "bundles" / "context")
EXAMPLE = str(REPO / "examples" / "coffee-roastery")


def write(root: Path, files: dict[str, str]) -> str:
    for name, text in files.items():
        target = root / name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return str(root)


def note(title: str, body: str, **fields: str) -> str:
    extra = "".join(f"{key}: {value}\n" for key, value in fields.items())
    return f"---\ntype: Note\ntitle: {title}\n{extra}---\n# {title}\n\n{body}\n"


def call(root: str, arguments: dict[str, Any], **config: Any) -> dict[str, Any]:
    outcome = Dispatcher(ServeConfig(bundles=(root,)), **config).call("context", arguments)
    assert not outcome.is_error, outcome.structured
    return outcome.structured


def test_question_words_are_dropped_unless_nothing_else_is_left() -> None:
    assert content_terms(["what", "is", "extraction", "yield"]) == ["extraction", "yield"]
    assert content_terms(["what", "is", "it"]) == ["what", "is", "it"]
    assert "espresso" not in STOPWORDS


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    budget=st.integers(min_value=-10, max_value=12_000),
    words=st.lists(st.sampled_from(["roast", "espresso", "green", "guji", "what", "price",
                                    "cupping", "the", "development", "zebra"]),
                   min_size=1, max_size=5),
)
def test_the_pack_never_exceeds_its_budget_and_is_deterministic(
    budget: int, words: list[str]
) -> None:
    arguments = {"question": " ".join(words), "max_tokens": budget}
    first = call(EXAMPLE, arguments)
    assert first == call(EXAMPLE, arguments)  # same bundle and arguments, same answer
    assert first["max_tokens"] == max(256, min(budget, 8000))
    items = first["items"]
    assert first["tokens"] == sum(token_cost(item) for item in items) <= first["max_tokens"]
    assert len(items) <= MAX_ITEMS
    assert [item["rank"] for item in items] == list(range(1, len(items) + 1))
    assert [item["score"] for item in items] == sorted((i["score"] for i in items), reverse=True)
    pointed = [(item["parent_id"], item["line_start"]) for item in items]
    assert len(pointed) == len(set(pointed))  # nothing twice
    assert first["truncated"] == (first["omitted"] > 0 or any(i["clipped"] for i in items))
    assert (first["suggested_next"] is None) == (not first["truncated"])


def test_stale_and_unverified_rank_lower_and_are_flagged_never_hidden(tmp_path: Path) -> None:
    body = "The proofing temperature for sourdough is 26 degrees."
    verified = "\nverified:\n  - by: human:ana\n    at: 2026-01-01"
    root = write(tmp_path, {
        "a-stale.md": note("A", body, stale_after="2026-06-01" + verified),
        "b-fresh.md": note("B", body, stale_after="2027-06-01" + verified),
        "c-unverified.md": note("C", body, stale_after="2027-06-01"),
    })
    undated = call(root, {"question": "sourdough proofing temperature"})
    assert [i["parent_id"] for i in undated["items"]] == ["a-stale", "b-fresh", "c-unverified"]
    assert [i["flags"] for i in undated["items"]] == [[], [], ["unverified"]]
    dated = call(root, {"question": "sourdough proofing temperature", "as_of": "2026-12-01"})
    order = [(i["parent_id"], i["flags"]) for i in dated["items"]]
    assert order == [("b-fresh", []), ("c-unverified", ["unverified"]), ("a-stale", ["stale"])]


def test_a_long_section_is_shortened_to_the_room_left(tmp_path: Path) -> None:
    long_body = " ".join(f"word{n} sourdough" for n in range(3000))
    root = write(tmp_path, {"long.md": note("Long", long_body)})
    answer = call(root, {"question": "sourdough", "max_tokens": 400})
    (item,) = [i for i in answer["items"] if i["parent_id"] == "long" and i["kind"] == "section"]
    assert item["clipped"] and item["text"].endswith("…")
    assert answer["truncated"] and answer["tokens"] <= 400


def test_at_the_largest_budget_it_points_to_the_best_item_left_out(tmp_path: Path) -> None:
    files = {f"n{n:03d}.md": note(f"N{n:03d}", "sourdough " * 200 + f"loaf {n}")
             for n in range(60)}
    answer = call(write(tmp_path, files), {"question": "sourdough", "max_tokens": 8000})
    assert answer["omitted"] > 0
    packed = {i["parent_id"] for i in answer["items"]}
    nxt = answer["suggested_next"]
    assert nxt["tool"] == "read_concept" and nxt["arguments"]["concept_id"] not in packed


# -- hybrid -----------------------------------------------------------------------------------

DIM = 64


class HashedWords:
    """Deterministic bag-of-words vectors: texts sharing words are close."""

    def encode(self, texts: Sequence[str]) -> list[Vector | None]:
        out: list[Vector | None] = []
        for text in texts:
            values = [0.0] * DIM
            for word in text.lower().split():
                digest = hashlib.sha256(word.strip(".,:;!?()[]#").encode()).digest()
                values[digest[0] % DIM] += 1.0
            out.append(unit(values))
        return out


def fake_index() -> SemanticIndex:
    made = HashedWords()
    source = EmbedderSource(model_key="fake-hashed-words", dimension=DIM, max_chars=2000,
                            available=lambda: True, load=lambda: made)
    return SemanticIndex(source, None, wait_seconds=30.0)


def test_hybrid_fuses_embedding_ranks_and_adds_concepts_found_by_meaning(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "bread.md": note("Bread", "Sourdough needs a starter and a long proof."),
        "starter.md": note("Starter culture", "flour water wild yeast culture feeding"),
        "other.md": note("Other", "Unrelated text about bicycles."),
    })
    index = fake_index()
    try:
        answer = call(root, {"question": "starter culture feeding", "hybrid": True},
                      semantic=index)
        plain = call(root, {"question": "starter culture feeding"}, semantic=index)
    finally:
        index.close()
    assert answer["ranking"] == "hybrid" and answer["ranking_note"] is None
    assert plain["ranking"] == "bm25"
    assert answer["items"][0]["parent_id"] == "starter"
    whys = {i["parent_id"]: i["why"] for i in answer["items"]}
    assert whys["starter"] == "match"
    # Among the best embedding ranks without a question word: a whole-concept item.
    assert whys.get("other") == "semantic"
    assert "other" not in {i["parent_id"] for i in plain["items"]}


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    types=st.lists(st.sampled_from(["roast profile", "bean", "equipment", "glossary term",
                                    "procedure"]), max_size=2),
    min_trust=st.sampled_from([None, "machine-confirmed", "human-reviewed"]),
    words=st.lists(st.sampled_from(["roast", "espresso", "green", "guji", "price"]),
                   min_size=1, max_size=3),
)
def test_every_item_passes_the_filter_linked_ones_included(
    types: list[str], min_trust: str | None, words: list[str]
) -> None:
    arguments: dict[str, Any] = {"question": " ".join(words), "types": types,
                                 "max_tokens": 8000}
    if min_trust is not None:
        arguments["min_trust"] = min_trust
    answer = call(EXAMPLE, arguments)
    tiers = ["unverified", "machine-confirmed", "human-reviewed"]
    unfiltered = call(EXAMPLE, {"question": " ".join(words), "max_tokens": 8000})
    for item in answer["items"]:
        assert not types or item["type"].casefold() in types
        assert min_trust is None or tiers.index(item["trust"]) >= tiers.index(min_trust)
    # Filtering never invents a match: every matched section was a candidate without it.
    everything = {(i["parent_id"], i["line_start"]) for i in unfiltered["items"]}
    if not unfiltered["truncated"]:
        matched = {(i["parent_id"], i["line_start"])
                   for i in answer["items"] if i["why"] == "match"}
        assert matched <= everything
    assert answer["filters"]["types"] == sorted(set(types))


def test_search_sections_hybrid_reorders_the_same_hits(tmp_path: Path) -> None:
    root = write(tmp_path, {
        "a-bread.md": note("Bread", "Sourdough starter, then bake the starter loaf."),
        "b-culture.md": note("Starter culture", "starter flour water wild yeast culture feeding"),
    })
    index = fake_index()
    try:
        dispatcher = Dispatcher(ServeConfig(bundles=(root,)), semantic=index)
        plain = dispatcher.call("search_sections", {"query": "starter"}).structured
        hybrid = dispatcher.call(
            "search_sections", {"query": "starter", "hybrid": True}).structured
        question = dispatcher.call(
            "search_sections", {"query": "culture feeding starter", "hybrid": True}).structured
    finally:
        index.close()
    assert "ranking" not in plain  # an unasked-for key never appears
    assert hybrid["ranking"] == "hybrid" and hybrid["ranking_note"] is None
    key = [(h["concept_id"], h["line_start"], h["score"]) for h in plain["hits"]]
    assert sorted(key) == sorted((h["concept_id"], h["line_start"], h["score"])
                                 for h in hybrid["hits"])  # same hits, same BM25 scores
    assert hybrid["total"] == plain["total"]
    assert question["hits"][0]["concept_id"] == "b-culture"


def test_search_sections_hybrid_without_an_index_says_so() -> None:
    answer = call_tool(CONTEXT_BUNDLE, "search_sections", {"query": "espresso", "hybrid": True})
    assert answer["ranking"] == "bm25"
    assert "not enabled" in answer["ranking_note"]
    plain = call_tool(CONTEXT_BUNDLE, "search_sections", {"query": "espresso"})
    assert answer["hits"] == plain["hits"]


def call_tool(root: str, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    outcome = Dispatcher(ServeConfig(bundles=(root,))).call(tool, arguments)
    assert not outcome.is_error, outcome.structured
    return outcome.structured
