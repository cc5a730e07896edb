"""bundle_summary: a small inventory of the bundle, the first call on a bundle one does not know.

Small by construction: every ranked list keeps at most ``top`` entries (clamped to 1-50, as the
walk verbs clamp their budgets) and at most :data:`LIST_BYTES` of them, counting the rest in
``others``; free text (types, tags, relation types, names, link targets) is cut to
:data:`MAX_TEXT_CHARS`. Seven lists of 8 KiB and the fixed fields (a 4,096-byte project echo at
most) stay under the 64 KiB output budget whatever the bundle holds.

Nothing is counted here by a rule of its own: status, trust tier, staleness and tags are the
cards' (:mod:`bundle_mcp.okf.properties`), inbound links the graph's
(:meth:`~bundle_mcp.okf.graph.BundleGraph.inbound_counts`), broken links and orphans the
validator's (:func:`bundle_mcp.validation.links.broken_links`,
:func:`bundle_mcp.validation.orphan_findings`), so this answer agrees with ``validate_bundle``
(``check_links``, ``check_orphans``) and the walk verbs.
"""

from __future__ import annotations

import json
import posixpath
import types
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from ..cancel import CancelToken
from ..derived import Slot, of_snapshot, unrevised_name
from ..model import Snapshot, revision_value
from ..okf.graph import clip, graph_of, in_project
from ..okf.names import concept_name
from ..okf.properties import (
    HUMAN_REVIEWED,
    MACHINE_CONFIRMED,
    STATUSES,
    UNVERIFIED,
    stale_after,
    status_state,
    text_field,
    trust,
)
from ..okf.properties import tags as concept_tags
from ..okf.temporal import Reference, reference_from
from ..toolspec import CallContext, ToolSpec
from ..validation import orphan_findings
from ..validation.links import broken_links
from ._walk_params import clamped, project_from

NAME = "bundle_summary"
DESCRIPTION = (
    "First call on an unknown bundle: concepts counted by type, tag, relation type, status, "
    "trust and (with as_of) staleness; folders, orphans, broken links, most-linked concepts. "
    "Each list keeps top entries; others counts the rest."
)

DEFAULT_TOP, MAX_TOP = 10, 50
MAX_TEXT_CHARS = 200
LIST_BYTES = 8 * 1024
ROOT_FOLDER = "."
INVALID_STATUS = "invalid"
TRUST_TIERS = (UNVERIFIED, MACHINE_CONFIRMED, HUMAN_REVIEWED)
ORPHAN, MISSING_INDEX = "orphan", "missing_index"  # the orphan check's finding codes



def _warm(snapshot: Snapshot, token: CancelToken) -> None:
    """The whole bundle's counts (a call without ``project``)."""
    summary_counts(snapshot, None, token)


SUMMARY_COUNTS: Slot[Counts] = Slot(
    "summary_counts", "snapshot",
    "bundle_summary's counts and full rankings per project, all but staleness (Counts)",
    _warm,
)
SLOTS = (SUMMARY_COUNTS,)

_T = TypeVar("_T")
_E = TypeVar("_E")


@dataclass(frozen=True)
class Counts:
    """Everything the answer reports for one scope except staleness (which depends on as_of),
    each ranked list in full and in its order: a pure function of the snapshot and the
    project, kept with the snapshot (:data:`SUMMARY_COUNTS`)."""

    concepts: int
    unparseable: int
    types: tuple[tuple[str, int], ...]
    tags: tuple[tuple[str, int], ...]
    status: Mapping[str, int]
    trust: Mapping[str, int]
    relation_types: tuple[tuple[str, int], ...]
    folders: tuple[tuple[str, int], ...]
    orphans: tuple[str, ...]
    unchecked: int
    broken_links: tuple[tuple[str, int, str], ...]  # (concept ID, line, destination)
    most_linked: tuple[tuple[str, int], ...]


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    ref = reference_from(params)
    top = clamped(params, "top", DEFAULT_TOP, 1, MAX_TOP)
    project = project_from(snapshot, params)
    counts = summary_counts(snapshot, project, token)
    staleness = _staleness(snapshot, project, ref, token)
    token.check()
    orphans, orphans_left = _kept(counts.orphans, str, top)
    links, links_left = _kept(counts.broken_links, _link_entry, top)
    linked, linked_left = _kept(
        counts.most_linked, lambda item: _linked_entry(snapshot, item), top
    )
    return {
        "snapshot_revision": snapshot.revision,
        "temporal_profile": ref.profile,
        "as_of": ref.as_of,
        "project": project,
        "top": top,
        "concepts": counts.concepts,
        "unparseable": counts.unparseable,
        "types": _tally(counts.types, top),
        "tags": _tally(counts.tags, top),
        "status": dict(counts.status),
        "trust": dict(counts.trust),
        "staleness": staleness,
        "relation_types": _tally(counts.relation_types, top),
        "folders": _tally(counts.folders, top, clip_values=False),
        "orphans": {"count": len(counts.orphans), "ids": orphans, "others": orphans_left,
                    "unchecked": counts.unchecked},
        "broken_links": {"count": len(counts.broken_links), "links": links,
                         "others": links_left},
        "most_linked": {"concepts": linked, "others": linked_left},
        # Only for a remote bundle (git URL or archive): which commit or archive is served.
        # A folder served in place keeps its answer's bytes as they were.
        **({"source": call.source.as_json()} if call.source is not None else {}),
    }


