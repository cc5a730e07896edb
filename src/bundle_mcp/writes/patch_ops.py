"""The nine concept-patch operation kinds, applied in order to an in-memory copy of the bundle.

Each kind states a *desired* state (the reference's model): applying it twice is the same as
applying it once, and an operation whose state already holds changes nothing. An operation edits
the frontmatter *data*; :mod:`.yaml_edit` turns the new data into the smallest text change. Only
``put_attested_computation`` also touches the body, and only its ``# Computation`` section.

Argument problems a schema cannot see (an impossible calendar date, a window that ends before it
starts) are ``invalid_request``. Problems with the bundle (no such concept, a selector that
matches two sources, a value of the wrong shape, a layout that cannot be edited in place) reject
the plan: the preview reports ``status: rejected`` with one ERROR diagnostic per operation. An
operation on a concept the bundle does not hold (``concept_not_found``) is followed by one INFO
``did_you_mean`` diagnostic per suggested concept (:mod:`bundle_mcp.okf.suggest`), whose field
is the operation's ``concept_id``.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ..cancel import CancelToken
from ..errors import (
    CONCEPT_NOT_FOUND,
    ERROR,
    BundleMcpError,
    Diagnostic,
    invalid_input,
    invalid_request,
)
from ..loader.frontmatter import split_frontmatter
from ..model import Snapshot
from ..okf.computations import computation_tokens
from ..okf.ids import concept_id_problem, path_for_concept_id
from ..okf.markdown import markdown_parser
from ..okf.suggest import did_you_mean_diagnostics
from ..okf.temporal import DATE_PROFILE, parse_instant, parse_value
from .apply import REJECTED, OperationsPlan, Replanned
from .plan import (
    FileChange,
    new_conformance_errors,
    require_utf8,
)
from .yaml_edit import EditError, data_of, rewrite

__all__ = [
    "KINDS",
    "PLAN_KIND",
    "REJECTED",
    "OpRejected",
    "PatchPlan",
    "Workspace",
    "check_operations",
    "plan_of",
    "plan_patch",
    "replan",
    "request_of",
    "set_attested_computation",
    "targets_of",
]

PLAN_KIND = "concept_patch"  # the tool the plan digest binds

KINDS = (
    "set_generated",
    "ensure_verification",
    "remove_verification",
    "put_source",
    "remove_source",
    "set_usage_window",
    "set_lifecycle",
    "put_attested_computation",
    "set_bundle_version",
)
SOURCE_KEYS = ("id", "resource", "title", "author", "usage_count", "last_modified", "usage_window")
MAX_SOURCES = 100  # the read tools refuse a concept with more (resource_limit)
MAX_UINT64 = (1 << 64) - 1
ROOT_INDEX = "index.md"
COMPUTATION_TYPE = "Attested Computation"


class OpRejected(BundleMcpError):
    """One operation cannot be applied to this bundle; the plan is rejected."""

    def __init__(self, code: str, message: str, file: str | None = None) -> None:
        super().__init__(message, code)
        self.file = file


PatchPlan = OperationsPlan  # the one plan shape of a list of operations


class Workspace:
    """The bundle's documents as text, with the changes staged so far (nothing touches disk)."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._texts: dict[str, str] = {}

    def has(self, path: str) -> bool:
        return path in self._texts or path in self.snapshot.documents

    def text(self, path: str) -> str:
        if path in self._texts:
            return self._texts[path]
        return self.snapshot.documents[path].text

    def put(self, path: str, text: str) -> None:
        self._texts[path] = text

    def changes(self) -> tuple[FileChange, ...]:
        out: list[FileChange] = []
        for path in sorted(self._texts):
            doc = self.snapshot.documents.get(path)
            old = None if doc is None else doc.text
            if self._texts[path] != old:
                sha = None if doc is None else doc.record.sha256
                out.append(FileChange(path, old, self._texts[path], sha))
        return tuple(out)

    def concept_path(self, concept_id: str) -> str:
        doc = self.snapshot.concepts.get(concept_id)
        if doc is None:
            raise OpRejected(
                CONCEPT_NOT_FOUND, f"no concept {concept_id!r} in the bundle; "
                "find the canonical ID with search_concepts or list_concepts",
            )
        return doc.path

    def edit_data(self, path: str, change: Callable[[dict[str, Any]], None]) -> None:
        """Apply ``change`` to a copy of the file's frontmatter data and write the text back."""
        text = self.text(path)
        data = copy.deepcopy(data_of(text))
        change(data)
        self.put(path, rewrite(text, data))


