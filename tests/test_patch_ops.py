"""preview_concept_patch / apply_concept_patch and the surgical YAML editor under them.

Golden-like cases per operation kind and per error code run through the real dispatcher (input
and output contracts checked on every call); property tests check that an edit changes exactly
the requested data and no byte outside the edited key.
"""

from __future__ import annotations

import copy
import json
import re
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from bundle_mcp.cancel import CancelToken
from bundle_mcp.contracts import ContractSet
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader import load_bundle
from bundle_mcp.loader.frontmatter import split_frontmatter
from bundle_mcp.okf.computations import computation_text, contract_of
from bundle_mcp.tools import load_tools
from bundle_mcp.writes import yaml_edit
from bundle_mcp.writes.patch_ops import plan_patch

WRITE_TOOLS = (
    "preview_concept_patch",
    "apply_concept_patch",
    "preview_temporal_upgrade",
    "apply_temporal_upgrade",
    "preview_v02_migration",
    "apply_v02_migration",
)

# Compiling the contracts is the slow part of a dispatcher; one set serves every test here.
CONTRACTS = ContractSet()

INDEX = '---\nokf_version: "0.2"\n---\n# Shop\n\n- [Orders](orders.md)\n'
ORDERS = (
    "---\n"
    "# The orders table.\n"
    "type: table  # kind of concept\n"
    "title: 'Orders'\n"
    "custom_key: {keep: me}\n"
    "sources:\n"
    "  - id: erd\n"
    "    resource: https://example.com/erd\n"
    "    last_modified: 2026-01-10\n"
    "stale_after: \"2026-06-01\"\n"
    "---\n"
    "# Orders\n"
    "\n"
    "One row per order [^erd].\n"
)


class Client:
    """Calls tools through the dispatcher, as an MCP client would."""

    def __init__(self, bundle: str) -> None:
        self.bundle = bundle
        self.dispatcher = Dispatcher(
            ServeConfig(bundles=(bundle,)), CONTRACTS, tools=load_tools(WRITE_TOOLS)
        )

    def ok(self, tool: str, **args: Any) -> dict[str, Any]:
        outcome = self.dispatcher.call(tool, args)
        assert not outcome.is_error, outcome.structured
        return outcome.structured

    def error(self, tool: str, **args: Any) -> dict[str, Any]:
        outcome = self.dispatcher.call(tool, args)
        assert outcome.is_error, outcome.structured
        return outcome.structured

    def read(self, path: str) -> str:
        return (Path(self.bundle) / path).read_text(encoding="utf-8")


@pytest.fixture
def shop(tmp_bundle) -> Client:
    return Client(tmp_bundle({"index.md": INDEX, "orders.md": ORDERS}))


def patch(client: Client, *operations: dict[str, Any], **extra: Any) -> dict[str, Any]:
    """Preview, apply, and check the apply reports what the preview promised."""
    args = {"actor": "human:ann", "operations": list(operations), **extra}
    preview = client.ok("preview_concept_patch", **args)
    assert preview["status"] == "applicable", preview
    applied = client.ok(
        "apply_concept_patch", **args,
        expected_revision=preview["base_revision"],
        expected_plan_digest=preview["plan_digest"],
    )
    assert applied["status"] == "applied"
    assert applied["result_revision"] == preview["result_revision"]
    assert applied["changed_paths"] == preview["affected_paths"]
    return preview


def orders_with(old: str, new: str) -> str:
    assert old in ORDERS
    return ORDERS.replace(old, new)


# ---------------------------------------------------------------- one golden case per kind


def test_set_generated_appends_a_block_and_keeps_everything_else(shop: Client) -> None:
    preview = patch(shop, {"kind": "set_generated", "concept_id": "orders",
                           "generated": {"by": "agent/1.0", "at": "2026-02-01T10:00:00Z"}})
    expected = orders_with(
        'stale_after: "2026-06-01"\n',
        'stale_after: "2026-06-01"\ngenerated:\n  by: agent/1.0\n  at: "2026-02-01T10:00:00Z"\n',
    )
    assert shop.read("orders.md") == expected
    assert preview["diff"].startswith("--- a/orders.md\n+++ b/orders.md\n")
    assert preview["unknown_preserved"] is True


