"""Plan a bundle edit: rename, delete, append_log and regenerate_index, in order, as one plan.

Each operation is planned against the bundle as the operations before it left it (a
:class:`_State` keeps the new texts and the view they give), so a later operation sees what an
earlier one did. The plan is the list of whole-file changes against the snapshot: files created,
replaced or deleted (:class:`~.plan.FileChange` with ``new_text`` ``None``).

- ``rename`` moves a concept's file (to another folder too) and rewrites every reference that
  resolves to it, by the rules the validator resolves them with: Markdown links in every document
  (index and log files included; :mod:`.link_edit`), typed relations
  (:func:`~bundle_mcp.okf.relations.retarget_relations`) and path-valued fields
  (:mod:`bundle_mcp.okf.field_paths`). A link keeps its style (root-absolute or relative, with
  or without ``.md``) and its ``#fragment``. The moved file's own relative links and path
  fields are recomputed from its new folder, so they name what they named before.
- ``delete`` removes a concept's file. ``inbound: refuse`` rejects the plan, listing every
  reference that resolves to it; ``unlink`` turns each inbound Markdown link into its text,
  removes an ``index.md`` entry that lists it and each typed relation that targets it; a
  path-valued field that names it is not guessed at: the plan is rejected.
- ``append_log`` and ``regenerate_index`` write a folder's ``log.md`` and ``index.md``
  (:mod:`.reserved_files`).

A plan is rejected (nothing to apply) when an operation cannot be planned, when it would give a
concept or a reserved file a conformance error it did not have, or when any document would have
a broken link it did not have before (the ``--check-links`` rule): an edit never breaks a link.
"""

from __future__ import annotations

import copy
import posixpath
import re
from collections.abc import Callable, Iterator, Mapping
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
from ..loader.current import changed_view
from ..loader.document import parse_document
from ..model import INDEX, Document, Snapshot
from ..okf.field_paths import BUNDLE, path_fields
from ..okf.ids import concept_id_problem, path_for_concept_id
from ..okf.relations import retarget_relations
from ..okf.suggest import did_you_mean_diagnostics
from ..okf.temporal import parse_date
from ..okf.versions import resolve_version
from ..validation.findings import VersionRules
from ..validation.links import broken_links, link_target
from ..validation.reserved import reserved_conformance
from .apply import REJECTED, OperationsPlan, Replanned
from .link_edit import LinkEditError, edit_links, retargeted
from .plan import FileChange, new_conformance_errors
from .reserved_files import appended_log, dropped_index_entries, regenerated_index
from .yaml_edit import EditError, data_of, rewrite

__all__ = [
    "APPLICABLE",
    "NOOP",
    "REJECTED",
    "EditPlan",
    "plan_of",
    "replan",
    "request_of",
    "targets_of",
]

PLAN_KIND = "bundle_edit"  # the tool the plan digest binds
APPLICABLE = "applicable"
NOOP = "noop"
REFUSE = "refuse"
UNLINK = "unlink"
MAX_LISTED = 1000  # inbound references listed one by one; the rest are counted in one more
_LOCATION = re.compile(r"([A-Za-z_]+)(?:\[(\d+)\])?")


EditPlan = OperationsPlan  # the one plan shape of a list of operations


class _Rejected(BundleMcpError):
    """One operation cannot be planned: its diagnostics."""

    def __init__(self, *diagnostics: Diagnostic) -> None:
        super().__init__(diagnostics[0].message if diagnostics else "")
        self.diagnostics = diagnostics


def _problem(code: str, message: str, file: str | None = None,
             field: str | None = None) -> Diagnostic:
    return Diagnostic(code=code, severity=ERROR, file=file, field=field, message=message)


# ---------------------------------------------------------------------------- the request


def request_of(params: Mapping[str, Any]) -> dict[str, Any]:
    """The part of the arguments the plan digest binds, defaults filled in."""
    operations = []
    for op in params["operations"]:
        op = dict(op)
        if op["op"] == "delete":
            op.setdefault("inbound", REFUSE)
        operations.append(op)
    return {"operations": operations}


