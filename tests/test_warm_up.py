"""The background warm-up, single-flight builds and kept answers (issue 13).

Behaviour only: what is built, who waits for whom, what is reused. No test here reads a clock to
judge speed; the figures live in ``make bench``.
"""

from __future__ import annotations

import gc
import itertools
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp import derived
from bundle_mcp import readiness as readiness_module
from bundle_mcp.cancel import CancelToken
from bundle_mcp.contracts.files import INPUT_SUFFIX
from bundle_mcp.derived import built_value
from bundle_mcp.dispatch import ANSWERS, CallGate, Dispatcher, ServeConfig
from bundle_mcp.errors import BundleError, resource_limit
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.loader.views import reader_view
from bundle_mcp.model import Memo, Snapshot
from bundle_mcp.okf.scopes import NOTHING, Access, FolderScope
from bundle_mcp.readers import ALL_READER, Reader
from bundle_mcp.readiness import Readiness, StepAside, WarmStep, warm_steps
from bundle_mcp.snapshots import SnapshotCache
from bundle_mcp.tools._context_index import CONTEXT_INDEX, stop_stems
from bundle_mcp.tools._section_index import SECTION_WORD_TOTALS
from bundle_mcp.validation import ORPHAN_FINDINGS
from conftest import FakeTools, fake_spec

WAIT_SECONDS = 60
INDEX = "# Shop\n\n- [Orders](orders.md)\n- [Returns](returns.md)\n"
ORDERS = (
    "---\ntype: table\ntitle: Orders\n---\n# Orders\n\nOne row per order, see [r](returns.md).\n"
)
RETURNS = "---\ntype: table\ntitle: Returns\n---\n# Returns\n\nOne row per return.\n"


# ------------------------------------------------------------------------- single-flight memo


def test_a_second_thread_waits_for_the_build_instead_of_building_again() -> None:
    memo = Memo()
    started, release = threading.Event(), threading.Event()
    builds: list[str] = []

    def slow() -> str:
        builds.append("slow")
        started.set()
        release.wait(WAIT_SECONDS)
        return "value"

    first = threading.Thread(target=lambda: memo.get("k", slow))
    first.start()
    assert started.wait(WAIT_SECONDS)
    got: list[str] = []
    second = threading.Thread(target=lambda: got.append(memo.get("k", lambda: "other")))
    second.start()
    second.join(0.2)
    assert second.is_alive(), "the second caller should wait for the running build"
    release.set()
    first.join(WAIT_SECONDS)
    second.join(WAIT_SECONDS)
    assert got == ["value"] and builds == ["slow"]


def test_a_cancelled_waiter_stops_waiting_and_the_build_goes_on() -> None:
    memo = Memo()
    started, release = threading.Event(), threading.Event()

    def slow() -> int:
        started.set()
        release.wait(WAIT_SECONDS)
        return 1

    builder = threading.Thread(target=lambda: memo.get("k", slow))
    builder.start()
    assert started.wait(WAIT_SECONDS)
    token = CancelToken()
    token.cancel()
    with pytest.raises(BundleError) as caught:
        memo.get("k", lambda: 2, token.check)
    assert caught.value.code == "operation_cancelled"
    release.set()
    builder.join(WAIT_SECONDS)
    assert memo.get("k", lambda: 3) == 1


def test_when_the_build_fails_a_waiter_builds_it_itself() -> None:
    memo = Memo()
    started, release = threading.Event(), threading.Event()

    def failing() -> int:
        started.set()
        release.wait(WAIT_SECONDS)
        raise ValueError("the builder's own failure")

    errors: list[BaseException] = []

    def build() -> None:
        try:
            memo.get("k", failing)
        except ValueError as exc:
            errors.append(exc)

    builder = threading.Thread(target=build)
    builder.start()
    assert started.wait(WAIT_SECONDS)
    got: list[int] = []
    waiter = threading.Thread(target=lambda: got.append(memo.get("k", lambda: 7)))
    waiter.start()
    release.set()
    builder.join(WAIT_SECONDS)
    waiter.join(WAIT_SECONDS)
    assert len(errors) == 1 and got == [7]


def test_a_factory_that_needs_its_own_key_is_an_error_not_a_deadlock() -> None:
    memo = Memo()
    with pytest.raises(RuntimeError, match="its own factory"):
        memo.get("k", lambda: memo.get("k", lambda: 1))


def test_a_bounded_memo_drops_the_oldest_value() -> None:
    memo = Memo(max_values=2)
    for key in "abc":
        memo.get(key, lambda key=key: key)  # type: ignore[misc]
    assert memo.keys() == ("b", "c")


# ------------------------------------------------------------------------- kept answers