def test_set_generated_without_at_removes_the_old_instant(tmp_bundle) -> None:
    client = Client(tmp_bundle({
        "index.md": INDEX,
        "a.md": "---\ntype: t\ngenerated:\n  by: old\n  at: 2026-01-01T00:00:00Z\n  note: x\n---\n",
    }))
    patch(client, {"kind": "set_generated", "concept_id": "a", "generated": {"by": "new"}})
    assert client.read("a.md") == "---\ntype: t\ngenerated:\n  by: new\n  note: x\n---\n"


def test_ensure_and_remove_verification(shop: Client) -> None:
    op = {"kind": "ensure_verification", "concept_id": "orders",
          "verification": {"by": "human:ann", "at": "2026-02-02T09:30:00+01:00"}}
    patch(shop, op)
    assert shop.read("orders.md").endswith(
        'verified:\n  - by: human:ann\n    at: "2026-02-02T09:30:00+01:00"\n---\n'
        "# Orders\n\nOne row per order [^erd].\n"
    )
    # The same instant spelled in UTC is the same verification: nothing to do.
    same = dict(op, verification={"by": "human:ann", "at": "2026-02-02T08:30:00Z"})
    again = shop.ok("preview_concept_patch", actor="human:ann", operations=[same])
    assert again["status"] == "noop" and again["diff"] == ""
    patch(shop, dict(op, kind="remove_verification"))
    assert shop.read("orders.md") == ORDERS


def test_put_source_updates_by_id_and_appends_new_ones(shop: Client) -> None:
    patch(
        shop,
        {"kind": "put_source", "concept_id": "orders",
         "source": {"id": "erd", "resource": "https://example.com/erd2", "title": "ERD",
                    "last_modified": "2026-01-10"}},
        {"kind": "put_source", "concept_id": "orders",
         "source": {"id": "wiki", "resource": "https://wiki/x", "usage_count": "12"}},
    )
    assert shop.read("orders.md") == orders_with(
        "    resource: https://example.com/erd\n    last_modified: 2026-01-10\n",
        "    resource: https://example.com/erd2\n    last_modified: 2026-01-10\n"
        "    title: ERD\n  - id: wiki\n    resource: https://wiki/x\n    usage_count: 12\n",
    )


def test_remove_source_by_id_drops_the_key_when_empty(shop: Client) -> None:
    patch(shop, {"kind": "remove_source", "concept_id": "orders", "source_id": "erd"})
    assert shop.read("orders.md") == orders_with(
        "sources:\n  - id: erd\n    resource: https://example.com/erd\n"
        "    last_modified: 2026-01-10\n", "")


def test_set_usage_window_on_a_source_and_on_the_concept(shop: Client) -> None:
    window = {"from": "2026-01-01", "to": "2026-03-31"}
    patch(
        shop,
        {"kind": "set_usage_window", "concept_id": "orders", "source_id": "erd",
         "usage_window": window},
        {"kind": "set_usage_window", "concept_id": "orders", "usage_window": window},
    )
    text = shop.read("orders.md")
    assert ('    last_modified: 2026-01-10\n    usage_window:\n      from: "2026-01-01"\n'
            '      to: "2026-03-31"\n') in text
    assert text.endswith('usage_window:\n  from: "2026-01-01"\n  to: "2026-03-31"\n---\n'
                         "# Orders\n\nOne row per order [^erd].\n")
    patch(shop, {"kind": "set_usage_window", "concept_id": "orders", "usage_window": None})
    assert shop.read("orders.md").count("usage_window") == 1  # the source's window stays


def test_set_lifecycle_replaces_in_place_and_keeps_the_quotes(shop: Client) -> None:
    patch(shop, {"kind": "set_lifecycle", "concept_id": "orders",
                 "lifecycle": {"status": "deprecated", "stale_after": "2026-07-01"}})
    assert shop.read("orders.md") == orders_with(
        'stale_after: "2026-06-01"\n', 'stale_after: "2026-07-01"\nstatus: deprecated\n')


def test_set_lifecycle_under_the_instant_profile(shop: Client) -> None:
    op = {"kind": "set_lifecycle", "concept_id": "orders",
          "lifecycle": {"status": None, "stale_after": "2026-07-01T00:00:00+02:00"}}
    patch(shop, op, temporal_profile="instant-0b87c52")
    assert 'stale_after: "2026-07-01T00:00:00+02:00"\n' in shop.read("orders.md")
    error = shop.error("preview_concept_patch", actor="a", operations=[op])
    assert error["code"] == "invalid_request"  # a date-time under the date profile


