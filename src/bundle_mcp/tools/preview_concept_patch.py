"""preview_concept_patch: plan typed frontmatter operations; show the diff; write nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cancel import CancelToken
from ..model import Snapshot
from ..okf.temporal import DATE_PROFILE
from ..writes.patch_ops import PatchPlan, check_operations, plan_patch
from ..writes.plan import (
    plan_digest,
    require_utf8,
    result_revision,
    revision_of_snapshot,
    unified_diff,
)

NAME = "preview_concept_patch"
TITLE = "Preview concept patch"
TOOLSET = "write"
READ_ONLY = True  # a preview writes nothing
NEEDS_PARSEABLE = True
NEEDS_BUNDLE_PATH = True
OUTPUT_BUDGET = 8 * 1024 * 1024
PLAN_KIND = "concept_patch"
DESCRIPTION = (
    "Preview typed frontmatter operations (see operations for each kind's fields) without "
    "writing. Returns status applicable, noop or rejected, a unified diff, base_revision and "
    "plan_digest; then apply_concept_patch writes it."
)


def request_of(params: Mapping[str, Any]) -> dict[str, Any]:
    """The part of the arguments the plan digest binds (the profile default filled in)."""
    return {
        "actor": params["actor"],
        "temporal_profile": params.get("temporal_profile") or DATE_PROFILE,
        "operations": [dict(op) for op in params["operations"]],
    }


def plan_of(
    snapshot: Snapshot, request: Mapping[str, Any], token: CancelToken
) -> tuple[PatchPlan, str | None]:
    """The plan against ``snapshot`` and its digest (``None`` when rejected)."""
    check_operations(request["operations"], request["temporal_profile"])
    plan = plan_patch(snapshot, request["operations"], request["temporal_profile"], token)
    if plan.status == "rejected":
        return plan, None
    base = revision_of_snapshot(snapshot)
    return plan, plan_digest(PLAN_KIND, base, request, plan.changes)


def run(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
    require_utf8(params)
    plan, digest = plan_of(snapshot, request_of(params), token)
    base = revision_of_snapshot(snapshot)
    if plan.status == "rejected":
        return {
            "status": "rejected",
            "base_revision": base,
            "result_revision": None,
            "plan_digest": None,
            "diff": "",
            "diff_truncated": False,
            "affected_paths": [],
            "diagnostics": [d.envelope_json() for d in plan.diagnostics],
            "unknown_preserved": False,
        }
    diff, truncated = unified_diff(plan.changes)
    return {
        "status": plan.status,
        "base_revision": base,
        "result_revision": result_revision(snapshot, plan.changes),
        "plan_digest": digest,
        "diff": diff,
        "diff_truncated": truncated,
        "affected_paths": [c.path for c in plan.changes],
        "diagnostics": [],
        "unknown_preserved": True,
    }
