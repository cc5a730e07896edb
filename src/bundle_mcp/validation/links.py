"""Link and orphan checks (``--check-links``, ``--check-orphans``)."""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Collection, Iterator, Mapping

from ..derived import Slot, of_snapshot
from ..errors import Diagnostic
from ..model import INDEX, Document, Link, Snapshot
from ..okf.ids import path_for_concept_id
from ..okf.markdown import resolve_link
from .findings import info, warn
from .reserved import index_entries

CONCEPT_IDS_BY_CASEFOLD: Slot[Mapping[str, tuple[str, ...]]] = Slot(
    "concept_ids_by_casefold", "snapshot",
    "concept IDs by their case-folded spelling, for 'did you mean' on a broken link",
)
SLOTS = (CONCEPT_IDS_BY_CASEFOLD,)


def link_findings(
    doc: Document, snapshot: Snapshot,
    anchors: Callable[[Document], Collection[str]] | None = None,
) -> Iterator[Diagnostic]:
    """Broken in-bundle links are INFO; a fragment that names no heading of its target is WARN.
    ``anchors``: a target's anchors (by default read from its facts; a pass over every
    document hands in a cache, since the same targets come back)."""
    if doc.parse_error is not None:
        return
    anchors_of_target = anchors or target_anchors
    for link in doc.markdown.links:
        target = _target_document(link.target, link.concept_id, link.is_directory, snapshot)
        if target is None:
            hint = _suggestion(doc, link.raw, link.concept_id, snapshot)
            yield info(doc.path, "broken_link",
                       f"broken link to \"{link.raw}\" (target not found){hint}", link.line)
            continue
        if link.fragment and isinstance(target, Document):
            if link.fragment not in anchors_of_target(target):
                yield warn(doc.path, "missing_anchor",
                           f"anchor not found in target file: {link.raw}", link.line)


def target_anchors(target: Document) -> Collection[str]:
    """The anchors a link's fragment may name in ``target`` (``markdown.anchors``, read
    without making its links or sections)."""
    return target.anchors


def broken_links(doc: Document, snapshot: Snapshot) -> Iterator[Link]:
    """The links of ``doc`` that reach nothing in the bundle: each one a ``broken_link``
    finding of :func:`link_findings` (same rule, same order)."""
    if doc.parse_error is not None:
        return
    for link in doc.markdown.links:
        if _target_document(link.target, link.concept_id, link.is_directory, snapshot) is None:
            yield link


def link_target(link: Link, snapshot: Snapshot) -> Document | str | None:
    """What ``link`` reaches in ``snapshot``: a document, the asset or folder path it names, or
    ``None`` when it is broken (the rule ``--check-links`` applies, for the writes that keep
    links whole)."""
    return _target_document(link.target, link.concept_id, link.is_directory, snapshot)


def _suggestion(doc: Document, raw: str, concept_id: str | None, snapshot: Snapshot) -> str:
    """A hint for the two breaks real documentation folders show most.

    Links written for a site generator start at the site's root (``/cli/add``), not the
    bundle's, and links written on a case-insensitive file system differ from the file's case.
    Resolution itself stays as specified (bundle root, case-sensitive IDs); only the message
    says which concept was probably meant.
    """
    if concept_id is None:
        return ""
    by_case = of_snapshot(snapshot, CONCEPT_IDS_BY_CASEFOLD, lambda: _ids_by_casefold(snapshot))
    matches = by_case.get(concept_id.casefold(), ())
    if len(matches) == 1:
        return f"; IDs are case-sensitive: did you mean {matches[0]!r}?"
    if raw.startswith("/"):
        folder = posixpath.dirname(doc.path)
        while folder:
            candidate = f"{folder}/{concept_id}"
            if candidate in snapshot.concepts:
                return (f"; a leading '/' starts at the bundle root: did you mean "
                        f"{candidate!r}?")
            folder = posixpath.dirname(folder)
        # A site generator's root is often one top-level folder (docs/): suggest it when the
        # concept exists under exactly one of them.
        tops = {d.split("/", 1)[0] for d in snapshot.directories if d}
        found = sorted(f"{top}/{concept_id}" for top in tops
                       if f"{top}/{concept_id}" in snapshot.concepts)
        if len(found) == 1:
            return f"; a leading '/' starts at the bundle root: did you mean {found[0]!r}?"
    return ""


def _ids_by_casefold(snapshot: Snapshot) -> dict[str, tuple[str, ...]]:
    index: dict[str, list[str]] = {}
    for concept_id in snapshot.concepts:
        index.setdefault(concept_id.casefold(), []).append(concept_id)
    return {k: tuple(v) for k, v in index.items()}


def _target_document(
    target: str | None, concept_id: str | None, is_directory: bool, snapshot: Snapshot
) -> Document | str | None:
    """The document a link reaches, the asset or folder path it names, or ``None`` if broken."""
    if target is None:
        return None
    if is_directory:
        return target if target in snapshot.directories else None
    if target in snapshot.documents:
        return snapshot.documents[target]
    if concept_id is not None and path_for_concept_id(concept_id) in snapshot.documents:
        return snapshot.documents[path_for_concept_id(concept_id)]
    if target in snapshot.assets:
        return target
    if target in snapshot.directories:
        return target
    return None


def orphan_findings(snapshot: Snapshot) -> Iterator[Diagnostic]:
    """A concept its folder's ``index.md`` does not link is an orphan (WARN).

    A folder that holds concepts but no ``index.md`` gets one INFO and no orphan check.
    """
    folders: dict[str, list[Document]] = {}
    for doc in snapshot.documents.values():
        if doc.concept_id is not None:
            folders.setdefault(posixpath.dirname(doc.path), []).append(doc)
    for folder in sorted(folders):
        index_path = posixpath.join(folder, "index.md") if folder else "index.md"
        index = snapshot.documents.get(index_path)
        if index is None or index.kind != INDEX:
            yield info(folder or ".", "missing_index",
                       "missing index.md, skipping orphan check for this directory")
            continue
        linked = set()
        if index.parse_error is None:
            for line, _, href, _ in index_entries(index):
                if href is None:
                    continue
                link = resolve_link(href, folder, line)
                if link is not None and link.concept_id is not None:
                    linked.add(link.concept_id)
            for link in index.markdown.links:
                if link.concept_id is not None:
                    linked.add(link.concept_id)
        for doc in sorted(folders[folder], key=lambda d: d.path):
            if doc.concept_id not in linked:
                yield warn(doc.path, "orphan", f"orphan file (not linked in {index_path})")
