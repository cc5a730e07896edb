"""What every preview/apply pair shares: file changes, digests, the diff, and the apply protocol.

A *plan* is the list of whole-file changes a write tool would make against one snapshot. Its
``plan_digest`` binds the tool, the base revision, the normalised request and the old and new
hash of every file, so an apply that rebuilds the plan against the bundle as it is now gets the
same digest only if it would write the same bytes over the same bytes. The ``request_digest``
is the identity of one apply call: an identical call replays its durable receipt.
"""

from __future__ import annotations

import difflib
import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..cancel import CancelToken
from ..errors import (
    ERROR,
    PLAN_MISMATCH,
    REVISION_CONFLICT,
    BundleError,
    Diagnostic,
    invalid_request,
    recovery_step,
)
from ..loader.document import parse_document
from ..model import FileRecord, Snapshot, canonical_json, revision_of
from ..validation.concepts import conformance
from .publish import PlannedWrite, Receipt, apply_writes

__all__ = [
    "MAX_DIFF_CHARS",
    "FileChange",
    "digest",
    "file_digests",
    "plan_digest",
    "publish",
    "replay_or_conflict",
    "require_plan",
    "require_utf8",
    "result_revision",
    "revision_of_snapshot",
    "unified_diff",
]

MAX_DIFF_CHARS = 1 << 20  # the contracts cap "diff" at 1 MiB of text


@dataclass(frozen=True, slots=True)
class FileChange:
    """One file a plan rewrites: its text before (``None`` = new file) and after."""

    path: str
    old_text: str | None
    new_text: str
    old_sha256: str | None

    @property
    def new_bytes(self) -> bytes:
        return self.new_text.encode("utf-8")

    @property
    def new_sha256(self) -> str:
        return hashlib.sha256(self.new_bytes).hexdigest()

    def as_write(self) -> PlannedWrite:
        return PlannedWrite(self.path, self.old_sha256, self.new_bytes)


def digest(value: Any) -> str:
    """``sha256:`` + the SHA-256 of the canonical JSON of ``value``."""
    return "sha256:" + hashlib.sha256(canonical_json(value).encode("utf-8")).hexdigest()


def require_utf8(value: Any) -> None:
    """Arguments must be writable as UTF-8: JSON can carry lone surrogates, which cannot.

    Raises:
        BundleError: ``invalid_request``.
    """
    try:
        canonical_json(value).encode("utf-8")
    except UnicodeEncodeError:
        raise invalid_request(
            "the arguments contain an unpaired surrogate, which cannot be written as UTF-8",
            Diagnostic(code="invalid_input", severity=ERROR, field="$",
                       message="remove the unpaired surrogate code point from the arguments"),
        ) from None


def revision_of_snapshot(snapshot: Snapshot) -> str:
    return "sha256:" + snapshot.revision


def result_revision(snapshot: Snapshot, changes: Iterable[FileChange]) -> str:
    """The revision the bundle will have once ``changes`` are published (as the loader sees it)."""
    records = {d.path: d.record for d in snapshot.documents.values()}
    for change in changes:
        if change.path.endswith(".md"):
            data = change.new_bytes
            records[change.path] = FileRecord(change.path, len(data), change.new_sha256)
    return "sha256:" + revision_of(tuple(records.values()))


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


def unified_diff(changes: Iterable[FileChange]) -> tuple[str, bool]:
    """A unified diff of every change (sorted by path), cut at a line within 1 MiB."""
    parts: list[str] = []
    size = 0
    for change in sorted(changes, key=lambda c: c.path):
        old = [] if change.old_text is None else change.old_text.splitlines(keepends=True)
        new = change.new_text.splitlines(keepends=True)
        origin = "/dev/null" if change.old_text is None else "a/" + change.path
        for line in difflib.unified_diff(old, new, origin, "b/" + change.path):
            if not line.endswith(("\n", "\r")):
                line += "\n\\ No newline at end of file\n"
            if size + len(line) > MAX_DIFF_CHARS:
                return "".join(parts), True
            parts.append(line)
            size += len(line)
    return "".join(parts), False


# --------------------------------------------------------------------------------------------
# The apply protocol


def require_plan(expected: str, actual: str | None, tool: str) -> None:
    """The rebuilt plan must be the previewed one.

    Raises:
        BundleError: ``plan_mismatch`` with the recovery step.
    """
    if actual != expected:
        raise BundleError(
            PLAN_MISMATCH,
            "the plan rebuilt against the current bundle differs from the previewed plan",
            (recovery_step(f"run {tool} again with the same arguments, review the new plan, "
                           "then apply its plan_digest"),),
        )


def replay_or_conflict(
    bundle_path: str,
    snapshot: Snapshot,
    expected_revision: str,
    request_digest: str,
    preview_tool: str,
    token: CancelToken,
) -> Receipt | None:
    """``None`` when the bundle is still at ``expected_revision`` (the caller re-plans).

    Otherwise the only success is the replay of an identical earlier apply: ``apply_writes``
    checks its durable receipt before it compares revisions.

    Raises:
        BundleError: ``revision_conflict`` with the recovery step "preview again".
    """
    if revision_of_snapshot(snapshot) == expected_revision:
        return None
    return _apply(bundle_path, expected_revision, (), request_digest, preview_tool, token)


def publish(
    bundle_path: str,
    expected_revision: str,
    changes: tuple[FileChange, ...],
    request_digest: str,
    preview_tool: str,
    token: CancelToken,
) -> Receipt:
    """Compare-and-swap publication of a re-planned, digest-checked set of changes.

    Raises:
        BundleError: ``revision_conflict`` and the other errors of ``apply_writes``.
    """
    token.check()
    writes = tuple(c.as_write() for c in changes)
    return _apply(bundle_path, expected_revision, writes, request_digest, preview_tool, token)


def _apply(
    bundle_path: str,
    expected_revision: str,
    writes: tuple[PlannedWrite, ...],
    request_digest: str,
    preview_tool: str,
    token: CancelToken,
) -> Receipt:
    try:
        return apply_writes(bundle_path, expected_revision, writes, request_digest, token)
    except BundleError as exc:
        if exc.code != REVISION_CONFLICT:
            raise
        raise _conflict(preview_tool) from None


def _conflict(preview_tool: str) -> BundleError:
    return BundleError(
        REVISION_CONFLICT,
        "the bundle changed since the plan was previewed",
        (recovery_step(f"preview again: run {preview_tool} against the current bundle, review "
                       "the new plan, then apply it with its base revision and plan digest"),),
    )


def new_conformance_errors(
    snapshot: Snapshot, changes: tuple[FileChange, ...]
) -> list[Diagnostic]:
    """Conformance errors a change introduces (ones the file already had do not block it)."""
    out: list[Diagnostic] = []
    for change in changes:
        old = snapshot.documents.get(change.path)
        if old is None or not old.is_concept:
            continue
        before = {d.code for d in conformance(old)}
        new = parse_document(change.path, change.new_bytes)
        for finding in conformance(new):
            if finding.code not in before:
                out.append(Diagnostic(code=finding.code, severity=ERROR, file=change.path,
                                      field=finding.field, message=finding.message,
                                      spec_ref=finding.spec_ref))
    return out
