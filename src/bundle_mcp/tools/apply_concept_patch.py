"""apply_concept_patch: re-plan the previewed operations, check revision and digest, publish."""

from __future__ import annotations

from typing import Any

from ..cancel import CancelToken
from ..model import Snapshot
from ..writes.apply import ApplyCall, apply_plan
from ..writes.patch_ops import replan, request_of
from ..writes.plan import require_utf8

NAME = "apply_concept_patch"
TITLE = "Apply concept patch"
TOOLSET = "write"
READ_ONLY = False
NEEDS_PARSEABLE = True
NEEDS_BUNDLE_PATH = True
OUTPUT_BUDGET = 4 * 1024 * 1024
PREVIEW = "preview_concept_patch"
DESCRIPTION = (
    "Write a patch previewed with preview_concept_patch: the same actor, temporal_profile and "
    "operations, plus expected_revision (its base_revision) and expected_plan_digest (its "
    "plan_digest). Re-planned and published atomically only if both still match; otherwise "
    "revision_conflict or plan_mismatch: preview again and review. An identical apply replays "
    "its result."
)


def run(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
    require_utf8(params)
    request = request_of(params)
    call = ApplyCall.previewed(NAME, PREVIEW, request, params, "expected_revision",
                               "expected_plan_digest")
    applied = apply_plan(call, snapshot, params["bundle_path"],
                         lambda: replan(snapshot, request, token), token)
    return applied.receipt(params["expected_plan_digest"])
