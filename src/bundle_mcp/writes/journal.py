"""Durable write state under ``<bundle>/.bundle-mcp/``: the lock, the journal, receipts, recovery.

The folder is a dot-folder, so the loader never sees it. It holds

- ``lock``: ``flock``-ed exclusively by an apply (and by recovery) for its whole duration;
- ``journal.json``: the one apply in flight, ``staging`` (nothing published yet, roll back) or
  ``publishing`` (staged files are complete and durable, roll forward);
- ``receipts/<hex>.json``: the durable outcome of each finished apply, keyed by request digest,
  so an identical apply replays instead of writing again.

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
from ..errors import OPERATION_CANCELLED, OPERATION_REJECTED, BundleError, recovery_step
from ..model import canonical_json

__all__ = [
    "PUBLISHING",
    "STAGING",
    "Entry",
    "Journal",
    "Receipt",
    "Tree",
    "delete_journal",
    "WriteLock",
    "open_state_dir",
    "os_failure",
    "pending",
    "read_receipt",
    "recover",
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
RECEIPTS_DIR = "receipts"
STAGING = "staging"
PUBLISHING = "publishing"
JOURNAL_VERSION = 1
MAX_RECEIPTS = 1024  # older receipts are pruned; a replay only matters shortly after a call
MAX_STATE_FILE_BYTES = 64 * 1024 * 1024
LOCK_WAIT_SECONDS = 30.0
NAME_MAX = 255

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC

_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_HEX64 = re.compile(r"[0-9a-f]{64}")
_STAGED = re.compile(r"\.[^/\x00]*\.bundle-mcp-[0-9a-f]{12}(?:-[0-9a-f]{16})?\.tmp")

StepHook = Callable[[str], None]


def no_step(_name: str) -> None:
    """The default step hook: nothing happens between steps."""


# ---------------------------------------------------------------------------- errors


def rejected(message: str, step: str | None = None) -> BundleError:
    steps = (recovery_step(step),) if step else ()
    return BundleError(OPERATION_REJECTED, message, steps)


def os_failure(what: str, exc: OSError) -> BundleError:
    """A refused filesystem call as ``operation_rejected``; the message names no host path."""
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
    _, name = split_path(path)
    short = request_digest.removeprefix("sha256:")[:12]
    staged = f".{name}.bundle-mcp-{short}.tmp"
    if len(staged.encode("utf-8")) > NAME_MAX:
        # a long file name would overflow NAME_MAX: name the stage by a hash of the name instead
        staged = f"..bundle-mcp-{short}-{sha256_hex(name.encode('utf-8'))[:16]}.tmp"
    return staged


# ---------------------------------------------------------------------------- journal


@dataclass(frozen=True, slots=True)
class Entry:
    path: str
    old_sha256: str | None
    new_sha256: str
    staged: str


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
                }
                for e in self.entries
            ],
            "created_dirs": list(self.created_dirs),
        }

    @classmethod
    def from_json(cls, value: Any) -> Journal:
        """Raises ValueError unless ``value`` is a journal this module wrote."""
        if not isinstance(value, dict) or value.get("version") != JOURNAL_VERSION:
            raise ValueError("not a version-1 journal")
        if value.get("state") not in (STAGING, PUBLISHING):
            raise ValueError("unknown journal state")
        digests = [value.get(k) for k in ("request_digest", "base_revision", "result_revision")]
        if not all(isinstance(d, str) and _DIGEST.fullmatch(d) for d in digests):
            raise ValueError("malformed digest")
        entries = tuple(_entry(e) for e in _list(value.get("entries")))
        dirs = tuple(_list(value.get("created_dirs")))
        if not all(isinstance(d, str) and _safe_relative(d) for d in dirs):
            raise ValueError("malformed created_dirs")
        return cls(value["state"], *digests, entries, dirs)


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise ValueError("expected a list")
    return value


def _entry(value: Any) -> Entry:
    if not isinstance(value, dict):
        raise ValueError("malformed entry")
    path, old, new, staged = (value.get(k) for k in ("path", "old_sha256", "new_sha256", "staged"))
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
    return Entry(path, old, new, staged)


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
    with contextlib.suppress(FileNotFoundError):
        # a crash while the journal itself was being replaced leaves its temp: the old journal
        # (or none) is still the truth
        os.unlink(JOURNAL_FILE + ".tmp", dir_fd=state_fd)
    try:
        value = _read_json(state_fd, JOURNAL_FILE)
        return None if value is None else Journal.from_json(value)
    except ValueError:
        raise rejected(
            "the bundle has a pending write whose journal cannot be read",
            "inspect the files named in .bundle-mcp/journal.json, restore them, then delete "
            "that journal",
        ) from None


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
            raise os_failure("the bundle's write lock cannot be opened", exc) from None
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


def recover(root_fd: int, token: CancelToken | None = None) -> None:
    """Finish or undo an interrupted apply, so the bundle is exactly its base or its result.

    Takes the write lock first: a journal that belongs to a live apply in another process is
    waited for, never rolled back under its feet.

    Raises:
        BundleError: ``operation_rejected`` when the pending apply cannot be completed (a
            read-only bundle, a damaged journal); ``operation_cancelled`` when the wait for a
            running apply was cancelled or timed out.
    """
    if not pending(root_fd):
        return
    state_fd = open_state_dir(root_fd, create=False)
    if state_fd is None:
        return
    try:
        with WriteLock(state_fd, token):
            recover_locked(root_fd, state_fd)
    finally:
        os.close(state_fd)


def recover_locked(root_fd: int, state_fd: int) -> None:
    """:func:`recover` for a caller that already holds the lock."""
    journal = _read_journal(state_fd)
    if journal is None:
        return
    try:
        with Tree(root_fd) as tree:
            if journal.state == PUBLISHING:
                roll_forward(tree, state_fd, journal, verify=True)
            else:
                roll_back(tree, state_fd, journal)
    except OSError as exc:
        raise os_failure("an interrupted write to the bundle cannot be recovered", exc) from None


def roll_back(tree: Tree, state_fd: int, journal: Journal) -> None:
    """Nothing was published: delete the staged files and created folders, then the journal."""
    for entry in journal.entries:
        parent, _ = split_path(entry.path)
        dir_fd = tree.directory(parent)
        if dir_fd is None:
            continue
        with contextlib.suppress(FileNotFoundError):
            os.unlink(entry.staged, dir_fd=dir_fd)
        fsync_dir(dir_fd)
    for folder in reversed(journal.created_dirs):
        parent, name = split_path(folder)
        parent_fd = tree.directory(parent)
        if parent_fd is None:
            continue
        # a folder that meanwhile holds anything else (ENOTEMPTY) is not ours to remove
        with contextlib.suppress(OSError):
            os.rmdir(name, dir_fd=parent_fd)
            fsync_dir(parent_fd)
    delete_journal(state_fd)


def roll_forward(
    tree: Tree, state_fd: int, journal: Journal, hook: StepHook = no_step, *, verify: bool
) -> None:
    """Publishing had begun: rename every staged file that is still there over its target.

    Staged files were fsynced before the journal said ``publishing``, so each one is complete;
    ``verify`` (recovery) still checks its hash, so a damaged stage is never published.
    """
    for entry in journal.entries:
        parent, name = split_path(entry.path)
        dir_fd = tree.directory(parent)
        if dir_fd is not None and _staged_present(dir_fd, entry, verify):
            os.replace(entry.staged, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            fsync_dir(dir_fd)
        hook(f"replaced:{entry.path}")
    _write_receipt(state_fd, journal)
    hook("receipt_written")
    delete_journal(state_fd)


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
            raise rejected(
                f"the staged new version of {entry.path} is damaged; the interrupted write "
                "cannot be completed",
                "inspect .bundle-mcp/journal.json and the files it names",
            )
    return True
