"""A server process on a bundle and a parse cache, in process: what the tests of values kept
by revision start twice (the second time as a restart on the same files and cache)."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from bundle_mcp import zstd_frames
from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader.parse_cache import ParseCache
from bundle_mcp.model import Snapshot
from bundle_mcp.readers import ALL_READER
from bundle_mcp.snapshots import SnapshotCache

T = TypeVar("T")


def process(bundle: str, cache: Path) -> tuple[Dispatcher, SnapshotCache, ParseCache]:
    """A dispatcher as a server process has it (no folder watch), its snapshot and parse
    caches."""
    parse = ParseCache(cache)
    snapshots = SnapshotCache(parse_cache=parse, watch=False)
    return Dispatcher(ServeConfig(bundles=(bundle,)), cache=snapshots), snapshots, parse


def snapshot_of(dispatcher: Dispatcher, bundle: str) -> Snapshot:
    return dispatcher.served_snapshot(bundle, CancelToken(), ALL_READER)


def saved(snapshots: SnapshotCache, parse: ParseCache, bundle: str, snapshot: Snapshot) -> None:
    """Save what the snapshot parsed as the warm-up does, and wait for the kept parts."""
    snapshots.persist(bundle, snapshot, now=True)
    parse.settle_parts()


def answers(dispatcher: Dispatcher, tool: str, calls: list[dict[str, Any]]) -> list[str]:
    """Each call's answer as JSON (none may fail)."""
    out = []
    for arguments in calls:
        outcome = dispatcher.call(tool, arguments)
        assert not outcome.is_error, outcome
        out.append(json.dumps(outcome.structured, ensure_ascii=False))
    return out


def kept_by(bundle: str, cache: Path, made_by: Callable[[Dispatcher, Snapshot], T]) -> T:
    """What a first process makes (``made_by`` of its dispatcher and snapshot), what it built
    then saved as its warm-up saves it."""
    first, snapshots, parse = process(bundle, cache)
    snapshot = snapshot_of(first, bundle)
    made = made_by(first, snapshot)
    saved(snapshots, parse, bundle, snapshot)
    return made


def restart(bundle: str, cache: Path) -> tuple[Dispatcher, Snapshot]:
    """A second process on the same files and cache, and its snapshot (nothing built yet)."""
    dispatcher, _, _ = process(bundle, cache)
    return dispatcher, snapshot_of(dispatcher, bundle)


def kept_rows(cache: Path, key_like: str) -> list[tuple[int, bytes]]:
    """The parts rows whose key is LIKE ``key_like``: their rowid and inflated value."""
    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:
        rows = db.execute("SELECT rowid, value FROM parts WHERE key LIKE ?",
                          (key_like,)).fetchall()
    return [(rowid, zstd_frames.unpacked(value)) for rowid, value in rows]


def replace_row(cache: Path, rowid: int, data: bytes) -> None:
    """Put ``data`` in place of a parts row's value, as a damaged row would hold it."""
    (database,) = (cache / "parse").glob("*.sqlite3")
    with sqlite3.connect(database) as db:
        db.execute("UPDATE parts SET value = ? WHERE rowid = ?", (zstd_frames.packed(data), rowid))
