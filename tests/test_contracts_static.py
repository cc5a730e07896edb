"""Static checks of the wire contracts in contracts/*.json.

These tests read the JSON files only (no bundle_mcp import): every contract is a well-formed,
self-contained draft 2020-12 schema with closed objects, its shared definitions equal the ones in
common.schema.json, and a few sample instances are accepted or rejected as the contracts promise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

CONTRACTS = Path(__file__).resolve().parent.parent / "contracts"
DRAFT = "https://json-schema.org/draft/2020-12/schema"
ID_BASE = "urn:bundle-mcp:contract:"  # a name, not an address: nothing is served there

READ_TOOLS = (
    "bundle_summary",
    "list_concepts",
    "read_concept",
    "validate_bundle",
    "get_semantic_graph",
    "search_concepts",
    "get_neighbors",
    "search_sections",
)

# Object subschemas that are open on purpose: (file name, JSON pointer). Everything else that is
# an object schema must say "additionalProperties": false.
OPEN_OBJECTS = {
    ("get_semantic_graph.output.schema.json", "/properties/@context"),
    ("get_semantic_graph.output.schema.json", "/$defs/graph_node"),
    ("read_concept.output.schema.json", "/$defs/projection/properties/unknown"),
    # What an agent bound and what its executor returned: any JSON, judged by the checks.
    ("check_receipt.input.schema.json", "/properties/parameters"),
    ("check_receipt.input.schema.json", "/properties/receipt"),
}

# Output keys that are optional on purpose: (file name, JSON pointer) -> keys. The search tools
# report their filters (and search_sections/search_semantic their as_of and temporal_profile)
# only when a filter argument was given, so that an unfiltered answer keeps its bytes.
OPTIONAL_OUTPUT_KEYS = {
    ("search_concepts.output.schema.json", ""): {"filters"},
    ("search_sections.output.schema.json", ""): {
        "filters", "as_of", "temporal_profile", "ranking", "ranking_note",
    },
    ("search_semantic.output.schema.json", ""): {"filters", "as_of", "temporal_profile"},
    ("context.output.schema.json", ""): {"filters"},
    # Only on an item that stands for copies (most have none; every byte costs the budget).
    ("context.output.schema.json", "/$defs/item"): {"also_in"},
    # Only for a concept that links to an Attested Computation (the okf-mcp shape otherwise).
    ("read_concept.output.schema.json", ""): {"uses_computations"},
    # Only for a remote bundle (git URL or archive), so a folder's summary keeps its bytes.
    ("bundle_summary.output.schema.json", ""): {"source"},
    # suggested_next.arguments: the arguments of whichever tool it names.
    ("context.output.schema.json", "/properties/suggested_next/properties/arguments"): {
        "question", "max_tokens", "hybrid", "types", "tags", "project", "status", "min_trust",
        "exclude_stale", "temporal_profile", "as_of", "concept_id", "entity_id",
    },
}

FILES = sorted(CONTRACTS.glob("*.json"))
FILE_IDS = [p.name for p in FILES]


def load(name: str) -> dict[str, Any]:
    return json.loads((CONTRACTS / name).read_text(encoding="utf-8"))


def walk(node: Any, pointer: str = "") -> Iterator[tuple[str, Any]]:
    """Every dict in the schema document with its JSON pointer."""
    if isinstance(node, dict):
        yield pointer, node
        for key, value in node.items():
            escaped = key.replace("~", "~0").replace("/", "~1")
            yield from walk(value, f"{pointer}/{escaped}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from walk(value, f"{pointer}/{index}")


def is_object_schema(node: dict[str, Any]) -> bool:
    declared = node.get("type")
    if declared == "object":
        return True
    return isinstance(declared, list) and "object" in declared


def resolve(document: Any, pointer: str) -> Any:
    node = document
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def subschema_pointers(document: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Dicts that are schemas (skips the insides of enum/const/default/examples values)."""
    skip = ("enum", "const", "default", "examples")
    for pointer, node in walk(document):
        parts = pointer.split("/")
        if any(p in skip for p in parts):
            continue
        # a dict directly under "properties" or "$defs" is a name -> schema map, not a schema
        if parts[-1] in ("properties", "$defs", "patternProperties"):
            continue
        yield pointer, node


