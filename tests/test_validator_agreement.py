"""jsonschema-rs (the fast path for results) must agree with jsonschema (the reference).

Every golden's expected result, and a mutated copy of each that breaks its contract, is judged
by both; a disagreement would let the fast path send what the reference rejects.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from bundle_mcp.contracts import ContractSet, contracts_dir

GOLDEN = Path(__file__).parent / "golden"
CASES = sorted(GOLDEN.glob("*/*.json"))


@pytest.fixture(scope="module")
def contracts() -> ContractSet:
    return ContractSet()


def _schema_name(case: Path, is_error: bool) -> str:
    return "error.schema.json" if is_error else f"{case.parent.name}.output.schema.json"


def _reference(name: str) -> Draft202012Validator:
    schema = json.loads((contracts_dir() / name).read_text(encoding="utf-8"))
    return Draft202012Validator(schema, format_checker=Draft202012Validator.FORMAT_CHECKER)


def _break(instance: dict) -> dict:
    broken = copy.deepcopy(instance)
    broken["unexpected_field_for_agreement_test"] = 1  # every object is closed
    return broken


@pytest.mark.parametrize("case", CASES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_fast_and_reference_validators_agree(case: Path, contracts: ContractSet) -> None:
    golden = json.loads(case.read_text(encoding="utf-8"))
    expected = golden["expected"]
    name = _schema_name(case, expected["is_error"])
    reference = _reference(name)
    for instance in (expected["structured"], _break(expected["structured"])):
        fast = contracts.fast_accepts(name, instance)
        if fast is None:
            pytest.skip("jsonschema-rs is not installed")
        assert fast == reference.is_valid(instance)


def test_there_are_goldens_to_compare() -> None:
    assert len(CASES) > 50