def _folder_problem(folder: str) -> str | None:
    return None if folder == "" else concept_id_problem(folder, allow_reserved_names=True)


def _in_folder(folder: str, name: str) -> str:
    return f"{folder}/{name}" if folder else name


def targets_of(request: Mapping[str, Any]) -> tuple[str, ...]:
    """The files the operations name, read from the request alone (the scope check's input):
    a renamed concept's old and new file, a deleted concept's file, a folder's log or index.
    A name that is not canonical names no file; the plan refuses it as a bad request."""
    paths: set[str] = set()
    for op in request["operations"]:
        if op["op"] in ("rename", "delete"):
            ids = [op["concept_id"]] + ([op["new_id"]] if op["op"] == "rename" else [])
            paths.update(path_for_concept_id(i) for i in ids if concept_id_problem(i) is None)
        elif _folder_problem(op["folder"]) is None:
            name = "log.md" if op["op"] == "append_log" else "index.md"
            paths.add(_in_folder(op["folder"], name))
    return tuple(sorted(paths))


def check_operations(operations: list[Mapping[str, Any]]) -> None:
    """What the schema cannot say: canonical IDs and folders, a real calendar date.

    Raises:
        BundleError: ``invalid_request`` naming every bad field.
    """
    problems: list[Diagnostic] = []
    for n, op in enumerate(operations):
        where = f"$.operations[{n}]"
        for key in ("concept_id", "new_id"):
            if key in op and (problem := concept_id_problem(op[key])) is not None:
                problems.append(invalid_input(
                    f"{where}.{key}", f"{key} is not a canonical concept ID: {problem}"))
        if "folder" in op and (problem := _folder_problem(op["folder"])) is not None:
            problems.append(invalid_input(f"{where}.folder",
                                          f"folder is not a bundle folder: {problem}"))
        if "date" in op and parse_date(op["date"]) is None:
            problems.append(invalid_input(f"{where}.date",
                                          "date is not a calendar date YYYY-MM-DD"))
    if problems:
        raise invalid_request("the operations name invalid IDs, folders or dates", *problems)


# ---------------------------------------------------------------------------- planning


class _State:
    """The bundle as the operations so far left it: new texts over the snapshot, and its view."""

    def __init__(self, base: Snapshot) -> None:
        self.base = base
        self.current = base
        self.texts: dict[str, str | None] = {}  # path -> new text, None when deleted
        self.origin: dict[str, str] = {}  # a moved file's path -> its path in the snapshot

    def put(self, path: str, text: str | None) -> None:
        self.texts[path] = text

    def settle(self) -> None:
        """Make ``current`` the view of the texts so far (after each operation)."""
        written = {p: None if t is None else t.encode("utf-8") for p, t in self.texts.items()}
        self.current = changed_view(self.base, written, max_bytes=None)

    def changes(self) -> tuple[FileChange, ...]:
        out: list[FileChange] = []
        for path in sorted(self.texts):
            new = self.texts[path]
            doc = self.base.documents.get(path)
            if doc is None and new is None:
                continue
            if doc is not None and new == doc.text:
                continue
            out.append(FileChange(path, None if doc is None else doc.text, new,
                                  None if doc is None else doc.record.sha256))
        return tuple(out)


def plan_of(
    snapshot: Snapshot, request: Mapping[str, Any], token: CancelToken
) -> tuple[EditPlan, str | None]:
    """The plan of ``request`` (see :func:`request_of`) and its digest (``None`` when rejected).

    Raises:
        BundleError: ``invalid_request`` (see :func:`check_operations`).
    """
    check_operations(request["operations"])
    plan = plan_edit(snapshot, request["operations"], token)
    return plan, plan.digest(PLAN_KIND, snapshot, request)


def replan(snapshot: Snapshot, request: Mapping[str, Any], token: CancelToken) -> Replanned:
    """The edit rebuilt for its apply: a rejected plan is answered, not raised."""
    plan, planned = plan_of(snapshot, request, token)
    return plan.replanned(planned)


