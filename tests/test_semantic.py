"""search_semantic and the SemanticIndex with a fake embedder: no model, no extra needed.

The fake embeds a bag of words into 64 hashed dimensions, so similarity is word overlap and the
expected winners are obvious. The real model has its own tests in test_semantic_model.py.
"""

from __future__ import annotations

import hashlib
import os
import threading
import types
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.contracts import ContractSet
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.errors import BundleError
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.document import parse_document
from bundle_mcp.model import Snapshot, revision_of
from bundle_mcp.semantic import (
    NOT_READY,
    PARTIAL,
    READY,
    UNAVAILABLE,
    EmbedderSource,
    SemanticIndex,
    VectorCache,
    default_cache_dir,
)
from bundle_mcp.semantic.cache import text_key
from bundle_mcp.semantic.index import concept_text
from bundle_mcp.semantic.vectors import Vector, unit
from bundle_mcp.tools import search_semantic
from toolcall import run_tool

REPO = Path(__file__).resolve().parent.parent
GRAPH = os.path.realpath(REPO / "testdata" / "bundles" / "subgraph-graph")
CONTRACTS = ContractSet()
DIM = 64
WAIT = 20.0


def snapshot_of(files: dict[str, str]) -> Snapshot:
    """An in-memory snapshot of ``{path: text}`` (the loader's parse, without a folder)."""
    documents = {path: parse_document(path, text.encode("utf-8")) for path, text in files.items()}
    concepts = {d.concept_id: d for d in documents.values() if d.concept_id is not None}
    return Snapshot(
        revision=revision_of([d.record for d in documents.values()]),
        documents=types.MappingProxyType(documents),
        concepts=types.MappingProxyType(dict(sorted(concepts.items()))),
        assets=frozenset(),
        directories=frozenset(),
        skipped=(),
    )


def note(type_: str = "Note", title: str = "", extra: str = "", body: str = "") -> str:
    head = f"---\ntype: {type_}\n" + (f"title: {title}\n" if title else "") + extra + "---\n"
    return head + body


class BagOfWords:
    """Deterministic word-hash vectors; remembers every text it embedded."""

    def __init__(self) -> None:
        self.encoded: list[str] = []

    def encode(self, texts: Sequence[str]) -> list[Vector | None]:
        self.encoded.extend(texts)
        return [bag(text) for text in texts]


def bag(text: str) -> Vector | None:
    values = [0.0] * DIM
    for word in text.lower().split():
        digest = hashlib.sha256(word.strip(".,:;!?()[]").encode()).digest()
        values[digest[0] % DIM] += 1.0
    return unit(values)


def source(embedder: Any = None, *, available: bool = True, load: Any = None) -> EmbedderSource:
    made = embedder if embedder is not None else BagOfWords()
    return EmbedderSource(
        model_key="fake-bag-of-words",
        dimension=DIM,
        max_chars=2000,
        available=lambda: available,
        load=load if load is not None else (lambda: made),
    )


COFFEE = {
    "roast.md": note(
        "Process",
        "Roasting",
        "description: how to roast coffee beans\n",
        "Heat the green coffee beans until first crack.\n",
    ),
    "ledger.md": note(
        "Table",
        "Ledger",
        "description: accounting ledger table\n",
        "Debits and credits per account. See [roast](roast.md).\n",
    ),
    "brew.md": note(
        "Process",
        "Brewing",
        "description: brewing coffee\n",
        "Grind roasted beans and pour water.\n",
    ),
    "tax.md": note("Table", "Taxes", "", "Tax rates per country.\n"),
}


def disk(root: Path) -> VectorCache:
    return VectorCache.for_source(root, source())


class HeldCache(VectorCache):
    """A cache whose lookup of one text waits for a gate: the worker pauses between batches
    without holding the model, as it does while a slow batch is read from disk."""

    def __init__(self, root: Path, held: bytes, gate: threading.Event) -> None:
        super().__init__(root, "fake-bag-of-words", DIM)
        self._held = held
        self._gate = gate

    def get(self, key: bytes) -> Vector | None:
        if key == self._held:
            self._gate.wait(WAIT)
        return super().get(key)


@pytest.fixture
def coffee() -> Snapshot:
    return snapshot_of(COFFEE)


@pytest.fixture
def index(tmp_path: Path):
    made = SemanticIndex(source(), disk(tmp_path / "cache"), batch_size=2)
    yield made
    made.close()


def call(snapshot: Snapshot, index: SemanticIndex | None, **params: Any) -> dict[str, Any]:
    result = run_tool(search_semantic, snapshot, params, CancelToken(), semantic=index)
    CONTRACTS.check_output("search_semantic", result)
    return result


