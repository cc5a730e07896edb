"""preview_v02_migration: plan the v0.1 → v0.2 migration; report blockers; write nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cancel import CancelToken
from ..model import Snapshot
from ..writes.migration import (
    APPLICABLE,
    MigrationPlan,
    check_request,
    normalized,
    plan_migration,
    proof,
)
from ..writes.plan import (
    digest,
    plan_digest,
    require_utf8,
    result_revision,
    revision_of_snapshot,
    unified_diff,
)

NAME = "preview_v02_migration"
TITLE = "Preview v0.2 migration"
TOOLSET = "write"
READ_ONLY = True  # a preview writes nothing
NEEDS_PARSEABLE = True
NEEDS_BUNDLE_PATH = True
PLAN_KIND = "v02_migration"
DESCRIPTION = (
    "Preview migrating an OKF v0.1 bundle to v0.2 without writing: timestamp becomes "
    "generated {by: generated_by, at}, each '# Citations' section becomes footnotes and "
    "sources through explicit citation_mappings only, and the root index.md declares "
    "okf_version 0.2. Undecided points come back as blockers with manual_actions. An "
    "applicable preview returns source, proof and plan_digest for apply_v02_migration."
)


def plan_of(
    snapshot: Snapshot, request: Mapping[str, Any], token: CancelToken
) -> tuple[MigrationPlan, str | None, dict[str, Any] | None]:
    """The plan, its digest and its proof (both ``None`` unless the plan is applicable)."""
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
        digest({"tool": PLAN_KIND, **bound}),
        base,
        result_revision(snapshot, plan.changes),
    )
    return plan, planned, account


def run(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
    require_utf8(params)
    plan, planned, account = plan_of(snapshot, normalized(params), token)
    base = revision_of_snapshot(snapshot)
    diff, truncated = unified_diff(plan.changes)
    return {
        "status": plan.status,
        "source": plan.source,
        "proof": account,
        "base_revision": base,
        "result_revision": None if plan.status == "blocked"
        else result_revision(snapshot, plan.changes),
        "plan_digest": planned,
        "affected_paths": [c.path for c in plan.changes],
        "diff": diff,
        "diff_truncated": truncated,
        "blockers": list(plan.blockers),
        "manual_actions": list(plan.manual_actions),
        "diagnostics": [],
    }
