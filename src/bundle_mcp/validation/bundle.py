"""Checks across files: colliding IDs and names, mixed temporal kinds, unresolved relations."""

from __future__ import annotations

import unicodedata
from collections.abc import Iterator, Mapping
from typing import Any

from ..errors import Diagnostic
from ..model import Snapshot
from ..okf.temporal import parse_date, parse_instant
from .findings import warn


def collisions(snapshot: Snapshot) -> Iterator[Diagnostic]:
    by_case: dict[str, list[str]] = {}
    for concept_id in snapshot.concepts:
        by_case.setdefault(concept_id.casefold(), []).append(concept_id)
    for ids in by_case.values():
        if len(ids) > 1:
            for concept_id in ids:
                others = ", ".join(i for i in sorted(ids) if i != concept_id)
                yield warn(snapshot.concepts[concept_id].path, "id_case_collision",
                           f"concept ID differs only by case from: {others}")
    by_form: dict[str, list[str]] = {}
    for path in snapshot.documents:
        by_form.setdefault(unicodedata.normalize("NFC", path), []).append(path)
    for paths in by_form.values():
        if len(paths) > 1:
            for path in paths:
                yield warn(path, "unicode_name_collision",
                           "file name differs from another only by Unicode normalisation "
                           "(NFC/NFD); IDs are not normalised, so both exist separately")


def unresolved_relations(snapshot: Snapshot) -> Iterator[Diagnostic]:
    for doc in snapshot.concepts.values():
        for rel in doc.relations:
            if rel.target_id not in snapshot.concepts:
                yield warn(doc.path, "unresolved_relation",
                           f"relation {rel.relation_type} from {rel.source} targets "
                           f"{rel.target}, which is not a concept", field="relations")


def mixed_temporal_kinds(snapshot: Snapshot) -> Iterator[Diagnostic]:
    """Dates and instants in one bundle: the profile is chosen per request, never guessed."""
    kinds: dict[str, set[str]] = {}
    for doc in snapshot.concepts.values():
        for value in _temporal_values(doc.fm):
            if parse_date(value) is not None:
                kinds.setdefault(doc.path, set()).add("date")
            elif parse_instant(value) is not None:
                kinds.setdefault(doc.path, set()).add("instant")
    seen = set().union(*kinds.values()) if kinds else set()
    if seen != {"date", "instant"}:
        return
    for path in sorted(kinds):
        if "instant" in kinds[path]:
            yield warn(path, "mixed_temporal_kinds",
                       "this file uses RFC 3339 instants while others use calendar dates; "
                       "one temporal profile applies to the whole bundle")


def _temporal_values(fm: Mapping[str, Any]) -> Iterator[Any]:
    yield fm.get("stale_after")
    yield from _window(fm.get("usage_window"))
    sources = fm.get("sources")
    if isinstance(sources, tuple):
        for entry in sources:
            if isinstance(entry, Mapping):
                yield entry.get("last_modified")
                yield from _window(entry.get("usage_window"))


def _window(value: Any) -> Iterator[Any]:
    if isinstance(value, Mapping):
        yield value.get("from")
        yield value.get("to")
