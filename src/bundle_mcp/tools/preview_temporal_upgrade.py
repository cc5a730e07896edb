"""preview_temporal_upgrade: plan date → instant rewrites from explicit mappings; write nothing."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..cancel import CancelToken
from ..model import Snapshot
from ..writes.plan import plan_digest, require_utf8, result_revision, revision_of_snapshot
from ..writes.temporal_upgrade import READY, UpgradePlan, check_mappings, normalized, plan_upgrade

NAME = "preview_temporal_upgrade"
TITLE = "Preview temporal upgrade"
TOOLSET = "write"
READ_ONLY = True  # a preview writes nothing
NEEDS_PARSEABLE = True
NEEDS_BUNDLE_PATH = True
OUTPUT_BUDGET = 16 * 1024 * 1024
PLAN_KIND = "temporal_upgrade"
DESCRIPTION = (
    "Preview upgrading an OKF 0.2 bundle from dates (YYYY-MM-DD) to RFC 3339 instants, "
    "without writing. Every date in stale_after, usage_window and sources needs an explicit "
    "mapping: the server never invents a time or an offset. Start with no mappings to list "
    "every date as unresolved (status incomplete), map each and preview until ready; then "
    "apply_temporal_upgrade with the same id, actor and mappings plus base_revision and "
    "plan_digest."
)


def request_of(params: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "id": params["id"],
        "actor": params["actor"],
        "mappings": normalized(params.get("mappings", [])),
    }


def plan_of(
    snapshot: Snapshot, request: Mapping[str, Any], token: CancelToken
) -> tuple[UpgradePlan, str | None]:
    """The plan against ``snapshot`` and its digest (only a ready plan has one)."""
    check_mappings(request["mappings"])
    plan = plan_upgrade(snapshot, request["mappings"], token)
    if plan.status != READY:
        return plan, None
    base = revision_of_snapshot(snapshot)
    return plan, plan_digest(PLAN_KIND, base, request, plan.changes)


def run(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
    require_utf8(params)
    plan, digest = plan_of(snapshot, request_of(params), token)
    return {
        "status": plan.status,
        "base_revision": revision_of_snapshot(snapshot),
        "result_revision": result_revision(snapshot, plan.changes),
        "plan_digest": digest,
        "unresolved": [o.wire() for o in plan.unresolved],
    }
