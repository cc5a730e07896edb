"""apply_concept_patch: re-plan the previewed operations, check revision and digest, publish."""

from __future__ import annotations

from typing import Any

from ..cancel import CancelToken
from ..model import Snapshot
from ..writes.plan import digest, publish, replay_or_conflict, require_plan, require_utf8
from .preview_concept_patch import plan_of, request_of

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
    expected = params["expected_revision"]
    expected_digest = params["expected_plan_digest"]
    identity = digest({
        "tool": NAME,
        "request": request,
        "expected_revision": expected,
        "expected_plan_digest": expected_digest,
    })
    receipt = replay_or_conflict(
        params["bundle_path"], snapshot, expected, identity, PREVIEW, token
    )
    if receipt is None:
        plan, planned = plan_of(snapshot, request, token)
        if plan.status == "rejected":
            return {
                "status": "rejected",
                "base_revision": expected,
                "result_revision": expected,
                "plan_digest": expected_digest,
                "changed_paths": [],
                "diagnostics": [d.envelope_json() for d in plan.diagnostics],
            }
        require_plan(expected_digest, planned, PREVIEW)
        receipt = publish(params["bundle_path"], expected, plan.changes, identity, PREVIEW, token)
    return {
        "status": "applied" if receipt.changed_paths else "noop",
        "base_revision": receipt.base_revision,
        "result_revision": receipt.result_revision,
        "plan_digest": expected_digest,
        "changed_paths": list(receipt.changed_paths),
        "diagnostics": [],
    }