def validator(name: str) -> Draft202012Validator:
    return Draft202012Validator(load(name))


def valid(name: str, instance: Any) -> bool:
    return validator(name).is_valid(instance)


# ---------------------------------------------------------------- every file


def test_expected_files_exist() -> None:
    names = {p.name for p in FILES}
    assert "common.schema.json" in names
    assert "error.schema.json" in names
    for tool in READ_TOOLS:
        assert f"{tool}.input.schema.json" in names
        assert f"{tool}.output.schema.json" in names


@pytest.mark.parametrize("path", FILES, ids=FILE_IDS)
def test_header_and_metaschema(path: Path) -> None:
    schema = json.loads(path.read_text(encoding="utf-8"))
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == DRAFT
    assert schema["$id"] == ID_BASE + path.name
    assert schema["type"] == "object"
    assert isinstance(schema.get("title"), str) and schema["title"]
    assert isinstance(schema.get("description"), str) and schema["description"]


@pytest.mark.parametrize("path", FILES, ids=FILE_IDS)
def test_refs_stay_inside_the_file_and_resolve(path: Path) -> None:
    schema = json.loads(path.read_text(encoding="utf-8"))
    for pointer, node in walk(schema):
        target = node.get("$ref")
        if target is None:
            continue
        assert isinstance(target, str) and target.startswith("#/"), (pointer, target)
        try:
            resolve(schema, target[1:])
        except (KeyError, IndexError, ValueError):
            pytest.fail(f"{path.name}{pointer}: $ref {target} does not resolve")
    assert "$dynamicRef" not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", FILES, ids=FILE_IDS)
def test_every_local_definition_is_used(path: Path) -> None:
    if path.name == "common.schema.json":
        return
    schema = json.loads(path.read_text(encoding="utf-8"))
    refs = {node["$ref"] for _pointer, node in walk(schema) if "$ref" in node}
    unused = [name for name in schema.get("$defs", {}) if f"#/$defs/{name}" not in refs]
    assert not unused, (path.name, unused)


@pytest.mark.parametrize("path", FILES, ids=FILE_IDS)
def test_objects_are_closed(path: Path) -> None:
    schema = json.loads(path.read_text(encoding="utf-8"))
    for pointer, node in subschema_pointers(schema):
        if not is_object_schema(node):
            continue
        if (path.name, pointer) in OPEN_OBJECTS:
            assert "additionalProperties" in node, (path.name, pointer)
            continue
        assert node.get("additionalProperties") is False, f"{path.name}{pointer or '/'} is open"


@pytest.mark.parametrize("path", FILES, ids=FILE_IDS)
def test_required_keys_are_declared(path: Path) -> None:
    schema = json.loads(path.read_text(encoding="utf-8"))
    for pointer, node in subschema_pointers(schema):
        if not is_object_schema(node) or "required" not in node:
            continue
        declared = set(node.get("properties", {}))
        missing = [k for k in node["required"] if k not in declared]
        assert not missing, (path.name, pointer, missing)


@pytest.mark.parametrize("path", FILES, ids=FILE_IDS)
def test_patterns_compile(path: Path) -> None:
    schema = json.loads(path.read_text(encoding="utf-8"))
    for _pointer, node in subschema_pointers(schema):
        if isinstance(node.get("pattern"), str):
            re.compile(node["pattern"])


HINT = "x-hint"  # our annotation: the longer wording of an invalid_input diagnostic


def without_hints(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: without_hints(v) for k, v in node.items() if k != HINT}
    if isinstance(node, list):
        return [without_hints(v) for v in node]
    return node


@pytest.mark.parametrize("path", FILES, ids=FILE_IDS)
def test_shared_definitions_equal_common(path: Path) -> None:
    """Copies equal common; an output or error contract leaves out x-hint, which only inputs use."""
    common = load("common.schema.json")["$defs"]
    defs = json.loads(path.read_text(encoding="utf-8")).get("$defs", {})
    is_input = path.name.endswith((".input.schema.json", "common.schema.json"))
    for name, value in defs.items():
        if name in common:
            expected = common[name] if is_input else without_hints(common[name])
            assert value == expected, f"{path.name}: $defs/{name} differs from common"


