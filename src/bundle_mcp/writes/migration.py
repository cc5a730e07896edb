"""OKF v0.1 → v0.2 migration: ``timestamp`` → ``generated``, ``# Citations`` → ``sources``.

The migration changes meaning only where the caller said how (the reference's rule):

- ``timestamp`` becomes ``generated: {by, at}``. ``by`` is the explicit ``generated_by`` (never
  guessed from the actor); ``at`` is the timestamp itself, or an explicit ``generated_at`` entry.
  A concept that already has ``generated`` keeps it unless the instants differ, and then
  ``timestamp_conflict_policy`` decides (``reject`` blocks). ``timestamp_policy`` keeps the old
  key or removes it once copied.
- A ``# Citations`` section becomes footnotes and structured sources only through an explicit
  ``citation_mappings`` entry per citation: ``[N]`` markers become ``[^id]``, the section becomes
  footnote definitions, and the frontmatter gains ``sources``.
- ``computations`` set Attested Computation contracts (inline mode).
- The root ``index.md`` declares ``okf_version: "0.2"`` (the publication layer writes it last).

Whatever cannot be done exactly is a *blocker* (with a ``manual_action`` where caller input would
resolve it); a plan with any blocker writes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from markdown_it.token import Token

from ..cancel import CancelToken
from ..errors import (
    ERROR,
    OPERATION_REJECTED,
    Diagnostic,
    invalid_input,
    invalid_request,
    operation_rejected,
)
from ..loader.frontmatter import split_frontmatter
from ..model import Document, Snapshot, thaw
from ..okf.citations import CitationsSection, citations_section, citations_sections
from ..okf.markdown import markdown_parser
from ..okf.properties import scalar_text
from ..okf.scopes import Access
from ..okf.suggest import suggest
from ..okf.temporal import parse_instant
from ..okf.versions import resolve_version
from .apply import Replanned, require_plan
from .patch_ops import OpRejected, Workspace, set_attested_computation
from .plan import (
    FileChange,
    digest,
    new_conformance_errors,
    plan_digest,
    request_digest,
    require_utf8,
    result_revision,
    revision_of_snapshot,
)
from .scope import scope_diagnostic
from .yaml_edit import EditError

__all__ = [
    "PLAN_KIND",
    "MigrationPlan",
    "normalized",
    "plan_migration",
    "plan_of",
    "proof",
    "replan",
    "require_source",
    "resolve_source",
    "scope_blocker",
    "targets_of",
]

PLAN_KIND = "v02_migration"  # the tool the plan digest and the proof's request digest bind
MAX_BLOCKER_DIAGNOSTICS = 100  # how many blockers a failed apply lists
APPLICABLE = "applicable"
NOOP = "noop"
BLOCKED = "blocked"
TRANSITION = "v0.1-to-v0.2"
TARGET_NOOP = "target-noop"
ROOT_INDEX = "index.md"
_VERSION_SHAPE = re.compile(r"(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)")
_ENTRY_PREFIX = re.compile(r" {0,3}\[([0-9]+)\][ \t]+")
_BULLET = re.compile(r"[ \t]*[-*+][ \t]+")
_MARKER = re.compile(r"\[([0-9]+)\]")
_RAW_MARKER = re.compile(r"(?<!\\)\[([0-9]+)\](?![(\[:])")
_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_TIMESTAMP_KEY = re.compile(r"(?m)^(['\"]?)timestamp\1[ \t]*:")


@dataclass(frozen=True, slots=True)
class MigrationPlan:
    status: str  # applicable | noop | blocked
    source: dict[str, Any]
    changes: tuple[FileChange, ...]
    blockers: tuple[dict[str, Any], ...]
    manual_actions: tuple[dict[str, Any], ...]


def normalized(params: Mapping[str, Any]) -> dict[str, Any]:
    """The migration request with defaults filled in: what the digests bind."""
    return {
        "from": params.get("from", "auto"),
        "generated_by": params.get("generated_by"),
        "generated_at": [dict(g) for g in params.get("generated_at", [])],
        "timestamp_conflict_policy": params.get("timestamp_conflict_policy", "reject"),
        "timestamp_policy": params["timestamp_policy"],
        "citation_mappings": [
            {"path": m["path"], "entries": [dict(e) for e in m["entries"]]}
            for m in params["citation_mappings"]
        ],
        "computations": [dict(c) for c in params.get("computations", [])],
    }


def check_request(request: Mapping[str, Any]) -> None:
    """Calendar validity of the explicit ``generated_at`` instants.

    Raises:
        BundleError: ``invalid_request``.
    """
    require_utf8(request)
    bad = [
        invalid_input(f"$.generated_at[{i}].at",
                      f"generated_at[{i}].at is not an RFC 3339 date-time with an offset")
        for i, entry in enumerate(request["generated_at"])
        if parse_instant(entry["at"]) is None
    ]
    if bad:
        raise invalid_request("generated_at holds an invalid instant", *bad[:8])


# --------------------------------------------------------------------------------------------
# Source resolution


def resolve_source(snapshot: Snapshot, selector: str) -> dict[str, Any]:
    """Which version the bundle is migrated from, and whether that is a transition at all."""
    index = snapshot.root_index
    fm = index.fm if index is not None else {}
    present = "okf_version" in fm
    raw_value = fm.get("okf_version")
    raw = scalar_text(thaw(raw_value)) if present else ""
    valid = not present or (isinstance(raw_value, str) and bool(_VERSION_SHAPE.fullmatch(raw)))
    declared = raw if present and valid else None
    out: dict[str, Any] = {
        "requested_selector": selector,
        "declaration_present": present,
        "declaration_valid": valid,
        "declaration_raw": raw,
        "declared_version": declared,
        "resolved_source": "",
        "resolution_source": "explicit" if selector != "auto" else "declared",
        "from_version": "",
        "to_version": "",
        "transition": "blocked",
        "candidates": [],
        "blockers": [],
    }
    if not valid:
        return _blocked(out, "invalid_version_declaration",
                        f"okf_version {raw!r} in index.md is not a version like \"0.1\"")
    if selector == "auto" and declared is None:
        # An undeclared bundle is whatever the readers take it to be (versioning: 0.1); the
        # probe only reports the v0.1 traits it shows.
        candidates = legacy_candidates(snapshot)
        out["candidates"] = candidates
        out["resolution_source"] = "legacy-probe" if candidates else "default"
        return _resolved(out, resolve_version(snapshot)["effective"])
    wanted = declared if selector == "auto" else selector
    if declared not in (None, wanted):
        return _blocked(out, "unsupported_migration_source",
                        f"index.md declares okf_version {declared}, not {wanted}",
                        resolved=declared or "")
    if wanted in ("0.1", "0.2"):
        return _resolved(out, wanted)
    major, minor = (int(p) for p in raw.split("."))
    if (major, minor) < (0, 2):
        return _blocked(out, "unsupported_migration_source",
                        f"okf_version {declared} is not a version this server migrates from",
                        resolved=declared or "")
    out["resolution_source"] = "future"
    return _blocked(out, "unsupported_migration_source",
                    f"future declaration {declared} cannot be rewritten as v0.2",
                    resolved=declared or "")


def _resolved(out: dict[str, Any], version: str) -> dict[str, Any]:
    out.update(resolved_source=version, from_version=version, to_version="0.2",
               transition=TRANSITION if version == "0.1" else TARGET_NOOP)
    return out


def _blocked(out: dict[str, Any], code: str, message: str, resolved: str = "") -> dict[str, Any]:
    out.update(resolved_source=resolved, from_version=resolved, transition="blocked",
               blockers=[_blocker(code, ROOT_INDEX, message)])
    return out


def legacy_candidates(snapshot: Snapshot) -> list[dict[str, Any]]:
    """Concepts that look like v0.1: a ``timestamp`` key or a ``# Citations`` section."""
    out: list[dict[str, Any]] = []
    for doc in sorted(snapshot.concepts.values(), key=lambda d: d.path):
        if "timestamp" in doc.fm:
            out.append({"kind": "timestamp", "path": doc.path, "location": _timestamp_span(doc)})
        section = _citations_heading(doc)
        if section is not None:
            start = len(doc.text) - len(doc.body) + section[0]
            out.append({"kind": "citations", "path": doc.path,
                        "location": _location(doc.text, start, start + section[1])})
    return out


