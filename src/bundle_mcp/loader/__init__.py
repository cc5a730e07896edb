"""Turn a bundle folder into one immutable :class:`~bundle_mcp.model.Snapshot`."""

from __future__ import annotations

import bisect
import dataclasses
import functools
import hashlib
import os
import stat
import time
import types
from collections.abc import Callable, Mapping
from typing import Any

from ..cancel import CancelToken
from ..errors import ERROR, Diagnostic, FileMoved
from ..limits import DEFAULT_CAPS, MAX_PATH_BYTES, Caps
from ..model import (
    CONCEPT,
    DECODED,
    PARSED,
    Attachment,
    Check,
    Concepts,
    Deferred,
    Document,
    Documents,
    FileRecord,
    InboundHint,
    RowBuild,
    Snapshot,
    TextBuild,
    Unfrozen,
    predecessor_link,
    records_by_path,
    revision_of,
    revision_of_sorted,
)
from ..observe import Notice
from ..okf import mentions
from ..okf.computations import attachment_paths
from ..okf.ids import concept_id_for_path
from ..packed_text import FileText, HeldText, PackedText
from ..storage.handles import DIR_FLAGS, READ_FLAGS, pin_root
from ..storage.locks import ReadLock
from ..storage.recovery import RecoveryFailed, pending, recover
from ..storage.state_dir import JOURNAL_PATH
from .capture import (
    Capture,
    StatKey,
    capture,
    check_total,
    entry_kind,
    has_surrogates,
    read_ignore_rules,
    read_relative,
)
from .document import Checked, check_document, document_kind, parse_document
from .parse_cache import CachedRows, Stored, decode
from .precheck import Prechecked

__all__ = [
    "PENDING_WRITE",
    "assemble_snapshot",
    "build_snapshot",
    "capture",
    "in_walk_order",
    "load_bundle",
    "parse_document",
    "read_attachments",
    "settled_keys",
    "with_attachments",
]

PENDING_WRITE = "pending_write_unresolved"


def load_bundle(
    bundle_path: str,
    token: CancelToken | None = None,
    previous: Snapshot | None = None,
    previous_stats: Mapping[str, StatKey] | None = None,
    cached: CachedRows | None = None,
    *,
    caps: Caps = DEFAULT_CAPS,
    prechecked: Prechecked | None = None,
    on_folder: Callable[[str], object] | None = None,
) -> tuple[Snapshot, dict[str, StatKey]]:
    """Pin, capture and parse within ``caps``. Files whose stat is unchanged since
    ``previous`` are reused. ``on_folder``: told each folder before the capture lists it.

    ``cached`` holds the rows of the persistent parse cache by path; a row is used only when
    it matches the file's current bytes. ``prechecked``: frontmatter a second process loaded
    (:mod:`bundle_mcp.loader.precheck`). Returns the snapshot and the stat keys to pass back
    next time.
    """
    token = token or CancelToken()
    # A first load trusts the stats an earlier process settled beside its rows: a file that
    # still has one is not read (nor hashed) now, but when its document is first built.
    known = previous_stats if previous is not None else (
        cached.trusted_stats() if cached is not None else None)
    fd = pin_root(bundle_path)
    stuck: tuple[Diagnostic, ...] = ()
    try:
        if pending(fd):  # an interrupted write: roll it forward or back before reading
            try:
                recover(fd, token)
                token.notify(Notice(
                    "notice",
                    "an interrupted write was finished or undone before reading the bundle",
                    bundle_path,
                ))
            except RecoveryFailed as exc:
                # Never a failure of every read: serve the files as they are (each one wholly
                # old or wholly new) and let validation report what is pending.
                stuck = (_pending_write(exc),)
        with ReadLock(fd, token):
            captured = capture(fd, token, known, max_files=caps.max_files,
                               max_total_bytes=caps.max_bytes, on_folder=on_folder)
    finally:
        os.close(fd)
    if stuck:
        captured = dataclasses.replace(captured, skipped=(*captured.skipped, *stuck))
    built = build_snapshot(captured, token, previous, cached, _reader(bundle_path), prechecked)
    snapshot = _attach(bundle_path, built, token, caps.max_bytes)
    return snapshot, {f.path: f.stat for f in captured.files}


