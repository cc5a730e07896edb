"""Unpacking a tar or zip archive into a new folder with the loader's defences.

An archive is data from elsewhere, so nothing in it may reach outside the folder it is unpacked
into, or make that folder larger than the bundle caps allow:

- a member named with an absolute path, a drive letter, a ``..`` segment, a backslash or a NUL
  is refused, and so is a name longer than the file system takes (limits.py);
- symbolic and hard links are refused (the loader never follows a link, so a bundle has no use
  for one, and a link is how an unpacker is tricked into writing outside), and so are device
  files and FIFOs;
- every regular file counts against the caps (:class:`~bundle_mcp.limits.Caps`): at most
  ``max_files`` files and ``max_bytes`` bytes in all, counted as the bytes are written, never
  from the sizes the archive declares (a zip bomb declares small ones);
- files are created new (``O_EXCL``, ``O_NOFOLLOW``; a name twice is refused), with mode 0644
  and folders 0755, whatever the archive says.

A refusal raises :class:`ArchiveRefused`; the caller removes the half-made folder.
"""

from __future__ import annotations

import os
import stat
import tarfile
import zipfile
from collections.abc import Iterator
from typing import IO

from ..errors import BundleMcpError
from ..limits import MAX_PATH_BYTES, NAME_MAX_BYTES, Caps

__all__ = ["ArchiveRefused", "unpack_tar", "unpack_zip"]

CHUNK = 1024 * 1024
_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class ArchiveRefused(BundleMcpError, ValueError):
    """The archive breaks a rule of the module docstring; nothing of it is served."""


class _Budget:
    """The caps, spent as files are made and bytes written."""

    def __init__(self, caps: Caps) -> None:
        self.caps = caps
        self.files = 0
        self.bytes = 0

    def file(self, name: str) -> None:
        self.files += 1
        if self.files > self.caps.max_files:
            raise ArchiveRefused(
                f"the archive holds more than {self.caps.max_files} files (the file cap, "
                "--max-files), at {name!r}")

    def spend(self, count: int, name: str) -> None:
        self.bytes += count
        if self.bytes > self.caps.max_bytes:
            raise ArchiveRefused(
                f"the archive unpacks to more than {self.caps.max_bytes} bytes (the byte cap, "
                f"--max-bytes), at {name!r}")


def member_path(name: str, subfolder: str | None) -> str | None:
    """The relative path a member is written to, ``None`` when it lies outside ``subfolder``
    (or is the archive's root folder itself).

    Raises:
        ArchiveRefused: an absolute path, a drive letter, ``..``, a backslash, a NUL, or a name
            longer than the file system takes.
    """
    if "\x00" in name or "\\" in name:
        raise ArchiveRefused(f"the archive names a member with a backslash or NUL: {name!r}")
    if name.startswith("/") or (len(name) > 1 and name[1] == ":"):
        raise ArchiveRefused(f"the archive names a member by an absolute path: {name!r}")
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ArchiveRefused(f"the archive names a member outside its folder ('..'): {name!r}")
    if any(len(p.encode("utf-8", "surrogateescape")) > NAME_MAX_BYTES for p in parts) or (
        len(name.encode("utf-8", "surrogateescape")) > MAX_PATH_BYTES
    ):
        raise ArchiveRefused(f"the archive names a member longer than a file system takes: "
                             f"{name[:80]!r}…")
    if subfolder is not None:
        prefix = subfolder.split("/")
        if parts[: len(prefix)] != prefix:
            return None
        parts = parts[len(prefix):]
    return "/".join(parts) or None


def _make_dirs(dest_fd: int, relative: str) -> int:
    """Open (making them) the folders of ``relative`` below ``dest_fd``, never following a link;
    the caller closes the returned descriptor."""
    fd = os.dup(dest_fd)
    for part in relative.split("/"):
        try:
            os.mkdir(part, 0o755, dir_fd=fd)
        except FileExistsError:
            pass
        try:
            child = os.open(part, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC,
                            dir_fd=fd)
        except OSError:
            os.close(fd)
            raise ArchiveRefused(f"the archive uses {relative!r} as a file and a folder") from None
        os.close(fd)
        fd = child
    return fd


