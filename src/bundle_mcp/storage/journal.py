"""The journal ``.bundle-mcp/journal.json``: the one apply in flight, and the files it may touch.

A journal is in one of three states: ``staging`` (nothing published yet: roll back),
``publishing`` (staged files are complete and durable: roll forward, and if that fails, roll
back) or ``rolling_back`` (an undo has begun: only ever finished, never rolled forward again).
Each entry names a target, its old and new hashes, the dot-file its new version is staged in and
the dot-file that keeps its old version (a hard link, or a copy where the file system has none)
until the apply is finished, so a publication that fails half-way can be undone as well as
completed. An entry without a new hash (and without a staged file) deletes its target: publishing
it unlinks the target, and undoing it puts the kept old version back.

A journal is read back only when every field has exactly the shape this module writes: recovery
renames and deletes nothing but names of the staged-file pattern, beside targets inside the
visible bundle.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import re
from dataclasses import dataclass
from typing import Any

from ..limits import NAME_MAX_BYTES
from .handles import fsync_dir, sha256_hex, split_path
from .state_dir import JOURNAL_FILE, read_json, write_json

__all__ = [
    "DIGEST",
    "HEX64",
    "JOURNAL_VERSION",
    "PUBLISHING",
    "ROLLING_BACK",
    "STAGING",
    "Entry",
    "Journal",
    "backup_name",
    "delete_journal",
    "read_journal",
    "staged_name",
    "write_journal",
]

STAGING = "staging"
PUBLISHING = "publishing"
ROLLING_BACK = "rolling_back"
# 2 added the old-version links ("backup"), 3 deletions (no new hash, no staged file); older
# journals still recover
JOURNAL_VERSION = 3
_READABLE_VERSIONS = (1, 2, 3)

DIGEST = re.compile(r"sha256:[0-9a-f]{64}")  # a request digest or a revision
HEX64 = re.compile(r"[0-9a-f]{64}")  # a file's SHA-256
# The dot-files an apply leaves beside a target: its staged new version (.tmp) and the link to
# the old version (.old). Recovery only ever renames or deletes names of this shape.
_STAGED = re.compile(r"\.[^/\x00]*\.bundle-mcp-[0-9a-f]{12}(?:-[0-9a-f]{16})?\.(?:tmp|old)")


# ---------------------------------------------------------------------------- names beside a target


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
    if len(beside.encode("utf-8")) > NAME_MAX_BYTES:
        # a long file name would overflow NAME_MAX: name the file by a hash of the name instead
        beside = f"..bundle-mcp-{short}-{sha256_hex(name.encode('utf-8'))[:16]}.{suffix}"
    return beside


# ---------------------------------------------------------------------------- the format


@dataclass(frozen=True, slots=True)
class Entry:
    path: str
    old_sha256: str | None
    new_sha256: str | None  # None: the apply deletes the file
    staged: str | None  # None exactly for a deletion: there is no new version to stage
    backup: str | None = None  # the old version's second name; None for a new file (or v1)

    @property
    def deletes(self) -> bool:
        return self.new_sha256 is None


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
            if not (isinstance(digest, str) and DIGEST.fullmatch(digest)):
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
    if not (old is None or (isinstance(old, str) and HEX64.fullmatch(old))):
        raise ValueError("malformed old_sha256")
    if new is None:
        # a deletion: it has an old version, kept beside the target, and nothing staged
        if old is None or staged is not None or backup is None:
            raise ValueError("malformed deletion")
    elif not (isinstance(new, str) and HEX64.fullmatch(new)):
        raise ValueError("malformed new_sha256")
    # the staged name is checked against our own pattern: recovery only ever deletes or renames
    # files it could have created
    elif not (isinstance(staged, str) and _STAGED.fullmatch(staged)):
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


# ---------------------------------------------------------------------------- on disk


def write_journal(state_fd: int, journal: Journal) -> None:
    write_json(state_fd, JOURNAL_FILE, journal.to_json())


def delete_journal(state_fd: int) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(JOURNAL_FILE, dir_fd=state_fd)
    fsync_dir(state_fd)


def read_journal(state_fd: int) -> Journal | None:
    """The pending journal, or ``None``. Raises ValueError (not ours) or OSError (unreadable)."""
    with contextlib.suppress(OSError):
        # a crash while the journal itself was being replaced leaves its temp: the old journal
        # (or none) is still the truth
        os.unlink(JOURNAL_FILE + ".tmp", dir_fd=state_fd)
    value = read_json(state_fd, JOURNAL_FILE)
    return None if value is None else Journal.from_json(value)
