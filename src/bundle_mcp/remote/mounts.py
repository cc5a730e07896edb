"""The remote bundles of one server: fetched at start, served from the cache, refreshed on a
timer (``serve --refresh SECONDS``) or on SIGHUP, read-only.

The dispatcher asks :meth:`RemoteMounts.source` for a served path and loads a remote bundle
inside :meth:`RemoteMounts.holding`; a refresh swaps the copy inside the same lock, so the
source a call reports is the one its snapshot was loaded from.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager

from ..limits import DEFAULT_CAPS, Caps
from .fetch import FetchFailed, RemoteFolder
from .location import BundleSource, RemoteLocation, parse_location

__all__ = ["FetchFailed", "RemoteMounts"]

log = logging.getLogger(__name__)


class _Mount:
    __slots__ = ("folder", "lock", "source")

    def __init__(self, folder: RemoteFolder, source: BundleSource) -> None:
        self.folder = folder
        self.lock = threading.Lock()
        self.source = source


class RemoteMounts:
    """The remote bundles a server serves, by served path (thread-safe)."""

    def __init__(self, cache_root: str, caps: Caps = DEFAULT_CAPS) -> None:
        self._cache_root = os.path.realpath(cache_root)
        self._caps = caps
        self._mounts: dict[str, _Mount] = {}
        self._refreshing = threading.Lock()  # one refresh of all the bundles at a time
        self._stop = threading.Event()
        self._timer: threading.Thread | None = None

    def add(self, argument: str) -> str:
        """Fetch the remote BUNDLE ``argument`` now; the absolute path it is served from.

        Raises:
            ValueError: the argument is not a remote bundle (with the sentence to show).
            FetchFailed: it cannot be fetched or unpacked.
        """
        location: RemoteLocation = parse_location(argument)
        folder = RemoteFolder(location, self._cache_root, self._caps)
        if folder.tree in self._mounts:
            return folder.tree
        fetched = folder.update()
        source = fetched if fetched is not None else folder.served()
        if source is None:  # served.json lost: fetch the copy again from scratch
            raise FetchFailed(f"{location.shown}: the cached copy has no record of what it "
                              "holds; remove the cache folder's remote/ and start again")
        self._mounts[folder.tree] = _Mount(folder, source)
        return folder.tree

    def paths(self) -> frozenset[str]:
        return frozenset(self._mounts)

    def source(self, path: str) -> BundleSource | None:
        """What the remote bundle served at ``path`` holds now; None for a local bundle."""
        mount = self._mounts.get(path)
        return None if mount is None else mount.source

    @contextmanager
    def holding(self, path: str) -> Iterator[None]:
        """Hold ``path``'s copy in place (no refresh swaps it meanwhile); a no-op for a local
        bundle."""
        mount = self._mounts.get(path)
        if mount is None:
            yield
            return
        with mount.lock:
            yield

    def refresh(self) -> None:
        """Fetch every remote bundle again; swap in what changed. A failure is logged and the
        last good copy stays served."""
        with self._refreshing:
            for path, mount in list(self._mounts.items()):
                def swapped(source: BundleSource, mount: _Mount = mount) -> None:
                    mount.source = source

                def held(path: str = path) -> AbstractContextManager[None]:
                    return self.holding(path)

                try:
                    fetched = mount.folder.update(holding=held, on_swap=swapped)
                except (FetchFailed, OSError) as exc:
                    log.error("refreshing %s failed, still serving %s: %s",
                              mount.folder.location.shown, _named(mount.source), exc)
                    continue
                if fetched is not None:
                    log.warning("refreshed %s: now serving %s", mount.folder.location.shown,
                                _named(fetched))

    def start(self, seconds: float | None) -> None:
        """Refresh every ``seconds`` in a background thread (nothing when None)."""
        if seconds is None or not self._mounts:
            return

        def loop() -> None:
            while not self._stop.wait(seconds):
                self.refresh()

        self._timer = threading.Thread(target=loop, name="bundle-mcp-refresh", daemon=True)
        self._timer.start()

    def stop(self) -> None:
        self._stop.set()


def _named(source: BundleSource) -> str:
    if source.commit is not None:
        return f"commit {source.commit}"
    return f"archive sha256 {source.archive_sha256}"