def plan_edit(
    snapshot: Snapshot, operations: list[Mapping[str, Any]], token: CancelToken
) -> EditPlan:
    """Every operation in order; the first one that cannot be planned rejects the plan."""
    state = _State(snapshot)
    for n, op in enumerate(operations):
        token.check()
        field = f"$.operations[{n}]"
        try:
            _HANDLERS[op["op"]](state, op, field, token)
        except _Rejected as exc:
            return EditPlan(REJECTED, (), exc.diagnostics)
        state.settle()
    changes = state.changes()
    token.check()
    problems = [*new_conformance_errors(snapshot, changes),
                *_new_reserved_errors(snapshot, changes),
                *_new_broken_links(state, token)]
    if problems:
        return EditPlan(REJECTED, (), tuple(problems))
    return EditPlan(APPLICABLE if changes else NOOP, changes, ())


def _concept(state: _State, concept_id: str, field: str, token: CancelToken) -> Document:
    doc = state.current.concepts.get(concept_id)
    if doc is None:
        raise _Rejected(
            _problem(CONCEPT_NOT_FOUND, f"no concept {concept_id!r} in the bundle; find the "
                     "canonical ID with search_concepts or list_concepts", None, field),
            *did_you_mean_diagnostics(state.current, concept_id, f"{field}.concept_id",
                                      check=token.check),
        )
    return doc


def _folder_exists(snapshot: Snapshot, folder: str) -> bool:
    prefix = folder + "/"
    return (folder == "" or folder in snapshot.directories
            or any(p.startswith(prefix) for p in snapshot.documents))


# ---------------------------------------------------------------------------- rename


def _rename(state: _State, op: Mapping[str, Any], field: str, token: CancelToken) -> None:
    concept_id, new_id = op["concept_id"], op["new_id"]
    doc = _concept(state, concept_id, field, token)
    if new_id == concept_id:
        return
    current = state.current
    new_path = path_for_concept_id(new_id)
    if new_id in current.concepts or new_path in current.documents:
        raise _Rejected(_problem("target_exists", f"a concept {new_id!r} already exists; a "
                                 "rename never replaces one", new_path, f"{field}.new_id"))
    parts = new_path.split("/")
    for n in range(1, len(parts)):
        folder = "/".join(parts[:n])
        if folder in current.documents or folder in current.assets:
            raise _Rejected(_problem("target_exists", f"{folder!r} is a file, so it cannot be "
                                     f"a folder of {new_id!r}", folder, f"{field}.new_id"))
    old_path = doc.path
    new_dir = posixpath.dirname(new_path)
    for other in list(current.documents.values()):
        token.check()
        if other.parse_error is not None:
            continue
        moved = other.path == old_path
        source_dir = new_dir if moved else posixpath.dirname(other.path)
        changes: dict[str, str] = {}
        for link in other.markdown.links:
            reached = link_target(link, current)
            if isinstance(reached, Document) and reached.path == old_path:
                target = new_path if link.target == old_path else new_id
                changes[link.raw] = retargeted(link.raw, source_dir, target)
            elif moved and link.target is not None and not link.raw.strip().startswith("/"):
                changes[link.raw] = retargeted(link.raw, source_dir, link.target,
                                               directory=link.is_directory)
        changes = {raw: new for raw, new in changes.items() if new != raw}
        text = _with_links(other, changes, field)

        def move(data: dict[str, Any], other: Document = other, moved: bool = moved,
                 source_dir: str = source_dir) -> None:
            if other.is_concept:
                retarget_relations(data, concept_id, new_id)
            for found in path_fields(current, other):
                value = found.value
                if value.kind != BUNDLE or value.path is None:
                    continue
                if value.path == old_path:
                    _set_at(data, found.location, retargeted(value.raw, source_dir, new_path))
                elif moved and not value.raw.strip().startswith("/"):
                    _set_at(data, found.location, retargeted(value.raw, source_dir, value.path))

        text = _with_data(other.path, text, move, field)
        if moved:
            state.put(old_path, None)
            state.put(new_path, text)
        elif text != other.text:
            state.put(other.path, text)
    state.origin[new_path] = state.origin.pop(old_path, old_path)