# --------------------------------------------------------------------------------------------
# Planning


def request_of(params: Mapping[str, Any]) -> dict[str, Any]:
    """The part of the arguments the plan digest binds (the profile default filled in)."""
    return {
        "actor": params["actor"],
        "temporal_profile": params.get("temporal_profile") or DATE_PROFILE,
        "operations": [dict(op) for op in params["operations"]],
    }


def targets_of(request: Mapping[str, Any]) -> tuple[str, ...]:
    """The files the operations name, read from the request alone (the scope check's input).

    An operation edits only the file of its concept (the root ``index.md`` for
    ``set_bundle_version``); a concept ID that is not canonical names no file and is refused as
    a bad request when the plan is made.
    """
    paths = {
        ROOT_INDEX if op["kind"] == "set_bundle_version" else path_for_concept_id(op["concept_id"])
        for op in request["operations"]
        if op["kind"] == "set_bundle_version" or concept_id_problem(op["concept_id"]) is None
    }
    return tuple(sorted(paths))


def plan_of(
    snapshot: Snapshot, request: Mapping[str, Any], token: CancelToken
) -> tuple[PatchPlan, str | None]:
    """The plan of ``request`` (see :func:`request_of`) and its digest (``None`` when rejected).

    Raises:
        BundleError: ``invalid_request`` (see :func:`check_operations`).
    """
    check_operations(request["operations"], request["temporal_profile"])
    plan = plan_patch(snapshot, request["operations"], request["temporal_profile"], token)
    return plan, plan.digest(PLAN_KIND, snapshot, request)


def replan(snapshot: Snapshot, request: Mapping[str, Any], token: CancelToken) -> Replanned:
    """The patch rebuilt for its apply: a rejected plan is answered, not raised."""
    plan, planned = plan_of(snapshot, request, token)
    return plan.replanned(planned)


def plan_patch(
    snapshot: Snapshot, operations: list[Mapping[str, Any]], profile: str, token: CancelToken
) -> PatchPlan:
    """Apply every operation in order; any rejected operation rejects the whole plan."""
    workspace = Workspace(snapshot)
    problems: list[Diagnostic] = []
    for index, op in enumerate(operations):
        token.check()
        field = f"$.operations[{index}]"
        try:
            _HANDLERS[op["kind"]](workspace, op, profile)
        except OpRejected as exc:
            problems.append(_diagnostic(exc.code, exc.message, exc.file, field))
            if exc.code == CONCEPT_NOT_FOUND:
                concept_field = f"{field}.concept_id"
                problems.extend(
                    did_you_mean_diagnostics(snapshot, op["concept_id"], concept_field,
                                             check=token.check)
                )
        except EditError as exc:
            problems.append(_diagnostic(exc.code, exc.message, _target(workspace, op), field))
    changes = workspace.changes()
    token.check()
    problems.extend(new_conformance_errors(snapshot, changes))
    if problems:
        return PatchPlan(REJECTED, (), tuple(problems))
    return PatchPlan("applicable" if changes else "noop", changes, ())


def _diagnostic(code: str, message: str, file: str | None, field: str) -> Diagnostic:
    return Diagnostic(code=code, severity=ERROR, message=message, file=file, field=field)


def _target(workspace: Workspace, op: Mapping[str, Any]) -> str | None:
    if op["kind"] == "set_bundle_version":
        return ROOT_INDEX
    doc = workspace.snapshot.concepts.get(op.get("concept_id", ""))
    return None if doc is None else doc.path


# --------------------------------------------------------------------------------------------
# Argument checks a schema cannot express