def _write(dest_fd: int, relative: str, source: IO[bytes], budget: _Budget) -> None:
    budget.file(relative)
    folder, _, name = relative.rpartition("/")
    parent = _make_dirs(dest_fd, folder) if folder else os.dup(dest_fd)
    try:
        try:
            fd = os.open(name, _FILE_FLAGS, 0o644, dir_fd=parent)
        except FileExistsError:
            raise ArchiveRefused(f"the archive holds {relative!r} twice") from None
        except IsADirectoryError:
            raise ArchiveRefused(f"the archive uses {relative!r} as a file and a folder") from None
        with os.fdopen(fd, "wb") as out:
            while True:
                # Counted as written: a member larger than the caps is refused at the first
                # chunk past them, however small the archive said it was.
                chunk = source.read(CHUNK)
                if not chunk:
                    break
                budget.spend(len(chunk), relative)
                out.write(chunk)
    finally:
        os.close(parent)


def _refuse_kind(name: str, what: str) -> ArchiveRefused:
    return ArchiveRefused(f"the archive holds {what} ({name!r}): a served bundle is regular "
                          "files and folders only")


def unpack_tar(source: IO[bytes], dest: str, subfolder: str | None, caps: Caps) -> int:
    """Unpack a tar stream (plain or compressed; read once, front to back) into the empty
    folder ``dest``; the number of files written.

    Raises:
        ArchiveRefused: see the module docstring; also for a stream that is not a tar.
    """
    budget = _Budget(caps)
    dest_fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            archive = tarfile.open(fileobj=source, mode="r|*")
        except (tarfile.TarError, EOFError, OSError) as exc:
            raise ArchiveRefused(f"not a readable tar archive ({exc.__class__.__name__})") from None
        with archive:
            for member in _members(archive):
                relative = member_path(member.name, subfolder)
                if member.issym() or member.islnk():
                    # Refused wherever they point: the loader follows none.
                    raise _refuse_kind(member.name, "a link")
                if member.ischr() or member.isblk() or member.isfifo() or member.isdev():
                    raise _refuse_kind(member.name, "a device file or FIFO")
                if relative is None:
                    continue
                if member.isdir():
                    os.close(_make_dirs(dest_fd, relative))
                elif member.isreg():
                    extracted = archive.extractfile(member)
                    assert extracted is not None
                    _write(dest_fd, relative, extracted, budget)
                else:
                    raise _refuse_kind(member.name, "an entry of an unknown kind")
    finally:
        os.close(dest_fd)
    if subfolder is not None and budget.files == 0:
        raise ArchiveRefused(f"the archive has no files under {subfolder!r}")
    return budget.files


def _members(archive: tarfile.TarFile) -> Iterator[tarfile.TarInfo]:
    try:
        yield from archive
    except (tarfile.TarError, EOFError, OSError, ValueError) as exc:
        raise ArchiveRefused(f"the tar archive is damaged ({exc.__class__.__name__})") from None


def unpack_zip(path: str, dest: str, subfolder: str | None, caps: Caps) -> int:
    """Unpack the zip file at ``path`` into the empty folder ``dest``; the files written.

    Raises:
        ArchiveRefused: see the module docstring; also for a file that is not a zip.
    """
    budget = _Budget(caps)
    dest_fd = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        try:
            archive = zipfile.ZipFile(path)
        except (zipfile.BadZipFile, OSError, ValueError) as exc:
            raise ArchiveRefused(f"not a readable zip archive ({exc.__class__.__name__})") from None
        with archive:
            for info in archive.infolist():
                relative = member_path(info.filename, subfolder)
                # The Unix file type, where the zip was made on Unix (0: not recorded).
                kind = stat.S_IFMT(info.external_attr >> 16)
                if kind == stat.S_IFLNK:
                    raise _refuse_kind(info.filename, "a link")
                if kind not in (0, stat.S_IFREG, stat.S_IFDIR):
                    raise _refuse_kind(info.filename, "a device file or FIFO")
                if relative is None:
                    continue
                if info.is_dir():
                    os.close(_make_dirs(dest_fd, relative))
                    continue
                try:
                    with archive.open(info) as member:
                        _write(dest_fd, relative, member, budget)
                except (zipfile.BadZipFile, NotImplementedError, EOFError, OSError) as exc:
                    raise ArchiveRefused(f"the zip archive is damaged at {info.filename!r} "
                                         f"({exc.__class__.__name__})") from None
    finally:
        os.close(dest_fd)
    if subfolder is not None and budget.files == 0:
        raise ArchiveRefused(f"the archive has no files under {subfolder!r}")
    return budget.files
