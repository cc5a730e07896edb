"""The search filters: the format rule (okf.filters.ConceptFilter), the argument parser
(tools/_filters.py) and what search_concepts, search_sections and search_semantic do with them.

The property tests compare a filtered search with the unfiltered one: the filtered hits must be
the unfiltered hits minus those a filter does not admit, in the same order (and for sections
with the same scores), with ``total`` counting what passed. Which hits a filter admits is
decided there from the hits' own cards (type, tags, path, status, trust, stale), not by the code
under test.
"""

from __future__ import annotations

import hashlib
import os
import types as pytypes
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bundle_mcp.cancel import CancelToken
from bundle_mcp.contracts import ContractSet
from bundle_mcp.errors import BundleError
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.document import parse_document
from bundle_mcp.model import Document, Snapshot, revision_of
from bundle_mcp.okf.filters import ConceptFilter
from bundle_mcp.okf.folding import fold
from bundle_mcp.okf.properties import TRUST_TIERS
from bundle_mcp.okf.temporal import INSTANT_PROFILE, Reference, reference_from
from bundle_mcp.semantic import READY, EmbedderSource, SemanticIndex
from bundle_mcp.semantic.vectors import Vector, unit
from bundle_mcp.tools import search_concepts, search_sections, search_semantic
from bundle_mcp.tools._filters import admitted_concepts, concept_filter_from
from toolcall import run_tool

REPO = Path(__file__).resolve().parent.parent
FILTERS_BUNDLE = os.path.realpath(REPO / "testdata" / "bundles" / "filters")
CONTRACTS = ContractSet()
NO_REFERENCE = reference_from({})
JUNE = reference_from({"as_of": "2026-06-01"})


def snapshot_of(files: Mapping[str, str]) -> Snapshot:
    """An in-memory snapshot whose ``directories`` are the folders of its files (``project``
    is checked against them)."""
    documents = {path: parse_document(path, text.encode("utf-8")) for path, text in files.items()}
    concepts = {d.concept_id: d for d in documents.values() if d.concept_id is not None}
    folders = {""}
    for path in files:
        parts = path.split("/")[:-1]
        folders.update("/".join(parts[: n + 1]) for n in range(len(parts)))
    return Snapshot(
        revision=revision_of([d.record for d in documents.values()]),
        documents=pytypes.MappingProxyType(documents),
        concepts=pytypes.MappingProxyType(dict(sorted(concepts.items()))),
        assets=frozenset(),
        directories=frozenset(folders),
        skipped=(),
    )


def concept(frontmatter: str, body: str = "Body.\n") -> str:
    return f"---\n{frontmatter}---\n{body}"


def doc_of(frontmatter: str, path: str = "a/x.md") -> Document:
    return parse_document(path, concept(frontmatter).encode("utf-8"))


# -- ConceptFilter: each kind ---------------------------------------------------------------


def test_an_empty_filter_admits_everything() -> None:
    assert ConceptFilter().admits(doc_of("type: Note\n"), NO_REFERENCE)
    assert ConceptFilter().admits(doc_of(""), NO_REFERENCE)


def test_types_match_any_folded_type() -> None:
    recipes = ConceptFilter(types=frozenset({"recipe", "table"}))
    assert recipes.admits(doc_of("type: Recipe\n"), NO_REFERENCE)
    assert recipes.admits(doc_of("type: TABLE\n"), NO_REFERENCE)
    assert not recipes.admits(doc_of("type: Process\n"), NO_REFERENCE)
    assert not recipes.admits(doc_of("title: no type\n"), NO_REFERENCE)
    assert not recipes.admits(doc_of("type: [Recipe]\n"), NO_REFERENCE)  # not a string
    # Folding is the search folding: ß folds to ss, so 'Straße' is 'STRASSE'.
    assert ConceptFilter(types=frozenset({fold("STRASSE")})).admits(
        doc_of("type: Straße\n"), NO_REFERENCE
    )


