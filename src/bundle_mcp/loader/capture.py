"""Capture a bundle's bytes from a pinned root without ever following a symlink.

The root is pinned by :func:`bundle_mcp.storage.handles.pin_root`. The walk then opens every
directory and file relative to its parent's handle with ``O_NOFOLLOW`` and compares identities,
so a path swapped for a symlink during the walk is skipped instead of followed out of the
bundle. Caps are enforced while capturing: the walk stops at the first breach.

Every refusal of the operating system is a finding, never a crash. An entry that vanished or was
replaced while the walk looked at it is ``path_changed``; one that is there but cannot be
examined, opened, listed or read (EACCES, EPERM, EIO, ...) is ``unreadable_entry``, an ERROR for
a Markdown file or a folder (a concept the bundle holds cannot be served) and a WARN for anything
else. Only the root itself is different: a root that cannot be listed is a bad ``bundle_path``.
"""

from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import NoReturn

from ..cancel import CancelToken
from ..errors import ERROR, WARN, Diagnostic, invalid_request, resource_limit
from ..limits import DEFAULT_CAPS, MAX_PATH_BYTES
from ..storage.handles import DIR_FLAGS, READ_FLAGS, bundle_path_diagnostic
from .ignore import IgnoreRules

# The defaults of the two caps the operator may change (limits.Caps: --max-files, --max-bytes).
MAX_FILES = DEFAULT_CAPS.max_files
MAX_TOTAL_BYTES = DEFAULT_CAPS.max_bytes
# Not configurable: one file is read whole into memory and parsed in one piece, and a write's
# new version is held the same way, so this bounds one call's memory whatever the bundle's size.
MAX_FILE_BYTES = 16 * 1024 * 1024
MAX_DEPTH = 64
MAX_IGNORE_FILE_BYTES = 1024 * 1024
# Skipped entries are findings of validate_bundle, whose contract allows 100,000 diagnostics in
# all; a tree with more skipped entries than this (a mount of /proc, a forest of symlinks) is
# not a bundle anyone means to serve.
MAX_SKIPPED = 10_000

_READ_CHUNK = 1 << 20
_SHORT_PATH = MAX_PATH_BYTES // 4  # characters: a path this long or shorter is within the cap

# The entry is gone or is no longer what was checked (O_NOFOLLOW meeting a symlink is ELOOP).
_CHANGED_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.ELOOP})
# These say nothing about the bundle, only about this process: recording them as a finding would
# keep a false ERROR in a cached snapshot until something in the bundle changes. They propagate.
_HOST_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM})


# How long before a stat was taken the file must have last changed for the stat to be trusted
# by a later process (:attr:`StatKey.settled`). Above the coarsest change-time granularity of
# the filesystems a bundle lives on (FAT's two seconds), so a write within the same tick as
# the one the stat shows cannot go unseen.
SETTLE_NS = 3_000_000_000


@dataclass(frozen=True, slots=True)
class StatKey:
    """What must stay equal for a file to be reused without reading it again.

    ``settled``: the file had last changed well before this stat was taken (its change time is
    more than :data:`SETTLE_NS` older than the moment the walk began), so any later write gives
    it another change time. Only such keys are kept in the parse cache for the next process to
    trust without reading the file: git's "racily clean" rule. It is not part of equality.
    """

    dev: int
    ino: int
    size: int
    mtime_ns: int
    ctime_ns: int
    settled: bool = field(default=False, compare=False)

    @classmethod
    def of(cls, st: os.stat_result, seen_ns: int | None = None) -> StatKey:
        """The key of ``st``, settled when it is older than a walk begun at ``seen_ns``."""
        settled = seen_ns is not None and st.st_ctime_ns < seen_ns - SETTLE_NS
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns, settled)


@dataclass(frozen=True, slots=True)
class CapturedFile:
    """One ``.md`` file. ``data`` is ``None`` when the caller already holds it (same StatKey)."""

    path: str
    stat: StatKey
    data: bytes | None


@dataclass(frozen=True, slots=True)
class Capture:
    files: tuple[CapturedFile, ...]
    assets: frozenset[str]
    directories: frozenset[str]
    skipped: tuple[Diagnostic, ...]


