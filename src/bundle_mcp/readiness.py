"""The warm-up: build every derived structure of each served bundle in the background.

``serve`` (stdio and HTTP) starts a :class:`Readiness` next to the server. Its daemon thread
loads each bundle named on the command line through the dispatcher's snapshot cache (the same
allow-list, no-symlink loader and parse policy as a tool call), then builds what the first calls
would otherwise build, step by step (:func:`warm_steps`), in a fixed order: over a parse
cache that kept rows for most files, the slots marked ``early`` (context's index: the
server's instructions send an agent to ``context`` first, and a restarted server reads it
back without a document or a concept's words); on a cold start the documents (their
Markdown facts and frozen frontmatter, a chunk of :data:`DOCUMENTS_PER_STEP` a step), over
such a cache only each concept's frontmatter, frozen without its document (every structure is
read back, and a document is built when a call asks for it); the snapshot's edges;
then every other registered slot that has a ``warm`` builder
(:func:`bundle_mcp.derived.slots`: the list entries, the section word index and its totals,
context's words (and its index on a cold start), the validation findings, the field edges
and the graph, the summary counts), each by its owner's own builder; then the kept answers
of the tools that keep them (``ToolSpec.cache_results``), whose builder is the tool itself
run through the dispatcher with its default arguments; then it saves the parse cache and
builds the slots marked ``after_save`` on the whole capture (:func:`saved_steps`:
search_sections' section words, written into the database that save makes on a cold start).
Over HTTP ``/readyz`` answers 200 only then.

Calls come first. The dispatcher holds a gate around every caller's call
(:class:`~bundle_mcp.dispatch.CallGate`); before each step the warm-up waits while any call is
in flight, however long, and within a step it stands aside at each check while one is
(:class:`StepAside`), so a call that arrives mid-warm-up has the interpreter to itself and
never waits behind the rest. A call that needs a structure the
warm-up is building waits for that build (:class:`~bundle_mcp.model.Memo`), not for the whole
warm-up, and its cancellation still ends the wait; a call that needs nothing new
(``read_concept``) waits for nothing but its turn at the interpreter lock. A step that fails (a
cap, say) is logged and skipped: the bundle loaded, and a call will get the same answer.

After that, the thread follows the bundles: every time a call captures a new snapshot of a
served bundle (a file was edited, created or deleted), the warm-up runs again for it. The
documents that did not change keep their structures, so it rebuilds only the changed files' and
the whole-snapshot ones. Before it builds the first slot, it empties the memo of the view it
warmed last (the one replaced), all but the slots the new view's builders update from it
(``carried``), which go right after the step that built the new view's own: otherwise both
views' structures were held at once, and (frozen, with reference cycles) went only at the
warm-up's final collection. A bundle that cannot be loaded keeps the server not ready; the
reason is logged once and the load is retried every :data:`RETRY_SECONDS` (a bundle being
synced into place, a broken file fixed). Once ready, the server stays ready.

Readers (``serve --readers``): every call runs on its reader's view of the snapshot, with its
own indexes, so what is warmed is each served scope's view: the distinct read scopes of the
readers in force (``scopes``), else the configured reader's (stdio's ``--reader``, or the
all-reading reader). The whole snapshot's own structures are built only when some reader reads
everything; ``/readyz`` waits for every served view. :meth:`Readiness.rescope` (after SIGHUP
re-read the readers file) warms the views of new scopes and stops following the ones no reader
has now (a view lives with its snapshot, so it goes at the bundle's next change).
Warm-up calls are nobody's: they leave no "called by reader" line and do not hold the gate.
"""

from __future__ import annotations

import functools
import gc
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from . import derived
from .cancel import CancelToken
from .dispatch import Dispatcher, Outcome, UnknownTool
from .errors import BundleError
from .loader.parse_cache import has_markdown
from .model import Concepts, Documents, Snapshot, awaited
from .okf.scopes import NOTHING, Access, FolderScope
from .readers import ALL_READER, Reader

__all__ = ["ASIDE_POLL_SECONDS", "DOCUMENTS_PER_STEP", "GATE_POLL_SECONDS", "MAX_ASIDE_SECONDS",
           "RETRY_SECONDS", "STOP_WAIT_SECONDS", "Gate", "Readiness", "StepAside", "WarmStep",
           "saved_steps", "warm_steps"]

log = logging.getLogger(__name__)

