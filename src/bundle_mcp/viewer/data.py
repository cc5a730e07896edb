"""What the viewer page shows, as JSON-native data computed from one snapshot.

Every fact comes from the rule that owns it: names from ``okf/names.py``, status, trust tier and
staleness from ``okf/properties.py`` and the freshness gate of ``okf/computations.py``, edges from
the snapshot and ``okf/graph.py``'s field edges, path-valued fields from ``okf/field_paths.py``,
broken links and orphans from the validator (``validation/links.py``), so the page never tells a
reader something ``validate`` or a tool would tell differently.

Staleness is judged at one date, ``as_of`` (the day the page is made unless the caller fixes it),
and the page prints that date. The data holds nothing else that changes between two runs over
the same bundle, so the same bundle and date give the same page byte for byte.
"""

from __future__ import annotations

import datetime as dt
import posixpath
import types
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from .._version import __version__
from ..cancel import CancelToken
from ..errors import Diagnostic
from ..model import FIELD, LINKS_TO, NAVIGATION, RELATION, Document, Edge, Snapshot, thaw
from ..okf.computations import (
    ComputationUnavailable,
    computation_text,
    contract_of,
    freshness,
    is_attested_computation,
)
from ..okf.field_paths import BUNDLE, SCOPE, URL, FieldPath, path_fields, resolve_field_path
from ..okf.graph import field_edges
from ..okf.names import concept_name
from ..okf.properties import scalar_text, status_state, tags, text_field, trust, verifications
from ..okf.temporal import DATE_PROFILE, Reference, parse_either
from ..okf.versions import resolve_version
from ..validation import orphan_findings
from ..validation.links import link_findings
from .layout import folder_layout
from .markdown_html import render_body

# Above this many concepts the page starts from the folder tree and a search, and expands on
# click, never drawing more than this many concept nodes at once.
DEFAULT_NODE_BUDGET = 1500
# A computation text longer than this is shown cut (its sha256 is always the whole text's).
MAX_COMPUTATION_SHOWN = 20_000

# Staleness as the page colours and filters it (the freshness gate's words, for any concept).
STALE = "stale"  # as_of >= stale_after
DUE = "due"  # stale within NEAR_STALE_DAYS of as_of
FRESH = "fresh"
NO_DATE = "none"  # no stale_after: does not go stale
UNREADABLE = "invalid"  # a stale_after that is no date or instant
_GATE_STATE: Mapping[str, str] = types.MappingProxyType(
    {"refuse": STALE, "warn": DUE, "ok": FRESH, "unknown": UNREADABLE})
INVALID_STATUS = "invalid"


@dataclass(frozen=True, slots=True)
class ViewOptions:
    """How a page is made: the date staleness is judged at, and the node budget."""

    as_of: dt.date
    node_budget: int = DEFAULT_NODE_BUDGET
    bundle_name: str = ""


def page_data(snapshot: Snapshot, options: ViewOptions,
              token: CancelToken | None = None) -> dict[str, Any]:
    """Everything the page needs, JSON-native and in a fixed order."""
    token = token or CancelToken()
    concepts = snapshot.concepts
    ids = list(concepts)
    index = {concept_id: n for n, concept_id in enumerate(ids)}
    edge_rows, kinds = _edges(snapshot, index, token)
    # How many other concepts reach each one, by any kind of edge: the node's size.
    sources: list[set[int]] = [set() for _ in ids]
    for source, target, _kind in edge_rows:
        sources[target].add(source)
    inbound = [len(found) for found in sources]
    layout = folder_layout(
        (concept_id, posixpath.dirname(doc.path), inbound[index[concept_id]])
        for concept_id, doc in concepts.items()
    )
    orphans = {d.file for d in orphan_findings(snapshot) if d.code == "orphan"}
    rows = []
    for n, (concept_id, doc) in enumerate(concepts.items()):
        if n % 64 == 0:
            token.check()
        row = _concept(snapshot, doc, options.as_of)
        x, y = layout.positions[concept_id]
        row.update({"orphan": doc.path in orphans, "inbound": inbound[n], "x": x, "y": y})
        rows.append(row)
    folders = _folders(snapshot, layout.boxes)
    version = resolve_version(snapshot)
    return {
        "meta": {
            "bundle": options.bundle_name,
            "as_of": options.as_of.isoformat(),
            "generator": f"bundle-mcp {__version__}",
            "revision": snapshot.revision,
            "okf_version": version["effective"],
            "concepts": len(rows),
            "edges": len(edge_rows),
            "node_budget": options.node_budget,
            "unparseable": [
                {"path": d.path, "message": d.parse_error.message}
                for d in snapshot.broken if d.parse_error is not None
            ],
            "skipped": [_diagnostic(d) for d in snapshot.skipped],
        },
        "edge_kinds": kinds,
        "concepts": rows,
        "edges": edge_rows,
        "folders": folders,
    }


