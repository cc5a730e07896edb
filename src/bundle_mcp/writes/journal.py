"""Durable write state under ``<bundle>/.bundle-mcp/``: the lock, the journal, receipts, recovery.

The folder is a dot-folder, so the loader never sees it. It holds

- ``lock``: ``flock``-ed exclusively by an apply (and by recovery) for its whole duration;
- ``journal.json``: the one apply in flight, ``staging`` (nothing published yet: roll back),
  ``publishing`` (staged files are complete and durable: roll forward, and if that fails, roll
  back) or ``rolling_back`` (an undo has begun: only ever finished, never rolled forward again);
- ``receipts/<hex>.json``: the durable outcome of each finished apply, keyed by request digest,
  so an identical apply replays instead of writing again.

Each file an apply replaces keeps its old version as a hard link (a copy where the file system
has no hard links) beside it until the apply is finished, so a publication that fails half-way
can be undone as well as completed. Neither direction ever blocks readers: a journal that can be
neither completed nor undone is reported (:class:`RecoveryFailed`) and the loader serves the files
as they are, each wholly old or wholly new.

Every path inside the bundle is reached through :class:`Tree`, which opens one directory
component at a time relative to the pinned root with ``O_NOFOLLOW``: a symlink anywhere on the
way is refused, never followed, so nothing is ever written outside the bundle.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import fcntl
import hashlib
import json
import os
import re
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..cancel import CancelToken
from ..errors import (
    OPERATION_CANCELLED,
    OPERATION_REJECTED,
    BundleError,
    Diagnostic,
    recovery_step,
)
from ..model import canonical_json
from ..okf.ids import NAME_MAX_BYTES

__all__ = [
    "PUBLISHING",
    "ROLLING_BACK",
    "STAGING",
    "Entry",
    "Journal",
    "Receipt",
    "RecoveryFailed",
    "Tree",
    "delete_journal",
    "WriteLock",
    "open_state_dir",
    "os_failure",
    "pending",
    "read_receipt",
    "recover",
    "finish",
    "recover_locked",
    "rejected",
    "roll_back",
    "roll_forward",
    "staged_name",
    "write_journal",
]

STATE_DIR = ".bundle-mcp"
LOCK_FILE = "lock"
JOURNAL_FILE = "journal.json"
JOURNAL_PATH = f"{STATE_DIR}/{JOURNAL_FILE}"  # as validation names it
RECEIPTS_DIR = "receipts"
STAGING = "staging"
PUBLISHING = "publishing"
ROLLING_BACK = "rolling_back"
JOURNAL_VERSION = 2  # 2 added the old-version links ("backup"); version 1 journals still recover
_READABLE_VERSIONS = (1, 2)
MAX_RECEIPTS = 1024  # older receipts are pruned; a replay only matters shortly after a call
MAX_STATE_FILE_BYTES = 64 * 1024 * 1024
LOCK_WAIT_SECONDS = 30.0
NAME_MAX = NAME_MAX_BYTES

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
# The dot-files an apply leaves beside a target: its staged new version (.tmp) and the link to
# the old version (.old). Recovery only ever renames or deletes names of this shape.
_STAGED = re.compile(r"\.[^/\x00]*\.bundle-mcp-[0-9a-f]{12}(?:-[0-9a-f]{16})?\.(?:tmp|old)")

StepHook = Callable[[str], None]


def no_step(_name: str) -> None:
    """The default step hook: nothing happens between steps."""


# ---------------------------------------------------------------------------- errors


def rejected(message: str, step: str | None = None) -> BundleError:
    steps = (recovery_step(step),) if step else ()
    return BundleError(OPERATION_REJECTED, message, steps)


_READ_ONLY_MESSAGE = (
    "the bundle is on a read-only file system: this server cannot write to it; nothing was "
    "changed"
)
_READ_ONLY_STEP = (
    "reads work as usual; to write, mount the bundle read-write, or edit the bundle's source "
    "(a git repository, a volume) instead; an operator can serve it with --read-only to leave "
    "the write tools out"
)


def on_read_only_fs(root_fd: int) -> bool:
    """Whether the pinned root sits on a file system mounted read-only (``ST_RDONLY``).

    A file system that cannot say is taken as writable: the write itself then finds out.
    """
    try:
        return bool(os.fstatvfs(root_fd).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def read_only_rejection() -> BundleError:
    """``operation_rejected`` for a write to a bundle on a read-only file system."""
    return rejected(_READ_ONLY_MESSAGE, _READ_ONLY_STEP)


def os_failure(what: str, exc: OSError) -> BundleError:
    """A refused filesystem call as ``operation_rejected``; the message names no host path."""
    if exc.errno == errno.EROFS:  # mounted read-only after the up-front check, or not telling
        return read_only_rejection()
    name = errno.errorcode.get(exc.errno or 0, "error")
    return rejected(
        f"{what}: the filesystem refused it ({name}: {os.strerror(exc.errno or 0)})",
        "free disk space or fix the bundle folder's permissions, then retry the same call",
    )


# ---------------------------------------------------------------------------- small I/O


def fsync_dir(dir_fd: int) -> None:
    os.fsync(dir_fd)


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_all(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := os.read(fd, 1 << 20):
        size += len(chunk)
        if size > limit:
            raise rejected(f"a file is larger than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_json(dir_fd: int, name: str, value: Any) -> None:
    """Write, fsync, rename over ``name``, fsync the folder: readers see old or new, never torn."""
    tmp = name + ".tmp"
    data = canonical_json(value).encode("utf-8") + b"\n"
    with contextlib.suppress(FileNotFoundError):
        os.unlink(tmp, dir_fd=dir_fd)
    try:
        fd = os.open(tmp, NEW_FILE_FLAGS, 0o644, dir_fd=dir_fd)
        try:
            write_all(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        fsync_dir(dir_fd)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise


def _read_json(dir_fd: int, name: str) -> Any | None:
    """The parsed file, or ``None`` when it does not exist. Raises ValueError for bad JSON."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise ValueError(f"{name} is not a regular file")
        return json.loads(read_all(fd, MAX_STATE_FILE_BYTES).decode("utf-8"))
    finally:
        os.close(fd)