@pytest.mark.parametrize("path", FILES, ids=FILE_IDS)
def test_hints_and_folds_are_input_annotations(path: Path) -> None:
    """x-hint and x-fold shape what the server says and advertises about arguments only."""
    text = path.read_text(encoding="utf-8")
    if not path.name.endswith(".input.schema.json") and path.name != "common.schema.json":
        assert f'"{HINT}"' not in text and '"x-fold"' not in text, path.name
    schema = json.loads(text)
    for pointer, node in subschema_pointers(schema):
        if HINT in node:
            assert isinstance(node[HINT], str), (path.name, pointer)


@pytest.mark.parametrize("path", FILES, ids=FILE_IDS)
def test_output_objects_require_every_property(path: Path) -> None:
    """Output shapes are fixed: every declared key is required (nullable ones are null)."""
    if not path.name.endswith(".output.schema.json") and path.name != "error.schema.json":
        return
    schema = json.loads(path.read_text(encoding="utf-8"))
    for pointer, node in subschema_pointers(schema):
        if not is_object_schema(node) or "properties" not in node:
            continue
        if (path.name, pointer) in OPEN_OBJECTS:
            continue
        optional = OPTIONAL_OUTPUT_KEYS.get((path.name, pointer), set())
        assert optional <= set(node["properties"]), (path.name, pointer)
        assert set(node.get("required", [])) == set(node["properties"]) - optional, (
            path.name,
            pointer,
        )


@pytest.mark.parametrize("tool", READ_TOOLS)
def test_inputs_take_an_optional_bundle_path(tool: str) -> None:
    schema = load(f"{tool}.input.schema.json")
    assert "bundle_path" in schema["properties"]
    assert "bundle_path" not in schema.get("required", [])


def test_error_codes() -> None:
    code = load("error.schema.json")["$defs"]["error_code"]
    assert set(code["enum"]) == {
        "invalid_request",
        "resource_limit",
        "concept_not_found",
        "operation_rejected",
        "invalid_yaml_graph",
        "revision_conflict",
        "plan_mismatch",
        "operation_cancelled",
        "internal_error",
    }
    assert all(re.fullmatch(code["pattern"], c) for c in code["enum"])


# ---------------------------------------------------------------- sample instances

BP = "/srv/bundle"


@pytest.mark.parametrize("tool", ["search_concepts", "get_neighbors", "search_sections"])
def test_limit_bounds(tool: str) -> None:
    base: dict[str, Any] = {"bundle_path": BP}
    if tool == "get_neighbors":
        base["concept_id"] = "tables/orders"
    else:
        base["query"] = "orders"
    assert valid(f"{tool}.input.schema.json", base)
    assert valid(f"{tool}.input.schema.json", {**base, "limit": 1})
    assert valid(f"{tool}.input.schema.json", {**base, "limit": 100})
    assert not valid(f"{tool}.input.schema.json", {**base, "limit": 101})
    assert not valid(f"{tool}.input.schema.json", {**base, "limit": 0})
    assert not valid(f"{tool}.input.schema.json", {**base, "limit": 2.5})
    assert not valid(f"{tool}.input.schema.json", {**base, "limit": "5"})


@pytest.mark.parametrize("tool", READ_TOOLS)
def test_unknown_argument_rejected(tool: str) -> None:
    assert not valid(f"{tool}.input.schema.json", {"bundle_path": BP, "bogus": 1})


@pytest.mark.parametrize("tool", ["search_concepts", "search_sections"])
def test_query_bounds(tool: str) -> None:
    name = f"{tool}.input.schema.json"
    assert valid(name, {"query": " x "})
    assert not valid(name, {"query": ""})
    assert not valid(name, {"query": " \t\n"})
    assert not valid(name, {"query": "x" * 513})
    assert valid(name, {"query": "x" * 512})
    assert not valid(name, {"bundle_path": BP})


def test_bundle_path_must_be_absolute() -> None:
    name = "list_concepts.input.schema.json"
    assert valid(name, {"bundle_path": BP})
    assert valid(name, {})
    assert not valid(name, {"bundle_path": "relative/bundle"})
    assert not valid(name, {"bundle_path": ""})


TEMPORAL_TOOLS = ["list_concepts", "validate_bundle", "get_semantic_graph", "search_concepts",
                  "search_sections", "search_semantic", "bundle_summary", "context"]
