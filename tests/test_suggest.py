"""'Did you mean' (okf/suggest.py) and its diagnostics on every concept_not_found.

The ranking rule is tested on in-memory snapshots; then every tool that takes a concept ID is
called with an absent one through the real dispatcher, and the suggestions must be there. A tool
whose input contract takes a concept ID but that is neither covered nor listed as answering
unknown IDs inside a successful result fails the walk, so a new tool cannot skip it silently.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.errors import BundleError
from bundle_mcp.okf import suggest as sg
from bundle_mcp.tools import TOOL_MODULES

try:
    from tests.toolcall import snapshot_of
except ImportError:  # pytest run without the repository root on sys.path
    from toolcall import snapshot_of  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parent.parent
CONTRACTS = REPO / "contracts"
EXAMPLE = REPO / "examples" / "coffee-roastery"


def concept(title: str = "") -> str:
    return "---\ntype: Note\n" + (f"title: {title}\n" if title else "") + "---\nBody.\n"


SHOP = snapshot_of({
    "tables/orders.md": concept("Orders"),
    "archive/tables/orders.md": concept("Old orders"),
    "tables/order_items.md": concept("Order Items"),
    "metrics/revenue.md": concept("orders"),
    "tables/order.md": concept("One order"),
    "Tables/Customers.md": concept("Customers"),
    "notes/untitled.md": concept(),
})


def ids(found: tuple[sg.Suggestion, ...]) -> list[tuple[str, str]]:
    return [(s.concept_id, s.reason) for s in found]


# -- the rule ----------------------------------------------------------------------------------


def test_loose_folds_case_and_reads_separators_as_one_space() -> None:
    assert sg.loose("  Order_Items--v2 ") == "order items v2"
    assert sg.loose("Straße/Ä") == "strasse/ä"
    assert sg.loose("tables/order items") == sg.loose("Tables/Order-Items")


def test_tiers_come_in_order_each_by_id() -> None:
    """Stem matches, then title matches, then close ones; a concept is listed once."""
    found = sg.suggest(SHOP, "orders")
    assert ids(found) == [
        ("archive/tables/orders", "stem"),
        ("tables/orders", "stem"),
        ("metrics/revenue", "title"),  # its title is "orders"; tables/orders came as a stem
        ("tables/order", "close"),
    ]


def test_a_whole_id_equal_but_for_case_and_separators_comes_first() -> None:
    found = sg.suggest(SHOP, "TABLES/ORDER-ITEMS")
    assert ids(found)[0] == ("tables/order_items", "case")
    assert ids(sg.suggest(SHOP, "tables/customers"))[0] == ("Tables/Customers", "case")


def test_a_title_as_the_request_or_its_last_segment() -> None:
    assert ids(sg.suggest(SHOP, "Old Orders"))[0] == ("archive/tables/orders", "title")
    assert ids(sg.suggest(SHOP, "reports/One-Order"))[0] == ("tables/order", "title")


def test_close_matches_rank_by_ratio_then_id() -> None:
    found = sg.suggest(SHOP, "tables/ordres")
    assert [r for _, r in ids(found)] == ["close"] * len(found)
    assert found[0].concept_id == "tables/orders"  # 0.92, above tables/order (0.88)
    assert [s.concept_id for s in found[:2]] == ["tables/orders", "tables/order"]


def test_nothing_close_suggests_nothing() -> None:
    assert sg.suggest(SHOP, "zz/qqqq") == ()
    assert sg.suggest(SHOP, "x") == ()


def test_at_most_five_and_never_the_request_itself() -> None:
    many = snapshot_of({f"f{n}/orders.md": concept() for n in range(9)})
    found = sg.suggest(many, "orders")
    assert len(found) == sg.MAX_SUGGESTIONS == 5
    assert [s.concept_id for s in found] == [f"f{n}/orders" for n in range(5)]
    assert "f1/orders" not in [s.concept_id for s in sg.suggest(many, "f1/orders")]


def test_a_path_where_an_id_was_expected_is_read_as_the_id() -> None:
    for text in ("tables/orders.md", "/tables/orders", "./tables/orders.md"):
        assert ids(sg.suggest(SHOP, text))[0] == ("tables/orders", "case"), text


def test_only_concepts_under_the_project() -> None:
    found = sg.suggest(SHOP, "orders", project="tables")
    assert [s.concept_id for s in found] == ["tables/orders", "tables/order"]
    assert sg.suggest(SHOP, "revenue", project="tables") == ()
    assert [s.concept_id for s in sg.suggest(SHOP, "revenue")] == ["metrics/revenue"]


def test_names_are_the_display_names() -> None:
    found = sg.suggest(SHOP, "notes/untitle")
    assert [(s.concept_id, s.name, s.path) for s in found] == [
        ("notes/untitled", "untitled", "notes/untitled.md")
    ]


def test_the_index_is_built_once_per_snapshot_on_the_first_miss() -> None:
    shop = snapshot_of({"a/orders.md": concept("Orders")})
    calls: list[int] = []
    real = sg.build_index

    def counting(snapshot: Any) -> sg.SuggestionIndex:
        calls.append(1)
        return real(snapshot)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sg, "build_index", counting)
        sg.suggest(shop, "orders")
        sg.suggest(shop, "ordrs")
        assert len(calls) == 1
        sg.suggest(snapshot_of({"a/orders.md": concept("Orders")}), "orders")
        assert len(calls) == 2


def test_suggesting_checks_for_cancellation() -> None:
    many = snapshot_of({f"c/item-{n:04d}.md": concept(f"Item {n}") for n in range(3000)})
    token = CancelToken()
    token.cancel()
    with pytest.raises(BundleError) as info:
        sg.suggest(many, "c/item-00x1", check=token.check)
    assert info.value.code == "operation_cancelled"


class RatioCount:
    """How many full ratios difflib computed in ``okf.suggest`` (its SequenceMatcher patched)
    since :attr:`count` was last set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        counter = self

        class Counting(difflib.SequenceMatcher[str]):
            def ratio(self) -> float:
                counter.count += 1
                return super().ratio()

        monkeypatch.setattr(sg.difflib, "SequenceMatcher", Counting)