def test_put_attested_computation_inline_then_file(shop: Client) -> None:
    contract = {
        "mode": "inline", "runtime": "python3.12",
        "parameters": [{"name": "day", "type": "date", "required": True}],
        "inline_computation": "print('hi')", "inline_language": "python",
        "executor": {"resource": "urn:runner", "receipt": ["sha256:abc"]},
        "attester": {"resource": "urn:attester"},
    }
    op = {"kind": "put_attested_computation", "concept_id": "orders",
          "attested_computation": contract}
    patch(shop, op)
    text = shop.read("orders.md")
    assert "type: Attested Computation  # kind of concept\n" in text
    assert text.endswith("One row per order [^erd].\n\n# Computation\n\n```python\n"
                         "print('hi')\n```\n")
    again = shop.ok("preview_concept_patch", actor="a", operations=[op])
    assert again["status"] == "noop"
    file_mode = {k: v for k, v in contract.items() if not k.startswith("inline")}
    patch(shop, dict(op, attested_computation={**file_mode, "mode": "file",
                                               "computation_path": "calc/orders.py"}))
    text = shop.read("orders.md")
    assert "computation: calc/orders.py\n" in text
    assert text.endswith("# Computation\n\n")


SQL_CONTRACT = {
    "mode": "inline", "runtime": "sqlite", "parameters": [],
    "inline_computation": "SELECT 2", "inline_language": "sql",
    "executor": {"resource": "urn:runner", "receipt": ["executed_sql", "result"]},
    "attester": {"resource": "urn:attester"},
}
SQL_FILE_CONTRACT = {
    **{k: v for k, v in SQL_CONTRACT.items() if not k.startswith("inline")},
    "mode": "file", "computation_path": "calc/q.sql",
}


def _computation_client(tmp_bundle, body: str) -> Client:
    return Client(tmp_bundle({"index.md": INDEX, "calc/q.sql": "SELECT 3\n",
                              "c.md": "---\ntype: table\n---\n" + body}))


def _sanctioned(client: Client) -> str:
    """The computation the reader (get_computation, check_receipt) finds after the write."""
    snapshot, _ = load_bundle(client.bundle)
    doc = snapshot.documents["c.md"]
    return computation_text(snapshot, doc, contract_of(snapshot, doc)).text


@pytest.mark.parametrize(("contract", "body_after", "sanctioned"), [
    (SQL_CONTRACT, "# Computation\n\n```sql\nSELECT 2\n```\n\nProse after.\n", "SELECT 2\n"),
    (SQL_FILE_CONTRACT, "# Computation\n\n\nProse after.\n", "SELECT 3\n"),
], ids=["inline", "file"])
def test_put_attested_computation_replaces_or_drops_an_indented_block(
    tmp_bundle, contract: dict[str, Any], body_after: str, sanctioned: str
) -> None:
    # The reader counts an indented block as the section's code block (the spec's examples
    # indent), so the writer must replace it, or drop it in file mode, not add a second one.
    client = _computation_client(
        tmp_bundle, "# Computation\n\n    SELECT 1\n    FROM t\n\nProse after.\n")
    patch(client, {"kind": "put_attested_computation", "concept_id": "c",
                   "attested_computation": contract})
    assert split_frontmatter(client.read("c.md")).body == body_after
    assert _sanctioned(client) == sanctioned


def test_put_attested_computation_edits_a_setext_computation_section(tmp_bundle) -> None:
    client = _computation_client(
        tmp_bundle, "Computation\n===========\n\n```sql\nSELECT 1\n```\n\nProse.\n")
    patch(client, {"kind": "put_attested_computation", "concept_id": "c",
                   "attested_computation": SQL_CONTRACT})
    assert split_frontmatter(client.read("c.md")).body == (
        "Computation\n===========\n\n```sql\nSELECT 2\n```\n\nProse.\n")
    assert _sanctioned(client) == "SELECT 2\n"