def test_a_repeat_of_a_large_read_returns_the_kept_answer(
    tmp_bundle: Callable[..., str],
) -> None:
    bundle = tmp_bundle({"index.md": INDEX, "orders.md": ORDERS, "returns.md": RETURNS})
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    first = dispatcher.call("list_concepts", {})
    assert not first.is_error
    assert dispatcher.call("list_concepts", {}) is first
    # Other arguments are another answer; a tool that does not keep answers recomputes.
    other = dispatcher.call("list_concepts", {"as_of": "2026-01-01"})
    assert other is not first and other.structured != first.structured
    read = dispatcher.call("read_concept", {"concept_id": "orders"})
    assert dispatcher.call("read_concept", {"concept_id": "orders"}) is not read

    # A changed bundle is a new snapshot: the answer is computed again, and it changed.
    Path(bundle, "returns.md").write_text(RETURNS.replace("Returns", "Refunds"), encoding="utf-8")
    changed = dispatcher.call("list_concepts", {})
    assert changed is not first
    assert changed.structured != first.structured


def test_an_error_is_never_kept(fake_tools: FakeTools, simple_bundle: str) -> None:
    attempts: list[int] = []

    def flaky(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
        attempts.append(1)
        if len(attempts) == 1:
            raise resource_limit("the first attempt fails", "try again")
        return {"word": "ok", "concepts": list(snapshot.concepts), "revision": snapshot.revision}

    def bad(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
        attempts.append(2)
        return {"word": 5, "concepts": [], "revision": snapshot.revision}

    fake_tools.modules["echo"] = fake_spec("echo", flaky, cache_results=True)
    fake_tools.modules["bad"] = fake_spec("bad", bad, cache_results=True)
    dispatcher = fake_tools.dispatcher(bundles=(simple_bundle,))
    assert dispatcher.call("echo", {}).is_error
    ok = dispatcher.call("echo", {})
    assert not ok.is_error and dispatcher.call("echo", {}) is ok
    assert attempts == [1, 1]
    # An answer that breaks its output contract is an internal error, and is run again.
    assert dispatcher.call("bad", {}).is_error and dispatcher.call("bad", {}).is_error
    assert attempts.count(2) == 2


def test_only_a_read_only_tool_may_keep_answers() -> None:
    with pytest.raises(ValueError, match="read-only"):
        fake_spec("write_thing", lambda *args: {}, read_only=False, cache_results=True)


# ------------------------------------------------------------------------- following the bundle


def test_the_warm_up_follows_an_edit(tmp_bundle: Callable[..., str]) -> None:
    bundle = tmp_bundle({"index.md": INDEX, "orders.md": ORDERS, "returns.md": RETURNS})
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    readiness = Readiness(dispatcher)
    readiness.start()
    try:
        assert readiness.wait_idle(WAIT_SECONDS)
        before = dispatcher.served_snapshot(bundle, CancelToken())
        _edit_orders(bundle)
        # A call sees the change: the warm-up builds the new snapshot behind it.
        assert not dispatcher.call("read_concept", {"concept_id": "orders"}).is_error
        assert readiness.wait_idle(WAIT_SECONDS)
        after = dispatcher.served_snapshot(bundle, CancelToken())
        assert after is not before
        counts = derived.built(after)
        for slot in (SECTION_WORD_TOTALS, ORPHAN_FINDINGS, ANSWERS):
            assert counts[slot.name] > 0, f"the follow-up warm-up should have built {slot.name}"
        # The unchanged document kept its structures: the same object, not a rebuild.
        assert after.concepts["returns"] is before.concepts["returns"]
    finally:
        readiness.stop()


def _edit_orders(bundle: str) -> None:
    """Change orders.md, with an mtime the next stat walk surely sees as new."""
    orders = Path(bundle, "orders.md")
    orders.write_text(ORDERS + "\nMore about orders.\n", encoding="utf-8")
    stat = orders.stat()
    os.utime(orders, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10_000_000))


def test_the_follow_up_warm_up_empties_the_replaced_views_memo(
    tmp_bundle: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: after an edit, the warm-up held the replaced view's structures while it built
    the successor's (frozen, with reference cycles: they went only at its final collection),
    two sets at once. It now empties the replaced view's memo before it builds a slot, all but
    the carried slots, which the successor's builders update (the 'did you mean' index is
    updated, not built anew), and those right after the step that built the successor's own."""
    from bundle_mcp.okf import suggest
    from bundle_mcp.tools import _body_words

    bundle = tmp_bundle({"index.md": INDEX, "orders.md": ORDERS, "returns.md": RETURNS})
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    events: list[str] = []
    readiness = Readiness(dispatcher, steps=_recorded_steps(events))
    readiness.start()
    try:
        assert readiness.wait_idle(WAIT_SECONDS)
        before = dispatcher.served_snapshot(bundle, CancelToken())
        assert {"concept_suggestions", "graph", "answers"} <= _snapshot_slots(before)
        assert "edges" in vars(before)
        built_anew: list[Snapshot] = []
        real_build, real_release = suggest.build_index, derived.release
        monkeypatch.setattr(suggest, "build_index",
                            lambda snapshot: built_anew.append(snapshot) or real_build(snapshot))
        real_words = _body_words.build_index
        monkeypatch.setattr(_body_words, "build_index", lambda snapshot, token: (
            built_anew.append(snapshot) or real_words(snapshot, token)))

        def release(snapshot: Snapshot, *, carried: bool) -> None:
            assert snapshot is before
            events.append(f"release carried={carried}")
            real_release(snapshot, carried=carried)

        monkeypatch.setattr(derived, "release", release)
        events.clear()
        _edit_orders(bundle)
        assert not dispatcher.call("read_concept", {"concept_id": "orders"}).is_error
        assert readiness.wait_idle(WAIT_SECONDS)
        after = dispatcher.served_snapshot(bundle, CancelToken())
    finally:
        readiness.stop()
    assert after is not before and after.predecessor() is before
    assert _snapshot_slots(before) == set()
    assert "edges" not in vars(before) and "edges_by_concept" not in vars(before)
    assert derived.kept(after, suggest.CONCEPT_SUGGESTIONS) is not None
    assert derived.kept(after, _body_words.BODY_WORDS) is not None
    assert built_anew == []  # both carried indexes updated from the replaced view's
    assert "graph" in _snapshot_slots(after)
    # After the new view's documents and edges (Python code a call's thread can interleave
    # with; freeing holds the interpreter lock), before its first slot.
    builds = [e for e in events if e.startswith(("build ", "release "))]
    first = builds.index("release carried=False")
    assert builds[first - 1] == "build edges", builds
    assert all(e.startswith("build documents") for e in builds[:first - 1]), builds
    carried = builds.index("release carried=True")
    last_carried = [slot.name for slot in derived.slots() if slot.carried and slot.warm][-1]
    assert builds[carried - 1] == f"build {last_carried}", builds
    assert builds.index("build concept_suggestions") < carried


def test_a_serving_warm_up_freezes_what_it_built(tmp_bundle: Callable[..., str]) -> None:
    bundle = tmp_bundle({"index.md": INDEX, "orders.md": ORDERS, "returns.md": RETURNS})
    readiness = Readiness(Dispatcher(ServeConfig(bundles=(bundle,))), freeze_memory=True)
    gc.unfreeze()
    try:
        readiness.start()
        assert readiness.wait_idle(WAIT_SECONDS)
        assert gc.get_freeze_count() > 0
    finally:
        readiness.stop()
        gc.unfreeze()


def _freeze_counts_at_each_step(bundle: str, freeze: bool) -> list[int]:
    """``gc.get_freeze_count()`` as each of three warm-up steps starts."""
    seen: list[int] = []
    kept: list[object] = []

    def step(token: CancelToken) -> None:
        seen.append(gc.get_freeze_count())
        kept.append([[n] for n in range(100)])  # built by the step, kept after it

    def steps(dispatcher: Dispatcher, bundle: str, reader: Any, view: Snapshot
              ) -> list[WarmStep]:
        return [WarmStep(f"step {n}", step) for n in range(3)]

    # Nothing else frees frozen objects meanwhile (the count is the process's): an earlier
    # test's background writes are waited for, and this load's save is not made.
    for thread in threading.enumerate():
        if thread.name in ("bundle-mcp-parse-cache", "bundle-mcp-kept-part"):
            thread.join(WAIT_SECONDS)
    readiness = Readiness(Dispatcher(ServeConfig(bundles=(bundle,))),
                          freeze_memory=freeze, steps=steps)
    gc.unfreeze()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SnapshotCache, "persist", lambda *args, **kwargs: None)
        try:
            readiness.start()
            assert readiness.wait_idle(WAIT_SECONDS)
        finally:
            readiness.stop()
            gc.unfreeze()
    return seen