# --------------------------------------------------------------------------------------------
# Planning


@dataclass
class _Findings:
    """Blockers and manual actions of one plan (local to one call)."""

    blockers: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)

    def block(self, code: str, path: str, message: str,
              location: dict[str, int] | None = None, action: str | None = None) -> None:
        self.blockers.append(_blocker(code, path, message, location))
        if action is not None:
            entry = {"code": action, "path": path, "message": message}
            if entry not in self.actions:
                self.actions.append(entry)


def plan_migration(
    snapshot: Snapshot, request: Mapping[str, Any], token: CancelToken
) -> MigrationPlan:
    source = resolve_source(snapshot, request["from"])
    if source["transition"] == "blocked":
        return MigrationPlan(BLOCKED, source, (), tuple(source["blockers"]), ())
    if source["transition"] == TARGET_NOOP:
        return MigrationPlan(NOOP, source, (), (), ())
    findings = _Findings()
    ws = Workspace(snapshot)
    explicit_at = _generated_at(snapshot, request, findings)
    mappings = _citation_mappings(snapshot, request, findings)
    contracts = _computations(snapshot, request, findings)
    for doc in sorted(snapshot.concepts.values(), key=lambda d: d.path):
        token.check()
        assert doc.concept_id is not None
        _migrate_concept(ws, doc, request, explicit_at.get(doc.concept_id),
                         mappings.get(doc.path), findings)
        contract = contracts.get(doc.concept_id)
        if contract is not None:
            try:
                set_attested_computation(ws, doc.path, contract)
            except (OpRejected, EditError) as exc:
                findings.block(exc.code, doc.path, exc.message)
    _declare_v02(ws, findings)
    changes = ws.changes()
    for problem in new_conformance_errors(snapshot, changes):
        findings.block(problem.code, problem.file or "", problem.message)
    if findings.blockers:
        return MigrationPlan(BLOCKED, source, (), tuple(findings.blockers),
                             tuple(findings.actions))
    return MigrationPlan(APPLICABLE if changes else NOOP, source, changes, (), ())