@pytest.mark.parametrize("contract", [SQL_CONTRACT, SQL_FILE_CONTRACT], ids=["inline", "file"])
def test_put_attested_computation_refuses_a_section_with_two_code_blocks(
    tmp_bundle, contract: dict[str, Any]
) -> None:
    client = _computation_client(
        tmp_bundle, "# Computation\n\n    SELECT 0\n\n```sql\nSELECT 1\n```\n")
    preview = client.ok("preview_concept_patch", actor="a", operations=[
        {"kind": "put_attested_computation", "concept_id": "c", "attested_computation": contract}])
    assert preview["status"] == "rejected"
    assert [d["code"] for d in preview["diagnostics"]] == ["ambiguous_computation_section"]


def test_set_bundle_version_edits_the_root_index(tmp_bundle) -> None:
    client = Client(tmp_bundle({"index.md": '---\nokf_version: "0.1"\n---\n# Shop\n',
                                "a.md": "---\ntype: t\n---\n"}))
    preview = patch(client, {"kind": "set_bundle_version", "version": "0.2"})
    assert preview["affected_paths"] == ["index.md"]
    assert client.read("index.md") == '---\nokf_version: "0.2"\n---\n# Shop\n'


# ---------------------------------------------------------------- noop, rejected, errors


def test_noop_preview_and_apply_write_nothing(shop: Client) -> None:
    args = {"actor": "a", "operations": [{"kind": "set_lifecycle", "concept_id": "orders",
                                          "lifecycle": {"status": None,
                                                        "stale_after": "2026-06-01"}}]}
    preview = shop.ok("preview_concept_patch", **args)
    assert preview["status"] == "noop"
    assert preview["result_revision"] == preview["base_revision"]
    applied = shop.ok("apply_concept_patch", **args, expected_revision=preview["base_revision"],
                      expected_plan_digest=preview["plan_digest"])
    assert applied["status"] == "noop" and applied["changed_paths"] == []
    assert shop.read("orders.md") == ORDERS


def test_rejected_plans_report_one_error_per_operation(shop: Client) -> None:
    operations = [
        {"kind": "set_lifecycle", "concept_id": "missing",
         "lifecycle": {"status": "draft", "stale_after": None}},
        {"kind": "set_lifecycle", "concept_id": "orders",
         "lifecycle": {"status": "draft", "stale_after": None}},
        {"kind": "set_usage_window", "concept_id": "orders", "source_id": "nope",
         "usage_window": None},
    ]
    preview = shop.ok("preview_concept_patch", actor="a", operations=operations)
    assert preview["status"] == "rejected"
    assert preview["plan_digest"] is None and preview["unknown_preserved"] is False
    assert [(d["code"], d["field"]) for d in preview["diagnostics"]] == [
        ("concept_not_found", "$.operations[0]"),
        ("missing_source_selector", "$.operations[2]"),
    ]
    applied = shop.ok("apply_concept_patch", actor="a", operations=operations,
                      expected_revision=preview["base_revision"],
                      expected_plan_digest="sha256:" + "0" * 64)
    assert applied["status"] == "rejected" and applied["changed_paths"] == []
    assert shop.read("orders.md") == ORDERS


def test_ambiguous_anonymous_source_is_rejected(tmp_bundle) -> None:
    client = Client(tmp_bundle({"index.md": INDEX, "a.md": (
        "---\ntype: t\nsources:\n  - resource: x\n  - resource: x\n---\n")}))
    preview = client.ok("preview_concept_patch", actor="a", operations=[
        {"kind": "remove_source", "concept_id": "a", "source": {"resource": "x"}}])
    assert preview["status"] == "rejected"
    assert preview["diagnostics"][0]["code"] == "ambiguous_source_selector"


