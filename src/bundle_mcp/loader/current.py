"""The revision a write compares and promises, computed exactly as the loader computes it.

A write is checked against the revision its caller read (the reader's view of the bundle) and
promises the revision the bundle will have after it. Both must be what the next load gives, or
a replay would miss its receipt and a correct retry would meet a conflict. So they are computed
here from the same parts a load uses: the captured Markdown files, the attachments the
concepts name (file-mode computations, read from disk), and the reader's view.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..cancel import CancelToken
from ..model import Attachment, Deferred, Snapshot
from ..okf.computations import attachment_paths
from ..okf.scopes import FolderScope
from . import assemble_snapshot, deferred, read_attachments, with_attachments
from .capture import Capture
from .views import prune

__all__ = ["changed_view", "current_view"]


def current_view(
    root_fd: int, captured: Capture, like: Snapshot | None, scope: FolderScope,
    token: CancelToken, *, max_bytes: int,
) -> Snapshot:
    """The view ``scope`` has of the bundle captured under a held lock.

    Documents whose bytes equal ``like``'s (when given) are reused, so only files changed since
    the caller's snapshot are parsed again; attachments are read through ``root_fd`` (no lock
    is taken: the caller holds the bundle's).
    """
    documents: dict[str, Deferred] = {}
    for f in captured.files:
        if not scope.reads_file(f.path):
            continue
        token.check()
        cell = deferred(f.path, f.data or b"")
        old = like.documents.cells.get(f.path) if like is not None else None
        documents[f.path] = old if old is not None and old.record == cell.record else cell
    full = assemble_snapshot(documents, captured.assets, captured.directories, captured.skipped,
                             inbound=like.inbound if like is not None else None)
    view = full if scope.everything else prune(full, scope)
    wanted = attachment_paths(view)
    if not wanted:
        return view
    return with_attachments(view, read_attachments(root_fd, set(wanted), token),
                            max_bytes=max_bytes)


def changed_view(
    snapshot: Snapshot, changes: Mapping[str, bytes | None], *, max_bytes: int | None
) -> Snapshot:
    """``snapshot`` (a view) with the Markdown files in ``changes`` written (``None``: deleted),
    as the next load will see it. An attachment the changes newly name keeps no bytes here (it
    is reported as unreadable); every other one keeps the bytes ``snapshot`` read.
    ``max_bytes``: the byte cap to hold the result to (``None``: a prediction only, the apply
    checks it). A written file's folders exist afterwards; a deletion never removes one."""
    documents = dict(snapshot.documents.cells)
    added = False
    folders = set(snapshot.directories)
    for path, data in changes.items():
        if data is None:
            documents.pop(path, None)
            continue
        added = added or path not in documents
        documents[path] = deferred(path, data)
        parts = path.split("/")[:-1]
        folders.update("/".join(parts[: n + 1]) for n in range(len(parts)))
    if added:  # the walk's order: each folder's entries sorted by name, depth first
        documents = {p: documents[p] for p in sorted(documents, key=lambda p: p.split("/"))}
    directories = snapshot.directories if len(folders) == len(snapshot.directories) \
        else frozenset(folders)
    after = assemble_snapshot(documents, snapshot.assets, directories, snapshot.skipped,
                              inbound=snapshot.inbound)
    wanted = attachment_paths(after)
    if not wanted:
        return after
    kept = {
        p: snapshot.attachments.get(p) or Attachment(
            p, None, None, "not a regular file within the per-file cap, or not readable")
        for p in sorted(wanted)
    }
    return with_attachments(after, kept, max_bytes=max_bytes)
