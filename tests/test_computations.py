"""Attested computations (OKF v0.2 §6.2, §10): path-valued fields, the sanctioned computation,
SQL canonicalisation and the deterministic attestation of a receipt.

The goldens (tests/golden/get_computation, tests/golden/check_receipt) pin the wire shapes on
testdata/bundles/computations; these tests pin the rules underneath, on small bundles written
here, and the properties the goldens cannot show (a rewritten query never attests, a computation
file's edits reach the next call, a symlinked computation file is never read).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bundle_mcp.dispatch import Dispatcher, ServeConfig
from bundle_mcp.loader import load_bundle
from bundle_mcp.okf.attestation import first_cell, same_value
from bundle_mcp.okf.computations import (
    ComputationUnavailable,
    computation_text,
    contract_of,
    freshness,
    inline_blocks,
)
from bundle_mcp.okf.field_paths import BUNDLE, SCOPE, URL, path_fields, resolve_field_path
from bundle_mcp.okf.sql import PARAM, bind_variables, compare, tokenize
from bundle_mcp.okf.temporal import DATE_PROFILE, INSTANT_PROFILE, Reference, parse_value


def write(root: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        target = root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    return root


def computation(body: str = "", **frontmatter: str) -> str:
    lines = ["---", "type: Attested Computation", "runtime: bigquery",
             "parameters:", "  - { name: year, type: integer, required: true }",
             "executor:", "  resource: /skills/run.md", "  receipt: [job_id, executed_sql, result]"]
    lines += [f"{k}: {v}" for k, v in frontmatter.items()]
    return "\n".join([*lines, "---", "", body])


SQL = "SELECT SUM(amount) AS revenue\nFROM sales.orders\nWHERE fiscal_year = @year\n"
INLINE = f"# Computation\n\n```sql\n{SQL}```\n"


def call(root: Path, tool: str, **arguments: Any) -> tuple[bool, dict[str, Any]]:
    outcome = Dispatcher(ServeConfig(bundles=(str(root),))).call(tool, arguments)
    return outcome.is_error, outcome.structured


# -------------------------------------------------------------------- path-valued fields


def test_a_field_path_is_read_relative_to_its_file_and_the_root_reading_is_only_named(
    tmp_path: Path,
) -> None:
    write(tmp_path, {"skills/run.md": "---\ntype: Skill\n---\n", "c/a.md": "---\ntype: X\n---\n",
                     "c/lib/q.sql": "SELECT 1\n"})
    snapshot, _ = load_bundle(str(tmp_path))
    relative = resolve_field_path(snapshot, "c/a.md", "skills/run.md")
    assert (relative.kind, relative.path, relative.exists) == (BUNDLE, "c/skills/run.md", False)
    assert relative.root_reading == "/skills/run.md"
    rooted = resolve_field_path(snapshot, "c/a.md", "/skills/run.md")
    assert (rooted.path, rooted.exists, rooted.root_reading) == ("skills/run.md", True, None)
    assert rooted.concept_id == "skills/run"
    up = resolve_field_path(snapshot, "c/a.md", "../skills/run.md")
    assert (up.path, up.exists) == ("skills/run.md", True)
    asset = resolve_field_path(snapshot, "c/a.md", "lib/q.sql")
    assert (asset.path, asset.exists, asset.concept_id) == ("c/lib/q.sql", True, None)
    above = resolve_field_path(snapshot, "c/a.md", "../../etc/passwd")
    assert (above.kind, above.path, above.exists) == (BUNDLE, None, False)


@pytest.mark.parametrize(
    ("raw", "kind"),
    [("https://wiki.example/x", URL), ("s3://bucket/key", URL), ("//host/x", URL),
     ("mailto:someone@example.org", URL)],
)
def test_urls_are_never_looked_up(tmp_path: Path, raw: str, kind: str) -> None:
    write(tmp_path, {"a.md": "---\ntype: X\n---\n"})
    snapshot, _ = load_bundle(str(tmp_path))
    found = resolve_field_path(snapshot, "a.md", raw)
    assert (found.kind, found.path, found.exists) == (kind, None, None)


def test_only_a_source_may_be_a_scope_descriptor(tmp_path: Path) -> None:
    write(tmp_path, {"a.md": "---\ntype: X\n---\n"})
    snapshot, _ = load_bundle(str(tmp_path))
    scope = "all queries in BigQuery project acme-prod"
    assert resolve_field_path(snapshot, "a.md", scope, may_be_scope=True).kind == SCOPE
    assert resolve_field_path(snapshot, "a.md", scope).kind == BUNDLE
    assert resolve_field_path(snapshot, "a.md", "./with space.md", may_be_scope=True).kind == BUNDLE


def test_path_fields_lists_every_field_in_order_and_contract_keys_only_on_computations(
    tmp_path: Path,
) -> None:
    other = ("---\ntype: Metric\nresource: /t.md\nexecutor: { resource: x.md }\n"
             "sources:\n  - { resource: https://a.example }\n  - { id: b }\n"
             "  - { resource: y.md }\n---\n")
    write(tmp_path, {"m.md": other, "c.md": computation(INLINE, computation="q.sql",
                                                         attester="{ resource: att.py }")})
    snapshot, _ = load_bundle(str(tmp_path))
    found = [(f.field, f.location) for f in path_fields(snapshot, snapshot.concepts["m"])]
    assert found == [("resource", "resource"), ("sources[].resource", "sources[0].resource"),
                     ("sources[].resource", "sources[2].resource")]
    fields = [f.location for f in path_fields(snapshot, snapshot.concepts["c"])]
    assert fields == ["computation", "executor.resource", "attester.resource"]


# -------------------------------------------------------------------- the computation text


def test_the_inline_computation_is_the_one_code_block_under_computation(tmp_path: Path) -> None:
    indented = ("# Computation\n\n    SELECT 1\n    FROM t\n\nProse after.\n\n"
                "# Notes\n\n```\nx\n```\n")
    write(tmp_path, {"fenced.md": computation(INLINE), "indented.md": computation(indented)})
    snapshot, _ = load_bundle(str(tmp_path))
    for name, text, language in (("fenced", SQL, "sql"), ("indented", "SELECT 1\nFROM t\n", "")):
        doc = snapshot.concepts[name]
        found = computation_text(snapshot, doc, contract_of(snapshot, doc))
        assert (found.text, found.source, found.language) == (text, "inline", language)
        assert doc.lines[found.line_start - 1].strip() in ("```sql", "SELECT 1")


@pytest.mark.parametrize(
    ("body", "extra", "code"),
    [
        ("# Notes\n\nNothing yet.\n", {}, "computation_missing"),
        ("# Computation\n\nProse only.\n", {}, "computation_missing"),
        ("# Computation\n\n```\na\n```\n\n```\nb\n```\n", {}, "computation_ambiguous"),
        ("# Computation\n\n```\na\n```\n\n# Computation\n\n```\nb\n```\n", {},
         "computation_ambiguous"),
        (INLINE, {"computation": "q.sql"}, "computation_ambiguous"),
        ("", {"computation": "missing.sql"}, "computation_missing"),
        ("", {"computation": "https://example.org/q.sql"}, "computation_not_in_bundle"),
        ("", {"computation": "../../q.sql"}, "computation_not_in_bundle"),
    ],
    ids=["no-section", "no-block", "two-blocks", "two-sections", "block-and-file", "no-file",
         "url", "above-root"],
)
def test_a_computation_that_cannot_be_determined_is_never_guessed(
    tmp_path: Path, body: str, extra: dict[str, str], code: str
) -> None:
    write(tmp_path, {"c.md": computation(body, **extra), "q.sql": "SELECT 1\n"})
    snapshot, _ = load_bundle(str(tmp_path))
    doc = snapshot.concepts["c"]
    with pytest.raises(ComputationUnavailable) as caught:
        computation_text(snapshot, doc, contract_of(snapshot, doc))
    assert caught.value.code == code
    is_error, result = call(tmp_path, "get_computation", concept_id="c")
    assert is_error
    assert result["diagnostics"][0]["code"] == code


def test_a_computation_file_is_read_into_the_snapshot_and_its_edits_reach_the_next_call(
    tmp_path: Path,
) -> None:
    write(tmp_path, {"c/a.md": computation("", computation="lib/q.sql"),
                     "c/lib/q.sql": SQL})
    dispatcher = Dispatcher(ServeConfig(bundles=(str(tmp_path),)))
    first = dispatcher.call("get_computation", {"concept_id": "c/a"}).structured
    assert first["computation"]["text"] == SQL
    assert first["computation"]["field"]["path"] == "c/lib/q.sql"
    (tmp_path / "c/lib/q.sql").write_text(SQL.replace("amount", "net_amount"), encoding="utf-8")
    second = dispatcher.call("get_computation", {"concept_id": "c/a"}).structured
    assert "net_amount" in second["computation"]["text"]
    assert second["snapshot_revision"] != first["snapshot_revision"]


def test_a_symlinked_computation_file_is_never_read(tmp_path: Path) -> None:
    bundle = write(tmp_path / "b", {"a.md": computation("", computation="q.sql")})
    secret = tmp_path / "secret.sql"
    secret.write_text("SELECT password FROM users\n", encoding="utf-8")
    os.symlink(secret, bundle / "q.sql")
    is_error, result = call(bundle, "get_computation", concept_id="a")
    assert is_error
    assert "password" not in str(result)


def test_a_computation_file_that_is_not_utf8_is_a_clear_error(tmp_path: Path) -> None:
    write(tmp_path, {"a.md": computation("", computation="q.sql")})
    (tmp_path / "q.sql").write_bytes(b"SELECT '\xff'\n")
    is_error, result = call(tmp_path, "get_computation", concept_id="a")
    assert is_error and result["code"] == "operation_rejected"
    assert result["diagnostics"][0]["code"] == "computation_unreadable"


def test_an_oversized_computation_is_a_resource_limit(tmp_path: Path) -> None:
    write(tmp_path, {"a.md": computation("", computation="q.sql")})
    (tmp_path / "q.sql").write_text("-- x\n" * 300_000, encoding="utf-8")
    is_error, result = call(tmp_path, "get_computation", concept_id="a")
    assert is_error and result["code"] == "resource_limit"


def test_inline_blocks_ignore_code_outside_the_section(tmp_path: Path) -> None:
    body = "```\nbefore\n```\n\n# Computation\n\n```\nthe one\n```\n\n# After\n\n```\nno\n```\n"
    write(tmp_path, {"c.md": computation(body)})
    snapshot, _ = load_bundle(str(tmp_path))
    found = inline_blocks(snapshot.concepts["c"])
    assert (found.sections, [b[3] for b in found.blocks]) == (1, ["the one\n"])


# -------------------------------------------------------------------- freshness


@pytest.mark.parametrize(
    ("stale_after", "as_of", "profile", "gate"),
    [
        ("2026-12-31", "2026-10-01", DATE_PROFILE, "ok"),
        ("2026-12-31", "2026-12-01", DATE_PROFILE, "warn"),
        ("2026-12-31", "2026-12-31", DATE_PROFILE, "refuse"),
        ("2026-12-31T00:00:00Z", "2026-12-30T23:59:59Z", INSTANT_PROFILE, "warn"),
        ("2026-12-31T00:00:00Z", "2026-12-31T00:00:00Z", INSTANT_PROFILE, "refuse"),
        ("2026-12-31", None, DATE_PROFILE, "unknown"),
        (None, "2026-10-01", DATE_PROFILE, "ok"),
        # A date and an instant compare; a date is its whole UTC day (issue 25 item 7).
        ("2026-12-31T00:00:00Z", "2026-10-01", DATE_PROFILE, "ok"),
        ("2026-12-31T00:00:00Z", "2026-12-03", DATE_PROFILE, "warn"),  # 28 days: near
        ("2026-12-31T00:00:00Z", "2026-12-30", DATE_PROFILE, "warn"),  # the day ends at it
        ("2026-12-31T00:00:00Z", "2026-12-31", DATE_PROFILE, "refuse"),  # the day starts at it
        ("2026-12-31T12:00:00Z", "2026-12-31", DATE_PROFILE, "warn"),  # inside: undecidable
        ("2026-12-31T00:00:00+01:00", "2026-12-30", DATE_PROFILE, "warn"),  # 23:00Z inside
        ("2026-12-30T23:59:59Z", "2026-12-31", DATE_PROFILE, "refuse"),
        ("2026-12-31", "2026-10-01T00:00:00Z", INSTANT_PROFILE, "ok"),
        ("2026-12-31", "2026-12-30T23:59:59Z", INSTANT_PROFILE, "warn"),
        ("2026-12-31", "2026-12-31T08:00:00Z", INSTANT_PROFILE, "warn"),  # undecidable
        ("2026-12-31", "2027-01-01T00:00:00Z", INSTANT_PROFILE, "refuse"),
        # Neither a date nor an instant: the server cannot decide, which is never a refusal.
        ("soon", "2026-10-01", DATE_PROFILE, "warn"),
    ],
)
def test_the_freshness_gate(
    stale_after: str | None, as_of: str | None, profile: str, gate: str
) -> None:
    fm = {} if stale_after is None else {"stale_after": stale_after}
    ref = Reference(profile, as_of, parse_value(as_of, profile) if as_of else None)
    assert freshness(fm, ref)["gate"] == gate


@pytest.mark.parametrize(("stale_after", "as_of", "profile", "days_left"), [
    ("2026-12-31T00:00:00Z", "2026-12-03", DATE_PROFILE, 28),
    ("2026-12-31T00:00:00Z", "2026-12-31", DATE_PROFILE, 0),
    ("2026-12-30T23:59:59Z", "2026-12-31", DATE_PROFILE, -1),
    ("2026-12-31", "2026-12-03T12:00:00Z", INSTANT_PROFILE, 27),
    ("2026-12-31T12:00:00Z", "2026-12-31", DATE_PROFILE, None),  # undecidable: not judged
])
def test_days_left_across_a_date_and_an_instant(
    stale_after: str, as_of: str, profile: str, days_left: int | None
) -> None:
    ref = Reference(profile, as_of, parse_value(as_of, profile))
    assert freshness({"stale_after": stale_after}, ref)["days_left"] == days_left


def test_an_undecidable_freshness_says_so_and_how_to_decide() -> None:
    ref = Reference(DATE_PROFILE, "2026-12-31", parse_value("2026-12-31", DATE_PROFILE))
    gate = freshness({"stale_after": "2026-12-31T12:00:00Z"}, ref)
    assert "cannot be decided" in gate["detail"]
    assert "instant-0b87c52" in gate["detail"]


SAMPLE_AC = """---
type: Attested Computation
title: Revenue for a fiscal year
runtime: bigquery
parameters:
  - { name: year, type: integer, required: true }
