"""Where the contract files are, what they are called, and the bounds in them that are the
loader's file cap."""

from __future__ import annotations

import importlib.resources
from pathlib import Path
from typing import Any

from ..limits import DEFAULT_CAPS, Caps

__all__ = ["ERROR_SCHEMA", "FILE_CAP_BOUNDS", "INPUT_SUFFIX", "OUTPUT_SUFFIX", "contracts_dir",
           "with_caps"]

INPUT_SUFFIX = ".input.schema.json"
OUTPUT_SUFFIX = ".output.schema.json"
ERROR_SCHEMA = "error.schema.json"


# most one item per Markdown file or concept of the bundle. They hold the default cap in the
# files, and ContractSet puts the configured cap there, so what is advertised and enforced
# follows --max-files. Every other 10000 of the contracts bounds something else and stays
# (docs/decisions/loading.md, 2026-12-03, lists them): a concept's own lists (read_concept's
# projections, MAX_PROJECTED_ITEMS), diagnostics, blockers, references and date mappings.
# tests/test_caps.py checks that each pointer holds the default cap in its file.
FILE_CAP_BOUNDS: tuple[tuple[str, str], ...] = (
    ("list_concepts.output.schema.json", "/properties/concepts/maxItems"),
    ("get_computation.output.schema.json", "/properties/used_by/maxItems"),
    ("apply_concept_patch.output.schema.json", "/properties/changed_paths/maxItems"),
    ("apply_bundle_edit.output.schema.json", "/properties/changed_paths/maxItems"),
    ("preview_bundle_edit.output.schema.json", "/properties/files/maxItems"),
    ("apply_v02_migration.output.schema.json", "/properties/changed_paths/maxItems"),
    ("preview_concept_patch.output.schema.json", "/properties/affected_paths/maxItems"),
    ("preview_v02_migration.output.schema.json", "/properties/affected_paths/maxItems"),
    ("preview_v02_migration.input.schema.json", "/properties/generated_at/maxItems"),
    ("apply_v02_migration.input.schema.json", "/properties/generated_at/maxItems"),
    *(
        (file, f"/$defs/plan_proof/properties/{field}/maxItems")
        for file in ("preview_v02_migration.output.schema.json",
                     "apply_v02_migration.input.schema.json")
        for field in ("reads", "writes", "deletes", "renames", "changed_files")
    ),
)


def with_caps(documents: dict[str, Any], caps: Caps) -> None:
    """Put ``caps.max_files`` at every :data:`FILE_CAP_BOUNDS` pointer of ``documents``."""
    for file, pointer in FILE_CAP_BOUNDS:
        *parents, key = pointer.lstrip("/").split("/")
        node = documents[file]
        for part in parents:
            node = node[part]
        if node[key] != DEFAULT_CAPS.max_files:
            raise ValueError(f"{file}{pointer} is not the file cap {DEFAULT_CAPS.max_files}")
        node[key] = caps.max_files



def contracts_dir() -> Path:
    """Where the contract files are: the wheel's package data, else the source checkout.

    The wheel maps ``contracts/`` to the data package ``bundle_mcp.contract_files``; an
    editable install leaves them at the repository root, three levels above this module.
    """
    packaged = importlib.resources.files("bundle_mcp") / "contract_files"
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[3] / "contracts"