def capture(
    root_fd: int,
    token: CancelToken,
    known: Mapping[str, StatKey] | None = None,
    *,
    max_files: int = MAX_FILES,
    max_total_bytes: int = MAX_TOTAL_BYTES,
    max_file_bytes: int = MAX_FILE_BYTES,
    on_folder: Callable[[str], object] | None = None,
) -> Capture:
    """Walk the pinned tree and read every ``.md`` file, enforcing the caps as it goes.

    A file whose StatKey equals ``known[path]`` is not read again (``data is None``).
    ``on_folder`` is told each folder's bundle path ("" for the root) before it is listed.

    Raises:
        BundleError: ``invalid_request`` when the root cannot be listed or its ``.okfignore``
            cannot be read, ``resource_limit`` for a cap.
    """
    known = known or {}
    seen_ns = time.time_ns()  # before every stat of this walk (see StatKey.settled)
    settled_before = seen_ns - SETTLE_NS
    rules = read_ignore_rules(root_fd)
    files: list[CapturedFile] = []
    assets: set[str] = set()
    directories: set[str] = {""}
    skipped: list[Diagnostic] = []
    total = 0

    def skip(finding: Diagnostic) -> None:
        skipped.append(finding)
        if len(skipped) > MAX_SKIPPED:
            raise resource_limit(
                f"more than {MAX_SKIPPED} entries of the bundle are skipped (symlinks, special "
                "or unreadable entries)",
                "exclude the folders that hold them in .okfignore",
            )

    def walk(dir_fd: int, entries: list[os.DirEntry[str]], prefix: str, depth: int) -> None:
        nonlocal total
        for n, entry in enumerate(entries):
            if n % 256 == 255:  # often enough to stop promptly, rarely enough to cost nothing
                token.check()
            name = entry.name
            if name.startswith("."):
                continue
            if name.isascii():  # most names: no surrogate to look for, nothing to display
                path = prefix + name
            else:
                path = prefix + _display_name(name)
                if has_surrogates(name):
                    skip(_skip("invalid_path_encoding", path, "file name is not valid UTF-8"))
                    continue
            # A character is at most four bytes in UTF-8: only a long path needs encoding.
            if len(path) > _SHORT_PATH and len(path.encode("utf-8")) > MAX_PATH_BYTES:
                raise resource_limit(
                    f"a path is longer than {MAX_PATH_BYTES} bytes: {path[:80]}...",
                    "shorten the path or exclude it in .okfignore",
                )
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError as exc:
                failure = _EntryFailure.of(exc)
                folder = _maybe_folder(entry)
                if not rules.ignored(path, is_dir=folder):
                    kind = "folder" if folder else "Markdown file" if name.endswith(".md") else None
                    skip(failure.finding(path, kind, "cannot be examined"))
                continue
            if stat.S_ISLNK(st.st_mode):
                skip(_skip("symlink_skipped", path, "symlinks are never followed; entry skipped"))
                continue
            if stat.S_ISDIR(st.st_mode):
                if rules.ignored(path, is_dir=True):
                    continue
                if depth + 1 >= MAX_DEPTH:
                    raise resource_limit(
                        f"folder nesting is deeper than {MAX_DEPTH} levels at {path}",
                        "flatten the folder tree or exclude the deep part in .okfignore",
                    )
                try:
                    child = _open_checked(name, dir_fd, st, DIR_FLAGS)
                except _EntryFailure as failure:
                    skip(failure.finding(path, "folder", "cannot be opened"))
                    continue
                try:
                    if on_folder is not None:
                        on_folder(path)
                    try:
                        listing = _list_folder(child)
                    except OSError as exc:
                        skip(_EntryFailure.of(exc).finding(path, "folder", "cannot be listed"))
                        continue
                    directories.add(path)
                    token.check()
                    walk(child, listing, path + "/", depth + 1)
                finally:
                    os.close(child)
                continue
            if not stat.S_ISREG(st.st_mode):
                skip(_skip("special_file_skipped", path, "not a regular file; skipped"))
                continue
            if rules.ignored(path, is_dir=False):
                continue
            if not name.endswith(".md"):
                assets.add(path)  # inert: never opened, so its permissions are not checked
                continue
            if len(files) >= max_files:
                raise resource_limit(
                    f"the bundle has more than {max_files} Markdown files",
                    "split the bundle or exclude folders in .okfignore; narrowing a query "
                    "cannot bypass loading",
                )
            if st.st_size > max_file_bytes:
                raise resource_limit(
                    f"{path} is larger than {max_file_bytes} bytes",
                    "split the file or exclude it in .okfignore",
                )
            expected = known.get(path)
            if expected is not None and _unchanged(expected, st):
                # The key it had, when that one is as settled as this stat would be (a restart's
                # trusted stats: one object less per file); else this stat's own.
                key = expected if expected.settled and (
                    st.st_ctime_ns < settled_before) else StatKey.of(st, seen_ns)
                total += key.size
                check_total(total, max_total_bytes)
                files.append(CapturedFile(path, key, None))
                continue
            try:
                data, key = _read_file(name, dir_fd, st, max_file_bytes, path, seen_ns)
            except _EntryFailure as failure:
                skip(failure.finding(path, "Markdown file", "cannot be read"))
                continue
            total += len(data)
            check_total(total, max_total_bytes)
            files.append(CapturedFile(path, key, data))

    token.check()
    if on_folder is not None:
        on_folder("")
    try:
        root_listing = _list_folder(root_fd)
    except OSError as exc:
        _raise_if_host(exc)
        raise invalid_request(
            "bundle_path cannot be read: its folder cannot be listed",
            bundle_path_diagnostic(f"the bundle folder cannot be listed ({_reason(exc)})"),
        ) from None
    walk(root_fd, root_listing, "", 0)
    files.sort(key=lambda f: f.path)
    return Capture(tuple(files), frozenset(assets), frozenset(directories), tuple(skipped))


