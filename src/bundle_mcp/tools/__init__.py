"""The tool registry: one module per tool, named like its contract files (sorted by name).

A tool module exposes ``NAME``, ``TITLE`` (for people), ``TOOLSET`` (one of :data:`TOOLSETS`),
``READ_ONLY`` (true when it writes nothing: ``serve --read-only`` keeps only these, and only these
are checked for cancellation after they ran), ``DESCRIPTION``, ``NEEDS_PARSEABLE``,
``OUTPUT_BUDGET`` (optional; 64 MiB by default) and ``run(snapshot, params, token) -> dict``,
and optionally ``text(result, snapshot) -> str`` when its text block is not the JSON of the result.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["TOOLSETS", "TOOL_MODULES", "load_tools"]

# What `serve --tools` selects from, in the order the help lists them.
TOOLSETS: dict[str, str] = {
    "read": "search, read and list concepts, their neighbours, the graph, validation",
    "walk": "bounded widening: expand_neighbors, fetch_slice, query_subgraph, visualize_graph",
    "write": "write_concept and the preview_*/apply_* pairs",
    "semantic": "search_semantic (needs the semantic extra)",
}

TOOL_MODULES: tuple[str, ...] = (
    "apply_concept_patch",
    "apply_temporal_upgrade",
    "apply_v02_migration",
    "expand_neighbors",
    "fetch_slice",
    "get_neighbors",
    "get_semantic_graph",
    "list_concepts",
    "preview_concept_patch",
    "preview_temporal_upgrade",
    "preview_v02_migration",
    "query_subgraph",
    "read_concept",
    "search_concepts",
    "search_sections",
    "search_semantic",
    "validate_bundle",
    "visualize_graph",
    "write_concept",
)


def load_tools(names: tuple[str, ...] = TOOL_MODULES) -> dict[str, ModuleType]:
    """Import ``bundle_mcp.tools.<name>`` for each name, keyed by the module's ``NAME``.

    Every listed module must import: a failure is a bug and propagates.
    """
    modules: dict[str, ModuleType] = {}
    for name in names:
        qualified = f"{__name__}.{name}"
        module = importlib.import_module(qualified)
        if getattr(module, "NAME", None) != name:
            raise ImportError(f"{qualified}.NAME must be {name!r}")
        modules[name] = module
    return modules
