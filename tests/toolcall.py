"""Calling one tool's ``run`` directly, as the dispatcher would, without contracts or caching."""

from __future__ import annotations

from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from bundle_mcp.cancel import CancelToken
from bundle_mcp.model import Snapshot
from bundle_mcp.toolspec import CallContext

if TYPE_CHECKING:
    from bundle_mcp.semantic import SemanticIndex


def run_tool(
    module: ModuleType,
    snapshot: Snapshot,
    params: Mapping[str, Any],
    token: CancelToken | None = None,
    *,
    semantic: SemanticIndex | None = None,
    bundle_path: str = "",
) -> dict[str, Any]:
    call = CallContext(snapshot, token or CancelToken(), bundle_path, semantic)
    return module.SPEC.run(call, dict(params))