def _unchanged(key: StatKey, st: os.stat_result) -> bool:
    """Whether ``st`` has ``key``'s identity, size and times (``StatKey`` equality, without
    making the key of ``st``)."""
    return (key.ino == st.st_ino and key.mtime_ns == st.st_mtime_ns
            and key.ctime_ns == st.st_ctime_ns and key.size == st.st_size
            and key.dev == st.st_dev)


def check_total(total: int, limit: int = MAX_TOTAL_BYTES) -> None:
    if total > limit:
        raise resource_limit(
            f"the bundle's Markdown files exceed {limit} bytes in total",
            "split the bundle or exclude folders in .okfignore",
        )


def read_relative(
    root_fd: int, path: str, seen_ns: int | None = None
) -> tuple[bytes, StatKey] | None:
    """Read one bundle file by its relative path without following any symlink.

    Each folder on the way is opened with ``O_NOFOLLOW`` relative to the one before, and the
    file must still be a regular file within the per-file cap. ``None`` when anything on the
    way is missing, unreadable, or is not what a capture would have read: the caller then
    walks the whole tree, which reports why. ``seen_ns``: as for a walk, the time taken before
    the file was looked at, against which its key is settled or not (:meth:`StatKey.of`).
    """
    *folders, name = path.split("/")
    fd = _open_folders(root_fd, folders)
    if fd is None:
        return None
    try:
        try:
            checked = os.stat(name, dir_fd=fd, follow_symlinks=False)
        except OSError:
            return None
        if not stat.S_ISREG(checked.st_mode) or checked.st_size > MAX_FILE_BYTES:
            return None
        try:
            return _read_file(name, fd, checked, MAX_FILE_BYTES, path, seen_ns)
        except _EntryFailure:
            return None
    finally:
        os.close(fd)


def entry_kind(root_fd: int, path: str) -> str:
    """``"absent"`` (no such entry, its folders there), ``"file"`` (a regular file) or
    ``"other"`` (anything else, or a folder on the way that is not a plain folder), looked up
    without following any symlink."""
    *folders, name = path.split("/")
    fd = _open_folders(root_fd, folders)
    if fd is None:
        return "other"
    try:
        checked = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        return "absent"
    except OSError:
        return "other"
    finally:
        os.close(fd)
    return "file" if stat.S_ISREG(checked.st_mode) else "other"


def _open_folders(root_fd: int, folders: list[str]) -> int | None:
    """The folder ``root/f1/f2/...`` opened with ``O_NOFOLLOW`` at each step, or ``None``."""
    fd = os.dup(root_fd)
    for folder in folders:
        try:
            checked = os.stat(folder, dir_fd=fd, follow_symlinks=False)
            if not stat.S_ISDIR(checked.st_mode):
                raise NotADirectoryError(folder)
            child = _open_checked(folder, fd, checked, DIR_FLAGS)
        except (OSError, _EntryFailure):
            os.close(fd)
            return None
        os.close(fd)
        fd = child
    return fd


class _EntryFailure(Exception):
    """Why one entry was not captured: it changed during the walk, or the OS would not give it."""

    def __init__(self, changed: bool, reason: str) -> None:
        super().__init__(reason)
        self.changed = changed
        self.reason = reason

    @classmethod
    def of(cls, exc: OSError) -> _EntryFailure:
        _raise_if_host(exc)
        return cls(exc.errno in _CHANGED_ERRNOS, _reason(exc))

    def finding(self, path: str, kind: str | None, failed: str) -> Diagnostic:
        """The skip finding; ``kind`` is ``None`` for an entry that cannot hold a concept."""
        what = kind or "entry"
        if self.changed:
            return _skip("path_changed", path, f"{what} changed during capture ({self.reason})")
        if kind is None:
            return _skip("unreadable_entry", path, f"{what} {failed} ({self.reason}); skipped")
        return Diagnostic(
            code="unreadable_entry",
            severity=ERROR,
            file=path,
            message=f"{what} {failed} ({self.reason}); the bundle cannot be served whole",
        )


def _raise_if_host(exc: OSError) -> None:
    if exc.errno in _HOST_ERRNOS:
        raise exc


def _reason(exc: OSError) -> str:
    # strerror only: the exception's own text may carry a host path.
    return os.strerror(exc.errno) if exc.errno else "unknown error"