def test_a_miss_on_a_large_bundle_is_no_scan_with_difflib(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Built once, a miss on 10,000 concepts runs difflib's full ratio on a small share of the
    index's texts only: the bigram postings and the length and quick-ratio bounds choose them.
    (Counted, not timed: no unit test reads a clock, bench/README.md.)"""
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    files = {
        f"{words[n % 8]}/{words[(n // 8) % 8]}-{words[(n // 64) % 8]}-{n:05d}.md":
            concept(f"{words[n % 8].title()} {n}")
        for n in range(10_000)
    }
    big = snapshot_of(files)
    sg.suggest(big, "warm-up")
    texts = len([t for t in sg.index_of(big).texts if t])
    ratios = RatioCount(monkeypatch)
    counted = {}
    for request in ("alpha/bravo-charlie-0001", "Delta 12", "echo/golf-hotl-00100",
                    "nothing-like-this-at-all"):
        ratios.count = 0
        found = sg.suggest(big, request)
        counted[request] = ratios.count
        assert request == "nothing-like-this-at-all" or found
    assert texts == 30_000  # an ID, a stem and a title per concept
    assert counted["nothing-like-this-at-all"] == 0
    assert all(n < texts // 10 for n in counted.values()), counted


# Near-identical IDs, stems and titles: most texts tie on their bounds and their ratios, which
# is where stopping early could go wrong (the bench's deleted concept, core/topic-NNNN, meets
# about 2,000 texts like these).
TIED = snapshot_of({
    f"{('core', 'area', 'core-x')[n % 3]}/topic-{n // 3:04d}.md":
        concept(f"Topic {n // 3:04d}" if n % 5 else "")
    for n in range(3_000)
})


@settings(max_examples=60, deadline=None)
@given(request=st.sampled_from([
    "core/topic-0042", "core/topic-0999", "area/topic-004", "topic-1000", "core-x/topic-0",
    "Topic 0500", "core/topc-0042", "nothing/here", "area/topic-00421", "core/topic-1",
]), picked=st.sets(st.sampled_from(["core/topic-0041", "area/topic-0042", "core/topic-0043",
                                    "core-x/topic-0042"]), max_size=2),
    wanted=st.integers(1, 5))
def test_stopping_early_finds_the_same_best_close_matches(
        request: str, picked: set[str], wanted: int) -> None:
    """``_close`` with ``wanted`` computes full ratios only until no bound left can change the
    ``wanted`` best; those are the ``wanted`` best of the full computation, exactly."""
    index = sg.index_of(TIED)
    queries = {sg.loose(request), sg.loose(request.rsplit("/", 1)[-1])}

    def admissible(concept_id: str) -> bool:
        return concept_id not in picked

    def best(scores: dict[str, float]) -> list[tuple[str, float]]:
        return sorted(scores.items(), key=lambda item: (-item[1], item[0]))[:wanted]

    every = sg._close(index, queries, None, admissible)
    early = sg._close(index, queries, None, admissible, wanted)
    assert best(early) == best(every)
    assert set(early) <= set(every)


def _close_by_difflib(index: sg.SuggestionIndex, queries: set[str]) -> dict[str, float]:
    """The close tier read straight from its rule: every text sharing at least a third of a
    query's bigrams, its full difflib ratio, kept at the cutoff and above, each concept's
    best. No bound, no early stop: what ``_close`` must equal."""
    best: dict[str, float] = {}
    for query in queries:
        pairs = sg.bigrams(query)
        need = -(-len(pairs) // sg.SHARED_BIGRAMS)
        for text in index.texts:
            if not text or len(pairs & sg.bigrams(text)) < need:
                continue
            ratio = difflib.SequenceMatcher(None, text, query, autojunk=False).ratio()
            if ratio >= sg.CLOSE_CUTOFF:
                for concept_id in index.carriers(text):
                    best[concept_id] = max(best.get(concept_id, 0.0), ratio)
    return best


@settings(max_examples=40, deadline=None)
@given(request=st.one_of(
    st.sampled_from(["core/topic-0042", "area/topc-0042", "Topic 050", "core-x/topic-00",
                     "topic-0999x", "aera/topic-0101", "core/topic-042", "c/t"]),
    st.text(alphabet="coretpiax-/0123456789 é", min_size=1, max_size=18)))
def test_the_close_tier_equals_difflib_over_every_text_that_shares_the_bigrams(
        request: str) -> None:
    """The bound that chooses which full ratios to compute (RapidFuzz's Indel similarity) is
    never below difflib's ratio: with no ``wanted``, ``_close`` finds exactly what difflib
    finds over every text the bigram rule lets through, to the bit."""
    index = sg.index_of(TIED)
    queries = {q for q in (sg.loose(request), sg.loose(request.rsplit("/", 1)[-1])) if q}
    assert sg._close(index, queries, None) == _close_by_difflib(index, queries)


def test_stopping_early_skips_most_full_ratios_among_ties(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Counted, not timed: on the tied texts, a miss like a just-deleted concept computes the
    full ratio of a few texts, where the bounds let hundreds through."""
    index = sg.index_of(TIED)
    ratios = RatioCount(monkeypatch)
    queries = {"core topic 0042", "topic 0042"}
    sg._close(index, queries, None)
    every, ratios.count = ratios.count, 0
    sg._close(index, queries, None, wanted=sg.MAX_SUGGESTIONS)
    assert every > 200 and ratios.count < every // 10, (every, ratios.count)


# -- the diagnostics of every tool -------------------------------------------------------------


# Every tool whose input takes a concept ID (or a list of them), the call with an absent one
# and where its answer reports the suggestions: "error" (the concept_not_found envelope) or
# "rejected" (a write plan's diagnostics).
CALLS: dict[str, tuple[dict[str, Any], str, str]] = {
    "read_concept": ({"concept_id": "beans/Kenya_Nyeri"}, "$.concept_id", "error"),
    "get_neighbors": ({"concept_id": "beans/Kenya_Nyeri"}, "$.concept_id", "error"),
    "get_computation": ({"concept_id": "beans/Kenya_Nyeri"}, "$.concept_id", "error"),
    "check_receipt": (
        {"concept_id": "beans/Kenya_Nyeri", "parameters": {}, "receipt": {},
         "displayed_value": None, "as_of": "2026-12-02"}, "$.concept_id", "error",
    ),
    "fetch_slice": ({"entity_id": "beans/Kenya_Nyeri"}, "$.entity_id", "error"),
    "concept_history": ({"concept_id": "beans/Kenya_Nyeri"}, "$.concept_id", "error"),
    "concept_diff": ({"concept_id": "beans/Kenya_Nyeri", "from": "HEAD"}, "$.concept_id",
                     "error"),
    "find_path": (
        {"from_id": "beans/ethiopia-guji", "to_id": "beans/Kenya_Nyeri"}, "$.to_id", "error"
    ),
    "preview_concept_patch": (
        {"actor": "human:ann", "operations": [
            {"kind": "set_lifecycle", "concept_id": "beans/Kenya_Nyeri",
             "lifecycle": {"status": "stable", "stale_after": None}}]},
        "$.operations[0].concept_id", "rejected",
    ),
    "apply_concept_patch": (
        {"actor": "human:ann", "expected_revision": "sha256:" + "0" * 64,
         "expected_plan_digest": "sha256:" + "0" * 64, "operations": [
             {"kind": "set_lifecycle", "concept_id": "beans/Kenya_Nyeri",
              "lifecycle": {"status": "stable", "stale_after": None}}]},
        "$.operations[0].concept_id", "rejected",
    ),
    "preview_bundle_edit": (
        {"operations": [{"op": "rename", "concept_id": "beans/Kenya_Nyeri", "new_id": "x"}]},
        "$.operations[0].concept_id", "rejected",
    ),
    "apply_bundle_edit": (
        {"expected_revision": "sha256:" + "0" * 64, "expected_plan_digest": "sha256:" + "0" * 64,
         "operations": [{"op": "delete", "concept_id": "beans/Kenya_Nyeri"}]},
        "$.operations[0].concept_id", "rejected",
    ),
}
# Tools that take concept IDs and report the unknown ones inside a successful answer whose
# contract has no place for suggestions (the seeds' `unresolved` lists), or for which an
# absent ID is no error at all.
ANSWERED_OTHERWISE = {
    "expand_neighbors": "unknown seeds come back in `unresolved`",
    "query_subgraph": "unknown seeds come back in `unresolved`",
    "visualize_graph": "unknown seeds come back in `unresolved`",
    "search_semantic": "unknown seed_ids come back in `unresolved`",
    "write_concept": "an absent concept_id is a new concept",
    "preview_v02_migration": "an unknown concept is a blocker; its message names suggestions",
    "apply_v02_migration": "an unknown concept is a blocker; its message names suggestions",
    "preview_temporal_upgrade": "a mapping that names no date value is invalid_request",
    "apply_temporal_upgrade": "a mapping that names no date value is invalid_request",
}
# The definitions a contract names a concept ID (or a seed) with.
ID_DEFINITIONS = {"concept_id", "entity_id", "object_id"}


def _takes_concept_ids(tool: str) -> bool:
    schema = json.loads((CONTRACTS / f"{tool}.input.schema.json").read_text(encoding="utf-8"))
    return bool(ID_DEFINITIONS & set(schema.get("$defs", {})))


def test_every_tool_that_takes_a_concept_id_is_walked() -> None:
    takers = {tool for tool in TOOL_MODULES if _takes_concept_ids(tool)}
    assert takers == set(CALLS) | set(ANSWERED_OTHERWISE)


def _call(tool: str, arguments: dict[str, Any], tmp_path: Path) -> Any:
    """The call on a private copy of the example (an apply must never reach the real one);
    an apply gets the current revision, so that only the plan can stop it."""
    root = Path(os.path.realpath(tmp_path)) / "bundle"  # no symlink in a bundle path
    shutil.copytree(EXAMPLE, root)
    dispatcher = Dispatcher(ServeConfig(bundles=(str(root),)))
    if "expected_revision" in arguments:
        preview = dispatcher.call(tool.replace("apply_", "preview_"), {
            k: v for k, v in arguments.items() if not k.startswith("expected_")
        })
        arguments = {**arguments, "expected_revision": preview.structured["base_revision"]}
    return dispatcher.call(tool, arguments)


@pytest.mark.parametrize("tool", sorted(CALLS))
def test_an_absent_concept_id_gets_did_you_mean(tool: str, tmp_path: Path) -> None:
    arguments, field, where = CALLS[tool]
    outcome = _call(tool, arguments, tmp_path)
    structured = outcome.structured
    if where == "error":
        assert outcome.is_error and structured["code"] == "concept_not_found"
        assert structured["diagnostics"][0]["code"] == "recovery_step"  # kept, first
    else:
        assert not outcome.is_error and structured["status"] == "rejected"
        assert structured["diagnostics"][0]["code"] == "concept_not_found"
    suggestions = [d for d in structured["diagnostics"] if d["code"] == "did_you_mean"]
    assert suggestions == [{
        "code": "did_you_mean",
        "severity": "INFO",
        "file": "beans/kenya-nyeri.md",
        "field": field,
        "message": "did you mean 'beans/kenya-nyeri' (Kenya Nyeri Gatomboya AA)?",
        "spec_ref": None,
        "policy_failure": None,
    }]


@pytest.mark.parametrize("tool", sorted(CALLS))
def test_an_id_close_to_nothing_gets_no_did_you_mean(tool: str, tmp_path: Path) -> None:
    arguments, _, _ = CALLS[tool]
    text = json.dumps(arguments).replace("beans/Kenya_Nyeri", "zz/qqqq")
    outcome = _call(tool, json.loads(text), tmp_path)
    codes = [d["code"] for d in outcome.structured["diagnostics"]]
    assert "did_you_mean" not in codes and codes


def test_a_migration_blocker_names_the_suggestions(tmp_bundle: Any) -> None:
    bundle = tmp_bundle({
        "index.md": "# Index\n\n* [Orders](tables/orders.md)\n",
        "tables/orders.md": "---\ntype: Table\ntitle: Orders\n---\n# Orders\n",
    })
    outcome = Dispatcher(ServeConfig(bundles=(bundle,))).call("preview_v02_migration", {
        "generated_by": "human:ann", "timestamp_policy": "preserve", "citation_mappings": [],
        "generated_at": [{"concept_id": "Tables/Orders", "at": "2024-01-01T00:00:00Z"}],
    })
    assert not outcome.is_error, outcome.structured
    blockers = [b for b in outcome.structured["blockers"] if b["code"] == "unknown_concept"]
    assert [b["message"] for b in blockers] == [
        "generated_at names no concept 'Tables/Orders'; did you mean 'tables/orders'?"
    ]


# -- the index after a change ------------------------------------------------------------------


_NAMES = st.sampled_from(["a/x", "a/y", "a/x-y", "b/X_y", "b/x", "x", "a/c/x y", "b/index"])
_TEXTS = st.sampled_from([concept(), concept("X"), concept("x y"), concept("Y"),
                          "---\ntitle: [unclosed\n---\n", "# A folder index\n"])


def _cells(files: dict[str, str]) -> dict[str, Any]:
    from bundle_mcp.loader import deferred

    return {path: deferred(path, text.encode("utf-8")) for path, text in sorted(files.items())}


def _assembled(cells: dict[str, Any], predecessor: Any = None) -> Any:
    from bundle_mcp.loader import assemble_snapshot

    folders = {""} | {p.rsplit("/", 1)[0] for p in cells if "/" in p} | {"a", "b"}
    return assemble_snapshot(cells, frozenset(), frozenset(folders), (), predecessor=predecessor)


def _comparable(index: sg.SuggestionIndex) -> tuple[Any, ...]:
    # The postings' order is no part of the index (the close tier counts and sorts its texts).
    # Nor are the texts' numbers: an update reuses the numbers it let go.
    texts = index.texts
    assert len(set(texts) - {""}) == len([t for t in texts if t])  # each text numbered once
    return (dict(index.by_id), dict(index.by_stem), dict(index.by_title),
            {t: index.carriers(t) for t in texts if t},
            {pair: sorted(texts[n] for n in numbers) for pair, numbers in index.postings.items()})


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(_NAMES, _TEXTS, max_size=7),
       st.dictionaries(_NAMES, st.none() | _TEXTS, min_size=1, max_size=4))
def test_an_updated_index_equals_the_index_built_anew(
    files: dict[str, str], changes: dict[str, str | None]
) -> None:
    """Deleting, creating, editing (a title, a broken file, a reserved name), several at once:
    the index updated from the previous capture's is the one a build gives, and so is every
    suggestion."""
    before = _assembled(_cells({f"{n}.md": t for n, t in files.items()}))
    cells = dict(before.documents.cells)
    for name, text in changes.items():
        if text is None:
            cells.pop(f"{name}.md", None)
        else:
            cells.update(_cells({f"{name}.md": text}))
    after = _assembled(cells, predecessor=before)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sg, "MAX_UPDATED_SHARE", 100.0)  # update however much changed
        updated = sg.updated_index(sg.build_index(before), before, after)
    assert updated is not None
    assert _comparable(updated) == _comparable(sg.build_index(after))
    for request in ("a/x", "x", "b/x-y", "a/xy", "Y", "c/x yy"):
        assert sg.suggest(after, request) == sg.suggest(
            _assembled(dict(after.documents.cells)), request)


