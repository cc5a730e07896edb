"""The tool surface a model can afford: what `tools/list` costs, and what it still promises.

Hosts send the model every tool's name, title, description and inputSchema on every turn. These
tests measure that part through the real server's `tools/list` handler and hold it to a budget;
they check that the advertised input schemas keep the contracts' constraints (folded parts only
relax them), that the shorter regular expressions accept exactly what the old ones did, and that
`serve --tools` / `--read-only` select the tools they name, with accurate annotations.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import jsonschema_rs
import mcp.types as types
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters

from bundle_mcp import cli
from bundle_mcp.contracts import (
    FOLD_KEY,
    HINT_KEY,
    ContractSet,
    advertised_input_schema,
)
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.errors import BundleError
from bundle_mcp.server import INSTRUCTIONS, build_server
from bundle_mcp.tools import load_tools
from bundle_mcp.toolspec import TOOLSETS

try:
    from tests import golden_runner
except ImportError:  # pytest run without the repository root on sys.path
    import golden_runner  # type: ignore[no-redef]

CONTRACTS = Path(__file__).resolve().parent.parent / "contracts"
REAL_TOOLS = load_tools()

# The budgets (bytes of minified JSON, UTF-8): per tool on average, for the toolsets a read-only
# agent loads, for any one tool, and for the server instructions.
AVERAGE_BUDGET = 2048
READ_WALK_BUDGET = 16 * 1024
TOOL_BUDGET = 4 * 1024
INSTRUCTIONS_BUDGET = 3 * 1024

TOOLSET_MEMBERS = {
    "read": {
        "context",
        "search_concepts",
        "search_sections",
        "read_concept",
        "get_neighbors",
        "list_concepts",
        "bundle_summary",
    },
    "walk": {
        "expand_neighbors",
        "fetch_slice",
        "find_path",
        "query_subgraph",
    },
    "compute": {"get_computation", "check_receipt"},
    "semantic": {"search_semantic"},
    "views": {"validate_bundle", "get_semantic_graph", "visualize_graph"},
    "write": {
        "write_concept",
        "preview_concept_patch",
        "apply_concept_patch",
        "preview_v02_migration",
        "apply_v02_migration",
        "preview_temporal_upgrade",
        "apply_temporal_upgrade",
        "preview_bundle_edit",
        "apply_bundle_edit",
    },
    "history": {"concept_history", "concept_diff"},
}
CHANGES_THE_BUNDLE = {
    "write_concept",
    "apply_concept_patch",
    "apply_v02_migration",
    "apply_temporal_upgrade",
    "apply_bundle_edit",
}


def minified(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


async def _listed(config: ServeConfig) -> list[types.Tool]:
    async with Client(build_server(Dispatcher(config))) as client:
        return (await client.list_tools()).tools


def _wire_tools(config: ServeConfig) -> list[dict[str, Any]]:
    """tools/list as the wire carries it, through the real server's handler."""
    tools = anyio.run(_listed, config)
    return [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]


WIRE = _wire_tools(ServeConfig(allow_any_bundle=True))


def model_facing(tool: dict[str, Any]) -> int:
    """What a host puts in front of the model for one tool."""
    keys = ("name", "title", "description", "inputSchema")
    return minified({k: tool[k] for k in keys if k in tool})


SIZES = {tool["name"]: model_facing(tool) for tool in WIRE}


# --------------------------------------------------------------------------------------------
# Budgets


def test_the_model_facing_part_averages_at_most_2_kib_per_tool() -> None:
    """Issue 'Every MCP host' §2: the average holds as tools are added."""
    assert set(SIZES) == set(REAL_TOOLS)
    assert sum(SIZES.values()) / len(SIZES) <= AVERAGE_BUDGET, SIZES


def test_the_read_and_walk_toolsets_fit_in_16_kib() -> None:
    """Issue 'Every MCP host' §2: what `serve --tools read,walk` costs a model per turn."""
    names = TOOLSET_MEMBERS["read"] | TOOLSET_MEMBERS["walk"]
    assert sum(SIZES[name] for name in names) <= READ_WALK_BUDGET