def _open_dir(name: str, parent_fd: int, *, create: bool) -> int | None:
    """Open the folder ``name`` under ``parent_fd`` without following a symlink.

    Returns ``None`` when it does not exist and ``create`` is false. The opened handle's
    identity is compared with the lstat result, so a folder swapped during the check is refused.
    """
    try:
        checked = os.lstat(name, dir_fd=parent_fd)
    except FileNotFoundError:
        if not create:
            return None
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, 0o777, dir_fd=parent_fd)
        fsync_dir(parent_fd)
        checked = os.lstat(name, dir_fd=parent_fd)
    if stat.S_ISLNK(checked.st_mode):
        raise rejected("a folder on the write path is a symlink; symlinks are never followed")
    if not stat.S_ISDIR(checked.st_mode):
        raise rejected("a component of the write path exists and is not a folder")
    fd = os.open(name, DIR_FLAGS, dir_fd=parent_fd)
    opened = os.fstat(fd)
    if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino):
        os.close(fd)
        raise rejected("a folder on the write path changed during the write", "retry the call")
    return fd


# ---------------------------------------------------------------------------- the tree


def split_path(path: str) -> tuple[str, str]:
    """``a/b/c.md`` → (``a/b``, ``c.md``); the root folder is ``""``."""
    parent, _, name = path.rpartition("/")
    return parent, name


def parent_dirs(dir_path: str) -> tuple[str, ...]:
    """``a/b`` → (``a``, ``a/b``): every folder from the root down, root excluded."""
    if not dir_path:
        return ()
    parts = dir_path.split("/")
    return tuple("/".join(parts[: i + 1]) for i in range(len(parts)))


@dataclass(frozen=True, slots=True)
class Existing:
    """A regular file found at a write target."""

    sha256: str
    mode: int


