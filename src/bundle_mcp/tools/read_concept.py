"""read_concept: one concept's raw frontmatter, body and a typed projection of its known keys."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cancel import CancelToken
from ..errors import resource_limit
from ..model import Document, Snapshot, thaw
from ..okf.computations import is_attested_computation
from ..okf.properties import stale_after, status_state, tags, trust, verifications
from ..okf.temporal import DATE_PROFILE
from ..okf.versions import resolve_version, version_declaration
from ..toolspec import CallContext, ToolSpec
from ._common import (
    MIB,
    citation_sources,
    frontmatter_sources,
    legacy_generated_at,
    require_concept,
    string_or,
)

NAME = "read_concept"
DESCRIPTION = (
    "One concept by concept_id: raw frontmatter, Markdown body, known OKF fields projected "
    "(sources with footnotes, verified and trust, status, stale_after, Attested Computation "
    "keys; others under unknown) and the computations it links to. Text block: the raw file. "
    "Absent ID: concept_not_found."
)

MODELLED_KEYS = frozenset(
    {
        "type", "title", "description", "resource", "tags", "sources", "usage_window",
        "generated", "verified", "status", "stale_after", "runtime", "parameters",
        "computation", "executor", "attester",
    }
)
MAX_COMPUTATION_ITEMS = 256
MAX_PROJECTED_ITEMS = 10_000  # every projected list of the read contract


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    doc = require_concept(snapshot, params["concept_id"], token=token)
    profile = params.get("temporal_profile") or DATE_PROFILE
    version = resolve_version(snapshot)
    legacy = version["effective"] == "0.1"
    token.check()
    fm = doc.fm

    generated, from_timestamp = _generated(doc, legacy)
    sources = [_source(s) for s in frontmatter_sources(fm)]
    from_citations = False
    if legacy and "sources" not in fm:
        citations = citation_sources(doc)
        if citations:
            from_citations = True
            sources = [_citation(c) for c in citations]
    token.check()
    state = status_state(fm)
    projection = {
        "type": string_or(fm.get("type"), None),
        "title": string_or(fm.get("title"), None),
        "description": string_or(fm.get("description"), None),
        "resource": string_or(fm.get("resource"), None),
        "tags": tags(fm),
        "sources": sources,
        "attributions": attributions(doc, sources, token),
        "usage_window": _window(fm.get("usage_window")),
        "generated": generated,
        "verified": _verified(fm),
        "trust": trust(fm),
        "status": state["effective"],
        "status_state": state,
        "stale_after": stale_after(fm, profile),
        "computation": computation(fm),
        "unknown": {k: thaw(v) for k, v in fm.items() if k not in MODELLED_KEYS},
    }
    _check_list_sizes(projection)
    assert doc.concept_id is not None
    used = uses_computations(snapshot, doc.concept_id)
    return {
        "id": doc.concept_id,
        "path": doc.path,
        "version": version,
        "version_declaration": version_declaration(snapshot),
        "temporal_profile": profile,
        "frontmatter_yaml": doc.frontmatter_raw or "",
        "body": doc.body,
        "projection": projection,
        "legacy_fallback": {
            "generated_from_timestamp": from_timestamp,
            "sources_from_citations": from_citations,
        },
        # Only when there is something to say, so the okf-mcp wire shape of every other
        # concept stays as it was.
        **({"uses_computations": used} if used else {}),
    }


def uses_computations(snapshot: Snapshot, concept_id: str) -> list[dict[str, Any]]:
    """The Attested Computations this concept links to (OKF v0.2 §10.4), by ID: where its
    figures must be computed, with get_computation."""
    # Outgoing edges only: the concept's own links and relations, never the whole bundle's
    # edge index (building that parsed every document on a first read; issue 29).
    targets = {
        edge.target_id
        for edge in snapshot.outgoing_edges(concept_id)
        if edge.target_id != concept_id
        and is_attested_computation(snapshot.concepts[edge.target_id])
    }
    out = []
    for target in sorted(targets):
        fm = snapshot.concepts[target].fm
        out.append({"id": target, "title": string_or(fm.get("title"), ""),
                    "runtime": string_or(fm.get("runtime"), None)})
    return out


def text(result: dict[str, Any], snapshot: Snapshot) -> str:
    """The text block of a successful read: the raw file, byte for byte as decoded."""
    return snapshot.concepts[result["id"]].text


def normalise_label(label: str) -> str:
    """CommonMark reference-label matching: surrounding space stripped, inner runs collapsed,
    Unicode case folded."""
    return " ".join(label.split()).casefold()


def attributions(
    doc: Document, sources: list[dict[str, Any]], token: CancelToken
) -> list[dict[str, Any]]:
    """Footnote references and definitions of the body grouped by normalised label.

    ``id`` is the label as first written (in line order); ``sources`` are the projected sources
    whose own ``id`` normalises to the same label (every one of them, never a first match).
    Groups sort by normalised label.
    """
    facts = doc.markdown
    groups: dict[str, dict[str, Any]] = {}
    events = sorted(
        [(r.line, 0, r.label, None) for r in facts.footnote_refs]
        + [(d.line, 1, d.label, d.text) for d in facts.footnote_defs],
        key=lambda e: (e[0], e[1]),
    )
    for _line, is_definition, label, body in events:
        token.check()
        if not label:
            continue
        key = normalise_label(label)
        if not key:
            continue
        group = groups.get(key)
        if group is None:
            group = groups[key] = {
                "id": label,
                "normalized_id": key,
                "sources": [s for s in sources if normalise_label(s["id"]) == key],
                "references": [],
                "definitions": [],
            }
        if is_definition:
            group["definitions"].append(
                {"id": label, "text": body or "", "raw": f"[^{label}]: {body or ''}".rstrip()}
            )
        else:
            group["references"].append({"id": label, "raw": f"[^{label}]"})
    return [groups[k] for k in sorted(groups)]


def _check_list_sizes(projection: dict[str, Any]) -> None:
    """A list over the contract's 10,000 items fails the call; it is never cut short."""
    lists = [projection[k] for k in ("tags", "sources", "attributions", "verified")]
    for group in projection["attributions"]:
        lists.extend(group[k] for k in ("sources", "references", "definitions"))
    if any(len(items) > MAX_PROJECTED_ITEMS for items in lists):
        raise resource_limit(
            f"the concept has a list longer than the {MAX_PROJECTED_ITEMS} items a read returns",
            "split the concept: no tags, sources, verifications or footnotes list may exceed "
            f"{MAX_PROJECTED_ITEMS} entries",
        )


