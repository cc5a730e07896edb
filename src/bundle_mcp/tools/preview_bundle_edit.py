"""preview_bundle_edit: plan renames, deletions, log entries and indexes; show the diff; write
nothing."""

from __future__ import annotations

from typing import Any

from ..toolspec import CallContext, ToolSpec
from ..writes.bundle_edit import REJECTED, EditPlan, plan_of, request_of, targets_of
from ..writes.plan import preview_fields, require_utf8, unified_diff
from ..writes.scope import outside, scope_diagnostic

NAME = "preview_bundle_edit"
DESCRIPTION = (
    "Preview bundle edits without writing, applied in order: rename a concept (its file may "
    "move folders; every link, relation and path field that resolves to it is rewritten), "
    "delete one (inbound refuse or unlink), append a dated log.md entry, regenerate a "
    "folder's index.md. Returns status applicable, noop or rejected (also for a file outside "
    "the folders you may write), every file created, replaced or deleted, a unified diff, "
    "base_revision and plan_digest; then apply_bundle_edit writes it."
)


def _change(old: str | None, new: str | None) -> str:
    return "created" if old is None else "deleted" if new is None else "replaced"


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    require_utf8(params)
    request = request_of(params)
    # The apply's first check, first: a preview never promises a write its apply refuses.
    plan: EditPlan | None = None
    digest = None
    if not outside(call.access, targets_of(request)):
        plan, digest = plan_of(snapshot, request, token)
    if plan is None or outside(call.access, (c.path for c in plan.changes)):
        plan, digest = EditPlan(REJECTED, (), (scope_diagnostic(call.access),)), None
    diff, truncated = unified_diff(plan.changes)  # a rejected plan has no changes: no diff
    return {
        "status": plan.status,
        **preview_fields(snapshot, plan.changes, digest, publishable=plan.status != REJECTED),
        "files": [{"path": c.path, "change": _change(c.old_text, c.new_text)}
                  for c in plan.changes],
        "diff": diff,
        "diff_truncated": truncated,
        "diagnostics": [d.envelope_json() for d in plan.diagnostics],
    }


SPEC = ToolSpec(
    name=NAME,
    title="Preview bundle edit",
    toolset="write",
    read_only=True,  # a preview writes nothing
    needs_parseable=True,
    output_budget=8 * 1024 * 1024,
    description=DESCRIPTION,
    run=run,
)
