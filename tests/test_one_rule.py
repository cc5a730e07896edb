"""One home for every rule: the tools that share a format rule agree on it.

- ``okf.citations``: the v0.1 ``# Citations`` section (level-1 heading, any letter case).
- ``versioning.resolve_version``: an undeclared bundle is 0.1 for readers and the migration.
- ``okf.names.concept_name``: a concept's name is its trimmed title.
- ``okf.ids.concept_id_for_path`` / ``path_for_concept_id``: the path ↔ ID rule (issue 27: it
  was re-coded inline in six places).
"""

from __future__ import annotations

import re
from pathlib import Path
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


# Slicing or gluing ".md" to turn a path into a concept ID or back: only okf/ids.py may.
INLINE_PATH_RULE = re.compile(
    r'\[:\s*-3\]|\[:\s*-len\("\.md"\)\]|removesuffix\("\.md"\)|\+\s*"\.md"|\{[^{}]*\}\.md"')
SRC = Path(__file__).resolve().parent.parent / "src" / "bundle_mcp"


def test_the_path_to_id_rule_is_coded_once() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path == SRC / "okf" / "ids.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if INLINE_PATH_RULE.search(line):
                found.append(f"{path.relative_to(SRC)}:{n}: {line.strip()}")
    assert found == [], "use okf.ids.concept_id_for_path / path_for_concept_id"
