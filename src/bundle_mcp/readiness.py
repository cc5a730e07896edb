"""Readiness for HTTP deployments: warm every served bundle in the background, then say so.

``serve --http`` starts a :class:`Readiness` next to the server. Its daemon thread loads each
bundle named on the command line through the dispatcher's snapshot cache (the same allow-list,
no-symlink loader and parse policy as a tool call), then runs the read tools once with cheap
arguments, so that what the first calls would otherwise build is already memoised with the
snapshot: the list entries, the search folds, the section word index and its totals, the edges
and JSON-LD nodes, the validation findings. Only then does ``/readyz`` answer 200.

The event loop never waits for it: ``/healthz``, ``/readyz`` and early tool calls are served
meanwhile (a tool call for a bundle still loading waits for that load, as it would anyway, and
reuses it). A bundle that cannot be loaded keeps the server not ready; the reason is logged once
and the load is retried every :data:`RETRY_SECONDS` (a bundle being synced into place, a broken
file fixed). Once ready, the server stays ready: later changes are picked up call by call.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .cancel import CancelToken
from .dispatch import Dispatcher, UnknownTool
from .errors import BundleError

__all__ = ["RETRY_SECONDS", "WARM_CALLS", "Readiness"]

log = logging.getLogger(__name__)

RETRY_SECONDS = 10.0

# Read tools and arguments whose first run builds the memoised data of a whole snapshot. A tool
# left out by --tools is skipped; a warm call that fails (a cap, say) does not stop readiness:
# the bundle loaded, and the client will get the same answer.
WARM_CALLS: tuple[tuple[str, Mapping[str, Any]], ...] = (
    ("list_concepts", {}),
    ("search_concepts", {"query": "a", "limit": 1}),
    ("search_sections", {"query": "a", "limit": 1}),
    ("get_semantic_graph", {}),
    ("validate_bundle", {"check_links": True, "check_orphans": True}),
)


class Readiness:
    """Whether every served bundle is loaded and warm; thread-safe, read by ``/readyz``."""

    def __init__(
        self,
        dispatcher: Dispatcher,
        bundles: Sequence[str] | None = None,
        *,
        retry_seconds: float = RETRY_SECONDS,
        on_warm: Callable[[], None] | None = None,
    ) -> None:
        """``on_warm`` runs in the warm-up thread once every bundle is warm, just before
        ``/readyz`` turns 200 (``serve --http`` freezes the warmed heap there)."""
        self._dispatcher = dispatcher
        self._bundles = tuple(dispatcher.config.bundles if bundles is None else bundles)
        self._retry_seconds = retry_seconds
        self._on_warm = on_warm
        self._ready = threading.Event()
        self._stopped = threading.Event()
        self._token = CancelToken()
        self._thread: threading.Thread | None = None

    def is_ready(self) -> bool:
        return self._ready.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until ready (or ``timeout`` seconds); True when ready."""
        return self._ready.wait(timeout)

    def start(self) -> None:
        """Start the warm-up thread (a daemon: it never keeps the process alive)."""
        if not self._bundles:
            # --allow-any-bundle without bundles: nothing to load, ready once serving.
            self._ready.set()
            return
        self._thread = threading.Thread(target=self._run, name="bundle-mcp-warm-up", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Cancel the warm-up (the server is shutting down); it stops at its next check."""
        self._stopped.set()
        self._token.cancel()

    def _run(self) -> None:
        waiting = list(self._bundles)
        reported: set[str] = set()
        while waiting:
            waiting = [bundle for bundle in waiting if not self._warm(bundle, reported)]
            if self._stopped.is_set():
                return
            if waiting and self._stopped.wait(self._retry_seconds):
                return
        if self._on_warm is not None:
            self._on_warm()
        self._ready.set()

    def _warm(self, bundle: str, reported: set[str]) -> bool:
        """Load and warm one bundle; False when it could not be loaded (retried later)."""
        try:
            self._dispatcher.served_snapshot(bundle, self._token)
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
        for name, arguments in WARM_CALLS:
            if self._stopped.is_set():
                return False
            try:
                outcome = self._dispatcher.call(
                    name, {"bundle_path": bundle, **arguments}, self._token
                )
            except UnknownTool:
                continue  # not served (--tools)
            if outcome.is_error:
                log.debug("warm-up %s on %s: %s", name, bundle, outcome.text)
        if bundle in reported:
            log.warning("%s loaded: no longer waiting for it", bundle)
        self._note_read_only(bundle)
        return True

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
