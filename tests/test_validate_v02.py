"""OKF v0.2 validation: path-valued fields (§6.2), Attested Computations (§10), log.md under the
effective version (§9, §12) and index.md (§8).

Every bundle is written into ``tmp_path`` by the test that uses it; the text is this project's
own. Findings are compared as (code, severity, file, field) and, where the wording matters (a
suggested spelling), by message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bundle_mcp.cancel import CancelToken
from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader import load_bundle
from bundle_mcp.okf.sql import bind_variables
from bundle_mcp.okf.temporal import reference_from
from bundle_mcp.validation import ValidateOptions, validate

Finding = tuple[str, str, str | None, str | None]


def write(root: Path, files: dict[str, str | bytes]) -> Path:
    for relative, content in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content, encoding="utf-8")
    return root


def report(root: Path, *, target: str = "auto", check_links: bool = False,
           check_orphans: bool = False, strict: bool = False) -> dict[str, Any]:
    snapshot, _ = load_bundle(str(root))
    return validate(
        snapshot,
        ValidateOptions(reference=reference_from({}), strict=strict, check_links=check_links,
                        check_orphans=check_orphans, target_version=target),
        CancelToken(),
    )


def findings(result: dict[str, Any], *codes: str) -> list[Finding]:
    """The findings, as (code, severity, file, field); only ``codes`` when given."""
    return sorted(
        (d["code"], d["severity"], d["file"], d["field"])
        for d in result["diagnostics"]
        if not codes or d["code"] in codes
    )


def messages(result: dict[str, Any], code: str) -> list[str]:
    return [d["message"] for d in result["diagnostics"] if d["code"] == code]


def concept(fm: str, body: str = "Body.\n") -> str:
    return f"---\n{fm.strip()}\n---\n\n{body}"


ROOT_INDEX = "# Concepts\n\n* [A](a.md) - A concept.\n"
DECLARED = '---\nokf_version: "0.2"\n---\n\n'

SQL_BODY = """# Computation

```sql
SELECT SUM(amount) AS total
FROM shop.sales
WHERE fiscal_year = @year
```
"""

AC = """
type: Attested Computation
title: Sales for a year
runtime: bigquery
parameters:
  - { name: year, type: integer, required: true }
executor:
  resource: /run.md
  receipt: [job_id, executed_sql]
attester:
  resource: /check.py
"""

BASE = {
    "run.md": concept("type: Skill"),
    "check.py": "def check(receipt):\n    return True\n",
}


def ac_bundle(tmp_path: Path, fm: str = AC, body: str = SQL_BODY,
              extra: dict[str, str | bytes] | None = None) -> Path:
    return write(tmp_path, {**BASE, "calc/sales.md": concept(fm, body), **(extra or {})})


# --------------------------------------------------------------------------------------------
# A bundle shaped like the official example: folders of metrics, computations, skills and
# attesters, a root index of subfolder indexes, a log with frontmatter, and contract paths
# written from the bundle root without their '/'.

SHOP_INDEX = """# Folders

* [tables](tables/index.md) - The tables the numbers come from.
* [metrics](metrics/index.md) - What the headline numbers mean.
* [computations](computations/index.md) - The sanctioned SQL for each number.
* [skills](skills/) - How to run a computation.
* [attesters](attesters/index.md) - Code that checks a run.
"""

SHOP = {
    "tables/index.md": "# Tables\n\n* [Sales](sales.md) - One row per sale.\n",
    "tables/sales.md": concept("type: BigQuery Table\ntitle: Sales\n"
                               "resource: https://console.example/bq/shop/sales"),
    "metrics/index.md": "# Metrics\n\n* [Turnover](turnover.md) - Booked turnover.\n",
    "metrics/turnover.md": concept(
        "type: Metric\ntitle: Turnover\nsources:\n  - id: calc\n"
        "    resource: ../computations/turnover.md\n",
        "Computed by [the turnover computation](../computations/turnover.md).[^calc]\n\n"
        "[^calc]: The sanctioned computation.\n"),
    "computations/index.md": "# Computations\n\n* [Turnover](turnover.md) - Turnover SQL.\n",
    "computations/turnover.md": concept(
        """