def test_tags_need_every_listed_tag() -> None:
    both = ConceptFilter(tags=frozenset({"coffee", "roast"}))
    assert both.admits(doc_of("tags: [Coffee, ROAST, extra]\n"), NO_REFERENCE)
    assert not both.admits(doc_of("tags: [coffee]\n"), NO_REFERENCE)
    assert not both.admits(doc_of("tags: coffee roast\n"), NO_REFERENCE)  # not a list
    assert not both.admits(doc_of(""), NO_REFERENCE)
    # A tag matches whole: 'coffee' is not 'coffee roast'.
    assert not both.admits(doc_of("tags: [coffee roast]\n"), NO_REFERENCE)


def test_project_is_a_folder_prefix_not_a_string_prefix() -> None:
    roast = ConceptFilter(project="roast")
    assert roast.admits(doc_of("", "roast/beans.md"), NO_REFERENCE)
    assert roast.admits(doc_of("", "roast/deep/beans.md"), NO_REFERENCE)
    assert not roast.admits(doc_of("", "roast-old/beans.md"), NO_REFERENCE)
    assert not roast.admits(doc_of("", "roast.md"), NO_REFERENCE)
    assert ConceptFilter(project="roast/deep").admits(doc_of("", "roast/deep/a.md"), NO_REFERENCE)


def test_status_is_the_effective_status() -> None:
    stable = ConceptFilter(status=frozenset({"stable"}))
    assert stable.admits(doc_of(""), NO_REFERENCE)  # absent means stable
    assert stable.admits(doc_of("status: stable\n"), NO_REFERENCE)
    assert not stable.admits(doc_of("status: draft\n"), NO_REFERENCE)
    assert not stable.admits(doc_of("status: Stable\n"), NO_REFERENCE)  # invalid: not a name
    every = ConceptFilter(status=frozenset({"draft", "stable", "deprecated"}))
    for invalid in ("status: archived\n", "status: [draft]\n", "status: 1\n", "status: null\n"):
        assert not every.admits(doc_of(invalid), NO_REFERENCE), invalid


def test_min_trust_keeps_that_tier_and_better() -> None:
    unverified = doc_of("")
    machine = doc_of("verified:\n  by: okf-bot/1.0\n")
    human = doc_of("verified:\n  - by: process:ci\n  - by: human:ada\n")
    malformed = doc_of("verified: yes\n")  # no actor: unverified
    for tier, expected in (
        ("unverified", [True, True, True, True]),
        ("machine-confirmed", [False, True, True, False]),
        ("human-reviewed", [False, False, True, False]),
    ):
        rule = ConceptFilter(min_trust=tier)
        got = [rule.admits(d, NO_REFERENCE) for d in (unverified, machine, human, malformed)]
        assert got == expected, tier


def test_exclude_stale_drops_only_known_staleness() -> None:
    fresh = ConceptFilter(exclude_stale=True)
    assert not fresh.admits(doc_of("stale_after: 2026-01-01\n"), JUNE)
    assert not fresh.admits(doc_of("stale_after: 2026-06-01\n"), JUNE)  # as_of >= stale_after
    assert fresh.admits(doc_of("stale_after: 2026-06-02\n"), JUNE)
    assert fresh.admits(doc_of(""), JUNE)  # unknown: kept
    assert fresh.admits(doc_of("stale_after: not a date\n"), JUNE)
    assert fresh.admits(doc_of("stale_after: 2026-01-01T00:00:00Z\n"), JUNE)  # wrong profile
    # Without as_of nothing is known to be stale: the tools refuse that call before.
    assert fresh.admits(doc_of("stale_after: 2026-01-01\n"), NO_REFERENCE)
    instant = reference_from({"temporal_profile": INSTANT_PROFILE, "as_of": "2026-09-26T05:00:01Z"})
    assert not fresh.admits(doc_of("stale_after: 2026-09-26T12:00:00+07:00\n"), instant)
    assert fresh.admits(doc_of("stale_after: 2026-09-26\n"), instant)