def _staleness(
    snapshot: Snapshot, project: str | None, ref: Reference, token: CancelToken
) -> dict[str, int | None]:
    """Concepts in scope by ``stale`` at ``as_of`` (the cards' rule); every count ``None``
    without ``as_of``."""
    found: Counter[str] = Counter()
    if ref.moment is not None:
        for n, doc in enumerate(snapshot.concepts.values()):
            if n % 256 == 0:
                token.check()
            if in_project(doc.path, project):
                stale = ref.stale(stale_after(doc.fm, ref.profile))
                found["unknown" if stale is None else "stale" if stale else "not_stale"] += 1
    return {key: found[key] if ref.moment is not None else None
            for key in ("stale", "not_stale", "unknown")}


def summary_counts(snapshot: Snapshot, project: str | None, token: CancelToken) -> Counts:
    """:func:`counts_of`, kept with the snapshot per project; the whole bundle's also by
    revision (an earlier process's, read back after a restart: 0.6 s of following every
    concept's links at 10,000 concepts otherwise)."""
    if project is not None:
        return of_snapshot(snapshot, SUMMARY_COUNTS, lambda: counts_of(snapshot, project, token),
                           project, token.check)
    return of_snapshot(
        snapshot, SUMMARY_COUNTS,
        lambda: revision_value(snapshot, unrevised_name(snapshot, "summary-counts/1", None),
                               _read_counts, lambda: counts_of(snapshot, None, token),
                               _counts_row),
        None, token.check)


def _counts_row(counts: Counts) -> list[Any]:
    return [counts.concepts, counts.unparseable, counts.types, counts.tags, dict(counts.status),
            dict(counts.trust), counts.relation_types, counts.folders, counts.orphans,
            counts.unchecked, counts.broken_links, counts.most_linked]


def _read_counts(kept: Any) -> Counts | None:
    """The :class:`Counts` :func:`_counts_row` kept, when it has that shape; else ``None``."""
    if not (isinstance(kept, list) and len(kept) == 12):
        return None
    (concepts, unparseable, types_, tags, status, trust, relation_types, folders, orphans,
     unchecked, broken, linked) = kept
    tallies = (types_, tags, relation_types, folders, linked)
    if not (all(type(n) is int for n in (concepts, unparseable, unchecked))
            and all(_all_of(t, (str, int)) for t in tallies)
            and _all_of(broken, (str, int, str))
            and all(isinstance(m, dict) and all(type(v) is int for v in m.values())
                    for m in (status, trust))
            and isinstance(orphans, list) and all(type(o) is str for o in orphans)):
        return None
    pairs = [tuple(tuple(row) for row in t) for t in tallies]
    return Counts(concepts, unparseable, pairs[0], pairs[1], status, trust, pairs[2], pairs[3],
                  tuple(orphans), unchecked, tuple(tuple(row) for row in broken), pairs[4])


def _all_of(rows: Any, kinds: tuple[type, ...]) -> bool:
    """Whether ``rows`` is a list of lists whose items have exactly the types ``kinds``."""
    return isinstance(rows, list) and all(
        isinstance(row, list) and len(row) == len(kinds)
        and all(type(v) is k for v, k in zip(row, kinds, strict=True)) for row in rows)


def counts_of(snapshot: Snapshot, project: str | None, token: CancelToken) -> Counts:
    """The :class:`Counts` of the concepts under ``project`` (all of them for ``None``)."""
    by_type: Counter[str] = Counter()
    by_tag: Counter[str] = Counter()
    statuses = dict.fromkeys((*STATUSES, INVALID_STATUS), 0)
    tiers = dict.fromkeys(TRUST_TIERS, 0)
    folders: Counter[str] = Counter()
    broken: list[tuple[str, int, str]] = []
    concepts = 0
    for n, doc in enumerate(snapshot.concepts.values()):
        if n % 256 == 0:
            token.check()
        if not in_project(doc.path, project):
            continue
        concepts += 1
        fm = doc.fm
        by_type[text_field(fm, "type")] += 1
        by_tag.update(set(concept_tags(fm)))
        statuses[status_state(fm)["effective"] or INVALID_STATUS] += 1
        tiers[trust(fm)] += 1
        for folder in _folders_above(doc.path, project):
            folders[folder] += 1
        assert doc.concept_id is not None
        broken.extend((doc.concept_id, link.line, link.raw) for link in broken_links(doc, snapshot))
    token.check()
    orphans, unchecked = _orphans(snapshot, project)
    inbound = graph_of(snapshot).inbound_counts(project, token)
    return Counts(
        concepts=concepts,
        unparseable=sum(1 for d in snapshot.broken if in_project(d.path, project)),
        types=_ranked(by_type),
        tags=_ranked(by_tag),
        status=types.MappingProxyType(statuses),
        trust=types.MappingProxyType(tiers),
        relation_types=_ranked(_relation_types(snapshot, project, token)),
        folders=_ranked(folders),
        orphans=orphans,
        unchecked=unchecked,
        broken_links=tuple(sorted(broken)),
        most_linked=_ranked(inbound),
    )


