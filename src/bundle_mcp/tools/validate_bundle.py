"""validate_bundle: conformance errors and guidance for the whole bundle, never a failure for
broken files (they are the report)."""

from __future__ import annotations

from typing import Any

from ..okf.temporal import reference_from
from ..toolspec import CallContext, ToolSpec
from ..validation import ValidateOptions, validate

NAME = "validate_bundle"
DESCRIPTION = (
    "Validate the bundle against OKF v0.2, like bundle-mcp validate: conformance errors "
    "(unparseable files, missing type, malformed index.md/log.md) and guidance warnings and "
    "info; broken files are reported, not fatal. check_links, check_orphans and strict add "
    "checks; as_of flags stale concepts."
)


def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
    snapshot, token = call.snapshot, call.token
    options = ValidateOptions(
        reference=reference_from(params),
        strict=bool(params.get("strict", False)),
        check_links=bool(params.get("check_links", False)),
        check_orphans=bool(params.get("check_orphans", False)),
        target_version=params.get("target_version", "auto"),
    )
    return validate(snapshot, options, token)


SPEC = ToolSpec(
    name=NAME,
    title="Validate bundle",
    toolset="views",
    read_only=True,
    needs_parseable=False,
    output_budget=64 * 1024 * 1024,
    description=DESCRIPTION,
    run=run,
    cache_results=True,
)