def test_kinds_combine_with_and() -> None:
    rule = ConceptFilter(
        types=frozenset({"recipe"}), tags=frozenset({"coffee"}), project="brew",
        status=frozenset({"stable"}), min_trust="machine-confirmed", exclude_stale=True,
    )
    good = "type: Recipe\ntags: [Coffee]\nverified:\n  by: bot\nstale_after: 2027-01-01\n"
    assert rule.admits(doc_of(good, "brew/x.md"), JUNE)
    assert not rule.admits(doc_of(good, "roast/x.md"), JUNE)
    assert not rule.admits(doc_of(good.replace("Recipe", "Table"), "brew/x.md"), JUNE)
    assert not rule.admits(doc_of(good.replace("Coffee", "Tea"), "brew/x.md"), JUNE)
    assert not rule.admits(doc_of(good + "status: draft\n", "brew/x.md"), JUNE)
    assert not rule.admits(doc_of(good.replace("  by: bot\n", "  at: x\n"), "brew/x.md"), JUNE)
    assert not rule.admits(doc_of(good.replace("2027", "2026"), "brew/x.md"), JUNE)


@pytest.mark.parametrize(
    "arguments",
    [{"status": frozenset({"archived"})}, {"status": frozenset({"Stable"})},
     {"min_trust": "trusted"}, {"min_trust": "HUMAN-REVIEWED"}],
)
def test_unknown_status_or_tier_is_refused_where_the_filter_is_made(
    arguments: dict[str, Any],
) -> None:
    with pytest.raises(ValueError):
        ConceptFilter(**arguments)


def test_the_echo_is_normalised_and_complete() -> None:
    rule = ConceptFilter(
        types=frozenset({"table", "recipe"}), tags=frozenset({"b", "a"}),
        status=frozenset({"deprecated", "draft"}),
    )
    assert rule.echo() == {
        "types": ["recipe", "table"], "tags": ["a", "b"], "project": None,
        "status": ["draft", "deprecated"], "min_trust": None, "exclude_stale": False,
    }


# -- concept_filter_from ----------------------------------------------------------------------

SMALL = snapshot_of({
    "roast/beans.md": concept("type: Process\ntags: [Coffee]\n"),
    "brew/cup.md": concept("type: Recipe\n"),
})


def test_no_filter_argument_is_none() -> None:
    assert concept_filter_from(SMALL, {"query": "x", "limit": 3}, NO_REFERENCE) is None
    assert concept_filter_from(SMALL, {"as_of": "2026-06-01"}, JUNE) is None


def test_arguments_are_folded_and_checked() -> None:
    made = concept_filter_from(
        SMALL, {"types": ["PROCESS"], "tags": ["CoFFee"], "project": "roast",
                "status": ["draft"], "min_trust": "unverified", "exclude_stale": False},
        NO_REFERENCE,
    )
    assert made == ConceptFilter(
        types=frozenset({"process"}), tags=frozenset({"coffee"}), project="roast",
        status=frozenset({"draft"}), min_trust="unverified", exclude_stale=False,
    )
    # One argument is enough to make a filter, even one that constrains nothing.
    assert concept_filter_from(SMALL, {"types": []}, NO_REFERENCE) == ConceptFilter()


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"exclude_stale": True}, "$.as_of"),
        ({"project": "nowhere"}, "$.project"),
        ({"project": "roast/"}, "$.project"),
        ({"project": "roast/beans.md"}, "$.project"),
        ({"status": ["archived"]}, "$.status"),
        ({"status": "draft"}, "$.status"),
        ({"min_trust": "trusted"}, "$.min_trust"),
        ({"exclude_stale": "yes"}, "$.exclude_stale"),
        ({"types": "Recipe"}, "$.types"),
        ({"tags": [" "]}, "$.tags"),
    ],
)
def test_bad_arguments_name_their_field(arguments: dict[str, Any], field: str) -> None:
    with pytest.raises(BundleError) as info:
        concept_filter_from(SMALL, arguments, NO_REFERENCE)
    assert info.value.code == "invalid_request"
    assert [d.field for d in info.value.diagnostics] == [field]