class Tree:
    """Directory handles under the pinned root, opened component by component, never via a link.

    A context manager; closes every handle it opened (the root handle stays the caller's).
    """

    __slots__ = ("_fds",)

    def __init__(self, root_fd: int) -> None:
        self._fds: dict[str, int] = {"": root_fd}

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, *_exc: object) -> None:
        root = self._fds.pop("")
        for fd in self._fds.values():
            os.close(fd)
        self._fds = {"": root}

    def directory(self, dir_path: str, *, create: bool = False) -> int | None:
        """The handle of a bundle folder (``""`` = root); ``None`` when missing and not created."""
        if dir_path in self._fds:
            return self._fds[dir_path]
        parent, name = split_path(dir_path)
        parent_fd = self.directory(parent, create=create)
        if parent_fd is None:
            return None
        fd = _open_dir(name, parent_fd, create=create)
        if fd is not None:
            self._fds[dir_path] = fd
        return fd

    def forget(self, dir_paths: tuple[str, ...]) -> None:
        """Close the handles of folders that were removed, so none is used again."""
        for dir_path in dir_paths:
            fd = self._fds.pop(dir_path, None) if dir_path else None
            if fd is not None:
                os.close(fd)

    def missing_dirs(self, dir_path: str) -> tuple[str, ...]:
        """The folders on the way to ``dir_path`` that do not exist yet, shallowest first."""
        chain = parent_dirs(dir_path)
        for i, prefix in enumerate(chain):
            if self.directory(prefix) is None:
                return chain[i:]
        return ()


def inspect_target(dir_fd: int, name: str) -> Existing | None:
    """The regular file ``name`` in ``dir_fd``, or ``None`` when nothing is there.

    Raises:
        BundleError: ``operation_rejected`` for a symlink or anything but a regular file.
    """
    try:
        checked = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(checked.st_mode):
        raise rejected("the write target is a symlink; symlinks are never followed or replaced")
    if not stat.S_ISREG(checked.st_mode):
        raise rejected("the write target exists and is not a regular file")
    fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino):
            raise rejected("the write target changed while it was read", "retry the call")
        digest = sha256_hex(read_all(fd, MAX_STATE_FILE_BYTES))
        return Existing(digest, stat.S_IMODE(opened.st_mode))
    finally:
        os.close(fd)


def staged_name(path: str, request_digest: str) -> str:
    """The dot-file a new version of ``path`` is staged in, beside its target.

    A dot-name keeps it invisible to the loader; the digest prefix ties it to one apply.
    """
    return _beside(path, request_digest, "tmp")


def backup_name(path: str, request_digest: str) -> str:
    """The dot-file that keeps the old version of ``path`` until its apply is finished."""
    return _beside(path, request_digest, "old")


def _beside(path: str, request_digest: str, suffix: str) -> str:
    _, name = split_path(path)
    short = request_digest.removeprefix("sha256:")[:12]
    beside = f".{name}.bundle-mcp-{short}.{suffix}"
    if len(beside.encode("utf-8")) > NAME_MAX:
        # a long file name would overflow NAME_MAX: name the file by a hash of the name instead
        beside = f"..bundle-mcp-{short}-{sha256_hex(name.encode('utf-8'))[:16]}.{suffix}"
    return beside


def keep_old_version(dir_fd: int, name: str, backup: str) -> None:
    """Make ``backup`` a second name of the current ``name`` (a copy without hard links).

    Raises:
        OSError: the file system refused; the caller abandons the apply before publishing.
    """
    with contextlib.suppress(FileNotFoundError):
        os.unlink(backup, dir_fd=dir_fd)  # a leftover of this apply's own naming scheme
    try:
        os.link(name, backup, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EXDEV, errno.EMLINK, errno.ENOTSUP, errno.ENOSYS):
            raise
        _copy_file(dir_fd, name, backup)
    fsync_dir(dir_fd)


def _copy_file(dir_fd: int, name: str, copy: str) -> None:
    src = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    try:
        if not stat.S_ISREG(os.fstat(src).st_mode):
            raise rejected("the write target is not a regular file")
        data = read_all(src, MAX_STATE_FILE_BYTES)
        mode = stat.S_IMODE(os.fstat(src).st_mode)
    finally:
        os.close(src)
    fd = os.open(copy, NEW_FILE_FLAGS, 0o600, dir_fd=dir_fd)
    try:
        os.fchmod(fd, mode)
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


# ---------------------------------------------------------------------------- journal


