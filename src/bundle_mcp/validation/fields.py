"""Path-valued frontmatter fields (OKF v0.2 §6.2): what each one names, checked against the
snapshot.

The reading of a value is :mod:`bundle_mcp.okf.field_paths`' (the tools report the same one);
this module only judges it. URLs and scope descriptors are never checked: nothing is fetched.

Severities, as §6.1 and §11 ask:

* a path that climbs above the bundle root, or a relative path that names nothing while the same
  text read from the root does (the commonest slip in real bundles), is a WARN on every field;
* a contract path that names nothing (``computation``, ``executor.resource``,
  ``attester.resource``) is a WARN: the contract cannot be followed;
* a ``resource`` or ``sources[].resource`` that names nothing is an INFO, tolerated like a
  broken link (not-yet-written knowledge), and reported only with ``--check-links``, as broken
  links are. A top-level ``resource`` is very often an identifier of an external asset written
  without a scheme (``acme.sales.orders``), so reporting it on every run would be noise.
"""

from __future__ import annotations

from collections.abc import Iterator

from ..errors import Diagnostic
from ..model import Document, Snapshot
from ..okf.field_paths import (
    ATTESTER_RESOURCE,
    BUNDLE,
    COMPUTATION,
    EXECUTOR_RESOURCE,
    FieldOccurrence,
    path_fields,
)
from .findings import info, key_line, warn

SPEC_PATHS = "OKF v0.2 §6.2: a path-valued field is a URL, a '/'-rooted or a relative path"
CONTRACT_FIELDS = frozenset({COMPUTATION, EXECUTOR_RESOURCE, ATTESTER_RESOURCE})


def holds_code(raw: str) -> bool:
    """A ``computation`` value with a line break is the code itself (an early draft's
    convention), not a path; :mod:`.computations` reports it as a malformed contract."""
    return "\n" in raw.strip()


def shown(raw: str, limit: int = 80) -> str:
    """``raw`` quoted for a message, cut to ``limit`` characters: a field can hold a page."""
    text = raw if len(raw) <= limit else raw[: limit - 1] + "…"
    return '"' + text.replace("\n", "\\n") + '"'


def field_path_findings(
    snapshot: Snapshot, doc: Document, check_links: bool
) -> Iterator[Diagnostic]:
    """The findings of one concept's path-valued fields; ``check_links`` adds the INFO for a
    ``resource`` or ``sources[].resource`` that names nothing."""
    if doc.parse_error is not None or doc.frontmatter is None:
        return
    for occurrence in path_fields(snapshot, doc):
        finding = _judge(snapshot, doc, occurrence, check_links)
        if finding is not None:
            yield finding


def _judge(
    snapshot: Snapshot, doc: Document, occurrence: FieldOccurrence, check_links: bool
) -> Diagnostic | None:
    value, where = occurrence.value, occurrence.location
    if value.kind != BUNDLE or value.exists:
        return None
    if occurrence.field == COMPUTATION and holds_code(value.raw):
        return None
    line = key_line(doc, where.split(".", 1)[0].split("[", 1)[0])
    written = f"{where} {shown(value.raw)}"
    if value.path is None:
        return warn(doc.path, "field_path_outside_bundle",
                    f"{written} climbs above the bundle root from {doc.path}; a field names "
                    "files inside the bundle", line, field=where, spec_ref=SPEC_PATHS)
    if value.root_reading is not None:
        rooted = value.root_reading.lstrip("/")
        what = "folder" if rooted in snapshot.directories else "file"
        return warn(doc.path, "field_path_root_relative",
                    f"{written} is read relative to {doc.path} and names nothing; the "
                    f"bundle-root {what} is \"{value.root_reading}\"", line, field=where,
                    spec_ref=SPEC_PATHS)
    if occurrence.field in CONTRACT_FIELDS:
        return warn(doc.path, "contract_path_missing",
                    f"{written} (read as {shown(value.path)}) names nothing in the bundle, so "
                    "the computation's contract cannot be followed", line, field=where,
                    spec_ref=SPEC_PATHS)
    if not check_links:
        return None
    return info(doc.path, "field_path_missing",
                f"{written} (read as {shown(value.path)}) names nothing in the bundle (not "
                "written yet?)", line, field=where)
