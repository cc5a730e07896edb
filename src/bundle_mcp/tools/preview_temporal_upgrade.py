"""preview_temporal_upgrade: plan date → instant rewrites from explicit mappings; write nothing."""

from __future__ import annotations

from typing import Any

from ..cancel import CancelToken
from ..model import Snapshot
from ..writes.plan import preview_fields, require_utf8
from ..writes.temporal_upgrade import plan_of, request_of

NAME = "preview_temporal_upgrade"
TITLE = "Preview temporal upgrade"
TOOLSET = "write"
READ_ONLY = True  # a preview writes nothing
NEEDS_PARSEABLE = True
NEEDS_BUNDLE_PATH = True
OUTPUT_BUDGET = 16 * 1024 * 1024
DESCRIPTION = (
    "Preview upgrading an OKF 0.2 bundle from dates (YYYY-MM-DD) to RFC 3339 instants, "
    "without writing. Every date in stale_after, usage_window and sources needs an explicit "
    "mapping: the server never invents a time or an offset. Start with no mappings to list "
    "every date as unresolved (status incomplete), map each and preview until ready; then "
    "apply_temporal_upgrade with the same id, actor and mappings plus base_revision and "
    "plan_digest."
)


def run(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
    require_utf8(params)
    plan, digest = plan_of(snapshot, request_of(params), token)
    return {
        "status": plan.status,
        **preview_fields(snapshot, plan.changes, digest),
        "unresolved": [o.wire() for o in plan.unresolved],
    }