@dataclass(frozen=True, slots=True)
class Entry:
    path: str
    old_sha256: str | None
    new_sha256: str
    staged: str
    backup: str | None = None  # the old version's second name; None for a new file (or v1)


@dataclass(frozen=True, slots=True)
class Journal:
    """One apply in flight. ``entries`` are in publish order."""

    state: str
    request_digest: str
    base_revision: str
    result_revision: str
    entries: tuple[Entry, ...]
    created_dirs: tuple[str, ...]  # folders the apply creates, shallowest first

    def publishing(self) -> Journal:
        return dataclasses.replace(self, state=PUBLISHING)

    def rolling_back(self) -> Journal:
        return dataclasses.replace(self, state=ROLLING_BACK)

    def to_json(self) -> dict[str, Any]:
        return {
            "version": JOURNAL_VERSION,
            "state": self.state,
            "request_digest": self.request_digest,
            "base_revision": self.base_revision,
            "result_revision": self.result_revision,
            "entries": [
                {
                    "path": e.path,
                    "old_sha256": e.old_sha256,
                    "new_sha256": e.new_sha256,
                    "staged": e.staged,
                    "backup": e.backup,
                }
                for e in self.entries
            ],
            "created_dirs": list(self.created_dirs),
        }

    @classmethod
    def from_json(cls, value: Any) -> Journal:
        """Raises ValueError unless ``value`` is a journal this module wrote."""
        if not isinstance(value, dict) or value.get("version") not in _READABLE_VERSIONS:
            raise ValueError("not a journal version this module writes")
        if value.get("state") not in (STAGING, PUBLISHING, ROLLING_BACK):
            raise ValueError("unknown journal state")
        digests: list[str] = []
        for key in ("request_digest", "base_revision", "result_revision"):
            digest = value.get(key)
            if not (isinstance(digest, str) and _DIGEST.fullmatch(digest)):
                raise ValueError("malformed digest")
            digests.append(digest)
        request_digest, base_revision, result_revision = digests
        entries = tuple(_entry(e) for e in _list(value.get("entries")))
        dirs = tuple(_list(value.get("created_dirs")))
        if not all(isinstance(d, str) and _safe_relative(d) for d in dirs):
            raise ValueError("malformed created_dirs")
        return cls(value["state"], request_digest, base_revision, result_revision, entries, dirs)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError("expected a list")
    return value


def _entry(value: Any) -> Entry:
    if not isinstance(value, dict):
        raise ValueError("malformed entry")
    path, old, new, staged, backup = (
        value.get(k) for k in ("path", "old_sha256", "new_sha256", "staged", "backup")
    )
    if not (isinstance(path, str) and _safe_relative(path)):
        raise ValueError("malformed entry path")
    if not (old is None or (isinstance(old, str) and _HEX64.fullmatch(old))):
        raise ValueError("malformed old_sha256")
    if not (isinstance(new, str) and _HEX64.fullmatch(new)):
        raise ValueError("malformed new_sha256")
    # the staged name is checked against our own pattern: recovery only ever deletes or renames
    # files it could have created
    if not (isinstance(staged, str) and _STAGED.fullmatch(staged)):
        raise ValueError("malformed staged name")
    if not (backup is None or (isinstance(backup, str) and _STAGED.fullmatch(backup))):
        raise ValueError("malformed backup name")
    if backup is not None and (old is None or backup == staged):
        raise ValueError("a backup without an old version")
    return Entry(path, old, new, staged, backup)


def _safe_relative(path: str) -> bool:
    segments = path.split("/")
    return (
        bool(path)
        and "\x00" not in path
        and all(s and s not in (".", "..") and not s.startswith(".") for s in segments)
    )


def write_journal(state_fd: int, journal: Journal) -> None:
    _write_json(state_fd, JOURNAL_FILE, journal.to_json())