def _with_links(doc: Document, changes: Mapping[str, str | None], field: str) -> str:
    if not changes:
        return doc.text
    try:
        body = edit_links(doc, changes)
    except LinkEditError as exc:
        where = "" if exc.line is None else f" (line {exc.line})"
        raise _Rejected(_problem("link_not_editable", exc.message + where, doc.path,
                                 field)) from None
    return doc.text[: doc.body_start] + body


def _with_data(
    path: str, text: str, change: Callable[[dict[str, Any]], object], field: str
) -> str:
    try:
        old = data_of(text)
        data = copy.deepcopy(old)
        change(data)
        return text if data == old else rewrite(text, data)
    except EditError as exc:
        raise _Rejected(_problem(exc.code, exc.message, path, field)) from None


def _set_at(data: dict[str, Any], location: str, value: str) -> None:
    """Set the path-valued field at ``location`` (``sources[2].resource``, ``resource``…)."""
    holder: Any = data
    steps = location.split(".")
    for step in steps[:-1]:
        m = _LOCATION.fullmatch(step)
        assert m is not None
        holder = holder[m.group(1)]
        if m.group(2) is not None:
            holder = holder[int(m.group(2))]
    holder[steps[-1]] = value


# ---------------------------------------------------------------------------- delete


def _delete(state: _State, op: Mapping[str, Any], field: str, token: CancelToken) -> None:
    concept_id = op["concept_id"]
    doc = _concept(state, concept_id, field, token)
    current, path = state.current, doc.path
    inbound = list(_inbound(current, doc, token))
    if op["inbound"] == REFUSE and inbound:
        listed = [_problem("inbound_reference", message, file, where)
                  for file, where, message in inbound[:MAX_LISTED]]
        if len(inbound) > MAX_LISTED:
            listed.append(_problem("inbound_reference", f"and {len(inbound) - MAX_LISTED} more "
                                   "inbound references", None, field))
        raise _Rejected(
            _problem("inbound_references", f"{len(inbound)} reference(s) resolve to "
                     f"{concept_id!r}; delete with inbound 'unlink' to turn links into their "
                     "text and drop relations, or change them first", path, f"{field}.inbound"),
            *listed)
    fields = [(file, where) for file, where, _ in inbound if where is not None
              and not where.startswith("relations") and ".relations." not in where]
    if fields:
        file, where = fields[0]
        raise _Rejected(_problem("inbound_field", f"the path-valued field {where} names "
                                 f"{path}; change or remove it first (unlink never rewrites "
                                 "a path-valued field)", file, field))
    for other in list(current.documents.values()):
        token.check()
        if other.path == path or other.parse_error is not None:
            continue
        raws = {link.raw for link in other.markdown.links
                if _reaches(link_target(link, current), path)}
        text = other.text
        if raws and other.kind == INDEX:
            text = dropped_index_entries(other, raws)
            other = parse_document(other.path, text.encode("utf-8"))
            raws = {link.raw for link in other.markdown.links if link.raw in raws}
        text = _with_links(other, dict.fromkeys(raws), field) if raws else text
        if other.is_concept:
            text = _with_data(other.path, text,
                              lambda data: retarget_relations(data, concept_id, None), field)
        if text != current.documents[other.path].text:
            state.put(other.path, text)
    state.put(path, None)
    state.origin.pop(path, None)


def _reaches(reached: Document | str | None, path: str) -> bool:
    return isinstance(reached, Document) and reached.path == path