def test_a_serving_warm_up_freezes_after_each_step(tmp_bundle: Callable[..., str]) -> None:
    """What the load and each step built is frozen before the next step starts, so the
    collector's automatic full passes during the warm-up walk only what the step in progress
    made (the loaded snapshot, unfrozen, made a first step's passes pause up to 50 ms at
    9,978 concepts); without freeze_memory nothing is frozen."""
    bundle = tmp_bundle({"index.md": INDEX, "orders.md": ORDERS, "returns.md": RETURNS})
    frozen = _freeze_counts_at_each_step(bundle, True)
    assert len(frozen) == 3 and 0 < frozen[0] < frozen[1] < frozen[2], frozen
    assert _freeze_counts_at_each_step(bundle, False) == [0, 0, 0]


def test_after_a_change_the_warm_up_collects_only_what_it_made(
    tmp_bundle: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 29: every warm-up after a change ended with a full collection of the whole heap
    (0.6 s under the interpreter lock at 10,000 concepts), which found nothing to free once the
    replaced view's structures were let go. When the replaced view is gone, nothing is
    unfrozen: each step's own objects are collected and frozen; when something still holds it,
    the full collection runs as before."""
    bundle = tmp_bundle({"index.md": INDEX, "orders.md": ORDERS, "returns.md": RETURNS})
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    readiness = Readiness(dispatcher, freeze_memory=True)
    unfrozen: list[int] = []
    real_unfreeze = gc.unfreeze
    gc.unfreeze()
    try:
        readiness.start()
        assert readiness.wait_idle(WAIT_SECONDS)
        monkeypatch.setattr(gc, "unfreeze", lambda: unfrozen.append(1) or real_unfreeze())
        # A background save of the parse cache holds the snapshot it saves for a moment (a
        # timer, then the save): here none is pending, so the replaced view is gone at the end.
        # The writes of kept parts (answers, whole-bundle values) are waited for too: each
        # frees what it held when it ends, frozen objects among them (the count goes down).
        for thread in threading.enumerate():
            if thread.name in ("bundle-mcp-parse-cache", "bundle-mcp-kept-part"):
                thread.join()
        del thread  # a finished timer still holds its save, and the save its snapshot
        monkeypatch.setattr(SnapshotCache, "persist", lambda *args, **kwargs: None)
        # Counted as calls: the number of frozen objects also falls as the replaced view's
        # frozen structures are freed, by more than a step of this small bundle freezes.
        frozen: list[int] = []
        real_freeze = gc.freeze
        monkeypatch.setattr(gc, "freeze", lambda: frozen.append(1) or real_freeze())
        _edit_orders(bundle)
        assert not dispatcher.call("read_concept", {"concept_id": "orders"}).is_error
        assert readiness.wait_idle(WAIT_SECONDS)
        assert unfrozen == [] and len(frozen) > 1
        held = dispatcher.served_snapshot(bundle, CancelToken())  # a call still reading it
        (Path(bundle) / "returns.md").write_text(RETURNS + "\nOne more line.\n")
        assert not dispatcher.call("read_concept", {"concept_id": "returns"}).is_error
        assert readiness.wait_idle(WAIT_SECONDS)
        assert unfrozen == [1] and held.revision
    finally:
        readiness.stop()
        monkeypatch.undo()
        gc.unfreeze()


# ------------------------------------------------------------------------- readers' views


def _snapshot_slots(snapshot: Snapshot) -> set[str]:
    """The whole-snapshot structures built for this very snapshot (not its documents')."""
    return {key[0].name for key in snapshot.memo.keys()
            if isinstance(key, tuple) and key and isinstance(key[0], derived.Slot)}


def test_the_warm_up_warms_each_readers_view(
    tmp_bundle: Callable[..., str], caplog: pytest.LogCaptureFixture
) -> None:
    """With readers, what calls will run on is each reader's view: the warm-up builds those
    (one per distinct scope), not the whole snapshot's structures no reader uses; a re-read
    readers file (rescope) warms the new scopes. No warm-up call is logged as a reader's."""
    bundle = tmp_bundle({
        "index.md": INDEX,
        "sales/orders.md": ORDERS,
        "sales/returns.md": RETURNS,
        "finance/ledger.md": "---\ntype: table\ntitle: Ledger\n---\n# Ledger\n\nSee "
                             "[orders](../sales/orders.md).\n",
    })
    sales, finance, both = (FolderScope.of(p) for p in (["sales"], ["finance", "/"],
                                                        ["sales", "finance"]))
    served = [sales, finance, sales]
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    readiness = Readiness(dispatcher, scopes=lambda: list(served))
    caplog.set_level("INFO", logger="bundle_mcp.calls")
    readiness.start()
    try:
        assert readiness.wait_idle(WAIT_SECONDS)
        full = dispatcher.refreshed_snapshot(bundle, CancelToken(), ALL_READER)
        assert full is not None
        for scope in (sales, finance):
            view = reader_view(full, scope)
            assert view is not full
            assert {ANSWERS.name, ORPHAN_FINDINGS.name} <= _snapshot_slots(view)
        assert ANSWERS.name not in _snapshot_slots(full)  # nobody reads everything
        assert ANSWERS.name not in _snapshot_slots(reader_view(full, both))

        served[:] = [both]
        readiness.rescope()
        assert readiness.wait_idle(WAIT_SECONDS)
        assert ANSWERS.name in _snapshot_slots(reader_view(full, both))
    finally:
        readiness.stop()
    assert "called by reader" not in caplog.text


def test_without_readers_the_configured_readers_view_is_warmed(
    tmp_bundle: Callable[..., str]
) -> None:
    """stdio's --reader: the dispatcher's configured reader, and after use_reader (SIGHUP), the
    new one once rescoped."""
    bundle = tmp_bundle({"index.md": INDEX, "sales/orders.md": ORDERS, "hr/people.md": RETURNS})
    sales, hr = FolderScope.of(["sales"]), FolderScope.of(["hr"])
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    dispatcher.use_reader(Reader("sales", Access(sales, NOTHING)))
    readiness = Readiness(dispatcher)
    readiness.start()
    try:
        assert readiness.wait_idle(WAIT_SECONDS)
        full = dispatcher.refreshed_snapshot(bundle, CancelToken(), ALL_READER)
        assert full is not None
        assert ANSWERS.name in _snapshot_slots(reader_view(full, sales))
        assert ANSWERS.name not in _snapshot_slots(full)
        dispatcher.use_reader(Reader("hr", Access(hr, NOTHING)))
        readiness.rescope()
        assert readiness.wait_idle(WAIT_SECONDS)
        assert ANSWERS.name in _snapshot_slots(reader_view(full, hr))
    finally:
        readiness.stop()


def test_the_warm_up_never_loads_the_embedding_model(tmp_bundle: Callable[..., str]) -> None:
    """Issue 29: only a search_semantic call starts the model and the embedding of a bundle
    (about 620 MiB at the bench size); a warm server that is never asked one never pays it."""
    from bundle_mcp.semantic import SemanticIndex
    from bundle_mcp.semantic.embedder import EmbedderSource

    loads: list[str] = []

    def load() -> Any:
        loads.append("loaded")
        raise AssertionError("the warm-up loaded the embedding model")

    source = EmbedderSource("spy", 3, 100, available=lambda: True, load=load)
    semantic = SemanticIndex(source, None)
    bundle = tmp_bundle({"index.md": INDEX, "orders.md": ORDERS, "returns.md": RETURNS})
    readiness = Readiness(Dispatcher(ServeConfig(bundles=(bundle,)), semantic=semantic))
    readiness.start()
    try:
        assert readiness.wait_idle(WAIT_SECONDS)
        assert loads == []
    finally:
        readiness.stop()
        semantic.close()


def test_the_warm_up_reserves_a_semantic_entry_per_served_view(
    tmp_bundle: Callable[..., str]
) -> None:
    from bundle_mcp.semantic import SemanticIndex
    from bundle_mcp.semantic.embedder import MINILM

    bundle = tmp_bundle({"index.md": INDEX, "sales/orders.md": ORDERS})
    scopes = [FolderScope.of([f"team{n}"]) for n in range(5)]
    semantic = SemanticIndex(MINILM, None)  # never loaded: no search is made here
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)), semantic=semantic)
    readiness = Readiness(dispatcher, scopes=lambda: list(scopes), follow=True)
    readiness.start()
    try:
        assert semantic.capacity == 10  # 1 bundle x 5 scopes, two revisions each
        scopes.extend(FolderScope.of([f"more{n}"]) for n in range(3))
        readiness.rescope()
        assert semantic.capacity == 16
    finally:
        readiness.stop()
        semantic.close()