def settled_keys(
    bundle_path: str, unsettled: Mapping[str, tuple[StatKey, str]]
) -> dict[str, StatKey]:
    """The files of ``unsettled`` (path → the key a capture took too soon after the file last
    changed to trust it, and the SHA-256 of the bytes it read) whose key can now be trusted:
    read again as a walk reads them, stat first, the stat settled and equal to the captured
    key, and the bytes hashing to the same SHA-256. A file that changed, or changed too
    recently still, is left out.

    A server started within seconds of its bundle being written (a clone, a copy, a
    generator) captured every file unsettled, so its saves kept no stat a later process could
    trust, and each restart read and hashed every file before its first answer (about 0.4 s
    at 10,000 files): the warm-up's save asks this first (``snapshots.persist``)."""
    seen_ns = time.time_ns()  # before every stat below, as a walk's
    out: dict[str, StatKey] = {}
    fd = pin_root(bundle_path)
    try:
        for path, (captured, sha256) in unsettled.items():
            read = read_relative(fd, path, seen_ns)
            if read is None:
                continue
            data, key = read
            if key.settled and key == captured and hashlib.sha256(data).hexdigest() == sha256:
                out[path] = key
    finally:
        os.close(fd)
    return out


def _reader(bundle_path: str) -> Callable[[FileRecord], bytes]:
    """Read a captured file's bytes later: for a cell whose capture trusted its stat, and for
    a built document's text (``packed_text.FileText``), on each read.

    Inside the root without following any symlink (each folder and the file are opened with
    ``O_NOFOLLOW``), never blocking on a FIFO and never reading past the record's size. The
    root itself is opened by its path, not pinned again from ``/`` as a load pins it (a third
    of a read's cost): the bytes must be the ones the snapshot's revision counts, so nothing a
    symlink put on the way could give other bytes. Anything else (the file changed, or went,
    or is no longer a regular file) raises :class:`~bundle_mcp.errors.FileMoved`, and the call
    is answered from a new capture.
    """

    def read(record: FileRecord) -> bytes:
        try:
            data = _read_again(bundle_path, record)
        except OSError:
            data = None
        if data is None or hashlib.sha256(data).hexdigest() != record.sha256:
            raise FileMoved(record.path)
        return data

    return read


