"""apply_temporal_upgrade: re-plan a ready upgrade, check revision and digest, publish."""

from __future__ import annotations

from typing import Any

from ..toolspec import CallContext, ToolSpec
from ..writes.apply import APPLIED, ApplyCall, apply_plan
from ..writes.plan import require_utf8
from ..writes.temporal_upgrade import replan, request_of, targets_of

NAME = "apply_temporal_upgrade"
PREVIEW = "preview_temporal_upgrade"
DESCRIPTION = (
    "Write a temporal upgrade whose preview was ready: the same id, actor and mappings plus "
    "its base_revision and plan_digest. Published atomically only if nothing changed; "
    "otherwise revision_conflict or plan_mismatch: preview again. An incomplete plan is "
    "operation_rejected. An identical apply replays its result. Then read with "
    "temporal_profile instant-0b87c52."
)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    require_utf8(params)
    request = request_of(params)
    apply_call = ApplyCall.previewed(NAME, PREVIEW, request, params, "base_revision", "plan_digest")
    applied = apply_plan(apply_call, snapshot, call.bundle_path,
                         lambda: replan(snapshot, request, PREVIEW, token), token,
                         access=call.access, caps=call.caps,
                         targets=targets_of(m["concept"] for m in request["mappings"]))
    # a ready plan rewrites at least one date, so what it published is always applied
    return {
        "status": APPLIED,
        "request_digest": apply_call.request_digest,
        "result_revision": applied.result_revision,
    }


SPEC = ToolSpec(
    name=NAME,
    title="Apply temporal upgrade",
    toolset="write",
    read_only=False,
    output_budget=1024 * 1024,
    description=DESCRIPTION,
    run=run,
)