def plan_of(
    snapshot: Snapshot, request: Mapping[str, Any], token: CancelToken
) -> tuple[MigrationPlan, str | None, dict[str, Any] | None]:
    """The plan, its digest and its proof (both ``None`` unless the plan is applicable).

    Raises:
        BundleError: ``invalid_request`` (see :func:`check_request`).
    """
    check_request(request)
    plan = plan_migration(snapshot, request, token)
    if plan.status != APPLICABLE:
        return plan, None, None
    base = revision_of_snapshot(snapshot)
    bound = {"request": request, "source": plan.source}
    planned = plan_digest(PLAN_KIND, base, bound, plan.changes)
    account = proof(
        snapshot,
        plan,
        request_digest(PLAN_KIND, bound),
        base,
        result_revision(snapshot, plan.changes),
    )
    return plan, planned, account


def targets_of(account: Mapping[str, Any]) -> tuple[str, ...]:
    """The files a proof says the migration writes (the scope check's input: the apply checks
    the proof the caller sends back; a proof that is not the plan's is a mismatch later)."""
    return tuple(sorted({w["path"] for w in account["writes"]}))


def scope_blocker(access: Access) -> dict[str, Any]:
    """The blocker of a plan that writes outside the reader's writable folders (it names the
    folders, no file)."""
    return _blocker(OPERATION_REJECTED, "", scope_diagnostic(access).message)


def require_source(expected: Mapping[str, Any], source: Mapping[str, Any], preview: str) -> None:
    """The source resolved now must be the one the caller reviewed (its ``source``).

    Raises:
        BundleError: ``plan_mismatch``.
    """
    require_plan(digest(expected), digest(source), preview)


def replan(
    snapshot: Snapshot,
    request: Mapping[str, Any],
    expected_source: Mapping[str, Any],
    preview: str,
    token: CancelToken,
) -> Replanned:
    """The migration rebuilt for its apply, with its digest and the digest of its proof.

    A plan from another source than the reviewed one is a mismatch before it is blocked.

    Raises:
        BundleError: ``plan_mismatch`` for another source, ``operation_rejected`` for a blocked
            plan (one diagnostic per blocker), and the errors of :func:`plan_of`.
    """
    plan, planned, account = plan_of(snapshot, request, token)
    require_source(expected_source, plan.source, preview)
    if plan.status == BLOCKED:
        raise operation_rejected(
            f"the migration is blocked by {len(plan.blockers)} problem(s); nothing was written",
            *(
                Diagnostic(code=b["code"], severity=ERROR, file=b["path"] or None,
                           message=b["message"])
                for b in plan.blockers[:MAX_BLOCKER_DIAGNOSTICS]
            ),
            step=f"run {preview}, resolve its blockers and manual actions, then apply the new "
                 "preview",
        )
    return Replanned(plan.changes, (planned, digest(account)))


def proof(
    snapshot: Snapshot,
    plan: MigrationPlan,
    request_digest: str,
    base_revision: str,
    result_revision: str,
) -> dict[str, Any]:
    """The content-free account of a transition: what was read and which bytes will be written."""
    refs = sorted(
        snapshot.documents[c.path].concept_id or c.path
        for c in plan.changes
        if c.path in snapshot.documents and snapshot.documents[c.path].is_concept
    )
    return {
        "format_version": 2,
        "request_digest": request_digest,
        "resolution_digest": digest(plan.source),
        "base_revision": base_revision,
        "result_revision": result_revision,
        "reads": sorted(snapshot.documents),
        "writes": [{"path": c.path, "digest": c.new_sha256} for c in plan.changes],
        "deletes": [],
        "renames": [],
        "affected_refs": refs,
        "reverse_impact": [],
        "changed_files": [{"kind": "write", "path": c.path, "from": ""} for c in plan.changes],
        "changed_refs": refs,
    }


def _generated_at(
    snapshot: Snapshot, request: Mapping[str, Any], findings: _Findings
) -> dict[str, str]:
    out: dict[str, str] = {}
    for entry in request["generated_at"]:
        concept = entry["concept_id"]
        doc = snapshot.concepts.get(concept)
        if doc is None:
            findings.block("unknown_concept", "",
                           f"generated_at names no concept {concept!r}"
                           f"{_did_you_mean(snapshot, concept)}")
        elif concept in out:
            findings.block("duplicate_generated_at", doc.path,
                           f"generated_at lists {concept!r} more than once")
        else:
            out[concept] = entry["at"]
    return out