def test_no_tool_is_over_4_kib() -> None:
    """Issue 'Every MCP host' §2: not even the patch and migration tools."""
    over = {name: size for name, size in SIZES.items() if size > TOOL_BUDGET}
    assert not over


def test_the_instructions_stay_short_and_carry_the_shared_definitions() -> None:
    """The instructions say once what the tools' schemas no longer repeat."""
    assert len(INSTRUCTIONS.encode("utf-8")) <= INSTRUCTIONS_BUDGET
    for term in ("concept_id", "locator", "bundle_path", "temporal_profile", "as_of", "clamp",
                 "no cursor", "isError", "revision_conflict"):
        assert term in INSTRUCTIONS, term


def test_every_tool_has_a_title_for_people() -> None:
    for tool in WIRE:
        module = REAL_TOOLS[tool["name"]]
        assert tool["title"] == module.title
        assert tool["annotations"]["title"] == module.title
        assert tool["title"][0].isupper() and "_" not in tool["title"]


# --------------------------------------------------------------------------------------------
# Annotations


def test_previews_are_read_only_and_writes_destructive_and_idempotent() -> None:
    """A preview writes nothing; a write replays an identical request from its receipt."""
    for tool in WIRE:
        name, hints = tool["name"], tool["annotations"]
        changes = name in CHANGES_THE_BUNDLE
        assert REAL_TOOLS[name].read_only is (not changes)
        assert hints["readOnlyHint"] is (not changes), name
        assert hints["destructiveHint"] is changes, name
        assert hints["idempotentHint"] is True, name
        assert hints["openWorldHint"] is False, name


# --------------------------------------------------------------------------------------------
# The advertised input schema keeps the contract


def contract(name: str) -> dict[str, Any]:
    return json.loads((CONTRACTS / name).read_text(encoding="utf-8"))