RETRY_SECONDS = 10.0
# How long an exiting server waits for its warm-up thread to notice the stop (Readiness.stop).
STOP_WAIT_SECONDS = 5.0
# How often a warm-up waiting for the callers' calls looks whether it was stopped.
GATE_POLL_SECONDS = 0.5
# Documents built per step: a call arriving while the documents are built waits for at most
# this many parses.
DOCUMENTS_PER_STEP = 512


class Gate(Protocol):
    """What the warm-up waits on before each step, and steps aside for within one
    (:class:`bundle_mcp.dispatch.CallGate`)."""

    def wait_quiet(self, timeout: float | None) -> bool: ...

    def busy(self) -> bool: ...


# How long the warm-up steps aside for the callers' calls at one check, at most; then it goes
# on beside them until they are done. A call may wait for something the warm-up holds that no
# memo knows of (a lock), and only the warm-up going on ends that wait.
MAX_ASIDE_SECONDS = 1.0
# How often a warm-up standing aside looks whether a call now waits for what it is building.
ASIDE_POLL_SECONDS = 0.01


class StepAside(CancelToken):
    """The warm-up steps' token: each check (a builder makes one every document or so) also
    stands aside while a caller's call runs, so the call has the interpreter to itself.

    Sharing it was worse than halving the call's speed: a thread that gives up the interpreter
    lock (an SQLite read, a file read) waits for the warm-up's next switch interval to get it
    back, so a restarted server's calls during its warm-up took 250 ms more each at 10,000
    concepts. It does not stand aside while a call waits for a value this thread is building
    (``model.awaited``), and no longer than :data:`MAX_ASIDE_SECONDS` at a time: past that it
    goes on beside the calls until none is running (the gate quiet once)."""

    __slots__ = ("_gate", "_aside")

    def __init__(self, gate: Gate) -> None:
        super().__init__()
        self._gate = gate
        self._aside = True

    def check(self) -> None:
        super().check()
        gate = self._gate
        if not gate.busy():
            self._aside = True
            return
        if not self._aside or awaited():
            return
        deadline = time.monotonic() + MAX_ASIDE_SECONDS
        while gate.busy() and not awaited():
            left = deadline - time.monotonic()
            if left <= 0:
                self._aside = False
                return
            gate.wait_quiet(min(left, ASIDE_POLL_SECONDS))
            super().check()  # a stop while aside


@dataclass(frozen=True, slots=True)
class WarmStep:
    """One unit of the warm-up: between two steps it lets the callers' calls run first."""

    name: str  # the slot it builds, "documents …", "edges" or "answers <tool>"
    build: Callable[[CancelToken], object]
    slot: derived.Slot[object] | None = None  # the slot it builds, if it builds one
    # Whether its checks stand aside for the callers' calls (StepAside). Not a tool run
    # through the dispatcher: it may capture the bundle under the snapshot cache's lock, which
    # a caller's call may be waiting for.
    aside: bool = True


def warm_steps(
    dispatcher: Dispatcher, bundle: str, reader: Reader, view: Snapshot
) -> tuple[WarmStep, ...]:
    """The steps that warm one served view, in the order they run (module docstring)."""
    steps: list[WarmStep] = []
    warmed = [slot for slot in derived.slots() if slot.warm is not None and not slot.after_save]
    # First only over a parse cache that kept rows for most files: without them (a cold start)
    # the early slots are the costliest steps, every document parsed and stemmed, and whatever
    # needs the documents would wait behind them.
    inbound = view.inbound
    read_back = inbound is not None and 2 * inbound.kept_rows() >= len(view.documents)
    early = [slot for slot in warmed if slot.early] if read_back else []
    steps.extend(_slot_step(view, slot) for slot in early)
    # Over such a cache every slot is read back, and so are the documents a call asks for, one
    # row each: none is built ahead (on a cold start, building them is what the slots need),
    # only each concept's frontmatter is frozen, which the cards of a walk read.
    if read_back and isinstance(view.concepts, Concepts):
        ids = tuple(view.concepts)  # the files that parse (the rows' error column tells)
        for start in range(0, len(ids), DOCUMENTS_PER_STEP):
            chosen = ids[start:start + DOCUMENTS_PER_STEP]
            steps.append(WarmStep(f"fields {start + 1}-{start + len(chosen)}",
                                  functools.partial(_hold_fields, view.concepts, chosen)))
    paths = () if read_back else tuple(view.documents)
    for start in range(0, len(paths), DOCUMENTS_PER_STEP):
        chunk = paths[start:start + DOCUMENTS_PER_STEP]
        steps.append(WarmStep(f"documents {start + 1}-{start + len(chunk)}",
                              functools.partial(_build_documents, view, chunk)))
    steps.append(WarmStep("edges", lambda token: view.edges_by_concept))
    steps.extend(_slot_step(view, slot) for slot in warmed if slot not in early)
    for name in dispatcher.kept_answer_tools():
        steps.append(WarmStep(f"answers {name}",
                              functools.partial(_answer, dispatcher, name, bundle, reader),
                              aside=False))
    return tuple(steps)