def _ranked(counts: Mapping[str, int]) -> tuple[tuple[str, int], ...]:
    """By count (descending), then value."""
    return tuple(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def _folders_above(path: str, project: str | None) -> Iterator[str]:
    """The folders a concept file is under, innermost first, up to (not including) the root or
    ``project``: the folders whose ``project`` scope would hold it."""
    folder = posixpath.dirname(path)
    while folder and folder != project:
        yield folder
        folder = posixpath.dirname(folder)


def _relation_types(
    snapshot: Snapshot, project: str | None, token: CancelToken
) -> Counter[str]:
    """Resolved typed relations by type, both ends in ``project`` (the edges a scoped walk
    follows)."""
    concepts = snapshot.concepts
    counts: Counter[str] = Counter()
    for n, edge in enumerate(snapshot.edges):
        if n % 1024 == 0:
            token.check()
        if edge.relation_type is None:
            continue
        if project is None or (
            in_project(concepts[edge.source_id].path, project)
            and in_project(concepts[edge.target_id].path, project)
        ):
            counts[edge.relation_type] += 1
    return counts


def _orphans(snapshot: Snapshot, project: str | None) -> tuple[tuple[str, ...], int]:
    """The validator's orphans (``check_orphans``) in ``project``, sorted by ID, and how many
    concepts in it the check could not look at (their folder has no ``index.md``)."""
    ids: list[str] = []
    unchecked_folders: set[str] = set()
    for finding in orphan_findings(snapshot):
        if finding.code == ORPHAN and finding.file is not None:
            concept_id = snapshot.documents[finding.file].concept_id
            if concept_id is not None and in_project(finding.file, project):
                ids.append(concept_id)
        elif finding.code == MISSING_INDEX and finding.file is not None:
            unchecked_folders.add("" if finding.file == ROOT_FOLDER else finding.file)
    unchecked = sum(
        1 for doc in snapshot.concepts.values()
        if in_project(doc.path, project) and posixpath.dirname(doc.path) in unchecked_folders
    )
    return tuple(sorted(ids)), unchecked


def _link_entry(link: tuple[str, int, str]) -> dict[str, Any]:
    concept_id, line, raw = link
    return {"concept_id": concept_id, "target": clip(raw, MAX_TEXT_CHARS)[0], "line": line}


def _linked_entry(snapshot: Snapshot, item: tuple[str, int]) -> dict[str, Any]:
    concept_id, inbound = item
    name = concept_name(snapshot.concepts[concept_id])
    return {"id": concept_id, "name": clip(name, MAX_TEXT_CHARS)[0], "inbound": inbound}


def _tally(
    ranked: Sequence[tuple[str, int]], top: int, *, clip_values: bool = True
) -> dict[str, Any]:
    """``{values: [{value, count}], others}``; free text is cut."""

    def entry(item: tuple[str, int]) -> dict[str, Any]:
        value, n = item
        return {"value": clip(value, MAX_TEXT_CHARS)[0] if clip_values else value, "count": n}

    kept, others = _kept(ranked, entry, top)
    return {"values": kept, "others": others}


def _kept(ranked: Sequence[_T], entry: Callable[[_T], _E], top: int) -> tuple[list[_E], int]:
    """The entries of the first items of ``ranked``: at most ``top`` and at most
    :data:`LIST_BYTES` of compact JSON (a prefix of the ranking: it stops at the first entry
    that does not fit); and how many items were left out. Entries are built only for the
    items looked at."""
    kept: list[_E] = []
    used = 0
    for item in ranked[:top]:
        value = entry(item)
        size = len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()) + 1
        if used + size > LIST_BYTES:
            break
        kept.append(value)
        used += size
    return kept, len(ranked) - len(kept)


SPEC = ToolSpec(
    name=NAME,
    title="Bundle summary",
    toolset="read",
    read_only=True,
    # Like validate_bundle it answers for a bundle with unparseable files, and counts them.
    needs_parseable=False,
    output_budget=64 * 1024,
    description=DESCRIPTION,
    run=run,
    # A pure function of the snapshot and the arguments (as_of is explicit).
    cache_results=True,
)