# -- search ----------------------------------------------------------------------------------


def test_status_is_not_ready_until_the_worker_fills(coffee: Snapshot, index: SemanticIndex) -> None:
    assert index.status(coffee) == NOT_READY  # nothing started by looking
    assert index.wait(coffee, WAIT) == READY


def test_vector_match_expands_with_query_subgraph(coffee: Snapshot, index: SemanticIndex) -> None:
    index.wait(coffee, WAIT)
    result = call(coffee, index, query="accounting ledger debits credits", top_k=1)
    assert result["matched_seeds"] == ["ledger"]
    assert set(result["scores"]) == {"ledger"} and 0 < result["scores"]["ledger"] <= 1
    assert result["embedding_status"] == READY
    assert [n["id"] for n in result["subgraph"]["nodes"]] == ["ledger", "roast"]
    assert result["subgraph"]["edges"] == [
        {"source": "ledger", "target": "roast", "type": "LINKS_TO"}
    ]


def test_hits_sort_by_score_then_id_and_respect_top_k(
    coffee: Snapshot, index: SemanticIndex
) -> None:
    index.wait(coffee, WAIT)
    result = call(coffee, index, query="coffee beans", top_k=99, depth=0)
    scores = result["scores"]
    order = result["matched_seeds"]
    assert order == sorted(order, key=lambda cid: (-scores[cid], cid))
    assert order[0] in ("roast", "brew") and len(order) == 4
    assert result["meta"]["applied"]["top_k"] == 20


def test_min_score_drops_weak_matches(coffee: Snapshot, index: SemanticIndex) -> None:
    index.wait(coffee, WAIT)
    every = call(coffee, index, query="coffee beans", top_k=20, depth=0)
    best = max(every["scores"].values())
    strict = call(coffee, index, query="coffee beans", top_k=20, depth=0, min_score=best)
    assert strict["min_score"] == best
    assert all(score >= best for score in strict["scores"].values())
    nothing = call(coffee, index, query="zzz qqq", min_score=1.0)
    assert nothing["matched_seeds"] == [] and nothing["subgraph"] == {"nodes": [], "edges": []}


def test_answers_are_identical_when_asked_twice(coffee: Snapshot, index: SemanticIndex) -> None:
    index.wait(coffee, WAIT)
    first = call(coffee, index, query="brewing coffee")
    assert call(coffee, index, query="brewing coffee") == first


def test_seed_ids_skip_vectors_and_scores_stay_empty(coffee: Snapshot) -> None:
    result = call(coffee, None, query="anything", seed_ids=["tax", "ghost"], depth=0)
    assert result["matched_seeds"] == ["tax"]
    assert result["scores"] == {}
    assert result["meta"]["unresolved"] == ["ghost"]
    assert result["embedding_status"] == UNAVAILABLE


def test_seed_ids_warm_the_index(coffee: Snapshot, index: SemanticIndex) -> None:
    result = call(coffee, index, query="x", seed_ids=["tax"])
    assert result["embedding_status"] in (NOT_READY, PARTIAL, READY)
    assert index.wait(coffee, WAIT) == READY


# -- not ready, unavailable ------------------------------------------------------------------


def rejection(snapshot: Snapshot, index: SemanticIndex | None) -> BundleError:
    with pytest.raises(BundleError) as info:
        run_tool(search_semantic, snapshot, {"query": "coffee"}, CancelToken(), semantic=index)
    assert info.value.code == "operation_rejected"
    return info.value


def steps(error: BundleError) -> list[str]:
    return [d.message for d in error.diagnostics if d.code == "recovery_step"]


def test_not_ready_is_a_clear_rejection(coffee: Snapshot, tmp_path: Path) -> None:
    gate = threading.Event()
    loading = SemanticIndex(source(load=lambda: (gate.wait(WAIT), BagOfWords())[1]), None)
    try:
        error = rejection(coffee, loading)
        assert steps(error) == ["retry in a few seconds or pass seed_ids"]
        assert not error.retryable
    finally:
        gate.set()
        loading.close()


def test_partial_index_answers_from_what_exists(coffee: Snapshot, tmp_path: Path) -> None:
    gate = threading.Event()
    held = text_key("fake-bag-of-words", concept_text(coffee.concepts["ledger"], 2000))
    partial = SemanticIndex(source(), HeldCache(tmp_path, held, gate), batch_size=1)
    try:
        partial.ensure(coffee)
        for _ in range(200):
            if partial.status(coffee) == PARTIAL:
                break
            threading.Event().wait(0.02)
        result = call(coffee, partial, query="brewing coffee", top_k=5)
        assert result["embedding_status"] == PARTIAL
        assert result["matched_seeds"] == ["brew"]  # the one concept embedded so far
    finally:
        gate.set()
        partial.close()