def check_operations(operations: list[Mapping[str, Any]], profile: str) -> None:
    """Calendar validity, window order, counts and unique parameter names.

    Raises:
        BundleError: ``invalid_request`` with up to 8 ``invalid_input`` diagnostics.
    """
    require_utf8(operations)
    problems: list[tuple[str, str]] = []
    for index, op in enumerate(operations):
        base = f"$.operations[{index}]"
        if "concept_id" in op and concept_id_problem(op["concept_id"]) is not None:
            problems.append((f"{base}.concept_id", "is not a canonical concept ID"))
        for name in ("generated", "verification"):
            at = (op.get(name) or {}).get("at")
            if at is not None and parse_instant(at) is None:
                problems.append((f"{base}.{name}.at", "is not a valid RFC 3339 date-time"))
        source = op.get("source") or {}
        _check_temporal(problems, f"{base}.source.last_modified", source.get("last_modified"),
                        profile)
        _check_window(problems, f"{base}.source.usage_window", source.get("usage_window"), profile)
        count = source.get("usage_count")
        if count is not None and int(count) > MAX_UINT64:
            problems.append((f"{base}.source.usage_count", "does not fit an unsigned 64-bit int"))
        _check_window(problems, f"{base}.usage_window", op.get("usage_window"), profile)
        lifecycle = op.get("lifecycle") or {}
        _check_temporal(problems, f"{base}.lifecycle.stale_after", lifecycle.get("stale_after"),
                        profile)
        names = [p["name"] for p in (op.get("attested_computation") or {}).get("parameters", [])]
        if len(names) != len(set(names)):
            problems.append((f"{base}.attested_computation.parameters", "repeats a name"))
    if problems:
        diagnostics = [
            invalid_input(field, f"{field[2:]} {problem}")
            for field, problem in sorted(problems)[:8]
        ]
        raise invalid_request("the operations do not describe a valid patch", *diagnostics)


def _check_temporal(problems: list[tuple[str, str]], field: str, value: Any, profile: str) -> None:
    if value is not None and parse_value(value, profile) is None:
        kind = "a YYYY-MM-DD date" if profile.startswith("date") else "an RFC 3339 date-time"
        problems.append((field, f"is not {kind} valid under {profile}"))


def _check_window(problems: list[tuple[str, str]], field: str, window: Any, profile: str) -> None:
    if not isinstance(window, Mapping):
        return
    start, end = parse_value(window["from"], profile), parse_value(window["to"], profile)
    _check_temporal(problems, field + ".from", window["from"], profile)
    _check_temporal(problems, field + ".to", window["to"], profile)
    if start is not None and end is not None and start > end:  # type: ignore[operator]
        problems.append((field, "ends before it starts (from must not be after to)"))


# --------------------------------------------------------------------------------------------
# The kinds


def _set_generated(ws: Workspace, op: Mapping[str, Any], profile: str) -> None:
    path = ws.concept_path(op["concept_id"])
    wanted = op["generated"]

    def change(data: dict[str, Any]) -> None:
        current = data.get("generated")
        if current is None:
            data["generated"] = {"by": wanted["by"], **({"at": wanted["at"]} if "at" in wanted
                                                        else {})}
            return
        _require(isinstance(current, dict), "generated_not_mapping",
                 "'generated' is not a mapping", path)
        current["by"] = wanted["by"]
        if "at" in wanted:
            current["at"] = wanted["at"]
        else:
            current.pop("at", None)

    ws.edit_data(path, change)


def _ensure_verification(ws: Workspace, op: Mapping[str, Any], profile: str) -> None:
    path = ws.concept_path(op["concept_id"])
    wanted = {"by": op["verification"]["by"], "at": op["verification"]["at"]}

    def change(data: dict[str, Any]) -> None:
        current = data.get("verified")
        if current is None:
            data["verified"] = [wanted]
        elif isinstance(current, dict):
            if not _same_verification(current, wanted):
                data["verified"] = [current, wanted]
        elif isinstance(current, list):
            if not any(_same_verification(v, wanted) for v in current):
                current.append(wanted)
        else:
            raise OpRejected("verified_not_list", "'verified' is neither a list nor a mapping",
                             path)

    ws.edit_data(path, change)


def _remove_verification(ws: Workspace, op: Mapping[str, Any], profile: str) -> None:
    path = ws.concept_path(op["concept_id"])
    wanted = op["verification"]

    def change(data: dict[str, Any]) -> None:
        current = data.get("verified")
        if current is None:
            return
        if isinstance(current, dict):
            if _same_verification(current, wanted):
                del data["verified"]
            return
        _require(isinstance(current, list), "verified_not_list",
                 "'verified' is neither a list nor a mapping", path)
        kept = [v for v in current if not _same_verification(v, wanted)]
        if not kept:
            del data["verified"]
        elif len(kept) != len(current):
            data["verified"] = kept

    ws.edit_data(path, change)


