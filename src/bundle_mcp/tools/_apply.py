"""The run of an apply tool whose preview planned a list of operations (apply_bundle_edit,
apply_concept_patch): one body, the kind of edit handed in as its three steps."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..cancel import CancelToken
from ..model import Snapshot
from ..toolspec import CallContext, Runner
from ..writes.apply import ApplyCall, Replanned, apply_plan
from ..writes.plan import require_utf8

__all__ = ["previewed_apply"]

def previewed_apply(
    tool: str,
    preview: str,
    request_of: Callable[[Mapping[str, Any]], dict[str, Any]],
    replan: Callable[[Snapshot, Mapping[str, Any], CancelToken], Replanned],
    targets_of: Callable[[Mapping[str, Any]], tuple[str, ...]],
) -> Runner:
    """The ``run`` of ``tool``: re-plan the request its preview planned, check the revision and
    plan digest the caller sends back, publish, answer the receipt."""

    def run(call: CallContext, params: dict[str, Any]) -> dict[str, Any]:
        snapshot, token = call.snapshot, call.token
        require_utf8(params)
        request = request_of(params)
        apply_call = ApplyCall.previewed(tool, preview, request, params, "expected_revision",
                                         "expected_plan_digest")
        applied = apply_plan(apply_call, snapshot, call.bundle_path,
                             lambda: replan(snapshot, request, token), token,
                             access=call.access, caps=call.caps, targets=targets_of(request))
        return applied.receipt(params["expected_plan_digest"])

    return run