def _keys(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        yield from node
        for value in node.values():
            yield from _keys(value)
    elif isinstance(node, list):
        for value in node:
            yield from _keys(value)


def _refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        if isinstance(node.get("$ref"), str):
            yield node["$ref"]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def _golden_arguments() -> list[dict[str, Any]]:
    """Every golden's arguments (valid and invalid ones), with a bundle_path added."""
    seen = []
    for path in golden_runner.golden_paths():
        arguments = golden_runner.load_case(path)["arguments"]
        if isinstance(arguments, dict):
            seen.append(arguments)
            seen.append({**arguments, "bundle_path": "/srv/bundle"})
    return seen


GOLDEN_ARGUMENTS = _golden_arguments()


@pytest.mark.parametrize("tool", sorted(REAL_TOOLS))
def test_the_advertised_input_schema_is_a_self_contained_2020_12_schema(tool: str) -> None:
    advertised = WIRE[[t["name"] for t in WIRE].index(tool)]["inputSchema"]
    assert advertised == advertised_input_schema(contract(f"{tool}.input.schema.json"))
    Draft202012Validator.check_schema(advertised)
    assert advertised["type"] == "object" and advertised["additionalProperties"] is False
    assert not {"$schema", "$id", "title", "description"} & set(advertised)  # the file's header
    assert not {HINT_KEY, FOLD_KEY} & set(_keys(advertised))
    for ref in _refs(advertised):
        assert ref.removeprefix("#/$defs/") in advertised.get("$defs", {}), ref


@pytest.mark.parametrize("tool", sorted(REAL_TOOLS))
def test_the_advertised_schema_accepts_whatever_the_contract_accepts(tool: str) -> None:
    """Folding only relaxes; without folds it is the contract (golden arguments of all tools)."""
    full = contract(f"{tool}.input.schema.json")
    enforced = Draft202012Validator(full)
    advertised = Draft202012Validator(advertised_input_schema(full))
    folded = FOLD_KEY in set(_keys(full))
    own = [golden_runner.load_case(p)["arguments"] for p in golden_runner.golden_paths()
           if p.parent.name == tool]
    assert any(enforced.is_valid(a) for a in own), f"{tool}: no valid golden arguments"
    for arguments in GOLDEN_ARGUMENTS + own:
        if enforced.is_valid(arguments):
            assert advertised.is_valid(arguments)
        elif not folded:
            assert not advertised.is_valid(arguments)


@pytest.mark.parametrize("toolset", ["read", "walk", "semantic", "views"])
def test_the_read_walk_and_semantic_tools_advertise_every_constraint(toolset: str) -> None:
    """Only write tools fold (payloads echoed from a preview, deep shared definitions)."""
    for tool in TOOLSET_MEMBERS[toolset]:
        assert FOLD_KEY not in set(_keys(contract(f"{tool}.input.schema.json"))), tool


def test_a_fold_keeps_the_type_and_description_or_drops_applicators() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "urn:x",
        "title": "t",
        "description": "d",
        "type": "object",
        "properties": {
            "whole": {"$ref": "#/$defs/deep"},
            "some": {"type": "string", "allOf": [{"minLength": 2}], "x-fold": ["allOf"]},
            "x-hint": {"type": "integer", "x-hint": "a property may be called x-hint"},
            "once": {"$ref": "#/$defs/small", "description": "used here"},
        },
        "$defs": {
            "deep": {"type": "object", "description": "shape", "x-fold": True,
                     "properties": {"a": {"$ref": "#/$defs/orphan"}}, "required": ["a"]},
            "orphan": {"type": "string"},
            "small": {"type": "string", "maxLength": 3, "description": "replaced"},
        },
    }
    assert advertised_input_schema(schema) == {
        "type": "object",
        "properties": {
            "whole": {"type": "object", "description": "shape"},
            "some": {"type": "string"},
            "x-hint": {"type": "integer"},
            "once": {"type": "string", "maxLength": 3, "description": "used here"},
        },
    }


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"type": "string", "x-fold": ["maxLength"]}}},
        {"type": "object", "x-fold": "yes"},
        {"type": "object", "unevaluatedProperties": False, "x-fold": ["allOf"]},
    ],
)
def test_a_fold_that_would_not_only_relax_is_refused(schema: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        advertised_input_schema(schema)


def test_a_definition_used_twice_stays_a_definition() -> None:
    schema = {
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/s"}, "b": {"$ref": "#/$defs/s"}},
        "$defs": {"s": {"type": "string"}},
    }
    assert advertised_input_schema(schema) == schema


def test_an_x_hint_speaks_in_diagnostics_instead_of_the_description(tmp_path: Path) -> None:
    """The long wording reaches the model only when it got the argument wrong."""
    for name in ("error.schema.json",):
        (tmp_path / name).write_text((CONTRACTS / name).read_text("utf-8"), "utf-8")
    (tmp_path / "t.output.schema.json").write_text(json.dumps({"type": "object"}), "utf-8")
    (tmp_path / "t.input.schema.json").write_text(
        json.dumps(
            {
                "type": "object",
                "properties": {
                    "a": {"type": "string", "description": "short", "x-hint": "A longer rule."},
                    "b": {"type": "string", "description": "plain", "x-hint": ""},
                },
            }
        ),
        "utf-8",
    )
    contracts = ContractSet(tmp_path)
    with pytest.raises(BundleError) as info:
        contracts.check_input("t", {"a": 1, "b": 2})
    messages = [d["message"] for d in info.value.envelope()["diagnostics"]]
    assert messages == ["a must be a string. A longer rule.", "b must be a string."]
    assert "x-hint" not in json.dumps(contracts.advertised_input_schema("t"))


# --------------------------------------------------------------------------------------------
# Shorter patterns, the same language (Python re for jsonschema, and jsonschema-rs)

OLD_CONCEPT_ID = (
    r"^(?!\s)(?![\s\S]*\s$)(?![\s\S]*\.md$)(?!(?:[\s\S]*/)?\.{1,2}(?:/|$))"
    r"(?!(?:[\s\S]*/)?(?:index|log)$)[^/\\:\x00-\x1F\x7F-\x9F]+"
    r"(?:/[^/\\:\x00-\x1F\x7F-\x9F]+)*$(?!\n)"
)
OLD_DATE = r"^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])$(?!\n)"
OLD_INSTANT = (
    r"^[0-9]{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:"
    r"[0-5][0-9](?:\.[0-9]{1,9})?(?:Z|\+(?:[01][0-9]|2[0-3]):[0-5][0-9]|-(?!00:00)"
    r"(?:[01][0-9]|2[0-3]):[0-5][0-9])$(?!\n)"
)
COMMON = contract("common.schema.json")["$defs"]
PAIRS = {
    "concept_id": (OLD_CONCEPT_ID, COMMON["concept_id"]["pattern"]),
    "date_value": (OLD_DATE, COMMON["date_value"]["pattern"]),
    "instant_value": (OLD_INSTANT, COMMON["instant_value"]["pattern"]),
}
RS = {
    name: tuple(jsonschema_rs.validator_for({"pattern": p}) for p in pair)
    for name, pair in PAIRS.items()
}


def agree(name: str, value: str) -> None:
    old, new = PAIRS[name]
    assert bool(re.search(old, value)) == bool(re.search(new, value)), (name, value)
    rs_old, rs_new = RS[name]
    assert rs_old.is_valid(value) == rs_new.is_valid(value), (name, value)


def test_the_new_patterns_are_shorter() -> None:
    for old, new in PAIRS.values():
        assert len(new) < len(old)


# Characters the concept ID rule cares about, and pieces it names.
ID_ATOMS = st.sampled_from(
    ["a", "é", "#", " ", "\t", "\n", "\r", "\x00", "\x1f", "\x7f", "\x85", "\x9f", "\xa0",
     "\u2028", "\u3000", "\ufeff", "/", "//", "\\", ":", ".", "..", ".md", "md", "index",
     "log", "indexes", "x", "/.", "./", "/..", "../"]
)
ID_EDGES = ["", "a", " a", "a ", "a\n", "/a", "a/", "a//b", "a\\b", "c:d", "a.md", "dir/a.md",
            ".", "..", "../x", "a/./b", "a/../b", "index", "log", "dir/index", "dir/log",
            "index/a", "log.md/x", "a.mdx", ".hidden", "a..b", "...", "a/...", "a\u2028b",
            "a\u2028", "\ufeffa", "tables/orders", "with space/x", "hash#name", "x" * 300]


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(ID_ATOMS, max_size=8).map("".join))
def test_concept_id_patterns_agree(value: str) -> None:
    agree("concept_id", value)