def _same_verification(item: Any, wanted: Mapping[str, Any]) -> bool:
    """Same actor and the same instant (``Z`` and ``+00:00`` spell one moment)."""
    if not isinstance(item, Mapping) or item.get("by") != wanted["by"]:
        return False
    at = item.get("at")
    if at == wanted["at"]:
        return True
    moment = parse_instant(at)
    return moment is not None and moment == parse_instant(wanted["at"])


def _put_source(ws: Workspace, op: Mapping[str, Any], profile: str) -> None:
    path = ws.concept_path(op["concept_id"])
    wanted = source_entry(op["source"])

    def change(data: dict[str, Any]) -> None:
        sources = _sources(data, path, create=True)
        if "id" in wanted:
            found = _by_id(sources, wanted["id"], path)
            if found is None:
                sources.append(wanted)
            else:
                item = sources[found]
                for key in SOURCE_KEYS:
                    if key in wanted:
                        item[key] = wanted[key]
                    else:
                        item.pop(key, None)
        elif _anonymous(sources, wanted, path) is None:
            sources.append(wanted)
        if len(sources) > MAX_SOURCES:
            raise OpRejected("too_many_sources",
                             f"a concept may list at most {MAX_SOURCES} sources", path)
        data["sources"] = sources

    ws.edit_data(path, change)


def _remove_source(ws: Workspace, op: Mapping[str, Any], profile: str) -> None:
    path = ws.concept_path(op["concept_id"])

    def change(data: dict[str, Any]) -> None:
        if data.get("sources") is None:
            return
        sources = _sources(data, path, create=False)
        if "source_id" in op:
            found = _by_id(sources, op["source_id"], path)
        else:
            found = _anonymous(sources, source_entry(op["source"]), path)
        if found is None:
            return
        del sources[found]
        if sources:
            data["sources"] = sources
        else:
            del data["sources"]

    ws.edit_data(path, change)


def _set_usage_window(ws: Workspace, op: Mapping[str, Any], profile: str) -> None:
    path = ws.concept_path(op["concept_id"])
    window = op["usage_window"]

    def change(data: dict[str, Any]) -> None:
        target: dict[str, Any] = data
        if "source_id" in op or "source" in op:
            sources = data.get("sources")
            _require(isinstance(sources, list), "missing_source_selector",
                     "the concept has no sources list to select from", path)
            assert isinstance(sources, list)  # _require raised otherwise
            if "source_id" in op:
                found = _by_id(sources, op["source_id"], path)
            else:
                before = source_entry(op["source"])
                after = {k: v for k, v in before.items() if k != "usage_window"}
                if window is not None:
                    after["usage_window"] = {"from": window["from"], "to": window["to"]}
                found = _anonymous(sources, before, path)
                if found is None and _anonymous(sources, after, path) is not None:
                    return  # already in the desired state
            _require(found is not None, "missing_source_selector",
                     "no source matches the selector", path)
            target = sources[found]  # type: ignore[index]
        if window is None:
            target.pop("usage_window", None)
        elif isinstance(target.get("usage_window"), dict):
            target["usage_window"]["from"] = window["from"]
            target["usage_window"]["to"] = window["to"]
        else:
            target["usage_window"] = {"from": window["from"], "to": window["to"]}

    ws.edit_data(path, change)


def _set_lifecycle(ws: Workspace, op: Mapping[str, Any], profile: str) -> None:
    path = ws.concept_path(op["concept_id"])
    lifecycle = op["lifecycle"]

    def change(data: dict[str, Any]) -> None:
        for key in ("status", "stale_after"):
            if lifecycle[key] is None:
                data.pop(key, None)
            else:
                data[key] = lifecycle[key]

    ws.edit_data(path, change)


def _put_attested_computation(ws: Workspace, op: Mapping[str, Any], profile: str) -> None:
    path = ws.concept_path(op["concept_id"])
    set_attested_computation(ws, path, op["attested_computation"])


