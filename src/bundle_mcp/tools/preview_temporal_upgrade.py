"""preview_temporal_upgrade: plan date → instant rewrites from explicit mappings; write nothing."""

from __future__ import annotations

from typing import Any

from ..toolspec import CallContext, ToolSpec
from ..writes.plan import preview_fields, require_utf8
from ..writes.scope import require_writable
from ..writes.temporal_upgrade import plan_of, request_of, targets_of

NAME = "preview_temporal_upgrade"
DESCRIPTION = (
    "Preview upgrading an OKF 0.2 bundle from dates (YYYY-MM-DD) to RFC 3339 instants, "
    "without writing. Every date in stale_after, usage_window and sources needs an explicit "
    "mapping: the server never invents a time or an offset. Dates in files you may not "
    "write: operation_rejected. Start with no mappings to list "
    "every date as unresolved (status incomplete), map each and preview until ready; then "
    "apply_temporal_upgrade with the same id, actor and mappings plus base_revision and "
    "plan_digest."
)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    require_utf8(params)
    request = request_of(params)
    # The apply's first check, first (its contract has no rejected status: the apply's error).
    require_writable(call.access, targets_of(m["concept"] for m in request["mappings"]))
    plan, digest = plan_of(snapshot, request, token)
    # Every date must be mapped before the upgrade is ready, so one in a file the reader may
    # not write means the upgrade can never be applied by this reader: said now.
    require_writable(call.access, (
        *(c.path for c in plan.changes), *targets_of(o.concept for o in plan.unresolved)))
    return {
        "status": plan.status,
        **preview_fields(snapshot, plan.changes, digest),
        "unresolved": [o.wire() for o in plan.unresolved],
    }


SPEC = ToolSpec(
    name=NAME,
    title="Preview temporal upgrade",
    toolset="write",
    read_only=True,  # a preview writes nothing
    output_budget=16 * 1024 * 1024,
    description=DESCRIPTION,
    run=run,
)
