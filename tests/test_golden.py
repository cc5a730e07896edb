"""Golden cases (tests/golden/<tool>/<case>.json) through the real dispatch path.

Each case must reproduce its recorded outcome exactly, and the recorded outcome itself must
satisfy the tool's output contract (success) or the error envelope contract (error), so a golden
can never disagree with its contract. Regenerate with ``make update-goldens`` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

try:
    from tests import golden_runner
except ImportError:  # pytest run without the repository root on sys.path
    import golden_runner  # type: ignore[no-redef]

CONTRACTS = golden_runner.REPO / "contracts"
PATHS = golden_runner.golden_paths()


def _validator(name: str) -> Draft202012Validator:
    schema = json.loads((CONTRACTS / name).read_text(encoding="utf-8"))
    return Draft202012Validator(schema)


def _contract_errors(validator: Draft202012Validator, instance: Any) -> list[str]:
    return [
        f"{e.json_path}: {e.message[:200]}"
        for e in sorted(validator.iter_errors(instance), key=lambda e: e.json_path)
    ]


def test_golden_cases_exist() -> None:
    """Every read tool of this engineer has recorded cases."""
    assert PATHS, "no golden cases found under tests/golden"


@pytest.mark.parametrize("path", PATHS, ids=golden_runner.case_id)
def test_golden_case(path: Path, tmp_path: Path) -> None:
    """The outcome equals the recorded one, and the recorded one satisfies its contract."""
    case = golden_runner.load_case(path)
    assert set(case) <= {"description", "bundle", "setup", "reader", "arguments", "expected"}
    assert case.get("description"), "a golden case says what it pins"
    expected = case.get("expected")
    assert isinstance(expected, dict), "run `make update-goldens` to record this case"

    tool = path.parent.name
    if expected["is_error"]:
        validator = _validator("error.schema.json")
    else:
        validator = _validator(f"{tool}.output.schema.json")
    assert _contract_errors(validator, expected["structured"]) == []

    got = golden_runner.run_case({**case, "tool": tool}, tmp_path)
    assert got == expected
