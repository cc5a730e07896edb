"""The tool registry: one module per tool, named like its contract files (sorted by name).

A tool module ends with ``SPEC = ToolSpec(...)`` (:mod:`bundle_mcp.toolspec`): its name, title,
toolset, flags, description, output budget, the function it runs and, when its text block is not
the JSON of the result, the function that renders it. The registry reads nothing else from it.
Modules whose name starts with ``_`` are helpers shared by tools, never tools.
"""

from __future__ import annotations

import importlib

from ..toolspec import TOOLSETS, ToolSpec

__all__ = ["TOOLSETS", "TOOL_MODULES", "load_tools"]

TOOL_MODULES: tuple[str, ...] = (
    "apply_bundle_edit",
    "apply_concept_patch",
    "apply_temporal_upgrade",
    "apply_v02_migration",
    "bundle_summary",
    "check_receipt",
    "concept_diff",
    "concept_history",
    "context",
    "expand_neighbors",
    "fetch_slice",
    "find_path",
    "get_computation",
    "get_neighbors",
    "get_semantic_graph",
    "list_concepts",
    "preview_bundle_edit",
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


def load_tools(names: tuple[str, ...] = TOOL_MODULES) -> dict[str, ToolSpec]:
    """Import ``bundle_mcp.tools.<name>`` for each name: its ``SPEC``, keyed by name.

    Every listed module must import and declare a spec of its own name: anything else is a bug
    and propagates.
    """
    specs: dict[str, ToolSpec] = {}
    for name in names:
        qualified = f"{__name__}.{name}"
        spec = importlib.import_module(qualified).SPEC
        if not isinstance(spec, ToolSpec) or spec.name != name:
            raise ImportError(f"{qualified}.SPEC must be the ToolSpec of {name!r}")
        specs[name] = spec
    return specs
