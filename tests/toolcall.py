"""Calling one tool's ``run`` directly, as the dispatcher would, without contracts or caching,
and in-memory snapshots to call it on."""

from __future__ import annotations

import types
from collections.abc import Mapping
from types import ModuleType
from typing import TYPE_CHECKING, Any

from bundle_mcp.cancel import CancelToken
from bundle_mcp.loader.document import parse_document
from bundle_mcp.model import Documents, Snapshot, revision_of
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


def snapshot_of(files: Mapping[str, str]) -> Snapshot:
    """An in-memory snapshot of ``{path: text}`` (the loader's parse, without a folder on disk),
    with the folders the paths name, as a load would list them (``project`` reads them)."""
    documents = {path: parse_document(path, text.encode("utf-8")) for path, text in files.items()}
    concepts = {
        d.concept_id: d
        for d in documents.values()
        if d.concept_id is not None and d.parse_error is None
    }
    directories = {""}
    for path in files:
        parts = path.split("/")[:-1]
        directories.update("/".join(parts[: n + 1]) for n in range(len(parts)))
    return Snapshot(
        revision=revision_of([d.record for d in documents.values()]),
        documents=types.MappingProxyType(documents),
        concepts=types.MappingProxyType(dict(sorted(concepts.items()))),
        assets=frozenset(),
        directories=frozenset(directories),
        skipped=(),
    )


def every_document_built(documents: Documents) -> Documents:
    """``documents`` with every document built, as the warm-up leaves them: a parse-cache save
    writes only built documents."""
    for _ in documents.values():
        pass
    return documents