def test_missing_extra_says_how_to_install(coffee: Snapshot, tmp_path: Path) -> None:
    missing = SemanticIndex(source(available=False), None)
    assert "pip install 'bundle-mcp[semantic]'" in steps(rejection(coffee, missing))[0]
    assert call(coffee, missing, query="x", seed_ids=["tax"])["embedding_status"] == UNAVAILABLE


def test_no_index_says_so(coffee: Snapshot) -> None:
    error = rejection(coffee, None)
    assert "not enabled" in error.message
    assert "pip install 'bundle-mcp[semantic]'" in steps(error)[0]


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_model_that_fails_to_load_makes_the_index_unavailable(
    coffee: Snapshot, tmp_path: Path
) -> None:
    def broken() -> BagOfWords:
        raise OSError("weights missing")

    failing = SemanticIndex(source(load=broken), None)
    assert failing.wait(coffee, WAIT) == UNAVAILABLE
    failing.close()  # joins the worker, so its traceback is reported inside this test
    assert "pip install" in steps(rejection(coffee, failing))[0]


def test_cancellation_during_search(coffee: Snapshot, index: SemanticIndex) -> None:
    index.wait(coffee, WAIT)
    token = CancelToken()
    token.cancel()
    with pytest.raises(BundleError) as info:
        run_tool(search_semantic, coffee, {"query": "coffee"}, token, semantic=index)
    assert info.value.code == "operation_cancelled"


# -- the worker and the disk cache -----------------------------------------------------------


def test_disk_cache_avoids_recomputing(coffee: Snapshot, tmp_path: Path) -> None:
    first = BagOfWords()
    one = SemanticIndex(source(first), disk(tmp_path))
    assert one.wait(coffee, WAIT) == READY
    one.close()
    assert len(first.encoded) == 4
    assert len(list((tmp_path / "fake-bag-of-words").rglob("*.vec"))) == 4

    second = BagOfWords()
    two = SemanticIndex(source(second), disk(tmp_path))
    assert two.wait(coffee, WAIT) == READY
    two.close()
    assert second.encoded == []


def test_a_changed_concept_is_the_only_one_embedded_again(coffee: Snapshot) -> None:
    embedder = BagOfWords()
    index = SemanticIndex(source(embedder), None)  # no disk cache: reuse comes from memory
    try:
        index.wait(coffee, WAIT)
        before = len(embedder.encoded)
        edited = snapshot_of({**COFFEE, "tax.md": note("Table", "Taxes", "", "New rates.\n")})
        assert index.wait(edited, WAIT) == READY
        assert embedder.encoded[before:] == [concept_text(edited.concepts["tax"], 2000)]
    finally:
        index.close()


def test_corrupt_and_foreign_entries_are_ignored(tmp_path: Path) -> None:
    cache = VectorCache(tmp_path, "m", 4)
    key = text_key("m", "hello")
    vector = unit([1.0, 2.0, 3.0, 4.0])
    assert vector is not None
    cache.put(key, vector)
    assert list(cache.get(key) or []) == pytest.approx(list(vector))
    path = next(tmp_path.rglob("*.vec"))
    good = path.read_bytes()

    path.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))  # a flipped bit
    assert cache.get(key) is None
    path.write_bytes(good[:20])  # truncated
    assert cache.get(key) is None
    path.write_bytes(b"not a vector file at all" * 10)
    assert cache.get(key) is None
    path.write_bytes(good)
    assert VectorCache(tmp_path, "m", 8).get(key) is None  # another dimension: foreign
    other = text_key("m", "other text")
    (path.parent / f"{other.hex()}.vec").write_bytes(good)  # someone else's bytes
    assert cache.get(other) is None
    cache.put(key, vector)  # recomputed entries overwrite what was there
    assert cache.get(key) is not None


def test_a_corrupt_entry_is_recomputed_by_the_worker(coffee: Snapshot, tmp_path: Path) -> None:
    warm = SemanticIndex(source(), disk(tmp_path))
    warm.wait(coffee, WAIT)
    warm.close()
    for path in (tmp_path / "fake-bag-of-words").rglob("*.vec"):
        path.write_bytes(b"garbage")
    again = BagOfWords()
    fresh = SemanticIndex(source(again), disk(tmp_path))
    assert fresh.wait(coffee, WAIT) == READY
    fresh.close()
    assert len(again.encoded) == 4