def delete_journal(state_fd: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(JOURNAL_FILE, dir_fd=state_fd)
    fsync_dir(state_fd)


def _read_journal(state_fd: int) -> Journal | None:
    """The pending journal, or ``None``. Raises ValueError (not ours) or OSError (unreadable)."""
    with contextlib.suppress(OSError):
        # a crash while the journal itself was being replaced leaves its temp: the old journal
        # (or none) is still the truth
        os.unlink(JOURNAL_FILE + ".tmp", dir_fd=state_fd)
    value = _read_json(state_fd, JOURNAL_FILE)
    return None if value is None else Journal.from_json(value)


# ---------------------------------------------------------------------------- receipts


@dataclass(frozen=True, slots=True)
class Receipt:
    """The durable outcome of one apply."""

    request_digest: str  # "sha256:<64 hex>" over the canonical request (the caller computes it)
    base_revision: str  # "sha256:<64 hex>"
    result_revision: str  # "sha256:<64 hex>"
    changed_paths: tuple[str, ...]
    replayed: bool


def _receipt_name(request_digest: str) -> str:
    return request_digest.removeprefix("sha256:") + ".json"


def read_receipt(state_fd: int, request_digest: str) -> Receipt | None:
    """The stored receipt for this request, or ``None`` (missing or unreadable).

    An unreadable receipt is ignored rather than fatal: it only short-cuts a replay, and without
    it the apply takes the full compare-and-swap path, which is always safe.
    """
    try:
        receipts = _open_dir(RECEIPTS_DIR, state_fd, create=False)
    except OSError:
        return None
    if receipts is None:
        return None
    try:
        value = _read_json(receipts, _receipt_name(request_digest))
    except (OSError, ValueError, BundleError):
        return None
    finally:
        os.close(receipts)
    if not isinstance(value, dict) or value.get("request_digest") != request_digest:
        return None
    base, result, paths = (
        value.get(k) for k in ("base_revision", "result_revision", "changed_paths")
    )
    if not (isinstance(base, str) and _DIGEST.fullmatch(base)):
        return None
    if not (isinstance(result, str) and _DIGEST.fullmatch(result)):
        return None
    if not (isinstance(paths, list) and all(isinstance(p, str) for p in paths)):
        return None
    return Receipt(request_digest, base, result, tuple(paths), False)


def _write_receipt(state_fd: int, journal: Journal) -> None:
    receipts = _open_dir(RECEIPTS_DIR, state_fd, create=True)
    assert receipts is not None
    try:
        _write_json(
            receipts,
            _receipt_name(journal.request_digest),
            {
                "version": JOURNAL_VERSION,
                "request_digest": journal.request_digest,
                "base_revision": journal.base_revision,
                "result_revision": journal.result_revision,
                "changed_paths": sorted(e.path for e in journal.entries),
            },
        )
        _prune_receipts(receipts)
    finally:
        os.close(receipts)


def _prune_receipts(receipts_fd: int) -> None:
    with os.scandir(receipts_fd) as it:
        entries = [
            (e.stat(follow_symlinks=False).st_mtime_ns, e.name)
            for e in it
            if e.name.endswith(".json")
        ]
    entries.sort()
    for _mtime, name in entries[: max(0, len(entries) - MAX_RECEIPTS)]:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=receipts_fd)


# ---------------------------------------------------------------------------- state dir, lock


def open_state_dir(root_fd: int, *, create: bool) -> int | None:
    """The ``.bundle-mcp`` folder's handle (``None`` when absent and not created).

    Raises:
        BundleError: ``operation_rejected`` when it is a symlink, not a folder, or cannot be
            created (a read-only bundle).
    """
    try:
        return _open_dir(STATE_DIR, root_fd, create=create)
    except OSError as exc:
        raise os_failure("the bundle's write state folder cannot be opened", exc) from None


class LockRefused(BundleError):
    """The exclusive lock's file cannot be opened for writing (``operation_rejected``)."""

    def __init__(self, message: str, diagnostics: tuple[Diagnostic, ...]) -> None:
        super().__init__(OPERATION_REJECTED, message, diagnostics)


