"""One home for every rule: the tools that share a format rule agree on it.

- ``okf.citations``: the v0.1 ``# Citations`` section (level-1 heading, any letter case).
- ``versioning.resolve_version``: an undeclared bundle is 0.1 for readers and the migration.
- ``okf.names.concept_name``: a concept's name is its trimmed title.
"""

from __future__ import annotations

from typing import Any

from bundle_mcp.contracts import ContractSet
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.tools import load_tools

CONTRACTS = ContractSet()
INDEX = "# Knowledge\n\n- [Beans](beans.md)\n"
LOWER_CITATIONS = (
    "---\ntype: note\ntitle: Cache\n---\n"
    "Caching is described in the design [1].\n\n"
    "# citations\n\n"
    "[1] [Cache design](https://example.com/cache)\n"
)


def _call(dispatcher: Dispatcher, tool: str, **args: Any) -> dict[str, Any]:
    outcome = dispatcher.call(tool, args)
    assert not outcome.is_error, outcome.structured
    return outcome.structured


def _dispatcher(bundle: str) -> Dispatcher:
    return Dispatcher(ServeConfig(bundles=(bundle,)), CONTRACTS, tools=load_tools())


def test_lower_case_citations_section_is_one_section_for_every_tool(tmp_bundle) -> None:
    d = _dispatcher(tmp_bundle({"index.md": INDEX, "cache.md": LOWER_CITATIONS}))
    read = _call(d, "read_concept", concept_id="cache")
    assert read["legacy_fallback"]["sources_from_citations"] is True
    assert [s["resource"] for s in read["projection"]["sources"]] == ["https://example.com/cache"]
    report = _call(d, "validate_bundle", strict=True)  # the v0.1 body conventions are strict
    codes = {f["code"] for f in report["diagnostics"]}
    assert "missing_recommended_field" in codes  # strict checks ran
    assert "citations_section_missing" not in codes, report
    args = {"timestamp_policy": "preserve", "citation_mappings": []}
    preview = _call(d, "preview_v02_migration", **args)
    assert [c["kind"] for c in preview["source"]["candidates"]] == ["citations"]
    assert preview["status"] == "blocked"
    assert [b["code"] for b in preview["blockers"]] == ["missing_citation_mapping"]


def test_a_citations_heading_in_a_code_fence_is_no_section(tmp_bundle) -> None:
    fenced = "---\ntype: note\n---\nText.\n\n```\n# Citations\n[1] x\n```\n"
    d = _dispatcher(tmp_bundle({"index.md": INDEX, "cache.md": fenced}))
    read = _call(d, "read_concept", concept_id="cache")
    assert read["legacy_fallback"]["sources_from_citations"] is False
    preview = _call(d, "preview_v02_migration", timestamp_policy="preserve",
                    citation_mappings=[])
    assert preview["source"]["candidates"] == []


def test_an_undeclared_bundle_has_one_effective_version(tmp_bundle) -> None:
    d = _dispatcher(tmp_bundle({"index.md": INDEX, "note.md": "---\ntype: note\n---\nPlain.\n"}))
    listed = _call(d, "list_concepts")["version"]["effective"]
    report = _call(d, "validate_bundle")
    preview = _call(d, "preview_v02_migration", timestamp_policy="preserve",
                    citation_mappings=[])
    assert listed == "0.1"
    assert preview["source"]["from_version"] == listed
    assert preview["source"]["transition"] == "v0.1-to-v0.2"
    assert report["version"]["effective"] == listed


def test_a_concept_name_is_its_trimmed_title_in_every_traversal(tmp_bundle) -> None:
    beans = "---\ntype: note\ntitle: \"  Beans  \"\n---\nSee [roast](roast.md).\n"
    roast = "---\ntype: note\ntitle: Roast\n---\nRoasting [beans](beans.md).\n"
    d = _dispatcher(tmp_bundle({"index.md": INDEX, "beans.md": beans, "roast.md": roast}))
    expanded = _call(d, "expand_neighbors", entity_ids=["roast"], depth=1)
    assert [n["name"] for n in expanded["neighbors"] if n["id"] == "beans"] == ["Beans"]
    subgraph = _call(d, "query_subgraph", seed_ids=["roast"], depth=1, compact_mode=True)
    assert [n["name"] for n in subgraph["subgraph"]["nodes"] if n["id"] == "beans"] == ["Beans"]