def test_a_callers_call_holds_the_warm_up_back(
    fake_tools: FakeTools, simple_bundle: str
) -> None:
    """While a caller's call runs, the dispatcher is not quiet; the warm-up's own calls
    (``logged=False``) never count, or the warm-up would wait for itself."""
    dispatcher = fake_tools.dispatcher(bundles=(simple_bundle,))
    assert dispatcher.wait_until_quiet(0)
    token = CancelToken()
    worker = threading.Thread(target=lambda: dispatcher.call("slow", {"seconds": 30}, token))
    worker.start()
    assert fake_tools.started.wait(10)
    assert not dispatcher.wait_until_quiet(0.05)
    token.cancel()
    worker.join(10)
    assert dispatcher.wait_until_quiet(0)
    # A warm-up call is not a caller's: the dispatcher stays quiet while one runs.
    fake_tools.started.clear()
    background = CancelToken()
    warm = threading.Thread(target=lambda: dispatcher.call(
        "slow", {"seconds": 30}, background, logged=False))
    warm.start()
    assert fake_tools.started.wait(10)
    assert dispatcher.wait_until_quiet(0)
    background.cancel()
    warm.join(10)


class _RecordingGate:
    """The dispatcher's gate, recording each time the warm-up asks it (and whether a call was
    in flight then)."""

    def __init__(self, dispatcher: Dispatcher, events: list[str],
                 seen_waiting: threading.Event | None = None) -> None:
        self._gate = dispatcher.gate
        self._events = events
        self._seen_waiting = seen_waiting

    def busy(self) -> bool:
        return self._gate.busy()

    def wait_quiet(self, timeout: float | None) -> bool:
        busy = not self._gate.wait_quiet(0)
        self._events.append("warm-up waits for a call" if busy else "warm-up finds no call")
        if busy and self._seen_waiting is not None:
            self._seen_waiting.set()
        return self._gate.wait_quiet(timeout)