@pytest.mark.parametrize(
    "operation",
    [
        {"kind": "set_generated", "concept_id": "orders"},  # payload missing
        {"kind": "set_generated", "concept_id": "orders", "generated": {"by": "x"},
         "version": "0.2"},  # a payload of another kind
        {"kind": "set_bundle_version", "version": "0.2", "concept_id": "orders"},
        {"kind": "set_lifecycle", "concept_id": "../orders",
         "lifecycle": {"status": None, "stale_after": None}},
        {"kind": "set_lifecycle", "concept_id": "orders",
         "lifecycle": {"status": "archived", "stale_after": None}},
        {"kind": "set_lifecycle", "concept_id": "orders",
         "lifecycle": {"status": None, "stale_after": "2026-02-30"}},  # no such day
        {"kind": "set_usage_window", "concept_id": "orders",
         "usage_window": {"from": "2026-03-01", "to": "2026-01-01"}},  # ends before it starts
        {"kind": "remove_source", "concept_id": "orders", "source_id": "a",
         "source": {"resource": "x"}},  # two selectors
        {"kind": "put_source", "concept_id": "orders",
         "source": {"resource": "x", "usage_count": 12}},  # a number, not a decimal string
        {"kind": "ensure_verification", "concept_id": "orders",
         "verification": {"by": "h", "at": "2026-01-01T00:00:00"}},  # no offset
    ],
)
def test_invalid_operations_are_invalid_request(shop: Client, operation: dict) -> None:
    error = shop.error("preview_concept_patch", actor="a", operations=[operation])
    assert error["code"] == "invalid_request"
    assert all(d["code"] == "invalid_input" for d in error["diagnostics"])


@pytest.mark.parametrize(
    "args",
    [
        {"actor": "x" * 257, "operations": [{"kind": "set_bundle_version", "version": "0.2"}]},
        {"actor": "a", "operations": [{"kind": "set_bundle_version", "version": "0.2"}] * 257},
    ],
)
def test_oversized_requests_are_resource_limit(shop: Client, args: dict) -> None:
    error = shop.error("preview_concept_patch", **args)
    assert error["code"] == "resource_limit"
    assert error["diagnostics"][-1]["code"] == "recovery_step"


def _lifecycle(status: str) -> dict[str, Any]:
    return {"actor": "a", "operations": [{"kind": "set_lifecycle", "concept_id": "orders",
                                          "lifecycle": {"status": status,
                                                        "stale_after": None}}]}


def test_stale_revision_is_revision_conflict(shop: Client) -> None:
    preview = shop.ok("preview_concept_patch", **_lifecycle("draft"))
    (Path(shop.bundle) / "orders.md").write_text(ORDERS + "\nEdited.\n", encoding="utf-8")
    error = shop.error("apply_concept_patch", **_lifecycle("draft"),
                       expected_revision=preview["base_revision"],
                       expected_plan_digest=preview["plan_digest"])
    assert error["code"] == "revision_conflict"
    assert "preview again" in error["diagnostics"][-1]["message"]


def test_a_different_plan_is_plan_mismatch(shop: Client) -> None:
    preview = shop.ok("preview_concept_patch", **_lifecycle("draft"))
    error = shop.error("apply_concept_patch", **_lifecycle("deprecated"),
                       expected_revision=preview["base_revision"],
                       expected_plan_digest=preview["plan_digest"])
    assert error["code"] == "plan_mismatch"
    assert error["diagnostics"][-1]["code"] == "recovery_step"
    assert shop.read("orders.md") == ORDERS


def test_identical_apply_replays_its_receipt(shop: Client) -> None:
    preview = shop.ok("preview_concept_patch", **_lifecycle("draft"))
    args = dict(_lifecycle("draft"), expected_revision=preview["base_revision"],
                expected_plan_digest=preview["plan_digest"])
    first = shop.ok("apply_concept_patch", **args)
    after_first = shop.read("orders.md")
    second = shop.ok("apply_concept_patch", **args)
    assert second == first
    assert shop.read("orders.md") == after_first


def test_preview_writes_nothing(shop: Client) -> None:
    before = sorted(p.name for p in Path(shop.bundle).iterdir())
    shop.ok("preview_concept_patch", **_lifecycle("draft"))
    assert sorted(p.name for p in Path(shop.bundle).iterdir()) == before
    assert shop.read("orders.md") == ORDERS


# ---------------------------------------------------------------- the editor, by example


def test_editor_keeps_comments_order_quoting_and_crlf() -> None:
    text = ("---\r\n# lead\r\na: 'one'  # c1\r\nb:\r\n  - x\r\n  # inner\r\n  - y\r\n"
            "c: \"three\"\r\n---\r\nbody\r\n")
    data = yaml_edit.data_of(text)
    data["a"] = "uno"
    data["b"].append("z")
    data["d"] = "2026-01-01"
    out = yaml_edit.rewrite(text, data)
    assert out == ("---\r\n# lead\r\na: 'uno'  # c1\r\nb:\r\n  - x\r\n  # inner\r\n  - y\r\n"
                   "  - z\r\nc: \"three\"\r\nd: \"2026-01-01\"\r\n---\r\nbody\r\n")