def test_more_than_32_names_is_a_resource_limit() -> None:
    with pytest.raises(BundleError) as info:
        concept_filter_from(SMALL, {"tags": [f"t{n}" for n in range(33)]}, NO_REFERENCE)
    assert info.value.code == "resource_limit"


def test_the_admitted_set_is_computed_once_from_the_rule() -> None:
    rule = ConceptFilter(types=frozenset({"recipe"}))
    assert admitted_concepts(SMALL, rule, NO_REFERENCE, CancelToken()) == {"brew/cup"}


# -- search_concepts and search_sections: filtered = unfiltered minus the non-admitted --------

TYPES = ["Process", "process", "Recipe", "Table", "Note"]
TAGS = ["coffee", "Coffee", "roast", "ROAST", "espresso", "finance", "Straße"]
FOLDERS = ["", "roast/", "roast/deep/", "brew/", "ops/"]
STATUS_LINES = ["", "status: draft\n", "status: stable\n", "status: deprecated\n",
                "status: archived\n", "status: [draft]\n"]
VERIFIED = ["", "verified:\n  by: okf-bot/1.0\n",
            "verified:\n  - by: process:ci\n  - by: human:a\n", "verified: yes\n"]
STALE = ["", "stale_after: 2025-06-01\n", "stale_after: 2026-06-01\n", "stale_after: 2027-01-01\n",
         "stale_after: not a date\n"]
WORDS = ["coffee", "beans", "roast", "ledger", "water"]


@st.composite
def bundles(draw: st.DrawFn) -> Snapshot:
    files: dict[str, str] = {}
    for n in range(draw(st.integers(1, 12))):
        frontmatter = ""
        if draw(st.booleans()):
            frontmatter += f"type: {draw(st.sampled_from(TYPES))}\n"
        chosen = draw(st.lists(st.sampled_from(TAGS), max_size=3, unique=True))
        if chosen:
            frontmatter += f"tags: [{', '.join(chosen)}]\n"
        frontmatter += draw(st.sampled_from(STATUS_LINES))
        frontmatter += draw(st.sampled_from(VERIFIED))
        frontmatter += draw(st.sampled_from(STALE))
        words = draw(st.lists(st.sampled_from(WORDS), min_size=1, max_size=6))
        sections = " ".join(words[:3]) + "\n\n## Part\n\n" + " ".join(words[3:]) + "\n"
        files[f"{draw(st.sampled_from(FOLDERS))}c{n:02d}.md"] = concept(frontmatter, sections)
    return snapshot_of(files)


@st.composite
def filter_arguments(draw: st.DrawFn) -> dict[str, Any]:
    arguments: dict[str, Any] = {}
    if draw(st.booleans()):
        arguments["as_of"] = draw(st.sampled_from(["2025-01-01", "2026-06-01", "2028-01-01"]))
    if draw(st.booleans()):
        arguments["types"] = draw(st.lists(st.sampled_from(TYPES + ["TABLE"]), max_size=3))
    if draw(st.booleans()):
        arguments["tags"] = draw(st.lists(st.sampled_from(TAGS + ["STRASSE"]), max_size=2))
    if draw(st.booleans()):
        arguments["project"] = draw(st.sampled_from(["roast", "roast/deep", "brew", "ops"]))
    if draw(st.booleans()):
        arguments["status"] = draw(
            st.lists(st.sampled_from(["draft", "stable", "deprecated"]), max_size=3)
        )
    if draw(st.booleans()):
        arguments["min_trust"] = draw(st.sampled_from(list(TRUST_TIERS)))
    if "as_of" in arguments and draw(st.booleans()):
        arguments["exclude_stale"] = draw(st.booleans())
    return arguments