def _recorded_steps(
    events: list[str], during_first: Callable[[], None] = lambda: None
) -> Callable[..., tuple[WarmStep, ...]]:
    """warm_steps, each step recording its build; ``during_first`` runs inside the first."""

    def steps(*args: Any) -> tuple[WarmStep, ...]:
        def recorded(n: int, step: WarmStep) -> WarmStep:
            def build(token: CancelToken) -> object:
                events.append(f"build {step.name}")
                if n == 0:
                    during_first()
                return step.build(token)

            return WarmStep(step.name, build, step.slot)

        return tuple(recorded(n, step) for n, step in enumerate(warm_steps(*args)))

    return steps


def test_each_warm_up_step_first_waits_for_the_callers(tmp_bundle: Callable[..., str]) -> None:
    bundle = tmp_bundle({"a.md": "---\ntype: Note\n---\n# A\n", "b.md": "---\ntype: Note\n---\n"})
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    events: list[str] = []
    readiness = Readiness(dispatcher, gate=_RecordingGate(dispatcher, events),
                          steps=_recorded_steps(events))
    readiness.start()
    try:
        assert readiness.wait_idle(WAIT_SECONDS)
    finally:
        readiness.stop()
    builds = [i for i, e in enumerate(events) if e.startswith("build ")]
    assert builds, events
    assert all(events[i - 1] == "warm-up finds no call" for i in builds), events
    # Every registered slot with a builder was built by it, in OWNERS order after the
    # documents (no parse cache: the early slots too), and the kept answers last (the slots
    # built after the save are not the view's steps: readiness.saved_steps).
    names = [events[i].removeprefix("build ") for i in builds]
    warmed = [slot.name for slot in derived.slots()
              if slot.warm is not None and not slot.after_save]
    assert [n for n in names if n in warmed] == warmed
    assert names[0].startswith("documents")
    assert names[-len(dispatcher.kept_answer_tools()):] == [
        f"answers {name}" for name in dispatcher.kept_answer_tools()]