def _did_you_mean(snapshot: Snapshot, concept: str) -> str:
    """The concepts an unknown ID probably meant (``okf.suggest``), as the end of a blocker's
    message: a blocker is a message, not a diagnostic list."""
    found = [repr(s.concept_id) for s in suggest(snapshot, concept)]
    return f"; did you mean {' or '.join(found)}?" if found else ""


def _citation_mappings(
    snapshot: Snapshot, request: Mapping[str, Any], findings: _Findings
) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for mapping in request["citation_mappings"]:
        path = mapping["path"]
        doc = snapshot.documents.get(path)
        if path in out:
            findings.block("duplicate_citation_mapping", path,
                           "citation_mappings lists this path more than once")
        elif doc is None:
            findings.block("unknown_citation_path", path, "no such document in the bundle")
        elif not doc.is_concept:
            findings.block("unsupported_citation_document", path,
                           "citations of index.md and log.md are not migrated; edit them by hand")
        else:
            out[path] = mapping["entries"]
    return out


def _computations(
    snapshot: Snapshot, request: Mapping[str, Any], findings: _Findings
) -> dict[str, Mapping[str, Any]]:
    out: dict[str, Mapping[str, Any]] = {}
    for item in request["computations"]:
        concept = item["concept_id"]
        doc = snapshot.concepts.get(concept)
        if doc is None:
            findings.block("unknown_concept", "",
                           f"computations names no concept {concept!r}"
                           f"{_did_you_mean(snapshot, concept)}")
        elif concept in out:
            findings.block("duplicate_computation", doc.path,
                           f"computations lists {concept!r} more than once")
        elif item["contract"]["mode"] == "file":
            # The publication layer writes Markdown documents only; an asset file would have to
            # be published beside them for a file-mode contract to be true.
            findings.block("unsupported_computation_asset", doc.path,
                           "file-mode computations (with an asset) are not migrated; add the "
                           "asset by hand, then use put_attested_computation")
        else:
            out[concept] = item["contract"]
    return out


def _declare_v02(ws: Workspace, findings: _Findings) -> None:
    if not ws.has(ROOT_INDEX):
        ws.put(ROOT_INDEX, '---\nokf_version: "0.2"\n---\n')
        return
    try:
        ws.edit_data(ROOT_INDEX, lambda data: data.__setitem__("okf_version", "0.2"))
    except EditError as exc:
        findings.block(exc.code, ROOT_INDEX, exc.message)


# --------------------------------------------------------------------------------------------
# One concept


def _migrate_concept(
    ws: Workspace,
    doc: Document,
    request: Mapping[str, Any],
    explicit_at: str | None,
    entries: list[dict[str, Any]] | None,
    findings: _Findings,
) -> None:
    before = len(findings.blockers)
    citations = _CitationPlan.build(doc, entries, findings)
    if len(findings.blockers) > before:
        # The plan is blocked already; still look at the timestamp, so one preview reports
        # every problem of the concept.
        citations = None
    if citations is not None:
        text = ws.text(doc.path)
        body = split_frontmatter(text).body
        ws.put(doc.path, text[: len(text) - len(body)] + citations.body)

    def change(data: dict[str, Any]) -> None:
        _migrate_timestamp(data, doc, request, explicit_at, findings)
        if citations is not None:
            data["sources"] = citations.sources

    try:
        ws.edit_data(doc.path, change)
    except EditError as exc:
        findings.block(exc.code, doc.path, exc.message)


