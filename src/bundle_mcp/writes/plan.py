"""What every preview/apply pair shares: file changes, digests, revisions and the diff.

A *plan* is the list of whole-file changes a write tool would make against one snapshot. Its
``plan_digest`` binds the tool, the base revision, the normalised request and the old and new
hash of every file, so an apply that rebuilds the plan against the bundle as it is now gets the
same digest only if it would write the same bytes over the same bytes. The ``request_digest``
is the identity of one apply call: an identical call replays its durable receipt. How an apply
uses them is :mod:`.apply`.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import (
    ERROR,
    Diagnostic,
    invalid_input,
    invalid_request,
)
from ..loader.current import changed_view
from ..loader.document import parse_document
from ..model import Snapshot, canonical_json
from ..validation.concepts import conformance
from .publish import PlannedWrite

__all__ = [
    "MAX_DIFF_CHARS",
    "FileChange",
    "digest",
    "file_digests",
    "new_conformance_errors",
    "plan_digest",
    "preview_fields",
    "request_digest",
    "require_utf8",
    "result_revision",
    "revision_of_snapshot",
    "unified_diff",
]

MAX_DIFF_CHARS = 1 << 20  # the contracts cap "diff" at 1 MiB of text


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file a plan rewrites: its text before (``None`` = new file) and after (``None`` = the
    file is deleted)."""

    path: str
    old_text: str | None
    new_text: str | None
    old_sha256: str | None

    @property
    def new_bytes(self) -> bytes | None:
        return None if self.new_text is None else self.new_text.encode("utf-8")

    @property
    def new_sha256(self) -> str | None:
        data = self.new_bytes
        return None if data is None else hashlib.sha256(data).hexdigest()

    def as_write(self) -> PlannedWrite:
        return PlannedWrite(self.path, self.old_sha256, self.new_bytes)


def digest(value: Any) -> str:
    """``sha256:`` + the SHA-256 of the canonical JSON of ``value``."""
    return "sha256:" + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def request_digest(tool: str, bound: Mapping[str, Any]) -> str:
    """The identity of one request to ``tool``: the digest of ``{"tool": tool, **bound}``.

    ``bound`` is everything else the request is, under the names its arguments have: equal
    requests replay, any changed byte is a new request.
    """
    return digest({"tool": tool, **bound})


def require_utf8(value: Any, argument: str | None = None) -> None:
    """Arguments must be writable as UTF-8: JSON can carry lone surrogates, which cannot.

    ``argument`` names the one argument ``value`` is, for an error that points at it; without
    it ``value`` is all the arguments.

    Raises:
        BundleError: ``invalid_request``.
    """
    try:
        canonical_json(value).encode("utf-8")
    except UnicodeEncodeError:
        if argument is None:
            message = ("the arguments contain an unpaired surrogate, which cannot be written as "
                       "UTF-8")
            field, advice = "$", "remove the unpaired surrogate code point from the arguments"
        else:
            message = advice = f"{argument} contains an unpaired surrogate"
            field = f"$.{argument}"
        raise invalid_request(
            message, invalid_input(field, advice)
        ) from None


def revision_of_snapshot(snapshot: Snapshot) -> str:
    return "sha256:" + snapshot.revision


def result_revision(snapshot: Snapshot, changes: Iterable[FileChange]) -> str:
    """The revision the bundle will have once ``changes`` are published (as the loader sees it,
    attachments included; ``snapshot`` is the caller's view, so this is the caller's revision)."""
    written = {c.path: c.new_bytes for c in changes if c.path.endswith(".md")}
    # A prediction: the caps are the apply's to enforce, with the caps the server was given.
    return "sha256:" + changed_view(snapshot, written, max_bytes=None).revision


def file_digests(changes: Iterable[FileChange]) -> list[dict[str, Any]]:
    """What the plan digest binds per file: the path and its old and new hash, sorted by path."""
    return [
        {"path": c.path, "old_sha256": c.old_sha256, "new_sha256": c.new_sha256}
        for c in sorted(changes, key=lambda c: c.path)
    ]


def plan_digest(
    tool: str, base_revision: str, request: Any, changes: Iterable[FileChange]
) -> str:
    return digest(
        {
            "tool": tool,
            "base_revision": base_revision,
            "request": request,
            "files": file_digests(changes),
        }
    )


def preview_fields(
    snapshot: Snapshot,
    changes: tuple[FileChange, ...],
    planned_digest: str | None,
    *,
    publishable: bool = True,
) -> dict[str, Any]:
    """The three fields every preview reports of its plan, in the order it reports them.

    ``base_revision`` is the snapshot's; ``result_revision`` the bundle's once ``changes`` are
    published (``None`` for a plan that is not ``publishable``: rejected or blocked);
    ``plan_digest`` is ``planned_digest``, which the apply must send back.
    """
    return {
        "base_revision": revision_of_snapshot(snapshot),
        "result_revision": result_revision(snapshot, changes) if publishable else None,
        "plan_digest": planned_digest,
    }


def unified_diff(changes: Iterable[FileChange]) -> tuple[str, bool]:
    """A unified diff of every change (sorted by path), cut at a line within 1 MiB."""
    parts: list[str] = []
    size = 0
    for change in sorted(changes, key=lambda c: c.path):
        old = [] if change.old_text is None else change.old_text.splitlines(keepends=True)
        new = [] if change.new_text is None else change.new_text.splitlines(keepends=True)
        origin = "/dev/null" if change.old_text is None else "a/" + change.path
        goal = "/dev/null" if change.new_text is None else "b/" + change.path
        for line in difflib.unified_diff(old, new, origin, goal):
            if not line.endswith(("\n", "\r")):
                line += "\n\\ No newline at end of file\n"
            if size + len(line) > MAX_DIFF_CHARS:
                return "".join(parts), True
            parts.append(line)
            size += len(line)
    return "".join(parts), False


def new_conformance_errors(
    snapshot: Snapshot, changes: tuple[FileChange, ...]
) -> list[Diagnostic]:
    """Conformance errors a change introduces (ones the file already had do not block it)."""
    out: list[Diagnostic] = []
    for change in changes:
        old = snapshot.documents.get(change.path)
        if old is None or not old.is_concept or change.new_bytes is None:
            continue
        before = {d.code for d in conformance(old)}
        new = parse_document(change.path, change.new_bytes)
        for finding in conformance(new):
            if finding.code not in before:
                out.append(Diagnostic(code=finding.code, severity=ERROR, file=change.path,
                                      field=finding.field, message=finding.message,
                                      spec_ref=finding.spec_ref))
    return out
