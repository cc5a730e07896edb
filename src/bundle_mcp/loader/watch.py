"""Change notification for a captured bundle (Linux inotify), so an unchanged bundle costs no walk.

The snapshot cache re-walks the bundle (a stat walk) before every call. At the file cap that
walk alone takes longer than a warm answer should, so where the kernel can tell us that nothing
in the bundle's folders changed since the last capture, the walk is skipped. The watcher is a
hint, never a source of truth: any event, a queue overflow, a folder we could not watch, or any
error simply means "walk again". Events are queued by the kernel when the change happens, so a
change that completed before a call starts is always seen by that call.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import struct
import threading
from collections.abc import Iterable

_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = os.O_CLOEXEC
_IN_MODIFY = 0x00000002
_IN_ATTRIB = 0x00000004
_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_FROM = 0x00000040
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_DELETE = 0x00000200
_IN_DELETE_SELF = 0x00000400
_IN_MOVE_SELF = 0x00000800
_IN_ISDIR = 0x40000000
_IN_ONLYDIR = 0x01000000
_IN_DONT_FOLLOW = 0x02000000
_MASK = (
    _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE
    | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR | _IN_DONT_FOLLOW
)
MAX_WATCHED_FOLDERS = 4096


_EVENT = struct.Struct("iIII")
# Events that name one file of a watched folder: written in place, created, deleted, renamed.
# A folder's own events (IN_ISDIR, deleted or moved itself) and a queue overflow are not here.
_FILE_EVENTS = (
    _IN_MODIFY | _IN_CLOSE_WRITE | _IN_ATTRIB | _IN_CREATE | _IN_DELETE | _IN_MOVED_FROM
    | _IN_MOVED_TO
)


def _changed_files(data: bytes, folders: dict[int, str]) -> set[str] | None:
    """Paths of the files the events name, or ``None`` if any event asks for a full walk."""
    out: set[str] = set()
    offset = 0
    while offset + _EVENT.size <= len(data):
        wd, mask, _cookie, length = _EVENT.unpack_from(data, offset)
        raw = data[offset + _EVENT.size : offset + _EVENT.size + length]
        offset += _EVENT.size + length
        name = raw.split(b"\0", 1)[0]
        folder = folders.get(wd)
        if folder is None or not name or mask & _IN_ISDIR or mask & ~_FILE_EVENTS:
            return None
        text = os.fsdecode(name)
        out.add(f"{folder}/{text}" if folder else text)
    return out


@functools.cache
def _libc() -> ctypes.CDLL | None:
    # Once a process: find_library asks ldconfig each time (about 1 ms), and a growing watch
    # adds each folder of a cold walk one at a time.
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        libc.inotify_init1  # noqa: B018 - probe: not every libc has inotify
        libc.inotify_add_watch  # noqa: B018
    except (OSError, AttributeError):
        return None
    return libc


class FolderWatch:
    """Watches a set of folders (fixed, or added to by a first walk: :meth:`growing`);
    ``poll()`` says what changed in them since each was added.

    One instance per captured snapshot: after a change the cache walks again and arms a new
    watch for the folders of the new capture.
    """

    def __init__(self, root: str, folders: Iterable[str]) -> None:
        self._fd = -1
        self._lock = threading.Lock()
        self._dirty = True
        self._folders: dict[int, str] = {}
        self._root: str | None = None  # set for a growing watch only (:meth:`add`)
        folders = sorted(folders)
        libc = _libc()
        if libc is None or len(folders) > MAX_WATCHED_FOLDERS:
            return
        fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        if fd < 0:
            return
        for folder in folders:
            path = os.path.join(root, folder) if folder else root
            wd = libc.inotify_add_watch(fd, os.fsencode(path), _MASK)
            if wd < 0:
                os.close(fd)  # a folder we cannot watch: always walk
                return
            self._folders[wd] = folder
        self._fd = fd
        self._dirty = False

    @classmethod
    def growing(cls, root: str) -> FolderWatch:
        """A watch of no folder yet, for a first walk that adds each folder (:meth:`add`)
        before it lists it: a change made once a folder is listed is then seen, as a watch
        armed before the walk sees it, and the next call need not walk again."""
        watch = cls(root, ())
        watch._root = root
        return watch

    def add(self, folder: str) -> None:
        """Watch one more folder (a growing watch's walk, before it lists the folder). One
        that cannot be watched, or one past :data:`MAX_WATCHED_FOLDERS`, spends the watch:
        the next call walks."""
        with self._lock:
            if self._fd < 0 or self._root is None:
                return
            if len(self._folders) >= MAX_WATCHED_FOLDERS:
                self._spend()
                return
            libc = _libc()
            path = os.path.join(self._root, folder) if folder else self._root
            wd = -1 if libc is None else libc.inotify_add_watch(self._fd, os.fsencode(path), _MASK)
            if wd < 0:
                self._spend()
                return
            self._folders[wd] = folder

    @property
    def folders(self) -> frozenset[str]:
        """The folders watched."""
        with self._lock:
            return frozenset(self._folders.values())

    @property
    def active(self) -> bool:
        return self._fd >= 0

    def poll(self) -> frozenset[str] | None:
        """What changed since the last poll: ``None`` means "walk everything", an empty set
        means nothing changed, otherwise the bundle-relative paths of the files written,
        created, deleted or renamed in the watched folders (the caller looks at each).

        A folder created, deleted or renamed, an event on a watched folder itself, an unknown
        watch or a queue overflow all answer ``None`` (and keep answering it: the watch is
        spent).
        """
        with self._lock:
            if self._dirty or self._fd < 0:
                return None
            changed: set[str] = set()
            while True:
                try:
                    data = os.read(self._fd, 1 << 16)
                except BlockingIOError:
                    return frozenset(changed)
                except OSError:
                    self._dirty = True
                    return None
                if not data:
                    return frozenset(changed)
                names = _changed_files(data, self._folders)
                if names is None:
                    self._dirty = True
                    return None
                changed.update(names)

    def close(self) -> None:
        with self._lock:
            self._spend()

    def _spend(self) -> None:  # under the lock
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        self._dirty = True

    # Bound at class creation: a watch still held at interpreter exit (a dispatcher in a
    # script's global) is finalized after the module's globals are cleared, ``os`` included.
    _close_fd = staticmethod(os.close)

    def __del__(self) -> None:  # the cache drops watches it replaces; release the descriptor
        if self._fd >= 0:
            try:
                self._close_fd(self._fd)
            except OSError:
                pass