SEARCH_TOOLS = ("search_concepts", "search_sections", "search_semantic")


def _temporal_base(tool: str) -> dict[str, Any]:
    if tool == "context":
        return {"bundle_path": BP, "question": "orders"}
    return (
        {"bundle_path": BP, "query": "orders"} if tool in SEARCH_TOOLS else {"bundle_path": BP}
    )


@pytest.mark.parametrize("tool", TEMPORAL_TOOLS + ["get_neighbors"])
def test_as_of_follows_the_profile(tool: str) -> None:
    name = f"{tool}.input.schema.json"
    base = _temporal_base(tool)
    if tool == "get_neighbors":
        base = {"bundle_path": BP, "concept_id": "a"}
    instant = {"temporal_profile": "instant-0b87c52"}
    date = {"temporal_profile": "date-3fcbb9f"}

    assert valid(name, {**base, "as_of": "2026-09-26"})
    assert valid(name, {**base, **date, "as_of": "2026-09-26"})
    assert not valid(name, {**base, "as_of": "2026-09-26T12:00:01+07:00"})
    assert not valid(name, {**base, **date, "as_of": "2026-09-26T12:00:01Z"})
    assert not valid(name, {**base, "as_of": "2026-09-26\n"})
    assert not valid(name, {**base, "as_of": "26-09-2026"})

    assert valid(name, {**base, **instant})
    assert valid(name, {**base, **instant, "as_of": "2026-09-26T12:00:01+07:00"})
    assert valid(name, {**base, **instant, "as_of": "2026-09-26T12:00:01Z"})
    assert valid(name, {**base, **instant, "as_of": "2026-09-26T12:00:01.123456789-05:30"})
    assert valid(name, {**base, **instant, "as_of": "2026-09-26T12:00:01+00:00"})
    assert not valid(name, {**base, **instant, "as_of": "2026-09-26T12:00:01-00:00"})
    assert not valid(name, {**base, **instant, "as_of": "2026-09-26T12:00:01"})
    assert not valid(name, {**base, **instant, "as_of": "2026-09-26 12:00:01Z"})
    assert not valid(name, {**base, **instant, "as_of": "2026-09-26T12:00:60Z"})
    assert not valid(name, {**base, **instant, "as_of": "2026-09-26"})
    assert not valid(name, {**base, **instant, "as_of": "2026-09-26T12:00:01Z\n"})
    assert not valid(name, {**base, "temporal_profile": "wallclock"})


def test_read_concept_has_no_as_of() -> None:
    name = "read_concept.input.schema.json"
    assert valid(name, {"concept_id": "a", "temporal_profile": "instant-0b87c52"})
    assert not valid(name, {"concept_id": "a", "as_of": "2026-09-26"})
    assert not valid(name, {"bundle_path": BP})


@pytest.mark.parametrize(
    "concept_id",
    [
        "a",
        "tables/orders",
        "hash#name",
        "with space/x",
        "log/entry",
        "index-page",
        "a/indexes",
        "é/ü",
    ],
)
def test_canonical_concept_ids_accepted(concept_id: str) -> None:
    assert valid("read_concept.input.schema.json", {"concept_id": concept_id})
    assert valid("get_neighbors.input.schema.json", {"concept_id": concept_id})


@pytest.mark.parametrize(
    "concept_id",
    [
        "",
        " a",
        "a ",
        "a\n",
        "/a",
        "a/",
        "a//b",
        "a\\b",
        "c:d",
        "a\x00b",
        "a\x7fb",
        "a.md",
        "dir/a.md",
        ".",
        "..",
        "../escape",
        "a/./b",
        "a/../b",
        "index",
        "log",
        "dir/index",
        "dir/log",
        "x" * 4097,
    ],
)
def test_non_canonical_concept_ids_rejected(concept_id: str) -> None:
    assert not valid("read_concept.input.schema.json", {"concept_id": concept_id})
    assert not valid("get_neighbors.input.schema.json", {"concept_id": concept_id})


def test_neighbors_kinds_and_direction() -> None:
    name = "get_neighbors.input.schema.json"
    base = {"concept_id": "a"}
    assert valid(name, {**base, "direction": "in", "kinds": ["relation"]})
    assert valid(name, {**base, "kinds": ["source", "navigation", "relation"]})
    assert not valid(name, {**base, "kinds": []})
    assert not valid(name, {**base, "kinds": ["relation", "relation"]})
    assert not valid(name, {**base, "kinds": ["link"]})
    assert not valid(name, {**base, "direction": "up"})
    assert validator(name).schema["properties"]["direction"]["default"] == "both"