def test_editor_deletes_a_key_but_not_the_comment_of_the_next_one() -> None:
    text = "---\na: 1\nb:\n  c: 2\n\n# about d\nd: 4\n---\n"
    data = yaml_edit.data_of(text)
    del data["b"]
    assert yaml_edit.rewrite(text, data) == "---\na: 1\n\n# about d\nd: 4\n---\n"


def test_editor_creates_a_block_when_there_is_none() -> None:
    assert yaml_edit.rewrite("# Body\n", {"type": "t"}) == "---\ntype: t\n---\n# Body\n"


def test_editor_refuses_aliases_it_cannot_keep() -> None:
    text = "---\nbase: &b {x: 1}\nother: *b\n---\n"
    data = yaml_edit.data_of(text)
    data["base"] = {"x": 2}
    with pytest.raises(yaml_edit.EditError):
        yaml_edit.rewrite(text, data)


# ---------------------------------------------------------------- properties

_WORD = st.text("abcdefghij", min_size=1, max_size=6)
_SCALAR = st.one_of(
    _WORD,
    st.integers(-999, 999),
    st.booleans(),
    st.dates().map(lambda d: d.isoformat()),
    st.sampled_from(
        ["has space", "colon: inside", "quote's", "#hash", "a,b", "2026-01-02T03:04:05Z",
         "", "café ü", "two\nlines", "- dash", "null", "yes", "1.5"]
    ),
    st.none(),
)
_MAPPING = st.dictionaries(_WORD.map(lambda w: "n" + w), _SCALAR, min_size=1, max_size=3)
_VALUE = st.one_of(
    _SCALAR,
    st.lists(_SCALAR, min_size=1, max_size=4),
    _MAPPING,
    st.lists(_MAPPING, min_size=1, max_size=3),
)
_KEYS = ("alpha", "beta", "gamma", "delta", "title", "tags")


def _render(value: Any, style: int, indent: str = "") -> str:
    """One value as YAML after ``key:`` in one of a few styles (0 plain/block, 1 quoted, 2 flow)."""
    if isinstance(value, dict):
        if style == 2:
            return " " + _flow(value) + "\n"
        return "\n" + "".join(f"{indent}  {k}:{_render(v, style, indent + '  ')}"
                              for k, v in value.items())
    if isinstance(value, list):
        if style == 2:
            return " " + _flow(value) + "\n"
        return "\n" + "".join(f"{indent}  -{_item(v, style, indent + '    ')}" for v in value)
    if value is None and style == 0:
        return "\n"  # "key:" alone
    return " " + _scalar(value, style) + "\n"


def _item(value: Any, style: int, indent: str) -> str:
    if isinstance(value, dict):
        first, *rest = value.items()
        head = f" {first[0]}: {_scalar(first[1], style)}\n"
        return head + "".join(f"{indent}{k}: {_scalar(v, style)}\n" for k, v in rest)
    return " " + _scalar(value, style) + "\n"


def _flow(value: Any) -> str:
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    return _scalar(value, 1)


def _scalar(value: Any, style: int) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if style == 1 and "\n" not in value:
        return "'" + value.replace("'", "''") + "'"
    if re.fullmatch(r"[a-j]+", value):
        return value
    return json.dumps(value, ensure_ascii=False)


@st.composite
def documents(draw: Any) -> tuple[str, int, int]:
    """A concept file with comments and mixed styles; returns (text, block start, block end)."""
    keys = draw(st.lists(st.sampled_from(_KEYS), min_size=1, max_size=5, unique=True))
    lines = []
    for key in keys:
        if draw(st.booleans()):
            lines.append(f"# about {key}\n")
        value = draw(_VALUE)
        rendered = _render(value, draw(st.integers(0, 2)))
        if not isinstance(value, (dict, list)) and draw(st.booleans()):
            rendered = rendered[:-1] + "  # trailing\n"
        lines.append(key + ":" + rendered)
    block = "".join(lines)
    body = draw(st.sampled_from(["# Body\n\ntext [1]\n", "", "x: not yaml\n---\n"]))
    text = "---\n" + block + "---\n" + body
    return text, 4, 4 + len(block)