@pytest.mark.parametrize("value", ID_EDGES)
def test_concept_id_patterns_agree_on_edge_cases(value: str) -> None:
    agree("concept_id", value)


def _time_strings() -> st.SearchStrategy[str]:
    digits = st.text("0123456789", min_size=1, max_size=4)
    piece = st.one_of(
        digits,
        st.sampled_from(["-", ":", "T", "t", "Z", "z", "+", ".", " ", "\n", "٣", "00:00", "-00:00",
                         "+00:00", "2026-09-26", "T12:00:01", "23:59:60", "24:00", "13", "32"]),
    )
    return st.lists(piece, max_size=10).map("".join)


TIME_EDGES = ["2026-09-26", "2026-09-26\n", "2026-9-26", "2026-13-01", "2026-02-31", "0000-01-01",
              "2026-09-26T12:00:01Z", "2026-09-26T12:00:01+07:00", "2026-09-26T12:00:01-00:00",
              "2026-09-26T12:00:01+00:00", "2026-09-26T12:00:01.123456789-05:30",
              "2026-09-26T12:00:01.1234567890Z", "2026-09-26T12:00:60Z", "2026-09-26T24:00:00Z",
              "2026-09-26 12:00:01Z", "2026-09-26T12:00:01", "2026-09-26T12:00:01Z\n",
              "2026-09-26T12:00:01z", "2026-09-26T12:00:01-00:01", "2026-09-26T12:00:01+24:00"]


@settings(max_examples=1500, deadline=None)
@given(_time_strings())
@example("2026-09-26T12:00:01-00:00")
def test_date_and_instant_patterns_agree(value: str) -> None:
    agree("date_value", value)
    agree("instant_value", value)


@pytest.mark.parametrize("value", TIME_EDGES)
def test_date_and_instant_patterns_agree_on_edge_cases(value: str) -> None:
    agree("date_value", value)
    agree("instant_value", value)


# --------------------------------------------------------------------------------------------
# Toolsets