def set_attested_computation(ws: Workspace, path: str, contract: Mapping[str, Any]) -> None:
    """Frontmatter keys of the contract, then the body's ``# Computation`` code block: a
    fence holding the inline computation (inline mode), or none (file mode).

    Raises:
        OpRejected: a key of the wrong shape, or a ``# Computation`` section that is ambiguous.
    """
    def change(data: dict[str, Any]) -> None:
        data["type"] = COMPUTATION_TYPE
        data["runtime"] = contract["runtime"]
        data["parameters"] = _parameters(data.get("parameters"), contract["parameters"], path)
        executor = {"resource": contract["executor"]["resource"],
                    "receipt": list(contract["executor"]["receipt"])}
        _merge_mapping(data, "executor", executor)
        _merge_mapping(data, "attester", {"resource": contract["attester"]["resource"]})
        if contract["mode"] == "file":
            data["computation"] = contract["computation_path"]
        else:
            data.pop("computation", None)

    ws.edit_data(path, change)
    if contract["mode"] == "inline":
        language = contract.get("inline_language", "")
        ws.put(path, _inline_computation(ws.text(path), language,
                                         contract["inline_computation"], path))
    else:
        ws.put(path, _drop_computation_block(ws.text(path), path))


def _set_bundle_version(ws: Workspace, op: Mapping[str, Any], profile: str) -> None:
    if ROOT_INDEX not in ws.snapshot.documents:
        raise OpRejected("missing_root_index", "the bundle has no root index.md to declare "
                         "okf_version in", ROOT_INDEX)

    def change(data: dict[str, Any]) -> None:
        data["okf_version"] = op["version"]

    ws.edit_data(ROOT_INDEX, change)


_HANDLERS: dict[str, Callable[[Workspace, Mapping[str, Any], str], None]] = {
    "set_generated": _set_generated,
    "ensure_verification": _ensure_verification,
    "remove_verification": _remove_verification,
    "put_source": _put_source,
    "remove_source": _remove_source,
    "set_usage_window": _set_usage_window,
    "set_lifecycle": _set_lifecycle,
    "put_attested_computation": _put_attested_computation,
    "set_bundle_version": _set_bundle_version,
}


# --------------------------------------------------------------------------------------------
# Helpers


def source_entry(source: Mapping[str, Any]) -> dict[str, Any]:
    """A wire source as frontmatter data, keys in the canonical order, usage_count an integer."""
    out: dict[str, Any] = {}
    for key in SOURCE_KEYS:
        if key not in source:
            continue
        value = source[key]
        if key == "usage_count":
            value = int(value)
        elif key == "usage_window":
            value = {"from": value["from"], "to": value["to"]}
        out[key] = value
    return out


def _projection(item: Mapping[str, Any]) -> dict[str, Any]:
    """The known fields of a frontmatter source, compared by anonymous (id-less) selection."""
    out = {k: item[k] for k in SOURCE_KEYS if k in item and k != "usage_window"}
    window = item.get("usage_window")
    if isinstance(window, Mapping):
        out["usage_window"] = {k: window[k] for k in ("from", "to") if k in window}
    elif "usage_window" in item:
        out["usage_window"] = window
    return out


def _sources(data: dict[str, Any], path: str, *, create: bool) -> list[Any]:
    sources = data.get("sources")
    if sources is None and create:
        return []
    _require(isinstance(sources, list), "sources_not_list", "'sources' is not a list", path)
    return sources  # type: ignore[return-value]


def _by_id(sources: list[Any], source_id: str, path: str) -> int | None:
    found = [i for i, s in enumerate(sources) if isinstance(s, dict) and s.get("id") == source_id]
    _require(len(found) <= 1, "ambiguous_source_selector",
             f"{len(found)} sources share the id {source_id!r}", path)
    return found[0] if found else None


def _anonymous(sources: list[Any], wanted: Mapping[str, Any], path: str) -> int | None:
    """The one id-less source whose known fields equal ``wanted``, if any."""
    found = [
        i for i, s in enumerate(sources)
        if isinstance(s, dict) and "id" not in s and _projection(s) == dict(wanted)
    ]
    _require(len(found) <= 1, "ambiguous_source_selector",
             f"{len(found)} sources without an id match the selector; give them ids", path)
    return found[0] if found else None


def _parameters(existing: Any, wanted: list[Mapping[str, Any]], path: str) -> list[Any]:
    """The desired parameters in the desired order; unknown keys of a kept parameter survive."""
    by_name: dict[str, dict[str, Any]] = {}
    if existing is not None:
        _require(isinstance(existing, list), "parameters_not_list",
                 "'parameters' is not a list", path)
        for item in existing:
            _require(isinstance(item, dict) and isinstance(item.get("name"), str),
                     "unsupported_parameter", "a parameter is not a mapping with a name", path)
            _require(item["name"] not in by_name, "ambiguous_parameter",
                     f"two parameters are named {item['name']!r}", path)
            by_name[item["name"]] = item
    out: list[Any] = []
    for parameter in wanted:
        item = dict(by_name.get(parameter["name"], {}))
        item["name"] = parameter["name"]
        item["type"] = parameter["type"]
        item["required"] = parameter["required"]
        out.append(item)
    return out


