"""apply_bundle_edit: re-plan the previewed edit, check revision and digest, publish."""

from __future__ import annotations

from typing import Any

from ..toolspec import CallContext, ToolSpec
from ..writes.apply import ApplyCall, apply_plan
from ..writes.bundle_edit import replan, request_of, targets_of
from ..writes.plan import require_utf8

NAME = "apply_bundle_edit"
PREVIEW = "preview_bundle_edit"
DESCRIPTION = (
    "Write an edit previewed with preview_bundle_edit: the same operations, plus "
    "expected_revision (its base_revision) and expected_plan_digest (its plan_digest). "
    "Re-planned and published all-or-nothing (files created, replaced and deleted) only if "
    "both still match; otherwise revision_conflict or plan_mismatch: preview again and "
    "review. An identical apply replays its result."
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
    title="Apply bundle edit",
    toolset="write",
    read_only=False,
    needs_parseable=True,
    output_budget=4 * 1024 * 1024,
    description=DESCRIPTION,
    run=run,
)