def admitted_by_card(card: Mapping[str, Any], arguments: Mapping[str, Any]) -> bool:
    """The oracle: what the filter arguments promise, read off the hit's card."""
    if arguments.get("types") and fold(card["type"]) not in {fold(t) for t in arguments["types"]}:
        return False
    if not {fold(t) for t in arguments.get("tags", [])} <= {fold(t) for t in card["tags"]}:
        return False
    project = arguments.get("project")
    if project is not None and not card["path"].startswith(project + "/"):
        return False
    if arguments.get("status") and card["status"] not in arguments["status"]:
        return False
    tier = arguments.get("min_trust")
    if tier is not None and TRUST_TIERS.index(card["trust"]) < TRUST_TIERS.index(tier):
        return False
    return not (arguments.get("exclude_stale") and card["stale"] is True)


def without_filters(arguments: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in arguments.items() if k in ("query", "limit", "as_of")}


def project_exists(snapshot: Snapshot, arguments: Mapping[str, Any]) -> bool:
    return arguments.get("project") is None or arguments["project"] in snapshot.directories


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bundles(), filter_arguments(), st.sampled_from(WORDS + ["e", "c0"]), st.integers(1, 5))
def test_filtered_concepts_are_the_unfiltered_minus_the_non_admitted(
    snapshot: Snapshot, arguments: dict[str, Any], query: str, limit: int
) -> None:
    if not project_exists(snapshot, arguments):
        return
    everything = run_tool(search_concepts, snapshot, {"query": query, "limit": 100,
                                                      **without_filters(arguments)})
    wide = run_tool(search_concepts, snapshot, {"query": query, "limit": 100, **arguments})
    expected = [h for h in everything["hits"] if admitted_by_card(h["concept"], arguments)]
    assert wide["hits"] == expected
    assert wide["total"] == len(expected)
    assert not wide["truncated"]
    # A limit cuts the same ordered list; total still counts every admitted match.
    narrow = run_tool(search_concepts, snapshot, {"query": query, "limit": limit, **arguments})
    assert narrow["hits"] == expected[:limit]
    assert narrow["total"] == len(expected)
    assert narrow["truncated"] == (len(expected) > limit)
    if any(k in arguments for k in ("types", "tags", "project", "status", "min_trust",
                                    "exclude_stale")):
        CONTRACTS.check_output("search_concepts", narrow)
        assert set(narrow["filters"]) == {"types", "tags", "project", "status", "min_trust",
                                          "exclude_stale"}
    else:
        assert "filters" not in narrow


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(bundles(), filter_arguments(), st.sampled_from(["coffee", "beans roast", "water"]))
def test_filtered_sections_keep_their_scores_and_order(
    snapshot: Snapshot, arguments: dict[str, Any], query: str
) -> None:
    if not project_exists(snapshot, arguments):
        return
    cards = {
        h["concept"]["id"]: h["concept"]
        for h in run_tool(search_concepts, snapshot, {"query": "c", "limit": 100,
                                                      **without_filters(arguments)})["hits"]
    }  # every concept ID holds a 'c' (c00, c01, ...): one card each
    everything = run_tool(search_sections, snapshot, {"query": query, "limit": 100})
    filtered = run_tool(search_sections, snapshot, {"query": query, "limit": 100, **arguments})
    expected = [h for h in everything["hits"]
                if admitted_by_card(cards[h["concept_id"]], arguments)]
    # Same hits, same scores: idf and the average length still count the whole bundle.
    assert filtered["hits"] == expected
    assert filtered["total"] == len(expected)
    if "filters" in filtered:
        assert filtered["as_of"] == arguments.get("as_of")
        CONTRACTS.check_output("search_sections", filtered)


def test_unfiltered_answers_keep_their_keys() -> None:
    snapshot, _ = load_bundle(FILTERS_BUNDLE)
    concepts = run_tool(search_concepts, snapshot, {"query": "coffee"})
    sections = run_tool(search_sections, snapshot, {"query": "coffee", "as_of": "2026-06-01"})
    assert list(concepts) == ["query", "as_of", "temporal_profile", "total", "truncated", "hits"]
    assert list(sections) == ["query", "terms", "snapshot_revision", "total", "truncated", "hits"]


