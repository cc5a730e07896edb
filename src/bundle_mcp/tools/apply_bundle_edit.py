"""apply_bundle_edit: re-plan the previewed edit, check revision and digest, publish."""

from __future__ import annotations

from ..toolspec import ToolSpec
from ..writes.bundle_edit import replan, request_of, targets_of
from ._apply import previewed_apply

NAME = "apply_bundle_edit"
PREVIEW = "preview_bundle_edit"
DESCRIPTION = (
    "Write an edit previewed with preview_bundle_edit: the same operations, plus "
    "expected_revision (its base_revision) and expected_plan_digest (its plan_digest). "
    "Re-planned and published all-or-nothing (files created, replaced and deleted) only if "
    "both still match; otherwise revision_conflict or plan_mismatch: preview again and "
    "review. An identical apply replays its result."
)


run = previewed_apply(NAME, PREVIEW, request_of, replan, targets_of)


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
