"""The warm-up: build every derived structure of each served bundle in the background.

``serve`` (stdio and HTTP) starts a :class:`Readiness` next to the server. Its daemon thread
loads each bundle named on the command line through the dispatcher's snapshot cache (the same
allow-list, no-symlink loader and parse policy as a tool call), then runs the read tools once
with cheap arguments, so that what the first calls would otherwise build is already built with
the snapshot: the Markdown facts, the list entries, the search folds, the section word index and
its totals, the edges and the graph, the JSON-LD nodes, the validation findings, and the kept
answers of the large tools' default calls (``ToolSpec.cache_results``). Over HTTP ``/readyz``
answers 200 only then.

Calls are served meanwhile. A call that needs a structure the warm-up is building waits for that
build (:class:`~bundle_mcp.model.Memo`), not for the whole warm-up, and its cancellation still
ends the wait; a call that needs nothing new (``read_concept``) waits for nothing but its turn
at the interpreter lock. Callers come first: before each step the warm-up waits until no
caller's call is running (at most :data:`YIELD_SECONDS`), so a call that arrives mid-warm-up
shares the interpreter with at most the step already under way.

After that, the thread follows the bundles: every time a call captures a new snapshot of a
served bundle (a file was edited, created or deleted), the warm-up runs again for it. The
documents that did not change keep their structures, so it rebuilds only the changed files' and
the whole-snapshot ones. A bundle that cannot be loaded keeps the server not ready; the reason is
logged once and the load is retried every :data:`RETRY_SECONDS` (a bundle being synced into
place, a broken file fixed). Once ready, the server stays ready.

Readers (``serve --readers``): every call runs on its reader's view of the snapshot, with its
own indexes, so what is warmed is each served scope's view: the distinct read scopes of the
readers in force (``scopes``), else the configured reader's (stdio's ``--reader``, or the
all-reading reader). The whole snapshot's own structures are built only when some reader reads
everything; ``/readyz`` waits for every served view. :meth:`Readiness.rescope` (after SIGHUP
re-read the readers file) warms the views of new scopes and stops following the ones no reader
has now (a view lives with its snapshot, so it goes at the bundle's next change).
Warm-up calls are nobody's: they leave no "called by reader" line.
"""

from __future__ import annotations

import gc
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from .cancel import CancelToken
from .dispatch import Dispatcher, UnknownTool
from .errors import BundleError
from .model import Snapshot
from .okf.scopes import NOTHING, Access, FolderScope
from .readers import ALL_READER, Reader

__all__ = ["RETRY_SECONDS", "WARM_CALLS", "WARM_CONCEPT_CALLS", "YIELD_SECONDS", "Readiness"]

log = logging.getLogger(__name__)

RETRY_SECONDS = 10.0
# How long a warm-up step waits for the callers' calls running now to finish: long enough for
# a first read after a start to run alone, short enough that calls that never pause still
# let the warm-up (and /readyz) through.
YIELD_SECONDS = 1.0

# Read tools and arguments whose first run builds the memoised data of a whole snapshot. A tool
# left out by --tools is skipped; a warm call that fails (a cap, say) does not stop readiness:
# the bundle loaded, and the client will get the same answer.
# Cheap first: the structures most first calls need come ready soonest.
WARM_CALLS: tuple[tuple[str, Mapping[str, Any]], ...] = (
    ("list_concepts", {}),
    ("search_concepts", {"query": "a", "limit": 1}),
    ("search_sections", {"query": "a", "limit": 1}),
    ("context", {"question": "a", "max_tokens": 256}),
    ("validate_bundle", {}),
    ("validate_bundle", {"check_links": True, "check_orphans": True}),
    ("get_semantic_graph", {}),
    # After the orphan check and the edges above: what it adds is its counts and the graph's
    # inbound-link counts.
    ("bundle_summary", {}),
)
# Calls on one concept of the bundle (its first ID): they build the edges and the graph.
WARM_CONCEPT_CALLS: tuple[tuple[str, str, Mapping[str, Any]], ...] = (
    ("get_neighbors", "concept_id", {"limit": 1}),
    ("expand_neighbors", "entity_ids", {"depth": 1, "limit": 1}),
)