# --------------------------------------------------------------------------------------------
# Edges


def _edges(snapshot: Snapshot, index: Mapping[str, int], token: CancelToken
           ) -> tuple[list[list[int]], list[dict[str, str]]]:
    """``[source, target, kind]`` rows (concept and kind indexes), and the kinds: a link, each
    relation type, each field edge name. One row per (source, target, kind)."""
    kinds: dict[tuple[str, str], int] = {}
    found: set[tuple[int, int, int]] = set()

    def kind_of(group: str, name: str) -> int:
        return kinds.setdefault((group, name), len(kinds))

    kind_of(_GROUP[NAVIGATION], LINKS_TO)
    for edge in _concept_edges(snapshot, token):
        token.check()
        kind = kind_of(_GROUP[edge.kind], edge.relationship)
        found.add((index[edge.source_id], index[edge.target_id], kind))
    rows = [[s, t, k] for s, t, k in sorted(found) if s != t]
    return rows, [{"group": group, "name": name} for group, name in kinds]


def _concept_edges(snapshot: Snapshot, token: CancelToken) -> Iterator[Edge]:
    """The snapshot's links and relations, then its field edges (each once)."""
    yield from snapshot.edges
    for per_concept in field_edges(snapshot, token).values():
        yield from per_concept


# The viewer's group of each kind of concept edge.
_GROUP: Mapping[str, str] = types.MappingProxyType(
    {NAVIGATION: "link", RELATION: "relation", FIELD: "field"}
)


# --------------------------------------------------------------------------------------------
# One concept


def _concept(snapshot: Snapshot, doc: Document, as_of: dt.date) -> dict[str, Any]:
    fm = doc.fm
    assert doc.concept_id is not None
    status = status_state(fm)
    row: dict[str, Any] = {
        "id": doc.concept_id,
        "title": concept_name(doc),
        "path": doc.path,
        "folder": posixpath.dirname(doc.path),
        "type": text_field(fm, "type"),
        "description": text_field(fm, "description"),
        "tags": sorted(set(tags(fm))),
        "status": status["effective"] if status["valid"] else INVALID_STATUS,
        "status_raw": status["raw"],
        "trust": trust(fm),
        "verified": [_verification(v) for v in verifications(fm)],
        "stale": staleness(fm, as_of),
        "resource": _reading(snapshot, doc, "resource"),
        "sources": _sources(snapshot, doc),
        "generated": _generated(fm),
        "computation": _computation(snapshot, doc, as_of) if is_attested_computation(doc)
        else None,
        "broken": _broken(snapshot, doc),
        "frontmatter": doc.frontmatter_raw or "",
        "html": render_body(doc, snapshot),
    }
    return row


def staleness(fm: Mapping[str, Any], as_of: dt.date) -> dict[str, Any]:
    """The freshness gate of ``okf/computations.py`` at ``as_of``, for any concept.

    The gate compares a date ``as_of`` with a ``stale_after`` of either kind (an instant against
    the whole UTC day), so a bundle of either profile gets an answer; an instant inside the
    as_of day is ``warn`` there, shown as due. A ``stale_after`` that is neither is shown as
    invalid, not as due.
    """
    reference = Reference(DATE_PROFILE, as_of.isoformat(), as_of)
    raw = fm.get("stale_after")
    gate = freshness(fm, reference)
    if raw is None:
        state = NO_DATE
    elif parse_either(raw) is None:
        state = UNREADABLE
    else:
        state = _GATE_STATE[gate["gate"]]
    return {"state": state, "stale_after": gate["stale_after"] if raw is not None else None,
            "raw": None if raw is None else scalar_text(thaw(raw)),
            "days_left": gate["days_left"], "detail": gate["detail"]}


def _verification(entry: Mapping[str, Any]) -> dict[str, str]:
    return {key: scalar_text(thaw(entry[key])) for key in ("by", "at", "note")
            if key in entry and entry[key] is not None}


def _generated(fm: Mapping[str, Any]) -> dict[str, str] | None:
    value = fm.get("generated")
    if not isinstance(value, Mapping):
        return None
    return {str(k): scalar_text(thaw(v)) for k, v in value.items() if v is not None}


def _field_reading(value: FieldPath) -> dict[str, Any]:
    """A path-valued field as the page shows it: a URL (linked only for http and https), a
    scope, or a bundle path with the concept it names."""
    out: dict[str, Any] = {"raw": value.raw, "kind": value.kind}
    if value.kind == URL:
        scheme = value.raw.strip().split(":", 1)[0].lower()
        out["safe_url"] = scheme in ("http", "https")
    elif value.kind == BUNDLE:
        out.update(path=value.path, exists=bool(value.exists), concept=value.concept_id,
                   root_reading=value.root_reading)
    else:
        assert value.kind == SCOPE
    return out


