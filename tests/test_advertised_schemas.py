"""The advertised ``outputSchema``: a tool's output contract OR the error envelope, nothing more.

A failed call sends the envelope as ``structuredContent``; clients that check it against the
advertised schema even on errors (the TypeScript SDK, see test_ts_client.py) would drop the
error otherwise. The dispatcher keeps checking each shape against its own file: a result that
is an envelope is still a broken result, and an envelope that is a result is still broken.

Both branches leave out the annotation keywords (a client compiles every outputSchema before
its first call, issue 25): proved structurally against the 2020-12 meta-schemas (only keywords
of the meta-data vocabulary and ``$comment`` are missing, and only where a schema stands) and
by behaviour (golden outcomes and thousands of mutants of them are accepted or rejected alike).
"""

from __future__ import annotations

import copy
import json
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from jsonschema import Draft202012Validator
from jsonschema_specifications import REGISTRY as SPECIFICATIONS

from bundle_mcp.contracts import (
    ENVELOPE_DEF_PREFIX,
    ON_ERROR,
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


# What 2020-12 itself says, read from its meta-schemas (not from bundle_mcp): the keywords that
# are annotations only, and where a keyword's value is one subschema, a map or a list of them.
_META = "https://json-schema.org/draft/2020-12/meta/"


def _vocabulary(name: str) -> dict[str, Any]:
    properties: dict[str, Any] = SPECIFICATIONS.contents(_META + name)["properties"]
    return properties


SPEC_ANNOTATIONS = frozenset(_vocabulary("meta-data")) | {"$comment"}
_SUB = {"$dynamicRef": "#meta"}
_VOCABULARIES = [_vocabulary(v) for v in ("core", "applicator", "unevaluated", "content")]
ONE_SCHEMA = frozenset(k for v in _VOCABULARIES for k, rule in v.items() if rule == _SUB)
SCHEMA_MAPS = frozenset(
    k for v in _VOCABULARIES for k, rule in v.items() if rule.get("additionalProperties") == _SUB
)
SCHEMA_LISTS = frozenset(
    k for v in _VOCABULARIES for k, rule in v.items() if rule == {"$ref": "#/$defs/schemaArray"}
)


def _only_annotations_left_out(contract: Any, advertised: Any, where: str) -> None:
    """``advertised`` is the schema ``contract`` without its annotation keywords, wherever a
    schema stands in it, and identical otherwise (a property named "title" stays)."""
    if not isinstance(contract, dict):  # a boolean schema
        assert advertised == contract, where
        return
    assert isinstance(advertised, dict), where
    assert set(contract) - set(advertised) <= SPEC_ANNOTATIONS, (where, set(contract))
    assert set(advertised) <= set(contract) - SPEC_ANNOTATIONS, (where, set(advertised))
    for key, value in advertised.items():
        here = f"{where}/{key}"
        if key in ONE_SCHEMA:
            _only_annotations_left_out(contract[key], value, here)
        elif key in SCHEMA_MAPS:
            assert set(value) == set(contract[key]), here
            for name, schema in value.items():
                _only_annotations_left_out(contract[key][name], schema, f"{here}/{name}")
        elif key in SCHEMA_LISTS:
            assert len(value) == len(contract[key]), here
            for number, (was, now) in enumerate(zip(contract[key], value, strict=True)):
                _only_annotations_left_out(was, now, f"{here}/{number}")
        else:
            assert value == contract[key], here


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
    assert advertised["description"] == ON_ERROR
    assert "isError: true" in advertised["description"]
    assert set(advertised) == {"$schema", "description", "type", "anyOf", "$defs"}

    result, envelope = advertised["anyOf"]
    _only_annotations_left_out(
        {k: v for k, v in contract.items() if k not in (*HEADER, "$defs")}, result, "result"
    )
    restored = json.loads(
        json.dumps(envelope).replace(f"#/$defs/{ENVELOPE_DEF_PREFIX}", "#/$defs/")
    )
    _only_annotations_left_out(
        {k: v for k, v in ERROR.items() if k not in ("$schema", "$id", "$defs")},
        restored, "envelope",
    )
    expected_defs = dict(contract.get("$defs", {}))
    expected_defs.update({ENVELOPE_DEF_PREFIX + k: v for k, v in ERROR["$defs"].items()})
    assert set(advertised["$defs"]) == set(expected_defs)
    for name, schema in expected_defs.items():
        _only_annotations_left_out(schema, advertised["$defs"][name], f"$defs/{name}")

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


def _paths(node: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    yield path
    if isinstance(node, dict):
        for key in sorted(node):
            yield from _paths(node[key], (*path, key))
    elif isinstance(node, list):
        for number, item in enumerate(node):
            yield from _paths(item, (*path, number))


def _replacements(value: Any) -> list[Any]:
    """Values to put where ``value`` was: other types, edge values, a key less or more."""
    others: list[Any] = [None, True, 0, -1, 2**40, 1.5, "", "x", [], {}]
    if isinstance(value, dict):
        others += [{k: v for k, v in value.items() if k != key} for key in sorted(value)]
        others.append({**value, "zz_unknown": 1})
    elif isinstance(value, list) and value:
        others += [value[:-1], [*value, value[0]], [*value, *value], [None, *value],
                   [value[0]] * 257]
    elif isinstance(value, str):
        others += [value + "\n", value.upper(), "x" * 5000, "2026-13-45", "not/a valid id",
                   "#L9-L1", value[:-1]]
    elif isinstance(value, bool):
        others += [not value, 1]
    elif isinstance(value, int):
        others += [value - 1, value + 1, -value - 1, float(value), str(value)]
    return [other for other in others if other != value or type(other) is not type(value)]


def _with(instance: Any, path: tuple[str | int, ...], value: Any) -> Any:
    if not path:
        return value
    copied = copy.copy(instance)
    copied[path[0]] = _with(instance[path[0]], path[1:], value)
    return copied


def _get(instance: Any, path: tuple[str | int, ...]) -> Any:
    for part in path:
        instance = instance[part]
    return instance


MUTANTS_PER_OUTCOME = 40


@pytest.mark.parametrize("tool", TOOLS)
def test_mutants_of_every_outcome_are_accepted_exactly_when_a_contract_accepts_them(
    tool: str,
) -> None:
    """Not loosened, not tightened: over each golden outcome of the tool and mutants of it (a
    value replaced by another type, an edge value, a key dropped or added), the advertised
    schema's verdict is the output contract's OR the envelope's, formats asserted."""
    def compiled(schema: dict[str, Any]) -> Any:
        return jsonschema_rs.validator_for(schema, validate_formats=True)

    advertised = compiled(CONTRACT_SET.advertised_output_schema(tool))
    result = compiled(load(f"{tool}.output.schema.json"))
    envelope = compiled(ERROR)
    rng = random.Random(f"mutants of {tool}")  # the same mutants on every run
    accepted = rejected = 0
    for outcome in GOLDENS[tool]:
        instance = outcome["structured"]
        paths = list(_paths(instance))
        mutants = [instance]
        for _ in range(MUTANTS_PER_OUTCOME):
            path = rng.choice(paths)
            mutants.append(_with(instance, path, rng.choice(_replacements(_get(instance, path)))))
        for mutant in mutants:
            expected = result.is_valid(mutant) or envelope.is_valid(mutant)
            assert advertised.is_valid(mutant) == expected, (outcome, mutant)
            accepted += expected
            rejected += not expected
    assert accepted and rejected  # both verdicts were met, so the comparison says something


def test_annotations_are_left_out_wherever_a_schema_stands_and_nowhere_else() -> None:
    """Every keyword that holds subschemas, per the 2020-12 meta-schemas, with annotations in
    them; a property named like an annotation, and annotation words inside data, stay."""
    noted = {"title": "t", "description": "d", "$comment": "c", "examples": ["x"],
             "default": "x", "deprecated": False, "readOnly": True, "writeOnly": False}
    leaf = {"type": "string", **noted}
    contract: dict[str, Any] = {
        "$schema": "https://json-schema.org/draft/2020-12/schema", "title": "T", "type": "object",
        "required": ["title", "description"],
        "dependentRequired": {"description": ["title"]},
        "properties": {"title": leaf, "description": leaf,
                       "kind": {"enum": [{"description": "data"}], **noted},
                       "fixed": {"const": {"title": "data"}, **noted}},
        **{k: leaf for k in sorted(ONE_SCHEMA - {"$defs"})},
        **{k: {"title": leaf, "x": leaf} for k in sorted(SCHEMA_MAPS - {"properties"})},
        **{k: [leaf, leaf] for k in sorted(SCHEMA_LISTS)},
        **noted,
    }
    contract["$defs"]["title"] = {**leaf, "$ref": "#/$defs/x"}
    advertised = advertised_output_schema(contract, ERROR)
    Draft202012Validator.check_schema(advertised)
    result = advertised["anyOf"][0]
    body = {k: v for k, v in contract.items() if k not in ("$schema", "title", "$defs", *noted)}
    _only_annotations_left_out(body, result, "result")
    for name in ("title", "x"):
        _only_annotations_left_out(contract["$defs"][name], advertised["$defs"][name], name)
    assert result["properties"]["title"] == {"type": "string"}
    assert result["required"] == ["title", "description"]
    assert result["dependentRequired"] == {"description": ["title"]}
    assert result["properties"]["kind"] == {"enum": [{"description": "data"}]}
    assert result["properties"]["fixed"] == {"const": {"title": "data"}}


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
    assert advertised["description"] == ON_ERROR
    Draft202012Validator.check_schema(advertised)