type: Attested Computation
title: Turnover for a fiscal year
runtime: bigquery
parameters:
  - { name: year, type: integer, required: true }
executor:
  resource: skills/run-sql.md
  receipt: [job_id, executed_sql, result]
attester:
  resource: attesters/same_sql.py
sources:
  - id: sales
    resource: tables/sales.md
    title: Sales table
""",
        "# Computation\n\n```sql\nSELECT SUM(net) AS turnover\nFROM `shop.sales`\n"
        "WHERE EXTRACT(YEAR FROM sold_at) = @year\n```\n\nReads the sales table.[^sales]\n\n"
        "[^sales]: Sales table.\n"),
    "skills/index.md": "# Skills\n\n* [Run SQL](run-sql.md) - Run a computation.\n",
    "skills/run-sql.md": concept("type: Skill\ntitle: Run SQL on the warehouse"),
    "attesters/index.md": "# Attesters\n\n* [Same SQL](same_sql.py) - Compares SQL.\n",
    "attesters/same_sql.py": "def attest(receipt):\n    return receipt['ok']\n",
    "log.md": """---
type: Log
title: Shop bundle history
---

# History

## 2026-06-02

- **Update**: Added the [turnover computation](/computations/turnover.md).

## 2026-05-20

- **Initialization**: Created the folders.
""",
}


def shop(tmp_path: Path, index: str) -> Path:
    return write(tmp_path, {**SHOP, "index.md": index})


def test_example_shaped_bundle_undeclared_is_v01_but_its_log_frontmatter_only_a_warning(
    tmp_path: Path,
) -> None:
    """Issue 25 item 6: the spec's own samples declare no version and give log.md frontmatter.
    A rule that only 0.1 has must not make such a bundle non-conformant."""
    result = report(shop(tmp_path, SHOP_INDEX))
    assert result["version"]["effective"] == "0.1"
    assert result["version"]["resolution"] == "default"
    assert result["conformance"] == {"conformant": True, "errors": 0}
    assert findings(result, "log_frontmatter") == [("log_frontmatter", "WARN", "log.md", None)]
    [message] = messages(result, "log_frontmatter")
    assert message.startswith("log.md should not contain frontmatter")
    assert "OKF v0.2 allows it" in message
    assert 'declare okf_version: "0.2" in the root index.md' in message


def test_example_shaped_bundle_declared_v02_is_conformant_and_names_the_rooted_spelling(
    tmp_path: Path,
) -> None:
    result = report(shop(tmp_path, DECLARED + SHOP_INDEX), check_links=True,
                    check_orphans=True)
    assert result["version"]["effective"] == "0.2"
    assert result["conformance"] == {"conformant": True, "errors": 0}
    assert findings(result) == [
        ("field_path_root_relative", "WARN", "computations/turnover.md", "attester.resource"),
        ("field_path_root_relative", "WARN", "computations/turnover.md", "executor.resource"),
        ("field_path_root_relative", "WARN", "computations/turnover.md", "sources[0].resource"),
    ]
    assert sorted(messages(result, "field_path_root_relative")) == [
        'attester.resource "attesters/same_sql.py" is read relative to computations/turnover.md '
        'and names nothing; the bundle-root file is "/attesters/same_sql.py"',
        'executor.resource "skills/run-sql.md" is read relative to computations/turnover.md '
        'and names nothing; the bundle-root file is "/skills/run-sql.md"',
        'sources[0].resource "tables/sales.md" is read relative to computations/turnover.md and '
        'names nothing; the bundle-root file is "/tables/sales.md"',
    ]


def test_the_rooted_spelling_silences_the_path_warnings(tmp_path: Path) -> None:
    files = dict(SHOP)
    files["computations/turnover.md"] = (
        files["computations/turnover.md"]
        .replace("resource: skills/", "resource: /skills/")
        .replace("resource: attesters/", "resource: ../attesters/")
        .replace("resource: tables/", "resource: /tables/")
    )
    write(tmp_path, {**files, "index.md": DECLARED + SHOP_INDEX})
    result = report(tmp_path, check_links=True, check_orphans=True)
    assert result["diagnostics"] == []


def test_an_explicit_target_version_decides_the_log_rule(tmp_path: Path) -> None:
    undeclared = shop(tmp_path / "undeclared", SHOP_INDEX)
    declared = shop(tmp_path / "declared", DECLARED + SHOP_INDEX)
    assert findings(report(undeclared, target="0.2"), "log_frontmatter") == []
    assert report(undeclared, target="0.2")["conformance"]["conformant"] is True
    for root in (undeclared, declared):
        result = report(root, target="0.1")
        assert findings(result, "log_frontmatter") == [
            ("log_frontmatter", "ERROR", "log.md", None)]
        assert result["conformance"]["conformant"] is False
        [message] = messages(result, "log_frontmatter")
        assert "a bundle that declares no version" not in message


def test_validate_bundle_tool_reports_the_same(tmp_path: Path) -> None:
    root = shop(tmp_path, SHOP_INDEX)
    dispatcher = Dispatcher(ServeConfig(bundles=(str(root),)))
    auto = dispatcher.call("validate_bundle", {}).structured
    v01 = dispatcher.call("validate_bundle", {"target_version": "0.1"}).structured
    v02 = dispatcher.call("validate_bundle", {"target_version": "0.2"}).structured
    assert auto["conformance"]["conformant"] is True
    assert [(d["code"], d["severity"]) for d in auto["diagnostics"]
            if d["code"] == "log_frontmatter"] == [("log_frontmatter", "WARN")]
    assert v01["conformance"]["conformant"] is False
    assert v02["conformance"]["conformant"] is True
    assert v02["version"]["resolution"] == "explicit"
    assert {d["code"] for d in v02["diagnostics"]} == {"field_path_root_relative"}


# --------------------------------------------------------------------------------------------
# log.md (§9)


LOG_WITH_FRONTMATTER = "---\ntype: Log\n---\n\n## 2026-06-21\n* Entry.\n"


@pytest.mark.parametrize("declared", ['"0.2"', '"0.3"'])
def test_log_frontmatter_is_allowed_under_v02_at_any_level(tmp_path: Path, declared: str) -> None:
    write(tmp_path, {
        "index.md": f"---\nokf_version: {declared}\n---\n\n" + ROOT_INDEX,
        "a.md": concept("type: Note"),
        "log.md": LOG_WITH_FRONTMATTER,
        "sub/log.md": LOG_WITH_FRONTMATTER,
    })
    result = report(tmp_path)
    assert result["version"]["effective"] == "0.2"
    assert result["diagnostics"] == []


@pytest.mark.parametrize("root_frontmatter", ["", '---\nokf_version: "0.1-draft"\n---\n\n'])
def test_log_frontmatter_is_a_warning_at_any_level_when_no_version_is_declared(
    tmp_path: Path, root_frontmatter: str,
) -> None:
    """Undeclared, or declared as a version the server does not know: read as 0.1, but the
    0.1-only rule is a WARN that says how to declare 0.2 (docs/decisions/validation.md, issue
    25)."""
    write(tmp_path, {
        "index.md": root_frontmatter + ROOT_INDEX,
        "a.md": concept("type: Note"),
        "log.md": LOG_WITH_FRONTMATTER,
        "sub/log.md": LOG_WITH_FRONTMATTER,
    })
    result = report(tmp_path)
    assert result["version"]["resolution"] == "default"
    assert findings(result) == [
        ("log_frontmatter", "WARN", "log.md", None),
        ("log_frontmatter", "WARN", "sub/log.md", None),
    ]
    assert result["conformance"] == {"conformant": True, "errors": 0}


def test_log_frontmatter_is_an_error_under_v01_at_any_level(tmp_path: Path) -> None:
    write(tmp_path, {
        "index.md": '---\nokf_version: "0.1"\n---\n\n' + ROOT_INDEX,
        "a.md": concept("type: Note"),
        "log.md": LOG_WITH_FRONTMATTER,
        "sub/log.md": LOG_WITH_FRONTMATTER,
    })
    assert findings(report(tmp_path)) == [
        ("log_frontmatter", "ERROR", "log.md", None),
        ("log_frontmatter", "ERROR", "sub/log.md", None),
    ]


@pytest.mark.parametrize(("root_frontmatter", "expected"), [
    ("", "WARN with the hint"),
    ('---\nokf_version: "0.1"\n---\n\n', "WARN"),
    ('---\nokf_version: "0.2"\n---\n\n', None),
])
def test_strict_recommends_timestamp_only_as_a_v01_rule(
    tmp_path: Path, root_frontmatter: str, expected: str | None,
) -> None:
    """``timestamp`` is superseded by ``generated.at`` in v0.2 (§13.1): a rule v0.2 dropped.
    It stays a WARN under a declared 0.1 (a recommended field is never an ERROR, §11); in an
    undeclared bundle it says how to declare 0.2."""
    write(tmp_path, {
        "index.md": root_frontmatter + ROOT_INDEX,
        "a.md": concept("type: Note\ntitle: A\ndescription: A concept.\ntags: [a]\n"
                        "generated: { by: human:ana, at: 2026-06-30T14:00:00Z }"),
    })
    result = report(tmp_path, strict=True)
    got = [d for d in result["diagnostics"] if d["code"] == "missing_recommended_field"]
    if expected is None:
        assert got == []
        return
    [finding] = got
    assert (finding["severity"], finding["field"]) == ("WARN", "timestamp")
    hinted = 'declare okf_version: "0.2" in the root index.md' in finding["message"]
    assert hinted is (expected == "WARN with the hint")


def test_log_structure_still_applies_under_v02(tmp_path: Path) -> None:
    write(tmp_path, {
        "index.md": DECLARED + ROOT_INDEX,
        "a.md": concept("type: Note"),
        "log.md": "---\ntype: Log\n---\n\n## 2026-05-01\n* Old.\n\n## 2026-06-01\n* New.\n",
    })
    assert findings(report(tmp_path)) == [("log_order", "ERROR", "log.md", None)]


@pytest.mark.parametrize("heading", ["2026-13-01", "2026-02-30", "May 22, 2026", "2026/05/22",
                                     "22-05-2026", "2026-5-22"])
def test_a_level_two_heading_that_is_not_an_iso_date_is_an_error(
    tmp_path: Path, heading: str,
) -> None:
    write(tmp_path, {
        "index.md": ROOT_INDEX,
        "a.md": concept("type: Note"),
        "log.md": f"# Log\n\n## 2026-06-01\n* Fine.\n\n## {heading}\n* Entry.\n",
    })
    result = report(tmp_path)
    assert findings(result) == [("log_heading_date", "ERROR", "log.md", None)]
    assert messages(result, "log_heading_date") == [
        f'log date heading is not ISO-8601 YYYY-MM-DD: "{heading}"']


# --------------------------------------------------------------------------------------------
# index.md (§8, §12)


def test_subdirectory_entries_are_accepted(tmp_path: Path) -> None:
    write(tmp_path, {
        "index.md": DECLARED + "# Folders\n\n* [tables](tables/index.md) - Tables.\n"
                    "* [sub](sub/) - A plain folder link.\n* [Top](top.md) - Top concept.\n",
        "top.md": concept("type: Note"),
        "tables/index.md": "# Tables\n\n* [Orders](orders.md) - Orders.\n",
        "tables/orders.md": concept("type: BigQuery Table"),
        "sub/index.md": "# Sub\n\n* [Leaf](leaf.md)\n",
        "sub/leaf.md": concept("type: Note"),
    })
    result = report(tmp_path, check_links=True, check_orphans=True)
    assert result["diagnostics"] == []


@pytest.mark.parametrize(("frontmatter", "expected"), [
    ('okf_version: "0.2"', []),
    ('okf_version: "0.1"', []),
    ('okf_version: "0.2"\ntitle: Shop', [("root_index_frontmatter", "ERROR", "index.md", None)]),
    ("okf_version: 0.2", [("root_index_version", "ERROR", "index.md", "okf_version")]),
    ("title: Shop", [("root_index_frontmatter", "ERROR", "index.md", None),
                     ("root_index_version", "ERROR", "index.md", "okf_version")]),
])
def test_the_root_index_may_carry_only_okf_version(
    tmp_path: Path, frontmatter: str, expected: list[Finding],
) -> None:
    write(tmp_path, {"index.md": f"---\n{frontmatter}\n---\n\n" + ROOT_INDEX,
                     "a.md": concept("type: Note")})
    assert findings(report(tmp_path)) == expected


@pytest.mark.parametrize("declared", [True, False])
def test_a_nested_index_has_no_frontmatter_even_okf_version(
    tmp_path: Path, declared: bool,
) -> None:
    write(tmp_path, {
        "index.md": (DECLARED if declared else "") + ROOT_INDEX,
        "a.md": concept("type: Note"),
        "sub/index.md": '---\nokf_version: "0.2"\n---\n\n# Sub\n\n* [B](b.md)\n',
        "sub/b.md": concept("type: Note"),
    })
    assert findings(report(tmp_path)) == [("index_frontmatter", "ERROR", "sub/index.md", None)]


def test_index_entries_are_headed_lists_of_links(tmp_path: Path) -> None:
    write(tmp_path, {
        "index.md": "* [A](a.md) - Before any heading.\n\n# Concepts\n\n* No link here.\n\n"
                    "# Empty\n\n# Grouping\n\n## Inner\n\n1. [A again](a.md)\n",
        "a.md": concept("type: Note"),
    })
    assert findings(report(tmp_path)) == [
        ("index_entry_before_heading", "ERROR", "index.md", None),
        ("index_entry_without_link", "ERROR", "index.md", None),
        ("index_section_empty", "ERROR", "index.md", None),
        ("index_section_empty", "ERROR", "index.md", None),
    ]


# --------------------------------------------------------------------------------------------
# Path-valued fields (§6.2)


def test_paths_that_name_nothing_by_field(tmp_path: Path) -> None:
    write(tmp_path, {
        "index.md": DECLARED + ROOT_INDEX,
        "a.md": concept("""
