"""validate_bundle: conformance errors and guidance for the whole bundle, never a failure for
broken files (they are the report)."""

from __future__ import annotations

from typing import Any

from ..cancel import CancelToken
from ..model import Snapshot
from ..okf.temporal import reference_from
from ..validation import ValidateOptions, validate

NAME = "validate_bundle"
TITLE = "Validate bundle"
TOOLSET = "read"
READ_ONLY = True
NEEDS_PARSEABLE = False
OUTPUT_BUDGET = 64 * 1024 * 1024
DESCRIPTION = (
    "Validate the bundle against OKF v0.2, like bundle-mcp validate: conformance errors "
    "(unparseable files, missing type, malformed index.md/log.md) and guidance warnings and "
    "info; broken files are reported, not fatal. check_links, check_orphans and strict add "
    "checks; as_of flags stale concepts."
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