def test_the_warm_up_yields_to_a_call_in_flight(tmp_bundle: Callable[..., str]) -> None:
    """A call that arrives while a slot is built holds back every later step until it ends:
    the warm-up finishes the step under way, then waits for the call, then goes on."""
    bundle = tmp_bundle({"index.md": INDEX, "orders.md": ORDERS, "returns.md": RETURNS})
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    events: list[str] = []
    in_flight, warm_up_waiting = threading.Event(), threading.Event()

    def caller() -> None:
        with dispatcher.gate.call():  # a caller's call, as the dispatcher marks one
            in_flight.set()
            # The call ends only once the warm-up is seen waiting for it: no clock decides.
            assert warm_up_waiting.wait(WAIT_SECONDS)
            events.append("call ends")

    call = threading.Thread(target=caller)

    def arrives() -> None:
        call.start()
        assert in_flight.wait(WAIT_SECONDS)
        events.append("call arrives")

    readiness = Readiness(dispatcher, gate=_RecordingGate(dispatcher, events, warm_up_waiting),
                          steps=_recorded_steps(events, arrives))
    readiness.start()
    try:
        assert readiness.wait_idle(WAIT_SECONDS)
    finally:
        readiness.stop()
        call.join(WAIT_SECONDS)
    first, arrived, ended = (events.index(e) for e in (
        next(e for e in events if e.startswith("build ")), "call arrives", "call ends"))
    assert first < arrived < ended, events
    between = events[arrived + 1:ended]
    assert between and set(between) == {"warm-up waits for a call"}, events
    assert any(e.startswith("build ") for e in events[ended:]), events


def test_a_stop_that_waits_returns_once_the_warm_up_thread_has_ended(
    tmp_bundle: Callable[..., str]
) -> None:
    """An exiting server waits for its warm-up thread (``stop(wait=…)``): a daemon thread
    still inside a C extension while the interpreter finalises can crash the process. The step
    here runs until the stop cancels its token, as a real step's next check does."""
    bundle = tmp_bundle({"a.md": "---\ntype: Note\n---\n# A\n"})
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    started = threading.Event()
    warming: list[threading.Thread] = []

    def until_cancelled(token: CancelToken) -> None:
        warming.append(threading.current_thread())
        started.set()
        while True:
            token.check()  # raises once the stop cancelled the warm-up
            threading.Event().wait(0.01)

    readiness = Readiness(
        dispatcher, steps=lambda *args: (WarmStep("until cancelled", until_cancelled),))
    readiness.start()
    assert started.wait(WAIT_SECONDS)
    readiness.stop(wait=WAIT_SECONDS)
    # This warm-up's own thread: other tests' stopped warm-ups may still be finishing theirs.
    assert not warming[0].is_alive()