def test_every_tool_belongs_to_one_named_toolset() -> None:
    assert list(TOOLSETS) == ["read", "walk", "write", "compute", "semantic", "views", "history"]
    by_set: dict[str, set[str]] = {name: set() for name in TOOLSETS}
    for name, module in REAL_TOOLS.items():
        by_set[module.toolset].add(name)
    assert by_set == TOOLSET_MEMBERS


def served(**config: Any) -> set[str]:
    return {spec.name for spec in Dispatcher(ServeConfig(**config)).tools()}


@pytest.mark.parametrize(
    ("toolsets", "read_only", "expected"),
    [
        (None, False, set(REAL_TOOLS)),
        ({"read"}, False, TOOLSET_MEMBERS["read"]),
        ({"read", "walk"}, False, TOOLSET_MEMBERS["read"] | TOOLSET_MEMBERS["walk"]),
        ({"semantic"}, False, TOOLSET_MEMBERS["semantic"]),
        ({"write"}, False, TOOLSET_MEMBERS["write"]),
        ({"write"}, True, TOOLSET_MEMBERS["write"] - CHANGES_THE_BUNDLE),
        (None, True, set(REAL_TOOLS) - CHANGES_THE_BUNDLE),
        ({"read", "walk"}, True, TOOLSET_MEMBERS["read"] | TOOLSET_MEMBERS["walk"]),
    ],
)
def test_toolsets_and_read_only_select_the_served_tools(
    toolsets: set[str] | None, read_only: bool, expected: set[str]
) -> None:
    chosen = None if toolsets is None else frozenset(toolsets)
    assert served(toolsets=chosen, read_only=read_only) == expected


def test_an_unknown_toolset_is_refused_by_the_dispatcher() -> None:
    with pytest.raises(ValueError, match="bogus"):
        Dispatcher(ServeConfig(toolsets=frozenset({"read", "bogus"})))


@pytest.mark.parametrize("value", ["read,bogus", "", "read,", "Read"])
def test_an_unknown_toolset_is_a_usage_error_on_one_line(
    value: str, simple_bundle: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["serve", simple_bundle, "--tools", value]) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("bundle-mcp: --tools: unknown toolset")
    assert "read, walk, write, compute, semantic" in err


def test_serve_help_names_the_toolsets(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        cli.main(["serve", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    for name in TOOLSETS:
        assert f"{name}:" in out
    assert "previews stay" in out


def test_the_printed_client_configuration_keeps_the_selection(
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = ServeConfig(bundles=("/srv/b",), read_only=True, toolsets=frozenset({"walk", "read"}))
    cli._print_client_config(config, "127.0.0.1", 8765, False)
    err = capsys.readouterr().err
    assert '"--read-only",' in err and '"--tools",' in err and '"read,walk"' in err


def test_the_client_configuration_is_written_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Another thread's log line must not land inside the address line: print wrote a line's
    text and its end apart, and a warning ran on after the address in one CI run."""
    writes: list[str] = []

    class Recorder:
        def write(self, text: str) -> int:
            writes.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    monkeypatch.setattr(sys, "stderr", Recorder())
    cli._print_client_config(ServeConfig(bundles=("/srv/b",)), "127.0.0.1", 8765, False)
    assert len(writes) == 1 and writes[0].endswith("\n")
    assert writes[0].splitlines()[0].endswith("streamable HTTP on http://127.0.0.1:8765/mcp")


@pytest.mark.anyio
async def test_serve_over_stdio_lists_only_the_selected_toolsets(simple_bundle: str) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "bundle_mcp.cli", "serve", simple_bundle, "--tools", "write,read",
              "--read-only"],
    )
    with anyio.fail_after(30):
        async with Client(params) as client:
            listed = (await client.list_tools()).tools
            result = await client.call_tool("list_concepts", {})
    expected = TOOLSET_MEMBERS["read"] | TOOLSET_MEMBERS["write"] - CHANGES_THE_BUNDLE
    assert {t.name for t in listed} == expected
    preview = next(t for t in listed if t.name == "preview_concept_patch")
    assert preview.annotations is not None and preview.annotations.read_only_hint is True
    assert not result.is_error
