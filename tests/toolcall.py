"""Calling one tool's ``run`` directly, as the dispatcher would, without contracts or caching,
and in-memory snapshots to call it on."""

from __future__ import annotations

import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from bundle_mcp.cancel import CancelToken
from bundle_mcp.loader import assemble_snapshot, deferred
from bundle_mcp.loader.document import parse_document
from bundle_mcp.model import Deferred, Documents, Snapshot, revision_of
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


def cells_of(files: Mapping[str, str]) -> dict[str, Deferred]:
    """The loader's cells of ``{name: text}`` (each at ``name.md``), nothing built yet."""
    return {f"{name}.md": deferred(f"{name}.md", text.encode("utf-8"))
            for name, text in files.items()}


def assembled(cells: Mapping[str, Deferred], predecessor: Snapshot | None = None) -> Snapshot:
    """The snapshot of ``cells`` in walk order, with the folders their paths name, captured
    after ``predecessor`` when given (as a refresh makes it)."""
    ordered = {p: cells[p] for p in sorted(cells, key=lambda p: p.split("/"))}
    return assemble_snapshot(ordered, frozenset(), _folders(cells), (), predecessor=predecessor)


def changed_cells(before: Snapshot, changes: Mapping[str, str | None]) -> dict[str, Deferred]:
    """``before``'s cells with ``changes`` made: a name's new text, or ``None``: deleted."""
    cells = dict(before.documents.cells)
    for name, text in changes.items():
        if text is None:
            cells.pop(f"{name}.md", None)
        else:
            cells.update(cells_of({name: text}))
    return cells


def _folders(paths: Iterable[str]) -> frozenset[str]:
    """The root and every folder the paths lie in, as a load lists them."""
    directories = {""}
    for path in paths:
        parts = path.split("/")[:-1]
        directories.update("/".join(parts[: n + 1]) for n in range(len(parts)))
    return frozenset(directories)


def snapshot_of(files: Mapping[str, str]) -> Snapshot:
    """An in-memory snapshot of ``{path: text}`` (the loader's parse, without a folder on disk),
    with the folders the paths name, as a load would list them (``project`` reads them)."""
    documents = {path: parse_document(path, text.encode("utf-8")) for path, text in files.items()}
    concepts = {
        d.concept_id: d
        for d in documents.values()
        if d.concept_id is not None and d.parse_error is None
    }
    return Snapshot(
        revision=revision_of([d.record for d in documents.values()]),
        documents=types.MappingProxyType(documents),
        concepts=types.MappingProxyType(dict(sorted(concepts.items()))),
        assets=frozenset(),
        directories=_folders(files),
        skipped=(),
    )


def every_document_built(documents: Documents) -> Documents:
    """``documents`` with every document built, as the warm-up leaves them: a parse-cache save
    writes only built documents."""
    for _ in documents.values():
        pass
    return documents


def fill_parse_cache(bundle: str, cache: str) -> None:
    """The parse cache in the folder ``cache`` (a server's ``BUNDLE_MCP_CACHE_DIR``) filled
    with every document of ``bundle``, as a server leaves it: the next one is a restart."""
    from bundle_mcp.loader import load_bundle
    from bundle_mcp.loader.parse_cache import ParseCache

    snapshot, _ = load_bundle(bundle)
    for doc in snapshot.documents.values():
        doc.markdown  # noqa: B018 (the facts are saved with the document)
    ParseCache(Path(cache)).save(bundle, every_document_built(snapshot.documents))
