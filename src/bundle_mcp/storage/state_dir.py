"""The write state folder ``<bundle>/.bundle-mcp/`` and the JSON files kept in it.

The folder is a dot-folder, so the loader never sees it. It holds

- ``lock``: ``flock``-ed exclusively by an apply (and by recovery) for its whole duration, shared
  by a reader while it captures (:mod:`.locks`);
- ``journal.json``: the one apply in flight (:mod:`.journal`);
- ``receipts/<hex>.json``: the durable outcome of each finished apply (:mod:`.receipts`).

Each JSON file is replaced whole (written beside, fsynced, renamed over, the folder fsynced), so
a reader sees the old or the new file, never a torn one.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from typing import Any

from .handles import NEW_FILE_FLAGS, READ_FLAGS, fsync_dir, open_dir, read_all, write_all
from .refusals import os_failure

__all__ = [
    "JOURNAL_FILE",
    "JOURNAL_PATH",
    "LOCK_FILE",
    "MAX_STATE_FILE_BYTES",
    "RECEIPTS_DIR",
    "STATE_DIR",
    "open_state_dir",
    "read_json",
    "write_json",
]

STATE_DIR = ".bundle-mcp"
LOCK_FILE = "lock"
JOURNAL_FILE = "journal.json"
JOURNAL_PATH = f"{STATE_DIR}/{JOURNAL_FILE}"  # as validation names it
RECEIPTS_DIR = "receipts"
MAX_STATE_FILE_BYTES = 64 * 1024 * 1024


def open_state_dir(root_fd: int, *, create: bool) -> int | None:
    """The ``.bundle-mcp`` folder's handle (``None`` when absent and not created).

    Raises:
        BundleError: ``operation_rejected`` when it is a symlink, not a folder, or cannot be
            created (a read-only bundle).
    """
    try:
        return open_dir(STATE_DIR, root_fd, create=create)
    except OSError as exc:
        raise os_failure("the bundle's write state folder cannot be opened", exc) from None


def _encode(value: Any) -> bytes:
    # Sorted keys, no whitespace, UTF-8, one final newline: the on-disk form of the journal and
    # the receipts. It is the form of ``model.canonical_json`` (which hashes use), spelled out
    # here so that the bytes a pending journal was written in never change with the model.
    text = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.encode("utf-8") + b"\n"


def write_json(dir_fd: int, name: str, value: Any) -> None:
    """Write, fsync, rename over ``name``, fsync the folder: readers see old or new, never torn."""
    tmp = name + ".tmp"
    data = _encode(value)
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


def read_json(dir_fd: int, name: str) -> Any | None:
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