class WriteLock:
    """Hold the bundle's exclusive write lock for the duration of a ``with`` block.

    The wait polls so that it can be cancelled and is bounded: a call never hangs behind another
    process. The kernel drops the lock when the holder dies, so a crash never wedges the bundle.
    (A class, not ``@contextmanager``: a generator-based manager re-raises by assigning
    ``__traceback__``, which the frozen :class:`BundleError` refuses.)
    """

    __slots__ = ("_state_fd", "_token", "_fd", "_shared")

    def __init__(
        self, state_fd: int, token: CancelToken | None = None, *, shared: bool = False
    ) -> None:
        self._state_fd = state_fd
        self._token = token
        self._fd = -1
        self._shared = shared

    def __enter__(self) -> None:
        if self._shared:
            # Readers never create anything in the bundle: no lock file means no writer ever ran.
            try:
                fd = os.open(LOCK_FILE, READ_FLAGS, dir_fd=self._state_fd)
            except OSError:
                return
            try:
                self._wait(fd)
            except BaseException:
                os.close(fd)
                raise
            self._fd = fd
            return
        try:
            fd = os.open(
                LOCK_FILE,
                os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                0o644,
                dir_fd=self._state_fd,
            )
        except OSError as exc:
            refused = os_failure("the bundle's write lock cannot be opened", exc)
            raise LockRefused(refused.message, refused.diagnostics) from None
        try:
            self._wait(fd)
        except BaseException:
            os.close(fd)
            raise
        self._fd = fd

    def __exit__(self, *_exc: object) -> None:
        if self._fd >= 0:
            os.close(self._fd)  # closing the descriptor releases the flock
        self._fd = -1

    def _wait(self, fd: int) -> None:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        pause = 0.002
        while True:
            try:
                mode = fcntl.LOCK_SH if self._shared else fcntl.LOCK_EX
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                pass
            if self._token is not None:
                self._token.check()
            if time.monotonic() >= deadline:
                raise BundleError(
                    OPERATION_CANCELLED,
                    "another write to this bundle is still running",
                    (recovery_step("retry the same call in a moment"),),
                )
            time.sleep(pause)
            pause = min(pause * 2, 0.05)


class ReadLock:
    """A shared lock held while a reader captures the bundle.

    Writers hold the exclusive lock from planning to the last rename, so a capture taken under
    the shared lock never sees half of an apply: an answer never mixes two revisions.
    """

    __slots__ = ("_root_fd", "_token", "_state_fd", "_lock")

    def __init__(self, root_fd: int, token: CancelToken | None = None) -> None:
        self._root_fd = root_fd
        self._token = token
        self._state_fd: int | None = None
        self._lock: WriteLock | None = None

    def __enter__(self) -> None:
        try:
            if not stat.S_ISDIR(os.lstat(STATE_DIR, dir_fd=self._root_fd).st_mode):
                return
        except OSError:
            return
        self._state_fd = open_state_dir(self._root_fd, create=False)
        if self._state_fd is None:
            return
        self._lock = WriteLock(self._state_fd, self._token, shared=True)
        try:
            self._lock.__enter__()
        except BaseException:
            os.close(self._state_fd)
            self._state_fd = None
            raise

    def __exit__(self, *_exc: object) -> None:
        if self._lock is not None:
            self._lock.__exit__()
            self._lock = None
        if self._state_fd is not None:
            os.close(self._state_fd)
            self._state_fd = None


# ---------------------------------------------------------------------------- recovery


def pending(root_fd: int) -> bool:
    """Cheap check (two stats) for a journal left by an interrupted apply.

    A ``.bundle-mcp`` that is not a real folder (a symlink) holds no journal of ours; it is not
    followed here, and an apply refuses it.
    """
    try:
        if not stat.S_ISDIR(os.lstat(STATE_DIR, dir_fd=root_fd).st_mode):
            return False
        os.stat(f"{STATE_DIR}/{JOURNAL_FILE}", dir_fd=root_fd, follow_symlinks=False)
    except OSError:
        return False
    return True


class RecoveryFailed(BundleError):
    """A pending apply that could be neither completed nor undone (``operation_rejected``).

    Readers carry on with the files as they are; writers are refused until it is resolved.
    """

    def __init__(self, message: str, step: str) -> None:
        super().__init__(OPERATION_REJECTED, message, (recovery_step(step),))


_MANUAL_STEP = (
    "make the bundle folder writable again (disk space, permissions, a read-write mount); the "
    "next call then finishes or undoes the write by itself. To resolve it by hand, restore each "
    "file named in .bundle-mcp/journal.json from its '.old' copy beside it, then delete that "
    "journal"
)


