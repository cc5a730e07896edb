"""preview_v02_migration / apply_v02_migration: v0.1 → v0.2 with every choice explicit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.contracts import ContractSet
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.tools import load_tools

TOOLS = ("preview_v02_migration", "apply_v02_migration")
CONTRACTS = ContractSet()

INDEX = "# Knowledge\n\n- [Cache](cache.md)\n"
CACHE = (
    "---\n"
    "type: design  # a v0.1 concept\n"
    "timestamp: 2024-05-01T10:00:00Z\n"
    "---\n"
    "# Cache\n"
    "\n"
    "Entries expire after an hour [1]; see also [2]. Code `a[1]` is not a claim.\n"
    "\n"
    "# Citations\n"
    "\n"
    "[1] [Cache design](https://example.com/cache)\n"
    "[2] Internal runbook\n"
    "\n"
    "- <https://example.com/faq>\n"
)
QUEUE = (
    "---\n"
    "type: design\n"
    "timestamp: 2024-06-01T12:00:00+01:00\n"
    "generated:\n"
    "  by: writer/2\n"
    "  at: 2024-06-01T10:00:00Z\n"
    "---\n"
    "# Queue\n"
)
NOTE = "---\ntype: note\n---\nNothing legacy here.\n"

MAPPINGS = [{
    "path": "cache.md",
    "entries": [
        {"legacy_number": 1, "source_id": "cache-design"},
        {"legacy_number": 2, "source_id": "runbook", "resource": "https://wiki/runbook"},
        {"legacy_entry": "<https://example.com/faq>", "source_id": "faq"},
    ],
}]
BASE_ARGS: dict[str, Any] = {
    "generated_by": "human:migrator",
    "timestamp_policy": "remove_after_copy",
    "citation_mappings": MAPPINGS,
}


class Client:
    def __init__(self, bundle: str) -> None:
        self.bundle = bundle
        self.dispatcher = Dispatcher(ServeConfig(bundles=(bundle,)), CONTRACTS,
                                     tools=load_tools(TOOLS))

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

    def apply(self, preview: dict[str, Any], **args: Any) -> dict[str, Any]:
        return self.ok("apply_v02_migration", **args, expected_source=preview["source"],
                       proof=preview["proof"], expected_plan_digest=preview["plan_digest"])


@pytest.fixture
def legacy(tmp_bundle) -> Client:
    return Client(tmp_bundle({"index.md": INDEX, "cache.md": CACHE, "queue.md": QUEUE,
                              "note.md": NOTE}))


def test_full_transition_preview_apply_replay(legacy: Client) -> None:
    preview = legacy.ok("preview_v02_migration", **BASE_ARGS,
                        timestamp_conflict_policy="use_generated")
    assert preview["status"] == "applicable"
    source = preview["source"]
    assert (source["resolution_source"], source["transition"]) == ("legacy-probe",
                                                                  "v0.1-to-v0.2")
    assert [(c["kind"], c["path"]) for c in source["candidates"]] == [
        ("timestamp", "cache.md"), ("citations", "cache.md"), ("timestamp", "queue.md")]
    assert preview["affected_paths"] == ["cache.md", "index.md", "queue.md"]
    proof = preview["proof"]
    assert proof["format_version"] == 2
    assert proof["base_revision"] == preview["base_revision"]
    assert proof["result_revision"] == preview["result_revision"]
    assert [w["path"] for w in proof["writes"]] == preview["affected_paths"]
    assert proof["changed_refs"] == ["cache", "queue"]
    assert preview["blockers"] == [] and preview["manual_actions"] == []

    applied = legacy.apply(preview, **BASE_ARGS, timestamp_conflict_policy="use_generated")
    assert applied["status"] == "applied"
    assert applied["changed_paths"] == preview["affected_paths"]
    assert applied["result_revision"] == preview["result_revision"]
    assert legacy.read("index.md") == '---\nokf_version: "0.2"\n---\n' + INDEX
    assert legacy.read("cache.md") == (
        "---\n"
        "type: design  # a v0.1 concept\n"
        "generated:\n"
        "  by: human:migrator\n"
        '  at: "2024-05-01T10:00:00Z"\n'
        "sources:\n"
        "  - id: cache-design\n"
        "    resource: https://example.com/cache\n"
        "    title: Cache design\n"
        "  - id: runbook\n"
        "    resource: https://wiki/runbook\n"
        "  - id: faq\n"
        "    resource: https://example.com/faq\n"
        "---\n"
        "# Cache\n"
        "\n"
        "Entries expire after an hour [^cache-design]; see also [^runbook]. Code `a[1]` is not "
        "a claim.\n"
        "\n"
        "[^cache-design]: [Cache design](https://example.com/cache)\n"
        "[^runbook]: https://wiki/runbook\n"
        "[^faq]: https://example.com/faq\n"
    )
    # use_generated: the existing generated.at wins; the copied timestamp is removed
    assert legacy.read("queue.md") == QUEUE.replace("timestamp: 2024-06-01T12:00:00+01:00\n", "")
    assert legacy.read("note.md") == NOTE

    replayed = legacy.apply(preview, **BASE_ARGS, timestamp_conflict_policy="use_generated")
    assert replayed == applied
    after = legacy.ok("preview_v02_migration", **BASE_ARGS)
    assert after["status"] == "noop"
    assert after["source"]["transition"] == "target-noop"
    assert (after["proof"], after["plan_digest"]) == (None, None)


def test_missing_inputs_block_with_manual_actions(legacy: Client) -> None:
    preview = legacy.ok("preview_v02_migration", timestamp_policy="preserve",
                        citation_mappings=[])
    assert preview["status"] == "blocked"
    assert (preview["proof"], preview["plan_digest"], preview["result_revision"]) == (
        None, None, None)
    assert {(b["code"], b["path"]) for b in preview["blockers"]} == {
        ("missing_explicit_generated_by", "cache.md"),
        ("missing_citation_mapping", "cache.md"),
        ("timestamp_generated_conflict", "queue.md"),
    }
    assert {(a["code"], a["path"]) for a in preview["manual_actions"]} == {
        ("provide_generated_by", "cache.md"),
        ("provide_citation_mapping", "cache.md"),
    }
    citations = next(b for b in preview["blockers"] if b["code"] == "missing_citation_mapping")
    start, end = citations["location"]["start"], citations["location"]["end"]
    assert CACHE.encode()[start:end] == b"# Citations\n"
    assert legacy.read("cache.md") == CACHE


def test_sources_and_citations_together_need_reconciling(tmp_bundle) -> None:
    client = Client(tmp_bundle({"index.md": INDEX, "cache.md": CACHE.replace(
        "timestamp: 2024-05-01T10:00:00Z\n", "sources:\n  - resource: x\n")}))
    preview = client.ok("preview_v02_migration", **BASE_ARGS)
    assert preview["status"] == "blocked"
    assert [a["code"] for a in preview["manual_actions"]] == ["reconcile_sources_and_citations"]


@pytest.mark.parametrize(
    ("policy", "expected_at"),
    [("use_timestamp", "2024-06-01T12:00:00+01:00"), ("use_generated", "2024-06-01T10:00:00Z")],
)
def test_timestamp_conflict_policy_decides_generated_at(
    tmp_bundle, policy: str, expected_at: str
) -> None:
    client = Client(tmp_bundle({"index.md": INDEX, "queue.md": QUEUE}))
    args = {"timestamp_policy": "preserve", "citation_mappings": [],
            "timestamp_conflict_policy": policy}
    preview = client.ok("preview_v02_migration", **args)
    client.apply(preview, **args)
    text = client.read("queue.md")
    assert f"  at: {expected_at}\n" in text
    assert "timestamp: 2024-06-01T12:00:00+01:00\n" in text  # preserved


def test_a_date_only_timestamp_needs_an_explicit_generated_at(tmp_bundle) -> None:
    client = Client(tmp_bundle({"index.md": INDEX,
                                "a.md": "---\ntype: t\ntimestamp: 2024-05-01\n---\n"}))
    args = {"generated_by": "human:m", "timestamp_policy": "remove_after_copy",
            "citation_mappings": []}
    blocked = client.ok("preview_v02_migration", **args)
    assert [b["code"] for b in blocked["blockers"]] == ["invalid_legacy_timestamp"]
    assert [a["code"] for a in blocked["manual_actions"]] == ["provide_generated_at"]
    explicit = {**args, "generated_at": [{"concept_id": "a", "at": "2024-05-01T09:00:00+02:00"}]}
    preview = client.ok("preview_v02_migration", **explicit)
    client.apply(preview, **explicit)
    assert client.read("a.md") == (
        '---\ntype: t\ngenerated:\n  by: human:m\n  at: "2024-05-01T09:00:00+02:00"\n---\n')


def test_unknown_concepts_and_paths_are_blockers(legacy: Client) -> None:
    preview = legacy.ok(
        "preview_v02_migration", **{**BASE_ARGS, "timestamp_conflict_policy": "use_generated"},
        generated_at=[{"concept_id": "ghost", "at": "2024-01-01T00:00:00Z"}],
    )
    assert [b["code"] for b in preview["blockers"]] == ["unknown_concept"]
    preview = legacy.ok("preview_v02_migration", timestamp_policy="preserve",
                        generated_by="h", timestamp_conflict_policy="use_generated",
                        citation_mappings=[*MAPPINGS, {"path": "index.md", "entries": [
                            {"legacy_number": 1, "source_id": "x"}]}])
    assert [b["code"] for b in preview["blockers"]] == ["unsupported_citation_document"]


def test_a_marker_without_an_entry_blocks(tmp_bundle) -> None:
    client = Client(tmp_bundle({"index.md": INDEX, "cache.md": CACHE.replace(
        "see also [2]", "see also [3]")}))
    preview = client.ok("preview_v02_migration", **BASE_ARGS)
    assert [b["code"] for b in preview["blockers"]] == ["unresolved_claim_marker"]
    location = preview["blockers"][0]["location"]
    text = CACHE.replace("see also [2]", "see also [3]").encode()
    assert text[location["start"]:location["end"]] == b"[3]"


def test_an_entry_with_text_besides_its_link_blocks(tmp_bundle) -> None:
    # Regression: the footnote definition used to keep only the link and drop "by the team".
    link = "(https://example.com/cache)"
    cache = CACHE.replace(f"{link}\n", f"{link} by the team\n")
    client = Client(tmp_bundle({"index.md": INDEX, "cache.md": cache}))
    preview = client.ok("preview_v02_migration", **BASE_ARGS)
    assert "citation_entry_extra_text" in [b["code"] for b in preview["blockers"]]


def test_mappings_must_cover_every_entry(legacy: Client) -> None:
    args = {**BASE_ARGS, "timestamp_conflict_policy": "use_generated",
            "citation_mappings": [{"path": "cache.md", "entries": MAPPINGS[0]["entries"][:2]}]}
    preview = legacy.ok("preview_v02_migration", **args)
    assert [b["code"] for b in preview["blockers"]] == ["incomplete_citation_mapping"]


@pytest.mark.parametrize(
    ("index", "selector", "code", "resolution"),
    [
        ('---\nokf_version: "0.3"\n---\n', "auto", "unsupported_migration_source", "future"),
        ('---\nokf_version: "0.1"\n---\n', "0.2", "unsupported_migration_source", "explicit"),
        ("---\nokf_version: 1\n---\n", "auto", "invalid_version_declaration", "declared"),
    ],
)
def test_unsupported_sources_are_blocked(tmp_bundle, index, selector, code, resolution) -> None:
    client = Client(tmp_bundle({"index.md": index, "note.md": NOTE}))
    preview = client.ok("preview_v02_migration", timestamp_policy="preserve",
                        citation_mappings=[], **{"from": selector})
    assert preview["status"] == "blocked"
    assert preview["source"]["transition"] == "blocked"
    assert preview["source"]["resolution_source"] == resolution
    assert [b["code"] for b in preview["blockers"]] == [code]


def test_an_undeclared_bundle_without_legacy_keys_is_read_as_v01(tmp_bundle) -> None:
    # versioning.resolve_version's rule (docs/decisions/loading.md): undeclared is 0.1, for the
    # readers and for the migration alike, so migrating it only writes the declaration.
    client = Client(tmp_bundle({"index.md": INDEX, "note.md": NOTE}))
    args = {"timestamp_policy": "preserve", "citation_mappings": []}
    preview = client.ok("preview_v02_migration", **args)
    assert (preview["status"], preview["source"]["resolution_source"]) == ("applicable", "default")
    assert preview["source"]["from_version"] == "0.1"
    assert preview["affected_paths"] == ["index.md"]
    client.apply(preview, **args)
    assert client.read("index.md").startswith('---\nokf_version: "0.2"\n---\n')


def test_explicit_01_selector_migrates_an_undeclared_bundle(tmp_bundle) -> None:
    client = Client(tmp_bundle({"index.md": INDEX, "note.md": NOTE}))
    args = {"timestamp_policy": "preserve", "citation_mappings": [], "from": "0.1"}
    preview = client.ok("preview_v02_migration", **args)
    assert preview["status"] == "applicable"
    assert preview["affected_paths"] == ["index.md"]
    client.apply(preview, **args)
    assert client.read("index.md").startswith('---\nokf_version: "0.2"\n---\n')


def test_inline_computations_are_set_while_migrating(tmp_bundle) -> None:
    client = Client(tmp_bundle({"index.md": INDEX, "calc.md": NOTE}))
    contract = {"mode": "inline", "runtime": "python3", "parameters": [],
                "inline_computation": "print(2)\n", "inline_language": "python",
                "executor": {"resource": "urn:e", "receipt": ["r"]},
                "attester": {"resource": "urn:a"}}
    args = {"timestamp_policy": "preserve", "citation_mappings": [], "from": "0.1",
            "computations": [{"concept_id": "calc", "contract": contract}]}
    preview = client.ok("preview_v02_migration", **args)
    client.apply(preview, **args)
    text = client.read("calc.md")
    assert "type: Attested Computation\n" in text
    assert text.endswith("# Computation\n\n```python\nprint(2)\n```\n")
    file_mode = {**{k: v for k, v in contract.items() if not k.startswith("inline")},
                 "mode": "file", "computation_path": "calc.py"}
    blocked = client.ok("preview_v02_migration", **{**args, "from": "auto", "computations": [
        {"concept_id": "calc", "contract": file_mode, "asset": {"path": "calc.py",
                                                                 "content": "print(2)\n"}}]})
    assert blocked["status"] == "noop"  # the bundle is v0.2 now: nothing left to migrate


# ---------------------------------------------------------------- apply errors


def test_a_changed_bundle_is_revision_conflict(legacy: Client) -> None:
    args = {**BASE_ARGS, "timestamp_conflict_policy": "use_generated"}
    preview = legacy.ok("preview_v02_migration", **args)
    (Path(legacy.bundle) / "note.md").write_text(NOTE + "more\n", encoding="utf-8")
    error = legacy.error("apply_v02_migration", **args, expected_source=preview["source"],
                         proof=preview["proof"], expected_plan_digest=preview["plan_digest"])
    assert error["code"] == "revision_conflict"
    assert legacy.read("index.md") == INDEX


def test_a_tampered_proof_or_other_request_is_plan_mismatch(legacy: Client) -> None:
    args = {**BASE_ARGS, "timestamp_conflict_policy": "use_generated"}
    preview = legacy.ok("preview_v02_migration", **args)
    proof = {**preview["proof"], "changed_refs": ["cache"]}
    error = legacy.error("apply_v02_migration", **args, expected_source=preview["source"],
                         proof=proof, expected_plan_digest=preview["plan_digest"])
    assert error["code"] == "plan_mismatch"
    error = legacy.error("apply_v02_migration", **{**args, "timestamp_policy": "preserve"},
                         expected_source=preview["source"], proof=preview["proof"],
                         expected_plan_digest=preview["plan_digest"])
    assert error["code"] == "plan_mismatch"
    assert legacy.read("cache.md") == CACHE


def test_an_apply_whose_plan_is_now_blocked_is_rejected(legacy: Client) -> None:
    args = {**BASE_ARGS, "timestamp_conflict_policy": "use_generated"}
    preview = legacy.ok("preview_v02_migration", **args)
    error = legacy.error("apply_v02_migration", **{**args, "timestamp_conflict_policy": "reject"},
                         expected_source=preview["source"], proof=preview["proof"],
                         expected_plan_digest=preview["plan_digest"])
    assert error["code"] == "operation_rejected"
    assert error["diagnostics"][0]["code"] == "timestamp_generated_conflict"


def test_a_target_noop_source_that_no_longer_holds_is_plan_mismatch(legacy: Client) -> None:
    stale_source = {
        "requested_selector": "auto", "declaration_present": False, "declaration_valid": True,
        "declaration_raw": "", "declared_version": None, "resolved_source": "0.2",
        "resolution_source": "default", "from_version": "0.2", "to_version": "0.2",
        "transition": "target-noop", "candidates": [], "blockers": [],
    }
    error = legacy.error("apply_v02_migration", timestamp_policy="preserve",
                         citation_mappings=[], expected_source=stale_source)
    assert error["code"] == "plan_mismatch"


@pytest.mark.parametrize(
    "args",
    [
        {"citation_mappings": []},  # timestamp_policy is required
        {"timestamp_policy": "preserve"},  # citation_mappings is required
        {"timestamp_policy": "keep", "citation_mappings": []},
        {"timestamp_policy": "preserve", "citation_mappings": [
            {"path": "cache.md", "entries": [{"source_id": "x"}]}]},  # no legacy selector
    ],
)
def test_malformed_requests_are_invalid_request(legacy: Client, args: dict) -> None:
    assert legacy.error("preview_v02_migration", **args)["code"] == "invalid_request"


def test_a_transition_apply_needs_proof_and_digest(legacy: Client) -> None:
    args = {**BASE_ARGS, "timestamp_conflict_policy": "use_generated"}
    preview = legacy.ok("preview_v02_migration", **args)
    error = legacy.error("apply_v02_migration", **args, expected_source=preview["source"])
    assert error["code"] == "invalid_request"


def test_generated_without_at_and_without_timestamp_is_left_alone(tmp_bundle) -> None:
    client = Client(tmp_bundle({"index.md": INDEX,
                                "a.md": "---\ntype: t\ngenerated:\n  by: w/1\n---\n"}))
    args = {"timestamp_policy": "preserve", "citation_mappings": [], "from": "0.1"}
    preview = client.ok("preview_v02_migration", **args)
    assert preview["status"] == "applicable" and preview["affected_paths"] == ["index.md"]