def _migrate_timestamp(
    data: dict[str, Any],
    doc: Document,
    request: Mapping[str, Any],
    explicit_at: str | None,
    findings: _Findings,
) -> None:
    has_ts = "timestamp" in data
    generated = data.get("generated")
    if not has_ts and explicit_at is None:
        return  # nothing to copy and nothing asserted: an existing generated stays as it is
    where = _timestamp_span(doc) if has_ts else None
    ts = data.get("timestamp")
    ts_moment = parse_instant(ts) if has_ts else None
    usable_ts = has_ts and ts_moment is not None
    remove = has_ts and request["timestamp_policy"] == "remove_after_copy"
    if generated is None:
        if has_ts and not usable_ts and explicit_at is None:
            findings.block("invalid_legacy_timestamp", doc.path,
                           "timestamp is not an RFC 3339 date-time with an offset; give an "
                           "explicit generated_at for this concept", where, "provide_generated_at")
            return
        if not request["generated_by"]:
            findings.block("missing_explicit_generated_by", doc.path,
                           "generated needs a producer: give generated_by", where,
                           "provide_generated_by")
            return
        at = ts if usable_ts else explicit_at
        if usable_ts and explicit_at is not None and parse_instant(explicit_at) != ts_moment:
            findings.block("explicit_generated_at_mismatch", doc.path,
                           "generated_at differs from the concept's timestamp", where)
            return
        data["generated"] = {"by": request["generated_by"], "at": at}
        if remove:
            del data["timestamp"]
        return
    if not isinstance(generated, dict):
        findings.block("generated_not_mapping", doc.path, "'generated' is not a mapping")
        return
    at = generated.get("at")
    moment = parse_instant(at)
    if not isinstance(generated.get("by"), str) or not generated["by"]:
        findings.block("missing_generated_by", doc.path, "generated has no 'by'",
                       action="provide_generated_by")
        return
    if moment is None:
        findings.block("invalid_generated_at", doc.path,
                       "generated.at is not an RFC 3339 date-time with an offset",
                       action="provide_generated_at")
        return
    effective, use_ts = moment, False
    if usable_ts and ts_moment is not None and ts_moment != moment:
        policy = request["timestamp_conflict_policy"]
        if policy == "reject":
            findings.block("timestamp_generated_conflict", doc.path,
                           "timestamp and generated.at name different instants; choose "
                           "timestamp_conflict_policy use_generated or use_timestamp", where)
            return
        if policy == "use_timestamp":
            effective, use_ts = ts_moment, True
    if explicit_at is not None and parse_instant(explicit_at) != effective:
        findings.block("explicit_generated_at_mismatch", doc.path,
                       "generated_at differs from the generated.at the migration keeps", where)
        return
    if use_ts:
        generated["at"] = ts
    if remove and (usable_ts or explicit_at is not None):
        del data["timestamp"]


# --------------------------------------------------------------------------------------------
# Citations


@dataclass(frozen=True, slots=True)
class _Entry:
    number: int  # 0 for a bullet entry (selected by legacy_entry only)
    raw: str
    title: str
    resource: str
    link_title: str
    first: int  # body lines [first, end)
    end: int


@dataclass(frozen=True, slots=True)
class _CitationPlan:
    body: str
    sources: list[dict[str, Any]]

    @staticmethod
    def build(
        doc: Document, entries: list[dict[str, Any]] | None, findings: _Findings
    ) -> _CitationPlan | None:
        """The rewritten body and the new sources, or ``None`` (no citations to migrate)."""
        parsed = _ParsedBody(doc.body)
        heading = parsed.citations_heading(doc, findings)
        if heading is None:
            if entries:
                findings.block("missing_citations_section", doc.path,
                               "a citation mapping names a document without '# Citations'")
            return None
        if doc.fm.get("sources") is not None:
            findings.block("sources_citations_conflict", doc.path,
                           "the concept has both sources and a '# Citations' section",
                           parsed.location(doc, heading), "reconcile_sources_and_citations")
            return None
        found = parsed.entries(doc, heading, findings)
        if found is None:
            return None
        if entries is None:
            findings.block("missing_citation_mapping", doc.path,
                           "the '# Citations' section has no citation mapping",
                           parsed.location(doc, heading), "provide_citation_mapping")
            return None
        resolved = _resolve(doc, found, entries, findings)
        if resolved is None:
            return None
        return parsed.rewrite(doc, heading, found, resolved, findings)