def recover(root_fd: int, token: CancelToken | None = None) -> None:
    """Finish or undo an interrupted apply, so the bundle is exactly its base or its result.

    Takes the write lock first: a journal that belongs to a live apply in another process is
    waited for, never rolled back under its feet.

    Raises:
        RecoveryFailed: the pending apply can be neither completed nor undone (a read-only or
            failing disk, a damaged journal).
        BundleError: ``operation_cancelled`` when the wait for a running apply was cancelled or
            timed out; ``operation_rejected`` when the state folder itself cannot be opened.
    """
    if not pending(root_fd):
        return
    state_fd = open_state_dir(root_fd, create=False)
    if state_fd is None:
        return
    try:
        try:
            lock = WriteLock(state_fd, token)
            lock.__enter__()
        except LockRefused:
            # A state folder that cannot open its lock for writing (a read-only mount, a failing
            # disk) still has its journal looked at, and reported, under the shared lock.
            lock = WriteLock(state_fd, token, shared=True)
            lock.__enter__()
        try:
            recover_locked(root_fd, state_fd)
        finally:
            lock.__exit__()
    finally:
        os.close(state_fd)


def recover_locked(root_fd: int, state_fd: int) -> None:
    """:func:`recover` for a caller that already holds the lock."""
    try:
        journal = _read_journal(state_fd)
    except (OSError, ValueError):
        raise RecoveryFailed(
            "the bundle has a pending write whose journal cannot be read; reads serve the files "
            "as they are, writes are refused",
            _MANUAL_STEP,
        ) from None
    if journal is None:
        return
    with Tree(root_fd) as tree:
        try:
            finish(tree, state_fd, journal)
        except (OSError, BundleError) as exc:
            raise RecoveryFailed(
                f"an interrupted write to the bundle can be neither completed nor undone "
                f"({_reason(exc)}); reads serve the files as they are, writes are refused",
                _MANUAL_STEP,
            ) from None
    if _present(state_fd, JOURNAL_FILE):  # the clean-up after a commit could not finish
        raise RecoveryFailed(
            "a finished write's journal cannot be removed from .bundle-mcp/ (the disk refuses "
            "changes); every file is at its new version, writes are refused",
            _MANUAL_STEP,
        )


def _reason(exc: OSError | BundleError) -> str:
    if isinstance(exc, BundleError):
        return exc.message
    name = errno.errorcode.get(exc.errno or 0, "error")
    return f"{name}: {os.strerror(exc.errno or 0)}"


def finish(
    tree: Tree, state_fd: int, journal: Journal, hook: StepHook = no_step, *, verify: bool = True
) -> bool:
    """Complete or undo ``journal``; True when the apply ended published, False when undone.

    ``verify=False`` only for the apply that staged the files in this process (it knows them).

    ``publishing`` is rolled forward, and when that fails, marked ``rolling_back`` and undone:
    once an undo has begun it is only ever finished, because a file it already restored would
    look like one that never needed publishing.

    Raises:
        OSError, BundleError: neither direction could be completed; the journal stays, in a
            state from which the next attempt goes on safely.
    """
    if journal.state == STAGING:
        roll_back(tree, state_fd, journal)
        return False
    if journal.state == PUBLISHING:
        try:
            roll_forward(tree, state_fd, journal, hook, verify=verify)
        except (OSError, BundleError):
            journal = journal.rolling_back()
            write_journal(state_fd, journal)  # if even this fails, "publishing" stays the truth
        else:
            return True
    roll_back(tree, state_fd, journal)
    return False


