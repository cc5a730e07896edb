"""The advertised ``outputSchema``: a tool's output contract OR the error envelope, nothing more.

A failed call sends the envelope as ``structuredContent``; clients that check it against the
advertised schema even on errors (the TypeScript SDK, see test_ts_client.py) would drop the
error otherwise. The dispatcher keeps checking each shape against its own file: a result that
is an envelope is still a broken result, and an envelope that is a result is still broken.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from bundle_mcp.contracts import (
    ENVELOPE_DEF_PREFIX,
    ContractSet,
    advertised_output_schema,
)
from bundle_mcp.errors import INTERNAL_ERROR, INVALID_REQUEST, BundleError

try:
    from tests import golden_runner
except ImportError:  # pytest run without the repository root on sys.path
    import golden_runner  # type: ignore[no-redef]

CONTRACTS = Path(__file__).resolve().parent.parent / "contracts"
HEADER = ("$schema", "$id", "title", "description")


def load(name: str) -> dict[str, Any]:
    return json.loads((CONTRACTS / name).read_text(encoding="utf-8"))


CONTRACT_SET = ContractSet()
TOOLS = CONTRACT_SET.tool_names()
ERROR = load("error.schema.json")


def _goldens() -> dict[str, list[dict[str, Any]]]:
    """Every recorded outcome, by tool: ``{"is_error", "structured"}``."""
    by_tool: dict[str, list[dict[str, Any]]] = {}
    for path in golden_runner.golden_paths():
        by_tool.setdefault(path.parent.name, []).append(golden_runner.load_case(path)["expected"])
    return by_tool


GOLDENS = _goldens()


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


@pytest.mark.parametrize("tool", TOOLS)
def test_the_advertised_schema_is_the_two_contracts_side_by_side(tool: str) -> None:
    advertised = CONTRACT_SET.advertised_output_schema(tool)
    Draft202012Validator.check_schema(advertised)
    contract = load(f"{tool}.output.schema.json")
    assert advertised["$schema"] == contract["$schema"]
    assert advertised["type"] == "object"  # MCP: an outputSchema has an object root
    assert "$id" not in advertised  # neither file's: the TS SDK caches validators by $id
    assert advertised["title"] == contract["title"]
    assert advertised["description"].startswith(contract["description"])
    assert "isError: true" in advertised["description"]
    assert set(advertised) == {"$schema", "title", "description", "type", "anyOf", "$defs"}

    result, envelope = advertised["anyOf"]
    assert result == {k: v for k, v in contract.items() if k not in (*HEADER, "$defs")}
    restored = json.loads(
        json.dumps(envelope).replace(f"#/$defs/{ENVELOPE_DEF_PREFIX}", "#/$defs/")
    )
    assert restored == {k: v for k, v in ERROR.items() if k not in ("$schema", "$id", "$defs")}
    expected_defs = dict(contract.get("$defs", {}))
    expected_defs.update({ENVELOPE_DEF_PREFIX + k: v for k, v in ERROR["$defs"].items()})
    assert advertised["$defs"] == expected_defs

    # Self-contained: local refs only, each resolving inside the document.
    for ref in _refs(advertised):
        assert ref.startswith("#/$defs/"), ref
        assert ref.removeprefix("#/$defs/") in advertised["$defs"], ref


def test_the_advertised_schema_is_a_fresh_copy() -> None:
    first = CONTRACT_SET.advertised_output_schema("search_sections")
    first["anyOf"].clear()
    first["$defs"].clear()
    again = CONTRACT_SET.advertised_output_schema("search_sections")
    assert len(again["anyOf"]) == 2 and again["$defs"]
    assert CONTRACT_SET.output_schema("search_sections") == load(
        "search_sections.output.schema.json"
    )


@pytest.mark.parametrize("tool", TOOLS)
def test_it_accepts_exactly_what_one_of_the_two_contracts_accepts(tool: str) -> None:
    """Over every golden outcome (all tools): advertised(x) == result(x) or envelope(x)."""
    advertised = Draft202012Validator(CONTRACT_SET.advertised_output_schema(tool))
    result = Draft202012Validator(load(f"{tool}.output.schema.json"))
    envelope = Draft202012Validator(ERROR)
    own = GOLDENS.get(tool, [])
    assert any(not o["is_error"] for o in own), f"{tool} has no recorded success"
    # The tool's own outcomes, and the first success of every other tool.
    others = [
        next(o for o in outcomes if not o["is_error"])
        for name, outcomes in sorted(GOLDENS.items())
        if name != tool and any(not o["is_error"] for o in outcomes)
    ]
    for outcome in [*own, *others]:
        instance = outcome["structured"]
        expected = result.is_valid(instance) or envelope.is_valid(instance)
        assert advertised.is_valid(instance) == expected
        if outcome in own:
            assert expected  # goldens satisfy their contracts (test_golden checks which one)

    # Broken shapes stay broken: a result missing a key, an envelope with an extra one.
    success = copy.deepcopy(next(o["structured"] for o in own if not o["is_error"]))
    del success[sorted(success)[0]]
    assert not advertised.is_valid(success)
    failure = BundleError(INVALID_REQUEST, "bad").envelope()
    assert advertised.is_valid(failure)
    assert not advertised.is_valid({**failure, "extra": 1})
    assert not advertised.is_valid({**failure, "code": "no_such_code"})


@pytest.mark.parametrize("tool", TOOLS)
def test_the_dispatcher_still_checks_each_shape_against_its_own_file(tool: str) -> None:
    """An envelope is not a valid result, and a result is not a valid envelope."""
    failure = BundleError(INVALID_REQUEST, "bad").envelope()
    with pytest.raises(BundleError) as info:
        CONTRACT_SET.check_output(tool, failure)
    assert info.value.code == INTERNAL_ERROR
    success = next(o["structured"] for o in GOLDENS[tool] if not o["is_error"])
    CONTRACT_SET.check_output(tool, success)
    with pytest.raises(BundleError) as info:
        CONTRACT_SET.check_envelope(success)
    assert info.value.code == INTERNAL_ERROR


def test_a_definition_clash_or_a_foreign_ref_is_refused() -> None:
    clashing = {"type": "object", "$defs": {ENVELOPE_DEF_PREFIX + "diagnostic": {}}}
    with pytest.raises(ValueError, match="clash"):
        advertised_output_schema(clashing, ERROR)
    foreign = copy.deepcopy(ERROR)
    foreign["properties"]["code"] = {"$ref": "common.schema.json#/$defs/error_code"}
    with pytest.raises(ValueError, match=r"\$ref"):
        advertised_output_schema({"type": "object"}, foreign)


def test_a_contract_without_header_or_definitions_still_composes() -> None:
    advertised = advertised_output_schema({"type": "object", "required": []}, ERROR)
    assert advertised["type"] == "object"
    assert advertised["anyOf"][0] == {"type": "object", "required": []}
    assert advertised["description"].startswith("On a failed call")
    Draft202012Validator.check_schema(advertised)