class _ParsedBody:
    """One parse of a concept body: tokens, lines and line offsets."""

    def __init__(self, body: str) -> None:
        self.body = body
        self.tokens = markdown_parser().parse(body)
        self.lines = body.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def citations_heading(self, doc: Document, findings: _Findings) -> CitationsSection | None:
        """The one ``# Citations`` section (``okf.citations``)."""
        own = citations_sections(self.tokens, len(self.lines))
        if not own:
            return None
        if len(own) > 1:
            findings.block("multiple_citations_sections", doc.path,
                           "the body has more than one '# Citations' section", None,
                           "normalize_citations_section")
            return None
        return own[0]

    def location(self, doc: Document, heading: CitationsSection) -> dict[str, int]:
        offset = len(doc.text) - len(self.body)
        start = offset + self.starts[heading.heading]
        return _location(doc.text, start, offset + self.starts[heading.heading + 1])

    def entries(
        self, doc: Document, heading: CitationsSection, findings: _Findings
    ) -> list[_Entry] | None:
        first, end = heading.content, heading.end
        out: list[_Entry] = []
        for i, tok in enumerate(self.tokens):
            if tok.level != 0 or not tok.map or not first <= tok.map[0] < end:
                continue
            if tok.type == "bullet_list_open":
                out.extend(self._bullets(i))
            elif tok.type == "paragraph_open":
                numbered = self._numbered(i)
                if numbered is None:
                    findings.block("unsupported_citation_entry", doc.path,
                                   "a paragraph of '# Citations' is not a list of [N] entries",
                                   self._span(doc, tok.map[0], tok.map[1]),
                                   "normalize_citations_section")
                    return None
                out.extend(numbered)
        covered = {n for e in out for n in range(e.first, e.end)}
        for n in range(first, end):
            if n not in covered and self.lines[n].strip():
                findings.block("unsupported_citation_entry", doc.path,
                               "'# Citations' holds content that is not a citation entry",
                               self._span(doc, n, n + 1), "normalize_citations_section")
                return None
        numbers = [e.number for e in out if e.number]
        if len(numbers) != len(set(numbers)):
            findings.block("duplicate_citation_number", doc.path,
                           "two citation entries have the same number", None,
                           "disambiguate_citation_entry")
            return None
        return out

    def _bullets(self, start: int) -> list[_Entry]:
        out: list[_Entry] = []
        depth = 0
        for i in range(start, len(self.tokens)):
            tok = self.tokens[i]
            depth += tok.nesting if tok.level == 0 else 0
            if tok.type == "list_item_open" and tok.level == 1 and tok.map:
                first, end = tok.map
                text = "".join(self.lines[first:end])
                raw = _BULLET.sub("", text, count=1).rstrip()
                children = [c for t in self._item_tokens(i) for c in (t.children or [])]
                out.append(_entry(0, raw, _links(children), first, end))
            if depth == 0 and i > start:
                break
        return out

    def _item_tokens(self, start: int) -> list[Token]:
        out = []
        for tok in self.tokens[start + 1 :]:
            if tok.type == "list_item_close" and tok.level == 1:
                break
            if tok.type == "inline":
                out.append(tok)
        return out

    def _numbered(self, start: int) -> list[_Entry] | None:
        """A paragraph of ``[N] ...`` lines (a line without the prefix continues the entry)."""
        para = self.tokens[start]
        first, end = para.map  # type: ignore[misc]
        inline = self.tokens[start + 1]
        groups: list[list[Token]] = [[]]
        for child in inline.children or []:
            if child.type in ("softbreak", "hardbreak"):
                groups.append([])
            else:
                groups[-1].append(child)
        if len(groups) != end - first:
            return None
        starts = [(n, _ENTRY_PREFIX.match(self.lines[n])) for n in range(first, end)]
        if starts[0][1] is None:
            return None
        out: list[_Entry] = []
        heads = [(n, m) for n, m in starts if m is not None]
        for k, (n, match) in enumerate(heads):
            stop = heads[k + 1][0] if k + 1 < len(heads) else end
            raw = (self.lines[n][match.end() :] + "".join(self.lines[n + 1 : stop])).rstrip()
            children = [c for g in groups[n - first : stop - first] for c in g]
            out.append(_entry(int(match.group(1)), raw, _links(children), n, stop))
        return out

    def _span(self, doc: Document, first: int, end: int) -> dict[str, int]:
        offset = len(doc.text) - len(self.body)
        return _location(doc.text, offset + self.starts[first], offset + self.starts[end])

    def markers(
        self, doc: Document, heading: CitationsSection, findings: _Findings
    ) -> list[tuple[int, int, int]] | None:
        """``(start, end, number)`` body offsets of every ``[N]`` claim marker outside the section.

        Markers are found twice, in the parser's text tokens and in the raw lines; the raw
        positions are trusted only when both agree (code spans, links and escapes excluded).
        """
        out: list[tuple[int, int, int]] = []
        in_footnotes = False
        for tok in self.tokens:
            if tok.type in ("footnote_block_open", "footnote_block_close"):
                in_footnotes = tok.type == "footnote_block_open"
            if tok.type != "inline" or not tok.map or in_footnotes:
                continue
            if heading.heading <= tok.map[0] < heading.end:
                continue
            parsed = _token_markers(tok.children or [])
            raw: list[tuple[int, int, int]] = []
            for n in range(tok.map[0], tok.map[1]):
                line = _CODE_SPAN.sub(lambda m: " " * len(m.group(0)), self.lines[n])
                for match in _RAW_MARKER.finditer(line):
                    start = self.starts[n] + match.start()
                    raw.append((start, start + len(match.group(0)), int(match.group(1))))
            if [r[2] for r in raw] != parsed:
                findings.block("ambiguous_claim_marker", doc.path,
                               "claim markers in this block cannot be located exactly; write "
                               "them as [^source_id] by hand",
                               self._span(doc, tok.map[0], tok.map[1]))
                return None
            out.extend(raw)
        for _, _, number in out:
            if number == 0:
                findings.block("invalid_claim_marker", doc.path, "[0] is not a citation number")
                return None
        return out

    def footnotes(self) -> dict[str, str]:
        """Existing footnote definitions: label → content."""
        out: dict[str, str] = {}
        label: str | None = None
        for tok in self.tokens:
            if tok.type == "footnote_open":
                label = str((tok.meta or {}).get("label", ""))
            elif tok.type == "inline" and label is not None:
                out.setdefault(label, tok.content.strip())
                label = None
        return out

    def rewrite(
        self,
        doc: Document,
        heading: CitationsSection,
        entries: list[_Entry],
        resolved: list[dict[str, str]],
        findings: _Findings,
    ) -> _CitationPlan | None:
        markers = self.markers(doc, heading, findings)
        if markers is None:
            return None
        by_number = {e.number: m["source_id"] for e, m in zip(entries, resolved, strict=True)
                     if e.number}
        for start, _, number in markers:
            if number not in by_number:
                at = len(doc.text) - len(self.body) + start
                findings.block("unresolved_claim_marker", doc.path,
                               f"[{number}] has no citation entry",
                               _location(doc.text, at, at + len(f"[{number}]")),
                               "provide_citation_mapping")
                return None
        newline = "\r\n" if "\r\n" in doc.text else "\n"
        existing = self.footnotes()
        definitions: list[str] = []
        sources: list[dict[str, Any]] = []
        seen: dict[str, str] = {}
        for mapping in resolved:
            content = _definition(mapping)
            if content is None:
                findings.block("unsupported_footnote_definition", doc.path,
                               f"source {mapping['source_id']!r} cannot be written as a footnote "
                               "definition (brackets or line breaks in its title or resource)")
                return None
            sid = mapping["source_id"]
            if sid in seen:
                if seen[sid] != content:
                    findings.block("reused_source_metadata_conflict", doc.path,
                                   f"source {sid!r} is mapped with two different projections",
                                   None, "disambiguate_citation_entry")
                    return None
                continue
            seen[sid] = content
            source = {"id": sid, "resource": mapping["resource"]}
            if mapping.get("title"):
                source["title"] = mapping["title"]
            sources.append(source)
            if sid in existing:
                if existing[sid] != content:
                    findings.block("conflicting_footnote_definition", doc.path,
                                   f"[^{sid}] is already defined differently")
                    return None
                continue
            definitions.append(f"[^{sid}]: {content}{newline}")
        start, stop = self.starts[heading.heading], self.starts[heading.end]
        block = "".join(definitions)
        if block and stop < len(self.body):
            block += newline
        splices = [(s, e, f"[^{by_number[n]}]") for s, e, n in markers]
        splices.append((start, stop, block))
        body = self.body
        for s, e, text in sorted(splices, reverse=True):
            body = body[:s] + text + body[e:]
        if _leftover_markers(body):
            findings.block("ambiguous_claim_marker", doc.path,
                           "some [N] markers (in tables or other constructs) could not be "
                           "rewritten; write them as [^source_id] by hand")
            return None
        return _CitationPlan(body, sources)