executor:
  resource: /run.md
  receipt: [job_id, executed_sql, result]
attester:
  resource: /check.py
stale_after: STALE_AFTER
---

# Computation

```sql
SELECT SUM(net_amount) AS revenue_usd
FROM `shop.sales.orders`
WHERE EXTRACT(YEAR FROM order_ts) = @year
```
"""


@pytest.mark.parametrize(("stale_after", "as_of", "gate"), [
    ("2026-12-31T00:00:00Z", "2026-12-03", "warn"),  # the official sample's case: 28 days
    ("2027-06-30T00:00:00Z", "2026-12-03", "ok"),
    ("2026-12-03T15:00:00Z", "2026-12-03", "warn"),  # undecidable on the as_of day
    ("not a date", "2026-12-03", "warn"),
])
def test_an_honest_receipt_is_not_failed_by_a_freshness_of_another_kind(
    tmp_path: Path, stale_after: str, as_of: str, gate: str
) -> None:
    """Issue 25 item 7: an instant stale_after and a date as_of (the default profile) compare;
    what cannot be decided is a warn, and the correct receipt attests."""
    write(tmp_path, {"c/rev.md": SAMPLE_AC.replace("STALE_AFTER", stale_after),
                     "run.md": "---\ntype: Skill\n---\n", "check.py": "pass\n"})
    executed = SAMPLE_AC.split("```sql\n", 1)[1].split("```", 1)[0]
    is_error, result = call(tmp_path, "check_receipt", concept_id="c/rev",
                            parameters={"year": 2026},
                            receipt={"job_id": "j1", "executed_sql": executed,
                                     "result": [[1250000.25]]},
                            displayed_value=1250000.25, as_of=as_of)
    assert not is_error, result
    assert result["freshness"]["gate"] == gate
    assert result["verdict"] == "attested", result["reasons"]
    freshness_check = result["checks"][-1]
    assert freshness_check["check"] == "freshness" and freshness_check["ok"] is True
    if gate == "warn":
        assert result["reasons"] == [f"freshness: {result['freshness']['detail']}"]


def test_a_stale_computation_still_fails_across_kinds(tmp_path: Path) -> None:
    write(tmp_path, {"c/rev.md": SAMPLE_AC.replace("STALE_AFTER", "2026-12-02T23:00:00-05:00"),
                     "run.md": "---\ntype: Skill\n---\n", "check.py": "pass\n"})
    executed = SAMPLE_AC.split("```sql\n", 1)[1].split("```", 1)[0]
    _, result = call(tmp_path, "check_receipt", concept_id="c/rev", parameters={"year": 2026},
                     receipt={"job_id": "j1", "executed_sql": executed, "result": [[1]]},
                     displayed_value=1, as_of="2026-12-04")
    assert result["freshness"]["gate"] == "refuse"
    assert result["verdict"] == "failed"


# -------------------------------------------------------------------- SQL canonicalisation


def test_canonicalisation_drops_comments_space_keyword_case_and_a_trailing_semicolon() -> None:
    executed = "select  sum(amount) as revenue -- total\n/* c */ from sales.orders\n" \
               "where fiscal_year = @year ;"
    assert compare(SQL, executed, "bigquery", ["year"]).equal


@pytest.mark.parametrize(
    ("runtime", "spelling"),
    [("bigquery", "?"), ("postgres", "$1"), ("postgres", ":year"), ("sqlite", "?1"),
     ("snowflake", ":1"), ("duckdb", "$year")],
)
def test_bind_variables_compare_by_the_parameter_they_bind(runtime: str, spelling: str) -> None:
    assert compare(SQL, SQL.replace("@year", spelling), runtime, ["year"]).equal


def test_strings_and_quoted_names_are_kept_exactly() -> None:
    sanctioned = "SELECT 1 FROM `Shop.Orders` WHERE status = 'Shipped'"
    assert not compare(sanctioned, sanctioned.replace("'Shipped'", "'shipped'"), "bigquery",
                       []).equal
    assert not compare(sanctioned, sanctioned.replace("`Shop.Orders`", "`shop.orders`"),
                       "bigquery", []).equal
    assert compare(sanctioned, sanctioned.replace("SELECT", "select"), "bigquery", []).equal


def test_comment_markers_inside_strings_are_text() -> None:
    tokens = tokenize("SELECT '-- not a comment', \"# nor this\" FROM t", "bigquery", [])
    assert [t.text for t in tokens][:4] == ["SELECT", "'-- not a comment'", ",",
                                            '"# nor this"']


def test_a_postgres_cast_is_not_a_bind_variable() -> None:
    assert bind_variables("SELECT a::int FROM t WHERE b = :b", "postgres", ("b",)) == ("b",)


def test_a_substituted_literal_is_named() -> None:
    result = compare(SQL, SQL.replace("@year", "2025"), "bigquery", ["year"], {"year": 2025})
    assert not result.equal
    assert result.substituted == ("year",)
    assert "(the supplied value)" in result.detail


def test_bind_variables_map_positions_to_declared_names() -> None:
    assert bind_variables("SELECT ? , ?", "sqlite", ("a", "b")) == ("a", "b")
    assert bind_variables("SELECT $2, $1", "postgres", ("a", "b")) == ("b", "a")
    assert bind_variables("SELECT ?, ?, ?", "mysql", ("a",)) == ("a", "?2", "?3")
    assert bind_variables("{{ var('x') }}", "dbt", ("x",)) is None


_WORDS = st.sampled_from(["SELECT", "sum", "(", ")", "amount", "FROM", "t", "WHERE", "x", "=",
                          "@year", "'a'", "1", ",", "AND", "OR", "-", "b"])


@settings(max_examples=200, deadline=None)
@given(st.lists(_WORDS, min_size=1, max_size=20), st.lists(_WORDS, min_size=1, max_size=20))
def test_texts_attest_only_when_their_token_streams_are_equal(
    a: list[str], b: list[str]
) -> None:
    """Equality after canonicalisation is symmetric, and a different stream never compares
    equal: a rewritten query never attests."""
    left, right = " ".join(a), " ".join(b)
    forward = compare(left, right, "bigquery", ["year"])
    assert forward.equal == compare(right, left, "bigquery", ["year"]).equal
    same = [(t.kind, t.text) for t in tokenize(left, "bigquery", ["year"])] == [
        (t.kind, t.text) for t in tokenize(right, "bigquery", ["year"])]
    assert forward.equal == same
    if not same:
        assert forward.detail


def test_params_are_their_own_kind() -> None:
    assert [t.kind for t in tokenize("@year", "bigquery", ["year"])] == [PARAM]


# -------------------------------------------------------------------- receipt values


@pytest.mark.parametrize(
    ("value", "cell"),
    [([[1]], (True, 1)), ([{"revenue": "2.50"}], (True, "2.50")), ({"rows": [[3]]}, (True, 3)),
     (7, (True, 7)), ([], (False, None)), ({}, (False, None))],
)
def test_first_cell(value: Any, cell: tuple[bool, Any]) -> None:
    assert first_cell(value) == cell


@pytest.mark.parametrize(
    ("displayed", "cell", "same"),
    [(1234.5, "1234.50", True), ("1234.5", 1234.5, True), (1, True, False), (True, True, True),
     ("EU", "EU", True), ("EU", "eu", False), (None, None, True), (0.1 + 0.2, 0.3, False),
     ("NaN", "NaN", True)],
)
def test_values_compare_by_number_when_both_are_numbers(
    displayed: Any, cell: Any, same: bool
) -> None:
    assert same_value(displayed, cell) is same


# -------------------------------------------------------------------- through the dispatcher


def test_read_concept_points_to_the_computations_a_concept_uses(tmp_path: Path) -> None:
    write(tmp_path, {"c/rev.md": computation(INLINE, title="Revenue"),
                     "m.md": "---\ntype: Metric\n---\nSee [it](c/rev.md) and [x](other.md).\n",
                     "other.md": "---\ntype: Note\n---\n"})
    _, result = call(tmp_path, "read_concept", concept_id="m")
    assert result["uses_computations"] == [{"id": "c/rev", "title": "Revenue",
                                            "runtime": "bigquery"}]
    _, plain = call(tmp_path, "read_concept", concept_id="other")
    assert "uses_computations" not in plain
    _, got = call(tmp_path, "get_computation", concept_id="c/rev")
    assert [u["id"] for u in got["used_by"]] == ["m"]


def test_check_receipt_never_runs_the_attester(tmp_path: Path) -> None:
    """The attester is code in the bundle; the server names it and leaves it alone."""
    marker = tmp_path / "ran"
    write(tmp_path, {"a.md": computation(INLINE, runtime_note="x",
                                         attester="{ resource: att.py }").replace(
                         "runtime: bigquery", "runtime: python"),
                     "att.py": f"open({str(marker)!r}, 'w').write('ran')\n"})
    is_error, result = call(tmp_path, "check_receipt", concept_id="a",
                            parameters={"year": 2025},
                            receipt={"job_id": "1", "executed_sql": SQL, "result": [[1]]},
                            displayed_value=1, as_of="2026-01-01")
    assert not is_error
    assert result["verdict"] == "unattested"
    assert result["attester_resource"]["path"] == "att.py"
    assert not marker.exists()
