"""Link and orphan checks (``--check-links``, ``--check-orphans``)."""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

from ..errors import Diagnostic
from ..loader.markdown import resolve_link
from ..model import INDEX, Document, Snapshot
from .findings import info, warn
from .reserved import index_entries


def link_findings(doc: Document, snapshot: Snapshot) -> Iterator[Diagnostic]:
    """Broken in-bundle links are INFO; a fragment that names no heading of its target is WARN."""
    if doc.parse_error is not None:
        return
    for link in doc.markdown.links:
        target = _target_document(link.target, link.concept_id, link.is_directory, snapshot)
        if target is None:
            yield info(doc.path, "broken_link",
                       f"broken link to \"{link.raw}\" (target not found)", link.line)
            continue
        if link.fragment and isinstance(target, Document):
            if link.fragment not in target.markdown.anchors:
                yield warn(doc.path, "missing_anchor",
                           f"anchor not found in target file: {link.raw}", link.line)


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
    if concept_id is not None and concept_id + ".md" in snapshot.documents:
        return snapshot.documents[concept_id + ".md"]
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
