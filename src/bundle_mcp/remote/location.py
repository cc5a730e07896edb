"""What a BUNDLE argument names when it is not a local folder, and what a served remote bundle
came from."""

from __future__ import annotations

import hashlib
import os
import re
import urllib.parse
from dataclasses import dataclass
from typing import Any

__all__ = ["BundleSource", "RemoteLocation", "is_remote", "parse_location"]

GIT_PREFIX = "git+"
ARCHIVE_SUFFIXES = (".tar.gz", ".tgz", ".zip")
_GIT_SCHEMES = ("file", "https", "http", "ssh", "git")
# A git ref as a BUNDLE names it: a branch, tag or commit; never an option.
_REF = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_./+-]{0,254}")


@dataclass(frozen=True, slots=True)
class RemoteLocation:
    """A remote BUNDLE argument, checked."""

    kind: str  # "git" or "archive"
    url: str  # git: the repository URL; archive: an absolute path or an http(s) URL
    ref: str | None = None  # git: the branch, tag or commit (None: the remote's HEAD)
    subfolder: str | None = None  # the bundle's folder inside the repository or archive

    @property
    def key(self) -> str:
        """The name of this location's folder in the cache: the same argument, the same
        folder, for every process and restart."""
        text = "\x00".join((self.kind, self.url, self.ref or "", self.subfolder or ""))
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:24]

    @property
    def shown(self) -> str:
        """The location for messages and bundle_summary: the URL without its credentials."""
        return _without_credentials(self.url)


@dataclass(frozen=True, slots=True)
class BundleSource:
    """Where a served remote bundle came from, as of its current copy."""

    kind: str  # "git" or "archive"
    location: str  # the URL or path, credentials removed
    ref: str | None
    subfolder: str | None
    commit: str | None  # git: the commit served
    archive_sha256: str | None  # archive: the SHA-256 of the archive's bytes

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "location": self.location,
            "ref": self.ref,
            "subfolder": self.subfolder,
            "commit": self.commit,
            "archive_sha256": self.archive_sha256,
        }


def is_remote(argument: str) -> bool:
    """Whether a BUNDLE argument names a remote bundle rather than a folder."""
    lowered = argument.lower().split("#", 1)[0].split("?", 1)[0]
    return lowered.startswith(GIT_PREFIX) or lowered.endswith(ARCHIVE_SUFFIXES)


def parse_location(argument: str) -> RemoteLocation:
    """``git+<url>[@<ref>][#<subfolder>]``, or the path or http(s) URL of an archive
    (``.tar.gz``, ``.tgz``, ``.zip``, optionally ``#<subfolder>``).

    Raises:
        ValueError: with the sentence to show (exit 2).
    """
    body, _, fragment = argument.partition("#")
    subfolder = _subfolder(fragment) if fragment else None
    if body.lower().startswith(GIT_PREFIX):
        url, ref = _split_ref(body[len(GIT_PREFIX):])
        scheme = urllib.parse.urlsplit(url).scheme.lower()
        if scheme not in _GIT_SCHEMES:
            raise ValueError(f"{_without_credentials(argument)}: a git bundle is "
                             f"git+<scheme>://... with a scheme of {', '.join(_GIT_SCHEMES)}")
        if scheme == "file":
            path = urllib.parse.unquote(urllib.parse.urlsplit(url).path)
            if not os.path.isabs(path):
                raise ValueError(f"{argument}: a git+file:// URL names an absolute path")
        return RemoteLocation("git", url, ref, subfolder)
    scheme = urllib.parse.urlsplit(body).scheme.lower()
    if scheme in ("http", "https"):
        return RemoteLocation("archive", body, None, subfolder)
    if scheme == "file":
        body = urllib.parse.unquote(urllib.parse.urlsplit(body).path)
    elif scheme:
        raise ValueError(f"{_without_credentials(argument)}: an archive is a path or an "
                         "http(s) URL")
    return RemoteLocation("archive", os.path.abspath(body), None, subfolder)


def _split_ref(rest: str) -> tuple[str, str | None]:
    """``url@ref``: the ``@`` after the last ``/`` (an ``@`` before it is user@host)."""
    slash = rest.rfind("/")
    at = rest.rfind("@")
    if at <= slash:
        return rest, None
    url, ref = rest[:at], rest[at + 1:]
    if not _REF.fullmatch(ref) or ".." in ref or ref.endswith((".", "/", ".lock")):
        raise ValueError(f"@{ref}: a git ref is a branch, tag or commit name (letters, digits "
                         "and _ . / + -, not starting with '-' or '.')")
    return url, ref


def _subfolder(fragment: str) -> str:
    folder = fragment.strip("/")
    parts = folder.split("/")
    if not folder or any(p in ("", ".", "..") or p.startswith("-") for p in parts) or (
        "\\" in folder or "\x00" in folder
    ):
        raise ValueError(f"#{fragment}: the subfolder is a relative path without '.' or '..' "
                         "segments")
    return folder


def _without_credentials(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.password is None and parts.username is None:
        return url
    host = parts.hostname or ""
    if parts.port is not None:
        host = f"{host}:{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=host))
