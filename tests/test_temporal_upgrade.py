"""preview_temporal_upgrade / apply_temporal_upgrade: explicit date → instant mappings only.

The central case is reference-okf.md §9.7 item 13: incomplete (unresolved listed, no digest) →
ready → apply → an identical apply replays → a stale base revision conflicts.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.contracts import ContractSet
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.tools import load_tools

TOOLS = ("preview_temporal_upgrade", "apply_temporal_upgrade", "read_concept")
CONTRACTS = ContractSet()

INDEX = '---\nokf_version: "0.2"\n---\n# Data\n'
ORDERS = (
    "---\n"
    "type: table\n"
    "stale_after: 2026-06-01  # review then\n"
    "usage_window: {from: 2026-01-01, to: '2026-12-31'}\n"
    "sources:\n"
    "  - id: erd\n"
    "    resource: https://example.com/erd\n"
    '    last_modified: "2026-01-10"\n'
    "  - id: wiki\n"
    "    resource: https://wiki/orders\n"
    "    last_modified: 2026-02-01T08:00:00Z\n"
    "---\n"
    "# Orders\n\nstale_after: 2026-06-01 in the body is not frontmatter.\n"
)
PLAIN = "---\ntype: note\n---\nNo dates.\n"

ALL = [
    {"concept": "orders", "path": "stale_after", "from": "2026-06-01",
     "to": "2026-06-01T00:00:00+02:00"},
    {"concept": "orders", "path": "usage_window.from", "from": "2026-01-01",
     "to": "2026-01-01T00:00:00Z"},
    {"concept": "orders", "path": "usage_window.to", "from": "2026-12-31",
     "to": "2026-12-31T23:59:59.999Z"},
    {"concept": "orders", "path": "sources[0].last_modified", "from": "2026-01-10",
     "to": "2026-01-10T17:30:00-05:00"},
]


class Client:
    def __init__(self, bundle: str) -> None:
        self.bundle = bundle
        self.dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)), CONTRACTS,
                                     tools=load_tools(TOOLS))

    def call(self, tool: str, **args: Any) -> tuple[bool, dict[str, Any]]:
        outcome = self.dispatcher.call(tool, args)
        return outcome.is_error, outcome.structured

    def ok(self, tool: str, **args: Any) -> dict[str, Any]:
        is_error, result = self.call(tool, **args)
        assert not is_error, result
        return result

    def error(self, tool: str, **args: Any) -> dict[str, Any]:
        is_error, result = self.call(tool, **args)
        assert is_error, result
        return result

    def read(self, path: str) -> str:
        return (Path(self.bundle) / path).read_text(encoding="utf-8")


@pytest.fixture
def data(tmp_bundle) -> Client:
    return Client(tmp_bundle({"index.md": INDEX, "orders.md": ORDERS, "plain.md": PLAIN}))


def test_reference_sequence_incomplete_ready_apply_replay_conflict(data: Client) -> None:
    # 1. No mappings: every date is listed, in concept then field order; nothing to apply.
    first = data.ok("preview_temporal_upgrade", id="up-1", actor="human:ann")
    assert first["status"] == "incomplete"
    assert first["plan_digest"] is None
    assert first["result_revision"] == first["base_revision"]
    assert first["unresolved"] == [
        {"concept": "orders", "path": "stale_after", "from": "2026-06-01"},
        {"concept": "orders", "path": "usage_window.from", "from": "2026-01-01"},
        {"concept": "orders", "path": "usage_window.to", "from": "2026-12-31"},
        {"concept": "orders", "path": "sources[0].last_modified", "from": "2026-01-10"},
    ]
    # 2. One mapping per date: ready, with a digest and the revision the apply will produce.
    args = {"id": "up-1", "actor": "human:ann", "mappings": list(reversed(ALL))}
    ready = data.ok("preview_temporal_upgrade", **args)
    assert ready["status"] == "ready" and ready["unresolved"] == []
    assert ready["base_revision"] == first["base_revision"]
    assert ready["result_revision"] != ready["base_revision"]
    # 3. Apply: published, at exactly the previewed result revision.
    apply_args = {**args, "base_revision": ready["base_revision"],
                  "plan_digest": ready["plan_digest"]}
    applied = data.ok("apply_temporal_upgrade", **apply_args)
    assert applied["status"] == "applied"
    assert applied["result_revision"] == ready["result_revision"]
    upgraded = data.read("orders.md")
    assert upgraded == (
        "---\n"
        "type: table\n"
        "stale_after: 2026-06-01T00:00:00+02:00  # review then\n"
        "usage_window: {from: 2026-01-01T00:00:00Z, to: '2026-12-31T23:59:59.999Z'}\n"
        "sources:\n"
        "  - id: erd\n"
        "    resource: https://example.com/erd\n"
        '    last_modified: "2026-01-10T17:30:00-05:00"\n'
        "  - id: wiki\n"
        "    resource: https://wiki/orders\n"
        "    last_modified: 2026-02-01T08:00:00Z\n"
        "---\n"
        "# Orders\n\nstale_after: 2026-06-01 in the body is not frontmatter.\n"
    )
    # 4. The identical apply replays: same answer, nothing written again.
    assert data.ok("apply_temporal_upgrade", **apply_args) == applied
    assert data.read("orders.md") == upgraded
    # 5. A plan previewed against the old revision is now stale.
    stale = data.error("apply_temporal_upgrade", **{**apply_args, "id": "up-2"})
    assert stale["code"] == "revision_conflict"
    assert "preview" in stale["diagnostics"][-1]["message"]
    # Afterwards the bundle reads under the instant profile, and has nothing left to upgrade.
    card = data.ok("read_concept", concept_id="orders", temporal_profile="instant-0b87c52")
    assert card["projection"]["stale_after"] == "2026-06-01T00:00:00+02:00"
    again = data.ok("preview_temporal_upgrade", id="up-3", actor="human:ann")
    assert again["status"] == "noop" and again["plan_digest"] is None


def test_partial_mappings_stay_incomplete_and_cannot_be_applied(data: Client) -> None:
    preview = data.ok("preview_temporal_upgrade", id="u", actor="a", mappings=ALL[:2])
    assert preview["status"] == "incomplete"
    assert [u["path"] for u in preview["unresolved"]] == [
        "usage_window.to", "sources[0].last_modified"]
    error = data.error("apply_temporal_upgrade", id="u", actor="a", mappings=ALL[:2],
                       base_revision=preview["base_revision"],
                       plan_digest="sha256:" + "1" * 64)
    assert error["code"] == "operation_rejected"
    assert data.read("orders.md") == ORDERS


def test_a_different_plan_is_plan_mismatch(data: Client) -> None:
    ready = data.ok("preview_temporal_upgrade", id="u", actor="a", mappings=ALL)
    other = [dict(ALL[0], to="2026-06-01T12:00:00+02:00"), *ALL[1:]]
    error = data.error("apply_temporal_upgrade", id="u", actor="a", mappings=other,
                       base_revision=ready["base_revision"], plan_digest=ready["plan_digest"])
    assert error["code"] == "plan_mismatch"
    assert error["diagnostics"][-1]["code"] == "recovery_step"
    assert data.read("orders.md") == ORDERS


@pytest.mark.parametrize(
    "mapping",
    [
        # names a field that holds no date (already an instant)
        {"concept": "orders", "path": "sources[1].last_modified", "from": "2026-02-01",
         "to": "2026-02-01T08:00:00Z"},
        # names a concept that does not exist
        {"concept": "nope", "path": "stale_after", "from": "2026-06-01",
         "to": "2026-06-01T00:00:00Z"},
        # "from" is not the date the bundle holds
        {"concept": "orders", "path": "stale_after", "from": "2026-06-02",
         "to": "2026-06-02T00:00:00Z"},
        # no such source position
        {"concept": "orders", "path": "sources[7].last_modified", "from": "2026-01-10",
         "to": "2026-01-10T00:00:00Z"},
    ],
)
def test_a_mapping_that_names_no_such_date_is_invalid_request(data: Client, mapping) -> None:
    error = data.error("preview_temporal_upgrade", id="u", actor="a", mappings=[mapping])
    assert error["code"] == "invalid_request"
    assert error["diagnostics"][0]["field"].startswith("$.mappings[0]")


@pytest.mark.parametrize(
    "mapping",
    [
        {"concept": "orders", "path": "title", "from": "2026-06-01",
         "to": "2026-06-01T00:00:00Z"},  # not an allowed path
        {"concept": "orders", "path": "stale_after", "from": "2026-06-01",
         "to": "2026-06-01T00:00:00"},  # no offset: the server never picks one
        {"concept": "orders", "path": "stale_after", "from": "2026-06-01",
         "to": "2026-06-01T00:00:00-00:00"},  # unknown local offset
        {"concept": "orders", "path": "stale_after", "from": "2026-02-30",
         "to": "2026-06-01T00:00:00Z"},  # no such day
        {"concept": "../orders", "path": "stale_after", "from": "2026-06-01",
         "to": "2026-06-01T00:00:00Z"},
    ],
)
def test_malformed_mappings_are_invalid_request(data: Client, mapping) -> None:
    error = data.error("preview_temporal_upgrade", id="u", actor="a", mappings=[mapping])
    assert error["code"] == "invalid_request"


def test_duplicate_mappings_are_invalid_request(data: Client) -> None:
    error = data.error("preview_temporal_upgrade", id="u", actor="a",
                       mappings=[ALL[0], dict(ALL[0], to="2026-06-01T01:00:00Z")])
    assert error["code"] == "invalid_request"
    assert error["diagnostics"][0]["field"] == "$.mappings[1]"


def test_oversized_actor_and_id_are_resource_limit(data: Client) -> None:
    assert data.error("preview_temporal_upgrade", id="u", actor="a" * 257)["code"] == \
        "resource_limit"
    assert data.error("preview_temporal_upgrade", id="u" * 129, actor="a")["code"] == \
        "resource_limit"


def test_a_bundle_without_v02_declaration_is_rejected(tmp_bundle) -> None:
    client = Client(tmp_bundle({"index.md": "# Old\n", "orders.md": ORDERS}))
    error = client.error("preview_temporal_upgrade", id="u", actor="a")
    assert error["code"] == "operation_rejected"
    assert "preview_v02_migration" in error["diagnostics"][-1]["message"]


def test_a_value_that_is_neither_date_nor_instant_blocks_the_upgrade(tmp_bundle) -> None:
    client = Client(tmp_bundle({"index.md": INDEX,
                                "a.md": "---\ntype: t\nstale_after: soon\n---\n"}))
    error = client.error("preview_temporal_upgrade", id="u", actor="a")
    assert error["code"] == "operation_rejected"
    first = error["diagnostics"][0]
    assert (first["code"], first["file"], first["field"]) == (
        "unsupported_temporal_value", "a.md", "stale_after")


def test_a_bundle_without_dates_is_noop(tmp_bundle) -> None:
    client = Client(tmp_bundle({"index.md": INDEX, "plain.md": PLAIN}))
    preview = client.ok("preview_temporal_upgrade", id="u", actor="a", mappings=[])
    assert preview == {
        "status": "noop",
        "base_revision": preview["base_revision"],
        "result_revision": preview["base_revision"],
        "plan_digest": None,
        "unresolved": [],
    }


def test_preview_is_deterministic_and_ignores_mapping_order(data: Client) -> None:
    one = data.ok("preview_temporal_upgrade", id="u", actor="a", mappings=ALL)
    two = data.ok("preview_temporal_upgrade", id="u", actor="a", mappings=ALL[::-1])
    assert one == two
    other_actor = data.ok("preview_temporal_upgrade", id="u", actor="b", mappings=ALL)
    assert other_actor["plan_digest"] != one["plan_digest"]
