"""SemanticIndex: concept vectors per snapshot revision, computed by one background worker.

One index belongs to one server (the dispatcher owns it; nothing here is module state). The
first search_semantic call for a snapshot registers it and starts the worker; requests never
wait for embeddings. The worker loads the model once, then fills each registered snapshot in
batches, taking vectors from (in order) a live entry with the same text, the disk cache, and
only then the model. Requests read whatever is there: ``partial`` while it fills, ``ready``
when every concept has a vector.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

from ..cancel import CancelToken
from ..model import Document, Snapshot
from ..okf.properties import text_field
from .cache import VectorCache, default_cache_dir, text_key
from .embedder import MINILM, Embedder, EmbedderSource
from .vectors import Vector, cosine

log = logging.getLogger(__name__)

READY = "ready"
PARTIAL = "partial"
NOT_READY = "not_ready"
UNAVAILABLE = "unavailable"

SCORE_PLACES = 6


@dataclass(frozen=True)
class Matches:
    """The outcome of one vector search: the index status and the hits, best first."""

    status: str
    hits: tuple[tuple[str, float], ...] = ()


@dataclass(eq=False)
class _Entry:
    """The vectors of one snapshot revision (mutated by the worker under the index lock)."""

    revision: str
    snapshot: Snapshot | None  # released once filled
    vectors: dict[str, Vector] = field(default_factory=dict)
    keys: dict[str, bytes] = field(default_factory=dict)
    done: bool = False


def concept_text(doc: Document, max_chars: int) -> str:
    """What is embedded for a concept: title (else its ID), description, body; cut to size."""
    title = text_field(doc.fm, "title").strip() or (doc.concept_id or "")
    parts = [title, text_field(doc.fm, "description").strip(), doc.body.strip()]
    return "\n".join(p for p in parts if p)[:max_chars]


class SemanticIndex:
    """Per-server registry of embedding state, keyed by snapshot revision.

    ``max_snapshots`` bounds memory: the least recently used revision is dropped (a changed
    bundle makes a new revision; the disk cache makes refilling it cheap). A server that serves
    several views at once (readers, several bundles) raises it with :meth:`reserve`: a view
    whose entry was dropped answers ``not_ready`` until it is filled again, so views taking
    turns must not push each other out. ``wait_seconds`` lets
    a search wait that long for the vectors: 0 for a server (requests never wait), more for a
    one-shot ``bundle-mcp call``, whose index would otherwise never be ready in time.
    """

    def __init__(
        self,
        source: EmbedderSource = MINILM,
        cache: VectorCache | None = None,
        *,
        max_snapshots: int = 4,
        batch_size: int = 16,
        wait_seconds: float = 0.0,
    ) -> None:
        self._source = source
        self._cache = cache
        self._wait_seconds = wait_seconds
        self._min_snapshots = max_snapshots
        self._max_snapshots = max_snapshots
        self._batch_size = batch_size
        self._cond = threading.Condition()
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._queue: deque[str] = deque()
        self._embedder: Embedder | None = None
        self._failed = False
        self._closed = False
        self._thread: threading.Thread | None = None
        # The model is used by the worker and by requests (to embed a query); one at a time.
        self._encode_lock = threading.Lock()

    @classmethod
    def default(cls) -> SemanticIndex:
        """The packaged MiniLM model with the user cache folder (read from the environment)."""
        return cls(MINILM, VectorCache.for_source(default_cache_dir(), MINILM))

    def reserve(self, views: int) -> None:
        """Keep room for ``views`` snapshots served at once, each with its current revision
        and the one before it (a search that arrives during a change); never below the
        ``max_snapshots`` given. An entry whose vectors other entries hold too costs only its
        two tables: the vectors themselves are shared."""
        with self._cond:
            self._max_snapshots = max(self._min_snapshots, 2 * views)

    @property
    def capacity(self) -> int:
        """How many snapshot revisions are kept at most now."""
        with self._cond:
            return self._max_snapshots

    def installed(self) -> bool:
        """Whether the model's packages are installed (looked up, never imported: the server
        asks at start-up, and importing torch takes seconds). Without them the server does not
        offer search_semantic at all."""
        return self._source.available()

    # -- what requests call

    def status(self, snapshot: Snapshot) -> str:
        """The state for this snapshot, without starting anything."""
        if not self._source.available():
            return UNAVAILABLE
        with self._cond:
            return self._status_locked(snapshot.revision)

    def ensure(self, snapshot: Snapshot) -> str:
        """Register the snapshot and start the worker if needed; return the current state."""
        if not self._source.available():
            return UNAVAILABLE
        with self._cond:
            if self._failed or self._closed:
                return UNAVAILABLE
            revision = snapshot.revision
            if revision in self._entries:
                self._entries.move_to_end(revision)
            else:
                self._entries[revision] = _Entry(revision, snapshot)
                self._queue.append(revision)
                while len(self._entries) > self._max_snapshots:
                    self._entries.popitem(last=False)
                self._cond.notify_all()
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._work, name="bundle-mcp-embeddings", daemon=True
                )
                self._thread.start()
            return self._status_locked(revision)

    def search(
        self,
        snapshot: Snapshot,
        query: str,
        top_k: int,
        min_score: float,
        token: CancelToken,
        admitted: AbstractSet[str] | None = None,
    ) -> Matches:
        """The top_k concepts by cosine similarity to ``query`` (ties by ID).

        ``min_score`` 0 keeps every hit (cosine can be slightly negative); above 0 it drops
        hits below it. Searches what exists: a ``partial`` index answers from its subset.
        ``admitted`` (a search filter's concept IDs) leaves every other concept out before it
        is scored, so the top_k are the best admitted concepts, never fewer because better
        concepts were filtered out afterwards.
        """
        if self._wait_seconds > 0:
            status = self.wait(snapshot, self._wait_seconds, token)
        else:
            status = self.ensure(snapshot)
        if status in (UNAVAILABLE, NOT_READY):
            return Matches(status)
        embedder = self._embedder
        assert embedder is not None
        with self._encode_lock:
            token.check()
            (vector,) = embedder.encode([query[: self._source.max_chars]])
        token.check()
        with self._cond:
            entry = self._entries.get(snapshot.revision)
            items = list(entry.vectors.items()) if entry is not None else []
        if vector is None:
            return Matches(status)
        scored = []
        for concept_id, other in items:
            token.check()
            if admitted is not None and concept_id not in admitted:
                continue
            # Float32 unit vectors can overshoot 1 by an ulp; the contract says [-1, 1].
            score = round(max(-1.0, min(1.0, cosine(vector, other))), SCORE_PLACES)
            if min_score <= 0 or score >= min_score:
                scored.append((concept_id, score))
        scored.sort(key=lambda hit: (-hit[1], hit[0]))
        return Matches(status, tuple(scored[:top_k]))

    def wait(self, snapshot: Snapshot, timeout: float, token: CancelToken | None = None) -> str:
        """Block until the snapshot is filled (or the index failed) or ``timeout`` passes.

        For tests and one-shot command-line calls; a server request never waits. ``token`` is
        checked between short waits, so a cancelled call stops waiting.
        """
        if self.ensure(snapshot) == UNAVAILABLE:
            return UNAVAILABLE
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                status = self._status_locked(snapshot.revision)
                left = deadline - time.monotonic()
                if status in (READY, UNAVAILABLE) or left <= 0:
                    return status
                if token is not None:
                    token.check()
                self._cond.wait(min(left, 0.1))

    def close(self) -> None:
        """Stop the worker after its current batch (the thread is a daemon either way)."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=30)

    # -- internals

    def _status_locked(self, revision: str) -> str:
        if self._failed:
            return UNAVAILABLE
        entry = self._entries.get(revision)
        if entry is None or self._embedder is None:
            return NOT_READY
        if entry.done:
            return READY
        return PARTIAL if entry.vectors else NOT_READY

    def _work(self) -> None:
        finished = False
        try:
            embedder = self._source.load()
            with self._cond:
                self._embedder = embedder
                self._cond.notify_all()
            while True:
                with self._cond:
                    self._cond.wait_for(lambda: self._queue or self._closed)
                    if self._closed:
                        finished = True
                        return
                    revision = self._queue.popleft()
                    entry = self._entries.get(revision)
                if entry is not None:
                    self._fill(entry, embedder)
        finally:
            if not finished:
                # The load or a fill raised (the thread's excepthook logs it). Say so for good
                # instead of leaving every later request waiting on "not_ready".
                with self._cond:
                    self._failed = True
                    self._cond.notify_all()
                log.error("the embedding worker stopped; search_semantic needs seed_ids now")

    def _fill(self, entry: _Entry, embedder: Embedder) -> None:
        snapshot = entry.snapshot
        if snapshot is None:
            return
        with self._cond:
            known = {
                other.keys[cid]: vector
                for other in self._entries.values()
                for cid, vector in other.vectors.items()
            }
        pending = list(snapshot.concepts.items())
        for start in range(0, len(pending), self._batch_size):
            with self._cond:
                if self._closed:
                    return
                if self._entries.get(entry.revision) is not entry:
                    return  # evicted while it was being filled
            batch = pending[start : start + self._batch_size]
            found, keys = self._vectors(batch, known, embedder)
            with self._cond:
                entry.keys.update(keys)
                entry.vectors.update(found)
                self._cond.notify_all()
        with self._cond:
            entry.done = True
            entry.snapshot = None
            self._cond.notify_all()

    def _vectors(
        self, batch: list[tuple[str, Document]], known: dict[bytes, Vector], embedder: Embedder
    ) -> tuple[dict[str, Vector], dict[str, bytes]]:
        found: dict[str, Vector] = {}
        keys: dict[str, bytes] = {}
        missing: list[tuple[str, bytes, str]] = []
        for concept_id, doc in batch:
            text = concept_text(doc, self._source.max_chars)
            key = text_key(self._source.model_key, text)
            keys[concept_id] = key
            vector = known.get(key)
            if vector is None and self._cache is not None:
                vector = self._cache.get(key)
            if vector is None:
                missing.append((concept_id, key, text))
            else:
                found[concept_id] = vector
        if missing:
            with self._encode_lock:
                computed = embedder.encode([text for _cid, _key, text in missing])
            for (concept_id, key, _text), vector in zip(missing, computed, strict=True):
                if vector is None:
                    continue  # an empty text embeds to nothing useful; it never matches
                found[concept_id] = vector
                if self._cache is not None:
                    self._cache.put(key, vector)
        return found, keys