def test_the_filter_is_asked_only_of_matched_concepts(monkeypatch: pytest.MonkeyPatch) -> None:
    """Filtering is cheap: search_concepts scans its columns in one pass (SearchFields) and
    asks the filter only about the concepts that matched; a concept it drops never counts."""
    from bundle_mcp.okf.filters import ConceptFilter

    snapshot, _ = load_bundle(FILTERS_BUNDLE)
    asked: list[str] = []
    real = ConceptFilter.admits

    def spy(self: ConceptFilter, doc: Any, ref: Any) -> bool:
        asked.append(doc.concept_id)
        return real(self, doc, ref)

    monkeypatch.setattr(ConceptFilter, "admits", spy)
    answer = run_tool(search_concepts, snapshot, {"query": "coffee", "project": "brew"})
    needle = "coffee"
    matched = [cid for cid, doc in snapshot.concepts.items()
               if search_concepts.match_priority(needle, cid, doc)]
    assert asked == matched and len(matched) > 2
    assert [hit["concept"]["id"] for hit in answer["hits"]] == ["brew/espresso", "brew/pour-over"]
    assert answer["total"] == 2


def test_search_sections_checks_as_of_like_search_concepts() -> None:
    snapshot, _ = load_bundle(FILTERS_BUNDLE)
    with pytest.raises(BundleError) as info:
        run_tool(search_sections, snapshot, {"query": "coffee", "as_of": "2026-02-31"})
    assert [d.field for d in info.value.diagnostics] == ["$.as_of"]


# -- search_semantic: the seeds are the top_k best admitted concepts --------------------------

SHOP = {
    "roast/beans.md": concept("type: Process\ntitle: Roasting\ntags: [coffee]\n",
                              "Roast coffee beans until first crack.\n"),
    "roast/more.md": concept("type: Process\ntitle: Roasting more\ntags: [coffee]\n",
                             "Roast coffee beans darker.\n"),
    "ops/ledger.md": concept("type: Table\ntitle: Ledger\nstatus: draft\n",
                             "Coffee purchases. See [beans](../roast/beans.md).\n"),
    "ops/tax.md": concept("type: Table\ntitle: Taxes\n", "Tax rates.\n"),
}


class HashedWords:
    """A stand-in embedder: each word hashed into one of 32 dimensions, so similarity is word
    overlap (no model needed)."""

    def encode(self, texts: Sequence[str]) -> list[Vector | None]:
        out: list[Vector | None] = []
        for text in texts:
            values = [0.0] * 32
            for word in text.lower().split():
                values[hashlib.sha256(word.strip(".,()[]").encode()).digest()[0] % 32] += 1.0
            out.append(unit(values))
        return out


@pytest.fixture
def shop_index() -> Iterator[SemanticIndex]:
    made = SemanticIndex(
        EmbedderSource(model_key="filters-hashed-words", dimension=32, max_chars=2000,
                       available=lambda: True, load=HashedWords),
        None,
        batch_size=2,
    )
    yield made
    made.close()


def semantic(snapshot: Snapshot, index: SemanticIndex, **params: Any) -> dict[str, Any]:
    result = run_tool(search_semantic, snapshot, params, semantic=index)
    CONTRACTS.check_output("search_semantic", result)
    return result


def test_semantic_seeds_are_the_best_admitted_concepts(shop_index: SemanticIndex) -> None:
    snapshot = snapshot_of(SHOP)
    assert shop_index.wait(snapshot, 20.0) == READY
    plain = semantic(snapshot, shop_index, query="roast coffee beans", top_k=1, depth=0)
    assert plain["matched_seeds"][0].startswith("roast/")
    tables = semantic(snapshot, shop_index, query="roast coffee beans", top_k=1, depth=0,
                      types=["table"])
    # Not the best concept overall filtered out afterwards (that would leave no seed at all):
    # the best of the admitted ones.
    assert tables["matched_seeds"] == ["ops/ledger"]
    assert set(tables["scores"]) == {"ops/ledger"}
    assert tables["filters"]["types"] == ["table"]
    both = semantic(snapshot, shop_index, query="roast coffee beans", top_k=5, depth=0,
                    types=["TABLE"])
    assert both["matched_seeds"] == sorted(
        both["matched_seeds"], key=lambda cid: (-both["scores"][cid], cid)
    )
    assert set(both["matched_seeds"]) == {"ops/ledger", "ops/tax"}