def _entry_region(text: str, start: int, end: int, key: str) -> tuple[int, int]:
    """From the key's line to the next top-level key line (or the end of the block)."""
    raw = text[start:end]
    match = re.search(rf"(?m)^{key}:", raw)
    assert match is not None
    following = re.search(r"(?m)^[a-z]+:", raw[match.end():])
    stop = end if following is None else start + match.end() + following.start()
    return start + match.start(), stop


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(documents(), st.data())
def test_rewrite_changes_exactly_the_requested_data(doc: tuple[str, int, int], data: Any) -> None:
    text, start, end = doc
    old = yaml_edit.data_of(text)
    key = data.draw(st.sampled_from(sorted(old)))
    action = data.draw(st.sampled_from(["set", "delete", "add", "append", "subkey"]))
    new = copy.deepcopy(old)
    if action == "set":
        new[key] = data.draw(_VALUE)
    elif action == "delete":
        del new[key]
    elif action == "add":
        new["zeta"] = data.draw(_VALUE)
    elif action == "append":
        assume(isinstance(new[key], list))
        new[key].append(data.draw(_SCALAR))
    else:
        assume(isinstance(new[key], dict))
        new[key][data.draw(st.sampled_from(sorted(new[key]) + ["nnew"]))] = data.draw(_SCALAR)
    assume(not yaml_edit.same_data(old, new))

    out = yaml_edit.rewrite(text, new)

    assert yaml_edit.same_data(yaml_edit.data_of(out), new)
    body = split_frontmatter(text).body
    assert split_frontmatter(out).body == body and out.endswith("---\n" + body)
    if action == "add":
        lo = hi = end
    else:
        lo, hi = _entry_region(text, start, end, key)
    # every byte before and after the edited key is untouched (comments of others included)
    assert out.startswith(text[:lo])
    assert out.endswith(text[hi:])


@st.composite
def lifecycle_ops(draw: Any) -> list[dict[str, Any]]:
    status = draw(st.sampled_from([None, "draft", "stable", "deprecated"]))
    stale = draw(st.one_of(st.none(), st.dates().map(lambda d: d.isoformat())))
    ops = [{"kind": "set_lifecycle", "concept_id": "orders",
            "lifecycle": {"status": status, "stale_after": stale}}]
    if draw(st.booleans()):
        ops.append({"kind": "put_source", "concept_id": "orders",
                    "source": {"id": draw(st.sampled_from(["erd", "new"])),
                               "resource": draw(_WORD)}})
    return ops


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lifecycle_ops())
def test_patch_then_read_back_shows_exactly_the_change(ops: list[dict[str, Any]]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder).resolve()
        (root / "index.md").write_text(INDEX, encoding="utf-8")
        (root / "orders.md").write_text(ORDERS, encoding="utf-8")
        snapshot, _ = load_bundle(str(root))
        plan = plan_patch(snapshot, ops, "date-3fcbb9f", CancelToken())
    assert plan.status in ("applicable", "noop")
    before = yaml_edit.data_of(ORDERS)
    after = yaml_edit.data_of(plan.changes[0].new_text) if plan.changes else before
    lifecycle = ops[0]["lifecycle"]
    for key in ("status", "stale_after"):
        assert after.get(key) == lifecycle[key]
    untouched = {"type", "title", "custom_key"}
    assert {k: after[k] for k in untouched} == {k: before[k] for k in untouched}
    if plan.changes:
        new_text = plan.changes[0].new_text
        assert new_text.endswith("---\n# Orders\n\nOne row per order [^erd].\n")
        assert new_text.startswith("---\n# The orders table.\ntype: table  # kind of concept\n"
                                   "title: 'Orders'\ncustom_key: {keep: me}\n")


def test_unpaired_surrogates_are_invalid_request(shop: Client) -> None:
    error = shop.error("preview_concept_patch", actor="a\ud800", operations=[
        {"kind": "set_bundle_version", "version": "0.2"}])
    assert error["code"] == "invalid_request"


def test_previews_are_deterministic_and_bind_the_actor(shop: Client) -> None:
    first = shop.ok("preview_concept_patch", **_lifecycle("draft"))
    assert shop.ok("preview_concept_patch", **_lifecycle("draft")) == first
    other = shop.ok("preview_concept_patch", **{**_lifecycle("draft"), "actor": "b"})
    assert other["plan_digest"] != first["plan_digest"]
    assert other["diff"] == first["diff"]
