"""Getting a remote bundle's bytes and making the folder it is served from.

Each location has a folder of its own in the cache (``<cache>/remote/<key>/``, key: a digest
of the BUNDLE argument):

- ``repo.git``: a bare repository, fetched into (git bundles; ``--depth 1``);
- ``archive``: the archive's bytes as last read or downloaded (archives);
- ``tree``: the served bundle, a plain folder of the files (no ``.git``, no links);
- ``served.json``: what ``tree`` holds (the commit, or the archive's SHA-256);
- ``lock``: held (``flock``) while one process fetches, so two never fetch into one folder.

A new copy is unpacked into a fresh folder beside ``tree`` and swapped in whole with one
``renameat2(RENAME_EXCHANGE)``: a load of the bundle that has opened ``tree`` keeps reading the
copy it opened (the loader works from folder descriptors), the next load opens the new one, and
no load ever sees half of each. Where the exchange is not available the two folders are renamed
one after the other (a load in that instant fails and the next call loads again).
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import IO, cast

from ..errors import BundleMcpError
from ..limits import Caps
from ..vcs import git
from .archive import ArchiveRefused, unpack_tar, unpack_zip
from .location import BundleSource, RemoteLocation

__all__ = ["FetchFailed", "RemoteFolder", "FETCH_TIMEOUT"]

FETCH_TIMEOUT = 300.0  # seconds for one git fetch, archive or download
DOWNLOAD_SLACK = 1024 * 1024  # an archive may be a little larger than what it unpacks to
_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


class FetchFailed(BundleMcpError):
    """The location could not be fetched or unpacked; the sentence says why (no host path)."""


@dataclass(frozen=True, slots=True)
class _Fetched:
    source: BundleSource
    identity: str  # the commit, or the archive's SHA-256: the same identity, the same copy


class RemoteFolder:
    """One location's folder in the cache (the module docstring)."""

    def __init__(self, location: RemoteLocation, cache_root: str, caps: Caps) -> None:
        self.location = location
        self.caps = caps
        self.root = os.path.join(cache_root, "remote", location.key)
        self.tree = os.path.join(self.root, "tree")

    def served(self) -> BundleSource | None:
        """What ``tree`` holds now, as ``served.json`` says (None before the first fetch)."""
        try:
            with open(os.path.join(self.root, "served.json"), encoding="utf-8") as handle:
                data = json.load(handle)
            return BundleSource(**data["source"])
        except (OSError, ValueError, KeyError, TypeError):
            return None

    def update(
        self, holding: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
        on_swap: Callable[[BundleSource], None] | None = None,
    ) -> BundleSource | None:
        """Fetch the location; when it holds something new, unpack it and swap it in.

        The swap, ``on_swap(source)`` and the removal of the old copy run inside
        ``holding()``: the server holds it while it loads the bundle, so that no load reads a
        copy while it is being swapped out or removed. Returns the new source, or ``None``
        when ``tree`` already holds what was fetched.

        Raises:
            FetchFailed: the location could not be fetched, or its files were refused
                (the served copy, if any, is left as it was).
        """
        os.makedirs(self.root, mode=0o700, exist_ok=True)
        with self._locked():
            fetched = self._fetch()
            current = self.served()
            if current is not None and os.path.isdir(self.tree) and (
                _identity(current) == fetched.identity
            ):
                return None
            staging = tempfile.mkdtemp(prefix="tree.next-", dir=self.root)
            try:
                self._unpack(fetched, staging)
                os.chmod(staging, 0o755)
                with holding():
                    _swap_in(staging, self.tree)
                    _write_json(os.path.join(self.root, "served.json"),
                                {"source": fetched.source.as_json()})
                    if on_swap is not None:
                        on_swap(fetched.source)
                    shutil.rmtree(staging, ignore_errors=True)
            finally:
                shutil.rmtree(staging, ignore_errors=True)
            return fetched.source

    # -- fetching

    def _fetch(self) -> _Fetched:
        if self.location.kind == "git":
            return self._fetch_git()
        return self._fetch_archive()

    def _fetch_git(self) -> _Fetched:
        repo = os.path.join(self.root, "repo.git")
        if not os.path.isdir(repo):
            self._git("init", ["init", "--bare", "-q", repo], cwd=self.root)
        ref = self.location.ref or "HEAD"
        self._git("fetch", ["--git-dir", repo, "fetch", "--quiet", "--no-tags", "--depth", "1",
                   "--no-recurse-submodules", "--end-of-options", self.location.url, ref],
                  cwd=self.root)
        done = self._git("rev-parse", ["--git-dir", repo, "rev-parse", "--verify",
                                       "FETCH_HEAD^{commit}"],
                         cwd=self.root)
        commit = done.stdout.decode("ascii", "replace").strip()
        loc = self.location
        source = BundleSource("git", loc.shown, loc.ref, loc.subfolder, commit, None)
        return _Fetched(source, commit)

    def _git(self, what: str, args: list[str], *, cwd: str) -> git.GitResult:
        try:
            done = git.run(args, cwd=cwd, timeout=FETCH_TIMEOUT, max_output=1024 * 1024)
        except git.GitMissing:
            raise FetchFailed("the git command is not installed: a git+ bundle needs it") from None
        except git.GitFailed as exc:
            raise FetchFailed(f"{self.location.shown}: {exc.message}") from None
        if done.returncode != 0:
            first = (done.stderr.splitlines() or ["no message"])[-1]
            raise FetchFailed(f"{self.location.shown}: git {what} failed: {first}")
        return done

    def _fetch_archive(self) -> _Fetched:
        target = os.path.join(self.root, "archive")
        partial = target + ".part"
        limit = self.caps.max_bytes + DOWNLOAD_SLACK
        digest = hashlib.sha256()
        url = self.location.url
        try:
            with _open_archive(url) as source, open(partial, "wb") as out:
                written = 0
                while True:
                    chunk = source.read(1024 * 1024)
                    if not chunk:
                        break
                    written += len(chunk)
                    if written > limit:
                        raise FetchFailed(
                            f"{self.location.shown}: the archive is larger than {limit} bytes "
                            "(the byte cap, --max-bytes, and 1 MiB)")
                    digest.update(chunk)
                    out.write(chunk)
            os.replace(partial, target)
        except FetchFailed:
            _remove(partial)
            raise
        except (OSError, urllib.error.URLError, ValueError) as exc:
            _remove(partial)
            raise FetchFailed(f"{self.location.shown}: cannot read the archive "
                              f"({_reason(exc)})") from None
        loc = self.location
        sha = digest.hexdigest()
        return _Fetched(BundleSource("archive", loc.shown, None, loc.subfolder, None, sha), sha)

    # -- unpacking

    def _unpack(self, fetched: _Fetched, staging: str) -> None:
        loc = self.location
        try:
            if loc.kind == "git":
                repo = os.path.join(self.root, "repo.git")
                assert fetched.source.commit is not None
                try:
                    with git.stream(["--git-dir", repo, "archive", "--format=tar",
                                     "--end-of-options", fetched.source.commit],
                                    cwd=self.root, timeout=FETCH_TIMEOUT) as stream:
                        unpack_tar(stream, staging, loc.subfolder, self.caps)
                except git.GitFailed as exc:
                    raise FetchFailed(f"{loc.shown}: {exc.message}") from None
            elif _is_zip(os.path.join(self.root, "archive")):
                unpack_zip(os.path.join(self.root, "archive"), staging, loc.subfolder, self.caps)
            else:
                with open(os.path.join(self.root, "archive"), "rb") as stream:
                    unpack_tar(stream, staging, loc.subfolder, self.caps)
        except ArchiveRefused as exc:
            raise FetchFailed(f"{loc.shown}: {exc}; nothing of it is served") from None

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        fd = os.open(os.path.join(self.root, "lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC,
                     0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)


def _identity(source: BundleSource) -> str | None:
    return source.commit if source.kind == "git" else source.archive_sha256


@contextlib.contextmanager
def _open_archive(url: str) -> Iterator[IO[bytes]]:
    if url.lower().startswith(("http://", "https://")):
        request = urllib.request.Request(url, headers={"User-Agent": "bundle-mcp"})
        with urllib.request.urlopen(request, timeout=FETCH_TIMEOUT) as response:  # noqa: S310
            yield cast(IO[bytes], response)
    else:
        with open(url, "rb") as handle:
            yield handle


def _is_zip(path: str) -> bool:
    with open(path, "rb") as handle:
        return handle.read(4) in (b"PK\x03\x04", b"PK\x05\x06")


def _swap_in(staging: str, tree: str) -> None:
    """Make ``staging`` the ``tree``; afterwards ``staging`` holds the old copy (or nothing)."""
    if not os.path.isdir(tree):
        os.rename(staging, tree)
        os.mkdir(staging)  # for the caller's clean-up
        return
    if _exchange(staging, tree):
        return
    old = staging + ".old"
    os.rename(tree, old)
    os.rename(staging, tree)
    os.rename(old, staging)


def _exchange(a: str, b: str) -> bool:
    """Swap two folders atomically (Linux renameat2 RENAME_EXCHANGE); False where it is not
    available."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    done = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if done == 0:
        return True
    if ctypes.get_errno() in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP):
        return False
    raise OSError(ctypes.get_errno(), os.strerror(ctypes.get_errno()))


def _write_json(path: str, data: object) -> None:
    partial = path + ".part"
    with open(partial, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(partial, path)


def _remove(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


def _reason(exc: BaseException) -> str:
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError):
        return str(exc.reason) if not isinstance(exc.reason, OSError) else _reason(exc.reason)
    if isinstance(exc, OSError) and exc.errno:
        return f"{errno.errorcode.get(exc.errno, 'error')}: {os.strerror(exc.errno)}"
    return exc.__class__.__name__