def test_semantic_filters_leave_other_objects_out_of_the_subgraph(
    shop_index: SemanticIndex,
) -> None:
    snapshot = snapshot_of(SHOP)
    assert shop_index.wait(snapshot, 20.0) == READY
    linked = semantic(snapshot, shop_index, query="coffee purchases", top_k=1,
                      types=["Table"])
    assert linked["matched_seeds"] == ["ops/ledger"]
    # ops/ledger links to roast/beans, a Process: the walk reaches it, the filter drops it.
    assert [n["id"] for n in linked["subgraph"]["nodes"]] == ["ops/ledger"]
    assert linked["meta"]["total_found_nodes"] == 1
    unfiltered = semantic(snapshot, shop_index, query="coffee purchases", seed_ids=["ops/ledger"])
    assert [n["id"] for n in unfiltered["subgraph"]["nodes"]] == ["ops/ledger", "roast/beans"]


def test_semantic_index_search_scores_only_admitted_concepts(shop_index: SemanticIndex) -> None:
    snapshot = snapshot_of(SHOP)
    assert shop_index.wait(snapshot, 20.0) == READY
    token = CancelToken()
    found = shop_index.search(snapshot, "coffee", 20, 0.0, token, frozenset({"ops/tax"}))
    assert [cid for cid, _score in found.hits] == ["ops/tax"]
    nothing = shop_index.search(snapshot, "coffee", 20, 0.0, token, frozenset())
    assert nothing.hits == ()


def test_reference_is_required_for_exclude_stale_in_every_search() -> None:
    snapshot, _ = load_bundle(FILTERS_BUNDLE)
    for module, extra in ((search_concepts, {}), (search_sections, {}),
                          (search_semantic, {"seed_ids": ["roast/beans"]})):
        with pytest.raises(BundleError) as info:
            run_tool(module, snapshot, {"query": "coffee", "exclude_stale": True, **extra})
        assert [d.field for d in info.value.diagnostics] == ["$.as_of"], module.__name__


def test_reference_of_a_filtered_answer_is_the_one_asked_for() -> None:
    snapshot, _ = load_bundle(FILTERS_BUNDLE)
    ref = Reference(INSTANT_PROFILE, "2026-06-01T00:00:00Z", None)
    answer = run_tool(search_sections, snapshot, {
        "query": "coffee", "temporal_profile": ref.profile, "as_of": ref.as_of, "tags": ["x"],
    })
    assert (answer["as_of"], answer["temporal_profile"]) == (ref.as_of, ref.profile)
    assert answer["total"] == 0 and answer["filters"]["tags"] == ["x"]


@pytest.mark.parametrize(
    ("module", "extra"),
    [(search_sections, {}), (search_semantic, {"seed_ids": ["roast/beans"]})],
)
def test_the_output_contracts_tie_filters_to_their_reference(
    module: Any, extra: dict[str, Any]
) -> None:
    """filters, as_of and temporal_profile come together or not at all (dependentRequired)."""
    snapshot, _ = load_bundle(FILTERS_BUNDLE)
    tool = module.SPEC.name
    answer = run_tool(module, snapshot, {"query": "coffee", "tags": ["coffee"], **extra})
    CONTRACTS.check_output(tool, answer)
    for key in ("as_of", "temporal_profile", "filters"):
        broken = {k: v for k, v in answer.items() if k != key}
        with pytest.raises(BundleError):
            CONTRACTS.check_output(tool, broken)
    plain = {k: v for k, v in answer.items() if k not in ("as_of", "temporal_profile", "filters")}
    CONTRACTS.check_output(tool, plain)
