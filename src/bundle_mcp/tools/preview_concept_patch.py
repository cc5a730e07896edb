"""preview_concept_patch: plan typed frontmatter operations; show the diff; write nothing."""

from __future__ import annotations

from typing import Any

from ..toolspec import CallContext, ToolSpec
from ..writes.patch_ops import REJECTED, PatchPlan, plan_of, request_of, targets_of
from ..writes.plan import preview_fields, require_utf8, unified_diff
from ..writes.scope import outside, scope_diagnostic

NAME = "preview_concept_patch"
DESCRIPTION = (
    "Preview typed frontmatter operations (see operations for each kind's fields) without "
    "writing. Returns status applicable, noop or rejected (also for a concept outside the "
    "folders you may write), a unified diff, base_revision and plan_digest; then "
    "apply_concept_patch writes it."
)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    require_utf8(params)
    request = request_of(params)
    # The apply's first check, first: a preview never promises a write its apply refuses.
    plan: PatchPlan | None = None
    digest = None
    if not outside(call.access, targets_of(request)):
        plan, digest = plan_of(snapshot, request, token)
    if plan is None or outside(call.access, (c.path for c in plan.changes)):
        plan, digest = PatchPlan(REJECTED, (), (scope_diagnostic(call.access),)), None
    diff, truncated = unified_diff(plan.changes)  # a rejected plan has no changes: no diff
    return {
        "status": plan.status,
        **preview_fields(snapshot, plan.changes, digest, publishable=plan.status != REJECTED),
        "diff": diff,
        "diff_truncated": truncated,
        "affected_paths": [c.path for c in plan.changes],
        "diagnostics": [d.envelope_json() for d in plan.diagnostics],
        "unknown_preserved": plan.status != REJECTED,
    }


SPEC = ToolSpec(
    name=NAME,
    title="Preview concept patch",
    toolset="write",
    read_only=True,  # a preview writes nothing
    output_budget=8 * 1024 * 1024,
    description=DESCRIPTION,
    run=run,
)