def _citations_heading(doc: Document) -> tuple[int, int] | None:
    """``(offset, length)`` in the body of the first ``# Citations`` heading line, if any."""
    section = citations_section(doc)
    if section is None:
        return None
    lines = doc.body.splitlines(keepends=True)
    return sum(len(line) for line in lines[: section.heading]), len(lines[section.heading])


def _leftover_markers(body: str) -> bool:
    """Whether a rewritten body still shows ``[N]`` text outside footnote definitions."""
    in_footnotes = False
    for tok in markdown_parser().parse(body):
        if tok.type in ("footnote_block_open", "footnote_block_close"):
            in_footnotes = tok.type == "footnote_block_open"
        if tok.type == "inline" and not in_footnotes and _token_markers(tok.children or []):
            return True
    return False


def _resolve(
    doc: Document, entries: list[_Entry], mappings: list[dict[str, Any]], findings: _Findings
) -> list[dict[str, str]] | None:
    """Each entry's explicit mapping, merged with what the entry itself says."""
    if len(entries) != len(mappings):
        findings.block("incomplete_citation_mapping", doc.path,
                       f"'# Citations' has {len(entries)} entries but {len(mappings)} mappings",
                       None, "provide_citation_mapping")
        return None
    used: set[int] = set()
    out: list[dict[str, str]] = []
    for entry in entries:
        matches = [i for i, m in enumerate(mappings) if _selects(m, entry)]
        if len(matches) > 1:
            findings.block("ambiguous_citation_mapping", doc.path,
                           "more than one mapping selects the same citation entry", None,
                           "disambiguate_citation_entry")
            return None
        if not matches or matches[0] in used:
            findings.block("unresolved_citation_entry", doc.path,
                           f"no mapping selects the citation entry {entry.raw[:80]!r}", None,
                           "provide_citation_mapping")
            return None
        used.add(matches[0])
        mapping = mappings[matches[0]]
        title = mapping.get("title") or entry.title
        resource = mapping.get("resource") or entry.resource
        if mapping.get("title") and entry.title and mapping["title"] != entry.title:
            findings.block("citation_title_mismatch", doc.path,
                           "the mapping's title differs from the entry's link text")
            return None
        if mapping.get("resource") and entry.resource and mapping["resource"] != entry.resource:
            findings.block("citation_resource_mismatch", doc.path,
                           "the mapping's resource differs from the entry's link", None,
                           "disambiguate_citation_destination")
            return None
        if not resource:
            findings.block("missing_citation_resource", doc.path,
                           f"the citation entry {entry.raw[:80]!r} has no link; give its "
                           "resource in the mapping", None, "provide_citation_mapping")
            return None
        if _extra_text(entry):
            # The footnote definition would hold only the link: anything else the entry says
            # (an author, a year) would be lost, so a person has to decide where it goes.
            findings.block("citation_entry_extra_text", doc.path,
                           f"the citation entry {entry.raw[:80]!r} holds text besides its link; "
                           "that text would be lost", None, "disambiguate_citation_entry")
            return None
        if not _valid_source_id(mapping["source_id"]):
            findings.block("invalid_source_id", doc.path,
                           f"source_id {mapping['source_id']!r} cannot be a footnote label")
            return None
        out.append({"source_id": mapping["source_id"], "title": title, "resource": resource,
                    "link_title": entry.link_title})
    return out


