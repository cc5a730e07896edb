"""bundle_summary agrees with the tools whose rules it reuses, and stays small by construction.

Each count is checked against another tool's answer on the same bundle (list_concepts' cards,
validate_bundle's link and orphan findings, get_neighbors' incoming edges), so a summary that
counted by a rule of its own would disagree somewhere.
"""

from __future__ import annotations

import json
import os
import posixpath
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bundle_mcp import derived
from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.tools import bundle_summary

try:
    from tests import golden_runner
except ImportError:  # pytest run without the repository root on sys.path
    import golden_runner  # type: ignore[no-redef]

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = str(REPO / "examples" / "coffee-roastery")


@pytest.fixture(scope="module")
def inventory(tmp_path_factory: pytest.TempPathFactory) -> str:
    root = Path(os.path.realpath(tmp_path_factory.mktemp("inventory")))
    golden_runner.generate_inventory(root, 1000)
    return str(root)


def ok(dispatcher: Dispatcher, tool: str, **arguments: Any) -> dict[str, Any]:
    outcome = dispatcher.call(tool, arguments)
    assert not outcome.is_error, outcome.structured
    result: dict[str, Any] = outcome.structured
    return result


def every(tally: dict[str, Any]) -> dict[str, int]:
    return {v["value"]: v["count"] for v in tally["values"]}


@pytest.mark.parametrize("project", [None, "area-02", "area-03"])
def test_counts_agree_with_list_concepts_cards(inventory: str, project: str | None) -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(inventory,)))
    scope = {} if project is None else {"project": project}
    summary = ok(dispatcher, "bundle_summary", top=50, as_of="2026-06-01", **scope)
    cards = [
        c for c in ok(dispatcher, "list_concepts", as_of="2026-06-01")["concepts"]
        if project is None or c["path"].startswith(project + "/")
    ]
    assert summary["concepts"] == len(cards)
    assert summary["status"] == {
        key: sum(1 for c in cards if (c["status"] or "invalid") == key)
        for key in ("draft", "stable", "deprecated", "invalid")
    }
    assert summary["trust"] == {
        tier: sum(1 for c in cards if c["trust"] == tier)
        for tier in ("unverified", "machine-confirmed", "human-reviewed")
    }
    assert summary["staleness"] == {
        "stale": sum(1 for c in cards if c["stale"] is True),
        "not_stale": sum(1 for c in cards if c["stale"] is False),
        "unknown": sum(1 for c in cards if c["stale"] is None),
    }
    types = sorted(Counter(c["type"] for c in cards).items(), key=lambda i: (-i[1], i[0]))
    assert [(v["value"], v["count"]) for v in summary["types"]["values"]] == types[:50]
    assert summary["types"]["others"] == max(0, len(types) - 50)
    folders = Counter(
        f for c in cards for f in _ancestors(c["path"]) if f != project
    )
    assert every(summary["folders"]) == dict(folders)


def _ancestors(path: str) -> list[str]:
    out = []
    folder = posixpath.dirname(path)
    while folder:
        out.append(folder)
        folder = posixpath.dirname(folder)
    return out


def test_links_and_orphans_agree_with_validate_bundle(inventory: str) -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(inventory,)))
    summary = ok(dispatcher, "bundle_summary", top=50)
    report = ok(dispatcher, "validate_bundle", check_links=True, check_orphans=True)
    findings = report["diagnostics"]
    orphans = sorted(d["file"][:-3] for d in findings if d["code"] == "orphan")
    broken = sorted((d["file"][:-3], d["line"]) for d in findings if d["code"] == "broken_link")
    assert summary["orphans"]["count"] == len(orphans) > 50
    assert summary["orphans"]["ids"] == orphans[:50]
    assert summary["orphans"]["others"] == len(orphans) - 50
    unindexed = {d["file"] for d in findings if d["code"] == "missing_index"}
    cards = ok(dispatcher, "list_concepts")["concepts"]
    assert summary["orphans"]["unchecked"] == sum(
        1 for c in cards if posixpath.dirname(c["path"]) in unindexed
    ) > 0
    assert summary["broken_links"]["count"] == len(broken) > 50
    assert [(b["concept_id"], b["line"]) for b in summary["broken_links"]["links"]] == broken[:50]


def test_most_linked_agrees_with_incoming_edges() -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(EXAMPLE,)))
    summary = ok(dispatcher, "bundle_summary", top=50)
    for entry in summary["most_linked"]["concepts"]:
        edges = ok(dispatcher, "get_neighbors", concept_id=entry["id"], direction="in",
                   kinds=["navigation", "relation"], limit=100)["edges"]
        sources = {e["from"].split("#", 1)[0].replace("\\#", "#") for e in edges}
        assert entry["inbound"] == len(sources - {entry["id"]}), entry
    ranked = [(-e["inbound"], e["id"]) for e in summary["most_linked"]["concepts"]]
    assert ranked == sorted(ranked)


def test_the_answer_stays_small_whatever_the_bundle_holds(tmp_bundle: Any) -> None:
    """Huge tags and types are cut; long IDs fill a list's byte share, and the rest is
    counted in others: the answer stays inside its 64 KiB budget at the largest top."""
    long_folder = "f" * 200
    files = {}
    for n in range(60):
        stem = f"{n:03d}-" + "x" * 240
        files[f"{long_folder}/{long_folder}/{stem}.md"] = (
            f"---\ntype: {'T' * 5000}{n}\ntags: ['{'g' * 3000}{n}']\n---\n"
            f"[broken](missing-{'y' * 3000}-{n}.md)\n"
        )
    bundle = tmp_bundle(files)
    outcome = Dispatcher(ServeConfig(bundles=(bundle,))).call("bundle_summary", {"top": 50})
    assert not outcome.is_error, outcome.structured
    assert len(outcome.text.encode("utf-8")) <= bundle_summary.SPEC.output_budget
    summary = outcome.structured
    assert summary["concepts"] == 60
    for name in ("types", "tags"):
        values = summary[name]["values"]
        assert all(len(v["value"]) <= bundle_summary.MAX_TEXT_CHARS for v in values)
        assert all(v["value"].endswith("…") for v in values)
    links = summary["broken_links"]
    assert links["count"] == 60 and 0 < len(links["links"]) < 50
    assert len(links["links"]) + links["others"] == 60
    for name, key in (("broken_links", "links"), ("orphans", "ids")):
        part = json.dumps(summary[name][key], ensure_ascii=False, separators=(",", ":"))
        assert len(part.encode("utf-8")) <= bundle_summary.LIST_BYTES + 2


def test_counts_are_kept_per_snapshot_and_project() -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(EXAMPLE,)))
    for arguments in ({}, {"top": 3}, {"as_of": "2026-07-01"}, {"project": "beans"}):
        ok(dispatcher, "bundle_summary", **arguments)
    snapshot = dispatcher.served_snapshot(EXAMPLE, CancelToken())
    assert derived.built(snapshot)["summary_counts"] == 2  # the whole bundle, and beans


def test_top_is_clamped_and_echoed() -> None:
    dispatcher = Dispatcher(ServeConfig(bundles=(EXAMPLE,)))
    for given, applied in ((-5, 1), (0, 1), (1, 1), (7, 7), (50, 50), (10_000, 50)):
        summary = ok(dispatcher, "bundle_summary", top=given)
        assert summary["top"] == applied
        assert len(summary["tags"]["values"]) == applied
    refused = dispatcher.call("bundle_summary", {"top": "5"})
    assert refused.is_error and refused.structured["code"] == "invalid_request"
