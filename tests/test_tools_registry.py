"""The registry keeps four names in step: module, contract pair, golden folder, tool name.

Every tool listed in ``bundle_mcp.tools.TOOL_MODULES`` needs a module with the tool interface,
``contracts/<tool>.input.schema.json`` and ``.output.schema.json``, and a golden folder with at
least one success and one error case; every contract pair in contracts/ must belong to a tool.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path

import pytest

from bundle_mcp.tools import TOOL_MODULES
from bundle_mcp.toolspec import ToolSpec

REPO = Path(__file__).resolve().parent.parent
CONTRACTS = REPO / "contracts"
GOLDEN = REPO / "tests" / "golden"
# Schemas that are not one tool's: shared definitions, the error envelope, the readers file.
SHARED_CONTRACTS = {"common.schema.json", "error.schema.json", "readers.schema.json"}
MIB = 1024 * 1024


def _names() -> list[str]:
    return list(TOOL_MODULES)


@pytest.mark.parametrize("name", _names())
def test_tool_module_has_the_interface(name: str) -> None:
    """Each tool module declares one typed spec, and the registry reads nothing else."""
    module = importlib.import_module(f"bundle_mcp.tools.{name}")
    spec = module.SPEC
    assert isinstance(spec, ToolSpec) and spec.name == name
    assert isinstance(spec.read_only, bool) and isinstance(spec.needs_parseable, bool)
    assert isinstance(spec.description, str) and len(spec.description) > 40
    assert callable(spec.run) and (spec.text is None or callable(spec.text))
    assert isinstance(spec.output_budget, int) and 0 < spec.output_budget <= 64 * MIB
    for legacy in ("READ_ONLY", "NEEDS_PARSEABLE", "NEEDS_BUNDLE_PATH", "NEEDS_SEMANTIC_INDEX",
                   "TOOLSET", "TITLE", "OUTPUT_BUDGET"):
        assert not hasattr(module, legacy), f"{name}.{legacy}: declare it in SPEC"


@pytest.mark.parametrize("name", _names())
def test_tool_has_a_contract_pair(name: str) -> None:
    for kind in ("input", "output"):
        path = CONTRACTS / f"{name}.{kind}.schema.json"
        assert path.is_file(), f"missing contracts/{path.name}"
        json.loads(path.read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", _names())
def test_tool_has_success_and_error_goldens(name: str) -> None:
    folder = GOLDEN / name
    cases = sorted(folder.glob("*.json"))
    assert cases, f"no golden cases in tests/golden/{name}/"
    outcomes = set()
    for path in cases:
        expected = json.loads(path.read_text(encoding="utf-8")).get("expected") or {}
        outcomes.add(expected.get("is_error"))
    assert False in outcomes, f"tests/golden/{name}/ has no success case"
    assert True in outcomes, f"tests/golden/{name}/ has no error case"


def test_every_contract_pair_belongs_to_a_tool() -> None:
    names = set(_names())
    orphans = []
    for path in sorted(CONTRACTS.glob("*.json")):
        if path.name in SHARED_CONTRACTS:
            continue
        for suffix in (".input.schema.json", ".output.schema.json"):
            if path.name.endswith(suffix):
                if path.name[: -len(suffix)] not in names:
                    orphans.append(path.name)
                break
        else:
            orphans.append(path.name)
    assert orphans == []


def test_every_golden_folder_belongs_to_a_tool() -> None:
    folders = {p.name for p in GOLDEN.iterdir() if p.is_dir()} if GOLDEN.is_dir() else set()
    assert folders <= set(_names())


def test_registry_is_sorted_and_unique() -> None:
    names = _names()
    assert names == sorted(set(names))
