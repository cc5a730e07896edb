"""Date → instant upgrade of a bundle's temporal fields, from explicit mappings only.

The date profile writes ``stale_after``, ``usage_window.from/to``, ``sources[N].last_modified``
and ``sources[N].usage_window.from/to`` as ``YYYY-MM-DD``; the instant profile wants RFC 3339
date-times. A date says nothing about the time of day or the offset, so the planner never
derives one: every date value must be named by a mapping ``{concept, path, from, to}`` whose
``from`` is the date as written and whose ``to`` is the instant the caller chose. A date without
a mapping is listed as ``unresolved`` and the plan is ``incomplete`` (it cannot be applied). A
mapping that names no date value is a bad request. Each mapped scalar is replaced in place, in
its own quoting style; nothing else in the file changes.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..cancel import CancelToken
from ..errors import (
    ERROR,
    Diagnostic,
    invalid_input,
    invalid_request,
    operation_rejected,
)
from ..model import Document, Snapshot, thaw
from ..okf.ids import concept_id_problem, path_for_concept_id
from ..okf.temporal import parse_date, parse_instant
from ..okf.versions import resolve_version
from .apply import Replanned
from .plan import FileChange, plan_digest, require_utf8, revision_of_snapshot
from .yaml_edit import EditError, rewrite

__all__ = [
    "PLAN_KIND",
    "Observed",
    "UpgradePlan",
    "check_mappings",
    "normalized",
    "plan_of",
    "plan_upgrade",
    "replan",
    "request_of",
    "targets_of",
]

PLAN_KIND = "temporal_upgrade"  # the tool the plan digest binds
READY = "ready"
INCOMPLETE = "incomplete"
NOOP = "noop"
_PATH = re.compile(
    r"(?:stale_after|usage_window\.(?:from|to)"
    r"|sources\[(?:0|[1-9][0-9]{0,8})\]\.(?:last_modified|usage_window\.(?:from|to)))"
)
MAX_DIAGNOSTICS = 8


@dataclass(frozen=True, slots=True)
class Observed:
    """One date value found in a concept: where it is and what it says."""

    concept: str
    path: str
    value: str

    def wire(self) -> dict[str, str]:
        return {"concept": self.concept, "path": self.path, "from": self.value}


@dataclass(frozen=True, slots=True)
class UpgradePlan:
    status: str  # ready | incomplete | noop
    unresolved: tuple[Observed, ...]
    changes: tuple[FileChange, ...]


def normalized(mappings: list[Mapping[str, Any]]) -> list[dict[str, str]]:
    """The mappings in a canonical order, so the digest does not depend on how they were listed."""
    return sorted(
        ({k: m[k] for k in ("concept", "path", "from", "to")} for m in mappings),
        key=lambda m: (m["concept"], m["path"]),
    )


def request_of(params: Mapping[str, Any]) -> dict[str, Any]:
    """The part of the arguments the plan digest binds (the mappings in canonical order)."""
    return {
        "id": params["id"],
        "actor": params["actor"],
        "mappings": normalized(params.get("mappings", [])),
    }


def targets_of(concepts: Iterable[str]) -> tuple[str, ...]:
    """The files of these concepts (the mappings' or the unresolved dates'), for the scope
    check; an ID that is not canonical names no file (the mapping check refuses it)."""
    return tuple(sorted({path_for_concept_id(c) for c in concepts
                         if concept_id_problem(c) is None}))


def plan_of(
    snapshot: Snapshot, request: Mapping[str, Any], token: CancelToken
) -> tuple[UpgradePlan, str | None]:
    """The plan of ``request`` (see :func:`request_of`) and its digest (only a ready plan has one).

    Raises:
        BundleError: ``invalid_request`` and ``operation_rejected`` (see :func:`check_mappings`
            and :func:`plan_upgrade`).
    """
    check_mappings(request["mappings"])
    plan = plan_upgrade(snapshot, request["mappings"], token)
    if plan.status != READY:
        return plan, None
    return plan, plan_digest(PLAN_KIND, revision_of_snapshot(snapshot), request, plan.changes)


def replan(
    snapshot: Snapshot, request: Mapping[str, Any], preview: str, token: CancelToken
) -> Replanned:
    """The upgrade rebuilt for its apply, which only a ready plan may reach.

    Raises:
        BundleError: ``operation_rejected`` for a plan that is not ready, and the errors of
            :func:`plan_of`.
    """
    plan, planned = plan_of(snapshot, request, token)
    if plan.status != READY:
        raise operation_rejected(
            f"the upgrade is {plan.status}, not ready: there is nothing it could apply",
            step=f"run {preview}, add a mapping for every unresolved date, and apply only a "
                 "preview whose status is ready",
        )
    return Replanned(plan.changes, (planned,))


def check_mappings(mappings: list[Mapping[str, Any]]) -> None:
    """Shape checks a schema cannot make: canonical IDs, allowed paths, calendars, duplicates.

    Raises:
        BundleError: ``invalid_request`` naming the offending mappings.
    """
    require_utf8(mappings)
    problems: list[tuple[str, str]] = []
    seen: set[tuple[str, str]] = set()
    for index, mapping in enumerate(mappings):
        field = f"$.mappings[{index}]"
        if concept_id_problem(mapping["concept"]) is not None:
            problems.append((field + ".concept", "is not a canonical concept ID"))
        if not _PATH.fullmatch(mapping["path"]):
            problems.append((field + ".path", "is not one of stale_after, usage_window.from|to, "
                             "sources[N].last_modified, sources[N].usage_window.from|to"))
        if parse_date(mapping["from"]) is None:
            problems.append((field + ".from", "is not a YYYY-MM-DD calendar date"))
        if parse_instant(mapping["to"]) is None:
            problems.append((field + ".to", "is not an RFC 3339 date-time with an offset"))
        key = (mapping["concept"], mapping["path"])
        if key in seen:
            problems.append((field, "maps the same concept and path as an earlier mapping"))
        seen.add(key)
    _raise_invalid(problems)


def plan_upgrade(
    snapshot: Snapshot, mappings: list[Mapping[str, Any]], token: CancelToken
) -> UpgradePlan:
    """Observe every date value, match the mappings, and stage the rewrites.

    Raises:
        BundleError: ``operation_rejected`` for a bundle that is not OKF 0.2 or holds a temporal
            value that is neither a date nor an instant; ``invalid_request`` for a mapping that
            names no date value or a different date.
    """
    _require_v02(snapshot)
    wanted = {(m["concept"], m["path"]): (i, m) for i, m in enumerate(mappings)}
    observed: list[Observed] = []
    malformed: list[Diagnostic] = []
    for doc in snapshot.concepts.values():
        token.check()
        found, bad = _observe(doc)
        observed.extend(found)
        malformed.extend(bad)
    if malformed:
        raise operation_rejected(
            f"{len(malformed)} temporal value(s) are neither a date nor an instant",
            *malformed[:MAX_DIAGNOSTICS],
            step="fix the listed values with apply_concept_patch (or remove them), then preview "
                 "the upgrade again",
        )
    by_key = {(o.concept, o.path): o for o in observed}
    problems: list[tuple[str, str]] = []
    for key, (index, mapping) in sorted(wanted.items(), key=lambda kv: kv[1][0]):
        value = by_key.get(key)
        if value is None:
            problems.append((f"$.mappings[{index}]", "names no date value in the bundle"))
        elif value.value != mapping["from"]:
            problems.append((f"$.mappings[{index}].from", "differs from the date in the bundle"))
    _raise_invalid(problems)
    unresolved = tuple(o for o in observed if (o.concept, o.path) not in wanted)
    if unresolved:
        return UpgradePlan(INCOMPLETE, unresolved, ())
    if not observed:
        return UpgradePlan(NOOP, (), ())
    return UpgradePlan(READY, (), _rewrites(snapshot, observed, wanted, token))


def _require_v02(snapshot: Snapshot) -> None:
    version = resolve_version(snapshot)
    if version["effective"] != "0.2" or version["declared"] not in (None, "0.2"):
        raise operation_rejected(
            "the temporal upgrade needs an OKF 0.2 bundle (root index.md with okf_version \"0.2\")",
            step="migrate the bundle first with preview_v02_migration and apply_v02_migration, "
                 "then preview the upgrade again",
        )


def _observe(doc: Document) -> tuple[list[Observed], list[Diagnostic]]:
    """Date values of one concept in field order, and values that are not temporal at all."""
    assert doc.concept_id is not None
    found: list[Observed] = []
    bad: list[Diagnostic] = []
    fm = doc.fm

    def look(container: Mapping[str, Any], key: str, path: str) -> None:
        if key not in container or container[key] is None:
            return
        value = container[key]
        if isinstance(value, str) and parse_date(value) is not None:
            found.append(Observed(doc.concept_id or "", path, value))
        elif not (isinstance(value, str) and parse_instant(value) is not None):
            bad.append(Diagnostic(code="unsupported_temporal_value", severity=ERROR,
                                  file=doc.path, field=path,
                                  message=f"{path} is neither a YYYY-MM-DD date nor an instant"))

    def window(container: Mapping[str, Any], prefix: str) -> None:
        value = container.get("usage_window")
        if value is None:
            return
        if not isinstance(value, Mapping):
            bad.append(Diagnostic(code="unsupported_temporal_value", severity=ERROR,
                                  file=doc.path, field=prefix + "usage_window",
                                  message=f"{prefix}usage_window is not a mapping"))
            return
        look(value, "from", prefix + "usage_window.from")
        look(value, "to", prefix + "usage_window.to")

    look(fm, "stale_after", "stale_after")
    window(fm, "")
    sources = fm.get("sources")
    if isinstance(sources, tuple):
        for n, item in enumerate(sources):
            if isinstance(item, Mapping):
                look(item, "last_modified", f"sources[{n}].last_modified")
                window(item, f"sources[{n}].")
    return found, bad


def _rewrites(
    snapshot: Snapshot,
    observed: list[Observed],
    wanted: Mapping[tuple[str, str], tuple[int, Mapping[str, Any]]],
    token: CancelToken,
) -> tuple[FileChange, ...]:
    by_concept: dict[str, list[Observed]] = {}
    for item in observed:
        by_concept.setdefault(item.concept, []).append(item)
    changes: list[FileChange] = []
    for concept, items in sorted(by_concept.items()):
        token.check()
        doc = snapshot.concepts[concept]
        data = copy.deepcopy(thaw(doc.fm))
        for item in items:
            _set_path(data, item.path, wanted[(concept, item.path)][1]["to"])
        try:
            text = rewrite(doc.text, data)
        except EditError as exc:
            raise operation_rejected(
                f"{doc.path} cannot be upgraded in place: {exc.message}",
                Diagnostic(code=exc.code, severity=ERROR, file=doc.path, message=exc.message),
                step="rewrite the listed values by hand or with apply_concept_patch",
            ) from None
        changes.append(FileChange(doc.path, doc.text, text, doc.record.sha256))
    return tuple(sorted(changes, key=lambda c: c.path))


def _set_path(data: dict[str, Any], path: str, value: str) -> None:
    """Set ``value`` at an allowed path (``sources[2].usage_window.from``) of frontmatter data."""
    target: Any = data
    parts = path.split(".")
    for part in parts[:-1]:
        match = re.fullmatch(r"sources\[(\d+)\]", part)
        target = target["sources"][int(match.group(1))] if match else target[part]
    target[parts[-1]] = value


def _raise_invalid(problems: list[tuple[str, str]]) -> None:
    if not problems:
        return
    diagnostics = [
        invalid_input(field, f"{field[2:]} {problem}")
        for field, problem in problems[:MAX_DIAGNOSTICS]
    ]
    raise invalid_request(
        "the mappings do not match the date values of the bundle", *diagnostics
    )