def _selects(mapping: Mapping[str, Any], entry: _Entry) -> bool:
    if "legacy_number" in mapping and mapping["legacy_number"] != entry.number:
        return False
    if "legacy_entry" in mapping and mapping["legacy_entry"] != entry.raw:
        return False
    return "legacy_number" in mapping or "legacy_entry" in mapping


def _valid_source_id(value: str) -> bool:
    return bool(value) and not any(c.isspace() or c in "[]^" for c in value)


def _definition(mapping: Mapping[str, str]) -> str | None:
    """The content of ``[^id]: ...``: a titled link, or the bare resource."""
    resource, title, link_title = mapping["resource"], mapping["title"], mapping["link_title"]
    if any(c in resource for c in "\r\n<>") or any(c in title for c in "[]\r\n"):
        return None
    if any(c in link_title for c in "\r\n"):
        return None
    if not title and not link_title:
        return resource
    destination = f"<{resource}>" if any(c in resource for c in " ()") else resource
    suffix = ""
    if link_title:
        suffix = ' "' + link_title.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return f"[{title}]({destination}{suffix})"


_LINK_SYNTAX = re.compile(r"\[[^\]]*\]\([^)]*\)|<[^>\s]+>")


def _extra_text(entry: _Entry) -> bool:
    """Whether a linked entry says more than its link (trailing punctuation aside)."""
    if not entry.title and not entry.link_title:
        return False
    rest = _LINK_SYNTAX.sub("", entry.raw, count=1)
    return bool(rest.strip(" \t.;,"))


def _entry(number: int, raw: str, links: list[tuple[str, str, str]], first: int,
           end: int) -> _Entry:
    title = resource = link_title = ""
    if len(links) == 1:
        title, resource, link_title = links[0]
    elif not links and raw and not any(c in raw for c in " \t\r\n[]()<>"):
        resource = raw
    return _Entry(number, raw, title, resource, link_title, first, end)


def _links(children: list[Token]) -> list[tuple[str, str, str]]:
    """``(text, href, title)`` of each link; an autolink has no text of its own."""
    out: list[tuple[str, str, str]] = []
    current: list[Any] | None = None
    for child in children:
        if child.type == "link_open":
            autolink = child.markup == "autolink"
            current = [str(child.attrs.get("href", "")), str(child.attrs.get("title") or ""),
                       [], autolink]
        elif child.type == "link_close" and current is not None:
            text = "" if current[3] else "".join(current[2]).strip()
            out.append((text, current[0], current[1]))
            current = None
        elif current is not None and child.type in ("text", "code_inline"):
            current[2].append(child.content)
    return out


def _token_markers(children: list[Token]) -> list[int]:
    out: list[int] = []
    inside_link = 0
    for child in children:
        if child.type == "link_open":
            inside_link += 1
        elif child.type == "link_close":
            inside_link -= 1
        elif child.type == "text" and not inside_link:
            out.extend(int(m.group(1)) for m in _MARKER.finditer(child.content))
    return out


# --------------------------------------------------------------------------------------------
# Small helpers


def _blocker(code: str, path: str, message: str,
             location: dict[str, int] | None = None) -> dict[str, Any]:
    return {"code": code, "path": path, "location": location or {"start": 0, "end": 0},
            "message": message}


def _location(text: str, start: int, end: int) -> dict[str, int]:
    """Byte offsets of a character span (what a client that reads the raw file can use)."""
    head = len(text[:start].encode("utf-8"))
    return {"start": head, "end": head + len(text[start:end].encode("utf-8"))}


def _timestamp_span(doc: Document) -> dict[str, int]:
    match = _TIMESTAMP_KEY.search(doc.text)
    if match is None:
        return {"start": 0, "end": 0}
    end = doc.text.find("\n", match.start())
    return _location(doc.text, match.start(), len(doc.text) if end < 0 else end)