def test_unwritable_cache_only_costs_speed(coffee: Snapshot, tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    index = SemanticIndex(source(), disk(blocker))
    assert index.wait(coffee, WAIT) == READY
    index.close()


def test_least_recently_used_snapshot_is_dropped(coffee: Snapshot, tmp_path: Path) -> None:
    small = SemanticIndex(source(), None, max_snapshots=1)
    try:
        small.wait(coffee, WAIT)
        other = snapshot_of({"x.md": note(title="X")})
        assert small.wait(other, WAIT) == READY
        assert small.status(coffee) == NOT_READY
    finally:
        small.close()


def test_close_stops_the_worker(coffee: Snapshot, tmp_path: Path) -> None:
    index = SemanticIndex(source(), None)
    index.wait(coffee, WAIT)
    index.close()
    thread = index._thread
    assert thread is not None and not thread.is_alive()
    assert index.ensure(coffee) == UNAVAILABLE


def test_concept_text_is_title_description_body_cut() -> None:
    snapshot = snapshot_of({"a.md": note(title="T", extra="description: D\n", body="B " * 50)})
    doc = snapshot.concepts["a"]
    assert concept_text(doc, 10_000).startswith("T\nD\nB B")
    assert len(concept_text(doc, 7)) == 7
    untitled = snapshot_of({"dir/b.md": note()}).concepts["dir/b"]
    assert concept_text(untitled, 100) == "dir/b"


def test_default_cache_dir_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert default_cache_dir() == tmp_path / "bundle-mcp" / "embeddings"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/path")  # not absolute: ignored (XDG spec)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_cache_dir() == tmp_path / "home" / ".cache" / "bundle-mcp" / "embeddings"


# -- through the dispatcher ------------------------------------------------------------------


def test_through_the_dispatch_path(index: SemanticIndex) -> None:
    """The contract checks of the real pipeline, with the index bound the way the hook will."""
    tools = {"search_semantic": search_semantic.SPEC}
    dispatcher = Dispatcher(ServeConfig(bundles=(GRAPH,)), tools=tools, semantic=index)
    snapshot, _ = load_bundle(GRAPH)
    index.wait(snapshot, WAIT)
    outcome = dispatcher.call("search_semantic", {"query": "ledger table", "top_k": 2})
    assert not outcome.is_error, outcome.structured
    assert outcome.structured["embedding_status"] == READY
    assert len(outcome.structured["matched_seeds"]) == 2
    bad = dispatcher.call("search_semantic", {"query": "x", "top_k": "3"})
    assert bad.is_error and bad.structured["code"] == "invalid_request"


def test_a_one_shot_index_waits_for_its_vectors(coffee: Snapshot) -> None:
    """``bundle-mcp call`` has one request: its index waits instead of answering not_ready."""
    patient = SemanticIndex(source(), None, wait_seconds=WAIT)
    try:
        result = call(coffee, patient, query="brewing coffee", top_k=1)
        assert result["embedding_status"] == READY
        assert result["matched_seeds"] == ["brew"]
    finally:
        patient.close()


def test_waiting_stops_when_the_call_is_cancelled(coffee: Snapshot) -> None:
    gate = threading.Event()
    stuck = SemanticIndex(source(load=lambda: (gate.wait(WAIT), BagOfWords())[1]), None)
    token = CancelToken(deadline_seconds=0.2)
    try:
        with pytest.raises(BundleError) as info:
            stuck.wait(coffee, WAIT, token)
        assert info.value.code == "operation_cancelled"
    finally:
        gate.set()
        stuck.close()


def test_views_taking_turns_keep_their_vectors_once_reserved() -> None:
    """Readers' views are snapshots of their own. Past max_snapshots they pushed each other
    out, and a reader whose entry was dropped got not_ready (search_semantic: 'not ready yet')
    on every turn; reserve() keeps room for each, and the vectors stay shared."""
    views = [snapshot_of({k: v for k, v in COFFEE.items() if k != left_out})
             for left_out in ("roast.md", "ledger.md", "brew.md")]
    embedder = BagOfWords()
    crowded = SemanticIndex(source(embedder), None, max_snapshots=2)
    try:
        for view in views:
            assert crowded.wait(view, WAIT) == READY
        assert crowded.status(views[0]) == NOT_READY  # pushed out by the third
    finally:
        crowded.close()

    embedder = BagOfWords()
    roomy = SemanticIndex(source(embedder), None, max_snapshots=2)
    roomy.reserve(3)
    try:
        assert roomy.capacity == 6
        for view in views:
            assert roomy.wait(view, WAIT) == READY
        for _turn in range(3):
            assert [roomy.status(view) for view in views] == [READY] * 3
        assert len(embedder.encoded) == 4  # each concept's text embedded once for all views
        roomy.reserve(0)
        assert roomy.capacity == 2  # never below what it was made with
    finally:
        roomy.close()