def test_a_step_stands_aside_at_its_checks_while_a_call_runs() -> None:
    """Inside a step, each check waits while a caller's call is in flight, and goes on once
    it ends; a stop ends the wait too."""
    gate = CallGate()
    token = StepAside(gate)
    token.check()  # no call: no wait
    passed, call_over = threading.Event(), threading.Event()

    def step() -> None:
        token.check()
        passed.set()

    with gate.call():
        stepping = threading.Thread(target=step)
        stepping.start()
        # Aside while the call runs (for up to MAX_ASIDE_SECONDS, far more than this wait).
        assert not passed.wait(0.2)
        call_over.set()
    assert passed.wait(WAIT_SECONDS)
    stepping.join(WAIT_SECONDS)

    stopped = StepAside(gate)
    raised: list[BaseException] = []

    def stopped_step() -> None:
        try:
            stopped.check()
        except BundleError as exc:
            raised.append(exc)

    with gate.call():
        stepping = threading.Thread(target=stopped_step)
        stepping.start()
        stopped.cancel()
        stepping.join(WAIT_SECONDS)
    assert raised and raised[0].code == "operation_cancelled"


def test_a_step_does_not_stand_aside_for_a_call_that_waits_for_its_build(
    monkeypatch: pytest.MonkeyPatch
) -> None:
    """A call that needs the value the warm-up is building waits for it: the warm-up's checks
    then go on (``model.awaited``), or the two would wait for each other until the limit."""
    monkeypatch.setattr(readiness_module, "MAX_ASIDE_SECONDS", WAIT_SECONDS * 10)
    gate = CallGate()
    token = StepAside(gate)
    memo = Memo()
    started, got = threading.Event(), []

    def build() -> str:
        started.set()
        for _ in range(100):
            token.check()
            threading.Event().wait(0.002)
        return "built by the warm-up"

    def call() -> None:
        with gate.call():
            got.append(memo.get("slot", lambda: "built by the call"))

    # Daemons: were the warm-up to stand aside, both would wait far past the test.
    warming = threading.Thread(target=lambda: memo.get("slot", build), daemon=True)
    warming.start()
    assert started.wait(WAIT_SECONDS)
    calling = threading.Thread(target=call, daemon=True)
    calling.start()
    calling.join(WAIT_SECONDS)
    assert got == ["built by the warm-up"]


def test_only_a_tool_run_through_the_dispatcher_never_stands_aside(
    tmp_bundle: Callable[..., str]
) -> None:
    """A kept answer's step runs the tool through the dispatcher, which may capture the bundle
    under the snapshot cache's lock that a caller's call waits for: its checks do not stand
    aside. Every other step's do."""
    bundle = tmp_bundle({"a.md": "---\ntype: Note\n---\n# A\n"})
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    view = dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)
    steps = warm_steps(dispatcher, bundle, ALL_READER, view)
    answers = [step for step in steps if step.name.startswith("answers ")]
    assert answers and not any(step.aside for step in answers)
    assert all(step.aside for step in steps if step not in answers)