def test_a_change_updates_the_previous_index_instead_of_building_one() -> None:
    """With the previous capture still held and its index built, the next capture's index is
    that one updated: only the changed concept's texts are folded again."""
    files = {f"f{n % 5}/item-{n:03d}.md": concept(f"Item {n}") for n in range(200)}
    before = _assembled(_cells(files))
    sg.index_of(before)
    cells = dict(before.documents.cells)
    del cells["f3/item-013.md"]
    after = _assembled(cells, predecessor=before)
    folded: list[str] = []
    builds: list[int] = []
    real_loose, real_build = sg.loose, sg.build_index
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sg, "loose", lambda text: folded.append(text) or real_loose(text))
        patch.setattr(sg, "build_index", lambda s: builds.append(1) or real_build(s))
        found = sg.suggest(after, "f3/item-013")
    assert builds == []
    # The deleted concept's ID, stem and title, then the request and its last segment.
    assert len(folded) == 5, folded
    assert [s.concept_id for s in found] == [
        s.concept_id for s in sg.suggest(_assembled(dict(after.documents.cells)), "f3/item-013")]
    assert "f3/item-013" not in {s.concept_id for s in found}


@pytest.mark.parametrize("middle", ["unwarmed", "gone"])
def test_an_index_further_back_is_updated_when_the_predecessor_has_none(middle: str) -> None:
    """An edit, then a miss before the edit's warm-up built its index (or after nothing held
    the edit's capture any more): the capture before the edit still holds one, and the miss's
    index is that one updated over both changes (equal to a build), not built anew."""
    import gc

    files = {f"f{n % 5}/item-{n:03d}.md": concept(f"Item {n}") for n in range(200)}
    first = _assembled(_cells(files))
    sg.index_of(first)
    cells = dict(first.documents.cells)
    cells.update(_cells({"f1/item-001.md": concept("Item one, renamed")}))
    edited = _assembled(dict(cells), predecessor=first)  # no index: its warm-up never got there
    del cells["f3/item-013.md"]
    missed = _assembled(cells, predecessor=edited)
    if middle == "gone":
        del edited
        gc.collect()
        assert missed.predecessor() is None and missed.earlier() == [first]
    builds: list[int] = []
    real_build = sg.build_index
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sg, "build_index", lambda s: builds.append(1) or real_build(s))
        index = sg.index_of(missed)
    assert builds == []
    assert _comparable(index) == _comparable(sg.build_index(missed))
    assert "item one, renamed" in index.by_title