type: Note
resource: ../../outside.md
sources:
  - id: web
    resource: https://example.com/page
  - id: scope
    resource: all queries in project shop-prod
  - id: later
    resource: notes/not-written.md
"""),
        "calc/sales.md": concept(AC.replace("/run.md", "missing/run.md")
                                 .replace("/check.py", "/missing/check.py")
                                 + "computation: sales.sql\n"),
    })
    without = report(tmp_path)
    assert findings(without) == [
        ("contract_path_missing", "WARN", "calc/sales.md", "attester.resource"),
        ("contract_path_missing", "WARN", "calc/sales.md", "computation"),
        ("contract_path_missing", "WARN", "calc/sales.md", "executor.resource"),
        ("field_path_outside_bundle", "WARN", "a.md", "resource"),
    ]
    assert messages(without, "field_path_outside_bundle") == [
        'resource "../../outside.md" climbs above the bundle root from a.md; a field names '
        "files inside the bundle"]
    assert (
        'executor.resource "missing/run.md" (read as "calc/missing/run.md") names nothing in '
        "the bundle, so the computation's contract cannot be followed"
    ) in messages(without, "contract_path_missing")
    # A missing resource or source is tolerated like a broken link: an INFO, with --check-links.
    with_links = report(tmp_path, check_links=True)
    assert findings(with_links, "field_path_missing") == [
        ("field_path_missing", "INFO", "a.md", "sources[2].resource")]
    assert with_links["conformance"]["conformant"] is True


def test_a_missing_computation_file_is_reported_once(tmp_path: Path) -> None:
    ac_bundle(tmp_path, AC + "computation: lib/sales.sql\n", body="No code here.\n")
    result = report(tmp_path)
    assert findings(result) == [("contract_path_missing", "WARN", "calc/sales.md", "computation")]


def test_a_root_reading_that_is_a_folder_is_named_a_folder(tmp_path: Path) -> None:
    write(tmp_path, {
        "index.md": DECLARED + ROOT_INDEX,
        "a.md": concept("type: Note"),
        "docs/guide.md": concept("type: Note\nresource: docs/"),
    })
    assert messages(report(tmp_path), "field_path_root_relative") == [
        'resource "docs/" is read relative to docs/guide.md and names nothing; the bundle-root '
        'folder is "/docs"']


def test_contract_paths_on_other_types_are_not_paths(tmp_path: Path) -> None:
    write(tmp_path, {
        "index.md": ROOT_INDEX,
        "a.md": concept("type: Metric\ncomputation: nowhere.sql\n"
                        "executor: {resource: nowhere.md}\nruntime: bigquery"),
    })
    assert findings(report(tmp_path, check_links=True)) == [
        ("contract_field_ignored", "INFO", "a.md", "computation"),
        ("contract_field_ignored", "INFO", "a.md", "executor"),
        ("contract_field_ignored", "INFO", "a.md", "runtime"),
    ]


def test_a_near_miss_type_is_named(tmp_path: Path) -> None:
    write(tmp_path, {"index.md": ROOT_INDEX,
                     "a.md": concept("type: attested computation\nruntime: bigquery")})
    [message] = messages(report(tmp_path), "contract_field_ignored")
    assert "'attested computation'" in message and "'Attested Computation'" in message


# --------------------------------------------------------------------------------------------
# Attested Computations (§10)


def test_a_complete_computation_has_no_findings(tmp_path: Path) -> None:
    assert report(ac_bundle(tmp_path), check_links=True)["diagnostics"] == []


@pytest.mark.parametrize("target", ["auto", "0.1", "0.2"])
def test_computation_rules_do_not_depend_on_the_version(tmp_path: Path, target: str) -> None:
    ac_bundle(tmp_path, AC.replace("runtime: bigquery\n", ""))
    result = report(tmp_path, target=target)
    assert findings(result) == [
        ("computation_runtime_missing", "WARN", "calc/sales.md", "runtime")]
    assert result["conformance"]["conformant"] is True  # REQUIRED by §10.2, soft under §11


def test_malformed_contract_fields_are_warnings(tmp_path: Path) -> None:
    fm = """
