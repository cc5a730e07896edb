"""ContractSet: contracts loaded once, requests and results checked, violations worded by us."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError

from bundle_mcp.contracts import (
    MAX_INPUT_DIAGNOSTICS,
    ContractSet,
    Violation,
    contracts_dir,
    json_path,
)
from bundle_mcp.errors import INTERNAL_ERROR, INVALID_REQUEST, RESOURCE_LIMIT, BundleError
from bundle_mcp.limits import Caps

CONTRACTS = Path(__file__).resolve().parent.parent / "contracts"
TOOLS = (
    "bundle_summary",
    "get_neighbors",
    "get_semantic_graph",
    "list_concepts",
    "read_concept",
    "search_concepts",
    "search_sections",
    "validate_bundle",
)


@pytest.fixture(scope="module")
def contracts() -> ContractSet:
    return ContractSet()


def rejection(contracts: ContractSet, tool: str, args: Any) -> BundleError:
    with pytest.raises(BundleError) as info:
        contracts.check_input(tool, args)
    return info.value


def errors_of(error: BundleError) -> list[dict[str, Any]]:
    return [d for d in error.envelope()["diagnostics"] if d["severity"] == "ERROR"]


def test_source_checkout_falls_back_to_the_repository_contracts_folder() -> None:
    assert contracts_dir().resolve() == CONTRACTS.resolve()


def test_tool_names_are_the_tools_with_both_contract_files(contracts: ContractSet) -> None:
    inputs = {p.name.removesuffix(".input.schema.json") for p in CONTRACTS.glob("*.input.*")}
    outputs = {p.name.removesuffix(".output.schema.json") for p in CONTRACTS.glob("*.output.*")}
    assert contracts.tool_names() == tuple(sorted(inputs & outputs))
    assert set(TOOLS) <= set(contracts.tool_names())


@pytest.mark.parametrize("tool", TOOLS)
def test_schemas_are_the_files_verbatim_and_copies(contracts: ContractSet, tool: str) -> None:
    for kind, get in (("input", contracts.input_schema), ("output", contracts.output_schema)):
        on_disk = json.loads((CONTRACTS / f"{tool}.{kind}.schema.json").read_text("utf-8"))
        schema = get(tool)
        assert schema == on_disk
        schema["properties"] = {}  # editing the copy must not edit the contract
        assert get(tool) == on_disk


def test_valid_arguments_pass(contracts: ContractSet) -> None:
    contracts.check_input("search_concepts", {"query": "roast", "limit": 100})
    contracts.check_input("list_concepts", {})


def test_limit_above_maximum_is_resource_limit_with_a_recovery_step(
    contracts: ContractSet,
) -> None:
    error = rejection(contracts, "search_concepts", {"query": "roast", "limit": 101})
    envelope = error.envelope()
    assert envelope["code"] == RESOURCE_LIMIT
    assert envelope["retryable"] is False
    assert [(d["code"], d["field"]) for d in errors_of(error)] == [("invalid_input", "$.limit")]
    steps = [d for d in envelope["diagnostics"] if d["code"] == "recovery_step"]
    assert [s["severity"] for s in steps] == ["INFO"]
    assert "$.limit" in steps[0]["message"]


def test_too_long_string_is_resource_limit(contracts: ContractSet) -> None:
    error = rejection(contracts, "search_concepts", {"query": "q" * 513})
    assert error.code == RESOURCE_LIMIT
    assert "q" * 20 not in json.dumps(error.envelope())  # the value itself is never echoed


def test_limit_below_minimum_is_invalid_request(contracts: ContractSet) -> None:
    error = rejection(contracts, "search_concepts", {"query": "roast", "limit": 0})
    assert error.code == INVALID_REQUEST
    assert [d["field"] for d in errors_of(error)] == ["$.limit"]


@pytest.mark.parametrize("value", [1.0, True, "5", None])
def test_limit_must_be_a_real_integer(contracts: ContractSet, value: Any) -> None:
    error = rejection(contracts, "search_concepts", {"query": "roast", "limit": value})
    assert error.code == INVALID_REQUEST
    assert errors_of(error)[0]["message"].startswith("limit must be an integer")


def test_missing_required_property_points_at_the_property(contracts: ContractSet) -> None:
    error = rejection(contracts, "search_concepts", {})
    [diag] = errors_of(error)
    assert diag["field"] == "$.query"
    assert diag["message"].startswith("query is required.")
    # The guidance sentence comes from the property's schema description.
    assert "literal substring" in diag["message"]


def test_unknown_property_is_named_and_known_ones_listed(contracts: ContractSet) -> None:
    error = rejection(contracts, "search_concepts", {"query": "x", "zeta": 1, "alpha": 2})
    assert error.code == INVALID_REQUEST
    diags = errors_of(error)
    assert [d["field"] for d in diags] == ["$.alpha", "$.zeta"]
    assert (
        "Known arguments: as_of, bundle_path, exclude_stale, limit, min_trust, project, query, "
        "status, tags, temporal_profile, types." in diags[0]["message"]
    )


def test_odd_property_names_are_quoted_in_the_path(contracts: ContractSet) -> None:
    error = rejection(contracts, "list_concepts", {"a b": 1, "n" * 100: 2})
    fields = [d["field"] for d in errors_of(error)]
    assert fields == ['$["a b"]', '$["' + "n" * 64 + '…"]']


def test_a_limit_breach_wins_over_other_violations(contracts: ContractSet) -> None:
    """As in the reference: any limit keyword breached makes the whole call resource_limit."""
    error = rejection(contracts, "search_concepts", {"query": "x", "limit": 500, "extra": 1})
    assert error.code == RESOURCE_LIMIT
    assert [d["field"] for d in errors_of(error)] == ["$.extra", "$.limit"]


def test_at_most_eight_diagnostics_sorted_by_field(contracts: ContractSet) -> None:
    args = {"query": "x", **{f"k{i:02d}": i for i in range(20)}}
    error = rejection(contracts, "search_concepts", args)
    fields = [d["field"] for d in error.envelope()["diagnostics"]]
    assert len(fields) == MAX_INPUT_DIAGNOSTICS
    assert fields == sorted(fields)
    assert fields[0] == "$.k00"


def test_conditional_schema_checks_as_of_against_the_chosen_profile(
    contracts: ContractSet,
) -> None:
    contracts.check_input("list_concepts", {"as_of": "2024-05-17"})
    error = rejection(
        contracts, "list_concepts", {"temporal_profile": "instant-0b87c52", "as_of": "2024-05-17"}
    )
    [diag] = errors_of(error)
    assert diag["field"] == "$.as_of"
    assert "RFC 3339" in diag["message"]


def test_enum_violation_lists_the_choices(contracts: ContractSet) -> None:
    error = rejection(contracts, "list_concepts", {"temporal_profile": "weekly"})
    [diag] = errors_of(error)
    assert '"date-3fcbb9f", "instant-0b87c52"' in diag["message"]


def test_non_object_arguments_are_invalid_request(contracts: ContractSet) -> None:
    error = rejection(contracts, "list_concepts", ["not", "an", "object"])
    assert error.code == INVALID_REQUEST
    assert errors_of(error)[0]["field"] == "$"


def test_messages_never_name_the_callers_host_path(contracts: ContractSet) -> None:
    error = rejection(contracts, "list_concepts", {"bundle_path": "home/alice/secret-bundle"})
    text = json.dumps(error.envelope())
    assert "alice" not in text
    [diag] = errors_of(error)
    assert diag["field"] == "$.bundle_path"
    assert diag["message"] == "bundle_path must be an absolute path."


def test_check_output_accepts_a_conforming_result(contracts: ContractSet) -> None:
    contracts.check_output(
        "search_sections",
        {
            "query": "x",
            "terms": ["x"],
            "snapshot_revision": "0" * 64,
            "total": 0,
            "truncated": False,
            "hits": [],
        },
    )


def test_check_output_turns_a_broken_result_into_internal_error(
    contracts: ContractSet, caplog: pytest.LogCaptureFixture
) -> None:
    # caplog.set_level, not at_level: a BundleError passing through a @contextmanager trips
    # over its frozen dataclass (contextlib assigns __traceback__).
    caplog.set_level(logging.ERROR, logger="bundle_mcp.contracts")
    with pytest.raises(BundleError) as info:
        contracts.check_output("search_sections", {"query": "x"})
    assert info.value.code == INTERNAL_ERROR
    assert info.value.envelope()["message"] == "internal error; see the server log"
    assert "search_sections.output.schema.json" in caplog.text


def test_check_envelope(contracts: ContractSet) -> None:
    good = BundleError(INVALID_REQUEST, "bad").envelope()
    contracts.check_envelope(good)
    with pytest.raises(BundleError) as info:
        contracts.check_envelope({**good, "code": "schema_validation"})
    assert info.value.code == INTERNAL_ERROR


def test_remote_refs_are_never_fetched(tmp_path: Path) -> None:
    schema = {"$ref": "https://example.invalid/schema.json"}
    (tmp_path / "t.input.schema.json").write_text(json.dumps(schema), "utf-8")
    (tmp_path / "t.output.schema.json").write_text("{}", "utf-8")
    with pytest.raises(Exception, match="Unresolvable"):
        ContractSet(tmp_path).check_input("t", {})


def test_format_is_asserted(tmp_path: Path) -> None:
    schema = {"type": "object", "properties": {"day": {"type": "string", "format": "date"}}}
    (tmp_path / "t.input.schema.json").write_text(json.dumps(schema), "utf-8")
    (tmp_path / "t.output.schema.json").write_text("{}", "utf-8")
    contracts = ContractSet(tmp_path)
    contracts.check_input("t", {"day": "2024-02-29"})
    error = rejection(contracts, "t", {"day": "2023-02-29"})
    assert errors_of(error)[0]["message"] == "day is not a valid date."


def test_a_different_validator_library_can_be_plugged_in(tmp_path: Path) -> None:
    (tmp_path / "t.input.schema.json").write_text('{"type": "object"}', "utf-8")
    (tmp_path / "t.output.schema.json").write_text('{"type": "object"}', "utf-8")

    class EverythingTooBig:
        def __init__(self, schema: Mapping[str, Any]) -> None:
            self.schema = schema

        def violations(self, instance: Any) -> Iterator[Violation]:
            yield Violation(("n",), "maximum", 3, {}, instance, "n > 3")

    contracts = ContractSet(tmp_path, validator_factory=EverythingTooBig)
    error = rejection(contracts, "t", {"n": 4})
    assert error.code == RESOURCE_LIMIT
    assert errors_of(error)[0]["message"] == "n is greater than the maximum 3."


@pytest.mark.parametrize(
    ("path", "expected"),
    [((), "$"), (("limit",), "$.limit"), (("kinds", 0), "$.kinds[0]"), (("@id",), '$["@id"]')],
)
def test_json_path(path: tuple[str | int, ...], expected: str) -> None:
    assert json_path(path) == expected


def test_lone_surrogates_are_refused_and_never_echoed(contracts: ContractSet) -> None:
    """Valid JSON ("\\ud800") but not Unicode: echoed back, it could not be sent as UTF-8."""
    error = rejection(contracts, "search_concepts", {"query": "ro\ud800", "k\udc00": ["\ud800"]})
    assert error.code == INVALID_REQUEST
    fields = [d["field"] for d in errors_of(error)]
    assert fields == ["$.query", '$["k\\\\udc00"]', '$["k\\\\udc00"][0]']
    json.dumps(error.envelope(), ensure_ascii=False).encode("utf-8")  # encodable


def test_only_contracts_from_elsewhere_are_checked_against_the_metaschema_as_they_compile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The package's own contracts are checked by ``test_header_and_metaschema`` (and with other
    caps below), so a call does not check its tool's schema again (15-20 ms on the first call
    of each tool); a directory of other contracts is checked, and a broken schema refused."""
    checked: list[Any] = []
    real = Draft202012Validator.check_schema

    def counted(schema: Any, *args: Any, **kwargs: Any) -> None:
        checked.append(schema)
        real(schema, *args, **kwargs)

    monkeypatch.setattr(Draft202012Validator, "check_schema", counted)
    arguments = {"bundle_path": "/b", "concept_id": "a"}
    ContractSet().check_input("read_concept", arguments)
    ContractSet(caps=Caps(max_files=60_000)).check_input("read_concept", arguments)
    assert checked == []
    ContractSet(contracts_dir()).check_input("read_concept", arguments)
    assert len(checked) == 1
    (tmp_path / "t.input.schema.json").write_text('{"type": "nothing"}', "utf-8")
    (tmp_path / "t.output.schema.json").write_text("{}", "utf-8")
    with pytest.raises(SchemaError):
        ContractSet(tmp_path).check_input("t", {})


def test_the_contracts_with_other_caps_are_valid_schemas() -> None:
    """What the caps change (the bounds that are the file cap) leaves every contract a valid
    Draft 2020-12 schema: enforced unchecked, like the files themselves."""
    contracts = ContractSet(caps=Caps(max_files=60_000, max_bytes=400_000_000))
    for name, schema in contracts._documents.items():
        Draft202012Validator.check_schema(schema)
        assert name.endswith(".schema.json")