def _reading(snapshot: Snapshot, doc: Document, key: str) -> dict[str, Any] | None:
    value = doc.fm.get(key)
    if not isinstance(value, str) or not value.strip():
        return None
    return _field_reading(resolve_field_path(snapshot, doc.path, value))


def _sources(snapshot: Snapshot, doc: Document) -> list[dict[str, Any]]:
    value = doc.fm.get("sources")
    if not isinstance(value, tuple):
        return []
    out = []
    for entry in value:
        if not isinstance(entry, Mapping):
            out.append({"text": scalar_text(thaw(entry))})
            continue
        row: dict[str, Any] = {
            key: scalar_text(thaw(entry[key]))
            for key in ("id", "title", "author", "last_modified", "usage_count")
            if entry.get(key) is not None
        }
        resource = entry.get("resource")
        if isinstance(resource, str) and resource.strip():
            row["resource"] = _field_reading(
                resolve_field_path(snapshot, doc.path, resource, may_be_scope=True))
        out.append(row)
    return out


def _computation(snapshot: Snapshot, doc: Document, as_of: dt.date) -> dict[str, Any]:
    """The Attested Computation contract (OKF v0.2 §10.2), its sanctioned computation text and
    the freshness gate, as ``okf/computations.py`` reads them. Nothing is executed."""
    contract = contract_of(snapshot, doc)
    out: dict[str, Any] = {
        "runtime": contract.runtime,
        "parameters": [{"name": p.name, "type": p.type, "required": p.required}
                       for p in contract.parameters],
        "computation": _field_reading(contract.computation) if contract.computation else None,
        "executor": _field_reading(contract.executor) if contract.executor else None,
        "receipt": list(contract.receipt),
        "attester": _field_reading(contract.attester) if contract.attester else None,
        "problems": list(contract.problems),
        "freshness": freshness(doc.fm, Reference(DATE_PROFILE, as_of.isoformat(), as_of)),
    }
    try:
        text = computation_text(snapshot, doc, contract)
    except ComputationUnavailable as exc:
        out["text"] = None
        out["unavailable"] = {"code": exc.code, "message": exc.message, "hint": exc.hint}
    else:
        shown = text.text[:MAX_COMPUTATION_SHOWN]
        out["text"] = {"source": text.source, "path": text.path, "line_start": text.line_start,
                       "line_end": text.line_end, "language": text.language,
                       "sha256": text.sha256, "text": shown, "cut": shown != text.text}
    return out


def _broken(snapshot: Snapshot, doc: Document) -> list[dict[str, Any]]:
    """Links to nothing and anchors naming no heading (the validator's --check-links findings),
    relations whose target is no concept, and path-valued fields that name no file."""
    out: list[dict[str, Any]] = []
    for finding in link_findings(doc, snapshot):
        out.append({"kind": "link" if finding.code == "broken_link" else "anchor",
                    "line": finding.line, "message": finding.message})
    for relation in doc.relations:
        if relation.target_id not in snapshot.concepts:
            out.append({"kind": "relation", "line": None,
                        "message": f"{relation.relation_type} → {relation.target}: no such "
                        "concept"})
    for occurrence in path_fields(snapshot, doc):
        value = occurrence.value
        if value.kind == BUNDLE and not value.exists:
            hint = f"; did you mean {value.root_reading}?" if value.root_reading else ""
            out.append({"kind": "field", "line": None,
                        "message": f"{occurrence.location}: {value.raw} names no file of the "
                        f"bundle{hint}"})
    return out


def _diagnostic(d: Diagnostic) -> dict[str, Any]:
    return {"code": d.code, "file": d.file, "message": d.message}


# --------------------------------------------------------------------------------------------
# Folders


def _folders(snapshot: Snapshot, boxes: Mapping[str, tuple[float, float, float, float]]
             ) -> list[dict[str, Any]]:
    """Each folder of the layout with its concept counts (its own, and with sub-folders)."""
    own: dict[str, int] = {}
    total: dict[str, int] = {}
    for doc in snapshot.concepts.values():
        folder = posixpath.dirname(doc.path)
        own[folder] = own.get(folder, 0) + 1
        while True:
            total[folder] = total.get(folder, 0) + 1
            if not folder:
                break
            folder = posixpath.dirname(folder)
    out = []
    for path in sorted(boxes):
        x, y, w, h = boxes[path]
        index = snapshot.documents.get(f"{path}/index.md")
        out.append({
            "path": path,
            "name": path.rsplit("/", 1)[-1],
            "parent": posixpath.dirname(path),
            "own": own.get(path, 0),
            "total": total.get(path, 0),
            "box": [round(x, 1), round(y, 1), round(w, 1), round(h, 1)],
            "index": index is not None and index.kind == "index",
        })
    return out