type: Attested Computation
runtime: ""
parameters:
  - { name: year, type: integer, required: true }
  - year
  - { name: year, type: integer }
executor:
  resource: /run.md
  receipt: job_id
attester: /check.py
"""
    result = report(ac_bundle(tmp_path, fm))
    assert findings(result) == [
        ("computation_contract_invalid", "WARN", "calc/sales.md", "attester.resource"),
        ("computation_contract_invalid", "WARN", "calc/sales.md", "executor.receipt"),
        ("computation_contract_invalid", "WARN", "calc/sales.md", "parameters"),
        ("computation_contract_invalid", "WARN", "calc/sales.md", "parameters[1]"),
        ("computation_contract_invalid", "WARN", "calc/sales.md", "runtime"),
    ]
    assert result["conformance"]["conformant"] is True


def test_code_written_into_the_computation_field(tmp_path: Path) -> None:
    fm = AC + "computation: |\n  SELECT 1\n  FROM t WHERE y = @year\n"
    result = report(ac_bundle(tmp_path, fm, body="Prose.\n"))
    assert findings(result) == [
        ("computation_contract_invalid", "WARN", "calc/sales.md", "computation")]
    assert "'# Computation'" in messages(result, "computation_contract_invalid")[0]


@pytest.mark.parametrize(("body", "extra_fm", "extra", "code"), [
    ("Prose only.\n", "", {}, "computation_missing"),
    ("# Computation\n\nTo be written.\n", "", {}, "computation_missing"),
    (SQL_BODY + "\n```sql\nSELECT 2\n```\n", "", {}, "computation_ambiguous"),
    (SQL_BODY + "\n" + SQL_BODY, "", {}, "computation_ambiguous"),
    (SQL_BODY, "computation: sales.sql\n", {"calc/sales.sql": "SELECT @year\n"},
     "computation_ambiguous"),
    ("Prose.\n", "computation: https://example.com/sales.sql\n", {},
     "computation_not_in_bundle"),
    ("Prose.\n", "computation: sales.sql\n", {"calc/sales.sql": b"SELECT \xff @year\n"},
     "computation_unreadable"),
    ("Prose.\n", "computation: sales.sql\n",
     {"calc/sales.sql": "SELECT @year\n" + "-- padding\n" * 100_000}, "computation_too_large"),
])
def test_an_unavailable_computation_is_a_warning_with_its_reason(
    tmp_path: Path, body: str, extra_fm: str, extra: dict[str, str | bytes], code: str,
) -> None:
    result = report(ac_bundle(tmp_path, AC + extra_fm, body, extra))
    assert findings(result) == [(code, "WARN", "calc/sales.md", "computation")]
    assert result["conformance"]["conformant"] is True
    [message] = messages(result, code)
    assert "; " in message  # the reason, then the hint


def test_a_computation_file_is_read_and_its_parameters_checked(tmp_path: Path) -> None:
    extra: dict[str, str | bytes] = {
        "lib/sales.sql": "SELECT SUM(amount)\nFROM shop.sales\nWHERE region = @region\n"}
    result = report(ac_bundle(tmp_path, AC + "computation: ../lib/sales.sql\n", "Prose.\n",
                              extra))
    assert findings(result) == [
        ("computation_parameter_undeclared", "WARN", "calc/sales.md", "parameters"),
        ("computation_parameter_unused", "WARN", "calc/sales.md", "parameters[0]"),
    ]
    assert messages(result, "computation_parameter_unused") == [
        "parameter 'year' is declared but the bigquery computation never binds it"]
    assert messages(result, "computation_parameter_undeclared") == [
        "the bigquery computation binds 'region' but 'parameters' does not declare it"]


def test_bind_variables_in_strings_and_comments_do_not_count(tmp_path: Path) -> None:
    body = ("# Computation\n\n```sql\n-- filters by @region\nSELECT '@month' AS label, "
            "x::date\nFROM t /* :week */ WHERE y = @year\n```\n")
    assert report(ac_bundle(tmp_path, body=body))["diagnostics"] == []


def test_positional_markers_bind_the_declared_parameters_in_order(tmp_path: Path) -> None:
    fm = AC.replace("runtime: bigquery", "runtime: postgres").replace(
        "  - { name: year, type: integer, required: true }\n",
        "  - { name: year, type: integer, required: true }\n"
        "  - { name: region, type: string, required: true }\n")
    body = "# Computation\n\n```sql\nSELECT 1 FROM t WHERE y = $1 AND r = $2 AND z = $3\n```\n"
    result = report(ac_bundle(tmp_path, fm, body))
    assert findings(result) == [
        ("computation_parameter_undeclared", "WARN", "calc/sales.md", "parameters")]
    assert messages(result, "computation_parameter_undeclared") == [
        "the postgres computation binds $3 but 'parameters' does not declare it"]


def test_parameters_are_not_checked_for_a_runtime_that_is_not_sql(tmp_path: Path) -> None:
    fm = AC.replace("runtime: bigquery", "runtime: python")
    body = "# Computation\n\n```python\ndef total(rows):\n    return sum(rows)\n```\n"
    assert report(ac_bundle(tmp_path, fm, body))["diagnostics"] == []


@pytest.mark.parametrize(("executor", "expected"), [
    ("executor:\n  resource: /run.md\n",
     [("computation_receipt_missing", "WARN", "executor.receipt")]),
    ("executor:\n  resource: /run.md\n  receipt: []\n",
     [("computation_receipt_missing", "WARN", "executor.receipt")]),
    ("", [("computation_executor_missing", "INFO", "executor")]),
])
def test_the_executor_and_its_receipt(
    tmp_path: Path, executor: str, expected: list[tuple[str, str, str]],
) -> None:
    fm = AC.replace("executor:\n  resource: /run.md\n  receipt: [job_id, executed_sql]\n",
                    executor)
    result = report(ac_bundle(tmp_path, fm))
    assert [(c, s, f) for c, s, _, f in findings(result)] == expected


def test_no_attester_is_an_info(tmp_path: Path) -> None:
    fm = AC.replace("attester:\n  resource: /check.py\n", "")
    assert findings(report(ac_bundle(tmp_path, fm))) == [
        ("computation_attester_missing", "INFO", "calc/sales.md", "attester")]


# --------------------------------------------------------------------------------------------
# The placeholder SQL scan the validator uses (okf/sql.py; replaced at merge)


def test_bind_variables() -> None:
    sql = ("SELECT @@version, x::int, '@no', \"@no\", `@no`, $tag$ @no $tag$, '10:30'\n"
           "-- @no\nFROM t WHERE a = @a AND b = :b AND c = $c AND d = ? AND e = :1")
    assert bind_variables(sql, "BigQuery", ("p1", "p2")) == ("a", "b", "c", "p1")
    assert bind_variables("SELECT ?, ?, ?", "sqlite", ("x",)) == ("x", "?2", "?3")
    assert bind_variables("SELECT 1", "python", ()) is None