def test_validate_bundle_options() -> None:
    name = "validate_bundle.input.schema.json"
    ok = {"strict": True, "check_links": True, "check_orphans": False, "target_version": "0.1"}
    assert valid(name, ok)
    assert not valid(name, {"target_version": "0.3"})
    assert not valid(name, {"strict": "yes"})


# ---------------------------------------------------------------- sample outputs

STATUS_STATE = {"present": False, "valid": True, "raw": None, "effective": "stable"}
CARD = {
    "id": "tables/orders",
    "path": "tables/orders.md",
    "type": "table",
    "title": "Orders",
    "description": "",
    "tags": ["sales"],
    "status": "stable",
    "status_state": STATUS_STATE,
    "trust": "unverified",
    "stale": None,
    "stale_after": None,
}
VERSION = {
    "declared": "0.2",
    "effective": "0.2",
    "resolution": "declared",
    "compatibility": "native",
}
VERSION_DECL = {"present": True, "valid": True, "raw": "0.2", "value": "0.2"}


def test_search_concepts_output_sample() -> None:
    name = "search_concepts.output.schema.json"
    result = {
        "query": "order",
        "as_of": None,
        "temporal_profile": "date-3fcbb9f",
        "total": 1,
        "truncated": False,
        "hits": [{"concept": CARD, "match": "title"}],
    }
    assert valid(name, result)
    assert valid(name, {**result, "as_of": "2026-09-26"})
    assert not valid(name, {**result, "as_of": "2026-09-26T12:00:01Z"})
    instant = {
        **result,
        "temporal_profile": "instant-0b87c52",
        "as_of": "2026-09-26T12:00:01+07:00",
    }
    assert valid(name, instant)
    assert not valid(name, {**result, "hits": None})
    assert not valid(name, {**result, "hits": [{"concept": {**CARD, "extra": 1}, "match": "id"}]})
    assert not valid(
        name, {**result, "hits": [{"concept": {**CARD, "status": "archived"}, "match": "id"}]}
    )
    missing = dict(result)
    del missing["temporal_profile"]
    assert not valid(name, missing)
    assert not valid(name, {**result, "hits": [{"concept": CARD, "match": "id"}] * 101})


def test_get_neighbors_output_sample() -> None:
    name = "get_neighbors.output.schema.json"
    edge = {
        "from": "b",
        "to": "a#section",
        "kind": "relation",
        "relation_type": "uses",
        "source": CARD,
        "target": CARD,
    }
    result = {
        "concept": CARD,
        "as_of": None,
        "temporal_profile": "date-3fcbb9f",
        "direction": "both",
        "kinds": ["navigation", "relation", "source"],
        "total": 1,
        "truncated": False,
        "edges": [edge],
        "sources": [{"id": "doc", "resource": "https://example.com", "title": ""}],
    }
    assert valid(name, result)
    assert not valid(name, {**result, "edges": [{**edge, "kind": "source"}]})
    assert not valid(name, {**result, "sources": [{"id": "", "resource": "", "title": ""}] * 101})


def test_list_concepts_output_sample() -> None:
    name = "list_concepts.output.schema.json"
    entry = {
        "id": "a",
        "type": "note",
        "title": "",
        "path": "a.md",
        "status": None,
        "status_state": {"present": True, "valid": False, "raw": "archived", "effective": None},
        "trust": "human-reviewed",
        "stale": True,
        "stale_after": "2026-01-01",
        "generated_at": "2026-01-01T00:00:00Z",
        "source_count": 0,
        "computation": {"present": False, "runtime": None, "executor": None, "attester": None},
        "legacy_derived": {"generated": False, "citations": False},
    }
    result = {
        "version": VERSION,
        "version_declaration": VERSION_DECL,
        "temporal_profile": "date-3fcbb9f",
        "as_of": "2026-02-01",
        "concepts": [entry],
    }
    assert valid(name, result)
    wrong_kind = {**result, "concepts": [{**entry, "stale_after": "2026-01-01T00:00:00Z"}]}
    assert not valid(name, wrong_kind)