def _freeze_memory() -> None:
    """Keep the garbage collector's full passes off what the warm-up built.

    A warm snapshot of a big bundle is millions of objects; each full collection walks them all
    (a few hundred milliseconds at the file cap), and one lands on some unlucky call every so
    often. Frozen objects are never walked. Unfreezing first, then collecting, lets the
    structures of snapshots replaced since the last freeze go (some hold reference cycles).
    """
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
        yield_seconds: float = YIELD_SECONDS,
    ) -> None:
        self._dispatcher = dispatcher
        self._bundles = tuple(dispatcher.config.bundles if bundles is None else bundles)
        # The read scopes served now (the readers file's); None: the configured reader's.
        self._scopes = scopes
        self._retry_seconds = retry_seconds
        self._yield_seconds = yield_seconds
        self._follow = follow
        self._freeze_memory = freeze_memory
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._token = CancelToken()
        self._thread: threading.Thread | None = None
        # Bundles a call captured a new snapshot of, waiting for their next warm-up.
        self._changed: set[str] = set()
        self._changed_lock = threading.Lock()
        self._wake = threading.Event()
        # (bundle, scope) → the view last warmed; only the warm-up thread touches these.
        self._warmed: dict[tuple[str, FolderScope], Snapshot] = {}
        self._loaded: set[str] = set()  # bundles warmed at least once
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

    def stop(self) -> None:
        """Cancel the warm-up (the server is shutting down); it stops at its next check."""
        self._stopped.set()
        self._token.cancel()
        self._wake.set()

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
        served = {(bundle, reader.access.read) for reader in readers}
        for key in [key for key in self._warmed if key[0] == bundle and key not in served]:
            del self._warmed[key]  # a scope no reader has any more: not warmed again
        cold = [(reader, view) for reader, view in views
                if self._warmed.get((bundle, reader.access.read)) is not view]
        if not cold:
            return True  # the calls of the last warm-up captured nothing new
        started = time.perf_counter()
        for reader, view in cold:
            for name, arguments in self._calls(view):
                if self._stopped.is_set():
                    return False
                # Callers first: a step waits for the calls running now (bounded).
                self._dispatcher.wait_until_quiet(self._yield_seconds)
                try:
                    outcome = self._dispatcher.call(
                        name, {"bundle_path": bundle, **arguments}, self._token, reader,
                        logged=False,
                    )
                except UnknownTool:
                    continue  # not served (--tools)
                if outcome.is_error:
                    log.debug("warm-up %s on %s: %s", name, bundle, outcome.text)
            self._warmed[(bundle, reader.access.read)] = view
        first = bundle not in self._loaded
        self._loaded.add(bundle)
        # The whole capture, whatever the views: the parse cache holds every file parsed.
        snapshot = self._dispatcher.refreshed_snapshot(bundle, self._token, ALL_READER)
        if snapshot is None:  # never once a view has loaded; the type says it could be
            return False
        self._dispatcher.save_parse_cache(bundle, snapshot)
        if first:
            # The schemas of the tools the warm calls did not use; otherwise the first call of
            # each of them pays their compile (0.4 s for all the contracts).
            self._dispatcher.contracts.compile(spec.name for spec in self._dispatcher.tools())
        if self._freeze_memory and freeze:
            _freeze_memory()
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
        if first:
            self._note_read_only(bundle)
        return True

    @staticmethod
    def _calls(snapshot: Snapshot) -> list[tuple[str, Mapping[str, Any]]]:
        calls = list(WARM_CALLS)
        first = next(iter(snapshot.concepts), None)
        if first is not None:
            for name, field, arguments in WARM_CONCEPT_CALLS:
                value: Any = [first] if field == "entity_ids" else first
                calls.append((name, {field: value, **arguments}))
        return calls

    def _note_read_only(self, bundle: str) -> None:
        if all(spec.read_only for spec in self._dispatcher.tools()):
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
