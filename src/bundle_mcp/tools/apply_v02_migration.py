"""apply_v02_migration: re-plan the previewed migration, check source, proof, digest; publish."""

from __future__ import annotations

from typing import Any

from ..toolspec import CallContext, ToolSpec
from ..writes.apply import NOOP, Applied, ApplyCall, apply_plan
from ..writes.migration import (
    TARGET_NOOP,
    normalized,
    replan,
    require_source,
    resolve_source,
    targets_of,
)
from ..writes.plan import digest, require_utf8, revision_of_snapshot

NAME = "apply_v02_migration"
PREVIEW = "preview_v02_migration"
DESCRIPTION = (
    "Write a migration previewed with preview_v02_migration: the same arguments plus "
    "expected_source (its source), proof and expected_plan_digest (only expected_source for a "
    "target-noop). Published all-or-nothing, root index.md last, only if they still match; "
    "otherwise revision_conflict or plan_mismatch: preview again. An identical apply replays "
    "its result."
)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    require_utf8(params)
    request = normalized(params)
    expected_source = params["expected_source"]
    if expected_source["transition"] == TARGET_NOOP:
        # nothing to plan or publish, so no revision to compare: only the source must still hold
        source = resolve_source(snapshot, request["from"])
        require_source(expected_source, source, PREVIEW)
        base = revision_of_snapshot(snapshot)
        return Applied(NOOP, base, base, ()).receipt(None, source=source)
    account = params["proof"]
    expected_digest = params["expected_plan_digest"]
    apply_call = ApplyCall.of(
        NAME,
        PREVIEW,
        {"request": request, "expected_source": expected_source, "proof": account,
         "expected_plan_digest": expected_digest},
        account["base_revision"],
        (expected_digest, digest(account)),
    )
    applied = apply_plan(apply_call, snapshot, call.bundle_path,
                         lambda: replan(snapshot, request, expected_source, PREVIEW, token), token,
                         access=call.access, caps=call.caps, targets=targets_of(account))
    return applied.receipt(expected_digest, source=expected_source)


SPEC = ToolSpec(
    name=NAME,
    title="Apply v0.2 migration",
    toolset="write",
    read_only=False,
    output_budget=4 * 1024 * 1024,
    description=DESCRIPTION,
    run=run,
)
