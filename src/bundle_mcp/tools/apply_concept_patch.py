"""apply_concept_patch: re-plan the previewed operations, check revision and digest, publish."""

from __future__ import annotations

from ..toolspec import ToolSpec
from ..writes.patch_ops import replan, request_of, targets_of
from ._apply import previewed_apply

NAME = "apply_concept_patch"
PREVIEW = "preview_concept_patch"
DESCRIPTION = (
    "Write a patch previewed with preview_concept_patch: the same actor, temporal_profile and "
    "operations, plus expected_revision (its base_revision) and expected_plan_digest (its "
    "plan_digest). Re-planned and published atomically only if both still match; otherwise "
    "revision_conflict or plan_mismatch: preview again and review. An identical apply replays "
    "its result."
)


run = previewed_apply(NAME, PREVIEW, request_of, replan, targets_of)


SPEC = ToolSpec(
    name=NAME,
    title="Apply concept patch",
    toolset="write",
    read_only=False,
    output_budget=4 * 1024 * 1024,
    description=DESCRIPTION,
    run=run,
)