def _merge_mapping(data: dict[str, Any], key: str, wanted: Mapping[str, Any]) -> None:
    current = data.get(key)
    if isinstance(current, dict):
        current.update(wanted)
    else:
        data[key] = dict(wanted)


def _require(condition: bool, code: str, message: str, path: str) -> None:
    if not condition:
        raise OpRejected(code, message, path)


# --------------------------------------------------------------------------------------------
# The body's "# Computation" section (Attested Computation, inline mode)


@dataclass(frozen=True, slots=True)
class _Section:
    """Where the one level-1 ``# Computation`` section and its one direct code block are.

    The section and its blocks are read by the reader's rule
    (:func:`bundle_mcp.okf.computations.computation_tokens`): an ATX or setext level-1 heading,
    a fenced or indented code block. Offsets are into the whole file; ``block`` is ``(start,
    end, info, content)`` or ``None``. ``heading_end`` is ``None`` when there is no such section.
    """

    heading_end: int | None
    block: tuple[int, int, str, str] | None


def _computation_section(text: str, path: str) -> _Section:
    body = split_frontmatter(text).body
    offset = len(text) - len(body)
    lines = body.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))
    found = computation_tokens(markdown_parser().parse(body))
    if not found.headings:
        return _Section(None, None)
    if len(found.headings) > 1:
        raise OpRejected("ambiguous_computation_section",
                         "the body has more than one '# Computation' section", path)
    if len(found.blocks) > 1:
        raise OpRejected("ambiguous_computation_section",
                         "the '# Computation' section holds more than one code block", path)
    heading = found.headings[0].map
    assert heading is not None
    heading_end = offset + starts[heading[1]]  # after a setext heading's underline too
    if not found.blocks:
        return _Section(heading_end, None)
    block = found.blocks[0]
    assert block.map is not None
    first, last = block.map
    if block.type == "fence":
        closing = lines[last - 1].strip() if last - 1 > first else ""
        marker = block.markup
        if not (closing.startswith(marker) and closing == closing[0] * len(closing)):
            raise OpRejected("unclosed_computation_fence",
                             "the code fence of '# Computation' is never closed", path)
    return _Section(heading_end, (offset + starts[first], offset + starts[last], block.info,
                                  block.content))


def _render_fence(language: str, code: str, newline: str) -> str:
    char = "~" if "`" in language else "`"
    longest = run = 0
    for ch in code:
        run = run + 1 if ch == char else 0
        longest = max(longest, run)
    fence = char * max(3, longest + 1)
    content = code if not code or code.endswith(("\n", "\r")) else code + newline
    return fence + (" " if char == "~" and language else "") + language + newline + content \
        + fence + newline


def _inline_computation(text: str, language: str, code: str, path: str) -> str:
    """The body with exactly one ``# Computation`` fence holding ``code`` (verified after); the
    section's code block, fenced or indented, is replaced."""
    newline = "\r\n" if "\r\n" in text else "\n"
    found = _computation_section(text, path)
    fence = _render_fence(language, code, newline)
    if found.heading_end is None:
        out = text if not text or text.endswith(("\n", "\r")) else text + newline
        if split_frontmatter(out).body.strip() and not out.endswith(newline * 2):
            out += newline
        out += "# Computation" + newline + newline + fence
    elif found.block is None:
        at = found.heading_end
        lead = newline if text[at - 1 : at] in ("\n", "\r") else newline * 2
        out = text[:at] + lead + fence + text[at:]
    else:
        start, end, _, _ = found.block
        out = text[:start] + fence + text[end:]
    check = _computation_section(out, path).block
    if check is None or check[2] != language or _lf(check[3]) != _lf(
        code if not code or code.endswith(("\n", "\r")) else code + "\n"
    ):
        raise OpRejected("computation_semantic_mismatch",
                         "the inline computation does not read back as written", path)
    return out


def _drop_computation_block(text: str, path: str) -> str:
    """File mode: the direct code block of ``# Computation`` goes, fenced or indented (the
    heading and prose stay)."""
    found = _computation_section(text, path)
    if found.block is None:
        return text
    start, end, _, _ = found.block
    return text[:start] + text[end:]


def _lf(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")
