"""Handles on a bundle's folders, opened without ever following a symlink; small I/O on them.

:func:`pin_root` checks ``bundle_path`` from ``/`` down with ``lstat`` and opens each folder with
``O_NOFOLLOW``, comparing the opened handle's identity with what was checked; every later open
(the loader's capture walk, the write path, recovery) is relative to that pinned root. Below it,
:class:`Tree` opens one folder component at a time with ``O_NOFOLLOW`` and the same identity
check: a symlink anywhere on the way is refused, never followed, so nothing is ever read or
written outside the bundle.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat

from ..errors import Diagnostic, invalid_request
from .refusals import rejected

__all__ = [
    "DIR_FLAGS",
    "NEW_FILE_FLAGS",
    "READ_FLAGS",
    "Tree",
    "bundle_path_diagnostic",
    "check_bundle_path",
    "fsync_dir",
    "on_read_only_fs",
    "open_dir",
    "parent_dirs",
    "pin_root",
    "read_all",
    "sha256_hex",
    "split_path",
    "write_all",
]


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO someone put in the bundle must not hang the server.
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


# ---------------------------------------------------------------------------- the pinned root


def check_bundle_path(bundle_path: str) -> None:
    """Reject a path that is not absolute and already clean, before touching the disk."""
    if not bundle_path:
        raise invalid_request(
            "bundle_path must not be empty", bundle_path_diagnostic("bundle_path is empty")
        )
    if bundle_path != bundle_path.strip():
        raise invalid_request(
            "bundle_path must not have surrounding whitespace",
            bundle_path_diagnostic("remove the surrounding whitespace"),
        )
    if "\x00" in bundle_path:
        raise invalid_request(
            "bundle_path must not contain NUL", bundle_path_diagnostic("NUL byte")
        )
    if not bundle_path.startswith("/"):
        raise invalid_request(
            "bundle_path must be absolute",
            bundle_path_diagnostic("give an absolute path starting with /"),
        )
    if os.path.normpath(bundle_path) != bundle_path or bundle_path.startswith("//"):
        raise invalid_request(
            "bundle_path must already be clean (no '.', '..', '//' or trailing '/')",
            bundle_path_diagnostic("give the clean form of the path"),
        )


def bundle_path_diagnostic(message: str) -> Diagnostic:
    """The ``invalid_input`` finding on the ``bundle_path`` argument."""
    return Diagnostic(
        code="invalid_input", severity="ERROR", field="$.bundle_path", message=message
    )


def pin_root(bundle_path: str) -> int:
    """Open the bundle root, refusing any symlink or non-directory on the way down from ``/``.

    Returns an open directory descriptor the caller must close.
    """
    check_bundle_path(bundle_path)
    fd = os.open("/", DIR_FLAGS)
    try:
        for name in [c for c in bundle_path.split("/") if c]:
            try:
                checked = os.lstat(name, dir_fd=fd)
            except OSError:
                raise invalid_request(
                    "bundle_path does not exist or cannot be read",
                    bundle_path_diagnostic("the bundle folder was not found"),
                ) from None
            if stat.S_ISLNK(checked.st_mode):
                raise invalid_request(
                    "bundle_path must not be or contain a symlink",
                    bundle_path_diagnostic("a component of bundle_path is a symlink"),
                )
            if not stat.S_ISDIR(checked.st_mode):
                raise invalid_request(
                    "bundle_path is not a directory",
                    bundle_path_diagnostic("a component of bundle_path is not a directory"),
                )
            try:
                child = os.open(name, DIR_FLAGS, dir_fd=fd)
            except OSError:
                raise invalid_request(
                    "bundle_path cannot be opened",
                    bundle_path_diagnostic("the bundle folder cannot be opened"),
                ) from None
            os.close(fd)
            fd = child
            try:
                opened = os.fstat(fd)
            except OSError:
                raise invalid_request(
                    "bundle_path cannot be opened",
                    bundle_path_diagnostic("the bundle folder cannot be examined"),
                ) from None
            if (opened.st_dev, opened.st_ino) != (checked.st_dev, checked.st_ino):
                raise invalid_request(
                    "bundle_path changed while it was being checked",
                    bundle_path_diagnostic("a component was replaced during the check; retry"),
                )
        return fd
    except BaseException:
        os.close(fd)
        raise


def on_read_only_fs(root_fd: int) -> bool:
    """Whether the pinned root sits on a file system mounted read-only (``ST_RDONLY``).

    A file system that cannot say is taken as writable: the write itself then finds out.
    """
    try:
        return bool(os.fstatvfs(root_fd).f_flag & os.ST_RDONLY)
    except OSError:
        return False


# ---------------------------------------------------------------------------- folders below it


def open_dir(name: str, parent_fd: int, *, create: bool) -> int | None:
    """Open the folder ``name`` under ``parent_fd`` without following a symlink.

    Returns ``None`` when it does not exist and ``create`` is false. The opened handle's
    identity is compared with the lstat result, so a folder swapped during the check is refused.

    Raises:
        BundleError: ``operation_rejected`` for a symlink, a non-folder or a swapped folder.
        OSError: the file system refused to examine, create or open it.
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
        fd = open_dir(name, parent_fd, create=create)
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


# ---------------------------------------------------------------------------- small I/O


def fsync_dir(dir_fd: int) -> None:
    """Make a folder's changed entries (a rename, a new or removed name) durable."""
    os.fsync(dir_fd)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte: ``os.write`` may write fewer than it was given."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def read_all(fd: int, limit: int) -> bytes:
    """Every byte to the end of the file.

    Raises:
        BundleError: ``operation_rejected`` when more than ``limit`` bytes come out of it.
    """
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
