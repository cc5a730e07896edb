"""list_concepts: every concept, sorted by ID, with card fields and the bundle's OKF version."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any, cast

from ..cancel import CancelToken
from ..derived import Slot, keep_of_concept, kept_of_concept, of_document, unrevised_name
from ..model import Document, Snapshot, shared_text
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
from ._kept_parts import concept_items, packed_lines

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


Entry = tuple[dict[str, Any], Any]  # an entry without `stale`, and the limit it goes stale at


def _warm(snapshot: Snapshot, token: CancelToken) -> None:
    """Every concept's entry under the default profile (a call without arguments): read back
    when an earlier process kept them for this revision (then no document is built for them),
    else built and kept."""
    profile = reference_from({}).profile
    legacy = resolve_version(snapshot)["effective"] == "0.1"
    store = snapshot.inbound
    name = STORED_ENTRIES + profile
    decided_by = unrevised_name(snapshot, "list-entries", [profile, legacy])
    if store is not None:
        kept = _read_entries(store.stored_bytes(snapshot.revision, name), decided_by,
                             snapshot, profile, token)
        if kept is not None:
            for concept_id, value in zip(snapshot.concepts, kept, strict=True):
                keep_of_concept(snapshot, concept_id, LIST_ENTRY, value, (profile, legacy))
            return
    shared: Shared = {}
    entries = []
    for n, concept_id in enumerate(snapshot.concepts):
        if n % 256 == 0:
            token.check()
        entries.append(_entry_of(snapshot, concept_id, profile, legacy, shared))
    if store is not None and snapshot.loaded:
        # Only a capture loaded from the files, which is what a restart loads (a snapshot
        # after an edit would write a megabyte a time for nothing).
        store.keep_bytes(snapshot.revision, name, packed_lines(
            [decided_by, len(entries)], [item for item, _ in entries], _ENTRIES_PER_LINE))


# Everything in an entry but `stale` depends only on the document, the profile and the version,
# so it is kept with the document; `stale` depends on each call's as_of.
LIST_ENTRY: Slot[tuple[dict[str, Any], Any]] = Slot(
    "list_entry", "document",
    "a concept's list_concepts entry without `stale`, per temporal profile and OKF version",
    _warm,
)
SLOTS = (LIST_ENTRY,)


def _entry_of(
    snapshot: Snapshot, concept_id: str, profile: str, legacy: bool, shared: Shared
) -> Entry:
    """The concept's entry: kept by its document, or read back before it was built (then it
    is not built), else built."""
    found, value = kept_of_concept(snapshot, concept_id, LIST_ENTRY, (profile, legacy))
    if found:
        return cast(Entry, value)  # what the slot keeps
    doc = snapshot.concepts[concept_id]
    return of_document(
        doc, LIST_ENTRY, functools.partial(_base_entry, doc, profile, legacy, shared),
        (profile, legacy),
    )


# The name every concept's entry under a profile is kept under for the next process on the
# same files (InboundHint.keep_bytes): JSON lines (``_kept_parts.packed_lines``), the header
# what decides them and their count.
STORED_ENTRIES = "list-entries/2/"
_ENTRIES_PER_LINE = 512
_ENTRY_KEYS = ("id", "type", "title", "path", "status", "status_state", "trust", "stale",
               "stale_after", "generated_at", "source_count", "computation", "legacy_derived")
_SHORT_KEYS = ("type", "status", "trust", "stale_after", "generated_at")  # interned


def _read_entries(data: bytes | None, decided_by: str, snapshot: Snapshot, profile: str,
                  token: CancelToken) -> list[Entry] | None:
    """What :func:`_warm` kept, as :func:`_base_entry` builds them (the nested objects shared
    value for value, the snapshot's own ID and path strings, short ones interned), or
    ``None`` unless it reads back whole: one entry a concept, in order, each of the shape
    built. A line of entries at a time."""
    items = concept_items(data, decided_by, snapshot, token)
    if items is None:
        return None
    shared: Shared = {}
    out: list[Entry] = []
    try:
        for _, item in items:
            if not (tuple(item) == _ENTRY_KEYS and item["stale"] is None):
                return None
            for key in _SHORT_KEYS:
                if type(item[key]) is str:
                    item[key] = shared_text(item[key])
            for key in SHARED_KEYS:
                value = item[key]
                if type(value) is not dict:
                    return None
                item[key] = shared.setdefault((key, tuple(value.items())), value)
            after = item["stale_after"]
            out.append((item, None if after is None else parse_value(after, profile)))
    except ValueError:
        return None
    return out


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    ref = reference_from(params)
    version = resolve_version(snapshot)
    legacy = version["effective"] == "0.1"
    concepts = []
    shared: Shared = {}
    for n, concept_id in enumerate(snapshot.concepts):
        if n % 256 == 0:
            token.check()
        base, limit = _entry_of(snapshot, concept_id, ref.profile, legacy, shared)
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