def roll_back(tree: Tree, state_fd: int, journal: Journal) -> None:
    """Undo an apply: restore published files from their old versions, delete every staged file
    and old version, the created folders, then the journal.

    Only a target that still holds exactly the bytes this apply published is restored (or, for a
    file the apply created, removed): a file edited since is never overwritten.
    """
    published = journal.state != STAGING
    for entry in reversed(journal.entries):
        parent, name = split_path(entry.path)
        dir_fd = tree.directory(parent)
        if dir_fd is None:
            continue
        if published and _holds(dir_fd, name, entry.new_sha256):
            if entry.backup is not None and _present(dir_fd, entry.backup):
                os.replace(entry.backup, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            elif entry.old_sha256 is None:
                os.unlink(name, dir_fd=dir_fd)
            else:
                raise rejected(f"the old version of {entry.path} is missing; it cannot be undone")
        for leftover in (entry.staged, entry.backup):
            if leftover is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(leftover, dir_fd=dir_fd)
        fsync_dir(dir_fd)
    for folder in reversed(journal.created_dirs):
        parent, name = split_path(folder)
        parent_fd = tree.directory(parent)
        if parent_fd is None:
            continue
        try:
            os.rmdir(name, dir_fd=parent_fd)
        except FileNotFoundError:
            continue
        except OSError as exc:
            if exc.errno in (errno.ENOTEMPTY, errno.EEXIST):
                continue  # a folder that meanwhile holds anything else is not ours to remove
            raise
        fsync_dir(parent_fd)
    tree.forget(journal.created_dirs)
    delete_journal(state_fd)


def roll_forward(
    tree: Tree, state_fd: int, journal: Journal, hook: StepHook = no_step, *, verify: bool
) -> None:
    """Publishing had begun: rename every staged file that is still there over its target.

    Staged files were fsynced before the journal said ``publishing``, so each one is complete;
    ``verify`` (recovery) still checks its hash, so a damaged stage is never published. Once
    every rename is done the apply is committed: what follows (old versions deleted, receipt,
    journal removed) is clean-up that never undoes it, and what of it fails is retried by the
    next recovery, which finds nothing left to rename.

    Raises:
        OSError, BundleError: a rename failed (or a stage is damaged): not committed.
    """
    for entry in journal.entries:
        parent, name = split_path(entry.path)
        dir_fd = tree.directory(parent)
        if dir_fd is None:
            raise rejected(f"the folder of {entry.path} vanished during the write")
        if _staged_present(dir_fd, entry, verify):
            os.replace(entry.staged, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            fsync_dir(dir_fd)
        hook(f"replaced:{entry.path}")
    _clean_up(tree, state_fd, journal, hook)


def _clean_up(tree: Tree, state_fd: int, journal: Journal, hook: StepHook) -> None:
    """After the commit: best effort, and the journal goes last, only when nothing is left."""
    left = False
    for entry in journal.entries:
        if entry.backup is None:
            continue
        dir_fd = tree.directory(split_path(entry.path)[0])
        try:
            if dir_fd is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(entry.backup, dir_fd=dir_fd)
                fsync_dir(dir_fd)
        except OSError:
            left = True
    try:
        _write_receipt(state_fd, journal)
    except (OSError, BundleError):
        pass  # the receipt only short-cuts a replay; without it a retry is a revision conflict
    hook("receipt_written")
    if not left:
        with contextlib.suppress(OSError):
            delete_journal(state_fd)


def _present(dir_fd: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.lstat(name, dir_fd=dir_fd).st_mode)
    except FileNotFoundError:
        return False


def _holds(dir_fd: int, name: str, sha256: str) -> bool:
    """Whether the regular file ``name`` holds exactly the bytes with this hash."""
    try:
        fd = os.open(name, READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return False
    except OSError as exc:
        if exc.errno == errno.ENAMETOOLONG:
            return False  # a name the file system refuses was never published
        raise
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return False
        return sha256_hex(read_all(fd, MAX_STATE_FILE_BYTES)) == sha256
    finally:
        os.close(fd)


def _staged_present(dir_fd: int, entry: Entry, verify: bool) -> bool:
    try:
        checked = os.lstat(entry.staged, dir_fd=dir_fd)
    except FileNotFoundError:
        return False  # already renamed before the interruption
    if not stat.S_ISREG(checked.st_mode):
        raise rejected("a staged file of an interrupted write is not a regular file")
    if verify:
        fd = os.open(entry.staged, READ_FLAGS, dir_fd=dir_fd)
        try:
            digest = sha256_hex(read_all(fd, MAX_STATE_FILE_BYTES))
        finally:
            os.close(fd)
        if digest != entry.new_sha256:
            raise rejected(f"the staged new version of {entry.path} is damaged")
    return True