def test_validate_bundle_output_sample() -> None:
    name = "validate_bundle.output.schema.json"
    diag = {
        "code": "missing_type",
        "severity": "ERROR",
        "file": "a.md",
        "line": 1,
        "field": "type",
        "message": "type is required",
        "spec_ref": None,
        "policy_failure": None,
    }
    result = {
        "version": VERSION,
        "version_declaration": VERSION_DECL,
        "temporal_profile": "date-3fcbb9f",
        "as_of": None,
        "scanned_files": 3,
        "conformance": {"conformant": False, "errors": 1},
        "guidance": {"warnings": 0, "info": 0},
        "diagnostics": [diag],
    }
    assert valid(name, result)
    assert valid(name, {**result, "diagnostics": [{**diag, "line": None, "file": None}]})
    assert not valid(name, {**result, "diagnostics": [{**diag, "line": 0}]})
    no_line = dict(diag)
    del no_line["line"]
    assert not valid(name, {**result, "diagnostics": [no_line]})


def test_search_sections_output_sample() -> None:
    name = "search_sections.output.schema.json"
    hit = {
        "concept_id": "a",
        "path": "a.md",
        "heading": "Intro",
        "locator": "a.md#L3-L9",
        "line_start": 3,
        "line_end": 9,
        "content_sha256": "0" * 64,
        "snippet": "text",
        "score": 1.5,
        "matched_terms": ["text"],
    }
    result = {
        "query": "text",
        "terms": ["text"],
        "snapshot_revision": "a" * 64,
        "total": 1,
        "truncated": False,
        "hits": [hit],
    }
    assert valid(name, result)
    assert not valid(name, {**result, "snapshot_revision": "sha256:" + "a" * 64})
    assert not valid(name, {**result, "hits": [{**hit, "snippet": "x" * 513}]})
    assert not valid(name, {**result, "hits": [{**hit, "line_start": 0}]})


def test_graph_output_nodes_are_open_but_need_an_id() -> None:
    name = "get_semantic_graph.output.schema.json"
    assert valid(
        name, {"@context": {"okf": "https://x/"}, "@graph": [{"@id": "a", "exists": False}]}
    )
    assert not valid(name, {"@context": {}, "@graph": [{"exists": False}]})
    assert not valid(name, {"@context": {}, "@graph": [], "extra": 1})


def test_read_concept_projection_keeps_unknown_keys() -> None:
    name = "read_concept.output.schema.json"
    projection = {
        "type": "note",
        "title": None,
        "description": None,
        "resource": None,
        "tags": [],
        "sources": [],
        "attributions": [],
        "usage_window": None,
        "generated": None,
        "verified": [],
        "trust": "unverified",
        "status": "stable",
        "status_state": STATUS_STATE,
        "stale_after": None,
        "computation": None,
        "unknown": {"owner": {"team": "data"}, "x": [1, None]},
    }
    result = {
        "id": "a",
        "path": "a.md",
        "version": VERSION,
        "version_declaration": VERSION_DECL,
        "temporal_profile": "date-3fcbb9f",
        "frontmatter_yaml": "type: note\n",
        "body": "# A\n",
        "projection": projection,
        "legacy_fallback": {"generated_from_timestamp": False, "sources_from_citations": False},
    }
    assert valid(name, result)
    assert not valid(name, {**result, "projection": {**projection, "owner": "data"}})


def test_error_envelope_sample() -> None:
    name = "error.schema.json"
    diag = {
        "code": "invalid_input",
        "severity": "ERROR",
        "file": None,
        "field": "/limit",
        "message": "must be at most 100",
        "spec_ref": None,
        "policy_failure": None,
    }
    envelope = {
        "code": "resource_limit",
        "message": "limit",
        "retryable": False,
        "diagnostics": [diag],
    }
    assert valid(name, envelope)
    assert not valid(name, {**envelope, "code": "schema_validation"})
    assert not valid(name, {**envelope, "code": "Bad-Code"})
    assert not valid(name, {**envelope, "diagnostics": [{**diag, "severity": "NOTE"}]})
    partial = dict(diag)
    del partial["spec_ref"]
    assert not valid(name, {**envelope, "diagnostics": [partial]})
