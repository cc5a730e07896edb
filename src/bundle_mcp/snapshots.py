"""The snapshot cache: the last capture of each bundle, refreshed by a stat walk on every call.

``get`` always re-runs the loader with the previous snapshot and its stat keys, so unchanged
files are neither read nor parsed again, and the caller gets *one* snapshot object for the whole
call: an answer never mixes two revisions. When nothing at all changed, the previous snapshot
object itself is returned, which keeps its memoised indexes (edges, folds) warm across calls.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from .cancel import CancelToken
from .errors import BundleError
from .limits import DEFAULT_CAPS, Caps
from .loader import PENDING_WRITE, load_bundle, refresh_files, settled_keys
from .loader.capture import StatKey
from .loader.parse_cache import KeptParts, ParseCache, has_markdown
from .loader.precheck import Precheck
from .loader.watch import FolderWatch
from .loader.yaml_library import prepare as prepare_yaml
from .model import GIVEN, PARSED, Snapshot
from .storage.handles import pin_root

__all__ = ["SnapshotCache", "Loader"]

Loader = Callable[
    [str, CancelToken, Snapshot | None, Mapping[str, StatKey] | None],
    tuple[Snapshot, dict[str, StatKey]],
]

DEFAULT_MAX_BUNDLES = 16
PERSIST_DELAY_SECONDS = 1.0
# How long the warm-up's save waits for the part writes it released (they go on after that).
PARTS_SETTLE_SECONDS = 30.0
PERSIST_LOOK_SECONDS = 1.0


@dataclass(frozen=True, slots=True)
class _Cached:
    snapshot: Snapshot
    stats: Mapping[str, StatKey]
    # Armed before the capture that produced ``snapshot``; an empty poll ⇒ nothing changed since.
    watch: FolderWatch | None = None
    root_identity: tuple[int, int] | None = None


class _Slot:
    """Per-bundle state: a lock that serializes refreshes, and the last good capture."""

    __slots__ = ("lock", "cached", "persisted", "saving", "looked", "save_lock")

    def __init__(self) -> None:
        self.lock = threading.Lock()
        # Held for the whole of a save: a save asked for ``now`` waits for one in progress
        # (which may have started before the documents it must save were built), then saves.
        self.save_lock = threading.Lock()
        self.cached: _Cached | None = None
        self.persisted: tuple[str, int] | None = None  # (revision, parsed bodies) last saved
        self.saving = False
        self.looked: tuple[str, float] | None = None  # (revision, monotonic time) last counted


class SnapshotCache:
    """Thread-safe: one lock per bundle path, so different bundles never wait on each other.

    At most ``max_bundles`` bundles are kept (least recently used dropped first), which bounds
    memory when the server accepts any bundle path. Every load and every refresh holds to
    ``caps`` (a ``loader`` handed in, for tests, loads as it likes).
    """

    def __init__(
        self,
        loader: Loader | None = None,
        max_bundles: int = DEFAULT_MAX_BUNDLES,
        parse_cache: ParseCache | None = None,
        watch: bool = True,
        *,
        caps: Caps = DEFAULT_CAPS,
        prechecks: Mapping[str, Precheck] | None = None,
    ) -> None:
        self._caps = caps
        # Frontmatter another process is loading for a bundle's first load (serve starts them
        # for bundles the parse cache does not know yet).
        self._prechecks = dict(prechecks or {})
        self._loader: Loader = (
            loader if loader is not None else functools.partial(load_bundle, caps=caps))
        self._own_loader = loader is None
        self._watch = watch
        self._max_bundles = max_bundles
        self._parse_cache = parse_cache if parse_cache is not None else ParseCache.default()
        self._slots: OrderedDict[str, _Slot] = OrderedDict()
        self._slots_lock = threading.Lock()
        # Loads run in the callers' threads and the warm-up's, which may end: yaml-rs is loaded
        # here, on the main thread when that is where the cache is made (yaml_library).
        prepare_yaml()

    def get(self, bundle_path: str, token: CancelToken) -> Snapshot:
        """The bundle's current snapshot.

        Raises:
            BundleError: from the loader (bad root, caps, cancellation); the cached capture is
                kept, so a later call starts from it again.
        """
        slot = self._slot(bundle_path)
        with slot.lock:
            previous = slot.cached
            if previous is not None:
                current = self._watched(bundle_path, previous, token)
                if current is not None:
                    slot.cached = current
                    return current.snapshot
            # A first load may start from the persistent parse cache of an earlier process.
            entries = self._parse_cache.load(bundle_path) if previous is None else None
            # Watch the folders we know before walking them: a change made during the walk is
            # then seen by the next call, which walks again. After a restart, the folders of
            # the cache's rows: the first call then need not walk the bundle a second time.
            known = (previous.snapshot.directories if previous is not None
                     else entries.folders() if entries else None)
            watch: FolderWatch | None = None
            on_folder: Callable[[str], object] | None = None
            if self._watch and known is not None:
                watch = FolderWatch(bundle_path, known)
            elif self._watch and self._own_loader:
                # A cold start knows no folder: the walk adds each before listing it, so the
                # next call need not walk the bundle a second time either.
                watch = FolderWatch.growing(bundle_path)
                on_folder = watch.add
            # Without rows to read (a cold start), none to come: the snapshot's whole-bundle
            # values (its edges, say) are kept once the first save makes the database.
            # (A loader handed in, for tests, gets rows only when there are some, as before.)
            rows = entries if entries else (
                self._parse_cache.rows_to_come(bundle_path)
                if previous is None and self._own_loader else None)
            extra: dict[str, object] = {"cached": rows} if rows is not None else {}
            if on_folder is not None:
                extra["on_folder"] = on_folder
            precheck = self._prechecks.get(bundle_path) if previous is None else None
            if precheck is not None:
                extra["prechecked"] = precheck.prechecked
            snapshot, stats = self._loader(
                bundle_path,
                token,
                previous.snapshot if previous else None,
                previous.stats if previous else None,
                **extra,
            )
            if previous is not None and _same_capture(previous.snapshot, snapshot):
                snapshot = previous.snapshot
            if watch is not None and not snapshot.directories <= (
                known if known is not None else watch.folders
            ):
                watch.close()  # a folder is not watched yet: walk next time, then arm
            slot.cached = _Cached(snapshot, stats, watch, _root_identity(bundle_path))
            return snapshot

    def distrust(self, bundle_path: str, path: str) -> None:
        """Make the next :meth:`get` walk the tree and read ``path`` again: the bytes it had
        when the snapshot trusted its stat are gone (:class:`~bundle_mcp.errors.FileMoved`)."""
        with self._slots_lock:
            slot = self._slots.get(bundle_path)
        if slot is None:
            return
        with slot.lock:
            cached = slot.cached
            if cached is None:
                return
            if cached.watch is not None:
                cached.watch.close()
            stats = {p: key for p, key in cached.stats.items() if p != path}
            slot.cached = _Cached(cached.snapshot, stats, None, cached.root_identity)

    def loaded(self, bundle_path: str) -> bool:
        """True when the bundle has a capture here: the change poller refreshes only those, and
        never starts a first (cold) load itself."""
        with self._slots_lock:
            slot = self._slots.get(bundle_path)
        return slot is not None and slot.cached is not None

    def _watched(
        self, bundle_path: str, cached: _Cached, token: CancelToken
    ) -> _Cached | None:
        """The current capture without walking the tree, when the folder watch can tell.

        The root is pinned again on every call (so a symlink swapped into the path is still
        refused). No event since the watch was armed: the last capture stands. Only files
        written in place: those are re-read alone and the watch stays armed. Anything else
        (``None``): the caller walks the whole tree.
        """
        if cached.watch is None or not cached.watch.active:
            return None
        if any(d.code == PENDING_WRITE for d in cached.snapshot.skipped):
            return None  # walk again: the load retries finishing or undoing the stuck write
        if _root_identity(bundle_path) != cached.root_identity:
            return None
        changed = cached.watch.poll()
        if changed is None:
            return None
        if not changed:
            return cached
        refreshed = refresh_files(
            bundle_path, cached.snapshot, cached.stats, changed, token, caps=self._caps)
        if refreshed is None:
            cached.watch.close()  # spent: the full walk arms a new one
            return None
        snapshot, stats = refreshed
        return _Cached(snapshot, stats, cached.watch, cached.root_identity)

    def parts(self, bundle_path: str) -> KeptParts | None:
        """Where the tools keep a query term's parts of this bundle across restarts (``None``
        when the parse cache is off)."""
        return self._parse_cache.parts(bundle_path)

    def persist(self, bundle_path: str, snapshot: Snapshot, *, now: bool = False) -> None:
        """Save what this snapshot has parsed to the persistent cache, in the background.

        Called after each call. A save is started only when it would gain a lot: the first
        time a document was built from its file (or over no rows), and when the parsed bodies
        grew by a twentieth of the bundle (at least 32 files). A restart whose documents all
        came back from the cache's rows has no row to write, and its first save only looked
        for rows to find none: at 9,978 files that held the interpreter lock for about a
        second, against the calls a client makes right after starting the server. The
        warm-up's save writes what that one would have (the values derived since, the stats).

        The save itself writes only the rows the cache lacks, but finding them and encoding
        them holds the interpreter lock while the next calls wait; an entry the cache misses
        only costs that one file's parse at the next start. Counting the parsed bodies is
        itself skipped within a second of the last count of the same revision, unless
        ``now``: the warm-up asks so once it has parsed everything, and then saves in its own
        thread before it says the bundle is warm, so a server that says so is idle (no save
        competes with the calls that follow for the interpreter lock).
        """
        if not self._parse_cache.enabled:
            return
        slot = self._slot(bundle_path)
        clock = time.monotonic()
        threshold = max(32, len(snapshot.documents) // 20)
        with slot.lock:
            # The parsed bodies are at most every document: when even that many could not
            # reach the threshold (the warm-up saved them all), counting could not either. At
            # the file cap the count costs ~10 ms, which a restarted server's first calls and
            # every call after an edit paid.
            persisted = slot.persisted
            if persisted is not None and len(snapshot.documents) - persisted[1] < threshold:
                return
            if slot.saving and not now:
                return  # a save is under way; it would refuse this one after the count too
            # Counting the parsed bodies looks at every document: at the file cap that costs
            # more than a small call itself, so a busy client pays it once a second at most.
            if not now and slot.looked is not None and slot.looked[0] == snapshot.revision and (
                clock - slot.looked[1] < PERSIST_LOOK_SECONDS
            ):
                return
            slot.looked = (snapshot.revision, clock)
        # Only the documents built so far: counting must not build the others.
        parsed = sum(1 for doc in snapshot.documents.built() if has_markdown(doc))
        with slot.lock:
            if slot.saving and not now:
                return
            if slot.persisted is not None and parsed - slot.persisted[1] < threshold:
                return
            if slot.persisted is None and not now and _nothing_to_save(snapshot):
                return
            slot.saving = True

        def save() -> None:
            done = (snapshot.revision, parsed)
            try:
                with slot.save_lock:
                    with slot.lock:
                        last = slot.persisted
                    # A save of this revision with as many bodies ran while this one waited
                    # (the warm-up's own, after its kept answers' calls had set this one
                    # off): it would only look for rows to find none, under the lock.
                    if now or last is None or last[0] != done[0] or last[1] < parsed:
                        stats = self._settled_stats(slot, snapshot)
                        if now:  # the warm-up's save, off every call's path
                            stats.update(self._settled_since(bundle_path, slot, snapshot))
                        self._parse_cache.save(bundle_path, snapshot.documents, stats)
                    else:
                        done = last
            finally:
                with slot.lock:
                    slot.saving = False
                    slot.persisted = done

        if now:
            save()
            # And the parts the warm-up kept, which waited for this save to make the database
            # (a cold start's whole-bundle values: context's words are 25 MB to encode and
            # compress), so that no write competes with the calls after it either.
            self._parse_cache.settle_parts(PARTS_SETTLE_SECONDS)
            return
        # Started a moment later: encoding the rows holds the interpreter lock, and the call
        # that triggered it is still turning its own result into JSON.
        timer = threading.Timer(PERSIST_DELAY_SECONDS, save)
        timer.name = "bundle-mcp-parse-cache"
        timer.daemon = True
        timer.start()

    def _captured_stats(self, slot: _Slot, snapshot: Snapshot
                        ) -> tuple[_Cached | None, dict[str, StatKey]]:
        """The last capture, and its stats of the files whose bytes in ``snapshot`` are the
        ones it saw: a stat is only ever saved beside its own bytes' hash."""
        with slot.lock:
            cached = slot.cached
        if cached is None:
            return None, {}
        captured = cached.snapshot.documents.cells
        saved = snapshot.documents.cells
        return cached, {
            path: key for path, key in cached.stats.items()
            if path in saved and path in captured and saved[path].record == captured[path].record
        }

    def _settled_stats(self, slot: _Slot, snapshot: Snapshot) -> dict[str, StatKey]:
        """The settled ones of :meth:`_captured_stats`."""
        _, stats = self._captured_stats(slot, snapshot)
        return {path: key for path, key in stats.items() if key.settled}

    def _settled_since(self, bundle_path: str, slot: _Slot, snapshot: Snapshot
                       ) -> dict[str, StatKey]:
        """The last capture's unsettled stats that can be trusted now
        (:func:`~bundle_mcp.loader.settled_keys`), for the files whose bytes in ``snapshot``
        are the ones it saw; kept in the capture's stats too, so that every later save keeps
        them (a save writes exactly the stats it is given)."""
        cached, stats = self._captured_stats(slot, snapshot)
        cells = snapshot.documents.cells
        unsettled = {path: (key, cells[path].record.sha256)
                     for path, key in stats.items() if not key.settled}
        if cached is None or not unsettled:
            return {}
        try:
            keys = settled_keys(bundle_path, unsettled)
        except (OSError, BundleError):
            return {}  # the root is gone or unreadable: the next capture says so
        with slot.lock:
            if slot.cached is cached and keys:
                slot.cached = dataclasses.replace(cached, stats={**cached.stats, **keys})
        return keys

    def _slot(self, bundle_path: str) -> _Slot:
        with self._slots_lock:
            slot = self._slots.get(bundle_path)
            if slot is None:
                slot = self._slots[bundle_path] = _Slot()
                # An evicted slot may still be in use by a running call; that call finishes
                # with it and the slot is simply forgotten afterwards.
                while len(self._slots) > self._max_bundles:
                    self._slots.popitem(last=False)
            else:
                self._slots.move_to_end(bundle_path)
            return slot


def _root_identity(bundle_path: str) -> tuple[int, int] | None:
    """(device, inode) of the pinned root; raises like the loader for a bad path."""
    fd = pin_root(bundle_path)
    try:
        st = os.fstat(fd)
        return (st.st_dev, st.st_ino)
    finally:
        os.close(fd)


def _same_capture(old: Snapshot, new: Snapshot) -> bool:
    # The revision covers the Markdown files only; assets, folders and skipped entries decide
    # link resolution and validation findings, so they must match too.
    return (
        old.revision == new.revision
        and old.assets == new.assets
        and old.directories == new.directories
        and old.skipped == new.skipped
    )


def _nothing_to_save(snapshot: Snapshot) -> bool:
    """Whether ``snapshot`` was loaded over a parse cache that holds rows (so its database
    exists: the parts kept meanwhile need not wait for a save to make it) and every document
    built so far came from its row, none from its file's bytes: a save would write no row."""
    inbound = snapshot.inbound
    if inbound is None or inbound.kept_rows() == 0:
        return False
    work = snapshot.documents.work()
    return work[PARSED] + work[GIVEN] == 0
