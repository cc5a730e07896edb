"""list_concepts: every concept, sorted by ID, with card fields and the bundle's OKF version."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from ..cancel import CancelToken
from ..derived import Slot, of_document
from ..model import Document, Snapshot
from ..okf.properties import stale_after, status_state, text_field, trust
from ..okf.temporal import Reference, parse_value, reference_from
from ..okf.versions import resolve_version, version_declaration
from ..toolspec import CallContext, ToolSpec
from ._common import (
    citation_sources,
    frontmatter_sources,
    legacy_generated_at,
    string_or,
)

NAME = "list_concepts"
DESCRIPTION = (
    "Every concept by ID with its card (type, title, path, status, trust, staleness, source "
    "count) and the bundle's OKF version: the WHOLE list, not a page. Prefer "
    "search_concepts or bundle_summary; use this when every ID is needed."
)

COMPUTATION_KEYS = ("runtime", "parameters", "computation", "executor", "attester")


# An entry's nested objects, which most concepts share value for value (at 9,978 generated
# concepts: 4 distinct status states, 1 computation summary, 1 legacy_derived): the entries
# built in one pass share one dict for each value (about 650 bytes an entry).
SHARED_KEYS = ("status_state", "computation", "legacy_derived")

# One pass's shared nested objects: (key, the value's items in order) → the dict kept.
Shared = dict[tuple[str, tuple[tuple[str, Any], ...]], dict[str, Any]]


def _warm(snapshot: Snapshot, token: CancelToken) -> None:
    """Every concept's entry under the default profile (a call without arguments)."""
    profile = reference_from({}).profile
    legacy = resolve_version(snapshot)["effective"] == "0.1"
    shared: Shared = {}
    for n, doc in enumerate(snapshot.concepts.values()):
        if n % 256 == 0:
            token.check()
        _kept_entry(doc, profile, legacy, shared)


# Everything in an entry but `stale` depends only on the document, the profile and the version,
# so it is kept with the document; `stale` depends on each call's as_of.
LIST_ENTRY: Slot[tuple[dict[str, Any], Any]] = Slot(
    "list_entry", "document",
    "a concept's list_concepts entry without `stale`, per temporal profile and OKF version",
    _warm,
)
SLOTS = (LIST_ENTRY,)


def _kept_entry(
    doc: Document, profile: str, legacy: bool, shared: Shared
) -> tuple[dict[str, Any], Any]:
    return of_document(
        doc, LIST_ENTRY, functools.partial(_base_entry, doc, profile, legacy, shared),
        (profile, legacy),
    )


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    ref = reference_from(params)
    version = resolve_version(snapshot)
    legacy = version["effective"] == "0.1"
    concepts = []
    shared: Shared = {}
    for n, doc in enumerate(snapshot.concepts.values()):
        if n % 256 == 0:
            token.check()
        base, limit = _kept_entry(doc, ref.profile, legacy, shared)
        stale = None if ref.moment is None or limit is None else ref.moment >= limit
        if stale is base["stale"]:
            # The kept entry itself (its `stale` is None, as without as_of): nothing changes a
            # result once built, and a kept answer held a copy of every entry.
            concepts.append(base)
            continue
        item = dict(base)
        item["stale"] = stale
        concepts.append(item)
    return {
        "version": version,
        "version_declaration": version_declaration(snapshot),
        "temporal_profile": ref.profile,
        "as_of": ref.as_of,
        "concepts": concepts,
    }


def _base_entry(
    doc: Document, profile: str, legacy: bool, shared: Shared
) -> tuple[dict[str, Any], Any]:
    item = entry(doc, Reference(profile, None, None), legacy)
    for key in SHARED_KEYS:
        # Kept entries are never changed (run copies one whose `stale` it sets), so entries
        # may share a nested object; its items in order, so the JSON is the same.
        value = item[key]
        item[key] = shared.setdefault((key, tuple(value.items())), value)
    after = item["stale_after"]
    return item, None if after is None else parse_value(after, profile)


def entry(doc: Document, ref: Reference, legacy: bool) -> dict[str, Any]:
    fm = doc.fm
    state = status_state(fm)
    after = stale_after(fm, ref.profile)
    generated_at, from_timestamp = legacy_generated_at(doc, legacy)
    sources = frontmatter_sources(fm)
    source_count = len(sources)
    from_citations = False
    if legacy and "sources" not in fm:
        citations = citation_sources(doc)
        if citations:
            source_count, from_citations = len(citations), True
    assert doc.concept_id is not None
    return {
        "id": doc.concept_id,
        "type": text_field(fm, "type"),
        "title": text_field(fm, "title"),
        "path": doc.path,
        "status": state["effective"],
        "status_state": state,
        "trust": trust(fm),
        "stale": ref.stale(after),
        "stale_after": after,
        "generated_at": generated_at,
        "source_count": source_count,
        "computation": computation_summary(fm),
        "legacy_derived": {"generated": from_timestamp, "citations": from_citations},
    }


def computation_summary(fm: Mapping[str, Any]) -> dict[str, Any]:
    """Which Attested Computation keys are present, and their resource strings (inert data)."""
    return {
        "present": any(key in fm for key in COMPUTATION_KEYS),
        "runtime": string_or(fm.get("runtime"), None),
        "executor": _resource(fm.get("executor")),
        "attester": _resource(fm.get("attester")),
    }


def _resource(value: Any) -> str | None:
    if isinstance(value, Mapping):
        return string_or(value.get("resource"), None)
    return None


SPEC = ToolSpec(
    name=NAME,
    title="List concepts",
    toolset="read",
    read_only=True,
    description=DESCRIPTION,
    run=run,
    cache_results=True,
)