def _inbound(
    current: Snapshot, doc: Document, token: CancelToken
) -> Iterator[tuple[str, str | None, str]]:
    """(file, field or None, message) of every reference to ``doc`` from another document."""
    for other in current.documents.values():
        token.check()
        if other.path == doc.path or other.parse_error is not None:
            continue
        for link in other.markdown.links:
            if _reaches(link_target(link, current), doc.path):
                yield other.path, None, f"line {link.line} links to {link.raw!r}"
        if other.is_concept:
            data = copy.deepcopy(data_of(other.text))
            for where in retarget_relations(data, doc.concept_id or "", None):
                yield other.path, where, f"{where} targets {doc.concept_id!r}"
        for found in path_fields(current, other):
            if found.value.kind == BUNDLE and found.value.path == doc.path:
                yield other.path, found.location, f"{found.location} names {found.value.raw!r}"


# ---------------------------------------------------------------------------- log and index


def _append_log(state: _State, op: Mapping[str, Any], field: str, token: CancelToken) -> None:
    folder = op["folder"]
    if not _folder_exists(state.current, folder):
        raise _Rejected(_problem("folder_not_found", f"no folder {folder!r} in the bundle",
                                 None, f"{field}.folder"))
    path = _in_folder(folder, "log.md")
    doc = state.current.documents.get(path)
    if doc is not None and doc.parse_error is not None:
        raise _Rejected(_problem("unparseable_log", f"{path} cannot be parsed; fix it first",
                                 path, field))
    state.put(path, appended_log(doc, op["date"], op["entry"]))


def _regenerate_index(
    state: _State, op: Mapping[str, Any], field: str, token: CancelToken
) -> None:
    folder = op["folder"]
    if not _folder_exists(state.current, folder):
        raise _Rejected(_problem("folder_not_found", f"no folder {folder!r} in the bundle",
                                 None, f"{field}.folder"))
    path = _in_folder(folder, "index.md")
    doc = state.current.documents.get(path)
    if doc is not None and doc.parse_error is not None:
        raise _Rejected(_problem("unparseable_index", f"{path} cannot be parsed; fix it first",
                                 path, field))
    text = regenerated_index(state.current, folder, doc)
    if text is None:
        raise _Rejected(_problem("empty_folder", f"folder {folder!r} holds no concept to "
                                 "list", path, f"{field}.folder"))
    state.put(path, text)


_HANDLERS: dict[str, Callable[[_State, Mapping[str, Any], str, CancelToken], None]] = {
    "rename": _rename,
    "delete": _delete,
    "append_log": _append_log,
    "regenerate_index": _regenerate_index,
}


# ---------------------------------------------------------------------------- final checks


def _new_reserved_errors(snapshot: Snapshot, changes: tuple[FileChange, ...]) -> list[Diagnostic]:
    """§8/§9 errors a changed ``index.md`` or ``log.md`` did not have before."""
    rules = VersionRules.of(resolve_version(snapshot))
    out: list[Diagnostic] = []
    for change in changes:
        data = change.new_bytes
        name = change.path.rsplit("/", 1)[-1]
        if data is None or name not in ("index.md", "log.md"):
            continue
        old = snapshot.documents.get(change.path)
        before = set() if old is None else {d.code for d in reserved_conformance(old, rules)}
        for finding in reserved_conformance(parse_document(change.path, data), rules):
            if finding.severity == ERROR and finding.code not in before:
                out.append(_problem(finding.code, finding.message + "; add a regenerate_index "
                                    "of its folder to the operations, or fix it by hand",
                                    change.path))
    return out


def _new_broken_links(state: _State, token: CancelToken) -> list[Diagnostic]:
    """A link broken after the edit that was not broken before (by file and target path; a
    moved file counts as its old self)."""
    if not state.texts:
        return []
    before: set[tuple[str, str | None]] = set()
    for doc in state.base.documents.values():
        token.check()
        before.update((doc.path, link.target) for link in broken_links(doc, state.base))
    out: list[Diagnostic] = []
    after = state.current
    for doc in after.documents.values():
        token.check()
        origin = state.origin.get(doc.path, doc.path)
        for link in broken_links(doc, after):
            if (origin, link.target) not in before:
                out.append(_problem("broken_link", f"line {link.line}: the link to "
                                    f"{link.raw!r} would be broken by this edit", doc.path))
    return out
