"""``validate``: conformance errors and guidance for a whole bundle, as one report.

A bundle full of broken files is still validated completely: each broken file is one ERROR with
its reason, and every other rule still runs on the files that parsed.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..cancel import CancelToken
from ..errors import ERROR, INFO, WARN, Diagnostic
from ..model import Snapshot
from ..temporal import Reference
from ..versioning import resolve_version, version_declaration
from . import bundle, concepts, links, reserved


@dataclass(frozen=True, slots=True)
class ValidateOptions:
    reference: Reference
    strict: bool = False
    check_links: bool = False
    check_orphans: bool = False
    target_version: str = "auto"


def validate(snapshot: Snapshot, options: ValidateOptions, token: CancelToken) -> dict[str, Any]:
    version = resolve_version(snapshot, options.target_version)
    findings = list(findings_for(snapshot, options, version["effective"] or "0.1", token))
    findings.sort(key=Diagnostic.sort_key)
    errors = sum(1 for d in findings if d.severity == ERROR)
    return {
        "version": version,
        "version_declaration": version_declaration(snapshot),
        "temporal_profile": options.reference.profile,
        "as_of": options.reference.as_of,
        "scanned_files": len(snapshot.documents),
        "conformance": {"conformant": errors == 0, "errors": errors},
        "guidance": {
            "warnings": sum(1 for d in findings if d.severity == WARN),
            "info": sum(1 for d in findings if d.severity == INFO),
        },
        "diagnostics": [d.validation_json() for d in findings],
    }


def findings_for(
    snapshot: Snapshot, options: ValidateOptions, effective_version: str, token: CancelToken
):
    yield from snapshot.skipped
    for doc in snapshot.documents.values():
        token.check()
        if doc.concept_id is None:
            yield from reserved.reserved_conformance(doc)
            if options.strict and doc.kind == "index" and doc.parse_error is None:
                yield from reserved.index_description_mismatches(doc, snapshot)
        else:
            yield from concepts.conformance(doc)
            yield from concepts.guidance(doc, options.reference)
            if options.strict:
                yield from concepts.strict(doc, effective_version)
        if options.check_links:
            yield from links.link_findings(doc, snapshot)
    token.check()
    if options.check_orphans:
        yield from links.orphan_findings(snapshot)
    yield from bundle.collisions(snapshot)
    yield from bundle.unresolved_relations(snapshot)
    yield from bundle.mixed_temporal_kinds(snapshot)