def saved_steps(snapshot: Snapshot) -> tuple[WarmStep, ...]:
    """The steps that follow the warm-up's parse cache save, on the whole capture: the slots
    that write into the database that save makes on a cold start (``Slot.after_save``)."""
    return tuple(_slot_step(snapshot, slot) for slot in derived.slots()
                 if slot.warm is not None and slot.after_save)


def _slot_step(view: Snapshot, slot: derived.Slot[object]) -> WarmStep:
    warm = slot.warm
    assert warm is not None  # only slots with a builder are warmed
    return WarmStep(slot.name, functools.partial(warm, view), slot)


def _answer(
    dispatcher: Dispatcher, name: str, bundle: str, reader: Reader, token: CancelToken
) -> Outcome:
    """The kept answer of ``name``'s default call (nobody's call: it does not hold the gate)."""
    return dispatcher.call(name, {"bundle_path": bundle}, token, reader, logged=False)


def _hold_fields(concepts: Concepts, concept_ids: Sequence[str], token: CancelToken) -> None:
    concepts.hold_fields(concept_ids, token.check)


def _build_documents(view: Snapshot, paths: Sequence[str], token: CancelToken) -> None:
    """Build the documents, their Markdown facts (parsed once and kept packed; facts read
    back from the parse cache are decoded when used, not here) and each concept's frozen
    frontmatter. Not their search folds: after a restart the search columns are read back,
    and without an earlier process's columns search_fields' step folds them."""
    inbound, documents = view.inbound, view.documents
    if inbound is not None and isinstance(documents, Documents):
        cells = documents.cells  # the rows of the documents not built yet, in one query
        inbound.read_ahead_entries([path for path in paths if cells[path].peek() is None])
    for path in paths:
        token.check()
        doc = view.documents[path]
        if doc.parse_error is None:
            if not has_markdown(doc):
                doc.markdown  # noqa: B018 (parsed on first use, kept as packed text)
            if doc.is_concept:
                # Frozen now: a frozen mapping takes less memory than the JSON read back (19
                # MB at 9,978 concepts after a restart), and every card reads it.
                doc.fm  # noqa: B018


def _releasing(replaced: Snapshot, steps: Sequence[WarmStep]) -> list[WarmStep]:
    """``steps`` with the replaced view's structures let go of before the first slot is built
    (a serving warm-up froze them, and they hold reference cycles: otherwise they stay until
    the collection at the end, beside the successor's), and its carried ones once the
    successor has built its own from them (:func:`bundle_mcp.derived.release`). Steps, so that
    each waits for the callers' calls like the rest.

    Not first: the steps before the slots (the changed documents, the edges) are Python code,
    which lets another thread take the interpreter lock every few milliseconds, while freeing a
    large structure holds it for as long as that takes, and right after a change the call
    that saw it is still writing its answer (its next answer was 40 ms later in one process).
    The ``early`` slots go right after the release, as the first of the slots: built before
    it, both views' would be held at once.
    """
    early = [step for step in steps if step.slot is not None and step.slot.early]
    steps = [step for step in steps if not (step.slot is not None and step.slot.early)]
    first = next((i for i, step in enumerate(steps) if step.slot is not None), len(steps))
    steps[first:first] = early
    after = 1 + max((i for i, step in enumerate(steps)
                     if step.slot is not None and step.slot.carried), default=first - 1)
    return [
        *steps[:first],
        WarmStep("release the replaced view",
                 functools.partial(_release, replaced, carried=False)),
        *steps[first:after],
        WarmStep("release the replaced view's carried structures",
                 functools.partial(_release, replaced, carried=True)),
        *steps[after:],
    ]


def _release(replaced: Snapshot, token: CancelToken, *, carried: bool) -> None:
    derived.release(replaced, carried=carried)


