"""apply_concept_patch: re-plan the previewed operations, check revision and digest, publish."""

from __future__ import annotations

from typing import Any

from ..toolspec import CallContext, ToolSpec
from ..writes.apply import ApplyCall, apply_plan
from ..writes.patch_ops import replan, request_of, targets_of
from ..writes.plan import require_utf8

NAME = "apply_concept_patch"
PREVIEW = "preview_concept_patch"
DESCRIPTION = (
    "Write a patch previewed with preview_concept_patch: the same actor, temporal_profile and "
    "operations, plus expected_revision (its base_revision) and expected_plan_digest (its "
    "plan_digest). Re-planned and published atomically only if both still match; otherwise "
    "revision_conflict or plan_mismatch: preview again and review. An identical apply replays "
    "its result."
)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    require_utf8(params)
    request = request_of(params)
    apply_call = ApplyCall.previewed(NAME, PREVIEW, request, params, "expected_revision",
                               "expected_plan_digest")
    applied = apply_plan(apply_call, snapshot, call.bundle_path,
                         lambda: replan(snapshot, request, token), token, access=call.access,
                         caps=call.caps, targets=targets_of(request))
    return applied.receipt(params["expected_plan_digest"])


SPEC = ToolSpec(
    name=NAME,
    title="Apply concept patch",
    toolset="write",
    read_only=False,
    output_budget=4 * 1024 * 1024,
    description=DESCRIPTION,
    run=run,
)
