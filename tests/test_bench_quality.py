"""bench/quality.py: query derivation, metrics, the rg ranking, and one run on a tiny bundle.

The bench's figures are never asserted (they measure the tools); what is checked here is that
the harness derives the queries the README describes, scores hand-made rankings correctly, and
produces its tables when the corpora, the embedding index and rg are all absent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from bench_module import bench_module

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def quality() -> Iterator[ModuleType]:
    yield from bench_module("quality")


def outline(q: ModuleType, concept_id: str, title: str, description: str,
            *headings: str) -> object:
    sections = tuple(
        q.SectionOutline(heading, 10 * n + 1, 10 * n + 9) for n, heading in enumerate(headings)
    )
    return q.ConceptOutline(concept_id, f"{concept_id}.md", title, description, sections)


# -- query derivation ------------------------------------------------------------------------


def test_heading_words_minus_title_words(quality: ModuleType) -> None:
    assert quality.heading_query_words("vector::push_back Method", "vector Class") == [
        "push", "back", "method"]
    assert quality.heading_query_words("Remarks", "Remarks") == []
    # Case folding on both sides, repeats dropped, heading order kept.
    assert quality.heading_query_words("Build Options and build FLAGS", "Options") == [
        "build", "and", "flags"]


def test_section_queries_keep_two_words_unique_in_the_corpus(quality: ModuleType) -> None:
    concepts = [
        outline(quality, "a/vector", "vector Class", "", "vector Class", "Parameters",
                "Member functions", "Insert elements"),
        outline(quality, "a/list", "list Class", "", "list Class", "Parameters",
                "Member functions", "Splice lists together"),
        # "Elements insert" leaves the same word set as a/vector's "Insert elements".
        outline(quality, "a/deque", "deque", "", "Elements insert", "deque iterators"),
    ]
    found = quality.section_queries(concepts)
    assert [(q.concept_id, q.text, q.line_start, q.line_end) for q in found] == [
        ("a/list", "splice lists together", 31, 39),
    ]
    assert all(q.kind == quality.SECTION for q in found)


def test_preamble_sections_give_no_query(quality: ModuleType) -> None:
    concepts = [quality.ConceptOutline(
        "x", "x.md", "X", "", (quality.SectionOutline(None, 1, 3),
                               quality.SectionOutline("Two words", 4, 9)))]
    assert [q.text for q in quality.section_queries(concepts)] == ["two words"]


def test_concept_queries_skip_shared_short_and_missing_descriptions(
        quality: ModuleType) -> None:
    concepts = [
        outline(quality, "a", "A", "Installs a package and its dependencies."),
        outline(quality, "b", "B", "Learn more about:  the  thing"),
        outline(quality, "c", "C", "learn more about: the thing"),  # shared with b (folded)
        outline(quality, "d", "D", "Too short"),
        outline(quality, "e", "E", ""),
        outline(quality, "f", "F", "three small words"),
    ]
    found = quality.concept_queries(concepts)
    assert [(q.concept_id, q.text) for q in found] == [
        ("a", "Installs a package and its dependencies."),
        ("f", "three small words"),
    ]
    assert found[0].words == ("installs", "a", "package", "and", "its", "dependencies")


def test_sample_is_deterministic_and_bounded(quality: ModuleType) -> None:
    queries = [quality.Query(quality.CONCEPT, f"q {n}", ("q",), f"c{n:03}") for n in range(50)]
    first = quality.sample(queries, 10, 42)
    assert len(first) == 10 and len(set(first)) == 10
    assert quality.sample(list(reversed(queries)), 10, 42) == first
    assert quality.sample(queries, 10, 43) != first
    assert quality.sample(queries[:5], 10, 42) == queries[:5]


# -- metrics ---------------------------------------------------------------------------------


def test_ranks_and_metrics_on_hand_made_rankings(quality: ModuleType) -> None:
    Hit = quality.Hit
    hits = (Hit("x"), Hit("t", 1, 4), Hit("t", 10, 20), Hit("y"))
    assert quality.concept_rank(hits, "t") == 2
    assert quality.concept_rank(hits, "absent") is None
    assert quality.section_rank(hits, "t", 12) == 3
    assert quality.section_rank(hits, "t", 5) is None
    assert quality.section_rank((Hit("t"),), "t", 1) is None  # a whole concept is no section

    ranks = [1, 3, None, 6]
    assert quality.recall_at(ranks, 1) == 0.25
    assert quality.recall_at(ranks, 5) == 0.5
    assert quality.found_rate(ranks) == 0.75
    assert quality.mean_reciprocal_rank(ranks) == pytest.approx((1 + 1 / 3 + 1 / 6) / 4)
    assert quality.recall_at([], 5) == 0.0
    assert quality.percentile([5, 1, 4, 2, 3, 10, 9, 8, 7, 6], 0.9) == 9
    assert quality.percentile([], 0.9) is None


def test_token_estimate_is_utf8_bytes_over_four(quality: ModuleType) -> None:
    assert quality.estimate_tokens({"a": "é"}) == 3  # {"a":"é"} is 10 bytes
    assert quality.estimate_tokens([]) == 1


def test_context_items_rank_in_order(quality: ModuleType) -> None:
    pack = {"items": [
        {"parent_id": "a", "locator": None, "line_start": None, "line_end": None},
        {"parent_id": "b", "locator": "b.md#L3-L9", "line_start": 3, "line_end": 9},
    ], "tokens": 120}
    hits = quality.hits_of_context(pack)
    assert quality.concept_rank(hits, "b") == 2
    assert quality.section_rank(hits, "b", 3) == 2
    assert quality.section_rank(hits, "a", 1) is None


# -- the rg baseline -------------------------------------------------------------------------


def test_rg_command_has_one_fixed_caseless_pattern_per_word(quality: ModuleType) -> None:
    assert quality.rg_command("rg", ["push", "back"]) == [
        "rg", "-F", "-i", "-c", "--glob", "*.md", "-e", "push", "-e", "back", "."]


def test_rg_ranking_by_count_then_path(quality: ModuleType) -> None:
    out = "./b.md:3\n./index.md:9\n./a.md:3\n./dir/c:d.md:7\n./z.md:1\nnot a count line\n"
    concepts = {"a.md": "a", "b.md": "b", "dir/c:d.md": "dir/c:d", "z.md": "z"}
    ranked = quality.rg_ranking(out, concepts)
    # index.md is no concept; a colon inside a path stays in the path.
    assert [h.concept_id for h in ranked] == ["dir/c:d", "a", "b", "z"]
    assert quality.rg_ranking("", concepts) == ()


# -- one run end to end ------------------------------------------------------------------------


def test_generated_bundle_is_deterministic(quality: ModuleType, tmp_path: Path) -> None:
    quality.generate_bundle(tmp_path / "one", 30)
    quality.generate_bundle(tmp_path / "two", 30)
    one = sorted(p.relative_to(tmp_path / "one") for p in (tmp_path / "one").rglob("*.md"))
    two = sorted(p.relative_to(tmp_path / "two") for p in (tmp_path / "two").rglob("*.md"))
    assert one == two and len(one) == 31  # 30 concepts and the root index
    for rel in one:
        assert (tmp_path / "one" / rel).read_bytes() == (tmp_path / "two" / rel).read_bytes()


def test_harness_on_a_tiny_generated_bundle(quality: ModuleType, tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "quality.json"
    code = quality.main([
        "--corpus", "generated", "--corpus", "vcpkg-docs",
        "--corpora-dir", str(tmp_path / "no-corpora"), "--generated-concepts", "40",
        "--queries", "15", "--no-semantic", "--rg", str(tmp_path / "no-rg"),
        "--json", str(out),
    ])
    assert code == 0
    printed = capsys.readouterr()
    assert "### generated" in printed.out and "### Targets" in printed.out
    assert "| search_sections | 15 section | section |" in printed.out
    assert "skipped: corpus vcpkg-docs not found" in printed.out
    assert "ceil(UTF-8 bytes" in printed.out

    report = json.loads(out.read_text(encoding="utf-8"))
    generated, vcpkg = report["corpora"]
    assert vcpkg == {"name": "vcpkg-docs", "skipped": vcpkg["skipped"]}
    assert generated["sampled"] == {"concept": 15, "section": 15}
    skipped = generated["skipped_systems"]
    assert skipped["search_semantic"] == "disabled by --no-semantic"
    assert skipped["rg (naive)"].startswith("ripgrep not found")
    rows = {(r["system"], r["kind"], r["level"]): r for r in generated["rows"]}
    # A description is a literal substring of its own concept's frontmatter, so
    # search_concepts must find every concept query in its top 10.
    assert rows[("search_concepts", "concept", "concept")]["found"] == 1.0
    section_rows = [rows[("search_sections", "section", level)] for level in ("concept", "section")]
    for row in section_rows:
        assert row["queries"] == 15 and row["errors"] == 0
        assert 0.0 <= row["recall_1"] <= row["recall_5"] <= row["found"] <= 1.0
        assert row["median_tokens"] > 0
    per_query = generated["queries"]
    assert len(per_query) == 30
    assert all("search_sections" in q["ranks"] for q in per_query)
    verdicts = {(t["target"], t["corpus"]): t["verdict"] for t in report["targets"]}
    assert verdicts[("search_sections recall@5 ≥ rg + 20 points", "generated")] == "not measured"
    from bundle_mcp.tools import TOOL_MODULES

    if "context" in TOOL_MODULES:  # the row and its targets appear once the tool exists
        context = rows[("context", "section", "section")]
        assert 0.0 <= context["recall_1"] <= context["found"] <= 1.0
        assert verdicts[("context found in pack ≥ 90%", "generated")] in ("met", "missed")
    else:
        assert "context" in skipped
        assert verdicts[("context found in pack ≥ 90%", "generated")] == "not measured"