def _freeze_step(first_load: bool) -> None:
    """Freeze what the warm-up built so far: frozen, the collector's automatic full passes no
    longer walk it (a restart's warm-up at 10,000 concepts made a dozen of them, growing to
    0.6 s, 2.4 s of holding the interpreter lock in all; gc.freeze itself moves lists). In a
    first warm-up, cyclic garbage frozen here goes at the full collection that ends it; after
    a change, what is new is collected first, a pass over what the last step made only (the
    rest is frozen), so that none is ever frozen for good."""
    if not first_load:
        gc.collect()
    gc.freeze()


def _freeze_memory(*, whole: bool = True) -> None:
    """Keep the garbage collector's full passes off what the warm-up built.

    A warm snapshot of a big bundle is millions of objects; each full collection walks them all
    (a few hundred milliseconds at the file cap), and one lands on some unlucky call every so
    often. Frozen objects are never walked. ``whole``: unfreezing first, then collecting, lets
    the structures of snapshots replaced since the last freeze go when they hold reference
    cycles (0.6 s under the interpreter lock at 10,000 concepts). Otherwise only what is not
    frozen yet is collected (what the last step made).
    """
    if whole:
        gc.unfreeze()
    gc.collect()
    gc.freeze()


class Readiness:
    """Whether every served bundle is loaded and warm; thread-safe, read by ``/readyz``."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        bundles: Sequence[str] | None = None,
        *,
        retry_seconds: float = RETRY_SECONDS,
        follow: bool = True,
        freeze_memory: bool = False,
        scopes: Callable[[], Iterable[FolderScope]] | None = None,
        gate: Gate | None = None,
        steps: Callable[[Dispatcher, str, Reader, Snapshot], Sequence[WarmStep]] = warm_steps,
    ) -> None:
        self._dispatcher = dispatcher
        self._bundles = tuple(dispatcher.config.bundles if bundles is None else bundles)
        # The read scopes served now (the readers file's); None: the configured reader's.
        self._scopes = scopes
        self._retry_seconds = retry_seconds
        # What the warm-up waits on before each step (the dispatcher's, unless a test injects
        # its own) and the steps it runs.
        self._gate: Gate = gate if gate is not None else dispatcher.gate
        self._steps = steps
        self._follow = follow
        self._freeze_memory = freeze_memory
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._token = CancelToken()  # the loads' and the save's: they never stand aside
        self._step_token = StepAside(self._gate)
        self._thread: threading.Thread | None = None
        # Bundles a call captured a new snapshot of, waiting for their next warm-up.
        self._changed: set[str] = set()
        self._changed_lock = threading.Lock()
        self._wake = threading.Event()
        # (bundle, scope) → the view last warmed; only the warm-up thread touches these.
        self._warmed: dict[tuple[str, FolderScope], Snapshot] = {}
        self._loaded: set[str] = set()  # bundles warmed at least once
        self._noted: set[str] = set()  # bundles whose read-only file system was looked at
        self._idle = threading.Event()  # set while nothing is waiting to be warmed

    def is_ready(self) -> bool:
        return self._ready.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until ready (or ``timeout`` seconds); True when ready."""
        return self._ready.wait(timeout)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until ready and every captured snapshot is warm; True when so (tests, bench)."""
        return self._ready.wait(timeout) and self._idle.wait(timeout)

    def start(self) -> None:
        """Start the warm-up thread (a daemon: it never keeps the process alive)."""
        if not self._bundles:
            # --allow-any-bundle without bundles: nothing to load, ready once serving.
            self._ready.set()
            self._idle.set()
            return
        self._reserve()
        if self._follow:
            self._dispatcher.on_capture(self._captured)
        self._thread = threading.Thread(target=self._run, name="bundle-mcp-warm-up", daemon=True)
        self._thread.start()

    def stop(self, wait: float = 0.0) -> None:
        """Cancel the warm-up (the server is shutting down); it stops at its next check.

        ``wait``: seconds to wait for the thread to end. A server that is exiting waits
        (:data:`STOP_WAIT_SECONDS`): a daemon thread still inside a C extension (SQLite saving
        the parse cache, a schema compiling) while the interpreter finalises can crash the
        process, and its next check comes within one document or one write."""
        self._stopped.set()
        self._token.cancel()
        self._step_token.cancel()
        self._wake.set()
        thread = self._thread
        if wait > 0 and thread is not None and thread is not threading.current_thread():
            thread.join(wait)

    def rescope(self) -> None:
        """The served scopes may have changed (the readers file was re-read): warm every bundle
        again for them. Views already warm are skipped; runs in any thread, only takes note."""
        self._reserve()
        with self._changed_lock:
            self._changed.update(self._bundles)
            self._idle.clear()
        self._wake.set()

    def _captured(self, bundle: str, snapshot: Snapshot) -> None:
        """The dispatcher's capture listener: runs in the calling thread, so it only takes note."""
        if bundle not in self._bundles:
            return
        with self._changed_lock:
            self._changed.add(bundle)
            self._idle.clear()
        self._wake.set()

    def _reserve(self) -> None:
        """Room in the per-snapshot services for every view served: bundles times scopes."""
        self._dispatcher.reserve_views(len(self._bundles) * len(self._readers()))

    def _readers(self) -> list[Reader]:
        """One reader per distinct scope served now, as the warm-up calls with."""
        if self._scopes is None:
            scopes: Iterable[FolderScope] = (self._dispatcher.reader.access.read,)
        else:
            scopes = self._scopes()
        return [Reader("warm-up", Access(scope, NOTHING)) for scope in dict.fromkeys(scopes)]

    def _run(self) -> None:
        waiting = list(self._bundles)
        reported: set[str] = set()
        while waiting:
            # One freeze per pass, not per bundle: each is a full collection of the whole heap
            # (with the semantic model loaded, a large one), and a server of hundreds of small
            # bundles would spend its warm-up collecting.
            # A lone bundle freezes before its "is warm" line, which benchmarks wait for.
            alone = len(waiting) == 1
            before = len(waiting)
            waiting = [bundle for bundle in waiting
                       if not self._warm(bundle, reported, freeze=alone)]
            if self._freeze_memory and not alone and len(waiting) < before:
                _freeze_memory()
            if self._stopped.is_set():
                return
            if waiting and self._stopped.wait(self._retry_seconds):
                return
        self._ready.set()
        while self._follow and not self._stopped.is_set():
            with self._changed_lock:
                changed, self._changed = sorted(self._changed), set()
                if not changed:
                    self._idle.set()
                    self._wake.clear()
            if not changed:
                self._wake.wait()
                continue
            for bundle in changed:
                if self._stopped.is_set():
                    return
                self._warm(bundle, reported)

    def _warm(self, bundle: str, reported: set[str], *, freeze: bool = True) -> bool:
        """Load one bundle and warm its served views; False when one of them could not be
        loaded (retried later)."""
        readers = self._readers()
        try:
            views = [(reader, self._dispatcher.served_snapshot(bundle, self._token, reader))
                     for reader in readers]
        except BundleError as exc:
            if not self._stopped.is_set() and bundle not in reported:
                reported.add(bundle)
                log.warning(
                    "%s cannot be served yet (%s): /readyz answers 503 until it loads; "
                    "retrying every %g s",
                    bundle,
                    exc.message,
                    self._retry_seconds,
                )
            return False
        if bundle not in self._noted:
            # As soon as the bundle loads, before the warm-up's work (the cache save included,
            # which on the same read-only file system warns too): the operator reads why the
            # write tools refuse before anything else about this bundle.
            self._noted.add(bundle)
            self._note_read_only(bundle)
        served = {(bundle, reader.access.read) for reader in readers}
        for key in [key for key in self._warmed if key[0] == bundle and key not in served]:
            del self._warmed[key]  # a scope no reader has any more: not warmed again
        cold = [(reader, view) for reader, view in views
                if self._warmed.get((bundle, reader.access.read)) is not view]
        if not cold:
            return True  # the steps of the last warm-up captured nothing new
        started = time.perf_counter()
        current = [view for _reader, view in views]
        # The views this warm-up replaces, weakly: whether they are gone once it is done
        # decides how much the collector must look at (below).
        replaced_views: list[weakref.ref[Snapshot]] = []
        first_load = bundle not in self._loaded
        for reader, view in cold:
            replaced = self._warmed.get((bundle, reader.access.read))
            steps = list(self._steps(self._dispatcher, bundle, reader, view))
            if replaced is not None and not any(replaced is v for v in current):
                steps = _releasing(replaced, steps)
                replaced_views.append(weakref.ref(replaced))
            del replaced
            if self._freeze_memory:
                # The load too, before the first step: unfrozen, the loaded snapshot was walked
                # by every automatic full pass of that step (a pause of up to 50 ms at 9,978
                # concepts, holding the interpreter lock from the calls of a restarted server).
                _freeze_step(first_load)
            for step in steps:
                # Callers first: a step starts only while no call is in flight.
                if not self._callers_done():
                    return False
                begun = time.perf_counter()
                self._run_step(bundle, step)
                # When each step ran and for how long (callers' calls stand it aside, so a
                # long step may be one that a call interrupted): BUNDLE_MCP_LOG_LEVEL=debug.
                log.debug("warm-up %s on %s: %.3f s, %.3f s in", step.name, bundle,
                          time.perf_counter() - begun, time.perf_counter() - started)
                if self._freeze_memory:
                    _freeze_step(first_load)
            if self._stopped.is_set():
                return False
            self._warmed[(bundle, reader.access.read)] = view
        first = bundle not in self._loaded
        self._loaded.add(bundle)
        # The whole capture, whatever the views: the parse cache holds every file parsed.
        snapshot = self._dispatcher.refreshed_snapshot(bundle, self._token, ALL_READER)
        if snapshot is None:  # never once a view has loaded; the type says it could be
            return False
        self._dispatcher.save_parse_cache(bundle, snapshot)
        for step in saved_steps(snapshot):
            if not self._callers_done():
                return False
            self._run_step(bundle, step)
        if first:
            # Every tool's schemas (the steps called only the tools that keep answers);
            # otherwise the first call of each pays their compile (about 10 ms for all the
            # contracts since they are no longer checked against the metaschema as they
            # compile; 0.3-0.4 s before). One tool's at a time, each when no call is in
            # flight, as a step is.
            for name in self._dispatcher.tool_names():
                if not self._callers_done():
                    return False
                self._dispatcher.contracts.compile((name,))
        if self._freeze_memory and freeze:
            del steps  # its release steps hold the replaced view
            # A replaced view that nothing holds any more went with its last reference (its
            # structures were let go by the release steps: after an edit's warm-up the full
            # collection found nothing to free). One still held, or a first warm-up (the
            # load's garbage), gets the full collection. It also sets the collector's count of
            # long-lived objects to all the warm-up made, and an automatic full pass waits for
            # a quarter as many new ones: without it (each step's garbage collected instead,
            # tried 2026-12-06), a cold 50,000-concept server ran full passes in every
            # query_subgraph call, 400 → 590 ms.
            _freeze_memory(whole=first or any(ref() is not None for ref in replaced_views))
        # Logged last: this line is "ready" for whoever reads the log (make bench does).
        scoped = [reader for reader, _view in cold if reader.access.read != ALL_READER.access.read]
        log.info(
            "%s is warm: %d concepts, revision %s, built in %.3f s%s",
            bundle,
            len(snapshot.concepts),
            snapshot.revision[:12],
            time.perf_counter() - started,
            f" ({len(scoped)} reader scope{'s' if len(scoped) != 1 else ''})" if scoped else "",
        )
        if bundle in reported:
            reported.discard(bundle)
            log.warning("%s loaded: no longer waiting for it", bundle)
        return True

    def _callers_done(self) -> bool:
        """Wait while any caller's call is in flight (for as long as calls keep coming: the
        warm-up only ever runs when no call does); False when stopped meanwhile."""
        while not self._gate.wait_quiet(GATE_POLL_SECONDS):
            if self._stopped.is_set():
                return False
        return not self._stopped.is_set()

    def _run_step(self, bundle: str, step: WarmStep) -> None:
        """One step; a failure (a cap, a cancelled warm-up) is logged, not raised: the bundle
        loaded, and a call will meet the same failure and report it."""
        try:
            outcome = step.build(self._step_token if step.aside else self._token)
        except UnknownTool:
            return  # not served (--tools)
        except BundleError as exc:
            log.debug("warm-up %s on %s: %s", step.name, bundle, exc.message)
            return
        if isinstance(outcome, Outcome) and outcome.is_error:
            log.debug("warm-up %s on %s: %s", step.name, bundle, outcome.text)

    def _note_read_only(self, bundle: str) -> None:
        if self._dispatcher.all_read_only():
            return
        try:
            read_only = bool(os.statvfs(bundle).f_flag & os.ST_RDONLY)
        except OSError:
            return
        if read_only:
            log.warning(
                "%s is on a read-only file system: the write tools answer operation_rejected; "
                "serve it with --read-only to leave them out",
                bundle,
            )
