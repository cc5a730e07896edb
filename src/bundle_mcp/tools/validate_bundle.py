"""validate_bundle: conformance errors and guidance for the whole bundle, never a failure for
broken files (they are the report)."""

from __future__ import annotations

from typing import Any

from ..cancel import CancelToken
from ..model import Snapshot
from ..temporal import reference_from
from ..validation import ValidateOptions, validate

NAME = "validate_bundle"
READ_ONLY = True
NEEDS_PARSEABLE = False
OUTPUT_BUDGET = 64 * 1024 * 1024
DESCRIPTION = (
    "Validate the bundle against OKF v0.2: conformance errors (unparseable files, missing or "
    "empty 'type', reserved index.md/log.md structure) and guidance warnings/info (invalid "
    "status, sources without resource, unresolved relations, colliding IDs, skipped symlinks; "
    "with check_links broken links and missing heading anchors; with check_orphans concepts "
    "no index.md links; with strict missing recommended fields). Broken files are reported, "
    "not fatal. Pass as_of to flag stale concepts; the clock is never read."
)


def run(snapshot: Snapshot, params: dict[str, Any], token: CancelToken) -> dict[str, Any]:
    options = ValidateOptions(
        reference=reference_from(params),
        strict=bool(params.get("strict", False)),
        check_links=bool(params.get("check_links", False)),
        check_orphans=bool(params.get("check_orphans", False)),
        target_version=params.get("target_version", "auto"),
    )
    return validate(snapshot, options, token)
