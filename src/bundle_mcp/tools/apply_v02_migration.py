"""apply_v02_migration: re-plan the previewed migration, check source, proof, digest; publish."""

from __future__ import annotations

from typing import Any

from ..cancel import CancelToken
from ..errors import ERROR, OPERATION_REJECTED, BundleError, Diagnostic, recovery_step
from ..model import Snapshot
from ..writes.migration import BLOCKED, TARGET_NOOP, normalized, resolve_source
from ..writes.plan import (
    digest,
    publish,
    replay_or_conflict,
    require_plan,
    require_utf8,
    revision_of_snapshot,
)
from .preview_v02_migration import plan_of

NAME = "apply_v02_migration"
TITLE = "Apply v0.2 migration"
TOOLSET = "write"
READ_ONLY = False
NEEDS_PARSEABLE = True
NEEDS_BUNDLE_PATH = True
OUTPUT_BUDGET = 4 * 1024 * 1024
PREVIEW = "preview_v02_migration"
MAX_BLOCKER_DIAGNOSTICS = 100
DESCRIPTION = (
    "Write a migration previewed with preview_v02_migration: the same arguments plus "
    "expected_source (its source), proof and expected_plan_digest (only expected_source for a "
    "target-noop). Published all-or-nothing, root index.md last, only if they still match; "
    "otherwise revision_conflict or plan_mismatch: preview again. An identical apply replays "
    "its result."
)


def run(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
    require_utf8(params)
    request = normalized(params)
    expected_source = params["expected_source"]
    if expected_source["transition"] == TARGET_NOOP:
        source = resolve_source(snapshot, request["from"])
        require_plan(_fingerprint(expected_source), _fingerprint(source), PREVIEW)
        base = revision_of_snapshot(snapshot)
        return _output("noop", source, base, base, None, ())
    account = params["proof"]
    expected_digest = params["expected_plan_digest"]
    base = account["base_revision"]
    identity = digest({
        "tool": NAME,
        "request": request,
        "expected_source": expected_source,
        "proof": account,
        "expected_plan_digest": expected_digest,
    })
    receipt = replay_or_conflict(params["bundle_path"], snapshot, base, identity, PREVIEW, token)
    if receipt is None:
        plan, planned, rebuilt = plan_of(snapshot, request, token)
        require_plan(_fingerprint(expected_source), _fingerprint(plan.source), PREVIEW)
        if plan.status == BLOCKED:
            raise _blocked(plan.blockers)
        require_plan(expected_digest, planned, PREVIEW)
        require_plan(_fingerprint(account), _fingerprint(rebuilt), PREVIEW)
        receipt = publish(params["bundle_path"], base, plan.changes, identity, PREVIEW, token)
    status = "applied" if receipt.changed_paths else "noop"
    return _output(status, expected_source, receipt.base_revision, receipt.result_revision,
                   expected_digest, receipt.changed_paths)


def _output(status: str, source: dict[str, Any], base: str, result: str, planned: str | None,
            paths: tuple[str, ...]) -> dict[str, Any]:
    return {
        "status": status,
        "source": source,
        "base_revision": base,
        "result_revision": result,
        "plan_digest": planned,
        "changed_paths": list(paths),
        "diagnostics": [],
    }


def _fingerprint(value: Any) -> str:
    return digest(value)


def _blocked(blockers: tuple[dict[str, Any], ...]) -> BundleError:
    return BundleError(
        OPERATION_REJECTED,
        f"the migration is blocked by {len(blockers)} problem(s); nothing was written",
        (
            *(
                Diagnostic(code=b["code"], severity=ERROR, file=b["path"] or None,
                           message=b["message"])
                for b in blockers[:MAX_BLOCKER_DIAGNOSTICS]
            ),
            recovery_step("run preview_v02_migration, resolve its blockers and manual actions, "
                          "then apply the new preview"),
        ),
    )