def _read_again(bundle_path: str, record: FileRecord) -> bytes | None:
    """The bytes at ``record.path`` when they are a regular file of the record's size."""
    *folders, name = record.path.split("/")
    fd = os.open(bundle_path, DIR_FLAGS)
    try:
        for folder in folders:
            child = os.open(folder, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
        file_fd = os.open(name, READ_FLAGS, dir_fd=fd)
    finally:
        os.close(fd)
    try:
        opened = os.fstat(file_fd)
        if not stat.S_ISREG(opened.st_mode) or opened.st_size != record.size:
            return None
        chunks: list[bytes] = []
        size = 0
        while size <= record.size:  # one byte more than the record: it grew
            chunk = os.read(file_fd, record.size + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        return b"".join(chunks) if size == record.size else None
    finally:
        os.close(file_fd)


def _attach(bundle_path: str, snapshot: Snapshot, token: CancelToken, max_bytes: int) -> Snapshot:
    """Read the assets whose bytes the format needs (file-mode computations) into the snapshot.

    They are read like Markdown files: through a freshly pinned root, without following any
    symlink, within the per-file cap, and they count in the aggregate cap and the revision. A
    file that cannot be read is kept as an attachment without data, saying why, so the tool
    that needs it reports a clear error instead of the whole bundle failing.
    """
    wanted = attachment_paths(snapshot)
    if not wanted:
        return snapshot
    fd = pin_root(bundle_path)
    try:
        with ReadLock(fd, token):
            attachments = read_attachments(fd, wanted, token)
    finally:
        os.close(fd)
    return with_attachments(snapshot, attachments, max_bytes=max_bytes)


def read_attachments(
    fd: int, paths: frozenset[str] | set[str], token: CancelToken
) -> dict[str, Attachment]:
    """The attachments at ``paths`` under the pinned root ``fd``; the caller holds a lock."""
    attachments: dict[str, Attachment] = {}
    for path in sorted(paths):
        token.check()
        read = read_relative(fd, path)
        if read is None:
            attachments[path] = Attachment(
                path, None, None, "not a regular file within the per-file cap, or not readable")
            continue
        data, _ = read
        record = FileRecord(path, len(data), hashlib.sha256(data).hexdigest())
        attachments[path] = Attachment(path, record, data)
    return attachments


def with_attachments(
    snapshot: Snapshot, attachments: Mapping[str, Attachment], *, max_bytes: int | None
) -> Snapshot:
    """``snapshot`` with ``attachments`` and the revision that counts them.

    ``max_bytes``: the byte cap the Markdown files and attachments must hold to together, or
    ``None`` where it is someone else's to check (a reader's view, a part of a snapshot that
    held to it; a preview's prediction, which the apply checks with the configured caps).
    """
    records = [a.record for a in attachments.values() if a.record is not None]
    if max_bytes is not None:
        check_total(sum(r.size for r in snapshot.records) + sum(r.size for r in records),
                    max_bytes)
    return dataclasses.replace(
        snapshot,
        revision=revision_of([*snapshot.records, *records]),
        attachments=types.MappingProxyType(dict(attachments)),
    )


def refresh_files(
    bundle_path: str,
    previous: Snapshot,
    previous_stats: Mapping[str, StatKey],
    paths: frozenset[str],
    token: CancelToken,
    *,
    caps: Caps = DEFAULT_CAPS,
) -> tuple[Snapshot, dict[str, StatKey]] | None:
    """Look again at only the files a folder watch named: written, created or deleted.

    A file written in place is re-read; a new Markdown file is read and added, a deleted one
    dropped; a new or deleted asset (any other file) is added to or dropped from the assets.
    Each gets exactly the treatment the walk would give it (hidden names, ``.okfignore``, caps,
    no symlinks), so the snapshot equals what a full load would capture, in the same order.

    Returns ``None`` whenever the shortcut cannot be sure of the answer (``.okfignore`` itself
    changed, an entry that is now neither a regular file nor absent, a name the walk would
    report, an entry the last capture skipped, a cap reached, a pending write journal), and the
    caller walks the whole tree instead.
    """
    if ".okfignore" in paths:
        return None  # the rules decide what is captured at all: walk again
    wanted = sorted(p for p in paths if not _hidden(p))
    skipped = {d.file for d in previous.skipped}
    if any(p in skipped or not _plain_name(p) for p in wanted):
        return None
    reread = _reader(bundle_path)  # one for every file read again here
    fd = pin_root(bundle_path)
    try:
        # Even when only hidden entries changed: an interrupted write leaves its staged files
        # under hidden names, and the walk is what finishes or undoes it.
        if pending(fd):
            return None
        if not wanted:
            return previous, dict(previous_stats)
        documents = dict(previous.documents.cells)
        stats = dict(previous_stats)
        assets = set(previous.assets)
        added = False
        # The paths whose cell differs from the previous capture's (new or replaced; gone):
        # handed to the snapshot, so that asking which files differ scans no cell.
        renewed: list[str] = []
        gone: list[str] = []
        rules = None
        with ReadLock(fd, token):
            for path in wanted:
                token.check()
                kind = entry_kind(fd, path)
                if kind == "other":
                    return None
                known = path in documents or path in assets
                if kind == "absent":
                    if documents.pop(path, None) is not None:
                        gone.append(path)
                    stats.pop(path, None)
                    assets.discard(path)
                    continue
                if not known:
                    rules = rules if rules is not None else read_ignore_rules(fd)
                    if rules.ignored(path, is_dir=False):
                        continue
                if not path.endswith(".md"):
                    assets.add(path)  # inert: never opened, as in the walk
                    continue
                read = read_relative(fd, path)
                if read is None:
                    return None
                data, key = read
                if stats.get(path) == key:
                    continue  # touched, not changed
                added = added or path not in documents
                documents[path] = deferred(path, data, reread=reread)
                stats[path] = key
                renewed.append(path)
    finally:
        os.close(fd)
    if len(documents) > caps.max_files:
        return None  # the walk reports the cap
    check_total(sum(c.record.size for c in documents.values()), caps.max_bytes)
    if added:
        documents = in_walk_order(documents, previous.documents.cells)
    snapshot = assemble_snapshot(
        documents, frozenset(assets), previous.directories, previous.skipped,
        inbound=previous.inbound, predecessor=previous,
        # Documents.differing's order: this capture's paths in walk order, then the gone ones
        # in the previous capture's (both are in walk order, which _walk_key sorts by).
        changed=(*sorted(renewed, key=_walk_key), *sorted(gone, key=_walk_key)),
    )
    kept = previous.attachments
    if kept or attachment_paths(snapshot):
        # An attachment written, or a different set of them named: read them all again.
        if attachment_paths(snapshot) != set(kept) or any(p in kept for p in wanted):
            return None
        snapshot = with_attachments(snapshot, kept, max_bytes=caps.max_bytes)
    return snapshot, stats


def _walk_key(path: str) -> list[str]:
    # The walk's order: each folder's entries sorted by name, depth first.
    return path.split("/")


def in_walk_order(cells: dict[str, Deferred], known: Mapping[str, Deferred]) -> dict[str, Deferred]:
    """``cells`` in the walk's order, where the ones ``known`` also holds are in that order
    already: each other one is put in its place by bisection. Sorting all 10,000 paths again
    cost ~10 ms on every capture that followed a created file."""
    order = [path for path in cells if path in known]
    for path in sorted((p for p in cells if p not in known), key=_walk_key):
        order.insert(bisect.bisect_left(order, _walk_key(path), key=_walk_key), path)
    return {path: cells[path] for path in order}


def _plain_name(path: str) -> bool:
    """A path the walk would capture without a finding (no undecodable name, not too long)."""
    return not has_surrogates(path) and len(path.encode("utf-8")) <= MAX_PATH_BYTES


def _pending_write(exc: RecoveryFailed) -> Diagnostic:
    steps = " ".join(d.message for d in exc.diagnostics)
    return Diagnostic(
        code=PENDING_WRITE,
        severity=ERROR,
        file=JOURNAL_PATH,
        message=f"{exc.message}. To recover: {steps}",
    )


def _hidden(path: str) -> bool:
    return any(segment.startswith(".") for segment in path.split("/"))


def build_snapshot(
    captured: Capture,
    token: CancelToken,
    previous: Snapshot | None = None,
    cached: CachedRows | None = None,
    read_later: Callable[[FileRecord], bytes] | None = None,
    prechecked: Prechecked | None = None,
) -> Snapshot:
    """The snapshot of a capture. Nothing is parsed here: each document is built on first use
    (:class:`~bundle_mcp.model.Deferred`), from its parse-cache entry when ``cached`` has one
    that fits its bytes, and files unchanged since ``previous`` keep its cells. A file the
    capture did not read because ``cached`` vouched for its stat takes its record from that
    row, and its bytes from ``read_later`` when its document is built."""
    cells: dict[str, Deferred] = {}
    total = len(captured.files)
    kept = previous.documents.cells if previous is not None else {}
    for n, f in enumerate(captured.files):
        if n % 256 == 0:
            token.check()
            token.progress(n, total)  # a no-op without an observer (the call wants none)
        if f.data is None:
            if f.path in kept:
                cells[f.path] = kept[f.path]
                continue
            stored = cached.stored(f.path) if cached is not None else None
            if stored is not None and read_later is not None:
                record = FileRecord(f.path, stored.size, stored.sha256)
                cells[f.path] = Deferred(record, _Source(
                    record, None, read_later, cached, prechecked, stored, read_later))
                continue
        cells[f.path] = deferred(f.path, f.data or b"", cached, prechecked=prechecked,
                                 reread=read_later)
    # The index of an earlier process speaks for the files whose bytes it has rows for, in this
    # snapshot and the next ones (a file that changed has other bytes: the index does not know it).
    inbound = cached if cached is not None else previous.inbound if previous is not None else None
    return assemble_snapshot(cells, captured.assets, captured.directories, captured.skipped,
                             inbound=inbound, predecessor=previous)


def deferred(
    path: str, data: bytes | Callable[[FileRecord], bytes], cached: CachedRows | None = None,
    record: FileRecord | None = None,
    prechecked: Prechecked | None = None,
    reread: Callable[[FileRecord], bytes] | None = None,
) -> Deferred:
    """The cell of one captured file: its record now, the rest on first use. Whether it parses
    comes from the parse cache's row for these bytes when ``cached`` has one, and its document
    from that row's entry; whatever does not fit the bytes is parsed instead.

    ``data`` is the bytes, or (with their ``record``) a way to read them when first needed.
    ``reread``: how to read the file's bytes back (checked against the record) once its
    document is built, which then holds no copy of its text (``packed_text.FileText``); without
    it the document keeps its text compressed."""
    stored = cached.stored(path) if cached is not None else None
    if isinstance(data, bytes):
        fixed = FileRecord(path, len(data), hashlib.sha256(data).hexdigest())
        return Deferred(fixed, _Source(fixed, data, None, cached, prechecked, stored, reread))
    if record is None:
        raise ValueError("bytes read later need the record they must match")
    return Deferred(record, _Source(record, None, data, cached, prechecked, stored, reread))


class _Source:
    """How one cell is checked and built (:class:`~bundle_mcp.model.Deferred`'s ``check``).

    One small object per file, holding what the check needs; the reader, the parse cache's rows
    and the prechecked frontmatter are shared by every file. (A closure per file, with the
    cells it closed over and a partial for its bytes, was about ten objects the garbage
    collector tracked: at the file cap, collecting them was a third of a restart's first load.)
    """

    __slots__ = ("record", "data", "read_later", "cached", "prechecked", "stored", "reread")

    def __init__(
        self, record: FileRecord, data: bytes | None,
        read_later: Callable[[FileRecord], bytes] | None,
        cached: CachedRows | None, prechecked: Prechecked | None, stored: Stored | None,
        reread: Callable[[FileRecord], bytes] | None = None,
    ) -> None:
        self.record = record
        self.data = data  # None: read (and checked against the record) when first needed
        self.read_later = read_later
        self.cached = cached
        self.prechecked = prechecked
        self.stored = stored  # ``cached``'s row for this path, if it has one
        self.reread = reread  # None: the document keeps its text (no file to read it back)

    def read(self) -> bytes:
        if self.data is not None:
            return self.data
        assert self.read_later is not None
        return self.read_later(self.record)

    def hold(self) -> Callable[[str], HeldText]:
        """How the built document holds its text: in its file when it can be read back. Not a
        bound method of this object: a checked file keeps it until its document is built, and
        this object keeps the captured bytes."""
        reread = self.reread
        if reread is None:
            return PackedText
        return functools.partial(_held_in_file, self.record, reread)

    def __call__(self) -> Check:
        stored, fixed = self.stored, self.record
        if stored is None or stored.sha256 != fixed.sha256 or stored.size != fixed.size:
            return self._parsed()
        if stored.error is None:
            return None, _ReadBack(self)  # most rows: no error to decode
        try:
            error = stored.parse_error()
        except (TypeError, ValueError):
            return self._parsed()
        return error, _ReadBack(self)

    def _parsed(self) -> Check:
        fixed = self.record
        checked = check_document(fixed.path, self.read(), fixed, self.prechecked, self.hold())
        if isinstance(checked, Document):
            return checked.parse_error, lambda: (checked, PARSED)
        return None, _ParseLater(checked)

    def read_back(self) -> tuple[Document, str]:
        cached, fixed = self.cached, self.record
        assert cached is not None
        path, data = fixed.path, self.read()
        doc = decode(fixed, data, cached.entry(path, fixed.sha256),
                     cached.kept(path, fixed.sha256), self.hold())
        if doc is not None:
            return doc, DECODED
        # The row's entry is gone or does not fit: parse. The same bytes parse the same
        # way they did when the row was written, so the check above still holds.
        return parse_document(path, data, fixed, self.hold()), PARSED


class _ReadBack(RowBuild):
    """A checked file's build from its parse cache row (``_Source.read_back``)."""

    __slots__ = ("_source",)

    def __init__(self, source: _Source) -> None:
        self._source = source

    def __call__(self) -> tuple[Document, str]:
        return self._source.read_back()

    def held_text(self, length: int) -> HeldText | None:
        # The text the built document would hold in its file (_Source.hold), its bytes
        # checked against the record on each read.
        source = self._source
        if source.reread is None:
            return None
        return FileText.known(length, True, source.record, source.reread)


class _ParseLater(TextBuild):
    """A checked file's build: the rest of its parse. Until then its text can tell whether it
    may name a concept (``okf.mentions``), which spares a cold call the parse of every file
    to find the few that link to one concept."""

    __slots__ = ("_checked",)

    def __init__(self, checked: Checked) -> None:
        self._checked = checked

    def __call__(self) -> tuple[Document, str]:
        return self._checked.finish(), PARSED

    def named(self, concept_ids: tuple[str, ...]) -> tuple[str, ...]:
        checked = self._checked
        return mentions.named(checked.held.text(), checked.body_start,
                              checked.frontmatter if checked.names_relations else None,
                              concept_ids, checked.path)

    def fields(self) -> Mapping[str, Any] | None:
        # Document.fields of the build's frozen frontmatter, key by key (Unfrozen); a file
        # with no frontmatter reads as an empty one.
        return Unfrozen(self._checked.frontmatter or {}).fields()


def _held_in_file(
    record: FileRecord, reread: Callable[[FileRecord], bytes], text: str
) -> HeldText:
    return FileText(text, record, reread)


def assemble_snapshot(
    cells: Mapping[str, Deferred],
    assets: frozenset[str],
    directories: frozenset[str],
    skipped: tuple[Diagnostic, ...],
    *,
    inbound: InboundHint | None = None,
    predecessor: Snapshot | None = None,
    changed: tuple[str, ...] | None = None,
) -> Snapshot:
    """The snapshot of these captured files (in walk order), before attachments are read.
    ``inbound``: the index that may tell where edges into a concept come from; ``predecessor``:
    the snapshot this capture followed (held weakly, :attr:`Snapshot.predecessor`); ``changed``:
    the paths whose cell differs from the predecessor's, in :meth:`Documents.differing`'s order,
    when the caller knows them (a refresh: at 50,000 files each scan cost about 10 ms, two or
    three times a capture).

    A file that is not built yet counts as the concept its path names: whether it parses is
    decided when it is first looked up (:class:`~bundle_mcp.model.Concepts`).
    """
    known = changed if predecessor is not None else None
    ordered = records_by_path(cells, predecessor.documents if predecessor is not None else None,
                              known)
    documents = Documents(
        cells, (predecessor.documents, known) if predecessor is not None and known is not None
        else None, ordered)
    paths = _concept_paths_after(predecessor, documents) if predecessor is not None else None
    if paths is None:
        paths = {}
        for path, cell in cells.items():
            concept_id = _concept_at(path, cell)
            if concept_id is not None:
                paths[concept_id] = path
        if not _keys_sorted(paths):
            paths = dict(sorted(paths.items()))
    return Snapshot(
        revision=revision_of_sorted(ordered),
        documents=documents,
        concepts=Concepts(documents, paths, inbound),
        assets=assets,
        directories=directories,
        skipped=skipped,
        inbound=inbound,
        predecessor=predecessor_link(predecessor),
    )


def _concept_at(path: str, cell: Deferred) -> str | None:
    """The concept ID a captured file is listed under (``Concepts``' paths), if any: a built
    document's own when it parses, else the one its path names when it would be a concept."""
    doc = cell.peek()
    if doc is not None:
        return doc.concept_id if doc.concept_id is not None and doc.parse_error is None else None
    return concept_id_for_path(path) if document_kind(path) == CONCEPT else None


# Past this many files changed since the predecessor, its concept paths are not patched: the
# whole list is made again (as quick by then).
MAX_PATCHED_FILES = 64


def _concept_paths_after(predecessor: Snapshot, documents: Documents) -> dict[str, str] | None:
    """The concept paths of ``documents`` (ID → path, sorted by ID), from ``predecessor``'s
    with the files that differ patched in; ``None`` when it cannot tell cheaply (the caller
    lists every file). Listing 10,000 files cost ~10 ms on every capture after an edit."""
    earlier = predecessor.concepts
    if not isinstance(earlier, Concepts):
        return None
    changed = documents.differing(predecessor.documents)
    if len(changed) > MAX_PATCHED_FILES:
        return None
    paths = dict(earlier.paths)
    before = predecessor.documents.cells
    added: list[str] = []
    for path in changed:
        old = before.get(path)
        for concept_id in {concept_id_for_path(path),
                           _concept_at(path, old) if old is not None else None}:
            if concept_id is not None and paths.get(concept_id) == path:
                del paths[concept_id]
        cell = documents.cells.get(path)
        concept_id = _concept_at(path, cell) if cell is not None else None
        if concept_id is not None:
            paths[concept_id] = path
            added.append(concept_id)
    if not added:
        return paths  # entries removed from a sorted mapping leave it sorted
    order = [concept_id for concept_id in paths if concept_id not in added]
    for concept_id in added:
        bisect.insort(order, concept_id)
    return {concept_id: paths[concept_id] for concept_id in order}


def _keys_sorted(mapping: Mapping[str, Any]) -> bool:
    # Documents arrive in path order, which is ID order except for IDs that prefix another
    # (``a`` and ``a-b``: ``a.md`` sorts after ``a-b.md``); sort only when that happens.
    keys = list(mapping)
    return all(a < b for a, b in zip(keys, keys[1:], strict=False))
