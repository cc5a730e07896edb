"""A reader's view of a snapshot: the bundle as it would load with every file the reader may not
read deleted.

The rule (docs/READERS.md): a reader sees a file when its folder is in the reader's scope
(:mod:`bundle_mcp.okf.scopes`), Markdown files and assets alike; a folder stays as a path when it
is in scope or leads to one that is. The view is built from the captured documents with the
loader's own assembly, so everything computed from it (concepts, edges, findings, counts,
suggestions, the revision) is what a load of that pruned copy would give: an answer for the
reader is the answer the all-reading reader gets on the pruned copy, byte for byte.
"""

from __future__ import annotations

import posixpath
from collections.abc import Mapping
from typing import Any

from ..derived import Slot, of_snapshot
from ..model import Snapshot
from ..okf.computations import attachment_paths
from ..okf.scopes import FolderScope
from . import PENDING_WRITE, assemble_snapshot, with_attachments

__all__ = ["READER_VIEWS", "SLOTS", "prune", "reader_view"]

READER_VIEWS: Slot[Snapshot] = Slot(
    "reader_views", "snapshot",
    "the snapshot as each reader scope sees it (a Snapshot of its own), by scope",
)
SLOTS = (READER_VIEWS,)


def reader_view(snapshot: Snapshot, scope: FolderScope) -> Snapshot:
    """``snapshot`` as a reader with ``scope`` sees it; the snapshot itself for everything.

    Kept with the snapshot, per scope: a second call of the same reader on an unchanged bundle
    reuses the view and everything derived from it.
    """
    if scope.everything:
        return snapshot
    def build() -> Snapshot:
        view = prune(snapshot, scope)
        wanted = attachment_paths(view)
        if not wanted:
            return view
        # A part of a snapshot that held to the caps when it loaded: nothing to check again.
        return with_attachments(
            view, {p: snapshot.attachments[p] for p in sorted(wanted)}, max_bytes=None)

    view: Snapshot = of_snapshot(snapshot, READER_VIEWS, build, scope)
    return view


def prune(snapshot: Snapshot, scope: FolderScope) -> Snapshot:
    """The files, folders and findings of ``snapshot`` that ``scope`` sees, assembled as the
    loader assembles a capture: no attachments yet (the caller knows where their bytes are)."""
    folders: dict[str, bool] = {}

    def visible(path: str) -> bool:
        folder = posixpath.dirname(path)
        seen = folders.get(folder)
        if seen is None:
            seen = folders[folder] = scope.reads_folder(folder)
        return seen

    documents = {p: c for p, c in snapshot.documents.cells.items() if visible(p)}
    assets = frozenset(a for a in snapshot.assets if visible(a))
    directories = _folders(snapshot, scope, documents, assets)
    # A pending write concerns the whole bundle (every write is refused until it is resolved),
    # not one reader's files: it stays in every view.
    skipped = tuple(
        d for d in snapshot.skipped
        if d.code == PENDING_WRITE or d.file is None or visible(d.file)
    )
    return assemble_snapshot(documents, assets, directories, skipped, inbound=snapshot.inbound)


def _folders(
    snapshot: Snapshot, scope: FolderScope, documents: Mapping[str, Any], assets: frozenset[str]
) -> frozenset[str]:
    """A folder in scope stays (even empty); one that only leads towards the scope stays when
    something in scope lies below it, like a folder on disk that still holds a file."""
    inside = {d for d in snapshot.directories if d == "" or scope.reads_folder(d)}
    below = {posixpath.dirname(p) for p in (*documents, *assets)} | inside
    leading: set[str] = set()
    for folder in below:
        while folder and folder not in leading:
            leading.add(folder)
            folder = posixpath.dirname(folder)
    return frozenset(inside | (leading & snapshot.directories))
