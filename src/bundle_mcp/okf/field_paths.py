"""Path-valued frontmatter fields (OKF v0.2 §6.2): what ``resource``, ``sources[].resource``,
``computation``, ``executor.resource`` and ``attester.resource`` name.

Each accepts an absolute URL, a bundle-rooted path (``/…``) or a path relative to the file that
holds the field; a ``sources[].resource`` may instead be a scope descriptor (§5.1, "all queries in
project X"), which names no path at all. The value is resolved here, once, and every tool and the
validator report the same reading; ``.`` and ``..`` are applied as in a link destination
(:func:`.markdown.normalise_path`).

Real bundles often write a bundle-root path without its leading ``/`` (``skills/run.md`` from
``computations/revenue.md``). The spec reads that relative to the file, so that is the reading
kept; when it names nothing but the root reading names a file, ``root_reading`` carries the
rooted spelling so the validator can say how to fix it. Neither reading is ever picked silently.

A value is never fetched or opened here: ``exists`` is whether the snapshot holds a file (a
Markdown document or an asset) or a folder at that path.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from ..model import Document, Snapshot
from .ids import concept_id_for_path
from .markdown import normalise_path

URL = "url"
BUNDLE = "bundle"
SCOPE = "scope"

# The fields, as the JSON-path-like names findings and edges report.
RESOURCE = "resource"
SOURCE_RESOURCE = "sources[].resource"
COMPUTATION = "computation"
EXECUTOR_RESOURCE = "executor.resource"
ATTESTER_RESOURCE = "attester.resource"

_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*:")


@dataclass(frozen=True, slots=True)
class FieldPath:
    """One path-valued field as written and as resolved."""

    raw: str
    kind: str  # URL | BUNDLE | SCOPE
    # The bundle-relative path it names (kind BUNDLE); None when it climbs above the root.
    path: str | None
    # Whether the snapshot holds a file or folder at ``path``; None for a URL or a scope,
    # which are never looked up.
    exists: bool | None
    # Kind BUNDLE, relative and absent, when the same text read from the bundle root names a
    # file: that rooted spelling (``/skills/run.md``), for the finding that suggests it.
    root_reading: str | None = None

    @property
    def concept_id(self) -> str | None:
        """The concept the path names, when it is an existing concept document."""
        if self.path is None or not self.exists or not self.path.endswith(".md"):
            return None
        return concept_id_for_path(self.path) or None

    def wire(self) -> dict[str, Any]:
        """The shape every tool reports: ``{raw, kind, path, exists, root_reading}``."""
        return {
            "raw": self.raw,
            "kind": self.kind,
            "path": self.path,
            "exists": self.exists,
            "root_reading": self.root_reading,
        }


def resolve_field_path(
    snapshot: Snapshot, holder: str, raw: str, *, may_be_scope: bool = False
) -> FieldPath:
    """Read ``raw`` as written in the file at bundle path ``holder``.

    ``may_be_scope`` is for ``sources[].resource``: a value with white space that does not
    start like a path (``/``, ``./``, ``../``) is a scope descriptor, not a path.
    """
    value = raw.strip()
    if _SCHEME.match(value) or value.startswith("//"):
        return FieldPath(raw, URL, None, None)
    if may_be_scope and _is_scope(value):
        return FieldPath(raw, SCOPE, None, None)
    if value.startswith("/"):
        path = normalise_path(value.split("/"))
        return FieldPath(raw, BUNDLE, path, path is not None and _exists(snapshot, path))
    folder = posixpath.dirname(holder)
    path = normalise_path((folder.split("/") if folder else []) + value.split("/"))
    exists = path is not None and _exists(snapshot, path)
    root_reading = None
    if not exists and folder:
        rooted = normalise_path(value.split("/"))
        if rooted is not None and rooted != path and _exists(snapshot, rooted):
            root_reading = "/" + rooted
    return FieldPath(raw, BUNDLE, path, exists, root_reading)


@dataclass(frozen=True, slots=True)
class FieldOccurrence:
    """A path-valued field of one document: which field, and its reading."""

    field: str  # one of the field names above
    location: str  # where in the frontmatter: "resource", "sources[2].resource", …
    value: FieldPath


def path_fields(snapshot: Snapshot, doc: Document) -> Iterator[FieldOccurrence]:
    """Every path-valued field ``doc`` writes as a non-empty string, in frontmatter order.

    ``computation``, ``executor`` and ``attester`` count only on an Attested Computation (§10.2);
    elsewhere those keys are producer extensions with no defined meaning.
    """
    return path_fields_of(snapshot, doc.path, doc.fm)


def path_fields_of(snapshot: Snapshot, path: str, fm: Mapping[str, Any]
                   ) -> Iterator[FieldOccurrence]:
    """:func:`path_fields` of the document at ``path`` whose frontmatter reads as ``fm``
    (its :attr:`~bundle_mcp.model.Document.fields`: no document needs to be built)."""
    value = fm.get("resource")
    if isinstance(value, str) and value.strip():
        yield FieldOccurrence(RESOURCE, "resource", resolve_field_path(snapshot, path, value))
    sources = fm.get("sources")
    if isinstance(sources, tuple):
        for n, entry in enumerate(sources):
            found = entry.get("resource") if isinstance(entry, Mapping) else None
            if isinstance(found, str) and found.strip():
                yield FieldOccurrence(
                    SOURCE_RESOURCE, f"sources[{n}].resource",
                    resolve_field_path(snapshot, path, found, may_be_scope=True),
                )
    if fm.get("type") != "Attested Computation":
        return
    computation = fm.get("computation")
    if isinstance(computation, str) and computation.strip():
        yield FieldOccurrence(COMPUTATION, "computation",
                              resolve_field_path(snapshot, path, computation))
    for key, name in (("executor", EXECUTOR_RESOURCE), ("attester", ATTESTER_RESOURCE)):
        block = fm.get(key)
        resource = block.get("resource") if isinstance(block, Mapping) else None
        if isinstance(resource, str) and resource.strip():
            yield FieldOccurrence(name, name, resolve_field_path(snapshot, path, resource))


def _is_scope(value: str) -> bool:
    if value.startswith(("/", "./", "../")):
        return False
    return any(ch.isspace() for ch in value)


def _exists(snapshot: Snapshot, path: str) -> bool:
    if not path:
        return True  # the bundle root itself
    return path in snapshot.documents or path in snapshot.assets or path in snapshot.directories
