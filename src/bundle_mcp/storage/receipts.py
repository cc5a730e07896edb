"""Receipts ``.bundle-mcp/receipts/<hex>.json``: the durable outcome of each finished apply.

Keyed by the request digest, so an identical apply replays its receipt instead of writing again.
A receipt only short-cuts a replay: one that is missing or unreadable sends the apply down the
full compare-and-swap path, which is always safe. The newest :data:`MAX_RECEIPTS` are kept.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass

from ..errors import BundleError
from .handles import open_dir
from .journal import DIGEST, JOURNAL_VERSION, Journal
from .state_dir import RECEIPTS_DIR, read_json, write_json

__all__ = ["MAX_RECEIPTS", "Receipt", "read_receipt", "write_receipt"]

MAX_RECEIPTS = 1024  # older receipts are pruned; a replay only matters shortly after a call


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
        receipts = open_dir(RECEIPTS_DIR, state_fd, create=False)
    except OSError:
        return None
    if receipts is None:
        return None
    try:
        value = read_json(receipts, _receipt_name(request_digest))
    except (OSError, ValueError, BundleError):
        return None
    finally:
        os.close(receipts)
    if not isinstance(value, dict) or value.get("request_digest") != request_digest:
        return None
    base, result, paths = (
        value.get(k) for k in ("base_revision", "result_revision", "changed_paths")
    )
    if not (isinstance(base, str) and DIGEST.fullmatch(base)):
        return None
    if not (isinstance(result, str) and DIGEST.fullmatch(result)):
        return None
    if not (isinstance(paths, list) and all(isinstance(p, str) for p in paths)):
        return None
    return Receipt(request_digest, base, result, tuple(paths), False)


def write_receipt(state_fd: int, journal: Journal) -> None:
    """Record the outcome of the published ``journal``, then prune the oldest receipts.

    Raises:
        OSError, BundleError: the receipt could not be written (the apply stays published).
    """
    receipts = open_dir(RECEIPTS_DIR, state_fd, create=True)
    assert receipts is not None
    try:
        write_json(
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