def _generated(doc: Document, legacy: bool) -> tuple[dict[str, Any] | None, bool]:
    value = doc.fm.get("generated")
    if isinstance(value, Mapping):
        by = value.get("by")
        return {
            "by": by if isinstance(by, str) and by else None,
            "at": string_or(value.get("at"), None),
        }, False
    at, from_timestamp = legacy_generated_at(doc, legacy)
    if from_timestamp:
        return {"by": None, "at": at}, True
    return None, False


def _verified(fm: Mapping[str, Any]) -> list[dict[str, str]]:
    """``verified`` entries with an actor; a missing ``at`` is reported as ''."""
    out = []
    for v in verifications(fm):
        by = v.get("by")
        if isinstance(by, str) and by:
            out.append({"by": by, "at": string_or(v.get("at"), "")})
    return out


def _window(value: Any) -> dict[str, str] | None:
    if isinstance(value, Mapping):
        start, end = value.get("from"), value.get("to")
        if isinstance(start, str) and isinstance(end, str):
            return {"from": start, "to": end}
    return None


def _usage_count(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 10**20:
        return str(value)
    return None


def _source(entry: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": string_or(entry.get("id"), ""),
        "resource": entry["resource"],
        "title": string_or(entry.get("title"), ""),
        "author": string_or(entry.get("author"), ""),
        "usage_count": _usage_count(entry.get("usage_count")),
        "last_modified": string_or(entry.get("last_modified"), None),
        "usage_window": _window(entry.get("usage_window")),
    }


def _citation(citation: dict[str, str]) -> dict[str, Any]:
    return {
        **citation,
        "author": "",
        "usage_count": None,
        "last_modified": None,
        "usage_window": None,
    }


def computation(fm: Mapping[str, Any]) -> dict[str, Any] | None:
    """The Attested Computation keys as inert data; ``None`` when none is present.

    Only complete, well-typed parts are projected (a parameter needs a string name and type
    and a boolean required); the raw text stays in frontmatter_yaml.
    """
    if not any(k in fm for k in ("runtime", "parameters", "computation", "executor", "attester")):
        return None
    parameters = []
    raw_parameters = fm.get("parameters")
    if isinstance(raw_parameters, tuple):
        for p in raw_parameters:
            if (
                isinstance(p, Mapping)
                and isinstance(p.get("name"), str)
                and isinstance(p.get("type"), str)
                and isinstance(p.get("required"), bool)
            ):
                parameters.append({"name": p["name"], "type": p["type"],
                                   "required": p["required"]})
    executor = None
    raw_executor = fm.get("executor")
    if isinstance(raw_executor, Mapping) and isinstance(raw_executor.get("resource"), str):
        receipt = raw_executor.get("receipt")
        executor = {
            "resource": raw_executor["resource"],
            "receipt": [r for r in receipt if isinstance(r, str)]
            if isinstance(receipt, tuple)
            else [],
        }
    attester = None
    raw_attester = fm.get("attester")
    if isinstance(raw_attester, Mapping) and isinstance(raw_attester.get("resource"), str):
        attester = {"resource": raw_attester["resource"]}
    if len(parameters) > MAX_COMPUTATION_ITEMS or (
        executor is not None and len(executor["receipt"]) > MAX_COMPUTATION_ITEMS
    ):
        raise resource_limit(
            f"the concept lists more than {MAX_COMPUTATION_ITEMS} computation parameters or "
            "receipts",
            "this concept exceeds the read contract: list at most 256 parameters and 256 "
            "receipts in its frontmatter",
        )
    return {
        "runtime": string_or(fm.get("runtime"), ""),
        "parameters": parameters,
        "computation": string_or(fm.get("computation"), ""),
        "executor": executor,
        "attester": attester,
    }


SPEC = ToolSpec(
    name=NAME,
    title="Read concept",
    toolset="read",
    read_only=True,
    output_budget=16 * MIB,
    description=DESCRIPTION,
    run=run,
    text=text,
)