def test_a_snapshot_does_not_keep_its_predecessor_alive() -> None:
    import gc
    import weakref

    before = _assembled(_cells({"a/x.md": concept("X")}))
    after = _assembled(dict(before.documents.cells), predecessor=before)
    assert after.predecessor() is before
    gone = weakref.ref(before)
    del before
    gc.collect()
    assert gone() is None and after.predecessor() is None
    assert [s.concept_id for s in sg.suggest(after, "a/xx")] == ["a/x"]  # built anew


def test_a_snapshot_reaches_a_few_earlier_captures_and_keeps_none_alive() -> None:
    import gc
    import weakref

    from bundle_mcp.model import EARLIER_KEPT

    chain = [_assembled(_cells({"a/x.md": concept("X")}))]
    for n in range(EARLIER_KEPT + 2):
        chain.append(_assembled(_cells({"a/x.md": concept(f"X {n}")}), predecessor=chain[-1]))
    last = chain[-1]
    assert last.earlier() == chain[-2::-1][:EARLIER_KEPT]
    refs = [weakref.ref(s) for s in chain[:-1]]
    del chain
    gc.collect()
    assert all(ref() is None for ref in refs) and last.earlier() == []


def test_an_update_past_what_two_byte_numbers_hold_builds_anew() -> None:
    """Text numbers are kept in two bytes while they fit: an update that would number a text
    past them gives way to a build (whose arrays are wide enough)."""
    before = _assembled(_cells({"a/x.md": concept("X")}))
    cells = dict(before.documents.cells)
    cells.update(_cells({"a/y.md": concept("Y")}))
    after = _assembled(cells, predecessor=before)
    built = sg.build_index(before)
    assert {a.typecode for a in built.postings.values()} == {"H"}
    full = sg.SuggestionIndex(
        built.by_id, built.by_stem, built.by_title,
        (*built.texts, *(f"filler {n}" for n in range((1 << 16) - len(built.texts)))),
        built.postings,
    )
    assert sg.updated_index(full, before, after) is None
    updated = sg.updated_index(built, before, after)
    assert updated is not None
    assert _comparable(updated) == _comparable(sg.build_index(after))
