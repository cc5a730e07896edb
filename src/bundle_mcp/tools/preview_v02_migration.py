"""preview_v02_migration: plan the v0.1 → v0.2 migration; report blockers; write nothing."""

from __future__ import annotations

from typing import Any

from ..toolspec import CallContext, ToolSpec
from ..writes.migration import BLOCKED, MigrationPlan, normalized, plan_of, scope_blocker
from ..writes.plan import preview_fields, require_utf8, unified_diff
from ..writes.scope import outside

NAME = "preview_v02_migration"
DESCRIPTION = (
    "Preview migrating an OKF v0.1 bundle to v0.2 without writing: timestamp becomes "
    "generated {by: generated_by, at}, each '# Citations' section becomes footnotes and "
    "sources through explicit citation_mappings only, and the root index.md declares "
    "okf_version 0.2. Undecided points come back as blockers with manual_actions (also a "
    "file you may not write). An "
    "applicable preview returns source, proof and plan_digest for apply_v02_migration."
)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    require_utf8(params)
    plan, planned, account = plan_of(snapshot, normalized(params), token)
    if outside(call.access, (c.path for c in plan.changes)):
        # Its apply would refuse every one of these writes: blocked, with the reason.
        plan = MigrationPlan(BLOCKED, plan.source, (), (scope_blocker(call.access),), ())
        planned = account = None
    diff, truncated = unified_diff(plan.changes)
    return {
        "status": plan.status,
        "source": plan.source,
        "proof": account,
        **preview_fields(snapshot, plan.changes, planned, publishable=plan.status != BLOCKED),
        "affected_paths": [c.path for c in plan.changes],
        "diff": diff,
        "diff_truncated": truncated,
        "blockers": list(plan.blockers),
        "manual_actions": list(plan.manual_actions),
        "diagnostics": [],
    }


SPEC = ToolSpec(
    name=NAME,
    title="Preview v0.2 migration",
    toolset="write",
    read_only=True,  # a preview writes nothing
    description=DESCRIPTION,
    run=run,
)
