"""apply_temporal_upgrade: re-plan a ready upgrade, check revision and digest, publish."""

from __future__ import annotations

from typing import Any

from ..cancel import CancelToken
from ..errors import OPERATION_REJECTED, BundleError, recovery_step
from ..model import Snapshot
from ..writes.plan import digest, publish, replay_or_conflict, require_plan, require_utf8
from ..writes.temporal_upgrade import READY
from .preview_temporal_upgrade import plan_of, request_of

NAME = "apply_temporal_upgrade"
TITLE = "Apply temporal upgrade"
TOOLSET = "write"
READ_ONLY = False
NEEDS_PARSEABLE = True
NEEDS_BUNDLE_PATH = True
OUTPUT_BUDGET = 1024 * 1024
PREVIEW = "preview_temporal_upgrade"
DESCRIPTION = (
    "Write a temporal upgrade whose preview was ready: the same id, actor and mappings plus "
    "its base_revision and plan_digest. Published atomically only if nothing changed; "
    "otherwise revision_conflict or plan_mismatch: preview again. An incomplete plan is "
    "operation_rejected. An identical apply replays its result. Then read with "
    "temporal_profile instant-0b87c52."
)


def run(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
    require_utf8(params)
    request = request_of(params)
    base = params["base_revision"]
    expected_digest = params["plan_digest"]
    identity = digest({
        "tool": NAME,
        "request": request,
        "base_revision": base,
        "plan_digest": expected_digest,
    })
    receipt = replay_or_conflict(params["bundle_path"], snapshot, base, identity, PREVIEW, token)
    if receipt is None:
        plan, planned = plan_of(snapshot, request, token)
        if plan.status != READY:
            raise BundleError(
                OPERATION_REJECTED,
                f"the upgrade is {plan.status}, not ready: there is nothing it could apply",
                (recovery_step(
                    "run preview_temporal_upgrade, add a mapping for every unresolved date, and "
                    "apply only a preview whose status is ready"),),
            )
        require_plan(expected_digest, planned, PREVIEW)
        receipt = publish(params["bundle_path"], base, plan.changes, identity, PREVIEW, token)
    return {
        "status": "applied",
        "request_digest": identity,
        "result_revision": receipt.result_revision,
    }