def test_a_first_warm_up_compiles_every_tools_contracts_one_tool_at_a_time(
    tmp_bundle: Callable[..., str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every tool's schemas are compiled before the server says it is warm (no first call pays
    for them), one tool's at a time and each when no call is in flight, as a step runs: all at
    once held the interpreter lock 0.3-0.4 s from any call that came meanwhile."""
    bundle = tmp_bundle({"index.md": INDEX, "orders.md": ORDERS, "returns.md": RETURNS})
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)))
    compiled: list[tuple[str, ...]] = []
    real = dispatcher.contracts.compile
    monkeypatch.setattr(dispatcher.contracts, "compile",
                        lambda tools: compiled.append(tuple(tools)) or real(tools))
    readiness = Readiness(dispatcher, follow=False)
    readiness.start()
    try:
        assert readiness.wait(WAIT_SECONDS)
    finally:
        readiness.stop()
    assert sorted(compiled) == sorted((spec.name,) for spec in dispatcher.tools())
    assert all(f"{name}{INPUT_SUFFIX}" in dispatcher.contracts._validators for (name,) in compiled)


def _restarted_after_a_warm_up(
    bundle: str, cache: Path, before_restart: Callable[[], None] = lambda: None
) -> tuple[Dispatcher, Snapshot]:
    """A dispatcher on the parse cache a whole warm-up filled, and its snapshot (nothing
    built); ``before_restart`` runs between the two."""
    parse_cache = ParseCache(cache)
    snapshots = SnapshotCache(parse_cache=parse_cache, watch=False)
    first = Dispatcher(ServeConfig(bundles=(bundle,)), cache=snapshots)
    view = first.served_snapshot(bundle, CancelToken(), ALL_READER)
    for step in warm_steps(first, bundle, ALL_READER, view):
        step.build(CancelToken())
    snapshots.persist(bundle, view, now=True)
    parse_cache.settle_parts()
    before_restart()
    dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)), cache=SnapshotCache(
        parse_cache=ParseCache(cache), watch=False))
    return dispatcher, dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)


def test_a_restarted_warm_up_makes_contexts_structures_first_without_a_document(
    tmp_bundle: Callable[..., str], tmp_path: Path
) -> None:
    """Over a parse cache's rows the early step (context's index) comes before the documents,
    and builds none, nor reads any concept's words: what it needs is read back. Then a
    question is answered building only documents its pack shows, not all of them. On a cold
    start it keeps its place after the documents
    (``test_each_warm_up_step_first_waits_for_the_callers``)."""
    pages = {"index.md": INDEX}
    for n in range(24):
        pages[f"f{n % 3}/p{n}.md"] = (f"---\ntitle: Page {n}\n---\n# Page {n}\n\n"
                                      f"Orders {n} are made and returned.\n")
    bundle = tmp_bundle(pages)
    dispatcher, snapshot = _restarted_after_a_warm_up(bundle, tmp_path / "cache")
    steps = warm_steps(dispatcher, bundle, ALL_READER, snapshot)
    early = list(itertools.takewhile(lambda step: step.slot is not None and step.slot.early,
                                     steps))
    assert [step.name for step in early] == ["context_index"]
    for step in early:
        step.build(CancelToken())
    assert list(snapshot.documents.built()) == []  # type: ignore[attr-defined]
    assert built_value(snapshot, CONTEXT_INDEX, "words") is None
    outcome = dispatcher.call("context",
                              {"bundle_path": bundle, "question": "how are returns made"})
    assert not outcome.is_error
    assert 0 < len(list(snapshot.documents.built())) < len(pages)  # type: ignore[attr-defined]


def test_a_warm_up_leaves_a_question_no_stop_words_to_stem(
    tmp_bundle: Callable[..., str], tmp_path: Path
) -> None:
    """After a restart the warm-up reads context's words back and stems nothing, so a first
    question stemmed the stop words (importing the stemmer): about 14 of its 53 ms at 9,978
    concepts. The warm-up stems them."""
    bundle = tmp_bundle({"index.md": INDEX, "orders.md": ORDERS, "returns.md": RETURNS})
    dispatcher, snapshot = _restarted_after_a_warm_up(bundle, tmp_path / "cache",
                                                      stop_stems.cache_clear)
    for step in warm_steps(dispatcher, bundle, ALL_READER, snapshot):
        step.build(CancelToken())
    assert stop_stems.cache_info().misses == 1
    outcome = dispatcher.call("context",
                              {"bundle_path": bundle, "question": "how are returns made"})
    assert not outcome.is_error
    assert stop_stems.cache_info().misses == 1  # the question made no stop stems of its own


def test_a_warm_up_imports_what_a_questions_sums_are_added_with(
    tmp_bundle: Callable[..., str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A question adds its stems' parts with numpy (``_context_index._added``), imported on
    first use: about 55 ms that a first question after a restart paid. The warm-up imports it."""
    from bundle_mcp.tools import _context_index

    bundle = tmp_bundle({"index.md": INDEX, "orders.md": ORDERS, "returns.md": RETURNS})
    dispatcher, snapshot = _restarted_after_a_warm_up(bundle, tmp_path / "cache", lambda: None)
    imported: list[str] = []
    real = _context_index.importlib.import_module
    monkeypatch.setattr(_context_index.importlib, "import_module",
                        lambda name: imported.append(name) or real(name))
    for step in warm_steps(dispatcher, bundle, ALL_READER, snapshot):
        step.build(CancelToken())
    assert "numpy" in imported


def test_the_context_index_step_checks_between_its_parts(monkeypatch: pytest.MonkeyPatch) -> None:
    """The warm-up stands aside for a caller's call only at a check of its token, and each
    part of context's index is read back whole with few checks of its own: a restarted
    server's first step held a call that came meanwhile for up to 0.3 s at 9,978 concepts.
    So every part (and numpy's import, the stop words' stems and the labels) comes after a
    check."""
    from bundle_mcp.tools import _context_index

    events: list[str] = []

    class Recording(CancelToken):
        def check(self) -> None:
            events.append("check")
            super().check()

    def part(name: str) -> Callable[..., None]:
        return lambda *args: events.append(name)

    for name in ("totals", "stem_holders", "norms", "copy_groups", "columns", "stop_stems",
                 "label_codes"):
        monkeypatch.setattr(_context_index, name, part(name))
    monkeypatch.setattr(_context_index, "importlib",
                        type("Imports", (), {"import_module": staticmethod(part("numpy"))}))
    _context_index._warm_index(Snapshot.__new__(Snapshot), Recording())
    done = [event for event in events if event != "check"]
    assert done == ["totals", "stem_holders", "norms", "copy_groups", "numpy", "columns",
                    "stop_stems", "label_codes"]
    assert all(events[events.index(name) - 1] == "check" for name in done)