def _maybe_folder(entry: os.DirEntry[str]) -> bool:
    """Whether an entry that cannot be examined may be a folder (then it may hold concepts)."""
    try:
        # Answered from the listing's d_type without a system call where the filesystem has one.
        return entry.is_dir(follow_symlinks=False)
    except OSError:
        return True  # unknown kind: assume the worst


def _list_folder(dir_fd: int) -> list[os.DirEntry[str]]:
    """Every entry of an open folder, sorted by name; all or nothing (raises ``OSError``)."""
    with os.scandir(dir_fd) as it:
        return sorted(it, key=lambda e: e.name)


def _open_checked(name: str, dir_fd: int, checked: os.stat_result, flags: int) -> int:
    """Open ``name`` and make sure it is still the entry that was checked.

    Raises:
        _EntryFailure: the open was refused, or the entry was replaced since it was checked.
    """
    try:
        fd = os.open(name, flags, dir_fd=dir_fd)
    except OSError as exc:
        raise _EntryFailure.of(exc) from None
    try:
        opened = os.fstat(fd)
    except OSError as exc:
        os.close(fd)
        raise _EntryFailure.of(exc) from None
    if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino):
        os.close(fd)
        raise _EntryFailure(True, "replaced by another entry")
    return fd


def _read_file(
    name: str, dir_fd: int, checked: os.stat_result, limit: int, path: str,
    seen_ns: int | None = None,
) -> tuple[bytes, StatKey]:
    """The file's bytes and the StatKey of what was read.

    Raises:
        _EntryFailure: it cannot be opened or read, or it changed since it was checked.
        BundleError: ``resource_limit`` when more than ``limit`` bytes come out of it.
    """
    fd = _open_checked(name, dir_fd, checked, READ_FLAGS)
    try:
        try:
            opened = os.fstat(fd)
        except OSError as exc:
            raise _EntryFailure.of(exc) from None
        if not stat.S_ISREG(opened.st_mode):
            raise _EntryFailure(True, "no longer a regular file")
        try:
            data = _read_capped(fd, limit)
        except OSError as exc:
            raise _EntryFailure.of(exc) from None
        if len(data) > limit:
            raise resource_limit(
                f"{path} is larger than {limit} bytes",
                "split the file or exclude it in .okfignore",
            )
        return data, StatKey.of(opened, seen_ns)
    finally:
        os.close(fd)


def _read_capped(fd: int, limit: int) -> bytes:
    """Read to the end, or stop as soon as more than ``limit`` bytes came.

    The count is of the bytes read, not ``st_size``: some files (procfs, FUSE) report 0 and
    still have content, and a file may grow while it is read.
    """
    chunks: list[bytes] = []
    size = 0
    while size <= limit:
        chunk = os.read(fd, min(_READ_CHUNK, limit + 1 - size))
        if not chunk:
            break
        size += len(chunk)
        chunks.append(chunk)
    return b"".join(chunks)


def read_ignore_rules(root_fd: int) -> IgnoreRules:
    """The root ``.okfignore``; none when it is absent, a symlink or not a regular file.

    Raises:
        BundleError: ``invalid_request`` when it is there but cannot be read: walking without
            its rules would serve what the bundle's author excluded.
    """
    try:
        fd = os.open(".okfignore", READ_FLAGS, dir_fd=root_fd)
    except OSError as exc:
        if exc.errno in _CHANGED_ERRNOS:  # absent, or a symlink (never followed)
            return IgnoreRules(())
        _unreadable_ignore_file(exc)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return IgnoreRules(())
        data = _read_capped(fd, MAX_IGNORE_FILE_BYTES)
    except OSError as exc:
        _unreadable_ignore_file(exc)
    finally:
        os.close(fd)
    if len(data) > MAX_IGNORE_FILE_BYTES:
        raise resource_limit(".okfignore is larger than 1 MiB", "shorten .okfignore")
    return IgnoreRules.parse(data.decode("utf-8", errors="replace"))


def _unreadable_ignore_file(exc: OSError) -> NoReturn:
    _raise_if_host(exc)
    raise invalid_request(
        "bundle_path cannot be read: its .okfignore cannot be read",
        bundle_path_diagnostic(f".okfignore cannot be read ({_reason(exc)})"),
    ) from None


def has_surrogates(name: str) -> bool:
    # Names that were not valid UTF-8 come back from the OS with lone surrogates.
    return not name.isascii() and any("\udc80" <= ch <= "\udcff" for ch in name)


def _display_name(name: str) -> str:
    if has_surrogates(name):
        return name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    return name


def _skip(code: str, path: str, message: str) -> Diagnostic:
    return Diagnostic(code=code, severity=WARN, file=path, message=message)

